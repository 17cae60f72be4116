//! Storage: the traits the engine and server program against, and their backends.
//!
//! * [`MemoryStore`]: the Memory step's persistent keys, with TTL and atomic no-overwrite writes.
//! * [`RunStore`]: run history with indexes by workflow, status, time and idempotency/event key,
//!   cursor paging (newest first), stats and retention (SPEC §4).
//! * [`IdempotencyStore`]: the server's webhook claims (claim + queued run in one transaction)
//!   and the REST API's idempotency records (SPEC §5).
//! * On a database several processes share ([`Store::shared_queue`],
//!   [`Store::shared_settings`]): [`SharedQueue`], the run queue with leases, and
//!   [`SharedSettings`], the settings and API token every process applies (SPEC §8).
//!
//! [`GroupCommit`] batches the writes of many requests (webhook claims, run states) into one
//! [`Store::write_batch`] and one flush, so an answer means durable without a sync per request.
//! sled puts the claims of a batch in its ingest [`journal`] (one append, one `fdatasync`) and
//! applies them to its trees in the background (`sled_store::ingest`).
//!
//! Backends: [`sled_store::SledStore`] (embedded, durable, the default),
//! [`postgres::PgStore`] (a PostgreSQL database shared by several processes, SPEC §8) and
//! [`mem_store::InMemoryStore`] (unit tests, benches). The traits assume nothing about a single
//! process: claims are compare-and-set, so a shared database can back them.
//!
//! Every store call is `async` (`#[async_trait]`, so the traits stay object safe behind
//! `Arc<dyn Store>`): a network database waits without holding an async thread, and sled,
//! which blocks on its log and page cache, runs each call on tokio's blocking pool. Call them
//! from inside a tokio runtime.
//!
//! All instants are UTC unix milliseconds passed in by the caller from the engine's
//! [`crate::clock::Clock`]; stores never read the wall clock themselves. A record is expired
//! when `expires_at <= now_ms`, and an expired record reads as absent everywhere, whether or
//! not a sweep ([`spawn_sweeper`]) has removed it yet.
//!
//! Memory namespaces, workflow ids, API scopes and run idempotency keys are the leading part
//! of composite keys and must not contain a NUL byte; writes that carry one fail with
//! [`StoreError::Backend`] (the server rejects such keys long before, SPEC §5).

pub mod commit;
mod common;
pub mod counts;
pub mod flight;
pub mod journal;

/// Lower the calling thread's CPU priority to nice value `nice` (Linux, where a nice value
/// is per thread: 0 normal, 19 the lowest; elsewhere nothing). Best effort: a failure leaves
/// the priority as it was. Used by the ingest journal's applier and the run runtime
/// ([`crate::app::worker::run_runtime`]).
pub fn lower_thread_priority(nice: i32) {
    #[cfg(target_os = "linux")]
    // SAFETY: `gettid` has no preconditions; `setpriority` only reads its arguments.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = nice;
}
pub mod mem_store;
/// The PostgreSQL backend ([`PgStore`]) and its pool settings ([`PgConfig`]).
pub mod postgres;
pub mod sled_store;
pub mod sweeper;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::run::{Mode, RunRecord, RunStatus, Timestamp, Trigger};

pub use commit::GroupCommit;
pub use counts::{CountFilter, CountQuery, DurationHistogram, RunCounts};
pub use mem_store::InMemoryStore;
pub use postgres::{PgConfig, PgStore};
pub use sled_store::{SledConfig, SledStore};
pub use sweeper::{spawn_sweeper, sweep_once, SweepReport};

/// A storage failure. Never carries payload contents.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// The backend failed (I/O, corruption, transaction aborted).
    #[error("store backend error: {0}")]
    Backend(String),
    /// A stored record could not be decoded.
    #[error("stored record is unreadable: {0}")]
    Corrupt(String),
    /// A fault injected by a test (see `tests/`), reported like a backend failure.
    #[error("injected fault: {0}")]
    Injected(String),
    /// The store refused the input itself (a namespace with a NUL byte, a key over
    /// [`MAX_MEMORY_KEY_BYTES`], …): not a failure of the store, and sending the same input
    /// again gives the same answer. The HTTP API answers it `400`, never `503`.
    #[error("{0}")]
    Invalid(String),
}

impl StoreError {
    /// True when the same call may succeed later (a backend failure); false when the input
    /// itself was refused ([`StoreError::Invalid`]), which no retry changes.
    pub fn is_transient(&self) -> bool {
        !matches!(self, StoreError::Invalid(_))
    }
}

