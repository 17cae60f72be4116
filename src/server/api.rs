//! Workflows CRUD over the files in `--workflows`, validate, dry-run, Memory, step kinds,
//! server-sent events of run progress, health and the OpenAPI document.

use std::convert::Infallible;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use super::error::{ApiError, ApiResult};
use super::runs::json_body;
use super::AppState;
use crate::run::{Mode, Trigger};
use crate::runtime::RunRequest;
use crate::workflow::check_value;
use crate::workflow::dir::DirError;

/// Routes under `/api/v1` (token required).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/workflows", get(list_workflows))
        .route("/workflows/validate", post(validate))
        .route(
            "/workflows/{id}",
            get(get_workflow).put(put_workflow).delete(delete_workflow),
        )
        .route("/workflows/{id}/dry-run", post(dry_run))
        .route("/workflows/{id}/check", post(check))
        .route("/memory", get(memory_namespaces))
        .route("/memory/{namespace}", get(memory_list))
        .route(
            "/memory/{namespace}/{key}",
            get(memory_get).delete(memory_delete),
        )
        .route("/step-kinds", get(step_kinds))
        .route("/templates", get(templates))
        .route("/sample-payloads", get(sample_payloads))
        .route("/events", get(events))
}

/// `GET /healthz`: liveness, no auth.
pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}))
}

/// `GET /api/v1/openapi.json`.
pub async fn openapi() -> Json<Value> {
    Json(super::openapi::document())
}

async fn list_workflows(State(state): State<AppState>) -> Json<Value> {
    Json(
        json!({"workflows": state.workflows().list().iter().map(|e| e.summary()).collect::<Vec<_>>()}),
    )
}

/// The file's JSON exactly, so GET then PUT round-trips.
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

async fn put_workflow(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Value>> {
    let body = json_body(body, state.options().body_limit_bytes)?;
    let entry = state.workflows().save(&id, body).map_err(|e| match e {
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DryRunBody {
    #[serde(default)]
    input: Option<Value>,
    /// Dry-run this definition instead of the saved one (the editor's unsaved canvas).
    #[serde(default)]
    workflow: Option<Value>,
}

/// `POST /workflows/{id}/dry-run`: the same walk with every side effect simulated.
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
        None => super::runs::runnable(&state, &id)?,
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
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

async fn memory_namespaces(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    let ns = state.store().namespaces().map_err(ApiError::store)?;
    Ok(Json(json!({"namespaces": ns})))
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct MemoryListParams {
    prefix: Option<String>,
    after: Option<String>,
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

async fn memory_list(
    State(state): State<AppState>,
    Path(ns): Path<String>,
    params: Result<Query<MemoryListParams>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<Value>> {
    let Query(p) = params.map_err(|e| ApiError::bad_request("invalid_parameter", e.body_text()))?;
    Ok(Json(memory_page(
        &state,
        &ns,
        p.prefix.as_deref(),
        p.after.as_deref(),
        p.limit,
    )?))
}

/// Live keys of a namespace (the Memory browser), shared by the HTTP API and the app:
/// `{namespace, entries: [{namespace, key, value, written_at, expires_at?, ttl_left_ms?}],
/// next_after}` with up to `limit` (1..=1000, default 100) keys after `after` that start with
/// `prefix`.
pub fn memory_page(
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
    let now = state.clock().now_ms();
    let entries = state
        .store()
        .list(ns, prefix.unwrap_or(""), after, limit + 1, now)
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

async fn memory_get(
    State(state): State<AppState>,
    Path((ns, key)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    Ok(Json(memory_entry(&state, &ns, &key)?))
}

/// One live key with its time left, or `404 key_not_found`.
pub fn memory_entry(state: &AppState, ns: &str, key: &str) -> ApiResult<Value> {
    let now = state.clock().now_ms();
    let e = state
        .store()
        .read(ns, key, now)
        .map_err(ApiError::store)?
        .ok_or_else(|| key_not_found(ns, key))?;
    Ok(entry_view(&e, now))
}

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
    let now = state.clock().now_ms();
    let deleted = state
        .store()
        .delete(ns, key, now)
        .map_err(ApiError::store)?;
    state.commit().durable().await.map_err(ApiError::store)?;
    if !deleted {
        return Err(key_not_found(ns, key));
    }
    tracing::info!(namespace = %ns, "memory key deleted by hand");
    Ok(())
}

/// `GET /templates`: the built-in workflow templates (`[{id, name, workflow}]`).
async fn templates() -> Json<Value> {
    let list: Vec<Value> = crate::samples::TEMPLATES
        .iter()
        .filter_map(|(id, text)| serde_json::from_str::<Value>(text).ok().map(|w| json!({"id": id, "name": w.get("name").cloned().unwrap_or(Value::Null), "workflow": w})))
        .collect();
    Json(json!({"templates": list}))
}

/// `GET /sample-payloads`: real payloads for the Dry Run input editor (`[{name, payload}]`).
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

async fn step_kinds(State(state): State<AppState>) -> Json<Value> {
    Json(state.engine().registry().catalog())
}

/// `GET /events`: server-sent events, one `run` event per run change (JSON of
/// [`crate::runtime::RunEvent`]). Slow consumers skip missed events (a `lagged` event tells).
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
