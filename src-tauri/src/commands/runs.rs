//! Runs: dry run (of the saved workflow or of the unsaved canvas), start a live run (queued,
//! answered at once), get a run, run history with filters, counts per time bucket, replay.
//! Like `POST /api/v1/workflows/{id}/dry-run`, `POST /api/v1/workflows/{id}/runs` with
//! `Prefer: respond-async`, `GET /api/v1/runs/{id}`, `GET /api/v1/runs`,
//! `GET /api/v1/runs/stats`, `POST /api/v1/runs/{id}/replay`, `POST /api/v1/runs/{id}/resume`,
//! `POST /api/v1/runs/bulk` and their previews, `GET /api/v1/runs/export`.

use std::sync::Arc;

use fluxo::app::export::{self, ExportFile, ExportParams};
use fluxo::app::runs::{
    self, runnable, BulkRequest, BulkSummary, RunFilter, RunsParams, StatsParams,
};
use fluxo::app::{workflows, AppState};
use fluxo::run::{RunRecord, Trigger};
use fluxo::runtime::preview::RunPreview;
use fluxo::store::RunPage;
use serde::Deserialize;
use serde_json::Value;
use tauri::State;

use crate::error::IpcResult;

/// The same walk with every side effect simulated; answers the finished run record.
#[tauri::command]
pub async fn dry_run(
    state: State<'_, AppState>,
    id: String,
    input: Option<Value>,
    workflow: Option<Value>,
) -> IpcResult<RunRecord> {
    Ok(workflows::dry_run(&state, &id, input, workflow).await?)
}

/// Queue a live run (stored durably, then handed to the listener's workers) and answer the
/// queued record; progress arrives as `run-event`.
#[tauri::command]
pub async fn start_run(
    state: State<'_, AppState>,
    id: String,
    input: Option<Value>,
) -> IpcResult<RunRecord> {
    let wf = runnable(&state, &id)?;
    let run = runs::new_live_run(&state, &wf, input, Trigger::Manual, None);
    Ok(runs::queue_run(&state, run).await?)
}

#[tauri::command]
pub async fn get_run(state: State<'_, AppState>, id: String) -> IpcResult<RunRecord> {
    Ok(runs::load_run(&state, &id).await?)
}

/// A run's deliveries: the first and every duplicate stopped.
#[tauri::command]
pub async fn run_deliveries(
    state: State<'_, AppState>,
    id: String,
) -> IpcResult<fluxo::app::duplicates::Deliveries> {
    Ok(runs::deliveries(&state, &id).await?)
}

/// An instant as the UI sends it: RFC 3339 text or unix milliseconds.
fn instant_text(v: Option<Value>) -> Option<String> {
    match v {
        Some(Value::String(s)) => Some(s),
        Some(Value::Number(n)) => Some(n.to_string()),
        _ => None,
    }
}

/// Filters of the run history (the UI's `RunQuery`; the query parameters of `GET /runs`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunQueryArgs {
    workflow: Option<String>,
    status: Option<String>,
    mode: Option<String>,
    trigger: Option<String>,
    key: Option<String>,
    q: Option<String>,
    /// Only runs that failed for this reason (a `failures[].reason` of the stats).
    error: Option<String>,
    /// `stopped`: only runs that stopped a duplicate delivery.
    duplicates: Option<String>,
    since: Option<Value>,
    until: Option<Value>,
    limit: Option<usize>,
    cursor: Option<String>,
}

/// A page of run summaries, newest first (`next_cursor` when more match).
#[tauri::command]
pub async fn list_runs(
    state: State<'_, AppState>,
    query: Option<RunQueryArgs>,
) -> IpcResult<RunPage> {
    let a = query.unwrap_or_default();
    let params = RunsParams {
        workflow: a.workflow,
        status: a.status,
        mode: a.mode,
        trigger: a.trigger,
        key: a.key,
        since: instant_text(a.since),
        until: instant_text(a.until),
        q: a.q,
        error: a.error,
        duplicates: a.duplicates,
        limit: a.limit,
        cursor: a.cursor,
    };
    Ok(runs::list(&state, &params).await?)
}

/// Export every run matching the history's filters (`query`; its `limit` and `cursor` are
/// ignored) as `format` `csv` (default) or `jsonl`, with the CSV input columns `fields`
/// (comma-separated `input…` paths; absent: the whole input in one column): the bytes of
/// `GET /api/v1/runs/export`, written to a new file in the user's Downloads folder. Answers
/// `{path, bytes}`; errors `invalid_parameter`, `invalid_field`, `export_failed`.
#[tauri::command]
pub async fn export_runs(
    state: State<'_, AppState>,
    query: Option<RunQueryArgs>,
    format: Option<String>,
    fields: Option<String>,
) -> IpcResult<ExportFile> {
    let a = query.unwrap_or_default();
    let params = ExportParams {
        format,
        fields,
        workflow: a.workflow,
        status: a.status,
        mode: a.mode,
        trigger: a.trigger,
        key: a.key,
        since: instant_text(a.since),
        until: instant_text(a.until),
        q: a.q,
        error: a.error,
        duplicates: a.duplicates,
    };
    let plan = export::plan(&params)?;
    let dir = export::default_dir(&state);
    Ok(export::write_file(&state, plan, &dir).await?)
}

