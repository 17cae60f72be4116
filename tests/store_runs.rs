//! Run history, webhook claims and API idempotency records: what is particular to one
//! backend (sled's durability across a reopen, through the group commit too; its refusal of
//! corrupt records; the in-memory store's fault injection). Every rule the backends share is
//! checked on all of them (in-memory, sled, PostgreSQL) by `tests/store_conformance.rs`.
//!
//! Time is passed explicitly; nothing sleeps.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use fluxo::run::{Mode, RunRecord, RunStatus, Timestamp, Trigger};
use fluxo::store::{
    ApiBegin, ApiRecord, ApiRecordState, ClaimOutcome, GroupCommit, IdempotencyStore,
    InMemoryStore, MemoryStore, RunQuery, RunStore, RunSummary, SledConfig, SledStore, Store,
    WebhookClaim,
};
use serde_json::json;
use tempfile::TempDir;

/// 2026-01-01T00:00:00Z.
const T0: i64 = 1_767_225_600_000;
const HOUR: i64 = 3_600_000;
const DAY: i64 = 24 * HOUR;

fn sled_config(dir: &TempDir) -> SledConfig {
    let mut cfg = SledConfig::new(dir.path());
    cfg.cache_capacity_bytes = 8 * 1024 * 1024;
    cfg.flush_every_ms = None;
    cfg
}

fn run(id: &str, workflow: &str, status: RunStatus, created: i64) -> RunRecord {
    RunRecord {
        id: id.to_string(),
        workflow_id: workflow.to_string(),
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
        status,
        created_at: Timestamp(created),
        started_at: None,
        finished_at: status.is_final().then_some(Timestamp(created + 100)),
        duration_ms: status.is_final().then_some(100),
        error: None,
        warnings: vec![],
        steps: vec![],
        snapshot: json!({}),
        parent_run: None,
        trace_parent: None,
    }
}

fn ids(runs: &[RunSummary]) -> Vec<String> {
    runs.iter().map(|r| r.id.clone()).collect()
}

fn claim(workflow: &str, key: &str, run_id: &str, at: i64, window: i64) -> WebhookClaim {
    WebhookClaim {
        workflow_id: workflow.into(),
        key: key.into(),
        run_id: run_id.into(),
        claimed_at: at,
        expires_at: at + window,
    }
}

/// Many concurrent callers through the group commit: one claim per key wins, every accepted
/// run is stored (after a reopen, i.e. durable), and `put_run` hands the record back.
#[test]
fn group_commit_batches_concurrent_claims_and_puts() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let claimed = rt.block_on(async {
        let store: Arc<dyn Store> = Arc::new(SledStore::open(&sled_config(&dir)).unwrap());
        let commit = GroupCommit::start(store.clone());
        // 200 deliveries over 50 keys, all at once.
        let tasks: Vec<_> = (0..200)
            .map(|i| {
                let commit = commit.clone();
                tokio::spawn(async move {
                    let id = format!("run-{i:03}");
                    let key = format!("evt_{}", i % 50);
                    let outcome = commit
                        .claim_and_enqueue(
                            claim("w", &key, &id, T0, DAY),
                            run(&id, "w", RunStatus::Queued, T0),
                        )
                        .await
                        .unwrap();
                    (key, id, outcome)
                })
            })
            .collect();
        let mut winners: BTreeMap<String, String> = BTreeMap::new();
        let mut duplicates = Vec::new();
        for t in tasks {
            let (key, id, outcome) = t.await.unwrap();
            match outcome {
                ClaimOutcome::Claimed => {
                    assert!(winners.insert(key, id).is_none(), "two winners for a key");
                }
                ClaimOutcome::Duplicate { run_id } => duplicates.push((key, run_id)),
            }
        }
        assert_eq!(winners.len(), 50);
        assert_eq!(duplicates.len(), 150);
        for (key, run_id) in duplicates {
            assert_eq!(winners[&key], run_id, "a duplicate names the winner");
        }
        let mut r = run("run-000", "w", RunStatus::Running, T0);
        r.input = json!({"marker": 1}).into();
        if winners.values().any(|id| id == "run-000") {
            let back = commit.put_run(r.clone()).await.unwrap();
            assert_eq!(back, r);
        }
        commit.durable().await.unwrap();
        winners
    });
    drop(rt);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let store = SledStore::open(&sled_config(&dir)).unwrap();
    let mut stored: BTreeSet<String> = rt
        .block_on(store.run_ids_with_status(RunStatus::Queued))
        .unwrap()
        .into_iter()
        .collect();
    stored.extend(
        rt.block_on(store.run_ids_with_status(RunStatus::Running))
            .unwrap(),
    );
    let expected: BTreeSet<String> = claimed.values().cloned().collect();
    assert_eq!(stored, expected, "exactly the winners are stored");
}

