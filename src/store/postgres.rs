//! PostgreSQL backend: the store of several Fluxo processes sharing one database (SPEC §8).
//!
//! It answers exactly like [`crate::store::InMemoryStore`] and [`crate::store::SledStore`] (the rules live in
//! `common.rs`); `tests/store_conformance.rs` runs the same cases on all three. What makes it
//! safe across processes:
//!
//! * A Memory claim (`allow_overwrite: false`) is one `INSERT … ON CONFLICT DO UPDATE … WHERE
//!   <the existing entry has expired>`: the database decides the one winner. A loser's
//!   statement leaves the existing row locked until its transaction ends, so the entry it then
//!   reads (and answers [`WriteResult::Exists`] with) is the one that beat it.
//! * A webhook claim and its queued run are written in one statement, the claim by the same
//!   conditional upsert, a batch's claims over `unnest` arrays in key order: statements of
//!   several processes claiming the same keys wait for each other in one direction, never in
//!   a cycle (a deadlock that happens anyway is retried). A batch of distinct keys (the usual
//!   one) is that one statement, a transaction by itself, then one read of the claims that
//!   beat any of it (`claim_batch`); a key given twice in a batch is decided in a second
//!   round, inside a transaction that first takes the keys' advisory locks in hash order
//!   (`lock_claim_keys`).
//! * **The ingest inbox.** A claim's queued run is written to `run_inbox` (migration 0008):
//!   one row and one index entry, where a row of `runs` costs seven index entries and its
//!   search values two each. It is moved into `runs` ([`PgStore::move_inbox`]: deleted there
//!   and inserted here in one statement, so every snapshot has it in exactly one table) by
//!   any process's workers when `runs` has no queued run to take, and before every listing
//!   and count ([`PgStore::settle_inbox`], at most
//!   [`SETTLE_FOR`](crate::store::postgres::SETTLE_FOR)); a single run is read from either
//!   table. So the claim costs the database a third of what it did, and the rest of a
//!   queued run's writing happens when it is about to execute, which a burst puts off
//!   ([`crate::app::door_first`]).
//! * API idempotency records are read `FOR UPDATE` and decided by the shared rule.
//! * Every instant is the caller's (UTC unix ms); the database clock is never read.
//!
//! Every transaction commits durably (`synchronous_commit` as the server has it, `on` by
//! default), so [`PgStore::flush`] has nothing to do.
//!
//! The schema is `migrations/*.sql` (0001 the tables, later ones their changes), embedded in the
//! binary and applied by [`PgStore::migrate`].

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgRow};
use sqlx::{PgConnection, PgPool, Postgres, QueryBuilder, Row};

use super::common::{self, page, ApiDecision, Cursor};
use super::{
    ApiBegin, ApiRecord, ApiRecordState, BatchOutcome, BatchWrite, ClaimOutcome, ClaimOwner,
    IdempotencyStore, MemoryEntry, MemoryStore, Retention, RunPage, RunQuery, RunStore, RunSummary,
    SharedQueue, Store, StoreError, StoreResult, WebhookClaim, WriteOptions, WriteResult,
};
use crate::run::{RunRecord, RunStatus};

/// A pooled connection idle for longer than this is checked with a ping before it is used
/// (one that was used within it is handed out as is; a failure on it is a transient error
/// like any other): 5 s. PgBouncer's `server_check_delay` is the same rule (30 s by default).
const CHECK_IDLE_AFTER: Duration = Duration::from_secs(5);

/// The embedded migrations (`migrations/*.sql`).
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Rows removed per statement by the sweeps and retention; they repeat until done or `max`.
const BATCH: i64 = 1_000;

/// A free search (`q`) with at most this many candidate runs (id or key prefix matches) is
/// answered from the candidates alone; with more, it walks the listing order under
/// [`super::LIST_SCAN_BUDGET`] like any filter no index covers.
const Q_CANDIDATES_MAX: i64 = 500;

/// Most runs one move from the ingest inbox takes when a worker finds no queued run in
/// `runs` ([`SharedQueue::take_queued`]).
const MOVE_FOR_TAKE: i64 = 64;

/// Most runs one statement of [`PgStore::settle_inbox`] moves.
const MOVE_FOR_SETTLE: i64 = 1_000;

/// Longest [`PgStore::settle_inbox`] moves runs before a listing or count: 2 s (then it
/// answers from what is in `runs` by then, as sled's listings wait at most 2 s for its ingest
/// journal).
pub const SETTLE_FOR: Duration = Duration::from_secs(2);

/// How often a claim retries when the row that beat it vanished before it could be read
/// (deleted and re-inserted by others in between); each retry is a new transaction.
const CLAIM_ATTEMPTS: usize = 16;

/// How often a batch is tried when the database aborts its transaction for a deadlock or a
/// serialisation failure.
const TX_ATTEMPTS: usize = 3;

/// Connection settings of a [`PgStore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgConfig {
    /// Most connections the pool opens (default 10), and half as many again (rounded up) for
    /// the shared queue's statements (`QUEUE_SETTINGS`). Each concurrent store call holds
    /// one for its duration; the server's own limit is `max_connections` (100 by default),
    /// shared by every Fluxo process.
    pub max_connections: u32,
    /// Connections kept open while idle (default 0).
    pub min_connections: u32,
    /// Longest wait for a free pooled connection (or a new one to open), in **milliseconds**
    /// (default 5,000). Past it the call fails with a transient [`StoreError::Backend`].
    pub acquire_timeout_ms: u64,
    /// The server-side `statement_timeout` set on every connection, in **milliseconds**
    /// (default 30,000); `0` = no limit. A statement past it fails with a transient
    /// [`StoreError::Backend`] and its transaction rolls back.
    pub statement_timeout_ms: u64,
}

impl Default for PgConfig {
    fn default() -> Self {
        PgConfig {
            max_connections: 10,
            min_connections: 0,
            acquire_timeout_ms: 5_000,
            statement_timeout_ms: 30_000,
        }
    }
}

/// A store in a PostgreSQL database (13 or later; tested on 15). Cheap to clone: clones share
/// its two connection pools.
#[derive(Debug, Clone)]
pub struct PgStore {
    /// Every statement but the shared queue's: up to [`PgConfig::max_connections`].
    pool: PgPool,
    /// The shared queue's statements (the take, releasing leases) and the runs lane's batches
    /// of run writes: connections with [`QUEUE_SETTINGS`], up to half as many as `pool`
    /// (opened when first used).
    queue: PgPool,
}

/// The pool settings of [`PgConfig`] with at most `max` connections (at least one).
fn pool_options(config: &PgConfig, max: u32) -> PgPoolOptions {
    PgPoolOptions::new()
        .max_connections(max.max(1))
        .min_connections(config.min_connections.min(max.max(1)))
        .acquire_timeout(Duration::from_millis(config.acquire_timeout_ms))
        // sqlx pings every connection it hands out (a round trip before each statement: 13% of
        // this process's CPU under the webhook load); only a connection idle for longer than
        // CHECK_IDLE_AFTER is pinged, as PgBouncer's `server_check_delay` does.
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for < CHECK_IDLE_AFTER {
                    return Ok(true);
                }
                use sqlx::Connection as _;
                // A connection that does not answer is closed; the pool opens another.
                Ok(conn.ping().await.is_ok())
            })
        })
}

/// The server settings of the shared queue's connections ([`PgStore`]'s `queue` pool), which
/// run only the take ([`TAKE_QUEUED_SQL`]), lease releases, taking over orphans, the runs
/// lane's batches of run writes ([`UPSERT_RUNS_SQL`] alone), moves from the ingest inbox
/// ([`PgStore::move_inbox`]) and [`PgStore::explain_take`].
///
/// The take is prepared once per connection and runs a generic plan: no planning per take,
/// where planning it anew cost 0.29–0.35 ms of PostgreSQL CPU a take, nearly as much as
/// running it (`pg_stat_statements` under the pg×1 load; README, "Scale-out"). A generic plan
/// is fixed with the statistics of the moment it is made: on a fresh database an empty queue,
/// for which reading and sorting every queued run looked cheapest, and that plan, kept as the
/// backlog grew, cost 18 ms a take. With sequential scans, bitmap scans and sorts ruled out
/// (`enable_* = off`: the planner takes them only when nothing else can answer), the plan
/// fixed on an empty table is the one the take needs: walk `runs_queued` from its oldest
/// entry and stop at the first free run. `postgres_take_walks_the_queued_index_over_a_backlog`
/// checks the plan on an empty, analysed table and over a backlog.
///
/// The runs lane's upsert gains the same way: on the main pool PostgreSQL planned it anew on
/// every call while a backlog drained (batches of one or two runs, whose custom plans look
/// cheaper than the generic one), 0.29–0.35 ms a call; its generic plan here runs in the same
/// 0.5–0.6 ms (`pg_stat_statements`, three alternated pairs; README, "Scale-out").
const QUEUE_SETTINGS: [(&str, &str); 4] = [
    ("plan_cache_mode", "force_generic_plan"),
    ("enable_seqscan", "off"),
    ("enable_bitmapscan", "off"),
    ("enable_sort", "off"),
];

impl PgStore {
    /// Connect to `url` (`postgres://user:password@host:port/database`, libpq's other options
    /// as query parameters) with [`PgConfig::default`]. Opens one connection to check the
    /// server answers. Does not create the schema: call [`PgStore::migrate`].
    ///
    /// Errors: [`StoreError::Invalid`] for a malformed URL; [`StoreError::Backend`]
    /// (transient) when the server cannot be reached or refuses the login.
    pub async fn connect(url: &str) -> StoreResult<PgStore> {
        Self::connect_with(url, &PgConfig::default()).await
    }

    /// [`PgStore::connect`] with explicit pool settings.
    pub async fn connect_with(url: &str, config: &PgConfig) -> StoreResult<PgStore> {
        let mut options = PgConnectOptions::from_str(url).map_err(db)?;
        if config.statement_timeout_ms > 0 {
            options =
                options.options([("statement_timeout", config.statement_timeout_ms.to_string())]);
        }
        let pool = pool_options(config, config.max_connections)
            .connect_with(options.clone())
            .await;
        match pool {
            Ok(pool) => {
                let queue = pool_options(config, config.max_connections.div_ceil(2))
                    .connect_lazy_with(options.clone().options(QUEUE_SETTINGS));
                Ok(PgStore { pool, queue })
            }
            // The pool retries a refused or unreachable server until its acquire timeout and
            // then reports only the timeout: one direct attempt (bounded by the same timeout)
            // says why. Host and port only: the URL may hold a password.
            Err(sqlx::Error::PoolTimedOut) => {
                use sqlx::Connection as _;
                let limit = Duration::from_millis(config.acquire_timeout_ms);
                let why =
                    match tokio::time::timeout(limit, sqlx::PgConnection::connect_with(&options))
                        .await
                    {
                        Ok(Err(e)) => e.to_string(),
                        Ok(Ok(_)) => "it answered only after the pool had given up".to_string(),
                        Err(_) => "no answer".to_string(),
                    };
                Err(StoreError::Backend(format!(
                    "PostgreSQL at {}:{}: {why} (no connection within {} ms)",
                    options.get_host(),
                    options.get_port(),
                    config.acquire_timeout_ms
                )))
            }
            Err(e) => Err(db(e)),
        }
    }

    /// The main connection pool, every statement's but the shared queue's (tools, tests).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The versions of the migrations this database has applied (`_sqlx_migrations`), in
    /// order; empty before the first [`PgStore::migrate`]. Errors: the database's.
    pub async fn applied_migrations(&self) -> StoreResult<Vec<i64>> {
        let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
            .fetch_one(&self.pool)
            .await
            .map_err(db)?;
        if !exists {
            return Ok(Vec::new());
        }
        sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success ORDER BY version")
            .fetch_all(&self.pool)
            .await
            .map_err(db)
    }

    /// Create or upgrade the schema with the migrations embedded from `migrations/`; returns
    /// the versions applied while it ran (empty when the schema was up to date). Idempotent;
    /// safe to call from several processes at once (sqlx holds a Postgres advisory lock while
    /// it migrates, and records what it applied in `_sqlx_migrations`).
    ///
    /// Errors: [`StoreError::Backend`] when the database fails or holds a migration this
    /// binary does not know or whose text changed since it was applied.
    pub async fn migrate(&self) -> StoreResult<Vec<i64>> {
        let before = self.applied_migrations().await?;
        MIGRATOR
            .run(&self.pool)
            .await
            .map_err(|e| StoreError::Backend(format!("migration failed: {e}")))?;
        let mut after = self.applied_migrations().await?;
        after.retain(|v| !before.contains(v));
        Ok(after)
    }

