//! The live preview of a template field (the editor's "Preview" under a field): one template
//! rendered exactly as a step would render it, against the sample input and the last run's
//! step outputs. Like a dry run, an unset `env.NAME` renders as its placeholder
//! ([`crate::workflow::env::dry_placeholder`]); secret values are masked, as in run records.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_json::{json, Map, Value};
use utoipa::ToSchema;

use super::AppState;
use crate::template::{Scope, Templates};
use crate::workflow::env::{dry_placeholder, scan_env};

/// Longest template previewed, in bytes.
pub const MAX_TEMPLATE_BYTES: usize = 16 * 1024;

/// What to preview: `POST /api/v1/templates/preview`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TemplatePreview {
    /// A config string (`deal-{{ input.id }}`, `{{ steps.list.output.body }}`), or with
    /// `expression` a router condition without braces.
    pub template: String,
    /// A condition (`steps.seen.output.written == false`): answered as `true`/`false`.
    #[serde(default)]
    pub expression: bool,
    /// The run input (the editor's sample); default `{}`.
    #[serde(default)]
    pub input: Option<Value>,
    /// Outputs of earlier steps by step id (`steps.<id>.output`), e.g. from the last run.
    #[serde(default)]
    pub steps: Map<String, Value>,
}

/// `{"value": <rendered JSON>}` or `{"error": "<why, as a run would say it>"}`; `env` lists the
/// variables that were unset and stood in for.
pub fn preview(state: &AppState, req: &TemplatePreview) -> Value {
    if req.template.len() > MAX_TEMPLATE_BYTES {
        return json!({"error": format!(
            "the template is {} bytes; the preview takes at most {MAX_TEMPLATE_BYTES}",
            req.template.len()
        )});
    }
    let mut env = state.engine().env();
    let mut names = BTreeSet::new();
    scan_env(&req.template, &mut names);
    let mut unset = Vec::new();
    for name in names {
        if !env.contains_key(&name) {
            env.insert(name.clone(), dry_placeholder(&name));
            unset.push(name);
        }
    }
    let input = req.input.clone().unwrap_or_else(|| json!({}));
    let run = json!({"id": "preview", "attempt": 1, "mode": "dry"});
    let mut scope = Scope::new(&input, &run, &env as &BTreeMap<String, String>);
    for (id, output) in &req.steps {
        scope.set_output(id, output);
    }
    let ctx = scope.context();
    let mut templates = Templates::new();
    let compiled = if req.expression {
        templates.add_expression(&req.template)
    } else {
        templates.add(&req.template)
    };
    if let Err(e) = compiled {
        return json!({"error": format!("template syntax error: {}", e.message), "env_unset": unset});
    }
    let rendered = if req.expression {
        templates
            .eval_condition(&req.template, &ctx, "preview")
            .map(Value::Bool)
    } else {
        templates.render_str(&req.template, &ctx, "preview")
    };
    // Secret env values are never shown (as in run records): masked in the answer.
    let masker = state.engine().masker();
    match rendered {
        Ok(mut v) => {
            masker.value(&mut v);
            json!({"value": v, "env_unset": unset})
        }
        Err(e) => {
            let why = match &e.missing {
                Some(p) => format!("missing value `{p}` (not in the sample input or the last run)"),
                None => e.message,
            };
            json!({"error": masker.text(&why), "env_unset": unset})
        }
    }
}
