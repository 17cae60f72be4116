//! Settings routes: env variables for templates, retention, listener address, the API token.
//!
//! * `GET /api/v1/settings` → the settings plus read-only facts (data dir, workflows dir).
//! * `PUT /api/v1/settings` → replace them (validated; saved to `<data-dir>/settings.json`).
//! * `GET /api/v1/settings/token` → the API token (to show it once more).
//! * `POST /api/v1/settings/token` → a new token; the old one stops working at once.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Value};

use super::auth::{generate_token, write_secret};
use super::error::{ApiError, ApiResult};
use super::runs::json_body;
use super::AppState;
use crate::settings::AppSettings;

/// Routes under `/api/v1`.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/settings", get(get_settings).put(put_settings))
        .route("/settings/token", get(get_token).post(regenerate_token))
}

fn view(state: &AppState) -> Value {
    let s = state.settings();
    let r = state.retention();
    json!({
        "settings": s,
        "effective": {
            "retention_runs": r.max_runs_per_workflow,
            "retention_days": r.max_age_ms.map(|ms| ms / 86_400_000),
        },
        "data_dir": state.options().data_dir,
        "workflows_dir": state.workflows().path(),
    })
}

async fn get_settings(State(state): State<AppState>) -> Json<Value> {
    Json(view(&state))
}

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

async fn get_token(State(state): State<AppState>) -> Json<Value> {
    Json(json!({"token": state.token()}))
}

async fn regenerate_token(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    let token = generate_token();
    if let Some(dir) = &state.options().data_dir {
        write_secret(&dir.join("token"), &token).map_err(|e| {
            tracing::error!(error = %e, "token file write failed");
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "save_failed",
                "the token file could not be written",
            )
        })?;
    }
    state.set_token(token.clone());
    tracing::info!("API token regenerated");
    Ok(Json(json!({"token": token})))
}
