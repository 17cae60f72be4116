//! The catalog: step kinds (with their JSON Schemas), workflow templates, sample payloads.
//! The same arrays as `GET /api/v1/step-kinds`, `/templates` (its `templates` member) and
//! `/sample-payloads` (its `payloads` member).

use fluxo::samples::{PAYLOADS, TEMPLATES};
use fluxo::server::AppState;
use serde_json::{json, Value};
use tauri::State;

use crate::error::IpcResult;

#[tauri::command]
pub async fn step_kinds(state: State<'_, AppState>) -> IpcResult<Value> {
    Ok(state.engine().registry().catalog())
}

/// `[{id, name, workflow}]`.
#[tauri::command]
pub async fn templates() -> IpcResult<Vec<Value>> {
    Ok(TEMPLATES
        .iter()
        .filter_map(|(id, text)| {
            let w = serde_json::from_str::<Value>(text).ok()?;
            Some(json!({"id": id, "name": w.get("name").cloned().unwrap_or(Value::Null), "workflow": w}))
        })
        .collect())
}

/// `[{name, payload}]`.
#[tauri::command]
pub async fn sample_payloads() -> IpcResult<Vec<Value>> {
    Ok(PAYLOADS
        .iter()
        .filter_map(|(name, text)| {
            let p = serde_json::from_str::<Value>(text).ok()?;
            Some(json!({"name": name, "payload": p}))
        })
        .collect())
}