fn api_record(fingerprint: &str, owner: &str, at: i64, lease_ms: i64) -> ApiRecord {
    ApiRecord {
        scope: "tok-hash".into(),
        key: "req-1".into(),
        fingerprint: fingerprint.into(),
        created_at: at,
        expires_at: at + DAY,
        state: ApiRecordState::InProgress {
            owner: owner.into(),
            lease_until: at + lease_ms,
        },
    }
}

// ---------------------------------------------------------------------------------------------
// Durability
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn sled_data_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let r = run("run-1", "wf", RunStatus::Succeeded, T0);
    {
        let store = SledStore::open(&sled_config(&dir)).unwrap();
        store.put_run(&r).await.unwrap();
        store
            .write(
                "ns",
                "k",
                &json!({"v": 1}),
                fluxo::store::WriteOptions {
                    allow_overwrite: true,
                    ttl_ms: Some(60_000),
                    owner: None,
                },
                T0,
            )
            .await
            .unwrap();
        store
            .claim_and_enqueue(
                &claim("wf", "evt", "run-2", T0, DAY),
                &run("run-2", "wf", RunStatus::Queued, T0 + 1),
                T0,
            )
            .await
            .unwrap();
        store
            .api_begin(&api_record("fp", "o", T0, 1_000), T0)
            .await
            .unwrap();
        store.flush().await.unwrap();
    }
    let store = SledStore::open(&sled_config(&dir)).unwrap();
    assert_eq!(store.get_run("run-1").await.unwrap(), Some(r));
    assert_eq!(
        store.read("ns", "k", T0).await.unwrap().map(|e| e.value),
        Some(json!({"v": 1}))
    );
    assert_eq!(
        store
            .get_claim("wf", "evt", T0)
            .await
            .unwrap()
            .map(|c| c.run_id),
        Some("run-2".into())
    );
    assert_eq!(
        store.run_ids_with_status(RunStatus::Queued).await.unwrap(),
        ["run-2"]
    );
    assert_eq!(
        ids(&store
            .list_runs(&RunQuery {
                workflow: Some("wf".into()),
                limit: 10,
                ..Default::default()
            })
            .await
            .unwrap()
            .runs),
        ["run-2", "run-1"]
    );
    assert_eq!(
        store
            .api_begin(&api_record("fp", "o2", T0 + 1, 1_000), T0 + 1)
            .await
            .unwrap(),
        ApiBegin::InProgress
    );
    assert_eq!(store.sweep_expired(T0 + 60_000, 10).await.unwrap(), 1);
}