    /// Runs a bounded `DELETE` (`$1` = now, `$2` = batch) until it removes fewer than asked or
    /// `max` went. The statements pick a batch's rows by the expiry index and delete them by
    /// tuple id (a TID scan, however many rows are due); a row rewritten meanwhile is a new
    /// tuple, re-checked against `expires_at <= now`, so a fresh entry is never swept.
    async fn sweep(&self, sql: &'static str, now_ms: i64, max: usize) -> StoreResult<usize> {
        let mut removed = 0usize;
        while removed < max {
            let want = to_i64(max - removed).min(BATCH);
            let n = sqlx::query(sql)
                .bind(now_ms)
                .bind(want)
                .execute(&self.pool)
                .await
                .map_err(db)?
                .rows_affected();
            removed += usize::try_from(n).unwrap_or(usize::MAX);
            if i64::try_from(n).unwrap_or(i64::MAX) < want {
                break;
            }
        }
        Ok(removed.min(max))
    }

    /// Move up to `max` runs, oldest first, from the ingest inbox into `runs` (with their
    /// search values), in one statement: each is deleted from `run_inbox` and inserted into
    /// `runs` atomically, so a snapshot sees it in exactly one of them. `wait`: rows another
    /// process is moving are waited for (and then found gone); else they are skipped. A run
    /// already in `runs` (written there since it was claimed) keeps that row. Answers how
    /// many rows left the inbox. Errors: the database's.
    pub async fn move_inbox(&self, max: i64, wait: bool) -> StoreResult<usize> {
        let sql = if wait {
            MOVE_INBOX_WAITING_SQL.as_str()
        } else {
            MOVE_INBOX_SQL.as_str()
        };
        let n: i64 = sqlx::query_scalar(sql)
            .bind(max)
            .fetch_one(&self.queue)
            .await
            .map_err(db)?;
        Ok(usize::try_from(n).unwrap_or(0))
    }

    /// Move what the ingest inbox holds into `runs` before a listing or a count reads them,
    /// so they show every run accepted before they were asked: moves until the inbox is
    /// empty, for at most [`SETTLE_FOR`] (under a burst that outlasts it, the answer shows
    /// what was moved by then). One statement when the inbox is empty. Errors: the
    /// database's.
    pub async fn settle_inbox(&self) -> StoreResult<()> {
        let t0 = std::time::Instant::now();
        while self.move_inbox(MOVE_FOR_SETTLE, true).await? > 0 && t0.elapsed() < SETTLE_FOR {}
        Ok(())
    }

    /// Runs a listing query and decodes its `summary` column.
    async fn summaries(&self, mut b: QueryBuilder<'_, Postgres>) -> StoreResult<Vec<RunSummary>> {
        let rows = b.build().fetch_all(&self.pool).await.map_err(db)?;
        rows.iter()
            .map(|r| {
                let text: String = r.try_get("summary").map_err(db)?;
                from_json("run summary", &text)
            })
            .collect()
    }