/// Result alias for store operations.
pub type StoreResult<T> = Result<T, StoreError>;

// ---------------------------------------------------------------------------------------------
// Memory keys
// ---------------------------------------------------------------------------------------------

/// Longest Memory namespace, in bytes of UTF-8: 128.
pub const MAX_NAMESPACE_BYTES: usize = 128;
/// Longest Memory key, in bytes of UTF-8: 1024. Keys are often rendered from a sender's payload
/// (`{{ input.id }}`); a cap keeps one delivery from storing (and indexing) megabytes of key.
pub const MAX_MEMORY_KEY_BYTES: usize = 1024;

/// Why a Memory namespace or key was refused (the Memory step fails with [`Self::code`]; the
/// API answers `400` with it). The message names the rule and the length or position, never
/// the (possibly huge or binary) value itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryNameError {
    #[error("the namespace is empty (1-{MAX_NAMESPACE_BYTES} bytes)")]
    EmptyNamespace,
    #[error("the namespace is {len} bytes long; at most {MAX_NAMESPACE_BYTES} are allowed")]
    NamespaceTooLong { len: usize },
    #[error("the namespace has a control character (U+{code:04X}) at character {pos}; namespaces are 1-{MAX_NAMESPACE_BYTES} bytes without control characters")]
    NamespaceControl { pos: usize, code: u32 },
    #[error("the key is empty")]
    EmptyKey,
    #[error("the key is {len} bytes long; Memory keys are at most {MAX_MEMORY_KEY_BYTES} bytes (use a shorter, stable id)")]
    KeyTooLong { len: usize },
}

impl MemoryNameError {
    /// The machine code: `invalid_namespace`, `empty_key` or `key_too_long`.
    pub fn code(&self) -> &'static str {
        match self {
            MemoryNameError::EmptyNamespace
            | MemoryNameError::NamespaceTooLong { .. }
            | MemoryNameError::NamespaceControl { .. } => "invalid_namespace",
            MemoryNameError::EmptyKey => "empty_key",
            MemoryNameError::KeyTooLong { .. } => "key_too_long",
        }
    }
}

/// The namespace rule: 1–[`MAX_NAMESPACE_BYTES`] bytes of UTF-8, no control character (Unicode
/// `Cc`: NUL, newlines, DEL, …; a NUL would also break the store's `namespace 0x00 key`
/// layout). The Memory step checks it on its config and again once rendered; the API on the
/// path; the store on every write.
pub fn check_namespace(ns: &str) -> Result<(), MemoryNameError> {
    if ns.is_empty() {
        return Err(MemoryNameError::EmptyNamespace);
    }
    if ns.len() > MAX_NAMESPACE_BYTES {
        return Err(MemoryNameError::NamespaceTooLong { len: ns.len() });
    }
    if let Some((pos, c)) = ns.chars().enumerate().find(|(_, c)| c.is_control()) {
        return Err(MemoryNameError::NamespaceControl {
            pos,
            code: c as u32,
        });
    }
    Ok(())
}

/// The key rule: 1–[`MAX_MEMORY_KEY_BYTES`] bytes of UTF-8 (any characters).
pub fn check_memory_key(key: &str) -> Result<(), MemoryNameError> {
    if key.is_empty() {
        return Err(MemoryNameError::EmptyKey);
    }
    if key.len() > MAX_MEMORY_KEY_BYTES {
        return Err(MemoryNameError::KeyTooLong { len: key.len() });
    }
    Ok(())
}

/// One Memory entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryEntry {
    pub namespace: String,
    pub key: String,
    pub value: Value,
    /// When it was written (UTC unix ms).
    pub written_at: i64,
    /// When it expires (UTC unix ms); `None` = never. Measured from `written_at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    /// Who wrote it, when a Memory step of a run did (see [`ClaimOwner`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<ClaimOwner>,
}

/// The writer of a Memory entry: a run lineage's root run id and the step that wrote it.
///
/// A claim (`allow_overwrite: false`) that finds an entry owned by its own lineage and step
/// is that step's own earlier write (a resume, or crash recovery re-executing the step whose
/// record was lost): the Memory step answers it as written, so a crash between a claim and
/// its record never sends the lineage down its "already processed" branch (SPEC §4 "Resume":
/// claims made by the lineage stay its own). Another lineage, a replay included, sees
/// `exists`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ClaimOwner {
    /// The lineage's root run id ([`crate::run::RunRecord::root`]).
    pub run_id: String,
    /// The step id that wrote the entry.
    pub step_id: String,
}

