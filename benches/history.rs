//! Scale benchmark of the sled run history: first-page latency of filtered listings, and the
//! answers of `GET /runs/stats` (count aggregates) and of the free search `GET /runs?q=`
//! through the functions the API calls (`app::runs::stats_for`, `app::runs::list`), with a
//! large history. `FLUXO_SCALE_RUNS` runs (default 20,000, for CI; it writes ~1 GB for a
//! million, in a temporary directory removed at the end). Figures are in the README ("Run
//! history").
//!
//! ```text
//! FLUXO_SCALE_RUNS=1000000 cargo bench --bench history
//! ```
//!
//! For profiling: `FLUXO_SCALE_DIR=DIR` keeps the data in `DIR` (loaded on the first run, reused
//! by the next ones with the same `FLUXO_SCALE_RUNS`, never removed), `FLUXO_SCALE_ONLY=text`
//! times only the lines whose name contains `text`, `FLUXO_SCALE_SAMPLES=n` takes `n` samples
//! per line (default 9; the median and the max are reported).

use std::sync::Arc;
use std::time::{Duration, Instant};

use fluxo::app::runs::{RunsParams, StatsParams};
use fluxo::app::{AppState, ServerOptions};
use fluxo::run::{
    new_run_id, ErrorInfo, Mode, RunRecord, RunStatus, StepRecord, StepStatus, Timestamp, Trigger,
};
use fluxo::store::{BatchWrite, RunQuery, RunStore, SledConfig, SledStore, Store};
use serde_json::json;

// The same allocator as the `fluxo` binary (what `fluxo serve` answers with).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// 2026-01-01T00:00:00Z.
const T0: i64 = 1_767_225_600_000;
const WORKFLOWS: usize = 20;

fn make_run(i: usize, created: i64) -> RunRecord {
    let status = match i % 100 {
        0 => RunStatus::Failed,
        1 => RunStatus::TimedOut,
        _ => RunStatus::Succeeded,
    };
    // Durations from 19 ms to a few seconds (the percentiles' histogram bins).
    let duration = 19 + ((i * 7_919) % 4_000) as u64 * (i % 3) as u64;
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
            "id": format!("in_{i:08}"), "customer": format!("cus_{:06}", i % 50_000)}}})
        .into(),
        status,
        created_at: Timestamp(created),
        started_at: Some(Timestamp(created + 1)),
        finished_at: Some(Timestamp(created + 1 + duration as i64)),
        duration_ms: Some(duration),
        error: (status != RunStatus::Succeeded).then(|| ErrorInfo {
            code: "http_status".into(),
            message: "POST /deals answered 500".into(),
            step: format!("call{}", i % 3),
            attempts: 3,
            http_status: Some(500),
        }),
        warnings: vec![],
        steps: steps(i, created, duration),
        snapshot: json!({}),
        parent_run: None,
        trace_parent: None,
    }
}

