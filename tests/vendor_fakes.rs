//! The vendor fakes of `fluxo sandbox` (HubSpot, Stripe, Slack, Google Sheets, the OAuth
//! server) over real HTTP on 127.0.0.1:0: each app's create, its duplicate behaviour, a fault
//! rule on its route, its error bodies; OAuth code + PKCE, expiry, rotation.

use std::sync::Arc;
use std::time::Duration;

use fluxo::clock::ManualClock;
use fluxo::sandbox::vendors::pkce_s256;
use fluxo::sandbox::{Sandbox, SandboxConfig, SandboxHandle};
use reqwest::{Client, RequestBuilder, Response, StatusCode};
use serde_json::{json, Value};

const HUBSPOT: &str = "pat-sandbox-test";
const STRIPE: &str = "sk_test_sandbox_test";
const SLACK: &str = "xoxb-sandbox-test";
const SHEETS: &str = "ya29.sandbox-test";

async fn start() -> SandboxHandle {
    start_with(SandboxConfig::default()).await
}

async fn start_with(config: SandboxConfig) -> SandboxHandle {
    let config = SandboxConfig {
        hold: Duration::from_secs(3),
        ..config
    };
    Sandbox::start_with("127.0.0.1:0".parse().unwrap(), config)
        .await
        .unwrap()
}

