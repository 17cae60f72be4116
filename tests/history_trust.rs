//! History that testers and analysts can trust (issue 15), over real HTTP on port 0:
//! * C12: one webhook body with a duplicated member is read the same way by every surface
//!   (the dedupe key, the router, the stored input, the list, a replay, a dry run);

mod common;

use common::server::Setup;
use reqwest::Method;
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------------
// C12
// ---------------------------------------------------------------------------------------------

/// webhook (key `{{ input.order_id }}`) → router (`b` when `input.order_id == "B"`) → `matched`
/// on `b`, `other` on `default`.
fn orders_workflow() -> Value {
    json!({
        "id": "orders",
        "name": "orders",
        "version": 1,
        "steps": [
            {"id": "hook", "kind": "webhook_trigger",
             "config": {"dedupe_key": "{{ input.order_id }}"}},
            {"id": "route", "kind": "router",
             "config": {"routes": [{"name": "b", "when": "input.order_id == \"B\""}]}},
            {"id": "matched", "kind": "transform",
             "config": {"fields": {"order": "{{ input.order_id }}"}}},
            {"id": "other", "kind": "transform",
             "config": {"fields": {"order": "{{ input.order_id }}"}}}
        ],
        "edges": [
            {"from": "hook", "to": "route"},
            {"from": "route", "port": "b", "to": "matched"},
            {"from": "route", "port": "default", "to": "other"}
        ]
    })
}

fn step<'a>(run: &'a Value, id: &str) -> Option<&'a Value> {
    run["steps"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["step_id"] == id))
}

/// What every surface must agree on: the input is `{"order_id": "B"}`, the router took `b`.
fn assert_reads_b(run: &Value, what: &str) {
    assert_eq!(run["input"], json!({"order_id": "B"}), "{what}: {run}");
    let route = step(run, "route").unwrap_or_else(|| panic!("{what}: no route step: {run}"));
    assert_eq!(route["output"], json!({"route": "b"}), "{what}: {run}");
    let matched = step(run, "matched").unwrap_or_else(|| panic!("{what}: `b` not taken: {run}"));
    assert_eq!(matched["output"], json!({"order": "B"}), "{what}");
    assert!(step(run, "other").is_none(), "{what}: default taken too");
}

/// C12: `{"order_id":"A","order_id":"B"}` is `B` for the dedupe key, the router, the stored
/// input, the history list and search, a replay and a dry run; `{"order_id":"B"}` is then a
/// duplicate of it, while `{"order_id":"A"}` is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c12_a_duplicated_member_is_read_as_its_last_value_everywhere() {
    let s = Setup::new().workflow(orders_workflow()).start().await;
    let body = br#"{"order_id":"A","order_id":"B"}"#;

    let first = s.hook("orders", None, body).await;
    assert_eq!(first.status, 202, "{}", first.text);
    let run_id = first.json()["run_id"].as_str().unwrap().to_string();
    s.wait_final(&run_id).await;

    // The stored run, as the history view and the editor's "Debug in editor" read it.
    let detail = s
        .api(Method::GET, &format!("/runs/{run_id}"), &[], None)
        .await;
    assert_eq!(detail.status, 200);
    let run = detail.json();
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["idempotency_key"], "B");
    assert_reads_b(&run, "the stored run");
    assert!(
        !detail.text.contains(r#""order_id":"A""#),
        "the first member is gone from the record: {}",
        detail.text
    );

    // The history list finds it under key B (not A).
    let by_b = s.get_json("/runs?workflow=orders&key=B").await;
    assert_eq!(by_b["runs"][0]["id"], run_id.as_str());
    let by_a = s.get_json("/runs?workflow=orders&key=A").await;
    assert_eq!(by_a["runs"], json!([]));

    // `{"order_id":"B"}` is the same event: a duplicate of that run.
    let again = s.hook("orders", None, br#"{"order_id":"B"}"#).await;
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.json(), json!({"run_id": run_id, "duplicate": true}));
    // The same bytes again too; and `A` was never claimed.
    let same = s.hook("orders", None, body).await;
    assert_eq!(same.json()["duplicate"], true);
    let a = s.hook("orders", None, br#"{"order_id":"A"}"#).await;
    assert_eq!(a.status, 202, "A is another event: {}", a.text);
    let a_run = s.wait_final(a.json()["run_id"].as_str().unwrap()).await;
    assert_eq!(a_run.input, json!({"order_id": "A"}));

    // A replay reads the stored input: B again, the route matches.
    let replay = s
        .api(
            Method::POST,
            &format!("/runs/{run_id}/replay"),
            &[],
            Some("{}"),
        )
        .await;
    assert_eq!(replay.status, 200, "{}", replay.text);
    let replay = replay.json();
    assert_eq!(replay["replay_of"], run_id.as_str());
    assert_reads_b(&replay, "the replay");

    // The editor's Dry Run sends its input text: the same reading.
    let dry = s
        .api(
            Method::POST,
            "/workflows/orders/dry-run",
            &[],
            Some(r#"{"input":{"order_id":"A","order_id":"B"}}"#),
        )
        .await;
    assert_eq!(dry.status, 200, "{}", dry.text);
    assert_reads_b(&dry.json(), "the dry run");
}