    /// One attempt at a batch: one transaction, `None` for the writes that failed their
    /// checks.
    async fn apply_batch(
        &self,
        prepared: &[StoreResult<Prepared>],
    ) -> StoreResult<Vec<Option<BatchOutcome>>> {
        // Only run writes (the group commit's runs lane): one statement, a transaction by
        // itself; no BEGIN and COMMIT round trips (two of the six a run's execution cost the
        // database, each a wake-up of its backend). On the queue's connections: its generic
        // plan, never planned per call (QUEUE_SETTINGS).
        if let Some(puts) = prepared
            .iter()
            .map(|p| match p {
                Ok(Prepared::Put(r)) => Some(r),
                _ => None,
            })
            .collect::<Option<Vec<&PreparedRun>>>()
        {
            if !puts.is_empty() {
                upsert_runs(&puts).execute(&self.queue).await.map_err(db)?;
            }
            return Ok(vec![Some(BatchOutcome::Put); puts.len()]);
        }
        let keys: Vec<&PreparedClaim> = prepared
            .iter()
            .filter_map(|p| match p {
                Ok(Prepared::Claim(c)) => Some(c),
                _ => None,
            })
            .collect();
        // Only claims, each key once (the group commit's claims lane, unless two copies of
        // a delivery arrived together): one statement, a transaction by itself (no BEGIN,
        // advisory locks or COMMIT: three of the four round trips a batch cost). It writes
        // its claims in key order, as every claiming statement does, so two of them never
        // wait for each other's rows in a cycle.
        let valid = prepared.iter().filter(|p| p.is_ok()).count();
        if keys.len() == valid && !keys.is_empty() && distinct_keys(&keys) {
            let mut conn = self.pool.acquire().await.map_err(db)?;
            let now: Vec<i64> = keys.iter().map(|c| c.claimed_at).collect();
            let mut outcomes = claim_batch(&mut conn, &keys, &now).await?.into_iter();
            return Ok(prepared
                .iter()
                .map(|p| match p {
                    Ok(_) => outcomes.next().flatten().map(BatchOutcome::Claim),
                    Err(_) => None,
                })
                .collect());
        }
        let mut tx = self.pool.begin().await.map_err(db)?;
        lock_claim_keys(&mut tx, &keys).await?;
        // Consecutive writes of one kind go in one statement per step (a batch holds one kind
        // in practice: the group commit's lanes split them); their order is kept.
        let mut out: Vec<Option<BatchOutcome>> = vec![None; prepared.len()];
        let mut i = 0;
        while i < prepared.len() {
            let claims = run_of(&prepared[i..], |p| match p {
                Prepared::Claim(c) => Some(c),
                Prepared::Put(_) => None,
            });
            if !claims.is_empty() {
                let now: Vec<i64> = claims.iter().map(|c| c.claimed_at).collect();
                let outcomes = claim_batch(&mut tx, &claims, &now).await?;
                for (k, o) in outcomes.into_iter().enumerate() {
                    let o = o.ok_or_else(|| {
                        StoreError::Backend("webhook claim did not settle under contention".into())
                    })?;
                    out[i + k] = Some(BatchOutcome::Claim(o));
                }
                i += claims.len();
                continue;
            }
            let puts = run_of(&prepared[i..], |p| match p {
                Prepared::Put(r) => Some(r),
                Prepared::Claim(_) => None,
            });
            if !puts.is_empty() {
                upsert_runs(&puts).execute(&mut *tx).await.map_err(db)?;
                out[i..i + puts.len()].fill(Some(BatchOutcome::Put));
                i += puts.len();
                continue;
            }
            i += 1; // a write that failed its checks: no outcome
        }
        tx.commit().await.map_err(db)?;
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// MemoryStore
// ---------------------------------------------------------------------------------------------

#[async_trait::async_trait]
impl MemoryStore for PgStore {
    /// [`super::MemoryStore::write`]: with `allow_overwrite: false` an atomic claim (one
    /// conditional upsert; the database serialises concurrent claimers across processes).
    async fn write(
        &self,
        namespace: &str,
        key: &str,
        value: &Value,
        opts: WriteOptions<'_>,
        now_ms: i64,
    ) -> StoreResult<WriteResult> {
        common::check_memory_write(namespace, key)?;
        if let Some(o) = opts.owner {
            no_nul("claim owner run id", &o.run_id)?;
            no_nul("claim owner step id", &o.step_id)?;
        }
        let expires_at = common::expiry(now_ms, opts.ttl_ms);
        let json = to_json("memory value", value)?;
        let owner_run = opts.owner.map(|o| o.run_id.as_str());
        let owner_step = opts.owner.map(|o| o.step_id.as_str());
        let bind = |sql| {
            sqlx::query(sql)
                .bind(namespace)
                .bind(key.as_bytes())
                .bind(json.as_str())
                .bind(now_ms)
                .bind(expires_at)
                .bind(owner_run)
                .bind(owner_step)
        };
        if opts.allow_overwrite {
            bind(MEMORY_UPSERT).execute(&self.pool).await.map_err(db)?;
            return Ok(WriteResult::Written { expires_at });
        }
        for _ in 0..CLAIM_ATTEMPTS {
            let mut tx = self.pool.begin().await.map_err(db)?;
            let won = bind(MEMORY_CLAIM)
                .fetch_optional(&mut *tx)
                .await
                .map_err(db)?;
            if won.is_some() {
                tx.commit().await.map_err(db)?;
                return Ok(WriteResult::Written { expires_at });
            }
            // The upsert locked the live entry that beat us (until this transaction ends), so
            // this read (a new snapshot) sees exactly that entry.
            let row = sqlx::query(MEMORY_SELECT)
                .bind(namespace)
                .bind(key.as_bytes())
                .fetch_optional(&mut *tx)
                .await
                .map_err(db)?;
            tx.rollback().await.map_err(db)?;
            if let Some(existing) = row.as_ref().map(memory_entry).transpose()? {
                if !existing.is_expired(now_ms) {
                    return Ok(WriteResult::Exists { existing });
                }
            }
        }
        Err(StoreError::Backend(
            "memory claim did not settle under contention".into(),
        ))
    }

    /// [`super::MemoryStore::read`].
    async fn read(
        &self,
        namespace: &str,
        key: &str,
        now_ms: i64,
    ) -> StoreResult<Option<MemoryEntry>> {
        common::check_ident("namespace", namespace)?;
        let row = sqlx::query(MEMORY_SELECT)
            .bind(namespace)
            .bind(key.as_bytes())
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
        Ok(row
            .as_ref()
            .map(memory_entry)
            .transpose()?
            .filter(|e| !e.is_expired(now_ms)))
    }

    /// [`super::MemoryStore::delete`].
    async fn delete(&self, namespace: &str, key: &str, now_ms: i64) -> StoreResult<bool> {
        common::check_ident("namespace", namespace)?;
        let row = sqlx::query(
            "DELETE FROM memory WHERE namespace = $1 AND key = $2 RETURNING expires_at",
        )
        .bind(namespace)
        .bind(key.as_bytes())
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?;
        match row {
            None => Ok(false),
            Some(row) => {
                let expires_at: Option<i64> = row.try_get("expires_at").map_err(db)?;
                Ok(expires_at.is_none_or(|e| e > now_ms))
            }
        }
    }

    /// [`super::MemoryStore::list`]: one index range (`namespace`, key from `prefix` or after
    /// `after`, below the prefix's successor).
    async fn list(
        &self,
        namespace: &str,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
        now_ms: i64,
    ) -> StoreResult<Vec<MemoryEntry>> {
        common::check_ident("namespace", namespace)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        let mut b = QueryBuilder::<Postgres>::new(MEMORY_COLUMNS);
        b.push(" FROM memory WHERE namespace = ")
            .push_bind(namespace)
            .push(" AND key >= ")
            .push_bind(prefix.as_bytes().to_vec());
        if let Some(hi) = bytes_successor(prefix.as_bytes()) {
            b.push(" AND key < ").push_bind(hi);
        }
        if let Some(a) = after {
            b.push(" AND key > ").push_bind(a.as_bytes().to_vec());
        }
        b.push(" AND (expires_at IS NULL OR expires_at > ")
            .push_bind(now_ms)
            .push(") ORDER BY key LIMIT ")
            .push_bind(to_i64(limit));
        let rows = b.build().fetch_all(&self.pool).await.map_err(db)?;
        rows.iter().map(memory_entry).collect()
    }

    /// [`super::MemoryStore::namespaces`]: a skip scan of the primary key (one index probe per
    /// namespace, however many entries each holds).
    async fn namespaces(&self) -> StoreResult<Vec<String>> {
        let rows = sqlx::query(
            "WITH RECURSIVE ns(namespace) AS ( \
               (SELECT namespace FROM memory ORDER BY namespace LIMIT 1) \
               UNION ALL \
               SELECT (SELECT m.namespace FROM memory m WHERE m.namespace > ns.namespace \
                       ORDER BY m.namespace LIMIT 1) \
               FROM ns WHERE ns.namespace IS NOT NULL) \
             SELECT namespace FROM ns WHERE namespace IS NOT NULL",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.iter()
            .map(|r| r.try_get::<String, _>("namespace").map_err(db))
            .collect()
    }

    /// [`super::MemoryStore::sweep_expired`]: earliest expiry first, by the expiry index. An
    /// entry rewritten live meanwhile is left alone (the delete re-checks its expiry).
    async fn sweep_expired(&self, now_ms: i64, max: usize) -> StoreResult<usize> {
        self.sweep(
            "DELETE FROM memory WHERE ctid = ANY(ARRAY( \
               SELECT ctid FROM memory WHERE expires_at <= $1 \
               ORDER BY expires_at LIMIT $2)) \
             AND expires_at <= $1",
            now_ms,
            max,
        )
        .await
    }
}

// ---------------------------------------------------------------------------------------------
// RunStore
// ---------------------------------------------------------------------------------------------

#[async_trait::async_trait]
impl RunStore for PgStore {
    /// [`super::RunStore::put_run`]: one upsert of the record, its summary and every indexed
    /// column.
    async fn put_run(&self, run: &RunRecord) -> StoreResult<()> {
        let prepared = PreparedRun::new(run)?;
        upsert_runs(&[&prepared])
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }

    /// [`super::RunStore::get_run`].
    async fn get_run(&self, id: &str) -> StoreResult<Option<RunRecord>> {
        if id.contains('\0') {
            return Ok(None);
        }
        // Both tables in one statement (one snapshot): a run being moved from the inbox is
        // in exactly one of them.
        let row = sqlx::query(
            "SELECT record::text AS record FROM runs WHERE id = $1 \
             UNION ALL SELECT record FROM run_inbox WHERE id = $1 LIMIT 1",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?;
        match row {
            None => Ok(None),
            Some(row) => {
                let text: String = row.try_get("record").map_err(db)?;
                from_json("run record", &text).map(Some)
            }
        }
    }

    /// [`super::RunStore::list_runs`]: newest first by `(created_at, id)`, paged by the cursor
    /// `<created_at ms>:<id>` (or a bare run id). A free search with few candidates reads
    /// just those; otherwise the listing walks the index of its most selective filter
    /// (idempotency key, workflow and/or status, else creation time) from the cursor down and
    /// examines at most [`super::LIST_SCAN_BUDGET`] runs for the filters that index does not
    /// cover (a short page with a `next_cursor` then, as the other backends do).
    async fn list_runs(&self, query: &RunQuery) -> StoreResult<RunPage> {
        self.settle_inbox().await?;
        let empty = || RunPage {
            runs: vec![],
            next_cursor: None,
        };
        let upper: Option<(i64, String)> = match query.cursor.as_deref().map(common::decode_cursor)
        {
            None => None,
            Some(Cursor::Position(p)) => Some(p),
            Some(Cursor::RunId(id)) => {
                if id.contains('\0') {
                    return Ok(empty());
                }
                let row = sqlx::query("SELECT created_at FROM runs WHERE id = $1")
                    .bind(&id)
                    .fetch_optional(&self.pool)
                    .await
                    .map_err(db)?;
                match row {
                    Some(row) => Some((row.try_get("created_at").map_err(db)?, id)),
                    None => return Ok(empty()),
                }
            }
        };
        if query.limit == 0 {
            return Ok(empty());
        }
        // Text a PostgreSQL `text` column cannot hold matches no stored run.
        let texts = [&query.workflow, &query.key, &query.q, &query.error];
        if texts
            .iter()
            .any(|t| t.as_deref().is_some_and(|s| s.contains('\0')))
        {
            return Ok(empty());
        }
        let q = query.q.as_deref().filter(|q| !q.is_empty());
        let want = to_i64(query.limit).saturating_add(1);
        let filters = Filters {
            query,
            upper: upper.as_ref(),
            q,
        };

        // A free search with few candidates: read them (three prefix ranges) and sort. The
        // rows of the three ranges are counted apart, each up to the limit (a run may be in
        // several, or have several matching values): few rows means few candidates.
        if let (None, Some(q)) = (&query.key, q) {
            let mut b = QueryBuilder::<Postgres>::new("SELECT 0::bigint");
            for (select, col) in Q_SOURCES {
                b.push(" + (SELECT count(*) FROM (").push(select);
                push_prefix(&mut b, col, q);
                b.push(" LIMIT ")
                    .push_bind(Q_CANDIDATES_MAX + 1)
                    .push(") c)");
            }
            let n: i64 = b
                .build()
                .fetch_one(&self.pool)
                .await
                .map_err(db)?
                .try_get(0)
                .map_err(db)?;
            if n <= Q_CANDIDATES_MAX {
                // Materialised, so that even a generic plan reads the two prefix ranges
                // (a bitmap OR) and sorts the few candidates, rather than walking the whole
                // listing order looking for them.
                let mut b = QueryBuilder::<Postgres>::new(
                    "WITH c AS MATERIALIZED (SELECT created_at, id, summary FROM runs WHERE id IN (",
                );
                for (i, (select, col)) in Q_SOURCES.into_iter().enumerate() {
                    if i > 0 {
                        b.push(" UNION ");
                    }
                    b.push(select);
                    push_prefix(&mut b, col, q);
                }
                b.push(")");
                filters.push(&mut b, Filter::ALL & !Filter::Q);
                b.push(
                    ") SELECT summary::text AS summary FROM c \
                     ORDER BY created_at DESC, id DESC LIMIT ",
                )
                .push_bind(want);
                let runs = self.summaries(b).await?;
                return Ok(page(runs, query.limit));
            }
        }

        // The index walked and what it leaves to check row by row.
        let covered = match (&query.key, &query.workflow, query.status) {
            (Some(_), _, _) => Filter::KEY,
            (None, Some(_), Some(_)) => Filter::WORKFLOW | Filter::STATUS,
            (None, Some(_), None) => Filter::WORKFLOW,
            (None, None, Some(_)) => Filter::STATUS,
            (None, None, None) => 0,
        } | Filter::SINCE
            | Filter::UNTIL
            | Filter::CURSOR;
        let residual = Filter::ALL & !covered & filters.set();
        let walk = |b: &mut QueryBuilder<'_, Postgres>| {
            b.push(
                "SELECT created_at, id, workflow_id, status, mode, trigger, idempotency_key, \
                 summary FROM runs WHERE TRUE",
            );
            filters.push(b, covered);
            b.push(" ORDER BY created_at DESC, id DESC");
        };
        if residual == 0 {
            let mut b = QueryBuilder::<Postgres>::new("SELECT summary::text AS summary FROM (");
            walk(&mut b);
            b.push(" LIMIT ").push_bind(want).push(") s");
            b.push(" ORDER BY created_at DESC, id DESC");
            let runs = self.summaries(b).await?;
            return Ok(page(runs, query.limit));
        }
        let budget = to_i64(super::LIST_SCAN_BUDGET);
        let mut b = QueryBuilder::<Postgres>::new("SELECT summary::text AS summary FROM (");
        walk(&mut b);
        b.push(" LIMIT ")
            .push_bind(budget)
            .push(") runs WHERE TRUE");
        filters.push(&mut b, residual);
        b.push(" ORDER BY created_at DESC, id DESC LIMIT ")
            .push_bind(want);
        let runs = self.summaries(b).await?;
        if runs.len() > query.limit {
            return Ok(page(runs, query.limit));
        }
        // Fewer matches than asked: did the walk stop at its budget? Then the next page starts
        // below the last run it examined.
        let mut b = QueryBuilder::<Postgres>::new("SELECT created_at, id FROM (");
        walk(&mut b);
        b.push(" OFFSET ").push_bind(budget - 1).push(" LIMIT 1) s");
        let edge = b.build().fetch_optional(&self.pool).await.map_err(db)?;
        let next_cursor = match edge {
            None => None,
            Some(row) => {
                let created: i64 = row.try_get("created_at").map_err(db)?;
                let id: String = row.try_get("id").map_err(db)?;
                Some(format!("{created}:{id}"))
            }
        };
        Ok(RunPage { runs, next_cursor })
    }

    /// [`super::RunStore::run_ids_with_status`].
    async fn run_ids_with_status(&self, status: RunStatus) -> StoreResult<Vec<String>> {
        self.settle_inbox().await?;
        let rows = sqlx::query("SELECT id FROM runs WHERE status = $1 ORDER BY created_at, id")
            .bind(status.as_str())
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
        rows.iter()
            .map(|r| r.try_get::<String, _>("id").map_err(db))
            .collect()
    }

    /// [`super::RunStore::count_runs`]: one `GROUP BY` over the runs of the range (by chart
    /// bucket, status, workflow, duration and failure parts), folded by the shared rules. Exact
    /// and consistent with the runs by construction; it reads every matching row.
    async fn count_runs(&self, q: &super::CountQuery) -> StoreResult<super::RunCounts> {
        let mut out = super::RunCounts::default();
        if q.since >= q.until {
            return Ok(out);
        }
        self.settle_inbox().await?;
        if let Some(wf) = &q.filter.workflow {
            common::check_ident("workflow id", wf)?;
        }
        let mut b = QueryBuilder::<Postgres>::new("SELECT ");
        push_bucket(&mut b, q.since, q.bucket_ms);
        b.push(
            " AS bucket, status, workflow_id, (summary->>'duration_ms')::bigint AS duration, \
             summary->>'error_code' AS code, (summary->>'error_http_status')::int AS http, \
             summary->>'error_step' AS step, count(*) AS n FROM runs WHERE created_at >= ",
        )
        .push_bind(q.since)
        .push(" AND created_at < ")
        .push_bind(q.until);
        push_count_filter(&mut b, &q.filter);
        b.push(" GROUP BY 1, 2, 3, 4, 5, 6, 7");
        let rows = b.build().fetch_all(&self.pool).await.map_err(db)?;
        for row in rows {
            let bucket: i64 = row.try_get("bucket").map_err(db)?;
            let status: String = row.try_get("status").map_err(db)?;
            let workflow: String = row.try_get("workflow_id").map_err(db)?;
            let duration: Option<i64> = row.try_get("duration").map_err(db)?;
            let code: Option<String> = row.try_get("code").map_err(db)?;
            let http: Option<i32> = row.try_get("http").map_err(db)?;
            let step: Option<String> = row.try_get("step").map_err(db)?;
            let n = u64::try_from(row.try_get::<i64, _>("n").map_err(db)?).unwrap_or(0);
            let status = RunStatus::parse(&status).ok_or_else(|| {
                StoreError::Corrupt(format!("a run row holds unknown status `{status}`"))
            })?;
            out.add_status(bucket, status, n);
            if let (true, Some(d)) = (status.is_final(), duration) {
                out.durations
                    .entry(workflow)
                    .or_default()
                    .record(u64::try_from(d).unwrap_or(0), n);
            }
            let http = http.and_then(|h| u16::try_from(h).ok());
            if let Some(r) = super::failure_reason(code.as_deref(), http, step.as_deref()) {
                *out.failures.entry(r).or_default() += n;
            }
        }
        if q.filter.workflow.is_some() {
            count_steps(&self.pool, q, &mut out).await?;
        }
        Ok(out)
    }

    /// [`super::RunStore::oldest_run`]: the first row of the filter's index.
    async fn oldest_run(
        &self,
        filter: &super::CountFilter,
        until: i64,
    ) -> StoreResult<Option<i64>> {
        if let Some(wf) = &filter.workflow {
            common::check_ident("workflow id", wf)?;
        }
        self.settle_inbox().await?;
        let mut b =
            QueryBuilder::<Postgres>::new("SELECT min(created_at) FROM runs WHERE created_at < ");
        b.push_bind(until);
        push_count_filter(&mut b, filter);
        let min: Option<i64> = b
            .build_query_scalar::<Option<i64>>()
            .fetch_one(&self.pool)
            .await
            .map_err(db)?;
        Ok(min)
    }

    /// [`super::RunStore::prune_runs`]: ranks each workflow's finished runs by the retention
    /// index and deletes the doomed ones in batches; never a `queued` or `running` run.
    async fn prune_runs(&self, policy: &Retention, now_ms: i64) -> StoreResult<usize> {
        if policy.max_runs_per_workflow.is_none() && policy.max_age_ms.is_none() {
            return Ok(0);
        }
        let keep = policy.max_runs_per_workflow.map(to_i64);
        let cutoff = policy.max_age_ms.map(|age| now_ms.saturating_sub(age));
        let mut removed = 0usize;
        loop {
            // The doomed ids of one batch, streamed from the retention index (each workflow's
            // finished runs, newest first), then deleted by primary key.
            let doomed: Vec<String> = sqlx::query_scalar(
                "SELECT id FROM ( \
                   SELECT id, retain_at, row_number() OVER ( \
                     PARTITION BY workflow_id ORDER BY retain_at DESC, id DESC) AS rn \
                   FROM runs WHERE retain_at IS NOT NULL) ranked \
                 WHERE ($1::bigint IS NOT NULL AND rn > $1::bigint) \
                    OR ($2::bigint IS NOT NULL AND retain_at < $2::bigint) \
                 LIMIT $3",
            )
            .bind(keep)
            .bind(cutoff)
            .bind(BATCH)
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
            if doomed.is_empty() {
                return Ok(removed);
            }
            // The runs and their search values in one statement (`run_values` has no foreign
            // key: migration 0007).
            let n: i64 = sqlx::query_scalar(
                "WITH d AS (DELETE FROM runs WHERE id = ANY($1) AND retain_at IS NOT NULL \
                   AND status NOT IN ('queued', 'running') RETURNING id), \
                 v AS (DELETE FROM run_values WHERE run_id IN (SELECT id FROM d)) \
                 SELECT count(*) FROM d",
            )
            .bind(&doomed)
            .fetch_one(&self.pool)
            .await
            .map_err(db)?;
            // Value rows the statement's snapshot could not see: written by a write of one of
            // these runs that committed while it was being deleted (the delete then removed
            // the rewritten row; a run written again after the delete keeps its values).
            sqlx::query(
                "DELETE FROM run_values v WHERE v.run_id = ANY($1) \
                 AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.id = v.run_id)",
            )
            .bind(&doomed)
            .execute(&self.pool)
            .await
            .map_err(db)?;
            removed += usize::try_from(n).unwrap_or(usize::MAX);
            if to_i64(doomed.len()) < BATCH || n == 0 {
                return Ok(removed);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// IdempotencyStore
// ---------------------------------------------------------------------------------------------

#[async_trait::async_trait]
impl IdempotencyStore for PgStore {
    /// [`super::IdempotencyStore::claim_and_enqueue`]: claim and queued run in one
    /// transaction; a live claim answers `Duplicate` and nothing is written. Durable on return.
    async fn claim_and_enqueue(
        &self,
        claim: &WebhookClaim,
        run: &RunRecord,
        now_ms: i64,
    ) -> StoreResult<ClaimOutcome> {
        let prepared = PreparedClaim::new(claim, run)?;
        for _ in 0..CLAIM_ATTEMPTS {
            let mut tx = self.pool.begin().await.map_err(db)?;
            lock_claim_keys(&mut tx, &[&prepared]).await?;
            let outcome = claim_batch(&mut tx, &[&prepared], &[now_ms]).await?;
            match outcome.into_iter().next().flatten() {
                Some(ClaimOutcome::Claimed) => {
                    tx.commit().await.map_err(db)?;
                    return Ok(ClaimOutcome::Claimed);
                }
                Some(dup) => {
                    tx.rollback().await.map_err(db)?;
                    return Ok(dup);
                }
                None => tx.rollback().await.map_err(db)?,
            }
        }
        Err(StoreError::Backend(
            "webhook claim did not settle under contention".into(),
        ))
    }

    /// [`super::IdempotencyStore::get_claim`].
    async fn get_claim(
        &self,
        workflow_id: &str,
        key: &str,
        now_ms: i64,
    ) -> StoreResult<Option<WebhookClaim>> {
        common::check_ident("workflow id", workflow_id)?;
        if key.contains('\0') {
            return Ok(None);
        }
        let row = sqlx::query(
            "SELECT workflow_id, key, run_id, claimed_at, expires_at FROM webhook_claims \
             WHERE workflow_id = $1 AND key = $2 AND expires_at > $3",
        )
        .bind(workflow_id)
        .bind(key)
        .bind(now_ms)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?;
        row.map(|r| {
            Ok(WebhookClaim {
                workflow_id: r.try_get("workflow_id").map_err(db)?,
                key: r.try_get("key").map_err(db)?,
                run_id: r.try_get("run_id").map_err(db)?,
                claimed_at: r.try_get("claimed_at").map_err(db)?,
                expires_at: r.try_get("expires_at").map_err(db)?,
            })
        })
        .transpose()
    }

    /// [`super::IdempotencyStore::api_begin`]: the record is read `FOR UPDATE` and decided by
    /// the shared rule (fresh, conflict, replay, live lease, dead lease taken over).
    async fn api_begin(&self, record: &ApiRecord, now_ms: i64) -> StoreResult<ApiBegin> {
        common::check_ident("scope", &record.scope)?;
        no_nul("idempotency key", &record.key)?;
        no_nul("fingerprint", &record.fingerprint)?;
        let state = to_json("API record state", &record.state)?;
        for _ in 0..CLAIM_ATTEMPTS {
            let mut tx = self.pool.begin().await.map_err(db)?;
            let row = sqlx::query(
                "SELECT scope, key, fingerprint, created_at, expires_at, state::text AS state \
                 FROM api_records WHERE scope = $1 AND key = $2 FOR UPDATE",
            )
            .bind(&record.scope)
            .bind(&record.key)
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?;
            let existing = row.as_ref().map(api_record).transpose()?;
            match common::api_decide(existing.as_ref(), record, now_ms) {
                ApiDecision::Answer(a) => {
                    tx.rollback().await.map_err(db)?;
                    return Ok(a);
                }
                ApiDecision::Start => {
                    let sql = if existing.is_some() {
                        "UPDATE api_records SET fingerprint = $3, created_at = $4, \
                         expires_at = $5, state = $6::json, in_progress = $7 \
                         WHERE scope = $1 AND key = $2"
                    } else {
                        "INSERT INTO api_records (scope, key, fingerprint, created_at, \
                         expires_at, state, in_progress) \
                         VALUES ($1, $2, $3, $4, $5, $6::json, $7) \
                         ON CONFLICT (scope, key) DO NOTHING"
                    };
                    let n = sqlx::query(sql)
                        .bind(&record.scope)
                        .bind(&record.key)
                        .bind(&record.fingerprint)
                        .bind(record.created_at)
                        .bind(record.expires_at)
                        .bind(state.as_str())
                        .bind(matches!(record.state, ApiRecordState::InProgress { .. }))
                        .execute(&mut *tx)
                        .await
                        .map_err(db)?
                        .rows_affected();
                    if n == 1 {
                        tx.commit().await.map_err(db)?;
                        return Ok(ApiBegin::Started);
                    }
                    // Another request inserted the key since our read: decide again.
                    tx.rollback().await.map_err(db)?;
                }
            }
        }
        Err(StoreError::Backend(
            "API idempotency record did not settle under contention".into(),
        ))
    }

    /// [`super::IdempotencyStore::api_complete`]: keeps fingerprint and expiry; a no-op if the
    /// record is gone.
    async fn api_complete(
        &self,
        scope: &str,
        key: &str,
        status: u16,
        body: &str,
    ) -> StoreResult<()> {
        common::check_ident("scope", scope)?;
        if key.contains('\0') {
            return Ok(());
        }
        let state = to_json(
            "API record state",
            &ApiRecordState::Done {
                status,
                body: body.to_string(),
            },
        )?;
        sqlx::query(
            "UPDATE api_records SET state = $3::json, in_progress = FALSE \
             WHERE scope = $1 AND key = $2",
        )
        .bind(scope)
        .bind(key)
        .bind(state)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(())
    }

    /// [`super::IdempotencyStore::api_abandon`]: removes only an `in_progress` record.
    async fn api_abandon(&self, scope: &str, key: &str) -> StoreResult<()> {
        common::check_ident("scope", scope)?;
        if key.contains('\0') {
            return Ok(());
        }
        sqlx::query("DELETE FROM api_records WHERE scope = $1 AND key = $2 AND in_progress")
            .bind(scope)
            .bind(key)
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }

    /// [`super::IdempotencyStore::release_claim`]: in one transaction, the claim if it still
    /// names `run_id`, and that run if it is still `queued` (in the ingest inbox or moved).
    async fn release_claim(&self, workflow_id: &str, key: &str, run_id: &str) -> StoreResult<bool> {
        if [workflow_id, key, run_id].iter().any(|s| s.contains('\0')) {
            return Ok(false);
        }
        let mut tx = self.pool.begin().await.map_err(db)?;
        let released = sqlx::query(
            "DELETE FROM webhook_claims WHERE workflow_id = $1 AND key = $2 AND run_id = $3",
        )
        .bind(workflow_id)
        .bind(key)
        .bind(run_id)
        .execute(&mut *tx)
        .await
        .map_err(db)?
        .rows_affected()
            > 0;
        if released {
            // The queued run, in the inbox or in `runs` with its search values (`run_values`
            // has no foreign key).
            sqlx::query(
                "WITH i AS (DELETE FROM run_inbox WHERE id = $1), \
                 d AS (DELETE FROM runs WHERE id = $1 AND status = 'queued' RETURNING id) \
                 DELETE FROM run_values WHERE run_id IN (SELECT id FROM d)",
            )
            .bind(run_id)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        }
        tx.commit().await.map_err(db)?;
        Ok(released)
    }

    /// [`super::IdempotencyStore::sweep_idempotency`]: expired claims first, then API
    /// records, `max` in all.
    async fn sweep_idempotency(&self, now_ms: i64, max: usize) -> StoreResult<usize> {
        let claims = self
            .sweep(
                "DELETE FROM webhook_claims WHERE ctid = ANY(ARRAY( \
                   SELECT ctid FROM webhook_claims WHERE expires_at <= $1 \
                   ORDER BY expires_at LIMIT $2)) \
                 AND expires_at <= $1",
                now_ms,
                max,
            )
            .await?;
        let api = self
            .sweep(
                "DELETE FROM api_records WHERE ctid = ANY(ARRAY( \
                   SELECT ctid FROM api_records WHERE expires_at <= $1 \
                   ORDER BY expires_at LIMIT $2)) \
                 AND expires_at <= $1",
                now_ms,
                max - claims,
            )
            .await?;
        Ok(claims + api)
    }
}

// ---------------------------------------------------------------------------------------------
// Store
// ---------------------------------------------------------------------------------------------

#[async_trait::async_trait]
impl Store for PgStore {
    fn shared_queue(&self) -> Option<&dyn SharedQueue> {
        Some(self)
    }

    fn shared_settings(&self) -> Option<&dyn super::SharedSettings> {
        Some(self)
    }

    /// [`super::Store::flush`]: nothing to do. Every call above commits its own transaction,
    /// and PostgreSQL has made a commit durable (WAL flushed, with the server's default
    /// `synchronous_commit = on`) before it answers.
    async fn flush(&self) -> StoreResult<()> {
        Ok(())
    }

    /// [`super::Store::ping`]: `SELECT 1` within `timeout` on a connection of each pool, the
    /// main one and the queue's (whose server settings a connection pooler could refuse).
    async fn ping(&self, timeout: Duration) -> StoreResult<()> {
        let both = async {
            sqlx::query("SELECT 1").execute(&self.pool).await?;
            sqlx::query("SELECT 1").execute(&self.queue).await
        };
        match tokio::time::timeout(timeout, both).await {
            Ok(done) => done.map(|_| ()).map_err(db),
            Err(_) => Err(StoreError::Backend(format!(
                "PostgreSQL did not answer within {} ms",
                timeout.as_millis()
            ))),
        }
    }

    /// [`super::Store::failed_writes_linger`]: no (a batch is one transaction).
    fn failed_writes_linger(&self) -> bool {
        false
    }

    /// [`super::Store::concurrent_batches`]: two. Each batch is a transaction of its own,
    /// durable at its commit, and claims of one key in two batches queue up on the key's
    /// claim row (or its advisory lock, `lock_claim_keys`), so the second sees the first.
    /// Measured when each batch was a transaction of four round trips: with one batch at a
    /// time the door waited for each batch's round trips and commit. pg×1 under 10 s of new
    /// keys (64 connections, 8 workers, a fresh database each), four alternated pairs: one at
    /// a time 1,655–1,974 req/s (mean 1,771), two 1,885–2,025 (mean 1,938); four were no
    /// better than two (README, "Webhook ingest"); with a batch of one statement (2026-12-04),
    /// four were no better either (pg×1: 7,172–7,555 req/s against 7,265–7,522).
    fn concurrent_batches(&self) -> usize {
        2
    }

    /// [`super::Store::write_batch`]: the whole batch in one transaction (one commit, one WAL
    /// flush), each write with its single-write semantics and seeing the earlier ones (a
    /// second claim of a key is a `Duplicate` of the first), every write handed back with its
    /// result. Writes are checked and serialised before the transaction, so an invalid one
    /// fails alone; a database failure fails the whole batch (nothing of it is written).
    /// Durable on return.
    async fn write_batch(
        &self,
        writes: Vec<BatchWrite>,
    ) -> Vec<(BatchWrite, StoreResult<BatchOutcome>)> {
        let prepared: Vec<StoreResult<Prepared>> = writes
            .iter()
            .map(|w| match w {
                BatchWrite::ClaimAndEnqueue { claim, run } => {
                    PreparedClaim::new(claim, run).map(Prepared::Claim)
                }
                BatchWrite::PutRun(run) => PreparedRun::new(run).map(Prepared::Put),
            })
            .collect();
        // Batches of several processes may lock the same claims in different orders: the
        // database then aborts one of them (deadlock, SQLSTATE 40P01), which is retried whole.
        let mut applied = Err(StoreError::Backend("batch not applied".into()));
        for _ in 0..TX_ATTEMPTS {
            applied = self.apply_batch(&prepared).await;
            match &applied {
                Err(e) if retryable(e) => continue,
                _ => break,
            }
        }
        let results: Vec<StoreResult<BatchOutcome>> = match applied {
            Ok(outcomes) => prepared
                .into_iter()
                .zip(outcomes)
                .map(|(p, o)| match (p, o) {
                    (Err(e), _) => Err(e),
                    (Ok(_), Some(o)) => Ok(o),
                    (Ok(_), None) => {
                        Err(StoreError::Backend("batch write lost its outcome".into()))
                    }
                })
                .collect(),
            Err(e) => prepared
                .into_iter()
                .map(|p| Err(p.err().unwrap_or_else(|| e.clone())))
                .collect(),
        };
        writes.into_iter().zip(results).collect()
    }
}

// ---------------------------------------------------------------------------------------------
// SQL and row mapping
// ---------------------------------------------------------------------------------------------

const MEMORY_COLUMNS: &str = "SELECT namespace, key, value::text AS value, written_at, \
     expires_at, owner_run, owner_step";

const MEMORY_SELECT: &str = "SELECT namespace, key, value::text AS value, written_at, \
     expires_at, owner_run, owner_step FROM memory WHERE namespace = $1 AND key = $2";

/// An overwriting Memory write: always stores.
const MEMORY_UPSERT: &str = "INSERT INTO memory AS m \
     (namespace, key, value, written_at, expires_at, owner_run, owner_step) \
     VALUES ($1, $2, $3::json, $4, $5, $6, $7) \
     ON CONFLICT (namespace, key) DO UPDATE SET value = EXCLUDED.value, \
     written_at = EXCLUDED.written_at, expires_at = EXCLUDED.expires_at, \
     owner_run = EXCLUDED.owner_run, owner_step = EXCLUDED.owner_step";

/// A Memory claim: stores only over nothing or over an expired entry (`expires_at <= now`,
/// `$4` being both now and the new `written_at`); returns a row only when it stored. When it
/// does not, the existing row stays locked until the transaction ends.
const MEMORY_CLAIM: &str = "INSERT INTO memory AS m \
     (namespace, key, value, written_at, expires_at, owner_run, owner_step) \
     VALUES ($1, $2, $3::json, $4, $5, $6, $7) \
     ON CONFLICT (namespace, key) DO UPDATE SET value = EXCLUDED.value, \
     written_at = EXCLUDED.written_at, expires_at = EXCLUDED.expires_at, \
     owner_run = EXCLUDED.owner_run, owner_step = EXCLUDED.owner_step \
     WHERE m.expires_at IS NOT NULL AND m.expires_at <= $4 \
     RETURNING 1";

fn memory_entry(row: &PgRow) -> StoreResult<MemoryEntry> {
    let key: Vec<u8> = row.try_get("key").map_err(db)?;
    let key = String::from_utf8(key)
        .map_err(|_| StoreError::Corrupt("a Memory key is not UTF-8".into()))?;
    let value: String = row.try_get("value").map_err(db)?;
    let owner_run: Option<String> = row.try_get("owner_run").map_err(db)?;
    let owner_step: Option<String> = row.try_get("owner_step").map_err(db)?;
    Ok(MemoryEntry {
        namespace: row.try_get("namespace").map_err(db)?,
        key,
        value: from_json("memory value", &value)?,
        written_at: row.try_get("written_at").map_err(db)?,
        expires_at: row.try_get("expires_at").map_err(db)?,
        owner: match (owner_run, owner_step) {
            (Some(run_id), Some(step_id)) => Some(ClaimOwner { run_id, step_id }),
            _ => None,
        },
    })
}

fn api_record(row: &PgRow) -> StoreResult<ApiRecord> {
    let state: String = row.try_get("state").map_err(db)?;
    Ok(ApiRecord {
        scope: row.try_get("scope").map_err(db)?,
        key: row.try_get("key").map_err(db)?,
        fingerprint: row.try_get("fingerprint").map_err(db)?,
        created_at: row.try_get("created_at").map_err(db)?,
        expires_at: row.try_get("expires_at").map_err(db)?,
        state: from_json("API idempotency record", &state)?,
    })
}

/// A run checked and serialised once, outside any transaction.
struct PreparedRun {
    id: String,
    workflow_id: String,
    status: &'static str,
    mode: &'static str,
    trigger: &'static str,
    idempotency_key: Option<String>,
    created_at: i64,
    finished_at: Option<i64>,
    retain_at: Option<i64>,
    root_run_id: String,
    parent_run: Option<String>,
    summary: String,
    record: String,
    /// The free search's values ([`super::SEARCH_VALUES_MAX`]), kept in `run_values`.
    values: Vec<String>,
}

impl PreparedRun {
    fn new(run: &RunRecord) -> StoreResult<Self> {
        common::check_run(run)?;
        no_nul("run id", &run.id)?;
        no_nul("root run id", &run.root_run_id)?;
        if let Some(p) = &run.parent_run {
            no_nul("parent run id", p)?;
        }
        let summary = RunSummary::from(run);
        Ok(PreparedRun {
            id: run.id.clone(),
            workflow_id: run.workflow_id.clone(),
            status: run.status.as_str(),
            mode: run.mode.as_str(),
            trigger: run.trigger.as_str(),
            idempotency_key: run.idempotency_key.clone(),
            created_at: run.created_at.0,
            finished_at: run.finished_at.map(|t| t.0),
            retain_at: common::record_retention_instant(run),
            root_run_id: summary.root_run_id.clone(),
            parent_run: run.parent_run.clone(),
            summary: to_json("run summary", &summary)?,
            record: to_json("run record", run)?,
            values: common::search_values(run),
        })
    }
}

/// One write of a batch, checked and serialised outside the transaction.
enum Prepared {
    Claim(PreparedClaim),
    Put(PreparedRun),
}

/// A webhook claim and its queued run, checked and serialised outside the transaction.
struct PreparedClaim {
    workflow_id: String,
    key: String,
    run_id: String,
    claimed_at: i64,
    expires_at: i64,
    run: PreparedRun,
}

impl PreparedClaim {
    fn new(claim: &WebhookClaim, run: &RunRecord) -> StoreResult<Self> {
        common::check_claim_run(claim, run)?;
        no_nul("webhook key", &claim.key)?;
        Ok(PreparedClaim {
            workflow_id: claim.workflow_id.clone(),
            key: claim.key.clone(),
            run_id: claim.run_id.clone(),
            claimed_at: claim.claimed_at,
            expires_at: claim.expires_at,
            run: PreparedRun::new(run)?,
        })
    }
}

/// Whether no `(workflow_id, key)` appears twice among `claims` (then [`claim_batch`] decides
/// them in one round, one statement).
fn distinct_keys(claims: &[&PreparedClaim]) -> bool {
    let mut seen = std::collections::HashSet::with_capacity(claims.len());
    claims
        .iter()
        .all(|c| seen.insert((c.workflow_id.as_str(), c.key.as_str())))
}

/// Advisory lock class of webhook claim keys (`pg_advisory_xact_lock(class, hash)`; the
/// two-key form never overlaps the one-key locks sqlx's migrator takes).
const CLAIM_LOCK_CLASS: i32 = 0x464C_5843; // "FLXC"

/// Takes the transaction-scoped advisory locks of the claims' keys, in hash order, before any
/// claim row is touched. Every claim path does this, so two transactions never wait for each
/// other's claim rows in a cycle: batches of several processes claiming the same keys in
/// different orders queue up instead of deadlocking.
async fn lock_claim_keys(conn: &mut PgConnection, claims: &[&PreparedClaim]) -> StoreResult<()> {
    if claims.is_empty() {
        return Ok(());
    }
    let workflows: Vec<&str> = claims.iter().map(|c| c.workflow_id.as_str()).collect();
    let keys: Vec<&str> = claims.iter().map(|c| c.key.as_str()).collect();
    sqlx::query(
        "SELECT pg_advisory_xact_lock($1, h) FROM ( \
           SELECT DISTINCT hashtext(length(w)::text || ':' || w || k) AS h \
           FROM unnest($2::text[], $3::text[]) AS t(w, k) ORDER BY h) s",
    )
    .bind(CLAIM_LOCK_CLASS)
    .bind(&workflows)
    .bind(&keys)
    .execute(&mut *conn)
    .await
    .map_err(db)?;
    Ok(())
}

/// Claim `i` decided at `now_ms[i]`: a live claim of its key (`expires_at > now`) answers
/// `Duplicate` and writes nothing; else the claim (replacing an expired one) and its queued
/// run are written. `None`: the claim that beat it vanished before it could be read (retry in
/// a new transaction). On `conn` inside a transaction holding the claims' key locks
/// ([`lock_claim_keys`]), or, for claims of distinct keys, outside one: the statement is then
/// a transaction by itself, and a claim that beat one of them was committed before the
/// statement ended (it waited for it), so the read after it finds it unless it expired or was
/// released meanwhile.
///
/// The claims are decided in order, as one by one, in a statement or two whatever their
/// number ([`CLAIM_SQL`]: the claims and the runs of those that won; then the claims that beat
/// the others, if any lost): a key given again in the batch is decided in a second round that
/// sees the first.
async fn claim_batch(
    conn: &mut PgConnection,
    claims: &[&PreparedClaim],
    now_ms: &[i64],
) -> StoreResult<Vec<Option<ClaimOutcome>>> {
    // Round r holds the (r+1)-th occurrence of each key: keys are distinct within a round.
    let mut round = vec![0usize; claims.len()];
    let mut seen: HashMap<(&str, &str), usize> = HashMap::new();
    for (i, c) in claims.iter().enumerate() {
        let n = seen.entry((&c.workflow_id, &c.key)).or_insert(0);
        round[i] = *n;
        *n += 1;
    }
    let rounds = round.iter().max().map_or(0, |r| r + 1);
    let mut out = vec![None; claims.len()];
    for r in 0..rounds {
        let at: Vec<usize> = (0..claims.len()).filter(|&i| round[i] == r).collect();
        // A row the database answers with, back to its claim (keys are distinct in a round).
        let claim_of: HashMap<(&str, &str), usize> = at
            .iter()
            .map(|&i| ((claims[i].workflow_id.as_str(), claims[i].key.as_str()), i))
            .collect();
        let text = |at: &[usize], f: fn(&PreparedClaim) -> &str| -> Vec<&str> {
            at.iter().map(|&i| f(claims[i])).collect()
        };
        let int = |f: fn(&PreparedClaim) -> i64| -> Vec<i64> {
            at.iter().map(|&i| f(claims[i])).collect()
        };
        let runs: Vec<&PreparedRun> = at.iter().map(|&i| &claims[i].run).collect();
        let query = sqlx::query(CLAIM_SQL.as_str())
            .bind(text(&at, |c| &c.workflow_id))
            .bind(text(&at, |c| &c.key))
            .bind(text(&at, |c| &c.run_id))
            .bind(int(|c| c.claimed_at))
            .bind(int(|c| c.expires_at))
            .bind(at.iter().map(|&i| now_ms[i]).collect::<Vec<_>>());
        let won = bind_runs(query, &runs)
            .fetch_all(&mut *conn)
            .await
            .map_err(db)?;
        for row in &won {
            let w: &str = row.try_get("workflow_id").map_err(db)?;
            let k: &str = row.try_get("key").map_err(db)?;
            if let Some(&i) = claim_of.get(&(w, k)) {
                out[i] = Some(ClaimOutcome::Claimed);
            }
        }
        let lost: Vec<usize> = at.into_iter().filter(|&i| out[i].is_none()).collect();
        if lost.is_empty() {
            continue;
        }
        // The live claims that beat these: locked by the upsert above until the transaction
        // ends, or (outside one) committed; a claim whose row is gone or expired stays
        // `None`.
        let rows: Vec<(String, String, String, i64)> = sqlx::query_as(
            "SELECT c.workflow_id, c.key, c.run_id, c.expires_at FROM webhook_claims c \
             JOIN unnest($1::text[], $2::text[]) AS t(workflow_id, key) \
               ON c.workflow_id = t.workflow_id AND c.key = t.key",
        )
        .bind(text(&lost, |c| &c.workflow_id))
        .bind(text(&lost, |c| &c.key))
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
        for (w, k, run_id, expires_at) in rows {
            let i = claim_of.get(&(w.as_str(), k.as_str())).copied();
            if let Some(i) = i.filter(|&i| expires_at > now_ms[i]) {
                out[i] = Some(ClaimOutcome::Duplicate { run_id });
            }
        }
    }
    Ok(out)
}

/// [`claim_batch`]'s statement for one round: the claims (`$1`–`$6`: workflow ids, keys, run
/// ids, claimed at, expires at, now, one element per claim) are inserted, replacing only
/// expired ones; the queued runs of those that won ([`runs_ctes`] from `$7`) go to the ingest
/// inbox, each with its search values as an array. Answers the claims that won
/// (`workflow_id`, `key`).
///
/// The claims are written in `(workflow_id, key)` order: statements of several processes
/// claiming overlapping keys outside a transaction ([`claim_batch`]) then wait for each other
/// in one direction only, never in a cycle.
///
/// A claim's run is new (its id made for this delivery), so it is inserted, not upserted: a
/// run id already in the inbox fails the statement (a unique violation) rather than
/// overwriting a run.
static CLAIM_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH ci AS (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int8[], \
           $5::int8[], $6::int8[]) AS t(workflow_id, key, run_id, claimed_at, expires_at, now_ms)), \
         won AS (INSERT INTO webhook_claims AS c (workflow_id, key, run_id, claimed_at, expires_at) \
           SELECT workflow_id, key, run_id, claimed_at, expires_at FROM ci \
           ORDER BY workflow_id, key \
           ON CONFLICT (workflow_id, key) DO UPDATE SET run_id = EXCLUDED.run_id, \
             claimed_at = EXCLUDED.claimed_at, expires_at = EXCLUDED.expires_at \
           WHERE c.expires_at <= (SELECT ci.now_ms FROM ci \
             WHERE ci.workflow_id = EXCLUDED.workflow_id AND ci.key = EXCLUDED.key) \
           RETURNING c.workflow_id, c.key, c.run_id), \
         {ctes}, \
         q AS (INSERT INTO run_inbox ({RUN_COLUMNS}, search_values) \
           SELECT {text_from_ri}, COALESCE(g.vals, '{{}}') FROM ri \
           JOIN won ON won.run_id = ri.id \
           LEFT JOIN (SELECT run_id, array_agg(value) AS vals FROM rv GROUP BY run_id) g \
             ON g.run_id = ri.id) \
         SELECT workflow_id, key FROM won",
        ctes = runs_ctes(7),
        text_from_ri = run_columns_of("ri.", "")
    )
});

/// The leading writes of `prepared` that `pick` takes (up to the first it does not, or the
/// first that failed its checks).
fn run_of<'a, T>(
    prepared: &'a [StoreResult<Prepared>],
    pick: impl Fn(&'a Prepared) -> Option<&'a T>,
) -> Vec<&'a T> {
    prepared
        .iter()
        .map_while(|p| p.as_ref().ok().and_then(&pick))
        .collect()
}

/// The CTEs `ri` (one row per run, its columns) and `rv` (one row per search value:
/// `run_id`, `value`) over the 15 arrays [`bind_runs`] binds, from parameter `$first` on.
fn runs_ctes(first: usize) -> String {
    // The element types of the 15 arrays, in [`bind_runs`]' order: 13 run columns, then the
    // search values' run ids and values.
    const TYPES: [&str; 15] = [
        "text", "text", "text", "text", "text", "text", "int8", "int8", "int8", "text", "text",
        "text", "text", "text", "text",
    ];
    let arrays: Vec<String> = TYPES
        .iter()
        .enumerate()
        .map(|(k, t)| format!("${}::{t}[]", first + k))
        .collect();
    format!(
        "ri AS (SELECT * FROM unnest({}) AS t(id, workflow_id, status, mode, trigger, \
           idempotency_key, created_at, finished_at, retain_at, root_run_id, parent_run, summary, \
           record)), \
         rv AS (SELECT * FROM unnest({}) AS t(run_id, value))",
        arrays[..13].join(", "),
        arrays[13..].join(", ")
    )
}

/// The columns of `runs` a write sets (those of `run_inbox` too, but for its search values).
const RUN_COLUMNS: &str = "id, workflow_id, status, mode, trigger, idempotency_key, \
     created_at, finished_at, retain_at, root_run_id, parent_run, summary, record";

/// [`RUN_COLUMNS`] as read from `from` (`"ri."`: [`runs_ctes`]; `""`: a row of `run_inbox`),
/// `summary` and `record` cast with `json` (`"::json"` into `runs`, `""` into `run_inbox`,
/// where they are text).
fn run_columns_of(from: &str, json: &str) -> String {
    RUN_COLUMNS
        .split(", ")
        .map(|c| match c {
            "summary" | "record" => format!("{from}{c}{json}"),
            _ => format!("{from}{c}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// [`PgStore::move_inbox`]'s statement: up to `$1` rows of `run_inbox`, in id (= creation)
/// order, deleted and inserted into `runs` with their search values; answers how many left
/// the inbox. `lock` is how it locks them: `FOR UPDATE SKIP LOCKED` (rows being moved by
/// another taker are skipped) or `FOR UPDATE` (waited for). The rows are chosen in an array
/// first and deleted by key: as `id IN (subquery)` the generic plan was a hash semi-join that
/// read the whole inbox's index for every move (15 ms over 60,000 waiting runs, against
/// 0.2 ms).
fn move_inbox_sql(lock: &str) -> String {
    format!(
        "WITH m AS (DELETE FROM run_inbox WHERE id = ANY(ARRAY( \
           SELECT id FROM run_inbox ORDER BY id LIMIT $1 {lock})) RETURNING *), \
         r AS (INSERT INTO runs ({RUN_COLUMNS}) SELECT {from_inbox} FROM m \
           ON CONFLICT (id) DO NOTHING RETURNING id, created_at), \
         v AS (INSERT INTO run_values (value, created_at, run_id) \
           SELECT DISTINCT s.value, r.created_at, r.id FROM m JOIN r ON r.id = m.id \
           CROSS JOIN LATERAL unnest(m.search_values) AS s(value) ON CONFLICT DO NOTHING) \
         SELECT count(*) FROM m",
        from_inbox = run_columns_of("", "::json")
    )
}
static MOVE_INBOX_SQL: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| move_inbox_sql("FOR UPDATE SKIP LOCKED"));
static MOVE_INBOX_WAITING_SQL: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| move_inbox_sql("FOR UPDATE"));

/// Bind the 15 arrays of [`runs_ctes`] for `runs` (each run once).
fn bind_runs<'q>(
    query: sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>,
    runs: &[&'q PreparedRun],
) -> sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments> {
    let text =
        |f: fn(&'q PreparedRun) -> &'q str| -> Vec<&'q str> { runs.iter().map(|r| f(r)).collect() };
    let opt = |f: fn(&'q PreparedRun) -> Option<&'q str>| -> Vec<Option<&'q str>> {
        runs.iter().map(|r| f(r)).collect()
    };
    let (value_runs, values): (Vec<&'q str>, Vec<&'q str>) = runs
        .iter()
        .flat_map(|r| r.values.iter().map(move |v| (r.id.as_str(), v.as_str())))
        .unzip();
    query
        .bind(text(|r| &r.id))
        .bind(text(|r| &r.workflow_id))
        .bind(text(|r| r.status))
        .bind(text(|r| r.mode))
        .bind(text(|r| r.trigger))
        .bind(opt(|r| r.idempotency_key.as_deref()))
        .bind(runs.iter().map(|r| r.created_at).collect::<Vec<_>>())
        .bind(runs.iter().map(|r| r.finished_at).collect::<Vec<_>>())
        .bind(runs.iter().map(|r| r.retain_at).collect::<Vec<_>>())
        .bind(text(|r| &r.root_run_id))
        .bind(opt(|r| r.parent_run.as_deref()))
        .bind(text(|r| &r.summary))
        .bind(text(|r| &r.record))
        .bind(value_runs)
        .bind(values)
}

/// [`upsert_runs`]' statement: each run's row, then its value rows brought in step (rows of
/// values it no longer has go, new ones are added).
static UPSERT_RUNS_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH {ctes}, \
         r AS (INSERT INTO runs ({RUN_COLUMNS}) SELECT {json_from_ri} FROM ri \
           ON CONFLICT (id) DO UPDATE SET workflow_id = EXCLUDED.workflow_id, \
             status = EXCLUDED.status, mode = EXCLUDED.mode, trigger = EXCLUDED.trigger, \
             idempotency_key = EXCLUDED.idempotency_key, created_at = EXCLUDED.created_at, \
             finished_at = EXCLUDED.finished_at, retain_at = EXCLUDED.retain_at, \
             root_run_id = EXCLUDED.root_run_id, parent_run = EXCLUDED.parent_run, \
             summary = EXCLUDED.summary, record = EXCLUDED.record RETURNING 1), \
         d AS (DELETE FROM run_values x WHERE x.run_id = ANY($1::text[]) \
           AND (NOT EXISTS (SELECT 1 FROM ri WHERE ri.id = x.run_id \
                  AND ri.created_at = x.created_at) \
             OR NOT EXISTS (SELECT 1 FROM rv WHERE rv.run_id = x.run_id AND rv.value = x.value))) \
         INSERT INTO run_values (value, created_at, run_id) \
           SELECT DISTINCT rv.value, ri.created_at, rv.run_id FROM rv JOIN ri ON ri.id = rv.run_id \
         ON CONFLICT DO NOTHING",
        ctes = runs_ctes(1),
        json_from_ri = run_columns_of("ri.", "::json")
    )
});

/// Upsert `runs` in one statement ([`UPSERT_RUNS_SQL`]). A run given twice keeps its last
/// write, as two upserts in a row would.
fn upsert_runs<'q>(
    runs: &[&'q PreparedRun],
) -> sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments> {
    let mut last: HashMap<&str, usize> = HashMap::new();
    for (i, r) in runs.iter().enumerate() {
        last.insert(&r.id, i);
    }
    let runs: Vec<&'q PreparedRun> = runs
        .iter()
        .enumerate()
        .filter(|(i, r)| last.get(r.id.as_str()) == Some(i))
        .map(|(_, r)| *r)
        .collect();
    bind_runs(sqlx::query(UPSERT_RUNS_SQL.as_str()), &runs)
}

/// The filters of a listing, as bits.
struct Filter;

impl Filter {
    const WORKFLOW: u16 = 1;
    const STATUS: u16 = 1 << 1;
    const MODE: u16 = 1 << 2;
    const TRIGGER: u16 = 1 << 3;
    const KEY: u16 = 1 << 4;
    const SINCE: u16 = 1 << 5;
    const UNTIL: u16 = 1 << 6;
    const Q: u16 = 1 << 7;
    const CURSOR: u16 = 1 << 8;
    const ERROR: u16 = 1 << 9;
    const ALL: u16 = (1 << 10) - 1;
}

/// A listing's filters, pushed into SQL as ` AND …` clauses.
struct Filters<'a> {
    query: &'a RunQuery,
    upper: Option<&'a (i64, String)>,
    q: Option<&'a str>,
}

impl Filters<'_> {
    /// The filters that are set.
    fn set(&self) -> u16 {
        let q = self.query;
        let mut bits = 0;
        for (on, bit) in [
            (q.workflow.is_some(), Filter::WORKFLOW),
            (q.status.is_some(), Filter::STATUS),
            (q.mode.is_some(), Filter::MODE),
            (q.trigger.is_some(), Filter::TRIGGER),
            (q.key.is_some(), Filter::KEY),
            (q.since.is_some(), Filter::SINCE),
            (q.until.is_some(), Filter::UNTIL),
            (self.q.is_some(), Filter::Q),
            (self.upper.is_some(), Filter::CURSOR),
            (q.error.is_some(), Filter::ERROR),
        ] {
            if on {
                bits |= bit;
            }
        }
        bits
    }

