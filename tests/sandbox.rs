//! `fluxo sandbox` against a real server on 127.0.0.1:0 and a real HTTP client.

use std::time::{Duration, Instant};

use fluxo::sandbox::{Outcome, Sandbox, SandboxConfig, SandboxHandle};
use reqwest::{Client, Response, StatusCode};
use serde_json::{json, Value};

async fn start() -> SandboxHandle {
    let config = SandboxConfig {
        hold: Duration::from_secs(3),
        ..SandboxConfig::default()
    };
    Sandbox::start_with("127.0.0.1:0".parse().unwrap(), config)
        .await
        .unwrap()
}

fn client() -> Client {
    Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

async fn post(
    c: &Client,
    url: &str,
    key: Option<&str>,
    fault: Option<&str>,
    body: &str,
) -> Response {
    let mut rb = c
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string());
    if let Some(k) = key {
        rb = rb.header("Idempotency-Key", k);
    }
    if let Some(f) = fault {
        rb = rb.header("X-Sandbox-Fault", f);
    }
    rb.send().await.unwrap()
}

async fn json_of(r: Response) -> Value {
    r.json().await.unwrap()
}

fn is_problem(r: &Response) -> bool {
    r.headers()["content-type"] == "application/problem+json"
}

#[tokio::test]
async fn create_get_list_delete() {
    let sb = start().await;
    let c = client();
    let url = format!("{}/deals", sb.url());

    let r = post(
        &c,
        &url,
        None,
        None,
        r#"{"name": "Acme", "amount": 10, "id": "mine"}"#,
    )
    .await;
    assert_eq!(r.status(), StatusCode::CREATED);
    assert_eq!(r.headers()["location"], "/deals/deal_0001");
    assert!(r.headers().get("idempotent-replayed").is_none());
    let deal = json_of(r).await;
    assert_eq!(deal["id"], "deal_0001");
    assert_eq!(deal["name"], "Acme");
    assert!(deal["created_at"].as_str().unwrap().ends_with('Z'));

    let r = post(&c, &url, None, None, r#"{"name": "Beta"}"#).await;
    assert_eq!(json_of(r).await["id"], "deal_0002");

    let got = json_of(c.get(format!("{url}/deal_0001")).send().await.unwrap()).await;
    assert_eq!(got, deal);
    let list = json_of(c.get(&url).send().await.unwrap()).await;
    assert_eq!(list["object"], "list");
    assert_eq!(list["data"].as_array().unwrap().len(), 2);

    let r = c.delete(format!("{url}/deal_0001")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        json_of(r).await,
        json!({"id": "deal_0001", "deleted": true})
    );
    let r = c.get(format!("{url}/deal_0001")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    assert!(is_problem(&r));
    assert_eq!(json_of(r).await["code"], "not_found");

    // Generic collections, built-in ones listed even when empty.
    let r = post(
        &c,
        &format!("{}/ledger-entries", sb.url()),
        None,
        None,
        "{}",
    )
    .await;
    assert_eq!(json_of(r).await["id"], "ledger-entrie_0001");
    let all = json_of(
        c.get(format!("{}/_sandbox/records", sb.url()))
            .send()
            .await
            .unwrap(),
    )
    .await;
    for name in ["contacts", "deals", "invoices", "tickets", "ledger-entries"] {
        assert!(all.get(name).is_some(), "{name} missing from {all}");
    }
    sb.shutdown().await;
}

#[tokio::test]
async fn bad_requests_are_problems() {
    let sb = start().await;
    let c = client();
    let url = format!("{}/deals", sb.url());
    for (body, code) in [
        ("[1, 2]", "invalid_body"),
        ("not json", "invalid_json"),
        (r#"{"external_id": {"a": 1}}"#, "invalid_external_id"),
        (r#"{"external_id": ""}"#, "invalid_external_id"),
    ] {
        let r = post(&c, &url, None, None, body).await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{body}");
        assert!(is_problem(&r));
        assert_eq!(json_of(r).await["code"], code, "{body}");
    }
    let r = post(&c, &url, Some("has space"), None, "{}").await;
    assert_eq!(json_of(r).await["code"], "invalid_idempotency_key");
    let r = post(&c, &url, None, Some("explode"), "{}").await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert_eq!(json_of(r).await["code"], "invalid_fault");
    let r = post(&c, &format!("{}/Deals", sb.url()), None, None, "{}").await;
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    let r = c.get(format!("{}/healthz", sb.url())).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(sb.state().records("deals").is_empty());
    sb.shutdown().await;
}

#[tokio::test]
async fn idempotency_key_replays_and_conflicts() {
    let sb = start().await;
    let c = client();
    let url = format!("{}/deals", sb.url());

    let first = post(
        &c,
        &url,
        Some("k1"),
        None,
        r#"{"name": "Acme", "amount": 10}"#,
    )
    .await;
    assert_eq!(first.status(), StatusCode::CREATED);
    let first_body = first.bytes().await.unwrap();

    // Same key, same body modulo key order and whitespace: the stored answer, byte for byte.
    let again = post(
        &c,
        &url,
        Some("k1"),
        None,
        r#"{ "amount":10,"name":"Acme" }"#,
    )
    .await;
    assert_eq!(again.status(), StatusCode::CREATED);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.headers()["location"], "/deals/deal_0001");
    assert_eq!(again.bytes().await.unwrap(), first_body);
    // A quoted (RFC 8941 string) key is the same key.
    let quoted = post(
        &c,
        &url,
        Some("\"k1\""),
        None,
        r#"{"name": "Acme", "amount": 10}"#,
    )
    .await;
    assert_eq!(quoted.headers()["idempotent-replayed"], "true");

    // Same key, other body.
    let other = post(
        &c,
        &url,
        Some("k1"),
        None,
        r#"{"name": "Acme", "amount": 11}"#,
    )
    .await;
    assert_eq!(other.status(), StatusCode::CONFLICT);
    assert!(is_problem(&other));
    assert_eq!(json_of(other).await["code"], "idempotency_conflict");
    assert_eq!(sb.state().records("deals").len(), 1);

    // Keys are scoped per collection path.
    let r = post(
        &c,
        &format!("{}/contacts", sb.url()),
        Some("k1"),
        None,
        r#"{"x": 1}"#,
    )
    .await;
    assert_eq!(r.status(), StatusCode::CREATED);
    assert!(r.headers().get("idempotent-replayed").is_none());

    // A stored error is replayed too (Stripe saves 4xx results of requests that ran).
    let body = r#"{"external_id": "e-1"}"#;
    assert_eq!(
        post(&c, &url, None, None, body).await.status(),
        StatusCode::CREATED
    );
    let dup = post(&c, &url, Some("k2"), None, body).await;
    assert_eq!(dup.status(), StatusCode::CONFLICT);
    let dup2 = post(&c, &url, Some("k2"), None, body).await;
    assert_eq!(dup2.status(), StatusCode::CONFLICT);
    assert_eq!(dup2.headers()["idempotent-replayed"], "true");
    assert_eq!(json_of(dup2).await["code"], "duplicate_external_id");
    sb.shutdown().await;
}

#[tokio::test]
async fn concurrent_same_key_is_in_progress() {
    let sb = start().await;
    let c = client();
    let url = format!("{}/deals", sb.url());
    let (c1, u1) = (c.clone(), url.clone());
    let slow =
        tokio::spawn(
            async move { post(&c1, &u1, Some("k"), Some("slow:500"), r#"{"a": 1}"#).await },
        );
    // Wait until the first request holds the key.
    let t0 = Instant::now();
    while sb.state().idempotency_key_count() == 0 && t0.elapsed() < Duration::from_secs(2) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let second = post(&c, &url, Some("k"), None, r#"{"a": 1}"#).await;
    assert_eq!(second.status(), StatusCode::CONFLICT);
    assert_eq!(json_of(second).await["code"], "idempotency_in_progress");
    let first = slow.await.unwrap();
    assert_eq!(first.status(), StatusCode::CREATED);
    assert_eq!(first.headers()["x-sandbox-fault-applied"], "slow:500");
    let third = post(&c, &url, Some("k"), None, r#"{"a": 1}"#).await;
    assert_eq!(third.headers()["idempotent-replayed"], "true");
    assert_eq!(sb.state().records("deals").len(), 1);
    sb.shutdown().await;
}

#[tokio::test]
async fn external_id_is_unique_per_collection() {
    let sb = start().await;
    let c = client();
    let url = format!("{}/contacts", sb.url());
    let r = post(
        &c,
        &url,
        None,
        None,
        r#"{"external_id": "crm-1", "name": "A"}"#,
    )
    .await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let r = post(
        &c,
        &url,
        None,
        None,
        r#"{"external_id": "crm-1", "name": "B"}"#,
    )
    .await;
    assert_eq!(r.status(), StatusCode::CONFLICT);
    assert!(is_problem(&r));
    let p = json_of(r).await;
    assert_eq!(p["code"], "duplicate_external_id");
    assert_eq!(p["existing_id"], "contact_0001");
    // Numbers and strings compare by string form.
    assert_eq!(
        post(&c, &url, None, None, r#"{"external_id": 42}"#)
            .await
            .status(),
        StatusCode::CREATED
    );
    assert_eq!(
        post(&c, &url, None, None, r#"{"external_id": "42"}"#)
            .await
            .status(),
        StatusCode::CONFLICT
    );
    // Other collections are independent.
    let r = post(
        &c,
        &format!("{}/deals", sb.url()),
        None,
        None,
        r#"{"external_id": "crm-1"}"#,
    )
    .await;
    assert_eq!(r.status(), StatusCode::CREATED);
    assert_eq!(sb.state().records("contacts").len(), 2);
    sb.shutdown().await;
}

#[tokio::test]
async fn find_by_field() {
    let sb = start().await;
    let c = client();
    let url = format!("{}/contacts", sb.url());
    for body in [
        r#"{"email": "a@x.com", "plan": "pro", "seats": 3, "active": true}"#,
        r#"{"email": "b@x.com", "plan": "pro", "seats": 5, "active": false}"#,
        r#"{"email": "c@x.com", "plan": "free"}"#,
    ] {
        assert_eq!(
            post(&c, &url, None, None, body).await.status(),
            StatusCode::CREATED
        );
    }
    let find = |q: &'static str| {
        let (c, url) = (c.clone(), url.clone());
        async move {
            let v = json_of(c.get(format!("{url}?{q}")).send().await.unwrap()).await;
            v["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["email"].as_str().unwrap_or_default().to_string())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(find("email=b%40x.com").await, ["b@x.com"]);
    assert_eq!(find("plan=pro").await, ["a@x.com", "b@x.com"]);
    assert_eq!(find("plan=pro&active=true").await, ["a@x.com"]);
    assert_eq!(find("seats=5").await, ["b@x.com"]);
    assert_eq!(find("id=contact_0003").await, ["c@x.com"]);
    assert!(find("email=nobody").await.is_empty());
    assert!(find("missing=1").await.is_empty());
    sb.shutdown().await;
}

#[tokio::test]
async fn timeout_after_write_then_keyed_retry_replays() {
    let sb = start().await;
    let url = format!("{}/deals", sb.url());
    let impatient = Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let body = r#"{"name": "Acme", "amount": 10}"#;
    let t0 = Instant::now();
    let err = impatient
        .post(&url)
        .header("Idempotency-Key", "deal-acme")
        .header("X-Sandbox-Fault", "timeout_after_write")
        .body(body)
        .send()
        .await
        .unwrap_err();
    assert!(err.is_timeout(), "{err:?}");
    assert!(t0.elapsed() < Duration::from_secs(2));
    // The write happened even though the client saw nothing.
    let records = sb.state().records("deals");
    assert_eq!(records.len(), 1);
    assert_eq!(records[0]["id"], "deal_0001");

    // The retry with the same key gets the original record; no second record.
    let c = client();
    let r = post(&c, &url, Some("deal-acme"), None, body).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    assert_eq!(r.headers()["idempotent-replayed"], "true");
    assert_eq!(json_of(r).await["id"], "deal_0001");
    assert_eq!(sb.state().records("deals").len(), 1);

    // Without a key, the same retry is the classic duplicate.
    let err = impatient
        .post(&url)
        .header("X-Sandbox-Fault", "timeout_after_write")
        .body(body)
        .send()
        .await
        .unwrap_err();
    assert!(err.is_timeout());
    assert_eq!(
        post(&c, &url, None, None, body).await.status(),
        StatusCode::CREATED
    );
    assert_eq!(sb.state().records("deals").len(), 3);

    let log = sb.state().log();
    assert_eq!(log[0].outcome, Outcome::Held);
    assert_eq!(log[0].status, None);
    assert_eq!(log[0].fault.as_deref(), Some("timeout_after_write"));
    assert_eq!(log[0].idempotency_key.as_deref(), Some("deal-acme"));
    assert_eq!(log[0].record_id.as_deref(), Some("deal_0001"));
    assert!(log[1].replayed);
    assert_eq!(log[1].status, Some(201));
    let t1 = Instant::now();
    sb.shutdown().await; // releases the held requests
    assert!(t1.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn error_500_before_write_stores_nothing() {
    let sb = start().await;
    let c = client();
    let url = format!("{}/deals", sb.url());
    let r = post(
        &c,
        &url,
        Some("k"),
        Some("error_500_before_write"),
        r#"{"a": 1}"#,
    )
    .await;
    assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert!(is_problem(&r));
    assert_eq!(
        r.headers()["x-sandbox-fault-applied"],
        "error_500_before_write"
    );
    assert_eq!(json_of(r).await["code"], "injected_error");
    assert!(sb.state().records("deals").is_empty());
    // The key was not used up: the retry runs and creates.
    let r = post(&c, &url, Some("k"), None, r#"{"a": 1}"#).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    assert!(r.headers().get("idempotent-replayed").is_none());
    assert_eq!(sb.state().records("deals").len(), 1);
    sb.shutdown().await;
}

#[tokio::test]
async fn error_500_after_write_keeps_the_record_and_the_result() {
    let sb = start().await;
    let c = client();
    let url = format!("{}/deals", sb.url());
    let r = post(
        &c,
        &url,
        Some("k"),
        Some("error_500_after_write"),
        r#"{"a": 1}"#,
    )
    .await;
    assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(sb.state().records("deals").len(), 1);
    // Stripe semantics: the request ran, so its 500 is the key's result; no duplicate.
    let r = post(&c, &url, Some("k"), None, r#"{"a": 1}"#).await;
    assert_eq!(r.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(r.headers()["idempotent-replayed"], "true");
    assert_eq!(sb.state().records("deals").len(), 1);
    // Without a key, the retry duplicates.
    post(&c, &url, None, Some("error_500_after_write"), r#"{"a": 1}"#).await;
    post(&c, &url, None, None, r#"{"a": 1}"#).await;
    assert_eq!(sb.state().records("deals").len(), 3);
    sb.shutdown().await;
}

#[tokio::test]
async fn rate_limit_429_with_retry_after() {
    let sb = start().await;
    let c = client();
    let url = format!("{}/invoices", sb.url());
    let r = post(&c, &url, Some("k"), Some("rate_limit_429"), r#"{"a": 1}"#).await;
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers()["retry-after"], "1");
    assert_eq!(json_of(r).await["code"], "rate_limited");
    let r = post(&c, &url, Some("k"), Some("rate_limit_429:7"), r#"{"a": 1}"#).await;
    assert_eq!(r.headers()["retry-after"], "7");
    assert!(sb.state().records("invoices").is_empty());
    let r = c
        .get(&url)
        .header("X-Sandbox-Fault", "rate_limit_429")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    let r = post(&c, &url, Some("k"), None, r#"{"a": 1}"#).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    assert!(r.headers().get("idempotent-replayed").is_none());
    sb.shutdown().await;
}

#[tokio::test]
async fn slow_answers_late_but_normally() {
    let sb = start().await;
    let c = client();
    let t0 = Instant::now();
    let r = post(
        &c,
        &format!("{}/tickets", sb.url()),
        None,
        Some("slow:250"),
        "{}",
    )
    .await;
    assert!(t0.elapsed() >= Duration::from_millis(250));
    assert_eq!(r.status(), StatusCode::CREATED);
    assert_eq!(json_of(r).await["id"], "ticket_0001");
    sb.shutdown().await;
}

#[tokio::test]
async fn drop_connection_is_a_connection_error() {
    let sb = start().await;
    let c = client();
    let url = format!("{}/deals", sb.url());
    let t0 = Instant::now();
    let err = c
        .post(&url)
        .header("Idempotency-Key", "k")
        .header("X-Sandbox-Fault", "drop_connection")
        .body(r#"{"a": 1}"#)
        .send()
        .await
        .unwrap_err();
    assert!(!err.is_timeout(), "{err:?}");
    assert!(err.is_request() || err.is_connect(), "{err:?}");
    assert!(t0.elapsed() < Duration::from_secs(1));
    assert!(sb.state().records("deals").is_empty());

    // After the write: the record exists and the key holds its result.
    let err = c
        .post(&url)
        .header("Idempotency-Key", "k")
        .header("X-Sandbox-Fault", "drop_connection_after_write")
        .body(r#"{"a": 1}"#)
        .send()
        .await
        .unwrap_err();
    assert!(!err.is_timeout(), "{err:?}");
    assert_eq!(sb.state().records("deals").len(), 1);

    // The server is fine and the same client recovers on a fresh connection.
    let r = post(&c, &url, Some("k"), None, r#"{"a": 1}"#).await;
    assert_eq!(r.headers()["idempotent-replayed"], "true");
    assert_eq!(json_of(r).await["id"], "deal_0001");
    let log = sb.state().log();
    assert_eq!(log[0].outcome, Outcome::Dropped);
    assert_eq!(log[1].outcome, Outcome::Dropped);
    assert_eq!(log[1].record_id.as_deref(), Some("deal_0001"));
    sb.shutdown().await;
}

#[tokio::test]
async fn route_fault_applies_exactly_times() {
    let sb = start().await;
    let c = client();
    let base = sb.url();
    let url = format!("{base}/deals");
    let r = c
        .post(format!("{base}/_sandbox/faults"))
        .json(&json!({"route": "POST /deals", "fault": "error_500_before_write", "times": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let rule = json_of(r).await;
    assert_eq!(rule["remaining"], 1);

    // Other routes are untouched and don't use it up.
    assert_eq!(
        post(&c, &format!("{base}/contacts"), None, None, "{}")
            .await
            .status(),
        StatusCode::CREATED
    );
    assert_eq!(c.get(&url).send().await.unwrap().status(), StatusCode::OK);

    assert_eq!(
        post(&c, &url, None, None, "{}").await.status(),
        StatusCode::INTERNAL_SERVER_ERROR
    );
    assert_eq!(
        post(&c, &url, None, None, "{}").await.status(),
        StatusCode::CREATED
    );
    assert_eq!(
        post(&c, &url, None, None, "{}").await.status(),
        StatusCode::CREATED
    );
    let rules = json_of(
        c.get(format!("{base}/_sandbox/faults"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(rules["data"], json!([]));

    // Without times: until cleared. The header wins, and `none` skips the rule.
    let r = c
        .post(format!("{base}/_sandbox/faults"))
        .json(&json!({"route": "POST /deals", "fault": "rate_limit_429:3"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    for _ in 0..2 {
        let r = post(&c, &url, None, None, "{}").await;
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()["retry-after"], "3");
    }
    assert_eq!(
        post(&c, &url, None, Some("none"), "{}").await.status(),
        StatusCode::CREATED
    );
    assert_eq!(
        post(&c, &url, None, Some("error_500_before_write"), "{}")
            .await
            .status(),
        StatusCode::INTERNAL_SERVER_ERROR
    );
    let r = c
        .delete(format!("{base}/_sandbox/faults"))
        .send()
        .await
        .unwrap();
    assert_eq!(json_of(r).await["cleared"], 1);
    assert_eq!(
        post(&c, &url, None, None, "{}").await.status(),
        StatusCode::CREATED
    );

    // Bad rules are refused.
    for bad in [
        json!({"route": "POST /deals", "fault": "explode"}),
        json!({"route": "deals", "fault": "drop_connection"}),
        json!({"route": "POST /deals", "fault": "drop_connection", "times": 0}),
    ] {
        let r = c
            .post(format!("{base}/_sandbox/faults"))
            .json(&bad)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(json_of(r).await["code"], "invalid_fault_rule");
    }
    assert_eq!(sb.state().records("deals").len(), 4);
    sb.shutdown().await;
}

#[tokio::test]
async fn log_records_and_reset_endpoints() {
    let sb = start().await;
    let c = client();
    let base = sb.url();
    post(&c, &format!("{base}/deals"), Some("k"), None, r#"{"a": 1}"#).await;
    c.get(format!("{base}/deals?a=1")).send().await.unwrap();
    c.get(format!("{base}/healthz")).send().await.unwrap();

    let log = json_of(c.get(format!("{base}/_sandbox/log")).send().await.unwrap()).await;
    let entries = log["data"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{log}");
    assert_eq!(entries[0]["method"], "POST");
    assert_eq!(entries[0]["path"], "/deals");
    assert_eq!(entries[0]["idempotency_key"], "k");
    assert_eq!(entries[0]["status"], 201);
    assert_eq!(entries[0]["outcome"], "answered");
    assert_eq!(entries[0]["fault"], Value::Null);
    assert!(entries[0]["at"].is_string());
    assert_eq!(entries[1]["path"], "/deals?a=1");

    let records = json_of(
        c.get(format!("{base}/_sandbox/records"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(records["deals"][0]["id"], "deal_0001");

    let r = c
        .post(format!("{base}/_sandbox/reset"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(sb.state().records("deals").is_empty());
    assert!(sb.state().log().is_empty());
    // Keys are forgotten and counters restart.
    let r = post(&c, &format!("{base}/deals"), Some("k"), None, r#"{"a": 2}"#).await;
    assert_eq!(r.status(), StatusCode::CREATED);
    assert_eq!(json_of(r).await["id"], "deal_0001");
    sb.shutdown().await;
}

#[tokio::test]
async fn shutdown_releases_held_requests() {
    // Default hold (30 s): only shutdown can end this quickly.
    let sb = Sandbox::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let url = format!("{}/deals", sb.url());
    let c = client();
    let held = tokio::spawn(async move {
        c.post(&url)
            .header("X-Sandbox-Fault", "timeout_after_write")
            .body("{}")
            .send()
            .await
    });
    // Wait until the request is held.
    let t0 = Instant::now();
    while sb.state().log().is_empty() && t0.elapsed() < Duration::from_secs(2) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(sb.state().log()[0].outcome, Outcome::Held);
    let t1 = Instant::now();
    sb.shutdown().await;
    assert!(t1.elapsed() < Duration::from_secs(2), "{:?}", t1.elapsed());
    let err = held.await.unwrap().unwrap_err();
    assert!(!err.is_timeout(), "{err:?}");
}

/// `GET /{collection}` pages like Stripe's lists: `created[gte]` (unix seconds or RFC 3339),
/// `limit`, `starting_after`, `has_more`; oldest first.
#[tokio::test]
async fn list_pages_by_created_gte_limit_and_starting_after() {
    let sb = start().await;
    let c = client();
    let url = format!("{}/payments", sb.url());
    let mut ids = Vec::new();
    for i in 0..3 {
        let r = post(&c, &url, None, None, &format!(r#"{{"amount": {i}}}"#)).await;
        ids.push(json_of(r).await["id"].as_str().unwrap().to_string());
    }
    let get = |q: String| {
        let c = c.clone();
        let url = url.clone();
        async move { c.get(format!("{url}?{q}")).send().await.unwrap() }
    };
    let page_ids = |v: &Value| -> Vec<String> {
        v["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect()
    };
    let first = json_of(get("limit=2".into()).await).await;
    assert_eq!(page_ids(&first), ids[..2]);
    assert_eq!(first["has_more"], true);
    let next = json_of(get(format!("limit=2&starting_after={}", ids[1])).await).await;
    assert_eq!(page_ids(&next), ids[2..]);
    assert_eq!(next["has_more"], false);
    let all = json_of(get("created%5Bgte%5D=0".into()).await).await;
    assert_eq!(page_ids(&all), ids);
    assert_eq!(all["has_more"], false, "without limit: every record");
    let none = json_of(get("created%5Bgte%5D=4102444800".into()).await).await;
    assert!(page_ids(&none).is_empty());
    let since = json_of(get("created%5Bgte%5D=2000-01-01T00:00:00Z&amount=1".into()).await).await;
    assert_eq!(page_ids(&since), ids[1..2], "paging and filters combine");
    let bad = get("limit=0".into()).await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    assert!(is_problem(&bad));
    let bad = get("created%5Bgte%5D=yesterday".into()).await;
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    assert!(json_of(bad).await["detail"]
        .as_str()
        .unwrap()
        .contains("created[gte]"));
}
