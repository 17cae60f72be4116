//! Crash recovery of `fluxo serve` in process (SPEC §4): started on a data dir holding a
//! `running` and a `queued` run, the running one (of a pure workflow: safe to repeat) becomes
//! `interrupted`, is resumed by a new run (the original is never re-executed in place) and
//! stays replayable; the queued one executes. Claims survive a restart. Kills mid-POST are in
//! `tests/recovery_kill.rs`.

mod common;

use std::sync::Arc;

use common::server::{api_workflow, hook_workflow, open_sled, Setup, StoreKind};
use fluxo::clock::{Clock, ManualClock};
use fluxo::run::{Mode, RunStatus, Timestamp, Trigger};
use fluxo::runtime::{Engine, RunRequest};
use fluxo::store::{RunStore, Store};
use reqwest::Method;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_becomes_interrupted_and_queued_executes() {
    let data = tempfile::tempdir().unwrap();
    let wf = common::compile(&hook_workflow("wf1", json!({})));
    let gone = common::compile(&hook_workflow("gone", json!({})));
    let (running_id, queued_id, orphan_id) = {
        let store = Arc::new(open_sled(data.path()));
        let clock = Arc::new(ManualClock::at_2026());
        let engine = Engine::new(store.clone() as Arc<dyn Store>, clock.clone());
        let mut running = engine.new_run(
            &wf,
            RunRequest::new(json!({"n": 1}), Trigger::Webhook, Mode::Live),
        );
        running.status = RunStatus::Running;
        running.started_at = Some(Timestamp(clock.now_ms()));
        let mut req = RunRequest::new(json!({"id": "evt-q"}), Trigger::Webhook, Mode::Live);
        req.idempotency_key = Some("evt-q".into());
        let queued = engine.new_run(&wf, req);
        let orphan = engine.new_run(
            &gone,
            RunRequest::new(json!({}), Trigger::Webhook, Mode::Live),
        );
        store.put_run(&running).await.unwrap();
        store.put_run(&queued).await.unwrap();
        store.put_run(&orphan).await.unwrap();
        store.flush().await.unwrap();
        (running.id, queued.id, orphan.id)
    };

    let s = Setup::new()
        .store(StoreKind::Sled)
        .data_dir(data)
        .workflow(hook_workflow("wf1", json!({})))
        .start()
        .await;
    let interrupted = s.store.get_run(&running_id).await.unwrap().unwrap();
    assert_eq!(interrupted.status, RunStatus::Interrupted);
    assert_eq!(interrupted.error.as_ref().unwrap().code, "interrupted");
    assert!(interrupted.finished_at.is_some());
    assert!(
        interrupted.steps.is_empty(),
        "it was not re-executed in place"
    );
    assert_eq!(
        interrupted.resumed_by.len(),
        1,
        "resumed: every step is safe to repeat"
    );
    let resumed = s.wait_final(&interrupted.resumed_by[0]).await;
    assert_eq!(resumed.status, RunStatus::Succeeded);
    assert_eq!(resumed.resume_of.as_deref(), Some(running_id.as_str()));
    assert_eq!(resumed.trigger, Trigger::Resume);

    let done = s.wait_final(&queued_id).await;
    assert_eq!(done.status, RunStatus::Succeeded, "the queued run executed");
    assert_eq!(done.steps.len(), 2);
    let orphan = s.wait_final(&orphan_id).await;
    assert_eq!(orphan.status, RunStatus::Failed);
    assert_eq!(orphan.error.unwrap().code, "workflow_unavailable");

    // The interrupted run stays replayable.
    let r = s
        .api(
            Method::POST,
            &format!("/runs/{running_id}/replay"),
            &[],
            Some("{}"),
        )
        .await;
    assert_eq!(r.status.as_u16(), 200, "{}", r.text);
    assert_eq!(r.json()["status"], "succeeded");
    assert_eq!(r.json()["replay_of"], running_id.as_str());
    let listed = s.get_json("/runs?status=interrupted").await;
    assert_eq!(listed["runs"].as_array().unwrap().len(), 1);
}

