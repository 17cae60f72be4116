//! Writes N synthetic runs into a data dir's sled store (`<data-dir>/store`, the one `fluxo
//! serve --data-dir DIR` opens), for measuring the run history at scale. Not part of the product.
//!
//! ```text
//! cargo run --release --example seed_runs -- --data-dir /tmp/fluxo-1m --runs 1000000
//! ./target/release/fluxo serve --data-dir /tmp/fluxo-1m --retention-runs 100000000
//! ```
//!
//! Runs are spread evenly over the last `--span-hours` (default 720 = 30 days) up to now, over
//! `--workflows` workflows (`seed-00`, `seed-01`, …), newest last. Every 100th run failed (with an
//! HTTP step that answered 500 three times), every 200th timed out, every 10th is a dry run;
//! triggers: webhook (with key `evt_<i, 8 digits>`), api (key `api_<i>`), manual, replay, cli.
//! `fluxo serve` keeps only `--retention-runs` (default 10,000) finished runs per workflow: pass a
//! larger value, or it prunes the seeded history at start.

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use fluxo::run::{
    new_run_id, Attempt, ErrorInfo, Mode, RunRecord, RunStatus, StepRecord, StepStatus, Timestamp,
    Trigger,
};
use fluxo::store::{RunStore, SledConfig, SledStore, Store};
use serde_json::json;

#[derive(Parser)]
#[command(about = "Write synthetic runs into a Fluxo data dir (for measurements)")]
struct Args {
    /// The data dir (`fluxo serve --data-dir`); the store is `<data-dir>/store`.
    #[arg(long)]
    data_dir: PathBuf,
    /// How many runs to write.
    #[arg(long, default_value_t = 100_000)]
    runs: usize,
    /// How many workflows the runs belong to.
    #[arg(long, default_value_t = 20)]
    workflows: usize,
    /// The runs' creation times span this many hours, ending now.
    #[arg(long, default_value_t = 720)]
    span_hours: u64,
}

fn step(id: &str, kind: &str, t: i64, status: StepStatus, ports: &[&str]) -> StepRecord {
    StepRecord {
        step_id: id.into(),
        kind: kind.into(),
        status,
        started_at: Timestamp(t),
        finished_at: Some(Timestamp(t + 2)),
        duration_ms: 2,
        resolved_config: json!({}),
        output: Some(json!({"ok": true})),
        error: None,
        attempts: vec![Attempt {
            started_at: Timestamp(t),
            duration_ms: 2,
            delay_before_ms: 0,
            http_status: None,
            error: None,
        }],
        ports: ports.iter().map(|p| p.to_string()).collect(),
        reused_from: None,
    }
}

fn make_run(i: usize, workflows: usize, created: i64) -> RunRecord {
    let status = if i % 200 == 7 {
        RunStatus::TimedOut
    } else if i % 100 == 3 {
        RunStatus::Failed
    } else {
        RunStatus::Succeeded
    };
    let trigger = match i % 20 {
        0..=13 => Trigger::Webhook,
        14..=16 => Trigger::Api,
        17 => Trigger::Manual,
        18 => Trigger::Replay,
        _ => Trigger::Cli,
    };
    let key = match trigger {
        Trigger::Webhook => Some(format!("evt_{i:08}")),
        Trigger::Api => Some(format!("api_{i}")),
        _ => None,
    };
    let workflow_id = format!("seed-{:02}", i % workflows.max(1));
    let mut steps = vec![step(
        "hook",
        "webhook_trigger",
        created + 1,
        StepStatus::Succeeded,
        &["out"],
    )];
    let mut error = None;
    let mut duration = 12;
    if status == RunStatus::Succeeded {
        steps.push(step(
            "call",
            "http_request",
            created + 3,
            StepStatus::Succeeded,
            &["out"],
        ));
    } else {
        let e = ErrorInfo {
            code: if status == RunStatus::TimedOut {
                "deadline_exceeded"
            } else {
                "http_status"
            }
            .into(),
            message: "POST http://127.0.0.1:9/deals answered 500".into(),
            step: "call".into(),
            attempts: 3,
            http_status: Some(500),
        };
        let mut s = step(
            "call",
            "http_request",
            created + 3,
            StepStatus::Failed,
            &["error"],
        );
        s.output = None;
        s.attempts = (0..3)
            .map(|n| Attempt {
                started_at: Timestamp(created + 3 + n * 400),
                duration_ms: 5,
                delay_before_ms: if n == 0 { 0 } else { 390 },
                http_status: Some(500),
                error: Some("HTTP 500".into()),
            })
            .collect();
        s.duration_ms = 805;
        s.error = Some(e.clone());
        steps.push(s);
        error = Some(e);
        duration = 810;
    }
    RunRecord {
        id: new_run_id(created),
        workflow_id,
        workflow_version: 1 + (i % 3) as u64,
        definition_hash: "ab".repeat(32),
        trigger,
        idempotency_key: key,
        mode: if i % 10 == 5 { Mode::Dry } else { Mode::Live },
        replay_of: None,
        replayed_by: vec![],
        resume_of: None,
        resume_from: None,
        resumed_by: vec![],
        root_run_id: String::new(),
        input_edited: false,
        input: json!({"id": format!("evt_{i:08}"), "amount": (i % 997) * 100}).into(),
        status,
        created_at: Timestamp(created),
        started_at: Some(Timestamp(created + 1)),
        finished_at: Some(Timestamp(created + duration)),
        duration_ms: Some(duration as u64),
        error,
        warnings: vec![],
        steps,
        snapshot: json!({}),
        parent_run: None,
        trace_parent: None,
    }
}

#[tokio::main]
async fn main() {
    let a = Args::parse();
    let dir = a.data_dir.join("store");
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("cannot create {}: {e}", dir.display());
        std::process::exit(2);
    }
    let store = match SledStore::open(&SledConfig::new(&dir)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "cannot open the store in {} (is `fluxo serve` using it?): {e}",
                dir.display()
            );
            std::process::exit(2);
        }
    };
    let now = chrono::Utc::now().timestamp_millis();
    let span = (a.span_hours as i64 * 3_600_000).max(1);
    let step_ms = span as f64 / a.runs.max(1) as f64;
    let t = Instant::now();
    for i in 0..a.runs {
        let created = now - span + (i as f64 * step_ms) as i64;
        if let Err(e) = store.put_run(&make_run(i, a.workflows, created)).await {
            eprintln!("put_run failed at run {i}: {e}");
            std::process::exit(1);
        }
        if (i + 1) % 100_000 == 0 {
            eprintln!("{} runs ({:.0} s)", i + 1, t.elapsed().as_secs_f64());
        }
    }
    if let Err(e) = store.flush().await {
        eprintln!("flush failed: {e}");
        std::process::exit(1);
    }
    println!(
        "wrote {} runs over {} workflows into {} in {:.1} s",
        a.runs,
        a.workflows,
        dir.display(),
        t.elapsed().as_secs_f64()
    );
}
