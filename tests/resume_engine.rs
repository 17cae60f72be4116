//! Resume through the engine's public API (SPEC §4 "Resume"), and handed case C11:
//!
//! * C11: conflict and lock answers (409, 423) are not transient: one request each, the step
//!   error carries the status; 408 and 503 are (four requests); `retry_once` on the 409 step
//!   makes exactly two requests in all. What counts as transient is also what a resume
//!   preview warns about (`not_transient`). A 5xx the destination replays as the stored
//!   result of the key (`Idempotent-Replayed: true`) is not transient either.
//! * A Memory claim is its lineage's own: a resumed claim step that finds its own claim
//!   answers `written: true, reclaimed: true`; any other run, a replay included, gets
//!   `exists` with `claimed_by`.
//! * `publish_output`'s per-run key is the lineage's: a resume sends the first attempt's key.
//! * A step that is not safe to repeat is recorded `running` durably before it starts, and
//!   recovery leaves such a run to a person; a safe one is resumed.

mod common;

use common::server::GatedMock;
use common::{compile, dump, output, step, workflow, Action, Harness, Mock};
use fluxo::run::{Mode, RunStatus, StepStatus, Trigger};
use fluxo::runtime::{RecoverPolicy, Recovery, RunRequest};
use fluxo::store::{ClaimOwner, MemoryStore, RunStore, WriteOptions};
use serde_json::{json, Value};

fn call_workflow(url: &str, retries: u32, handler: Option<&str>) -> Value {
    let mut steps = vec![
        json!({"id": "start", "kind": "manual_trigger", "config": {}}),
        json!({"id": "call", "kind": "http_request",
               "config": {"method": "POST", "url": format!("{url}/jobs"),
                          "headers": {"Idempotency-Key": "job-{{ input.id }}"},
                          "retries": retries, "retry_strategy": "fixed",
                          "retry_base_delay_ms": 100}}),
    ];
    let mut edges = vec![json!({"from": "start", "to": "call"})];
    if let Some(mode) = handler {
        steps.push(json!({"id": "handler", "kind": "error_handler", "config": {"mode": mode}}));
        edges.push(json!({"from": "call", "port": "error", "to": "handler"}));
    }
    workflow("c11", Value::Null, json!(steps), json!(edges))
}

/// 3 retries against a destination answering `status` every time: `requests` requests, and
/// the run fails with that status.
async fn c11(status: u16, requests: usize) {
    let mock = Mock::always(Action::status(status)).await;
    let wf = compile(&call_workflow(&mock.url(), 3, None));
    let h = Harness::new();
    let run = h.run(&wf, json!({"id": "J-1"})).await;
    assert_eq!(mock.count(), requests, "{status}: {}", dump(&run));
    assert_eq!(run.status, RunStatus::Failed);
    let e = run.error.as_ref().unwrap();
    assert_eq!(
        (e.code.as_str(), e.http_status),
        ("http_status", Some(status))
    );
    assert_eq!(step(&run, "call").attempts.len(), requests);
}

#[tokio::test]
async fn c11_conflict_is_not_transient() {
    c11(409, 1).await;
}

#[tokio::test]
async fn c11_locked_is_not_transient() {
    c11(423, 1).await;
}

#[tokio::test]
async fn c11_request_timeout_and_unavailable_are_transient() {
    c11(408, 4).await;
    c11(503, 4).await;
}

#[tokio::test]
async fn c11_retry_once_on_a_conflict_makes_two_requests_in_all() {
    let mock = Mock::always(Action::status(409)).await;
    let wf = compile(&call_workflow(&mock.url(), 3, Some("retry_once")));
    let h = Harness::new();
    let run = h.run(&wf, json!({"id": "J-2"})).await;
    assert_eq!(mock.count(), 2, "{}", dump(&run));
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.error.as_ref().unwrap().http_status, Some(409));

    // A resume of it would send the same request again: the preview says the answer was
    // not transient.
    let preview = h.engine.preview_resume(&run, None).await.unwrap();
    assert_eq!(preview.warnings[0].code, "not_transient", "{preview:?}");
    assert!(preview.warnings[0].message.contains("409"));
    assert_eq!(mock.count(), 2, "a preview sends nothing");
}

#[tokio::test]
async fn a_replayed_stored_5xx_is_not_retried() {
    // Stripe replays the stored result of a keyed request, a 500 included: retrying it (or
    // resuming into it) cannot change the answer.
    let mock = Mock::always(Action::status(500).header("Idempotent-Replayed", "true")).await;
    let wf = compile(&call_workflow(&mock.url(), 3, None));
    let h = Harness::new();
    let run = h.run(&wf, json!({"id": "J-3"})).await;
    assert_eq!(mock.count(), 1, "{}", dump(&run));
    let e = run.error.unwrap();
    assert_eq!(e.http_status, Some(500));
    assert!(
        e.message.contains("Idempotent-Replayed: true"),
        "{}",
        e.message
    );
}