impl MemoryEntry {
    /// Expired entries are treated as absent everywhere, whether or not the sweeper ran.
    pub fn is_expired(&self, now_ms: i64) -> bool {
        self.expires_at.is_some_and(|e| e <= now_ms)
    }
}

/// Options of a Memory write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteOptions<'a> {
    /// `false` = write only if the key is absent or expired (atomic; the claim primitive).
    pub allow_overwrite: bool,
    /// Time to live in **milliseconds** from the write; `None` = no expiry.
    pub ttl_ms: Option<u64>,
    /// Recorded with the entry ([`MemoryEntry::owner`]); `None` for writes outside a run.
    pub owner: Option<&'a ClaimOwner>,
}

/// Answer of a Memory write.
#[derive(Debug, Clone, PartialEq)]
pub enum WriteResult {
    /// The value was stored.
    Written { expires_at: Option<i64> },
    /// `allow_overwrite: false` and a live entry exists; nothing changed.
    Exists { existing: MemoryEntry },
}

/// Persistent Memory keys with TTL.
#[async_trait::async_trait]
pub trait MemoryStore: Send + Sync {
    /// Write `value` at `namespace`/`key`. With `allow_overwrite: false` this is an atomic
    /// claim: of any number of concurrent writers exactly one gets [`WriteResult::Written`]
    /// (compare-and-swap), the rest [`WriteResult::Exists`]. An expired entry counts as absent.
    async fn write(
        &self,
        namespace: &str,
        key: &str,
        value: &Value,
        opts: WriteOptions<'_>,
        now_ms: i64,
    ) -> StoreResult<WriteResult>;
    /// Read a live entry; an expired one is `None` even before the sweeper removes it.
    async fn read(
        &self,
        namespace: &str,
        key: &str,
        now_ms: i64,
    ) -> StoreResult<Option<MemoryEntry>>;
    /// Delete; `true` if a live entry was removed (an expired one is removed too, answering
    /// `false`).
    async fn delete(&self, namespace: &str, key: &str, now_ms: i64) -> StoreResult<bool>;
    /// Live entries of a namespace whose key starts with `prefix`, in key order, after `after`
    /// (exclusive), at most `limit`.
    async fn list(
        &self,
        namespace: &str,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
        now_ms: i64,
    ) -> StoreResult<Vec<MemoryEntry>>;
    /// Namespaces that hold at least one entry (live or not yet swept), sorted.
    async fn namespaces(&self) -> StoreResult<Vec<String>>;
    /// Remove up to `max` expired entries (earliest expiry first) using the expiry index;
    /// returns how many went.
    async fn sweep_expired(&self, now_ms: i64, max: usize) -> StoreResult<usize>;
}

// ---------------------------------------------------------------------------------------------
// Runs
// ---------------------------------------------------------------------------------------------

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The list view of a run: everything but input, steps and snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunSummary {
    pub id: String,
    pub workflow_id: String,
    pub workflow_version: u64,
    pub trigger: Trigger,
    pub mode: Mode,
    pub status: RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub idempotency_key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub replay_of: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub resume_of: Option<String>,
    /// Runs that resumed this one (a run is resumed at most once: see
    /// [`crate::runtime::resume::ResumeError::AlreadyResumed`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resumed_by: Vec<String>,
    /// Runs that replayed this one (newest last). Summaries stored before this field existed
    /// have none until their run is written again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replayed_by: Vec<String>,
    /// The run that fixed this failed one: the first later run of its lineage (a resume or a
    /// replay, or theirs) that succeeded, live for a live run. Computed when a listing is
    /// answered (`app::runs::list`), never stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub fixed_by: Option<String>,
    /// Duplicate deliveries of this run's event that were stopped (at the door, by a Memory
    /// claim, by the app's own dedupe: `app::duplicates`). Computed when a listing is answered
    /// (`app::runs::list`), never stored; absent when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub duplicates_stopped: u64,
    /// The lineage's root run id ([`RunRecord::root`]).
    #[serde(default)]
    #[schema(required = true)]
    pub root_run_id: String,
    /// The run whose `fan_out` started this one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub parent_run: Option<String>,
    pub created_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub finished_at: Option<Timestamp>,
    /// From start to finish, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub duration_ms: Option<u64>,
    /// The final error's code, if it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub error_code: Option<String>,
    /// The final error's message, if it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub error_message: Option<String>,
    /// The step the final error came from, if it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub error_step: Option<String>,
    /// The final error's HTTP status, when the failure was an HTTP answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub error_http_status: Option<u16>,
    /// Step id → how long that step took in this run (`duration_ms` of its record: every
    /// attempt and wait), in milliseconds, for the steps this run executed and finished
    /// (steps reused from an earlier run by a resume, and a step still running, are left
    /// out). The per-step percentiles of `GET /runs/stats` count them once the run has
    /// finished. Absent when empty (and on runs stored before it existed, until rewritten).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub step_durations: BTreeMap<String, u64>,
}

