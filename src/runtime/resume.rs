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
//! resume computes it again when a worker takes it. It is where the walk starts, not the last
//! word: the walk asks each reused step whether its reuse still holds
//! ([`crate::steps::StepKind::confirm_reuse`]: a claim another run took meanwhile executes
//! again, and so does everything after it). So what a resume reuses and executes is read from
//! the walk's records, the resume's own or its preview's dry walk
//! ([`super::preview::reused_and_executed`]), never from the plan alone.
//!
//! Here too: [`Engine::resume_run`] (the use case every adapter calls) and crash recovery's
//! rule, [`Engine::recover_running`].

use std::collections::BTreeMap;
use std::sync::Arc;

use super::executor::{Engine, RunRequest};
use crate::run::{ErrorInfo, RunRecord, RunStatus, StepRecord, StepStatus, Timestamp, Trigger};
use crate::steps::RepeatSafety;
use crate::store::StoreError;
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
    /// no two of its runs act at once); `fixed` when that run succeeded.
    #[error("{message}")]
    AlreadyResumed {
        message: String,
        by: String,
        fixed: bool,
    },
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

/// The newest run of a run's resume chain (over `resumed_by`, newest last at each link).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResumeChainEnd {
    pub run_id: String,
    /// Its status; `None` when the record no longer exists.
    pub status: Option<RunStatus>,
}

/// A later run of a failed run's lineage that succeeded: the run that fixed it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct LineageFix {
    /// The run that succeeded.
    pub run_id: String,
    /// How it came: `resume` (it continued the failed run, or a run that did) or `replay`.
    pub trigger: Trigger,
}

impl LineageFix {
    /// `its resume` or `a replay`, for sentences.
    pub fn how(&self) -> &'static str {
        match self.trigger {
            Trigger::Resume => "a resume",
            Trigger::Replay => "a replay",
            _ => "a later run",
        }
    }
}

/// Most runs of a lineage read to find what fixed a failure.
const LINEAGE_READS: usize = 64;

/// Why a resume cannot start.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ResumeFailure {
    /// Nothing to resume, or a bad `from_step`.
    #[error(transparent)]
    Plan(ResumeError),
    /// The recorded definition no longer validates (e.g. a step kind was removed).
    #[error("the run's recorded definition no longer validates")]
    SnapshotInvalid(Vec<crate::workflow::Problem>),
    /// The store failed while checking the run's earlier resumes.
    #[error(transparent)]
    Store(StoreError),
}

/// What crash recovery does with a run a dead process left `running` (`--recover`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoverPolicy {
    /// Resume it when its in-flight step is safe to repeat, else mark it `interrupted`.
    #[default]
    ResumeSafe,
    /// Mark every such run `interrupted`; a person resumes it.
    None,
}

/// The outcome of [`Engine::recover_running`].
#[derive(Debug)]
pub enum Recovery {
    /// The original (now `interrupted`, naming its resume) and its queued resume.
    Resumed {
        original: RunRecord,
        resume: Box<RunRecord>,
        workflow: Arc<Compiled>,
    },
    /// The original, `interrupted`, with the reason it was not resumed.
    Interrupted(RunRecord),
}

