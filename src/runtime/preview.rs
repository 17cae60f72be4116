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
use crate::run::{Mode, RunRecord, RunStatus, StepStatus};
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
    /// `own_claim` (a replay would be stopped by the original lineage's own Memory claim, and
    /// the lineage did not finish: resume instead, or wait for its running run),
    /// `lineage_fixed` (a later run of the lineage, a resume or a replay, succeeded: the event
    /// is handled, the message names that run), `not_transient` (the resume point failed with
    /// an answer retries do not fix, e.g. 409), `repeat_unsafe` (the step in flight when the
    /// run stopped may have acted and repeating it may duplicate that).
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
    /// For a resume: the first step it executes (absent when it executes none), where it
    /// really starts: a reused claim that another run holds now
    /// executes again, before a chosen `from_step`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub from_step: Option<String>,
    /// For a resume: the steps reused, not executed again, in walk order.
    pub reused: Vec<String>,
    /// The steps the previewed run executes, in walk order. With `reused` they partition the
    /// previewed run's steps: both come from its records ([`reused_and_executed`]), which the
    /// same walk as the action's own makes.
    pub executed: Vec<String>,
    /// Steps with side effects the run would execute, in walk order.
    pub calls: Vec<PlannedCall>,
    pub warnings: Vec<PreviewWarning>,
    /// For a replay: the replayed run can be resumed instead (its lineage did not finish, and
    /// the replay would be stopped by its own claim): resume `resume_run_id`.
    pub resume_instead: bool,
    /// The run to resume instead: the replayed run, or the newest run of its resume chain.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub resume_run_id: Option<String>,
    /// The run that fixed the previewed run's lineage (a resume or a replay that succeeded),
    /// when it was fixed: nothing is left to resume, and a replay acts on a handled event.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub fixed_by: Option<super::resume::LineageFix>,
}

