//! Runs (SPEC §4-5): start, queue, execute, list, stats, replay and resume, the use cases the
//! HTTP API, the desktop's IPC and the CLI share.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::{IntoParams, ToSchema};

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
    .and_then(|done| done)
    .map_err(AppError::store)
    .inspect(|done| state.duplicates().note_run(done))
}

/// Query parameters of `GET /api/v1/runs`. An empty value is no filter.
#[derive(Debug, Clone, Deserialize, Default, IntoParams)]
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
    /// Free search: a run id, an idempotency key, or a value inside the run (a string of its
    /// input or step outputs, e.g. a customer id), exact or prefix.
    pub q: Option<String>,
    /// Only runs that failed for this reason, as `GET /runs/stats` groups them
    /// (`HTTP 500 at create`, `template_error at boom`).
    pub error: Option<String>,
    /// `stopped`: only runs that stopped at least one duplicate delivery (at the door, by a
    /// Memory claim or by the app's dedupe; `GET /runs/{id}/deliveries`).
    #[param(pattern = "^stopped$")]
    pub duplicates: Option<String>,
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
            error: self.error.clone().filter(|s| !s.is_empty()),
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

/// A page of run summaries for `params` (newest first), each failed run that a later run of
/// its lineage fixed naming it in `fixed_by` ([`fixed_by`]) and each run that stopped
/// duplicates counting them in `duplicates_stopped` ([`super::duplicates`]). With
/// `duplicates=stopped` only such runs are listed: the store's pages are read until `limit`
/// of them are found or [`DUPLICATES_FILTER_PAGES`] pages were read (a page may then hold
/// fewer, with a `next_cursor`).
pub async fn list(state: &AppState, params: &RunsParams) -> AppResult<crate::store::RunPage> {
    let mut q = params.to_query()?;
    let only_stopped = match params.duplicates.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some("stopped") => Some(super::duplicates::run_ids(state, q.workflow.as_deref()).await?),
        Some(v) => {
            return Err(AppError::bad_request(
                "invalid_parameter",
                format!(
                    "`duplicates`: `{}` is not `stopped`",
                    truncate_for_message(v)
                ),
            ))
        }
    };
    let mut page = state.store().list_runs(&q).await.map_err(AppError::store)?;
    if let Some(ids) = only_stopped {
        let mut runs = Vec::new();
        let mut read = 1;
        loop {
            runs.extend(page.runs.drain(..).filter(|r| ids.contains(&r.id)));
            match page.next_cursor.take() {
                Some(c)
                    if runs.len() < q.limit
                        && read < DUPLICATES_FILTER_PAGES
                        && !ids.is_empty() =>
                {
                    q.cursor = Some(c);
                    page = state.store().list_runs(&q).await.map_err(AppError::store)?;
                    read += 1;
                }
                next => {
                    page.next_cursor = next;
                    break;
                }
            }
        }
        if runs.len() > q.limit {
            runs.truncate(q.limit);
            page.next_cursor = runs.last().map(|r| format!("{}:{}", r.created_at.0, r.id));
        }
        page.runs = runs;
    }
    let ids: Vec<&str> = page.runs.iter().map(|r| r.id.as_str()).collect();
    let counts = super::duplicates::counts(state, &ids).await?;
    for s in &mut page.runs {
        s.duplicates_stopped = counts.get(&s.id).copied().unwrap_or(0);
        if !s.resumed_by.is_empty() || !s.replayed_by.is_empty() {
            s.fixed_by =
                fixed_by_links(state, s.status, s.mode, &s.resumed_by, &s.replayed_by).await?;
        }
    }
    Ok(page)
}

/// The runs a `duplicates` filter keeps: `None` without one, the ids of runs that stopped a
/// duplicate (of `workflow`, when given) for `stopped`, else `400 invalid_parameter`.
pub async fn only_stopped(
    state: &AppState,
    duplicates: Option<&str>,
    workflow: Option<&str>,
) -> AppResult<Option<std::collections::HashSet<String>>> {
    match duplicates.filter(|s| !s.is_empty()) {
        None => Ok(None),
        Some("stopped") => Ok(Some(super::duplicates::run_ids(state, workflow).await?)),
        Some(v) => Err(AppError::bad_request(
            "invalid_parameter",
            format!(
                "`duplicates`: `{}` is not `stopped`",
                truncate_for_message(v)
            ),
        )),
    }
}

/// Most store pages one `duplicates=stopped` listing reads.
pub const DUPLICATES_FILTER_PAGES: usize = 20;

