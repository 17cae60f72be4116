//! Runs: start (idempotent), list with filters and cursor paging, detail, replay, resume,
//! their previews, stats.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{OriginalUri, Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, ApiResult, Problem};
use super::idempotency::{self, Begin};
use super::openapi as doc;
use super::AppState;
use crate::clock::parse_rfc3339;
use crate::run::{Mode, RunRecord, RunStatus, Trigger};
use crate::runtime::preview::RunPreview;
use crate::runtime::resume::ResumeError;
use crate::runtime::{ResumeFailure, RunRequest};
use crate::store::RunQuery;
use crate::workflow::{check_value, Compiled};

/// Routes under `/api/v1`, each with its documentation.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(start_run))
        .routes(routes!(list_runs))
        .routes(routes!(stats))
        .routes(routes!(get_run))
        .routes(routes!(replay))
        .routes(routes!(preview_replay))
        .routes(routes!(resume))
        .routes(routes!(preview_resume))
}

/// Parse a JSON request body (empty = `{}`), naming the problem.
pub fn json_body(body: Result<Bytes, BytesRejection>, limit: usize) -> ApiResult<Value> {
    let bytes = body_bytes(body, limit)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    parse_json(&bytes)
}

/// A request body within `limit` bytes: over it `413 payload_too_large`; a body that stalled
/// past the body read timeout ([`super::listen::ConnLimits::body_read_timeout`]) `408
/// request_timeout` (RFC 9110 §15.5.9; the connection is closed); otherwise unreadable `400
/// bad_body`.
pub fn body_bytes(body: Result<Bytes, BytesRejection>, limit: usize) -> ApiResult<Bytes> {
    body.map_err(|rej| {
        if timed_out(&rej) {
            ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                "the request body stalled: no data came within the body read timeout",
            )
            .closing()
        } else if rej.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!("the body is over the limit of {limit} bytes"),
            )
        } else {
            ApiError::bad_request("bad_body", rej.body_text())
        }
    })
}

/// Whether a body failed because tower-http's body timeout fired (anywhere in its sources).
fn timed_out(rej: &BytesRejection) -> bool {
    let mut e: Option<&(dyn std::error::Error + 'static)> = Some(rej);
    while let Some(err) = e {
        if err.is::<tower_http::timeout::TimeoutError>() {
            return true;
        }
        e = err.source();
    }
    false
}

/// JSON, or `400 invalid_json` naming the line and column.
pub fn parse_json(bytes: &[u8]) -> ApiResult<Value> {
    serde_json::from_slice(bytes).map_err(|e| {
        ApiError::bad_request(
            "invalid_json",
            format!(
                "the body is not JSON (line {}, column {}): {e}",
                e.line(),
                e.column()
            ),
        )
    })
}

/// The runnable workflow with this id, or a problem.
pub fn runnable(state: &AppState, id: &str) -> ApiResult<Arc<Compiled>> {
    let entry = state
        .workflows()
        .get(id)
        .ok_or_else(|| ApiError::not_found("workflow_not_found", format!("no workflow `{id}`")))?;
    entry.compiled.clone().ok_or_else(|| {
        ApiError::conflict(
            "workflow_invalid",
            format!("workflow `{id}` has validation errors; fix them first"),
        )
        .with_extra(json!({"problems": entry.problems}))
    })
}

/// The body of a run start.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = StartRunRequest)]
struct StartBody {
    /// The run's input (default `{}`).
    #[serde(default)]
    input: Option<Value>,
}

fn prefers_async(headers: &HeaderMap) -> bool {
    headers
        .get_all("prefer")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| {
            v.split(',')
                .any(|p| p.trim().eq_ignore_ascii_case("respond-async"))
        })
}

/// Run `run` now and wait (200 with the run), or queue it (`Prefer: respond-async` → 202
/// with `Location`).
async fn start_or_queue(
    state: &AppState,
    wf: Arc<Compiled>,
    run: RunRecord,
    wait: bool,
) -> ApiResult<(StatusCode, HeaderMap, Value)> {
    let mut headers = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(&format!("/api/v1/runs/{}", run.id)) {
        headers.insert(header::LOCATION, v);
    }
    if !wait {
        let run = queue_run(state, run).await?;
        return Ok((
            StatusCode::ACCEPTED,
            headers,
            serde_json::to_value(&run).unwrap_or_default(),
        ));
    }
    let done = execute_now(state, wf, run).await?;
    Ok((
        StatusCode::OK,
        headers,
        serde_json::to_value(&done).unwrap_or_default(),
    ))
}

