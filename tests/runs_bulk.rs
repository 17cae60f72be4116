//! Bulk resume and replay over a filter (issue 15; `POST /api/v1/runs/bulk` and its preview),
//! against a real server on port 0 with a sled store in a temp dir and a mock destination:
//!
//! * the preview counts every failed run matching the filter (not a page of them): how many
//!   resume, how many replay, which are skipped (fixed by a later run, already resumed) and
//!   how many dry runs are excluded; it writes nothing;
//! * the action does what the preview said: resumes, live replays, never a dry run, nothing
//!   outside the filter; a second action finds nothing left to do;
//! * more than 10,000 failed runs is `422 too_many_runs`; bad input is a 400 problem;
//! * the run list names the run that fixed a failure (`fixed_by`, through resumes of resumes
//!   too), never a dry run for a live failure, and carries `replayed_by`.

mod common;

use common::server::{Setup, StoreKind, TestServer};
use common::{Action, Mock};
use fluxo::clock::Clock;
use fluxo::run::{new_run_id, Mode, RunRecord, RunStatus};
use fluxo::store::RunQuery;
use reqwest::Method;
use serde_json::{json, Value};

/// `start` → `create` (POST `env.CRM/deals`, no retries).
fn crm_workflow(id: &str) -> Value {
    json!({
        "id": id, "name": id, "version": 1,
        "steps": [
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "create", "kind": "http_request",
             "config": {"method": "POST", "url": "{{ env.CRM }}/deals",
                        "body": {"n": "{{ input.n }}"}, "retries": 0}}
        ],
        "edges": [{"from": "start", "to": "create"}]
    })
}

async fn post(s: &TestServer, path: &str, body: Value) -> (u16, Value) {
    let a = s
        .api(Method::POST, path, &[], Some(&body.to_string()))
        .await;
    (a.status.as_u16(), a.json())
}

async fn start_run(s: &TestServer, wf: &str, n: u32) -> RunRecord {
    let (status, run) = post(
        s,
        &format!("/workflows/{wf}/runs"),
        json!({"input": {"n": n}}),
    )
    .await;
    assert_eq!(status, 200, "{run}");
    serde_json::from_value(run).unwrap()
}

async fn count_runs(s: &TestServer) -> usize {
    let page = s
        .store
        .list_runs(&RunQuery {
            limit: 10_000,
            ..Default::default()
        })
        .await
        .unwrap();
    page.runs.len()
}

/// A copy of `run` under a new id, stored as it is (after `edit`).
async fn stored_copy(
    s: &TestServer,
    run: &RunRecord,
    edit: impl FnOnce(&mut RunRecord),
) -> RunRecord {
    let mut copy = run.clone();
    copy.id = new_run_id(s.clock.now_ms());
    copy.root_run_id = copy.id.clone();
    edit(&mut copy);
    s.store.put_run(&copy).await.unwrap();
    copy
}

