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

use super::error::{ApiError, ApiResult, Problem};
use super::openapi as doc;
use super::runs::json_body;
use super::AppState;
use crate::run::{Mode, Trigger};
use crate::runtime::RunRequest;
use crate::workflow::check_value;
use crate::workflow::dir::DirError;

/// Routes under `/api/v1` (token required), each with its documentation (one `routes!` per
/// path: the handlers of its methods).
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_workflows))
        .routes(routes!(validate))
        .routes(routes!(get_workflow, put_workflow, delete_workflow))
        .routes(routes!(dry_run))
        .routes(routes!(check))
        .routes(routes!(memory_namespaces))
        .routes(routes!(memory_list))
        .routes(routes!(memory_get, memory_delete))
        .routes(routes!(step_kinds))
        .routes(routes!(templates))
        .routes(routes!(sample_payloads))
        .routes(routes!(events))
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
    Json(
        json!({"workflows": state.workflows().list().iter().map(|e| e.summary()).collect::<Vec<_>>()}),
    )
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
    let e = state
        .workflows()
        .get(&id)
        .ok_or_else(|| ApiError::not_found("workflow_not_found", format!("no workflow `{id}`")))?;
    Ok(([(header::CONTENT_TYPE, "application/json")], e.text.clone()).into_response())
}

#[utoipa::path(
    put,
    path = "/workflows/{id}",
    tag = "workflows",
    summary = "Create or replace a workflow file",
    description = "Saves the definition atomically, bumping its `version`. A structurally \
        valid workflow is saved even with validation errors (the answer lists them); one that \
        is not is refused with `422`.",
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
        (status = 422, description = "`invalid_workflow`: not structurally valid; see \
            `problems`.", body = Problem, content_type = "application/problem+json"),
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
    // The save waits for the workflow's lock and fsyncs: off the async threads.
    let saver = state.clone();
    let saved = tokio::task::spawn_blocking(move || saver.workflows().save(&id, body))
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "workflow save task failed");
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "save_failed",
                "the workflow file could not be written",
            )
        })?;
    let entry = saved.map_err(|e| match e {
        DirError::BadId(_) | DirError::IdMismatch { .. } => {
            ApiError::bad_request("invalid_workflow", e.to_string())
        }
        DirError::Invalid(problems) => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_workflow",
            "the workflow is not structurally valid; see `problems`",
        )
        .with_extra(json!({"problems": problems})),
        DirError::Io { .. } => {
            tracing::error!(error = %e, "workflow save failed");
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "save_failed",
                "the workflow file could not be written",
            )
        }
    })?;
    Ok(Json(json!({
        "workflow": entry.value,
        "version": entry.version(),
        "valid": entry.compiled.is_some(),
        "problems": entry.problems,
    })))
}

