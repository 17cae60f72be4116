//! Connection routes (issue 35): the accounts connector steps act as, kept encrypted in
//! `<data-dir>/connections.enc` ([`crate::connections::file`]).
//!
//! * `GET /api/v1/connections` → every connection, secrets masked.
//! * `GET /api/v1/connections/{id}` → one, secrets masked.
//! * `PUT /api/v1/connections/{id}` → add or replace it (validated; a secret sent back as its
//!   mask keeps the stored value).
//! * `DELETE /api/v1/connections/{id}` → remove it.
//!
//! The use cases are [`crate::app::connections`]; no answer ever carries a secret.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::body::json_body;
use super::error::{ApiResult, Problem};
use super::openapi as doc;
use crate::app::{connections, AppState};

/// Routes under `/api/v1`, each with its documentation.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_connections))
        .routes(routes!(get_connection, put_connection, delete_connection))
}

#[utoipa::path(
    get,
    path = "/connections",
    tag = "connections",
    summary = "Every connection, secrets masked",
    description = "The connections connector steps act as, by id. Each secret field of a \
        credential (`token`, `password`, `url` of a webhook URL, `access_token`, \
        `refresh_token`, `client_secret`) is masked: `••••` plus the last 4 characters of a \
        value of 12 or more, else `••••`; the value itself is never answered.",
    responses(
        (status = 200, description = "The connections.", body = doc::ConnectionList),
        (status = 503, description = "`connections_unavailable`: the store cannot be read \
            (a wrong key, a damaged file: the message says which).",
            body = Problem, content_type = "application/problem+json"),
    ),
)]
async fn list_connections(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    Ok(Json(connections::list(&state)?))
}

#[utoipa::path(
    get,
    path = "/connections/{id}",
    tag = "connections",
    summary = "One connection, secrets masked",
    params(("id" = String, Path, description = "The connection id.")),
    responses(
        (status = 200, description = "The connection.", body = doc::ConnectionView),
        (status = 404, description = "`connection_not_found`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "`connections_unavailable`.", body = Problem,
            content_type = "application/problem+json"),
    ),
)]
async fn get_connection(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    Ok(Json(connections::get(&state, &id)?))
}

#[utoipa::path(
    put,
    path = "/connections/{id}",
    tag = "connections",
    summary = "Add or replace a connection",
    description = "Validated, then written encrypted to `<data-dir>/connections.enc` (the \
        whole connection is replaced). Rules, each error naming its member: `id` \
        `[a-z0-9][a-z0-9_-]{0,63}`; `app` `[a-z0-9_]+`; every credential field non-empty; \
        `base_url` and a credential's `url`/`token_url` are http(s) URLs; `values` names \
        `[A-Za-z_][A-Za-z0-9_]*`. A secret field sent back as the mask `GET` showed \
        (`••••3456`) keeps the stored value; any other mask is refused. Its secrets are \
        masked in run records from the next run on.",
    params(("id" = String, Path, description = "The connection id.")),
    request_body(content = doc::ConnectionInput, content_type = "application/json"),
    responses(
        (status = 200, description = "The connection as stored, secrets masked.",
            body = doc::ConnectionView),
        (status = 400, description = "`invalid_connection` (the message names the member), \
            `invalid_json`, `bad_body`.",
            body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "`payload_too_large`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "`connections_unavailable`: the store cannot be read \
            or written; nothing was changed.",
            body = Problem, content_type = "application/problem+json"),
    ),
)]
async fn put_connection(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Value>> {
    let body = json_body(body, state.options().body_limit_bytes)?;
    Ok(Json(connections::put(&state, &id, &body)?))
}

#[utoipa::path(
    delete,
    path = "/connections/{id}",
    tag = "connections",
    summary = "Remove a connection",
    params(("id" = String, Path, description = "The connection id.")),
    responses(
        (status = 204, description = "Removed."),
        (status = 404, description = "`connection_not_found`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "`connections_unavailable`; nothing was changed.",
            body = Problem, content_type = "application/problem+json"),
    ),
)]
async fn delete_connection(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    connections::remove(&state, &id)?;
    Ok(StatusCode::NO_CONTENT)
}