impl Engine {
    /// Resume `original` (SPEC §4 "Resume"): checks the plan ([`plan`]) and answers
    /// the definition to run (compiled from `original.snapshot`), the new queued run (not
    /// stored: trigger `resume`, linked by `resume_of`, in the original's lineage and mode,
    /// with its input and idempotency key) and the original with the new run added to its
    /// `resumed_by`. Store both in one batch, then execute (see [`Engine::execute`]).
    pub async fn resume_run(
        &self,
        original: &RunRecord,
        from_step: Option<&str>,
    ) -> Result<(Arc<Compiled>, RunRecord, RunRecord), ResumeFailure> {
        let wf = self.compile_snapshot(original)?;
        plan(original, &wf, from_step).map_err(ResumeFailure::Plan)?;
        // One resume per run: a chain, never a fan (two resumes of one run would both own the
        // lineage's claims and repeat the same calls at once). Point at the chain's newest run.
        if let Some(first) = original.resumed_by.last() {
            let newest = self
                .newest_resume(original)
                .await
                .map_err(ResumeFailure::Store)?
                .unwrap_or_else(|| ResumeChainEnd {
                    run_id: first.clone(),
                    status: None,
                });
            let state = match newest.status {
                Some(RunStatus::Succeeded) => {
                    "succeeded: the lineage is fixed, nothing is left to resume".to_string()
                }
                Some(s) if is_resumable(s) => format!("{s}: resume that one"),
                Some(s) => format!("is {s}: wait for it"),
                None => "no longer exists".to_string(),
            };
            return Err(ResumeFailure::Plan(ResumeError::AlreadyResumed {
                message: format!(
                    "run `{}` was already resumed by run `{first}`; the newest run of its \
                     lineage is `{}`, which {state}",
                    original.id, newest.run_id
                ),
                fixed: newest.status == Some(RunStatus::Succeeded),
                by: newest.run_id,
            }));
        }
        let mut req = RunRequest::new(original.input.clone(), Trigger::Resume, original.mode);
        req.resume_of = Some(original.id.clone());
        req.resume_from = from_step.map(String::from);
        req.root_run_id = Some(original.root().to_string());
        req.idempotency_key = original.idempotency_key.clone();
        req.input_edited = original.input_edited;
        let mut run = self.new_run(&wf, req);
        run.replay_of = original.replay_of.clone();
        // A resume continues the run's trace.
        run.trace_parent = original.trace_parent.clone();
        let mut orig = original.clone();
        orig.resumed_by.push(run.id.clone());
        Ok((wf, run, orig))
    }

    /// Crash recovery of a run left `running` by a dead process (SPEC §4 "Crash recovery").
    /// With [`RecoverPolicy::ResumeSafe`], unless the run was in a step that is not safe to
    /// repeat ([`crate::steps::StepKind::repeat_safety`]: such a step is recorded `running`
    /// durably before it starts, so its record says whether it was in flight), answers
    /// [`Recovery::Resumed`]: the original marked `interrupted` and naming its resume, and the
    /// queued resume (it repeats the step in flight, and any safe step whose record the crash
    /// lost). Otherwise [`Recovery::Interrupted`]: the original `interrupted` with a reason a
    /// person can act on. Nothing is stored: write the records in one batch, then queue the
    /// resume.
    pub async fn recover_running(&self, run: RunRecord, policy: RecoverPolicy) -> Recovery {
        let mut orig = run;
        orig.status = RunStatus::Interrupted;
        orig.finished_at = Some(Timestamp(self.clock().now_ms()));
        let interrupted = |mut orig: RunRecord, step: String, message: String| {
            orig.error = Some(ErrorInfo {
                code: "interrupted".into(),
                message,
                step,
                attempts: 0,
                http_status: None,
            });
            Recovery::Interrupted(orig)
        };
        // The last step recorded: where a run that is not resumed is said to have stopped.
        let last = orig
            .steps
            .last()
            .map(|s| s.step_id.clone())
            .unwrap_or_default();
        if policy == RecoverPolicy::None {
            return interrupted(
                orig,
                last,
                "the process stopped while this run was running and automatic recovery is off \
                 (--recover none): check the destination, then resume it"
                    .into(),
            );
        }
        // The step in flight when the process died: one recorded `running` (a step that is
        // not safe to repeat is recorded so, durably, before it starts), else the first step
        // the resume executes (every step before the record's end is safe to repeat, or it
        // would have left such a record).
        let marked = orig
            .steps
            .iter()
            .find(|s| s.status == StepStatus::Running)
            .cloned();
        if let Some(rec) = &marked {
            let safety = self.compile_snapshot(&orig).ok().and_then(|wf| {
                Some(
                    wf.kind(wf.index_of(&rec.step_id)?)
                        .repeat_safety(&rec.resolved_config),
                )
            });
            if let Some(RepeatSafety::Unsafe(reason)) = safety {
                let step = rec.step_id.clone();
                let message = format!("step {step}: {reason}; check it, then resume");
                return interrupted(orig, step, message);
            }
        }
        let preview = match self.preview_resume(&orig, None).await {
            Ok(p) => p,
            Err(e) => {
                return interrupted(
                    orig,
                    last,
                    format!("the process stopped while this run was running, and it cannot be resumed: {e}"),
                );
            }
        };
        // Which step was in flight is known when it was recorded `running`; else only that
        // the resume starts at the first step with no record of its end (the one in flight may
        // be that one or a later safe step whose start is not recorded).
        let marked = marked.map(|r| r.step_id);
        let at_step = match &marked {
            Some(step) => format!(" (step {step} in flight)"),
            None => String::new(),
        };
        let in_flight = marked.or(preview.from_step).unwrap_or_default();
        match self.resume_run(&orig, None).await {
            Ok((wf, resume, mut orig)) => {
                let from = if in_flight.is_empty() || !at_step.is_empty() {
                    String::new()
                } else {
                    format!(" from step {in_flight}")
                };
                orig.error = Some(ErrorInfo {
                    code: "interrupted".into(),
                    message: format!(
                        "the process stopped while this run was running{at_step}; it was \
                         resumed automatically{from} as run {} (the steps it repeats are safe to \
                         repeat)",
                        resume.id
                    ),
                    step: in_flight,
                    attempts: 0,
                    http_status: None,
                });
                Recovery::Resumed {
                    original: orig,
                    resume: Box::new(resume),
                    workflow: wf,
                }
            }
            Err(e) => interrupted(orig, in_flight, format!("it cannot be resumed: {e}")),
        }
    }

