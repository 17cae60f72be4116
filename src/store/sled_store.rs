//! sled backend: embedded, durable, the default.
//!
//! # Layout
//!
//! Every value is JSON. `ts` below is an instant (UTC unix ms) encoded in 8 bytes so that byte
//! order is time order: the `i64` with its sign bit flipped, big-endian. Namespaces, workflow
//! ids, API scopes and idempotency keys never contain a NUL byte (checked on write), so each
//! `a 0x00 b` prefix is unambiguous.
//!
//! | tree | key | value |
//! |---|---|---|
//! | `memory` | namespace 0x00 key | [`MemoryEntry`] |
//! | `memory_expiry` | ts(expires_at) namespace 0x00 key | empty |
//! | `runs` | run id | [`RunRecord`], LZ4-compressed (marker byte `0x01`, then `lz4_flex`'s size-prepended block; plain JSON still reads) |
//! | `run_summaries` | run id | [`RunSummary`] (small, for listings) |
//! | `runs_by_created` | ts(created_at) id | empty (older stores: the status) |
//! | `runs_by_workflow` | workflow 0x00 ts(created_at) id | empty (likewise) |
//! | `runs_by_status` | status 0x00 ts(created_at) id | empty |
//! | `runs_by_workflow_status` | workflow 0x00 status 0x00 ts(created_at) id | empty |
//! | `runs_by_key` | idempotency key 0x00 ts(created_at) id | empty |
//! | `runs_by_finish` | workflow 0x00 ts(finished_at) id (finished runs only) | empty |
//! | `runs_by_value` | value 0x00 ts(created_at) id (the free search's values, [`super::SEARCH_VALUES_MAX`]) | empty |
//! | `run_values` | run id | the run's indexed values, a JSON array (absent when none) |
//! | `run_counts` | unit 0x00… see below | a counter: runs (u64) and their duration histogram |
//! | `webhook_claims` | workflow 0x00 key | [`WebhookClaim`] |
//! | `webhook_claims_expiry` | ts(expires_at) workflow 0x00 key | empty |
//! | `api_records` | scope 0x00 key | [`ApiRecord`] |
//! | `api_records_expiry` | ts(expires_at) scope 0x00 key | empty |
//!
//! Listing indexes carry `created_at` before the id, so every listing is newest first by
//! `(created_at, id)` and `since`/`until` bound the scanned key range directly, whatever the id
//! format. (UUIDv7 ids are stamped from a process-wide monotonic context, so their embedded time
//! can run ahead of `created_at`; the index does not rely on it.) Their values are empty, so a
//! run's status change rewrites only `runs_by_status`/`runs_by_workflow_status` (counts come
//! from the count aggregates below, not from these rows).
//!
//! # Count aggregates (`run_counts`, [`super::counts`])
//!
//! A counter per cell: key `level kind ts(unit start) status 0x00 workflow 0x00 mode 0x00
//! trigger`, with `level` `d`/`h`/`m` (a UTC day, hour, minute) and `kind` `c`; value: the runs
//! created in the unit (u64, big-endian), then the duration histogram of the finished ones as
//! `(bin u16, count u64)` pairs, big-endian, bins ascending ([`super::DurationHistogram`]).
//! Kind `r` is the same rolled up over mode and trigger (key `level r ts status 0x00
//! workflow`): what a count without a mode or trigger filter reads, a few times fewer rows. A
//! failed run also counts in a kind `f` cell whose key goes on with `0x00 failure reason`
//! (value: the u64 alone). A counter that falls to zero is removed. Every change of a run's
//! summary (insert, status change, deletion by retention or a released claim) moves its cells
//! in the same transaction. Kind `s` counts the steps of finished runs, one cell per step:
//! key `level s workflow 0x00 ts status 0x00 mode 0x00 trigger 0x00 step` (the workflow
//! first: they are read for one workflow), value as kind `c` (step executions, their
//! durations), from [`RunSummary::step_durations`], so retention takes back what the run
//! added. The key `0x00 built` marks counters complete: a store written by an
//! older version has none, and they are built from the summaries when it is opened (runs stored
//! before the value index `runs_by_value` existed get their value rows in the same pass).
//! Downgrading is not supported: a store written by an older version *after* this one drops its
//! counters' accuracy (remove the `run_counts` tree to rebuild them).
//!
//! # Atomicity
//!
//! Every change that touches a record and its index rows is one sled transaction (sled 0.34
//! serialises transactions, so read-check-write inside one is atomic): a Memory claim, a run
//! and all its index rows, a direct webhook claim together with its queued run. Only the
//! blocking `sled::Db::flush` is used for durability; `flush_async` deadlocks under concurrent
//! callers in sled 0.34 (spacejam/sled#1308).
//!
//! # The ingest journal
//!
//! The group commit's webhook claims ([`Store::write_batch`]) are not written to the trees
//! before the 202: they are appended to the ingest journal in `<store>/ingest-journal/`
//! ([`super::journal`]) and applied afterwards by a background thread (`sled_store/ingest.rs`, which says
//! how reads, crashes and back-pressure are handled). The journal holds the delivery's body:
//! its folder and files are owner-only like the rest of the store.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::{Bound, Range};
use std::path::PathBuf;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use sled::transaction::{
    ConflictableTransactionError, ConflictableTransactionResult, TransactionError,
    TransactionalTree,
};
use sled::{Transactional, Tree};

use super::common::{self, page, ApiDecision, Cursor, Position};
use super::{
    ApiBegin, ApiRecord, ApiRecordState, BatchOutcome, BatchWrite, ClaimOutcome, IdempotencyStore,
    MemoryEntry, MemoryStore, Retention, RunPage, RunQuery, RunStore, RunSummary, Store,
    StoreError, StoreResult, WebhookClaim, WriteOptions, WriteResult,
};
use crate::run::{RunRecord, RunStatus};

mod ingest;

/// How to open a [`SledStore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SledConfig {
    /// Directory of the database (created if missing).
    pub path: PathBuf,
    /// sled's page cache, in bytes. sled's own default (1 GiB) drove RSS to 470–645 MB under
    /// load; [`SledConfig::new`] sets 16 MiB (peak RSS of `fluxo serve` under the ingest load
    /// benchmark is about 110 MB + this; see README, "Benchmarks").
    pub cache_capacity_bytes: u64,
    /// Period of sled's background flush, in milliseconds; `None` = only explicit
    /// [`Store::flush`] calls make writes durable.
    pub flush_every_ms: Option<u64>,
}

impl SledConfig {
    /// Default cache capacity: 16 MiB.
    pub const DEFAULT_CACHE_CAPACITY_BYTES: u64 = 16 * 1024 * 1024;

    /// `path` with the defaults: 16 MiB cache, background flush every 500 ms (sled's default).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        SledConfig {
            path: path.into(),
            cache_capacity_bytes: Self::DEFAULT_CACHE_CAPACITY_BYTES,
            flush_every_ms: Some(500),
        }
    }
}

// Tree numbers: positions in `SledStore::trees` and in every transaction's view.
const MEMORY: usize = 0;
const MEMORY_EXPIRY: usize = 1;
const RUNS: usize = 2;
const SUMMARIES: usize = 3;
const BY_CREATED: usize = 4;
const BY_WORKFLOW: usize = 5;
const BY_STATUS: usize = 6;
const BY_WORKFLOW_STATUS: usize = 7;
const BY_KEY: usize = 8;
const BY_FINISH: usize = 9;
const BY_VALUE: usize = 10;
const RUN_VALUES: usize = 11;
const COUNTS: usize = 12;
const CLAIMS: usize = 13;
const CLAIMS_EXPIRY: usize = 14;
const API: usize = 15;
const API_EXPIRY: usize = 16;

const TREE_NAMES: [&str; 17] = [
    "memory",
    "memory_expiry",
    "runs",
    "run_summaries",
    "runs_by_created",
    "runs_by_workflow",
    "runs_by_status",
    "runs_by_workflow_status",
    "runs_by_key",
    "runs_by_finish",
    "runs_by_value",
    "run_values",
    "run_counts",
    "webhook_claims",
    "webhook_claims_expiry",
    "api_records",
    "api_records_expiry",
];

/// The ingest journal's folder inside the store's ([`super::journal`]).
pub const JOURNAL_DIR: &str = "ingest-journal";

/// Rows handled per transaction when sweeping or pruning.
const BATCH: usize = 256;

/// A free search (`q`) first collects the runs whose id or key starts with it; if there are
/// more than this many, it scans the time-ordered index instead (matches are then common).
const Q_CANDIDATES_MAX: usize = 500;

/// The sled-backed [`Store`].
/// The sled database and its trees, used synchronously (on blocking threads) by
/// [`SledStore`].
struct SledCore {
    db: sled::Db,
    trees: Vec<Tree>,
    /// The ingest journal: accepted webhook deliveries not yet in the trees ([`ingest`]).
    ingest: Arc<ingest::Ingest>,
}

/// The async handle: every call runs on tokio's blocking pool (sled blocks on its log and
/// page cache). Cheap to clone.
#[derive(Clone)]
pub struct SledStore {
    core: Arc<SledCore>,
}

impl std::fmt::Debug for SledStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SledStore").finish_non_exhaustive()
    }
}

type Tx<A> = ConflictableTransactionResult<A, StoreError>;

/// Trees of the Memory store.
const MEMORY_TREES: Range<usize> = MEMORY..MEMORY_EXPIRY + 1;
/// Trees of a run and its indexes.
const RUN_TREES: Range<usize> = RUNS..COUNTS + 1;
/// Trees of a webhook claim together with its run.
const CLAIM_TREES: Range<usize> = RUNS..CLAIMS_EXPIRY + 1;
/// Trees of the API idempotency records.
const API_TREES: Range<usize> = API..API_EXPIRY + 1;

/// The trees of one transaction, indexed by the absolute tree numbers above.
struct View<'a> {
    trees: &'a [TransactionalTree],
    first: usize,
}

impl std::ops::Index<usize> for View<'_> {
    type Output = TransactionalTree;
    fn index(&self, tree: usize) -> &TransactionalTree {
        // Tree numbers are constants and every transaction names the group it touches, so
        // this cannot go out of range whatever the stored data.
        &self.trees[tree - self.first]
    }
}

impl SledStore {
    /// Open (or create) the database described by `config`.
    ///
    /// A lock held by another handle is retried for up to 1 s. Held
    /// longer (another process, e.g. `fluxo serve`), the error names the lock.
    pub fn open(config: &SledConfig) -> StoreResult<Self> {
        let core = Arc::new(SledCore::open(config)?);
        ingest::spawn_applier(&core);
        Ok(SledStore { core })
    }

    /// Open (or create) the database at `path` with the default configuration.
    pub fn open_path(path: impl Into<PathBuf>) -> StoreResult<Self> {
        Self::open(&SledConfig::new(path))
    }

