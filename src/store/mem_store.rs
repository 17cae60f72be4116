//! In-memory backend: ordered maps behind one mutex, so every operation is atomic. For unit
//! tests and benches; nothing survives the process.
//!
//! It follows the same rules as [`crate::store::SledStore`] (see `common.rs`), so the two backends
//! answer identically; the property tests in `tests/store_memory.rs` check that.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use serde_json::Value;

use super::common::{self, page, ApiDecision, Cursor, Position};
use super::{
    ApiBegin, ApiRecord, ApiRecordState, ClaimOutcome, CountFilter, CountQuery, IdempotencyStore,
    MemoryEntry, MemoryStore, Retention, RunCounts, RunPage, RunQuery, RunStore, RunSummary, Store,
    StoreError, StoreResult, WebhookClaim, WriteOptions, WriteResult,
};
use crate::run::{RunRecord, RunStatus};

/// A [`Store`] kept in process memory.
#[derive(Debug, Default)]
pub struct InMemoryStore {
    inner: Mutex<Inner>,
    fail_writes: AtomicBool,
}

#[derive(Debug, Default)]
struct Inner {
    /// `(namespace, key) -> entry`.
    memory: BTreeMap<(String, String), MemoryEntry>,
    /// `(expires_at ms, namespace, key)` of every entry with a TTL.
    memory_expiry: BTreeSet<(i64, String, String)>,
    /// `id -> run`.
    runs: BTreeMap<String, RunRecord>,
    /// `(created_at ms, id)`: listing order.
    runs_by_created: BTreeSet<Position>,
    /// `id -> the values the free search finds` ([`super::SEARCH_VALUES_MAX`]).
    run_values: HashMap<String, Vec<String>>,
    /// `(workflow id, key) -> claim`.
    claims: BTreeMap<(String, String), WebhookClaim>,
    /// `(scope, key) -> record`.
    api: BTreeMap<(String, String), ApiRecord>,
}

impl InMemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Test hook: while `true`, every operation that would change the store fails with
    /// [`StoreError::Injected`] and changes nothing (reads still work).
    pub fn set_fail_writes(&self, fail: bool) {
        self.fail_writes.store(fail, Ordering::SeqCst);
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave a half-applied change behind (every
        // mutation below is infallible once started), so a poisoned lock is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check_writable(&self) -> StoreResult<()> {
        if self.fail_writes.load(Ordering::SeqCst) {
            return Err(StoreError::Injected("writes are disabled".into()));
        }
        Ok(())
    }
}

impl Inner {
    fn put_run(&mut self, run: &RunRecord) {
        if let Some(old) = self.runs.insert(run.id.clone(), run.clone()) {
            self.runs_by_created.remove(&(old.created_at.0, old.id));
        }
        self.runs_by_created
            .insert((run.created_at.0, run.id.clone()));
        self.run_values
            .insert(run.id.clone(), common::search_values(run));
    }

    fn remove_run(&mut self, id: &str) -> bool {
        match self.runs.remove(id) {
            Some(old) => {
                self.runs_by_created.remove(&(old.created_at.0, old.id));
                self.run_values.remove(id);
                true
            }
            None => false,
        }
    }

    fn remove_memory(&mut self, namespace: &str, key: &str) -> Option<MemoryEntry> {
        let old = self
            .memory
            .remove(&(namespace.to_string(), key.to_string()))?;
        if let Some(e) = old.expires_at {
            self.memory_expiry
                .remove(&(e, namespace.to_string(), key.to_string()));
        }
        Some(old)
    }
}

#[async_trait::async_trait]
impl MemoryStore for InMemoryStore {
    async fn write(
        &self,
        namespace: &str,
        key: &str,
        value: &Value,
        opts: WriteOptions<'_>,
        now_ms: i64,
    ) -> StoreResult<WriteResult> {
        common::check_memory_write(namespace, key)?;
        self.check_writable()?;
        let mut inner = self.lock();
        let id = (namespace.to_string(), key.to_string());
        if !opts.allow_overwrite {
            if let Some(existing) = inner.memory.get(&id).filter(|e| !e.is_expired(now_ms)) {
                return Ok(WriteResult::Exists {
                    existing: existing.clone(),
                });
            }
        }
        inner.remove_memory(namespace, key);
        let expires_at = common::expiry(now_ms, opts.ttl_ms);
        let entry = MemoryEntry {
            namespace: namespace.to_string(),
            key: key.to_string(),
            value: value.clone(),
            written_at: now_ms,
            expires_at,
            owner: opts.owner.cloned(),
        };
        if let Some(e) = expires_at {
            inner
                .memory_expiry
                .insert((e, namespace.to_string(), key.to_string()));
        }
        inner.memory.insert(id, entry);
        Ok(WriteResult::Written { expires_at })
    }

    async fn read(
        &self,
        namespace: &str,
        key: &str,
        now_ms: i64,
    ) -> StoreResult<Option<MemoryEntry>> {
        common::check_ident("namespace", namespace)?;
        let inner = self.lock();
        Ok(inner
            .memory
            .get(&(namespace.to_string(), key.to_string()))
            .filter(|e| !e.is_expired(now_ms))
            .cloned())
    }

