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
    /// The secret env variables this workflow reads (`["API_KEY"]`), sorted, without
    /// duplicates: any other secret is refused to its templates, and a declared one renders
    /// only whole where a secret may go (the `template::secret` module; SPEC §5).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    pub steps: Vec<StepDef>,
    #[serde(default)]
    pub edges: Vec<Edge>,
}

/// Workflow-wide settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// Run time limit, backoff waits included: `50s`, `5m`, or a number of seconds (default
    /// 50).
    #[serde(default = "default_run_timeout_s")]
    pub run_timeout_s: crate::duration::Secs,
    /// The sender's own retries (e.g. Stripe retries for days): informs the linter only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_retries: Option<u32>,
    /// The sample event the editor preselects as the run input: the name of a built-in sample
    /// payload (`stripe/invoice.paid.json`, …: `GET /api/v1/sample-payloads`). Informs the
    /// editor only; an unknown name is a lint warning (`unknown_sample`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample: Option<String>,
}

fn default_run_timeout_s() -> crate::duration::Secs {
    crate::duration::Secs::new(DEFAULT_RUN_TIMEOUT_S)
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            run_timeout_s: default_run_timeout_s(),
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

/// Canvas position in pixels. Whole numbers are written as integers (`120`, not `120.0`), so
/// a save does not rewrite positions the file wrote as integers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Position {
    #[serde(serialize_with = "whole_as_integer")]
    pub x: f64,
    #[serde(serialize_with = "whole_as_integer")]
    pub y: f64,
}

/// `120.0` as `120`; anything with a fraction (or beyond ±2^53) as the float.
fn whole_as_integer<S: serde::Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.fract() == 0.0 && v.abs() < 9_007_199_254_740_992.0 {
        s.serialize_i64(*v as i64)
    } else {
        s.serialize_f64(*v)
    }
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
        let v = serde_json::to_value(self).expect("workflow serializes");
        file_format(&v)
    }

    /// SHA-256 (hex) of the definition's canonical JSON (object keys sorted, no whitespace),
    /// recorded on each run as `definition_hash`.
    pub fn definition_hash(&self) -> String {
        use sha2::{Digest, Sha256};
        let v = serde_json::to_value(self).expect("workflow serializes");
        hex::encode(Sha256::digest(canonical_json(&v).as_bytes()))
    }
}

/// The widest line [`file_format`] puts an object or array on, indentation included.
pub const FILE_LINE_WIDTH: usize = 100;

/// The text of a workflow file: two-space indentation, keys in their order, and any object or
/// array whose one-line form (`{ "x": 0, "y": 120 }`) fits in [`FILE_LINE_WIDTH`] columns on one
/// line, the rest one member per line. The same definition always gives the same text, and an
/// edit changes only the lines it touches (small objects stay on one line), so git diffs of
/// saves stay small. The top level is always one member per line; the text ends with `\n`.
pub fn file_format(v: &Value) -> String {
    fn one_line(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) if !m.is_empty() => {
                out.push_str("{ ");
                for (i, (k, x)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&serde_json::to_string(k).expect("string serializes"));
                    out.push_str(": ");
                    one_line(x, out);
                }
                out.push_str(" }");
            }
            Value::Array(a) if !a.is_empty() => {
                out.push_str("[ ");
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    one_line(x, out);
                }
                out.push_str(" ]");
            }
            other => out.push_str(&serde_json::to_string(other).expect("value serializes")),
        }
    }
    /// `v` at `depth` (two spaces each), after `lead` columns already on its line.
    fn member(v: &Value, depth: usize, lead: usize, top: bool, out: &mut String) {
        let mut flat = String::new();
        one_line(v, &mut flat);
        let nested = matches!(v, Value::Object(m) if !m.is_empty())
            || matches!(v, Value::Array(a) if !a.is_empty());
        if !nested || (!top && lead + flat.chars().count() <= FILE_LINE_WIDTH) {
            out.push_str(&flat);
            return;
        }
        let pad = "  ".repeat(depth + 1);
        let (open, close) = if v.is_object() {
            ('{', '}')
        } else {
            ('[', ']')
        };
        out.push(open);
        out.push('\n');
        let items: Vec<(Option<&String>, &Value)> = match v {
            Value::Object(m) => m.iter().map(|(k, x)| (Some(k), x)).collect(),
            Value::Array(a) => a.iter().map(|x| (None, x)).collect(),
            _ => Vec::new(),
        };
        for (i, (k, x)) in items.iter().enumerate() {
            out.push_str(&pad);
            let mut lead = pad.len();
            if let Some(k) = k {
                let key = serde_json::to_string(k).expect("string serializes");
                out.push_str(&key);
                out.push_str(": ");
                lead += key.chars().count() + 2;
            }
            // Room for the `,` that follows all but the last member.
            let comma = usize::from(i + 1 < items.len());
            member(x, depth + 1, lead + comma, false, out);
            if comma == 1 {
                out.push(',');
            }
            out.push('\n');
        }
        out.push_str(&"  ".repeat(depth));
        out.push(close);
    }
    let mut out = String::new();
    member(v, 0, 0, true, &mut out);
    out.push('\n');
    out
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
