//! The sled store's journaled ingest: a webhook delivery's claim and queued run are made
//! durable in the [ingest journal](crate::store::journal) and applied to the trees afterwards.
//!
//! * **Accepting** ([`SledCore::write_batch`], the group commit's task): each claim is decided
//!   against the journaled claims not yet applied, then the `webhook_claims` tree (a live claim
//!   answers `Duplicate`); the accepted ones are appended to the journal in one write, and
//!   [`SledCore::flush`] syncs it once for the batch. Nothing is written to the trees, so the
//!   202 costs an append and a share of one `fdatasync`.
//! * **Applying** (one background thread, at a lower CPU priority: a burst of deliveries is
//!   accepted first and indexed when the CPU allows): synced records are written to the trees
//!   in batches ([`apply`]: the rows that do not depend on the run's state without a
//!   transaction, the rest in one short one). A run already in the trees is left alone (its
//!   worker may have stored it `running` or finished first) and a claim already holding this
//!   run means the record was applied before. Segments are deleted once applied and flushed.
//! * **Reading**: a claim or a run is looked up in the journaled state before (and a run also
//!   after) the trees, so it is never missing in between; listings and counts first wait (at
//!   most [`READ_WAIT`]) until every delivery accepted before the call is applied, so a
//!   caller sees what it was acknowledged.
//! * **Start**: records a previous process left are applied before the store is handed out.
//!
//! Under a sustained overload the journal's backlog is bounded by [`BACKLOG_MAX`]: past it the
//! ingest waits for the applier (back-pressure), so memory and disk stay bounded.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use super::{
    add_cells, apply_deltas_tx, backend, decode, expiry_row, index_rows, pair, Deltas,
    PreparedClaim, PreparedRun, SledCore, BY_FINISH, BY_STATUS, BY_WORKFLOW_STATUS, CLAIMS,
    CLAIMS_EXPIRY, RUNS, RUN_TREES, RUN_VALUES, SUMMARIES,
};
use crate::store::journal::{Entry, Journal, JournalError, Leftover};
use crate::store::{ClaimOutcome, RunSummary, StoreError, StoreResult, WebhookClaim};

/// Longest a listing or count waits for the deliveries accepted before it to be applied
/// (a burst's backlog); after it, it answers from what is applied.
pub(super) const READ_WAIT: Duration = Duration::from_secs(2);

/// Most accepted deliveries waiting to be applied; past it the ingest waits (back-pressure).
/// ~7 KB of journal each for a 6 KB body: ~350 MB of disk, a few MB of memory.
pub(super) const BACKLOG_MAX: usize = 50_000;

/// Records written to the trees per transaction by the applier.
const APPLY_BATCH: usize = 64;

/// The applier flushes the trees and releases applied segments at least this often while it
/// has work.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// Nice value of the applier thread (Linux `setpriority` on the thread: 0 is normal, 19 the
/// lowest). 10 gives it about a tenth of a contended core.
const APPLIER_NICE: i32 = 10;

/// The journal and what it holds that the trees do not have yet.
pub(super) struct Ingest {
    journal: Journal,
    state: Mutex<State>,
    /// Signalled when records are synced (the applier waits) and when some are applied
    /// (readers and a back-pressured ingest wait).
    changed: Condvar,
}

#[derive(Default)]
struct State {
    /// Journaled claims not yet applied, by claim key (`workflow 0x00 key`).
    claims: HashMap<Vec<u8>, WebhookClaim>,
    /// Journaled runs not yet applied: run id → its record.
    runs: HashMap<String, Entry>,
    /// Synced records waiting for the applier, in order.
    queue: VecDeque<Entry>,
    /// Runs whose claim was released ([`SledCore::release_claim`]) before being applied.
    void: HashSet<String>,
    /// Highest sequence number synced; highest applied (or skipped).
    synced: u64,
    applied: u64,
}