fn client() -> Client {
    Client::builder()
        .timeout(Duration::from_secs(5))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// A client that gives up before a held answer comes.
fn impatient() -> Client {
    Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap()
}

async fn body(r: Response) -> Value {
    let text = r.text().await.unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

async fn send(rb: RequestBuilder) -> (StatusCode, reqwest::header::HeaderMap, Value) {
    let r = rb.send().await.unwrap();
    let (status, headers) = (r.status(), r.headers().clone());
    (status, headers, body(r).await)
}

async fn add_fault(c: &Client, base: &str, route: &str, fault: &str, times: u32) {
    let r = c
        .post(format!("{base}/_sandbox/faults"))
        .json(&json!({"route": route, "fault": fault, "times": times}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
}

async fn snapshot(c: &Client, base: &str, app: &str) -> Value {
    body(
        c.get(format!("{base}/_sandbox/vendors/{app}"))
            .send()
            .await
            .unwrap(),
    )
    .await
}

// ---------------------------------------------------------------------------------------------
// HubSpot

#[tokio::test]
async fn hubspot_contacts_conflict_upsert_search_and_deals() {
    let sb = start().await;
    let c = client();
    let api = format!("{}/hubspot/crm/v3/objects", sb.url());
    let create = |props: Value| {
        c.post(format!("{api}/contacts"))
            .bearer_auth(HUBSPOT)
            .json(&json!({"properties": props}))
    };

    let (status, _, ada) = send(create(
        json!({"email": "ada@example.com", "firstname": "Ada", "age": 36}),
    ))
    .await;
    assert_eq!(status, StatusCode::CREATED, "{ada}");
    let id = ada["id"].as_str().unwrap().to_string();
    assert!(id.chars().all(|c| c.is_ascii_digit()), "{id}");
    assert_eq!(ada["properties"]["email"], "ada@example.com");
    assert_eq!(ada["properties"]["age"], "36", "values are strings");
    assert_eq!(ada["properties"]["hs_object_id"], id.as_str());
    assert_eq!(ada["archived"], false);
    assert!(ada["createdAt"].as_str().unwrap().ends_with('Z'));

    // The duplicate: 409 CONFLICT with the existing id in the message (emails compare
    // case-insensitively).
    let (status, _, dup) = send(create(json!({"email": "ADA@example.com"}))).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(dup["status"], "error");
    assert_eq!(dup["category"], "CONFLICT");
    assert_eq!(
        dup["message"],
        format!("Contact already exists. Existing ID: {id}")
    );
    assert!(dup["correlationId"].as_str().is_some_and(|s| !s.is_empty()));

    let (status, _, bad) = send(create(json!({"email": "not-an-email"}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(bad["category"], "VALIDATION_ERROR");
    assert!(bad["message"].as_str().unwrap().contains("INVALID_EMAIL"));

    // Batch upsert by email: updates Ada, creates Grace.
    let (status, _, up) = send(
        c.post(format!("{api}/contacts/batch/upsert"))
            .bearer_auth(HUBSPOT)
            .json(&json!({"inputs": [
                {"idProperty": "email", "id": "ada@example.com", "properties": {"lastname": "Lovelace"}},
                {"idProperty": "email", "id": "grace@example.com", "properties": {"firstname": "Grace"}},
            ]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{up}");
    assert_eq!(up["status"], "COMPLETE");
    let results = up["results"].as_array().unwrap();
    assert_eq!(results[0]["id"], id.as_str());
    assert_eq!(results[0]["new"], false);
    assert_eq!(results[0]["properties"]["lastname"], "Lovelace");
    assert_eq!(results[0]["properties"]["firstname"], "Ada");
    assert_eq!(results[1]["new"], true);
    assert_eq!(results[1]["properties"]["email"], "grace@example.com");
    let grace = results[1]["id"].as_str().unwrap().to_string();
    // Upserting again changes nothing in number.
    let (_, _, again) = send(
        c.post(format!("{api}/contacts/batch/upsert"))
            .bearer_auth(HUBSPOT)
            .json(&json!({"inputs": [{"idProperty": "email", "id": "grace@example.com", "properties": {}}]})),
    )
    .await;
    assert_eq!(again["results"][0]["id"], grace.as_str());
    assert_eq!(again["results"][0]["new"], false);
    assert_eq!(
        snapshot(&c, &sb.url(), "hubspot").await["contacts"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // Search: EQ on email.
    let search = |email: &str| {
        c.post(format!("{api}/contacts/search"))
            .bearer_auth(HUBSPOT)
            .json(&json!({
                "filterGroups": [{"filters": [{"propertyName": "email", "operator": "EQ", "value": email}]}],
                "properties": ["email", "lastname"],
            }))
    };
    let (status, _, found) = send(search("Grace@Example.com")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(found["total"], 1);
    assert_eq!(found["results"][0]["id"], grace.as_str());
    assert_eq!(found["results"][0]["properties"]["lastname"], Value::Null);
    let (_, _, none) = send(search("nobody@example.com")).await;
    assert_eq!(none["total"], 0);
    assert_eq!(none["results"], json!([]));

    // Read and update.
    let (status, _, got) = send(c.get(format!("{api}/contacts/{id}")).bearer_auth(HUBSPOT)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got["properties"]["lastname"], "Lovelace");
    let (_, _, by_email) = send(
        c.get(format!("{api}/contacts/ada@example.com?idProperty=email"))
            .bearer_auth(HUBSPOT),
    )
    .await;
    assert_eq!(by_email["id"], id.as_str());
    let (status, _, patched) = send(
        c.patch(format!("{api}/contacts/{id}"))
            .bearer_auth(HUBSPOT)
            .json(&json!({"properties": {"firstname": "Augusta Ada"}})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(patched["properties"]["firstname"], "Augusta Ada");
    let (status, _, missing) =
        send(c.get(format!("{api}/contacts/999999")).bearer_auth(HUBSPOT)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(missing["category"], "OBJECT_NOT_FOUND");

    // Deals have no unique property: the same create twice is two deals.
    let deal = || {
        c.post(format!("{api}/deals"))
            .bearer_auth(HUBSPOT)
            .json(&json!({"properties": {"dealname": "Acme", "amount": 100}}))
    };
    let (s1, _, d1) = send(deal()).await;
    let (s2, _, d2) = send(deal()).await;
    assert_eq!((s1, s2), (StatusCode::CREATED, StatusCode::CREATED));
    assert_ne!(d1["id"], d2["id"]);
    assert_eq!(
        snapshot(&c, &sb.url(), "hubspot").await["deals"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // No token, a bad one.
    for rb in [
        c.get(format!("{api}/contacts/{id}")),
        c.get(format!("{api}/contacts/{id}"))
            .bearer_auth("pat-na1-real-looking"),
    ] {
        let (status, _, e) = send(rb).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
        assert_eq!(e["status"], "error");
        assert_eq!(e["category"], "INVALID_AUTHENTICATION");
        assert!(e["message"]
            .as_str()
            .unwrap()
            .starts_with("Authentication credentials not found"));
    }

    // Deals upsert on the portal's custom unique property `external_id`, and on nothing else.
    for _ in 0..2 {
        let (status, _, up) = send(
            c.post(format!("{api}/deals/batch/upsert"))
                .bearer_auth(HUBSPOT)
                .json(
                    &json!({"inputs": [{"idProperty": "external_id", "id": "in_1",
                    "properties": {"dealname": "Invoice in_1"}}]}),
                ),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{up}");
        assert_eq!(up["results"][0]["properties"]["external_id"], "in_1");
    }
    let deals = snapshot(&c, &sb.url(), "hubspot").await["deals"].clone();
    let upserted: Vec<&Value> = deals
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["properties"]["external_id"] == "in_1")
        .collect();
    assert_eq!(upserted.len(), 1, "{deals}");
    let (status, _, bad) = send(
        c.post(format!("{api}/deals/batch/upsert"))
            .bearer_auth(HUBSPOT)
            .json(&json!({"inputs": [{"idProperty": "dealname", "id": "x", "properties": {}}]})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        bad["message"]
            .as_str()
            .unwrap()
            .contains("unique values (external_id)"),
        "{bad}"
    );

    // An unknown route under the prefix is HubSpot's 404, and logged.
    let (status, _, _) = send(
        c.get(format!("{}/hubspot/nope", sb.url()))
            .bearer_auth(HUBSPOT),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let log = sb.state().log();
    assert!(log
        .iter()
        .any(|e| e.path == "/hubspot/nope" && e.status == Some(404)));
    assert!(log
        .iter()
        .any(|e| e.path == "/hubspot/crm/v3/objects/contacts" && e.status == Some(409)));
    sb.shutdown().await;
}

#[tokio::test]
async fn hubspot_faults_timeout_after_write_429_and_500() {
    let sb = start().await;
    let (c, base) = (client(), sb.url());
    let url = format!("{base}/hubspot/crm/v3/objects/contacts");
    let create = |c: &Client| {
        c.post(&url)
            .bearer_auth(HUBSPOT)
            .json(&json!({"properties": {"email": "late@example.com"}}))
    };

    // Timeout after the write: the client sees nothing, the contact exists; the retry is the
    // 409 that names it.
    add_fault(
        &c,
        &base,
        "POST /hubspot/crm/v3/objects/contacts",
        "timeout_after_write",
        1,
    )
    .await;
    let err = create(&impatient()).send().await.unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    let contacts = snapshot(&c, &base, "hubspot").await["contacts"].clone();
    assert_eq!(contacts.as_array().unwrap().len(), 1);
    let id = contacts[0]["id"].as_str().unwrap().to_string();
    let (status, _, e) = send(create(&c)).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        e["message"],
        format!("Contact already exists. Existing ID: {id}")
    );

    // 429 with Retry-After and HubSpot's body; nothing written.
    add_fault(
        &c,
        &base,
        "POST /hubspot/crm/v3/objects/*",
        "rate_limit_429:2",
        1,
    )
    .await;
    let (status, headers, e) = send(
        c.post(format!("{base}/hubspot/crm/v3/objects/deals"))
            .bearer_auth(HUBSPOT)
            .json(&json!({"properties": {"dealname": "x"}})),
    )
    .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(headers["retry-after"], "2");
    assert_eq!(headers["x-hubspot-ratelimit-remaining"], "0");
    assert_eq!(e["errorType"], "RATE_LIMIT");
    assert_eq!(e["policyName"], "TEN_SECONDLY_ROLLING");
    assert_eq!(
        e["message"],
        "You have reached your ten_secondly_rolling limit."
    );
    assert!(snapshot(&c, &base, "hubspot").await["deals"]
        .as_array()
        .unwrap()
        .is_empty());

    // 500 before the write (header): nothing written; after the write: the deal exists.
    let deal = |fault: &str| {
        c.post(format!("{base}/hubspot/crm/v3/objects/deals"))
            .bearer_auth(HUBSPOT)
            .header("X-Sandbox-Fault", fault)
            .json(&json!({"properties": {"dealname": "y"}}))
    };
    let (status, _, e) = send(deal("error_500_before_write")).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(e["status"], "error");
    assert!(snapshot(&c, &base, "hubspot").await["deals"]
        .as_array()
        .unwrap()
        .is_empty());
    let (status, _, _) = send(deal("error_500_after_write")).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        snapshot(&c, &base, "hubspot").await["deals"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // A refused token uses up no fault rule.
    add_fault(
        &c,
        &base,
        "POST /hubspot/crm/v3/objects/deals",
        "error_500_before_write",
        1,
    )
    .await;
    let r = c
        .post(format!("{base}/hubspot/crm/v3/objects/deals"))
        .json(&json!({"properties": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(send(deal("none")).await.0, StatusCode::CREATED);
    let log = sb.state().log();
    let held = log
        .iter()
        .find(|e| e.fault.as_deref() == Some("timeout_after_write"))
        .unwrap();
    assert_eq!(held.status, None);
    assert_eq!(held.record_id.as_deref(), Some(id.as_str()));
    sb.shutdown().await;
}

#[tokio::test]
async fn hubspot_search_can_lag_behind_writes() {
    let clock = Arc::new(ManualClock::at_2026());
    let sb = start_with(SandboxConfig {
        clock: clock.clone(),
        ..SandboxConfig::default()
    })
    .await;
    let (c, base) = (client(), sb.url());
    let r = c
        .post(format!("{base}/_sandbox/vendors/hubspot"))
        .json(&json!({"search_lag_ms": 2000}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let (status, _, _) = send(
        c.post(format!("{base}/hubspot/crm/v3/objects/contacts"))
            .bearer_auth(HUBSPOT)
            .json(&json!({"properties": {"email": "new@example.com"}})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let search = || {
        send(
            c.post(format!("{base}/hubspot/crm/v3/objects/contacts/search"))
                .bearer_auth(HUBSPOT)
                .json(&json!({"filterGroups": [{"filters": [
                    {"propertyName": "email", "operator": "EQ", "value": "new@example.com"}
                ]}]})),
        )
    };
    assert_eq!(search().await.2["total"], 0, "not indexed yet");
    clock.advance(Duration::from_secs(3));
    assert_eq!(search().await.2["total"], 1);
    sb.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Stripe

#[tokio::test]
async fn stripe_customers_idempotency_replay_mismatch_and_list() {
    let sb = start().await;
    let (c, base) = (client(), sb.url());
    let url = format!("{base}/stripe/v1/customers");
    let create = |key: Option<&str>, form: &str| {
        let mut rb = c
            .post(&url)
            .bearer_auth(STRIPE)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form.to_string());
        if let Some(k) = key {
            rb = rb.header("Idempotency-Key", k);
        }
        rb
    };

    let form = "email=ada%40example.com&name=Ada+Lovelace&metadata[event]=evt_1";
    let (status, headers, cus) = send(create(Some("evt_1"), form)).await;
    assert_eq!(status, StatusCode::OK, "{cus}");
    assert!(headers.get("idempotent-replayed").is_none());
    let id = cus["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("cus_"), "{id}");
    assert_eq!(cus["object"], "customer");
    assert_eq!(cus["email"], "ada@example.com");
    assert_eq!(cus["name"], "Ada Lovelace");
    assert_eq!(cus["metadata"], json!({"event": "evt_1"}));
    assert_eq!(cus["livemode"], false);

    // Same key, same parameters (in another order): the first answer again.
    let (status, headers, replay) = send(create(
        Some("evt_1"),
        "metadata[event]=evt_1&name=Ada+Lovelace&email=ada%40example.com",
    ))
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["idempotent-replayed"], "true");
    assert_eq!(replay, cus);

    // Same key, other parameters: idempotency_error.
    let (status, _, e) = send(create(Some("evt_1"), "email=other%40example.com")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(e["error"]["type"], "idempotency_error");
    assert!(e["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("Keys for idempotent requests can only be used with the same parameters they were first used with"));

    // Keys are at most 255 characters.
    let (status, _, e) = send(create(Some(&"k".repeat(256)), form)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(e["error"]["type"], "invalid_request_error");

    // Unknown parameters, bad emails: refused, and nothing is saved under the key.
    let (status, _, e) = send(create(Some("evt_2"), "emial=x")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(e["error"]["code"], "parameter_unknown");
    assert_eq!(e["error"]["param"], "emial");
    let (status, _, e) = send(create(Some("evt_2"), "email=nope")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(e["error"]["code"], "email_invalid");

    // Without a key Stripe has no dedupe: the same create twice is two customers.
    let (_, _, b1) = send(create(None, "email=bob%40example.com")).await;
    let (_, _, b2) = send(create(None, "email=bob%40example.com")).await;
    assert_ne!(b1["id"], b2["id"]);

    // The list filtered by email (the consistent find), newest first.
    let (status, _, list) = send(
        c.get(format!("{url}?email=bob%40example.com&limit=1"))
            .bearer_auth(STRIPE),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["object"], "list");
    assert_eq!(list["url"], "/v1/customers");
    assert_eq!(list["has_more"], true);
    assert_eq!(list["data"][0]["id"], b2["id"]);
    let (_, _, list) = send(
        c.get(format!("{url}?email=ada%40example.com"))
            .bearer_auth(STRIPE),
    )
    .await;
    assert_eq!(list["data"].as_array().unwrap().len(), 1);
    assert_eq!(list["has_more"], false);
    let (_, _, list) = send(
        c.get(format!("{url}?email=nobody%40example.com"))
            .bearer_auth(STRIPE),
    )
    .await;
    assert_eq!(list["data"], json!([]));

    let (status, _, got) = send(c.get(format!("{url}/{id}")).bearer_auth(STRIPE)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got, cus);
    let (status, _, e) = send(c.get(format!("{url}/cus_nope")).bearer_auth(STRIPE)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(e["error"]["code"], "resource_missing");
    assert_eq!(e["error"]["message"], "No such customer: 'cus_nope'");

    // A bad key, masked as Stripe masks it; Basic auth with the key as user works too.
    let (status, _, e) = send(c.get(&url).bearer_auth("sk_test_abcdefghijklmnop1234")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(e["error"]["type"], "invalid_request_error");
    assert_eq!(
        e["error"]["message"],
        "Invalid API Key provided: sk_test_****************1234"
    );
    let (status, _, _) = send(c.get(&url).basic_auth(STRIPE, Some(""))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        snapshot(&c, &base, "stripe").await["customers"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    sb.shutdown().await;
}

#[tokio::test]
async fn stripe_timeout_after_write_then_keyed_retry_replays() {
    let sb = start().await;
    let (c, base) = (client(), sb.url());
    let url = format!("{base}/stripe/v1/customers");
    add_fault(
        &c,
        &base,
        "POST /stripe/v1/customers",
        "timeout_after_write",
        1,
    )
    .await;
    let create = |c: &Client| {
        c.post(&url)
            .bearer_auth(STRIPE)
            .header("Idempotency-Key", "evt_9")
            .form(&[("email", "late@example.com")])
    };
    let err = create(&impatient()).send().await.unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    let customers = snapshot(&c, &base, "stripe").await["customers"].clone();
    assert_eq!(customers.as_array().unwrap().len(), 1, "the write happened");
    let (status, headers, replay) = send(create(&c)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["idempotent-replayed"], "true");
    assert_eq!(replay["id"], customers[0]["id"]);
    assert_eq!(
        snapshot(&c, &base, "stripe").await["customers"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // A 429 comes before the idempotency layer: the key stays free.
    let (status, headers, e) = send(
        c.post(&url)
            .bearer_auth(STRIPE)
            .header("Idempotency-Key", "evt_10")
            .header("X-Sandbox-Fault", "rate_limit_429:1")
            .form(&[("email", "x@example.com")]),
    )
    .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(headers["retry-after"], "1");
    assert_eq!(e["error"]["code"], "rate_limit");
    let (status, headers, _) = send(
        c.post(&url)
            .bearer_auth(STRIPE)
            .header("Idempotency-Key", "evt_10")
            .form(&[("email", "x@example.com")]),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers.get("idempotent-replayed").is_none());
    sb.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Slack

#[tokio::test]
async fn slack_post_update_history_webhooks_and_errors() {
    let sb = start().await;
    let (c, base) = (client(), sb.url());
    let api = format!("{base}/slack/api");

    let (status, _, posted) = send(
        c.post(format!("{api}/chat.postMessage"))
            .bearer_auth(SLACK)
            .json(&json!({"channel": "#general", "text": "invoice paid", "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": "*paid*"}}]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(posted["ok"], true, "{posted}");
    let channel = posted["channel"].as_str().unwrap().to_string();
    assert!(channel.starts_with('C'));
    let ts = posted["ts"].as_str().unwrap().to_string();
    let (secs, micros) = ts.split_once('.').unwrap();
    assert!(secs.parse::<u64>().is_ok() && micros.len() == 6, "{ts}");
    assert_eq!(posted["message"]["text"], "invoice paid");
    assert_eq!(posted["message"]["ts"], ts.as_str());

    // Form-encoded works too; a second post is a second message (no dedupe).
    let (_, _, second) = send(
        c.post(format!("{api}/chat.postMessage"))
            .bearer_auth(SLACK)
            .form(&[("channel", channel.as_str()), ("text", "invoice paid")]),
    )
    .await;
    assert_eq!(second["ok"], true);
    assert_ne!(second["ts"], posted["ts"]);

    // Errors are 200 with ok: false.
    for (rb, error) in [
        (
            c.post(format!("{api}/chat.postMessage"))
                .bearer_auth(SLACK)
                .json(&json!({"channel": "#nope", "text": "x"})),
            "channel_not_found",
        ),
        (
            c.post(format!("{api}/chat.postMessage"))
                .bearer_auth(SLACK)
                .json(&json!({"channel": "#general"})),
            "no_text",
        ),
        (
            c.post(format!("{api}/chat.postMessage"))
                .json(&json!({"channel": "#general", "text": "x"})),
            "not_authed",
        ),
        (
            c.post(format!("{api}/chat.postMessage"))
                .bearer_auth("xoxb-real-looking")
                .json(&json!({"channel": "#general", "text": "x"})),
            "invalid_auth",
        ),
        (
            c.post(format!("{api}/chat.update"))
                .bearer_auth(SLACK)
                .json(&json!({"channel": channel, "ts": "1.000001", "text": "x"})),
            "message_not_found",
        ),
    ] {
        let (status, _, e) = send(rb).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(e, json!({"ok": false, "error": error}));
    }

    // Update by ts instead of posting again.
    let (_, _, updated) = send(
        c.post(format!("{api}/chat.update"))
            .bearer_auth(SLACK)
            .json(&json!({"channel": channel, "ts": ts, "text": "invoice paid (updated)"})),
    )
    .await;
    assert_eq!(updated["ok"], true, "{updated}");
    assert_eq!(updated["ts"], ts.as_str());
    assert_eq!(updated["text"], "invoice paid (updated)");
    assert!(updated["message"].get("blocks").is_none());

    // History: newest first.
    let (_, _, history) = send(
        c.get(format!("{api}/conversations.history?channel={channel}"))
            .bearer_auth(SLACK),
    )
    .await;
    assert_eq!(history["ok"], true);
    let messages = history["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0]["ts"], second["ts"]);
    assert_eq!(messages[1]["text"], "invoice paid (updated)");
    assert!(messages[1]["edited"]["ts"].is_string());

    // Incoming webhooks: plain-text "ok", an unknown one "no_service".
    let hook = format!("{base}/slack/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX");
    let r = c
        .post(&hook)
        .json(&json!({"text": "from a webhook"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.text().await.unwrap(), "ok");
    let r = c
        .post(format!("{base}/slack/services/T000/B000/wrong"))
        .json(&json!({"text": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(r.text().await.unwrap(), "no_service");
    let r = c.post(&hook).json(&json!({})).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(r.text().await.unwrap(), "no_text");

    // A webhook of one's own, to a new channel.
    let ch = body(
        c.post(format!("{base}/_sandbox/vendors/slack"))
            .json(&json!({"channel": "deals"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let made = body(
        c.post(format!("{base}/_sandbox/vendors/slack"))
            .json(&json!({"webhook": {"channel": "deals"}}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(made["channel"], ch["id"]);
    let r = c
        .post(format!("{base}{}", made["url"].as_str().unwrap()))
        .form(&[("payload", r#"{"text": "deal won"}"#)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);

    // The control lists messages per channel and per webhook.
    let snap = snapshot(&c, &base, "slack").await;
    let general = snap["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "general")
        .unwrap();
    assert_eq!(general["messages"].as_array().unwrap().len(), 3);
    let deals = snap["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "deals")
        .unwrap();
    assert_eq!(deals["messages"][0]["text"], "deal won");
    let hooks = snap["webhooks"].as_array().unwrap();
    assert_eq!(hooks[0]["messages"].as_array().unwrap().len(), 1);
    assert_eq!(hooks[1]["messages"], json!([{"text": "deal won"}]));

    // Rate limited: an HTTP 429 with Retry-After.
    let (status, headers, e) = send(
        c.post(format!("{api}/chat.postMessage"))
            .bearer_auth(SLACK)
            .header("X-Sandbox-Fault", "rate_limit_429:30")
            .json(&json!({"channel": "#general", "text": "x"})),
    )
    .await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(headers["retry-after"], "30");
    assert_eq!(e, json!({"ok": false, "error": "ratelimited"}));
    sb.shutdown().await;
}

#[tokio::test]
async fn slack_timeout_after_write_posts_once() {
    let sb = start().await;
    let (c, base) = (client(), sb.url());
    add_fault(
        &c,
        &base,
        "POST /slack/api/chat.postMessage",
        "timeout_after_write",
        1,
    )
    .await;
    let err = impatient()
        .post(format!("{base}/slack/api/chat.postMessage"))
        .bearer_auth(SLACK)
        .json(&json!({"channel": "alerts", "text": "once"}))
        .send()
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    let snap = snapshot(&c, &base, "slack").await;
    let alerts = snap["channels"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "alerts")
        .unwrap();
    assert_eq!(
        alerts["messages"].as_array().unwrap().len(),
        1,
        "the message was posted"
    );
    sb.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Google Sheets

#[tokio::test]
async fn sheets_append_duplicates_rows_and_reads_back() {
    let sb = start().await;
    let (c, base) = (client(), sb.url());
    let values = format!("{base}/sheets/v4/spreadsheets/sheet_1/values");
    let append = |c: &Client, row: Value| {
        c.post(format!("{values}/Sheet1!A1:C1:append?valueInputOption=RAW"))
            .bearer_auth(SHEETS)
            .json(&json!({"values": [row]}))
    };

    let (status, _, a1) = send(append(&c, json!(["evt_1", "ada@example.com", 42]))).await;
    assert_eq!(status, StatusCode::OK, "{a1}");
    assert_eq!(a1["spreadsheetId"], "sheet_1");
    assert_eq!(a1["updates"]["updatedRange"], "Sheet1!A1:C1");
    assert_eq!(a1["updates"]["updatedRows"], 1);
    assert_eq!(a1["updates"]["updatedColumns"], 3);
    assert_eq!(a1["updates"]["updatedCells"], 3);
    assert!(a1.get("tableRange").is_none());

    // The same append again (a retry): a second, identical row.
    let (_, _, a2) = send(append(&c, json!(["evt_1", "ada@example.com", 42]))).await;
    assert_eq!(a2["updates"]["updatedRange"], "Sheet1!A2:C2");
    assert_eq!(a2["tableRange"], "Sheet1!A1:C1");

    // A timeout after the write: the row is there, and the retry adds a third.
    add_fault(&c, &base, "POST /sheets/*", "timeout_after_write", 1).await;
    let err = append(&impatient(), json!(["evt_2", "b@example.com", 7]))
        .send()
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    let (_, _, a4) = send(append(&c, json!(["evt_2", "b@example.com", 7]))).await;
    assert_eq!(a4["updates"]["updatedRange"], "Sheet1!A4:C4");

    let (status, _, read) = send(c.get(format!("{values}/Sheet1")).bearer_auth(SHEETS)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(read["range"], "Sheet1!A1:Z1000");
    assert_eq!(read["majorDimension"], "ROWS");
    assert_eq!(
        read["values"],
        json!([
            ["evt_1", "ada@example.com", "42"],
            ["evt_1", "ada@example.com", "42"],
            ["evt_2", "b@example.com", "7"],
            ["evt_2", "b@example.com", "7"],
        ])
    );
    let (_, _, col) = send(
        c.get(format!(
            "{values}/Sheet1!A2:A3?valueRenderOption=UNFORMATTED_VALUE"
        ))
        .bearer_auth(SHEETS),
    )
    .await;
    assert_eq!(col["range"], "Sheet1!A2:A3");
    assert_eq!(col["values"], json!([["evt_1"], ["evt_2"]]));
    let (_, _, empty) = send(c.get(format!("{values}/Sheet1!E1:F9")).bearer_auth(SHEETS)).await;
    assert!(empty.get("values").is_none(), "{empty}");

    // Errors in Google's shape.
    let (status, _, e) = send(
        c.post(format!("{values}/Sheet1:append"))
            .bearer_auth(SHEETS)
            .json(&json!({"values": [["x"]]})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(e["error"]["status"], "INVALID_ARGUMENT");
    assert_eq!(e["error"]["code"], 400);
    let (status, _, e) = send(c.get(format!("{values}/Nope!A1")).bearer_auth(SHEETS)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(e["error"]["message"], "Unable to parse range: Nope!A1");
    let (status, headers, e) = send(c.get(format!("{values}/Sheet1"))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(e["error"]["status"], "UNAUTHENTICATED");
    assert_eq!(e["error"]["code"], 401);
    assert!(headers.contains_key("www-authenticate"));

    // A spreadsheet with named sheets, through the control route.
    let r = c
        .post(format!("{base}/_sandbox/vendors/sheets"))
        .json(&json!({"spreadsheet": "book_2", "sheets": ["Events", "Log"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let (status, _, a) = send(
        c.post(format!("{base}/sheets/v4/spreadsheets/book_2/values/Log!A:B:append?valueInputOption=USER_ENTERED"))
            .bearer_auth(SHEETS)
            .json(&json!({"values": [["n", "1.5"]]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{a}");
    assert_eq!(a["updates"]["updatedRange"], "Log!A1:B1");
    let snap = snapshot(&c, &base, "sheets").await;
    assert_eq!(
        snap["spreadsheets"]["book_2"]["sheets"]["Log"],
        json!([["n", 1.5]])
    );
    assert_eq!(
        snap["spreadsheets"]["sheet_1"]["sheets"]["Sheet1"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    sb.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// OAuth and tokens

/// Authorize (auto-approved) and exchange the code; the token answer.
async fn connect(c: &Client, base: &str) -> Value {
    let verifier = "a-verifier-of-at-least-forty-three-characters-0123456789";
    let redirect = "http://127.0.0.1:9/callback";
    let r = c
        .get(format!("{base}/oauth/authorize"))
        .query(&[
            ("response_type", "code"),
            ("client_id", "fluxo-desktop"),
            ("redirect_uri", redirect),
            ("state", "st4te"),
            ("code_challenge", &pkce_s256(verifier)),
            ("code_challenge_method", "S256"),
            ("scope", "crm.objects.contacts.write"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FOUND);
    let location = reqwest::Url::parse(r.headers()["location"].to_str().unwrap()).unwrap();
    assert_eq!(location.as_str().split('?').next(), Some(redirect));
    let q: std::collections::HashMap<_, _> = location.query_pairs().into_owned().collect();
    assert_eq!(q["state"], "st4te");
    let code = q["code"].clone();

    let exchange = |verifier: &str| {
        c.post(format!("{base}/oauth/token")).form(&[
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", redirect),
            ("client_id", "fluxo-desktop"),
            ("code_verifier", verifier),
        ])
    };
    // A wrong verifier is refused (and, the code being single use, spends it).
    let (status, _, e) = send(exchange("wrong-verifier-wrong-verifier-wrong-verifier-00")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(e["error"], "invalid_grant");
    let (status, _, e) = send(exchange(verifier)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "a spent code: {e}");

    // A fresh code, the right verifier.
    let r = c
        .get(format!("{base}/oauth/authorize"))
        .query(&[
            ("response_type", "code"),
            ("client_id", "fluxo-desktop"),
            ("redirect_uri", redirect),
            ("code_challenge", &pkce_s256(verifier)),
            ("code_challenge_method", "S256"),
        ])
        .send()
        .await
        .unwrap();
    let location = reqwest::Url::parse(r.headers()["location"].to_str().unwrap()).unwrap();
    let code = location
        .query_pairs()
        .find(|(k, _)| k == "code")
        .unwrap()
        .1
        .into_owned();
    let (status, headers, tokens) = send(c.post(format!("{base}/oauth/token")).form(&[
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", redirect),
        ("client_id", "fluxo-desktop"),
        ("code_verifier", verifier),
    ]))
    .await;
    assert_eq!(status, StatusCode::OK, "{tokens}");
    assert_eq!(headers["cache-control"], "no-store");
    assert_eq!(tokens["token_type"], "bearer");
    tokens
}

#[tokio::test]
async fn oauth_code_pkce_expiry_refresh_rotation() {
    let clock = Arc::new(ManualClock::at_2026());
    let sb = start_with(SandboxConfig {
        clock: clock.clone(),
        ..SandboxConfig::default()
    })
    .await;
    let (c, base) = (client(), sb.url());
    let tokens = connect(&c, &base).await;
    assert_eq!(tokens["expires_in"], 1800);
    let access = tokens["access_token"].as_str().unwrap().to_string();
    let refresh = tokens["refresh_token"].as_str().unwrap().to_string();

    // The token works on every fake.
    let contact = |token: &str| {
        c.post(format!("{base}/hubspot/crm/v3/objects/contacts"))
            .bearer_auth(token)
            .json(&json!({"properties": {}}))
    };
    assert_eq!(send(contact(&access)).await.0, StatusCode::CREATED);
    let (_, _, ok) = send(
        c.post(format!("{base}/slack/api/auth.test"))
            .bearer_auth(&access),
    )
    .await;
    assert_eq!(ok["ok"], true);

    // Expired (30 minutes later): each vendor's own 401.
    clock.advance(Duration::from_secs(1801));
    let (status, _, e) = send(contact(&access)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(e["category"], "EXPIRED_AUTHENTICATION");
    assert!(e["message"]
        .as_str()
        .unwrap()
        .starts_with("The OAuth token used to make this call expired"));
    let (status, _, e) = send(
        c.get(format!("{base}/stripe/v1/customers"))
            .bearer_auth(&access),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(e["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("Expired API Key provided: "));
    assert!(!e["error"]["message"].as_str().unwrap().contains(&access));
    let (status, _, e) = send(
        c.post(format!("{base}/slack/api/auth.test"))
            .bearer_auth(&access),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(e, json!({"ok": false, "error": "token_expired"}));
    let (status, _, e) = send(
        c.get(format!("{base}/sheets/v4/spreadsheets/s1"))
            .bearer_auth(&access),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(e["error"]["details"][0]["reason"], "ACCESS_TOKEN_EXPIRED");

    // Refresh: new access and refresh tokens; the new access token works.
    let refresh_with = |rt: &str| {
        c.post(format!("{base}/oauth/token")).form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", rt),
            ("client_id", "fluxo-desktop"),
        ])
    };
    let (status, _, fresh) = send(refresh_with(&refresh)).await;
    assert_eq!(status, StatusCode::OK, "{fresh}");
    let access2 = fresh["access_token"].as_str().unwrap();
    let refresh2 = fresh["refresh_token"].as_str().unwrap();
    assert_ne!(access2, access);
    assert_ne!(refresh2, refresh);
    assert_eq!(send(contact(access2)).await.0, StatusCode::CREATED);

    // The old refresh token is spent.
    let (status, _, e) = send(refresh_with(&refresh)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(e["error"], "invalid_grant");

    let stats = body(
        c.get(format!("{base}/_sandbox/oauth"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(stats["refreshes"], 1, "{stats}");
    assert_eq!(stats["refresh_failures"], 1);
    assert_eq!(stats["reused_refresh_tokens"], 1);
    assert_eq!(stats["code_exchanges"], 1);

    // A shorter lifetime, and expiring every token at once.
    let stats = body(
        c.post(format!("{base}/_sandbox/oauth"))
            .json(&json!({"access_token_ttl_s": 1}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(stats["access_token_ttl_s"], 1);
    let (_, _, short) = send(refresh_with(refresh2)).await;
    assert_eq!(short["expires_in"], 1);
    let access3 = short["access_token"].as_str().unwrap().to_string();
    assert_eq!(send(contact(&access3)).await.0, StatusCode::CREATED);
    c.post(format!("{base}/_sandbox/oauth"))
        .json(&json!({"expire_access_tokens": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(send(contact(&access3)).await.0, StatusCode::UNAUTHORIZED);

    // A timeout after the refresh: the rotated token is lost with the answer, and the old one
    // is spent (what a connector must survive).
    let rt3 = short["refresh_token"].as_str().unwrap().to_string();
    add_fault(&c, &base, "POST /oauth/token", "timeout_after_write", 1).await;
    let err = impatient()
        .post(format!("{base}/oauth/token"))
        .form(&[
            ("grant_type", "refresh_token"),
            ("refresh_token", rt3.as_str()),
        ])
        .send()
        .await
        .unwrap_err();
    assert!(err.is_timeout());
    assert_eq!(send(refresh_with(&rt3)).await.2["error"], "invalid_grant");

    // A reset forgets tokens and counters.
    c.post(format!("{base}/_sandbox/reset"))
        .send()
        .await
        .unwrap();
    let stats = body(
        c.get(format!("{base}/_sandbox/oauth"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(stats["refreshes"], 0);
    assert_eq!(stats["access_token_ttl_s"], 1800);
    assert_eq!(send(contact(access2)).await.0, StatusCode::UNAUTHORIZED);
    sb.shutdown().await;
}

#[tokio::test]
async fn oauth_refuses_bad_authorizations() {
    let sb = start().await;
    let (c, base) = (client(), sb.url());
    let challenge = pkce_s256("v".repeat(50).as_str());
    let authorize =
        |params: &[(&str, &str)]| c.get(format!("{base}/oauth/authorize")).query(params);
    // Not a loopback redirect: refused without redirecting.
    let (status, _, e) = send(authorize(&[
        ("response_type", "code"),
        ("client_id", "x"),
        ("redirect_uri", "https://evil.example/cb"),
        ("code_challenge", &challenge),
        ("code_challenge_method", "S256"),
    ]))
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(e["error"], "invalid_request");
    // No PKCE: redirected with an error.
    let r = authorize(&[
        ("response_type", "code"),
        ("client_id", "x"),
        ("redirect_uri", "http://localhost:1234/cb"),
        ("state", "s"),
    ])
    .send()
    .await
    .unwrap();
    assert_eq!(r.status(), StatusCode::FOUND);
    let loc = r.headers()["location"].to_str().unwrap().to_string();
    assert!(
        loc.starts_with("http://localhost:1234/cb?error=invalid_request"),
        "{loc}"
    );
    assert!(loc.ends_with("&state=s"), "{loc}");
    // Denied on demand.
    c.post(format!("{base}/_sandbox/oauth"))
        .json(&json!({"deny_authorization": true}))
        .send()
        .await
        .unwrap();
    let r = authorize(&[
        ("response_type", "code"),
        ("client_id", "x"),
        ("redirect_uri", "http://127.0.0.1:1234/cb"),
        ("code_challenge", &challenge),
        ("code_challenge_method", "S256"),
    ])
    .send()
    .await
    .unwrap();
    assert!(r.headers()["location"]
        .to_str()
        .unwrap()
        .contains("error=access_denied"));
    let (status, _, e) = send(
        c.post(format!("{base}/oauth/token"))
            .form(&[("grant_type", "password")]),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(e["error"], "unsupported_grant_type");
    sb.shutdown().await;
}

#[tokio::test]
async fn static_tokens_listing_and_reserved_names() {
    let sb = start().await;
    let (c, base) = (client(), sb.url());
    let list = body(
        c.get(format!("{base}/_sandbox/vendors"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let apps: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["app"].as_str().unwrap())
        .collect();
    assert_eq!(apps, ["hubspot", "stripe", "slack", "sheets"]);
    assert_eq!(list["data"][0]["token_prefix"], "pat-sandbox-");

    // A registered token for Slack only.
    let r = c
        .post(format!("{base}/_sandbox/tokens"))
        .json(&json!({"token": "my-bot-token", "apps": ["slack"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let (_, _, ok) = send(
        c.post(format!("{base}/slack/api/auth.test"))
            .bearer_auth("my-bot-token"),
    )
    .await;
    assert_eq!(ok["ok"], true);
    let (status, _, _) = send(
        c.get(format!("{base}/stripe/v1/customers"))
            .bearer_auth("my-bot-token"),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // A prefix token is for its own app only; the bare prefix is not a token.
    let (status, _, _) = send(
        c.get(format!("{base}/stripe/v1/customers"))
            .bearer_auth(SLACK),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _, _) = send(
        c.get(format!("{base}/stripe/v1/customers"))
            .bearer_auth("sk_test_sandbox_"),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let r = c
        .post(format!("{base}/_sandbox/tokens"))
        .json(&json!({"token": "t", "apps": ["salesforce"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);

    c.post(format!("{base}/_sandbox/reset"))
        .send()
        .await
        .unwrap();
    let (_, _, e) = send(
        c.post(format!("{base}/slack/api/auth.test"))
            .bearer_auth("my-bot-token"),
    )
    .await;
    assert_eq!(e["error"], "invalid_auth");

    // The prefixes are not collections.
    let r = c
        .post(format!("{base}/hubspot"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        body(r).await["category"],
        "OBJECT_NOT_FOUND",
        "HubSpot's 404"
    );
    let r = c.get(format!("{base}/stripe/x")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert_eq!(
        body(r).await["error"]["message"],
        "Unrecognized request URL (GET: /x). Please see https://stripe.com/docs."
    );
    assert!(sb.state().all_records().keys().all(|k| k != "hubspot"));
    sb.shutdown().await;
}
