//! No crash loops (issue 42): a run that was in flight at [`ServerOptions::quarantine_after`]
//! consecutive crashes of the process (default 2) is **quarantined** at the next start:
//! recorded `failed` with the error code [`CODE`] and the reason ("the process died twice
//! while running this step", naming the step), never executed automatically again, and left
//! for a person, who resumes it once the cause is fixed (the ordinary resume: a quarantined
//! run is a failed one).
//!
//! Why: a step that kills the process (a template that allocates without bound, a bug in a
//! kind, a library that aborts) would otherwise kill every start, since crash recovery
//! executes the run again (a `queued` run, or the resume of a `running` one), `--recover none`
//! included when the run was still `queued`.
//!
//! "In flight" is exact: a step started and not done (not a run merely queued). Where it is
//! known from:
//!
//! * **Embedded store** (one process per data dir): the in-flight log
//!   ([`crate::store::flight`], one `write(2)` per step start and end, no `fsync`: a process
//!   crash loses nothing written). At start, [`start`] reads the previous process's log:
//!   after a clean stop nothing counts; else each run in flight gets its lineage's count for
//!   that step carried from the crash before plus one. A run in flight at one crash is
//!   recovered as before (the resume rule, `--recover`); at the limit it is quarantined
//!   before recovery, whatever `--recover` says. A count is kept only from one crash to the
//!   next (consecutive), and a clean stop resets them all.
//! * **PostgreSQL** (several processes, leases): the takes and leases are durable
//!   transactions, so the count is the lease's: a take that finds the run's lease expired
//!   (its holder died while executing it, `queued` or `running`) counts one takeover on the
//!   lease row (migration 0009), and an automatic resume starts with the count of the run it
//!   resumes ([`crate::store::SharedQueue::carry_takeovers`]). At the limit the taker
//!   quarantines the run instead of executing it ([`take_or_quarantine`]) or recovering it
//!   ([`quarantine_orphan`]). A run merely `queued` has no lease row and is never counted. The
//!   step is named from the run's records (the step recorded `running`, else the first one
//!   a resume would execute); a run still `queued` has none of its pure steps recorded, so
//!   its step is not named there. A count is never reset by a clean stop (a clean stop
//!   releases its leases after its runs end, so it adds none).
//!
//! [`ServerOptions::quarantine_after`]: super::ServerOptions::quarantine_after

use crate::run::{ErrorInfo, RunRecord, RunStatus, Timestamp};
use crate::store::flight::{self, FlightLog, Suspect};
use crate::store::StoreResult;

use super::AppState;

/// The error code of a quarantined run.
pub const CODE: &str = "quarantined";

/// The default limit: quarantined at the second consecutive crash.
pub const DEFAULT_QUARANTINE_AFTER: u32 = 2;

fn times(n: u32) -> String {
    match n {
        1 => "once".into(),
        2 => "twice".into(),
        n => format!("{n} times"),
    }
}

/// The reason a quarantined run records: the process died `crashes` times in `step` (empty
/// when not known).
pub fn reason(step: &str, crashes: u32) -> String {
    let at = if step.is_empty() {
        " (which one is not recorded: one before its first step with side effects)".to_string()
    } else {
        format!(" (step {step})")
    };
    format!(
        "the process died {} while running this step{at}: the run is quarantined and is not \
         executed again automatically; fix the cause (the step's config, its input or its \
         destination), then resume it",
        times(crashes)
    )
}

/// `run` as quarantined: `failed`, finished at `now_ms`, its error [`CODE`] with the
/// [`reason`], naming `step`.
pub fn quarantined(mut run: RunRecord, step: &str, crashes: u32, now_ms: i64) -> RunRecord {
    run.status = RunStatus::Failed;
    run.finished_at = Some(Timestamp(now_ms));
    run.error = Some(ErrorInfo {
        code: CODE.into(),
        message: reason(step, crashes),
        step: step.to_string(),
        attempts: 0,
        http_status: None,
    });
    run
}

/// Whether `crashes` reach the limit (`limit` 0: never).
pub fn at_limit(crashes: u32, limit: u32) -> bool {
    limit > 0 && crashes >= limit
}