impl RunSummary {
    /// Why the run failed, as failures are grouped (`GET /runs/stats`) and filtered
    /// ([`RunQuery::error`]): `HTTP 500 at create` when the error was an HTTP answer, else
    /// `<code> at <step>` (`template_error at boom`); `None` without an error.
    pub fn failure_reason(&self) -> Option<String> {
        failure_reason(
            self.error_code.as_deref(),
            self.error_http_status,
            self.error_step.as_deref(),
        )
    }
}

/// [`RunSummary::failure_reason`] from its parts (a backend that reads them as columns).
pub(crate) fn failure_reason(
    code: Option<&str>,
    http_status: Option<u16>,
    step: Option<&str>,
) -> Option<String> {
    let code = code?;
    let what = match http_status {
        Some(h) => format!("HTTP {h}"),
        None => code.to_string(),
    };
    Some(match step.filter(|s| !s.is_empty()) {
        Some(step) => format!("{what} at {step}"),
        None => what,
    })
}

impl From<&RunRecord> for RunSummary {
    fn from(r: &RunRecord) -> Self {
        RunSummary {
            id: r.id.clone(),
            workflow_id: r.workflow_id.clone(),
            workflow_version: r.workflow_version,
            trigger: r.trigger,
            mode: r.mode,
            status: r.status,
            idempotency_key: r.idempotency_key.clone(),
            replay_of: r.replay_of.clone(),
            resume_of: r.resume_of.clone(),
            resumed_by: r.resumed_by.clone(),
            replayed_by: r.replayed_by.clone(),
            fixed_by: None,
            duplicates_stopped: 0,
            root_run_id: r.root().to_string(),
            parent_run: r.parent_run.clone(),
            created_at: r.created_at,
            finished_at: r.finished_at,
            duration_ms: r.duration_ms,
            error_code: r.error.as_ref().map(|e| e.code.clone()),
            error_message: r.error.as_ref().map(|e| e.message.clone()),
            error_step: r.error.as_ref().map(|e| e.step.clone()),
            error_http_status: r.error.as_ref().and_then(|e| e.http_status),
            step_durations: r
                .steps
                .iter()
                .filter(|s| s.reused_from.is_none() && s.status != crate::run::StepStatus::Running)
                .map(|s| (s.step_id.clone(), s.duration_ms))
                .collect(),
        }
    }
}

/// Filters of a run listing (SPEC §5 `GET /api/v1/runs`). All set filters must match.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunQuery {
    pub workflow: Option<String>,
    pub status: Option<RunStatus>,
    pub mode: Option<Mode>,
    pub trigger: Option<Trigger>,
    /// Exact idempotency/event key.
    pub key: Option<String>,
    /// Created at or after (UTC unix ms).
    pub since: Option<i64>,
    /// Created before (UTC unix ms).
    pub until: Option<i64>,
    /// Free search: a run id, a key, or a value inside the run's input or step outputs, each
    /// exact or by prefix (the values searched: [`SEARCH_VALUES_MAX`]).
    pub q: Option<String>,
    /// Exact failure reason ([`RunSummary::failure_reason`], e.g. `HTTP 500 at create`).
    pub error: Option<String>,
    /// Page size; callers clamp it (API: 1..=500).
    pub limit: usize,
    /// Opaque cursor from the previous page's `next_cursor` (a bare run id is accepted too;
    /// an unknown one gives an empty page).
    pub cursor: Option<String>,
}