fn action_of<'a>(summary: &'a Value, run_id: &str) -> &'a Value {
    summary["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run_id"] == run_id)
        .unwrap_or_else(|| panic!("run {run_id} in {summary}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_acts_on_every_failed_live_run_of_the_filter_as_previewed() {
    // Six failures, then the destination recovers.
    let crm = Mock::start(
        vec![Action::status(500); 6],
        Action::json(201, json!({"id": "deal"})),
    )
    .await;
    let s = Setup::new()
        .store(StoreKind::Sled)
        .workflow(crm_workflow("wf"))
        .workflow(crm_workflow("other"))
        .env("CRM", &crm.url())
        .start()
        .await;

    let mut failed = Vec::new();
    for n in 1..=4 {
        let r = start_run(&s, "wf", n).await;
        assert_eq!(r.status, RunStatus::Failed, "{r:?}");
        failed.push(r);
    }
    let (r1, r2, r3, r4) = (&failed[0], &failed[1], &failed[2], &failed[3]);
    // r2 is resumed while the destination still fails: its resume fails too.
    let (status, r2b) = post(&s, &format!("/runs/{}/resume", r2.id), json!({})).await;
    assert_eq!(
        (status, r2b["status"].as_str()),
        (200, Some("failed")),
        "{r2b}"
    );
    let r2b = r2b["id"].as_str().unwrap().to_string();
    let other = start_run(&s, "other", 9).await;
    assert_eq!(other.status, RunStatus::Failed);
    // Now the destination answers 201: a live replay of r1 fixes it.
    let (status, fix) = post(&s, &format!("/runs/{}/replay", r1.id), json!({})).await;
    assert_eq!(
        (status, fix["status"].as_str()),
        (200, Some("succeeded")),
        "{fix}"
    );
    let fix = fix["id"].as_str().unwrap().to_string();
    // A failed dry run, and a failed run whose recorded definition no longer validates.
    let dry = stored_copy(&s, r3, |r| r.mode = Mode::Dry).await;
    let broken = stored_copy(&s, r4, |r| {
        r.snapshot["steps"][1]["kind"] = json!("a_kind_that_was_removed");
        r.definition_hash = "0".repeat(64); // another definition: another hash
    })
    .await;

    // The preview: 7 failed runs of `wf`; 6 live.
    let runs_before = count_runs(&s).await;
    let filter = json!({"filter": {"workflow": "wf"}});
    let (status, preview) = post(&s, "/runs/bulk/preview", filter.clone()).await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(preview["matched"], 7, "{preview}");
    assert_eq!(preview["live"], 6, "{preview}");
    assert_eq!(preview["resume"], 3, "{preview}");
    assert_eq!(preview["replay"], 1, "{preview}");
    assert_eq!(preview["skipped"], 2, "{preview}");
    assert_eq!(preview["dry_excluded"], 1, "{preview}");
    assert_eq!(preview["limit"], 10_000);
    assert!(preview["as_of"].is_string());
    assert_eq!(action_of(&preview, &r1.id)["action"], "skip");
    assert_eq!(action_of(&preview, &r1.id)["reason"], "fixed");
    assert_eq!(action_of(&preview, &r1.id)["new_run_id"], fix.as_str());
    assert_eq!(action_of(&preview, &r2.id)["reason"], "already_resumed");
    assert_eq!(action_of(&preview, &r2.id)["new_run_id"], r2b.as_str());
    for id in [r2b.as_str(), &r3.id, &r4.id] {
        assert_eq!(
            action_of(&preview, id)["action"],
            "resume",
            "{id}: {preview}"
        );
    }
    assert_eq!(action_of(&preview, &broken.id)["action"], "replay");
    assert!(
        preview["runs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["run_id"] != dry.id.as_str()),
        "the dry run is not among the runs acted on"
    );
    assert_eq!(count_runs(&s).await, runs_before, "a preview writes no run");

    // The action does what the preview said, with the new runs per original.
    let (status, done) = post(&s, "/runs/bulk", filter.clone()).await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(
        (
            &done["resume"],
            &done["replay"],
            &done["skipped"],
            &done["errors"],
            &done["dry_excluded"]
        ),
        (&json!(3), &json!(1), &json!(2), &json!(0), &json!(1)),
        "{done}"
    );
    for id in [r2b.as_str(), &r3.id, &r4.id] {
        let item = action_of(&done, id);
        assert_eq!(item["action"], "resume");
        let new = s.wait_final(item["new_run_id"].as_str().unwrap()).await;
        assert_eq!(new.resume_of.as_deref(), Some(id));
        assert_eq!((new.mode, new.status), (Mode::Live, RunStatus::Succeeded));
    }
    let item = action_of(&done, &broken.id);
    assert_eq!(item["action"], "replay");
    let replay = s.wait_final(item["new_run_id"].as_str().unwrap()).await;
    assert_eq!(replay.replay_of.as_deref(), Some(broken.id.as_str()));
    assert_eq!(
        (replay.mode, replay.status),
        (Mode::Live, RunStatus::Succeeded)
    );
    // Four new runs, no more; the dry run and the other workflow's run are untouched.
    assert_eq!(count_runs(&s).await, runs_before + 4);
    let dry_now = s.store.get_run(&dry.id).await.unwrap().unwrap();
    assert!(dry_now.replayed_by.is_empty() && dry_now.resumed_by.is_empty());
    let other_now = s.store.get_run(&other.id).await.unwrap().unwrap();
    assert!(other_now.replayed_by.is_empty() && other_now.resumed_by.is_empty());
    // 1 + 4 + 1 requests before; 4 now.
    assert_eq!(crm.count(), 6 + 1 + 4);

    // Everything is fixed now: a second action starts nothing.
    let (status, again) = post(&s, "/runs/bulk", filter).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(
        (&again["resume"], &again["replay"]),
        (&json!(0), &json!(0)),
        "{again}"
    );
    assert_eq!(again["skipped"], 6, "{again}");
    assert!(again["runs"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["reason"] == "fixed"));
    assert_eq!(count_runs(&s).await, runs_before + 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_filters_follow_the_run_list_and_bad_input_is_a_problem() {
    let crm = Mock::always(Action::status(500)).await;
    let s = Setup::new()
        .store(StoreKind::Sled)
        .workflow(crm_workflow("wf"))
        .env("CRM", &crm.url())
        .start()
        .await;
    let a = start_run(&s, "wf", 1).await;
    let b = start_run(&s, "wf", 2).await;
    assert_eq!((a.status, b.status), (RunStatus::Failed, RunStatus::Failed));

    // A status other than a failed one matches nothing to act on.
    let (status, p) = post(
        &s,
        "/runs/bulk/preview",
        json!({"filter": {"status": "succeeded"}}),
    )
    .await;
    assert_eq!((status, &p["matched"]), (200, &json!(0)), "{p}");
    // The key search narrows it like the list does.
    let (status, p) = post(&s, "/runs/bulk/preview", json!({"filter": {"q": a.id}})).await;
    assert_eq!(
        (status, &p["matched"], &p["resume"]),
        (200, &json!(1), &json!(1)),
        "{p}"
    );
    // `until` = an earlier preview's `as_of` leaves out runs that arrived after it.
    let (_, first) = post(&s, "/runs/bulk/preview", json!({})).await;
    s.advance(std::time::Duration::from_secs(1));
    let c = start_run(&s, "wf", 3).await;
    assert_eq!(c.status, RunStatus::Failed);
    let (_, p) = post(
        &s,
        "/runs/bulk/preview",
        json!({"filter": {"until": first["as_of"]}}),
    )
    .await;
    assert_eq!(p["matched"], 2, "{p}");
    let (_, p) = post(&s, "/runs/bulk/preview", json!({"filter": {"mode": "dry"}})).await;
    assert_eq!(p["matched"], 0, "{p}");

    for (body, code) in [
        (json!({"filter": {"status": "broken"}}), "invalid_parameter"),
        (
            json!({"filter": {"since": "yesterday"}}),
            "invalid_parameter",
        ),
        (json!({"filter": {"since": true}}), "invalid_parameter"),
        (json!({"version": "newest"}), "invalid_body"),
        (json!({"filter": {"workflows": "wf"}}), "invalid_body"),
        (json!({"mode": "live"}), "invalid_body"),
    ] {
        for path in ["/runs/bulk/preview", "/runs/bulk"] {
            let a = s
                .api(Method::POST, path, &[], Some(&body.to_string()))
                .await;
            a.problem(400, code);
        }
    }
    assert_eq!(count_runs(&s).await, 3, "no bad request started a run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_than_ten_thousand_failed_runs_is_too_many() {
    let crm = Mock::always(Action::status(500)).await;
    let s = Setup::new()
        .store(StoreKind::Sled)
        .workflow(crm_workflow("wf"))
        .env("CRM", &crm.url())
        .start()
        .await;
    let failed = start_run(&s, "wf", 1).await;
    for _ in 0..10_000 {
        stored_copy(&s, &failed, |_| {}).await;
    }
    for path in ["/runs/bulk/preview", "/runs/bulk"] {
        let a = s.api(Method::POST, path, &[], Some("{}")).await;
        let doc = a.problem(422, "too_many_runs");
        assert_eq!(doc["limit"], 10_000, "{doc}");
        assert!(doc["detail"].as_str().unwrap().contains("narrow"), "{doc}");
    }
    // A filter that narrows it to one run is fine.
    let (status, p) = post(
        &s,
        "/runs/bulk/preview",
        json!({"filter": {"q": failed.id}}),
    )
    .await;
    assert_eq!((status, &p["matched"]), (200, &json!(1)), "{p}");
    assert_eq!(crm.count(), 1, "nothing was started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_list_names_the_run_that_fixed_a_failure() {
    let crm = Mock::start(
        vec![Action::status(500); 3],
        Action::json(201, json!({"id": "deal"})),
    )
    .await;
    let s = Setup::new()
        .store(StoreKind::Sled)
        .workflow(crm_workflow("wf"))
        .env("CRM", &crm.url())
        .start()
        .await;
    let r1 = start_run(&s, "wf", 1).await;
    let r2 = start_run(&s, "wf", 2).await;
    let (_, r2b) = post(&s, &format!("/runs/{}/resume", r2.id), json!({})).await;
    assert_eq!(r2b["status"], "failed", "{r2b}");
    let r2b = r2b["id"].as_str().unwrap().to_string();
    // The destination recovers. A dry replay succeeds, but does not fix a live failure.
    let (_, dry) = post(
        &s,
        &format!("/runs/{}/replay", r1.id),
        json!({"mode": "dry"}),
    )
    .await;
    assert_eq!(
        (&dry["status"], &dry["mode"]),
        (&json!("succeeded"), &json!("dry"))
    );
    let list = s.get_json("/runs?workflow=wf").await;
    let summary = |list: &Value, id: &str| -> Value {
        list["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("{id} in {list}"))
    };
    let s1 = summary(&list, &r1.id);
    assert_eq!(s1["replayed_by"], json!([dry["id"]]), "{s1}");
    assert!(s1.get("fixed_by").is_none(), "{s1}");

    // A live replay fixes r1; the resume of r2's resume fixes r2 and r2's resume.
    let (_, fix1) = post(&s, &format!("/runs/{}/replay", r1.id), json!({})).await;
    assert_eq!(fix1["status"], "succeeded");
    let (_, fix2) = post(&s, &format!("/runs/{r2b}/resume"), json!({})).await;
    assert_eq!(fix2["status"], "succeeded");
    let list = s.get_json("/runs?workflow=wf").await;
    assert_eq!(summary(&list, &r1.id)["fixed_by"], fix1["id"]);
    assert_eq!(summary(&list, &r2.id)["fixed_by"], fix2["id"]);
    assert_eq!(summary(&list, &r2b)["fixed_by"], fix2["id"]);
    // Runs that did not fail are never "fixed".
    for id in [&dry["id"], &fix1["id"], &fix2["id"]] {
        let sm = summary(&list, id.as_str().unwrap());
        assert!(sm.get("fixed_by").is_none(), "{sm}");
    }
    // A page of failed runs only still says it.
    let failed = s.get_json("/runs?workflow=wf&status=failed").await;
    assert_eq!(failed["runs"].as_array().unwrap().len(), 3);
    assert!(failed["runs"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["fixed_by"].is_string()));
}