    async fn delete(&self, namespace: &str, key: &str, now_ms: i64) -> StoreResult<bool> {
        common::check_ident("namespace", namespace)?;
        self.check_writable()?;
        let mut inner = self.lock();
        Ok(inner
            .remove_memory(namespace, key)
            .is_some_and(|e| !e.is_expired(now_ms)))
    }

    async fn list(
        &self,
        namespace: &str,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
        now_ms: i64,
    ) -> StoreResult<Vec<MemoryEntry>> {
        common::check_ident("namespace", namespace)?;
        let inner = self.lock();
        let ns = namespace.to_string();
        let start = match after {
            Some(a) if a >= prefix => Bound::Excluded((ns.clone(), a.to_string())),
            _ => Bound::Included((ns.clone(), prefix.to_string())),
        };
        Ok(inner
            .memory
            .range((start, Bound::Unbounded))
            .take_while(|((n, k), _)| *n == ns && k.starts_with(prefix))
            .map(|(_, e)| e)
            .filter(|e| !e.is_expired(now_ms))
            .take(limit)
            .cloned()
            .collect())
    }

    async fn namespaces(&self) -> StoreResult<Vec<String>> {
        let inner = self.lock();
        let set: BTreeSet<&String> = inner.memory.keys().map(|(n, _)| n).collect();
        Ok(set.into_iter().cloned().collect())
    }

    async fn sweep_expired(&self, now_ms: i64, max: usize) -> StoreResult<usize> {
        self.check_writable()?;
        let mut inner = self.lock();
        let due: Vec<(i64, String, String)> = inner
            .memory_expiry
            .iter()
            .take_while(|(e, _, _)| *e <= now_ms)
            .take(max)
            .cloned()
            .collect();
        for (_, ns, key) in &due {
            inner.remove_memory(ns, key);
        }
        Ok(due.len())
    }
}

#[async_trait::async_trait]
impl RunStore for InMemoryStore {
    async fn put_run(&self, run: &RunRecord) -> StoreResult<()> {
        common::check_run(run)?;
        self.check_writable()?;
        self.lock().put_run(run);
        Ok(())
    }

    async fn get_run(&self, id: &str) -> StoreResult<Option<RunRecord>> {
        Ok(self.lock().runs.get(id).cloned())
    }

    async fn list_runs(&self, query: &RunQuery) -> StoreResult<RunPage> {
        let inner = self.lock();
        let upper = match query.cursor.as_deref().map(common::decode_cursor) {
            None => Bound::Unbounded,
            Some(Cursor::Position(p)) => Bound::Excluded(p),
            Some(Cursor::RunId(id)) => match inner.runs.get(&id) {
                Some(r) => Bound::Excluded((r.created_at.0, id)),
                None => {
                    return Ok(RunPage {
                        runs: vec![],
                        next_cursor: None,
                    })
                }
            },
        };
        if query.limit == 0 {
            return Ok(RunPage {
                runs: vec![],
                next_cursor: None,
            });
        }
        let mut runs = Vec::new();
        for (_, id) in inner.runs_by_created.range((Bound::Unbounded, upper)).rev() {
            let Some(run) = inner.runs.get(id) else {
                continue;
            };
            let s = RunSummary::from(run);
            let values = inner.run_values.get(id).map(Vec::as_slice).unwrap_or(&[]);
            if common::summary_matches(&s, values, query) {
                runs.push(s);
                if runs.len() > query.limit {
                    break;
                }
            }
        }
        Ok(page(runs, query.limit))
    }

    async fn run_ids_with_status(&self, status: RunStatus) -> StoreResult<Vec<String>> {
        let inner = self.lock();
        Ok(inner
            .runs_by_created
            .iter()
            .filter(|(_, id)| inner.runs.get(id).is_some_and(|r| r.status == status))
            .map(|(_, id)| id.clone())
            .collect())
    }

    async fn prune_runs(&self, policy: &Retention, now_ms: i64) -> StoreResult<usize> {
        if policy.max_runs_per_workflow.is_none() && policy.max_age_ms.is_none() {
            return Ok(0);
        }
        self.check_writable()?;
        let mut inner = self.lock();
        let mut per_wf: HashMap<&str, Vec<(i64, String)>> = HashMap::new();
        for run in inner.runs.values() {
            if let Some(at) = common::record_retention_instant(run) {
                per_wf
                    .entry(run.workflow_id.as_str())
                    .or_default()
                    .push((at, run.id.clone()));
            }
        }
        let mut doomed = Vec::new();
        for (_, mut finished) in per_wf {
            finished.sort_by(common::newest_first);
            for (rank, (at, id)) in finished.into_iter().enumerate() {
                if !common::retention_keeps(policy, rank, at, now_ms) {
                    doomed.push(id);
                }
            }
        }
        Ok(doomed.iter().filter(|id| inner.remove_run(id)).count())
    }

