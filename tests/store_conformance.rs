//! Store conformance: the same cases on every backend (in-memory, sled in a temporary
//! directory, PostgreSQL on a throwaway server, see `tests/common/pg.rs`).
//!
//! Every case takes the backends as `Arc<dyn Store>` (the async store traits).
//!
//! Time is passed explicitly; nothing sleeps. Each test gets fresh stores (a fresh database
//! on the shared server for PostgreSQL).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use fluxo::run::{
    new_run_id, Mode, RunRecord, RunStatus, StepRecord, StepStatus, Timestamp, Trigger,
};
use fluxo::store::{
    sweep_once, ApiBegin, ApiRecord, ApiRecordState, BatchOutcome, BatchWrite, ClaimOutcome,
    ClaimOwner, CountFilter, CountQuery, GroupCommit, IdempotencyStore, InMemoryStore, MemoryEntry,
    MemoryStore, PgConfig, PgStore, Retention, RunCounts, RunQuery, RunStore, RunSummary,
    SledConfig, SledStore, Store, StoreError, StoreResult, SweepReport, WebhookClaim, WriteOptions,
    WriteResult, LIST_SCAN_BUDGET, MAX_MEMORY_KEY_BYTES, SEARCH_VALUES_MAX,
};
use serde_json::{json, Value};
use tempfile::TempDir;
use tokio::sync::Barrier;

use common::pg::TestPg;

/// 2026-01-01T00:00:00Z.
const T0: i64 = 1_767_225_600_000;
const HOUR: i64 = 3_600_000;
const DAY: i64 = 24 * HOUR;

// ---------------------------------------------------------------------------------------------
// The backends
// ---------------------------------------------------------------------------------------------

/// One backend under test. `peer` is a second handle on the same data where the backend can
/// have one (PostgreSQL: another pool, as another process would have); else the same handle.
struct Fixture {
    name: &'static str,
    store: Arc<dyn Store>,
    peer: Arc<dyn Store>,
    _dir: Option<TempDir>,
}

fn pg_config() -> PgConfig {
    PgConfig {
        max_connections: 8,
        acquire_timeout_ms: 60_000,
        ..PgConfig::default()
    }
}

/// A migrated store on a fresh database of the shared test server, and its URL.
async fn fresh_pg() -> (PgStore, String) {
    let url = TestPg::shared().fresh_db().await;
    let store = PgStore::connect_with(&url, &pg_config())
        .await
        .expect("connect to the test database");
    store.migrate().await.expect("migrate");
    (store, url)
}

async fn backends() -> Vec<Fixture> {
    let mem: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let dir = tempfile::tempdir().expect("temp dir");
    let mut cfg = SledConfig::new(dir.path());
    cfg.cache_capacity_bytes = 8 * 1024 * 1024;
    cfg.flush_every_ms = None;
    let sled: Arc<dyn Store> = Arc::new(SledStore::open(&cfg).expect("open sled"));
    let (pg, url) = fresh_pg().await;
    let peer = PgStore::connect_with(&url, &pg_config())
        .await
        .expect("second pool");
    vec![
        Fixture {
            name: "memory",
            store: mem.clone(),
            peer: mem,
            _dir: None,
        },
        Fixture {
            name: "sled",
            store: sled.clone(),
            peer: sled,
            _dir: Some(dir),
        },
        Fixture {
            name: "postgres",
            store: Arc::new(pg),
            peer: Arc::new(peer),
            _dir: None,
        },
    ]
}

/// One `#[tokio::test]` per case, running it on every backend in turn.
macro_rules! conformance {
    ($($test:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $test() {
            for f in backends().await {
                eprintln!("-- {} on {}", stringify!($test), f.name);
                cases::$test(&f).await;
            }
        }
    )*};
}

conformance!(
    memory_claim_expires_and_is_reclaimed,
    memory_ttl_edges,
    memory_list_delete_namespaces_in_byte_order,
    memory_values_and_owners_round_trip,
    memory_sixty_four_concurrent_claims_one_winner,
    memory_contended_reclaim_of_expired_entry,
    memory_sweep_is_bounded_and_earliest_first,
    runs_put_get_roundtrip,
    runs_status_transitions_keep_indexes_right,
    runs_every_filter_with_paging,
    runs_paging_is_stable_while_new_runs_arrive,
    runs_search_by_exact_key_and_prefix,
    runs_free_search_with_many_candidates,
    runs_search_finds_values_inside_runs,
    runs_value_search_with_many_matches_and_retention,
    runs_filter_by_failure_reason,
    runs_scan_budget_pages_short_but_complete,
    counts_equal_a_brute_force_count,
    counts_follow_claims_batches_and_releases,
    counts_per_step_of_one_workflow,
    retention_by_count_keeps_newest_finished_per_workflow,
    retention_by_age_and_both_limits,
    retention_over_many_batches,
    claims_duplicate_within_window_claimable_after,
    claims_sixty_four_concurrent_deliveries_one_run,
    claims_release,
    batch_applies_in_order_and_fails_only_its_bad_writes,
    batches_claiming_in_opposite_orders_all_answer,
    group_commit_batches_concurrent_claims_and_puts,
    sweep_once_removes_every_due_record,
    api_begin_every_branch,
    api_lease_takeover_and_abandon,
    sweep_idempotency_bounded_claims_first,
);

// ---------------------------------------------------------------------------------------------
// Count aggregates: the brute force they must equal
// ---------------------------------------------------------------------------------------------

const MINUTE: i64 = 60_000;

/// A step record of `ms` milliseconds.
fn step(id: &str, status: StepStatus, ms: u64) -> StepRecord {
    StepRecord {
        step_id: id.into(),
        kind: "transform".into(),
        status,
        started_at: Timestamp(T0),
        finished_at: (status != StepStatus::Running).then_some(Timestamp(T0 + ms as i64)),
        duration_ms: ms,
        resolved_config: json!({}),
        output: None,
        error: None,
        attempts: vec![],
        ports: vec![],
        reused_from: None,
    }
}

/// The steps of count run `i`: a trigger (most runs), a call of 0 to ~3 s (below and above
/// 128 ms), sometimes a step reused from an earlier run (a resume: not counted again), a
/// fallback, or a step still running (not counted).
fn count_steps(i: i64) -> Vec<StepRecord> {
    let mut steps = Vec::new();
    if i % 5 != 0 {
        steps.push(step("hook", StepStatus::Succeeded, (i % 3) as u64));
    }
    steps.push(step(
        "call",
        StepStatus::Succeeded,
        ((i * 97) % 3_000) as u64,
    ));
    if i % 7 == 0 {
        let mut reused = step("seen", StepStatus::Succeeded, 40);
        reused.reused_from = Some("an-earlier-run".into());
        steps.push(reused);
    } else if i % 7 == 1 {
        steps.push(step("seen", StepStatus::Fallback, 130 + i as u64));
    }
    if i % 11 == 0 {
        steps.push(step("slow", StepStatus::Running, 9));
    }
    steps
}

/// Run `i` of the count fixture: three workflows, every status, both modes, three triggers,
/// durations below and above 128 ms, two failure reasons, steps ([`count_steps`]); created
/// every ~7.5 min from 3 h 17 s before T0 (about 50 hours), with a few exactly on unit
/// boundaries.
fn count_run(i: i64) -> RunRecord {
    let statuses = [
        RunStatus::Queued,
        RunStatus::Running,
        RunStatus::Succeeded,
        RunStatus::Failed,
        RunStatus::TimedOut,
        RunStatus::Interrupted,
    ];
    let created = match i {
        0 => T0,
        1 => T0 + HOUR - 1,
        2 => T0 + DAY,
        3 => T0 + 7 * MINUTE,
        _ => T0 - 3 * HOUR - 17_000 + i * 449_537,
    };
    let status = statuses[(i % 6) as usize];
    let mut r = run(
        &format!("c{i:04}"),
        ["wf-a", "wf-b", "wf-c"][(i % 3) as usize],
        status,
        created,
    );
    r.mode = if i % 4 == 0 { Mode::Dry } else { Mode::Live };
    r.trigger = [Trigger::Webhook, Trigger::Api, Trigger::Manual][((i / 3) % 3) as usize];
    r.steps = count_steps(i);
    if status.is_final() {
        let d = ((i * i * 37) % 5_000) as u64;
        r.finished_at = Some(Timestamp(created + d as i64));
        r.duration_ms = Some(d);
    }
    if matches!(status, RunStatus::Failed | RunStatus::TimedOut) {
        r.error = Some(fluxo::run::ErrorInfo {
            code: if i % 2 == 0 {
                "http_status"
            } else {
                "deadline_exceeded"
            }
            .into(),
            message: "boom".into(),
            step: "call".into(),
            attempts: 1,
            http_status: (i % 2 == 0).then_some(500),
        });
    }
    r
}

/// The filters the count cases try.
fn count_filters() -> Vec<CountFilter> {
    vec![
        CountFilter::default(),
        CountFilter {
            workflow: Some("wf-b".into()),
            ..Default::default()
        },
        CountFilter {
            status: Some(RunStatus::Failed),
            ..Default::default()
        },
        CountFilter {
            mode: Some(Mode::Dry),
            ..Default::default()
        },
        CountFilter {
            trigger: Some(Trigger::Api),
            ..Default::default()
        },
        CountFilter {
            workflow: Some("wf-a".into()),
            status: Some(RunStatus::Succeeded),
            mode: Some(Mode::Live),
            trigger: Some(Trigger::Webhook),
        },
        CountFilter {
            workflow: Some("wf-c".into()),
            mode: Some(Mode::Live),
            trigger: Some(Trigger::Manual),
            ..Default::default()
        },
        CountFilter {
            workflow: Some("none".into()),
            ..Default::default()
        },
    ]
}

/// Asserts that the store's counts and oldest runs equal a brute-force count of `runs` (the
/// runs the store holds), over ranges with edges on and off unit boundaries, every chart
/// width and every filter.
async fn assert_counts(store: &dyn Store, runs: &[RunRecord], what: &str) {
    let summaries: Vec<RunSummary> = runs.iter().map(RunSummary::from).collect();
    let ranges = [
        (T0 - 3 * HOUR - 17_000, T0 + 48 * HOUR),
        (T0 + 37 * MINUTE + 12_005, T0 + 26 * HOUR + MINUTE + 3_000),
        (T0 - HOUR, T0 + 5 * HOUR + 30_000),
        (T0 + HOUR, T0 + 2 * HOUR),
        (T0 + 7 * MINUTE, T0 + 7 * MINUTE + 1),
        (T0 - 10 * DAY, T0 + 10 * DAY),
        (i64::MIN, i64::MAX),
        (T0 + DAY, T0),
    ];
    let widths = [
        MINUTE,
        5 * MINUTE,
        15 * MINUTE,
        HOUR,
        3 * HOUR,
        DAY,
        7 * DAY,
        0,
        7_000,
    ];
    for filter in count_filters() {
        for (since, until) in ranges {
            for bucket_ms in widths {
                let q = CountQuery {
                    filter: filter.clone(),
                    since,
                    until,
                    bucket_ms,
                };
                let got = store.count_runs(&q).await.unwrap();
                let want = RunCounts::of_summaries(&summaries, &q);
                assert_eq!(got, want, "{what}: {q:?}");
            }
        }
        for until in [T0 - 10 * HOUR, T0, T0 + 1, T0 + 10 * HOUR, i64::MAX] {
            let want = summaries
                .iter()
                .filter(|s| s.created_at.0 < until && filter.matches(s))
                .map(|s| s.created_at.0)
                .min();
            assert_eq!(
                store.oldest_run(&filter, until).await.unwrap(),
                want,
                "{what}: oldest {filter:?} before {until}"
            );
        }
    }
}

/// The runs the store holds among `ids`, as stored.
async fn stored(store: &dyn Store, ids: impl IntoIterator<Item = String>) -> Vec<RunRecord> {
    let mut out = Vec::new();
    for id in ids {
        if let Some(r) = store.get_run(&id).await.unwrap() {
            out.push(r);
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL only: setup and errors
// ---------------------------------------------------------------------------------------------

/// Migrating is idempotent and safe from several processes at once (an advisory lock).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_migrate_concurrently_and_repeatedly() {
    let url = TestPg::shared().fresh_db().await;
    let mut tasks = Vec::new();
    for _ in 0..4 {
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let s = PgStore::connect_with(&url, &pg_config()).await?;
            s.migrate().await?;
            s.migrate().await?;
            Ok::<_, StoreError>(s)
        }));
    }
    let mut stores = Vec::new();
    for t in tasks {
        stores.push(t.await.expect("task").expect("migrate"));
    }
    let s = &stores[0];
    let w = s
        .write("ns", "k", &json!(1), opts(false, None), T0)
        .await
        .expect("write after migrate");
    assert_eq!(w, WriteResult::Written { expires_at: None });
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations")
        .fetch_one(s.pool())
        .await
        .expect("count migrations");
    let files = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"))
        .expect("the migrations folder")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "sql"))
        })
        .count();
    assert_eq!(n, files as i64, "each migration applied once");
    assert_eq!(
        s.applied_migrations().await.expect("applied migrations"),
        (1..=files as i64).collect::<Vec<_>>()
    );
    // Migration 0005: run records are compressed with lz4 where the server has it (Debian's
    // has), else they stay with pglz and the migration still applied.
    let lz4: bool = sqlx::query_scalar(
        "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'",
    )
    .fetch_one(s.pool())
    .await
    .expect("the server's compression methods");
    let method: String = sqlx::query_scalar(
        "SELECT attcompression::text FROM pg_attribute \
         WHERE attrelid = 'runs'::regclass AND attname = 'record'",
    )
    .fetch_one(s.pool())
    .await
    .expect("the record column's compression");
    assert_eq!(method, if lz4 { "l" } else { "" }, "lz4 on: {lz4}");
    // Migration 0006: leases are found by their primary key only.
    let lease_indexes: Vec<String> = sqlx::query_scalar(
        "SELECT indexname::text FROM pg_indexes WHERE tablename = 'run_leases' ORDER BY 1",
    )
    .fetch_all(s.pool())
    .await
    .expect("the leases' indexes");
    assert_eq!(lease_indexes, ["run_leases_pkey"]);
}

/// What a call answered is durable: after the server crashes (no checkpoint, recovery from
/// the WAL) every acknowledged claim, run and Memory entry is there; calls made while it is
/// down fail with a transient error, and the pool reconnects once it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_acknowledged_writes_survive_a_server_crash() {
    let pg = TestPg::start();
    let url = pg.fresh_db().await;
    let store = PgStore::connect_with(&url, &pg_config())
        .await
        .expect("connect");
    store.migrate().await.expect("migrate");
    let r = run("run-1", "w", RunStatus::Queued, T0);
    let c = claim("w", "evt", "run-1", T0, DAY);
    assert_eq!(
        store.claim_and_enqueue(&c, &r, T0).await.unwrap(),
        ClaimOutcome::Claimed
    );
    let batch_run = run("run-2", "w", RunStatus::Succeeded, T0 + 1);
    assert!(store
        .write_batch(vec![BatchWrite::PutRun(batch_run.clone())])
        .await
        .iter()
        .all(|(_, o)| o.is_ok()));
    store
        .write("ns", "k", &json!({"v": 1}), opts(false, None), T0)
        .await
        .unwrap();
    store.flush().await.unwrap();

    pg.crash_and_restart();

    // The pool's connections died with the server; a call may fail (transiently) until the
    // pool has replaced them.
    let mut answered = None;
    for _ in 0..20 {
        match store.get_run("run-1").await {
            Ok(got) => {
                answered = Some(got);
                break;
            }
            Err(e) => assert!(e.is_transient(), "{e:?}"),
        }
    }
    assert_eq!(answered, Some(Some(r)), "the claimed run survived");
    assert_eq!(store.get_run("run-2").await.unwrap(), Some(batch_run));
    assert_eq!(store.get_claim("w", "evt", T0).await.unwrap(), Some(c));
    assert_eq!(
        store.read("ns", "k", T0).await.unwrap().map(|e| e.value),
        Some(json!({"v": 1}))
    );
}

