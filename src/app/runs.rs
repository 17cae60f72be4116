//! Runs (SPEC §4-5): start, queue, execute, list, stats, replay and resume, the use cases the
//! HTTP API, the desktop's IPC and the CLI share.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{json, Value};
use utoipa::IntoParams;

use super::{AppError, AppResult, AppState, ErrorKind};
use crate::clock::parse_rfc3339;
use crate::run::{Mode, RunRecord, RunStatus, Trigger};
use crate::runtime::preview::RunPreview;
use crate::runtime::resume::ResumeError;
use crate::runtime::ResumeFailure;
use crate::runtime::RunRequest;
use crate::store::RunQuery;
use crate::workflow::{check_value, Compiled};

/// The runnable workflow with this id, or a problem.
pub fn runnable(state: &AppState, id: &str) -> AppResult<Arc<Compiled>> {
    let entry = state
        .workflows()
        .get(id)
        .ok_or_else(|| AppError::not_found("workflow_not_found", format!("no workflow `{id}`")))?;
    entry.compiled.clone().ok_or_else(|| {
        AppError::conflict(
            "workflow_invalid",
            format!("workflow `{id}` has validation errors; fix them first"),
        )
        .with_extra(json!({"problems": entry.problems}))
    })
}

/// Store a `queued` run durably (group commit), hand it to the workers, answer it as queued.
pub async fn queue_run(state: &AppState, run: RunRecord) -> AppResult<RunRecord> {
    let run = state.commit().put_run(run).await.map_err(AppError::store)?;
    state.queue().push(run.id.clone());
    Ok(run)
}

/// Execute a run now and answer it finished. In a task of its own, so a caller that goes away
/// (a client's timeout, a closed window) does not cancel a run half-way.
pub async fn execute_now(
    state: &AppState,
    wf: Arc<Compiled>,
    run: RunRecord,
) -> AppResult<RunRecord> {
    let task_state = state.clone();
    tokio::spawn(async move {
        let id = run.id.clone();
        let engine = task_state.engine().clone();
        super::worker::with_lease(&task_state, &id, engine.execute(&wf, run)).await
    })
    .await
    .map_err(|_| AppError::new(ErrorKind::Internal, "internal", "the run task failed"))?
    .map_err(AppError::store)
}

/// Query parameters of `GET /api/v1/runs`. An empty value is no filter.
#[derive(Debug, Deserialize, Default, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct RunsParams {
    /// Only runs of this workflow id.
    pub workflow: Option<String>,
    /// Only runs with this status: `queued`, `running`, `succeeded`, `failed`, `timed_out`,
    /// `interrupted`.
    #[param(value_type = Option<crate::run::RunStatus>, inline)]
    pub status: Option<String>,
    /// Only `live` or only `dry` runs.
    #[param(value_type = Option<crate::run::Mode>, inline)]
    pub mode: Option<String>,
    /// Only runs started by `webhook`, `api`, `manual`, `replay`, `cli` or `resume`.
    #[param(value_type = Option<crate::run::Trigger>, inline)]
    pub trigger: Option<String>,
    /// Only runs with exactly this idempotency (or event) key.
    pub key: Option<String>,
    /// Only runs created at or after this instant: RFC 3339, or unix milliseconds.
    pub since: Option<String>,
    /// Only runs created before this instant: RFC 3339, or unix milliseconds.
    pub until: Option<String>,
    /// Free search: a run id or an idempotency key (exact or prefix).
    pub q: Option<String>,
    /// Runs per page: 1..=500, default 50.
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<usize>,
    /// The `next_cursor` of the previous page (opaque), or a run id (list from it, exclusive).
    /// A page may hold fewer than `limit` runs and still have a `next_cursor`; only a missing
    /// one means the end. Anything else is `400 invalid_cursor`.
    pub cursor: Option<String>,
}

