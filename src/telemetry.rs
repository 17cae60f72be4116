//! Prometheus metrics (issue 16; `GET /metrics`): every metric Fluxo exports is named and
//! described here, and recorded through the `metrics` facade from where it happens (a leaf
//! module: the engine, the store and the app call it; it calls nothing of theirs).
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `fluxo_webhook_deliveries_total` | counter | `outcome`: `accepted`, `duplicate`, `rejected`; `code` (the problem code of a rejection) |
//! | `fluxo_runs_total` | counter | `workflow`, `status` (final), `mode` |
//! | `fluxo_run_duration_seconds` | histogram | `workflow`, `status` |
//! | `fluxo_step_attempts_total` | counter | `kind`, `outcome` (`succeeded`, `failed`) |
//! | `fluxo_step_retries_total` | counter | `kind` |
//! | `fluxo_step_duration_seconds` | histogram | `kind`, `outcome` |
//! | `fluxo_queue_depth` | gauge | (queued runs, at scrape time) |
//! | `fluxo_queue_oldest_age_seconds` | gauge | (age of the oldest queued run, at scrape time) |
//! | `fluxo_commit_batch_size` | histogram | `lane` (`claims`, `runs`: writes per group-commit batch) |
//! | `fluxo_commit_flush_seconds` | histogram | `lane` (write + flush of one batch) |
//! | `fluxo_store_errors_total` | counter | |
//! | `fluxo_runs_recovered_total` | counter | `outcome`: `resumed`, `interrupted`, `quarantined` |
//! | `fluxo_schedule_ticks_total` | counter | `outcome`: `fired`, `skipped` |
//!
//! Durations are in seconds (Prometheus' base unit). The recorder is process-wide: several
//! servers in one process (tests) share it.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// The process's recorder, installed on first use; renders the exposition format.
pub fn handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let buckets = [
            0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
        ];
        let builder = PrometheusBuilder::new()
            .set_buckets(&buckets)
            .expect("non-empty buckets");
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        // Another recorder already installed (an embedding program's): ours still renders
        // what was recorded through it, i.e. nothing; metrics then belong to the embedder.
        let _ = metrics::set_global_recorder(recorder);
        describe();
        handle
    })
}

fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!(
        "fluxo_webhook_deliveries_total",
        "Webhook deliveries by outcome (accepted, duplicate, rejected with its code)"
    );
    describe_counter!(
        "fluxo_runs_total",
        "Runs that ended, by workflow, final status and mode"
    );
    describe_histogram!("fluxo_run_duration_seconds", Unit::Seconds, "Run duration");
    describe_counter!(
        "fluxo_step_attempts_total",
        "Step attempts by kind and outcome"
    );
    describe_counter!(
        "fluxo_step_retries_total",
        "Step retries (attempts after the first) by kind"
    );
    describe_histogram!(
        "fluxo_step_duration_seconds",
        Unit::Seconds,
        "Step duration, all attempts"
    );
    describe_gauge!("fluxo_queue_depth", "Queued runs");
    describe_gauge!(
        "fluxo_queue_oldest_age_seconds",
        Unit::Seconds,
        "Age of the oldest queued run"
    );
    describe_histogram!("fluxo_commit_batch_size", "Writes per group-commit batch");
    describe_histogram!(
        "fluxo_commit_flush_seconds",
        Unit::Seconds,
        "Write and flush of one batch"
    );
    describe_counter!(
        "fluxo_store_errors_total",
        "Store failures answered as retryable"
    );
    describe_counter!(
        "fluxo_runs_recovered_total",
        "Runs left running (or in flight) by a dead process, by outcome: resumed, interrupted, \
         or quarantined (in flight at two consecutive crashes)"
    );
    describe_counter!(
        "fluxo_schedule_ticks_total",
        "Schedule ticks, fired or skipped"
    );
}

/// A webhook delivery was accepted (`202`).
pub fn delivery_accepted() {
    // Looked up once: the registry lookup (a key built, hashed, found under a lock) was a
    // measurable share of a delivery's answer.
    static COUNTER: OnceLock<metrics::Counter> = OnceLock::new();
    COUNTER
        .get_or_init(|| deliveries("accepted", ""))
        .increment(1);
}

/// A webhook delivery was a repeat of a live claim (`200 duplicate: true`).
pub fn delivery_duplicate() {
    static COUNTER: OnceLock<metrics::Counter> = OnceLock::new();
    COUNTER
        .get_or_init(|| deliveries("duplicate", ""))
        .increment(1);
}

/// A webhook delivery was refused with the problem `code`.
pub fn delivery_rejected(code: &'static str) {
    deliveries("rejected", code).increment(1);
}

fn deliveries(outcome: &'static str, code: &'static str) -> metrics::Counter {
    handle();
    metrics::counter!("fluxo_webhook_deliveries_total", "outcome" => outcome, "code" => code)
}

/// A run ended.
pub fn run_finished(workflow: &str, status: &'static str, mode: &'static str, seconds: f64) {
    let wf = workflow.to_string();
    metrics::counter!("fluxo_runs_total", "workflow" => wf.clone(), "status" => status, "mode" => mode)
        .increment(1);
    metrics::histogram!("fluxo_run_duration_seconds", "workflow" => wf, "status" => status)
        .record(seconds);
}

/// A step ended after `attempts` attempts.
pub fn step_finished(kind: &str, succeeded: bool, attempts: usize, seconds: f64) {
    let outcome = if succeeded { "succeeded" } else { "failed" };
    let kind = kind.to_string();
    metrics::counter!("fluxo_step_attempts_total", "kind" => kind.clone(), "outcome" => outcome)
        .increment(attempts as u64);
    if attempts > 1 {
        metrics::counter!("fluxo_step_retries_total", "kind" => kind.clone())
            .increment(attempts as u64 - 1);
    }
    metrics::histogram!("fluxo_step_duration_seconds", "kind" => kind, "outcome" => outcome)
        .record(seconds);
}

/// The queue at scrape time.
pub fn queue(depth: usize, oldest_age_seconds: f64) {
    metrics::gauge!("fluxo_queue_depth").set(depth as f64);
    metrics::gauge!("fluxo_queue_oldest_age_seconds").set(oldest_age_seconds);
}

/// One group-commit batch.
pub fn commit_batch(lane: &'static str, writes: usize, seconds: f64) {
    metrics::histogram!("fluxo_commit_batch_size", "lane" => lane).record(writes as f64);
    metrics::histogram!("fluxo_commit_flush_seconds", "lane" => lane).record(seconds);
}

/// A store failure answered as retryable.
pub fn store_error() {
    metrics::counter!("fluxo_store_errors_total").increment(1);
}

/// A run a dead process left `running`: `resumed` or `interrupted`; or in flight at as many
/// consecutive crashes as the limit: `quarantined` (`app::quarantine`).
pub fn recovered(outcome: &'static str) {
    metrics::counter!("fluxo_runs_recovered_total", "outcome" => outcome).increment(1);
}

/// A schedule tick: `fired` or `skipped`.
pub fn tick(outcome: &'static str) {
    metrics::counter!("fluxo_schedule_ticks_total", "outcome" => outcome).increment(1);
}