/// The shared queue's takers in one process (one owner, as `fluxo serve`'s workers are) never
/// take the same run: a run leased by one of them is not taken again by another while the
/// lease lives, however their statements interleave (a taker whose snapshot predates another's
/// lease still finds the row unlocked once that lease is committed). Each run is taken once,
/// and all of them are.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_takers_of_one_process_never_share_a_run() {
    const RUNS: usize = 400;
    const TAKERS: usize = 16;
    let (store, _) = fresh_pg().await;
    let runs: Vec<BatchWrite> = (0..RUNS)
        .map(|i| {
            BatchWrite::PutRun(run(
                &format!("q-{i:04}"),
                "w",
                RunStatus::Queued,
                T0 + i as i64,
            ))
        })
        .collect();
    assert!(store.write_batch(runs).await.iter().all(|(_, o)| o.is_ok()));
    let store = Arc::new(store);
    let start = Arc::new(Barrier::new(TAKERS));
    let takers: Vec<_> = (0..TAKERS)
        .map(|_| {
            let (store, start) = (store.clone(), start.clone());
            tokio::spawn(async move {
                let sq = store.shared_queue().expect("PostgreSQL has a shared queue");
                start.wait().await;
                let mut taken = Vec::new();
                while let Some(t) = sq.take_queued("process-a", 60_000, T0).await.unwrap() {
                    let run = t.run;
                    // Answered as stored: the queued run itself.
                    assert_eq!(run.status, RunStatus::Queued);
                    taken.push(run.id);
                }
                taken
            })
        })
        .collect();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for t in takers {
        for id in t.await.unwrap() {
            *seen.entry(id).or_default() += 1;
        }
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "runs taken more than once: {twice:?}");
    assert_eq!(seen.len(), RUNS, "every queued run is taken");
}

/// The take's generic plan (prepared once per connection, `QUEUE_SETTINGS` in the store)
/// walks `runs_queued` from its oldest entry: when made with the statistics of an empty table,
/// the plan a fresh database's first takes fix and keep as a backlog grows, and over a backlog.
/// Never a read and sort of the whole backlog, which a cached generic plan made on an empty
/// table once did (18 ms a take under load).
#[tokio::test]
async fn postgres_take_walks_the_queued_index_over_a_backlog() {
    const QUEUED: i64 = 20_000;
    const FINISHED: i64 = 50_000;
    let (store, _) = fresh_pg().await;
    sqlx::query("ANALYZE runs")
        .execute(store.pool())
        .await
        .expect("analyze the empty table");
    let walks_the_index = |plan: Vec<String>, when: &str| {
        let plan = plan.join("\n");
        assert!(
            plan.contains("Index Scan using runs_queued on runs r"),
            "{when}: the take walks runs_queued:\n{plan}"
        );
        assert!(
            !plan.contains("Sort") && !plan.contains("Seq Scan on runs"),
            "{when}: the take neither sorts nor scans the runs:\n{plan}"
        );
    };
    walks_the_index(
        store.explain_take(T0).await.expect("explain"),
        "an empty table",
    );
    // Finished runs first, then the backlog (ids and times in the order they were created).
    let insert = "INSERT INTO runs (id, workflow_id, status, mode, trigger, created_at, \
         root_run_id, summary, record) \
         SELECT 'r' || lpad(g::text, 8, '0'), 'load', $1, 'live', 'webhook', $2 + g, \
           'r' || lpad(g::text, 8, '0'), '{}'::json, '{}'::json \
         FROM generate_series($3::bigint, $4::bigint) g";
    for (status, from, to) in [
        ("succeeded", 1, FINISHED),
        ("queued", FINISHED + 1, FINISHED + QUEUED),
    ] {
        sqlx::query(insert)
            .bind(status)
            .bind(T0)
            .bind(from)
            .bind(to)
            .execute(store.pool())
            .await
            .expect("insert runs");
    }
    sqlx::query("ANALYZE runs")
        .execute(store.pool())
        .await
        .expect("analyze the backlog");
    walks_the_index(
        store.explain_take(T0 + DAY).await.expect("explain"),
        "a backlog",
    );
    // And the plan takes the oldest queued run, answered with its record (the rows above hold
    // `{}`: the oldest gets a real one).
    let oldest = format!("r{:08}", FINISHED + 1);
    let record = run(&oldest, "load", RunStatus::Queued, T0 + FINISHED + 1);
    sqlx::query("UPDATE runs SET record = $1::json WHERE id = $2")
        .bind(serde_json::to_string(&record).unwrap())
        .bind(&oldest)
        .execute(store.pool())
        .await
        .expect("a real record");
    let sq = store.shared_queue().expect("PostgreSQL has a shared queue");
    let first = sq
        .take_queued("process-a", 60_000, T0 + DAY)
        .await
        .expect("take");
    assert_eq!(first.map(|t| t.run), Some(record));
}

/// `run_values` has no foreign key (migration 0007): the statements that delete runs take
/// their search values themselves. Retention and a released claim leave no value row behind,
/// and the values of the runs kept are untouched.
#[tokio::test]
async fn postgres_deleting_runs_deletes_their_search_values() {
    let (store, _) = fresh_pg().await;
    let value_rows = |ids: &[&str]| {
        let ids: Vec<String> = ids.iter().map(|s| s.to_string()).collect();
        let pool = store.pool().clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT count(*) FROM run_values WHERE run_id = ANY($1)")
                .bind(ids)
                .fetch_one(&pool)
                .await
                .expect("count value rows")
        }
    };
    let fks: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_constraint WHERE conrelid = 'run_values'::regclass \
         AND contype = 'f'",
    )
    .fetch_one(store.pool())
    .await
    .expect("the constraints");
    assert_eq!(fks, 0, "run_values has no foreign key");
    let writes: Vec<BatchWrite> = (0..3i64)
        .map(|i| {
            let mut r = run(&format!("run-{i}"), "wf", RunStatus::Succeeded, T0 + i);
            r.input = json!({"customer": format!("cus_{i}"), "invoice": format!("in_{i}")}).into();
            BatchWrite::PutRun(r)
        })
        .collect();
    for o in batch(&store, writes).await {
        assert_eq!(o.unwrap(), BatchOutcome::Put);
    }
    assert_eq!(value_rows(&["run-0", "run-1", "run-2"]).await, 6);
    let policy = Retention {
        max_runs_per_workflow: Some(1),
        max_age_ms: None,
    };
    assert_eq!(store.prune_runs(&policy, T0 + DAY).await.unwrap(), 2);
    assert_eq!(
        value_rows(&["run-0", "run-1"]).await,
        0,
        "pruned runs' values"
    );
    assert_eq!(value_rows(&["run-2"]).await, 2, "the kept run's values");
    let mut queued = run("run-q", "wf", RunStatus::Queued, T0 + 10);
    queued.input = json!({"customer": "cus_q1"}).into();
    let c = claim("wf", "evt_q", "run-q", T0 + 10, DAY);
    assert_eq!(
        store.claim_and_enqueue(&c, &queued, T0 + 10).await.unwrap(),
        ClaimOutcome::Claimed
    );
    // Moved from the ingest inbox into `runs` with its value by a listing.
    let listed = store
        .list_runs(&RunQuery {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(ids(&listed.runs).contains(&"run-q".to_string()));
    assert_eq!(value_rows(&["run-q"]).await, 1);
    assert!(store.release_claim("wf", "evt_q", "run-q").await.unwrap());
    assert_eq!(
        value_rows(&["run-q"]).await,
        0,
        "a released claim's run's values"
    );
    assert_eq!(value_rows(&["run-2"]).await, 2);
}

/// The lease heartbeat answers exactly the runs whose lease it renewed: not one its owner
/// released meanwhile, not one another owner holds (the worker warns only about the runs it
/// still executes that are missing from the answer).
#[tokio::test]
async fn postgres_renewed_leases_are_named() {
    let (store, _) = fresh_pg().await;
    let queue = store.shared_queue().expect("a shared queue");
    for i in 0..3 {
        store
            .put_run(&run(&format!("run-{i}"), "wf", RunStatus::Queued, T0 + i))
            .await
            .unwrap();
    }
    let mut taken = Vec::new();
    for _ in 0..3 {
        let r = queue
            .take_queued("me", 1_000, T0)
            .await
            .unwrap()
            .expect("a queued run")
            .run;
        taken.push(r.id);
    }
    taken.sort();
    assert_eq!(taken, ["run-0", "run-1", "run-2"]);
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };

    let all = queue
        .renew_leases("me", &taken, 1_000, T0 + 500)
        .await
        .unwrap();
    assert_eq!(sorted(all), taken, "every lease held is renewed");
    let others = queue
        .renew_leases("someone-else", &taken, 1_000, T0 + 500)
        .await
        .unwrap();
    assert!(
        others.is_empty(),
        "another owner renews nothing: {others:?}"
    );

    queue
        .release_leases("me", std::slice::from_ref(&taken[0]))
        .await
        .unwrap();
    let left = queue
        .renew_leases("me", &taken, 1_000, T0 + 900)
        .await
        .unwrap();
    assert_eq!(
        sorted(left),
        ["run-1", "run-2"],
        "a released lease is not renewed"
    );
    assert_eq!(
        queue
            .renew_leases("me", &[], 1_000, T0 + 900)
            .await
            .unwrap(),
        Vec::<String>::new()
    );
}

/// Rows of `table` (the ingest inbox, `run_inbox`, or `runs`).
async fn rows_in(store: &PgStore, table: &str) -> i64 {
    sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
        .fetch_one(store.pool())
        .await
        .expect("count rows")
}

/// A claimed run waits in the ingest inbox (migration 0008) until it is moved into `runs`:
/// read from there meanwhile, moved by a take that finds no queued run in `runs` (the oldest
/// first, several at once), and by any listing or count, with its search values; a released
/// claim takes its run from the inbox too.
#[tokio::test]
async fn postgres_claimed_runs_wait_in_the_inbox_until_moved() {
    let (store, _) = fresh_pg().await;
    let queue = store.shared_queue().expect("a shared queue");
    let claim_run = |i: i64| {
        let id = format!("run-{i}");
        let mut r = run(&id, "wf", RunStatus::Queued, T0 + i);
        r.input = json!({"customer": format!("cus_inbox{i}")}).into();
        (claim("wf", &format!("evt_{i}"), &id, T0 + i, DAY), r)
    };
    for i in 0..3 {
        let (c, r) = claim_run(i);
        assert_eq!(
            store.claim_and_enqueue(&c, &r, T0 + i).await.unwrap(),
            ClaimOutcome::Claimed
        );
    }
    assert_eq!(rows_in(&store, "run_inbox").await, 3);
    assert_eq!(rows_in(&store, "runs").await, 0, "nothing in runs yet");
    let got = store
        .get_run("run-1")
        .await
        .unwrap()
        .expect("read from the inbox");
    assert_eq!(got.id, "run-1");
    assert_eq!(got.status, RunStatus::Queued);
    assert_eq!(got.input["customer"], "cus_inbox1");

    // A take finds `runs` empty, moves the inbox (all three: fewer than a move takes) and
    // takes the oldest.
    let taken = queue
        .take_queued("me", 30_000, T0 + 10)
        .await
        .unwrap()
        .expect("a run is taken")
        .run;
    assert_eq!(taken.id, "run-0");
    assert_eq!(rows_in(&store, "run_inbox").await, 0);
    assert_eq!(rows_in(&store, "runs").await, 3);

    // Two more, then a listing and a count see all five, and the values are searchable.
    for i in 3..5 {
        let (c, r) = claim_run(i);
        store.claim_and_enqueue(&c, &r, T0 + i).await.unwrap();
    }
    let counts = store
        .count_runs(&CountQuery {
            since: T0,
            until: T0 + DAY,
            bucket_ms: DAY,
            filter: CountFilter::default(),
        })
        .await
        .unwrap();
    assert_eq!(counts.total(), 5, "the count moved the inbox first");
    assert_eq!(rows_in(&store, "run_inbox").await, 0);
    let found = store
        .list_runs(&RunQuery {
            q: Some("cus_inbox4".into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(ids(&found.runs), ["run-4"]);

    // A released claim's run leaves the inbox with it.
    let (c, r) = claim_run(5);
    store.claim_and_enqueue(&c, &r, T0 + 5).await.unwrap();
    assert_eq!(rows_in(&store, "run_inbox").await, 1);
    assert!(store.release_claim("wf", "evt_5", "run-5").await.unwrap());
    assert_eq!(rows_in(&store, "run_inbox").await, 0);
    assert_eq!(store.get_run("run-5").await.unwrap(), None);
}

/// A move from the ingest inbox finds its rows by the inbox's primary key (the oldest first,
/// an array of ids), with the statistics of an empty inbox and of a backlog: never a walk of
/// the whole inbox per move, which `id IN (subquery)` planned (15 ms a move over 60,000
/// waiting runs).
#[tokio::test]
async fn postgres_inbox_moves_find_their_rows_by_key() {
    let (store, _) = fresh_pg().await;
    let by_key = |plan: Vec<String>, when: &str| {
        let plan = plan.join("\n");
        assert!(
            plan.contains("Index Cond: (id = ANY ($1))") && !plan.contains("Semi Join"),
            "{when}: the move deletes its rows by key:\n{plan}"
        );
        assert!(
            !plan.contains("Seq Scan"),
            "{when}: the move reads no table whole:\n{plan}"
        );
    };
    sqlx::query("ANALYZE run_inbox")
        .execute(store.pool())
        .await
        .expect("analyze");
    by_key(
        store.explain_move_inbox().await.expect("explain"),
        "an empty inbox",
    );
    sqlx::query(
        "INSERT INTO run_inbox SELECT 'run-' || lpad(g::text, 6, '0'), 'wf', 'queued', 'live', \
           'webhook', 'k' || g, g, NULL, NULL, 'run-' || g, NULL, '{}', '{}', '{}' \
         FROM generate_series(1, 20000) g",
    )
    .execute(store.pool())
    .await
    .expect("a backlog");
    sqlx::query("ANALYZE run_inbox")
        .execute(store.pool())
        .await
        .expect("analyze");
    by_key(
        store.explain_move_inbox().await.expect("explain"),
        "a backlog",
    );
}

/// A run being moved from the inbox is never missing: readers of single runs, while other
/// sessions move the inbox in small steps, find every claimed run every time (one statement
/// reads both tables, so one snapshot has the run in exactly one of them), and when the
/// moves end every run is in `runs` once.
#[tokio::test]
async fn postgres_runs_moving_from_the_inbox_are_always_found() {
    const RUNS: i64 = 300;
    let (store, _) = fresh_pg().await;
    let store = Arc::new(store);
    let writes: Vec<BatchWrite> = (0..RUNS)
        .map(|i| {
            let id = format!("run-{i:04}");
            BatchWrite::ClaimAndEnqueue {
                claim: claim("wf", &format!("evt_{i}"), &id, T0 + i, DAY),
                run: run(&id, "wf", RunStatus::Queued, T0 + i),
            }
        })
        .collect();
    for o in batch(&*store, writes).await {
        assert!(matches!(
            o.unwrap(),
            BatchOutcome::Claim(ClaimOutcome::Claimed)
        ));
    }
    assert_eq!(rows_in(&store, "run_inbox").await, RUNS);
    let movers: Vec<_> = (0..3)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(
                async move { while store.move_inbox(3, false).await.expect("move") > 0 {} },
            )
        })
        .collect();
    let readers: Vec<_> = (0..4)
        .map(|r| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut reads = 0;
                for round in 0..4 {
                    for i in (r..RUNS).step_by(4) {
                        let id = format!("run-{i:04}");
                        let got = store.get_run(&id).await.expect("read");
                        assert_eq!(
                            got.map(|g| g.id),
                            Some(id.clone()),
                            "round {round}: {id} missing"
                        );
                        reads += 1;
                    }
                }
                reads
            })
        })
        .collect();
    let mut reads = 0;
    for r in readers {
        reads += r.await.expect("reader");
    }
    for m in movers {
        m.await.expect("mover");
    }
    assert_eq!(reads, 4 * RUNS);
    assert_eq!(rows_in(&store, "run_inbox").await, 0);
    assert_eq!(rows_in(&store, "runs").await, RUNS, "each run moved once");
}