/// At start on an embedded store with a data dir (before crash recovery): read the previous
/// process's in-flight log, quarantine the runs at the limit (durably), start this process's
/// log with the counts carried, and record steps in it from now on. A log that cannot be
/// read or started is logged and skipped (the server still starts, unguarded).
pub async fn start(state: &AppState) -> StoreResult<()> {
    let Some(dir) = state.options().data_dir.clone() else {
        return Ok(());
    };
    if state.store().shared_queue().is_some() {
        return Ok(());
    }
    if let Some(log) = state.engine().flight_log() {
        // A server started again over the same engine (an embedder): same process, same log.
        log.reopen();
        return Ok(());
    }
    let limit = state.options().quarantine_after;
    let prior = flight::read_prior(&dir).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "the in-flight log of the previous process is unreadable");
        flight::Prior::default()
    });
    let (quarantine, carry): (Vec<Suspect>, Vec<Suspect>) = prior
        .suspects
        .into_iter()
        .partition(|s| s.pending || at_limit(s.crashes, limit));
    for s in &carry {
        tracing::warn!(
            run_id = %s.run_id,
            step = %s.step,
            crashes = s.crashes,
            quarantine_after = limit,
            "the run was executing this step when the process died; it is recovered as usual, \
             and quarantined once the process has died in this step at `quarantine_after` \
             consecutive crashes"
        );
    }
    let log = match FlightLog::start(&dir, &carry, &quarantine) {
        Ok(log) => Some(log),
        Err(e) => {
            tracing::error!(
                error = %e,
                "the in-flight log could not be started: a run that kills the process is not \
                 quarantined"
            );
            None
        }
    };
    let now = state.clock().now_ms();
    let mut n = 0;
    for s in &quarantine {
        let Some(run) = state.store().get_run(&s.run_id).await? else {
            continue;
        };
        if !matches!(run.status, RunStatus::Queued | RunStatus::Running) {
            continue;
        }
        let run = quarantined(run, &s.step, s.crashes, now);
        super::worker::write_all(state.store().as_ref(), vec![run]).await?;
        announce(&s.run_id, &s.step, s.crashes);
        n += 1;
    }
    if n > 0 {
        state.store().flush().await?;
    }
    if let Some(log) = log {
        log.settled();
        state.engine().set_flight_log(log);
    }
    Ok(())
}

/// The step a run left `running` by a dead process was in: the one recorded `running`, else
/// the first step a resume would execute (as crash recovery names it); empty when not known
/// (a run still `queued`: its pure steps leave no record on a shared database).
async fn step_in_flight(state: &AppState, run: &RunRecord) -> String {
    if run.status != RunStatus::Running {
        return run
            .steps
            .iter()
            .find(|s| s.status == crate::run::StepStatus::Running)
            .map(|s| s.step_id.clone())
            .unwrap_or_default();
    }
    let recovery = state
        .engine()
        .recover_running(run.clone(), crate::runtime::RecoverPolicy::ResumeSafe)
        .await;
    let original = match recovery {
        crate::runtime::Recovery::Resumed { original, .. } => original,
        crate::runtime::Recovery::Interrupted(original) => original,
    };
    original.error.map(|e| e.step).unwrap_or_default()
}

/// Quarantine `run` (durably), in flight at `crashes` crashes: the log line and the metric.
async fn quarantine_now(state: &AppState, run: RunRecord, crashes: u32) -> StoreResult<()> {
    let step = step_in_flight(state, &run).await;
    let id = run.id.clone();
    let run = quarantined(run, &step, crashes, state.clock().now_ms());
    super::worker::write_all(state.store().as_ref(), vec![run]).await?;
    announce(&id, &step, crashes);
    Ok(())
}

/// A worker of a shared queue (PostgreSQL) took `taken`: the run to execute, or `None` when
/// its lease was taken over from dead processes as many times as the limit (its lineage was
/// in flight at that many crashes): then it was quarantined instead. Errors: the quarantine
/// could not be stored; keep the lease then (not released, it expires, and the next take
/// counts once more and quarantines it).
pub async fn take_or_quarantine(
    state: &AppState,
    taken: crate::store::Taken,
) -> StoreResult<Option<RunRecord>> {
    if !at_limit(taken.takeovers, state.options().quarantine_after) {
        return Ok(Some(taken.run));
    }
    quarantine_now(state, taken.run, taken.takeovers).await?;
    Ok(None)
}

/// [`take_or_quarantine`] for a `running` run taken over from a dead process (before crash
/// recovery): true when it was quarantined.
pub async fn quarantine_orphan(
    state: &AppState,
    run: &RunRecord,
    takeovers: u32,
) -> StoreResult<bool> {
    if !at_limit(takeovers, state.options().quarantine_after) {
        return Ok(false);
    }
    quarantine_now(state, run.clone(), takeovers).await?;
    Ok(true)
}

/// The log line and the metric of a quarantine.
pub fn announce(run_id: &str, step: &str, crashes: u32) {
    tracing::error!(
        run_id,
        step,
        crashes,
        "run quarantined: the process died {} while running this step; it is `failed` \
         (error code `{CODE}`) and waits for a person to fix the cause and resume it \
         (fluxo runs list --status failed)",
        times(crashes)
    );
    crate::telemetry::recovered("quarantined");
}

/// A clean stop began (the server's shutdown, before it waits for the runs to finish):
/// nothing in flight now, or started while the stop waits, counts as a crash suspect at the
/// next start.
pub fn clean_stop(state: &AppState) {
    if let Some(log) = state.engine().flight_log() {
        log.close_clean();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_names_the_step_and_the_count() {
        let r = reason("boom", 2);
        assert!(
            r.starts_with("the process died twice while running this step (step boom)"),
            "{r}"
        );
        assert!(
            reason("", 3).starts_with("the process died 3 times while running this step (which")
        );
        assert!(at_limit(2, 2) && !at_limit(1, 2) && !at_limit(9, 0));
    }
}