    /// Appends ` AND <condition>` for every set filter in `which`.
    fn push(&self, b: &mut QueryBuilder<'_, Postgres>, which: u16) {
        let q = self.query;
        let on = |bit: u16| which & bit != 0;
        if let Some(w) = q.workflow.as_ref().filter(|_| on(Filter::WORKFLOW)) {
            b.push(" AND workflow_id = ").push_bind(w.clone());
        }
        if let Some(s) = q.status.filter(|_| on(Filter::STATUS)) {
            b.push(" AND status = ").push_bind(s.as_str());
        }
        if let Some(m) = q.mode.filter(|_| on(Filter::MODE)) {
            b.push(" AND mode = ").push_bind(m.as_str());
        }
        if let Some(t) = q.trigger.filter(|_| on(Filter::TRIGGER)) {
            b.push(" AND trigger = ").push_bind(t.as_str());
        }
        if let Some(k) = q.key.as_ref().filter(|_| on(Filter::KEY)) {
            b.push(" AND idempotency_key = ").push_bind(k.clone());
        }
        if let Some(since) = q.since.filter(|_| on(Filter::SINCE)) {
            b.push(" AND created_at >= ").push_bind(since);
        }
        if let Some(until) = q.until.filter(|_| on(Filter::UNTIL)) {
            b.push(" AND created_at < ").push_bind(until);
        }
        if let Some(text) = self.q.filter(|_| on(Filter::Q)) {
            b.push(" AND ");
            push_q(b, text);
        }
        if let Some(e) = q.error.as_ref().filter(|_| on(Filter::ERROR)) {
            // RunSummary::failure_reason, from the stored summary.
            b.push(
                " AND (CASE WHEN summary->>'error_http_status' IS NOT NULL \
                 THEN 'HTTP ' || (summary->>'error_http_status') ELSE summary->>'error_code' END) \
                 || COALESCE(' at ' || NULLIF(summary->>'error_step', ''), '') = ",
            )
            .push_bind(e.clone());
        }
        if let Some((created, id)) = self.upper.filter(|_| on(Filter::CURSOR)) {
            b.push(" AND (created_at, id) < (")
                .push_bind(*created)
                .push(", ")
                .push_bind(id.clone())
                .push(")");
        }
    }
}

