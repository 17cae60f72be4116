//! Group commit: the writes of many requests applied as one batch and made durable by one
//! flush (the webhook ingest path, and the executor's `running` and final run states).
//!
//! A caller hands its write to [`GroupCommit::claim_and_enqueue`] or
//! [`GroupCommit::put_run`] (or, having written by itself, waits in
//! [`GroupCommit::durable`]). Two lanes, each one task, collect everything that arrived while
//! their previous batch was being committed, apply the writes with [`Store::write_batch`] and
//! make them durable once; then they answer every caller. A caller is only ever answered by a
//! flush that started after its write, so an answer means durable.
//!
//! * **Claims** (webhook deliveries): made durable by [`Store::flush_claims`]. On sled that is
//!   one `fdatasync` of the ingest journal ([`super::journal`]), so the door never waits for
//!   the trees.
//! * **Runs** (the executor's `running` and final states; [`GroupCommit::durable`] waits on both
//!   lanes): [`Store::flush`] (sled's **blocking** `flush()`).
//!
//! A lane applies one batch at a time on an embedded store; on a store whose batches are
//! transactions of their own ([`Store::concurrent_batches`], PostgreSQL) it collects the next
//! batch while earlier ones are still being applied, up to that many at once. A caller of
//! [`GroupCommit::durable`] is answered only after every batch handed in before it ended.
//!
//! The lanes commit concurrently: a delivery does not wait behind run writes (on sled a run
//! write is a transaction over the run's index rows, tens of µs each; with them in one lane
//! the door measured ~6,200 deliveries/s here against ~7,600–8,000 with two; README).
//!
//! Why batching the writes, not only the flushes: sled 0.34 seals, writes and syncs
//! (`sync_file_range`, waiting) its log buffer twice for every transaction, whatever its size,
//! and transactions are serialised. One transaction per request capped ingest at the disk's
//! sync rate (~1,700 webhooks/s here, with the executor's two transactions per run on top);
//! one per batch pays that cost once for up to [`MAX_BATCH`] writes.
//!
//! sled 0.34's `flush_async` deadlocks under concurrent callers (spacejam/sled#1308): it is
//! never used.

use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, Semaphore};

use super::{BatchOutcome, BatchWrite, ClaimOutcome, Store, StoreError, StoreResult, WebhookClaim};
use crate::run::RunRecord;

/// Most writes applied in one transaction; more waiting callers go in the next batch.
pub const MAX_BATCH: usize = 512;

/// Most batches of one lane applied at once, whatever the store asks for
/// ([`Store::concurrent_batches`]).
pub const MAX_CONCURRENT_BATCHES: usize = 16;

fn to_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// A write handed to the committer; the batch hands it back with its outcome.
type Write = BatchWrite;

/// The answer to a job: its write handed back, and the write's outcome (`None` for a job that
/// only waited for durability).
type Answer = oneshot::Sender<(Option<Write>, StoreResult<Option<BatchOutcome>>)>;

/// Handle to the group-commit tasks. Cheap to clone.
#[derive(Clone)]
pub struct GroupCommit {
    claims: mpsc::UnboundedSender<(Option<Write>, Answer)>,
    runs: mpsc::UnboundedSender<(Option<Write>, Answer)>,
}

/// Which lane a batch was committed by: what makes it durable.
#[derive(Clone, Copy)]
enum Lane {
    Claims,
    Runs,
}

impl Lane {
    /// Its `lane` label on the commit metrics.
    fn label(self) -> &'static str {
        match self {
            Lane::Claims => "claims",
            Lane::Runs => "runs",
        }
    }
}

/// The receiving end of a job's answer.
type Reply = oneshot::Receiver<(Option<Write>, StoreResult<Option<BatchOutcome>>)>;

fn stopped() -> StoreError {
    StoreError::Backend("group commit stopped".into())
}

impl GroupCommit {
    /// Start the committer over `store`: per lane, one task that collects what arrived while
    /// the previous batch was being committed (while up to [`Store::concurrent_batches`] were),
    /// applies it with [`Store::write_batch`] and calls [`Store::flush`] once. It ends when the
    /// last handle is dropped. It holds the store
    /// weakly: the store closes (and releases its file lock) when its owners drop it, not
    /// whenever this task gets to run; writes handed in after that are answered "store
    /// closed". Call from inside a tokio runtime.
    pub fn start(store: Arc<dyn Store>) -> Self {
        GroupCommit {
            claims: Self::lane(&store, Lane::Claims),
            runs: Self::lane(&store, Lane::Runs),
        }
    }

    fn lane(store: &Arc<dyn Store>, lane: Lane) -> mpsc::UnboundedSender<(Option<Write>, Answer)> {
        let (tx, mut rx) = mpsc::unbounded_channel::<(Option<Write>, Answer)>();
        let limit = store.concurrent_batches().clamp(1, MAX_CONCURRENT_BATCHES);
        let store = Arc::downgrade(store);
        // One permit per batch being applied: the next batch is collected once a permit is
        // free, so with one permit (sled) a batch holds everything that arrived while the one
        // before it was committed.
        let slots = Arc::new(Semaphore::new(limit));
        tokio::spawn(async move {
            loop {
                let Ok(slot) = slots.clone().acquire_owned().await else {
                    return;
                };
                let Some(first) = rx.recv().await else {
                    return;
                };
                let mut jobs = vec![first];
                let mut writes = usize::from(jobs[0].0.is_some());
                while writes < MAX_BATCH {
                    match rx.try_recv() {
                        Ok(job) => {
                            writes += usize::from(job.0.is_some());
                            jobs.push(job);
                        }
                        Err(_) => break,
                    }
                }
                let Some(store) = store.upgrade() else {
                    for (write, answer) in jobs {
                        let closed = StoreError::Backend("the store is closed".into());
                        let _ = answer.send((write, Err(closed)));
                    }
                    continue;
                };
                // A caller waiting for durability ([`GroupCommit::durable`]) is answered only
                // after every batch handed in before it: with batches applied at once, its
                // batch first waits for all the others to end.
                let mut held = vec![slot];
                if jobs.iter().any(|(write, _)| write.is_none()) && limit > 1 {
                    match slots.clone().acquire_many_owned(to_u32(limit - 1)).await {
                        Ok(rest) => held.push(rest),
                        Err(_) => return,
                    }
                }
                tokio::spawn(async move {
                    commit(&*store, jobs, lane).await;
                    drop(store);
                    drop(held);
                });
            }
        });
        tx
    }

