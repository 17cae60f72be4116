//! The `action` step over real HTTP (issue 35): each write's dedupe strategy as the step
//! applies it. The destination here is a small stand-in with HubSpot's and Slack's duplicate
//! behaviour (a 409 naming the existing contact; `ok: false` answered 200).

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use axum::extract::Request;
use axum::response::IntoResponse;
use serde_json::{json, Value};

use common::{compile, step, Harness};
use fluxo::clock::Clock;
use fluxo::connections::{Connection, ConnectionStore, Credential, MemConnections};
use fluxo::run::{RunStatus, StepStatus};
use fluxo::steps::{Registry, RepeatSafety};

const TOKEN: &str = "pat-na1-0123456789abcdef";

#[derive(Default)]
struct Fake {
    /// HubSpot contacts by email → id.
    contacts: BTreeMap<String, String>,
    /// Slack messages: (channel, ts, text).
    messages: Vec<(String, String, String)>,
    /// Every request: (method, path, authorization).
    log: Vec<(String, String, String)>,
}

async fn fake() -> (String, Arc<Mutex<Fake>>) {
    let state = Arc::new(Mutex::new(Fake::default()));
    let s = state.clone();
    let app = axum::Router::new().fallback(move |req: Request| {
        let s = s.clone();
        async move {
            let (parts, body) = req.into_parts();
            let body: Value = serde_json::from_slice(
                &axum::body::to_bytes(body, 1 << 20).await.unwrap_or_default(),
            )
            .unwrap_or(Value::Null);
            let auth = parts
                .headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            let path = parts.uri.path().to_string();
            let mut f = s.lock().unwrap();
            f.log.push((parts.method.to_string(), path.clone(), auth.clone()));
            if auth != format!("Bearer {TOKEN}") {
                return (
                    axum::http::StatusCode::UNAUTHORIZED,
                    axum::Json(json!({"status": "error", "message": "Authentication credentials not found.", "category": "INVALID_AUTHENTICATION"})),
                )
                    .into_response();
            }
            match path.as_str() {
                "/crm/v3/objects/contacts" => {
                    let email = body["properties"]["email"].as_str().unwrap_or("").to_string();
                    if let Some(id) = f.contacts.get(&email) {
                        let msg = format!("Contact already exists. Existing ID: {id}");
                        return (
                            axum::http::StatusCode::CONFLICT,
                            axum::Json(json!({"status": "error", "message": msg, "category": "CONFLICT"})),
                        )
                            .into_response();
                    }
                    let id = format!("{}", 1000 + f.contacts.len());
                    f.contacts.insert(email, id.clone());
                    (
                        axum::http::StatusCode::CREATED,
                        axum::Json(json!({"id": id, "properties": body["properties"]})),
                    )
                        .into_response()
                }
                "/api/chat.postMessage" | "/api/chat.update" => {
                    let channel = body["channel"].as_str().unwrap_or("").to_string();
                    if channel != "C0001" {
                        return axum::Json(json!({"ok": false, "error": "channel_not_found"}))
                            .into_response();
                    }
                    let text = body["text"].as_str().unwrap_or("").to_string();
                    let ts = if path.ends_with("update") {
                        let ts = body["ts"].as_str().unwrap_or("").to_string();
                        match f.messages.iter_mut().find(|m| m.1 == ts) {
                            Some(m) => m.2 = text,
                            None => {
                                return axum::Json(json!({"ok": false, "error": "message_not_found"}))
                                    .into_response()
                            }
                        }
                        ts
                    } else {
                        let ts = format!("1700000000.{:06}", f.messages.len() + 1);
                        f.messages.push((channel.clone(), ts.clone(), text));
                        ts
                    };
                    axum::Json(json!({"ok": true, "channel": channel, "ts": ts})).into_response()
                }
                _ => axum::http::StatusCode::NOT_FOUND.into_response(),
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, state)
}

fn harness(url: &str) -> Harness {
    let h = Harness::new();
    let store = MemConnections::default();
    for (id, app) in [
        ("hubspot-sales", "hubspot"),
        ("slack-ops", "slack"),
        ("sheets", "google_sheets"),
    ] {
        store
            .put(Connection {
                id: id.into(),
                app: app.into(),
                name: id.into(),
                credential: Credential::Bearer {
                    token: TOKEN.into(),
                },
                base_url: Some(url.to_string()),
                values: Default::default(),
            })
            .unwrap();
    }
    h.engine.set_connections(Arc::new(store));
    h
}

fn workflow(action: Value) -> Value {
    json!({
        "id": "act", "name": "act", "version": 1,
        "steps": [
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "act", "kind": "action", "config": action}
        ],
        "edges": [{"from": "start", "to": "act"}]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_409_is_the_existing_contact_never_a_second_one_nor_a_retry() {
    let (url, fake) = fake().await;
    let h = harness(&url);
    let wf = compile(&workflow(json!({
        "connector": "hubspot", "operation": "create_contact", "connection": "hubspot-sales",
        "params": {"email": "{{ input.email }}", "firstname": "{{ input.name }}"}
    })));
    let first = h
        .run(&wf, json!({"email": "ada@example.com", "name": "Ada"}))
        .await;
    assert_eq!(first.status, RunStatus::Succeeded, "{:?}", first.error);
    let out = step(&first, "act").output.clone().unwrap();
    assert_eq!(out["id"], "1000");
    assert_eq!(out["existing"], false);
    assert_eq!(out["properties"]["firstname"], "Ada");
    assert!(
        out["properties"].get("lastname").is_none(),
        "unset fields are left out"
    );

    let again = h
        .run(&wf, json!({"email": "ada@example.com", "name": "Ada"}))
        .await;
    assert_eq!(again.status, RunStatus::Succeeded, "{:?}", again.error);
    let out = step(&again, "act").output.clone().unwrap();
    assert_eq!(out, json!({"id": "1000", "existing": true, "attempts": 1}));
    let f = fake.lock().unwrap();
    assert_eq!(f.contacts.len(), 1);
    assert_eq!(f.log.len(), 2, "the 409 was not retried");
    // The token went to the app and nowhere in the record.
    assert_eq!(f.log[0].2, format!("Bearer {TOKEN}"));
    let record = serde_json::to_string(&again).unwrap();
    assert!(!record.contains(TOKEN), "{record}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_slack_post_updates_its_message_and_ok_false_fails_with_slacks_error() {
    let (url, fake) = fake().await;
    let h = harness(&url);
    let wf = compile(&workflow(json!({
        "connector": "slack", "operation": "post_message", "connection": "slack-ops",
        "params": {"channel": "{{ input.channel }}", "text": "paid: {{ input.id }} v{{ input.v }}"},
        "idempotency_key": "{{ input.id }}"
    })));
    let first = h
        .run(&wf, json!({"id": "in_1", "v": 1, "channel": "C0001"}))
        .await;
    assert_eq!(first.status, RunStatus::Succeeded, "{:?}", first.error);
    assert_eq!(
        step(&first, "act").output.as_ref().unwrap()["ts"],
        "1700000000.000001"
    );
    let again = h
        .run(&wf, json!({"id": "in_1", "v": 2, "channel": "C0001"}))
        .await;
    assert_eq!(again.status, RunStatus::Succeeded, "{:?}", again.error);
    {
        let f = fake.lock().unwrap();
        assert_eq!(f.messages.len(), 1, "one message: {:?}", f.messages);
        assert_eq!(f.messages[0].2, "paid: in_1 v2", "the repeat updated it");
        assert_eq!(f.log[1].1, "/api/chat.update");
    }
    let bad = h
        .run(&wf, json!({"id": "in_2", "v": 1, "channel": "C9999"}))
        .await;
    assert_eq!(bad.status, RunStatus::Failed);
    let s = step(&bad, "act");
    assert_eq!(s.status, StepStatus::Failed);
    let e = s.error.as_ref().unwrap();
    assert_eq!(e.code, "connector_error");
    assert_eq!(e.message, "Slack answered channel_not_found");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_foreign_connection_is_named() {
    let (url, _fake) = fake().await;
    let h = harness(&url);
    for (connection, code) in [
        ("nope", "connection_not_found"),
        ("slack-ops", "connection_mismatch"),
    ] {
        let wf = compile(&workflow(json!({
            "connector": "hubspot", "operation": "create_contact", "connection": connection,
            "params": {"email": "x@example.com"}
        })));
        let run = h.run(&wf, json!({})).await;
        let e = step(&run, "act").error.clone().unwrap();
        assert_eq!(e.code, code, "{}", e.message);
        assert!(e.message.contains(connection), "{}", e.message);
    }
}

#[test]
fn each_write_says_whether_a_repeat_is_safe_and_config_names_what_is_wrong() {
    let registry = Registry::builtin();
    let kind = registry.get("action").unwrap();
    let cfg = |op: &str| {
        json!({"connector": "hubspot", "operation": op, "connection": "c",
                                "params": {"email": "a", "dealname": "d"}})
    };
    assert_eq!(
        kind.repeat_safety(&cfg("create_contact")),
        RepeatSafety::Safe
    );
    assert_eq!(
        kind.repeat_safety(&cfg("upsert_contact")),
        RepeatSafety::Safe
    );
    match kind.repeat_safety(&cfg("create_deal")) {
        RepeatSafety::Unsafe(why) => assert!(why.contains("HubSpot create a deal"), "{why}"),
        RepeatSafety::Safe => panic!("a deal has no dedupe at HubSpot"),
    }
    let p = kind
        .check(&json!({"connector": "hubspot", "operation": "create_contact", "connection": "c"}));
    assert_eq!(p[0].path, "params.email", "{p:?}");
    let p = kind.check(&json!({"connector": "hubspot", "operation": "nope", "connection": "c"}));
    assert!(p[0].message.contains("create_contact"), "{p:?}");
    let p = kind.check(&json!({"connector": "hub", "operation": "x", "connection": "c"}));
    assert!(p[0].message.contains("hubspot, slack"), "{p:?}");
}

#[test]
fn the_linter_asks_for_a_claim_in_front_of_a_write_that_cannot_dedupe() {
    let check = |v: &Value| {
        fluxo::workflow::check_text(&v.to_string(), &Registry::builtin())
            .1
            .into_iter()
            .filter(|p| p.code == "lint_unguarded_write")
            .collect::<Vec<_>>()
    };
    let deal = json!({"connector": "hubspot", "operation": "create_deal",
                      "connection": "hubspot-sales", "params": {"dealname": "{{ input.id }}"}});
    let mut hook = workflow(deal.clone());
    hook["steps"][0] = json!({"id": "start", "kind": "webhook_trigger", "config": {}});
    let p = check(&hook);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].message
            .contains("HubSpot `Create a deal` has no dedupe"),
        "{}",
        p[0].message
    );
    assert_eq!(p[0].path, "steps[1].config.operation");

    // Claimed in Memory first, no retries: guarded.
    let mut guarded = hook.clone();
    guarded["steps"] = json!([
        {"id": "start", "kind": "webhook_trigger", "config": {}},
        {"id": "claim", "kind": "memory", "config": {"operation": "write", "namespace": "deals",
            "key": "{{ input.id }}", "allow_overwrite": false}},
        {"id": "act", "kind": "action", "config": {"retries": 0, "connector": "hubspot",
            "operation": "create_deal", "connection": "hubspot-sales",
            "params": {"dealname": "{{ input.id }}"}}}
    ]);
    guarded["edges"] = json!([{"from": "start", "to": "claim"}, {"from": "claim", "to": "act"}]);
    assert!(check(&guarded).is_empty(), "{:?}", check(&guarded));

    // A write that dedupes at the app needs nothing in front.
    let mut contact = hook.clone();
    contact["steps"][1]["config"]["operation"] = json!("create_contact");
    contact["steps"][1]["config"]["params"] = json!({"email": "{{ input.email }}"});
    assert!(check(&contact).is_empty(), "{:?}", check(&contact));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resume_preview_names_the_operation_and_how_it_dedupes() {
    let (url, fake) = fake().await;
    let h = harness(&url);
    let def = workflow(json!({
        "connector": "hubspot", "operation": "create_contact", "connection": "hubspot-sales",
        "params": {"email": "{{ input.email }}"}, "idempotency_key": "{{ input.email }}"
    }));
    let wf = compile(&def);
    let original = h.run(&wf, json!({"email": "grace@example.com"})).await;
    assert_eq!(
        original.status,
        RunStatus::Succeeded,
        "{:?}",
        original.error
    );
    // A dry walk sends nothing and its simulated answer stands in for the app's.
    let dry = h.dry(&wf, json!({"email": "grace@example.com"})).await;
    assert_eq!(dry.status, RunStatus::Succeeded, "{:?}", dry.error);
    assert_eq!(
        fake.lock().unwrap().log.len(),
        1,
        "the dry run sent nothing"
    );
    let calls = fluxo::runtime::preview::planned_calls(&wf, &dry, &original);
    assert_eq!(calls.len(), 1, "{calls:?}");
    let c = &calls[0];
    assert_eq!(c.operation.as_deref(), Some("HubSpot · Create a contact"));
    assert_eq!(c.dedupe.as_deref(), Some("409 is exists"));
    assert_eq!(c.idempotency_key.as_deref(), Some("grace@example.com"));
    assert!(c.again && c.repeat_safe, "{c:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_paced_per_connection_at_the_apps_documented_limit() {
    let (url, fake) = fake().await;
    let h = harness(&url);
    // Slack: about one message per second.
    let mut def = workflow(json!({
        "connector": "slack", "operation": "post_message", "connection": "slack-ops",
        "params": {"channel": "C0001", "text": "{{ input.id }}"}, "idempotency_key": "{{ input.id }}"
    }));
    let wf = compile(&def);
    let t0 = h.clock.now_ms();
    for i in 0..3 {
        let run = h.run(&wf, json!({"id": format!("m{i}")})).await;
        assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    }
    let waited = h.clock.now_ms() - t0;
    assert!(
        (2000..2100).contains(&waited),
        "three messages took {waited} ms of the engine's clock"
    );
    assert_eq!(fake.lock().unwrap().messages.len(), 3);

    // A turn that comes after the run deadline fails the step, sending nothing.
    def["settings"] = json!({"run_timeout_s": 1});
    let short = compile(&def);
    let run = h.run(&short, json!({"id": "late"})).await;
    let e = step(&run, "act").error.clone().unwrap();
    assert_eq!(e.code, "deadline_exceeded", "{}", e.message);
    assert!(
        e.message.contains("Slack's rate limit (1 per 1 s)"),
        "{}",
        e.message
    );
    assert_eq!(fake.lock().unwrap().messages.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_required_field_that_renders_empty_is_named_and_nothing_is_sent() {
    let (url, fake) = fake().await;
    let h = harness(&url);
    let wf = compile(&workflow(json!({
        "connector": "hubspot", "operation": "create_contact", "connection": "hubspot-sales",
        "params": {"email": "{{ input.customer_email }}"}
    })));
    // Stripe's invoice.paid carries `customer_email: null` for a customer without one.
    let run = h.run(&wf, json!({"customer_email": null})).await;
    let e = step(&run, "act").error.clone().unwrap();
    assert_eq!(e.code, "invalid_input");
    assert_eq!(
        e.message,
        "`Create a contact` needs `email`, and params.email rendered empty for this event"
    );
    assert!(fake.lock().unwrap().log.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_fields_per_run_keys_and_climbing_paths_are_named() {
    let registry = Registry::builtin();
    let kind = registry.get("action").unwrap();
    let p = kind.check(
        &json!({"connector": "hubspot", "operation": "create_contact",
        "connection": "c", "params": {"email": "a", "evil": "x"}}),
    );
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].path, "params.evil");
    assert!(
        p[0].message.contains("its fields: email, firstname"),
        "{}",
        p[0].message
    );

    // Stripe dedupes on the step's key: one per run unless templated from the event.
    let stripe = |key: Option<&str>| {
        let mut cfg = json!({"connector": "stripe", "operation": "create_customer",
            "connection": "s", "params": {"email": "{{ input.email }}"}, "retries": 0});
        if let Some(k) = key {
            cfg["idempotency_key"] = json!(k);
        }
        let mut wf = workflow(cfg);
        wf["steps"][0] = json!({"id": "start", "kind": "webhook_trigger", "config": {}});
        fluxo::workflow::check_text(&wf.to_string(), &Registry::builtin())
            .1
            .into_iter()
            .filter(|p| p.code == "lint_unguarded_write")
            .collect::<Vec<_>>()
    };
    let p = stripe(None);
    assert_eq!(p.len(), 1, "{p:?}");
    assert_eq!(p[0].path, "steps[1].config.idempotency_key");
    assert!(p[0].message.contains("one per run"), "{}", p[0].message);
    assert!(stripe(Some("customer-{{ input.id }}")).is_empty());

    // `..` in a field placed in the path is refused before anything is sent.
    let (url, fake) = fake().await;
    let h = harness(&url);
    let wf = compile(&workflow(json!({
        "connector": "google_sheets", "operation": "append_row", "connection": "sheets",
        "params": {"spreadsheet_id": "..", "key": "k", "values": []}
    })));
    let run = h.run(&wf, json!({})).await;
    let e = step(&run, "act").error.clone().unwrap();
    assert_eq!(e.code, "invalid_input");
    assert_eq!(
        e.message,
        "`Find a row by key`: a field placed in the request's path rendered `..`, which would \
         climb the app's URL path; it is refused"
    );
    assert!(fake.lock().unwrap().log.is_empty());
}