impl Ingest {
    /// Open the journal in `dir`; the records a previous process left are applied by
    /// [`replay`] once the store is built.
    pub(super) fn open(dir: &std::path::Path) -> StoreResult<(Arc<Ingest>, Leftover)> {
        let (journal, leftover) = Journal::open(dir).map_err(journal_error)?;
        let ingest = Ingest {
            journal,
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        };
        Ok((Arc::new(ingest), leftover))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The journaled claim of `key` not yet applied, if live at `now_ms`.
    pub(super) fn live_claim(&self, key: &[u8], now_ms: i64) -> Option<WebhookClaim> {
        live(&self.lock(), key, now_ms)
    }

    /// Decide `claims` (claim key, prepared claim) against the journaled claims and then the
    /// trees, journal the accepted ones with one append; an outcome per claim. `tree_claim`
    /// reads the trees' live claim of a key. Waits first while the backlog is full.
    pub(super) fn accept(
        &self,
        claims: &[&PreparedClaim],
        tree_claim: impl Fn(&[u8], i64) -> StoreResult<Option<String>>,
    ) -> Vec<StoreResult<ClaimOutcome>> {
        let mut state = self.lock();
        while state.runs.len() >= BACKLOG_MAX {
            state = self
                .changed
                .wait_timeout(state, Duration::from_millis(100))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let mut out: Vec<Option<StoreResult<ClaimOutcome>>> = Vec::with_capacity(claims.len());
        let mut payloads = Vec::new();
        let mut accepted = Vec::new();
        for (i, c) in claims.iter().enumerate() {
            if let Some(old) = live(&state, &c.key, c.claim.claimed_at) {
                out.push(Some(Ok(ClaimOutcome::Duplicate { run_id: old.run_id })));
                continue;
            }
            match tree_claim(&c.key, c.claim.claimed_at) {
                Ok(Some(run_id)) => out.push(Some(Ok(ClaimOutcome::Duplicate { run_id }))),
                Err(e) => out.push(Some(Err(e))),
                Ok(None) => {
                    state.claims.insert(c.key.clone(), c.claim.clone());
                    payloads.push(encode_record(c));
                    accepted.push(i);
                    out.push(None);
                }
            }
        }
        if !payloads.is_empty() {
            match self.journal.append(&payloads) {
                Ok(entries) => {
                    for (&i, e) in accepted.iter().zip(entries) {
                        state.runs.insert(claims[i].run.id.clone(), e);
                        out[i] = Some(Ok(ClaimOutcome::Claimed));
                    }
                }
                Err(e) => {
                    for &i in &accepted {
                        state.claims.remove(&claims[i].key);
                        out[i] = Some(Err(journal_error(e.clone())));
                    }
                }
            }
        }
        out.into_iter()
            .map(|o| o.unwrap_or_else(|| Err(backend("claim lost its outcome"))))
            .collect()
    }

    /// Make every journaled record durable and hand it to the applier.
    pub(super) fn sync(&self) -> StoreResult<()> {
        let entries = self.journal.sync().map_err(journal_error)?;
        if let Some(last) = entries.last() {
            let mut state = self.lock();
            state.synced = last.seq;
            state.queue.extend(entries);
            drop(state);
            self.changed.notify_all();
        }
        Ok(())
    }

    /// The journaled run `id` not yet applied, if any.
    pub(super) fn run(&self, id: &str) -> StoreResult<Option<crate::run::RunRecord>> {
        let Some(entry) = self.lock().runs.get(id).copied() else {
            return Ok(None);
        };
        let payload = self.journal.read(&entry).map_err(journal_error)?;
        let c = decode_record(&payload)?;
        super::decode_run(&c.run.json).map(Some)
    }

    /// Wait (at most [`READ_WAIT`]) until every record appended before this call is applied
    /// (syncing first what is appended and not yet synced, so the applier may take it: a
    /// batch written and not yet flushed is read like the trees' own unflushed writes).
    pub(super) fn settle(&self) {
        if let Err(e) = self.sync() {
            tracing::warn!(error = %e, "a listing could not sync the ingest journal");
        }
        let deadline = Instant::now() + READ_WAIT;
        let mut state = self.lock();
        let target = state.synced;
        while state.applied < target {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::debug!(
                    waiting = state.queue.len(),
                    "a listing answers before the ingest journal's backlog is applied"
                );
                return;
            }
            state = self
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Forget the journaled claim of `key` if it holds `run_id` (its delivery was not
    /// acknowledged): the applier skips its record. `true` when there was one.
    pub(super) fn release(&self, key: &[u8], run_id: &str) -> bool {
        let mut state = self.lock();
        if state.claims.get(key).is_some_and(|c| c.run_id == run_id) {
            state.claims.remove(key);
            state.runs.remove(run_id);
            state.void.insert(run_id.to_string());
            true
        } else {
            false
        }
    }
}

/// Apply the records a previous process left in the journal, make them durable in the trees
/// and delete their segments (before the store is handed out: no other writer runs).
pub(super) fn replay(core: &SledCore, leftover: Leftover) -> StoreResult<()> {
    if leftover.segments() == 0 {
        return Ok(());
    }
    let t0 = Instant::now();
    let mut batch: Vec<PreparedClaim> = Vec::new();
    let mut unreadable = 0usize;
    let n = leftover
        .for_each(|payload| {
            match decode_record(&payload) {
                Ok(c) => batch.push(c),
                Err(e) => {
                    unreadable += 1;
                    tracing::error!(error = %e, "ingest journal: a record that cannot be read is skipped");
                }
            }
            if batch.len() >= APPLY_BATCH {
                apply(core, &std::mem::take(&mut batch)).map_err(|e| JournalError(e.to_string()))?;
            }
            Ok(())
        })
        .map_err(journal_error)?;
    apply(core, &batch)?;
    core.db.flush().map_err(backend)?;
    leftover.remove().map_err(journal_error)?;
    if n > 0 {
        tracing::info!(
            records = n,
            unreadable,
            ms = t0.elapsed().as_millis() as u64,
            "applied the deliveries a previous process left in the ingest journal"
        );
    }
    Ok(())
}

/// Under the ingest's lock: the journaled claim of `key` live at `now_ms`, if any, then `f`
/// (a direct claim decides and writes inside `f`, so a batch cannot decide the same key
/// meanwhile).
pub(super) fn with_claim_lock<T>(
    ingest: &Ingest,
    key: &[u8],
    now_ms: i64,
    f: impl FnOnce(Option<WebhookClaim>) -> T,
) -> T {
    let state = ingest.lock();
    let found = live(&state, key, now_ms);
    let out = f(found);
    drop(state);
    out
}

fn live(state: &State, key: &[u8], now_ms: i64) -> Option<WebhookClaim> {
    state
        .claims
        .get(key)
        .filter(|c| c.expires_at > now_ms)
        .cloned()
}

/// Start the applier thread of `core`'s journal. It holds the store weakly (only while
/// applying or flushing does it hold it, so a dropped store closes and releases its lock) and
/// ends once the store is dropped.
pub(super) fn spawn_applier(core: &Arc<SledCore>) {
    let weak: Weak<SledCore> = Arc::downgrade(core);
    let ingest = core.ingest.clone();
    let spawned = std::thread::Builder::new()
        .name("fluxo-journal-apply".into())
        .spawn(move || {
            crate::store::lower_thread_priority(APPLIER_NICE);
            let mut last_flush = Instant::now();
            let mut unflushed: Option<u64> = None;
            loop {
                let batch: Vec<Entry> = {
                    let mut state = ingest.lock();
                    if state.queue.is_empty() && unflushed.is_none() {
                        state = ingest
                            .changed
                            .wait_timeout(state, Duration::from_millis(250))
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                    }
                    let n = state.queue.len().min(APPLY_BATCH);
                    state.queue.drain(..n).collect()
                };
                let Some(core) = weak.upgrade() else { return };
                if !batch.is_empty() {
                    // A panic (a bug in the store) must not end the thread: the door would
                    // wait on a backlog nobody applies. It is retried like an error.
                    let applied = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        apply_entries(&core, &batch)
                    }))
                    .unwrap_or_else(|_| Err(backend("applying records panicked")));
                    if let Err(e) = applied {
                        tracing::error!(error = %e, "ingest journal: applying records failed; retrying in 1 s");
                        let mut state = ingest.lock();
                        for e in batch.into_iter().rev() {
                            state.queue.push_front(e);
                        }
                        drop(state);
                        drop(core);
                        std::thread::sleep(Duration::from_secs(1));
                        continue;
                    }
                    unflushed = batch.last().map(|e| e.seq);
                }
                let idle = ingest.lock().queue.is_empty();
                if let Some(seq) = unflushed {
                    if idle || last_flush.elapsed() >= FLUSH_EVERY {
                        match core.db.flush() {
                            Ok(_) => {
                                if let Err(e) = ingest.journal.release_through(seq) {
                                    tracing::warn!(error = %e, "ingest journal: a segment could not be removed");
                                }
                                unflushed = None;
                                last_flush = Instant::now();
                            }
                            Err(e) => {
                                tracing::error!(error = %e, "ingest journal: flushing applied records failed; retrying")
                            }
                        }
                    }
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "ingest journal: the applier thread could not start");
    }
}

/// Apply the records `entries` (read back from the journal), then forget them.
fn apply_entries(core: &SledCore, entries: &[Entry]) -> StoreResult<()> {
    let ingest = &core.ingest;
    let mut claims = Vec::with_capacity(entries.len());
    for e in entries {
        let payload = ingest.journal.read(e).map_err(journal_error)?;
        match decode_record(&payload) {
            Ok(c) => claims.push(c),
            // Its checksum matched, so this is a bug, not the disk: retrying cannot help and
            // would hold every later record. Its unapplied state stays in memory (its claim
            // still answers duplicates) until the process restarts.
            Err(err) => tracing::error!(
                seq = e.seq,
                error = %err,
                "ingest journal: a record that cannot be read is skipped"
            ),
        }
    }
    {
        let mut state = ingest.lock();
        claims.retain(|c| !state.void.remove(&c.run.id));
    }
    apply(core, &claims)?;
    let mut state = ingest.lock();
    for c in &claims {
        if state
            .claims
            .get(&c.key)
            .is_some_and(|k| k.run_id == c.run.id)
        {
            state.claims.remove(&c.key);
        }
        state.runs.remove(&c.run.id);
    }
    if let Some(last) = entries.last() {
        state.applied = last.seq;
    }
    drop(state);
    ingest.changed.notify_all();
    Ok(())
}

/// Write journaled claims and their runs to the trees.
///
/// sled 0.34 takes one process-wide lock for every transaction, and every plain read or
/// write waits while one runs: a transaction over a whole batch of runs (~16 rows each) held
/// the ingest's own claim reads for tens of ms and capped it near 4,800 deliveries/s. So the
/// rows that are the same whatever the run's state (the claim, the time, workflow, key and
/// value index rows) are written first without a transaction, and only what decides (is the
/// run already stored?) and depends on the state (the record, its summary and values, the
/// status index rows, the count aggregates) is one short transaction. Both parts are
/// idempotent: after a crash between them, the record is applied again whole.
fn apply(core: &SledCore, claims: &[PreparedClaim]) -> StoreResult<()> {
    if claims.is_empty() {
        return Ok(());
    }
    let mut todo = Vec::with_capacity(claims.len());
    for c in claims {
        if write_claim(core, c)? {
            todo.push(c);
        }
    }
    for c in &todo {
        for (tree, key, value) in c.run.index.iter().filter(|r| !state_row(r.0)) {
            core.tree(*tree)
                .insert(key.as_slice(), value.as_slice())
                .map_err(backend)?;
        }
    }
    core.tx(RUN_TREES, |v| {
        let mut deltas = Deltas::new();
        for c in &todo {
            if v[SUMMARIES].get(c.run.id.as_bytes())?.is_some() {
                // Its worker stored it first (running or finished): left as it is.
                continue;
            }
            for (tree, key, value) in c.run.index.iter().filter(|r| state_row(r.0)) {
                v[*tree].insert(key.as_slice(), value.as_slice())?;
            }
            v[RUNS].insert(c.run.id.as_bytes(), c.run.json.as_slice())?;
            v[SUMMARIES].insert(c.run.id.as_bytes(), c.run.summary_json.as_slice())?;
            if let Some(j) = &c.run.values_json {
                v[RUN_VALUES].insert(c.run.id.as_bytes(), j.as_slice())?;
            }
            add_cells(&mut deltas, &c.run.summary, 1);
        }
        apply_deltas_tx(v, &deltas)
    })
}

/// Index trees whose rows depend on a run's state (its status, or its end).
fn state_row(tree: usize) -> bool {
    matches!(tree, BY_STATUS | BY_WORKFLOW_STATUS | BY_FINISH)
}

/// Write the claim of a journaled record (outside a transaction); `false` when the record is
/// not to be applied: a live claim of another run holds the key (cannot happen: the ingest
/// decided against it; kept if it does).
///
/// An expired claim of the key is replaced (its expiry row goes). A claim already holding
/// this run is left (a record applied before). The sweeper's removal of an expired claim
/// re-checks the stored claim in its own transaction, so it cannot remove this one.
fn write_claim(core: &SledCore, c: &PreparedClaim) -> StoreResult<bool> {
    let claims = core.tree(CLAIMS);
    if let Some(b) = claims.get(&c.key).map_err(backend)? {
        let old: WebhookClaim = decode("webhook claim", &b)?;
        if old.run_id == c.run.id {
            return Ok(true);
        }
        if old.expires_at > c.claim.claimed_at {
            tracing::warn!(
                run_id = %c.run.id,
                other = %old.run_id,
                "ingest journal: a record whose key another run holds is not applied"
            );
            return Ok(false);
        }
        core.tree(CLAIMS_EXPIRY)
            .remove(expiry_row(old.expires_at, &c.key))
            .map_err(backend)?;
    }
    core.tree(CLAIMS_EXPIRY)
        .insert(expiry_row(c.claim.expires_at, &c.key), &[][..])
        .map_err(backend)?;
    claims
        .insert(c.key.as_slice(), c.json.as_slice())
        .map_err(backend)?;
    Ok(true)
}

/// A journal record: the prepared claim's serialised parts, each `u32 LE` length-prefixed:
/// the claim, the run (as stored in `runs`), its summary, its indexed values (empty: none).
fn encode_record(c: &PreparedClaim) -> Vec<u8> {
    let values: &[u8] = c.run.values_json.as_deref().unwrap_or(&[]);
    let parts: [&[u8]; 4] = [&c.json, &c.run.json, &c.run.summary_json, values];
    let mut out = Vec::with_capacity(parts.iter().map(|p| p.len() + 4).sum());
    for p in parts {
        out.extend_from_slice(&(p.len() as u32).to_le_bytes());
        out.extend_from_slice(p);
    }
    out
}

fn decode_record(b: &[u8]) -> StoreResult<PreparedClaim> {
    let bad = || backend("ingest journal: a malformed record");
    let mut parts: Vec<Vec<u8>> = Vec::with_capacity(4);
    let mut at = 0usize;
    for _ in 0..4 {
        let len_bytes = b.get(at..at + 4).ok_or_else(bad)?;
        let len = u32::from_le_bytes(len_bytes.try_into().map_err(|_| bad())?) as usize;
        let part = b.get(at + 4..at + 4 + len).ok_or_else(bad)?;
        parts.push(part.to_vec());
        at += 4 + len;
    }
    let values_json = parts.pop().filter(|v| !v.is_empty());
    let summary_json = parts.pop().ok_or_else(bad)?;
    let run_json = parts.pop().ok_or_else(bad)?;
    let claim_json = parts.pop().ok_or_else(bad)?;
    let claim: WebhookClaim = decode("webhook claim", &claim_json)?;
    let summary: RunSummary = decode("run summary", &summary_json)?;
    let values: Vec<String> = match &values_json {
        Some(v) => decode("run values", v)?,
        None => Vec::new(),
    };
    Ok(PreparedClaim {
        key: pair(&claim.workflow_id, &claim.key),
        claim,
        json: claim_json,
        run: PreparedRun {
            id: summary.id.clone(),
            index: index_rows(&summary, &values),
            summary,
            json: run_json,
            summary_json,
            values_json,
        },
    })
}

fn journal_error(e: JournalError) -> StoreError {
    StoreError::Backend(e.0)
}

#[cfg(test)]
mod tests {
    use super::super::{SledConfig, JOURNAL_DIR};
    use super::*;
    use crate::run::{Mode, RunRecord, RunStatus, Timestamp, Trigger};
    use crate::store::{BatchOutcome, BatchWrite};

    const T0: i64 = 1_767_225_600_000;

    fn run(id: &str, status: RunStatus) -> RunRecord {
        serde_json::from_value(serde_json::json!({
            "id": id, "workflow_id": "wf", "workflow_version": 1, "definition_hash": "h",
            "trigger": Trigger::Webhook, "mode": Mode::Live, "status": status,
            "input": {"customer": "cus_0001"}, "created_at": Timestamp(T0),
            "idempotency_key": id,
        }))
        .expect("a run record")
    }

    fn delivery(key: &str, run_id: &str) -> BatchWrite {
        BatchWrite::ClaimAndEnqueue {
            claim: WebhookClaim {
                workflow_id: "wf".into(),
                key: key.into(),
                run_id: run_id.into(),
                claimed_at: T0,
                expires_at: T0 + 60_000,
            },
            run: run(run_id, RunStatus::Queued),
        }
    }

    /// The synced records the applier would take, applied here (no applier thread runs in
    /// these tests: `SledCore::open` does not start one).
    fn apply_queued(core: &SledCore) {
        let entries: Vec<Entry> = core.ingest.lock().queue.drain(..).collect();
        apply_entries(core, &entries).unwrap();
    }

    fn outcomes(core: &SledCore, writes: &[BatchWrite]) -> Vec<BatchOutcome> {
        core.write_batch(writes)
            .into_iter()
            .map(|o| o.unwrap())
            .collect()
    }

    /// A store (no applier thread) holding delivery `k1` → run `r1`, synced, not applied.
    fn one_synced_delivery() -> (tempfile::TempDir, SledCore) {
        let dir = tempfile::tempdir().unwrap();
        let core = SledCore::open(&SledConfig::new(dir.path())).unwrap();
        outcomes(&core, &[delivery("k1", "r1")]);
        core.flush().unwrap();
        (dir, core)
    }

    fn status_rows(core: &SledCore) -> usize {
        core.tree(BY_STATUS).len()
    }

    #[test]
    fn an_accepted_delivery_is_read_before_it_is_applied_and_decides_later_copies() {
        let dir = tempfile::tempdir().unwrap();
        let core = SledCore::open(&SledConfig::new(dir.path())).unwrap();
        let out = outcomes(&core, &[delivery("k1", "r1"), delivery("k1", "r2")]);
        assert_eq!(
            out,
            [
                BatchOutcome::Claim(ClaimOutcome::Claimed),
                BatchOutcome::Claim(ClaimOutcome::Duplicate {
                    run_id: "r1".into()
                })
            ],
            "the second copy in the same batch names the first"
        );
        core.flush().unwrap();
        // Not in the trees yet, but read through the journal.
        assert_eq!(core.tree(CLAIMS).len(), 0);
        assert_eq!(
            core.get_claim("wf", "k1", T0).unwrap().unwrap().run_id,
            "r1"
        );
        assert_eq!(
            core.get_run("r1").unwrap().unwrap().status,
            RunStatus::Queued
        );
        assert!(core.get_run("r2").unwrap().is_none());
        // A later batch and a direct claim both see the journaled claim.
        let out = outcomes(&core, &[delivery("k1", "r3")]);
        assert_eq!(
            out,
            [BatchOutcome::Claim(ClaimOutcome::Duplicate {
                run_id: "r1".into()
            })]
        );
        let direct = PreparedClaim::new(
            &WebhookClaim {
                workflow_id: "wf".into(),
                key: "k1".into(),
                run_id: "r4".into(),
                claimed_at: T0,
                expires_at: T0 + 60_000,
            },
            &run("r4", RunStatus::Queued),
        )
        .unwrap();
        assert_eq!(
            core.claim_prepared(&direct, T0).unwrap(),
            ClaimOutcome::Duplicate {
                run_id: "r1".into()
            }
        );
        apply_queued(&core);
        assert_eq!(core.tree(CLAIMS).len(), 1);
        assert_eq!(core.tree(SUMMARIES).len(), 1);
        assert!(core.ingest.lock().runs.is_empty(), "forgotten once applied");
        assert_eq!(
            core.get_run("r1").unwrap().unwrap().status,
            RunStatus::Queued
        );
        assert_eq!(core.run_ids_with_status(RunStatus::Queued).unwrap(), ["r1"]);
    }

    #[test]
    fn records_a_process_left_are_applied_when_the_store_opens() {
        let dir = tempfile::tempdir().unwrap();
        {
            let core = SledCore::open(&SledConfig::new(dir.path())).unwrap();
            outcomes(&core, &[delivery("k1", "r1"), delivery("k2", "r2")]);
            core.flush().unwrap();
            // Dropped with nothing applied: a process killed before its applier ran.
        }
        let core = SledCore::open(&SledConfig::new(dir.path())).unwrap();
        assert!(core.ingest.lock().runs.is_empty());
        assert_eq!(core.tree(CLAIMS).len(), 2);
        let mut queued = core.run_ids_with_status(RunStatus::Queued).unwrap();
        queued.sort();
        assert_eq!(queued, ["r1", "r2"]);
        let segments = std::fs::read_dir(dir.path().join(JOURNAL_DIR))
            .unwrap()
            .count();
        assert_eq!(
            segments, 1,
            "the applied segment is gone, a fresh one is open"
        );
        // Applying again (a crash after applying, before the segment was removed) changes
        // nothing.
        let again = PreparedClaim::new(
            &WebhookClaim {
                workflow_id: "wf".into(),
                key: "k1".into(),
                run_id: "r1".into(),
                claimed_at: T0,
                expires_at: T0 + 60_000,
            },
            &run("r1", RunStatus::Queued),
        )
        .unwrap();
        let rows = status_rows(&core);
        core.put_prepared(&PreparedRun::new(&run("r1", RunStatus::Succeeded)).unwrap())
            .unwrap();
        apply(&core, &[again]).unwrap();
        assert_eq!(
            core.get_run("r1").unwrap().unwrap().status,
            RunStatus::Succeeded
        );
        assert_eq!(status_rows(&core), rows);
    }

    #[test]
    fn a_run_its_worker_stored_first_is_not_put_back_to_queued() {
        let (_dir, core) = one_synced_delivery();
        let mut done = run("r1", RunStatus::Succeeded);
        done.finished_at = Some(Timestamp(T0 + 5));
        outcomes(&core, &[BatchWrite::PutRun(done)]);
        apply_queued(&core);
        assert_eq!(
            core.get_run("r1").unwrap().unwrap().status,
            RunStatus::Succeeded
        );
        assert_eq!(
            core.get_claim("wf", "k1", T0).unwrap().unwrap().run_id,
            "r1"
        );
        assert!(core
            .run_ids_with_status(RunStatus::Queued)
            .unwrap()
            .is_empty());
        assert_eq!(
            core.run_ids_with_status(RunStatus::Succeeded).unwrap(),
            ["r1"]
        );
    }

    #[test]
    fn a_released_claim_is_not_applied_and_its_key_is_free_again() {
        let (_dir, core) = one_synced_delivery();
        assert!(core.release_claim("wf", "k1", "r1").unwrap());
        assert!(core.get_claim("wf", "k1", T0).unwrap().is_none());
        assert!(core.get_run("r1").unwrap().is_none());
        apply_queued(&core);
        assert_eq!(core.tree(CLAIMS).len(), 0);
        assert!(core.get_run("r1").unwrap().is_none());
        let out = outcomes(&core, &[delivery("k1", "r2")]);
        assert_eq!(out, [BatchOutcome::Claim(ClaimOutcome::Claimed)]);
    }
}
