//! The REST API over real HTTP on port 0: idempotent run starts (case C3, in-progress, the
//! 24 h window, key validation, token scope), auth, body limit.

mod common;

use std::time::Duration;

use common::server::{api_workflow, slow_api_workflow, GatedMock, Setup, TestServer, TOKEN};
use fluxo::clock::Clock;
use fluxo::run::{RunStatus, Trigger};
use reqwest::Method;
use serde_json::{json, Value};

const DAY: Duration = Duration::from_secs(24 * 3600);
const SECOND: Duration = Duration::from_secs(1);

async fn two_workflows() -> TestServer {
    Setup::new()
        .workflow(api_workflow("wf1"))
        .workflow(api_workflow("wf2"))
        .start()
        .await
}

async fn start_run(
    s: &TestServer,
    wf: &str,
    key: Option<&str>,
    body: &str,
) -> common::server::Answer {
    let headers: Vec<(&str, &str)> = key
        .map(|k| vec![("idempotency-key", k)])
        .unwrap_or_default();
    s.api(
        Method::POST,
        &format!("/workflows/{wf}/runs"),
        &headers,
        Some(body),
    )
    .await
}

async fn all_runs(s: &TestServer) -> usize {
    s.runs_of("wf1").await.len() + s.runs_of("wf2").await.len()
}

/// C3: same key with another body or another path → 409 `idempotency_conflict` and no run; the
/// first request again with its keys reordered and re-indented → the same answer byte for byte
/// with `Idempotent-Replayed: true`; one run in total.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c3_same_key_different_request() {
    let s = two_workflows().await;
    let first = start_run(&s, "wf1", Some("A"), r#"{"input":{"invoice_id":"INV-1"}}"#).await;
    assert_eq!(first.status.as_u16(), 200, "{}", first.text);
    assert_eq!(first.header("idempotent-replayed"), None);
    let run = first.json();
    let r = run["id"].as_str().unwrap().to_string();
    assert_eq!(run["status"], "succeeded");
    assert_eq!(run["trigger"], "api");
    assert_eq!(run["idempotency_key"], "A");

    let other_body = start_run(&s, "wf1", Some("A"), r#"{"input":{"invoice_id":"INV-2"}}"#).await;
    other_body.problem(409, "idempotency_conflict");
    let other_path = start_run(&s, "wf2", Some("A"), r#"{"input":{"invoice_id":"INV-1"}}"#).await;
    other_path.problem(409, "idempotency_conflict");
    assert_eq!(all_runs(&s).await, 1, "a conflict starts no run");

    let again = start_run(
        &s,
        "wf1",
        Some("A"),
        "{\n    \"input\" : {\n        \"invoice_id\" : \"INV-1\"\n    }\n}\n",
    )
    .await;
    assert_eq!(again.status.as_u16(), 200);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.text, first.text, "the stored answer, byte for byte");
    assert_eq!(again.json()["id"], r.as_str());
    assert_eq!(all_runs(&s).await, 1, "one run in total");

    // Key order does not count either (several keys, reordered).
    let b1 = start_run(
        &s,
        "wf1",
        Some("B"),
        r#"{"input":{"invoice_id":"INV-3","amount":10,"customer":{"name":"Ada","id":"c1"}}}"#,
    )
    .await;
    assert_eq!(b1.status.as_u16(), 200);
    let b2 = start_run(
        &s,
        "wf1",
        Some("B"),
        r#"{ "input": { "customer": { "id": "c1", "name": "Ada" }, "amount": 10, "invoice_id": "INV-3" } }"#,
    )
    .await;
    assert_eq!(b2.header("idempotent-replayed"), Some("true"));
    assert_eq!(b2.text, b1.text);
    // ... but values do (10 vs 10.5, array order).
    start_run(
        &s,
        "wf1",
        Some("B"),
        r#"{"input":{"invoice_id":"INV-3","amount":10.5,"customer":{"name":"Ada","id":"c1"}}}"#,
    )
    .await
    .problem(409, "idempotency_conflict");
    assert_eq!(all_runs(&s).await, 2);
}

/// While the first request with a key is still running, a second → 409
/// `idempotency_in_progress`; once it finished, the same request replays the first run with
/// `Idempotent-Replayed: true`. The (gated) downstream was called once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_key_while_running_is_in_progress_then_replayed() {
    let mock = GatedMock::start().await;
    let s = std::sync::Arc::new(
        Setup::new()
            .workflow(slow_api_workflow("slow", &format!("{}/deals", mock.url)))
            .start()
            .await,
    );
    let body = r#"{"input":{"invoice_id":"INV-9"}}"#;
    let first = {
        let s = s.clone();
        tokio::spawn(async move { start_run(&s, "slow", Some("K-9"), body).await })
    };
    mock.wait_arrival().await;

    let second = start_run(&s, "slow", Some("K-9"), body).await;
    let doc = second.problem(409, "idempotency_in_progress");
    assert!(doc["detail"].as_str().unwrap().contains("K-9"));
    // Another request under the same key is a conflict even while the first runs.
    start_run(
        &s,
        "slow",
        Some("K-9"),
        r#"{"input":{"invoice_id":"INV-10"}}"#,
    )
    .await
    .problem(409, "idempotency_conflict");
    assert_eq!(mock.hits(), 1);

    mock.release(1);
    let first = first.await.unwrap();
    assert_eq!(first.status.as_u16(), 200, "{}", first.text);
    let run = first.json();
    assert_eq!(run["status"], "succeeded", "{}", first.text);

    let third = start_run(&s, "slow", Some("K-9"), body).await;
    assert_eq!(third.status.as_u16(), 200);
    assert_eq!(third.header("idempotent-replayed"), Some("true"));
    assert_eq!(third.json()["id"], run["id"]);
    assert_eq!(third.text, first.text);
    assert_eq!(mock.hits(), 1, "the downstream was called once");
    assert_eq!(s.runs_of("slow").await.len(), 1);
}

