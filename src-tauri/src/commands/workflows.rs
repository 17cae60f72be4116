//! Workflows: list, get, save (drafts saved with their problems), delete, validate. Like
//! `GET|PUT|DELETE /api/v1/workflows/{id}` and `POST /api/v1/workflows/validate`.

use fluxo::server::AppState;
use fluxo::workflow::check_value;
use fluxo::workflow::dir::DirError;
use serde_json::{json, Value};
use tauri::State;

use crate::error::{IpcError, IpcResult};

fn not_found(id: &str) -> IpcError {
    IpcError::new("workflow_not_found", format!("no workflow `{id}`"))
}

#[tauri::command]
pub async fn list_workflows(state: State<'_, AppState>) -> IpcResult<Vec<Value>> {
    Ok(state
        .workflows()
        .list()
        .iter()
        .map(|e| e.summary())
        .collect())
}

/// The file's JSON (key order kept).
#[tauri::command]
pub async fn get_workflow(state: State<'_, AppState>, id: String) -> IpcResult<Value> {
    let e = state.workflows().get(&id).ok_or_else(|| not_found(&id))?;
    e.value.clone().ok_or_else(|| IpcError {
        problems: Some(json!(e.problems)),
        ..IpcError::new(
            "invalid_json",
            format!("the file {} is not JSON", e.path.display()),
        )
    })
}

/// Saves with a version bump; a draft that does not validate is saved and answered with its
/// problems (`valid: false`); a body that is not structurally a workflow is refused.
#[tauri::command]
pub async fn save_workflow(
    state: State<'_, AppState>,
    id: String,
    workflow: Value,
) -> IpcResult<Value> {
    let entry = state.workflows().save(&id, workflow).map_err(|e| match e {
        DirError::BadId(_) | DirError::IdMismatch { .. } => {
            IpcError::new("invalid_workflow", e.to_string())
        }
        DirError::Invalid(problems) => IpcError {
            problems: Some(json!(problems)),
            ..IpcError::new(
                "invalid_workflow",
                "the workflow is not structurally valid; see `problems`",
            )
        },
        DirError::Io { .. } => {
            tracing::error!(error = %e, "workflow save failed");
            IpcError::new("save_failed", "the workflow file could not be written")
        }
    })?;
    Ok(json!({
        "workflow": entry.value,
        "version": entry.version(),
        "valid": entry.compiled.is_some(),
        "problems": entry.problems,
    }))
}

#[tauri::command]
pub async fn delete_workflow(state: State<'_, AppState>, id: String) -> IpcResult<()> {
    match state.workflows().delete(&id) {
        Ok(true) => Ok(()),
        Ok(false) => Err(not_found(&id)),
        Err(e) => {
            tracing::error!(error = %e, "workflow delete failed");
            Err(IpcError::new(
                "delete_failed",
                "the workflow file could not be deleted",
            ))
        }
    }
}

/// Every problem of a definition (errors and lint warnings).
#[tauri::command]
pub async fn validate_workflow(state: State<'_, AppState>, workflow: Value) -> IpcResult<Value> {
    let (compiled, problems) = check_value(&workflow, state.engine().registry());
    Ok(json!({"valid": compiled.is_some(), "problems": problems}))
}
