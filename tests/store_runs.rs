//! Run history, webhook claims and API idempotency records on both backends (SPEC §4-5).
//!
//! Every case is a function over `&dyn Store`, run once per backend. Time is passed
//! explicitly; nothing sleeps.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use fluxo::run::{new_run_id, Mode, RunRecord, RunStatus, Timestamp, Trigger};
use fluxo::store::{
    ApiBegin, ApiRecord, ApiRecordState, BatchOutcome, BatchWrite, ClaimOutcome, GroupCommit,
    IdempotencyStore, InMemoryStore, MemoryStore, Retention, RunQuery, RunStore, RunSummary,
    SledConfig, SledStore, Store, WebhookClaim,
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

/// Runs `case` on a fresh in-memory store and a fresh sled store.
async fn on_both<F, Fut>(case: F)
where
    F: Fn(Arc<dyn Store>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    case(Arc::new(InMemoryStore::new())).await;
    let dir = tempfile::tempdir().unwrap();
    let sled = SledStore::open(&sled_config(&dir)).unwrap();
    case(Arc::new(sled)).await;
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
        input: json!({"n": 1}),
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
    panic!("paging did not end");
}

// ---------------------------------------------------------------------------------------------
// Basic records and status transitions
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn put_get_roundtrip() {
    on_both(|store| async move {
        let store = &*store;
        let mut r = run("r1", "wf", RunStatus::Queued, T0);
        r.idempotency_key = Some("evt_1".into());
        r.input = json!({"b": 2, "a": [1, {"z": null}]});
        store.put_run(&r).await.unwrap();
        assert_eq!(store.get_run("r1").await.unwrap(), Some(r.clone()));
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
    })
    .await;
}

#[tokio::test]
async fn status_transitions_keep_indexes_right() {
    on_both(|store| async move {
        let store = &*store;
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
            let stats = store
                .run_stats(Some("wf"), T0, T0 + 10, HOUR)
                .await
                .unwrap();
            assert_eq!(stats.len(), 1);
            let mut counts = BTreeMap::new();
            counts.insert(next.as_str().to_string(), 1);
            counts.insert("queued".to_string(), 1);
            if next == RunStatus::Queued {
                counts.insert("queued".to_string(), 2);
            }
            assert_eq!(stats[0].counts, counts);
        }
    })
    .await;
}

