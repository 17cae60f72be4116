//! The catalog: step kinds (with their JSON Schemas), the connectors and their operations, the
//! built-in workflow templates and real sample payloads for the Dry Run input editor. Shared by
//! `GET /api/v1/step-kinds`, `/connectors`, `/templates`, `/sample-payloads` and the desktop's
//! catalog commands.

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

/// The connectors, for the palette (operations grouped by app) and the inspector (each
/// operation's input schema): `[{app, title, description, docs, auth: [{kind, title, help}],
/// rate_limit, operations: [{name, title, description, kind, input, dedupe: {strategy, badge}
/// | null}]}]`, apps and operations by name.
pub fn connectors() -> Vec<Value> {
    crate::connectors::CONNECTORS
        .values()
        .map(|c| {
            let operations: Vec<Value> = c
                .operations
                .iter()
                .map(|(name, op)| {
                    json!({
                        "name": name,
                        "title": op.title,
                        "description": op.description,
                        "kind": op.kind,
                        "input": op.input,
                        "dedupe": op.dedupe.as_ref().filter(|_| op.kind.is_write()).map(|d| json!({
                            "strategy": d.as_str(),
                            "badge": d.badge(),
                        })),
                    })
                })
                .collect();
            let auth: Vec<Value> = c
                .auth
                .iter()
                .map(|a| {
                    let mut v = json!({"kind": a.kind, "title": a.title, "help": a.help});
                    if a.kind == "oauth2" {
                        v["authorize_url"] = json!(a.authorize_url);
                        v["token_url"] = json!(a.token_url);
                        v["scopes"] = json!(a.scopes);
                    }
                    v
                })
                .collect();
            json!({
                "app": c.app,
                "title": c.title,
                "description": c.description,
                "docs": c.docs,
                "auth": auth,
                "rate_limit": c.rate_limit,
                "operations": operations,
            })
        })
        .collect()
}