/// A run by id, or `404 run_not_found`.
pub async fn load_run(state: &AppState, id: &str) -> AppResult<RunRecord> {
    state
        .store()
        .get_run(id)
        .await
        .map_err(AppError::store)?
        .ok_or_else(|| AppError::not_found("run_not_found", format!("no run `{id}`")))
}

/// A run's deliveries: the first (the run) and every duplicate of it stopped, or `404
/// run_not_found`.
pub async fn deliveries(state: &AppState, id: &str) -> AppResult<super::duplicates::Deliveries> {
    let run = load_run(state, id).await?;
    super::duplicates::deliveries(state, &run).await
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
        ResumeFailure::Plan(ResumeError::AlreadyResumed { message, by, fixed }) => {
            let extra = if fixed {
                json!({"resumed_by": by, "fixed_by": by})
            } else {
                json!({"resumed_by": by})
            };
            AppError::conflict("already_resumed", message).with_extra(extra)
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

/// Query of `GET /runs/stats`: the list's filters (an empty value is no filter), the range
/// and the bucket.
#[derive(Debug, Deserialize, Default, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct StatsParams {
    /// Bucket width: `auto` (default: the smallest of 1, 5, 15 min, 1, 3, 6, 12 h, 1, 7,
    /// 30 days that draws the range in at most 60 bars), `minute`, `hour` or `day` (at most
    /// 10,000 buckets).
    #[param(pattern = "^(auto|minute|hour|day)$")]
    pub bucket: Option<String>,
    /// RFC 3339 or unix ms; default: the oldest matching run (all time).
    pub since: Option<String>,
    /// RFC 3339 or unix ms; default now.
    pub until: Option<String>,
    /// Only runs of this workflow id.
    pub workflow: Option<String>,
    /// Only runs with this status.
    #[param(value_type = Option<crate::run::RunStatus>, inline)]
    pub status: Option<String>,
    /// Only `live` or only `dry` runs.
    #[param(value_type = Option<crate::run::Mode>, inline)]
    pub mode: Option<String>,
    /// Only runs started by this trigger.
    #[param(value_type = Option<crate::run::Trigger>, inline)]
    pub trigger: Option<String>,
    /// Only runs with exactly this idempotency (or event) key.
    pub key: Option<String>,
    /// Free search, as in the list: a run id, a key or a value inside the run, exact or prefix.
    pub q: Option<String>,
    /// Only runs that failed for this reason (a `failures[].reason`).
    pub error: Option<String>,
    /// `stopped`: only runs that stopped a duplicate delivery (as in the list).
    #[param(pattern = "^stopped$")]
    pub duplicates: Option<String>,
}

/// Most runs one `GET /runs/stats` reads when its filters include `key`, `q` or `error` (the
/// count aggregates do not cover them); past it the answer says `complete: false`.
pub const STATS_MAX_RUNS: usize = 200_000;

/// The widths `bucket=auto` chooses from, smallest first.
const AUTO_BUCKETS: [i64; 10] = [
    60_000,
    5 * 60_000,
    15 * 60_000,
    3_600_000,
    3 * 3_600_000,
    6 * 3_600_000,
    12 * 3_600_000,
    86_400_000,
    7 * 86_400_000,
    30 * 86_400_000,
];

/// Most bars `bucket=auto` draws.
const AUTO_MAX_BARS: i64 = 60;

/// [`percentiles`] of each `(name, histogram)`, in order, each naming its `label` member.
fn labelled_percentiles(
    list: Vec<(String, crate::store::DurationHistogram)>,
    label: &str,
) -> Vec<Value> {
    list.into_iter()
        .map(|(name, h)| {
            let mut v = percentiles(&h);
            v[label] = json!(name);
            v
        })
        .collect()
}

/// Nearest-rank percentiles of a duration histogram: `{count, p50_ms, p95_ms, p99_ms}` (ms;
/// exact under 128 ms, within 0.4% above: [`crate::store::DurationHistogram`]).
fn percentiles(h: &crate::store::DurationHistogram) -> Value {
    match (h.percentile(50.0), h.percentile(95.0), h.percentile(99.0)) {
        (Some(p50), Some(p95), Some(p99)) => {
            json!({"count": h.count(), "p50_ms": p50, "p95_ms": p95, "p99_ms": p99})
        }
        _ => json!({"count": 0}),
    }
}

/// What `GET /runs/stats` answers for the list's filters: `{bucket_ms, since, until, buckets,
/// total, counts, complete, duration, durations, steps, failures}`. `total` counts every
/// matching run in the range and `counts` per status; `buckets` per status in bars of
/// `bucket_ms` (aligned on the unix epoch, at most 10,000: the newest); `duration` and
/// `durations` (per workflow, most runs first) are nearest-rank p50/p95/p99 (ms) of finished
/// runs' `duration_ms`, exact under 128 ms and within 0.4% above (log-spaced histogram bins,
/// [`crate::store::DurationHistogram`]); `steps` (only when `workflow` is given, else empty)
/// the same per step of that workflow over the steps the finished runs executed
/// ([`crate::store::RunSummary::step_durations`]; steps reused by a resume are not counted
/// again), in the order of the workflow file, then steps it no longer has by id; `failures` groups failed runs by
/// [`crate::store::RunSummary::failure_reason`], most first (at most 20); `duplicates` the
/// duplicate deliveries stopped in the range, `{total, buckets: [{start, count}], complete}`
/// in the same bars, filtered by `workflow` only ([`super::duplicates::over_time`]). Without
/// `since` the range starts at the oldest matching run ("all time").
///
/// Filters over `workflow`, `status`, `mode`, `trigger`, `since` and `until` are answered from
/// the store's count aggregates ([`crate::store::RunStore::count_runs`]) without reading runs,
/// always `complete`. With `key`, `q` or `error` it reads the matching summaries through the
/// list's indexes, at most [`STATS_MAX_RUNS`] (`complete: false` past it).
pub async fn stats_for(state: &AppState, p: &StatsParams) -> AppResult<Value> {
    let fixed_bucket: Option<i64> = match p.bucket.as_deref().filter(|b| !b.is_empty()) {
        None | Some("auto") => None,
        Some("minute") => Some(60_000),
        Some("hour") => Some(3_600_000),
        Some("day") => Some(86_400_000),
        Some(b) => {
            return Err(AppError::bad_request(
                "invalid_parameter",
                format!("`bucket`: `{b}` is not auto, minute, hour or day"),
            ))
        }
    };
    let list = RunsParams {
        workflow: p.workflow.clone(),
        status: p.status.clone(),
        mode: p.mode.clone(),
        trigger: p.trigger.clone(),
        key: p.key.clone(),
        since: p.since.clone(),
        until: p.until.clone(),
        q: p.q.clone(),
        error: p.error.clone(),
        duplicates: p.duplicates.clone(),
        limit: Some(500),
        cursor: None,
    };
    let mut query = list.to_query()?;
    let only = only_stopped(state, list.duplicates.as_deref(), query.workflow.as_deref()).await?;
    let now = state.clock().now_ms();
    let until = query.until.unwrap_or(now.saturating_add(1));
    query.until = Some(until);
    if let Some(since) = query.since {
        if since >= until {
            return Err(AppError::bad_request(
                "invalid_parameter",
                "`since` must be before `until`",
            ));
        }
        if let Some(b) = fixed_bucket {
            if until.saturating_sub(since) / b > 10_000 {
                return Err(AppError::bad_request(
                    "invalid_parameter",
                    "more than 10,000 buckets: use a larger bucket or a shorter range",
                ));
            }
        }
    }
    if query.key.is_none() && query.q.is_none() && query.error.is_none() && only.is_none() {
        return stats_from_counts(state, &query, until, fixed_bucket).await;
    }

    // One pass over the matching runs, newest first.
    let mut seen: Vec<(i64, RunStatus)> = Vec::new();
    let mut counted = crate::store::RunCounts::default();
    let mut complete = true;
    loop {
        let page = state
            .store()
            .list_runs(&query)
            .await
            .map_err(AppError::store)?;
        for s in &page.runs {
            if only.as_ref().is_some_and(|ids| !ids.contains(&s.id)) {
                continue;
            }
            seen.push((s.created_at.0, s.status));
            // Totals, durations and failures over the whole range (one bucket); step
            // durations when one workflow is asked for.
            let whole = crate::store::CountQuery {
                filter: crate::store::CountFilter {
                    workflow: query.workflow.clone(),
                    ..Default::default()
                },
                since: i64::MIN,
                until: i64::MAX,
                bucket_ms: 0,
            };
            counted.add_summary(s, &whole);
        }
        match page.next_cursor {
            Some(c) if seen.len() < STATS_MAX_RUNS => query.cursor = Some(c),
            Some(_) => {
                complete = false;
                break;
            }
            None => break,
        }
    }

    // The range: as asked, else from the oldest matching run (a day when there is none).
    let since = query.since.unwrap_or_else(|| {
        seen.last()
            .map(|(t, _)| *t)
            .unwrap_or(until.saturating_sub(86_400_000))
            .min(until.saturating_sub(1))
    });
    let bucket_ms = stats_bucket(fixed_bucket, since, until);
    let drawn_since = since.max(until.saturating_sub(bucket_ms.saturating_mul(10_000)));
    counted.buckets.clear();
    for (t, st) in &seen {
        if *t >= drawn_since {
            *counted
                .buckets
                .entry(t - t.rem_euclid(bucket_ms))
                .or_default()
                .entry(st.as_str().to_string())
                .or_default() += 1;
        }
    }
    let range = StatsRange {
        since,
        until,
        bucket_ms,
        drawn_since,
    };
    stats_answer(state, query.workflow.as_deref(), range, counted, complete).await
}

/// The range of a stats answer: `[since, until)`, bars of `bucket_ms` drawn from `drawn_since`.
struct StatsRange {
    since: i64,
    until: i64,
    bucket_ms: i64,
    drawn_since: i64,
}

/// The answer of `GET /runs/stats` from the counted runs: with the step order of `workflow`
/// and the duplicates stopped in the range ([`duplicates_json`]).
async fn stats_answer(
    state: &AppState,
    workflow: Option<&str>,
    r: StatsRange,
    counted: crate::store::RunCounts,
    complete: bool,
) -> AppResult<Value> {
    let order = step_order(state, workflow);
    let dups = duplicates_json(
        state,
        workflow,
        r.since,
        r.until,
        r.bucket_ms,
        r.drawn_since,
    )
    .await?;
    Ok(stats_json(
        r.bucket_ms,
        r.since,
        r.until,
        counted,
        complete,
        &order,
        dups,
    ))
}

/// The `duplicates` member of `GET /runs/stats`: `{total, buckets: [{start, count}],
/// complete}`, the duplicates stopped in the range by the time they were stopped, of the
/// `workflow` filter only (the other filters are about runs).
async fn duplicates_json(
    state: &AppState,
    workflow: Option<&str>,
    since: i64,
    until: i64,
    bucket_ms: i64,
    drawn_since: i64,
) -> AppResult<Value> {
    let (total, bars, complete) =
        super::duplicates::over_time(state, workflow, since, until, bucket_ms, drawn_since).await?;
    let buckets: Vec<Value> = bars
        .into_iter()
        .map(|(start, count)| json!({"start": crate::clock::rfc3339(start), "count": count}))
        .collect();
    Ok(json!({"total": total, "buckets": buckets, "complete": complete}))
}

/// The step ids of `workflow` in the order of its file (empty without one, or for a workflow
/// that is gone).
fn step_order(state: &AppState, workflow: Option<&str>) -> Vec<String> {
    let Some(entry) = workflow.and_then(|w| state.workflows().get(w)) else {
        return Vec::new();
    };
    entry
        .value
        .as_ref()
        .and_then(|v| v.get("steps"))
        .and_then(Value::as_array)
        .map(|steps| {
            steps
                .iter()
                .filter_map(|s| s.get("id").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The bar width: the asked one, else the smallest of [`AUTO_BUCKETS`] that draws
/// `[since, until)` in at most [`AUTO_MAX_BARS`] bars.
fn stats_bucket(fixed: Option<i64>, since: i64, until: i64) -> i64 {
    fixed.unwrap_or_else(|| {
        let span = until.saturating_sub(since);
        AUTO_BUCKETS
            .into_iter()
            .find(|b| span.saturating_add(b - 1) / b <= AUTO_MAX_BARS)
            .unwrap_or(AUTO_BUCKETS[AUTO_BUCKETS.len() - 1])
    })
}

/// `GET /runs/stats` for filters the count aggregates cover: two or three store calls, no run
/// read (the oldest matching run when `since` is missing, the counts of the range, and the
/// drawn part's bars when more than 10,000 bars would not fit).
async fn stats_from_counts(
    state: &AppState,
    query: &RunQuery,
    until: i64,
    fixed_bucket: Option<i64>,
) -> AppResult<Value> {
    let filter = crate::store::CountFilter {
        workflow: query.workflow.clone(),
        status: query.status,
        mode: query.mode,
        trigger: query.trigger,
    };
    let store = state.store();
    let since = match query.since {
        Some(s) => s,
        None => store
            .oldest_run(&filter, until)
            .await
            .map_err(AppError::store)?
            .unwrap_or(until.saturating_sub(86_400_000))
            .min(until.saturating_sub(1)),
    };
    let bucket_ms = stats_bucket(fixed_bucket, since, until);
    let drawn_since = since.max(until.saturating_sub(bucket_ms.saturating_mul(10_000)));
    let count = |since, bucket_ms| crate::store::CountQuery {
        filter: filter.clone(),
        since,
        until,
        bucket_ms,
    };
    let counted = if drawn_since > since {
        // Totals over the whole range (one bucket: the coarsest counters fit), bars over the
        // drawn part.
        let mut whole = store
            .count_runs(&count(since, 0))
            .await
            .map_err(AppError::store)?;
        let drawn = store
            .count_runs(&count(drawn_since, bucket_ms))
            .await
            .map_err(AppError::store)?;
        whole.buckets = drawn.buckets;
        whole
    } else {
        store
            .count_runs(&count(since, bucket_ms))
            .await
            .map_err(AppError::store)?
    };
    let range = StatsRange {
        since,
        until,
        bucket_ms,
        drawn_since,
    };
    stats_answer(state, query.workflow.as_deref(), range, counted, true).await
}

/// The JSON of `GET /runs/stats` ([`stats_for`]); `step_order`: the workflow's step ids in
/// file order (the order of `steps`).
fn stats_json(
    bucket_ms: i64,
    since: i64,
    until: i64,
    counted: crate::store::RunCounts,
    complete: bool,
    step_order: &[String],
    duplicates: Value,
) -> Value {
    let total = counted.total();
    let buckets: Vec<crate::store::StatsBucket> = counted
        .buckets
        .into_iter()
        .map(|(start, counts)| crate::store::StatsBucket {
            start: crate::run::Timestamp(start),
            counts,
        })
        .collect();
    let mut all = crate::store::DurationHistogram::default();
    for h in counted.durations.values() {
        all.merge(h);
    }
    let mut per_wf: Vec<(String, crate::store::DurationHistogram)> =
        counted.durations.into_iter().collect();
    per_wf.sort_by(|a, b| b.1.count().cmp(&a.1.count()).then(a.0.cmp(&b.0)));
    let per_wf = labelled_percentiles(per_wf, "workflow_id");
    let mut per_step: Vec<(String, crate::store::DurationHistogram)> =
        counted.steps.into_iter().collect();
    let position = |id: &str| {
        step_order
            .iter()
            .position(|s| s == id)
            .unwrap_or(usize::MAX)
    };
    per_step.sort_by(|a, b| position(&a.0).cmp(&position(&b.0)).then(a.0.cmp(&b.0)));
    let per_step = labelled_percentiles(per_step, "step_id");
    let mut failures: Vec<(String, u64)> = counted.failures.into_iter().collect();
    failures.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    failures.truncate(20);
    json!({
        "bucket_ms": bucket_ms,
        "since": crate::clock::rfc3339(since),
        "until": crate::clock::rfc3339(until),
        "buckets": buckets,
        "total": total,
        "counts": counted.counts,
        "complete": complete,
        "duration": percentiles(&all),
        "durations": per_wf,
        "steps": per_step,
        "failures": failures
            .into_iter()
            .map(|(reason, count)| json!({"reason": reason, "count": count}))
            .collect::<Vec<_>>(),
        "duplicates": duplicates,
    })
}

// ---------------------------------------------------------------------------------------------
// Lineage outcome
// ---------------------------------------------------------------------------------------------

/// The run that fixed `run`, if any ([`crate::runtime::Engine::fixed_by`]): the first
/// descendant (over `resumed_by` and `replayed_by`, breadth first, oldest first) that
/// succeeded.
pub async fn fixed_by(state: &AppState, run: &RunRecord) -> AppResult<Option<String>> {
    fixed_by_links(
        state,
        run.status,
        run.mode,
        &run.resumed_by,
        &run.replayed_by,
    )
    .await
}

async fn fixed_by_links(
    state: &AppState,
    status: RunStatus,
    mode: Mode,
    resumed_by: &[String],
    replayed_by: &[String],
) -> AppResult<Option<String>> {
    Ok(state
        .engine()
        .fixed_by_links(status, mode, resumed_by, replayed_by)
        .await
        .map_err(AppError::store)?
        .map(|f| f.run_id))
}

// ---------------------------------------------------------------------------------------------
// Bulk resume and replay over a filter
// ---------------------------------------------------------------------------------------------

/// The most failed runs one bulk action covers; more is `422 too_many_runs`.
pub const BULK_MAX_RUNS: usize = 10_000;

/// Which runs a bulk action covers: the filters of `GET /runs` (every one optional; an empty
/// value is no filter), without paging.
#[derive(Debug, Clone, Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunFilter {
    /// Only runs of this workflow id.
    pub workflow: Option<String>,
    /// Only runs with this status. A bulk action acts on failed runs only (`failed`,
    /// `timed_out`, `interrupted`); without a status it takes all three.
    #[schema(value_type = Option<crate::run::RunStatus>, inline)]
    pub status: Option<String>,
    /// Only `live` or only `dry` runs.
    #[schema(value_type = Option<crate::run::Mode>, inline)]
    pub mode: Option<String>,
    /// Only runs with this trigger.
    #[schema(value_type = Option<crate::run::Trigger>, inline)]
    pub trigger: Option<String>,
    /// Only runs with exactly this idempotency (or event) key.
    pub key: Option<String>,
    /// Created at or after: RFC 3339 text, or unix milliseconds (text or number).
    #[schema(value_type = Option<String>)]
    pub since: Option<Value>,
    /// Created before: RFC 3339 text, or unix milliseconds (text or number).
    #[schema(value_type = Option<String>)]
    pub until: Option<Value>,
    /// Free search: a run id, an idempotency key or a value inside the run (exact or prefix).
    pub q: Option<String>,
    /// Only runs that failed for this reason (`HTTP 500 at create`, see `GET /runs/stats`).
    pub error: Option<String>,
    /// `stopped`: only runs that stopped a duplicate delivery.
    #[schema(pattern = "^stopped$")]
    pub duplicates: Option<String>,
}

/// The request of a bulk action and of its preview.
#[derive(Debug, Clone, Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkRequest {
    /// The runs to act on (default: every run).
    #[serde(default)]
    pub filter: RunFilter,
    /// The definition a replay runs: `current` (default) or `original` (the run's recorded
    /// snapshot). Resumes always run the snapshot.
    #[schema(value_type = Option<String>, pattern = "^(current|original)$")]
    pub version: Option<String>,
}

/// What a bulk action does (or did) with one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum BulkAction {
    /// Resumed where it stopped (a new run with `resume_of`).
    Resume,
    /// Replayed live (a new run with `replay_of`).
    Replay,
    /// Left alone on purpose: `reason` says why.
    Skip,
    /// Could not be started: `reason` is the problem's code, `detail` its message.
    Error,
}

/// One run of a bulk action.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BulkItem {
    /// The failed run.
    pub run_id: String,
    pub action: BulkAction,
    /// The run started for it (queued), on `resume` and `replay`; on a skip `fixed` or
    /// `already_resumed`, the run that fixed or resumed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_run_id: Option<String>,
    /// Why it was skipped (`fixed`, `already_resumed`, `not_runnable`, `gone`) or the code of
    /// the error that stopped it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A sentence for people, on a skip or an error.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// What a bulk action over a filter would do (`POST /runs/bulk/preview`) or did
/// (`POST /runs/bulk`).
#[derive(Debug, Clone, Serialize, Default, ToSchema)]
pub struct BulkSummary {
    /// Failed runs (`failed`, `timed_out`, `interrupted`) matching the filter, dry ones
    /// included.
    pub matched: usize,
    /// Of those, live runs: the ones acted on.
    pub live: usize,
    /// Live runs resumed (or to resume): resumable, not resumed yet and not fixed.
    pub resume: usize,
    /// Live runs replayed live (or to replay): they cannot be resumed (e.g. their recorded
    /// definition no longer validates).
    pub replay: usize,
    /// Live runs left alone: fixed by a later run, already resumed, or not runnable.
    pub skipped: usize,
    /// Runs that could not be started (execution only).
    pub errors: usize,
    /// Dry runs matched and excluded: a dry run is never replayed live.
    pub dry_excluded: usize,
    /// The most failed runs one action covers (10,000).
    pub limit: usize,
    /// The instant the matching runs were read at (RFC 3339): pass it as `filter.until` to
    /// act on exactly the previewed set, not on runs that arrive later.
    pub as_of: String,
    /// Every live run with its action (in the preview, `new_run_id` is only set on a skip).
    pub runs: Vec<BulkItem>,
}

/// An instant of a JSON body: RFC 3339 text or unix milliseconds (number or text).
fn instant_value(name: &str, v: &Option<Value>) -> AppResult<Option<String>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(other) => Err(AppError::bad_request(
            "invalid_parameter",
            format!("`{name}`: {other} is neither RFC 3339 text nor unix milliseconds"),
        )),
    }
}