/// `(col >= q AND col < successor(q))`: a prefix as an index range that a generic plan can
/// use too.
/// The chart bucket of `created_at`: aligned on multiples of `bucket_ms` since the epoch
/// (`created_at - rem_euclid(created_at, bucket_ms)`), or `since` when `bucket_ms <= 0`.
fn push_bucket(b: &mut QueryBuilder<'_, Postgres>, since: i64, bucket_ms: i64) {
    if bucket_ms <= 0 {
        b.push_bind(since).push("::bigint");
    } else {
        b.push("created_at - (CASE WHEN mod(created_at, ")
            .push_bind(bucket_ms)
            .push(") < 0 THEN mod(created_at, ")
            .push_bind(bucket_ms)
            .push(") + ")
            .push_bind(bucket_ms)
            .push(" ELSE mod(created_at, ")
            .push_bind(bucket_ms)
            .push(") END)");
    }
}

/// The step durations of [`super::RunStore::count_runs`] (the filter names a workflow):
/// one `GROUP BY` over the `step_durations` of the finished runs' summaries.
async fn count_steps(
    pool: &PgPool,
    q: &super::CountQuery,
    out: &mut super::RunCounts,
) -> StoreResult<()> {
    let mut b = QueryBuilder::<Postgres>::new(
        "SELECT s.key AS step, s.value::bigint AS ms, count(*) AS n \
         FROM runs, json_each_text(runs.summary->'step_durations') AS s \
         WHERE created_at >= ",
    );
    b.push_bind(q.since)
        .push(" AND created_at < ")
        .push_bind(q.until)
        .push(" AND status NOT IN (")
        .push_bind(RunStatus::Queued.as_str())
        .push(", ")
        .push_bind(RunStatus::Running.as_str())
        .push(")");
    push_count_filter(&mut b, &q.filter);
    b.push(" GROUP BY 1, 2");
    let rows = b.build().fetch_all(pool).await.map_err(db)?;
    for row in rows {
        let step: String = row.try_get("step").map_err(db)?;
        let ms: i64 = row.try_get("ms").map_err(db)?;
        let n = u64::try_from(row.try_get::<i64, _>("n").map_err(db)?).unwrap_or(0);
        out.steps
            .entry(step)
            .or_default()
            .record(u64::try_from(ms).unwrap_or(0), n);
    }
    Ok(())
}

