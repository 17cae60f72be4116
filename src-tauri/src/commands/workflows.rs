//! Workflows: list, get, save and publish, delete, validate, and drafts (get, save with their
//! problems, discard, publish). Like `GET|PUT|DELETE /api/v1/workflows/{id}`,
//! `…/{id}/draft`, `POST …/{id}/publish` and `POST /api/v1/workflows/validate`: each over
//! the same [`fluxo::app::workflows`] call (and its one mapping of the folder's errors).

use fluxo::app::{drafts, workflows, AppState};
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

/// Saves and publishes with a version bump; a definition with validation errors is refused
/// (`workflow_invalid` with its `problems`, nothing written: save it as a draft instead), as
/// is a body that is not structurally a workflow.
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

/// The workflow's draft (`{workflow, based_on_version, saved_at, live_version}`), like
/// `GET /api/v1/workflows/{id}/draft`; `draft_not_found` when it has none.
#[tauri::command]
pub async fn get_draft(state: State<'_, AppState>, id: String) -> IpcResult<Value> {
    Ok(drafts::get_draft(&state, &id)?)
}

/// Keeps `workflow` as the draft of `id`, even with validation errors: `{valid, problems,
/// based_on_version, saved_at}`. The live workflow is untouched.
#[tauri::command]
pub async fn save_draft(
    state: State<'_, AppState>,
    id: String,
    workflow: Value,
) -> IpcResult<Value> {
    Ok(drafts::save_draft(&state, &id, workflow).await?)
}

/// Deletes the draft of `id`; the live workflow is untouched.
#[tauri::command]
pub async fn discard_draft(state: State<'_, AppState>, id: String) -> IpcResult<()> {
    Ok(drafts::discard_draft(&state, &id)?)
}

/// Publishes the draft of `id` (refused with `workflow_invalid` and its `problems` when it
/// has validation errors): answers like `save_workflow`.
#[tauri::command]
pub async fn publish_workflow(state: State<'_, AppState>, id: String) -> IpcResult<Value> {
    Ok(drafts::publish(&state, &id).await?)
}