/// Samples per line: `FLUXO_SCALE_SAMPLES`, default `default`.
fn samples(default: usize) -> usize {
    std::env::var("FLUXO_SCALE_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(default)
}

/// Whether the line `name` (as printed) is timed (`FLUXO_SCALE_ONLY`).
fn wanted(name: &str) -> bool {
    std::env::var("FLUXO_SCALE_ONLY").map_or(true, |only| name.contains(&only))
}

/// The steps of run `i`: a webhook trigger (0 ms), a Memory claim (1–7 ms) and an HTTP call
/// taking the rest of the run's `duration` (the per-step percentiles).
fn steps(i: usize, created: i64, duration: u64) -> Vec<StepRecord> {
    let claim = 1 + (i % 7) as u64;
    let parts = [
        ("hook", "webhook_trigger", 0),
        ("seen", "memory", claim),
        ("create", "http_request", duration.saturating_sub(claim)),
    ];
    let mut at = created + 1;
    parts
        .into_iter()
        .map(|(id, kind, ms)| {
            let rec = StepRecord {
                step_id: id.into(),
                kind: kind.into(),
                status: StepStatus::Succeeded,
                started_at: Timestamp(at),
                finished_at: Some(Timestamp(at + ms as i64)),
                duration_ms: ms,
                resolved_config: json!({}),
                output: None,
                error: None,
                attempts: vec![],
                ports: vec!["out".into()],
                reused_from: None,
            };
            at += ms as i64;
            rec
        })
        .collect()
}

async fn time_first_page(store: &SledStore, name: &str, q: RunQuery) {
    if !wanted(name) {
        return;
    }
    let q = RunQuery { limit: 50, ..q };
    let mut samples: Vec<Duration> = Vec::new();
    let mut n = 0;
    for _ in 0..self::samples(7) {
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

/// Median and max of 9 answers of `GET /runs/stats` for `p`, with what it counted.
async fn time_stats(state: &AppState, name: &str, p: impl Fn() -> StatsParams) {
    if !wanted(&format!("stats {name}")) {
        return;
    }
    let mut samples: Vec<Duration> = Vec::new();
    let mut answer = json!({});
    for _ in 0..self::samples(9) {
        let params = p();
        let t = Instant::now();
        answer = fluxo::app::runs::stats_for(state, &params).await.unwrap();
        samples.push(t.elapsed());
    }
    samples.sort();
    println!(
        "stats {name:<34} total {:>8} complete {:<5} bars {:>3} steps {}  median {:>8.3} ms  max {:>8.3} ms",
        answer["total"],
        answer["complete"],
        answer["buckets"].as_array().map_or(0, Vec::len),
        answer["steps"].as_array().map_or(0, Vec::len),
        samples[samples.len() / 2].as_secs_f64() * 1e3,
        samples[samples.len() - 1].as_secs_f64() * 1e3
    );
}

/// Median and max of 9 first pages of `GET /runs?q=` (`app::runs::list`).
async fn time_search(state: &AppState, name: &str, q: &str) {
    if !wanted(&format!("search {name}")) {
        return;
    }
    let mut samples: Vec<Duration> = Vec::new();
    let mut n = 0;
    for _ in 0..self::samples(9) {
        let params = RunsParams {
            q: Some(q.to_string()),
            ..Default::default()
        };
        let t = Instant::now();
        n = fluxo::app::runs::list(state, &params)
            .await
            .unwrap()
            .runs
            .len();
        samples.push(t.elapsed());
    }
    samples.sort();
    println!(
        "search {name:<33} {n:>3} runs  median {:>8.3} ms  max {:>8.3} ms",
        samples[samples.len() / 2].as_secs_f64() * 1e3,
        samples[samples.len() - 1].as_secs_f64() * 1e3
    );
}

#[tokio::main]
async fn main() {
    let total: usize = std::env::var("FLUXO_SCALE_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000);
    // The data: in a temporary directory (removed at the end), or kept in FLUXO_SCALE_DIR.
    let (_tmp, dir) = match std::env::var_os("FLUXO_SCALE_DIR") {
        Some(d) => (None, std::path::PathBuf::from(d)),
        None => {
            let t = tempfile::tempdir().unwrap();
            let p = t.path().to_path_buf();
            (Some(t), p)
        }
    };
    let loaded_marker = dir.join(format!("loaded-{total}"));
    let reuse = loaded_marker.exists();
    let store = SledStore::open(&SledConfig::new(dir.join("store"))).unwrap();
    // One run every 2.6 s: 1M runs span ~30 days. Written in batches of 512, as the group
    // commit writes them.
    let step = 2_600;
    let t = Instant::now();
    let mut i = if reuse { total } else { 0 };
    while i < total {
        let end = (i + 512).min(total);
        let writes = (i..end)
            .map(|i| BatchWrite::PutRun(make_run(i, T0 + i as i64 * step)))
            .collect();
        for (_, r) in store.write_batch(writes).await {
            r.unwrap();
        }
        i = end;
    }
    store.flush().await.unwrap();
    let load = t.elapsed();
    if reuse {
        println!("reusing the {total} runs in {}", dir.display());
    } else {
        println!(
            "loaded {total} runs in {:.1} s ({:.1} µs/run, batches of 512)",
            load.as_secs_f64(),
            load.as_secs_f64() * 1e6 / total as f64
        );
        if std::env::var_os("FLUXO_SCALE_DIR").is_some() {
            std::fs::write(&loaded_marker, b"").unwrap();
        }
    }
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

    // What the API answers: `GET /runs/stats` and `GET /runs?q=`, through the functions its
    // handlers call, on an application over this store (the system clock: "all time" runs
    // up to now).
    let engine = fluxo::runtime::Engine::new(
        Arc::new(store.clone()) as Arc<dyn Store>,
        Arc::new(fluxo::clock::SystemClock),
    );
    let workflows_dir = dir.join("workflows");
    std::fs::create_dir_all(&workflows_dir).unwrap();
    let workflows =
        fluxo::workflow::dir::WorkflowDir::load(&workflows_dir, engine.registry().clone()).unwrap();
    let (state, _queue) = AppState::open(
        "127.0.0.1:0".parse().unwrap(),
        engine,
        workflows,
        "bench-token".into(),
        ServerOptions::default(),
    )
    .await
    .unwrap();
    let ms = |t: i64| Some(t.to_string());
    time_stats(&state, "no filter, all time", StatsParams::default).await;
    time_stats(&state, "workflow=, all time", || StatsParams {
        workflow: Some("wf-07".into()),
        ..Default::default()
    })
    .await;
    time_stats(&state, "status=failed, all time", || StatsParams {
        status: Some("failed".into()),
        ..Default::default()
    })
    .await;
    time_stats(&state, "mode=dry, all time", || StatsParams {
        mode: Some("dry".into()),
        ..Default::default()
    })
    .await;
    time_stats(&state, "last hour", || StatsParams {
        since: ms(end - 3_600_000),
        until: ms(end),
        ..Default::default()
    })
    .await;
    time_stats(&state, "last 24 h", || StatsParams {
        since: ms(end - day),
        until: ms(end),
        ..Default::default()
    })
    .await;
    time_stats(&state, "last 7 days", || StatsParams {
        since: ms(end - 7 * day),
        until: ms(end),
        ..Default::default()
    })
    .await;
    time_stats(&state, "workflow=, last 7 days (+ steps)", || StatsParams {
        workflow: Some("wf-03".into()),
        since: ms(end - 7 * day),
        until: ms(end),
        ..Default::default()
    })
    .await;
    time_stats(&state, "workflow=, last 7 days, hourly", || StatsParams {
        workflow: Some("wf-03".into()),
        since: ms(end - 7 * day),
        until: ms(end),
        bucket: Some("hour".into()),
        ..Default::default()
    })
    .await;
    time_stats(&state, "q = customer (reads the runs)", || StatsParams {
        q: Some("cus_012345".into()),
        ..Default::default()
    })
    .await;
    time_search(&state, "q = customer id (20 runs)", "cus_012345").await;
    time_search(
        &state,
        "q = invoice id (exact)",
        &format!("in_{:08}", total / 3),
    )
    .await;
    time_search(
        &state,
        "q = event key (exact)",
        &format!("evt_{:08}", total / 3),
    )
    .await;
    time_search(&state, "q = value prefix (broad: cus_)", "cus_").await;
    time_search(&state, "q = run id prefix (broad)", "0").await;
    drop(state);
}
