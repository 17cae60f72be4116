//! Duplicates stopped, made visible (issue 37): over real HTTP on port 0 with sled in a temp
//! dir, every duplicate delivery Fluxo stops is listed on the run that holds the effect
//! (`GET /runs/{id}/deliveries`), counted in the list (`duplicates_stopped`), filterable
//! (`duplicates=stopped`) and charted (`GET /runs/stats` → `duplicates`), and survives a
//! restart.

mod common;

use std::time::Duration;

use common::server::{hook_workflow, invoice_paid, Setup, StoreKind, TestServer};
use serde_json::{json, Value};

/// Poll (real time, bounded) until `f` holds for the deliveries of `run_id`: a run's own
/// records are noted just after its final state is written.
async fn deliveries_until(s: &TestServer, run_id: &str, f: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..500 {
        let d = s.get_json(&format!("/runs/{run_id}/deliveries")).await;
        if f(&d) {
            return d;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!(
        "deliveries of {run_id} never matched: {}",
        s.get_json(&format!("/runs/{run_id}/deliveries")).await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn door_duplicates_are_listed_counted_filtered_charted_and_kept_over_a_restart() {
    let data_dir = tempfile::tempdir().unwrap();
    let workflows_dir = tempfile::tempdir().unwrap();
    let s = Setup::new()
        .store(StoreKind::Sled)
        .workflow(hook_workflow("wf1", json!({})))
        .data_dir(data_dir)
        .workflows_dir(workflows_dir)
        .start()
        .await;
    let body = invoice_paid();
    let first = s.hook("wf1", Some("evt-1"), &body).await;
    assert_eq!(first.status.as_u16(), 202, "{}", first.text);
    let run_id = first.json()["run_id"].as_str().unwrap().to_string();
    s.advance(Duration::from_secs(5));
    let again = s.hook("wf1", Some("evt-1"), &body).await;
    assert_eq!(again.status.as_u16(), 200, "{}", again.text);
    s.advance(Duration::from_secs(600));
    let third = s.hook("wf1", Some("evt-1"), &body).await;
    assert_eq!(third.json()["duplicate"], true);
    // Another event, never repeated.
    let other = s.hook("wf1", Some("evt-2"), &body).await;
    let other_id = other.json()["run_id"].as_str().unwrap().to_string();
    s.wait_final(&run_id).await;
    s.wait_final(&other_id).await;

    let d = s.get_json(&format!("/runs/{run_id}/deliveries")).await;
    assert_eq!(d["first"]["answer"], 202, "{d}");
    assert_eq!(d["first"]["key"], "evt-1");
    assert_eq!(d["first"]["trigger"], "webhook");
    assert_eq!(d["duplicates_stopped"], 2, "{d}");
    let stopped = d["stopped"].as_array().unwrap();
    assert!(!stopped.is_empty());
    for r in stopped {
        assert_eq!(r["by"], "door", "{r}");
        assert_eq!(r["answer"], 200, "{r}");
        assert_eq!(r["run_id"], run_id.as_str());
    }
    let counted: u64 = stopped.iter().map(|r| r["count"].as_u64().unwrap()).sum();
    assert_eq!(counted, 2);
    // The two repeats were 10 minutes apart: the record(s) span them.
    let first_at = stopped[0]["first_at"].as_str().unwrap().to_string();
    let last_at = stopped[stopped.len() - 1]["last_at"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(first_at < last_at, "{first_at} .. {last_at}");
    let none = s.get_json(&format!("/runs/{other_id}/deliveries")).await;
    assert_eq!(none["duplicates_stopped"], 0, "{none}");
    assert_eq!(none["stopped"], json!([]));

    // The list counts them; the filter keeps only runs that stopped one.
    let list = s.get_json("/runs?workflow=wf1").await;
    let runs = list["runs"].as_array().unwrap();
    let row = |id: &str| runs.iter().find(|r| r["id"] == id).cloned().unwrap();
    assert_eq!(row(&run_id)["duplicates_stopped"], 2, "{list}");
    assert!(row(&other_id).get("duplicates_stopped").is_none(), "{list}");
    let only = s.get_json("/runs?workflow=wf1&duplicates=stopped").await;
    let ids: Vec<&str> = only["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![run_id.as_str()], "{only}");
    let bad = s
        .api(reqwest::Method::GET, "/runs?duplicates=yes", &[], None)
        .await;
    bad.problem(400, "invalid_parameter");

    // The chart: two stopped in the range, in the bars.
    let stats = s.get_json("/runs/stats?workflow=wf1").await;
    assert_eq!(stats["duplicates"]["total"], 2, "{stats}");
    let in_bars: u64 = stats["duplicates"]["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count"].as_u64().unwrap())
        .sum();
    assert_eq!(in_bars, 2, "{stats}");
    // The filter holds in the chart and the export too.
    let filtered = s
        .get_json("/runs/stats?workflow=wf1&duplicates=stopped")
        .await;
    assert_eq!(
        filtered["total"], 1,
        "one run stopped duplicates: {filtered}"
    );
    let export = s
        .api(
            reqwest::Method::GET,
            "/runs/export?format=jsonl&workflow=wf1&duplicates=stopped",
            &[],
            None,
        )
        .await;
    assert_eq!(export.status.as_u16(), 200, "{}", export.text);
    let lines: Vec<&str> = export.text.lines().collect();
    assert_eq!(lines.len(), 1, "{}", export.text);
    assert!(lines[0].contains(&run_id));
    let elsewhere = s.get_json("/runs/stats?workflow=nope").await;
    assert_eq!(elsewhere["duplicates"]["total"], 0);

    // A repeat counted just before a clean stop is written at the stop, and read back.
    let fourth = s.hook("wf1", Some("evt-1"), &body).await;
    assert_eq!(fourth.json()["duplicate"], true);
    let (data_dir, workflows_dir) = s.stop_keeping_folders().await;
    let s = Setup::new()
        .store(StoreKind::Sled)
        .data_dir(data_dir)
        .workflows_dir(workflows_dir)
        .start()
        .await;
    let d = s.get_json(&format!("/runs/{run_id}/deliveries")).await;
    assert_eq!(d["duplicates_stopped"], 3, "{d}");
    s.api(
        reqwest::Method::GET,
        "/runs/00000000-0000-7000-8000-000000000000/deliveries",
        &[],
        None,
    )
    .await
    .problem(404, "run_not_found");
}

/// Two deliveries of one event without a door key: the second run's Memory claim finds the
/// key held, and the first run lists it, naming the run it stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_claim_lists_the_run_it_stopped_on_the_holder() {
    let wf = json!({
        "id": "claimed",
        "name": "claimed",
        "version": 1,
        "steps": [
            {"id": "hook", "kind": "webhook_trigger", "config": {}},
            {"id": "claim", "kind": "memory", "config": {
                "operation": "write", "namespace": "events", "key": "{{ input.id }}",
                "allow_overwrite": false, "ttl_s": 3600}},
            {"id": "shape", "kind": "transform", "config": {"fields": {"e": "{{ input.id }}"}}}
        ],
        "edges": [{"from": "hook", "to": "claim"}, {"from": "claim", "to": "shape"}]
    });
    let s = Setup::new()
        .store(StoreKind::Sled)
        .workflow(wf)
        .start()
        .await;
    let body = invoice_paid();
    let a = s.hook("claimed", None, &body).await;
    let first = a.json()["run_id"].as_str().unwrap().to_string();
    s.wait_final(&first).await;
    let b = s.hook("claimed", None, &body).await;
    assert_eq!(b.status.as_u16(), 202, "no door key: a second run");
    let second = b.json()["run_id"].as_str().unwrap().to_string();
    let done = s.wait_final(&second).await;
    let claim = done.steps.iter().find(|s| s.step_id == "claim").unwrap();
    assert_eq!(claim.output.as_ref().unwrap()["written"], false);

    let d = deliveries_until(&s, &first, |d| d["duplicates_stopped"] == 1).await;
    let r = &d["stopped"][0];
    assert_eq!(r["by"], "memory_claim", "{d}");
    assert_eq!(r["step_id"], "claim");
    assert_eq!(r["stopped_run"], second.as_str());
    // The stopped run itself holds no effect and lists nothing.
    let own = s.get_json(&format!("/runs/{second}/deliveries")).await;
    assert_eq!(own["duplicates_stopped"], 0, "{own}");
}

/// A repeat of `POST /workflows/{id}/runs` with the same `Idempotency-Key` is answered with
/// the first run and listed on it as stopped by the run API.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_api_repeat_is_listed_on_the_run_it_answered_with() {
    let s = Setup::new()
        .store(StoreKind::Sled)
        .workflow(common::server::api_workflow("api1"))
        .start()
        .await;
    let body = r#"{"input": {"invoice_id": "in_1"}}"#;
    let key = [("idempotency-key", "K-dup")];
    let a = s
        .api(
            reqwest::Method::POST,
            "/workflows/api1/runs",
            &key,
            Some(body),
        )
        .await;
    assert!(a.status.is_success(), "{}", a.text);
    let id = a.json()["id"].as_str().unwrap().to_string();
    let b = s
        .api(
            reqwest::Method::POST,
            "/workflows/api1/runs",
            &key,
            Some(body),
        )
        .await;
    assert_eq!(
        b.json()["id"],
        id.as_str(),
        "the same run answers the repeat"
    );
    let d = s.get_json(&format!("/runs/{id}/deliveries")).await;
    assert_eq!(d["duplicates_stopped"], 1, "{d}");
    assert_eq!(d["stopped"][0]["by"], "run_api");
    assert_eq!(d["stopped"][0]["answer"], a.status.as_u16());
    assert_eq!(d["first"]["trigger"], "api");
}
