//! The group commit's lanes ([`GroupCommit`]) over a store that commits several batches at
//! once ([`Store::concurrent_batches`], PostgreSQL's case), with sled behind the
//! fault-injecting wrapper holding every flush (a slow disk) until the test lets go. The
//! outcomes of concurrent batches on the database itself are checked on every backend by
//! `tests/store_conformance.rs` (`group_commit_batches_concurrent_claims_and_puts`).

mod common;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use common::server::FaultStore;
use fluxo::run::{Mode, RunRecord, RunStatus, Timestamp, Trigger};
use fluxo::store::{
    ClaimOutcome, GroupCommit, RunStore, SledConfig, SledStore, Store, WebhookClaim,
};
use serde_json::json;

/// 2026-01-01T00:00:00Z.
const T0: i64 = 1_767_225_600_000;
const DAY: i64 = 86_400_000;

fn queued(id: &str) -> RunRecord {
    RunRecord {
        id: id.to_string(),
        workflow_id: "w".into(),
        workflow_version: 1,
        definition_hash: "ab".repeat(32),
        trigger: Trigger::Webhook,
        idempotency_key: None,
        mode: Mode::Live,
        replay_of: None,
        replayed_by: vec![],
        resume_of: None,
        resume_from: None,
        resumed_by: vec![],
        root_run_id: String::new(),
        input_edited: false,
        input: json!({"n": 1}).into(),
        status: RunStatus::Queued,
        created_at: Timestamp(T0),
        started_at: None,
        finished_at: None,
        duration_ms: None,
        error: None,
        warnings: vec![],
        steps: vec![],
        snapshot: json!({}),
        parent_run: None,
        trace_parent: None,
    }
}

fn claim(key: &str, run_id: &str) -> WebhookClaim {
    WebhookClaim {
        workflow_id: "w".into(),
        key: key.into(),
        run_id: run_id.into(),
        claimed_at: T0,
        expires_at: T0 + DAY,
    }
}

/// Waits (at most 10 s) until `held` flushes are waiting on the hold.
async fn until_held(fault: &FaultStore, held: usize) {
    for _ in 0..5_000 {
        if fault.held.load(Ordering::SeqCst) == held {
            return;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    panic!(
        "{} flushes held, expected {held}",
        fault.held.load(Ordering::SeqCst)
    );
}

/// A lane commits up to `concurrent_batches` batches at once and no more: with every flush
/// held, three claims sent one after another are three batches in flight, and two more wait
/// for one of them. A caller of `durable` waits for the batches in flight too. Once the
/// flushes go through, every claim is answered and stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lane_commits_up_to_its_concurrent_batches_and_durable_waits_for_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = SledConfig::new(dir.path());
    cfg.flush_every_ms = None;
    let sled = Arc::new(SledStore::open(&cfg).unwrap());
    let fault = Arc::new(FaultStore::new(sled.clone()));
    fault.concurrent_batches.store(3, Ordering::SeqCst);
    fault.hold_flushes.store(true, Ordering::SeqCst);
    let commit = GroupCommit::start(fault.clone() as Arc<dyn Store>);
    let send = |i: usize| {
        let commit = commit.clone();
        tokio::spawn(async move {
            let id = format!("run-{i}");
            commit
                .claim_and_enqueue(claim(&format!("evt-{i}"), &id), queued(&id))
                .await
        })
    };

    let mut sent = Vec::new();
    for i in 0..3 {
        sent.push(send(i));
        // Each claim is a batch of its own, committing beside the ones before it.
        until_held(&fault, i + 1).await;
    }
    sent.push(send(3));
    sent.push(send(4));
    let durable = {
        let commit = commit.clone();
        tokio::spawn(async move { commit.durable().await })
    };
    // `durable` waits on both lanes: the idle runs lane flushes at once (held too).
    until_held(&fault, 4).await;
    // Give the claims lane every chance to start a fourth commit (it must not).
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(2)).await;
        assert_eq!(
            fault.held.load(Ordering::SeqCst),
            4,
            "three claim batches in flight, and the runs lane's flush"
        );
    }
    assert!(sent.iter().all(|t| !t.is_finished()), "no claim answered");
    assert!(!durable.is_finished(), "durable waits for the batches");

    fault.hold_flushes.store(false, Ordering::SeqCst);
    for t in sent {
        assert_eq!(t.await.unwrap().unwrap(), ClaimOutcome::Claimed);
    }
    durable.await.unwrap().unwrap();
    let mut stored = sled.run_ids_with_status(RunStatus::Queued).await.unwrap();
    stored.sort();
    assert_eq!(stored, ["run-0", "run-1", "run-2", "run-3", "run-4"]);
}

/// With the default of one batch at a time, a second claim waits behind the held one and goes
/// in the next batch (what the sled backend relies on: one journal flush covers every batch
/// before it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lane_of_one_commits_its_batches_one_after_another() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = SledConfig::new(dir.path());
    cfg.flush_every_ms = None;
    let sled = Arc::new(SledStore::open(&cfg).unwrap());
    let fault = Arc::new(FaultStore::new(sled.clone()));
    assert_eq!(fault.concurrent_batches(), 1);
    fault.hold_flushes.store(true, Ordering::SeqCst);
    let commit = GroupCommit::start(fault.clone() as Arc<dyn Store>);
    let send = |i: usize| {
        let commit = commit.clone();
        tokio::spawn(async move {
            let id = format!("run-{i}");
            commit
                .claim_and_enqueue(claim(&format!("evt-{i}"), &id), queued(&id))
                .await
        })
    };
    let first = send(0);
    until_held(&fault, 1).await;
    let second = send(1);
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(2)).await;
        assert_eq!(fault.held.load(Ordering::SeqCst), 1, "one batch in flight");
    }
    assert!(!second.is_finished());
    fault.hold_flushes.store(false, Ordering::SeqCst);
    assert_eq!(first.await.unwrap().unwrap(), ClaimOutcome::Claimed);
    assert_eq!(second.await.unwrap().unwrap(), ClaimOutcome::Claimed);
}

/// `durable` with one claim's batch in flight and free room beside it: its wait does not
/// commit beside that batch (whose claim would then not yet be durable when it returned); it
/// waits for the batch to end. Only the runs lane's flush joins the held one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_waits_for_the_batch_in_flight_not_beside_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = SledConfig::new(dir.path());
    cfg.flush_every_ms = None;
    let sled = Arc::new(SledStore::open(&cfg).unwrap());
    let fault = Arc::new(FaultStore::new(sled.clone()));
    fault.concurrent_batches.store(3, Ordering::SeqCst);
    fault.hold_flushes.store(true, Ordering::SeqCst);
    let commit = GroupCommit::start(fault.clone() as Arc<dyn Store>);
    let first = {
        let commit = commit.clone();
        tokio::spawn(async move {
            commit
                .claim_and_enqueue(claim("evt-0", "run-0"), queued("run-0"))
                .await
        })
    };
    until_held(&fault, 1).await;
    let durable = {
        let commit = commit.clone();
        tokio::spawn(async move { commit.durable().await })
    };
    until_held(&fault, 2).await;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(2)).await;
        assert_eq!(
            fault.held.load(Ordering::SeqCst),
            2,
            "the claim's batch and the runs lane's flush; durable's claims-lane wait is not a \
             commit beside the batch in flight"
        );
    }
    assert!(!durable.is_finished());
    fault.hold_flushes.store(false, Ordering::SeqCst);
    assert_eq!(first.await.unwrap().unwrap(), ClaimOutcome::Claimed);
    durable.await.unwrap().unwrap();
}