#[utoipa::path(
    delete,
    path = "/workflows/{id}",
    tag = "workflows",
    summary = "Delete a workflow file",
    params(("id" = String, Path, description = "The workflow id.")),
    responses(
        (status = 204, description = "Deleted."),
        (status = 404, description = "`workflow_not_found`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 500, description = "`delete_failed`.", body = Problem,
            content_type = "application/problem+json"),
    ),
)]
async fn delete_workflow(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    match state.workflows().delete(&id) {
        Ok(true) => Ok(StatusCode::NO_CONTENT),
        Ok(false) => Err(ApiError::not_found(
            "workflow_not_found",
            format!("no workflow `{id}`"),
        )),
        Err(e) => {
            tracing::error!(error = %e, "workflow delete failed");
            Err(ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "delete_failed",
                "the workflow file could not be deleted",
            ))
        }
    }
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
    let (compiled, problems) = check_value(&body, state.engine().registry());
    Ok(Json(
        json!({"valid": compiled.is_some(), "problems": problems}),
    ))
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
    let wf = match parsed.workflow {
        Some(def) => {
            let (c, problems) = check_value(&def, state.engine().registry());
            std::sync::Arc::new(c.ok_or_else(|| {
                ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "workflow_invalid",
                    "the workflow has validation errors; see `problems`",
                )
                .with_extra(json!({"problems": problems}))
            })?)
        }
        None => crate::app::runs::runnable(&state, &id)?,
    };
    let run = state
        .engine()
        .run(
            &wf,
            RunRequest::new(
                parsed.input.unwrap_or_else(|| json!({})),
                Trigger::Manual,
                Mode::Dry,
            ),
        )
        .await
        .map_err(ApiError::store)?;
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
    let definition = match parsed.workflow {
        Some(d) => d,
        None => {
            let entry = state.workflows().get(&id).ok_or_else(|| {
                ApiError::not_found("workflow_not_found", format!("no workflow `{id}`"))
            })?;
            entry.value.clone().ok_or_else(|| {
                ApiError::conflict(
                    "workflow_invalid",
                    format!("workflow `{id}` is not valid JSON"),
                )
            })?
        }
    };
    let options = crate::check::CheckOptions {
        id_paths: parsed.id_paths,
    };
    let report = crate::check::check(&definition, &parsed.event, &options)
        .await
        .map_err(|e| match e {
            crate::check::CheckError::Invalid(problems) => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "workflow_invalid",
                "the workflow has validation errors; see `problems`",
            )
            .with_extra(json!({"problems": problems})),
            crate::check::CheckError::BadInput(m) => ApiError::bad_request("invalid_check", m),
            crate::check::CheckError::Setup(m) => {
                tracing::error!(error = %m, "check setup failed");
                ApiError::unavailable("the check could not start its sandbox; retry", 1)
            }
        })?;
    Ok(Json(serde_json::to_value(report).unwrap_or_default()))
}

#[utoipa::path(
    get,
    path = "/memory",
    tag = "memory",
    summary = "List the Memory namespaces",
    responses(
        (status = 200, description = "Every namespace.", body = doc::Namespaces),
        (status = 503, description = "`unavailable`: a store failure.", body = Problem,
            content_type = "application/problem+json",
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying."))),
    ),
)]
async fn memory_namespaces(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    let ns = state.store().namespaces().await.map_err(ApiError::store)?;
    Ok(Json(json!({"namespaces": ns})))
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

fn entry_view(e: &crate::store::MemoryEntry, now: i64) -> Value {
    let mut v = crate::cli::entry_json(e);
    if let (Some(x), Value::Object(m)) = (e.expires_at, &mut v) {
        m.insert("ttl_left_ms".into(), json!((x - now).max(0)));
    }
    v
}

fn key_not_found(ns: &str, key: &str) -> ApiError {
    ApiError::not_found(
        "key_not_found",
        format!("no key `{key}` in namespace `{ns}` (or it expired)"),
    )
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
        memory_page(
            &state,
            &ns,
            p.prefix.as_deref(),
            p.after.as_deref(),
            p.limit,
        )
        .await?,
    ))
}

/// Live keys of a namespace (the Memory browser), shared by the HTTP API and the app:
/// `{namespace, entries: [{namespace, key, value, written_at, expires_at?, ttl_left_ms?}],
/// next_after}` with up to `limit` (1..=1000, default 100) keys after `after` that start with
/// `prefix`.
pub async fn memory_page(
    state: &AppState,
    ns: &str,
    prefix: Option<&str>,
    after: Option<&str>,
    limit: Option<usize>,
) -> ApiResult<Value> {
    let limit = limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::bad_request(
            "invalid_parameter",
            format!("`limit`: {limit} is not between 1 and 1000"),
        ));
    }
    crate::store::check_namespace(ns).map_err(|e| ApiError::memory_name("namespace", e))?;
    let now = state.clock().now_ms();
    let entries = state
        .store()
        .list(ns, prefix.unwrap_or(""), after, limit + 1, now)
        .await
        .map_err(ApiError::store)?;
    let next = (entries.len() > limit)
        .then(|| entries.get(limit - 1).map(|e| e.key.clone()))
        .flatten();
    let items: Vec<Value> = entries
        .iter()
        .take(limit)
        .map(|e| entry_view(e, now))
        .collect();
    Ok(json!({"namespace": ns, "entries": items, "next_after": next}))
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
    Ok(Json(memory_entry(&state, &ns, &key).await?))
}