    /// Run `f` over the database on tokio's blocking pool.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&SledCore) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        let core = self.core.clone();
        tokio::task::spawn_blocking(move || f(&core))
            .await
            .map_err(|e| StoreError::Backend(format!("store task failed: {e}")))?
    }
}

impl SledCore {
    /// Open (or create) the database described by `config`.
    ///
    /// A lock held by another handle is retried for up to 1 s: a handle dropped a moment ago
    /// in this process keeps the lock until sled's background threads (flusher, log writers)
    /// let go of it. Held longer (another process, e.g. `fluxo serve`), the error names the
    /// lock.
    ///
    /// The store's folder is created 0700; sled's files (created with the umask's modes) are
    /// made 0600 and its folders 0700 after opening, and a store an older version left
    /// readable by others is tightened first, with a log line ([`crate::secrets`]).
    fn open(config: &SledConfig) -> StoreResult<Self> {
        let secure = |log: bool| {
            crate::secrets::secure_tree(&config.path)
                .map(|n| {
                    if log && n > 0 {
                        tracing::warn!(
                            path = %config.path.display(),
                            paths = n,
                            "the store was readable by other users: tightened to owner-only \
                             (folders 0700, files 0600)"
                        );
                    }
                })
                .map_err(|e| {
                    StoreError::Backend(format!(
                        "cannot make the store {} owner-only: {e}",
                        config.path.display()
                    ))
                })
        };
        if config.path.exists() {
            secure(true)?;
        } else {
            crate::secrets::secure_dir(&config.path).map_err(|e| {
                StoreError::Backend(format!(
                    "cannot create the store {}: {e}",
                    config.path.display()
                ))
            })?;
        }
        let open = || {
            sled::Config::new()
                .path(&config.path)
                .cache_capacity(config.cache_capacity_bytes)
                .flush_every_ms(config.flush_every_ms)
                .open()
        };
        let mut tries = 0;
        let db = loop {
            match open() {
                Ok(db) => break db,
                Err(sled::Error::Io(e)) if is_lock_busy(&e) && tries < 40 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(25));
                }
                Err(e) => return Err(backend(e)),
            }
        };
        let trees = TREE_NAMES
            .iter()
            .map(|name| db.open_tree(name))
            .collect::<Result<Vec<_>, _>>()
            .map_err(backend)?;
        let (journal, leftover) = ingest::Ingest::open(&config.path.join(JOURNAL_DIR))?;
        let core = SledCore {
            db,
            trees,
            ingest: journal,
        };
        core.ensure_counts()?;
        ingest::replay(&core, leftover)?;
        // The files sled has just created.
        secure(false)?;
        Ok(core)
    }

    /// Builds the count aggregates from the stored summaries when they are not marked
    /// complete (a store written by an older version, or a build cut short: anything there is
    /// cleared first), and indexes the values of runs stored before the value index existed.
    /// Runs once, before the store is handed out (no writer can interleave).
    fn ensure_counts(&self) -> StoreResult<()> {
        let counts = self.tree(COUNTS);
        if counts.get(COUNTS_BUILT).map_err(backend)?.is_some() {
            return Ok(());
        }
        let t0 = std::time::Instant::now();
        counts.clear().map_err(backend)?;
        let mut deltas = Deltas::new();
        let (mut runs, mut valued) = (0usize, 0usize);
        for item in self.tree(SUMMARIES).iter() {
            let (id, b) = item.map_err(backend)?;
            let s: RunSummary = decode("run summary", &b)?;
            add_cells(&mut deltas, &s, 1);
            runs += 1;
            if self.tree(RUN_VALUES).get(&id).map_err(backend)?.is_none() {
                valued += usize::from(self.backfill_values(&s)?);
            }
            if deltas.len() >= 100_000 {
                self.apply_deltas(&std::mem::take(&mut deltas))?;
            }
        }
        self.apply_deltas(&deltas)?;
        self.db.flush().map_err(backend)?;
        counts.insert(COUNTS_BUILT, &[][..]).map_err(backend)?;
        self.db.flush().map_err(backend)?;
        if runs > 0 {
            tracing::info!(
                runs,
                values_backfilled = valued,
                ms = t0.elapsed().as_millis() as u64,
                "built the run count aggregates of a store written by an older version"
            );
        }
        Ok(())
    }

    /// Indexes the values of a run stored without them (an older version); `true` when it
    /// has some.
    fn backfill_values(&self, s: &RunSummary) -> StoreResult<bool> {
        let Some(run) = self.get_run(&s.id)? else {
            return Ok(false);
        };
        let values = common::search_values(&run);
        if values.is_empty() {
            return Ok(false);
        }
        for (tree, key, value) in index_rows(s, &values) {
            if tree == BY_VALUE {
                self.tree(tree).insert(key, value).map_err(backend)?;
            }
        }
        self.tree(RUN_VALUES)
            .insert(s.id.as_bytes(), encode(&values)?)
            .map_err(backend)?;
        Ok(true)
    }

    /// Adds `deltas` to the counters outside a transaction (building them at open).
    fn apply_deltas(&self, deltas: &Deltas) -> StoreResult<()> {
        let t = self.tree(COUNTS);
        for (key, d) in deltas {
            let cur = t.get(key).map_err(backend)?;
            match apply_delta(cur.as_deref(), d)? {
                Some(v) => t.insert(key.as_slice(), v).map_err(backend)?,
                None => t.remove(key.as_slice()).map_err(backend)?,
            };
        }
        Ok(())
    }

    fn tree(&self, n: usize) -> &Tree {
        &self.trees[n]
    }

    /// Runs `f` as one transaction over the trees `group` (`view[n]` is tree `n`).
    fn tx<A>(&self, group: Range<usize>, f: impl Fn(&View) -> Tx<A>) -> StoreResult<A> {
        let first = group.start;
        let r: Result<A, TransactionError<StoreError>> = self.trees[group]
            .transaction(|trees: &Vec<TransactionalTree>| f(&View { trees, first }));
        r.map_err(|e| match e {
            TransactionError::Abort(e) => e,
            TransactionError::Storage(e) => backend(e),
        })
    }

    fn summary(&self, id: &str) -> StoreResult<Option<RunSummary>> {
        match self.tree(SUMMARIES).get(id).map_err(backend)? {
            Some(b) => decode("run summary", &b).map(Some),
            None => Ok(None),
        }
    }

    /// Removes due rows of an expiry index and the records they point at, if those records
    /// really expire at that instant (a rewritten record has a newer row). Stale rows go
    /// without counting. `stored_expiry` reads a record's expiry; `None` = unreadable record,
    /// which goes too (its index row says it was due).
    fn sweep_index(
        &self,
        index: usize,
        data: usize,
        now_ms: i64,
        max: usize,
        stored_expiry: fn(&[u8]) -> Option<Option<i64>>,
    ) -> StoreResult<usize> {
        let end = match now_ms.checked_add(1) {
            Some(n) => Bound::Excluded(ts(n).to_vec()),
            None => Bound::Unbounded,
        };
        let mut from: Bound<Vec<u8>> = Bound::Unbounded;
        let mut removed = 0;
        while removed < max {
            let mut rows = Vec::new();
            for item in self
                .tree(index)
                .range::<Vec<u8>, _>((from.clone(), end.clone()))
            {
                let (k, _) = item.map_err(backend)?;
                rows.push(k.to_vec());
                if rows.len() >= BATCH.min(max - removed) {
                    break;
                }
            }
            let Some(last) = rows.last().cloned() else {
                break;
            };
            removed += self.tx(index.min(data)..index.max(data) + 1, |v| {
                let mut n = 0;
                for row in &rows {
                    let (at, key) = split_ts(row).map_err(abort)?;
                    v[index].remove(row.as_slice())?;
                    if let Some(b) = v[data].get(key)? {
                        match stored_expiry(&b) {
                            Some(e) if e != Some(at) => {} // rewritten since: stale row
                            _ => {
                                v[data].remove(key)?;
                                n += 1;
                            }
                        }
                    }
                }
                Ok(n)
            })?;
            from = Bound::Excluded(last);
        }
        Ok(removed)
    }

    /// The indexed values of run `id` (the free search's, [`super::SEARCH_VALUES_MAX`]).
    fn values(&self, id: &str) -> StoreResult<Vec<String>> {
        match self.tree(RUN_VALUES).get(id).map_err(backend)? {
            Some(b) => decode("run values", &b),
            None => Ok(Vec::new()),
        }
    }

    /// Ids of the runs whose position is in the candidate set of a free search (id, key or
    /// value prefix), or `None` if there are too many candidates to be worth it.
    fn q_candidates(&self, q: &str) -> StoreResult<Option<BTreeSet<String>>> {
        let mut ids = BTreeSet::new();
        for item in self.tree(RUNS).scan_prefix(q) {
            let (k, _) = item.map_err(backend)?;
            ids.insert(utf8(&k)?.to_string());
            if ids.len() > Q_CANDIDATES_MAX {
                return Ok(None);
            }
        }
        for item in self.tree(BY_KEY).scan_prefix(q) {
            let (k, _) = item.map_err(backend)?;
            let (_, rest) = split_nul(&k)?;
            ids.insert(utf8(id_after_ts(rest)?)?.to_string());
            if ids.len() > Q_CANDIDATES_MAX {
                return Ok(None);
            }
        }
        for item in self.tree(BY_VALUE).scan_prefix(q) {
            let (k, _) = item.map_err(backend)?;
            let (_, rest) = split_nul(&k)?;
            ids.insert(utf8(id_after_ts(rest)?)?.to_string());
            if ids.len() > Q_CANDIDATES_MAX {
                return Ok(None);
            }
        }
        Ok(Some(ids))
    }

    /// Prunes one workflow's finished runs (`prefix` = workflow 0x00 in `runs_by_finish`).
    fn prune_workflow(&self, prefix: &[u8], policy: &Retention, now_ms: i64) -> StoreResult<usize> {
        let mut upper = successor(prefix);
        let mut rank = 0usize;
        let mut pruning = false;
        let mut removed = 0;
        loop {
            let mut doomed = Vec::new();
            let mut last = None;
            let range = self
                .tree(BY_FINISH)
                .range::<Vec<u8>, _>((Bound::Included(prefix.to_vec()), upper.clone()));
            for item in range.rev() {
                let (k, _) = item.map_err(backend)?;
                let (at, id) = split_ts(&k[prefix.len()..])?;
                if !pruning && !common::retention_keeps(policy, rank, at, now_ms) {
                    pruning = true;
                }
                rank += 1;
                if pruning {
                    doomed.push(utf8(id)?.to_string());
                    last = Some(k.to_vec());
                    if doomed.len() >= BATCH {
                        break;
                    }
                }
            }
            let Some(last) = last else {
                return Ok(removed);
            };
            removed += self.tx(RUN_TREES, |v| {
                let mut n = 0;
                for id in &doomed {
                    if delete_final_run_tx(v, id)? {
                        n += 1;
                    }
                }
                Ok(n)
            })?;
            upper = Bound::Excluded(last);
        }
    }
}