/// Check a listing cursor as clients send it (`GET /api/v1/runs?cursor=`, `fluxo runs list
/// --cursor`, the app's history): the `next_cursor` of a page, `<created_at unix ms>:<run id>`
/// (1–19 ASCII digits, a colon, a run id), or a bare run id; a run id is a UUID in its
/// canonical hyphenated form (36 characters), which is what the engine mints. Anything else is
/// refused with the reason, so a mistyped cursor is an error (`400 invalid_cursor`), not a
/// silently empty page. (The backends themselves accept any text, for tests and tools.)
pub fn check_cursor(cursor: &str) -> Result<(), String> {
    fn run_id(id: &str) -> bool {
        id.len() == 36 && uuid::Uuid::try_parse(id).is_ok()
    }
    match cursor.split_once(':') {
        Some((ms, id)) => {
            let ms_ok = !ms.is_empty()
                && ms.len() <= 19
                && ms.bytes().all(|b| b.is_ascii_digit())
                && ms.parse::<i64>().is_ok();
            if !ms_ok {
                return Err("the part before the colon is not a time in unix milliseconds".into());
            }
            if !run_id(id) {
                return Err("the part after the colon is not a run id".into());
            }
            Ok(())
        }
        None if run_id(cursor) => Ok(()),
        None => {
            Err("it is neither a `next_cursor` (`<unix ms>:<run id>`) nor a run id".to_string())
        }
    }
}

/// The free search's value rule ([`crate::run::input::SEARCH_VALUES_MAX`] documents it).
pub use crate::run::input::{
    is_search_value, SEARCH_VALUES_MAX, SEARCH_VALUE_MAX_BYTES, SEARCH_VALUE_MIN_BYTES,
};

/// Most run summaries one [`RunStore::list_runs`] call examines when its filters are not
/// covered by an index (e.g. `mode` + `trigger`): past it the page is returned short (possibly
/// empty) with a `next_cursor`, so no request scans the whole history.
pub const LIST_SCAN_BUDGET: usize = 20_000;

/// One page of runs, newest first. A page may hold fewer than `limit` runs and still have a
/// `next_cursor` (see [`LIST_SCAN_BUDGET`]); only a missing `next_cursor` means the end. `next_cursor` is set only when more runs match.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunPage {
    pub runs: Vec<RunSummary>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub next_cursor: Option<String>,
}

/// Counts of runs by status in one time bucket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StatsBucket {
    /// Bucket start (a UTC instant; RFC 3339 in JSON).
    pub start: Timestamp,
    /// `status -> count`, only non-zero statuses.
    pub counts: std::collections::BTreeMap<String, u64>,
}

/// Retention policy (SPEC §4). Both limits apply when both are set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Keep the newest N **finished** runs per workflow, by finish time (a final run without
    /// `finished_at` counts as finished at `created_at`; ties: the higher id is newer).
    pub max_runs_per_workflow: Option<usize>,
    /// Keep finished runs whose finish time is within this many milliseconds of now
    /// (finished at or after `now_ms - max_age_ms`).
    pub max_age_ms: Option<i64>,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            max_runs_per_workflow: Some(10_000),
            max_age_ms: None,
        }
    }
}

/// Run history.
#[async_trait::async_trait]
pub trait RunStore: Send + Sync {
    /// Insert or replace a run and keep every index in step with it (atomically).
    async fn put_run(&self, run: &RunRecord) -> StoreResult<()>;
    /// One run.
    async fn get_run(&self, id: &str) -> StoreResult<Option<RunRecord>>;
    /// A page of run summaries matching every filter, newest first: by `created_at`, then by
    /// id (ids are time-sortable, so in practice this is id order). Paging by cursor has no
    /// duplicates and no gaps even while newer runs arrive.
    async fn list_runs(&self, query: &RunQuery) -> StoreResult<RunPage>;
    /// Ids of every run in `status`, oldest first by `created_at` then id (crash recovery).
    async fn run_ids_with_status(&self, status: RunStatus) -> StoreResult<Vec<String>>;
    /// Apply retention; never removes a `queued` or `running` run. Streams over the indexes.
    /// Returns how many runs were removed.
    async fn prune_runs(&self, policy: &Retention, now_ms: i64) -> StoreResult<usize>;
    /// The count aggregates of the runs matching `q.filter` created in `[q.since, q.until)`:
    /// per chart bucket and status, per status, duration histograms per workflow (and per
    /// step, when `q.filter.workflow` names one: [`RunCounts::steps`]) and failures by reason
    /// ([`counts`] says how each backend keeps them; sled answers from counters maintained
    /// with the runs, without reading them). Exact, except that a percentile read from a
    /// [`DurationHistogram`] is within 0.4% above 128 ms.
    async fn count_runs(&self, q: &CountQuery) -> StoreResult<RunCounts>;
    /// `created_at` (UTC unix ms) of the oldest run matching `filter` created before `until`;
    /// `None` when there is none.
    async fn oldest_run(&self, filter: &CountFilter, until: i64) -> StoreResult<Option<i64>>;
}