#[tokio::test]
async fn sled_corrupt_records_are_errors_not_panics() {
    use fluxo::store::StoreError;
    let dir = tempfile::tempdir().unwrap();
    {
        let store = SledStore::open(&sled_config(&dir)).unwrap();
        store
            .put_run(&run("good", "wf", RunStatus::Queued, T0))
            .await
            .unwrap();
        store.flush().await.unwrap();
    }
    {
        // No background flusher: it would hold the lock for a moment after the drop. The
        // store dropped above lets go of it once its threads end (its journal applier runs at
        // nice 10: on a busy machine, a moment later): retried for up to 10 s, as the store
        // itself retries for 1 s.
        let db = {
            let mut tries = 0;
            loop {
                match sled::Config::new()
                    .path(dir.path())
                    .flush_every_ms(None)
                    .open()
                {
                    Ok(db) => break db,
                    Err(e) if tries < 400 && e.to_string().contains("could not acquire lock") => {
                        tries += 1;
                        std::thread::sleep(std::time::Duration::from_millis(25));
                    }
                    Err(e) => panic!("open the store: {e}"),
                }
            }
        };
        let garbage: &[u8] = b"{not json";
        db.open_tree("memory")
            .unwrap()
            .insert(b"ns\0k", garbage)
            .unwrap();
        let runs = db.open_tree("runs").unwrap();
        runs.insert(b"bad", garbage).unwrap();
        // Records are stored LZ4-compressed behind a 0x01 marker; a broken block is corrupt.
        runs.insert(b"bad-lz4", &[0x01, 0xff, 0xff, 0xff, 0x7f, 0x10][..])
            .unwrap();
        // A record stored as plain JSON (before compression) still reads.
        let plain = run("plain", "wf", RunStatus::Succeeded, T0);
        runs.insert(b"plain", serde_json::to_vec(&plain).unwrap())
            .unwrap();
        db.open_tree("run_summaries")
            .unwrap()
            .insert(b"good", garbage)
            .unwrap();
        db.open_tree("webhook_claims")
            .unwrap()
            .insert(b"wf\0evt", garbage)
            .unwrap();
        db.open_tree("api_records")
            .unwrap()
            .insert(b"tok-hash\0req-1", garbage)
            .unwrap();
        db.flush().unwrap();
    }
    let store = SledStore::open(&sled_config(&dir)).unwrap();
    let corrupt = |r: Result<(), StoreError>| {
        assert!(matches!(r, Err(StoreError::Corrupt(_))), "{r:?}");
    };
    corrupt(store.read("ns", "k", T0).await.map(|_| ()));
    corrupt(store.list("ns", "", None, 10, T0).await.map(|_| ()));
    corrupt(
        store
            .write(
                "ns",
                "k",
                &json!(1),
                fluxo::store::WriteOptions {
                    allow_overwrite: false,
                    ttl_ms: None,
                    owner: None,
                },
                T0,
            )
            .await
            .map(|_| ()),
    );
    corrupt(store.get_run("bad").await.map(|_| ()));
    corrupt(store.get_run("bad-lz4").await.map(|_| ()));
    assert_eq!(
        store.get_run("plain").await.unwrap(),
        Some(run("plain", "wf", RunStatus::Succeeded, T0))
    );
    corrupt(
        store
            .list_runs(&RunQuery {
                limit: 10,
                ..Default::default()
            })
            .await
            .map(|_| ()),
    );
    corrupt(
        store
            .put_run(&run("good", "wf", RunStatus::Running, T0))
            .await,
    );
    corrupt(store.get_claim("wf", "evt", T0).await.map(|_| ()));
    corrupt(
        store
            .claim_and_enqueue(
                &claim("wf", "evt", "r2", T0, DAY),
                &run("r2", "wf", RunStatus::Queued, T0),
                T0,
            )
            .await
            .map(|_| ()),
    );
    assert_eq!(
        store.get_run("r2").await.unwrap(),
        None,
        "aborted: nothing written"
    );
    corrupt(
        store
            .api_begin(&api_record("fp", "o", T0, 1_000), T0)
            .await
            .map(|_| ()),
    );
    // Overwriting or deleting repairs a Memory entry.
    let keep = fluxo::store::WriteOptions {
        allow_overwrite: true,
        ttl_ms: None,
        owner: None,
    };
    store.write("ns", "k", &json!(2), keep, T0).await.unwrap();
    assert_eq!(
        store.read("ns", "k", T0).await.unwrap().unwrap().value,
        json!(2)
    );
}

#[tokio::test]
async fn in_memory_fault_injection_writes_nothing() {
    use fluxo::store::StoreError;
    let store = InMemoryStore::new();
    store.set_fail_writes(true);
    let r = run("r1", "wf", RunStatus::Queued, T0);
    assert!(matches!(
        store
            .claim_and_enqueue(&claim("wf", "k", "r1", T0, DAY), &r, T0)
            .await,
        Err(StoreError::Injected(_))
    ));
    assert!(store.put_run(&r).await.is_err());
    assert_eq!(store.get_claim("wf", "k", T0).await.unwrap(), None);
    assert_eq!(store.get_run("r1").await.unwrap(), None);
    store.set_fail_writes(false);
    assert_eq!(
        store
            .claim_and_enqueue(&claim("wf", "k", "r1", T0, DAY), &r, T0)
            .await
            .unwrap(),
        ClaimOutcome::Claimed
    );
}