#[tokio::test]
async fn run_ids_with_status_oldest_first() {
    on_both(|store| async move {
        let store = &*store;
        for (i, created) in [T0 + 5, T0 + 1, T0 + 3].into_iter().enumerate() {
            store
                .put_run(&run(&format!("r{i}"), "wf", RunStatus::Running, created))
                .await
                .unwrap();
        }
        assert_eq!(
            store.run_ids_with_status(RunStatus::Running).await.unwrap(),
            ["r1", "r2", "r0"]
        );
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Listing: every filter, cursor paging
// ---------------------------------------------------------------------------------------------

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

#[tokio::test]
async fn list_runs_every_filter_with_paging() {
    let runs = fixture_runs();
    let some_id = runs[17].id.clone();
    let queries: Vec<RunQuery> = vec![
        RunQuery::default(),
        RunQuery {
            workflow: Some("orders".into()),
            ..Default::default()
        },
        RunQuery {
            workflow: Some("ord".into()),
            ..Default::default()
        },
        RunQuery {
            workflow: Some("missing".into()),
            ..Default::default()
        },
        RunQuery {
            status: Some(RunStatus::Failed),
            ..Default::default()
        },
        RunQuery {
            workflow: Some("orders".into()),
            status: Some(RunStatus::Queued),
            ..Default::default()
        },
        RunQuery {
            mode: Some(Mode::Dry),
            ..Default::default()
        },
        RunQuery {
            trigger: Some(Trigger::Api),
            workflow: Some("invoices".into()),
            ..Default::default()
        },
        RunQuery {
            key: Some("evt_007".into()),
            ..Default::default()
        },
        RunQuery {
            key: Some("evt_007".into()),
            status: Some(RunStatus::Running),
            ..Default::default()
        },
        RunQuery {
            since: Some(T0 + 30 * 60_000),
            ..Default::default()
        },
        RunQuery {
            until: Some(T0 + 30 * 60_000),
            ..Default::default()
        },
        RunQuery {
            since: Some(T0 + 10 * 60_000),
            until: Some(T0 + 50 * 60_000),
            workflow: Some("orders".into()),
            status: Some(RunStatus::Succeeded),
            ..Default::default()
        },
        RunQuery {
            since: Some(T0 + 90 * 60_000),
            until: Some(T0 + 20 * 60_000),
            ..Default::default()
        },
        RunQuery {
            q: Some("evt_01".into()),
            ..Default::default()
        },
        RunQuery {
            q: Some("evt_".into()),
            workflow: Some("ord".into()),
            ..Default::default()
        },
        RunQuery {
            q: Some(some_id.clone()),
            ..Default::default()
        },
        RunQuery {
            q: Some(some_id[..8].to_string()),
            ..Default::default()
        },
        RunQuery {
            q: Some("nothing-matches".into()),
            ..Default::default()
        },
        RunQuery {
            mode: Some(Mode::Live),
            trigger: Some(Trigger::Webhook),
            status: Some(RunStatus::TimedOut),
            since: Some(T0 + 60_000),
            ..Default::default()
        },
    ];
    let (runs, queries) = (&runs, &queries);
    on_both(|store| async move {
        let store = &*store;
        for r in runs {
            store.put_run(r).await.unwrap();
        }
        for q in queries {
            let want = expected(&runs, q);
            for page in [1, 7, 50, 500] {
                let got = ids(&all_pages(store, q, page).await);
                assert_eq!(got, want, "query {q:?}, page size {page}");
            }
        }
        // Summaries carry the list fields.
        let first = store
            .list_runs(&RunQuery {
                limit: 1,
                ..Default::default()
            })
            .await
            .unwrap();
        let newest = runs.iter().max_by_key(|r| (r.created_at, &r.id)).unwrap();
        assert_eq!(first.runs, vec![RunSummary::from(newest)]);
    })
    .await;
}

#[tokio::test]
async fn paging_is_stable_while_new_runs_arrive() {
    on_both(|store| async move {
        let store = &*store;
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
        // Newer runs arrive between pages: they must not shift the next page.
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
        q.cursor = p1.next_cursor.clone();
        let p2 = store.list_runs(&q).await.unwrap();
        let mut seen: Vec<String> = ids(&p1.runs);
        seen.extend(ids(&p2.runs));
        let want: Vec<String> = (10..30).rev().map(|i| format!("r{i:02}")).collect();
        assert_eq!(seen, want);
        // A bare run id is accepted as a cursor too; an unknown one gives an empty page.
        q.cursor = Some("r20".into());
        assert_eq!(ids(&store.list_runs(&q).await.unwrap().runs)[0], "r19");
        q.cursor = Some("no-such-run".into());
        assert!(store.list_runs(&q).await.unwrap().runs.is_empty());
        q.cursor = None;
        q.limit = 0;
        assert!(store.list_runs(&q).await.unwrap().runs.is_empty());
    })
    .await;
}

#[tokio::test]
async fn key_search_by_exact_key_and_prefix() {
    on_both(|store| async move {
        let store = &*store;
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
        assert_eq!(
            list(RunQuery {
                key: Some("inv_1001".into()),
                ..Default::default()
            })
            .await,
            [a.id.clone()]
        );
        assert!(
            list(RunQuery {
                key: Some("inv_100".into()),
                ..Default::default()
            })
            .await
            .is_empty(),
            "key is exact"
        );
        assert_eq!(
            list(RunQuery {
                q: Some("inv_100".into()),
                ..Default::default()
            })
            .await,
            [b.id.clone(), a.id.clone()]
        );
        assert_eq!(
            list(RunQuery {
                q: Some("0190a".into()),
                ..Default::default()
            })
            .await,
            [b.id.clone(), a.id.clone()]
        );
        assert_eq!(
            list(RunQuery {
                q: Some(c.id.clone()),
                ..Default::default()
            })
            .await,
            [c.id.clone()]
        );
        assert_eq!(
            list(RunQuery {
                q: Some("ch_".into()),
                ..Default::default()
            })
            .await,
            [c.id.clone()]
        );
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Stats
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn stats_count_by_status_per_bucket() {
    on_both(|store| async move {
        let store = &*store;
        let rows = [
            ("a", "wf1", RunStatus::Succeeded, T0 + 10),
            ("b", "wf1", RunStatus::Failed, T0 + HOUR - 1),
            ("c", "wf2", RunStatus::Succeeded, T0 + HOUR),
            ("d", "wf1", RunStatus::Succeeded, T0 + HOUR + 5),
            ("e", "wf1", RunStatus::Running, T0 + 3 * HOUR),
            ("f", "wf1", RunStatus::Queued, T0 + 4 * HOUR), // at `until`: excluded
            ("g", "wf1", RunStatus::Failed, T0 - 1),        // before `since`: excluded
        ];
        for (id, wf, st, at) in rows {
            store.put_run(&run(id, wf, st, at)).await.unwrap();
        }
        let counts = |pairs: &[(&str, u64)]| -> BTreeMap<String, u64> {
            pairs.iter().map(|(s, n)| (s.to_string(), *n)).collect()
        };
        let all = store
            .run_stats(None, T0, T0 + 4 * HOUR, HOUR)
            .await
            .unwrap();
        let got: Vec<(i64, BTreeMap<String, u64>)> =
            all.into_iter().map(|b| (b.start.0, b.counts)).collect();
        assert_eq!(
            got,
            vec![
                (T0, counts(&[("failed", 1), ("succeeded", 1)])),
                (T0 + HOUR, counts(&[("succeeded", 2)])),
                (T0 + 3 * HOUR, counts(&[("running", 1)])),
            ]
        );
        let wf2 = store
            .run_stats(Some("wf2"), T0, T0 + 4 * HOUR, HOUR)
            .await
            .unwrap();
        assert_eq!(wf2.len(), 1);
        assert_eq!(wf2[0].start.0, T0 + HOUR);
        assert_eq!(wf2[0].counts, counts(&[("succeeded", 1)]));
        // Buckets align on the epoch, whatever `since` is.
        let day = store
            .run_stats(None, T0 + 30 * 60_000, T0 + 2 * HOUR, HOUR)
            .await
            .unwrap();
        assert_eq!(day.len(), 2);
        assert_eq!(day[0].start.0, T0);
        assert_eq!(day[0].counts, counts(&[("failed", 1)]));
        // A non-positive bucket is one bucket starting at `since`.
        let one = store.run_stats(None, T0, T0 + DAY, 0).await.unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].start.0, T0);
        assert_eq!(one[0].counts.values().sum::<u64>(), 6);
        assert!(store
            .run_stats(None, T0 + 1, T0, HOUR)
            .await
            .unwrap()
            .is_empty());
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Retention (SPEC §4)
// ---------------------------------------------------------------------------------------------

async fn remaining(store: &dyn Store, workflow: &str) -> BTreeSet<String> {
    all_pages(
        store,
        &RunQuery {
            workflow: Some(workflow.into()),
            ..Default::default()
        },
        100,
    )
    .await
    .into_iter()
    .map(|r| r.id)
    .collect()
}

fn set(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn retention_by_count_keeps_newest_finished_per_workflow() {
    on_both(|store| async move {
        let store = &*store;
        // Created order differs from finish order on purpose: retention goes by finish time.
        store
            .put_run(&finished("a1", "a", T0, T0 + 500))
            .await
            .unwrap();
        store
            .put_run(&finished("a2", "a", T0 + 1, T0 + 100))
            .await
            .unwrap();
        store
            .put_run(&finished("a3", "a", T0 + 2, T0 + 300))
            .await
            .unwrap();
        store
            .put_run(&finished("a4", "a", T0 + 3, T0 + 200))
            .await
            .unwrap();
        store
            .put_run(&run("aq", "a", RunStatus::Queued, T0 - 10))
            .await
            .unwrap();
        store
            .put_run(&run("ar", "a", RunStatus::Running, T0 - 9))
            .await
            .unwrap();
        store
            .put_run(&finished("b1", "b", T0, T0 + 1))
            .await
            .unwrap();
        store
            .put_run(&finished("b2", "b", T0, T0 + 2))
            .await
            .unwrap();
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
        // Gone from every index.
        let succeeded = store
            .run_ids_with_status(RunStatus::Succeeded)
            .await
            .unwrap();
        assert_eq!(succeeded, ["a1", "b1", "b2"], "same created_at: id order");
        let stats = store
            .run_stats(Some("a"), T0 - DAY, T0 + DAY, DAY * 10)
            .await
            .unwrap();
        assert_eq!(stats[0].counts.values().sum::<u64>(), 4);
        assert_eq!(
            store.prune_runs(&policy, T0 + DAY).await.unwrap(),
            0,
            "idempotent"
        );

        // Zero keeps no finished run, still never a queued or running one.
        let none = Retention {
            max_runs_per_workflow: Some(0),
            max_age_ms: None,
        };
        assert_eq!(store.prune_runs(&none, T0 + DAY).await.unwrap(), 4);
        assert_eq!(remaining(store, "a").await, set(&["aq", "ar"]));
        assert_eq!(remaining(store, "b").await, set(&[]));
    })
    .await;
}

#[tokio::test]
async fn retention_by_age_and_both_limits() {
    on_both(|store| async move {
        let store = &*store;
        let now = T0 + 30 * DAY;
        store
            .put_run(&finished("old", "w", T0, T0 + DAY))
            .await
            .unwrap();
        store
            .put_run(&finished("edge", "w", T0, now - 7 * DAY))
            .await
            .unwrap();
        store
            .put_run(&finished("new1", "w", T0, now - DAY))
            .await
            .unwrap();
        store
            .put_run(&finished("new2", "w", T0, now - HOUR))
            .await
            .unwrap();
        store
            .put_run(&run("stuck", "w", RunStatus::Running, T0 - DAY))
            .await
            .unwrap();
        store
            .put_run(&run("waiting", "w", RunStatus::Queued, T0 - DAY))
            .await
            .unwrap();

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
    })
    .await;
}

#[tokio::test]
async fn retention_streams_over_many_workflows_and_batches() {
    on_both(|store| async move {
        let store = &*store;
        // More than one batch (256) of doomed runs in one workflow.
        for i in 0..700i64 {
            let wf = if i % 7 == 0 { "small" } else { "big" };
            store
                .put_run(&finished(&format!("r{i:04}"), wf, T0 + i, T0 + 10 * i))
                .await
                .unwrap();
        }
        let policy = Retention {
            max_runs_per_workflow: Some(5),
            max_age_ms: None,
        };
        assert_eq!(store.prune_runs(&policy, T0).await.unwrap(), 700 - 10);
        let big: Vec<String> = (0..700)
            .rev()
            .filter(|i| i % 7 != 0)
            .take(5)
            .map(|i| format!("r{i:04}"))
            .collect();
        assert_eq!(remaining(store, "big").await, big.into_iter().collect());
        assert_eq!(remaining(store, "small").await.len(), 5);
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Webhook claims (SPEC §5)
// ---------------------------------------------------------------------------------------------

fn claim(workflow: &str, key: &str, run_id: &str, at: i64, window: i64) -> WebhookClaim {
    WebhookClaim {
        workflow_id: workflow.into(),
        key: key.into(),
        run_id: run_id.into(),
        claimed_at: at,
        expires_at: at + window,
    }
}

#[tokio::test]
async fn claim_and_enqueue_duplicate_within_window_claimable_after() {
    on_both(|store| async move {
        let store = &*store;
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

        // Other key, other workflow: independent.
        let other = run("run-x", "hooks2", RunStatus::Queued, at);
        assert_eq!(
            store
                .claim_and_enqueue(&claim("hooks2", "evt_1", "run-x", at, DAY), &other, at)
                .await
                .unwrap(),
            ClaimOutcome::Claimed
        );

        let at = T0 + DAY + 1;
        assert_eq!(store.get_claim("hooks", "evt_1", at).await.unwrap(), None);
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

        // A claim that does not name its run is a caller bug.
        let r = run("run-4", "hooks", RunStatus::Queued, at);
        assert!(store
            .claim_and_enqueue(&claim("hooks", "evt_9", "run-5", at, DAY), &r, at)
            .await
            .is_err());
        assert_eq!(store.get_claim("hooks", "evt_9", at).await.unwrap(), None);
    })
    .await;
}

#[tokio::test]
async fn exactly_at_window_end_the_key_is_free() {
    on_both(|store| async move {
        let store = &*store;
        let c = claim("w", "k", "r1", T0, 1_000);
        store
            .claim_and_enqueue(&c, &run("r1", "w", RunStatus::Queued, T0), T0)
            .await
            .unwrap();
        let at = T0 + 1_000;
        assert_eq!(
            store
                .claim_and_enqueue(
                    &claim("w", "k", "r2", at, 1_000),
                    &run("r2", "w", RunStatus::Queued, at),
                    at
                )
                .await
                .unwrap(),
            ClaimOutcome::Claimed
        );
    })
    .await;
}

async fn concurrent_claims(store: Arc<dyn Store>) {
    const N: usize = 64;
    let barrier = Arc::new(tokio::sync::Barrier::new(N));
    let tasks: Vec<_> = (0..N)
        .map(|i| {
            let (store, barrier) = (store.clone(), barrier.clone());
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
    let mut outcomes: Vec<(String, ClaimOutcome)> = Vec::new();
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
        store.run_ids_with_status(RunStatus::Queued).await.unwrap(),
        [winner],
        "exactly one queued run"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_concurrent_deliveries_one_run() {
    concurrent_claims(Arc::new(InMemoryStore::new())).await;
    let dir = tempfile::tempdir().unwrap();
    concurrent_claims(Arc::new(SledStore::open(&sled_config(&dir)).unwrap())).await;
}

#[tokio::test]
async fn a_batch_applies_in_order_and_fails_only_its_bad_writes() {
    on_both(|store| async move {
        let store = &*store;
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
        let mut started = r3.clone();
        started.status = RunStatus::Running;
        let out = store
            .write_batch(vec![
                BatchWrite::ClaimAndEnqueue {
                    claim: c1.clone(),
                    run: r1.clone(),
                },
                // Same key later in the same batch: a duplicate of the first, nothing written.
                BatchWrite::ClaimAndEnqueue {
                    claim: c2.clone(),
                    run: r2.clone(),
                },
                // A claim not naming its run fails alone.
                BatchWrite::ClaimAndEnqueue {
                    claim: bad.clone(),
                    run: r3.clone(),
                },
                BatchWrite::PutRun(r3.clone()),
                // A later write of the same run wins, with its indexes.
                BatchWrite::PutRun(started.clone()),
            ])
            .await;
        assert_eq!(out.len(), 5);
        let out: Vec<_> = out.into_iter().map(|(_, r)| r).collect();
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
        assert_eq!(out[3].as_ref().unwrap(), &BatchOutcome::Put);
        assert_eq!(out[4].as_ref().unwrap(), &BatchOutcome::Put);
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
    })
    .await;
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
        r.input = json!({"marker": 1});
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

// ---------------------------------------------------------------------------------------------
// REST API idempotency records (SPEC §5)
// ---------------------------------------------------------------------------------------------

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

#[tokio::test]
async fn api_begin_started_conflict_in_progress_replay() {
    on_both(|store| async move {
        let store = &*store;
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
        let body = "{\"id\":\"run-1\",\n \"status\": \"succeeded\"}";
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
            }
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
        // After 24 h the record is gone.
        let later = T0 + DAY;
        assert_eq!(
            store
                .api_begin(&api_record("fp-b", "w3", later, lease), later)
                .await
                .unwrap(),
            ApiBegin::Started
        );
        // Completing or abandoning an unknown key is a no-op.
        store
            .api_complete("tok-hash", "nope", 200, "{}")
            .await
            .unwrap();
        store.api_abandon("tok-hash", "nope").await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn api_lease_takeover_and_abandon() {
    on_both(|store| async move {
        let store = &*store;
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
    })
    .await;
}

#[tokio::test]
async fn sweep_idempotency_removes_only_expired_records() {
    on_both(|store| async move {
        let store = &*store;
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
        assert_eq!(
            store.sweep_idempotency(T0 + 12_000, 2).await.unwrap(),
            2,
            "max"
        );
        assert_eq!(store.sweep_idempotency(T0 + 12_000, 100).await.unwrap(), 2);
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
    })
    .await;
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
        // No background flusher: it would hold the lock for a moment after the drop.
        let db = sled::Config::new()
            .path(dir.path())
            .flush_every_ms(None)
            .open()
            .unwrap();
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
