//! The run queue, the worker pool, crash recovery and periodic maintenance.
//!
//! Runs are queued durably in the store (status `queued`) before they are acknowledged.
//!
//! * **One process (sled, in-memory):** the in-process channel carries their ids to the
//!   workers. On start, `running` runs are resumed when the step in flight is safe to repeat,
//!   else become `interrupted` with the reason ([`recover`]), and `queued` runs are executed
//!   (SPEC §4 "Crash recovery").
//! * **Many processes on one database (PostgreSQL, SPEC §8):** workers take `queued` runs from
//!   the store's [`SharedQueue`](crate::store::SharedQueue) under a lease ([`ServerOptions::lease`], default 30 s), woken
//!   by this process's own enqueues or by polling every [`POLL`]. A heartbeat renews the
//!   leases of the runs this process executes every third of the lease. Every quarter of the
//!   lease, each process takes over `running` runs whose lease expired (their process died)
//!   and recovers them by the same resume rule ([`recover_orphans`]); a `queued` run whose
//!   taker died is simply taken again. A dead process's runs are therefore recovered at most
//!   a lease and a quarter after its last heartbeat.
//! * **No crash loops** (both): a run in flight at two consecutive crashes is quarantined
//!   instead of executed or recovered again ([`super::quarantine`]): on one process by
//!   [`recover`] at start, from the in-flight log; on a shared queue by the taker, from the
//!   lease's takeover count.
//!
//! [`ServerOptions::lease`]: super::ServerOptions::lease

use std::sync::Arc;
use std::time::Duration;

use std::collections::HashSet;

use tokio::sync::{mpsc, watch, Mutex, Notify};

use super::AppState;
use crate::run::{ErrorInfo, RunRecord, RunStatus, Timestamp};
use crate::runtime::Recovery;
use crate::store::{BatchWrite, StoreError, StoreResult};

/// How often idle workers of a shared queue look for runs other processes queued.
pub const POLL: Duration = Duration::from_millis(200);

/// The sending side of the worker pool's queue.
#[derive(Clone)]
pub struct Queue {
    tx: mpsc::UnboundedSender<String>,
    /// The store's queue is shared (its workers take runs from the store; the channel is
    /// not read and stays empty).
    shared: bool,
    /// Wakes the workers of a shared queue (they take the run from the store).
    wake: Arc<Notify>,
    /// Run ids this process executes under a lease (shared queue), renewed by heartbeat.
    held: Arc<std::sync::Mutex<HashSet<String>>>,
    /// Queued runs handed over with their id ([`Queue::push_run`]), at most [`HANDOFF_MAX`].
    handoff: Arc<std::sync::Mutex<std::collections::HashMap<String, RunRecord>>>,
}

/// Most queued runs the ingest hands to the workers in memory; past it (a backlog), workers
/// read the run from the store. 256 runs of a 6 KB webhook body are ~4 MB.
pub const HANDOFF_MAX: usize = 256;

/// The receiving side, shared by the workers.
pub type QueueReceiver = Arc<Mutex<mpsc::UnboundedReceiver<String>>>;

