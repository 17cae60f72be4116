//! Runs: dry run (of the saved workflow or of the unsaved canvas), start a live run (queued,
//! answered at once), get a run, run history with filters, counts per time bucket, replay.
//! Like `POST /api/v1/workflows/{id}/dry-run`, `POST /api/v1/workflows/{id}/runs` with
//! `Prefer: respond-async`, `GET /api/v1/runs/{id}`, `GET /api/v1/runs`,
//! `GET /api/v1/runs/stats` and `POST /api/v1/runs/{id}/replay`.

use std::sync::Arc;

use fluxo::run::{Mode, RunRecord, Trigger};
use fluxo::runtime::RunRequest;
use fluxo::server::error::ApiError;
use fluxo::server::runs::{parse_instant, runnable, RunsParams};
use fluxo::server::AppState;
use fluxo::store::RunPage;
use fluxo::workflow::check_value;
use serde::Deserialize;
use serde_json::{json, Value};
use tauri::State;

use crate::error::{IpcError, IpcResult};

/// The same walk with every side effect simulated; answers the finished run record.
#[tauri::command]
pub async fn dry_run(
    state: State<'_, AppState>,
    id: String,
    input: Option<Value>,
    workflow: Option<Value>,
) -> IpcResult<RunRecord> {
    let wf = match workflow {
        Some(def) => {
            let (c, problems) = check_value(&def, state.engine().registry());
            Arc::new(c.ok_or_else(|| IpcError {
                problems: Some(json!(problems)),
                ..IpcError::new(
                    "workflow_invalid",
                    "the workflow has validation errors; see `problems`",
                )
            })?)
        }
        None => runnable(&state, &id)?,
    };
    let req = RunRequest::new(
        input.unwrap_or_else(|| json!({})),
        Trigger::Manual,
        Mode::Dry,
    );
    Ok(state.engine().run(&wf, req).await?)
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
    let req = RunRequest::new(
        input.unwrap_or_else(|| json!({})),
        Trigger::Manual,
        Mode::Live,
    );
    queue(&state, state.engine().new_run(&wf, req)).await
}

/// Store a `queued` run durably, then hand it to the listener's workers.
async fn queue(state: &AppState, run: RunRecord) -> IpcResult<RunRecord> {
    let (store, queued) = (state.store().clone(), run.clone());
    tokio::task::spawn_blocking(move || store.put_run(&queued))
        .await
        .map_err(|_| IpcError::internal("queueing the run"))??;
    state.commit().durable().await?;
    state.queue().push(run.id.clone());
    Ok(run)
}

#[tauri::command]
pub async fn get_run(state: State<'_, AppState>, id: String) -> IpcResult<RunRecord> {
    state
        .store()
        .get_run(&id)?
        .ok_or_else(|| IpcError::new("run_not_found", format!("no run `{id}`")))
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
    let query = RunsParams {
        workflow: a.workflow,
        status: a.status,
        mode: a.mode,
        trigger: a.trigger,
        key: a.key,
        since: instant_text(a.since),
        until: instant_text(a.until),
        q: a.q,
        limit: a.limit,
        cursor: a.cursor,
    }
    .to_query()?;
    let store = state.store().clone();
    Ok(tokio::task::spawn_blocking(move || store.list_runs(&query))
        .await
        .map_err(|_| IpcError::internal("listing runs"))??)
}

/// Filters of the status chart (the UI's `RunStatsQuery`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunStatsArgs {
    /// `minute`, `hour` (default) or `day`.
    bucket: Option<String>,
    since: Option<Value>,
    until: Option<Value>,
    workflow: Option<String>,
}

/// Counts of runs by status per time bucket (default: the last 24 hours by hour).
#[tauri::command]
pub async fn run_stats(
    state: State<'_, AppState>,
    query: Option<RunStatsArgs>,
) -> IpcResult<Value> {
    let a = query.unwrap_or_default();
    let bucket_ms: i64 = match a.bucket.as_deref().unwrap_or("hour") {
        "minute" => 60_000,
        "hour" => 3_600_000,
        "day" => 86_400_000,
        b => {
            return Err(IpcError::new(
                "invalid_parameter",
                format!("`bucket`: `{b}` is not minute, hour or day"),
            ))
        }
    };
    let instant = |name: &str, v: Option<Value>| -> IpcResult<Option<i64>> {
        match instant_text(v) {
            Some(t) => Ok(Some(parse_instant(name, &t)?)),
            None => Ok(None),
        }
    };
    let until = instant("until", a.until)?.unwrap_or_else(|| state.clock().now_ms() + 1);
    let since = instant("since", a.since)?.unwrap_or(until - 24 * 3_600_000);
    if since >= until {
        return Err(IpcError::new(
            "invalid_parameter",
            "`since` must be before `until`",
        ));
    }
    if (until - since) / bucket_ms > 10_000 {
        return Err(IpcError::new(
            "invalid_parameter",
            "more than 10,000 buckets: use a larger bucket or a shorter range",
        ));
    }
    let store = state.store().clone();
    let wf = a.workflow.filter(|w| !w.is_empty());
    let buckets = tokio::task::spawn_blocking(move || {
        store.run_stats(wf.as_deref(), since, until, bucket_ms)
    })
    .await
    .map_err(|_| IpcError::internal("counting runs"))??;
    Ok(json!({
        "bucket_ms": bucket_ms,
        "since": fluxo::clock::rfc3339(since),
        "until": fluxo::clock::rfc3339(until),
        "buckets": buckets,
    }))
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
    wait: Option<bool>,
) -> IpcResult<RunRecord> {
    let mode = match mode.as_deref() {
        None | Some("live") => Mode::Live,
        Some("dry") => Mode::Dry,
        Some(m) => {
            return Err(IpcError::new(
                "invalid_body",
                format!("`mode`: `{m}` is not live or dry"),
            ))
        }
    };
    let original = state
        .store()
        .get_run(&id)?
        .ok_or_else(|| IpcError::new("run_not_found", format!("no run `{id}`")))?;
    let wf = match version.as_deref() {
        None | Some("current") => runnable(&state, &original.workflow_id)?,
        Some("original") => {
            let (c, problems) = check_value(&original.snapshot, state.engine().registry());
            Arc::new(c.ok_or_else(|| {
                IpcError::from(
                    ApiError::conflict(
                        "workflow_invalid",
                        "the run's recorded definition no longer validates",
                    )
                    .with_extra(json!({"problems": problems})),
                )
            })?)
        }
        Some(v) => {
            return Err(IpcError::new(
                "invalid_body",
                format!("`version`: `{v}` is not current or original"),
            ))
        }
    };
    let mut req = RunRequest::new(original.input.clone(), Trigger::Replay, mode);
    req.replay_of = Some(original.id.clone());
    req.idempotency_key = original.idempotency_key.clone();
    let run = state.engine().new_run(&wf, req);
    // Link both ways before the new run starts.
    let mut orig = original;
    orig.replayed_by.push(run.id.clone());
    state.store().put_run(&orig)?;
    if !wait.unwrap_or(true) {
        return queue(&state, run).await;
    }
    // Its own task: the run finishes even if the window goes away meanwhile.
    let engine = state.engine().clone();
    Ok(tokio::spawn(async move { engine.execute(&wf, run).await })
        .await
        .map_err(|_| IpcError::internal("the replay"))??)
}
