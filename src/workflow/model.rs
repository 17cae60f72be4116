//! The workflow file format (SPEC §1): serde types with unknown fields rejected.
//!
//! Parsing goes through [`crate::workflow::load_text`], which reports every problem at once with
//! its step id and JSON path; these types are the shape that comes out.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Default run time limit, seconds (SPEC §4).
pub const DEFAULT_RUN_TIMEOUT_S: u64 = 50;

/// One workflow file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Workflow {
    /// Stable identifier: `[a-z0-9][a-z0-9_-]{0,63}`; the file is `<id>.json`.
    pub id: String,
    /// Human name shown in the app.
    #[serde(default)]
    pub name: String,
    /// Optional longer description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Bumped on every save.
    #[serde(default)]
    pub version: u64,
    #[serde(default)]
    pub settings: Settings,
    pub steps: Vec<StepDef>,
    #[serde(default)]
    pub edges: Vec<Edge>,
}

/// Workflow-wide settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Run time limit in **seconds**, backoff waits included (default 50).
    #[serde(default = "default_run_timeout_s")]
    pub run_timeout_s: u64,
    /// The sender's own retries (e.g. Stripe retries for days): informs the linter only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_retries: Option<u32>,
    /// The sample event the editor preselects as the run input: the name of a built-in sample
    /// payload (`stripe/invoice.paid.json`, …: `GET /api/v1/sample-payloads`). Informs the
    /// editor only; an unknown name is a lint warning (`unknown_sample`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<String>,
}

fn default_run_timeout_s() -> u64 {
    DEFAULT_RUN_TIMEOUT_S
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            run_timeout_s: DEFAULT_RUN_TIMEOUT_S,
            sender_retries: None,
            sample: None,
        }
    }
}

/// One step on the canvas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepDef {
    /// Unique in the workflow; templates reach its output as `steps.<id>.output`.
    pub id: String,
    /// A registered step kind (`fluxo step-kinds`).
    pub kind: String,
    /// Optional label shown on the canvas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Canvas position (pixels).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<Position>,
    /// The kind's config (its JSON Schema: `fluxo step-kinds`).
    #[serde(default = "empty_object")]
    pub config: Value,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// Canvas position in pixels.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Position {
    pub x: f64,
    pub y: f64,
}

/// A wire from a step's output port to another step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Edge {
    pub from: String,
    /// Output port of `from`: `out` when omitted; `error`; a router's route name or `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<String>,
    pub to: String,
}

impl Edge {
    /// The port this edge leaves, `out` when omitted.
    pub fn port(&self) -> &str {
        self.port.as_deref().unwrap_or(PORT_OUT)
    }
}

// The ports are the step kinds' (`crate::steps`): kinds name them, edges leave them.
pub use crate::steps::{PORT_DEFAULT, PORT_ERROR, PORT_OUT};

impl Workflow {
    /// The step with this id.
    pub fn step(&self, id: &str) -> Option<&StepDef> {
        self.steps.iter().find(|s| s.id == id)
    }

    /// Deterministic file text: fields in declaration order, config keys in the order written,
    /// 2-space indent, trailing newline (SPEC §1 "human-diffable").
    pub fn to_file_string(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("workflow serializes");
        s.push('\n');
        s
    }

    /// SHA-256 (hex) of the definition's canonical JSON (object keys sorted, no whitespace),
    /// recorded on each run as `definition_hash`.
    pub fn definition_hash(&self) -> String {
        use sha2::{Digest, Sha256};
        let v = serde_json::to_value(self).expect("workflow serializes");
        hex::encode(Sha256::digest(canonical_json(&v).as_bytes()))
    }
}

/// Canonical JSON text: object keys sorted (by UTF-16-agnostic byte order), no insignificant
/// whitespace. Used for fingerprints and hashes, where key order and indentation must not count.
pub fn canonical_json(v: &Value) -> String {
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let sorted: BTreeMap<&String, &Value> = m.iter().collect();
                out.push('{');
                for (i, (k, v)) in sorted.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&serde_json::to_string(k).expect("string serializes"));
                    out.push(':');
                    write(v, out);
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, v) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(v, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(v, &mut out);
    out
}