/// The namespace and key of a Memory path, by the store's rules
/// ([`crate::store::check_namespace`], [`crate::store::check_memory_key`]): `400
/// invalid_namespace` / `key_too_long` before the store is asked (a NUL in a namespace used to
/// reach the store and come back as a retryable 503).
fn check_memory_path(ns: &str, key: &str) -> ApiResult<()> {
    crate::store::check_namespace(ns).map_err(|e| ApiError::memory_name("namespace", e))?;
    crate::store::check_memory_key(key).map_err(|e| ApiError::memory_name("key", e))
}

/// One live key with its time left, or `404 key_not_found`.
pub async fn memory_entry(state: &AppState, ns: &str, key: &str) -> ApiResult<Value> {
    check_memory_path(ns, key)?;
    let now = state.clock().now_ms();
    let e = state
        .store()
        .read(ns, key, now)
        .await
        .map_err(ApiError::store)?
        .ok_or_else(|| key_not_found(ns, key))?;
    Ok(entry_view(&e, now))
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
    memory_remove(&state, &ns, &key).await?;
    Ok(Json(json!({"deleted": true})))
}

/// Delete a key by hand (the manual compensation after checking the destination), made
/// durable before answering; `404 key_not_found` if there was no live key.
pub async fn memory_remove(state: &AppState, ns: &str, key: &str) -> ApiResult<()> {
    check_memory_path(ns, key)?;
    let now = state.clock().now_ms();
    let deleted = state
        .store()
        .delete(ns, key, now)
        .await
        .map_err(ApiError::store)?;
    state.commit().durable().await.map_err(ApiError::store)?;
    if !deleted {
        return Err(key_not_found(ns, key));
    }
    tracing::info!(namespace = %ns, "memory key deleted by hand");
    Ok(())
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
    let list: Vec<Value> = crate::samples::TEMPLATES
        .iter()
        .filter_map(|(id, text)| serde_json::from_str::<Value>(text).ok().map(|w| json!({"id": id, "name": w.get("name").cloned().unwrap_or(Value::Null), "workflow": w})))
        .collect();
    Json(json!({"templates": list}))
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
    let list: Vec<Value> = crate::samples::PAYLOADS
        .iter()
        .filter_map(|(name, text)| {
            serde_json::from_str::<Value>(text)
                .ok()
                .map(|p| json!({"name": name, "payload": p}))
        })
        .collect();
    Json(json!({"payloads": list}))
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
    Json(state.engine().registry().catalog())
}

/// `GET /events`: server-sent events, one `run` event per run change (JSON of
/// [`crate::runtime::RunEvent`]). Slow consumers skip missed events (a `lagged` event tells).
#[utoipa::path(
    get,
    path = "/events",
    tag = "events",
    summary = "Server-sent events of run progress",
    description = "A `text/event-stream` that stays open: one `run` event per run change, its \
        `data` the JSON `RunEvent`; a slow consumer skips missed events and gets a `lagged` \
        event whose `data` is how many it missed. Comments keep the connection alive.",
    responses((status = 200, description = "The event stream (the schema is a `run` event's \
        `data`).", body = crate::runtime::RunEvent, content_type = "text/event-stream")),
)]
async fn events(
    State(state): State<AppState>,
) -> Sse<impl futures_core::Stream<Item = Result<Event, Infallible>>> {
    let rx = state.engine().subscribe();
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        let event = match rx.recv().await {
            Ok(ev) => Event::default()
                .event("run")
                .json_data(&ev)
                .unwrap_or_default(),
            Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                Event::default().event("lagged").data(n.to_string())
            }
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
        };
        Some((Ok(event), rx))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}
