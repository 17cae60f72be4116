//! The Memory browser: namespaces, keys of a namespace (by prefix, paged), one key, delete a
//! key by hand. Like `GET /api/v1/memory`, `GET /api/v1/memory/{ns}?prefix=&after=&limit=`,
//! `GET|DELETE /api/v1/memory/{ns}/{key}`: each over the same [`fluxo::app::memory`] call.

use fluxo::app::{memory, AppState};
use serde_json::Value;
use tauri::State;

use crate::error::IpcResult;

#[tauri::command]
pub async fn memory_namespaces(state: State<'_, AppState>) -> IpcResult<Vec<String>> {
    Ok(memory::namespaces(&state).await?)
}

/// `[{namespace, keys, more}]`: live keys per namespace (the `counts` of `GET /api/v1/memory`).
#[tauri::command]
pub async fn memory_counts(state: State<'_, AppState>) -> IpcResult<Vec<Value>> {
    Ok(memory::namespace_counts(&state).await?)
}

/// `{namespace, entries, next_after}`: up to `limit` (1..=1000, default 100) keys after
/// `after`, starting with `prefix`.
#[tauri::command]
pub async fn memory_list(
    state: State<'_, AppState>,
    namespace: String,
    prefix: Option<String>,
    after: Option<String>,
    limit: Option<usize>,
) -> IpcResult<Value> {
    Ok(memory::page(
        &state,
        &namespace,
        prefix.as_deref(),
        after.as_deref(),
        limit,
    )
    .await?)
}

#[tauri::command]
pub async fn memory_get(
    state: State<'_, AppState>,
    namespace: String,
    key: String,
) -> IpcResult<Value> {
    Ok(memory::entry(&state, &namespace, &key).await?)
}

/// Delete a key (made durable before answering).
#[tauri::command]
pub async fn memory_delete(
    state: State<'_, AppState>,
    namespace: String,
    key: String,
) -> IpcResult<()> {
    Ok(memory::delete(&state, &namespace, &key).await?)
}