impl SledCore {
    fn write(
        &self,
        namespace: &str,
        key: &str,
        value: &Value,
        opts: WriteOptions<'_>,
        now_ms: i64,
    ) -> StoreResult<WriteResult> {
        common::check_memory_write(namespace, key)?;
        let k = pair(namespace, key);
        let expires_at = common::expiry(now_ms, opts.ttl_ms);
        let entry = MemoryEntry {
            namespace: namespace.to_string(),
            key: key.to_string(),
            value: value.clone(),
            written_at: now_ms,
            expires_at,
            owner: opts.owner.cloned(),
        };
        let json = encode(&entry)?;
        self.tx(MEMORY_TREES, |v| {
            let cur = match v[MEMORY].get(&k)? {
                None => None,
                Some(b) => match decode::<MemoryEntry>("memory entry", &b) {
                    Ok(e) => Some(e),
                    // Overwriting repairs an unreadable entry; its old index row, if any, is
                    // left for the sweeper, which drops stale rows.
                    Err(_) if opts.allow_overwrite => None,
                    Err(e) => return Err(abort(e)),
                },
            };
            if let Some(cur) = cur {
                if !opts.allow_overwrite && !cur.is_expired(now_ms) {
                    return Ok(WriteResult::Exists { existing: cur });
                }
                if let Some(e) = cur.expires_at {
                    v[MEMORY_EXPIRY].remove(expiry_row(e, &k))?;
                }
            }
            v[MEMORY].insert(k.as_slice(), json.as_slice())?;
            if let Some(e) = expires_at {
                v[MEMORY_EXPIRY].insert(expiry_row(e, &k), &[][..])?;
            }
            Ok(WriteResult::Written { expires_at })
        })
    }

    fn read(&self, namespace: &str, key: &str, now_ms: i64) -> StoreResult<Option<MemoryEntry>> {
        common::check_ident("namespace", namespace)?;
        match self
            .tree(MEMORY)
            .get(pair(namespace, key))
            .map_err(backend)?
        {
            None => Ok(None),
            Some(b) => {
                let e: MemoryEntry = decode("memory entry", &b)?;
                Ok((!e.is_expired(now_ms)).then_some(e))
            }
        }
    }

    fn delete(&self, namespace: &str, key: &str, now_ms: i64) -> StoreResult<bool> {
        common::check_ident("namespace", namespace)?;
        let k = pair(namespace, key);
        self.tx(MEMORY_TREES, |v| {
            let Some(b) = v[MEMORY].remove(k.as_slice())? else {
                return Ok(false);
            };
            match decode::<MemoryEntry>("memory entry", &b) {
                Ok(e) => {
                    if let Some(at) = e.expires_at {
                        v[MEMORY_EXPIRY].remove(expiry_row(at, &k))?;
                    }
                    Ok(!e.is_expired(now_ms))
                }
                // An unreadable entry is removed (a repair); count it as live.
                Err(_) => Ok(true),
            }
        })
    }

    fn list(
        &self,
        namespace: &str,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
        now_ms: i64,
    ) -> StoreResult<Vec<MemoryEntry>> {
        common::check_ident("namespace", namespace)?;
        let start = match after {
            Some(a) if a >= prefix => Bound::Excluded(pair(namespace, a)),
            _ => Bound::Included(pair(namespace, prefix)),
        };
        let must_start = pair(namespace, prefix);
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        for item in self
            .tree(MEMORY)
            .range::<Vec<u8>, _>((start, Bound::Unbounded))
        {
            let (k, b) = item.map_err(backend)?;
            if !k.starts_with(&must_start) {
                break;
            }
            let e: MemoryEntry = decode("memory entry", &b)?;
            if !e.is_expired(now_ms) {
                out.push(e);
                if out.len() >= limit {
                    break;
                }
            }
        }
        Ok(out)
    }

    fn namespaces(&self) -> StoreResult<Vec<String>> {
        let mut out = Vec::new();
        let mut from = Bound::Unbounded;
        loop {
            let next = self
                .tree(MEMORY)
                .range::<Vec<u8>, _>((from, Bound::Unbounded))
                .next();
            let Some(item) = next else {
                return Ok(out);
            };
            let (k, _) = item.map_err(backend)?;
            let (ns, _) = split_nul(&k)?;
            out.push(utf8(ns)?.to_string());
            let mut skip = ns.to_vec();
            skip.push(1);
            from = Bound::Included(skip);
        }
    }

    fn sweep_expired(&self, now_ms: i64, max: usize) -> StoreResult<usize> {
        self.sweep_index(MEMORY_EXPIRY, MEMORY, now_ms, max, |b| {
            serde_json::from_slice::<MemoryEntry>(b)
                .ok()
                .map(|e| e.expires_at)
        })
    }
}

impl SledCore {
    fn put_prepared(&self, prepared: &PreparedRun) -> StoreResult<()> {
        // sled 0.34 makes every multi-tree transaction (and batch) seal, write and sync its IO
        // buffer twice (`pin_log`), which made run progress writes the main cost of ingest under
        // load. A write that changes the record alone (a running run's progress after each
        // step, a replay link: same summary, so the same index rows) is one atomic insert. If
        // the summary changed meanwhile (a concurrent writer), the transaction below rewrites
        // record and summary together, so they always agree.
        let summaries = self.tree(SUMMARIES);
        let unchanged = |stored: Option<sled::IVec>| {
            stored.is_some_and(|b| b.as_ref() == prepared.summary_json.as_slice())
        };
        // Same values indexed (a step's output may add some while the summary stays).
        let stored_values = self.tree(RUN_VALUES).get(&prepared.id).map_err(backend)?;
        let values_unchanged = match (&stored_values, &prepared.values_json) {
            (None, None) => true,
            (Some(a), Some(b)) => a.as_ref() == b.as_slice(),
            _ => false,
        };
        if values_unchanged && unchanged(summaries.get(&prepared.id).map_err(backend)?) {
            self.tree(RUNS)
                .insert(prepared.id.as_bytes(), prepared.json.as_slice())
                .map_err(backend)?;
            if unchanged(summaries.get(&prepared.id).map_err(backend)?) {
                return Ok(());
            }
        }
        self.tx(RUN_TREES, |v| {
            let mut deltas = Deltas::new();
            put_run_tx(v, prepared, &mut deltas)?;
            apply_deltas_tx(v, &deltas)
        })
    }

    /// The trees, then the ingest journal (a delivery accepted and not yet applied), then the
    /// trees again (applied meanwhile).
    fn get_run(&self, id: &str) -> StoreResult<Option<RunRecord>> {
        let stored = |c: &Self| match c.tree(RUNS).get(id).map_err(backend)? {
            Some(b) => decode_run(&b).map(Some),
            None => Ok(None),
        };
        if let Some(run) = stored(self)? {
            return Ok(Some(run));
        }
        if let Some(run) = self.ingest.run(id)? {
            return Ok(Some(run));
        }
        stored(self)
    }

    fn list_runs(&self, query: &RunQuery) -> StoreResult<RunPage> {
        // What was acknowledged before this call is listed (or counted).
        self.ingest.settle();
        let empty = RunPage {
            runs: vec![],
            next_cursor: None,
        };
        let upper: Option<Position> = match query.cursor.as_deref().map(common::decode_cursor) {
            None => None,
            Some(Cursor::Position(p)) => Some(p),
            Some(Cursor::RunId(id)) => match self.summary(&id)? {
                Some(s) => Some((s.created_at.0, id)),
                None => return Ok(empty),
            },
        };
        if query.limit == 0 {
            return Ok(empty);
        }
        let before_cursor =
            |s: &RunSummary| upper.as_ref().is_none_or(|u| common::position(s) < *u);

        // A free search with few candidates: read them and sort.
        if let (None, Some(q)) = (&query.key, query.q.as_deref().filter(|q| !q.is_empty())) {
            if let Some(ids) = self.q_candidates(q)? {
                let mut runs = Vec::new();
                for id in ids {
                    if let Some(s) = self.summary(&id)? {
                        let values = self.values(&id)?;
                        if common::summary_matches(&s, &values, query) && before_cursor(&s) {
                            runs.push(s);
                        }
                    }
                }
                runs.sort_by_key(|s| std::cmp::Reverse(common::position(s)));
                runs.truncate(query.limit + 1);
                return Ok(page(runs, query.limit));
            }
        }

        // Otherwise walk the most selective index backwards from the cursor.
        let (tree, prefix) = match (&query.key, &query.workflow, query.status) {
            (Some(key), _, _) => (BY_KEY, pair(key, "")),
            (None, Some(wf), Some(st)) => (BY_WORKFLOW_STATUS, triple(wf, st.as_str())),
            (None, Some(wf), None) => (BY_WORKFLOW, pair(wf, "")),
            (None, None, Some(st)) => (BY_STATUS, pair(st.as_str(), "")),
            (None, None, None) => (BY_CREATED, Vec::new()),
        };
        let lower = match query.since {
            Some(since) => Bound::Included(cat(&prefix, &ts(since))),
            None => Bound::Included(prefix.clone()),
        };
        let mut upper_key = match query.until {
            Some(until) => Bound::Excluded(cat(&prefix, &ts(until))),
            None => successor(&prefix),
        };
        if let Some((created, id)) = &upper {
            let k = cat(&cat(&prefix, &ts(*created)), id.as_bytes());
            let tighter = match &upper_key {
                Bound::Excluded(u) => k < *u,
                _ => true,
            };
            if tighter {
                upper_key = Bound::Excluded(k);
            }
        }
        if let (Bound::Included(lo), Bound::Excluded(hi)) = (&lower, &upper_key) {
            if lo >= hi {
                return Ok(empty);
            }
        }
        let mut runs = Vec::new();
        let mut examined = 0usize;
        for item in self
            .tree(tree)
            .range::<Vec<u8>, _>((lower, upper_key))
            .rev()
        {
            let (k, _) = item.map_err(backend)?;
            let id = utf8(id_after_ts(&k[prefix.len()..])?)?;
            let s = self.summary(id)?.ok_or_else(|| {
                StoreError::Corrupt(format!("index row names run `{id}`, which has no summary"))
            })?;
            examined += 1;
            let values = if query.q.as_deref().is_some_and(|q| !q.is_empty()) {
                self.values(id)?
            } else {
                Vec::new()
            };
            if common::summary_matches(&s, &values, query) {
                runs.push(s);
                if runs.len() > query.limit {
                    break;
                }
            } else if examined >= super::LIST_SCAN_BUDGET {
                // Filters no index covers: stop here and let the caller page on.
                return Ok(RunPage {
                    runs,
                    next_cursor: Some(common::encode_cursor(&s)),
                });
            }
        }
        Ok(page(runs, query.limit))
    }