/// Store a `queued` run durably (group commit), hand it to the workers, answer it as queued.
pub async fn queue_run(state: &AppState, run: RunRecord) -> ApiResult<RunRecord> {
    let run = state.commit().put_run(run).await.map_err(ApiError::store)?;
    state.queue().push(run.id.clone());
    Ok(run)
}

/// Execute a run now and answer it finished. In a task of its own, so a caller that goes away
/// (a client's timeout, a closed window) does not cancel a run half-way.
pub async fn execute_now(
    state: &AppState,
    wf: Arc<Compiled>,
    run: RunRecord,
) -> ApiResult<RunRecord> {
    let engine = state.engine().clone();
    tokio::spawn(async move { engine.execute(&wf, run).await })
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "the run task failed",
            )
        })?
        .map_err(ApiError::store)
}

/// Run (or queue) and complete the idempotency record in a task of its own, so a client that
/// disconnects (its timeout) cancels neither the run nor the record: its retry gets `409
/// idempotency_in_progress`, then the stored answer, instead of starting a second run.
async fn run_to_answer(
    state: AppState,
    guard: Option<idempotency::Guard>,
    wf: Arc<Compiled>,
    run: RunRecord,
    wait: bool,
) -> Response {
    let task = tokio::spawn(async move {
        let result = start_or_queue(&state, wf, run, wait).await;
        finish(guard, result).await
    });
    task.await.unwrap_or_else(|_| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "the run task failed",
        )
        .into_response()
    })
}

async fn finish(
    guard: Option<idempotency::Guard>,
    result: ApiResult<(StatusCode, HeaderMap, Value)>,
) -> Response {
    match (guard, result) {
        (Some(g), Ok((status, headers, body))) => {
            let mut resp = g.complete(status, body.to_string()).await;
            resp.headers_mut().extend(headers);
            resp
        }
        (None, Ok((status, headers, body))) => (status, headers, Json(body)).into_response(),
        (Some(g), Err(e)) => {
            g.abandon().await;
            e.into_response()
        }
        (None, Err(e)) => e.into_response(),
    }
}