/// ` AND …` for every set filter of a count.
fn push_count_filter(b: &mut QueryBuilder<'_, Postgres>, f: &super::CountFilter) {
    if let Some(wf) = &f.workflow {
        b.push(" AND workflow_id = ").push_bind(wf.clone());
    }
    if let Some(st) = f.status {
        b.push(" AND status = ").push_bind(st.as_str());
    }
    if let Some(m) = f.mode {
        b.push(" AND mode = ").push_bind(m.as_str());
    }
    if let Some(t) = f.trigger {
        b.push(" AND trigger = ").push_bind(t.as_str());
    }
}

fn push_prefix(b: &mut QueryBuilder<'_, Postgres>, col: &str, q: &str) {
    b.push("(").push(col).push(" >= ").push_bind(q.to_string());
    match str_successor(q) {
        Some(hi) => {
            b.push(" AND ").push(col).push(" < ").push_bind(hi);
        }
        None => {
            b.push(" AND starts_with(")
                .push(col)
                .push(", ")
                .push_bind(q.to_string())
                .push(")");
        }
    }
    b.push(")");
}

/// The free search as a row filter of `runs`, parenthesised: the id, the idempotency key or
/// one of the run's indexed values (`run_values`, looked up by the run's id) starts with `q`.
fn push_q(b: &mut QueryBuilder<'_, Postgres>, q: &str) {
    b.push("(");
    push_prefix(b, "id", q);
    b.push(" OR ");
    push_prefix(b, "idempotency_key", q);
    b.push(" OR EXISTS (SELECT 1 FROM run_values v WHERE v.run_id = runs.id AND ");
    push_prefix(b, "v.value", q);
    b.push("))");
}

