//! The management API over real HTTP on port 0: workflows CRUD (GET then PUT round-trips),
//! validate, dry-run, runs listing (every filter, cursor paging), run detail, replay (live/dry,
//! current/original, linked both ways), stats, Memory browse/delete, step kinds, SSE events,
//! health.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::server::{api_workflow, hook_workflow, Setup, TestServer};
use fluxo::clock::Clock;
use fluxo::store::WriteOptions;
use reqwest::Method;
use serde_json::{json, Value};

async fn server() -> TestServer {
    Setup::new()
        .workflow(api_workflow("wf1"))
        .workflow(hook_workflow("hooked", json!({})))
        .start()
        .await
}

async fn api_run(s: &TestServer, wf: &str, input: Value) -> Value {
    let a = s
        .api(
            Method::POST,
            &format!("/workflows/{wf}/runs"),
            &[],
            Some(&json!({ "input": input }).to_string()),
        )
        .await;
    assert_eq!(a.status.as_u16(), 200, "{}", a.text);
    a.json()
}

/// GET answers the file's JSON exactly; PUT of it back bumps the version and answers the
/// problems; a workflow with validation errors is refused live (a draft keeps it, with its
/// problems, and it does not run); structurally broken bodies are refused; DELETE removes the
/// file and the draft.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workflows_crud_round_trip() {
    let s = server().await;
    let list = s.get_json("/workflows").await;
    let ids: Vec<&str> = list["workflows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["hooked", "wf1"]);
    assert_eq!(list["workflows"][1]["valid"], true);
    assert_eq!(list["workflows"][1]["trigger"], "manual_trigger");

    let file = std::fs::read_to_string(s.workflows_dir.path().join("wf1.json")).unwrap();
    let got = s.api(Method::GET, "/workflows/wf1", &[], None).await;
    assert_eq!(got.status.as_u16(), 200);
    assert_eq!(got.header("content-type"), Some("application/json"));
    assert_eq!(got.text, file, "GET answers the file exactly");

    let put = s
        .api(Method::PUT, "/workflows/wf1", &[], Some(&got.text))
        .await;
    assert_eq!(put.status.as_u16(), 200, "{}", put.text);
    let put = put.json();
    assert_eq!(put["version"], 2, "the version is bumped on save");
    assert_eq!(put["valid"], true);
    assert!(put["problems"].is_array());
    let again = s.api(Method::GET, "/workflows/wf1", &[], None).await;
    assert_eq!(
        again.text,
        std::fs::read_to_string(s.workflows_dir.path().join("wf1.json")).unwrap(),
        "PUT wrote the file"
    );
    assert_eq!(
        serde_json::from_str::<Value>(&again.text).unwrap()["version"],
        2
    );
    // GET then PUT again round-trips (one more bump, same content otherwise).
    let put3 = s
        .api(Method::PUT, "/workflows/wf1", &[], Some(&again.text))
        .await
        .json();
    assert_eq!(put3["version"], 3);
    let mut a: Value = serde_json::from_str(&again.text).unwrap();
    let b = put3["workflow"].clone();
    a["version"] = json!(3);
    assert_eq!(a, b);

    // A workflow with an edge to an unknown step: refused live (422 `workflow_invalid`,
    // nothing written); kept as a draft with its problems.
    let draft = json!({
        "id": "draft", "name": "draft", "version": 1,
        "steps": [
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "post", "kind": "http_request",
             "config": {"method": "POST", "url": "http://127.0.0.1:9/x"}}
        ],
        "edges": [{"from": "start", "to": "post"}, {"from": "post", "to": "ghost"}]
    });
    let refused = s
        .api(
            Method::PUT,
            "/workflows/draft",
            &[],
            Some(&draft.to_string()),
        )
        .await
        .problem(422, "workflow_invalid");
    assert!(refused["problems"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["code"] == "unknown_step"));
    assert!(!s.workflows_dir.path().join("draft.json").exists());
    let saved = s
        .api(
            Method::PUT,
            "/workflows/draft/draft",
            &[],
            Some(&draft.to_string()),
        )
        .await;
    assert_eq!(saved.status.as_u16(), 200, "{}", saved.text);
    let saved = saved.json();
    assert_eq!(saved["valid"], false);
    let problems = saved["problems"].as_array().unwrap();
    assert!(
        problems.iter().any(
            |p| p["severity"] == "error" && p["path"].as_str().unwrap().starts_with("edges[1]")
        ),
        "the unknown step is reported with its path: {problems:?}"
    );
    // A valid workflow with a lint finding: valid, with the warning in the answer.
    let mut linted = draft.clone();
    linted["id"] = json!("linted");
    linted["edges"] = json!([{"from": "start", "to": "post"}]);
    let saved_linted = s
        .api(
            Method::PUT,
            "/workflows/linted",
            &[],
            Some(&linted.to_string()),
        )
        .await
        .json();
    assert_eq!(saved_linted["valid"], true);
    let warnings = saved_linted["problems"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|p| p["severity"] == "warning" && p["step"] == "post"),
        "the POST without Idempotency-Key is flagged: {warnings:?}"
    );
    assert!(!s.workflows_dir.path().join("draft.json").exists());
    assert!(s.workflows_dir.path().join("linted.json").exists());
    s.api(Method::POST, "/workflows/draft/runs", &[], Some("{}"))
        .await
        .problem(404, "workflow_not_found");

    // Structurally broken: refused (422) with every problem; id mismatch: 400.
    let broken = json!({"id": "broken", "name": "b", "version": 1, "steps": [], "edges": [], "colour": "red"});
    let r = s
        .api(
            Method::PUT,
            "/workflows/broken",
            &[],
            Some(&broken.to_string()),
        )
        .await;
    let doc = r.problem(422, "invalid_workflow");
    assert!(!doc["problems"].as_array().unwrap().is_empty());
    assert!(!s.workflows_dir.path().join("broken.json").exists());
    s.api(
        Method::PUT,
        "/workflows/other",
        &[],
        Some(&draft.to_string()),
    )
    .await
    .problem(400, "invalid_workflow");

    // Validate without saving: every problem at once.
    let mut two = draft.clone();
    two["steps"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "tp", "kind": "teleport", "config": {}}));
    two["edges"]
        .as_array_mut()
        .unwrap()
        .push(json!({"from": "start", "to": "tp"}));
    let v = s
        .api(
            Method::POST,
            "/workflows/validate",
            &[],
            Some(&two.to_string()),
        )
        .await
        .json();
    assert_eq!(v["valid"], false);
    let codes: Vec<&str> = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["code"].as_str().unwrap())
        .collect();
    assert!(
        codes.contains(&"unknown_step") && codes.contains(&"unknown_kind"),
        "{codes:?}"
    );
    assert!(!s.workflows_dir.path().join("tp.json").exists());

    // Delete: a file; a workflow that only has a draft.
    let d = s.api(Method::DELETE, "/workflows/linted", &[], None).await;
    assert_eq!(d.status.as_u16(), 204);
    assert!(!s.workflows_dir.path().join("linted.json").exists());
    s.api(Method::GET, "/workflows/linted", &[], None)
        .await
        .problem(404, "workflow_not_found");
    s.api(Method::DELETE, "/workflows/linted", &[], None)
        .await
        .problem(404, "workflow_not_found");
    let d = s.api(Method::DELETE, "/workflows/draft", &[], None).await;
    assert_eq!(d.status.as_u16(), 204);
    s.api(Method::GET, "/workflows/draft/draft", &[], None)
        .await
        .problem(404, "draft_not_found");
}