    fn run_ids_with_status(&self, status: RunStatus) -> StoreResult<Vec<String>> {
        // What was acknowledged before this call is listed (or counted).
        self.ingest.settle();
        let prefix = pair(status.as_str(), "");
        let mut ids = Vec::new();
        for item in self.tree(BY_STATUS).scan_prefix(&prefix) {
            let (k, _) = item.map_err(backend)?;
            ids.push(utf8(id_after_ts(&k[prefix.len()..])?)?.to_string());
        }
        Ok(ids)
    }

    fn prune_runs(&self, policy: &Retention, now_ms: i64) -> StoreResult<usize> {
        if policy.max_runs_per_workflow.is_none() && policy.max_age_ms.is_none() {
            return Ok(0);
        }
        let mut removed = 0;
        let mut from = Bound::Unbounded;
        loop {
            let next = self
                .tree(BY_FINISH)
                .range::<Vec<u8>, _>((from, Bound::Unbounded))
                .next();
            let Some(item) = next else {
                return Ok(removed);
            };
            let (k, _) = item.map_err(backend)?;
            let (wf, _) = split_nul(&k)?;
            let prefix = pair_bytes(wf, b"");
            removed += self.prune_workflow(&prefix, policy, now_ms)?;
            from = successor(&prefix);
        }
    }
}

impl SledCore {
    fn claim_prepared(&self, prepared: &PreparedClaim, now_ms: i64) -> StoreResult<ClaimOutcome> {
        ingest::with_claim_lock(&self.ingest, &prepared.key, now_ms, |journaled| {
            if let Some(c) = journaled {
                return Ok(ClaimOutcome::Duplicate { run_id: c.run_id });
            }
            self.tx(CLAIM_TREES, |v| {
                let mut deltas = Deltas::new();
                let outcome = claim_tx(v, prepared, now_ms, &mut deltas)?;
                apply_deltas_tx(v, &deltas)?;
                Ok(outcome)
            })
        })
    }

    fn release_claim(&self, workflow_id: &str, key: &str, run_id: &str) -> StoreResult<bool> {
        let ck = pair(workflow_id, key);
        if self.ingest.release(&ck, run_id) {
            return Ok(true);
        }
        self.tx(CLAIM_TREES, |v| {
            let Some(b) = v[CLAIMS].get(&ck)? else {
                return Ok(false);
            };
            let old: WebhookClaim = decode("webhook claim", &b).map_err(abort)?;
            if old.run_id != run_id {
                return Ok(false);
            }
            v[CLAIMS].remove(ck.as_slice())?;
            v[CLAIMS_EXPIRY].remove(expiry_row(old.expires_at, &ck))?;
            delete_queued_run_tx(v, run_id)?;
            Ok(true)
        })
    }

    fn get_claim(
        &self,
        workflow_id: &str,
        key: &str,
        now_ms: i64,
    ) -> StoreResult<Option<WebhookClaim>> {
        common::check_ident("workflow id", workflow_id)?;
        let ck = pair(workflow_id, key);
        match self.ingest.live_claim(&ck, now_ms) {
            Some(c) => Ok(Some(c)),
            None => self.tree_claim(&ck, now_ms),
        }
    }

    fn api_begin(&self, record: &ApiRecord, now_ms: i64) -> StoreResult<ApiBegin> {
        common::check_ident("scope", &record.scope)?;
        let k = pair(&record.scope, &record.key);
        let json = encode(record)?;
        self.tx(API_TREES, |v| {
            let old: Option<ApiRecord> = match v[API].get(&k)? {
                Some(b) => Some(decode("API idempotency record", &b).map_err(abort)?),
                None => None,
            };
            match common::api_decide(old.as_ref(), record, now_ms) {
                ApiDecision::Answer(a) => Ok(a),
                ApiDecision::Start => {
                    if let Some(old) = &old {
                        v[API_EXPIRY].remove(expiry_row(old.expires_at, &k))?;
                    }
                    v[API].insert(k.as_slice(), json.as_slice())?;
                    v[API_EXPIRY].insert(expiry_row(record.expires_at, &k), &[][..])?;
                    Ok(ApiBegin::Started)
                }
            }
        })
    }

    fn api_complete(&self, scope: &str, key: &str, status: u16, body: &str) -> StoreResult<()> {
        common::check_ident("scope", scope)?;
        let k = pair(scope, key);
        self.tx(API_TREES, |v| {
            let Some(b) = v[API].get(&k)? else {
                return Ok(());
            };
            let mut rec: ApiRecord = decode("API idempotency record", &b).map_err(abort)?;
            rec.state = ApiRecordState::Done {
                status,
                body: body.to_string(),
            };
            v[API].insert(k.as_slice(), encode(&rec).map_err(abort)?)?;
            Ok(())
        })
    }

    fn api_abandon(&self, scope: &str, key: &str) -> StoreResult<()> {
        common::check_ident("scope", scope)?;
        let k = pair(scope, key);
        self.tx(API_TREES, |v| {
            let Some(b) = v[API].get(&k)? else {
                return Ok(());
            };
            let rec: ApiRecord = decode("API idempotency record", &b).map_err(abort)?;
            if matches!(rec.state, ApiRecordState::InProgress { .. }) {
                v[API].remove(k.as_slice())?;
                v[API_EXPIRY].remove(expiry_row(rec.expires_at, &k))?;
            }
            Ok(())
        })
    }

    fn sweep_idempotency(&self, now_ms: i64, max: usize) -> StoreResult<usize> {
        let claims = self.sweep_index(CLAIMS_EXPIRY, CLAIMS, now_ms, max, |b| {
            serde_json::from_slice::<WebhookClaim>(b)
                .ok()
                .map(|c| Some(c.expires_at))
        })?;
        let api = self.sweep_index(API_EXPIRY, API, now_ms, max - claims, |b| {
            serde_json::from_slice::<ApiRecord>(b)
                .ok()
                .map(|r| Some(r.expires_at))
        })?;
        Ok(claims + api)
    }
}

impl SledCore {
    /// The ingest journal's sync, then sled's flush.
    fn flush(&self) -> StoreResult<()> {
        self.ingest.sync()?;
        // Blocking on purpose: sled 0.34's `flush_async` deadlocks under concurrent callers.
        self.db.flush().map(|_| ()).map_err(backend)
    }

    /// The claim of `key` in the trees, if live at `now_ms`.
    fn tree_claim(&self, key: &[u8], now_ms: i64) -> StoreResult<Option<WebhookClaim>> {
        match self.tree(CLAIMS).get(key).map_err(backend)? {
            None => Ok(None),
            Some(b) => {
                let c: WebhookClaim = decode("webhook claim", &b)?;
                Ok((c.expires_at > now_ms).then_some(c))
            }
        }
    }