/// Retention deleting a run while a write of that run adds a search value: the write commits
/// while the delete waits on the run's row, so the delete's statement cannot see the new
/// value row; retention still leaves no value row of the deleted run behind.
#[tokio::test]
async fn postgres_retention_racing_a_write_of_the_run_leaves_no_value_rows() {
    use std::time::Duration;
    let (store, url) = fresh_pg().await;
    let store = Arc::new(store);
    for (id, at) in [("run-old", T0), ("run-new", T0 + 1)] {
        let w = BatchWrite::PutRun(run(id, "wf", RunStatus::Succeeded, at));
        assert_eq!(
            batch(&*store, vec![w]).await[0].clone().unwrap(),
            BatchOutcome::Put
        );
    }
    // Another session writes run-old (its row locked) and adds a value row, not yet committed.
    let mut writer = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
        .await
        .expect("connect");
    for sql in [
        "BEGIN",
        "UPDATE runs SET summary = summary WHERE id = 'run-old'",
        "INSERT INTO run_values (value, created_at, run_id) \
         SELECT 'cus_late1', created_at, id FROM runs WHERE id = 'run-old'",
    ] {
        sqlx::query(sql).execute(&mut writer).await.expect(sql);
    }
    let prune = {
        let store = store.clone();
        tokio::spawn(async move {
            let policy = Retention {
                max_runs_per_workflow: Some(1),
                max_age_ms: None,
            };
            store.prune_runs(&policy, T0 + DAY).await
        })
    };
    // Until retention's delete waits on run-old's row (bounded: the server shows it at once).
    // Asked on the store's pool: the writer's open transaction would see one snapshot of the
    // server's activity throughout.
    let mut waiting = false;
    for _ in 0..500 {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
             AND datname = current_database()",
        )
        .fetch_one(store.pool())
        .await
        .expect("pg_stat_activity");
        if n > 0 {
            waiting = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(waiting, "retention's delete never waited on the run's row");
    sqlx::query("COMMIT")
        .execute(&mut writer)
        .await
        .expect("commit");
    assert_eq!(prune.await.expect("task").expect("prune"), 1);
    let left: Vec<String> =
        sqlx::query_scalar("SELECT run_id || ' ' || value FROM run_values ORDER BY 1")
            .fetch_all(store.pool())
            .await
            .expect("value rows");
    assert!(
        left.iter().all(|r| r.starts_with("run-new ")),
        "value rows of the deleted run are left: {left:?}"
    );
}

/// A server that cannot be reached is a transient backend error; a malformed URL is not.
#[tokio::test]
async fn postgres_connection_errors_are_classified() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let cfg = PgConfig {
        acquire_timeout_ms: 2_000,
        ..PgConfig::default()
    };
    let e = PgStore::connect_with(&format!("postgres://fluxo:pw-123@127.0.0.1:{port}/x"), &cfg)
        .await
        .expect_err("nothing listens there");
    assert!(matches!(e, StoreError::Backend(_)), "{e:?}");
    assert!(e.is_transient());
    // Why, and where, not just the pool's timeout; never the password.
    let text = e.to_string();
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(text.to_lowercase().contains("refused"), "{text}");
    assert!(!text.contains("pw-123"), "{text}");
    let e = PgStore::connect("not a url").await.expect_err("malformed");
    assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");
    assert!(!e.is_transient());
    // A bad option is named once, with its value.
    let e = PgStore::connect(&format!(
        "postgres://fluxo@127.0.0.1:{port}/x?sslmode=bogus"
    ))
    .await
    .expect_err("bad sslmode");
    assert!(matches!(e, StoreError::Invalid(_)), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("\"bogus\"") && text.contains("ssl_mode"),
        "{text}"
    );
    assert_eq!(text.matches("configuration").count(), 0, "{text}");
}

/// Batches of claims of the same keys in different orders, at once, outside transactions
/// (one statement each): every claim is decided, each key is won once with its queued run,
/// and the server saw no deadlock (the statement writes its claims in key order).
#[tokio::test]
async fn postgres_claim_batches_in_any_order_never_deadlock() {
    const KEYS: usize = 200;
    const TASKS: usize = 8;
    const BATCHES: usize = 20;
    let (store, url) = fresh_pg().await;
    let store = Arc::new(store);
    let tasks: Vec<_> = (0..TASKS)
        .map(|t| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut won = 0;
                for b in 0..BATCHES {
                    // A different order of the same keys for every batch.
                    let mut keys: Vec<usize> = (0..KEYS).collect();
                    keys.rotate_left((t * 7 + b * 13) % KEYS);
                    if (t + b) % 2 == 1 {
                        keys.reverse();
                    }
                    let writes = keys
                        .iter()
                        .map(|k| {
                            let id = format!("run-{t}-{b}-{k}");
                            BatchWrite::ClaimAndEnqueue {
                                claim: claim("wf", &format!("evt_{k}"), &id, T0, DAY),
                                run: run(&id, "wf", RunStatus::Queued, T0),
                            }
                        })
                        .collect();
                    for o in batch(&*store, writes).await {
                        match o.expect("every claim is decided") {
                            BatchOutcome::Claim(ClaimOutcome::Claimed) => won += 1,
                            BatchOutcome::Claim(ClaimOutcome::Duplicate { .. }) => {}
                            other => panic!("{other:?}"),
                        }
                    }
                }
                won
            })
        })
        .collect();
    let mut won = 0;
    for t in tasks {
        won += t.await.expect("task");
    }
    assert_eq!(won, KEYS, "each key won once");
    assert_eq!(rows_in(&store, "run_inbox").await, KEYS as i64);
    // Backends report their statistics when they end: close the store's connections first.
    store.pool().close().await;
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
        .await
        .expect("connect");
    let deadlocks: i64 = sqlx::query_scalar(
        "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()",
    )
    .fetch_one(&mut conn)
    .await
    .expect("pg_stat_database");
    assert_eq!(deadlocks, 0, "the server detected deadlocks");
}

