//! The catalog: step kinds (with their JSON Schemas), workflow templates, sample payloads.
//! The same arrays as `GET /api/v1/step-kinds`, `/templates` (its `templates` member) and
//! `/sample-payloads` (its `payloads` member), from [`fluxo::app::catalog`].

use fluxo::app::{catalog, AppState};
use serde_json::Value;
use tauri::State;

use crate::error::IpcResult;

#[tauri::command]
pub async fn step_kinds(state: State<'_, AppState>) -> IpcResult<Value> {
    Ok(catalog::step_kinds(&state))
}

/// `[{id, name, workflow}]`.
#[tauri::command]
pub async fn templates() -> IpcResult<Vec<Value>> {
    Ok(catalog::templates())
}

/// `[{name, payload}]`.
#[tauri::command]
pub async fn sample_payloads() -> IpcResult<Vec<Value>> {
    Ok(catalog::sample_payloads())
}

/// The connectors and their operations, like `GET /api/v1/connectors` (the list).
#[tauri::command]
pub async fn connectors() -> IpcResult<Vec<Value>> {
    Ok(catalog::connectors())
}

/// One template rendered as a step would render it, like `POST /api/v1/templates/preview`:
/// `{value, env_unset}` or `{error, env_unset}`.
#[tauri::command]
pub async fn preview_template(
    state: State<'_, AppState>,
    request: fluxo::app::templates::TemplatePreview,
) -> IpcResult<Value> {
    Ok(fluxo::app::templates::preview(&state, request).await?)
}