/// The three candidate sources of a free search (`SELECT <run id> … WHERE` and the column
/// whose prefix is searched): runs whose id, idempotency key or an indexed value starts with
/// `q`, three index ranges.
const Q_SOURCES: [(&str, &str); 3] = [
    ("SELECT id FROM runs WHERE ", "id"),
    ("SELECT id FROM runs WHERE ", "idempotency_key"),
    ("SELECT run_id FROM run_values WHERE ", "value"),
];

/// The least string greater than every string that starts with `s` (in code point order,
/// which is UTF-8 byte order and the "C" collation's): the last character that can be
/// incremented is, and what follows it dropped. `None` if there is none (empty, or all
/// U+10FFFF).
fn str_successor(s: &str) -> Option<String> {
    let mut chars: Vec<char> = s.chars().collect();
    while let Some(c) = chars.pop() {
        let next = match c as u32 + 1 {
            0xD800 => 0xE000,
            n => n,
        };
        if let Some(n) = char::from_u32(next) {
            chars.push(n);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// The least byte string greater than every one that starts with `prefix`; `None` if there is
/// none (empty, or all 0xFF).
fn bytes_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut out = prefix.to_vec();
    while let Some(last) = out.pop() {
        if last < u8::MAX {
            out.push(last + 1);
            return Some(out);
        }
    }
    None
}

// ---------------------------------------------------------------------------------------------
// Errors and encoding
// ---------------------------------------------------------------------------------------------

/// Maps a driver error onto [`StoreError`]: input the database refuses whatever the retry
/// (text it cannot store, an index row over its size limit, a malformed URL) is
/// [`StoreError::Invalid`]; a row that does not decode is [`StoreError::Corrupt`]; everything
/// else (I/O, connection refused or lost, pool or statement timeouts, serialisation failures,
/// deadlocks, a server shutting down) is a transient [`StoreError::Backend`].
fn db(e: sqlx::Error) -> StoreError {
    match &e {
        sqlx::Error::Database(d) => match d.code().as_deref() {
            // character_not_in_repertoire (a NUL in text), untranslatable_character,
            // program_limit_exceeded (an index row too large).
            Some("22021") | Some("22P05") | Some("54000") => {
                StoreError::Invalid(format!("PostgreSQL refused the value: {}", d.message()))
            }
            Some(code) => StoreError::Backend(format!("PostgreSQL error {code}: {}", d.message())),
            None => StoreError::Backend(format!("PostgreSQL: {e}")),
        },
        // sqlx's own configuration errors carry its "error with configuration: " prefix
        // inside as well as outside: said once.
        sqlx::Error::Configuration(inner) => {
            let why = inner.to_string();
            let why = why.trim_start_matches("error with configuration: ");
            StoreError::Invalid(format!("PostgreSQL connection settings: {why}"))
        }
        sqlx::Error::ColumnDecode { .. }
        | sqlx::Error::Decode(_)
        | sqlx::Error::ColumnNotFound(_)
        | sqlx::Error::TypeNotFound { .. }
        | sqlx::Error::ColumnIndexOutOfBounds { .. } => {
            StoreError::Corrupt(format!("PostgreSQL row: {e}"))
        }
        _ => StoreError::Backend(format!("PostgreSQL: {e}")),
    }
}

/// True for the errors of a transaction the database aborted to resolve contention
/// (`40P01` deadlock detected, `40001` serialisation failure): trying again may succeed.
fn retryable(e: &StoreError) -> bool {
    matches!(e, StoreError::Backend(m)
        if m.starts_with("PostgreSQL error 40P01") || m.starts_with("PostgreSQL error 40001"))
}

/// Refuses text a PostgreSQL `text` column cannot hold (a NUL character).
fn no_nul(what: &str, s: &str) -> StoreResult<()> {
    if s.contains('\0') {
        return Err(StoreError::Invalid(format!(
            "invalid {what}: contains a NUL character"
        )));
    }
    Ok(())
}

fn to_json<T: serde::Serialize + ?Sized>(what: &str, v: &T) -> StoreResult<String> {
    serde_json::to_string(v).map_err(|e| StoreError::Backend(format!("cannot encode {what}: {e}")))
}

fn from_json<T: serde::de::DeserializeOwned>(what: &str, s: &str) -> StoreResult<T> {
    serde_json::from_str(s).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

/// A count or limit as a SQL `bigint` (saturating).
fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

// ---------------------------------------------------------------------------------------------
// The shared run queue
// ---------------------------------------------------------------------------------------------

/// Lease the row chosen by the CTE `c` (one `id` column) to `$1` until `$2`, unless a live
/// lease (`lease_until > $3`) holds it: a taker whose snapshot missed another's fresh lease
/// still finds it here (the conflict check reads the latest committed row). `$1`'s own live
/// lease is renewed: [`SharedQueue::lease`] of a run this process already holds answers
/// `true`.
const LEASE_CHOSEN: &str = "INSERT INTO run_leases (run_id, owner, lease_until) \
     SELECT id, $1, $2 FROM c \
     ON CONFLICT (run_id) DO UPDATE SET owner = EXCLUDED.owner, lease_until = EXCLUDED.lease_until \
     WHERE run_leases.lease_until <= $3 OR run_leases.owner = EXCLUDED.owner \
     RETURNING run_id";

/// The lease CTE `l` of [`TAKE_CHOSEN`] and [`TAKE_CHOSEN_WITH_RECORD`]. A lease row that is
/// there and expired was left by a holder that died while executing the run (a live holder
/// renews it, an ended run's is deleted): the take counts a takeover (migration 0009), unless
/// the row was seeded with no owner ([`SharedQueue::carry_takeovers`]).
macro_rules! take_lease {
    () => {
        "l AS (INSERT INTO run_leases (run_id, owner, lease_until) \
           SELECT id, $1, $2 FROM c \
           ON CONFLICT (run_id) DO UPDATE SET owner = EXCLUDED.owner, \
             lease_until = EXCLUDED.lease_until, \
             takeovers = run_leases.takeovers + (run_leases.owner <> '')::int \
           WHERE run_leases.lease_until <= $3 \
           RETURNING run_id, takeovers)"
    };
}

/// Take the rows chosen by the CTE `c` (one `id` column) under a lease to `$1` until `$2`,
/// only where no live lease (`lease_until > $3`) holds them, whoever its owner. Unlike
/// [`LEASE_CHOSEN`], a live lease of `$1` itself is not taken again: the workers of one
/// process share its owner, and a worker whose snapshot predates another's fresh lease finds
/// the run's row unlocked once that lease is committed, so an owner's own lease is no proof
/// that this taker holds the run (measured: 16 takers of one owner took ~30% of 400 runs
/// twice when it was). Answers `found` (the rows `c` chose) and `run_id` (one row per run
/// taken, `NULL` when `c` chose none or lost them all), so a taker that lost a race can tell
/// it from an empty queue.
const TAKE_CHOSEN: &str = concat!(
    take_lease!(),
    " SELECT (SELECT count(*) FROM c) AS found, l.run_id, l.takeovers FROM (SELECT 1) AS one \
     LEFT JOIN l ON TRUE"
);

/// [`TAKE_CHOSEN`] that also answers the taken run's `record` (as text; `NULL` with no run),
/// as it stood when taken: the worker needs no second statement to read it.
const TAKE_CHOSEN_WITH_RECORD: &str = concat!(
    take_lease!(),
    " SELECT (SELECT count(*) FROM c) AS found, l.run_id, l.takeovers, \
       t.record::text AS record \
     FROM (SELECT 1) AS one LEFT JOIN l ON TRUE LEFT JOIN runs t ON t.id = l.run_id"
);

/// The take statements' test that run `r` has no live lease (`$3` is now in ms). A correlated
/// scalar subquery, looked up per candidate (by the primary key; on the queue's connections,
/// `QUEUE_SETTINGS`, always): as an anti-join, its cached plan materialised a sequential scan
/// of all of `run_leases` for every take, the dead rows of ended leases included, which pile
/// up between autovacuums. pg×1 under an 8 s load: 1,200–1,400 new keys/s before, 1,580–1,785
/// after (README, "Webhook ingest").
const LIVE_LEASE_FREE: &str =
    "COALESCE((SELECT l.lease_until FROM run_leases l WHERE l.run_id = r.id), 0) <= $3";

/// The take of the oldest queued run whose lease is free ([`SharedQueue::take_queued`]): `$1`
/// the owner, `$2` the new lease's end, `$3` now (both Unix ms). Built once.
static TAKE_QUEUED_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "WITH c AS (SELECT r.id FROM runs r WHERE r.status = 'queued' \
           AND {LIVE_LEASE_FREE} \
           ORDER BY r.created_at, r.id FOR UPDATE OF r SKIP LOCKED LIMIT 1), \
         {TAKE_CHOSEN_WITH_RECORD}"
    )
});

