//! The Memory browser: namespaces, keys of a namespace (by prefix, paged), one key, delete a
//! key by hand. Like `GET /api/v1/memory`, `GET /api/v1/memory/{ns}?prefix=&after=&limit=`,
//! `GET|DELETE /api/v1/memory/{ns}/{key}`.

use fluxo::server::AppState;
use fluxo::store::MemoryEntry;
use serde_json::{json, Value};
use tauri::State;

use crate::error::{IpcError, IpcResult};

/// An entry as the HTTP API shows it, with the time it has left.
fn entry_view(e: &MemoryEntry, now: i64) -> Value {
    let mut v = fluxo::cli::entry_json(e);
    if let (Some(x), Value::Object(m)) = (e.expires_at, &mut v) {
        m.insert("ttl_left_ms".into(), json!((x - now).max(0)));
    }
    v
}

fn key_not_found(namespace: &str, key: &str) -> IpcError {
    IpcError::new(
        "key_not_found",
        format!("no key `{key}` in namespace `{namespace}` (or it expired)"),
    )
}

#[tauri::command]
pub async fn memory_namespaces(state: State<'_, AppState>) -> IpcResult<Vec<String>> {
    Ok(state.store().namespaces()?)
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
    let limit = limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(IpcError::new(
            "invalid_parameter",
            format!("`limit`: {limit} is not between 1 and 1000"),
        ));
    }
    let now = state.clock().now_ms();
    let entries = state.store().list(
        &namespace,
        prefix.as_deref().unwrap_or(""),
        after.as_deref(),
        limit + 1,
        now,
    )?;
    let next = (entries.len() > limit)
        .then(|| entries.get(limit - 1).map(|e| e.key.clone()))
        .flatten();
    let items: Vec<Value> = entries
        .iter()
        .take(limit)
        .map(|e| entry_view(e, now))
        .collect();
    Ok(json!({"namespace": namespace, "entries": items, "next_after": next}))
}

#[tauri::command]
pub async fn memory_get(
    state: State<'_, AppState>,
    namespace: String,
    key: String,
) -> IpcResult<Value> {
    let now = state.clock().now_ms();
    let e = state
        .store()
        .read(&namespace, &key, now)?
        .ok_or_else(|| key_not_found(&namespace, &key))?;
    Ok(entry_view(&e, now))
}

/// Delete a key (made durable before answering).
#[tauri::command]
pub async fn memory_delete(
    state: State<'_, AppState>,
    namespace: String,
    key: String,
) -> IpcResult<()> {
    let now = state.clock().now_ms();
    let deleted = state.store().delete(&namespace, &key, now)?;
    state.commit().durable().await?;
    if !deleted {
        return Err(key_not_found(&namespace, &key));
    }
    tracing::info!(namespace = %namespace, "memory key deleted by hand");
    Ok(())
}