/// Filters of the status chart (the UI's `RunStatsQuery`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunStatsArgs {
    /// `auto` (default), `minute`, `hour` or `day`.
    bucket: Option<String>,
    since: Option<Value>,
    until: Option<Value>,
    workflow: Option<String>,
    status: Option<String>,
    mode: Option<String>,
    trigger: Option<String>,
    key: Option<String>,
    q: Option<String>,
    error: Option<String>,
    /// `stopped`: only runs that stopped a duplicate delivery.
    duplicates: Option<String>,
}

/// Counts of runs by status per time bucket for the list's filters, with the total, duration
/// percentiles and failure groups (default: all time, `auto` bucket).
#[tauri::command]
pub async fn run_stats(
    state: State<'_, AppState>,
    query: Option<RunStatsArgs>,
) -> IpcResult<Value> {
    let a = query.unwrap_or_default();
    let params = StatsParams {
        bucket: a.bucket,
        since: instant_text(a.since),
        until: instant_text(a.until),
        workflow: a.workflow,
        status: a.status,
        mode: a.mode,
        trigger: a.trigger,
        key: a.key,
        q: a.q,
        error: a.error,
        duplicates: a.duplicates,
    };
    Ok(runs::stats_for(&state, &params).await?)
}

/// Replay a run: a new run of its input, linked both ways (`replay_of` / `replayed_by`), with
/// the workflow as it is now (`version: current`, default) or as the run recorded it
/// (`original`), live (default) or dry. With `wait` (default) answers the finished run, else
/// the queued one.
#[tauri::command]
pub async fn replay_run(
    state: State<'_, AppState>,
    id: String,
    mode: Option<String>,
    version: Option<String>,
    input: Option<Value>,
    wait: Option<bool>,
) -> IpcResult<RunRecord> {
    let (mode, wf, original) =
        runs::replay_plan(&state, &id, mode.as_deref(), version.as_deref()).await?;
    let run = runs::replay_run(&state, &wf, original, mode, input).await?;
    start(&state, wf, run, wait).await
}

/// The dry walk of a replay, never stored: its run, calls and warnings (`own_claim`: the
/// replay would be stopped by the replayed lineage's own claim; resume instead).
#[tauri::command]
pub async fn preview_replay(
    state: State<'_, AppState>,
    id: String,
    version: Option<String>,
    input: Option<Value>,
) -> IpcResult<RunPreview> {
    Ok(runs::preview_replay(&state, &id, version.as_deref(), input).await?)
}

/// Resume a failed, timed-out or interrupted run from its failed or in-flight step, or from
/// `from_step`. With `wait` (default) answers the finished run, else the queued one.
#[tauri::command]
pub async fn resume_run(
    state: State<'_, AppState>,
    id: String,
    from_step: Option<String>,
    wait: Option<bool>,
) -> IpcResult<RunRecord> {
    let (wf, run) = runs::resume_run(&state, &id, from_step.as_deref()).await?;
    start(&state, wf, run, wait).await
}

/// The dry walk of a resume, never stored: reused steps, calls sent again with their keys,
/// warnings.
#[tauri::command]
pub async fn preview_resume(
    state: State<'_, AppState>,
    id: String,
    from_step: Option<String>,
) -> IpcResult<RunPreview> {
    Ok(runs::preview_resume(&state, &id, from_step.as_deref()).await?)
}

/// What a bulk resume/replay of the failed runs matching `filter` would do, nothing written
/// (as `POST /runs/bulk/preview`).
#[tauri::command]
pub async fn preview_bulk(
    state: State<'_, AppState>,
    filter: Option<RunFilter>,
    version: Option<String>,
) -> IpcResult<BulkSummary> {
    let req = BulkRequest {
        filter: filter.unwrap_or_default(),
        version,
    };
    Ok(runs::preview_bulk(&state, &req).await?)
}

/// Resume or replay live every failed live run matching `filter`; the new runs are queued
/// (as `POST /runs/bulk`).
#[tauri::command]
pub async fn start_bulk(
    state: State<'_, AppState>,
    filter: Option<RunFilter>,
    version: Option<String>,
) -> IpcResult<BulkSummary> {
    let req = BulkRequest {
        filter: filter.unwrap_or_default(),
        version,
    };
    Ok(runs::start_bulk(&state, &req).await?)
}

/// Execute now and answer the finished run (`wait`, default), or queue it.
async fn start(
    state: &AppState,
    wf: Arc<fluxo::workflow::Compiled>,
    run: RunRecord,
    wait: Option<bool>,
) -> IpcResult<RunRecord> {
    if !wait.unwrap_or(true) {
        return Ok(runs::queue_run(state, run).await?);
    }
    Ok(runs::execute_now(state, wf, run).await?)
}