impl PgStore {
    /// PostgreSQL's plan for a take of the oldest queued run at `now_ms` (Unix ms), one line
    /// per row of `EXPLAIN` (text format): the generic plan a take's prepared statement gets
    /// on the queue's connections (`QUEUE_SETTINGS`) with the table's statistics as they are
    /// now; nothing is executed or locked. For tests and diagnostics: a take should walk the
    /// `runs_queued` index from its oldest entry (or `runs_status`), never read and sort the
    /// backlog, even with the statistics of an empty table. Errors: the database's.
    pub async fn explain_take(&self, now_ms: i64) -> StoreResult<Vec<String>> {
        self.explain_on_queue(
            "(text, bigint, bigint)",
            &TAKE_QUEUED_SQL,
            &format!("('explain', {now_ms}, {now_ms})"),
        )
        .await
    }

    /// PostgreSQL's plan for a move of up to 64 runs from the ingest inbox
    /// ([`PgStore::move_inbox`], skipping locked rows), as [`PgStore::explain_take`] gives a
    /// take's: it should find the rows it moves by the inbox's primary key, never read the
    /// whole inbox. Errors: the database's.
    pub async fn explain_move_inbox(&self) -> StoreResult<Vec<String>> {
        self.explain_on_queue("(bigint)", &MOVE_INBOX_SQL, "(64)")
            .await
    }

    /// `EXPLAIN` of `sql` (parameter types `types`, e.g. `(text, bigint)`) executed with
    /// `args` (e.g. `('x', 1)`) as a prepared statement on one of the queue's connections,
    /// taken out of the pool and closed after (`PREPARE`, `EXPLAIN EXECUTE`: no statement of
    /// it outlives the call, even one dropped half-way).
    async fn explain_on_queue(
        &self,
        types: &str,
        sql: &str,
        args: &str,
    ) -> StoreResult<Vec<String>> {
        // Detached: its slot goes back to the pool, and it closes when dropped.
        let mut conn = self.queue.acquire().await.map_err(db)?.detach();
        sqlx::raw_sql(&format!("PREPARE fluxo_explain{types} AS {sql}"))
            .execute(&mut conn)
            .await
            .map_err(db)?;
        let plan = sqlx::query_scalar(&format!("EXPLAIN EXECUTE fluxo_explain{args}"))
            .persistent(false)
            .fetch_all(&mut conn)
            .await
            .map_err(db);
        use sqlx::Connection as _;
        // Closing is tidiness only: the plan is the answer either way.
        let _ = conn.close().await;
        plan
    }
}

/// How often [`SharedQueue::take_queued`] tries again after losing every run it chose to
/// another taker (a fresh statement's snapshot sees the winner's lease and skips the run).
const TAKE_RETRIES: usize = 8;

/// [`super::SharedSettings`] in the `shared_settings` table (migration 0004): a revision is
/// the previous one plus one, in the statement that writes the document.
#[async_trait::async_trait]
impl super::SharedSettings for PgStore {
    async fn get_document(&self, name: &str) -> StoreResult<Option<(i64, Value)>> {
        let row = sqlx::query("SELECT revision, value FROM shared_settings WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
        row.map(|r| {
            Ok((
                r.try_get("revision").map_err(db)?,
                r.try_get("value").map_err(db)?,
            ))
        })
        .transpose()
    }

    async fn put_document(&self, name: &str, value: &Value) -> StoreResult<i64> {
        sqlx::query_scalar(
            "INSERT INTO shared_settings (name, value, revision) VALUES ($1, $2, 1) \
             ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value, \
               revision = shared_settings.revision + 1 \
             RETURNING revision",
        )
        .bind(name)
        .bind(value)
        .fetch_one(&self.pool)
        .await
        .map_err(db)
    }

    async fn put_document_if_absent(&self, name: &str, value: &Value) -> StoreResult<(i64, Value)> {
        sqlx::query(
            "INSERT INTO shared_settings (name, value, revision) VALUES ($1, $2, 1) \
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(value)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        self.get_document(name).await?.ok_or_else(|| {
            StoreError::Backend(format!("shared document `{name}` vanished after its write"))
        })
    }
}

#[async_trait::async_trait]
impl SharedQueue for PgStore {
    async fn take_queued(
        &self,
        owner: &str,
        lease_ms: i64,
        now_ms: i64,
    ) -> StoreResult<Option<super::Taken>> {
        for _ in 0..TAKE_RETRIES {
            let rows = sqlx::query(TAKE_QUEUED_SQL.as_str())
                .bind(owner)
                .bind(now_ms.saturating_add(lease_ms))
                .bind(now_ms)
                .fetch_all(&self.queue)
                .await
                .map_err(db)?;
            let taken = rows
                .first()
                .map(|r| {
                    Ok::<_, sqlx::Error>((
                        r.try_get::<Option<String>, _>("record")?,
                        r.try_get::<Option<i32>, _>("takeovers")?,
                    ))
                })
                .transpose()
                .map_err(db)?;
            if let Some((Some(text), takeovers)) = taken {
                return Ok(Some(super::Taken {
                    run: from_json("run record", &text)?,
                    takeovers: takeovers.unwrap_or(0).max(0) as u32,
                }));
            }
            // No queued run in `runs`: bring some from the ingest inbox, then take again.
            if take_rows(rows)?.0 == 0 && self.move_inbox(MOVE_FOR_TAKE, false).await? == 0 {
                return Ok(None);
            }
        }
        Ok(None)
    }

    async fn lease(
        &self,
        run_id: &str,
        owner: &str,
        lease_ms: i64,
        now_ms: i64,
    ) -> StoreResult<bool> {
        let sql = format!("WITH c AS (SELECT $4::text AS id) {LEASE_CHOSEN}");
        let row = sqlx::query(&sql)
            .bind(owner)
            .bind(now_ms.saturating_add(lease_ms))
            .bind(now_ms)
            .bind(run_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
        Ok(row.is_some())
    }

    async fn renew_leases(
        &self,
        owner: &str,
        run_ids: &[String],
        lease_ms: i64,
        now_ms: i64,
    ) -> StoreResult<Vec<String>> {
        if run_ids.is_empty() {
            return Ok(Vec::new());
        }
        sqlx::query_scalar(
            "UPDATE run_leases SET lease_until = $3 WHERE owner = $1 AND run_id = ANY($2) \
             RETURNING run_id",
        )
        .bind(owner)
        .bind(run_ids)
        .bind(now_ms.saturating_add(lease_ms))
        .fetch_all(&self.pool)
        .await
        .map_err(db)
    }

    async fn release_leases(&self, owner: &str, run_ids: &[String]) -> StoreResult<()> {
        if run_ids.is_empty() {
            return Ok(());
        }
        sqlx::query("DELETE FROM run_leases WHERE owner = $1 AND run_id = ANY($2)")
            .bind(owner)
            .bind(run_ids)
            .execute(&self.queue)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn take_orphans(
        &self,
        owner: &str,
        lease_ms: i64,
        now_ms: i64,
        max: usize,
    ) -> StoreResult<Vec<(String, u32)>> {
        let sql = format!(
            "WITH c AS (SELECT r.id FROM runs r WHERE r.status = 'running' \
               AND {LIVE_LEASE_FREE} \
               ORDER BY r.created_at, r.id FOR UPDATE OF r SKIP LOCKED LIMIT $4), {TAKE_CHOSEN}"
        );
        let rows = sqlx::query(&sql)
            .bind(owner)
            .bind(now_ms.saturating_add(lease_ms))
            .bind(now_ms)
            .bind(max.min(i64::MAX as usize) as i64)
            .fetch_all(&self.queue)
            .await
            .map_err(db)?;
        Ok(take_rows(rows)?.1)
    }

    async fn carry_takeovers(&self, run_id: &str, takeovers: u32) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO run_leases (run_id, owner, lease_until, takeovers) VALUES ($1, '', 0, $2) \
             ON CONFLICT (run_id) DO UPDATE SET takeovers = GREATEST(run_leases.takeovers, \
               EXCLUDED.takeovers)",
        )
        .bind(run_id)
        .bind(i32::try_from(takeovers).unwrap_or(i32::MAX))
        .execute(&self.queue)
        .await
        .map_err(db)?;
        Ok(())
    }
}

/// The rows of a [`TAKE_CHOSEN`] statement: how many runs its CTE chose, and those taken with
/// their takeover counts.
fn take_rows(rows: Vec<PgRow>) -> StoreResult<(i64, Vec<(String, u32)>)> {
    let mut found = 0;
    let mut taken = Vec::new();
    for r in &rows {
        found = r.try_get::<i64, _>("found").map_err(db)?;
        if let Some(id) = r.try_get::<Option<String>, _>("run_id").map_err(db)? {
            let n = r.try_get::<Option<i32>, _>("takeovers").map_err(db)?;
            taken.push((id, n.unwrap_or(0).max(0) as u32));
        }
    }
    Ok((found, taken))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn successors_bound_every_extension() {
        assert_eq!(str_successor("ab").as_deref(), Some("ac"));
        assert_eq!(str_successor("a\u{10FFFF}").as_deref(), Some("b"));
        assert_eq!(str_successor("\u{D7FF}").as_deref(), Some("\u{E000}"));
        assert_eq!(str_successor(""), None);
        let hi = str_successor("é").unwrap_or_default();
        for s in ["é", "éa", "é\u{10FFFF}\u{10FFFF}"] {
            assert!(s.as_bytes() < hi.as_bytes(), "{s}");
        }
        assert_eq!(bytes_successor(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(bytes_successor(b""), None);
        assert_eq!(bytes_successor(b"\xff\xff"), None);
    }
}
