//! Connections (issue 35): the accounts app actions act as. Like `GET /api/v1/connections` and
//! `GET|PUT|DELETE /api/v1/connections/{id}`: each over the same [`fluxo::app::connections`]
//! call; secrets are answered masked.

use fluxo::app::{connections, AppState};
use serde_json::Value;
use tauri::State;

use crate::error::IpcResult;

/// `{connections: [...]}`, each masked.
#[tauri::command]
pub async fn list_connections(state: State<'_, AppState>) -> IpcResult<Value> {
    Ok(connections::list(&state)?)
}

/// Add or replace connection `id` (a mask sent back keeps the stored secret); the masked view.
#[tauri::command]
pub async fn put_connection(
    state: State<'_, AppState>,
    id: String,
    connection: Value,
) -> IpcResult<Value> {
    Ok(connections::put(&state, &id, &connection)?)
}

/// Remove connection `id`.
#[tauri::command]
pub async fn delete_connection(state: State<'_, AppState>, id: String) -> IpcResult<()> {
    Ok(connections::remove(&state, &id)?)
}
