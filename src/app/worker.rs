//! The run queue, the worker pool, crash recovery and periodic maintenance.
//!
//! Runs are queued durably in the store (status `queued`) before they are acknowledged; the
//! in-process channel only carries their ids to the workers. On start, `running` runs are
//! resumed when the step in flight is safe to repeat, else become `interrupted` with the
//! reason ([`recover`]), and `queued` runs are executed (SPEC §4 "Crash recovery").

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch, Mutex};

use super::AppState;
use crate::run::{ErrorInfo, RunRecord, RunStatus, Timestamp};
use crate::runtime::Recovery;
use crate::store::{BatchWrite, StoreResult};

/// The sending side of the worker pool's queue.
#[derive(Clone)]
pub struct Queue {
    tx: mpsc::UnboundedSender<String>,
}

/// The receiving side, shared by the workers.
pub type QueueReceiver = Arc<Mutex<mpsc::UnboundedReceiver<String>>>;

impl Queue {
    /// A new queue.
    pub fn new() -> (Self, QueueReceiver) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Queue { tx }, Arc::new(Mutex::new(rx)))
    }
    /// Hand a stored `queued` run to the workers.
    pub fn push(&self, run_id: String) {
        let _ = self.tx.send(run_id);
    }
}

/// Crash recovery (SPEC §4): each `running` run (its process died) is resumed when its
/// in-flight step is safe to repeat, else marked `interrupted` with the reason
/// ([`crate::runtime::Engine::recover_running`], by the server's `--recover` policy); the
/// original and its resume are written in one batch, so a crash during recovery never resumes
/// a run twice. Then every `queued` run (the resumes included) goes back on the queue.
pub async fn recover(state: &AppState) -> StoreResult<()> {
    let store = state.store();
    let policy = state.options().recover;
    for id in store.run_ids_with_status(RunStatus::Running).await? {
        let Some(run) = store.get_run(&id).await? else {
            continue;
        };
        match state.engine().recover_running(run, policy).await {
            Recovery::Resumed {
                original, resume, ..
            } => {
                write_all(store.as_ref(), vec![original, *resume.clone()]).await?;
                tracing::warn!(run_id = %id, resume = %resume.id, "run resumed after a restart");
            }
            Recovery::Interrupted(original) => {
                write_all(store.as_ref(), vec![original.clone()]).await?;
                let reason = original.error.as_ref().map(|e| e.message.as_str());
                tracing::warn!(run_id = %id, reason, "run interrupted by a restart");
            }
        }
    }
    store.flush().await?;
    for id in store.run_ids_with_status(RunStatus::Queued).await? {
        state.queue().push(id);
    }
    Ok(())
}

/// Put `runs` in one batch (one transaction on sled).
async fn write_all(store: &dyn crate::store::Store, runs: Vec<RunRecord>) -> StoreResult<()> {
    let n = runs.len();
    let writes: Vec<_> = runs.into_iter().map(BatchWrite::PutRun).collect();
    let out = store.write_batch(writes).await;
    if out.len() != n {
        return Err(crate::store::StoreError::Backend(
            "batch lost its outcomes".into(),
        ));
    }
    out.into_iter().try_for_each(|(_, r)| r.map(|_| ()))
}

/// Start `n` workers; each stops taking runs when `shutdown` turns true and finishes the run
/// it has.
pub fn spawn_workers(
    state: AppState,
    rx: QueueReceiver,
    n: usize,
    shutdown: watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..n)
        .map(|_| {
            let state = state.clone();
            let rx = rx.clone();
            let mut shutdown = shutdown.clone();
            tokio::spawn(async move {
                loop {
                    let next = {
                        let mut guard = rx.lock().await;
                        tokio::select! {
                            id = guard.recv() => id,
                            _ = shutdown.wait_for(|s| *s) => None,
                        }
                    };
                    let Some(id) = next else { break };
                    execute_queued(&state, &id).await;
                }
            })
        })
        .collect()
}

/// Execute one queued run: a resume with the snapshot it resumes, any other run with the
/// workflow's current definition.
pub async fn execute_queued(state: &AppState, run_id: &str) {
    let store = state.store();
    let run = match store.get_run(run_id).await {
        Ok(Some(r)) if r.status == RunStatus::Queued => r,
        Ok(_) => return,
        Err(e) => {
            tracing::error!(run_id, error = %e, "cannot load queued run");
            return;
        }
    };
    if run.resume_of.is_some() {
        let wf = match state.engine().compile_snapshot(&run) {
            Ok(wf) => wf,
            Err(e) => return fail_unrunnable(state, run, &e.to_string()).await,
        };
        let span = tracing::info_span!("run", run_id = %run.id, workflow_id = %run.workflow_id);
        let result = tracing::Instrument::instrument(state.engine().execute(&wf, run), span).await;
        if let Err(e) = result {
            tracing::error!(run_id, error = %e, "run history could not be written");
        }
        return;
    }
    let compiled = state
        .workflows()
        .get(&run.workflow_id)
        .and_then(|e| e.compiled.clone());
    let Some(wf) = compiled else {
        fail_unrunnable(
            state,
            run,
            "the workflow no longer exists or does not validate",
        )
        .await;
        return;
    };
    let mut run = run;
    run.workflow_version = wf.workflow.version;
    run.definition_hash = wf.hash.clone();
    run.snapshot = serde_json::to_value(&wf.workflow).unwrap_or_default();
    let span = tracing::info_span!("run", run_id = %run.id, workflow_id = %run.workflow_id);
    let result = tracing::Instrument::instrument(state.engine().execute(&wf, run), span).await;
    if let Err(e) = result {
        tracing::error!(run_id, error = %e, "run history could not be written");
    }
}

async fn fail_unrunnable(state: &AppState, mut run: RunRecord, why: &str) {
    run.status = RunStatus::Failed;
    run.finished_at = Some(Timestamp(state.clock().now_ms()));
    run.error = Some(ErrorInfo {
        code: "workflow_unavailable".into(),
        message: format!("workflow `{}`: {why}", run.workflow_id),
        step: String::new(),
        attempts: 0,
        http_status: None,
    });
    if let Err(e) = state.store().put_run(&run).await {
        tracing::error!(run_id = %run.id, error = %e, "cannot store run");
    }
}

/// Every minute: prune runs by retention, sweep expired Memory keys and idempotency records.
pub fn spawn_maintenance(
    state: AppState,
    mut shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            let now = state.clock().now_ms();
            let store = state.store().clone();
            let retention = state.retention();
            let res = async {
                let pruned = store.prune_runs(&retention, now).await?;
                let swept = store.sweep_expired(now, 10_000).await?;
                let idem = store.sweep_idempotency(now, 10_000).await?;
                StoreResult::Ok((pruned, swept, idem))
            }
            .await;
            match res {
                Ok((p, s, i)) if p + s + i > 0 => {
                    tracing::info!(
                        pruned_runs = p,
                        swept_keys = s,
                        swept_idempotency = i,
                        "maintenance"
                    )
                }
                Err(e) => tracing::error!(error = %e, "maintenance failed"),
                _ => {}
            }
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(60)) => {}
                _ = shutdown.wait_for(|s| *s) => break,
            }
        }
    })
}
