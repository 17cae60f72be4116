//! Workflows: list, get, save (drafts saved with their problems), delete, validate. Like
//! `GET|PUT|DELETE /api/v1/workflows/{id}` and `POST /api/v1/workflows/validate`: each over
//! the same [`fluxo::app::workflows`] call (and its one mapping of the folder's errors).

use fluxo::app::{workflows, AppState};
use serde_json::Value;
use tauri::State;

use crate::error::IpcResult;

#[tauri::command]
pub async fn list_workflows(state: State<'_, AppState>) -> IpcResult<Vec<Value>> {
    Ok(workflows::list(&state))
}

/// The file's JSON (key order kept); `invalid_json` with its `problems` if it is not JSON.
#[tauri::command]
pub async fn get_workflow(state: State<'_, AppState>, id: String) -> IpcResult<Value> {
    Ok(workflows::get_json(&state, &id)?)
}

/// Saves with a version bump; a draft that does not validate is saved and answered with its
/// problems (`valid: false`); a body that is not structurally a workflow is refused.
#[tauri::command]
pub async fn save_workflow(
    state: State<'_, AppState>,
    id: String,
    workflow: Value,
) -> IpcResult<Value> {
    Ok(workflows::save(&state, &id, workflow).await?)
}

#[tauri::command]
pub async fn delete_workflow(state: State<'_, AppState>, id: String) -> IpcResult<()> {
    Ok(workflows::delete(&state, &id)?)
}

/// Every problem of a definition (errors and lint warnings).
#[tauri::command]
pub async fn validate_workflow(state: State<'_, AppState>, workflow: Value) -> IpcResult<Value> {
    Ok(workflows::validate(&state, &workflow))
}
