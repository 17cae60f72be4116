//! Scale benchmark of the sled run indexes: first-page latency of filtered listings with a
//! large history (it writes ~1 GB for a million runs). Figures are in the README.
//!
//! ```text
//! FLUXO_SCALE_RUNS=1000000 cargo bench --bench history
//! ```

use std::time::{Duration, Instant};

use fluxo::run::{new_run_id, Mode, RunRecord, RunStatus, Timestamp, Trigger};
use fluxo::store::{RunQuery, RunStore, SledConfig, SledStore};
use serde_json::json;

/// 2026-01-01T00:00:00Z.
const T0: i64 = 1_767_225_600_000;
const WORKFLOWS: usize = 20;

fn make_run(i: usize, created: i64) -> RunRecord {
    let status = match i % 100 {
        0 => RunStatus::Failed,
        1 => RunStatus::TimedOut,
        _ => RunStatus::Succeeded,
    };
    RunRecord {
        id: new_run_id(created),
        workflow_id: format!("wf-{:02}", i % WORKFLOWS),
        workflow_version: 1,
        definition_hash: "ab".repeat(32),
        trigger: Trigger::Webhook,
        idempotency_key: Some(format!("evt_{i:08}")),
        mode: if i.is_multiple_of(10) {
            Mode::Dry
        } else {
            Mode::Live
        },
        replay_of: None,
        replayed_by: vec![],
        resume_of: None,
        resume_from: None,
        resumed_by: vec![],
        root_run_id: String::new(),
        input_edited: false,
        // A Stripe-like event: 20 runs per customer, one invoice each (the free search's
        // value index).
        input: json!({"id": i, "data": {"object": {
            "id": format!("in_{i:08}"), "customer": format!("cus_{:06}", i % 50_000)}}}),
        status,
        created_at: Timestamp(created),
        started_at: Some(Timestamp(created + 1)),
        finished_at: Some(Timestamp(created + 20)),
        duration_ms: Some(19),
        error: None,
        warnings: vec![],
        steps: vec![],
        snapshot: json!({}),
        parent_run: None,
        trace_parent: None,
    }
}

async fn time_first_page(store: &SledStore, name: &str, q: RunQuery) {
    let q = RunQuery { limit: 50, ..q };
    let mut samples: Vec<Duration> = Vec::new();
    let mut n = 0;
    for _ in 0..7 {
        let t = Instant::now();
        let page = store.list_runs(&q).await.unwrap();
        samples.push(t.elapsed());
        n = page.runs.len();
    }
    samples.sort();
    println!(
        "{name:<40} {n:>3} runs  median {:>8.3} ms  max {:>8.3} ms",
        samples[samples.len() / 2].as_secs_f64() * 1e3,
        samples[samples.len() - 1].as_secs_f64() * 1e3
    );
}

#[tokio::main]
async fn main() {
    let total: usize = std::env::var("FLUXO_SCALE_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let store = SledStore::open(&SledConfig::new(dir.path())).unwrap();
    // One run every 2.6 s: 1M runs span ~30 days.
    let step = 2_600;
    let t = Instant::now();
    for i in 0..total {
        store
            .put_run(&make_run(i, T0 + i as i64 * step))
            .await
            .unwrap();
    }
    let load = t.elapsed();
    println!(
        "loaded {total} runs in {:.1} s ({:.1} µs/put_run)",
        load.as_secs_f64(),
        load.as_secs_f64() * 1e6 / total as f64
    );
    let end = T0 + total as i64 * step;
    let day = 86_400_000;

    time_first_page(&store, "no filter", RunQuery::default()).await;
    time_first_page(
        &store,
        "workflow",
        RunQuery {
            workflow: Some("wf-07".into()),
            ..Default::default()
        },
    )
    .await;
    time_first_page(
        &store,
        "status=failed (1%)",
        RunQuery {
            status: Some(RunStatus::Failed),
            ..Default::default()
        },
    )
    .await;
    time_first_page(
        &store,
        "workflow + status=timed_out",
        RunQuery {
            workflow: Some("wf-01".into()),
            status: Some(RunStatus::TimedOut),
            ..Default::default()
        },
    )
    .await;
    time_first_page(
        &store,
        "key (exact)",
        RunQuery {
            key: Some(format!("evt_{:08}", total / 3)),
            ..Default::default()
        },
    )
    .await;
    time_first_page(
        &store,
        "q = key prefix (10 matches)",
        RunQuery {
            q: Some(format!("evt_{:07}", total / 30)),
            ..Default::default()
        },
    )
    .await;
    time_first_page(
        &store,
        "q = key prefix (broad)",
        RunQuery {
            q: Some("evt_".into()),
            ..Default::default()
        },
    )
    .await;
    time_first_page(
        &store,
        "q = customer id in the input (20 runs)",
        RunQuery {
            q: Some("cus_012345".into()),
            ..Default::default()
        },
    )
    .await;
    time_first_page(
        &store,
        "q = invoice id in the input (exact)",
        RunQuery {
            q: Some(format!("in_{:08}", total / 3)),
            ..Default::default()
        },
    )
    .await;
    time_first_page(
        &store,
        "q = value prefix (broad: cus_)",
        RunQuery {
            q: Some("cus_".into()),
            ..Default::default()
        },
    )
    .await;
    time_first_page(
        &store,
        "since/until: one day, 20 days ago",
        RunQuery {
            since: Some(end - 21 * day),
            until: Some(end - 20 * day),
            ..Default::default()
        },
    )
    .await;
    time_first_page(
        &store,
        "workflow + day window, 20 days ago",
        RunQuery {
            workflow: Some("wf-03".into()),
            since: Some(end - 21 * day),
            until: Some(end - 20 * day),
            ..Default::default()
        },
    )
    .await;
    time_first_page(
        &store,
        "mode=dry (10%, post-filtered)",
        RunQuery {
            mode: Some(Mode::Dry),
            ..Default::default()
        },
    )
    .await;
    let mut q = RunQuery {
        workflow: Some("wf-05".into()),
        limit: 50,
        ..Default::default()
    };
    for _ in 0..100 {
        q.cursor = store.list_runs(&q).await.unwrap().next_cursor;
    }
    time_first_page(&store, "workflow, page 101 (via cursor)", q).await;

    let t = Instant::now();
    let stats = store
        .run_stats(None, end - day, end, 3_600_000)
        .await
        .unwrap();
    println!(
        "run_stats last 24 h, hourly: {} buckets in {:.1} ms",
        stats.len(),
        t.elapsed().as_secs_f64() * 1e3
    );
}