    /// Hand `write` (`None`: only wait for durability) to `lane`.
    fn send(
        lane: &mpsc::UnboundedSender<(Option<Write>, Answer)>,
        write: Option<Write>,
    ) -> StoreResult<Reply> {
        let (tx, rx) = oneshot::channel();
        lane.send((write, tx)).map_err(|_| stopped())?;
        Ok(rx)
    }

    async fn submit(
        &self,
        write: Option<Write>,
    ) -> StoreResult<(Option<Write>, Option<BatchOutcome>)> {
        let lane = match &write {
            Some(BatchWrite::ClaimAndEnqueue { .. }) => &self.claims,
            Some(BatchWrite::PutRun(_)) | None => &self.runs,
        };
        let (write, result) = Self::send(lane, write)?.await.map_err(|_| stopped())?;
        result.map(|outcome| (write, outcome))
    }

    /// [`super::IdempotencyStore::claim_and_enqueue`] (with `claim.claimed_at` as now), durable
    /// when this returns `Ok`. On `Err` the claim may have been written but not made durable:
    /// the caller undoes it ([`super::IdempotencyStore::release_claim`]).
    pub async fn claim_and_enqueue(
        &self,
        claim: WebhookClaim,
        run: RunRecord,
    ) -> StoreResult<ClaimOutcome> {
        self.claim_and_enqueue_run(claim, run).await.map(|(o, _)| o)
    }

    /// [`GroupCommit::claim_and_enqueue`] that hands the run back (the webhook ingest gives it
    /// to the worker that executes it, which then need not read it back).
    pub async fn claim_and_enqueue_run(
        &self,
        claim: WebhookClaim,
        run: RunRecord,
    ) -> StoreResult<(ClaimOutcome, RunRecord)> {
        match self
            .submit(Some(BatchWrite::ClaimAndEnqueue { claim, run }))
            .await?
        {
            (Some(BatchWrite::ClaimAndEnqueue { run, .. }), Some(BatchOutcome::Claim(outcome))) => {
                Ok((outcome, run))
            }
            _ => Err(StoreError::Backend(
                "claim answered without its outcome".into(),
            )),
        }
    }

    /// [`super::RunStore::put_run`], durable when this returns; gives the record back.
    pub async fn put_run(&self, run: RunRecord) -> StoreResult<RunRecord> {
        match self.submit(Some(BatchWrite::PutRun(run))).await? {
            (Some(BatchWrite::PutRun(run)), _) => Ok(run),
            _ => Err(StoreError::Backend("put answered without its run".into())),
        }
    }

    /// Wait until every write made before this call is durable (both lanes).
    pub async fn durable(&self) -> StoreResult<()> {
        let claims = Self::send(&self.claims, None)?;
        let runs = self.submit(None).await.map(|_| ());
        let claims = claims.await.map_err(|_| stopped())?.1.map(|_| ());
        runs.and(claims)
    }
}

/// Apply a batch and flush once, then answer each job: its own write's outcome if the flush
/// succeeded, else the flush's error. A batch whose backend lost its outcomes (a panic on the
/// blocking pool) answers each of its writers with an error; the committer goes on.
async fn commit(store: &dyn Store, jobs: Vec<(Option<Write>, Answer)>, lane: Lane) {
    let mut answers = Vec::with_capacity(jobs.len());
    let mut batch = Vec::new();
    for (write, answer) in jobs {
        let has = write.is_some();
        batch.extend(write);
        answers.push((has, answer));
    }
    let sent = batch.len();
    let t0 = std::time::Instant::now();
    let mut outcomes = if batch.is_empty() {
        Vec::new()
    } else {
        store.write_batch(batch).await
    }
    .into_iter();
    let lost = outcomes.len() != sent;
    let flushed = if lost {
        Err(StoreError::Backend("batch lost its outcomes".into()))
    } else {
        match lane {
            Lane::Claims => store.flush_claims().await,
            Lane::Runs => store.flush().await,
        }
    };
    crate::telemetry::commit_batch(lane.label(), sent, t0.elapsed().as_secs_f64());
    for (has, answer) in answers {
        let (write, result) = match has {
            true => match outcomes.next() {
                Some((w, r)) => (Some(w), r),
                None => (
                    None,
                    Err(StoreError::Backend("batch lost an outcome".into())),
                ),
            },
            false => (None, Ok(BatchOutcome::Put)),
        };
        let result = match (&flushed, has) {
            (Err(e), _) => Err(e.clone()),
            (Ok(()), true) => result.map(Some),
            (Ok(()), false) => Ok(None),
        };
        let _ = answer.send((write, result));
    }
}