// ---------------------------------------------------------------------------------------------
// Idempotency records (server)
// ---------------------------------------------------------------------------------------------

/// A webhook delivery's claim on its key (SPEC §5): the window counts from `claimed_at` and is
/// never extended by repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WebhookClaim {
    pub workflow_id: String,
    pub key: String,
    pub run_id: String,
    pub claimed_at: i64,
    pub expires_at: i64,
}

/// Answer of [`IdempotencyStore::claim_and_enqueue`].
#[derive(Debug, Clone, PartialEq)]
pub enum ClaimOutcome {
    /// The key was free (or its window had passed): claim and queued run written together.
    Claimed,
    /// A live claim exists: the original run id; nothing was written.
    Duplicate { run_id: String },
}

/// State of a REST API idempotency record (Stripe idempotent requests; IETF
/// `draft-ietf-httpapi-idempotency-key-header`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ApiRecordState {
    /// Being processed by `owner` until `lease_until` (UTC ms); reclaimable after that.
    InProgress { owner: String, lease_until: i64 },
    /// Finished: the stored answer, replayed byte for byte.
    Done { status: u16, body: String },
}

/// A REST API idempotency record, scoped by `scope` (a hash of the API token).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiRecord {
    pub scope: String,
    pub key: String,
    /// SHA-256 of method + path + canonical JSON body.
    pub fingerprint: String,
    pub created_at: i64,
    pub expires_at: i64,
    #[serde(flatten)]
    pub state: ApiRecordState,
}

/// Answer of [`IdempotencyStore::api_begin`].
#[derive(Debug, Clone, PartialEq)]
pub enum ApiBegin {
    /// No live record: one was created `InProgress` for the caller.
    Started,
    /// A live record exists for another request (different fingerprint).
    Conflict,
    /// The same request is still being processed by a live owner.
    InProgress,
    /// The same request finished: replay this.
    Replay { status: u16, body: String },
}

/// The server's idempotency records.
#[async_trait::async_trait]
pub trait IdempotencyStore: Send + Sync {
    /// Atomically: if `claim.workflow_id`/`claim.key` has a live claim (`expires_at > now_ms`)
    /// answer `Duplicate` and write nothing; else write the claim **and** `run` (status
    /// `queued`, with its indexes) in one transaction, replacing an expired claim. The claim
    /// must name the run (`claim.run_id == run.id`, same workflow), else it is an error and
    /// nothing is written. Durability is the caller's [`Store::flush`] (group commit).
    async fn claim_and_enqueue(
        &self,
        claim: &WebhookClaim,
        run: &RunRecord,
        now_ms: i64,
    ) -> StoreResult<ClaimOutcome>;
    /// The live claim of a key, if any.
    async fn get_claim(
        &self,
        workflow_id: &str,
        key: &str,
        now_ms: i64,
    ) -> StoreResult<Option<WebhookClaim>>;
    /// Start (or join) an API request under an idempotency key. In order: no live record
    /// (`expires_at > now_ms`) → `record` is stored, `Started`; a different fingerprint →
    /// `Conflict`; `Done` → `Replay`; `InProgress` with `lease_until > now_ms` → `InProgress`;
    /// an `InProgress` record whose lease has passed is taken over (its owner died): `record`
    /// replaces it, `Started`.
    async fn api_begin(&self, record: &ApiRecord, now_ms: i64) -> StoreResult<ApiBegin>;
    /// Store the final answer of a started request (keeps its fingerprint and expiry). A
    /// no-op if the record is gone.
    async fn api_complete(
        &self,
        scope: &str,
        key: &str,
        status: u16,
        body: &str,
    ) -> StoreResult<()>;
    /// Forget a started request that failed before producing an answer worth replaying.
    /// Only an `InProgress` record is removed; a `Done` one stays.
    async fn api_abandon(&self, scope: &str, key: &str) -> StoreResult<()>;
    /// Undo a [`IdempotencyStore::claim_and_enqueue`] whose answer could not be made durable:
    /// in one transaction, remove the claim if it still names `run_id`, and that run if it is
    /// still `queued`. Returns whether the claim was removed. (A sender's retry is then
    /// accepted instead of being answered as a duplicate of a run that may not survive.)
    async fn release_claim(&self, workflow_id: &str, key: &str, run_id: &str) -> StoreResult<bool>;
    /// Remove up to `max` expired claims and API records (claims first); returns how many
    /// went. Runs are not touched.
    async fn sweep_idempotency(&self, now_ms: i64, max: usize) -> StoreResult<usize>;
}