/// A client that gives up (its timeout) while its run is still going does not release the key:
/// its retry is `409 idempotency_in_progress`, and after the run ends the retry gets that run.
/// The downstream is called once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_keeps_its_key() {
    let mock = GatedMock::start().await;
    let s = Setup::new()
        .workflow(slow_api_workflow("slow", &format!("{}/deals", mock.url)))
        .start()
        .await;
    let body = r#"{"input":{"invoice_id":"INV-11"}}"#;
    let impatient = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let request = impatient
        .post(format!("{}/api/v1/workflows/slow/runs", s.url))
        .bearer_auth(TOKEN)
        .header("idempotency-key", "K-11")
        .body(body)
        .send();
    let client = tokio::spawn(request);
    mock.wait_arrival().await;
    let gave_up = client.await.unwrap();
    assert!(gave_up.is_err(), "the client timed out");
    assert_eq!(mock.hits(), 1);

    start_run(&s, "slow", Some("K-11"), body)
        .await
        .problem(409, "idempotency_in_progress");
    mock.release(1);
    let mut replayed = None;
    for _ in 0..500 {
        let a = start_run(&s, "slow", Some("K-11"), body).await;
        if a.status.as_u16() == 200 {
            replayed = Some(a);
            break;
        }
        a.problem(409, "idempotency_in_progress");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let replayed = replayed.expect("the first run finished and its answer replays");
    assert_eq!(replayed.header("idempotent-replayed"), Some("true"));
    assert_eq!(replayed.json()["status"], "succeeded");
    assert_eq!(mock.hits(), 1, "the downstream was called once");
    assert_eq!(s.runs_of("slow").await.len(), 1);
}