#[tokio::test]
async fn the_http_step_says_423_is_not_retried() {
    let catalog = fluxo::steps::Registry::builtin().catalog();
    let http = catalog
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kind"] == "http_request")
        .unwrap();
    let text = http["description"].as_str().unwrap();
    assert!(
        text.contains("423 Locked") && text.contains("not retried"),
        "{text}"
    );
}

/// `start` → `seen` (claim `input.id`) → `route` → `publish` (per-run key) on `default`.
fn publish_workflow(url: &str) -> Value {
    workflow(
        "claims",
        Value::Null,
        json!([
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "seen", "kind": "memory",
             "config": {"operation": "write", "namespace": "ev", "key": "{{ input.id }}",
                        "allow_overwrite": false}},
            {"id": "route", "kind": "router",
             "config": {"routes": [{"name": "skip", "when": "steps.seen.output.written == false"}]}},
            {"id": "publish", "kind": "publish_output",
             "config": {"url": format!("{url}/out"), "retries": 0}}
        ]),
        json!([
            {"from": "start", "to": "seen"},
            {"from": "seen", "to": "route"},
            {"from": "route", "port": "default", "to": "publish"}
        ]),
    )
}

#[tokio::test]
async fn a_claim_is_its_lineages_own_and_the_per_run_key_is_the_lineages() {
    let mock = Mock::start([Action::status(500)], Action::json(200, json!({}))).await;
    let wf = compile(&publish_workflow(&mock.url()));
    let h = Harness::new();
    let first = h.run(&wf, json!({"id": "E-1"})).await;
    assert_eq!(first.status, RunStatus::Failed, "{}", dump(&first));
    let entry = h.store.read("ev", "E-1", h.now()).await.unwrap().unwrap();
    assert_eq!(
        entry.owner,
        Some(ClaimOwner {
            run_id: first.id.clone(),
            step_id: "seen".into()
        })
    );

    // Resume from the claim itself (as recovery does when the claim's record was lost): it
    // finds its own claim and goes on.
    let (wf2, resume, orig) = h.engine.resume_run(&first, Some("seen")).await.unwrap();
    h.store.put_run(&orig).await.unwrap();
    let resumed = h.engine.execute(&wf2, resume).await.unwrap();
    assert_eq!(resumed.status, RunStatus::Succeeded, "{}", dump(&resumed));
    assert_eq!(
        output(&resumed, "seen"),
        &json!({"written": true, "reclaimed": true, "key": "E-1"})
    );
    let keys: Vec<_> = mock
        .requests()
        .iter()
        .map(|r| r.header("idempotency-key").unwrap().to_string())
        .collect();
    assert_eq!(
        keys,
        vec![format!("{}.publish", first.id); 2],
        "one key per lineage"
    );

    // Another lineage sees the claim as someone else's.
    let other = h.run(&wf, json!({"id": "E-1"})).await;
    assert_eq!(
        output(&other, "seen"),
        &json!({"written": false, "reason": "exists", "key": "E-1", "claimed_by": first.id})
    );
    assert_eq!(step(&other, "route").ports, vec!["skip"]);
    // So does a replay of the first run: it starts its own lineage.
    let replay = h.engine.replay(&first, &wf, Mode::Live).await.unwrap();
    assert_eq!(output(&replay, "seen")["written"], false);
    assert_eq!(mock.count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsafe_step_is_recorded_in_flight_before_it_starts_and_recovery_waits_for_a_person() {
    // The destination holds the unkeyed POST: what the store holds meanwhile is exactly what a
    // crash at that moment would leave.
    let gated = GatedMock::start().await;
    let unkeyed = workflow(
        "unkeyed",
        Value::Null,
        json!([
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "seen", "kind": "memory",
             "config": {"operation": "write", "namespace": "ev", "key": "{{ input.id }}",
                        "allow_overwrite": false}},
            {"id": "create", "kind": "http_request",
             "config": {"method": "POST", "url": format!("{}/deals", gated.url), "retries": 0}}
        ]),
        json!([{"from": "start", "to": "seen"}, {"from": "seen", "to": "create"}]),
    );
    let wf = std::sync::Arc::new(compile(&unkeyed));
    let h = Harness::new();
    let run = h.engine.new_run(
        &wf,
        RunRequest::new(json!({"id": "E-2"}), Trigger::Cli, Mode::Live),
    );
    let run_id = run.id.clone();
    let (engine, wf2) = (h.engine.clone(), wf.clone());
    let task = tokio::spawn(async move { engine.execute(&wf2, run).await });
    gated.wait_arrival().await;
    let crashed = h
        .store
        .get_run(&run_id)
        .await
        .unwrap()
        .expect("stored before the POST");
    assert_eq!(crashed.status, RunStatus::Running);
    assert_eq!(step(&crashed, "seen").status, StepStatus::Succeeded);
    assert_eq!(
        step(&crashed, "create").status,
        StepStatus::Running,
        "{}",
        dump(&crashed)
    );
    gated.release(1);
    let done = task.await.unwrap().unwrap();
    assert_eq!(done.status, RunStatus::Succeeded);
    assert_eq!(step(&done, "create").status, StepStatus::Succeeded);

    match h
        .engine
        .recover_running(crashed.clone(), RecoverPolicy::ResumeSafe)
        .await
    {
        Recovery::Interrupted(r) => {
            let e = r.error.unwrap();
            assert_eq!(e.step, "create");
            assert!(
                e.message.contains("POST without an Idempotency-Key"),
                "{}",
                e.message
            );
        }
        Recovery::Resumed { .. } => panic!("an unkeyed POST in flight was resumed"),
    }

    // Died before `create` started (no marker): resumed, and the claim is its own.
    let mut before = crashed;
    before.steps.retain(|s| s.step_id != "create");
    h.store.put_run(&before).await.unwrap();
    match h
        .engine
        .recover_running(before.clone(), RecoverPolicy::ResumeSafe)
        .await
    {
        Recovery::Resumed {
            original,
            resume,
            workflow,
        } => {
            assert_eq!(original.status, RunStatus::Interrupted);
            assert_eq!(original.resumed_by, vec![resume.id.clone()]);
            assert_eq!(resume.trigger, Trigger::Resume);
            assert_eq!(resume.root_run_id, run_id);
            h.store.put_run(&original).await.unwrap();
            gated.release(1);
            let resumed = h.engine.execute(&workflow, *resume).await.unwrap();
            assert_eq!(resumed.status, RunStatus::Succeeded, "{}", dump(&resumed));
            assert_eq!(
                step(&resumed, "seen").reused_from.as_deref(),
                Some(run_id.as_str())
            );
        }
        Recovery::Interrupted(r) => panic!("not resumed: {:?}", r.error),
    }
    assert_eq!(gated.hits(), 2);
}

#[tokio::test]
async fn a_key_written_outside_a_run_is_nobodys_claim() {
    let h = Harness::new();
    // A key written outside any run (the Memory API, a script) has no owner.
    h.store
        .write(
            "ev",
            "E-3",
            &json!(true),
            WriteOptions {
                allow_overwrite: true,
                ttl_ms: None,
                owner: None,
            },
            h.now(),
        )
        .await
        .unwrap();
    let wf = compile(&publish_workflow("http://127.0.0.1:9"));
    let run = h
        .engine
        .run(
            &wf,
            RunRequest::new(json!({"id": "E-3"}), Trigger::Cli, Mode::Dry),
        )
        .await
        .unwrap();
    assert_eq!(
        output(&run, "seen"),
        &json!({"written": false, "reason": "exists", "key": "E-3"})
    );
}

#[tokio::test]
async fn a_recorded_output_with_a_masked_secret_is_not_reused() {
    // `login` answers a token (masked in the record); `call` uses it and fails once. The
    // resume from `call` cannot reuse the masked token: `login` executes again.
    let auth = Mock::always(Action::json(
        200,
        json!({"access_token": "tok_live_abcdefghijkl"}),
    ))
    .await;
    let api = Mock::start([Action::status(500)], Action::json(200, json!({}))).await;
    let wf = compile(&workflow(
        "login-then-call",
        Value::Null,
        json!([
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "login", "kind": "http_request",
             "config": {"method": "POST", "url": format!("{}/token", auth.url()),
                        "headers": {"Idempotency-Key": "login-{{ input.id }}"}, "retries": 0}},
            {"id": "call", "kind": "http_request",
             "config": {"method": "GET", "url": format!("{}/things", api.url()),
                        "headers": {"Authorization": "Bearer {{ steps.login.output.body.access_token }}"},
                        "retries": 0}}
        ]),
        json!([{"from": "start", "to": "login"}, {"from": "login", "to": "call"}]),
    ));
    let h = Harness::new();
    let failed = h.run(&wf, json!({"id": "L-1"})).await;
    assert_eq!(failed.status, RunStatus::Failed, "{}", dump(&failed));
    let recorded = output(&failed, "login")["body"]["access_token"]
        .as_str()
        .unwrap();
    assert!(recorded.starts_with(fluxo::secrets::MASK), "{recorded}");

    let (wf2, resume, orig) = h.engine.resume_run(&failed, None).await.unwrap();
    h.store.put_run(&orig).await.unwrap();
    let resumed = h.engine.execute(&wf2, resume).await.unwrap();
    assert_eq!(resumed.status, RunStatus::Succeeded, "{}", dump(&resumed));
    assert!(
        step(&resumed, "login").reused_from.is_none(),
        "login executed again"
    );
    assert_eq!(
        step(&resumed, "start").reused_from.as_deref(),
        Some(failed.id.as_str())
    );
    assert_eq!(auth.count(), 2);
    let sent = api.requests();
    assert_eq!(
        sent.last().unwrap().header("authorization"),
        Some("Bearer tok_live_abcdefghijkl"),
        "the real token, not the mask"
    );
}
