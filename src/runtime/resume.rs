//! Resume (SPEC §4): which steps of a failed, timed-out or interrupted run a resume reuses,
//! and where it executes from.
//!
//! A resume runs the original run's snapshot. Every step that succeeded before the resume
//! point is reused: its recorded output and ports are taken as they are, the step is not
//! executed again, and its record in the new run says `reused_from`. Everything from the resume
//! point on executes: the failed step (the first failed step that is not an error handler),
//! the step that was in flight when the process died (the first step of the walk with no
//! record), or a step the person picks (`from_step`), whose upstream steps must all have
//! succeeded: it must be the trigger or the target of a port a reused step left by (never an
//! `error` port: an error branch needs the error that sent the walk there).
//!
//! The plan is a pure function of the original record and its compiled snapshot, so a queued
//! resume computes it again when a worker takes it.

use std::collections::BTreeMap;

use crate::run::{RunRecord, RunStatus, StepRecord, StepStatus};
use crate::workflow::model::PORT_ERROR;
use crate::workflow::Compiled;

/// Why a run cannot be resumed as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResumeError {
    /// The run succeeded (or has not finished): `409 nothing_to_resume`.
    #[error("{0}")]
    NothingToResume(String),
    /// `from_step` is not a step the run can resume from: `400 invalid_from_step`.
    #[error("{0}")]
    InvalidFromStep(String),
    /// The run was resumed already: `409 already_resumed`, `by` naming the newest run of its
    /// chain (resume that one if it failed: one resume per run keeps a lineage a chain, so
    /// no two of its runs act at once).
    #[error("{message}")]
    AlreadyResumed { message: String, by: String },
}

/// What a resume of one run reuses.
#[derive(Debug, Clone, PartialEq)]
pub struct ResumePlan {
    /// The step the resume executes from: the chosen `from_step`, else the failed step;
    /// `None` for a run that stopped with no failed step (interrupted, or timed out between
    /// steps): the first step of the walk without a record.
    pub from_step: Option<String>,
    /// The records reused, by step id, each with `reused_from` set to the run that executed
    /// the step.
    pub reuse: BTreeMap<String, StepRecord>,
}

impl ResumePlan {
    /// The step ids reused, in the original run's record order.
    pub fn reused_ids(&self, original: &RunRecord) -> Vec<String> {
        original
            .steps
            .iter()
            .filter(|s| self.reuse.contains_key(&s.step_id))
            .map(|s| s.step_id.clone())
            .collect()
    }
}

/// True for the statuses a resume accepts: `failed`, `timed_out`, `interrupted`.
pub fn is_resumable(status: RunStatus) -> bool {
    matches!(
        status,
        RunStatus::Failed | RunStatus::TimedOut | RunStatus::Interrupted
    )
}

/// Steps on an error branch: downstream (over every port) of an `error` port's targets.
pub fn error_branch(wf: &Compiled) -> Vec<bool> {
    let mut out = vec![false; wf.workflow.steps.len()];
    for i in 0..out.len() {
        for &t in wf.targets(i, PORT_ERROR) {
            for (j, below) in wf.downstream(t).into_iter().enumerate() {
                out[j] |= below;
            }
        }
    }
    out
}

/// Plan the resume of `original` over `wf` (compiled from `original.snapshot`), from
/// `from_step` or from where the run stopped. Errors name the run and the step.
pub fn plan(
    original: &RunRecord,
    wf: &Compiled,
    from_step: Option<&str>,
) -> Result<ResumePlan, ResumeError> {
    if !is_resumable(original.status) {
        return Err(ResumeError::NothingToResume(format!(
            "run `{}` is {}: only a failed, timed_out or interrupted run can be resumed{}",
            original.id,
            original.status,
            if original.status == RunStatus::Succeeded {
                " (replay it to run it again)"
            } else {
                ""
            }
        )));
    }
    let steps = &wf.workflow.steps;
    let reusable = |r: &StepRecord| {
        matches!(r.status, StepStatus::Succeeded | StepStatus::Fallback) && r.output.is_some()
    };
    let from = match from_step {
        Some(id) => Some(id.to_string()),
        None => original
            .steps
            .iter()
            .find(|r| {
                r.status == StepStatus::Failed
                    && r.kind != "error_handler"
                    && wf.index_of(&r.step_id).is_some()
            })
            .map(|r| r.step_id.clone()),
    };
    let from_idx = match &from {
        None => None,
        Some(id) => Some(wf.index_of(id).ok_or_else(|| {
            ResumeError::InvalidFromStep(format!(
                "run `{}` has no step `{id}` in the definition it ran",
                original.id
            ))
        })?),
    };
    // Everything downstream of the resume point executes again, and so does every step of an
    // error branch (downstream of an `error` port's targets): it runs only if a step fails
    // again, with that failure in scope.
    let again = from_idx.map(|i| wf.downstream(i));
    let error_branch = error_branch(wf);
    let reuse: BTreeMap<String, StepRecord> = original
        .steps
        .iter()
        .filter(|r| reusable(r))
        .filter_map(|r| {
            let i = wf.index_of(&r.step_id)?;
            if error_branch[i] || again.as_ref().is_some_and(|a| a[i]) {
                return None;
            }
            let mut rec = r.clone();
            rec.reused_from = Some(r.reused_from.clone().unwrap_or_else(|| original.id.clone()));
            Some((r.step_id.clone(), rec))
        })
        .collect();
    if let (Some(id), Some(i), Some(_)) = (&from, from_idx, from_step) {
        if error_branch[i] {
            return Err(ResumeError::InvalidFromStep(format!(
                "step `{id}` is on an error branch ({} `{}`): resume from the step that failed",
                "it runs only after a failure, with the error in scope, e.g. the error handler",
                steps[i].kind
            )));
        }
        let reached = i == wf.trigger_index()
            || reuse.values().any(|rec| {
                wf.index_of(&rec.step_id).is_some_and(|p| {
                    rec.ports
                        .iter()
                        .any(|port| port != PORT_ERROR && wf.targets(p, port).contains(&i))
                })
            });
        if !reached {
            return Err(ResumeError::InvalidFromStep(format!(
                "step `{id}` cannot be resumed from in run `{}`: the steps before it did not all \
                 succeed (pick a step that follows a succeeded step)",
                original.id
            )));
        }
    }
    Ok(ResumePlan {
        from_step: from,
        reuse,
    })
}