impl RunFilter {
    /// The listing parameters of this filter (pages of 500).
    pub fn to_params(&self) -> AppResult<RunsParams> {
        Ok(RunsParams {
            workflow: self.workflow.clone(),
            status: self.status.clone(),
            mode: self.mode.clone(),
            trigger: self.trigger.clone(),
            key: self.key.clone(),
            since: instant_value("since", &self.since)?,
            until: instant_value("until", &self.until)?,
            q: self.q.clone(),
            error: self.error.clone(),
            duplicates: self.duplicates.clone(),
            limit: Some(500),
            cursor: None,
        })
    }
}

/// Every failed run matching `filter`, newest first, or `422 too_many_runs` past
/// [`BULK_MAX_RUNS`].
async fn failed_matching(
    state: &AppState,
    filter: &RunFilter,
) -> AppResult<Vec<crate::store::RunSummary>> {
    let params = filter.to_params()?;
    let base = params.to_query()?;
    let only = only_stopped(
        state,
        params.duplicates.as_deref(),
        base.workflow.as_deref(),
    )
    .await?;
    let statuses: Vec<RunStatus> = match base.status {
        Some(s) if crate::runtime::resume::is_resumable(s) => vec![s],
        Some(_) => Vec::new(),
        None => vec![
            RunStatus::Failed,
            RunStatus::TimedOut,
            RunStatus::Interrupted,
        ],
    };
    let mut out = Vec::new();
    for status in statuses {
        let mut q = RunQuery {
            status: Some(status),
            ..base.clone()
        };
        loop {
            let page = state.store().list_runs(&q).await.map_err(AppError::store)?;
            out.extend(
                page.runs
                    .into_iter()
                    .filter(|r| only.as_ref().is_none_or(|ids| ids.contains(&r.id))),
            );
            if out.len() > BULK_MAX_RUNS {
                return Err(AppError::new(
                    ErrorKind::Unprocessable,
                    "too_many_runs",
                    format!(
                        "more than {BULK_MAX_RUNS} failed runs match this filter; narrow it \
                         (a workflow, a shorter time range) and act on each part"
                    ),
                )
                .with_extra(json!({"limit": BULK_MAX_RUNS})));
            }
            match page.next_cursor {
                Some(c) => q.cursor = Some(c),
                None => break,
            }
        }
    }
    out.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
    Ok(out)
}

