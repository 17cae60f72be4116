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
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::body::json_body;
use super::error::{ApiError, ApiResult, Problem};
use super::idempotency::{self, Begin};
use super::openapi as doc;
use crate::app::export::{self as export_of, ExportParams};
use crate::app::runs::{
    deliveries as deliveries_of, execute_now, list, load_run, new_live_run,
    preview_bulk as preview_bulk_of, preview_replay as preview_replay_of,
    preview_resume as preview_resume_of, queue_run, replay_plan, replay_run, resume_problem,
    resume_run, runnable, start_bulk, stats_for, BulkRequest, BulkSummary, RunsParams, StatsParams,
};
use crate::app::AppState;
use crate::run::{RunRecord, Trigger};
use crate::runtime::preview::RunPreview;
use crate::workflow::Compiled;

/// Routes under `/api/v1`, each with its documentation.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(start_run))
        .routes(routes!(list_runs))
        .routes(routes!(stats))
        .routes(routes!(export))
        .routes(routes!(get_run))
        .routes(routes!(deliveries))
        .routes(routes!(replay))
        .routes(routes!(preview_replay))
        .routes(routes!(resume))
        .routes(routes!(preview_resume))
        .routes(routes!(bulk))
        .routes(routes!(preview_bulk))
}

/// The body of a run start.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = StartRunRequest)]
struct StartBody {
    /// The run's input (default `{}`).
    #[serde(default)]
    input: Option<Value>,
    /// Who starts it: `api` (default, a program) or `manual` (a person, from the editor's Run
    /// button, as the desktop app labels it). Recorded as the run's `trigger`.
    #[serde(default)]
    #[schema(pattern = "^(api|manual)$")]
    trigger: Option<String>,
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
    description = "Starts a live run with trigger `api` (or `manual` when the body says so: \
        the editor's Run button). Waits for it to finish (up to its \
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
    let trigger = match parsed.trigger.as_deref() {
        None | Some("api") => Trigger::Api,
        Some("manual") => Trigger::Manual,
        Some(other) => {
            return Err(ApiError::bad_request(
                "invalid_body",
                format!("trigger: `{other}` is not `api` or `manual`"),
            ))
        }
    };
    let wf = runnable(&state, &id)?;
    let lease = (wf.workflow.settings.run_timeout_s.secs() as i64) * 1000;
    let guard = match idempotency::begin(&state, &headers, "POST", uri.path(), &body, lease).await?
    {
        Begin::Replay(resp) => return Ok(resp),
        Begin::Process(g) => Some(g),
        Begin::NoKey => None,
    };
    let key = guard.as_ref().map(|g| g.key().to_string());
    let mut run = new_live_run(&state, &wf, parsed.input, trigger, key);
    run.trace_parent = super::headers::traceparent(&headers);
    Ok(run_to_answer(state, guard, wf, run, !prefers_async(&headers)).await)
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

#[utoipa::path(
    get,
    path = "/runs/{id}/deliveries",
    tag = "runs",
    summary = "A run's deliveries: the first, and every duplicate stopped",
    description = "The delivery that started the run (its time, trigger, key and answer), \
        then each record of duplicates of it that Fluxo stopped, oldest first: at the door (a \
        webhook repeat answered `200 duplicate: true`), by a Memory claim (listed on the run \
        holding the claim, naming the run it stopped), or by the app's own dedupe (a native \
        key, an upsert, a conflict read as exists, a find). A record counts the deliveries \
        stopped the same way within about a second (`count`, `first_at`, `last_at`). At most \
        200 records are listed (the newest); `duplicates_stopped` sums them all. Records are \
        kept for the trigger's dedupe window (door) or 30 days.",
    params(("id" = String, Path, description = "The run id.")),
    responses(
        (status = 200, description = "The deliveries.", body = crate::app::duplicates::Deliveries),
        (status = 404, description = "`run_not_found`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "`unavailable`: a store failure.", body = Problem,
            content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying."))),
    ),
)]
async fn deliveries(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<crate::app::duplicates::Deliveries>> {
    Ok(Json(deliveries_of(&state, &id).await?))
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
    let lease = (wf.workflow.settings.run_timeout_s.secs() as i64) * 1000;
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
        their idempotency keys, and warnings, following the replayed run's lineage. \
        `lineage_fixed`: a later run of the lineage (a resume or a replay) succeeded, named in \
        `fixed_by`; nothing is left to resume. `own_claim`: a Memory claim held by the \
        replayed run's own lineage, which did not finish, would send the replay down its \
        \"already processed\" branch; `resume_instead` is then true: resume \
        `resume_run_id` (the run, or the newest run of its resume chain) instead.",
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
    let preview = preview_replay_of(&state, &id, parsed.version.as_deref(), parsed.input).await?;
    Ok(Json(preview))
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
    let lease = (wf.workflow.settings.run_timeout_s.secs() as i64) * 1000;
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
        steps it reuses and the steps it executes (read from the same walk the resume makes, \
        so they partition its steps), the first step it executes, the calls it would send \
        again with their idempotency keys and whether each is safe to repeat, and warnings \
        (`lineage_fixed`: a replay of the run succeeded, named in `fixed_by`; \
        `not_transient`: the run failed with an answer retries do not fix, such as 409; \
        `repeat_unsafe`: the step in flight may have acted and repeating it may duplicate \
        that). A run resumed already answers `409 already_resumed` with `resumed_by` (and \
        `fixed_by` when that resume succeeded).",
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
    let preview = preview_resume_of(&state, &id, parsed.from_step.as_deref()).await?;
    Ok(Json(preview))
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

#[utoipa::path(
    get,
    path = "/runs/export",
    tag = "runs",
    summary = "Export the runs matching the list's filters, as CSV or JSON Lines (streamed)",
    description = "Every run matching the filters of `GET /runs` (no paging), newest first, \
        streamed as it is read (500 runs at a time), as an attachment. `format=csv` (default): \
        a header row, then per run the summary columns (`id`, `workflow_id`, \
        `workflow_version`, `status`, `mode`, `trigger`, `idempotency_key`, `created_at`, \
        `finished_at`, `duration_ms`, `error_code`, `error_message`, `error_step`, \
        `error_http_status`, `replay_of`, `resume_of`, `root_run_id`, `parent_run`, \
        `fixed_by`, `resumed_by`), then one column per `fields` path (without `fields`, one \
        `input` column with the whole input as JSON). Cells open safely in a spreadsheet: text \
        starting with `=`, `+`, `-`, `@`, a tab or a carriage return gets a leading `'` (unless \
        it is a plain number such as `-5`), JSON numbers are written as numbers (`-5` stays the \
        number -5). `format=jsonl`: one JSON object per line, the run's summary plus its whole \
        `input`. A store failure after the answer started cuts the stream (the download \
        fails) rather than ending it short.",
    params(ExportParams),
    responses(
        (status = 200, description = "The export (`Content-Disposition: attachment`).",
            content((String = "text/csv"), (String = "application/x-ndjson")),
            headers(("Content-Disposition" = String, description = "`attachment; \
                filename=\"fluxo-runs-<YYYYMMDD-HHMMSS>.csv\"` (or `.jsonl`), UTC."))),
        (status = 400, description = "`invalid_parameter`: an unknown `format` or \
            parameter, or a bad filter value (named in `detail`); `invalid_field`: a `fields` \
            path that does not start at `input`, has an empty segment or a space, or more than \
            64 paths.", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "`unavailable`: a store failure before the first byte.",
            body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying."))),
    ),
)]
async fn export(
    State(state): State<AppState>,
    params: Result<Query<ExportParams>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Response> {
    let Query(p) = params.map_err(|e| ApiError::bad_request("invalid_parameter", e.body_text()))?;
    let plan = export_of::plan(&p)?;
    let content_type = plan.content_type();
    let disposition = format!(
        "attachment; filename=\"{}\"",
        plan.file_name(state.clock().now_ms())
    );
    let chunks = futures_util::StreamExt::map(export_of::stream(&state, plan), |chunk| {
        chunk
            .map(axum::body::Bytes::from)
            .map_err(|e| std::io::Error::other(e.message))
    });
    Ok((
        [
            (header::CONTENT_TYPE, content_type.to_string()),
            (header::CONTENT_DISPOSITION, disposition),
            (header::CACHE_CONTROL, "no-store".to_string()),
        ],
        axum::body::Body::from_stream(chunks),
    )
        .into_response())
}

fn parse_bulk_body(body: Value) -> ApiResult<BulkRequest> {
    serde_json::from_value(body).map_err(|e| {
        ApiError::bad_request(
            "invalid_body",
            format!(
                "expected {{\"filter\"?: {{\"workflow\", \"status\", \"mode\", \"trigger\", \
                 \"key\", \"since\", \"until\", \"q\"}}, \"version\"?: \"current\"|\"original\"}}: {e}"
            ),
        )
    })
}

#[utoipa::path(
    post,
    path = "/runs/bulk/preview",
    tag = "runs",
    summary = "Preview a bulk resume/replay of every failed run matching a filter (nothing is \
        stored or sent)",
    description = "Reads every failed run (`failed`, `timed_out`, `interrupted`) matching \
        `filter` (the filters of `GET /runs`, without paging; at most 10,000) and says what \
        `POST /runs/bulk` would do with each: `resume` (the run can be resumed: not resumed \
        yet, its recorded definition validates), `replay` (live, with `version`: it cannot be \
        resumed) or `skip` (`fixed`: a later run of its lineage succeeded; `already_resumed`; \
        `not_runnable`). Dry runs are counted in `dry_excluded` and never acted on: a dry run \
        is never replayed live. Pass `as_of` as `filter.until` to act on exactly this set.",
    request_body(content = Option<BulkRequest>, content_type = "application/json",
        description = "`{}`: every failed run."),
    responses(
        (status = 200, description = "The counts and each live run's action.", body = BulkSummary),
        (status = 400, description = "`invalid_parameter` (a bad filter value), `invalid_body` \
            (an unknown member, a bad `version`), `invalid_json`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 413, description = "`payload_too_large`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 422, description = "`too_many_runs`: more than 10,000 failed runs match \
            (`limit`); narrow the filter.", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "`unavailable`: a store failure.", body = Problem,
            content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying."))),
    ),
)]
async fn preview_bulk(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<BulkSummary>> {
    let body = json_body(body, state.options().body_limit_bytes)?;
    let req = parse_bulk_body(body)?;
    Ok(Json(preview_bulk_of(&state, &req).await?))
}

#[utoipa::path(
    post,
    path = "/runs/bulk",
    tag = "runs",
    summary = "Resume or replay every failed live run matching a filter",
    description = "Acts on every failed run matching `filter` as `POST /runs/bulk/preview` \
        describes: resumes the resumable ones (`POST /runs/{id}/resume`), replays the others \
        live (`POST /runs/{id}/replay` with `version`), skips the fixed and already resumed \
        ones, and excludes dry runs (never replayed live). The new runs are queued and \
        answered at once: `runs[].new_run_id` per original; follow them by id or on \
        `GET /events`. A run that could not be started has `action: error` with the \
        problem's code in `reason`; the others still start.",
    request_body(content = Option<BulkRequest>, content_type = "application/json",
        description = "`{}`: every failed run."),
    responses(
        (status = 200, description = "What was done: counts, and each live run with its new run.",
            body = BulkSummary),
        (status = 400, description = "`invalid_parameter`, `invalid_body`, `invalid_json`.",
            body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "`payload_too_large`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 422, description = "`too_many_runs`: more than 10,000 failed runs match; \
            nothing was started.", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "`unavailable`: a store failure.", body = Problem,
            content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying."))),
    ),
)]
async fn bulk(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<BulkSummary>> {
    let body = json_body(body, state.options().body_limit_bytes)?;
    let req = parse_bulk_body(body)?;
    Ok(Json(start_bulk(&state, &req).await?))
}