impl Queue {
    /// A new queue; `shared` when the store has a [`crate::store::SharedQueue`].
    pub fn new(shared: bool) -> (Self, QueueReceiver) {
        let (tx, rx) = mpsc::unbounded_channel();
        let queue = Queue {
            tx,
            shared,
            wake: Arc::new(Notify::new()),
            held: Arc::default(),
            handoff: Arc::default(),
        };
        (queue, Arc::new(Mutex::new(rx)))
    }
    /// Hand a stored `queued` run to the workers (on a shared queue: wake one; any process's
    /// worker may take it).
    pub fn push(&self, run_id: String) {
        if self.shared {
            self.wake.notify_one();
        } else {
            let _ = self.tx.send(run_id);
        }
    }
    /// [`Queue::push`] of a run just stored as `queued`, handing the record itself to the
    /// worker that takes it (so it is not read back and parsed again), while fewer than
    /// [`HANDOFF_MAX`] wait. Only the writer of a `queued` run may hand it over: nothing else
    /// changes a queued run in this process, so the record is what the store holds.
    pub fn push_run(&self, run: RunRecord) {
        let id = run.id.clone();
        if !self.shared {
            let mut handoff = self.handoff.lock().unwrap_or_else(|e| e.into_inner());
            if handoff.len() < HANDOFF_MAX {
                handoff.insert(id.clone(), run);
            }
        }
        self.push(id);
    }
    /// The record handed over with `run_id`, if any.
    fn take_handoff(&self, run_id: &str) -> Option<RunRecord> {
        let mut handoff = self.handoff.lock().unwrap_or_else(|e| e.into_inner());
        handoff.remove(run_id)
    }
    fn hold(&self, run_id: &str) {
        self.held_set().insert(run_id.to_string());
    }
    fn unhold(&self, run_id: &str) {
        self.held_set().remove(run_id);
    }
    fn held_ids(&self) -> Vec<String> {
        self.held_set().iter().cloned().collect()
    }
    fn held_set(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The lease length in ms.
fn lease_ms(state: &AppState) -> i64 {
    i64::try_from(state.options().lease.as_millis()).unwrap_or(i64::MAX)
}

/// A runtime for executing runs whose threads run at CPU nice value `nice` (Linux: a nice
/// value is per thread; elsewhere the priority is unchanged), built once per process and kept
/// for its lifetime; `None` for `nice` 0 (execute on the caller's runtime).
///
/// Why: on a busy machine, runs executing at the server's priority take the CPU the door
/// needs, and the door is what a sender waits on (GitHub gives up after 10 s) while accepted
/// runs are durable and can wait. At nice 10 a thread gets about a tenth of a contended core
/// against one at 0 (Linux CFS weights 110 against 1024); an idle CPU goes to it in full.
/// Errors: the runtime could not start, or was already built with another nice value.
pub fn run_runtime(nice: i32) -> std::io::Result<Option<tokio::runtime::Handle>> {
    static RUNTIME: std::sync::OnceLock<(i32, tokio::runtime::Runtime)> =
        std::sync::OnceLock::new();
    if nice == 0 {
        return Ok(None);
    }
    if let Some((n, rt)) = RUNTIME.get() {
        return if *n == nice {
            Ok(Some(rt.handle().clone()))
        } else {
            Err(std::io::Error::other(
                "the run runtime exists with another nice value",
            ))
        };
    }
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(cores)
        .max_blocking_threads((2 * cores).max(4))
        .thread_name("fluxo-run")
        .on_thread_start(move || crate::store::lower_thread_priority(nice))
        .enable_all()
        .build()?;
    let (_, rt) = RUNTIME.get_or_init(|| (nice, rt));
    Ok(Some(rt.handle().clone()))
}

/// Execute `f` holding a lease on `run_id` when the queue is shared (a run the API executes
/// at once): the heartbeat renews it, and it is released after. Without a shared queue `f`
/// just runs.
///
/// Errors: the lease could not be written, or another process holds it; `f` has not run then
/// (a run executing without its lease looks orphaned to the other processes, which would
/// recover it while it runs).
pub async fn with_lease<T>(
    state: &AppState,
    run_id: &str,
    f: impl std::future::Future<Output = T>,
) -> StoreResult<T> {
    let Some(sq) = state.store().shared_queue() else {
        return Ok(f.await);
    };
    let owner = state.instance_id();
    if !sq
        .lease(run_id, owner, lease_ms(state), state.clock().now_ms())
        .await?
    {
        return Err(StoreError::Backend(format!(
            "run {run_id} is leased by another process"
        )));
    }
    state.queue().hold(run_id);
    let out = f.await;
    state.queue().unhold(run_id);
    if let Err(e) = sq.release_leases(owner, &[run_id.to_string()]).await {
        tracing::warn!(run_id, error = %e, "could not release the run's lease");
    }
    Ok(out)
}

/// Crash recovery (SPEC §4): each `running` run (its process died) is resumed when its
/// in-flight step is safe to repeat, else marked `interrupted` with the reason
/// ([`crate::runtime::Engine::recover_running`], by the server's `--recover` policy); the
/// original and its resume are written in one batch, so a crash during recovery never resumes
/// a run twice. Then every `queued` run (the resumes included) goes back on the queue.
pub async fn recover(state: &AppState) -> StoreResult<()> {
    // Runs in flight at the last crashes first: those at the limit are quarantined, never
    // recovered (`super::quarantine`).
    super::quarantine::start(state).await?;
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
                crate::telemetry::recovered("resumed");
            }
            Recovery::Interrupted(original) => {
                write_all(store.as_ref(), vec![original.clone()]).await?;
                let reason = original.error.as_ref().map(|e| e.message.as_str());
                tracing::warn!(run_id = %id, reason, "run interrupted by a restart");
                crate::telemetry::recovered("interrupted");
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
pub(super) async fn write_all(
    store: &dyn crate::store::Store,
    runs: Vec<RunRecord>,
) -> StoreResult<()> {
    let n = runs.len();
    let writes: Vec<_> = runs.into_iter().map(BatchWrite::PutRun).collect();
    let out = store.write_batch(writes).await;
    if out.len() != n {
        return Err(StoreError::Backend("batch lost its outcomes".into()));
    }
    out.into_iter().try_for_each(|(_, r)| r.map(|_| ()))
}

/// Start `n` workers; each stops taking runs when `shutdown` turns true and finishes the run
/// it has. While the door is busy only the first takes runs ([`super::door_first`]).
pub fn spawn_workers(
    state: AppState,
    rx: QueueReceiver,
    n: usize,
    shutdown: watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let on = state
        .options()
        .run_on
        .clone()
        .unwrap_or_else(tokio::runtime::Handle::current);
    (0..n)
        .map(|i| {
            let state = state.clone();
            let rx = rx.clone();
            let mut shutdown = shutdown.clone();
            on.spawn(async move {
                if state.store().shared_queue().is_some() {
                    return shared_worker(state, i, shutdown).await;
                }
                loop {
                    if !door_turn(&state, i, &mut shutdown).await {
                        break;
                    }
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

/// Wait for worker `index`'s turn to take a run ([`super::door_first`]); false once
/// `shutdown` has turned true (then it takes none).
async fn door_turn(state: &AppState, index: usize, shutdown: &mut watch::Receiver<bool>) -> bool {
    let stopped = tokio::select! {
        _ = state.door().turn(index) => false,
        _ = shutdown.wait_for(|s| *s) => true,
    };
    !stopped && !*shutdown.borrow()
}

/// Worker `index` of a shared queue: takes the oldest free `queued` run under a lease,
/// executes it, releases the lease; idle, waits for a local enqueue or [`POLL`]; while the
/// door is busy, only worker 0 takes runs ([`super::door_first`]).
async fn shared_worker(state: AppState, index: usize, mut shutdown: watch::Receiver<bool>) {
    let owner = state.instance_id().to_string();
    loop {
        if !door_turn(&state, index, &mut shutdown).await {
            break;
        }
        let Some(sq) = state.store().shared_queue() else {
            return;
        };
        match sq
            .take_queued(&owner, lease_ms(&state), state.clock().now_ms())
            .await
        {
            Ok(Some(taken)) => {
                let id = taken.run.id.clone();
                state.queue().hold(&id);
                match super::quarantine::take_or_quarantine(&state, taken).await {
                    Ok(Some(run)) => execute_taken(&state, run).await,
                    Ok(None) => {}
                    Err(e) => {
                        // The lease is kept: it expires, and the next take quarantines it.
                        tracing::error!(run_id = %id, error = %e, "the run could not be quarantined");
                        state.queue().unhold(&id);
                        continue;
                    }
                }
                state.queue().unhold(&id);
                if let Err(e) = sq.release_leases(&owner, std::slice::from_ref(&id)).await {
                    tracing::warn!(run_id = %id, error = %e, "could not release the run's lease");
                }
                continue;
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "taking a queued run failed"),
        }
        let stop = tokio::select! {
            _ = state.queue().wake.notified() => false,
            _ = tokio::time::sleep(POLL) => false,
            _ = shutdown.wait_for(|s| *s) => true,
        };
        if stop {
            break;
        }
    }
}

/// Spawn the shared queue's heartbeat (renews this process's leases every third of the lease),
/// its orphan recovery (every quarter of the lease, [`recover_orphans`]) and the pick-up of
/// settings another process saved (every [`super::settings::SHARED_POLL`]). `None` without a
/// shared queue.
pub fn spawn_lease_keeper(
    state: AppState,
    mut shutdown: watch::Receiver<bool>,
) -> Option<tokio::task::JoinHandle<()>> {
    state.store().shared_queue()?;
    Some(tokio::spawn(async move {
        let lease = state.options().lease.max(Duration::from_millis(100));
        let mut beat = tokio::time::interval(lease / 3);
        let mut scan = tokio::time::interval(lease / 4);
        let mut settings = tokio::time::interval(super::settings::SHARED_POLL);
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        scan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        settings.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        enum Tick {
            Beat,
            Scan,
            Settings,
            Stop,
        }
        loop {
            let tick = tokio::select! {
                _ = beat.tick() => Tick::Beat,
                _ = scan.tick() => Tick::Scan,
                _ = settings.tick() => Tick::Settings,
                _ = shutdown.wait_for(|s| *s) => Tick::Stop,
            };
            match tick {
                Tick::Beat => heartbeat(&state).await,
                Tick::Settings => super::settings::refresh(&state).await,
                Tick::Scan => {
                    if let Err(e) = recover_orphans(&state).await {
                        tracing::warn!(error = %e, "recovering orphaned runs failed");
                    }
                }
                Tick::Stop => break,
            }
        }
        // Runs still executing keep their leases until they end; a last beat covers the wait.
        heartbeat(&state).await;
    }))
}

async fn heartbeat(state: &AppState) {
    let Some(sq) = state.store().shared_queue() else {
        return;
    };
    let held = state.queue().held_ids();
    if held.is_empty() {
        return;
    }
    match sq
        .renew_leases(
            state.instance_id(),
            &held,
            lease_ms(state),
            state.clock().now_ms(),
        )
        .await
    {
        Ok(renewed) => {
            // Runs that ended and released their leases meanwhile are not lost ones: only
            // those this process still executes count.
            let renewed: HashSet<String> = renewed.into_iter().collect();
            let still_held: HashSet<String> = state.queue().held_ids().into_iter().collect();
            let lost: Vec<&String> = held
                .iter()
                .filter(|id| !renewed.contains(*id) && still_held.contains(*id))
                .collect();
            if !lost.is_empty() {
                tracing::warn!(
                    runs = ?lost,
                    "run leases were taken over by another process while this one executes them"
                );
            }
        }
        Err(e) => tracing::warn!(error = %e, "lease heartbeat failed"),
    }
}

/// Take over `running` runs whose lease expired (their process died) and recover each by the
/// resume rule, as [`recover`] does at start on one process: resumed when the step in flight
/// is safe to repeat (the resume is queued for any process, carrying the run's takeover
/// count), else `interrupted`; a run whose lineage was in flight at as many crashes as
/// `--quarantine-after` is quarantined instead ([`super::quarantine`]). Returns how many were
/// recovered.
pub async fn recover_orphans(state: &AppState) -> StoreResult<usize> {
    let Some(sq) = state.store().shared_queue() else {
        return Ok(0);
    };
    let owner = state.instance_id().to_string();
    let store = state.store();
    let policy = state.options().recover;
    let taken = sq
        .take_orphans(&owner, lease_ms(state), state.clock().now_ms(), 100)
        .await?;
    let ids: Vec<String> = taken.iter().map(|(id, _)| id.clone()).collect();
    let mut n = 0;
    for (id, takeovers) in &taken {
        let run = match store.get_run(id).await? {
            Some(r) if r.status == RunStatus::Running => r,
            _ => continue,
        };
        // In flight at as many crashes as the limit: quarantined, whatever `--recover` says.
        if super::quarantine::quarantine_orphan(state, &run, *takeovers).await? {
            n += 1;
            continue;
        }
        match state.engine().recover_running(run, policy).await {
            Recovery::Resumed {
                original, resume, ..
            } => {
                let resume_id = resume.id.clone();
                // The resume carries the count: its own takeover is the lineage's next crash.
                sq.carry_takeovers(&resume_id, *takeovers).await?;
                write_all(store.as_ref(), vec![original, *resume]).await?;
                tracing::warn!(run_id = %id, resume = %resume_id, "orphaned run resumed (its process died)");
                crate::telemetry::recovered("resumed");
                state.queue().push(resume_id);
            }
            Recovery::Interrupted(original) => {
                write_all(store.as_ref(), vec![original]).await?;
                tracing::warn!(run_id = %id, "orphaned run interrupted (its process died)");
                crate::telemetry::recovered("interrupted");
            }
        }
        n += 1;
    }
    sq.release_leases(&owner, &ids).await?;
    Ok(n)
}

/// Execute one queued run with the definition it was accepted with: a resume with the
/// snapshot it resumes; any other run with the workflow's published definition when that is
/// still the one the run recorded (its `definition_hash`), else with the run's snapshot.
///
/// Why the snapshot: SPEC §1 has webhooks, schedules and the run API use the published
/// version, at the moment they accept the run. With several processes on one database a run
/// accepted by one is executed by any; a process that has not loaded a publish yet must not
/// run an older definition than the one that accepted it (nor a newer one: runs queued before a
/// publish finish on the version that accepted them, as n8n's queued executions and Temporal's
/// pinned workflows do). A run whose workflow was removed, or no longer validates, fails
/// (`workflow_unavailable`); one whose snapshot does not compile here (another Fluxo version
/// wrote it) runs the published definition, with a warning.
pub async fn execute_queued(state: &AppState, run_id: &str) {
    let store = state.store();
    let stored = match state.queue().take_handoff(run_id) {
        Some(run) => Ok(Some(run)),
        None => store.get_run(run_id).await,
    };
    match stored {
        Ok(Some(r)) if r.status == RunStatus::Queued => execute_taken(state, r).await,
        Ok(_) => {}
        Err(e) => tracing::error!(run_id, error = %e, "cannot load queued run"),
    }
}

/// Execute `run`, a `queued` run this process holds (read from the store, or handed over by
/// its writer), with the definition that accepted it (see [`execute_queued`]).
async fn execute_taken(state: &AppState, run: RunRecord) {
    let run_id = run.id.as_str();
    if run.resume_of.is_some() {
        let wf = match state.engine().compile_snapshot(&run) {
            Ok(wf) => wf,
            Err(e) => return fail_unrunnable(state, run, &e.to_string()).await,
        };
        return execute_in_span(state, &wf, run).await;
    }
    let compiled = state
        .workflows()
        .get(&run.workflow_id)
        .and_then(|e| e.compiled.clone());
    let Some(current) = compiled else {
        fail_unrunnable(
            state,
            run,
            "the workflow no longer exists or does not validate",
        )
        .await;
        return;
    };
    if current.hash == run.definition_hash {
        return execute_in_span(state, &current, run).await;
    }
    match state.engine().compile_snapshot(&run) {
        Ok(accepted) => execute_in_span(state, &accepted, run).await,
        Err(e) => {
            tracing::warn!(
                run_id,
                error = %e,
                "the run's recorded definition does not compile here; it runs the published one"
            );
            let mut run = run;
            run.workflow_version = current.workflow.version;
            run.definition_hash = current.hash.clone();
            run.snapshot = current.snapshot.clone();
            execute_in_span(state, &current, run).await;
        }
    }
}

/// Execute `run` inside its `run` span (run and workflow ids on every log line of it), with
/// one `info` line when it ends (status, duration).
async fn execute_in_span(state: &AppState, wf: &crate::workflow::Compiled, run: RunRecord) {
    let span = tracing::info_span!(
        "run",
        otel.name = %format!("run {}", run.workflow_id),
        run_id = %run.id,
        workflow_id = %run.workflow_id,
        otel.status_code = tracing::field::Empty,
    );
    crate::traces::set_parent(&span, run.trace_parent.as_deref());
    let span_for_status = span.clone();
    let work = async {
        match state.engine().execute(wf, run).await {
            Ok(done) => {
                state.duplicates().note_run(&done);
                if done.status != RunStatus::Succeeded {
                    span_for_status.record("otel.status_code", "ERROR");
                }
                tracing::info!(
                    status = done.status.as_str(),
                    duration_ms = done.duration_ms,
                    "run finished"
                )
            }
            Err(e) => tracing::error!(error = %e, "run history could not be written"),
        }
    };
    tracing::Instrument::instrument(work, span).await;
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