/// The steps a run reused (`reused_from` set) and the steps it executed, each in record
/// (walk) order: what a resume did, or, for a preview's dry walk, what it will do. Every
/// step record is in exactly one of them.
pub fn reused_and_executed(run: &RunRecord) -> (Vec<String>, Vec<String>) {
    let (reused, executed): (Vec<_>, Vec<_>) =
        run.steps.iter().partition(|s| s.reused_from.is_some());
    let ids = |v: Vec<&crate::run::StepRecord>| v.into_iter().map(|s| s.step_id.clone()).collect();
    (ids(reused), ids(executed))
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

/// Where the replayed run's lineage stands, for [`replay_warnings`].
#[derive(Debug, Clone, Default)]
pub struct LineageState {
    /// The run that fixed it, if any.
    pub fixed_by: Option<super::resume::LineageFix>,
    /// The newest run of its resume chain, if it was resumed.
    pub newest_resume: Option<super::resume::ResumeChainEnd>,
}

/// Warnings of a replay preview, following the replayed run's lineage: when a later run fixed
/// it, one `lineage_fixed` naming that run (and the claim that sends the replay down its
/// "already processed" branch, if one does); else a Memory claim held by the lineage, which
/// did not finish, is `own_claim`, naming the run to resume (the replayed run, or the newest
/// of its resume chain) or the run to wait for. Answers the warnings and the run to resume
/// instead, if any.
pub fn replay_warnings(
    original: &RunRecord,
    dry: &RunRecord,
    lineage: &LineageState,
) -> (Vec<PreviewWarning>, Option<String>) {
    if !crate::runtime::resume::is_resumable(original.status) {
        return (Vec::new(), None);
    }
    let claims: Vec<(&str, &str, &str)> = dry
        .steps
        .iter()
        .filter(|s| s.status == StepStatus::Succeeded)
        .filter_map(|s| {
            let o = s.output.as_ref()?;
            let holder = o.get("claimed_by")?.as_str()?;
            (o.get("written") == Some(&Value::Bool(false))).then(|| {
                (
                    s.step_id.as_str(),
                    o.get("key").and_then(Value::as_str).unwrap_or(""),
                    holder,
                )
            })
        })
        .collect();
    if let Some(fix) = &lineage.fixed_by {
        let claim = claims.first().map(|(step, key, holder)| {
            (
                *step,
                format!(
                    " Step `{step}` would find key `{key}` claimed by run `{holder}`: this \
                     replay would take the \"already processed\" branch and do nothing."
                ),
            )
        });
        return (
            vec![PreviewWarning {
                code: "lineage_fixed",
                step: claim.as_ref().map(|(s, _)| s.to_string()),
                message: format!(
                    "Run `{}` was fixed by run `{}` ({}), which succeeded: the event is \
                     handled and nothing is left to resume.{}",
                    original.id,
                    fix.run_id,
                    fix.how(),
                    claim.map(|(_, m)| m).unwrap_or_default()
                ),
            }],
            None,
        );
    }
    // The run a person acts on: the replayed run, or the newest of its resume chain.
    let (target, waiting) = match &lineage.newest_resume {
        None => (original.id.clone(), None),
        Some(end) => match end.status {
            Some(s) if crate::runtime::resume::is_resumable(s) => (end.run_id.clone(), None),
            Some(s) => (end.run_id.clone(), Some(s)),
            None => (end.run_id.clone(), Some(RunStatus::Interrupted)),
        },
    };
    let mut resume = None;
    let warnings = claims
        .into_iter()
        .filter(|(_, _, holder)| *holder == original.root())
        .map(|(step, key, holder)| {
            let act = match waiting {
                None => {
                    resume = Some(target.clone());
                    format!("Resume run `{target}` instead: it continues from where it stopped.")
                }
                Some(s) => format!("Its newest run `{target}` is {s}: wait for it, then open it."),
            };
            PreviewWarning {
                code: "own_claim",
                step: Some(step.to_string()),
                message: format!(
                    "step `{step}` would find key `{key}` claimed by run `{holder}`, the \
                     lineage of the run you are replaying, which did not finish: the replay \
                     would take the \"already processed\" branch and do nothing. {act}"
                ),
            }
        })
        .collect();
    (warnings, resume)
}

impl Engine {
    /// Where `run`'s lineage stands: the run that fixed it, the newest run of its resume
    /// chain. A store error is logged and answered as "not known" (a preview still answers).
    pub async fn lineage_state(&self, run: &RunRecord) -> LineageState {
        let fixed_by = self.fixed_by(run).await;
        let newest_resume = self.newest_resume(run).await;
        if let Err(e) = fixed_by
            .as_ref()
            .map(|_| ())
            .and(newest_resume.as_ref().map(|_| ()))
        {
            tracing::warn!(run_id = %run.id, error = %e, "could not read the run's lineage");
        }
        LineageState {
            fixed_by: fixed_by.ok().flatten(),
            newest_resume: newest_resume.ok().flatten(),
        }
    }

    /// Preview a resume of `original` (see [`Engine::resume_run`] and [`Engine::preview`]):
    /// the dry walk of the very run the resume would start, so what it reuses, executes and
    /// calls is what the walk decided, as it will for the resume itself.
    pub async fn preview_resume(
        &self,
        original: &RunRecord,
        from_step: Option<&str>,
    ) -> Result<RunPreview, ResumeFailure> {
        let (wf, run, _) = self.resume_run(original, from_step).await?;
        let dry = self.preview(&wf, run).await;
        let calls = planned_calls(&wf, &dry, original);
        let (reused, executed) = reused_and_executed(&dry);
        let fixed_by = self.lineage_state(original).await.fixed_by;
        let mut warnings = resume_warnings(original, &calls);
        if let Some(fix) = &fixed_by {
            warnings.insert(
                0,
                PreviewWarning {
                    code: "lineage_fixed",
                    step: None,
                    message: format!(
                        "Run `{}` was fixed by run `{}` ({}), which succeeded: the event is \
                         handled, and this resume would act on it again.",
                        original.id,
                        fix.run_id,
                        fix.how()
                    ),
                },
            );
        }
        Ok(RunPreview {
            warnings,
            from_step: executed.first().cloned(),
            reused,
            executed,
            calls,
            run: dry,
            mode: Some(original.mode),
            resume_instead: false,
            resume_run_id: None,
            fixed_by,
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
        let lineage = self.lineage_state(original).await;
        let (warnings, resume_run_id) = replay_warnings(original, &dry, &lineage);
        let calls = planned_calls(wf, &dry, original);
        let (_, executed) = reused_and_executed(&dry);
        RunPreview {
            resume_instead: resume_run_id.is_some(),
            resume_run_id,
            fixed_by: lineage.fixed_by,
            warnings,
            reused: Vec::new(),
            from_step: None,
            executed,
            calls,
            run: dry,
            mode: None,
        }
    }
}