#[utoipa::path(
    post,
    path = "/workflows/{id}/runs",
    tag = "runs",
    summary = "Start a run (idempotent with Idempotency-Key)",
    description = "Starts a live run with trigger `api`. Waits for it to finish (up to its \
        time limit, `run_timeout_s`, default 50 s) and answers `200` with the run; with \
        `Prefer: respond-async` answers `202` with the queued run at once. With \
        `Idempotency-Key` (kept 24 h, scoped to the API token): a repeat with the same key and \
        the same request (method, path, canonical JSON body: key order and whitespace don't \
        count) returns the stored status and body byte for byte with `Idempotent-Replayed: \
        true`; the same key with a different request is `409 idempotency_conflict`; while the \
        first is still being processed, `409 idempotency_in_progress` (an in-progress record \
        whose owner died is reclaimable after its lease: the run time limit + 30 s).",
    params(
        ("id" = String, Path, description = "The workflow to run."),
        ("Idempotency-Key" = Option<String>, Header, description = "Makes the request safe to \
            retry: 1–255 chars of visible ASCII, bare or an RFC 8941 quoted string; kept 24 h \
            per API token. Given twice or malformed: `400 invalid_idempotency_key`."),
        ("Prefer" = Option<String>, Header, description = "`respond-async`: answer `202` with \
            the queued run instead of waiting for it."),
    ),
    request_body(content = Option<StartBody>, content_type = "application/json",
        description = "`{\"input\": {...}}`; an empty body is `{}`."),
    responses(
        (status = 200, description = "The finished run (or, with `Idempotent-Replayed: true`, \
            the stored answer of the first request with this key).",
            body = crate::run::RunRecord,
            headers(
                ("Location" = String, description = "`/api/v1/runs/{run_id}` (not on a replayed answer)."),
                ("Idempotent-Replayed" = String, description = "`true` when this is the stored \
                    answer of an earlier request with the same Idempotency-Key."),
            )),
        (status = 202, description = "With `Prefer: respond-async`: the run, queued.",
            body = crate::run::RunRecord,
            headers(
                ("Location" = String, description = "`/api/v1/runs/{run_id}`: where to follow \
                    the run (not on a replayed answer)."),
                ("Idempotent-Replayed" = String, description = "`true` when this is the stored \
                    answer of an earlier request with the same Idempotency-Key."),
            )),
        (status = 400, description = "`invalid_idempotency_key`, `invalid_body`, \
            `invalid_json`, `bad_body`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 404, description = "`workflow_not_found`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 409, description = "`idempotency_conflict`: the key was used with a \
            different request; `idempotency_in_progress`: the first request with this key is \
            still being processed, retry later; `workflow_invalid`: the workflow has \
            validation errors (see `problems`).", body = Problem,
            content_type = "application/problem+json"),
        (status = 413, description = "`payload_too_large`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 500, description = "`internal`: the run task failed.", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "`unavailable`: the run could not be stored or queued; \
            retry after `Retry-After`.", body = Problem,
            content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying."))),
    ),
)]
async fn start_run(
    State(state): State<AppState>,
    Path(id): Path<String>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let body = json_body(body, state.options().body_limit_bytes)?;
    let parsed: StartBody = serde_json::from_value(body.clone()).map_err(|e| {
        ApiError::bad_request(
            "invalid_body",
            format!("expected {{\"input\": {{...}}}}: {e}"),
        )
    })?;
    let wf = runnable(&state, &id)?;
    let lease = (wf.workflow.settings.run_timeout_s as i64) * 1000;
    let guard = match idempotency::begin(&state, &headers, "POST", uri.path(), &body, lease).await?
    {
        Begin::Replay(resp) => return Ok(resp),
        Begin::Process(g) => Some(g),
        Begin::NoKey => None,
    };
    let mut req = RunRequest::new(
        parsed.input.unwrap_or_else(|| json!({})),
        Trigger::Api,
        Mode::Live,
    );
    req.idempotency_key = guard.as_ref().map(|g| g.key().to_string());
    let run = state.engine().new_run(&wf, req);
    Ok(run_to_answer(state, guard, wf, run, !prefers_async(&headers)).await)
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
pub fn parse_instant(name: &str, v: &str) -> ApiResult<i64> {
    v.parse::<i64>()
        .ok()
        .or_else(|| parse_rfc3339(v))
        .ok_or_else(|| {
            ApiError::bad_request(
                "invalid_parameter",
                format!("`{name}`: `{v}` is neither RFC 3339 nor unix milliseconds"),
            )
        })
}

impl RunsParams {
    /// The store query, or a problem naming the bad parameter.
    pub fn to_query(&self) -> ApiResult<RunQuery> {
        let bad = |name: &str, v: &str, allowed: &str| {
            ApiError::bad_request(
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
            return Err(ApiError::bad_request(
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
                        ApiError::bad_request(
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

#[utoipa::path(
    get,
    path = "/runs",
    tag = "runs",
    summary = "The run history, newest first, with filters and cursor paging",
    params(RunsParams),
    responses(
        (status = 200, description = "A page of run summaries.", body = crate::store::RunPage),
        (status = 400, description = "`invalid_parameter`: an unknown parameter or a bad \
            value (named in `detail`); `invalid_cursor`: a `cursor` that is neither a \
            `next_cursor` nor a run id.", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "`unavailable`: a store failure.", body = Problem,
            content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying."))),
    ),
)]
async fn list_runs(
    State(state): State<AppState>,
    params: Result<Query<RunsParams>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<Value>> {
    let Query(params) =
        params.map_err(|e| ApiError::bad_request("invalid_parameter", e.body_text()))?;
    let page = list(&state, &params).await?;
    Ok(Json(serde_json::to_value(page).unwrap_or_default()))
}

/// A page of run summaries for `params` (newest first).
pub async fn list(state: &AppState, params: &RunsParams) -> ApiResult<crate::store::RunPage> {
    let q = params.to_query()?;
    state.store().list_runs(&q).await.map_err(ApiError::store)
}

#[utoipa::path(
    get,
    path = "/runs/{id}",
    tag = "runs",
    summary = "A run in full: every step and attempt",
    params(("id" = String, Path, description = "The run id.")),
    responses(
        (status = 200, description = "The run.", body = crate::run::RunRecord),
        (status = 404, description = "`run_not_found`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "`unavailable`: a store failure.", body = Problem,
            content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying."))),
    ),
)]
async fn get_run(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<RunRecord>> {
    state
        .store()
        .get_run(&id)
        .await
        .map_err(ApiError::store)?
        .map(Json)
        .ok_or_else(|| ApiError::not_found("run_not_found", format!("no run `{id}`")))
}

/// The body of a replay.
#[derive(Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ReplayRequest)]
struct ReplayBody {
    /// `live` (default) or `dry`.
    #[serde(default)]
    #[schema(value_type = Option<crate::run::Mode>, inline)]
    mode: Option<String>,
    /// `current` (default): the workflow as it is now; `original`: the definition the run
    /// recorded.
    #[serde(default)]
    #[schema(value_type = Option<String>, pattern = "^(current|original)$")]
    version: Option<String>,
    /// A corrected payload to run instead of the original input (recorded: the new run says
    /// `input_edited: true` when it differs).
    #[serde(default)]
    input: Option<Value>,
}

#[utoipa::path(
    post,
    path = "/runs/{id}/replay",
    tag = "runs",
    summary = "Replay a run (idempotent with Idempotency-Key)",
    description = "Creates a new run linked by `replay_of` (and `replayed_by` on the \
        original), with the original input, trigger `replay`, a fresh time budget and the \
        trigger-level dedupe bypassed. Waits and answers like a run start (`Prefer: \
        respond-async` → `202`), with the same `Idempotency-Key` semantics.",
    params(
        ("id" = String, Path, description = "The run to replay."),
        ("Idempotency-Key" = Option<String>, Header, description = "Makes the request safe to \
            retry (as for a run start)."),
        ("Prefer" = Option<String>, Header, description = "`respond-async`: answer `202` with \
            the queued run instead of waiting for it."),
    ),
    request_body(content = Option<ReplayBody>, content_type = "application/json",
        description = "`{}` replays live with the current definition."),
    responses(
        (status = 200, description = "The finished replay run.", body = crate::run::RunRecord,
            headers(
                ("Location" = String, description = "`/api/v1/runs/{run_id}` of the new run."),
                ("Idempotent-Replayed" = String, description = "`true` when this is the stored \
                    answer of an earlier request with the same Idempotency-Key."),
            )),
        (status = 202, description = "With `Prefer: respond-async`: the replay run, queued.",
            body = crate::run::RunRecord,
            headers(
                ("Location" = String, description = "`/api/v1/runs/{run_id}` of the new run."),
                ("Idempotent-Replayed" = String, description = "`true` when this is the stored \
                    answer of an earlier request with the same Idempotency-Key."),
            )),
        (status = 400, description = "`invalid_body` (a bad `mode` or `version`), \
            `invalid_idempotency_key`, `invalid_json`, `bad_body`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 404, description = "`run_not_found`; `workflow_not_found` (replaying the \
            current version of a deleted workflow).", body = Problem,
            content_type = "application/problem+json"),
        (status = 409, description = "`idempotency_conflict`, `idempotency_in_progress`, \
            `workflow_invalid`.", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "`payload_too_large`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 500, description = "`internal`: the run task failed.", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "`unavailable`: a store failure; retry after \
            `Retry-After`.", body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying."))),
    ),
)]
async fn replay(
    State(state): State<AppState>,
    Path(id): Path<String>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let body = json_body(body, state.options().body_limit_bytes)?;
    let parsed: ReplayBody = serde_json::from_value(body.clone())
        .map_err(|e| ApiError::bad_request("invalid_body", format!("expected {{\"mode\": \"live\"|\"dry\", \"version\": \"current\"|\"original\"}}: {e}")))?;
    let (mode, wf, original) = replay_plan(
        &state,
        &id,
        parsed.mode.as_deref(),
        parsed.version.as_deref(),
    )
    .await?;
    let lease = (wf.workflow.settings.run_timeout_s as i64) * 1000;
    let guard = match idempotency::begin(&state, &headers, "POST", uri.path(), &body, lease).await?
    {
        Begin::Replay(resp) => return Ok(resp),
        Begin::Process(g) => Some(g),
        Begin::NoKey => None,
    };
    let run = replay_run(&state, &wf, original, mode, parsed.input).await?;
    Ok(run_to_answer(state, guard, wf, run, !prefers_async(&headers)).await)
}

/// The body of a replay preview.
#[derive(Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ReplayPreviewRequest)]
struct ReplayPreviewBody {
    /// `current` (default) or `original`.
    #[serde(default)]
    #[schema(value_type = Option<String>, pattern = "^(current|original)$")]
    version: Option<String>,
    /// A corrected payload to preview instead of the original input.
    #[serde(default)]
    input: Option<Value>,
}

#[utoipa::path(
    post,
    path = "/runs/{id}/replay/preview",
    tag = "runs",
    summary = "Preview a replay (nothing is stored or sent)",
    description = "The dry walk of the replay a `POST /runs/{id}/replay` would start: the run \
        record it would produce (`mode: dry`, never stored), the calls it would send with \
        their idempotency keys, and warnings. `own_claim`: a Memory claim held by the \
        replayed run's own lineage, which did not finish, would send the replay down its \
        \"already processed\" branch; `resume_instead` is then true: resume the run instead.",
    params(("id" = String, Path, description = "The run to replay.")),
    request_body(content = Option<ReplayPreviewBody>, content_type = "application/json"),
    responses(
        (status = 200, description = "The preview.", body = crate::runtime::preview::RunPreview),
        (status = 400, description = "`invalid_body`, `invalid_json`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 404, description = "`run_not_found`, `workflow_not_found`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 409, description = "`workflow_invalid`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 413, description = "`payload_too_large`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "`unavailable`: a store failure.", body = Problem,
            content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying."))),
    ),
)]
async fn preview_replay(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<RunPreview>> {
    let body = json_body(body, state.options().body_limit_bytes)?;
    let parsed: ReplayPreviewBody = serde_json::from_value(body).map_err(|e| {
        ApiError::bad_request(
            "invalid_body",
            format!("expected {{\"version\": \"current\"|\"original\", \"input\"?: ...}}: {e}"),
        )
    })?;
    let (_, wf, original) =
        replay_plan(&state, &id, Some("dry"), parsed.version.as_deref()).await?;
    Ok(Json(
        state
            .engine()
            .preview_replay(&original, &wf, parsed.input)
            .await,
    ))
}

/// The body of a resume.
#[derive(Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = ResumeRequest)]
struct ResumeBody {
    /// The step to execute from; its upstream steps must all have succeeded. Default: the
    /// failed step, or the step in flight when the run stopped.
    #[serde(default)]
    from_step: Option<String>,
}

fn parse_resume_body(body: Value) -> ApiResult<ResumeBody> {
    serde_json::from_value(body).map_err(|e| {
        ApiError::bad_request(
            "invalid_body",
            format!("expected {{\"from_step\"?: \"<step id>\"}}: {e}"),
        )
    })
}

/// A run by id, or `404 run_not_found`.
pub async fn load_run(state: &AppState, id: &str) -> ApiResult<RunRecord> {
    state
        .store()
        .get_run(id)
        .await
        .map_err(ApiError::store)?
        .ok_or_else(|| ApiError::not_found("run_not_found", format!("no run `{id}`")))
}

/// The problem of a resume that cannot start.
pub fn resume_problem(e: ResumeFailure) -> ApiError {
    match e {
        ResumeFailure::Plan(ResumeError::NothingToResume(m)) => {
            ApiError::conflict("nothing_to_resume", m)
        }
        ResumeFailure::Plan(ResumeError::InvalidFromStep(m)) => {
            ApiError::bad_request("invalid_from_step", m)
        }
        ResumeFailure::Plan(ResumeError::AlreadyResumed { message, by }) => {
            ApiError::conflict("already_resumed", message).with_extra(json!({"resumed_by": by}))
        }
        ResumeFailure::SnapshotInvalid(problems) => ApiError::conflict(
            "workflow_invalid",
            "the run's recorded definition no longer validates",
        )
        .with_extra(json!({"problems": problems})),
        ResumeFailure::Store(e) => ApiError::store(e),
    }
}

/// Prepare the resume of run `id` (SPEC §4): the definition it runs (the run's snapshot) and
/// the new run, stored with the original's `resumed_by` in one batch, not yet executed.
pub async fn resume_run(
    state: &AppState,
    id: &str,
    from_step: Option<&str>,
) -> ApiResult<(Arc<Compiled>, RunRecord)> {
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
        .map_err(ApiError::store)?;
    Ok((wf, run))
}

#[utoipa::path(
    post,
    path = "/runs/{id}/resume",
    tag = "runs",
    summary = "Resume a failed, timed-out or interrupted run (idempotent with Idempotency-Key)",
    description = "Creates a new run linked by `resume_of` (and `resumed_by` on the original), \
        trigger `resume`, in the original's lineage (`root_run_id`): it runs the original's \
        snapshot, reuses the recorded output of every step that succeeded before the resume \
        point (their records say `reused_from`), and executes from the failed or in-flight \
        step, or from `from_step`. Fresh time budget; dedupe at the door bypassed. Answers \
        like a run start (`Prefer: respond-async` → `202`), with the same `Idempotency-Key` \
        semantics.",
    params(
        ("id" = String, Path, description = "The run to resume."),
        ("Idempotency-Key" = Option<String>, Header, description = "Makes the request safe to \
            retry (as for a run start)."),
        ("Prefer" = Option<String>, Header, description = "`respond-async`: answer `202` with \
            the queued run instead of waiting for it."),
    ),
    request_body(content = Option<ResumeBody>, content_type = "application/json",
        description = "`{}` resumes from the failed or in-flight step."),
    responses(
        (status = 200, description = "The finished resume run.", body = crate::run::RunRecord,
            headers(
                ("Location" = String, description = "`/api/v1/runs/{run_id}` of the new run."),
                ("Idempotent-Replayed" = String, description = "`true` when this is the stored \
                    answer of an earlier request with the same Idempotency-Key."),
            )),
        (status = 202, description = "With `Prefer: respond-async`: the resume run, queued.",
            body = crate::run::RunRecord,
            headers(
                ("Location" = String, description = "`/api/v1/runs/{run_id}` of the new run."),
                ("Idempotent-Replayed" = String, description = "`true` when this is the stored \
                    answer of an earlier request with the same Idempotency-Key."),
            )),
        (status = 400, description = "`invalid_from_step` (not in the run's definition, an \
            error handler, or a step whose upstream steps did not all succeed), \
            `invalid_body`, `invalid_idempotency_key`, `invalid_json`, `bad_body`.",
            body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`run_not_found`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 409, description = "`nothing_to_resume` (the run succeeded, or has not \
            finished), `already_resumed` (a resume of it is queued, running or succeeded: \
            `resumed_by` names it), `workflow_invalid` (the recorded definition no longer \
            validates), `idempotency_conflict`, `idempotency_in_progress`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 413, description = "`payload_too_large`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 500, description = "`internal`: the run task failed.", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "`unavailable`: a store failure; retry after \
            `Retry-After`.", body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying."))),
    ),
)]
async fn resume(
    State(state): State<AppState>,
    Path(id): Path<String>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let body = json_body(body, state.options().body_limit_bytes)?;
    let parsed = parse_resume_body(body.clone())?;
    let original = load_run(&state, &id).await?;
    // Check before taking the idempotency key: a refused resume leaves no record behind.
    let (wf, _, _) = state
        .engine()
        .resume_run(&original, parsed.from_step.as_deref())
        .await
        .map_err(resume_problem)?;
    let lease = (wf.workflow.settings.run_timeout_s as i64) * 1000;
    let guard = match idempotency::begin(&state, &headers, "POST", uri.path(), &body, lease).await?
    {
        Begin::Replay(resp) => return Ok(resp),
        Begin::Process(g) => Some(g),
        Begin::NoKey => None,
    };
    // An error here drops the guard, which releases the key.
    let (wf, run) = resume_run(&state, &id, parsed.from_step.as_deref()).await?;
    Ok(run_to_answer(state, guard, wf, run, !prefers_async(&headers)).await)
}

#[utoipa::path(
    post,
    path = "/runs/{id}/resume/preview",
    tag = "runs",
    summary = "Preview a resume (nothing is stored or sent)",
    description = "The dry walk of the resume a `POST /runs/{id}/resume` would start: the \
        steps it reuses, the step it executes from, the calls it would send again with their \
        idempotency keys and whether each is safe to repeat, and warnings (`not_transient`: \
        the run failed with an answer retries do not fix, such as 409; `repeat_unsafe`: the \
        step in flight may have acted and repeating it may duplicate that).",
    params(("id" = String, Path, description = "The run to resume.")),
    request_body(content = Option<ResumeBody>, content_type = "application/json"),
    responses(
        (status = 200, description = "The preview.", body = crate::runtime::preview::RunPreview),
        (status = 400, description = "`invalid_from_step`, `invalid_body`, `invalid_json`.",
            body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`run_not_found`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 409, description = "`nothing_to_resume`, `already_resumed`, \
            `workflow_invalid`.", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "`payload_too_large`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "`unavailable`: a store failure.", body = Problem,
            content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying."))),
    ),
)]
async fn preview_resume(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<RunPreview>> {
    let body = json_body(body, state.options().body_limit_bytes)?;
    let parsed = parse_resume_body(body)?;
    let original = load_run(&state, &id).await?;
    state
        .engine()
        .preview_resume(&original, parsed.from_step.as_deref())
        .await
        .map(Json)
        .map_err(resume_problem)
}

/// Check a replay request (SPEC §4): the mode (`live` default, `dry`), the definition
/// (`current` default, or the run's recorded `original` snapshot) and the original run.
pub async fn replay_plan(
    state: &AppState,
    id: &str,
    mode: Option<&str>,
    version: Option<&str>,
) -> ApiResult<(Mode, Arc<Compiled>, RunRecord)> {
    let mode = match mode {
        None | Some("live") => Mode::Live,
        Some("dry") => Mode::Dry,
        Some(m) => {
            return Err(ApiError::bad_request(
                "invalid_body",
                format!("`mode`: `{m}` is not live or dry"),
            ))
        }
    };
    let original = state
        .store()
        .get_run(id)
        .await
        .map_err(ApiError::store)?
        .ok_or_else(|| ApiError::not_found("run_not_found", format!("no run `{id}`")))?;
    let wf = match version {
        None | Some("current") => runnable(state, &original.workflow_id)?,
        Some("original") => {
            let (c, problems) = check_value(&original.snapshot, state.engine().registry());
            Arc::new(c.ok_or_else(|| {
                ApiError::conflict(
                    "workflow_invalid",
                    "the run's recorded definition no longer validates",
                )
                .with_extra(json!({"problems": problems}))
            })?)
        }
        Some(v) => {
            return Err(ApiError::bad_request(
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
) -> ApiResult<RunRecord> {
    let (run, orig) = state.engine().replay_run(&original, wf, mode, edited_input);
    state
        .store()
        .put_run(&orig)
        .await
        .map_err(ApiError::store)?;
    Ok(run)
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

#[utoipa::path(
    get,
    path = "/runs/stats",
    tag = "runs",
    summary = "Counts of runs by status per time bucket",
    params(StatsParams),
    responses(
        (status = 200, description = "The buckets.", body = doc::RunStats),
        (status = 400, description = "`invalid_parameter`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "`unavailable`: a store failure.", body = Problem,
            content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying."))),
    ),
)]
async fn stats(
    State(state): State<AppState>,
    params: Result<Query<StatsParams>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<Value>> {
    let Query(p) = params.map_err(|e| ApiError::bad_request("invalid_parameter", e.body_text()))?;
    Ok(Json(stats_for(&state, &p).await?))
}

/// Counts of runs by status per bucket: `{bucket_ms, since, until, buckets}`.
pub async fn stats_for(state: &AppState, p: &StatsParams) -> ApiResult<Value> {
    let bucket_ms: i64 = match p.bucket.as_deref().unwrap_or("hour") {
        "minute" => 60_000,
        "hour" => 3_600_000,
        "day" => 86_400_000,
        b => {
            return Err(ApiError::bad_request(
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
        return Err(ApiError::bad_request(
            "invalid_parameter",
            "`since` must be before `until`",
        ));
    }
    if (until - since) / bucket_ms > 10_000 {
        return Err(ApiError::bad_request(
            "invalid_parameter",
            "more than 10,000 buckets: use a larger bucket or a shorter range",
        ));
    }
    let wf = p.workflow.as_deref().filter(|w| !w.is_empty());
    let buckets = state
        .store()
        .run_stats(wf, since, until, bucket_ms)
        .await
        .map_err(ApiError::store)?;
    Ok(json!({
        "bucket_ms": bucket_ms,
        "since": crate::clock::rfc3339(since),
        "until": crate::clock::rfc3339(until),
        "buckets": buckets,
    }))
}