/// At most 80 characters of client input, for a problem's `detail`.
fn truncate_for_message(s: &str) -> String {
    match s.char_indices().nth(80) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// An instant given as RFC 3339 or unix milliseconds.
pub fn parse_instant(name: &str, v: &str) -> AppResult<i64> {
    v.parse::<i64>()
        .ok()
        .or_else(|| parse_rfc3339(v))
        .ok_or_else(|| {
            AppError::bad_request(
                "invalid_parameter",
                format!("`{name}`: `{v}` is neither RFC 3339 nor unix milliseconds"),
            )
        })
}

impl RunsParams {
    /// The store query, or a problem naming the bad parameter.
    pub fn to_query(&self) -> AppResult<RunQuery> {
        let bad = |name: &str, v: &str, allowed: &str| {
            AppError::bad_request(
                "invalid_parameter",
                format!("`{name}`: `{v}` is not one of {allowed}"),
            )
        };
        let status = match self.status.as_deref().filter(|s| !s.is_empty()) {
            None => None,
            Some(s) => Some(RunStatus::parse(s).ok_or_else(|| {
                bad(
                    "status",
                    s,
                    "queued, running, succeeded, failed, timed_out, interrupted, skipped",
                )
            })?),
        };
        let mode = match self.mode.as_deref().filter(|s| !s.is_empty()) {
            None => None,
            Some("live") => Some(Mode::Live),
            Some("dry") => Some(Mode::Dry),
            Some(m) => return Err(bad("mode", m, "live, dry")),
        };
        let trigger = match self.trigger.as_deref().filter(|s| !s.is_empty()) {
            None => None,
            Some(t) => Some(
                serde_json::from_value::<Trigger>(Value::String(t.to_string())).map_err(|_| {
                    bad(
                        "trigger",
                        t,
                        "webhook, api, manual, replay, cli, resume, schedule, fan_out",
                    )
                })?,
            ),
        };
        let limit = self.limit.unwrap_or(50);
        if !(1..=500).contains(&limit) {
            return Err(AppError::bad_request(
                "invalid_parameter",
                format!("`limit`: {limit} is not between 1 and 500"),
            ));
        }
        Ok(RunQuery {
            workflow: self.workflow.clone().filter(|s| !s.is_empty()),
            status,
            mode,
            trigger,
            key: self.key.clone().filter(|s| !s.is_empty()),
            since: self
                .since
                .as_deref()
                .filter(|s| !s.is_empty())
                .map(|v| parse_instant("since", v))
                .transpose()?,
            until: self
                .until
                .as_deref()
                .filter(|s| !s.is_empty())
                .map(|v| parse_instant("until", v))
                .transpose()?,
            q: self.q.clone().filter(|s| !s.is_empty()),
            limit,
            cursor: match self.cursor.as_deref().filter(|s| !s.is_empty()) {
                None => None,
                Some(c) => {
                    crate::store::check_cursor(c).map_err(|why| {
                        AppError::bad_request(
                            "invalid_cursor",
                            format!(
                                "`cursor`: `{}` is not a cursor of this listing: {why}; pass \
                                 the `next_cursor` of the previous page as it came",
                                truncate_for_message(c)
                            ),
                        )
                    })?;
                    Some(c.to_string())
                }
            },
        })
    }
}

/// A page of run summaries for `params` (newest first).
pub async fn list(state: &AppState, params: &RunsParams) -> AppResult<crate::store::RunPage> {
    let q = params.to_query()?;
    state.store().list_runs(&q).await.map_err(AppError::store)
}

/// A run by id, or `404 run_not_found`.
pub async fn load_run(state: &AppState, id: &str) -> AppResult<RunRecord> {
    state
        .store()
        .get_run(id)
        .await
        .map_err(AppError::store)?
        .ok_or_else(|| AppError::not_found("run_not_found", format!("no run `{id}`")))
}

/// The problem of a resume that cannot start.
pub fn resume_problem(e: ResumeFailure) -> AppError {
    match e {
        ResumeFailure::Plan(ResumeError::NothingToResume(m)) => {
            AppError::conflict("nothing_to_resume", m)
        }
        ResumeFailure::Plan(ResumeError::InvalidFromStep(m)) => {
            AppError::bad_request("invalid_from_step", m)
        }
        ResumeFailure::Plan(ResumeError::AlreadyResumed { message, by }) => {
            AppError::conflict("already_resumed", message).with_extra(json!({"resumed_by": by}))
        }
        ResumeFailure::SnapshotInvalid(problems) => AppError::conflict(
            "workflow_invalid",
            "the run's recorded definition no longer validates",
        )
        .with_extra(json!({"problems": problems})),
        ResumeFailure::Store(e) => AppError::store(e),
    }
}

/// Prepare the resume of run `id` (SPEC §4): the definition it runs (the run's snapshot) and
/// the new run, stored with the original's `resumed_by` in one batch, not yet executed.
pub async fn resume_run(
    state: &AppState,
    id: &str,
    from_step: Option<&str>,
) -> AppResult<(Arc<Compiled>, RunRecord)> {
    let original = load_run(state, id).await?;
    let (wf, run, orig) = state
        .engine()
        .resume_run(&original, from_step)
        .await
        .map_err(resume_problem)?;
    state
        .store()
        .put_run(&orig)
        .await
        .map_err(AppError::store)?;
    Ok((wf, run))
}

/// Check a replay request (SPEC §4): the mode (`live` default, `dry`), the definition
/// (`current` default, or the run's recorded `original` snapshot) and the original run.
pub async fn replay_plan(
    state: &AppState,
    id: &str,
    mode: Option<&str>,
    version: Option<&str>,
) -> AppResult<(Mode, Arc<Compiled>, RunRecord)> {
    let mode = match mode {
        None | Some("live") => Mode::Live,
        Some("dry") => Mode::Dry,
        Some(m) => {
            return Err(AppError::bad_request(
                "invalid_body",
                format!("`mode`: `{m}` is not live or dry"),
            ))
        }
    };
    let original = state
        .store()
        .get_run(id)
        .await
        .map_err(AppError::store)?
        .ok_or_else(|| AppError::not_found("run_not_found", format!("no run `{id}`")))?;
    let wf = match version {
        None | Some("current") => runnable(state, &original.workflow_id)?,
        Some("original") => {
            let (c, problems) = check_value(&original.snapshot, state.engine().registry());
            Arc::new(c.ok_or_else(|| {
                AppError::conflict(
                    "workflow_invalid",
                    "the run's recorded definition no longer validates",
                )
                .with_extra(json!({"problems": problems}))
            })?)
        }
        Some(v) => {
            return Err(AppError::bad_request(
                "invalid_body",
                format!("`version`: `{v}` is not current or original"),
            ))
        }
    };
    Ok((mode, wf, original))
}

/// The replay run of `original` (its input, trigger `replay`, its key), linked both ways
/// (`replay_of` / `replayed_by`) before it starts. Not yet executed nor queued.
pub async fn replay_run(
    state: &AppState,
    wf: &Compiled,
    original: RunRecord,
    mode: Mode,
    edited_input: Option<Value>,
) -> AppResult<RunRecord> {
    state
        .engine()
        .link_replay(&original, wf, mode, edited_input)
        .await
        .map_err(AppError::store)
}

/// A new `queued` run of `wf` (not stored): its `input` (default `{}`), started by `trigger`,
/// live, with the request's idempotency `key` if any. Store it with [`queue_run`] or run it
/// with [`execute_now`].
pub fn new_live_run(
    state: &AppState,
    wf: &Compiled,
    input: Option<Value>,
    trigger: Trigger,
    key: Option<String>,
) -> RunRecord {
    let mut req = RunRequest::new(input.unwrap_or_else(|| json!({})), trigger, Mode::Live);
    req.idempotency_key = key;
    state.engine().new_run(wf, req)
}

/// The dry walk of a replay of run `id` ([`replay_plan`]'s `version`), never stored: its run,
/// calls and warnings (`own_claim`: the replay would be stopped by the replayed lineage's own
/// claim; resume instead).
pub async fn preview_replay(
    state: &AppState,
    id: &str,
    version: Option<&str>,
    input: Option<Value>,
) -> AppResult<RunPreview> {
    let (_, wf, original) = replay_plan(state, id, Some("dry"), version).await?;
    Ok(state.engine().preview_replay(&original, &wf, input).await)
}

/// The dry walk of a resume of run `id` (from its failed or in-flight step, or `from_step`),
/// never stored: reused steps, calls sent again with their keys, warnings.
pub async fn preview_resume(
    state: &AppState,
    id: &str,
    from_step: Option<&str>,
) -> AppResult<RunPreview> {
    let original = load_run(state, id).await?;
    state
        .engine()
        .preview_resume(&original, from_step)
        .await
        .map_err(resume_problem)
}

/// Query of `GET /runs/stats`.
#[derive(Debug, Deserialize, Default, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct StatsParams {
    /// Bucket width: `minute`, `hour` (default) or `day`; at most 10,000 buckets.
    #[param(pattern = "^(minute|hour|day)$")]
    pub bucket: Option<String>,
    /// RFC 3339 or unix ms; default `until` − 24 h.
    pub since: Option<String>,
    /// RFC 3339 or unix ms; default now.
    pub until: Option<String>,
    /// Only runs of this workflow id.
    pub workflow: Option<String>,
}

