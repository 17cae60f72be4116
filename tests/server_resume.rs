//! Resume and replay with edited input over the HTTP API (SPEC §4 "Resume", "Replay with
//! edited input"; §5 `POST /api/v1/runs/{id}/resume`), against real mock destinations on
//! port 0:
//!
//! * resume from the failed step: no step before it is executed again (the mocks count);
//! * resume from a chosen step, and the `from_step`s that are refused;
//! * `409 nothing_to_resume` on a succeeded run, `409 already_resumed` on a resumed one;
//! * a resume runs the original snapshot, whatever the workflow file says now;
//! * replay with an edited input, recorded as such;
//! * the replay preview warns when the lineage's own claim would stop the replay, and writes
//!   no run.
//!
//! Crash recovery with a real `fluxo serve` child process killed mid-POST is in
//! `tests/recovery_kill.rs`.

mod common;

use common::server::{Setup, TestServer};
use common::{Action, Mock};
use fluxo::run::RunStatus;
use reqwest::Method;
use serde_json::{json, Value};

/// `start` → `fetch` (GET `env.LOOKUP`) → `seen` (claim `input.invoice_id`) → `route` (skip
/// when already claimed, to `skipped`) → `create` (POST `env.CRM/deals`, keyed, no retries) –error→ `fail`
/// (rethrow) → `undo` (delete the claim) when `compensate`.
fn claim_workflow(id: &str, compensate: bool) -> Value {
    let mut steps = vec![
        json!({"id": "start", "kind": "manual_trigger", "config": {}}),
        json!({"id": "fetch", "kind": "http_request",
               "config": {"method": "GET", "url": "{{ env.LOOKUP }}/customers/{{ input.customer }}",
                          "retries": 0}}),
        json!({"id": "seen", "kind": "memory",
               "config": {"operation": "write", "namespace": "invoices",
                          "key": "{{ input.invoice_id }}", "allow_overwrite": false}}),
        json!({"id": "route", "kind": "router",
               "config": {"routes": [{"name": "skip", "when": "steps.seen.output.written == false"}]}}),
        json!({"id": "create", "kind": "http_request",
               "config": {"method": "POST", "url": "{{ env.CRM }}/deals",
                          "headers": {"Idempotency-Key": "deal-{{ input.invoice_id }}"},
                          "body": {"invoice": "{{ input.invoice_id }}",
                                   "customer": "{{ steps.fetch.output.body.name }}"},
                          "retries": 0}}),
        json!({"id": "fail", "kind": "error_handler", "config": {"mode": "rethrow"}}),
        json!({"id": "skipped", "kind": "transform",
               "config": {"fields": {"note": "{{ input.invoice_id }} was already processed"}}}),
    ];
    let mut edges = vec![
        json!({"from": "start", "to": "fetch"}),
        json!({"from": "fetch", "to": "seen"}),
        json!({"from": "seen", "to": "route"}),
        json!({"from": "route", "port": "default", "to": "create"}),
        json!({"from": "create", "port": "error", "to": "fail"}),
        json!({"from": "route", "port": "skip", "to": "skipped"}),
    ];
    if compensate {
        steps.push(json!({"id": "undo", "kind": "memory",
            "config": {"operation": "delete", "namespace": "invoices", "key": "{{ input.invoice_id }}"}}));
        edges.push(json!({"from": "fail", "to": "undo"}));
    }
    json!({"id": id, "name": id, "version": 1, "steps": steps, "edges": edges})
}

struct World {
    s: TestServer,
    lookup: Mock,
    crm: Mock,
}

/// A server running `claim_workflow("wf", compensate)`, its lookup answering a customer and
/// its CRM answering `crm` in order (then 201).
async fn world(compensate: bool, crm: Vec<Action>) -> World {
    let lookup = Mock::always(Action::json(200, json!({"name": "Ada"}))).await;
    let crm = Mock::start(crm, Action::json(201, json!({"id": "deal_1"}))).await;
    let s = Setup::new()
        .workflow(claim_workflow("wf", compensate))
        .env("LOOKUP", &lookup.url())
        .env("CRM", &crm.url())
        .start()
        .await;
    World { s, lookup, crm }
}

async fn start_run(s: &TestServer, invoice: &str) -> Value {
    let body = json!({"input": {"invoice_id": invoice, "customer": "cus_1"}}).to_string();
    let a = s
        .api(Method::POST, "/workflows/wf/runs", &[], Some(&body))
        .await;
    assert_eq!(a.status.as_u16(), 200, "{}", a.text);
    a.json()
}