/// Check a bulk request's `version`.
fn bulk_version(v: Option<&str>) -> AppResult<&'static str> {
    match v {
        None | Some("current") => Ok("current"),
        Some("original") => Ok("original"),
        Some(v) => Err(AppError::bad_request(
            "invalid_body",
            format!("`version`: `{v}` is not current or original"),
        )),
    }
}

/// Decides, run by run, whether to resume, replay or skip; compiles each definition once.
struct Classifier<'a> {
    state: &'a AppState,
    version: &'static str,
    snapshots: std::collections::HashMap<String, Option<Arc<Compiled>>>,
    current: std::collections::HashMap<String, Result<(), String>>,
}

impl Classifier<'_> {
    fn skip(run: &RunRecord, reason: &str, new: Option<String>, detail: String) -> BulkItem {
        BulkItem {
            run_id: run.id.clone(),
            action: BulkAction::Skip,
            new_run_id: new,
            reason: Some(reason.to_string()),
            detail: Some(detail),
        }
    }

    async fn classify(&mut self, run: &RunRecord) -> AppResult<BulkItem> {
        if let Some(by) = fixed_by(self.state, run).await? {
            let detail = format!("fixed by run `{by}`");
            return Ok(Self::skip(run, "fixed", Some(by), detail));
        }
        if let Some(by) = run.resumed_by.last() {
            let detail = format!("already resumed by run `{by}`: act on that one");
            return Ok(Self::skip(run, "already_resumed", Some(by.clone()), detail));
        }
        let snapshot = match self.snapshots.get(&run.definition_hash) {
            Some(c) => c.clone(),
            None => {
                let c = self.state.engine().compile_snapshot(run).ok();
                self.snapshots
                    .insert(run.definition_hash.clone(), c.clone());
                c
            }
        };
        if let Some(wf) = &snapshot {
            if crate::runtime::resume::plan(run, wf, None).is_ok() {
                return Ok(BulkItem {
                    run_id: run.id.clone(),
                    action: BulkAction::Resume,
                    new_run_id: None,
                    reason: None,
                    detail: None,
                });
            }
        }
        let replayable = if self.version == "original" {
            snapshot
                .map(|_| ())
                .ok_or_else(|| "its recorded definition no longer validates".to_string())
        } else {
            self.current
                .entry(run.workflow_id.clone())
                .or_insert_with(|| {
                    runnable(self.state, &run.workflow_id)
                        .map(|_| ())
                        .map_err(|e| e.message)
                })
                .clone()
        };
        Ok(match replayable {
            Ok(()) => BulkItem {
                run_id: run.id.clone(),
                action: BulkAction::Replay,
                new_run_id: None,
                reason: None,
                detail: None,
            },
            Err(why) => Self::skip(
                run,
                "not_runnable",
                None,
                format!("cannot be resumed nor replayed: {why}"),
            ),
        })
    }
}