/// Counts of runs by status per bucket: `{bucket_ms, since, until, buckets}`.
pub async fn stats_for(state: &AppState, p: &StatsParams) -> AppResult<Value> {
    let bucket_ms: i64 = match p.bucket.as_deref().unwrap_or("hour") {
        "minute" => 60_000,
        "hour" => 3_600_000,
        "day" => 86_400_000,
        b => {
            return Err(AppError::bad_request(
                "invalid_parameter",
                format!("`bucket`: `{b}` is not minute, hour or day"),
            ))
        }
    };
    let now = state.clock().now_ms();
    let until = p
        .until
        .as_deref()
        .map(|v| parse_instant("until", v))
        .transpose()?
        .unwrap_or(now + 1);
    let since = p
        .since
        .as_deref()
        .map(|v| parse_instant("since", v))
        .transpose()?
        .unwrap_or(until - 24 * 3_600_000);
    if since >= until {
        return Err(AppError::bad_request(
            "invalid_parameter",
            "`since` must be before `until`",
        ));
    }
    if (until - since) / bucket_ms > 10_000 {
        return Err(AppError::bad_request(
            "invalid_parameter",
            "more than 10,000 buckets: use a larger bucket or a shorter range",
        ));
    }
    let wf = p.workflow.as_deref().filter(|w| !w.is_empty());
    let buckets = state
        .store()
        .run_stats(wf, since, until, bucket_ms)
        .await
        .map_err(AppError::store)?;
    Ok(json!({
        "bucket_ms": bucket_ms,
        "since": crate::clock::rfc3339(since),
        "until": crate::clock::rfc3339(until),
        "buckets": buckets,
    }))
}