/// One write of a batch ([`Store::write_batch`]): what the [`GroupCommit`] collects from many
/// requests and applies together. Owned, so a backend can move the batch to a blocking thread
/// (sled) and hand every write back with its outcome.
#[derive(Debug, Clone)]
pub enum BatchWrite {
    /// [`IdempotencyStore::claim_and_enqueue`], with `claim.claimed_at` as the current instant.
    ClaimAndEnqueue { claim: WebhookClaim, run: RunRecord },
    /// [`RunStore::put_run`].
    PutRun(RunRecord),
}

/// The outcome of one [`BatchWrite`].
#[derive(Debug, Clone, PartialEq)]
pub enum BatchOutcome {
    /// A `ClaimAndEnqueue`'s answer.
    Claim(ClaimOutcome),
    /// A `PutRun` was written.
    Put,
}

/// Named JSON documents shared by every process on one database (SPEC §8, "Scale-out"): the
/// app settings and the API token, so a change saved through one process applies in all of
/// them. Each document has a **revision** that grows on every write; a process polls it
/// ([`crate::app::settings::refresh`]) and applies what changed.
#[async_trait::async_trait]
pub trait SharedSettings: Send + Sync {
    /// The document `name` and its revision; `None` when it was never written.
    async fn get_document(&self, name: &str) -> StoreResult<Option<(i64, Value)>>;
    /// Replace (or create) document `name`; answers its new revision.
    async fn put_document(&self, name: &str, value: &Value) -> StoreResult<i64>;
    /// Create document `name` with `value` unless it exists (concurrent starters: the first
    /// writer wins); answers the document in force and its revision.
    async fn put_document_if_absent(&self, name: &str, value: &Value) -> StoreResult<(i64, Value)>;
}

/// A run queue shared by several processes on one database (SPEC §8, "Scale-out"), as
/// River, graphile-worker and Windmill do it: a process takes a `queued` run under a **lease**
/// (`FOR UPDATE SKIP LOCKED`, so takers never wait on each other), renews its leases by
/// heartbeat while it executes, and a `running` run whose lease expired (its process died) is
/// taken over by another process to be recovered by the resume rule
/// ([`crate::runtime::Engine::recover_running`]). Leases live apart from the runs, so run
/// writes never touch them. Instants are UTC unix ms; lease lengths are ms.
#[async_trait::async_trait]
pub trait SharedQueue: Send + Sync {
    /// Take the oldest `queued` run that no live lease holds, leased to `owner` until
    /// `now_ms + lease_ms`, and answer it as stored when taken (read in the same statement);
    /// `None` when there is none (or other takers kept winning the race for it). A live lease
    /// held by `owner` itself counts: the workers of one process share their owner, and each
    /// run is taken by one of them.
    async fn take_queued(
        &self,
        owner: &str,
        lease_ms: i64,
        now_ms: i64,
    ) -> StoreResult<Option<Taken>>;
    /// Lease `run_id` to `owner` (a run executed at once, before or after its row exists):
    /// `true` when `owner` holds it now, `false` when another live lease does.
    async fn lease(
        &self,
        run_id: &str,
        owner: &str,
        lease_ms: i64,
        now_ms: i64,
    ) -> StoreResult<bool>;
    /// Heartbeat: extend `owner`'s leases on `run_ids` to `now_ms + lease_ms`; returns the
    /// runs whose lease it still held and extended (a lease taken over, or released,
    /// meanwhile is not extended).
    async fn renew_leases(
        &self,
        owner: &str,
        run_ids: &[String],
        lease_ms: i64,
        now_ms: i64,
    ) -> StoreResult<Vec<String>>;
    /// Drop `owner`'s leases on `run_ids` (the runs ended).
    async fn release_leases(&self, owner: &str, run_ids: &[String]) -> StoreResult<()>;
    /// Take over at most `max` `running` runs that no live lease holds (their process died),
    /// leased to `owner`; oldest first. Each with its takeover count ([`Taken::takeovers`]).
    async fn take_orphans(
        &self,
        owner: &str,
        lease_ms: i64,
        now_ms: i64,
        max: usize,
    ) -> StoreResult<Vec<(String, u32)>>;
    /// Start `run_id`'s takeover count at `takeovers` (an automatic resume of a run taken
    /// over, before it is queued: it carries the count of the run it resumes). Its lease stays
    /// free to take, and its first take is not counted.
    async fn carry_takeovers(&self, run_id: &str, takeovers: u32) -> StoreResult<()>;
}

