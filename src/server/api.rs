//! Workflows CRUD over the files in `--workflows`, validate, dry-run, Memory, step kinds,
//! server-sent events of run progress, health and the OpenAPI document.

use std::convert::Infallible;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::body::json_body;
use super::error::{ApiError, ApiResult, Problem};
use super::openapi as doc;
use crate::app::{catalog, drafts, events, memory, templates, workflows, AppState};

/// Routes under `/api/v1` (token required), each with its documentation (one `routes!` per
/// path: the handlers of its methods).
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_workflows))
        .routes(routes!(validate))
        .routes(routes!(get_workflow, put_workflow, delete_workflow))
        .routes(routes!(get_draft, put_draft, delete_draft))
        .routes(routes!(publish))
        .routes(routes!(dry_run))
        .routes(routes!(check))
        .routes(routes!(memory_namespaces))
        .routes(routes!(memory_list))
        .routes(routes!(memory_get, memory_delete))
        .routes(routes!(step_kinds))
        .routes(routes!(templates))
        .routes(routes!(sample_payloads))
        .routes(routes!(connectors))
        .routes(routes!(events))
        .routes(routes!(preview_template))
}

/// `GET /healthz`: liveness, no auth.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "meta",
    summary = "Liveness (no token)",
    responses((status = 200, description = "The server answers.", body = doc::Health,
        example = json!({"status": "ok", "version": "0.1.0"}))),
)]
pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}))
}

/// `GET /readyz`: readiness, no auth.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "meta",
    summary = "Readiness (no token)",
    description = "Whether this process can take deliveries now: its store answers (on \
        PostgreSQL a `SELECT 1` within 2 s; the embedded store always does). `/healthz` says \
        only that the process answers: point load balancers at this, liveness probes at that.",
    responses(
        (status = 200, description = "Ready.", body = doc::Health,
            example = json!({"status": "ready", "version": "0.1.0"})),
        (status = 503, description = "`unavailable`: the store does not answer (with \
            `Retry-After`).", body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn readyz(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    crate::app::health::ready(&state).await?;
    Ok(Json(
        json!({"status": "ready", "version": env!("CARGO_PKG_VERSION")}),
    ))
}

/// `GET /api/v1/openapi.json`.
#[utoipa::path(
    get,
    path = "/api/v1/openapi.json",
    tag = "meta",
    summary = "This OpenAPI 3.1 document (no token)",
    description = "Generated from the code: every route the server serves, with its \
        parameters, bodies and answers.",
    responses((status = 200, description = "The document.", body = Value,
        content_type = "application/json")),
)]
pub async fn openapi() -> Json<Value> {
    Json(super::openapi::document())
}

#[utoipa::path(
    get,
    path = "/workflows",
    tag = "workflows",
    summary = "List the workflow files",
    responses((status = 200, description = "One row per file in `--workflows`, valid or not.",
        body = doc::WorkflowList)),
)]
async fn list_workflows(State(state): State<AppState>) -> Json<Value> {
    Json(json!({"workflows": workflows::list(&state)}))
}

/// The file's JSON exactly, so GET then PUT round-trips.
#[utoipa::path(
    get,
    path = "/workflows/{id}",
    tag = "workflows",
    summary = "Get a workflow file",
    description = "Answers the workflow file's JSON exactly (byte for byte), so GET then PUT \
        round-trips.",
    params(("id" = String, Path, description = "The workflow id (its file name without `.json`).")),
    responses(
        (status = 200, description = "The workflow file (SPEC §1).", body = Value,
            content_type = "application/json"),
        (status = 404, description = "`workflow_not_found`.", body = Problem,
            content_type = "application/problem+json"),
    ),
)]
async fn get_workflow(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let e = workflows::get(&state, &id)?;
    Ok(([(header::CONTENT_TYPE, "application/json")], e.text.clone()).into_response())
}