/// On PostgreSQL the group commit applies batches at once (`Store::concurrent_batches`): a
/// claim held up in its batch (another session's uncommitted claim of the same key, which its
/// statement waits for) does not hold up a later claim of another key, and a caller of
/// `durable` is answered only after the held-up batch has committed.
#[tokio::test]
async fn postgres_group_commit_applies_batches_at_once_and_durable_waits_for_all() {
    use std::time::Duration;
    let (store, url) = fresh_pg().await;
    assert!(store.concurrent_batches() > 1);
    // The group commit holds the store weakly: keep it.
    let store: Arc<dyn Store> = Arc::new(store);
    let commit = GroupCommit::start(store.clone());
    // Another session claims `w`/`held` in a transaction it keeps open, so the batch
    // claiming that key waits for it.
    let mut blocker = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
        .await
        .expect("connect");
    let mut observer = <sqlx::PgConnection as sqlx::Connection>::connect(&url)
        .await
        .expect("connect");
    for sql in [
        "BEGIN".to_string(),
        format!(
            "INSERT INTO webhook_claims (workflow_id, key, run_id, claimed_at, expires_at) \
             VALUES ('w', 'held', 'run-other', {T0}, {})",
            T0 + DAY
        ),
    ] {
        sqlx::query(&sql).execute(&mut blocker).await.expect(&sql);
    }
    let held = {
        let commit = commit.clone();
        tokio::spawn(async move {
            commit
                .claim_and_enqueue(
                    claim("w", "held", "run-held", T0, DAY),
                    run("run-held", "w", RunStatus::Queued, T0),
                )
                .await
        })
    };
    // Until the held batch waits on the lock (bounded: the server shows it within seconds).
    let mut waiting = false;
    for _ in 0..500 {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
             AND datname = current_database()",
        )
        .fetch_one(&mut observer)
        .await
        .expect("pg_stat_activity");
        if n > 0 {
            waiting = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        waiting,
        "the claim of the held key never waited for the other session's"
    );
    // Another key's claim is applied and answered while the first batch is held.
    let free = tokio::time::timeout(
        Duration::from_secs(30),
        commit.claim_and_enqueue(
            claim("w", "free", "run-free", T0, DAY),
            run("run-free", "w", RunStatus::Queued, T0),
        ),
    )
    .await
    .expect("a claim of another key waits for a held batch")
    .expect("claim");
    assert_eq!(free, ClaimOutcome::Claimed);
    assert!(!held.is_finished());
    // `durable` covers the held claim, handed in before it: no answer while it is held.
    let durable = {
        let commit = commit.clone();
        tokio::spawn(async move { commit.durable().await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !durable.is_finished(),
        "durable answered before an earlier batch committed"
    );
    // The other session gives up its claim: the held one wins.
    sqlx::query("ROLLBACK")
        .execute(&mut blocker)
        .await
        .expect("rollback");
    assert_eq!(held.await.unwrap().expect("claim"), ClaimOutcome::Claimed);
    durable.await.unwrap().expect("durable");
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn opts(allow_overwrite: bool, ttl_ms: Option<u64>) -> WriteOptions<'static> {
    WriteOptions {
        allow_overwrite,
        ttl_ms,
        owner: None,
    }
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

fn finished(id: &str, workflow: &str, created: i64, finished_at: i64) -> RunRecord {
    let mut r = run(id, workflow, RunStatus::Succeeded, created);
    r.finished_at = Some(Timestamp(finished_at));
    r
}

fn ids(runs: &[RunSummary]) -> Vec<String> {
    runs.iter().map(|r| r.id.clone()).collect()
}

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
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

/// Pages through `query` with `page` runs per page; checks paging invariants and returns all.
async fn all_pages(store: &dyn Store, query: &RunQuery, page: usize) -> Vec<RunSummary> {
    let mut q = query.clone();
    q.limit = page;
    q.cursor = None;
    let mut out: Vec<RunSummary> = Vec::new();
    for _ in 0..10_000 {
        let p = store.list_runs(&q).await.unwrap();
        assert!(p.runs.len() <= page);
        if p.next_cursor.is_some() {
            assert_eq!(p.runs.len(), page, "a page with a cursor is full");
        }
        out.extend(p.runs);
        match p.next_cursor {
            Some(c) => q.cursor = Some(c),
            None => return out,
        }
    }
    panic!(
        "paging did not end: {query:?}, page size {page}, at cursor {:?}",
        q.cursor
    );
}

/// [`Store::write_batch`], checking that every write comes back, in order, with its result.
async fn batch(store: &dyn Store, writes: Vec<BatchWrite>) -> Vec<StoreResult<BatchOutcome>> {
    let sent: Vec<String> = writes.iter().map(|w| format!("{w:?}")).collect();
    let out = store.write_batch(writes).await;
    let back: Vec<String> = out.iter().map(|(w, _)| format!("{w:?}")).collect();
    assert_eq!(back, sent, "every write handed back, in order");
    out.into_iter().map(|(_, r)| r).collect()
}

async fn remaining(store: &dyn Store, workflow: &str) -> BTreeSet<String> {
    let q = RunQuery {
        workflow: Some(workflow.into()),
        ..Default::default()
    };
    all_pages(store, &q, 100)
        .await
        .into_iter()
        .map(|r| r.id)
        .collect()
}

/// 240 runs over 3 workflows with varied status, mode, trigger and key; some share a
/// `created_at`.
fn fixture_runs() -> Vec<RunRecord> {
    let workflows = ["orders", "invoices", "ord"];
    let triggers = [Trigger::Webhook, Trigger::Api, Trigger::Manual];
    (0..240)
        .map(|i: i64| {
            let status = RunStatus::ALL[(i % 6) as usize];
            let created = T0 + (i / 2) * 60_000; // two runs per minute
            let mut r = run(
                &new_run_id(created),
                workflows[(i % 3) as usize],
                status,
                created,
            );
            r.mode = if i % 5 == 0 { Mode::Dry } else { Mode::Live };
            r.trigger = triggers[(i % 4 % 3) as usize];
            if i % 4 != 3 {
                r.idempotency_key = Some(format!("evt_{:03}", i % 50));
            }
            r
        })
        .collect()
}

/// What a query must answer: the matching runs, newest first by `(created_at, id)`.
fn expected(runs: &[RunRecord], q: &RunQuery) -> Vec<String> {
    let mut v: Vec<&RunRecord> = runs
        .iter()
        .filter(|r| q.workflow.as_ref().is_none_or(|w| *w == r.workflow_id))
        .filter(|r| q.status.is_none_or(|s| s == r.status))
        .filter(|r| q.mode.is_none_or(|m| m == r.mode))
        .filter(|r| q.trigger.is_none_or(|t| t == r.trigger))
        .filter(|r| q.key.is_none() || q.key == r.idempotency_key)
        .filter(|r| q.since.is_none_or(|s| r.created_at.0 >= s))
        .filter(|r| q.until.is_none_or(|u| r.created_at.0 < u))
        .filter(|r| {
            q.q.as_deref().is_none_or(|t| {
                r.id.starts_with(t)
                    || r.idempotency_key
                        .as_deref()
                        .is_some_and(|k| k.starts_with(t))
            })
        })
        .collect();
    v.sort_by_key(|r| std::cmp::Reverse((r.created_at, r.id.clone())));
    v.into_iter().map(|r| r.id.clone()).collect()
}

// ---------------------------------------------------------------------------------------------
// The cases
// ---------------------------------------------------------------------------------------------

mod cases {
    use super::*;

    // --- Memory --------------------------------------------------------------------------

    /// A claim with a TTL expires by itself and can be claimed again; the old expiry does not
    /// take the new entry with it.
    pub async fn memory_claim_expires_and_is_reclaimed(f: &Fixture) {
        let store = &*f.store;
        let claim = opts(false, Some(2_000));
        let w = store
            .write("inv", "INV-1", &json!("a"), claim, T0)
            .await
            .unwrap();
        assert_eq!(
            w,
            WriteResult::Written {
                expires_at: Some(T0 + 2_000)
            }
        );
        match store
            .write("inv", "INV-1", &json!("b"), claim, T0 + 1_000)
            .await
            .unwrap()
        {
            WriteResult::Exists { existing } => {
                assert_eq!(existing.value, json!("a"));
                assert_eq!(existing.written_at, T0);
                assert_eq!(existing.expires_at, Some(T0 + 2_000));
            }
            other => panic!("expected Exists, got {other:?}"),
        }
        let e = store.read("inv", "INV-1", T0 + 1_000).await.unwrap();
        assert_eq!(
            e.map(|e| e.value),
            Some(json!("a")),
            "the refused write changed nothing"
        );
        // No sweep has run: the expired entry is still stored but reads as absent.
        assert_eq!(store.read("inv", "INV-1", T0 + 3_000).await.unwrap(), None);
        assert_eq!(store.namespaces().await.unwrap(), ["inv"]);
        let w = store
            .write("inv", "INV-1", &json!("c"), claim, T0 + 3_000)
            .await
            .unwrap();
        assert_eq!(
            w,
            WriteResult::Written {
                expires_at: Some(T0 + 5_000)
            }
        );
        let e = store
            .read("inv", "INV-1", T0 + 3_000)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (e.value, e.written_at, e.expires_at),
            (json!("c"), T0 + 3_000, Some(T0 + 5_000))
        );
        assert_eq!(store.sweep_expired(T0 + 4_000, 100).await.unwrap(), 0);
        assert!(store
            .read("inv", "INV-1", T0 + 4_000)
            .await
            .unwrap()
            .is_some());
        assert_eq!(store.sweep_expired(T0 + 5_000, 100).await.unwrap(), 1);
        assert!(store.namespaces().await.unwrap().is_empty());
    }

    /// `expires_at <= now` is expired, to the millisecond, everywhere.
    pub async fn memory_ttl_edges(f: &Fixture) {
        let store = &*f.store;
        store
            .write("t", "k", &json!(1), opts(false, Some(10)), T0)
            .await
            .unwrap();
        assert!(store.read("t", "k", T0 + 9).await.unwrap().is_some());
        assert_eq!(
            store.list("t", "", None, 10, T0 + 9).await.unwrap().len(),
            1
        );
        assert!(matches!(
            store
                .write("t", "k", &json!(2), opts(false, Some(10)), T0 + 9)
                .await
                .unwrap(),
            WriteResult::Exists { .. }
        ));
        // Exactly at expiry: absent for reads, lists and claims.
        assert_eq!(store.read("t", "k", T0 + 10).await.unwrap(), None);
        assert!(store
            .list("t", "", None, 10, T0 + 10)
            .await
            .unwrap()
            .is_empty());
        assert_eq!(
            store
                .write("t", "k", &json!(3), opts(false, Some(10)), T0 + 10)
                .await
                .unwrap(),
            WriteResult::Written {
                expires_at: Some(T0 + 20)
            }
        );
        // A TTL of 0 expires at once; a huge one saturates instead of overflowing.
        assert_eq!(
            store
                .write("t", "zero", &json!(1), opts(true, Some(0)), T0)
                .await
                .unwrap(),
            WriteResult::Written {
                expires_at: Some(T0)
            }
        );
        assert_eq!(store.read("t", "zero", T0).await.unwrap(), None);
        assert_eq!(
            store
                .write("t", "forever", &json!(1), opts(true, Some(u64::MAX)), T0)
                .await
                .unwrap(),
            WriteResult::Written {
                expires_at: Some(i64::MAX)
            }
        );
        assert!(store
            .read("t", "forever", i64::MAX - 1)
            .await
            .unwrap()
            .is_some());
        // Deleting an expired entry removes it but answers false.
        store
            .write("t", "gone", &json!(1), opts(true, Some(5)), T0)
            .await
            .unwrap();
        assert!(!store.delete("t", "gone", T0 + 5).await.unwrap());
        assert!(
            !store.delete("t", "gone", T0).await.unwrap(),
            "it was removed"
        );
        // An overwrite without TTL clears the expiry.
        store
            .write("t", "k", &json!(4), opts(true, None), T0 + 10)
            .await
            .unwrap();
        assert_eq!(
            store
                .read("t", "k", i64::MAX)
                .await
                .unwrap()
                .map(|e| e.value),
            Some(json!(4))
        );
        assert_eq!(
            store.sweep_expired(i64::MAX, 100).await.unwrap(),
            2,
            "`zero` and `forever` (due at i64::MAX), not `k`"
        );
    }

    pub async fn memory_list_delete_namespaces_in_byte_order(f: &Fixture) {
        let store = &*f.store;
        let keep = opts(true, None);
        for k in ["order:1", "order:2", "order:3", "other"] {
            store.write("shop", k, &json!(k), keep, T0).await.unwrap();
        }
        store
            .write("shop", "order:4", &json!(4), opts(true, Some(10)), T0)
            .await
            .unwrap();
        store.write("a", "x", &json!(1), keep, T0).await.unwrap();
        store
            .write("shop2", "order:1", &json!(1), keep, T0)
            .await
            .unwrap();
        let keys = |v: Vec<MemoryEntry>| v.into_iter().map(|e| e.key).collect::<Vec<_>>();
        assert_eq!(
            keys(store.list("shop", "order:", None, 10, T0).await.unwrap()),
            ["order:1", "order:2", "order:3", "order:4"]
        );
        assert_eq!(
            keys(
                store
                    .list("shop", "order:", None, 10, T0 + 10)
                    .await
                    .unwrap()
            ),
            ["order:1", "order:2", "order:3"],
            "expired entries are not listed"
        );
        assert_eq!(
            keys(
                store
                    .list("shop", "order:", Some("order:1"), 1, T0)
                    .await
                    .unwrap()
            ),
            ["order:2"]
        );
        assert_eq!(
            keys(
                store
                    .list("shop", "", Some("order:3"), 10, T0 + 10)
                    .await
                    .unwrap()
            ),
            ["other"]
        );
        assert!(store
            .list("shop", "", None, 0, T0)
            .await
            .unwrap()
            .is_empty());
        assert_eq!(store.namespaces().await.unwrap(), ["a", "shop", "shop2"]);

        // Byte (code point) order, whatever the database's collation: upper case before lower,
        // ASCII before accented, a NUL inside a key is an ordinary character.
        for k in [
            "b",
            "B",
            "a",
            "é",
            "e",
            "a\u{10FFFF}",
            "a\0b",
            "ab",
            "Z",
            "\u{FFFF}",
        ] {
            store.write("order", k, &json!(k), keep, T0).await.unwrap();
        }
        let all = keys(store.list("order", "", None, 100, T0).await.unwrap());
        let mut want: Vec<String> = all.clone();
        want.sort();
        assert_eq!(all, want);
        assert_eq!(all.len(), 10);
        assert_eq!(
            keys(store.list("order", "a", None, 100, T0).await.unwrap()),
            ["a", "a\0b", "ab", "a\u{10FFFF}"]
        );
        assert_eq!(
            keys(
                store
                    .list("order", "a", Some("a\0b"), 100, T0)
                    .await
                    .unwrap()
            ),
            ["ab", "a\u{10FFFF}"]
        );
        assert_eq!(
            store
                .read("order", "a\0b", T0)
                .await
                .unwrap()
                .map(|e| e.value),
            Some(json!("a\0b"))
        );
        for ns in ["Zeta", "ärger", "_x"] {
            store.write(ns, "k", &json!(1), keep, T0).await.unwrap();
        }
        assert_eq!(
            store.namespaces().await.unwrap(),
            ["Zeta", "_x", "a", "order", "shop", "shop2", "ärger"]
        );

        assert!(store.delete("shop", "order:1", T0).await.unwrap());
        assert!(!store.delete("shop", "order:1", T0).await.unwrap());
        assert!(
            !store.delete("shop", "order:4", T0 + 10).await.unwrap(),
            "an expired entry is not a live one"
        );
        assert_eq!(store.read("shop", "order:1", T0).await.unwrap(), None);
        assert!(store.delete("a", "x", T0).await.unwrap());
        assert!(!store.namespaces().await.unwrap().contains(&"a".to_string()));

        // Refused inputs are the caller's: not transient, nothing written.
        for (ns, key) in [
            ("bad\0ns", "k".to_string()),
            ("bad\nns", "k".to_string()),
            ("", "k".to_string()),
            ("shop", String::new()),
            ("shop", "k".repeat(MAX_MEMORY_KEY_BYTES + 1)),
        ] {
            let e = store
                .write(ns, &key, &json!(1), keep, T0)
                .await
                .expect_err("refused");
            assert!(
                matches!(e, StoreError::Invalid(_)) && !e.is_transient(),
                "{ns:?}: {e:?}"
            );
        }
        assert!(matches!(
            store.read("bad\0ns", "k", T0).await,
            Err(StoreError::Invalid(_))
        ));
        let at_limit = "é".repeat(MAX_MEMORY_KEY_BYTES / 2);
        store
            .write("shop", &at_limit, &json!(1), keep, T0)
            .await
            .unwrap();
        assert!(store.delete("shop", &at_limit, T0).await.unwrap());
    }

    /// Values come back exactly (object key order, numbers, escapes); owners round-trip.
    pub async fn memory_values_and_owners_round_trip(f: &Fixture) {
        let store = &*f.store;
        let value = json!({
            "z": 1, "a": [1.5, -0.25, 1e300, 12345678901234567i64, u64::MAX],
            "nul": "x\u{0}y", "uni": "ü\u{1F600}\\\"", "nested": {"b": null, "a": true}
        });
        let owner = ClaimOwner {
            run_id: "root-run".into(),
            step_id: "claim".into(),
        };
        let o = WriteOptions {
            allow_overwrite: false,
            ttl_ms: None,
            owner: Some(&owner),
        };
        store.write("v", "k", &value, o, T0).await.unwrap();
        let got = store.read("v", "k", T0).await.unwrap().expect("stored");
        assert_eq!(got.value, value);
        assert_eq!(
            serde_json::to_string(&got.value).unwrap(),
            serde_json::to_string(&value).unwrap(),
            "key order kept"
        );
        assert_eq!(got.owner.as_ref(), Some(&owner));
        match store
            .write("v", "k", &json!(0), opts(false, None), T0 + 1)
            .await
            .unwrap()
        {
            WriteResult::Exists { existing } => {
                assert_eq!(
                    existing, got,
                    "the loser sees the winner's entry, owner included"
                )
            }
            other => panic!("expected Exists, got {other:?}"),
        }
        store
            .write("v", "k", &json!("plain"), opts(true, None), T0 + 2)
            .await
            .unwrap();
        let e = store.read("v", "k", T0 + 2).await.unwrap().expect("stored");
        assert_eq!(
            (e.value, e.owner, e.written_at),
            (json!("plain"), None, T0 + 2)
        );
    }

    /// 64 concurrent claimers per key (half through a second handle where the backend has
    /// one): exactly one wins, and every loser is shown the winner's value.
    pub async fn memory_sixty_four_concurrent_claims_one_winner(f: &Fixture) {
        const WRITERS: usize = 64;
        const TRIALS: usize = 10;
        let barrier = Arc::new(Barrier::new(WRITERS));
        let tasks: Vec<_> = (0..WRITERS)
            .map(|w| {
                let store = if w % 2 == 0 {
                    f.store.clone()
                } else {
                    f.peer.clone()
                };
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    let mut answers = Vec::new();
                    for trial in 0..TRIALS {
                        barrier.wait().await;
                        let key = format!("evt-{trial}");
                        let r = store
                            .write("claims", &key, &json!(w), opts(false, Some(60_000)), T0)
                            .await
                            .unwrap();
                        answers.push((trial, w, r));
                    }
                    answers
                })
            })
            .collect();
        let mut winners: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
        let mut seen: Vec<(usize, Value)> = Vec::new();
        for t in tasks {
            for (trial, w, r) in t.await.unwrap() {
                match r {
                    WriteResult::Written { .. } => winners.entry(trial).or_default().push(w),
                    WriteResult::Exists { existing } => seen.push((trial, existing.value)),
                }
            }
        }
        assert_eq!(winners.len(), TRIALS);
        for (trial, ws) in &winners {
            assert_eq!(ws.len(), 1, "trial {trial}: exactly one winner");
        }
        for (trial, v) in seen {
            assert_eq!(v, json!(winners[&trial][0]), "a loser sees the winner");
        }
        for trial in 0..TRIALS {
            let e = f
                .store
                .read("claims", &format!("evt-{trial}"), T0)
                .await
                .unwrap();
            assert_eq!(e.map(|e| e.value), Some(json!(winners[&trial][0])));
        }
    }

    /// An expired entry is claimable again by exactly one of many contenders.
    pub async fn memory_contended_reclaim_of_expired_entry(f: &Fixture) {
        for trial in 0..5 {
            let key = format!("k{trial}");
            f.store
                .write("ns", &key, &json!("old"), opts(false, Some(5)), T0)
                .await
                .unwrap();
            let barrier = Arc::new(Barrier::new(32));
            let tasks: Vec<_> = (0..32)
                .map(|w| {
                    let store = if w % 2 == 0 {
                        f.store.clone()
                    } else {
                        f.peer.clone()
                    };
                    let (barrier, key) = (barrier.clone(), key.clone());
                    tokio::spawn(async move {
                        barrier.wait().await;
                        store
                            .write("ns", &key, &json!(w), opts(false, Some(5)), T0 + 5)
                            .await
                            .unwrap()
                    })
                })
                .collect();
            let mut wins = 0;
            for t in tasks {
                match t.await.unwrap() {
                    WriteResult::Written { expires_at } => {
                        assert_eq!(expires_at, Some(T0 + 10));
                        wins += 1;
                    }
                    WriteResult::Exists { existing } => {
                        assert_ne!(existing.value, json!("old"), "never the expired entry");
                        assert_eq!(existing.written_at, T0 + 5);
                    }
                }
            }
            assert_eq!(wins, 1);
            let e = f.store.read("ns", &key, T0 + 5).await.unwrap().unwrap();
            assert_ne!(e.value, json!("old"));
        }
    }

    /// The sweep removes at most `max`, earliest expiry first, and only what is due.
    pub async fn memory_sweep_is_bounded_and_earliest_first(f: &Fixture) {
        let store = &*f.store;
        for i in 1..=5u64 {
            store
                .write("s", &format!("k{i}"), &json!(i), opts(true, Some(i)), T0)
                .await
                .unwrap();
        }
        store
            .write("s", "keep", &json!(0), opts(true, None), T0)
            .await
            .unwrap();
        assert_eq!(
            store.sweep_expired(T0, 100).await.unwrap(),
            0,
            "nothing due yet"
        );
        assert_eq!(store.sweep_expired(T0 + 10, 2).await.unwrap(), 2, "bounded");
        // The two earliest (k1, k2) went: of those due at T0 + 3 only k3 is left.
        assert_eq!(store.sweep_expired(T0 + 3, 100).await.unwrap(), 1);
        assert_eq!(store.sweep_expired(T0 + 10, 0).await.unwrap(), 0);
        assert_eq!(store.sweep_expired(T0 + 10, 100).await.unwrap(), 2);
        assert_eq!(store.sweep_expired(T0 + 10, 100).await.unwrap(), 0);
        assert_eq!(store.namespaces().await.unwrap(), ["s"]);
        assert!(store.read("s", "keep", i64::MAX).await.unwrap().is_some());
    }

    // --- Runs ----------------------------------------------------------------------------

    pub async fn runs_put_get_roundtrip(f: &Fixture) {
        let store = &*f.store;
        let mut r = run("r1", "wf", RunStatus::Queued, T0);
        r.idempotency_key = Some("evt_1".into());
        r.input = json!({"b": 2, "a": [1, {"z": null}], "s": "nul\u{0}"}).into();
        store.put_run(&r).await.unwrap();
        let got = store.get_run("r1").await.unwrap();
        assert_eq!(got, Some(r.clone()));
        assert_eq!(
            serde_json::to_string(&got.unwrap().input).unwrap(),
            serde_json::to_string(&r.input).unwrap(),
            "input key order kept"
        );
        assert_eq!(store.get_run("nope").await.unwrap(), None);
        r.warnings.push("replaced".into());
        store.put_run(&r).await.unwrap();
        assert_eq!(store.get_run("r1").await.unwrap(), Some(r));
        let mut bad = run("r2", "wf\0x", RunStatus::Queued, T0);
        assert!(
            store.put_run(&bad).await.is_err(),
            "NUL in workflow id refused"
        );
        bad.workflow_id = "wf".into();
        bad.idempotency_key = Some("k\0".into());
        assert!(store.put_run(&bad).await.is_err(), "NUL in key refused");
        assert_eq!(store.get_run("r2").await.unwrap(), None);
    }

    pub async fn runs_status_transitions_keep_indexes_right(f: &Fixture) {
        let store = &*f.store;
        let mut r = run("r1", "wf", RunStatus::Queued, T0);
        r.idempotency_key = Some("evt".into());
        store.put_run(&r).await.unwrap();
        store
            .put_run(&run("other", "wf", RunStatus::Queued, T0 + 1))
            .await
            .unwrap();
        for next in [RunStatus::Running, RunStatus::Succeeded] {
            r.status = next;
            r.finished_at = next.is_final().then_some(Timestamp(T0 + 50));
            store.put_run(&r).await.unwrap();
            for st in RunStatus::ALL {
                let expected: Vec<String> = match (st == next, st == RunStatus::Queued) {
                    (true, _) => vec!["r1".into()],
                    (false, true) => vec!["other".into()],
                    _ => vec![],
                };
                for wf in [None, Some("wf".to_string())] {
                    let q = RunQuery {
                        workflow: wf,
                        status: Some(st),
                        limit: 10,
                        ..Default::default()
                    };
                    assert_eq!(
                        ids(&store.list_runs(&q).await.unwrap().runs),
                        expected,
                        "{st}"
                    );
                }
                assert_eq!(
                    store.run_ids_with_status(st).await.unwrap(),
                    expected,
                    "{st}"
                );
            }
            let by_key = store
                .list_runs(&RunQuery {
                    key: Some("evt".into()),
                    limit: 10,
                    ..Default::default()
                })
                .await
                .unwrap();
            assert_eq!(ids(&by_key.runs), ["r1"]);
            assert_eq!(by_key.runs[0].status, next);
        }
        // Oldest first by created_at, then id, for crash recovery.
        for (i, created) in [T0 + 5, T0 + 1, T0 + 3, T0 + 1].into_iter().enumerate() {
            store
                .put_run(&run(&format!("x{i}"), "wf", RunStatus::Running, created))
                .await
                .unwrap();
        }
        assert_eq!(
            store.run_ids_with_status(RunStatus::Running).await.unwrap(),
            ["x1", "x3", "x2", "x0"]
        );
    }

    pub async fn runs_every_filter_with_paging(f: &Fixture) {
        let store = &*f.store;
        let runs = fixture_runs();
        let some_id = runs[17].id.clone();
        let d = RunQuery::default;
        let queries: Vec<RunQuery> = vec![
            d(),
            RunQuery {
                workflow: Some("orders".into()),
                ..d()
            },
            RunQuery {
                workflow: Some("ord".into()),
                ..d()
            },
            RunQuery {
                workflow: Some("missing".into()),
                ..d()
            },
            RunQuery {
                status: Some(RunStatus::Failed),
                ..d()
            },
            RunQuery {
                workflow: Some("orders".into()),
                status: Some(RunStatus::Queued),
                ..d()
            },
            RunQuery {
                mode: Some(Mode::Dry),
                ..d()
            },
            RunQuery {
                trigger: Some(Trigger::Manual),
                ..d()
            },
            RunQuery {
                trigger: Some(Trigger::Api),
                workflow: Some("invoices".into()),
                ..d()
            },
            RunQuery {
                key: Some("evt_007".into()),
                ..d()
            },
            RunQuery {
                key: Some("evt_00".into()),
                ..d()
            },
            RunQuery {
                key: Some("evt_007".into()),
                status: Some(RunStatus::Running),
                ..d()
            },
            RunQuery {
                key: Some("evt_007".into()),
                workflow: Some("ord".into()),
                ..d()
            },
            RunQuery {
                since: Some(T0 + 30 * 60_000),
                ..d()
            },
            RunQuery {
                until: Some(T0 + 30 * 60_000),
                ..d()
            },
            RunQuery {
                since: Some(T0 + 10 * 60_000),
                until: Some(T0 + 50 * 60_000),
                workflow: Some("orders".into()),
                status: Some(RunStatus::Succeeded),
                ..d()
            },
            RunQuery {
                since: Some(T0 + 90 * 60_000),
                until: Some(T0 + 20 * 60_000),
                ..d()
            },
            RunQuery {
                q: Some("evt_01".into()),
                ..d()
            },
            RunQuery {
                q: Some("evt_".into()),
                workflow: Some("ord".into()),
                ..d()
            },
            RunQuery {
                q: Some(some_id.clone()),
                ..d()
            },
            RunQuery {
                q: Some(some_id[..8].to_string()),
                ..d()
            },
            RunQuery {
                q: Some("nothing-matches".into()),
                ..d()
            },
            RunQuery {
                q: Some(String::new()),
                mode: Some(Mode::Dry),
                ..d()
            },
            RunQuery {
                q: Some("evt_0".into()),
                key: Some("evt_007".into()),
                ..d()
            },
            RunQuery {
                mode: Some(Mode::Live),
                trigger: Some(Trigger::Webhook),
                status: Some(RunStatus::TimedOut),
                since: Some(T0 + 60_000),
                ..d()
            },
        ];
        for r in &runs {
            store.put_run(r).await.unwrap();
        }
        for q in &queries {
            let want = expected(&runs, q);
            for page in [1, 7, 50, 500] {
                let got = ids(&all_pages(store, q, page).await);
                assert_eq!(got, want, "query {q:?}, page size {page}");
            }
        }
        // Summaries carry the list fields.
        let first = store
            .list_runs(&RunQuery { limit: 1, ..d() })
            .await
            .unwrap();
        let newest = runs.iter().max_by_key(|r| (r.created_at, &r.id)).unwrap();
        assert_eq!(first.runs, vec![RunSummary::from(newest)]);
        assert!(first.next_cursor.is_some());
    }

    /// Cursor paging has no duplicates and no gaps while newer runs arrive, including runs in
    /// the cursor's own millisecond.
    pub async fn runs_paging_is_stable_while_new_runs_arrive(f: &Fixture) {
        let store = &*f.store;
        for i in 0..30 {
            store
                .put_run(&run(
                    &format!("r{i:02}"),
                    "wf",
                    RunStatus::Succeeded,
                    T0 + i,
                ))
                .await
                .unwrap();
        }
        let mut q = RunQuery {
            limit: 10,
            ..Default::default()
        };
        let p1 = store.list_runs(&q).await.unwrap();
        assert_eq!(
            p1.next_cursor.as_deref(),
            Some(format!("{}:r20", T0 + 20).as_str())
        );
        // Newer runs arrive between pages, one in the cursor's millisecond with a higher id:
        // none of them may shift the next page.
        for i in 30..35 {
            store
                .put_run(&run(
                    &format!("r{i:02}"),
                    "wf",
                    RunStatus::Succeeded,
                    T0 + i,
                ))
                .await
                .unwrap();
        }
        store
            .put_run(&run("r20z", "wf", RunStatus::Succeeded, T0 + 20))
            .await
            .unwrap();
        q.cursor = p1.next_cursor.clone();
        let p2 = store.list_runs(&q).await.unwrap();
        q.cursor = p2.next_cursor.clone();
        let p3 = store.list_runs(&q).await.unwrap();
        assert_eq!(p3.next_cursor, None);
        let mut seen: Vec<String> = ids(&p1.runs);
        seen.extend(ids(&p2.runs));
        seen.extend(ids(&p3.runs));
        let want: Vec<String> = (0..30).rev().map(|i| format!("r{i:02}")).collect();
        assert_eq!(seen, want);
        // A bare run id is accepted as a cursor too; an unknown one gives an empty page.
        q.cursor = Some("r20".into());
        assert_eq!(ids(&store.list_runs(&q).await.unwrap().runs)[0], "r19");
        q.cursor = Some("r20z".into());
        assert_eq!(ids(&store.list_runs(&q).await.unwrap().runs)[0], "r20");
        q.cursor = Some("no-such-run".into());
        let empty = store.list_runs(&q).await.unwrap();
        assert!(empty.runs.is_empty() && empty.next_cursor.is_none());
        q.cursor = None;
        q.limit = 0;
        assert!(store.list_runs(&q).await.unwrap().runs.is_empty());
    }

    /// `key` is an exact idempotency key; `q` a prefix of the run id or of the key.
    pub async fn runs_search_by_exact_key_and_prefix(f: &Fixture) {
        let store = &*f.store;
        let mut a = run(
            "0190a000-0000-7000-8000-000000000001",
            "wf",
            RunStatus::Succeeded,
            T0,
        );
        a.idempotency_key = Some("inv_1001".into());
        let mut b = run(
            "0190a000-0000-7000-8000-000000000002",
            "wf",
            RunStatus::Failed,
            T0 + 1,
        );
        b.idempotency_key = Some("inv_1002".into());
        let mut c = run(
            "0190b000-0000-7000-8000-000000000003",
            "wf",
            RunStatus::Queued,
            T0 + 2,
        );
        c.idempotency_key = Some("ch_9".into());
        for r in [&a, &b, &c] {
            store.put_run(r).await.unwrap();
        }
        let list = async |q: RunQuery| {
            ids(&store
                .list_runs(&RunQuery { limit: 10, ..q })
                .await
                .unwrap()
                .runs)
        };
        let d = RunQuery::default;
        assert_eq!(
            list(RunQuery {
                key: Some("inv_1001".into()),
                ..d()
            })
            .await,
            [a.id.clone()]
        );
        assert!(
            list(RunQuery {
                key: Some("inv_100".into()),
                ..d()
            })
            .await
            .is_empty(),
            "key is exact"
        );
        let ba = [b.id.clone(), a.id.clone()];
        assert_eq!(
            list(RunQuery {
                q: Some("inv_100".into()),
                ..d()
            })
            .await,
            ba
        );
        assert_eq!(
            list(RunQuery {
                q: Some("0190a".into()),
                ..d()
            })
            .await,
            ba
        );
        assert_eq!(
            list(RunQuery {
                q: Some(c.id.clone()),
                ..d()
            })
            .await,
            [c.id.clone()]
        );
        assert_eq!(
            list(RunQuery {
                q: Some("ch_".into()),
                ..d()
            })
            .await,
            [c.id.clone()]
        );
        assert!(list(RunQuery {
            q: Some("inv_1001x".into()),
            ..d()
        })
        .await
        .is_empty());
    }

    /// A free search matching more runs than a backend reads as candidates still pages
    /// through all of them, in order.
    pub async fn runs_free_search_with_many_candidates(f: &Fixture) {
        let store = &*f.store;
        let runs: Vec<RunRecord> = (0..1_200i64)
            .map(|i| {
                let mut r = run(
                    &format!("run-{i:05}"),
                    "wf",
                    RunStatus::Succeeded,
                    T0 + i / 3,
                );
                r.idempotency_key = Some(format!("key-{:04}", i % 1_100));
                r.mode = if i % 7 == 0 { Mode::Dry } else { Mode::Live };
                r
            })
            .collect();
        for chunk in runs.chunks(200) {
            let writes: Vec<BatchWrite> = chunk.iter().cloned().map(BatchWrite::PutRun).collect();
            for o in batch(store, writes).await {
                assert_eq!(o.unwrap(), BatchOutcome::Put);
            }
        }
        store.flush().await.unwrap();
        for q in [
            RunQuery {
                q: Some("run-".into()),
                ..Default::default()
            },
            RunQuery {
                q: Some("key-1".into()),
                mode: Some(Mode::Dry),
                ..Default::default()
            },
            RunQuery {
                q: Some("run-0099".into()),
                ..Default::default()
            },
        ] {
            let want = expected(&runs, &q);
            for page in [100, 333] {
                assert_eq!(ids(&all_pages(store, &q, page).await), want, "{q:?}");
            }
        }
    }

    /// The free search finds a run by a value inside it (SPEC §5 `q`): a customer or invoice
    /// id in the input (a Stripe event) or in a step's output, exactly or by prefix, never by
    /// a middle part; short strings, prose, words without a digit or `@` (the event type),
    /// numbers and values past the 64th are not indexed;
    /// a rewritten run is found by its new values only; `q` combines with the other filters.
    pub async fn runs_search_finds_values_inside_runs(f: &Fixture) {
        let store = &*f.store;
        let stripe = |cus: &str, inv: &str| {
            json!({
                "id": "evt_1Q", "type": "invoice.payment_failed",
                "data": {"object": {"id": inv, "customer": cus, "amount_due": 123_456,
                                    "description": "Monthly plan for ACME", "currency": "eur"}}
            })
        };
        let mut a = run("run-a", "billing", RunStatus::Failed, T0);
        a.input = stripe("cus_QXg7aa", "in_load_0100").into();
        let mut b = run("run-b", "billing", RunStatus::Succeeded, T0 + 1_000);
        b.input = json!({"n": 1, "email": "ada@example.com"}).into();
        b.steps = vec![StepRecord {
            step_id: "lookup".into(),
            kind: "http".into(),
            status: StepStatus::Succeeded,
            started_at: Timestamp(T0 + 1_000),
            finished_at: Some(Timestamp(T0 + 1_050)),
            duration_ms: 50,
            resolved_config: json!({"url": "https://api.example/cus_hidden"}),
            output: Some(json!({"status": 200, "body": {"customers": [{"id": "cus_QXg7bb"}]}})),
            error: None,
            attempts: vec![],
            ports: vec!["out".into()],
            reused_from: None,
        }];
        let mut c = run("run-c", "other", RunStatus::Succeeded, T0 + 2_000);
        c.input = stripe("cus_Zzz9", "in_load_0200").into();
        // 100 distinct values: the first 64 are indexed.
        let mut many = run("run-many", "other", RunStatus::Succeeded, T0 + 3_000);
        many.input = Value::Array((0..100).map(|i| json!(format!("val_{i:03}"))).collect()).into();
        for r in [&a, &b, &c, &many] {
            store.put_run(r).await.unwrap();
        }
        let find = |q: &str| RunQuery {
            q: Some(q.into()),
            limit: 50,
            ..Default::default()
        };
        let hits = |q: RunQuery| async move { ids(&store.list_runs(&q).await.unwrap().runs) };
        assert_eq!(
            hits(find("cus_QXg7aa")).await,
            ["run-a"],
            "exact, in the input"
        );
        assert_eq!(hits(find("in_load_0100")).await, ["run-a"], "an invoice id");
        assert_eq!(
            hits(find("cus_QXg7bb")).await,
            ["run-b"],
            "in a step's output"
        );
        assert_eq!(
            hits(find("cus_QXg")).await,
            ["run-b", "run-a"],
            "prefix, newest first"
        );
        assert_eq!(hits(find("in_load_0")).await, ["run-c", "run-a"]);
        assert_eq!(hits(find("ada@")).await, ["run-b"], "an email, by prefix");
        for none in [
            "QXg7aa",
            "invoice.payment",
            "cus_hidden",
            "eur",
            "123456",
            "Monthly plan",
            "cus_QXg7aaX",
        ] {
            assert!(hits(find(none)).await.is_empty(), "{none} is not indexed");
        }
        let last = SEARCH_VALUES_MAX - 1;
        assert_eq!(hits(find(&format!("val_{last:03}"))).await, ["run-many"]);
        assert!(
            hits(find(&format!("val_{SEARCH_VALUES_MAX:03}")))
                .await
                .is_empty(),
            "past the cap"
        );
        // With other filters.
        let mut q = find("cus_QXg");
        q.status = Some(RunStatus::Failed);
        assert_eq!(hits(q).await, ["run-a"]);
        let mut q = find("in_load");
        q.workflow = Some("other".into());
        assert_eq!(hits(q).await, ["run-c"]);
        // Paging through value matches.
        let mut q = find("cus_");
        q.limit = 1;
        let p1 = store.list_runs(&q).await.unwrap();
        assert_eq!(ids(&p1.runs), ["run-c"]);
        q.cursor = p1.next_cursor;
        assert_eq!(ids(&store.list_runs(&q).await.unwrap().runs), ["run-b"]);
        // A rewrite replaces the values (the old customer no longer finds it).
        a.input = stripe("cus_NEW01", "in_load_0100").into();
        a.status = RunStatus::Succeeded;
        store.put_run(&a).await.unwrap();
        assert!(hits(find("cus_QXg7aa")).await.is_empty());
        assert_eq!(hits(find("cus_NEW01")).await, ["run-a"]);
        assert_eq!(hits(find("cus_QXg")).await, ["run-b"]);
        // Rewritten with the same summary and new step outputs (a running run's progress).
        let mut r = run("run-r", "billing", RunStatus::Running, T0 + 4_000);
        store.put_run(&r).await.unwrap();
        r.steps = b.steps.clone();
        r.steps[0].output = Some(json!({"charge": "ch_progress1"}));
        store.put_run(&r).await.unwrap();
        assert_eq!(hits(find("ch_progress1")).await, ["run-r"]);
        // A random id that drew no digit (one Stripe id in 12) is found too; a capitalised
        // name, a constant and a word beside it are not.
        let mut d = run("run-d", "billing", RunStatus::Failed, T0 + 5_000);
        d.input = json!({"customer": "cus_NfrbTfeWzA", "login": "Codertocat",
                         "currency": "USD", "state": "payment_failed"})
        .into();
        store.put_run(&d).await.unwrap();
        assert_eq!(hits(find("cus_NfrbTfeWzA")).await, ["run-d"]);
        assert_eq!(hits(find("cus_Nfrb")).await, ["run-d"], "by prefix");
        for none in ["Codertocat", "USD", "payment_failed"] {
            assert!(hits(find(none)).await.is_empty(), "{none} is not indexed");
        }
    }

    /// A value shared by more runs than the free search reads as candidates (600) is still
    /// found in every one of them, page after page; retention and released claims take a
    /// run's values with it.
    pub async fn runs_value_search_with_many_matches_and_retention(f: &Fixture) {
        let store = &*f.store;
        let runs: Vec<RunRecord> = (0..600i64)
            .map(|i| {
                let mut r = run(&format!("run-{i:05}"), "wf", RunStatus::Succeeded, T0 + i);
                r.input =
                    json!({"customer": "cus_shared1", "invoice": format!("in_{i:05}")}).into();
                r
            })
            .collect();
        for chunk in runs.chunks(200) {
            let writes: Vec<BatchWrite> = chunk.iter().cloned().map(BatchWrite::PutRun).collect();
            for o in batch(store, writes).await {
                assert_eq!(o.unwrap(), BatchOutcome::Put);
            }
        }
        let q = RunQuery {
            q: Some("cus_shared1".into()),
            ..Default::default()
        };
        let mut want: Vec<String> = runs.iter().rev().map(|r| r.id.clone()).collect();
        assert_eq!(ids(&all_pages(store, &q, 250).await), want);
        let q5 = RunQuery {
            q: Some("in_0005".into()),
            ..Default::default()
        };
        assert_eq!(ids(&all_pages(store, &q5, 4).await).len(), 10);
        // Keep the newest 100: the others are no longer found by their values.
        let policy = Retention {
            max_runs_per_workflow: Some(100),
            max_age_ms: None,
        };
        assert_eq!(store.prune_runs(&policy, T0 + DAY).await.unwrap(), 500);
        want.truncate(100);
        assert_eq!(ids(&all_pages(store, &q, 30).await), want);
        assert!(all_pages(store, &q5, 10).await.is_empty());
        // A released claim takes its queued run's values.
        let mut queued = run("run-q", "wf", RunStatus::Queued, T0 + 5_000);
        queued.input = json!({"customer": "cus_released1"}).into();
        let c = claim("wf", "evt_released", "run-q", T0 + 5_000, DAY);
        assert_eq!(
            store
                .claim_and_enqueue(&c, &queued, T0 + 5_000)
                .await
                .unwrap(),
            ClaimOutcome::Claimed
        );
        let qr = RunQuery {
            q: Some("cus_released1".into()),
            ..Default::default()
        };
        assert_eq!(ids(&all_pages(store, &qr, 10).await), ["run-q"]);
        assert!(store
            .release_claim("wf", "evt_released", "run-q")
            .await
            .unwrap());
        assert!(all_pages(store, &qr, 10).await.is_empty());
    }

    /// `error` lists the runs that failed for one reason (`HTTP 500 at create`, `<code> at
    /// <step>`), alone, with other filters and with a free search.
    pub async fn runs_filter_by_failure_reason(f: &Fixture) {
        let store = &*f.store;
        let err = |code: &str, step: &str, http: Option<u16>| fluxo::run::ErrorInfo {
            code: code.into(),
            message: "m".into(),
            step: step.into(),
            attempts: 1,
            http_status: http,
        };
        let mut runs = Vec::new();
        for i in 0..12i64 {
            let mut r = run(&format!("run-{i:03}"), "wf", RunStatus::Failed, T0 + i);
            r.error = Some(match i % 3 {
                0 => err("http_status", "create", Some(500)),
                1 => err("http_status", "create", Some(429)),
                _ => err("template_error", "boom", None),
            });
            r.idempotency_key = Some(format!("evt_{i:03}"));
            runs.push(r);
        }
        runs.push(run("run-ok", "wf", RunStatus::Succeeded, T0 + 100));
        for r in &runs {
            store.put_run(r).await.unwrap();
        }
        let by = |e: &str| RunQuery {
            error: Some(e.into()),
            ..Default::default()
        };
        let got = all_pages(store, &by("HTTP 500 at create"), 2).await;
        assert_eq!(ids(&got), ["run-009", "run-006", "run-003", "run-000"]);
        assert_eq!(got[0].error_http_status, Some(500));
        assert_eq!(
            got[0].failure_reason().as_deref(),
            Some("HTTP 500 at create")
        );
        assert_eq!(
            all_pages(store, &by("template_error at boom"), 10)
                .await
                .len(),
            4
        );
        assert!(all_pages(store, &by("HTTP 500"), 10).await.is_empty());
        let mut q = by("HTTP 429 at create");
        q.status = Some(RunStatus::Failed);
        q.q = Some("evt_00".into());
        assert_eq!(
            ids(&all_pages(store, &q, 10).await),
            ["run-007", "run-004", "run-001"]
        );
    }

    /// Filters no index covers stop a page after [`LIST_SCAN_BUDGET`] examined runs (the
    /// sled and PostgreSQL stores; the in-memory one has no budget): the page comes back short,
    /// even empty, with a cursor, and paging on still yields every match exactly once.
    pub async fn runs_scan_budget_pages_short_but_complete(f: &Fixture) {
        let store = &*f.store;
        let n = LIST_SCAN_BUDGET as i64 + 50;
        let runs: Vec<RunRecord> = (0..n)
            .map(|i| {
                let mut r = run(&format!("run-{i:06}"), "wf", RunStatus::Succeeded, T0 + i);
                // Only the 5 oldest are dry runs of the API.
                if i < 5 {
                    r.mode = Mode::Dry;
                    r.trigger = Trigger::Api;
                }
                r
            })
            .collect();
        for chunk in runs.chunks(1_000) {
            let writes: Vec<BatchWrite> = chunk.iter().cloned().map(BatchWrite::PutRun).collect();
            assert!(batch(store, writes).await.iter().all(|o| o.is_ok()));
        }
        let q = RunQuery {
            mode: Some(Mode::Dry),
            trigger: Some(Trigger::Api),
            workflow: Some("wf".into()),
            limit: 3,
            ..Default::default()
        };
        let first = store.list_runs(&q).await.unwrap();
        if f.name != "memory" {
            assert!(
                first.runs.is_empty(),
                "{}: the budget ends the page",
                f.name
            );
            assert!(first.next_cursor.is_some(), "{}: ...with a cursor", f.name);
        }
        let mut q2 = q.clone();
        let mut got = Vec::new();
        loop {
            let p = store.list_runs(&q2).await.unwrap();
            assert!(p.runs.len() <= 3);
            got.extend(ids(&p.runs));
            match p.next_cursor {
                Some(c) => q2.cursor = Some(c),
                None => break,
            }
        }
        assert_eq!(got, expected(&runs, &q));
        assert_eq!(got.len(), 5);
    }

    // --- Count aggregates ----------------------------------------------------------------

    /// The counts equal a brute-force count of the stored runs after inserts, status changes
    /// (which move one count each), rewrites that change nothing, and retention deletes.
    pub async fn counts_equal_a_brute_force_count(f: &Fixture) {
        let store = &*f.store;
        let n = 400;
        for i in 0..n {
            store.put_run(&count_run(i)).await.unwrap();
        }
        let ids: Vec<String> = (0..n).map(|i| format!("c{i:04}")).collect();
        assert_counts(store, &stored(store, ids.clone()).await, "after inserts").await;

        // Status changes: queued -> running -> succeeded or failed, with durations that move
        // between histogram bins; a rewrite of an unchanged run.
        for i in (0..n).filter(|i| i % 6 < 2) {
            let mut r = count_run(i);
            r.status = RunStatus::Running;
            r.finished_at = None;
            r.duration_ms = None;
            store.put_run(&r).await.unwrap();
            r.status = if i % 4 == 1 {
                RunStatus::Failed
            } else {
                RunStatus::Succeeded
            };
            r.finished_at = Some(Timestamp(r.created_at.0 + 300 + i));
            r.duration_ms = Some((300 + i) as u64);
            // The steps' durations move between bins too; one more step ran.
            for s in &mut r.steps {
                s.duration_ms += 1_000;
            }
            r.steps.push(step("undo", StepStatus::Succeeded, i as u64));
            if r.status == RunStatus::Failed {
                r.error = Some(fluxo::run::ErrorInfo {
                    code: "template_error".into(),
                    message: "bad".into(),
                    step: format!("step{}", i % 2),
                    attempts: 1,
                    http_status: None,
                });
            }
            store.put_run(&r).await.unwrap();
            store.put_run(&r).await.unwrap();
        }
        assert_counts(
            store,
            &stored(store, ids.clone()).await,
            "after status changes",
        )
        .await;

        // Retention removes finished runs (by count, then by age).
        let by_count = Retention {
            max_runs_per_workflow: Some(50),
            max_age_ms: None,
        };
        assert!(store.prune_runs(&by_count, T0 + 3 * DAY).await.unwrap() > 0);
        let left = stored(store, ids.clone()).await;
        assert!(left.len() < n as usize);
        assert_counts(store, &left, "after retention by count").await;
        let by_age = Retention {
            max_runs_per_workflow: None,
            max_age_ms: Some(DAY),
        };
        store.prune_runs(&by_age, T0 + 2 * DAY).await.unwrap();
        assert_counts(store, &stored(store, ids).await, "after retention by age").await;
    }

    /// Step durations: counted per step of the named workflow once its run has finished,
    /// without the steps a resume reused or a step still running, following the other
    /// filters, and taken back by retention.
    pub async fn counts_per_step_of_one_workflow(f: &Fixture) {
        let store = &*f.store;
        let with_steps = |id: &str, created: i64, steps: Vec<StepRecord>| {
            let mut r = run(id, "wf-s", RunStatus::Succeeded, created);
            r.finished_at = Some(Timestamp(created + 5_000));
            r.steps = steps;
            r
        };
        let ok = StepStatus::Succeeded;
        store
            .put_run(&with_steps(
                "s1",
                T0 + 10,
                vec![step("hook", ok, 1), step("call", ok, 10)],
            ))
            .await
            .unwrap();
        store
            .put_run(&with_steps(
                "s2",
                T0 + DAY + 3 * HOUR + 20,
                vec![step("hook", ok, 2), step("call", ok, 2_000)],
            ))
            .await
            .unwrap();
        // A resume: its `call` reused from s1 is not counted again; `undo` failed.
        let mut reused = step("call", ok, 10);
        reused.reused_from = Some("s1".into());
        store
            .put_run(&with_steps(
                "s3",
                T0 + 2 * DAY + 30,
                vec![reused, step("undo", StepStatus::Failed, 7)],
            ))
            .await
            .unwrap();
        // Still running: nothing counted yet.
        let mut running = with_steps("s4", T0 + 40, vec![step("hook", ok, 3)]);
        running.status = RunStatus::Running;
        running.finished_at = None;
        running.duration_ms = None;
        store.put_run(&running).await.unwrap();
        // Another workflow's steps.
        let mut other = with_steps("o1", T0 + 50, vec![step("hook", ok, 99)]);
        other.workflow_id = "wf-o".into();
        store.put_run(&other).await.unwrap();

        let count = |workflow: Option<&str>, since: i64, until: i64, bucket_ms: i64| CountQuery {
            filter: CountFilter {
                workflow: workflow.map(str::to_string),
                ..Default::default()
            },
            since,
            until,
            bucket_ms,
        };
        for bucket_ms in [0, HOUR, 3 * HOUR, DAY] {
            let c = store
                .count_runs(&count(Some("wf-s"), T0 - 17, T0 + 3 * DAY + 5, bucket_ms))
                .await
                .unwrap();
            let got: BTreeMap<&str, (u64, Option<u64>, Option<u64>)> = c
                .steps
                .iter()
                .map(|(k, h)| {
                    (
                        k.as_str(),
                        (h.count(), h.percentile(50.0), h.percentile(99.0)),
                    )
                })
                .collect();
            let want = BTreeMap::from([
                ("hook", (2, Some(1), Some(2))),
                // 2,000 ms is reported as the middle of its bin (within 0.4%).
                ("call", (2, Some(10), Some(2_003))),
                ("undo", (1, Some(7), Some(7))),
            ]);
            assert_eq!(got, want, "{} bars of {bucket_ms} ms", f.name);
        }
        // Without a workflow: no steps. Another workflow: its own.
        let all = store
            .count_runs(&count(None, T0 - 17, T0 + 3 * DAY, 3 * HOUR))
            .await
            .unwrap();
        assert!(all.steps.is_empty());
        let o = store
            .count_runs(&count(Some("wf-o"), T0, T0 + DAY, HOUR))
            .await
            .unwrap();
        assert_eq!(o.steps.keys().collect::<Vec<_>>(), vec!["hook"]);
        // A range with only s2 (off the unit boundaries); then the status filter.
        let two = store
            .count_runs(&count(
                Some("wf-s"),
                T0 + DAY + 3 * HOUR + 19,
                T0 + DAY + 3 * HOUR + 21,
                0,
            ))
            .await
            .unwrap();
        assert_eq!(two.steps["call"].count(), 1);
        let mut failed = count(Some("wf-s"), T0, T0 + 3 * DAY, HOUR);
        failed.filter.status = Some(RunStatus::Failed);
        assert!(store.count_runs(&failed).await.unwrap().steps.is_empty());

        // The running run finishes; retention then keeps the newest finished run of each
        // workflow only (s3, finished last of wf-s, and o1).
        running.status = RunStatus::Succeeded;
        running.finished_at = Some(Timestamp(T0 + 41));
        running.duration_ms = Some(1);
        store.put_run(&running).await.unwrap();
        let c = store
            .count_runs(&count(Some("wf-s"), T0, T0 + 3 * DAY, 0))
            .await
            .unwrap();
        assert_eq!(c.steps["hook"].count(), 3);
        let keep_one = Retention {
            max_runs_per_workflow: Some(1),
            max_age_ms: None,
        };
        assert_eq!(store.prune_runs(&keep_one, T0 + 4 * DAY).await.unwrap(), 3);
        let c = store
            .count_runs(&count(Some("wf-s"), T0, T0 + 3 * DAY, HOUR))
            .await
            .unwrap();
        assert_eq!(c.steps.keys().collect::<Vec<_>>(), vec!["undo"]);
        assert_eq!(c.steps["undo"].count(), 1);
    }

    /// Runs queued by webhook claims, written in batches (the group commit's path), and
    /// removed by a released claim are counted like any other.
    pub async fn counts_follow_claims_batches_and_releases(f: &Fixture) {
        let store = &*f.store;
        let mut writes = Vec::new();
        for i in 0..60 {
            let mut r = count_run(i);
            r.status = RunStatus::Queued;
            r.finished_at = None;
            r.duration_ms = None;
            r.error = None;
            if i % 2 == 0 {
                let c = claim(&r.workflow_id, &format!("k{i}"), &r.id, T0, HOUR);
                writes.push(BatchWrite::ClaimAndEnqueue { claim: c, run: r });
            } else {
                writes.push(BatchWrite::PutRun(r));
            }
        }
        // A second delivery of key k0 in the same batch: a duplicate, which counts nothing
        // (the batch's count changes are summed and written once, at its end).
        let mut again = count_run(0);
        again.id = "dup-of-k0".into();
        again.status = RunStatus::Queued;
        again.finished_at = None;
        again.duration_ms = None;
        let c = claim(&again.workflow_id, "k0", &again.id, T0, HOUR);
        writes.push(BatchWrite::ClaimAndEnqueue {
            claim: c,
            run: again,
        });
        let out = batch(store, writes).await;
        assert!(
            matches!(
                out.last(),
                Some(Ok(BatchOutcome::Claim(ClaimOutcome::Duplicate { run_id }))) if run_id == "c0000"
            ),
            "the batch's second k0 is a duplicate: {:?}",
            out.last()
        );
        for r in out {
            r.unwrap();
        }
        assert_eq!(store.get_run("dup-of-k0").await.unwrap(), None);
        let ids: Vec<String> = (0..60).map(|i| format!("c{i:04}")).collect();
        assert_counts(store, &stored(store, ids.clone()).await, "after a batch").await;
        // Finish some in a second batch, the same run twice in it.
        let mut writes = Vec::new();
        for i in (0..60).filter(|i| i % 3 == 1) {
            let mut r = count_run(i);
            r.status = RunStatus::Running;
            r.finished_at = None;
            r.duration_ms = None;
            r.error = None;
            writes.push(BatchWrite::PutRun(r));
            writes.push(BatchWrite::PutRun(count_run(i)));
        }
        for r in batch(store, writes).await {
            r.unwrap();
        }
        for i in [0, 2, 6] {
            let r = count_run(i);
            assert!(store
                .release_claim(&r.workflow_id, &format!("k{i}"), &r.id)
                .await
                .unwrap());
        }
        let left = stored(store, ids).await;
        assert_eq!(left.len(), 57);
        assert_counts(store, &left, "after batches and releases").await;
    }

    // --- Retention -----------------------------------------------------------------------

    pub async fn retention_by_count_keeps_newest_finished_per_workflow(f: &Fixture) {
        let store = &*f.store;
        // Created order differs from finish order on purpose: retention goes by finish time.
        for r in [
            finished("a1", "a", T0, T0 + 500),
            finished("a2", "a", T0 + 1, T0 + 100),
            finished("a3", "a", T0 + 2, T0 + 300),
            finished("a4", "a", T0 + 3, T0 + 200),
            run("aq", "a", RunStatus::Queued, T0 - 10),
            run("ar", "a", RunStatus::Running, T0 - 9),
            finished("b1", "b", T0, T0 + 1),
            finished("b2", "b", T0, T0 + 2),
        ] {
            store.put_run(&r).await.unwrap();
        }
        let mut failed = run("a5", "a", RunStatus::Failed, T0 + 4);
        failed.finished_at = Some(Timestamp(T0 + 400));
        store.put_run(&failed).await.unwrap();
        let policy = Retention {
            max_runs_per_workflow: Some(2),
            max_age_ms: None,
        };
        assert_eq!(store.prune_runs(&policy, T0 + DAY).await.unwrap(), 3);
        assert_eq!(remaining(store, "a").await, set(&["a1", "a5", "aq", "ar"]));
        assert_eq!(remaining(store, "b").await, set(&["b1", "b2"]));
        for gone in ["a2", "a3", "a4"] {
            assert_eq!(store.get_run(gone).await.unwrap(), None);
        }
        let succeeded = store
            .run_ids_with_status(RunStatus::Succeeded)
            .await
            .unwrap();
        assert_eq!(succeeded, ["a1", "b1", "b2"], "same created_at: id order");
        let kept = store
            .count_runs(&CountQuery {
                filter: CountFilter {
                    workflow: Some("a".into()),
                    ..Default::default()
                },
                since: T0 - DAY,
                until: T0 + DAY,
                bucket_ms: DAY,
            })
            .await
            .unwrap();
        assert_eq!(kept.total(), 4, "the counts follow retention");
        assert_eq!(
            store.prune_runs(&policy, T0 + DAY).await.unwrap(),
            0,
            "idempotent"
        );
        // Ties in finish time: the higher id is newer.
        for id in ["t1", "t3", "t2"] {
            store.put_run(&finished(id, "t", T0, T0 + 7)).await.unwrap();
        }
        let one = Retention {
            max_runs_per_workflow: Some(1),
            max_age_ms: None,
        };
        store.prune_runs(&one, T0 + DAY).await.unwrap();
        assert_eq!(remaining(store, "t").await, set(&["t3"]));
        // A final run without finished_at counts as finished at created_at.
        let mut nofinish = run("n1", "n", RunStatus::Interrupted, T0 + 50);
        nofinish.finished_at = None;
        store.put_run(&nofinish).await.unwrap();
        store
            .put_run(&finished("n2", "n", T0, T0 + 40))
            .await
            .unwrap();
        store.prune_runs(&one, T0 + DAY).await.unwrap();
        assert_eq!(remaining(store, "n").await, set(&["n1"]));
        // Zero keeps no finished run, still never a queued or running one.
        let none = Retention {
            max_runs_per_workflow: Some(0),
            max_age_ms: None,
        };
        // Left finished: a1 (a), b2 (b), t3 (t), n1 (n).
        assert_eq!(store.prune_runs(&none, T0 + DAY).await.unwrap(), 4);
        assert_eq!(remaining(store, "a").await, set(&["aq", "ar"]));
        assert_eq!(remaining(store, "b").await, set(&[]));
    }

    pub async fn retention_by_age_and_both_limits(f: &Fixture) {
        let store = &*f.store;
        let now = T0 + 30 * DAY;
        for r in [
            finished("old", "w", T0, T0 + DAY),
            finished("edge", "w", T0, now - 7 * DAY),
            finished("new1", "w", T0, now - DAY),
            finished("new2", "w", T0, now - HOUR),
            run("stuck", "w", RunStatus::Running, T0 - DAY),
            run("waiting", "w", RunStatus::Queued, T0 - DAY),
        ] {
            store.put_run(&r).await.unwrap();
        }
        let age = Retention {
            max_runs_per_workflow: None,
            max_age_ms: Some(7 * DAY),
        };
        assert_eq!(store.prune_runs(&age, now).await.unwrap(), 1);
        assert_eq!(
            remaining(store, "w").await,
            set(&["edge", "new1", "new2", "stuck", "waiting"]),
            "a run finished exactly max_age ago is kept"
        );
        let both = Retention {
            max_runs_per_workflow: Some(1),
            max_age_ms: Some(7 * DAY),
        };
        assert_eq!(store.prune_runs(&both, now).await.unwrap(), 2);
        assert_eq!(
            remaining(store, "w").await,
            set(&["new2", "stuck", "waiting"])
        );
        let nothing = Retention {
            max_runs_per_workflow: None,
            max_age_ms: None,
        };
        assert_eq!(
            store.prune_runs(&nothing, now + 1000 * DAY).await.unwrap(),
            0
        );
        let everything = Retention {
            max_runs_per_workflow: None,
            max_age_ms: Some(0),
        };
        assert_eq!(store.prune_runs(&everything, i64::MAX).await.unwrap(), 1);
        assert_eq!(remaining(store, "w").await, set(&["stuck", "waiting"]));
    }

    pub async fn retention_over_many_batches(f: &Fixture) {
        let store = &*f.store;
        let runs: Vec<RunRecord> = (0..2_500i64)
            .map(|i| {
                let wf = if i % 7 == 0 { "small" } else { "big" };
                finished(&format!("r{i:04}"), wf, T0 + i, T0 + 10 * i)
            })
            .collect();
        for chunk in runs.chunks(250) {
            let writes: Vec<BatchWrite> = chunk.iter().cloned().map(BatchWrite::PutRun).collect();
            assert!(batch(store, writes).await.iter().all(|o| o.is_ok()));
        }
        let policy = Retention {
            max_runs_per_workflow: Some(5),
            max_age_ms: None,
        };
        assert_eq!(store.prune_runs(&policy, T0).await.unwrap(), 2_500 - 10);
        let big: BTreeSet<String> = (0..2_500)
            .rev()
            .filter(|i| i % 7 != 0)
            .take(5)
            .map(|i| format!("r{i:04}"))
            .collect();
        assert_eq!(remaining(store, "big").await, big);
        assert_eq!(remaining(store, "small").await.len(), 5);
    }

    // --- Webhook claims ------------------------------------------------------------------

    pub async fn claims_duplicate_within_window_claimable_after(f: &Fixture) {
        let store = &*f.store;
        let first = run("run-1", "hooks", RunStatus::Queued, T0);
        let c1 = claim("hooks", "evt_1", "run-1", T0, DAY);
        assert_eq!(
            store.claim_and_enqueue(&c1, &first, T0).await.unwrap(),
            ClaimOutcome::Claimed
        );
        assert_eq!(store.get_run("run-1").await.unwrap(), Some(first.clone()));
        assert_eq!(
            store.run_ids_with_status(RunStatus::Queued).await.unwrap(),
            ["run-1"]
        );
        assert_eq!(
            store.get_claim("hooks", "evt_1", T0).await.unwrap(),
            Some(c1.clone())
        );
        // The first run finishes; a failed run still counts for the window.
        let mut done = first.clone();
        done.status = RunStatus::Failed;
        store.put_run(&done).await.unwrap();
        let at = T0 + DAY - 1;
        let second = run("run-2", "hooks", RunStatus::Queued, at);
        assert_eq!(
            store
                .claim_and_enqueue(&claim("hooks", "evt_1", "run-2", at, DAY), &second, at)
                .await
                .unwrap(),
            ClaimOutcome::Duplicate {
                run_id: "run-1".into()
            }
        );
        assert_eq!(
            store.get_run("run-2").await.unwrap(),
            None,
            "nothing written"
        );
        assert_eq!(
            store.get_claim("hooks", "evt_1", at).await.unwrap(),
            Some(c1.clone())
        );
        assert!(store
            .run_ids_with_status(RunStatus::Queued)
            .await
            .unwrap()
            .is_empty());
        // Other workflow, same key: independent.
        let other = run("run-x", "hooks2", RunStatus::Queued, at);
        assert_eq!(
            store
                .claim_and_enqueue(&claim("hooks2", "evt_1", "run-x", at, DAY), &other, at)
                .await
                .unwrap(),
            ClaimOutcome::Claimed
        );
        // Exactly at the window's end the key is free again.
        let at = T0 + DAY;
        assert_eq!(store.get_claim("hooks", "evt_1", at).await.unwrap(), None);
        assert_eq!(
            store.get_claim("hooks", "evt_1", at - 1).await.unwrap(),
            Some(c1.clone())
        );
        let third = run("run-3", "hooks", RunStatus::Queued, at);
        let c3 = claim("hooks", "evt_1", "run-3", at, DAY);
        assert_eq!(
            store.claim_and_enqueue(&c3, &third, at).await.unwrap(),
            ClaimOutcome::Claimed
        );
        assert_eq!(
            store.get_claim("hooks", "evt_1", at).await.unwrap(),
            Some(c3)
        );
        assert_eq!(store.get_run("run-3").await.unwrap(), Some(third));
        // A claim that does not name its run is a caller bug: an error, nothing written.
        let r = run("run-4", "hooks", RunStatus::Queued, at);
        assert!(store
            .claim_and_enqueue(&claim("hooks", "evt_9", "run-5", at, DAY), &r, at)
            .await
            .is_err());
        assert_eq!(store.get_claim("hooks", "evt_9", at).await.unwrap(), None);
        assert_eq!(store.get_run("run-4").await.unwrap(), None);
    }

    /// 64 concurrent deliveries of one key (through two handles where the backend has them):
    /// one run, every duplicate names it.
    pub async fn claims_sixty_four_concurrent_deliveries_one_run(f: &Fixture) {
        const N: usize = 64;
        let barrier = Arc::new(Barrier::new(N));
        let tasks: Vec<_> = (0..N)
            .map(|i| {
                let store = if i % 2 == 0 {
                    f.store.clone()
                } else {
                    f.peer.clone()
                };
                let barrier = barrier.clone();
                tokio::spawn(async move {
                    let id = format!("run-{i:02}");
                    let r = run(&id, "w", RunStatus::Queued, T0);
                    barrier.wait().await;
                    let o = store
                        .claim_and_enqueue(&claim("w", "same", &id, T0, DAY), &r, T0)
                        .await
                        .unwrap();
                    (id, o)
                })
            })
            .collect();
        let mut outcomes = Vec::new();
        for t in tasks {
            outcomes.push(t.await.unwrap());
        }
        let winners: Vec<&String> = outcomes
            .iter()
            .filter(|(_, o)| *o == ClaimOutcome::Claimed)
            .map(|(id, _)| id)
            .collect();
        assert_eq!(winners.len(), 1);
        let winner = winners[0].clone();
        for (_, o) in &outcomes {
            if let ClaimOutcome::Duplicate { run_id } = o {
                assert_eq!(*run_id, winner);
            }
        }
        assert_eq!(
            f.store
                .run_ids_with_status(RunStatus::Queued)
                .await
                .unwrap(),
            [winner],
            "exactly one queued run"
        );
    }

    pub async fn claims_release(f: &Fixture) {
        let store = &*f.store;
        let r1 = run("r1", "w", RunStatus::Queued, T0);
        store
            .claim_and_enqueue(&claim("w", "k", "r1", T0, DAY), &r1, T0)
            .await
            .unwrap();
        assert!(
            !store.release_claim("w", "k", "other-run").await.unwrap(),
            "names another run"
        );
        assert!(store.get_claim("w", "k", T0).await.unwrap().is_some());
        assert!(store.release_claim("w", "k", "r1").await.unwrap());
        assert_eq!(store.get_claim("w", "k", T0).await.unwrap(), None);
        assert_eq!(
            store.get_run("r1").await.unwrap(),
            None,
            "its queued run went too"
        );
        assert!(
            !store.release_claim("w", "k", "r1").await.unwrap(),
            "already released"
        );
        // The key is free again; a run that already started stays when its claim is released.
        let r2 = run("r2", "w", RunStatus::Queued, T0 + 1);
        assert_eq!(
            store
                .claim_and_enqueue(&claim("w", "k", "r2", T0 + 1, DAY), &r2, T0 + 1)
                .await
                .unwrap(),
            ClaimOutcome::Claimed
        );
        let mut started = r2.clone();
        started.status = RunStatus::Running;
        store.put_run(&started).await.unwrap();
        assert!(store.release_claim("w", "k", "r2").await.unwrap());
        assert_eq!(store.get_run("r2").await.unwrap(), Some(started));
    }

    pub async fn batch_applies_in_order_and_fails_only_its_bad_writes(f: &Fixture) {
        let store = &*f.store;
        let (r1, r2, r3) = (
            run("run-1", "w", RunStatus::Queued, T0),
            run("run-2", "w", RunStatus::Queued, T0),
            run("run-3", "w", RunStatus::Queued, T0),
        );
        let (c1, c2) = (
            claim("w", "evt_1", "run-1", T0, DAY),
            claim("w", "evt_1", "run-2", T0, DAY),
        );
        let bad = claim("w", "evt_2", "run-9", T0, DAY);
        let bad_run = run("run-bad", "w\0", RunStatus::Queued, T0);
        let mut started = r3.clone();
        started.status = RunStatus::Running;
        let out = batch(
            store,
            vec![
                BatchWrite::ClaimAndEnqueue {
                    claim: c1.clone(),
                    run: r1,
                },
                // Same key later in the same batch: a duplicate of the first.
                BatchWrite::ClaimAndEnqueue { claim: c2, run: r2 },
                // A claim not naming its run fails alone.
                BatchWrite::ClaimAndEnqueue {
                    claim: bad,
                    run: r3.clone(),
                },
                BatchWrite::PutRun(bad_run),
                BatchWrite::PutRun(r3),
                // A later write of the same run wins, with its indexes.
                BatchWrite::PutRun(started.clone()),
            ],
        )
        .await;
        assert_eq!(out.len(), 6);
        assert_eq!(
            out[0].as_ref().unwrap(),
            &BatchOutcome::Claim(ClaimOutcome::Claimed)
        );
        assert_eq!(
            out[1].as_ref().unwrap(),
            &BatchOutcome::Claim(ClaimOutcome::Duplicate {
                run_id: "run-1".into()
            })
        );
        assert!(out[2].is_err());
        assert!(
            matches!(out[3], Err(StoreError::Invalid(_))),
            "{:?}",
            out[3]
        );
        assert_eq!(out[4].as_ref().unwrap(), &BatchOutcome::Put);
        assert_eq!(out[5].as_ref().unwrap(), &BatchOutcome::Put);
        store.flush().await.unwrap();
        assert_eq!(
            store.get_claim("w", "evt_1", T0).await.unwrap(),
            Some(c1.clone())
        );
        assert_eq!(store.get_claim("w", "evt_2", T0).await.unwrap(), None);
        assert_eq!(store.get_run("run-2").await.unwrap(), None);
        assert_eq!(store.get_run("run-3").await.unwrap(), Some(started.clone()));
        assert_eq!(
            store.run_ids_with_status(RunStatus::Queued).await.unwrap(),
            ["run-1"]
        );
        assert_eq!(
            store.run_ids_with_status(RunStatus::Running).await.unwrap(),
            ["run-3"]
        );
        assert!(store.write_batch(Vec::new()).await.is_empty());
    }

    /// Two handles (two processes, for PostgreSQL) batch claims of the same keys in opposite
    /// orders at once: every write is answered (a deadlock between the two transactions is
    /// retried, not reported), and each key has exactly one winner.
    pub async fn batches_claiming_in_opposite_orders_all_answer(f: &Fixture) {
        const KEYS: usize = 40;
        for round in 0..10 {
            let barrier = Arc::new(Barrier::new(2));
            let tasks: Vec<_> = [(f.store.clone(), "a"), (f.peer.clone(), "b")]
                .into_iter()
                .map(|(store, side)| {
                    let barrier = barrier.clone();
                    tokio::spawn(async move {
                        let mut keys: Vec<usize> = (0..KEYS).collect();
                        if side == "b" {
                            keys.reverse();
                        }
                        let items: Vec<(WebhookClaim, RunRecord)> = keys
                            .iter()
                            .map(|k| {
                                let id = format!("run-{round}-{k}-{side}");
                                let key = format!("evt-{round}-{k}");
                                (
                                    claim("w", &key, &id, T0, DAY),
                                    run(&id, "w", RunStatus::Queued, T0),
                                )
                            })
                            .collect();
                        let writes: Vec<BatchWrite> = items
                            .into_iter()
                            .map(|(claim, run)| BatchWrite::ClaimAndEnqueue { claim, run })
                            .collect();
                        barrier.wait().await;
                        let out = batch(&*store, writes).await;
                        keys.into_iter()
                            .zip(out)
                            .map(|(k, o)| (k, o.expect("every write answered")))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            let mut wins = vec![0; KEYS];
            for t in tasks {
                for (k, o) in t.await.unwrap() {
                    if o == BatchOutcome::Claim(ClaimOutcome::Claimed) {
                        wins[k] += 1;
                    }
                }
            }
            assert_eq!(wins, vec![1; KEYS], "round {round}: one winner per key");
        }
        let queued = f
            .store
            .run_ids_with_status(RunStatus::Queued)
            .await
            .unwrap();
        assert_eq!(queued.len(), 10 * KEYS);
    }

    /// Many concurrent callers through group commits (one per handle: two processes, for
    /// PostgreSQL): one claim per key wins, every duplicate names the winner, exactly the
    /// winners are stored, and `put_run` hands the record back.
    pub async fn group_commit_batches_concurrent_claims_and_puts(f: &Fixture) {
        let commits = [
            GroupCommit::start(f.store.clone()),
            GroupCommit::start(f.peer.clone()),
        ];
        // 200 deliveries over 50 keys, all at once.
        let tasks: Vec<_> = (0..200)
            .map(|i| {
                let commit = commits[i % 2].clone();
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
        let first = winners["evt_0"].clone();
        let mut r = run(&first, "w", RunStatus::Running, T0);
        r.input = json!({"marker": 1}).into();
        assert_eq!(commits[1].put_run(r.clone()).await.unwrap(), r);
        commits[0].durable().await.unwrap();
        let mut stored: BTreeSet<String> = f
            .store
            .run_ids_with_status(RunStatus::Queued)
            .await
            .unwrap()
            .into_iter()
            .collect();
        stored.extend(
            f.store
                .run_ids_with_status(RunStatus::Running)
                .await
                .unwrap(),
        );
        let expected: BTreeSet<String> = winners.values().cloned().collect();
        assert_eq!(stored, expected, "exactly the winners are stored");
        assert_eq!(f.store.get_run(&first).await.unwrap(), Some(r));
    }

    /// [`sweep_once`] empties every kind of due record in one pass, more than one batch of
    /// them, and leaves live ones.
    pub async fn sweep_once_removes_every_due_record(f: &Fixture) {
        let store = &*f.store;
        for i in 0..1_500u64 {
            store
                .write(
                    "s",
                    &format!("k{i:05}"),
                    &json!(i),
                    opts(true, Some(10 + i % 7)),
                    T0,
                )
                .await
                .unwrap();
        }
        store
            .write("s", "live", &json!(0), opts(true, Some(DAY as u64)), T0)
            .await
            .unwrap();
        for i in 0..3i64 {
            let id = format!("r{i}");
            store
                .claim_and_enqueue(
                    &claim("w", &format!("k{i}"), &id, T0, 100),
                    &run(&id, "w", RunStatus::Queued, T0),
                    T0,
                )
                .await
                .unwrap();
        }
        let mut rec = api_record("fp", "o", T0, 10);
        rec.expires_at = T0 + 100;
        store.api_begin(&rec, T0).await.unwrap();
        let report = sweep_once(store, T0 + 1_000).await.unwrap();
        assert_eq!(
            report,
            SweepReport {
                memory: 1_500,
                idempotency: 4
            }
        );
        assert_eq!(
            sweep_once(store, T0 + 1_000).await.unwrap(),
            SweepReport::default()
        );
        assert!(store.read("s", "live", T0 + 1_000).await.unwrap().is_some());
        assert_eq!(
            store.list("s", "", None, 10, 0).await.unwrap().len(),
            1,
            "only `live` is stored"
        );
        assert_eq!(
            store
                .run_ids_with_status(RunStatus::Queued)
                .await
                .unwrap()
                .len(),
            3
        );
    }

    // --- API idempotency records ---------------------------------------------------------

    pub async fn api_begin_every_branch(f: &Fixture) {
        let store = &*f.store;
        let lease = 80_000;
        assert_eq!(
            store
                .api_begin(&api_record("fp-a", "w1", T0, lease), T0)
                .await
                .unwrap(),
            ApiBegin::Started
        );
        let t = T0 + 1_000;
        assert_eq!(
            store
                .api_begin(&api_record("fp-a", "w2", t, lease), t)
                .await
                .unwrap(),
            ApiBegin::InProgress
        );
        assert_eq!(
            store
                .api_begin(&api_record("fp-b", "w2", t, lease), t)
                .await
                .unwrap(),
            ApiBegin::Conflict
        );
        let body = "{\"id\":\"run-1\",\n \"status\": \"succeeded\", \"nul\": \"\\u0000\u{0}\"}";
        store
            .api_complete("tok-hash", "req-1", 200, body)
            .await
            .unwrap();
        assert_eq!(
            store
                .api_begin(&api_record("fp-a", "w2", t, lease), t)
                .await
                .unwrap(),
            ApiBegin::Replay {
                status: 200,
                body: body.into()
            },
            "the answer is replayed byte for byte"
        );
        assert_eq!(
            store
                .api_begin(&api_record("fp-b", "w2", t, lease), t)
                .await
                .unwrap(),
            ApiBegin::Conflict
        );
        // Another scope (token) is another key space.
        let mut other = api_record("fp-b", "w2", t, lease);
        other.scope = "other-token".into();
        assert_eq!(store.api_begin(&other, t).await.unwrap(), ApiBegin::Started);
        // Abandon leaves a finished record alone.
        store.api_abandon("tok-hash", "req-1").await.unwrap();
        assert!(matches!(
            store
                .api_begin(&api_record("fp-a", "w2", t, lease), t)
                .await
                .unwrap(),
            ApiBegin::Replay { .. }
        ));
        // At its expiry the record is gone (whatever its state or fingerprint).
        let later = T0 + DAY;
        assert_eq!(
            store
                .api_begin(&api_record("fp-b", "w3", later, lease), later)
                .await
                .unwrap(),
            ApiBegin::Started
        );
        assert_eq!(
            store
                .api_begin(&api_record("fp-b", "w4", later + 1, lease), later + 1)
                .await
                .unwrap(),
            ApiBegin::InProgress
        );
        // Completing or abandoning an unknown key is a no-op.
        store
            .api_complete("tok-hash", "nope", 200, "{}")
            .await
            .unwrap();
        store.api_abandon("tok-hash", "nope").await.unwrap();
        assert_eq!(
            store
                .api_begin(
                    &ApiRecord {
                        key: "nope".into(),
                        ..api_record("x", "o", t, 1)
                    },
                    t
                )
                .await
                .unwrap(),
            ApiBegin::Started
        );
    }

    pub async fn api_lease_takeover_and_abandon(f: &Fixture) {
        let store = &*f.store;
        let lease = 80_000;
        store
            .api_begin(&api_record("fp", "dead", T0, lease), T0)
            .await
            .unwrap();
        let t = T0 + lease - 1;
        assert_eq!(
            store
                .api_begin(&api_record("fp", "w2", t, lease), t)
                .await
                .unwrap(),
            ApiBegin::InProgress
        );
        let t = T0 + lease;
        assert_eq!(
            store
                .api_begin(&api_record("fp", "w2", t, lease), t)
                .await
                .unwrap(),
            ApiBegin::Started,
            "the dead owner's lease is taken over"
        );
        assert_eq!(
            store
                .api_begin(&api_record("fp-other", "w3", t, lease), t)
                .await
                .unwrap(),
            ApiBegin::Conflict,
            "another request under the key is still a conflict"
        );
        assert_eq!(
            store
                .api_begin(&api_record("fp", "w3", t + 1, lease), t + 1)
                .await
                .unwrap(),
            ApiBegin::InProgress,
            "the new owner holds a fresh lease"
        );
        store.api_abandon("tok-hash", "req-1").await.unwrap();
        assert_eq!(
            store
                .api_begin(&api_record("fp-new", "w3", t + 2, lease), t + 2)
                .await
                .unwrap(),
            ApiBegin::Started,
            "an abandoned request frees its key"
        );
    }

    pub async fn sweep_idempotency_bounded_claims_first(f: &Fixture) {
        let store = &*f.store;
        for i in 0..5i64 {
            let id = format!("r{i}");
            let at = T0 + i * 1_000;
            store
                .claim_and_enqueue(
                    &claim("w", &format!("k{i}"), &id, at, 10_000),
                    &run(&id, "w", RunStatus::Queued, at),
                    at,
                )
                .await
                .unwrap();
        }
        let mut rec = api_record("fp", "o", T0, 1_000);
        rec.expires_at = T0 + 12_000;
        store.api_begin(&rec, T0).await.unwrap();
        assert_eq!(store.sweep_idempotency(T0 + 9_999, 100).await.unwrap(), 0);
        // Due at T0 + 12,000: claims k0, k1, k2 and the API record; claims go first.
        assert_eq!(
            store.sweep_idempotency(T0 + 12_000, 2).await.unwrap(),
            2,
            "max"
        );
        assert_eq!(store.sweep_idempotency(T0 + 12_000, 1).await.unwrap(), 1);
        assert_eq!(
            store
                .api_begin(&api_record("fp-b", "o", T0 + 11_000, 1), T0 + 11_000)
                .await
                .unwrap(),
            ApiBegin::Conflict,
            "the API record is still there: claims were swept first"
        );
        assert_eq!(store.sweep_idempotency(T0 + 12_000, 100).await.unwrap(), 1);
        assert!(store
            .get_claim("w", "k3", T0 + 12_000)
            .await
            .unwrap()
            .is_some());
        assert_eq!(store.sweep_idempotency(T0 + 20_000, 100).await.unwrap(), 2);
        assert_eq!(store.sweep_idempotency(T0 + 20_000, 100).await.unwrap(), 0);
        // Runs are not touched by the sweep.
        assert_eq!(
            store
                .run_ids_with_status(RunStatus::Queued)
                .await
                .unwrap()
                .len(),
            5
        );
        // A swept claim's key is free again.
        let r = run("again", "w", RunStatus::Queued, T0 + 20_000);
        assert_eq!(
            store
                .claim_and_enqueue(&claim("w", "k0", "again", T0 + 20_000, 10), &r, T0 + 20_000)
                .await
                .unwrap(),
            ClaimOutcome::Claimed
        );
    }
}