/// An in-progress record whose owner died (a crash) blocks the key until its lease passes,
/// then the request is taken over and runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_owners_lease_is_taken_over() {
    use fluxo::server::{auth::token_scope, idempotency::fingerprint};
    use fluxo::store::{ApiRecord, ApiRecordState};
    let s = two_workflows().await;
    let body = r#"{"input":{"invoice_id":"INV-12"}}"#;
    let now = s.clock.now_ms();
    let lease_ms = 50_000 + 30_000;
    let record = ApiRecord {
        scope: token_scope(TOKEN),
        key: "K-12".into(),
        fingerprint: fingerprint(
            "POST",
            "/api/v1/workflows/wf1/runs",
            &serde_json::from_str(body).unwrap(),
        ),
        created_at: now,
        expires_at: now + 24 * 3600 * 1000,
        state: ApiRecordState::InProgress {
            owner: "a-process-that-died".into(),
            lease_until: now + lease_ms,
        },
    };
    s.store.api_begin(&record, now).await.unwrap();
    start_run(&s, "wf1", Some("K-12"), body)
        .await
        .problem(409, "idempotency_in_progress");
    s.advance(Duration::from_millis(lease_ms as u64 - 1000));
    start_run(&s, "wf1", Some("K-12"), body)
        .await
        .problem(409, "idempotency_in_progress");
    s.advance(2 * SECOND);
    let a = start_run(&s, "wf1", Some("K-12"), body).await;
    assert_eq!(a.status.as_u16(), 200, "{}", a.text);
    assert_eq!(a.header("idempotent-replayed"), None);
    let b = start_run(&s, "wf1", Some("K-12"), body).await;
    assert_eq!(b.header("idempotent-replayed"), Some("true"));
    assert_eq!(s.runs_of("wf1").await.len(), 1);
}

/// API keys live 24 h: at 24 h - 1 s the request replays, at 24 h + 1 s it is new.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_window_is_24h() {
    let s = two_workflows().await;
    let body = r#"{"input":{"invoice_id":"INV-1"}}"#;
    let first = start_run(&s, "wf1", Some("W"), body).await;
    let r = first.json()["id"].clone();
    s.advance(DAY - SECOND);
    let a = start_run(&s, "wf1", Some("W"), body).await;
    assert_eq!(a.header("idempotent-replayed"), Some("true"));
    assert_eq!(a.json()["id"], r);
    // A different request under the key is still a conflict at 24 h - 1 s.
    start_run(&s, "wf1", Some("W"), r#"{"input":{}}"#)
        .await
        .problem(409, "idempotency_conflict");
    s.advance(2 * SECOND);
    let b = start_run(&s, "wf1", Some("W"), body).await;
    assert_eq!(b.status.as_u16(), 200);
    assert_eq!(b.header("idempotent-replayed"), None);
    assert_ne!(b.json()["id"], r, "24 h + 1 s is a new request");
    assert_eq!(s.runs_of("wf1").await.len(), 2);
}

