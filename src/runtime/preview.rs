//! Previews of a resume or a replay: the dry walk of the run the action would start, never
//! stored, with what a person needs before acting (SPEC §4, the replay dialog): which steps
//! are reused, which calls would be sent (again) with which idempotency keys, whether the
//! first of them is safe to repeat, and warnings (a replay stopped by its own lineage's claim,
//! a resume that repeats a request the destination refused for a reason retries cannot fix).
//!
//! Crash recovery reads the same preview: it resumes a run automatically only when the first
//! step the resume would execute with side effects is safe to repeat
//! ([`crate::steps::StepKind::repeat_safety`]).

use serde::Serialize;
use serde_json::Value;

use super::executor::Engine;
use super::resume::ResumeFailure;
use crate::run::{Mode, RunRecord, StepStatus};
use crate::runtime::retry::is_retryable_status;
use crate::steps::RepeatSafety;
use crate::workflow::Compiled;

/// One step with side effects that the previewed run would execute.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct PlannedCall {
    pub step_id: String,
    pub kind: String,
    /// The HTTP method, for kinds that send a request.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub method: Option<String>,
    /// The rendered URL, for kinds that send a request.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub url: Option<String>,
    /// The `Idempotency-Key` the call would carry, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub idempotency_key: Option<String>,
    /// The original run already executed this step (or was executing it when it stopped):
    /// the call is sent again.
    pub again: bool,
    /// Repeating it cannot duplicate an effect ([`crate::steps::StepKind::repeat_safety`]).
    pub repeat_safe: bool,
    /// Why repeating it is not safe.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub repeat_reason: Option<String>,
    /// For an app action: the app and operation (`HubSpot · Create a contact`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub operation: Option<String>,
    /// For an app action's write: how a repeat dedupes at the app, as the canvas badge says it
    /// (`409 is exists`, `upsert on email`, `keyed`, `find then create`, `repeat updates`,
    /// `not safe to repeat`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub dedupe: Option<String>,
}

/// Something a person should know before acting.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct PreviewWarning {
    /// `own_claim` (a replay would be stopped by the original lineage's own Memory claim:
    /// resume instead), `not_transient` (the resume point failed with an answer retries do not
    /// fix, e.g. 409), `repeat_unsafe` (the step in flight when the run stopped may have acted
    /// and repeating it may duplicate that).
    pub code: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub step: Option<String>,
    pub message: String,
}

/// A previewed resume or replay.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct RunPreview {
    /// The dry run of what the action would do (not stored; `mode: dry`).
    pub run: RunRecord,
    /// The mode the action itself would run in: a resume keeps the original's (a dry run is
    /// resumed dry); absent for a replay, whose mode the request chooses.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub mode: Option<crate::run::Mode>,
    /// For a resume: the step it executes from (absent: the first step without a record).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub from_step: Option<String>,
    /// For a resume: the steps reused, not executed again.
    pub reused: Vec<String>,
    /// Steps with side effects the run would execute, in walk order.
    pub calls: Vec<PlannedCall>,
    pub warnings: Vec<PreviewWarning>,
    /// For a replay: the replayed run can be resumed instead (it did not finish, and the
    /// replay would be stopped by its own claim).
    pub resume_instead: bool,
}

/// The side-effecting steps `dry` executed (not reused), with their keys and whether each may
/// be repeated; `original` tells which of them the original run had executed or was in.
pub fn planned_calls(wf: &Compiled, dry: &RunRecord, original: &RunRecord) -> Vec<PlannedCall> {
    let first_unrecorded = dry
        .steps
        .iter()
        .find(|s| s.reused_from.is_none() && original.step(&s.step_id).is_none())
        .map(|s| s.step_id.clone());
    dry.steps
        .iter()
        .filter(|s| s.reused_from.is_none())
        .filter_map(|s| {
            let i = wf.index_of(&s.step_id)?;
            let kind = wf.kind(i);
            if !kind.descriptor().side_effects {
                return None;
            }
            let cfg = &s.resolved_config;
            let text = |v: Option<&Value>| v.and_then(Value::as_str).map(String::from);
            let key = cfg
                .get("headers")
                .and_then(Value::as_object)
                .and_then(|h| {
                    h.iter()
                        .find(|(k, _)| k.eq_ignore_ascii_case("idempotency-key"))
                        .map(|(_, v)| v)
                })
                .and_then(|v| text(Some(v)))
                .or_else(|| text(s.output.as_ref().and_then(|o| o.get("idempotency_key"))))
                .or_else(|| text(cfg.get("idempotency_key")));
            let safety = kind.repeat_safety(cfg);
            let app_op = (s.kind == "action")
                .then(|| serde_json::from_value::<crate::steps::action::Config>(cfg.clone()).ok())
                .flatten();
            let resolved = app_op
                .as_ref()
                .and_then(|c| crate::steps::action::resolve(c).ok());
            let again = original.step(&s.step_id).is_some()
                || (original.status == crate::run::RunStatus::Interrupted
                    && first_unrecorded.as_deref() == Some(s.step_id.as_str()));
            Some(PlannedCall {
                step_id: s.step_id.clone(),
                kind: s.kind.clone(),
                method: text(cfg.get("method")),
                url: text(cfg.get("url")),
                idempotency_key: key,
                again,
                repeat_safe: safety.is_safe(),
                repeat_reason: match safety {
                    RepeatSafety::Safe => None,
                    RepeatSafety::Unsafe(r) => Some(r),
                },
                operation: resolved.map(|(app, op)| format!("{} · {}", app.title, op.title)),
                dedupe: crate::steps::action::strategy(cfg).map(|d| d.badge()),
            })
        })
        .collect()
}