/// Classify every failed run matching the request: the summary (counts and one item per live
/// run) and the live runs' records, in the same order.
async fn bulk_plan(
    state: &AppState,
    req: &BulkRequest,
) -> AppResult<(BulkSummary, Vec<RunRecord>)> {
    let version = bulk_version(req.version.as_deref())?;
    // Exclusive as `until` is: a run created in this very millisecond is in the set.
    let as_of = state.clock().now_ms() + 1;
    let matched = failed_matching(state, &req.filter).await?;
    let mut out = BulkSummary {
        matched: matched.len(),
        limit: BULK_MAX_RUNS,
        as_of: crate::clock::rfc3339(as_of),
        ..Default::default()
    };
    let mut classifier = Classifier {
        state,
        version,
        snapshots: Default::default(),
        current: Default::default(),
    };
    let mut records = Vec::new();
    for s in matched {
        if s.mode == Mode::Dry {
            out.dry_excluded += 1;
            continue;
        }
        let Some(run) = state
            .store()
            .get_run(&s.id)
            .await
            .map_err(AppError::store)?
        else {
            continue;
        };
        out.live += 1;
        let item = classifier.classify(&run).await?;
        match item.action {
            BulkAction::Resume => out.resume += 1,
            BulkAction::Replay => out.replay += 1,
            BulkAction::Skip | BulkAction::Error => out.skipped += 1,
        }
        out.runs.push(item);
        records.push(run);
    }
    Ok((out, records))
}