async fn post(s: &TestServer, path: &str, body: Value) -> (u16, Value) {
    let a = s
        .api(Method::POST, path, &[], Some(&body.to_string()))
        .await;
    (a.status.as_u16(), a.json())
}

fn step<'a>(run: &'a Value, id: &str) -> &'a Value {
    run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step_id"] == id)
        .unwrap_or_else(|| panic!("step {id} in {run}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_from_the_failed_step_executes_nothing_before_it() {
    let w = world(true, vec![Action::status(500)]).await;
    let failed = start_run(&w.s, "INV-1").await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["error"]["step"], "create");
    assert_eq!((w.lookup.count(), w.crm.count()), (1, 1));
    // The compensation released the claim.
    assert!(w.s.get_json("/memory/invoices").await["entries"]
        .as_array()
        .is_none_or(|e| e.is_empty()));
    let id = failed["id"].as_str().unwrap();

    // The preview says what the resume will do, and stores nothing.
    let runs_before = w.s.runs_of("wf").await.len();
    let (status, preview) = post(&w.s, &format!("/runs/{id}/resume/preview"), json!({})).await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(preview["from_step"], "create");
    assert_eq!(
        preview["reused"],
        json!(["start", "fetch", "seen", "route"])
    );
    let calls = preview["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{preview}");
    assert_eq!(calls[0]["step_id"], "create");
    assert_eq!(calls[0]["idempotency_key"], "deal-INV-1");
    assert_eq!(calls[0]["again"], true);
    assert_eq!(calls[0]["repeat_safe"], true);
    assert_eq!(preview["run"]["mode"], "dry");
    assert_eq!(
        w.s.runs_of("wf").await.len(),
        runs_before,
        "a preview is not history"
    );
    assert_eq!(
        (w.lookup.count(), w.crm.count()),
        (1, 1),
        "a preview sends nothing"
    );

    let (status, resumed) = post(&w.s, &format!("/runs/{id}/resume"), json!({})).await;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(resumed["status"], "succeeded", "{resumed}");
    assert_eq!(resumed["trigger"], "resume");
    assert_eq!(resumed["resume_of"], id);
    assert_eq!(resumed["root_run_id"], id, "a resume stays in the lineage");
    for reused in ["start", "fetch", "seen", "route"] {
        assert_eq!(step(&resumed, reused)["reused_from"], id, "{reused}");
    }
    assert!(step(&resumed, "create").get("reused_from").is_none());
    assert_eq!(step(&resumed, "create")["status"], "succeeded");
    // The reused claim routes the run as before: to `create`, not to the skip branch.
    assert_eq!(step(&resumed, "seen")["output"]["written"], true);
    // Nothing before the resume point ran again; the create was sent again with its key.
    assert_eq!(w.lookup.count(), 1, "the lookup was not called again");
    let creates = w.crm.requests();
    assert_eq!(creates.len(), 2);
    assert_eq!(creates[1].header("idempotency-key"), Some("deal-INV-1"));
    assert_eq!(
        creates[1].json()["customer"],
        "Ada",
        "the reused lookup's output"
    );

    // The compensation had released the claim; the resumed lineage holds it again, so a
    // later redelivery is stopped by it.
    let claim = w.s.get_json("/memory/invoices/INV-1").await;
    assert_eq!(claim["owner"]["run_id"], id, "{claim}");

    let original = w.s.get_json(&format!("/runs/{id}")).await;
    assert_eq!(original["resumed_by"], json!([resumed["id"]]));
    assert_eq!(
        original["status"], "failed",
        "the original keeps its outcome"
    );

    // Resuming it again would repeat what the resume did.
    let (status, again) = post(&w.s, &format!("/runs/{id}/resume"), json!({})).await;
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["code"], "already_resumed");
    assert_eq!(again["resumed_by"], resumed["id"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_does_not_take_a_claim_another_run_took_meanwhile() {
    let w = world(true, vec![Action::status(500)]).await;
    let failed = start_run(&w.s, "INV-8").await;
    let id = failed["id"].as_str().unwrap();
    // The claim was released by the compensation; a redelivery took it and created the deal.
    let other = start_run(&w.s, "INV-8").await;
    assert_eq!(other["status"], "succeeded");
    assert_eq!(w.crm.count(), 2);

    let (status, resumed) = post(&w.s, &format!("/runs/{id}/resume"), json!({})).await;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(resumed["status"], "succeeded", "{resumed}");
    let seen = step(&resumed, "seen");
    assert!(
        seen.get("reused_from").is_none(),
        "the claim executed again: {seen}"
    );
    assert_eq!(seen["output"]["written"], false);
    assert_eq!(seen["output"]["claimed_by"], other["id"]);
    assert_eq!(step(&resumed, "route")["ports"], json!(["skip"]));
    assert_eq!(w.crm.count(), 2, "no second deal");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_from_a_chosen_step() {
    let w = world(true, vec![Action::status(500)]).await;
    let failed = start_run(&w.s, "INV-2").await;
    let id = failed["id"].as_str().unwrap();

    // Refused: unknown steps, error handlers, steps after the failed one.
    for (from, why) in [
        ("nope", "has no step"),
        ("fail", "error branch"),
        ("undo", "error branch"),
        ("skipped", "did not all succeed"),
    ] {
        let (status, p) = post(
            &w.s,
            &format!("/runs/{id}/resume"),
            json!({ "from_step": from }),
        )
        .await;
        assert_eq!(status, 400, "{from}: {p}");
        assert_eq!(p["code"], "invalid_from_step");
        assert!(p["detail"].as_str().unwrap().contains(why), "{from}: {p}");
    }
    assert_eq!(
        w.s.runs_of("wf").await.len(),
        1,
        "a refused resume creates no run"
    );

    // From `fetch`: the trigger is reused, everything from `fetch` on runs again.
    let (status, resumed) = post(
        &w.s,
        &format!("/runs/{id}/resume"),
        json!({"from_step": "fetch"}),
    )
    .await;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(resumed["status"], "succeeded", "{resumed}");
    assert_eq!(resumed["resume_from"], "fetch");
    assert_eq!(step(&resumed, "start")["reused_from"], id);
    for executed in ["fetch", "seen", "route", "create"] {
        assert!(
            step(&resumed, executed).get("reused_from").is_none(),
            "{executed}"
        );
    }
    assert_eq!(w.lookup.count(), 2, "fetch ran again");
    assert_eq!(w.crm.count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_succeeded_run_has_nothing_to_resume() {
    let w = world(true, vec![]).await;
    let done = start_run(&w.s, "INV-3").await;
    assert_eq!(done["status"], "succeeded");
    let id = done["id"].as_str().unwrap();
    for path in [
        format!("/runs/{id}/resume"),
        format!("/runs/{id}/resume/preview"),
    ] {
        let (status, p) = post(&w.s, &path, json!({})).await;
        assert_eq!(status, 409, "{path}: {p}");
        assert_eq!(p["code"], "nothing_to_resume");
    }
    let (status, p) = post(&w.s, "/runs/no-such-run/resume", json!({})).await;
    assert_eq!((status, p["code"].as_str()), (404, Some("run_not_found")));
    let (status, p) = post(&w.s, &format!("/runs/{id}/resume"), json!({"from": "x"})).await;
    assert_eq!((status, p["code"].as_str()), (400, Some("invalid_body")));
    assert_eq!(w.crm.count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_runs_the_original_snapshot() {
    let w = world(true, vec![Action::status(500)]).await;
    let failed = start_run(&w.s, "INV-4").await;
    let id = failed["id"].as_str().unwrap();

    // The workflow is edited since: `create` now posts somewhere else.
    let elsewhere = Mock::always(Action::json(201, json!({"id": "other"}))).await;
    let mut edited = claim_workflow("wf", true);
    edited["steps"][4]["config"]["url"] = json!(format!("{}/deals", elsewhere.url()));
    let a =
        w.s.api(Method::PUT, "/workflows/wf", &[], Some(&edited.to_string()))
            .await;
    assert_eq!(a.status.as_u16(), 200, "{}", a.text);

    let (status, resumed) = post(&w.s, &format!("/runs/{id}/resume"), json!({})).await;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(resumed["status"], "succeeded", "{resumed}");
    assert_eq!(resumed["workflow_version"], failed["workflow_version"]);
    assert_eq!(resumed["definition_hash"], failed["definition_hash"]);
    assert_eq!(
        w.crm.count(),
        2,
        "the original's destination got the resumed call"
    );
    assert_eq!(elsewhere.count(), 0, "the edited definition did not run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_with_edited_input() {
    let w = world(true, vec![Action::status(500)]).await;
    let failed = start_run(&w.s, "INV-typo").await;
    let id = failed["id"].as_str().unwrap();
    let corrected = json!({"invoice_id": "INV-5", "customer": "cus_1"});

    // The preview of the corrected replay stores nothing.
    let (status, preview) = post(
        &w.s,
        &format!("/runs/{id}/replay/preview"),
        json!({ "input": corrected }),
    )
    .await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(preview["run"]["input"], corrected);
    assert_eq!(preview["run"]["input_edited"], true);
    let create = preview["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["step_id"] == "create")
        .expect("the create call");
    assert_eq!(create["idempotency_key"], "deal-INV-5");
    assert_eq!(create["again"], true, "the original sent it");
    assert_eq!(w.s.runs_of("wf").await.len(), 1);

    let (status, replay) = post(
        &w.s,
        &format!("/runs/{id}/replay"),
        json!({ "input": corrected }),
    )
    .await;
    assert_eq!(status, 200, "{replay}");
    assert_eq!(replay["status"], "succeeded", "{replay}");
    assert_eq!(replay["replay_of"], id);
    assert_eq!(replay["input"], corrected);
    assert_eq!(replay["input_edited"], true);
    assert_eq!(
        replay["root_run_id"], replay["id"],
        "a replay starts its own lineage"
    );
    let last = w.crm.requests().pop().unwrap();
    assert_eq!(last.json()["invoice"], "INV-5");
    assert_eq!(last.header("idempotency-key"), Some("deal-INV-5"));

    // The same input is not an edit.
    let (_, same) = post(
        &w.s,
        &format!("/runs/{id}/replay"),
        json!({"mode": "dry", "input": failed["input"]}),
    )
    .await;
    assert!(same.get("input_edited").is_none(), "{same}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_stopped_by_the_lineages_own_claim_is_flagged_and_resume_is_offered() {
    // No compensation: the failed run's claim stays, as after a crash.
    let w = world(false, vec![Action::status(500)]).await;
    let failed = start_run(&w.s, "INV-6").await;
    assert_eq!(failed["status"], "failed");
    let id = failed["id"].as_str().unwrap();

    let (status, preview) = post(&w.s, &format!("/runs/{id}/replay/preview"), json!({})).await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(preview["resume_instead"], true, "{preview}");
    let warning = &preview["warnings"][0];
    assert_eq!(warning["code"], "own_claim");
    assert_eq!(warning["step"], "seen");
    assert!(warning["message"].as_str().unwrap().contains(id));
    assert_eq!(step(&preview["run"], "route")["ports"], json!(["skip"]));
    assert_eq!(w.s.runs_of("wf").await.len(), 1, "a preview is not history");

    // The resume goes through: its claim step is the lineage's own.
    let (status, resumed) = post(&w.s, &format!("/runs/{id}/resume"), json!({})).await;
    assert_eq!(status, 200, "{resumed}");
    assert_eq!(resumed["status"], "succeeded", "{resumed}");
    assert_eq!(w.crm.count(), 2);

    // Once the lineage succeeded, a replay is stopped by the claim, as it should be, and the
    // preview no longer offers a resume.
    let (_, preview) = post(&w.s, &format!("/runs/{id}/replay/preview"), json!({})).await;
    assert_eq!(
        step(&preview["run"], "seen")["output"]["claimed_by"],
        id,
        "{preview}"
    );
    let (_, replay) = post(&w.s, &format!("/runs/{id}/replay"), json!({})).await;
    assert_eq!(replay["status"], "succeeded");
    assert_eq!(step(&replay, "route")["ports"], json!(["skip"]));
    assert_eq!(w.crm.count(), 2, "the replay created nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_a_resume_keeps_the_lineage_and_its_claim() {
    // Two failures, then success: the original fails, its resume fails, the resume of the
    // resume succeeds; every run is in one lineage, and the claim (kept: no compensation) is
    // the lineage's own all along.
    let w = world(false, vec![Action::status(500), Action::status(503)]).await;
    let first = start_run(&w.s, "INV-7").await;
    let id = first["id"].as_str().unwrap();
    let (_, second) = post(&w.s, &format!("/runs/{id}/resume"), json!({})).await;
    assert_eq!(second["status"], "failed", "{second}");
    let second_id = second["id"].as_str().unwrap();
    // The first run was resumed already: a second resume of it would run beside the chain.
    let (status, p) = post(&w.s, &format!("/runs/{id}/resume"), json!({})).await;
    assert_eq!(
        (status, p["code"].as_str()),
        (409, Some("already_resumed")),
        "{p}"
    );
    assert_eq!(p["resumed_by"], second_id, "the newest run of the chain");
    assert!(
        p["detail"].as_str().unwrap().contains("resume that one"),
        "{p}"
    );
    // The history lists the chain's links.
    let listed = w.s.get_json("/runs?workflow=wf").await;
    let first_summary = listed["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap()
        .clone();
    assert_eq!(first_summary["resumed_by"], json!([second_id]));
    assert_eq!(first_summary["root_run_id"], id);
    let (_, third) = post(&w.s, &format!("/runs/{second_id}/resume"), json!({})).await;
    assert_eq!(third["status"], "succeeded", "{third}");
    assert_eq!(third["root_run_id"], id);
    // The reused steps point at the run that executed them.
    assert_eq!(step(&third, "fetch")["reused_from"], id);
    assert_eq!(w.lookup.count(), 1);
    assert_eq!(w.crm.count(), 3);
    let status = |v: &Value| RunStatus::parse(v["status"].as_str().unwrap()).unwrap();
    assert_eq!(status(&second), RunStatus::Failed);
}

/// The preview's step ids under `field`.
fn ids(preview: &Value, field: &str) -> Vec<String> {
    preview[field]
        .as_array()
        .unwrap_or_else(|| panic!("{field} in {preview}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lineage_fixed_by_its_resume_says_so_and_offers_no_resume() {
    // Issue 37 point 4: no compensation, so the failed run's claim stays; its resume succeeds.
    let w = world(false, vec![Action::status(500)]).await;
    let failed = start_run(&w.s, "INV-9").await;
    let id = failed["id"].as_str().unwrap();
    let (_, resumed) = post(&w.s, &format!("/runs/{id}/resume"), json!({})).await;
    assert_eq!(resumed["status"], "succeeded", "{resumed}");
    let resumed_id = resumed["id"].as_str().unwrap();

    // The replay preview follows the lineage: fixed by the resume, nothing to resume.
    let (status, preview) = post(&w.s, &format!("/runs/{id}/replay/preview"), json!({})).await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(preview["resume_instead"], false, "{preview}");
    assert!(preview.get("resume_run_id").is_none(), "{preview}");
    assert_eq!(
        preview["fixed_by"],
        json!({"run_id": resumed_id, "trigger": "resume"})
    );
    let warnings = preview["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{preview}");
    assert_eq!(warnings[0]["code"], "lineage_fixed");
    assert_eq!(
        warnings[0]["step"], "seen",
        "the claim that stops the replay"
    );
    let message = warnings[0]["message"].as_str().unwrap();
    assert!(message.contains(resumed_id), "{message}");
    assert!(message.contains("a resume"), "{message}");
    assert!(!message.contains("did not finish"), "{message}");
    assert!(!message.contains("Resume run"), "{message}");

    // The resume preview answers why there is nothing to resume, naming the fix.
    let (status, p) = post(&w.s, &format!("/runs/{id}/resume/preview"), json!({})).await;
    assert_eq!((status, p["code"].as_str()), (409, Some("already_resumed")));
    assert_eq!(p["resumed_by"], resumed_id);
    assert_eq!(p["fixed_by"], resumed_id);
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("the lineage is fixed"),
        "{p}"
    );
    assert_eq!(w.crm.count(), 2, "previews send nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lineage_fixed_by_a_replay_says_so_in_both_previews() {
    // The compensation released the claim; a replay took it and created the deal.
    let w = world(true, vec![Action::status(500)]).await;
    let failed = start_run(&w.s, "INV-10").await;
    let id = failed["id"].as_str().unwrap();
    let (_, replay) = post(&w.s, &format!("/runs/{id}/replay"), json!({})).await;
    assert_eq!(replay["status"], "succeeded", "{replay}");
    let replay_id = replay["id"].as_str().unwrap();
    let fixed = json!({"run_id": replay_id, "trigger": "replay"});

    let (_, preview) = post(&w.s, &format!("/runs/{id}/replay/preview"), json!({})).await;
    assert_eq!(preview["fixed_by"], fixed, "{preview}");
    assert_eq!(preview["resume_instead"], false);
    assert_eq!(preview["warnings"][0]["code"], "lineage_fixed");
    assert!(preview["warnings"][0]["message"]
        .as_str()
        .unwrap()
        .contains(&format!("run `{replay_id}` (a replay)")));

    let (status, preview) = post(&w.s, &format!("/runs/{id}/resume/preview"), json!({})).await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(preview["fixed_by"], fixed, "{preview}");
    assert_eq!(preview["warnings"][0]["code"], "lineage_fixed");
    // The resume would find the claim taken by the replay: it takes the skip route.
    assert_eq!(step(&preview["run"], "route")["ports"], json!(["skip"]));
    assert_eq!(w.crm.count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_stopped_by_an_unfinished_resume_chain_offers_its_newest_run() {
    let w = world(false, vec![Action::status(500), Action::status(503)]).await;
    let first = start_run(&w.s, "INV-11").await;
    let id = first["id"].as_str().unwrap();
    let (_, second) = post(&w.s, &format!("/runs/{id}/resume"), json!({})).await;
    assert_eq!(second["status"], "failed", "{second}");
    let second_id = second["id"].as_str().unwrap();

    let (_, preview) = post(&w.s, &format!("/runs/{id}/replay/preview"), json!({})).await;
    assert!(preview.get("fixed_by").is_none(), "{preview}");
    assert_eq!(preview["resume_instead"], true, "{preview}");
    assert_eq!(
        preview["resume_run_id"], second_id,
        "the chain's newest run"
    );
    assert_eq!(preview["warnings"][0]["code"], "own_claim");
    assert!(preview["warnings"][0]["message"]
        .as_str()
        .unwrap()
        .contains(&format!("Resume run `{second_id}` instead")));
    // And that run can be resumed: the advice is alive.
    let (status, p) = post(
        &w.s,
        &format!("/runs/{second_id}/resume/preview"),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{p}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_resume_preview_partitions_the_steps_as_the_resume_then_does() {
    // Issue 37 point 5: the original fails and releases its claim; a replay of it takes the
    // claim, fails and releases it; the original is resumed and re-takes the claim. A resume
    // of the replay then cannot reuse its claim: the claim executes again (`exists`), and so
    // does everything after it, though the plan alone would start at `create`.
    let w = world(true, vec![Action::status(500), Action::status(500)]).await;
    let original = start_run(&w.s, "INV-12").await;
    let id = original["id"].as_str().unwrap();
    let (_, replay) = post(&w.s, &format!("/runs/{id}/replay"), json!({})).await;
    assert_eq!(replay["status"], "failed", "{replay}");
    assert_eq!(replay["error"]["step"], "create");
    let replay_id = replay["id"].as_str().unwrap();
    let (_, resumed) = post(&w.s, &format!("/runs/{id}/resume"), json!({})).await;
    assert_eq!(resumed["status"], "succeeded", "{resumed}");
    assert_eq!(w.crm.count(), 3);

    let (status, preview) = post(
        &w.s,
        &format!("/runs/{replay_id}/resume/preview"),
        json!({}),
    )
    .await;
    assert_eq!(status, 200, "{preview}");
    let (reused, executed) = (ids(&preview, "reused"), ids(&preview, "executed"));
    assert_eq!(reused, ["start", "fetch"], "{preview}");
    assert_eq!(executed, ["seen", "route", "skipped"], "{preview}");
    assert_eq!(preview["from_step"], "seen", "the first step that executes");
    // A partition of the previewed run's steps.
    let walked: Vec<String> = preview["run"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step_id"].as_str().unwrap().to_string())
        .collect();
    let mut both = [reused.clone(), executed.clone()].concat();
    both.sort();
    let mut all = walked.clone();
    all.sort();
    assert_eq!(both, all, "each step in exactly one list");
    assert!(
        preview["calls"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["step_id"] != "create"),
        "{preview}"
    );

    // The resume does what the preview said, record for record.
    let (_, done) = post(&w.s, &format!("/runs/{replay_id}/resume"), json!({})).await;
    assert_eq!(done["status"], "succeeded", "{done}");
    let records: Vec<(String, bool)> = done["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["step_id"].as_str().unwrap().to_string(),
                s.get("reused_from").is_some(),
            )
        })
        .collect();
    let expected: Vec<(String, bool)> = walked
        .iter()
        .map(|id| (id.clone(), reused.contains(id)))
        .collect();
    assert_eq!(records, expected);
    assert_eq!(step(&done, "seen")["output"]["claimed_by"], id);
    assert_eq!(w.crm.count(), 3, "no call: the event was handled");
}