/// Every invalid key form → 400 `invalid_idempotency_key`, no run; the quoted form is accepted
/// as the same key as the bare form.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_invalid_keys() {
    let s = two_workflows().await;
    let body = r#"{"input":{"invoice_id":"INV-1"}}"#;
    let auth = format!("Bearer {TOKEN}");
    let long = "k".repeat(256);
    let cases: Vec<BadKeyCase> = vec![
        ("empty", vec![("idempotency-key", b"")]),
        ("256 chars", vec![("idempotency-key", long.as_bytes())]),
        ("non-ASCII", vec![("idempotency-key", "clé".as_bytes())]),
        ("space", vec![("idempotency-key", b"a b")]),
        ("tab", vec![("idempotency-key", b"a\tb")]),
        (
            "quote inside quotes",
            vec![("idempotency-key", br#""a"b""#)],
        ),
        ("bad escape", vec![("idempotency-key", br#""a\nb""#)]),
        ("unterminated quote", vec![("idempotency-key", br#""abc"#)]),
        (
            "duplicated header",
            vec![("idempotency-key", b"k1"), ("idempotency-key", b"k2")],
        ),
    ];
    for (what, mut headers) in cases {
        headers.push(("authorization", auth.as_bytes()));
        let a = s
            .send(
                Method::POST,
                "/api/v1/workflows/wf1/runs",
                &headers,
                Some(body.as_bytes().to_vec()),
            )
            .await;
        assert_eq!(a.status.as_u16(), 400, "{what}: {}", a.text);
        a.problem(400, "invalid_idempotency_key");
    }
    assert_eq!(s.runs_of("wf1").await.len(), 0);
    let q = start_run(&s, "wf1", Some(r#""key-q""#), body).await;
    assert_eq!(q.status.as_u16(), 200);
    assert_eq!(q.json()["idempotency_key"], "key-q");
    let bare = start_run(&s, "wf1", Some("key-q"), body).await;
    assert_eq!(bare.header("idempotent-replayed"), Some("true"));
    assert_eq!(s.runs_of("wf1").await.len(), 1);
}

/// Keys are scoped to the API token: after the token changes, the same key is a new request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_are_scoped_to_the_token() {
    let s = two_workflows().await;
    let body = r#"{"input":{}}"#;
    let a = start_run(&s, "wf1", Some("T"), body).await;
    s.running().state.set_token("another-token".into());
    let b = s
        .send(
            Method::POST,
            "/api/v1/workflows/wf1/runs",
            &[
                ("authorization", b"Bearer another-token"),
                ("idempotency-key", b"T"),
            ],
            Some(body.as_bytes().to_vec()),
        )
        .await;
    assert_eq!(b.status.as_u16(), 200, "{}", b.text);
    assert_eq!(b.header("idempotent-replayed"), None);
    assert_ne!(a.json()["id"], b.json()["id"]);
    // The old token no longer opens the API.
    start_run(&s, "wf1", None, body)
        .await
        .problem(401, "unauthorized");
}

/// `Prefer: respond-async` → 202 with the queued run and `Location`; the run then executes;
/// with a key, the 202 answer is what replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn respond_async_queues_the_run() {
    let s = two_workflows().await;
    let body = r#"{"input":{"invoice_id":"INV-7"}}"#;
    let a = s
        .api(
            Method::POST,
            "/workflows/wf1/runs",
            &[("prefer", "respond-async"), ("idempotency-key", "async-1")],
            Some(body),
        )
        .await;
    assert_eq!(a.status.as_u16(), 202, "{}", a.text);
    let run = a.json();
    assert_eq!(run["status"], "queued");
    let id = run["id"].as_str().unwrap();
    assert_eq!(
        a.header("location"),
        Some(format!("/api/v1/runs/{id}").as_str())
    );
    let done = s.wait_final(id).await;
    assert_eq!(done.status, RunStatus::Succeeded);
    assert_eq!(done.trigger, Trigger::Api);
    let detail = s.get_json(&format!("/runs/{id}")).await;
    assert_eq!(detail["status"], "succeeded");
    assert_eq!(detail["steps"][1]["output"]["invoice"], "INV-7");

    let again = s
        .api(
            Method::POST,
            "/workflows/wf1/runs",
            &[("prefer", "respond-async"), ("idempotency-key", "async-1")],
            Some(body),
        )
        .await;
    assert_eq!(again.status.as_u16(), 202);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.text, a.text);
    assert_eq!(s.runs_of("wf1").await.len(), 1);
}

/// Management routes need the bearer token: missing or wrong → 401 problem+json, on every
/// route; `/healthz` and the OpenAPI document are open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_is_required_on_management_routes() {
    let s = two_workflows().await;
    let routes: &[(Method, &str)] = &[
        (Method::GET, "/api/v1/workflows"),
        (Method::GET, "/api/v1/workflows/wf1"),
        (Method::PUT, "/api/v1/workflows/wf1"),
        (Method::DELETE, "/api/v1/workflows/wf1"),
        (Method::POST, "/api/v1/workflows/validate"),
        (Method::POST, "/api/v1/workflows/wf1/dry-run"),
        (Method::POST, "/api/v1/workflows/wf1/runs"),
        (Method::GET, "/api/v1/runs"),
        (Method::GET, "/api/v1/runs/stats"),
        (Method::GET, "/api/v1/runs/x"),
        (Method::POST, "/api/v1/runs/x/replay"),
        (Method::GET, "/api/v1/memory/ns"),
        (Method::GET, "/api/v1/memory/ns/k"),
        (Method::DELETE, "/api/v1/memory/ns/k"),
        (Method::GET, "/api/v1/step-kinds"),
        (Method::GET, "/api/v1/events"),
    ];
    for (m, path) in routes {
        let missing = s.send(m.clone(), path, &[], Some(b"{}".to_vec())).await;
        missing.problem(401, "unauthorized");
        let wrong = s
            .send(
                m.clone(),
                path,
                &[("authorization", b"Bearer nope")],
                Some(b"{}".to_vec()),
            )
            .await;
        wrong.problem(401, "unauthorized");
        let not_bearer = s
            .send(
                m.clone(),
                path,
                &[("authorization", TOKEN.as_bytes())],
                Some(b"{}".to_vec()),
            )
            .await;
        not_bearer.problem(401, "unauthorized");
    }
    assert_eq!(s.runs_of("wf1").await.len(), 0, "nothing ran unauthorised");
    assert!(
        s.workflows_dir.path().join("wf1.json").exists(),
        "nothing deleted"
    );
    let h = s.send(Method::GET, "/healthz", &[], None).await;
    assert_eq!(h.status.as_u16(), 200);
    assert_eq!(h.json()["status"], "ok");
    let o = s.send(Method::GET, "/api/v1/openapi.json", &[], None).await;
    assert_eq!(o.status.as_u16(), 200);
}

/// Bodies over the limit → 413 problem+json on the API too; a bad body → 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_body_limit_and_bad_bodies() {
    let s = Setup::new()
        .workflow(api_workflow("wf1"))
        .options(|o| o.body_limit_bytes = 2048)
        .start()
        .await;
    let big = json!({"input": {"pad": "x".repeat(4096)}}).to_string();
    start_run(&s, "wf1", Some("big"), &big)
        .await
        .problem(413, "payload_too_large");
    start_run(&s, "wf1", None, "{nope")
        .await
        .problem(400, "invalid_json");
    start_run(&s, "wf1", None, r#"{"inptu":{}}"#)
        .await
        .problem(400, "invalid_body");
    start_run(&s, "nope", None, "{}")
        .await
        .problem(404, "workflow_not_found");
    assert_eq!(s.runs_of("wf1").await.len(), 0);
    // The refused request did not burn the key.
    let ok = start_run(&s, "wf1", Some("big"), r#"{"input":{}}"#).await;
    assert_eq!(ok.status.as_u16(), 200, "{}", ok.text);
}

/// The clock the tests use is the one the server stamps runs with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_are_stamped_with_the_server_clock() {
    let s = two_workflows().await;
    let a = start_run(&s, "wf1", None, "{}").await;
    let run: Value = a.json();
    let created = fluxo::clock::parse_rfc3339(run["created_at"].as_str().unwrap()).unwrap();
    assert_eq!(created, s.clock.now_ms());
}

/// A named set of request headers (name, raw value bytes).
type BadKeyCase<'a> = (&'a str, Vec<(&'a str, &'a [u8])>);

/// `POST /workflows/validate` (and a save) name every `env.NAME` the settings lack as an
/// `env_unset` warning on the first step that uses it; a set one is not named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_names_unset_env_variables() {
    let s = Setup::new()
        .env("CRM_URL", "http://127.0.0.1:9")
        .start()
        .await;
    let wf = json!({
        "id": "env-use", "name": "env use", "version": 0,
        "steps": [
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "a", "kind": "http_request", "config": {"method": "GET", "url": "{{ env.CRM_URL }}/x"}},
            {"id": "b", "kind": "http_request", "config": {"method": "GET", "url": "{{ env.LEDGER_URL }}/y",
                "headers": {"X-Also": "{{ env['LEDGER_URL'] }}"}}}
        ],
        "edges": [{"from": "start", "to": "a"}, {"from": "a", "to": "b"}]
    });
    for (method, path) in [
        (Method::POST, "/workflows/validate"),
        (Method::PUT, "/workflows/env-use"),
    ] {
        let a = s.api(method, path, &[], Some(&wf.to_string())).await;
        assert!(a.status.is_success(), "{path}: {} {}", a.status, a.text);
        let body = a.json();
        assert_eq!(body["valid"], true, "{body}");
        let unset: Vec<&Value> = body["problems"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["code"] == "env_unset")
            .collect();
        assert_eq!(unset.len(), 1, "{path}: {body}");
        assert_eq!(unset[0]["severity"], "warning");
        assert_eq!(unset[0]["step"], "b");
        assert_eq!(unset[0]["path"], "steps[2].config");
        assert!(unset[0]["message"]
            .as_str()
            .unwrap()
            .starts_with("env.LEDGER_URL is not set"));
    }
}

/// `POST /templates/preview` renders one template as a step would: against the given input
/// and earlier outputs, a condition as a boolean, an unset variable as its dry-run placeholder
/// (named), and a missing path or a syntax error as an `error` (200: the editor shows it
/// under the field); a body that is not a preview request is a 400 problem.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn template_preview_renders_like_a_step() {
    let s = Setup::new()
        .env("REGION", "eu")
        .env("CRM_API_KEY", "sk_live_0123456789abcdef")
        .start()
        .await;
    let preview = |body: Value| {
        let s = &s;
        async move {
            let a = s
                .api(
                    Method::POST,
                    "/templates/preview",
                    &[],
                    Some(&body.to_string()),
                )
                .await;
            assert!(a.status.is_success(), "{} {}", a.status, a.text);
            a.json()
        }
    };
    let v = preview(
        json!({"template": "deal-{{ input.data.id }}-{{ env.REGION }}-{{ env.CRM_URL }}",
        "input": {"data": {"id": "in_1"}}}),
    )
    .await;
    assert_eq!(
        v,
        json!({"value": "deal-in_1-eu-https://crm-url.unset.invalid", "env_unset": ["CRM_URL"]})
    );
    let v = preview(json!({"template": "{{ steps.list.output.body.data }}",
        "steps": {"list": {"body": {"data": [1, 2]}}}}))
    .await;
    assert_eq!(v["value"], json!([1, 2]));
    let v = preview(
        json!({"template": "steps.seen.output.written == false", "expression": true,
        "steps": {"seen": {"written": false}}}),
    )
    .await;
    assert_eq!(v["value"], true);
    // A secret is never shown: masked as run records mask it.
    let v = preview(json!({"template": "Bearer {{ env.CRM_API_KEY }}"})).await;
    let shown = v["value"].as_str().unwrap();
    assert!(!shown.contains("sk_live_0123456789abcdef"), "{v}");
    assert!(shown.starts_with("Bearer "), "{v}");
    let v = preview(json!({"template": "{{ input.nope }}"})).await;
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .starts_with("missing value `input.nope`"),
        "{v}"
    );
    let v = preview(json!({"template": "{{ input. }}"})).await;
    assert!(
        v["error"]
            .as_str()
            .unwrap()
            .starts_with("template syntax error"),
        "{v}"
    );
    let a = s
        .api(
            Method::POST,
            "/templates/preview",
            &[],
            Some(r#"{"tpl": "x"}"#),
        )
        .await;
    a.problem(400, "bad_body");
}

/// A run started by a person (the editor's Run button) says so: `{"trigger": "manual"}`
/// records trigger `manual`; without it the trigger is `api`; anything else is a 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_started_from_the_editor_is_manual() {
    let s = two_workflows().await;
    let a = start_run(
        &s,
        "wf1",
        None,
        r#"{"input": {"n": 1}, "trigger": "manual"}"#,
    )
    .await;
    assert_eq!(a.status.as_u16(), 200, "{}", a.text);
    assert_eq!(a.json()["trigger"], "manual");
    let b = start_run(&s, "wf1", None, r#"{"input": {"n": 2}}"#).await;
    assert_eq!(b.json()["trigger"], "api");
    let bad = start_run(&s, "wf1", None, r#"{"input": {}, "trigger": "webhook"}"#).await;
    let doc = bad.problem(400, "invalid_body");
    assert!(
        doc["detail"]
            .as_str()
            .unwrap()
            .contains("`webhook` is not `api` or `manual`"),
        "{doc}"
    );
}