#[utoipa::path(
    put,
    path = "/workflows/{id}",
    tag = "workflows",
    summary = "Save and publish a workflow file",
    description = "Saves the definition as the live workflow (what webhooks, schedules and \
        runs use) atomically, bumping its `version`. A definition with validation errors is \
        refused with `422 workflow_invalid` and nothing is written (keep it as a draft: \
        `PUT /workflows/{id}/draft`); one that is not structurally a workflow with `422 \
        invalid_workflow`. A draft of the workflow is left as it is.",
    params(("id" = String, Path, description = "The workflow id; must match the body's `id`.")),
    request_body(content = Value, content_type = "application/json",
        description = "The workflow definition (SPEC §1), e.g. as `GET` answered it."),
    responses(
        (status = 200, description = "Saved.", body = doc::WorkflowSaved),
        (status = 400, description = "`invalid_workflow` (a bad id, or an id that does not \
            match the body's), `invalid_json`, `bad_body`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 413, description = "`payload_too_large`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 422, description = "`invalid_workflow`: not structurally valid; \
            `workflow_invalid`: validation errors, nothing written. See `problems`.",
            body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "`save_failed`: the file could not be written.",
            body = Problem, content_type = "application/problem+json"),
    ),
)]
async fn put_workflow(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Value>> {
    let body = json_body(body, state.options().body_limit_bytes)?;
    Ok(Json(workflows::save(&state, &id, body).await?))
}

#[utoipa::path(
    delete,
    path = "/workflows/{id}",
    tag = "workflows",
    summary = "Delete a workflow file",
    description = "Deletes the live file and the workflow's draft, if any.",
    params(("id" = String, Path, description = "The workflow id.")),
    responses(
        (status = 204, description = "Deleted."),
        (status = 404, description = "`workflow_not_found`: neither a file nor a draft.",
            body = Problem, content_type = "application/problem+json"),
        (status = 500, description = "`delete_failed`.", body = Problem,
            content_type = "application/problem+json"),
    ),
)]
async fn delete_workflow(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    workflows::delete(&state, &id)?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    get,
    path = "/workflows/{id}/draft",
    tag = "workflows",
    summary = "Get a workflow's draft",
    description = "The editor's unpublished draft: the definition as saved (it may not \
        validate), the live version it was saved over, when, and the live version now. Drafts \
        are kept in this server's data dir (`drafts/<id>.json`); nothing runs them.",
    params(("id" = String, Path, description = "The workflow id.")),
    responses(
        (status = 200, description = "The draft.", body = doc::Draft),
        (status = 400, description = "`invalid_workflow`: a bad id.", body = Problem,
            content_type = "application/problem+json"),
        (status = 404, description = "`draft_not_found`.", body = Problem,
            content_type = "application/problem+json"),
    ),
)]
async fn get_draft(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    Ok(Json(drafts::get_draft(&state, &id)?))
}

