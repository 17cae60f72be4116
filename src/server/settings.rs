//! Settings routes: env variables for templates, retention, listener address, the API token.
//!
//! * `GET /api/v1/settings` → the settings plus read-only facts (data dir, workflows dir);
//!   secret env values are shown masked (`••••1234`, see [`crate::secrets`]), never in clear.
//! * `PUT /api/v1/settings` → replace them (validated; saved to `<data-dir>/settings.json`, or
//!   to the shared database);
//!   a secret sent back as its mask keeps the stored value.
//! * `GET /api/v1/settings/token` → the API token (to show it once more).
//! * `POST /api/v1/settings/token` → a new token; the old one stops working at once.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::Json;
use serde_json::{json, Value};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::body::json_body;
use super::error::{ApiResult, Problem};
use super::openapi as doc;
use crate::app::{settings, AppState};
use crate::settings::AppSettings;

/// Routes under `/api/v1`, each with its documentation.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_settings, put_settings))
        .routes(routes!(get_token, regenerate_token))
}

#[utoipa::path(
    get,
    path = "/settings",
    tag = "settings",
    summary = "The settings and read-only facts",
    description = "Secret env values (names with `KEY`, `TOKEN`, `SECRET`, `PASSWORD`, \
        `PASSWD`, `PASSPHRASE`, `PWD`, `AUTH`, `CREDENTIAL`, `PRIVATE`, `COOKIE`, `SESSION`, \
        or listed in `secret_env`) are masked: `••••` plus the last 4 characters of a value of \
        12 or more, else `••••`.",
    responses((status = 200, description = "The settings.", body = doc::SettingsView)),
)]
async fn get_settings(State(state): State<AppState>) -> Json<Value> {
    Json(settings::view(&state))
}

#[utoipa::path(
    put,
    path = "/settings",
    tag = "settings",
    summary = "Replace the settings",
    description = "Validated, saved to `<data-dir>/settings.json` (on a shared PostgreSQL \
        database: to the database, and every process takes them up within 2 s) and applied (env variables \
        at once; retention from the next maintenance pass, within a minute). A secret env value \
        sent back as the mask `GET` showed (`••••1234`) keeps the stored value; a mask that \
        does not match the stored value is refused (`invalid_settings`).",
    request_body(content = AppSettings, content_type = "application/json"),
    responses(
        (status = 200, description = "The settings as now in force.", body = doc::SettingsView),
        (status = 400, description = "`invalid_settings`, `invalid_json`, `bad_body`.",
            body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "`payload_too_large`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 500, description = "`save_failed`: the settings file could not be written.",
            body = Problem, content_type = "application/problem+json"),
    ),
)]
async fn put_settings(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Value>> {
    let body = json_body(body, state.options().body_limit_bytes)?;
    let s = settings::parse(body)?;
    Ok(Json(settings::save(&state, s).await?))
}

#[utoipa::path(
    get,
    path = "/settings/token",
    tag = "settings",
    summary = "The API token (to show it once more)",
    responses((status = 200, description = "The token in force.", body = doc::Token)),
)]
async fn get_token(State(state): State<AppState>) -> Json<Value> {
    Json(json!({"token": settings::token(&state)}))
}

#[utoipa::path(
    post,
    path = "/settings/token",
    tag = "settings",
    summary = "Regenerate the API token",
    description = "A new random token (256 bits, hex), saved to `<data-dir>/token` (on a shared \
        PostgreSQL database, unless the token was given with `--token`: to the database, and \
        every process takes it up within 2 s); the old one stops working at once (this answer \
        is the last one it gets).",
    responses(
        (status = 200, description = "The new token.", body = doc::Token),
        (status = 500, description = "`save_failed`: the token file could not be written.",
            body = Problem, content_type = "application/problem+json"),
    ),
)]
async fn regenerate_token(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    let token = settings::new_token(&state).await?;
    Ok(Json(json!({"token": token})))
}