    /// [`super::RunStore::count_runs`] by scanning the runs created in the range (this store
    /// is for tests: no counters, the same answers).
    async fn count_runs(&self, q: &CountQuery) -> StoreResult<RunCounts> {
        let inner = self.lock();
        if q.since >= q.until {
            return Ok(RunCounts::default());
        }
        let range = (
            Bound::Included((q.since, String::new())),
            Bound::Excluded((q.until, String::new())),
        );
        let summaries: Vec<RunSummary> = inner
            .runs_by_created
            .range(range)
            .filter_map(|(_, id)| inner.runs.get(id).map(RunSummary::from))
            .collect();
        Ok(RunCounts::of_summaries(&summaries, q))
    }

    async fn oldest_run(&self, filter: &CountFilter, until: i64) -> StoreResult<Option<i64>> {
        let inner = self.lock();
        Ok(inner
            .runs_by_created
            .range((Bound::Unbounded, Bound::Excluded((until, String::new()))))
            .filter_map(|(_, id)| inner.runs.get(id))
            .find(|r| filter.matches(&RunSummary::from(*r)))
            .map(|r| r.created_at.0))
    }
}

#[async_trait::async_trait]
impl IdempotencyStore for InMemoryStore {
    async fn claim_and_enqueue(
        &self,
        claim: &WebhookClaim,
        run: &RunRecord,
        now_ms: i64,
    ) -> StoreResult<ClaimOutcome> {
        common::check_claim_run(claim, run)?;
        self.check_writable()?;
        let mut inner = self.lock();
        let id = (claim.workflow_id.clone(), claim.key.clone());
        if let Some(live) = inner.claims.get(&id).filter(|c| c.expires_at > now_ms) {
            return Ok(ClaimOutcome::Duplicate {
                run_id: live.run_id.clone(),
            });
        }
        inner.claims.insert(id, claim.clone());
        inner.put_run(run);
        Ok(ClaimOutcome::Claimed)
    }

    async fn release_claim(&self, workflow_id: &str, key: &str, run_id: &str) -> StoreResult<bool> {
        self.check_writable()?;
        let mut inner = self.lock();
        let id = (workflow_id.to_string(), key.to_string());
        if inner.claims.get(&id).is_none_or(|c| c.run_id != run_id) {
            return Ok(false);
        }
        inner.claims.remove(&id);
        if inner
            .runs
            .get(run_id)
            .is_some_and(|r| r.status == RunStatus::Queued)
        {
            inner.remove_run(run_id);
        }
        Ok(true)
    }

    async fn get_claim(
        &self,
        workflow_id: &str,
        key: &str,
        now_ms: i64,
    ) -> StoreResult<Option<WebhookClaim>> {
        common::check_ident("workflow id", workflow_id)?;
        let inner = self.lock();
        Ok(inner
            .claims
            .get(&(workflow_id.to_string(), key.to_string()))
            .filter(|c| c.expires_at > now_ms)
            .cloned())
    }

    async fn api_begin(&self, record: &ApiRecord, now_ms: i64) -> StoreResult<ApiBegin> {
        common::check_ident("scope", &record.scope)?;
        self.check_writable()?;
        let mut inner = self.lock();
        let id = (record.scope.clone(), record.key.clone());
        match common::api_decide(inner.api.get(&id), record, now_ms) {
            ApiDecision::Answer(a) => Ok(a),
            ApiDecision::Start => {
                inner.api.insert(id, record.clone());
                Ok(ApiBegin::Started)
            }
        }
    }

    async fn api_complete(
        &self,
        scope: &str,
        key: &str,
        status: u16,
        body: &str,
    ) -> StoreResult<()> {
        common::check_ident("scope", scope)?;
        self.check_writable()?;
        let mut inner = self.lock();
        if let Some(rec) = inner.api.get_mut(&(scope.to_string(), key.to_string())) {
            rec.state = ApiRecordState::Done {
                status,
                body: body.to_string(),
            };
        }
        Ok(())
    }

    async fn api_abandon(&self, scope: &str, key: &str) -> StoreResult<()> {
        common::check_ident("scope", scope)?;
        self.check_writable()?;
        let mut inner = self.lock();
        let id = (scope.to_string(), key.to_string());
        if inner
            .api
            .get(&id)
            .is_some_and(|r| matches!(r.state, ApiRecordState::InProgress { .. }))
        {
            inner.api.remove(&id);
        }
        Ok(())
    }

    async fn sweep_idempotency(&self, now_ms: i64, max: usize) -> StoreResult<usize> {
        self.check_writable()?;
        let mut inner = self.lock();
        let claims: Vec<(String, String)> = inner
            .claims
            .iter()
            .filter(|(_, c)| c.expires_at <= now_ms)
            .map(|(k, _)| k.clone())
            .take(max)
            .collect();
        for k in &claims {
            inner.claims.remove(k);
        }
        let api: Vec<(String, String)> = inner
            .api
            .iter()
            .filter(|(_, r)| r.expires_at <= now_ms)
            .map(|(k, _)| k.clone())
            .take(max - claims.len())
            .collect();
        for k in &api {
            inner.api.remove(k);
        }
        Ok(claims.len() + api.len())
    }
}

#[async_trait::async_trait]
impl Store for InMemoryStore {
    async fn flush(&self) -> StoreResult<()> {
        Ok(())
    }
}