    /// A batch of the group commit. Claims go to the ingest journal ([`ingest`]: decided
    /// against the journaled and the stored claims, appended with one write, synced by
    /// [`SledCore::flush`]); run writes are one transaction for the batch. Each write is
    /// prepared (checked and serialised) first; a write that fails preparation fails alone.
    fn write_batch(&self, writes: &[BatchWrite]) -> Vec<StoreResult<BatchOutcome>> {
        let mut out: Vec<Option<StoreResult<BatchOutcome>>> = Vec::with_capacity(writes.len());
        let mut claims: Vec<(usize, PreparedClaim)> = Vec::new();
        let mut puts: Vec<(usize, PreparedRun)> = Vec::new();
        for (i, w) in writes.iter().enumerate() {
            let prepared = match w {
                BatchWrite::ClaimAndEnqueue { claim, run } => {
                    PreparedClaim::new(claim, run).map(|c| claims.push((i, c)))
                }
                BatchWrite::PutRun(run) => PreparedRun::new(run).map(|r| puts.push((i, r))),
            };
            out.push(prepared.err().map(Err));
        }
        if !claims.is_empty() {
            let refs: Vec<&PreparedClaim> = claims.iter().map(|(_, c)| c).collect();
            let outcomes = self.ingest.accept(&refs, |key, now| {
                Ok(self.tree_claim(key, now)?.map(|c| c.run_id))
            });
            for ((i, _), o) in claims.iter().zip(outcomes) {
                out[*i] = Some(o.map(BatchOutcome::Claim));
            }
        }
        if !puts.is_empty() {
            // The count aggregates' changes of the whole batch are summed and written once at
            // its end: the runs of one batch share their cells (same minute, workflow,
            // status), so a cell is read and written once per batch, not once per run.
            let applied = self.tx(RUN_TREES, |v| {
                let mut deltas = Deltas::new();
                for (_, r) in &puts {
                    put_run_tx(v, r, &mut deltas)?;
                }
                apply_deltas_tx(v, &deltas)
            });
            for (i, _) in &puts {
                out[*i] = Some(applied.clone().map(|()| BatchOutcome::Put));
            }
        }
        out.into_iter()
            .map(|o| o.unwrap_or_else(|| Err(backend("batch write lost its outcome"))))
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------
// The async API: each call on the blocking pool
// ---------------------------------------------------------------------------------------------

#[async_trait::async_trait]
impl MemoryStore for SledStore {
    async fn write(
        &self,
        namespace: &str,
        key: &str,
        value: &Value,
        opts: WriteOptions<'_>,
        now_ms: i64,
    ) -> StoreResult<WriteResult> {
        let (ns, key, value) = (namespace.to_owned(), key.to_owned(), value.clone());
        let (allow_overwrite, ttl_ms) = (opts.allow_overwrite, opts.ttl_ms);
        let owner = opts.owner.cloned();
        self.blocking(move |c| {
            let opts = WriteOptions {
                allow_overwrite,
                ttl_ms,
                owner: owner.as_ref(),
            };
            c.write(&ns, &key, &value, opts, now_ms)
        })
        .await
    }

    async fn read(
        &self,
        namespace: &str,
        key: &str,
        now_ms: i64,
    ) -> StoreResult<Option<MemoryEntry>> {
        let (ns, key) = (namespace.to_owned(), key.to_owned());
        self.blocking(move |c| c.read(&ns, &key, now_ms)).await
    }

    async fn delete(&self, namespace: &str, key: &str, now_ms: i64) -> StoreResult<bool> {
        let (ns, key) = (namespace.to_owned(), key.to_owned());
        self.blocking(move |c| c.delete(&ns, &key, now_ms)).await
    }

    async fn list(
        &self,
        namespace: &str,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
        now_ms: i64,
    ) -> StoreResult<Vec<MemoryEntry>> {
        let (ns, prefix, after) = (
            namespace.to_owned(),
            prefix.to_owned(),
            after.map(str::to_owned),
        );
        self.blocking(move |c| c.list(&ns, &prefix, after.as_deref(), limit, now_ms))
            .await
    }

    async fn namespaces(&self) -> StoreResult<Vec<String>> {
        self.blocking(|c| c.namespaces()).await
    }

    async fn sweep_expired(&self, now_ms: i64, max: usize) -> StoreResult<usize> {
        self.blocking(move |c| c.sweep_expired(now_ms, max)).await
    }
}

#[async_trait::async_trait]
impl RunStore for SledStore {
    async fn put_run(&self, run: &RunRecord) -> StoreResult<()> {
        // Serialised here (the caller's thread), written on the blocking pool.
        let prepared = PreparedRun::new(run)?;
        self.blocking(move |c| c.put_prepared(&prepared)).await
    }

    async fn get_run(&self, id: &str) -> StoreResult<Option<RunRecord>> {
        let id = id.to_owned();
        self.blocking(move |c| c.get_run(&id)).await
    }

    async fn list_runs(&self, query: &RunQuery) -> StoreResult<RunPage> {
        let query = query.clone();
        self.blocking(move |c| c.list_runs(&query)).await
    }

    async fn run_ids_with_status(&self, status: RunStatus) -> StoreResult<Vec<String>> {
        self.blocking(move |c| c.run_ids_with_status(status)).await
    }

    async fn prune_runs(&self, policy: &Retention, now_ms: i64) -> StoreResult<usize> {
        let policy = *policy;
        self.blocking(move |c| c.prune_runs(&policy, now_ms)).await
    }

    async fn count_runs(&self, q: &super::CountQuery) -> StoreResult<super::RunCounts> {
        let q = q.clone();
        self.blocking(move |c| c.count_runs(&q)).await
    }

    async fn oldest_run(
        &self,
        filter: &super::CountFilter,
        until: i64,
    ) -> StoreResult<Option<i64>> {
        let filter = filter.clone();
        self.blocking(move |c| c.oldest_run(&filter, until)).await
    }
}

#[async_trait::async_trait]
impl IdempotencyStore for SledStore {
    async fn claim_and_enqueue(
        &self,
        claim: &WebhookClaim,
        run: &RunRecord,
        now_ms: i64,
    ) -> StoreResult<ClaimOutcome> {
        let prepared = PreparedClaim::new(claim, run)?;
        self.blocking(move |c| c.claim_prepared(&prepared, now_ms))
            .await
    }

    async fn get_claim(
        &self,
        workflow_id: &str,
        key: &str,
        now_ms: i64,
    ) -> StoreResult<Option<WebhookClaim>> {
        let (wf, key) = (workflow_id.to_owned(), key.to_owned());
        self.blocking(move |c| c.get_claim(&wf, &key, now_ms)).await
    }

    async fn api_begin(&self, record: &ApiRecord, now_ms: i64) -> StoreResult<ApiBegin> {
        let record = record.clone();
        self.blocking(move |c| c.api_begin(&record, now_ms)).await
    }

    async fn api_complete(
        &self,
        scope: &str,
        key: &str,
        status: u16,
        body: &str,
    ) -> StoreResult<()> {
        let (scope, key, body) = (scope.to_owned(), key.to_owned(), body.to_owned());
        self.blocking(move |c| c.api_complete(&scope, &key, status, &body))
            .await
    }

    async fn api_abandon(&self, scope: &str, key: &str) -> StoreResult<()> {
        let (scope, key) = (scope.to_owned(), key.to_owned());
        self.blocking(move |c| c.api_abandon(&scope, &key)).await
    }

    async fn release_claim(&self, workflow_id: &str, key: &str, run_id: &str) -> StoreResult<bool> {
        let (wf, key, run_id) = (workflow_id.to_owned(), key.to_owned(), run_id.to_owned());
        self.blocking(move |c| c.release_claim(&wf, &key, &run_id))
            .await
    }

    async fn sweep_idempotency(&self, now_ms: i64, max: usize) -> StoreResult<usize> {
        self.blocking(move |c| c.sweep_idempotency(now_ms, max))
            .await
    }
}

#[async_trait::async_trait]
impl Store for SledStore {
    async fn flush(&self) -> StoreResult<()> {
        self.blocking(|c| c.flush()).await
    }

    /// The ingest journal's sync alone: a batch's claims are there, not in the trees.
    async fn flush_claims(&self) -> StoreResult<()> {
        self.blocking(|c| c.ingest.sync()).await
    }

    /// One transaction for the whole batch, on the blocking pool.
    async fn write_batch(
        &self,
        writes: Vec<BatchWrite>,
    ) -> Vec<(BatchWrite, StoreResult<BatchOutcome>)> {
        let core = self.core.clone();
        let n = writes.len();
        match tokio::task::spawn_blocking(move || {
            let out = core.write_batch(&writes);
            writes.into_iter().zip(out).collect::<Vec<_>>()
        })
        .await
        {
            Ok(out) if out.len() == n => out,
            Ok(_) | Err(_) => {
                // A panic in the backend lost the writes: the batch's callers get an error.
                tracing::error!("sled batch write failed without outcomes");
                Vec::new()
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Runs inside transactions
// ---------------------------------------------------------------------------------------------

/// sled 0.34 reports a database locked by another handle as an `ErrorKind::Other` whose
/// message is "could not acquire lock on <path>: <the OS error>" (`config.rs`); the OS error
/// (`EWOULDBLOCK`) survives only in that text.
fn is_lock_busy(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::WouldBlock
        || e.to_string().starts_with("could not acquire lock on")
}

/// A run serialised once, outside the transaction (whose closure may be retried).
struct PreparedRun {
    id: String,
    /// Its summary (the count aggregates' cells).
    summary: RunSummary,
    json: Vec<u8>,
    summary_json: Vec<u8>,
    /// The indexed values as stored in `run_values`; `None` when there are none.
    values_json: Option<Vec<u8>>,
    index: Vec<IndexRow>,
}

impl PreparedRun {
    fn new(run: &RunRecord) -> StoreResult<Self> {
        common::check_run(run)?;
        let summary = RunSummary::from(run);
        let values = common::search_values(run);
        Ok(PreparedRun {
            id: run.id.clone(),
            json: encode_run(run)?,
            summary_json: encode(&summary)?,
            values_json: if values.is_empty() {
                None
            } else {
                Some(encode(&values)?)
            },
            index: index_rows(&summary, &values),
            summary,
        })
    }
}

/// A webhook claim and its queued run, checked and serialised outside the transaction.
struct PreparedClaim {
    /// `workflow 0x00 key`.
    key: Vec<u8>,
    claim: WebhookClaim,
    /// `claim` as stored.
    json: Vec<u8>,
    run: PreparedRun,
}

impl PreparedClaim {
    fn new(claim: &WebhookClaim, run: &RunRecord) -> StoreResult<Self> {
        common::check_claim_run(claim, run)?;
        Ok(PreparedClaim {
            key: pair(&claim.workflow_id, &claim.key),
            json: encode(claim)?,
            claim: claim.clone(),
            run: PreparedRun::new(run)?,
        })
    }
}

/// A live claim of the key (`expires_at > now_ms`) answers `Duplicate` and writes nothing;
/// else the claim (replacing an expired one) and its queued run are written, the run's count
/// changes added to `deltas` (written by the caller, [`apply_deltas_tx`]).
fn claim_tx(v: &View, c: &PreparedClaim, now_ms: i64, deltas: &mut Deltas) -> Tx<ClaimOutcome> {
    if let Some(b) = v[CLAIMS].get(&c.key)? {
        let old: WebhookClaim = decode("webhook claim", &b).map_err(abort)?;
        if old.expires_at > now_ms {
            return Ok(ClaimOutcome::Duplicate { run_id: old.run_id });
        }
        v[CLAIMS_EXPIRY].remove(expiry_row(old.expires_at, &c.key))?;
    }
    v[CLAIMS].insert(c.key.as_slice(), c.json.as_slice())?;
    v[CLAIMS_EXPIRY].insert(expiry_row(c.claim.expires_at, &c.key), &[][..])?;
    put_run_tx(v, &c.run, deltas)?;
    Ok(ClaimOutcome::Claimed)
}

/// One row of a run index: `(tree, key, value)`.
type IndexRow = (usize, Vec<u8>, Vec<u8>);

/// Every index row of a run (`values`: its indexed values).
fn index_rows(s: &RunSummary, values: &[String]) -> Vec<IndexRow> {
    let at = ts(s.created_at.0);
    let id = s.id.as_bytes();
    let status = s.status.as_str();
    let after = |prefix: Vec<u8>| cat(&cat(&prefix, &at), id);
    // The time indexes hold no value: a status change rewrites only the two status rows
    // (stores written before this held the status here; such a row is rewritten empty when
    // its run is next written, and no reader looks at it).
    let mut rows = vec![
        (BY_CREATED, cat(&at, id), vec![]),
        (BY_WORKFLOW, after(pair(&s.workflow_id, "")), vec![]),
        (BY_STATUS, after(pair(status, "")), vec![]),
        (
            BY_WORKFLOW_STATUS,
            after(triple(&s.workflow_id, status)),
            vec![],
        ),
    ];
    if let Some(k) = &s.idempotency_key {
        rows.push((BY_KEY, after(pair(k, "")), vec![]));
    }
    for v in values {
        rows.push((BY_VALUE, after(pair(v, "")), vec![]));
    }
    let finished = common::retention_instant(s.status, s.created_at.0, s.finished_at.map(|t| t.0));
    if let Some(f) = finished {
        rows.push((
            BY_FINISH,
            cat(&cat(&pair(&s.workflow_id, ""), &ts(f)), id),
            vec![],
        ));
    }
    rows
}

/// The indexed values of the stored version of run `id`.
fn stored_values(v: &View, id: &str) -> Tx<Vec<String>> {
    match v[RUN_VALUES].get(id)? {
        None => Ok(Vec::new()),
        Some(b) => decode("run values", &b).map_err(abort),
    }
}

/// The stored summary of run `id`, if any.
fn stored_summary(v: &View, id: &str) -> Tx<Option<RunSummary>> {
    match v[SUMMARIES].get(id)? {
        None => Ok(None),
        Some(b) => decode("run summary", &b).map(Some).map_err(abort),
    }
}

/// Removes a run, its summary, its values and every index row of `s` (its stored summary).
fn delete_run_tx(v: &View, s: &RunSummary) -> Tx<()> {
    let id = s.id.as_str();
    for (tree, key, _) in index_rows(s, &stored_values(v, id)?) {
        v[tree].remove(key)?;
    }
    let mut deltas = Deltas::new();
    add_cells(&mut deltas, s, -1);
    apply_deltas_tx(v, &deltas)?;
    v[RUNS].remove(id.as_bytes())?;
    v[SUMMARIES].remove(id.as_bytes())?;
    v[RUN_VALUES].remove(id.as_bytes())?;
    Ok(())
}

/// Writes a run and brings its index rows in step: rows of the old version that no longer
/// apply go, new or changed rows are written, unchanged rows are left alone. The count
/// aggregates' changes are added to `deltas`, for the caller to write with
/// [`apply_deltas_tx`] in the same transaction (once for a whole batch).
fn put_run_tx(v: &View, run: &PreparedRun, deltas: &mut Deltas) -> Tx<()> {
    let old_summary = stored_summary(v, &run.id)?;
    let old_values = v[RUN_VALUES].get(run.id.as_bytes())?;
    let values_unchanged = old_values.as_deref() == run.values_json.as_deref();
    let old = match &old_summary {
        Some(o) => {
            let values: Vec<String> = match &old_values {
                None => Vec::new(),
                Some(b) => decode("run values", b).map_err(abort)?,
            };
            index_rows(o, &values)
        }
        None => Vec::new(),
    };
    // The count aggregates: the old version's cells down, the new one's up (a status change
    // moves one count; an unchanged cell nets to nothing and is not touched).
    if let Some(o) = &old_summary {
        add_cells(deltas, o, -1);
    }
    add_cells(deltas, &run.summary, 1);
    // Rows keyed by (tree, key): what only the old version has goes, what is new or changed
    // is written (a run has a few dozen rows; sets keep this linear).
    let new_keys: std::collections::HashSet<(usize, &[u8])> = run
        .index
        .iter()
        .map(|(t, k, _)| (*t, k.as_slice()))
        .collect();
    for (tree, key, _) in &old {
        if !new_keys.contains(&(*tree, key.as_slice())) {
            v[*tree].remove(key.as_slice())?;
        }
    }
    let old_rows: std::collections::HashSet<&IndexRow> = old.iter().collect();
    for row in &run.index {
        if !old_rows.contains(row) {
            v[row.0].insert(row.1.as_slice(), row.2.as_slice())?;
        }
    }
    v[RUNS].insert(run.id.as_bytes(), run.json.as_slice())?;
    v[SUMMARIES].insert(run.id.as_bytes(), run.summary_json.as_slice())?;
    if !values_unchanged {
        match &run.values_json {
            Some(j) => v[RUN_VALUES].insert(run.id.as_bytes(), j.as_slice())?,
            None => v[RUN_VALUES].remove(run.id.as_bytes())?,
        };
    }
    Ok(())
}

/// Deletes a `queued` run and all its index rows; `false` if it is gone or has started.
fn delete_queued_run_tx(v: &View, id: &str) -> Tx<bool> {
    let Some(b) = v[SUMMARIES].get(id)? else {
        return Ok(false);
    };
    let s: RunSummary = decode("run summary", &b).map_err(abort)?;
    if s.status != RunStatus::Queued {
        return Ok(false);
    }
    delete_run_tx(v, &s)?;
    Ok(true)
}

/// Deletes a finished run and all its index rows; `false` if it is gone or not finished.
fn delete_final_run_tx(v: &View, id: &str) -> Tx<bool> {
    let Some(b) = v[SUMMARIES].get(id)? else {
        return Ok(false);
    };
    let s: RunSummary = decode("run summary", &b).map_err(abort)?;
    if !s.status.is_final() {
        return Ok(false);
    }
    delete_run_tx(v, &s)?;
    Ok(true)
}

// ---------------------------------------------------------------------------------------------
// Count aggregates (`run_counts`)
// ---------------------------------------------------------------------------------------------

/// The key that marks the counters complete (see the module docs).
const COUNTS_BUILT: &[u8] = b"\x00built";

/// The level byte of a counter unit ([`super::counts::UNITS`]).
fn level(unit: i64) -> u8 {
    match unit {
        super::counts::DAY_MS => b'd',
        super::counts::HOUR_MS => b'h',
        _ => b'm',
    }
}

/// Pending changes of counters: key → (runs, histogram bin → durations), signed.
type Deltas = BTreeMap<Vec<u8>, (i64, BTreeMap<u16, i64>)>;

/// A counter key: `level kind ts(unit) parts joined by 0x00`.
fn cell_key(unit: i64, kind: u8, start: i64, parts: &[&str]) -> Vec<u8> {
    let mut key = Vec::with_capacity(48);
    key.push(level(unit));
    key.push(kind);
    key.extend_from_slice(&ts(start));
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            key.push(0);
        }
        key.extend_from_slice(part.as_bytes());
    }
    key
}

/// Adds `sign` × the cells of a run to `deltas`: per unit level, its count cell and its
/// rolled-up cell (with its duration when finished) and, when it failed, its failure-reason
/// cell.
fn add_cells(deltas: &mut Deltas, s: &RunSummary, sign: i64) {
    let created = s.created_at.0;
    let bin = match (s.status.is_final(), s.duration_ms) {
        (true, Some(d)) => Some(super::DurationHistogram::bin(d)),
        _ => None,
    };
    let reason = s.failure_reason();
    let (status, wf) = (s.status.as_str(), s.workflow_id.as_str());
    let (mode, trigger) = (s.mode.as_str(), s.trigger.as_str());
    for unit in super::counts::UNITS {
        let start = created - created.rem_euclid(unit);
        for key in [
            cell_key(unit, b'c', start, &[status, wf, mode, trigger]),
            cell_key(unit, b'r', start, &[status, wf]),
        ] {
            let d = deltas.entry(key).or_default();
            d.0 += sign;
            if let Some(b) = bin {
                *d.1.entry(b).or_default() += sign;
            }
        }
        if let Some(r) = &reason {
            let f = cell_key(unit, b'f', start, &[status, wf, mode, trigger, r]);
            deltas.entry(f).or_default().0 += sign;
        }
    }
    add_step_cells(deltas, s, sign);
}

/// A step counter key: `level s workflow 0x00 ts(unit) status 0x00 mode 0x00 trigger 0x00
/// step` (the workflow before the instant: step cells are read for one workflow).
fn step_cell_key(unit: i64, start: i64, s: &RunSummary, step: &str) -> Vec<u8> {
    let mut key = Vec::with_capacity(48 + step.len());
    key.push(level(unit));
    key.push(b's');
    key.extend_from_slice(s.workflow_id.as_bytes());
    key.push(0);
    key.extend_from_slice(&ts(start));
    for (i, part) in [s.status.as_str(), s.mode.as_str(), s.trigger.as_str(), step]
        .iter()
        .enumerate()
    {
        if i > 0 {
            key.push(0);
        }
        key.extend_from_slice(part.as_bytes());
    }
    key
}

/// Adds `sign` × the step cells of a finished run to `deltas`: per unit level, one per step
/// in [`RunSummary::step_durations`], holding that step's duration. Derived from the summary
/// alone, so retention (which reads the stored summary) takes back exactly what was added.
fn add_step_cells(deltas: &mut Deltas, s: &RunSummary, sign: i64) {
    if !s.status.is_final() {
        return;
    }
    let created = s.created_at.0;
    for unit in super::counts::UNITS {
        let start = created - created.rem_euclid(unit);
        for (step, ms) in &s.step_durations {
            let d = deltas
                .entry(step_cell_key(unit, start, s, step))
                .or_default();
            d.0 += sign;
            *d.1.entry(super::DurationHistogram::bin(*ms)).or_default() += sign;
        }
    }
}

/// The largest duration bin (that of `u64::MAX`).
const MAX_BIN: u16 = 7_423;

/// A counter's value split without decoding: runs, and the histogram's `(bin, count)` pairs
/// as stored (10 bytes each).
fn counter_parts(b: &[u8]) -> StoreResult<(u64, &[u8])> {
    if b.len() < 8 || !(b.len() - 8).is_multiple_of(10) {
        return Err(StoreError::Corrupt("run counter: bad length".into()));
    }
    let mut n = [0u8; 8];
    n.copy_from_slice(&b[..8]);
    Ok((u64::from_be_bytes(n), &b[8..]))
}

/// A counter's value: runs, then the histogram's `(bin, count)` pairs.
fn decode_counter(b: &[u8]) -> StoreResult<(u64, Vec<(u16, u64)>)> {
    let bad = || StoreError::Corrupt("run counter: bad length".into());
    if b.len() < 8 || !(b.len() - 8).is_multiple_of(10) {
        return Err(bad());
    }
    let n = u64::from_be_bytes(b[..8].try_into().map_err(|_| bad())?);
    let bins = b[8..]
        .chunks_exact(10)
        .map(|c| {
            let bin = u16::from_be_bytes([c[0], c[1]]);
            let count = u64::from_be_bytes(c[2..10].try_into().map_err(|_| bad())?);
            Ok((bin, count))
        })
        .collect::<StoreResult<Vec<_>>>()?;
    Ok((n, bins))
}

/// The counter `cur` plus a delta: `None` when it falls to zero (the row goes). A counter
/// that would go negative (it cannot, unless the store was written by an older version after
/// this one) stops at zero.
fn apply_delta(
    cur: Option<&[u8]>,
    (dn, dbins): &(i64, BTreeMap<u16, i64>),
) -> StoreResult<Option<Vec<u8>>> {
    let (n, bins) = match cur {
        Some(b) => decode_counter(b)?,
        None => (0, Vec::new()),
    };
    let add = |a: u64, d: i64| u64::try_from(i128::from(a) + i128::from(d)).unwrap_or(0);
    let n = add(n, *dn);
    if n == 0 {
        return Ok(None);
    }
    let mut merged: BTreeMap<u16, u64> = bins.into_iter().collect();
    for (b, d) in dbins {
        let c = merged.entry(*b).or_default();
        *c = add(*c, *d);
    }
    let mut out = Vec::with_capacity(8 + 10 * merged.len());
    out.extend_from_slice(&n.to_be_bytes());
    for (b, c) in merged.into_iter().filter(|(_, c)| *c > 0) {
        out.extend_from_slice(&b.to_be_bytes());
        out.extend_from_slice(&c.to_be_bytes());
    }
    Ok(Some(out))
}

/// Applies `deltas` to the counters inside a transaction (changes that net to nothing are
/// skipped).
fn apply_deltas_tx(v: &View, deltas: &Deltas) -> Tx<()> {
    for (key, d) in deltas {
        if d.0 == 0 && d.1.values().all(|c| *c == 0) {
            continue;
        }
        let cur = v[COUNTS].get(key.as_slice())?;
        match apply_delta(cur.as_deref(), d).map_err(abort)? {
            Some(val) => v[COUNTS].insert(key.as_slice(), val)?,
            None => v[COUNTS].remove(key.as_slice())?,
        };
    }
    Ok(())
}

/// A counter key of kind `c`, `r` or `f`, parsed: unit start, status, workflow, mode and
/// trigger (empty in kind `r`) and (kind `f`) failure reason.
struct Cell<'a> {
    unit: i64,
    status: RunStatus,
    workflow: &'a [u8],
    mode: &'a [u8],
    trigger: &'a [u8],
    reason: &'a [u8],
}

fn parse_cell(k: &[u8]) -> StoreResult<Cell<'_>> {
    let bad = || StoreError::Corrupt("run counter key is malformed".into());
    if k.len() < 10 {
        return Err(bad());
    }
    let kind = k[1];
    let (unit, rest) = split_ts(&k[2..])?;
    let mut parts = rest.splitn(5, |b| *b == 0);
    let mut next = || parts.next().ok_or_else(bad);
    let status = utf8(next()?)?;
    let status = RunStatus::parse(status)
        .ok_or_else(|| StoreError::Corrupt(format!("run counter of unknown status `{status}`")))?;
    let workflow = next()?;
    let (mode, trigger) = match kind {
        b'r' => (&[][..], &[][..]),
        _ => (next()?, next()?),
    };
    let reason = if kind == b'f' { next()? } else { &[][..] };
    Ok(Cell {
        unit,
        status,
        workflow,
        mode,
        trigger,
        reason,
    })
}

/// Duration histograms being merged, one dense array per name (a workflow, or a step):
/// counters carry up to hundreds of bins each, and merging is where a long range spends.
#[derive(Default)]
struct DenseHistograms(BTreeMap<Vec<u8>, Vec<u64>>);

impl DenseHistograms {
    /// The slots (one per bin, `0..=MAX_BIN`) of `name`.
    fn slots(&mut self, name: &[u8]) -> &mut [u64] {
        if !self.0.contains_key(name) {
            self.0
                .insert(name.to_vec(), vec![0; usize::from(MAX_BIN) + 1]);
        }
        // Present: inserted above.
        self.0.get_mut(name).map_or(&mut [][..], Vec::as_mut_slice)
    }

    /// Adds every histogram to `into` (name → histogram).
    fn into_map(self, into: &mut BTreeMap<String, super::DurationHistogram>) -> StoreResult<()> {
        for (name, slots) in self.0 {
            let h = super::DurationHistogram::from_dense(&slots);
            into.entry(utf8(&name)?.to_string()).or_default().merge(&h);
        }
        Ok(())
    }
}

/// What [`SledCore::count_runs`] gathers from counters before it becomes a
/// [`super::RunCounts`].
#[derive(Default)]
struct Tally {
    /// (bar start, status wire name) → runs.
    by_status: BTreeMap<(i64, &'static str), u64>,
    /// Per workflow.
    runs: DenseHistograms,
    /// Per step.
    steps: DenseHistograms,
}

impl Tally {
    fn into_counts(self, out: &mut super::RunCounts) -> StoreResult<()> {
        for ((bucket, status), n) in self.by_status {
            if let Some(st) = RunStatus::parse(status) {
                out.add_status(bucket, st, n);
            }
        }
        self.runs.into_map(&mut out.durations)?;
        self.steps.into_map(&mut out.steps)
    }
}

/// Adds a counter's stored `(bin u16, count u64)` pairs to dense `slots`.
fn add_bins(slots: &mut [u64], bins: &[u8]) -> StoreResult<()> {
    for pair in bins.chunks_exact(10) {
        let b = usize::from(u16::from_be_bytes([pair[0], pair[1]]));
        let count = u64::from_be_bytes([
            pair[2], pair[3], pair[4], pair[5], pair[6], pair[7], pair[8], pair[9],
        ]);
        match slots.get_mut(b) {
            Some(slot) => *slot = slot.saturating_add(count),
            None => {
                return Err(StoreError::Corrupt(format!(
                    "run counter holds duration bin {b}"
                )))
            }
        }
    }
    Ok(())
}

/// The kind of count cells that answers `filter`: rolled up (`r`) without a mode or trigger
/// filter, else the full cells (`c`).
fn count_kind(filter: &super::CountFilter) -> u8 {
    if filter.mode.is_none() && filter.trigger.is_none() {
        b'r'
    } else {
        b'c'
    }
}

impl super::CountFilter {
    /// True when a counter's cell passes every set filter.
    fn matches_cell(&self, c: &Cell<'_>) -> bool {
        self.workflow
            .as_deref()
            .is_none_or(|w| w.as_bytes() == c.workflow)
            && self.status.is_none_or(|s| s == c.status)
            && self.mode.is_none_or(|m| m.as_str().as_bytes() == c.mode)
            && self
                .trigger
                .is_none_or(|t| t.as_str().as_bytes() == c.trigger)
    }
}

impl SledCore {
    /// The counter rows of `kind` of the `unit` level whose unit starts in `[lo, hi)`.
    fn cells(&self, unit: i64, kind: u8, lo: i64, hi: i64) -> sled::Iter {
        let l = [level(unit), kind];
        self.tree(COUNTS).range::<Vec<u8>, _>((
            Bound::Included(cat(&l, &ts(lo))),
            Bound::Excluded(cat(&l, &ts(hi))),
        ))
    }

    /// [`super::RunStore::count_runs`]: counters for the units of the range's plan
    /// ([`super::counts::plan`]: bars from units that fit a bar, durations and failures from
    /// the coarsest units), the runs themselves at its edges.
    fn count_runs(&self, q: &super::CountQuery) -> StoreResult<super::RunCounts> {
        // What was acknowledged before this call is listed (or counted).
        self.ingest.settle();
        use super::counts::{Part, Piece};
        let mut out = super::RunCounts::default();
        if let Some(wf) = &q.filter.workflow {
            common::check_ident("workflow id", wf)?;
        }
        let mut acc = Tally::default();
        for (piece, part) in super::counts::plan(q.since, q.until, q.bucket_ms) {
            match piece {
                Piece::Exact { lo, hi } => self.count_exact(lo, hi, q, &mut out)?,
                Piece::Units { unit, lo, hi } => {
                    self.count_units(unit, lo, hi, part, q, &mut acc, &mut out)?;
                    if part != Part::Bars {
                        self.count_steps(unit, lo, hi, q, &mut acc)?;
                    }
                }
            }
        }
        acc.into_counts(&mut out)?;
        Ok(out)
    }

    /// Adds the counters of the `unit` level whose unit starts in `[lo, hi)` to `acc` (runs
    /// per bar and status unless `part` is durations only; durations unless bars only) and
    /// their failures to `out` (unless bars only).
    #[allow(clippy::too_many_arguments)]
    fn count_units(
        &self,
        unit: i64,
        lo: i64,
        hi: i64,
        part: super::counts::Part,
        q: &super::CountQuery,
        acc: &mut Tally,
        out: &mut super::RunCounts,
    ) -> StoreResult<()> {
        use super::counts::Part;
        let kind = count_kind(&q.filter);
        let (bars, durations) = (part != Part::Durations, part != Part::Bars);
        for item in self.cells(unit, kind, lo, hi) {
            let (k, val) = item.map_err(backend)?;
            let c = parse_cell(&k)?;
            if !q.filter.matches_cell(&c) {
                continue;
            }
            let (n, bins) = counter_parts(&val)?;
            if bars {
                let bucket = common::bucket_start(c.unit, q.since, q.bucket_ms);
                *acc.by_status
                    .entry((bucket, c.status.as_str()))
                    .or_default() += n;
            }
            if durations && !bins.is_empty() {
                add_bins(acc.runs.slots(c.workflow), bins)?;
            }
        }
        if !durations {
            return Ok(());
        }
        for item in self.cells(unit, b'f', lo, hi) {
            let (k, val) = item.map_err(backend)?;
            let c = parse_cell(&k)?;
            if !q.filter.matches_cell(&c) {
                continue;
            }
            let (n, _) = counter_parts(&val)?;
            let reason = utf8(c.reason)?;
            match out.failures.get_mut(reason) {
                Some(x) => *x += n,
                None => {
                    out.failures.insert(reason.to_string(), n);
                }
            }
        }
        Ok(())
    }

    /// Adds the step counters (kind `s`) of the `unit` level whose unit starts in `[lo, hi)`
    /// to `acc`, when the filter names a workflow (step durations are answered only then).
    fn count_steps(
        &self,
        unit: i64,
        lo: i64,
        hi: i64,
        q: &super::CountQuery,
        acc: &mut Tally,
    ) -> StoreResult<()> {
        let Some(wf) = &q.filter.workflow else {
            return Ok(());
        };
        let mut prefix = vec![level(unit), b's'];
        prefix.extend_from_slice(wf.as_bytes());
        prefix.push(0);
        let rows = self.tree(COUNTS).range::<Vec<u8>, _>((
            Bound::Included(cat(&prefix, &ts(lo))),
            Bound::Excluded(cat(&prefix, &ts(hi))),
        ));
        let bad = || StoreError::Corrupt("step counter key is malformed".into());
        for item in rows {
            let (k, val) = item.map_err(backend)?;
            let (_, rest) = split_ts(k.get(prefix.len()..).ok_or_else(bad)?)?;
            let mut parts = rest.splitn(4, |b| *b == 0);
            let mut next = || parts.next().ok_or_else(bad);
            let (status, mode, trigger, step) = (next()?, next()?, next()?, next()?);
            let f = &q.filter;
            if f.status.is_some_and(|s| s.as_str().as_bytes() != status)
                || f.mode.is_some_and(|m| m.as_str().as_bytes() != mode)
                || f.trigger.is_some_and(|t| t.as_str().as_bytes() != trigger)
            {
                continue;
            }
            let (_, bins) = counter_parts(&val)?;
            add_bins(acc.steps.slots(step), bins)?;
        }
        Ok(())
    }

    /// Adds the runs created in `[lo, hi)` that match, read one by one, to `out`.
    fn count_exact(
        &self,
        lo: i64,
        hi: i64,
        q: &super::CountQuery,
        out: &mut super::RunCounts,
    ) -> StoreResult<()> {
        for item in self.tree(BY_CREATED).range::<Vec<u8>, _>((
            Bound::Included(ts(lo).to_vec()),
            Bound::Excluded(ts(hi).to_vec()),
        )) {
            let (k, _) = item.map_err(backend)?;
            let id = utf8(id_after_ts(&k)?)?;
            if let Some(s) = self.summary(id)? {
                if q.filter.matches(&s) {
                    out.add_summary(&s, q);
                }
            }
        }
        Ok(())
    }

    /// The start of the first unit of the `unit` level in `[lo, hi)` holding a matching run.
    fn first_unit(
        &self,
        unit: i64,
        lo: i64,
        hi: i64,
        filter: &super::CountFilter,
    ) -> StoreResult<Option<i64>> {
        for item in self.cells(unit, count_kind(filter), lo, hi) {
            let (k, _) = item.map_err(backend)?;
            let c = parse_cell(&k)?;
            if filter.matches_cell(&c) {
                return Ok(Some(c.unit));
            }
        }
        Ok(None)
    }

    /// [`super::RunStore::oldest_run`]: the first day with a matching run, its first such
    /// hour, that hour's first such minute, then the runs of that minute.
    fn oldest_run(&self, filter: &super::CountFilter, until: i64) -> StoreResult<Option<i64>> {
        // What was acknowledged before this call is listed (or counted).
        self.ingest.settle();
        use super::counts::{DAY_MS, HOUR_MS, MINUTE_MS};
        if let Some(wf) = &filter.workflow {
            common::check_ident("workflow id", wf)?;
        }
        let mut lo = i64::MIN;
        let mut hi = until;
        for unit in [DAY_MS, HOUR_MS, MINUTE_MS] {
            match self.first_unit(unit, lo, hi, filter)? {
                Some(start) => {
                    lo = start;
                    hi = start.saturating_add(unit).min(until);
                }
                None => return Ok(None),
            }
        }
        for item in self.tree(BY_CREATED).range::<Vec<u8>, _>((
            Bound::Included(ts(lo).to_vec()),
            Bound::Excluded(ts(hi).to_vec()),
        )) {
            let (k, _) = item.map_err(backend)?;
            let id = utf8(id_after_ts(&k)?)?;
            if let Some(s) = self.summary(id)? {
                if filter.matches(&s) {
                    return Ok(Some(s.created_at.0));
                }
            }
        }
        Ok(None)
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding helpers
// ---------------------------------------------------------------------------------------------

fn backend(e: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(e.to_string())
}

fn abort(e: StoreError) -> ConflictableTransactionError<StoreError> {
    ConflictableTransactionError::Abort(e)
}

fn encode<T: Serialize>(v: &T) -> StoreResult<Vec<u8>> {
    serde_json::to_vec(v).map_err(|e| StoreError::Backend(format!("cannot encode record: {e}")))
}

fn decode<T: DeserializeOwned>(what: &str, b: &[u8]) -> StoreResult<T> {
    serde_json::from_slice(b).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

/// Marks a compressed run record: `0x01`, then the LZ4 block of its JSON with the JSON's
/// length prepended (`lz4_flex::compress_prepend_size`). A stored value that starts with `{`
/// is plain JSON (records written before compression) and still reads.
const LZ4_RECORD: u8 = 0x01;

/// A run record as stored: its JSON, LZ4-compressed. Run records are the large values of the
/// store (the payload as `input`, again as the trigger's output, the workflow snapshot, every
/// step's output), and sled 0.34 rewrites whole leaf nodes (up to 16 values each) as it
/// consolidates updates, so their size multiplies into log writes; JSON payloads compress
/// ~4x, and the trigger's copy of the input costs almost nothing (a back-reference).
fn encode_run(run: &RunRecord) -> StoreResult<Vec<u8>> {
    let json = encode(run)?;
    let mut out = Vec::with_capacity(1 + json.len() / 3);
    out.push(LZ4_RECORD);
    out.extend_from_slice(&lz4_flex::compress_prepend_size(&json));
    Ok(out)
}

/// Reads what [`encode_run`] wrote (or a plain JSON record).
fn decode_run(b: &[u8]) -> StoreResult<RunRecord> {
    match b.split_first() {
        Some((&LZ4_RECORD, block)) => {
            let json = lz4_flex::decompress_size_prepended(block)
                .map_err(|e| StoreError::Corrupt(format!("run record: {e}")))?;
            decode("run record", &json)
        }
        _ => decode("run record", b),
    }
}

fn utf8(b: &[u8]) -> StoreResult<&str> {
    std::str::from_utf8(b).map_err(|_| StoreError::Corrupt("key is not UTF-8".into()))
}

/// An instant as 8 bytes whose byte order is time order (sign bit flipped, big-endian).
fn ts(ms: i64) -> [u8; 8] {
    ((ms as u64) ^ (1 << 63)).to_be_bytes()
}

/// Splits `ts ++ rest` into the instant and `rest`.
fn split_ts(b: &[u8]) -> StoreResult<(i64, &[u8])> {
    if b.len() < 8 {
        return Err(StoreError::Corrupt("index key too short".into()));
    }
    let (head, rest) = b.split_at(8);
    let mut arr = [0u8; 8];
    arr.copy_from_slice(head);
    Ok(((u64::from_be_bytes(arr) ^ (1 << 63)) as i64, rest))
}

/// The id that follows an 8-byte instant.
fn id_after_ts(b: &[u8]) -> StoreResult<&[u8]> {
    split_ts(b).map(|(_, id)| id)
}

/// Splits `a 0x00 b` at the first NUL.
fn split_nul(b: &[u8]) -> StoreResult<(&[u8], &[u8])> {
    let i = b
        .iter()
        .position(|&c| c == 0)
        .ok_or_else(|| StoreError::Corrupt("composite key without separator".into()))?;
    Ok((&b[..i], &b[i + 1..]))
}

fn cat(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(a.len() + b.len());
    v.extend_from_slice(a);
    v.extend_from_slice(b);
    v
}

fn pair_bytes(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(a.len() + 1 + b.len());
    v.extend_from_slice(a);
    v.push(0);
    v.extend_from_slice(b);
    v
}

/// `a 0x00 b`.
fn pair(a: &str, b: &str) -> Vec<u8> {
    pair_bytes(a.as_bytes(), b.as_bytes())
}

/// `a 0x00 b 0x00`.
fn triple(a: &str, b: &str) -> Vec<u8> {
    let mut v = pair(a, b);
    v.push(0);
    v
}

/// `ts(at) ++ key`: a row of an expiry index.
fn expiry_row(at: i64, key: &[u8]) -> Vec<u8> {
    cat(&ts(at), key)
}

/// The exclusive upper bound of every key starting with `prefix` (which ends in 0x00, or is
/// empty).
fn successor(prefix: &[u8]) -> Bound<Vec<u8>> {
    match prefix.split_last() {
        Some((0, head)) => Bound::Excluded(cat(head, &[1])),
        Some(_) => {
            let mut p = prefix.to_vec();
            p.push(0xff);
            Bound::Excluded(p)
        }
        None => Bound::Unbounded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{Mode, Timestamp, Trigger};

    fn run(id: &str, created: i64, customer: &str) -> RunRecord {
        serde_json::from_value(serde_json::json!({
            "id": id, "workflow_id": "wf", "workflow_version": 1, "definition_hash": "h",
            "trigger": Trigger::Webhook, "mode": Mode::Live, "status": RunStatus::Succeeded,
            "input": {"customer": customer}, "created_at": Timestamp(created),
            "finished_at": Timestamp(created + 1),
        }))
        .expect("a run record")
    }

    /// The value index holds exactly the rows of the stored runs: a rewrite replaces a run's
    /// rows, retention removes them with the run.
    #[test]
    fn value_rows_follow_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let core = SledCore::open(&SledConfig::new(dir.path())).unwrap();
        for i in 0..10 {
            let r = run(&format!("run-{i}"), 1_000 + i, &format!("cus_{i:04}"));
            core.put_prepared(&PreparedRun::new(&r).unwrap()).unwrap();
        }
        assert_eq!(core.tree(BY_VALUE).len(), 10);
        assert_eq!(core.tree(RUN_VALUES).len(), 10);
        let r = run("run-0", 1_000, "cus_changed1");
        core.put_prepared(&PreparedRun::new(&r).unwrap()).unwrap();
        assert_eq!(core.tree(BY_VALUE).len(), 10);
        assert!(core.tree(BY_VALUE).scan_prefix("cus_0000").next().is_none());
        let policy = Retention {
            max_runs_per_workflow: Some(3),
            max_age_ms: None,
        };
        assert_eq!(core.prune_runs(&policy, 10_000).unwrap(), 7);
        assert_eq!(core.tree(BY_VALUE).len(), 3);
        assert_eq!(core.tree(RUN_VALUES).len(), 3);
    }

    fn all_counts(
        core: &SledCore,
        bucket_ms: i64,
    ) -> (super::super::RunCounts, super::super::RunCounts) {
        let q = super::super::CountQuery {
            since: 0,
            until: 10_000_000,
            bucket_ms,
            ..Default::default()
        };
        let summaries: Vec<RunSummary> = core
            .tree(SUMMARIES)
            .iter()
            .map(|item| decode("run summary", &item.unwrap().1).unwrap())
            .collect();
        (
            core.count_runs(&q).unwrap(),
            super::super::RunCounts::of_summaries(&summaries, &q),
        )
    }

    #[test]
    fn max_bin_is_the_bin_of_the_longest_duration() {
        assert_eq!(MAX_BIN, super::super::DurationHistogram::bin(u64::MAX));
    }

    /// A data dir written by an older version (no counters, runs without their value rows)
    /// gets both built when it is opened, and they stay right afterwards.
    #[test]
    fn counters_and_value_rows_are_built_for_an_older_store() {
        let dir = tempfile::tempdir().unwrap();
        let config = SledConfig::new(dir.path());
        {
            let core = SledCore::open(&config).unwrap();
            for i in 0..50 {
                let mut r = run(&format!("run-{i:02}"), 61_000 * i, &format!("cus_{i:04}"));
                if i % 3 == 0 {
                    r.status = RunStatus::Failed;
                    r.duration_ms = Some(1_000 + i as u64);
                }
                core.put_prepared(&PreparedRun::new(&r).unwrap()).unwrap();
            }
            let (got, want) = all_counts(&core, 3_600_000);
            assert_eq!(got, want);
            assert_eq!(want.total(), 50);
            // What an older version left: neither counters nor value rows.
            core.db.drop_tree(TREE_NAMES[COUNTS]).unwrap();
            core.tree(BY_VALUE).clear().unwrap();
            core.tree(RUN_VALUES).clear().unwrap();
            core.db.flush().unwrap();
        }
        let core = SledCore::open(&config).unwrap();
        for bucket_ms in [60_000, 3_600_000, 0] {
            let (got, want) = all_counts(&core, bucket_ms);
            assert_eq!(got, want);
        }
        assert_eq!(core.tree(RUN_VALUES).len(), 50);
        assert_eq!(core.tree(BY_VALUE).len(), 50);
        assert!(core.tree(BY_VALUE).scan_prefix("cus_0007").next().is_some());
        // Built once: the marker is there, and writes keep them right.
        assert!(core.tree(COUNTS).get(COUNTS_BUILT).unwrap().is_some());
        let mut r = run("run-07", 61_000 * 7, "cus_0007");
        r.status = RunStatus::TimedOut;
        core.put_prepared(&PreparedRun::new(&r).unwrap()).unwrap();
        let (got, want) = all_counts(&core, 3_600_000);
        assert_eq!(got, want);
        assert_eq!(got.counts.get("timed_out"), Some(&1));
    }
}
