//! Settings routes: env variables for templates, retention, listener address, the API token.
//!
//! * `GET /api/v1/settings` → the settings plus read-only facts (data dir, workflows dir);
//!   secret env values are shown masked (`••••1234`, see [`crate::secrets`]), never in clear.
//! * `PUT /api/v1/settings` → replace them (validated; saved to `<data-dir>/settings.json`);
//!   a secret sent back as its mask keeps the stored value.
//! * `GET /api/v1/settings/token` → the API token (to show it once more).
//! * `POST /api/v1/settings/token` → a new token; the old one stops working at once.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::{generate_token, write_secret};
use super::error::{ApiError, ApiResult, Problem};
use super::openapi as doc;
use super::runs::json_body;
use super::AppState;
use crate::settings::AppSettings;

/// Routes under `/api/v1`, each with its documentation.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(get_settings, put_settings))
        .routes(routes!(get_token, regenerate_token))
}

/// `{settings, secret_names, effective, data_dir, workflows_dir}`: the settings (secret env
/// values masked) and the read-only facts, as `GET /api/v1/settings` answers them (and the
/// desktop app's `get_settings`).
pub fn view(state: &AppState) -> Value {
    let s = state.settings();
    let r = state.retention();
    json!({
        "settings": s.masked(),
        "secret_names": s.secret_names(),
        "effective": {
            "retention_runs": r.max_runs_per_workflow,
            "retention_days": r.max_age_ms.map(|ms| ms / 86_400_000),
        },
        "data_dir": state.options().data_dir,
        "workflows_dir": state.workflows().path(),
    })
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
    Json(view(&state))
}

#[utoipa::path(
    put,
    path = "/settings",
    tag = "settings",
    summary = "Replace the settings",
    description = "Validated, saved to `<data-dir>/settings.json` and applied (env variables \
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
    let s: AppSettings = serde_json::from_value(body)
        .map_err(|e| ApiError::bad_request("invalid_settings", format!("settings: {e}")))?;
    state.set_settings(s).map_err(|e| match e {
        crate::settings::SettingsError::Io { .. } => {
            tracing::error!(error = %e, "settings save failed");
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "save_failed",
                "the settings file could not be written",
            )
        }
        other => ApiError::bad_request("invalid_settings", other.to_string()),
    })?;
    Ok(Json(view(&state)))
}

#[utoipa::path(
    get,
    path = "/settings/token",
    tag = "settings",
    summary = "The API token (to show it once more)",
    responses((status = 200, description = "The token in force.", body = doc::Token)),
)]
async fn get_token(State(state): State<AppState>) -> Json<Value> {
    Json(json!({"token": state.token()}))
}

#[utoipa::path(
    post,
    path = "/settings/token",
    tag = "settings",
    summary = "Regenerate the API token",
    description = "A new random token (256 bits, hex), saved to `<data-dir>/token`; the old one \
        stops working at once (this answer is the last one it gets).",
    responses(
        (status = 200, description = "The new token.", body = doc::Token),
        (status = 500, description = "`save_failed`: the token file could not be written.",
            body = Problem, content_type = "application/problem+json"),
    ),
)]
async fn regenerate_token(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    let token = new_token(&state).map_err(|_| {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "save_failed",
            "the token file could not be written",
        )
    })?;
    Ok(Json(json!({"token": token})))
}

/// Regenerate the API token: a new random one, saved to `<data-dir>/token` (mode 0600) when
/// there is a data dir, in force at once (the old one stops working). On a write error
/// (logged) nothing changes. Shared by `POST /api/v1/settings/token` and the desktop app.
pub fn new_token(state: &AppState) -> std::io::Result<String> {
    let token = generate_token();
    if let Some(dir) = &state.options().data_dir {
        write_secret(&dir.join("token"), &token).inspect_err(|e| {
            tracing::error!(error = %e, "token file write failed");
        })?;
    }
    state.set_token(token.clone());
    tracing::info!("API token regenerated");
    Ok(token)
}