#[utoipa::path(
    put,
    path = "/workflows/{id}/draft",
    tag = "workflows",
    summary = "Save a workflow's draft",
    description = "Keeps the definition as the workflow's draft, even with validation errors \
        (the answer lists every problem, as validate does). The live workflow is untouched: \
        webhooks, schedules and runs go on using it until the draft is published.",
    params(("id" = String, Path, description = "The workflow id; the body's `id`, if any, \
        must match.")),
    request_body(content = Value, content_type = "application/json",
        description = "A workflow definition (a JSON object; it may not validate)."),
    responses(
        (status = 200, description = "Saved.", body = doc::DraftSaved),
        (status = 400, description = "`invalid_workflow` (a bad id, a body that is not an \
            object, an `id` that does not match), `invalid_json`, `bad_body`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 413, description = "`payload_too_large`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 500, description = "`draft_save_failed`.", body = Problem,
            content_type = "application/problem+json"),
    ),
)]
async fn put_draft(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Value>> {
    let body = json_body(body, state.options().body_limit_bytes)?;
    Ok(Json(drafts::save_draft(&state, &id, body).await?))
}

#[utoipa::path(
    delete,
    path = "/workflows/{id}/draft",
    tag = "workflows",
    summary = "Discard a workflow's draft",
    description = "Deletes the draft; the live workflow is untouched.",
    params(("id" = String, Path, description = "The workflow id.")),
    responses(
        (status = 204, description = "Discarded."),
        (status = 400, description = "`invalid_workflow`: a bad id.", body = Problem,
            content_type = "application/problem+json"),
        (status = 404, description = "`draft_not_found`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 500, description = "`draft_delete_failed`.", body = Problem,
            content_type = "application/problem+json"),
    ),
)]
async fn delete_draft(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    drafts::discard_draft(&state, &id)?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    post,
    path = "/workflows/{id}/publish",
    tag = "workflows",
    summary = "Publish a workflow's draft",
    description = "Makes the draft the live workflow (what webhooks, schedules and runs use): \
        saved as the workflow file with its `version` bumped, then the draft is deleted. A \
        draft with validation errors is refused with `422 workflow_invalid` and the live \
        workflow is untouched.",
    params(("id" = String, Path, description = "The workflow id.")),
    responses(
        (status = 200, description = "Published: the live file as saved.",
            body = doc::WorkflowSaved),
        (status = 400, description = "`invalid_workflow`: a bad id.", body = Problem,
            content_type = "application/problem+json"),
        (status = 404, description = "`draft_not_found`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 422, description = "`workflow_invalid`: the draft has validation errors \
            (see `problems`); `invalid_workflow`: not structurally a workflow.", body = Problem,
            content_type = "application/problem+json"),
        (status = 500, description = "`save_failed`.", body = Problem,
            content_type = "application/problem+json"),
    ),
)]
async fn publish(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    Ok(Json(drafts::publish(&state, &id).await?))
}

