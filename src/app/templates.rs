//! The live preview of a template field (the editor's "Preview" under a field): one template
//! rendered exactly as a step would render it, against the sample input and the last run's
//! step outputs. Like a dry run, an unset `env.NAME` renders as its placeholder
//! ([`crate::workflow::env::dry_placeholder`]); secret values are masked, as in run records.
//!
//! A preview renders on the blocking pool, never on the request threads: at most
//! [`PREVIEW_CONCURRENCY`] at once, each answered within [`PREVIEW_DEADLINE`]. A render past
//! its deadline is answered as an error; it goes on to its end (fuel and the memory budget
//! bound it) holding its slot, so a flood of slow previews waits for slots instead of taking
//! every core, and other requests keep being served.

use std::collections::BTreeSet;

use serde::Deserialize;
use serde_json::{json, Map, Value};
use utoipa::ToSchema;

use super::{AppError, AppResult, AppState};
use crate::template::{reveal, Scope, Sink, Templates};
use crate::workflow::env::{dry_placeholder, scan_env};

/// Longest template previewed, in bytes.
pub const MAX_TEMPLATE_BYTES: usize = 16 * 1024;

/// Previews rendering at once (the blocking pool has many more threads; this keeps previews
/// from taking every core).
pub const PREVIEW_CONCURRENCY: usize = 2;

/// The longest a preview is waited for, a slot included: 2 s.
pub const PREVIEW_DEADLINE: std::time::Duration = std::time::Duration::from_secs(2);

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
    /// The secrets the workflow declares (its `secrets`): with it, a secret it does not declare
    /// is an error, as in a run; without it, every secret renders (masked).
    #[serde(default)]
    pub secrets: Option<Vec<String>>,
    /// Where the field sits, for the rule on secrets: `header` (a header value: a secret may
    /// render whole), `url` (an outbound URL: in its credentials or at its start) or `other`
    /// (no secret may render). Without it a secret renders anywhere. Secrets are always
    /// answered masked.
    #[serde(default)]
    pub place: Option<PreviewPlace>,
}

/// Where a previewed field sits ([`TemplatePreview::place`]).
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum PreviewPlace {
    Header,
    Url,
    Other,
}

/// `{"value": <rendered JSON>}` or `{"error": "<why, as a run would say it>"}`; `env` lists the
/// variables that were unset and stood in for. Rendered on the blocking pool within
/// [`PREVIEW_DEADLINE`].
///
/// Errors: `503 unavailable` (retry after 1 s) when no preview slot frees within the deadline.
pub async fn preview(state: &AppState, req: TemplatePreview) -> AppResult<Value> {
    let deadline = tokio::time::Instant::now() + PREVIEW_DEADLINE;
    let slot = tokio::time::timeout_at(deadline, state.preview_slots().clone().acquire_owned())
        .await
        .ok()
        .and_then(Result::ok)
        .ok_or_else(|| {
            AppError::unavailable(
                format!("{PREVIEW_CONCURRENCY} template previews are rendering; try again"),
                1,
            )
        })?;
    let state2 = state.clone();
    let render = tokio::task::spawn_blocking(move || {
        let answer = render_preview(&state2, &req);
        drop(slot);
        answer
    });
    match tokio::time::timeout_at(deadline, render).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(AppError::internal(
            "preview_failed",
            format!("the preview stopped: {e}"),
        )),
        Err(_) => Ok(json!({"error": format!(
            "the preview took longer than {} s; a run would spend as long on this field",
            PREVIEW_DEADLINE.as_secs()
        )})),
    }
}

fn render_preview(state: &AppState, req: &TemplatePreview) -> Value {
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
    let engine = state.engine();
    let view = match &req.secrets {
        Some(declared) => engine.env_view(&env, declared),
        // Every secret counts as declared.
        None => engine.env_view(&env, &engine.secret_env_names(&env)),
    };
    let mut scope = Scope::new(&input, &run, view);
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
        // The run's rule on where a secret may go decides; the answer shows masks only.
        let sink = match req.place {
            Some(PreviewPlace::Header) | None => Sink::Whole,
            Some(PreviewPlace::Url) => Sink::Url,
            Some(PreviewPlace::Other) => Sink::Nowhere,
        };
        templates
            .render_str(&req.template, &ctx, "preview")
            .and_then(|v| {
                reveal(&ctx, v.clone(), "preview", sink)?;
                reveal(&ctx, v, "preview", Sink::Masked)
            })
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
