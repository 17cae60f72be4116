//! Each app's connector against its fake in `fluxo sandbox` (issue 35), over real HTTP: a
//! create; the same event twice → one record; a timeout after the write, then the step's retry
//! → one record; the app's duplicate answer → success with the existing id, no retry; a 429
//! with `Retry-After` → paced on the engine's clock, inside the run deadline.

mod common;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use common::{compile, step, Harness};
use fluxo::clock::Clock;
use fluxo::connections::{Connection, ConnectionStore, Credential, MemConnections};
use fluxo::run::RunStatus;
use fluxo::sandbox::{Sandbox, SandboxConfig, SandboxHandle};

async fn sandbox() -> SandboxHandle {
    let config = SandboxConfig {
        hold: Duration::from_secs(3),
        ..SandboxConfig::default()
    };
    Sandbox::start_with("127.0.0.1:0".parse().unwrap(), config)
        .await
        .unwrap()
}

/// An engine with one connection per app, pointed at the sandbox's fakes (static tokens).
fn harness(sandbox: &str) -> Harness {
    let h = Harness::new();
    let store = MemConnections::default();
    for (app, path, token) in [
        ("hubspot", "hubspot", "pat-sandbox-fluxo"),
        ("stripe", "stripe", "sk_test_sandbox_fluxo"),
        ("slack", "slack", "xoxb-sandbox-fluxo"),
        ("google_sheets", "sheets", "ya29.sandbox-fluxo"),
    ] {
        store
            .put(Connection {
                id: app.into(),
                app: app.into(),
                name: app.into(),
                credential: Credential::Bearer {
                    token: token.into(),
                },
                base_url: Some(format!("{sandbox}/{path}")),
                values: Default::default(),
            })
            .unwrap();
    }
    h.engine.set_connections(Arc::new(store));
    h
}

fn workflow(config: Value) -> Value {
    json!({
        "id": "app", "name": "app", "version": 1,
        "steps": [
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "act", "kind": "action", "config": config}
        ],
        "edges": [{"from": "start", "to": "act"}]
    })
}

