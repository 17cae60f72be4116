//! The catalog: step kinds (with their JSON Schemas), the built-in workflow templates and
//! real sample payloads for the Dry Run input editor. Shared by `GET /api/v1/step-kinds`,
//! `/templates`, `/sample-payloads` and the desktop's catalog commands.

use serde_json::{json, Value};

use super::AppState;

/// Every step kind, in palette order.
pub fn step_kinds(state: &AppState) -> Value {
    state.engine().registry().catalog()
}

/// The built-in workflow templates: `[{id, name, workflow}]`.
pub fn templates() -> Vec<Value> {
    crate::samples::TEMPLATES
        .iter()
        .filter_map(|(id, text)| {
            let w = serde_json::from_str::<Value>(text).ok()?;
            Some(json!({"id": id, "name": w.get("name").cloned().unwrap_or(Value::Null), "workflow": w}))
        })
        .collect()
}

/// The sample payloads: `[{name, payload}]`.
pub fn sample_payloads() -> Vec<Value> {
    crate::samples::PAYLOADS
        .iter()
        .filter_map(|(name, text)| {
            let p = serde_json::from_str::<Value>(text).ok()?;
            Some(json!({"name": name, "payload": p}))
        })
        .collect()
}