/// `POST /workflows/validate`: body = a workflow; answers every problem (errors and warnings).
#[utoipa::path(
    post,
    path = "/workflows/validate",
    tag = "workflows",
    summary = "Validate a definition without saving it",
    request_body(content = Value, content_type = "application/json",
        description = "A workflow definition (SPEC §1)."),
    responses(
        (status = 200, description = "Every error and linter warning at once.",
            body = doc::Validation),
        (status = 400, description = "`invalid_json`, `bad_body`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 413, description = "`payload_too_large`.", body = Problem,
            content_type = "application/problem+json"),
    ),
)]
async fn validate(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Value>> {
    let body = json_body(body, state.options().body_limit_bytes)?;
    Ok(Json(workflows::validate(&state, &body)))
}

/// The body of a dry run.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = DryRunRequest)]
struct DryRunBody {
    /// The run's input (default `{}`).
    #[serde(default)]
    input: Option<Value>,
    /// Dry-run this definition instead of the saved one (the editor's unsaved canvas).
    #[serde(default)]
    workflow: Option<Value>,
}

/// `POST /workflows/{id}/dry-run`: the same walk with every side effect simulated.
#[utoipa::path(
    post,
    path = "/workflows/{id}/dry-run",
    tag = "workflows",
    summary = "Dry-run a workflow",
    description = "Evaluates templates and routing for real but simulates every Memory \
        operation and external call (no byte leaves the machine, no store change); waits for \
        the run (up to its time limit, `run_timeout_s`, default 50 s) and answers it, recorded \
        with `mode: dry`.",
    params(("id" = String, Path, description = "The workflow id (ignored when the body has \
        `workflow`).")),
    request_body(content = Option<DryRunBody>, content_type = "application/json"),
    responses(
        (status = 200, description = "The finished dry run.", body = crate::run::RunRecord),
        (status = 400, description = "`invalid_body`, `invalid_json`, `bad_body`.",
            body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`workflow_not_found`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 409, description = "`workflow_invalid`: the saved workflow has validation \
            errors (see `problems`).", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "`payload_too_large`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 422, description = "`workflow_invalid`: the given `workflow` has validation \
            errors (see `problems`).", body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "`unavailable`: a store failure; retry after \
            `Retry-After`.", body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying."))),
    ),
)]
async fn dry_run(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Value>> {
    let body = json_body(body, state.options().body_limit_bytes)?;
    let parsed: DryRunBody = serde_json::from_value(body).map_err(|e| {
        ApiError::bad_request(
            "invalid_body",
            format!("expected {{\"input\": {{...}}, \"workflow\"?: {{...}}}}: {e}"),
        )
    })?;
    let run = workflows::dry_run(&state, &id, parsed.input, parsed.workflow).await?;
    Ok(Json(serde_json::to_value(run).unwrap_or_default()))
}

/// The body of a re-run safety check.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CheckRequest)]
struct CheckBody {
    /// The event to replay (a real payload).
    event: Value,
    /// Dot paths of the event's business ids (default `id`, plus `data.object.id`).
    #[serde(default)]
    id_paths: Vec<String>,
    /// Check this definition instead of the saved one (the editor's unsaved canvas).
    #[serde(default)]
    workflow: Option<Value>,
}

/// `POST /workflows/{id}/check`: the re-run safety check ([`crate::check`]) against a
/// throw-away sandbox and store: `{passed, checks: [{check, expected, seen, verdict}], …}`.
#[utoipa::path(
    post,
    path = "/workflows/{id}/check",
    tag = "workflows",
    summary = "Re-run safety check",
    description = "Replays a real event against a throw-away sandbox and store (timeouts after \
        writes, redeliveries, a variant event) and answers the table of checks.",
    params(("id" = String, Path, description = "The workflow id (ignored when the body has \
        `workflow`).")),
    request_body(content = CheckBody, content_type = "application/json"),
    responses(
        (status = 200, description = "The check table.", body = crate::check::CheckReport),
        (status = 400, description = "`invalid_body`, `invalid_check`, `invalid_json`, \
            `bad_body`.", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`workflow_not_found`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 409, description = "`workflow_invalid`: the saved file is not valid JSON.",
            body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "`payload_too_large`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 422, description = "`workflow_invalid`: validation errors (see `problems`).",
            body = Problem, content_type = "application/problem+json"),
        (status = 503, description = "`unavailable`: the sandbox could not start; retry after \
            `Retry-After`.", body = Problem, content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying."))),
    ),
)]
async fn check(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Value>> {
    let body = json_body(body, state.options().body_limit_bytes)?;
    let parsed: CheckBody = serde_json::from_value(body).map_err(|e| {
        ApiError::bad_request(
            "invalid_body",
            format!(
                "expected {{\"event\": {{...}}, \"id_paths\"?: [..], \"workflow\"?: {{...}}}}: {e}"
            ),
        )
    })?;
    let report =
        workflows::check(&state, &id, &parsed.event, parsed.id_paths, parsed.workflow).await?;
    Ok(Json(serde_json::to_value(report).unwrap_or_default()))
}

#[utoipa::path(
    get,
    path = "/memory",
    tag = "memory",
    summary = "List the Memory namespaces",
    responses(
        (status = 200, description = "Every namespace, and its live keys (`counts`: at most \
            10,000 counted, then `more: true`).", body = doc::Namespaces),
        (status = 503, description = "`unavailable`: a store failure.", body = Problem,
            content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying."))),
    ),
)]
async fn memory_namespaces(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    let counts = memory::namespace_counts(&state).await?;
    let ns: Vec<Value> = counts.iter().map(|c| c["namespace"].clone()).collect();
    Ok(Json(json!({"namespaces": ns, "counts": counts})))
}

/// Query of `GET /memory/{namespace}`.
#[derive(Deserialize, Default, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
struct MemoryListParams {
    /// Only keys that start with this.
    prefix: Option<String>,
    /// Keys after this one (the `next_after` of the previous page).
    after: Option<String>,
    /// Keys per page: 1..=1000, default 100.
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<usize>,
}