/// Warnings of a resume preview: the resume point failed with a status retries do not fix;
/// the first call sent again is not safe to repeat.
pub fn resume_warnings(original: &RunRecord, calls: &[PlannedCall]) -> Vec<PreviewWarning> {
    let mut out = Vec::new();
    if let Some(e) = &original.error {
        if let Some(status) = e.http_status.filter(|s| !is_retryable_status(*s)) {
            out.push(PreviewWarning {
                code: "not_transient",
                step: Some(e.step.clone()),
                message: format!(
                    "step `{}` failed with HTTP {status}, an answer retries do not fix: resuming \
                     sends the same request again, so fix the data or the destination first",
                    e.step
                ),
            });
        }
    }
    if let Some(c) = calls.iter().find(|c| c.again && !c.repeat_safe) {
        out.push(PreviewWarning {
            code: "repeat_unsafe",
            step: Some(c.step_id.clone()),
            message: format!(
                "step `{}`: {}; check it before resuming",
                c.step_id,
                c.repeat_reason
                    .as_deref()
                    .unwrap_or("repeating it may duplicate its effect")
            ),
        });
    }
    out
}

/// Warnings of a replay preview: a Memory claim held by the replayed run's own lineage, which
/// did not finish, would send the replay down its "already processed" branch.
pub fn replay_warnings(original: &RunRecord, dry: &RunRecord) -> Vec<PreviewWarning> {
    if !crate::runtime::resume::is_resumable(original.status) {
        return Vec::new();
    }
    dry.steps
        .iter()
        .filter(|s| s.status == StepStatus::Succeeded)
        .filter_map(|s| {
            let o = s.output.as_ref()?;
            let holder = o.get("claimed_by")?.as_str()?;
            (o.get("written") == Some(&Value::Bool(false)) && holder == original.root()).then(
                || PreviewWarning {
                    code: "own_claim",
                    step: Some(s.step_id.clone()),
                    message: format!(
                        "step `{}` would find key `{}` claimed by run `{holder}`, the lineage of \
                         the run you are replaying, which did not finish: the replay would take \
                         the \"already processed\" branch and do nothing. Resume run `{}` \
                         instead: it continues from where it stopped.",
                        s.step_id,
                        o.get("key").and_then(Value::as_str).unwrap_or(""),
                        original.id
                    ),
                },
            )
        })
        .collect()
}

impl Engine {
    /// Preview a resume of `original` (see [`Engine::resume_run`] and [`Engine::preview`]).
    pub async fn preview_resume(
        &self,
        original: &RunRecord,
        from_step: Option<&str>,
    ) -> Result<RunPreview, ResumeFailure> {
        let (wf, run, _) = self.resume_run(original, from_step).await?;
        let plan =
            crate::runtime::resume::plan(original, &wf, from_step).map_err(ResumeFailure::Plan)?;
        let dry = self.preview(&wf, run).await;
        let calls = planned_calls(&wf, &dry, original);
        Ok(RunPreview {
            warnings: resume_warnings(original, &calls),
            reused: plan.reused_ids(original),
            from_step: plan.from_step,
            calls,
            run: dry,
            mode: Some(original.mode),
            resume_instead: false,
        })
    }

    /// Preview a replay of `original` over `wf` (see [`Engine::replay_run`] and [`Engine::preview`]).
    pub async fn preview_replay(
        &self,
        original: &RunRecord,
        wf: &Compiled,
        edited_input: Option<Value>,
    ) -> RunPreview {
        let (run, _) = self.replay_run(original, wf, Mode::Dry, edited_input);
        let dry = self.preview(wf, run).await;
        let warnings = replay_warnings(original, &dry);
        let calls = planned_calls(wf, &dry, original);
        RunPreview {
            resume_instead: !warnings.is_empty(),
            warnings,
            reused: Vec::new(),
            from_step: None,
            calls,
            run: dry,
            mode: None,
        }
    }
}