/// What [`start_bulk`] would do with the failed runs matching `req.filter`, nothing written:
/// counts (matched, live, to resume, to replay, skipped, dry excluded) and each live run's
/// action. Errors: `400 invalid_parameter` (a bad filter value), `400 invalid_body` (a bad
/// `version`), `422 too_many_runs` (more than [`BULK_MAX_RUNS`] failed runs match).
pub async fn preview_bulk(state: &AppState, req: &BulkRequest) -> AppResult<BulkSummary> {
    Ok(bulk_plan(state, req).await?.0)
}

/// Act on every failed live run matching `req.filter`: resume it where it can be resumed
/// (SPEC §4 "Resume"), else replay it live with `req.version`; skip the ones a later run
/// fixed or that were resumed already. Dry runs are never replayed live: they are excluded.
/// The new runs are queued (the workers execute them; follow them by id or on the event
/// stream) and named per original in `runs[].new_run_id`. A run that cannot be started
/// counts in `errors`, with its problem code in `reason`. Errors as [`preview_bulk`].
pub async fn start_bulk(state: &AppState, req: &BulkRequest) -> AppResult<BulkSummary> {
    let (mut out, records) = bulk_plan(state, req).await?;
    let version = bulk_version(req.version.as_deref())?;
    for (item, original) in out.runs.iter_mut().zip(records) {
        let started = match item.action {
            BulkAction::Resume => match resume_run(state, &original.id, None).await {
                Ok((_, run)) => queue_run(state, run).await,
                Err(e) => Err(e),
            },
            BulkAction::Replay => {
                match replay_plan(state, &original.id, Some("live"), Some(version)).await {
                    Ok((mode, wf, original)) => {
                        match replay_run(state, &wf, original, mode, None).await {
                            Ok(run) => queue_run(state, run).await,
                            Err(e) => Err(e),
                        }
                    }
                    Err(e) => Err(e),
                }
            }
            BulkAction::Skip | BulkAction::Error => continue,
        };
        match started {
            Ok(run) => item.new_run_id = Some(run.id),
            Err(e) => {
                match item.action {
                    BulkAction::Resume => out.resume -= 1,
                    _ => out.replay -= 1,
                }
                out.errors += 1;
                item.action = BulkAction::Error;
                item.reason = Some(e.code.to_string());
                item.detail = Some(e.message);
            }
        }
    }
    Ok(out)
}