#[utoipa::path(
    get,
    path = "/memory/{namespace}",
    tag = "memory",
    summary = "List a namespace's live keys",
    params(("namespace" = String, Path, description = "The namespace."), MemoryListParams),
    responses(
        (status = 200, description = "A page of live keys in key order.", body = doc::MemoryPage),
        (status = 400, description = "`invalid_parameter`; `invalid_namespace` (empty, over \
            128 bytes, or a control character).", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "`unavailable`: a store failure.", body = Problem,
            content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying."))),
    ),
)]
async fn memory_list(
    State(state): State<AppState>,
    Path(ns): Path<String>,
    params: Result<Query<MemoryListParams>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<Value>> {
    let Query(p) = params.map_err(|e| ApiError::bad_request("invalid_parameter", e.body_text()))?;
    Ok(Json(
        memory::page(
            &state,
            &ns,
            p.prefix.as_deref(),
            p.after.as_deref(),
            p.limit,
        )
        .await?,
    ))
}

#[utoipa::path(
    get,
    path = "/memory/{namespace}/{key}",
    tag = "memory",
    summary = "Read a live key",
    params(
        ("namespace" = String, Path, description = "The namespace."),
        ("key" = String, Path, description = "The key."),
    ),
    responses(
        (status = 200, description = "The key, with its time left.", body = doc::MemoryEntry),
        (status = 400, description = "`invalid_namespace` (empty, over 128 bytes, or a \
            control character) or `key_too_long` (over 1024 bytes).", body = Problem,
            content_type = "application/problem+json"),
        (status = 404, description = "`key_not_found` (or it expired).", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "`unavailable`: a store failure.", body = Problem,
            content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying."))),
    ),
)]
async fn memory_get(
    State(state): State<AppState>,
    Path((ns, key)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    Ok(Json(memory::entry(&state, &ns, &key).await?))
}

#[utoipa::path(
    delete,
    path = "/memory/{namespace}/{key}",
    tag = "memory",
    summary = "Delete a key by hand",
    description = "The manual compensation after checking the destination; durable before \
        the answer.",
    params(
        ("namespace" = String, Path, description = "The namespace."),
        ("key" = String, Path, description = "The key."),
    ),
    responses(
        (status = 200, description = "Deleted.", body = doc::Deleted),
        (status = 400, description = "`invalid_namespace` (empty, over 128 bytes, or a \
            control character) or `key_too_long` (over 1024 bytes).", body = Problem,
            content_type = "application/problem+json"),
        (status = 404, description = "`key_not_found`: there was no live key.", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "`unavailable`: a store failure.", body = Problem,
            content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying."))),
    ),
)]
async fn memory_delete(
    State(state): State<AppState>,
    Path((ns, key)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    memory::delete(&state, &ns, &key).await?;
    Ok(Json(json!({"deleted": true})))
}

/// `GET /templates`: the built-in workflow templates (`[{id, name, workflow}]`).
#[utoipa::path(
    get,
    path = "/templates",
    tag = "catalog",
    summary = "The built-in workflow templates",
    responses((status = 200, description = "Every template.", body = doc::TemplateList)),
)]
async fn templates() -> Json<Value> {
    Json(json!({"templates": catalog::templates()}))
}

/// `GET /sample-payloads`: real payloads for the Dry Run input editor (`[{name, payload}]`).
#[utoipa::path(
    get,
    path = "/sample-payloads",
    tag = "catalog",
    summary = "Real payloads for the Dry Run input editor",
    responses((status = 200, description = "Every sample payload.", body = doc::SamplePayloadList)),
)]
async fn sample_payloads() -> Json<Value> {
    Json(json!({"payloads": catalog::sample_payloads()}))
}

/// `GET /connectors`: the apps and their operations ([`catalog::connectors`]).
#[utoipa::path(
    get,
    path = "/connectors",
    tag = "catalog",
    summary = "The connectors and their operations",
    description = "Every built-in connector: its credential kinds, documented rate limit and \
        operations, each with its input as JSON Schema and, for a write, how a repeat dedupes \
        (`native_key`, `upsert`, `conflict_is_exists`, `find_then_create`, `kept_id`, `none`) \
        and the badge the canvas shows.",
    responses((status = 200, description = "Every connector, by app id.", body = doc::ConnectorList)),
)]
async fn connectors() -> Json<Value> {
    Json(json!({"connectors": catalog::connectors()}))
}