/// Dry run through the API: simulated, recorded with `mode: dry`; an unsaved definition can be
/// dry-run too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_route() {
    let s = server().await;
    let a = s
        .api(
            Method::POST,
            "/workflows/wf1/dry-run",
            &[],
            Some(r#"{"input":{"invoice_id":"INV-D"}}"#),
        )
        .await;
    assert_eq!(a.status.as_u16(), 200, "{}", a.text);
    let run = a.json();
    assert_eq!(run["mode"], "dry");
    assert_eq!(run["status"], "succeeded");
    assert_eq!(run["steps"][1]["output"]["invoice"], "INV-D");
    let mut unsaved = api_workflow("wf1");
    unsaved["steps"][1]["config"]["fields"] = json!({"x": "{{ input.invoice_id }}!"});
    let b = s
        .api(
            Method::POST,
            "/workflows/wf1/dry-run",
            &[],
            Some(&json!({"input": {"invoice_id": "I"}, "workflow": unsaved}).to_string()),
        )
        .await
        .json();
    assert_eq!(b["steps"][1]["output"]["x"], "I!");
}

/// `GET /runs`: every filter, and cursor paging without duplicates or gaps, newest first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_list_filters_and_cursor_paging() {
    let s = server().await;
    let t0 = s.clock.now_ms();
    let mut api_ids = Vec::new();
    for i in 0..3 {
        api_ids.push(
            api_run(&s, "wf1", json!({"invoice_id": format!("INV-{i}")})).await["id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
        s.advance(Duration::from_secs(60));
    }
    let t1 = s.clock.now_ms();
    let mut hook_ids = Vec::new();
    for i in 0..4 {
        let a = s.hook("hooked", Some(&format!("key-{i}")), b"{}").await;
        assert_eq!(a.status.as_u16(), 202);
        let id = a.json()["run_id"].as_str().unwrap().to_string();
        s.wait_final(&id).await;
        hook_ids.push(id);
        s.advance(Duration::from_secs(60));
    }
    let dry = s
        .api(Method::POST, "/workflows/wf1/dry-run", &[], Some("{}"))
        .await
        .json();
    let dry_id = dry["id"].as_str().unwrap().to_string();

    let ids = |v: &Value| -> Vec<String> {
        v["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_string())
            .collect()
    };
    let all = s.get_json("/runs?limit=500").await;
    assert_eq!(ids(&all).len(), 8);
    assert!(all.get("next_cursor").is_none());
    // Newest first.
    let mut expected: Vec<String> = api_ids.iter().chain(&hook_ids).cloned().collect();
    expected.push(dry_id.clone());
    expected.reverse();
    assert_eq!(ids(&all), expected);

    assert_eq!(ids(&s.get_json("/runs?workflow=hooked").await).len(), 4);
    assert_eq!(ids(&s.get_json("/runs?trigger=webhook").await).len(), 4);
    assert_eq!(ids(&s.get_json("/runs?trigger=api").await).len(), 3);
    assert_eq!(
        ids(&s.get_json("/runs?mode=dry").await),
        vec![dry_id.clone()]
    );
    assert_eq!(ids(&s.get_json("/runs?mode=live").await).len(), 7);
    assert_eq!(ids(&s.get_json("/runs?status=succeeded").await).len(), 8);
    assert!(ids(&s.get_json("/runs?status=failed").await).is_empty());
    assert_eq!(
        ids(&s.get_json("/runs?key=key-2").await),
        vec![hook_ids[2].clone()]
    );
    assert_eq!(ids(&s.get_json("/runs?q=key-").await).len(), 4);
    assert_eq!(
        ids(&s.get_json(&format!("/runs?q={}", &hook_ids[1])).await),
        vec![hook_ids[1].clone()]
    );
    // since/until: unix ms and RFC 3339.
    let api_only = ids(&s.get_json(&format!("/runs?since={t0}&until={t1}")).await);
    let mut want = api_ids.clone();
    want.reverse();
    assert_eq!(api_only, want);
    let since = fluxo::clock::rfc3339(t1).replace('+', "%2B");
    assert_eq!(
        ids(&s
            .get_json(&format!("/runs?since={since}&workflow=hooked"))
            .await)
        .len(),
        4
    );

    // Paging by 3: no duplicates, no gaps, same order.
    let mut paged = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10 {
        let path = match &cursor {
            Some(c) => format!("/runs?limit=3&cursor={c}"),
            None => "/runs?limit=3".to_string(),
        };
        let page = s.get_json(&path).await;
        let got = ids(&page);
        assert!(got.len() <= 3);
        paged.extend(got);
        match page.get("next_cursor").and_then(Value::as_str) {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert_eq!(paged, expected);
    // A page of a filtered listing.
    let p1 = s.get_json("/runs?workflow=hooked&limit=2").await;
    let c = p1["next_cursor"].as_str().unwrap();
    let p2 = s
        .get_json(&format!("/runs?workflow=hooked&limit=2&cursor={c}"))
        .await;
    let both: Vec<String> = ids(&p1).into_iter().chain(ids(&p2)).collect();
    let mut hooks_newest_first = hook_ids.clone();
    hooks_newest_first.reverse();
    assert_eq!(both, hooks_newest_first);
    assert!(p2.get("next_cursor").is_none());

    // Bad parameters are named.
    for bad in [
        "/runs?status=done",
        "/runs?mode=wet",
        "/runs?trigger=cron",
        "/runs?limit=0",
        "/runs?limit=501",
        "/runs?since=yesterday",
        "/runs?colour=red",
    ] {
        s.api(Method::GET, bad, &[], None)
            .await
            .problem(400, "invalid_parameter");
    }
    // Detail.
    let one = s.get_json(&format!("/runs/{}", hook_ids[0])).await;
    assert_eq!(one["idempotency_key"], "key-0");
    assert_eq!(one["trigger"], "webhook");
    assert!(one["steps"].as_array().unwrap().len() == 2);
    s.api(Method::GET, "/runs/nope", &[], None)
        .await
        .problem(404, "run_not_found");
}

/// Replay: live and dry, current and original version; the new run points at the original
/// (`replay_of`) and the original lists it (`replayed_by`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_live_dry_current_original() {
    let s = server().await;
    let original = api_run(&s, "wf1", json!({"invoice_id": "INV-R"})).await;
    let oid = original["id"].as_str().unwrap().to_string();
    assert_eq!(original["workflow_version"], 1);

    // Change the workflow: v2 renders another field.
    let mut v2 = api_workflow("wf1");
    v2["steps"][1]["config"]["fields"] = json!({"invoice_v2": "{{ input.invoice_id }}"});
    let put = s
        .api(Method::PUT, "/workflows/wf1", &[], Some(&v2.to_string()))
        .await
        .json();
    assert_eq!(put["version"], 2);

    let replay = |body: Value| {
        let s = &s;
        let oid = oid.clone();
        async move {
            let a = s
                .api(
                    Method::POST,
                    &format!("/runs/{oid}/replay"),
                    &[],
                    Some(&body.to_string()),
                )
                .await;
            assert_eq!(a.status.as_u16(), 200, "{}", a.text);
            a.json()
        }
    };
    let current = replay(json!({})).await;
    assert_eq!(current["replay_of"], oid.as_str());
    assert_eq!(current["trigger"], "replay");
    assert_eq!(current["mode"], "live");
    assert_eq!(current["workflow_version"], 2);
    assert_eq!(current["steps"][1]["output"]["invoice_v2"], "INV-R");
    assert_eq!(current["input"], original["input"]);

    let orig_version = replay(json!({"version": "original"})).await;
    assert_eq!(orig_version["workflow_version"], 1);
    assert_eq!(orig_version["steps"][1]["output"]["invoice"], "INV-R");

    let dry = replay(json!({"mode": "dry", "version": "current"})).await;
    assert_eq!(dry["mode"], "dry");
    assert_eq!(dry["replay_of"], oid.as_str());

    let after = s.get_json(&format!("/runs/{oid}")).await;
    let by: BTreeSet<&str> = after["replayed_by"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let want: BTreeSet<&str> = [&current, &orig_version, &dry]
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(by, want, "the original links to every replay");
    assert_eq!(
        s.get_json("/runs?trigger=replay").await["runs"]
            .as_array()
            .unwrap()
            .len(),
        3
    );

    // Async replay answers 202 with Location.
    let a = s
        .api(
            Method::POST,
            &format!("/runs/{oid}/replay"),
            &[("prefer", "respond-async")],
            Some("{}"),
        )
        .await;
    assert_eq!(a.status.as_u16(), 202);
    let id = a.json()["id"].as_str().unwrap().to_string();
    assert_eq!(
        a.header("location"),
        Some(format!("/api/v1/runs/{id}").as_str())
    );
    s.wait_final(&id).await;

    for (body, code, status) in [
        (json!({"mode": "wet"}), "invalid_body", 400),
        (json!({"version": "v7"}), "invalid_body", 400),
        (json!({"colour": 1}), "invalid_body", 400),
    ] {
        s.api(
            Method::POST,
            &format!("/runs/{oid}/replay"),
            &[],
            Some(&body.to_string()),
        )
        .await
        .problem(status, code);
    }
    s.api(Method::POST, "/runs/nope/replay", &[], Some("{}"))
        .await
        .problem(404, "run_not_found");
}

/// A replay of a webhook run bypasses the trigger-level dedupe (a deliberate act) and keeps the
/// original's key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_of_a_webhook_run_bypasses_the_door() {
    let s = server().await;
    let a = s.hook("hooked", Some("evt-r"), b"{\"id\":\"evt-r\"}").await;
    let oid = a.json()["run_id"].as_str().unwrap().to_string();
    s.wait_final(&oid).await;
    let r = s
        .api(
            Method::POST,
            &format!("/runs/{oid}/replay"),
            &[],
            Some("{}"),
        )
        .await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.text);
    let r = r.json();
    assert_eq!(r["status"], "succeeded");
    assert_eq!(r["idempotency_key"], "evt-r");
    assert_eq!(r["input"], json!({"id": "evt-r"}));
    // The door still answers duplicates with the original run.
    let d = s.hook("hooked", Some("evt-r"), b"{}").await;
    assert_eq!(d.json()["run_id"], oid.as_str());
}

/// `GET /runs/stats`: counts by status per bucket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_stats() {
    let s = Setup::new()
        .workflow(api_workflow("wf1"))
        .workflow(json!({
            "id": "fails", "name": "fails", "version": 1,
            "steps": [
                {"id": "start", "kind": "manual_trigger", "config": {}},
                {"id": "boom", "kind": "transform", "config": {"fields": {"x": "{{ input.nope.deeper }}"}}}
            ],
            "edges": [{"from": "start", "to": "boom"}]
        }))
        .start()
        .await;
    // Two hours: 3 succeeded + 1 failed in the first, 1 succeeded in the second.
    for _ in 0..3 {
        api_run(&s, "wf1", json!({})).await;
    }
    let f = s
        .api(Method::POST, "/workflows/fails/runs", &[], Some("{}"))
        .await;
    assert_eq!(f.json()["status"], "failed");
    s.advance(Duration::from_secs(3600));
    api_run(&s, "wf1", json!({})).await;

    let stats = s.get_json("/runs/stats?bucket=hour").await;
    assert_eq!(stats["bucket_ms"], 3_600_000);
    let buckets = stats["buckets"].as_array().unwrap();
    assert_eq!(buckets.len(), 2, "{stats}");
    assert_eq!(buckets[0]["counts"], json!({"succeeded": 3, "failed": 1}));
    assert_eq!(buckets[1]["counts"], json!({"succeeded": 1}));
    let one = s.get_json("/runs/stats?bucket=day&workflow=fails").await;
    assert_eq!(one["buckets"][0]["counts"], json!({"failed": 1}));
    let by_minute = s.get_json("/runs/stats?bucket=minute").await;
    let total: u64 = by_minute["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|b| b["counts"].as_object().unwrap().values())
        .map(|v| v.as_u64().unwrap())
        .sum();
    assert_eq!(total, 5);
    s.api(Method::GET, "/runs/stats?bucket=week", &[], None)
        .await
        .problem(400, "invalid_parameter");

    // The list's filters, the total, the range from the oldest matching run, percentiles and
    // failure groups.
    let all = s.get_json("/runs/stats").await;
    assert_eq!(all["total"], 5, "{all}");
    assert_eq!(all["complete"], true);
    assert_eq!(all["counts"], json!({"succeeded": 4, "failed": 1}));
    assert!(all["buckets"].as_array().unwrap().len() <= 60);
    assert!(
        all["bucket_ms"].as_i64().unwrap() <= 3_600_000,
        "2 hours of runs: {all}"
    );
    let oldest = s.get_json("/runs?limit=10").await["runs"][4]["created_at"].clone();
    assert_eq!(all["since"], oldest, "all time starts at the oldest run");
    assert_eq!(all["duration"]["count"], 5);
    assert!(all["duration"]["p50_ms"].is_u64() && all["duration"]["p99_ms"].is_u64());
    assert_eq!(all["durations"][0]["workflow_id"], "wf1");
    assert_eq!(all["durations"][0]["count"], 4);
    assert_eq!(
        all["failures"],
        json!([{"reason": "template_error at boom", "count": 1}])
    );
    let failed = s.get_json("/runs/stats?status=failed&mode=live").await;
    assert_eq!(failed["total"], 1);
    assert_eq!(failed["buckets"][0]["counts"], json!({"failed": 1}));
    let wf1 = s.get_json("/runs/stats?workflow=wf1&trigger=api").await;
    assert_eq!(wf1["total"], 4);
    assert_eq!(wf1["failures"], json!([]));
    // Per step (one workflow named): every step of wf1, in the file's order, each run once.
    let steps: Vec<(&str, u64)> = wf1["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["step_id"].as_str().unwrap(), s["count"].as_u64().unwrap()))
        .collect();
    assert_eq!(steps, vec![("start", 4), ("shape", 4)], "{wf1}");
    assert!(wf1["steps"][1]["p99_ms"].is_u64());
    assert_eq!(all["steps"], json!([]), "no workflow named: no steps");
    let fails = s.get_json("/runs/stats?workflow=fails").await;
    assert_eq!(fails["steps"][1]["step_id"], "boom", "{fails}");
    assert_eq!(fails["steps"][1]["count"], 1);
    // The run's summary carries its steps' durations.
    let listed = s.get_json("/runs?workflow=fails").await;
    assert!(
        listed["runs"][0]["step_durations"]["boom"].is_u64(),
        "{listed}"
    );
    let by_q = s
        .get_json(&format!(
            "/runs/stats?q={}",
            &f.json()["id"].as_str().unwrap()[..30]
        ))
        .await;
    assert_eq!(by_q["total"], 1);
    let listed = s.get_json("/runs?error=template_error%20at%20boom").await;
    assert_eq!(listed["runs"].as_array().unwrap().len(), 1);
    assert_eq!(listed["runs"][0]["error_step"], "boom");
    let by_error = s
        .get_json("/runs/stats?error=template_error%20at%20boom")
        .await;
    assert_eq!(by_error["total"], 1);
}

/// Memory browser: namespaces, list with prefix and paging, get, delete; expired keys are gone
/// without any sweep.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_browse_and_delete() {
    let s = server().await;
    let now = s.clock.now_ms();
    for (k, ttl) in [
        ("inv:1", None),
        ("inv:2", Some(1000)),
        ("inv:3", None),
        ("other", None),
    ] {
        s.store
            .write(
                "invoices",
                k,
                &json!({"k": k}),
                WriteOptions {
                    allow_overwrite: true,
                    ttl_ms: ttl,
                    owner: None,
                },
                now,
            )
            .await
            .unwrap();
    }

    let ns = s.get_json("/memory").await;
    assert_eq!(ns["namespaces"], json!(["invoices"]));
    let list = s.get_json("/memory/invoices?prefix=inv:").await;
    let keys: Vec<&str> = list["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, vec!["inv:1", "inv:2", "inv:3"]);
    assert_eq!(list["entries"][1]["ttl_left_ms"], 1000);
    // Paging.
    let p1 = s.get_json("/memory/invoices?limit=2").await;
    assert_eq!(p1["entries"].as_array().unwrap().len(), 2);
    let after = p1["next_after"].as_str().unwrap();
    let p2 = s
        .get_json(&format!("/memory/invoices?limit=2&after={after}"))
        .await;
    assert_eq!(p2["entries"][0]["key"], "inv:3");
    assert_eq!(p2["entries"][1]["key"], "other");

    let one = s.get_json("/memory/invoices/inv:1").await;
    assert_eq!(one["value"], json!({"k": "inv:1"}));
    assert_eq!(one["namespace"], "invoices");

    // TTL: gone after 1 s, without a sweep.
    s.advance(Duration::from_millis(1001));
    s.api(Method::GET, "/memory/invoices/inv:2", &[], None)
        .await
        .problem(404, "key_not_found");
    assert_eq!(
        s.get_json("/memory/invoices?prefix=inv:").await["entries"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    let d = s
        .api(Method::DELETE, "/memory/invoices/inv:1", &[], None)
        .await;
    assert_eq!(d.status.as_u16(), 200);
    assert_eq!(d.json()["deleted"], true);
    s.api(Method::GET, "/memory/invoices/inv:1", &[], None)
        .await
        .problem(404, "key_not_found");
    s.api(Method::DELETE, "/memory/invoices/inv:1", &[], None)
        .await
        .problem(404, "key_not_found");
    s.api(Method::GET, "/memory/invoices?limit=0", &[], None)
        .await
        .problem(400, "invalid_parameter");
}

/// The step catalog lists every built-in kind with its schema and ports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn step_kinds_catalog() {
    let s = server().await;
    let kinds = s.get_json("/step-kinds").await;
    let names: BTreeSet<&str> = kinds
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kind"].as_str().unwrap())
        .collect();
    for k in [
        "webhook_trigger",
        "manual_trigger",
        "memory",
        "router",
        "error_handler",
        "http_request",
        "publish_output",
        "transform",
    ] {
        assert!(names.contains(k), "missing {k} in {names:?}");
    }
    for k in kinds.as_array().unwrap() {
        assert!(k["config_schema"].is_object(), "{k}");
        assert!(k["ports"].as_array().unwrap().contains(&json!("error")));
    }
}

/// `GET /events` streams server-sent events of run progress.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sse_events_follow_a_run() {
    let s = server().await;
    let mut stream = s
        .client
        .get(format!("{}/api/v1/events", s.url))
        .bearer_auth(common::server::TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status().as_u16(), 200);
    assert!(stream
        .headers()
        .get("content-type")
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let a = s.hook("hooked", Some("sse-1"), b"{}").await;
    let run_id = a.json()["run_id"].as_str().unwrap().to_string();
    let mut text = String::new();
    let got = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(chunk) = stream.chunk().await.unwrap() {
            text.push_str(&String::from_utf8_lossy(&chunk));
            if text.contains("run_finished") {
                break;
            }
        }
    })
    .await;
    assert!(got.is_ok(), "no run_finished event: {text}");
    let events: Vec<Value> = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect();
    let kinds: Vec<&str> = events
        .iter()
        .filter(|e| e["run_id"] == run_id.as_str())
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.first(), Some(&"run_started"), "{text}");
    assert!(kinds.contains(&"step_finished"), "{text}");
    assert_eq!(kinds.last(), Some(&"run_finished"), "{text}");
    assert!(text.contains("event: run"));
}

/// `GET /healthz` needs no token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz() {
    let s = server().await;
    let a = s.send(Method::GET, "/healthz", &[], None).await;
    assert_eq!(a.status.as_u16(), 200);
    assert_eq!(a.json()["status"], "ok");
    assert!(a.header("x-request-id").is_some());
    // A client's request id is kept and echoed (it tags the request's log span).
    let b = s
        .send(
            Method::GET,
            "/healthz",
            &[("x-request-id", b"req-abc-1")],
            None,
        )
        .await;
    assert_eq!(b.header("x-request-id"), Some("req-abc-1"));
}