/// A run [`SharedQueue::take_queued`] took.
#[derive(Debug, Clone)]
pub struct Taken {
    /// As stored when taken.
    pub run: RunRecord,
    /// How many times its lease was taken over from a process that died holding it (this take
    /// included), plus the count an automatic resume carried ([`SharedQueue::carry_takeovers`]):
    /// the crashes it was in flight at (`app::quarantine`).
    pub takeovers: u32,
}

/// Everything the engine and server need from a backend.
#[async_trait::async_trait]
pub trait Store: MemoryStore + RunStore + IdempotencyStore {
    /// The shared run queue, on a backend several processes share (PostgreSQL); `None` (the
    /// default) for an embedded store, whose one process queues runs in memory.
    fn shared_queue(&self) -> Option<&dyn SharedQueue> {
        None
    }

    /// The documents every process on a shared database shares (the settings, the API
    /// token); `None` (the default) for an embedded store, whose one process keeps them in
    /// its data dir.
    fn shared_settings(&self) -> Option<&dyn SharedSettings> {
        None
    }

    /// How many group-commit batches of one lane may be applied at once ([`GroupCommit`]).
    /// The default, 1, is what an embedded store needs (sled serialises its transactions, and
    /// its ingest journal is synced as a whole). A backend whose batches are independent
    /// transactions that make themselves durable (PostgreSQL) answers more: one batch then
    /// need not wait for the round trips and the commit of the one before it.
    fn concurrent_batches(&self) -> usize {
        1
    }

    /// Whether the store answers now (readiness, `GET /readyz`). The default (an embedded
    /// store, open in this process) always does; PostgreSQL runs `SELECT 1` on a pooled
    /// connection, bounded by `timeout`. Errors: [`StoreError::Backend`] naming why.
    async fn ping(&self, timeout: std::time::Duration) -> StoreResult<()> {
        let _ = timeout;
        Ok(())
    }

    /// Whether a write [`Store::write_batch`] or [`GroupCommit`] answered with an error may
    /// still be seen by later writes until it is undone (the default, `true`: sled decides a
    /// batch's claims in memory and journals them; when the journal's sync fails they stay
    /// until [`IdempotencyStore::release_claim`] removes them). `false` for a store whose
    /// batch is one transaction (PostgreSQL): it rolled back, or, its commit's answer lost, it
    /// committed whole, claim and queued run together, durable either way; then a failed
    /// claim needs no undo, and the webhook ingest answers its `503` without one.
    fn failed_writes_linger(&self) -> bool {
        true
    }

    /// Make every write so far durable. sled syncs its log on the blocking pool (never
    /// `flush_async`: it deadlocks under concurrent callers, spacejam/sled#1308); a backend
    /// whose transactions commit durably (PostgreSQL) answers at once.
    async fn flush(&self) -> StoreResult<()>;

    /// Make the webhook claims written by [`Store::write_batch`] so far durable (the group
    /// commit's claims lane, [`GroupCommit`]). The default is [`Store::flush`]; sled syncs only
    /// its ingest journal, where its batches put claims ([`journal`]), not its trees.
    async fn flush_claims(&self) -> StoreResult<()> {
        self.flush().await
    }

    /// Apply `writes` in order, each with the semantics of its single-write method, and hand
    /// every write back with its result, in order. A write later in the batch sees the earlier
    /// ones (two claims of one key in a batch: the second is a `Duplicate` of the first). A
    /// write that is invalid by itself (e.g. a claim not naming its run) fails alone.
    ///
    /// The default applies them one by one. [`SledStore`] applies the whole batch as one
    /// transaction: sled 0.34 seals, writes and syncs its log twice per transaction whatever
    /// its size, so one transaction per batch is what lets a group commit scale (see
    /// [`GroupCommit`]). Not durable until [`Store::flush`].
    async fn write_batch(
        &self,
        writes: Vec<BatchWrite>,
    ) -> Vec<(BatchWrite, StoreResult<BatchOutcome>)> {
        let mut out = Vec::with_capacity(writes.len());
        for w in writes {
            let r = match &w {
                BatchWrite::ClaimAndEnqueue { claim, run } => self
                    .claim_and_enqueue(claim, run, claim.claimed_at)
                    .await
                    .map(BatchOutcome::Claim),
                BatchWrite::PutRun(run) => self.put_run(run).await.map(|()| BatchOutcome::Put),
            };
            out.push((w, r));
        }
        out
    }
}