async fn records(sandbox: &str, app: &str) -> Value {
    reqwest::get(format!("{sandbox}/_sandbox/vendors/{app}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn fault(sandbox: &str, route: &str, fault: &str) {
    let r = reqwest::Client::new()
        .post(format!("{sandbox}/_sandbox/faults"))
        .json(&json!({"route": route, "fault": fault, "times": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
}

/// The Slack fake's channel `name`, with its messages.
async fn channel(sandbox: &str, name: &str) -> Value {
    let slack = records(sandbox, "slack").await;
    slack["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .cloned()
        .unwrap()
}

fn output(run: &fluxo::run::RunRecord) -> Value {
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    step(run, "act").output.clone().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hubspot_one_contact_whatever_repeats_and_faults() {
    let sb = sandbox().await;
    let url = sb.url();
    let h = harness(&url);
    let create = compile(&workflow(json!({
        "connector": "hubspot", "operation": "create_contact", "connection": "hubspot",
        "params": {"email": "{{ input.email }}", "firstname": "Ada"},
        "timeout_s": 0.5, "retries": 2, "retry_base_delay_ms": 10
    })));
    let first = output(&h.run(&create, json!({"email": "ada@example.com"})).await);
    assert_eq!(first["existing"], false);
    let id = first["id"].as_str().unwrap().to_string();
    // The same event again: HubSpot's 409 is the existing contact, never a retry.
    let again = output(&h.run(&create, json!({"email": "ada@example.com"})).await);
    assert_eq!(
        (again["existing"].clone(), again["id"].clone()),
        (json!(true), json!(id))
    );
    assert_eq!(again["attempts"], 1);

    // HubSpot writes, then its answer never comes: the retry meets the 409.
    fault(
        &url,
        "POST /hubspot/crm/v3/objects/contacts",
        "timeout_after_write",
    )
    .await;
    let late = output(&h.run(&create, json!({"email": "grace@example.com"})).await);
    assert_eq!(late["existing"], true, "{late}");
    assert_eq!(late["attempts"], 2);

    // 429 with Retry-After: waited on the engine's clock, then created.
    fault(
        &url,
        "POST /hubspot/crm/v3/objects/contacts",
        "rate_limit_429:2",
    )
    .await;
    let t0 = h.clock.now_ms();
    let paced = output(&h.run(&create, json!({"email": "linus@example.com"})).await);
    assert_eq!(paced["existing"], false);
    assert!(h.clock.now_ms() - t0 >= 2000, "Retry-After was honoured");

    // The upsert by email: the same contact, updated.
    let upsert = compile(&workflow(json!({
        "connector": "hubspot", "operation": "upsert_contact", "connection": "hubspot",
        "params": {"email": "ada@example.com", "lastname": "Lovelace"}
    })));
    let up = output(&h.run(&upsert, json!({})).await);
    assert_eq!(up["id"], json!(id), "{up}");
    let contacts = records(&url, "hubspot").await["contacts"].clone();
    assert_eq!(contacts.as_array().unwrap().len(), 3, "{contacts}");
    sb.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripe_one_customer_per_idempotency_key() {
    let sb = sandbox().await;
    let url = sb.url();
    let h = harness(&url);
    let create = compile(&workflow(json!({
        "connector": "stripe", "operation": "create_customer", "connection": "stripe",
        "params": {"email": "{{ input.email }}", "metadata": {"invoice": "{{ input.id }}"}},
        "idempotency_key": "customer-{{ input.id }}",
        "timeout_s": 0.5, "retries": 2, "retry_base_delay_ms": 10
    })));
    let first = output(
        &h.run(&create, json!({"id": "in_1", "email": "ada@example.com"}))
            .await,
    );
    let id = first["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("cus_"), "{first}");
    // The same event again: Stripe replays the first answer.
    let again = output(
        &h.run(&create, json!({"id": "in_1", "email": "ada@example.com"}))
            .await,
    );
    assert_eq!(again["id"], json!(id));
    // Stripe writes, its answer is lost, the keyed retry gets the stored answer.
    fault(&url, "POST /stripe/v1/customers", "timeout_after_write").await;
    let late = output(
        &h.run(&create, json!({"id": "in_2", "email": "grace@example.com"}))
            .await,
    );
    assert_eq!(late["attempts"], 2, "{late}");
    let customers = records(&url, "stripe").await["customers"].clone();
    let n = customers
        .as_array()
        .map(Vec::len)
        .or_else(|| customers.as_object().map(|m| m.len()))
        .unwrap();
    assert_eq!(n, 2, "{customers}");
    // The form encoding kept the nested metadata.
    assert!(customers.to_string().contains("in_1"), "{customers}");

    // A key longer than Stripe takes is refused before anything is sent.
    let long = compile(&workflow(json!({
        "connector": "stripe", "operation": "create_customer", "connection": "stripe",
        "params": {"email": "x@example.com"}, "idempotency_key": "k".repeat(256)
    })));
    let run = h.run(&long, json!({})).await;
    assert_eq!(
        step(&run, "act").error.as_ref().unwrap().code,
        "invalid_idempotency_key"
    );
    sb.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn google_sheets_one_row_per_key_though_append_duplicates() {
    let sb = sandbox().await;
    let url = sb.url();
    let h = harness(&url);
    let append = compile(&workflow(json!({
        "connector": "google_sheets", "operation": "append_row", "connection": "google_sheets",
        "params": {"spreadsheet_id": "book1", "key": "{{ input.id }}", "values": ["{{ input.amount }}"]},
        "timeout_s": 0.5, "retries": 2, "retry_base_delay_ms": 10
    })));
    let first = output(&h.run(&append, json!({"id": "in_1", "amount": 10})).await);
    assert_eq!(first["existing"], false, "{first}");
    let again = output(&h.run(&append, json!({"id": "in_1", "amount": 10})).await);
    assert_eq!(again["existing"], true, "{again}");
    // The append is written but its answer lost: the step's retry looks first.
    fault(
        &url,
        "POST /sheets/v4/spreadsheets/book1/values/Sheet1:append",
        "timeout_after_write",
    )
    .await;
    let late = output(&h.run(&append, json!({"id": "in_2", "amount": 20})).await);
    assert_eq!(
        late["existing"], true,
        "the retry looked first and found the row: {late}"
    );
    let book = records(&url, "sheets").await;
    let rows = book
        .pointer("/spreadsheets/book1/sheets/Sheet1")
        .cloned()
        .unwrap_or(Value::Null);
    assert!(rows.is_array(), "{book}");
    let keys: Vec<String> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[0].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(keys, ["in_1", "in_2"], "{book}");
    // A redelivery finds the row the lost answer wrote.
    let redelivered = output(&h.run(&append, json!({"id": "in_2", "amount": 20})).await);
    assert_eq!(redelivered["existing"], true);
    sb.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_a_repeat_updates_the_message_it_posted() {
    let sb = sandbox().await;
    let url = sb.url();
    let h = harness(&url);
    let post = compile(&workflow(json!({
        "connector": "slack", "operation": "post_message", "connection": "slack",
        "params": {"channel": "alerts", "text": "invoice {{ input.id }}: {{ input.state }}"},
        "idempotency_key": "{{ input.id }}"
    })));
    output(&h.run(&post, json!({"id": "in_1", "state": "paid"})).await);
    output(
        &h.run(&post, json!({"id": "in_1", "state": "paid (again)"}))
            .await,
    );
    let alerts = channel(&url, "alerts").await;
    let messages = alerts["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 1, "{alerts}");
    assert!(messages[0].to_string().contains("paid (again)"), "{alerts}");

    // Slack posts, then its answer never comes: the retry finds the message by the key in its
    // metadata and keeps its ts; no second post.
    let retried = compile(&workflow(json!({
        "connector": "slack", "operation": "post_message", "connection": "slack",
        "params": {"channel": "alerts", "text": "invoice {{ input.id }}: {{ input.state }}"},
        "idempotency_key": "{{ input.id }}",
        "timeout_s": 0.5, "retries": 2, "retry_base_delay_ms": 10
    })));
    fault(
        &url,
        "POST /slack/api/chat.postMessage",
        "timeout_after_write",
    )
    .await;
    let late = output(
        &h.run(&retried, json!({"id": "in_2", "state": "paid"}))
            .await,
    );
    assert_eq!(late["existing"], true, "{late}");
    // With no retries the step fails; the redelivery finds the message instead of posting.
    let once = compile(&workflow(json!({
        "connector": "slack", "operation": "post_message", "connection": "slack",
        "params": {"channel": "alerts", "text": "invoice {{ input.id }}: {{ input.state }}"},
        "idempotency_key": "{{ input.id }}", "timeout_s": 0.5, "retries": 0
    })));
    fault(
        &url,
        "POST /slack/api/chat.postMessage",
        "timeout_after_write",
    )
    .await;
    let lost = h.run(&once, json!({"id": "in_3", "state": "paid"})).await;
    assert_eq!(lost.status, RunStatus::Failed);
    let found = output(&h.run(&once, json!({"id": "in_3", "state": "paid"})).await);
    assert_eq!(found["existing"], true, "{found}");
    // The found ts is kept: the next repeat updates that message.
    output(
        &h.run(&once, json!({"id": "in_3", "state": "refunded"}))
            .await,
    );
    let alerts = channel(&url, "alerts").await;
    let messages = alerts["messages"].as_array().unwrap();
    let texts: Vec<&str> = messages
        .iter()
        .map(|m| m["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        [
            "invoice in_1: paid (again)",
            "invoice in_2: paid",
            "invoice in_3: refunded"
        ],
        "{alerts}"
    );
    sb.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_desktops_sandbox_lends_a_connection_nobody_added_to_its_apps_fake() {
    let sb = sandbox().await;
    let url = sb.url();
    let h = Harness::new();
    let mine = Arc::new(MemConnections::default());
    mine.put(Connection {
        id: "stripe-live".into(),
        app: "stripe".into(),
        name: "Stripe".into(),
        credential: Credential::Bearer {
            token: "sk_test_sandbox_mine".into(),
        },
        base_url: Some(format!("{url}/stripe")),
        values: Default::default(),
    })
    .unwrap();
    let layered = fluxo::sandbox::vendors::SandboxFallback::new(mine.clone(), url.clone());
    h.engine.set_connections(Arc::new(layered));
    // Nobody added `hubspot-main`: the run goes to the sandbox's HubSpot.
    let create = compile(&workflow(json!({
        "connector": "hubspot", "operation": "create_contact", "connection": "hubspot-main",
        "params": {"email": "{{ input.email }}"}
    })));
    let out = output(&h.run(&create, json!({"email": "ada@example.com"})).await);
    assert_eq!(out["existing"], false);
    assert_eq!(
        records(&url, "hubspot").await["contacts"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // Settings lists and edits only what a person added.
    let store = h.engine.connections();
    let ids: Vec<String> = store.list().unwrap().into_iter().map(|c| c.id).collect();
    assert_eq!(ids, ["stripe-live"]);
    assert!(store.get("hubspot-main").unwrap().is_none());
    assert!(!store.remove("hubspot-main").unwrap());
    // A connection that exists wins over the fallback: a wrong app is still a mismatch.
    let wrong = compile(&workflow(json!({
        "connector": "hubspot", "operation": "create_contact", "connection": "stripe-live",
        "params": {"email": "grace@example.com"}
    })));
    let run = h.run(&wrong, json!({})).await;
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(
        step(&run, "act").error.as_ref().unwrap().code,
        "connection_mismatch"
    );
    sb.shutdown().await;
}

/// Each app's 429 with `Retry-After`: the step waits on the engine's clock and the write
/// happens once; a `Retry-After` past the run deadline ends the step at once, written nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_apps_429_is_honoured_on_the_engine_clock_inside_the_run_deadline() {
    let cases = [
        (
            "stripe",
            json!({"connector": "stripe", "operation": "create_customer", "connection": "stripe",
                   "params": {"email": "{{ input.id }}@example.com"}, "idempotency_key": "{{ input.id }}"}),
            "POST /stripe/v1/customers",
        ),
        (
            "slack",
            json!({"connector": "slack", "operation": "post_message", "connection": "slack",
                   "params": {"channel": "alerts", "text": "{{ input.id }}"}, "idempotency_key": "{{ input.id }}"}),
            "POST /slack/api/chat.postMessage",
        ),
        (
            "sheets",
            json!({"connector": "google_sheets", "operation": "append_row", "connection": "google_sheets",
                   "params": {"spreadsheet_id": "book", "key": "{{ input.id }}", "values": ["x"]}}),
            "POST /sheets/v4/spreadsheets/book/values/Sheet1:append",
        ),
    ];
    for (app, config, route) in cases {
        let sb = sandbox().await;
        let url = sb.url();
        let h = harness(&url);
        let wf = compile(&workflow(config.clone()));
        fault(&url, route, "rate_limit_429:2").await;
        let t0 = h.clock.now_ms();
        let out = output(&h.run(&wf, json!({"id": "in_1"})).await);
        assert_eq!(out["existing"], false, "{app}: {out}");
        assert!(
            h.clock.now_ms() - t0 >= 2000,
            "{app}: Retry-After was honoured on the engine's clock"
        );
        let counts = sb.state().vendor_counts();
        assert_eq!(counts.values().sum::<usize>(), 1, "{app}: {counts:?}");

        // The app asks for 2 s; the run has 1 s: no wait past the deadline, nothing written.
        let mut short = workflow(config);
        short["settings"] = json!({"run_timeout_s": 1});
        let short = compile(&short);
        // Past the app's pacing (Slack: one a second), so the 429 is what meets the deadline.
        h.clock.advance(Duration::from_secs(5));
        fault(&url, route, "rate_limit_429:2").await;
        let run = h.run(&short, json!({"id": "in_2"})).await;
        assert_ne!(run.status, RunStatus::Succeeded, "{app}");
        let e = step(&run, "act").error.clone().unwrap();
        assert_eq!(run.status, RunStatus::TimedOut, "{app}: {e:?}");
        assert_eq!(e.http_status, Some(429), "{app}: {e:?}");
        assert_eq!(
            sb.state().vendor_counts(),
            counts,
            "{app}: nothing more written"
        );
        sb.shutdown().await;
    }
}