    /// The newest run of `run`'s resume chain (`None` when it was never resumed): one resume
    /// per run keeps the chain a line, so this is the run to resume, or to wait for.
    pub async fn newest_resume(
        &self,
        run: &RunRecord,
    ) -> Result<Option<ResumeChainEnd>, StoreError> {
        let Some(first) = run.resumed_by.last() else {
            return Ok(None);
        };
        let mut end = ResumeChainEnd {
            run_id: first.clone(),
            status: None,
        };
        for _ in 0..10_000 {
            let Some(r) = self.store().get_run(&end.run_id).await? else {
                break;
            };
            end.status = Some(r.status);
            match r.resumed_by.last() {
                Some(next) => {
                    end = ResumeChainEnd {
                        run_id: next.clone(),
                        status: None,
                    }
                }
                None => break,
            }
        }
        Ok(Some(end))
    }

    /// The run that fixed `run` (see [`Engine::fixed_by_links`]).
    pub async fn fixed_by(&self, run: &RunRecord) -> Result<Option<LineageFix>, StoreError> {
        self.fixed_by_links(run.status, run.mode, &run.resumed_by, &run.replayed_by)
            .await
    }

    /// The run that fixed a run with this `status`, `mode` and these links: the first
    /// descendant (over `resumed_by` and `replayed_by`, breadth first, oldest first) that
    /// succeeded. A dry run fixes only a dry failure: a live failure is fixed by a live run.
    /// `None` for a run that did not fail (`failed`, `timed_out`, `interrupted`), has no
    /// descendants, or none of which succeeded (at most 64 of them are read).
    pub async fn fixed_by_links(
        &self,
        status: RunStatus,
        mode: crate::run::Mode,
        resumed_by: &[String],
        replayed_by: &[String],
    ) -> Result<Option<LineageFix>, StoreError> {
        if !is_resumable(status) {
            return Ok(None);
        }
        let mut queue: std::collections::VecDeque<String> =
            resumed_by.iter().chain(replayed_by).cloned().collect();
        let mut seen = std::collections::HashSet::new();
        while let Some(id) = queue.pop_front() {
            if seen.len() >= LINEAGE_READS || !seen.insert(id.clone()) {
                continue;
            }
            let Some(r) = self.store().get_run(&id).await? else {
                continue;
            };
            if r.status == RunStatus::Succeeded
                && (r.mode == crate::run::Mode::Live || mode == crate::run::Mode::Dry)
            {
                return Ok(Some(LineageFix {
                    run_id: r.id,
                    trigger: r.trigger,
                }));
            }
            queue.extend(r.resumed_by.iter().chain(&r.replayed_by).cloned());
        }
        Ok(None)
    }

    /// Compile the definition a run recorded (`snapshot`), for a resume or an original-version
    /// replay.
    pub fn compile_snapshot(&self, run: &RunRecord) -> Result<Arc<Compiled>, ResumeFailure> {
        let (c, problems) = crate::workflow::check_value(&run.snapshot, self.registry());
        c.map(Arc::new)
            .ok_or(ResumeFailure::SnapshotInvalid(problems))
    }
}