#[utoipa::path(
    get,
    path = "/step-kinds",
    tag = "catalog",
    summary = "The step kinds catalog",
    responses((status = 200, description = "Every step kind, in palette order.",
        body = Vec<doc::StepKind>)),
)]
async fn step_kinds(State(state): State<AppState>) -> Json<Value> {
    Json(catalog::step_kinds(&state))
}

/// `GET /events`: server-sent events, one `run` event per run change (JSON of
/// [`crate::runtime::RunEvent`]), each with an `id`; resumes after `Last-Event-ID`
/// ([`events::stream`]).
#[utoipa::path(
    get,
    path = "/events",
    tag = "events",
    summary = "Server-sent events of run progress (resumable with Last-Event-ID)",
    description = "A `text/event-stream` that stays open: one `run` event per run change, its \
        `data` the JSON `RunEvent`, its `id` a decimal integer that only grows (across \
        restarts too). The server keeps the newest 1,024 events: a client that reconnects with \
        `Last-Event-ID: <the last id it saw>` (a browser's `EventSource` does so by itself) \
        first receives every buffered event after it, once and in order, then the live ones, \
        with no gap between them. When the events after that id are not all buffered any more \
        (`too_old`), the id is from an earlier run of the server (`restarted`), or it is not an \
        id of this stream (`unknown`), the stream starts with a `reset` event instead (its \
        `data` the `EventReset`: the reason, how many events were missed when known, the \
        oldest id still buffered): reload what you show, then follow the live events. A \
        consumer too slow for the live events catches up from the same buffer, or gets a \
        `reset`. A connection without `Last-Event-ID` starts with an `id:` line and no data \
        (the newest id so far: it fires no event, but a reconnect resumes from it). Comments \
        keep the connection alive.",
    params(("Last-Event-ID" = Option<String>, Header, description = "The `id` of the last \
        event received: resume after it.")),
    responses((status = 200, description = "The event stream (the schema is a `run` event's \
        `data`; a `reset` event's `data` is an `EventReset`).", body = crate::runtime::RunEvent,
        content_type = "text/event-stream")),
)]
async fn events(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
) -> Sse<impl futures_core::Stream<Item = Result<Event, Infallible>>> {
    let last = headers
        .get("last-event-id")
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let stream = futures_util::StreamExt::map(events::stream(&state, last.as_deref()), |d| {
        Ok(match d {
            events::Delivery::Run(j) => Event::default()
                .event("run")
                .id(j.id.to_string())
                .json_data(&j.event)
                .unwrap_or_default(),
            events::Delivery::Reset(r) => Event::default()
                .event("reset")
                .id(r.id.to_string())
                .json_data(&r)
                .unwrap_or_default(),
            events::Delivery::Position(id) => Event::default().id(id.to_string()),
        })
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// `POST /templates/preview`: one template rendered as a step would render it.
#[utoipa::path(
    post,
    path = "/templates/preview",
    tag = "workflows",
    summary = "Preview a template against a sample input and earlier steps' outputs",
    request_body(content = templates::TemplatePreview, content_type = "application/json"),
    responses(
        (status = 200, description = "`{value, env_unset}` (the rendered JSON value; unset \
            variables rendered as their dry-run placeholder), or `{error, env_unset}` naming why \
            it does not render (syntax, a missing value).", body = doc::TemplatePreviewAnswer,
            example = json!({"value": "deal-in_1Pgc6tB7WZ01zgkWu9fdqL6I", "env_unset": []})),
        (status = 400, description = "`invalid_json`, `bad_body`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 413, description = "`payload_too_large`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "`unavailable`: every preview slot stayed busy for 2 s \
            (at most 2 previews render at once); `Retry-After` says when to try again.",
            body = Problem, content_type = "application/problem+json"),
    ),
)]
async fn preview_template(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Value>> {
    let body = json_body(body, state.options().body_limit_bytes)?;
    let req: templates::TemplatePreview = serde_json::from_value(body)
        .map_err(|e| ApiError::bad_request("bad_body", format!("the preview request: {e}")))?;
    Ok(Json(templates::preview(&state, req).await?))
}