/// Claims, runs and API idempotency records are durable: after a restart on the same data dir
/// a repeat is still a duplicate of the same run, and an API key still replays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_and_keys_survive_a_restart() {
    let s = Setup::new()
        .store(StoreKind::Sled)
        .workflow(hook_workflow("wf1", json!({})))
        .workflow(api_workflow("api"))
        .start()
        .await;
    let a = s.hook("wf1", Some("evt-keep"), b"{}").await;
    assert_eq!(a.status.as_u16(), 202);
    let id = a.json()["run_id"].as_str().unwrap().to_string();
    s.wait_final(&id).await;
    let first = s
        .api(
            Method::POST,
            "/workflows/api/runs",
            &[("idempotency-key", "api-keep")],
            Some(r#"{"input":{"a":1}}"#),
        )
        .await;
    assert_eq!(first.status.as_u16(), 200);
    let data = s.stop().await;

    let s = Setup::new()
        .store(StoreKind::Sled)
        .data_dir(data)
        .workflow(hook_workflow("wf1", json!({})))
        .workflow(api_workflow("api"))
        .start()
        .await;
    let d = s.hook("wf1", Some("evt-keep"), b"{}").await;
    assert_eq!(d.status.as_u16(), 200);
    assert_eq!(d.json()["run_id"], id.as_str());
    assert_eq!(s.runs_with_key("wf1", "evt-keep").await, vec![id]);
    let again = s
        .api(
            Method::POST,
            "/workflows/api/runs",
            &[("idempotency-key", "api-keep")],
            Some(r#"{"input":{"a":1}}"#),
        )
        .await;
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.text, first.text);
}

/// The executor makes a live run's `running` state durable before its first step acts: a
/// crash then leaves it `running` (→ `interrupted` on restart), never `queued` (→ executed a
/// second time). Here the disk is held: the destination must not be called until the flush
/// that covers `running` completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_is_durable_before_the_first_side_effect() {
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use common::server::{slow_api_workflow, FaultStore, GatedMock};
    use fluxo::store::GroupCommit;

    let data = tempfile::tempdir().unwrap();
    let fault = Arc::new(FaultStore::new(Arc::new(open_sled(data.path()))));
    let store: Arc<dyn Store> = fault.clone();
    let mock = GatedMock::start().await;
    let wf = common::compile(&slow_api_workflow("wf1", &format!("{}/deals", mock.url)));
    let engine = Engine::new(store.clone(), Arc::new(fluxo::clock::SystemClock))
        .with_group_commit(GroupCommit::start(store.clone()));

    fault.hold_flushes.store(true, Ordering::SeqCst);
    let run = {
        let engine = engine.clone();
        tokio::spawn(async move {
            engine
                .run(&wf, RunRequest::new(json!({}), Trigger::Api, Mode::Live))
                .await
        })
    };
    for _ in 0..1000 {
        if fault.held.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert!(
        fault.held.load(Ordering::SeqCst) > 0,
        "the `running` flush is waiting"
    );
    // Give the step every chance to call the destination early (it must not).
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(mock.hits(), 0, "no side effect before `running` is durable");
    fault.hold_flushes.store(false, Ordering::SeqCst);
    mock.wait_arrival().await;
    mock.release(1);
    let done = run.await.unwrap().unwrap();
    assert_eq!(done.status, RunStatus::Succeeded);
    assert_eq!(mock.hits(), 1);
}

/// A workflow of pure steps (trigger, transform) acts on nothing, so its run is not made
/// durable as `running` before it ends: the first commit it waits for is its final state (a
/// crash before that leaves it `queued`, executed again on restart, repeating nothing).
#[tokio::test]
async fn a_pure_run_is_committed_once_at_its_end() {
    use std::sync::atomic::Ordering;
    use std::time::Duration;

    use common::server::FaultStore;
    use fluxo::store::GroupCommit;

    let data = tempfile::tempdir().unwrap();
    let fault = Arc::new(FaultStore::new(Arc::new(open_sled(data.path()))));
    let store: Arc<dyn Store> = fault.clone();
    let wf = common::compile(&json!({
        "id": "pure", "name": "pure", "version": 1,
        "steps": [
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "shape", "kind": "transform", "config": {"fields": {"n": "{{ input.n }}"}}}
        ],
        "edges": [{"from": "start", "to": "shape"}]
    }));
    let engine = Engine::new(store.clone(), Arc::new(fluxo::clock::SystemClock))
        .with_group_commit(GroupCommit::start(store.clone()));

    fault.hold_flushes.store(true, Ordering::SeqCst);
    let run = {
        let engine = engine.clone();
        tokio::spawn(async move {
            engine
                .run(
                    &wf,
                    RunRequest::new(json!({"n": 7}), Trigger::Api, Mode::Live),
                )
                .await
        })
    };
    for _ in 0..1000 {
        if fault.held.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert_eq!(
        fault.held.load(Ordering::SeqCst),
        1,
        "one commit is waiting"
    );
    // The waiting commit carries the finished run: every step ran before anything was flushed.
    let ids = fault
        .inner
        .run_ids_with_status(RunStatus::Succeeded)
        .await
        .unwrap();
    assert_eq!(ids.len(), 1, "the held commit is the final state");
    assert!(fault
        .inner
        .run_ids_with_status(RunStatus::Running)
        .await
        .unwrap()
        .is_empty());
    fault.hold_flushes.store(false, Ordering::SeqCst);
    let done = run.await.unwrap().unwrap();
    assert_eq!(done.status, RunStatus::Succeeded);
    assert_eq!(done.steps.len(), 2);
}
