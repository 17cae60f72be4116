//! The sandbox's memory: records, idempotency keys, the request log and fault rules.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio::sync::watch;

use super::fault::{Fault, FaultRule, FaultRuleSpec, RouteMatcher};
use super::idempotency::IdempotencyStore;
use super::vendors::VendorData;
use crate::clock::{Clock, SystemClock};

/// Collections that exist (empty) from the start. Any other name matching
/// `[a-z0-9_-]{1,64}` is created on first write.
pub const BUILTIN_COLLECTIONS: [&str; 4] = ["contacts", "deals", "invoices", "tickets"];

/// Settings of a sandbox.
#[derive(Clone)]
pub struct SandboxConfig {
    /// How long `timeout_after_write` withholds its answer (default 30 s) before answering
    /// late. Shutdown cuts it short by dropping the connection. Tests set it low.
    pub hold: Duration,
    /// How long an idempotency key is remembered, from its first request (default 24 h, as
    /// Stripe and SPEC §5).
    pub idempotency_ttl: Duration,
    /// Largest request body accepted (default 1 MiB, as SPEC §5); larger → 413.
    pub max_body_bytes: usize,
    /// Request log entries kept, oldest dropped first (default 10 000).
    pub max_log_entries: usize,
    /// Lifetime of the access tokens the fake OAuth server issues (default 30 min); changed at
    /// run time with `POST /_sandbox/oauth {"access_token_ttl_s": n}` until a reset.
    pub access_token_ttl: Duration,
    /// Source of `created_at`, log times, key and token expiry. Delays (`slow`, holds) are real
    /// time.
    pub clock: Arc<dyn Clock>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            hold: Duration::from_secs(30),
            idempotency_ttl: Duration::from_secs(24 * 60 * 60),
            max_body_bytes: 1024 * 1024,
            max_log_entries: 10_000,
            access_token_ttl: Duration::from_secs(30 * 60),
            clock: Arc::new(SystemClock),
        }
    }
}

impl fmt::Debug for SandboxConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SandboxConfig")
            .field("hold", &self.hold)
            .field("idempotency_ttl", &self.idempotency_ttl)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("max_log_entries", &self.max_log_entries)
            .field("access_token_ttl", &self.access_token_ttl)
            .finish_non_exhaustive()
    }
}

/// How a logged request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// An answer was sent (its status is in the entry).
    Answered,
    /// `timeout_after_write`: the answer was withheld (the client is expected to time out).
    Held,
    /// The connection was closed without an answer.
    Dropped,
}

/// One request as the sandbox saw it. Control routes (`/_sandbox/...`, `/healthz`) are not
/// logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    /// 1, 2, … in arrival order of the decision (not reset by `reset`'s log wipe).
    pub seq: u64,
    /// When the outcome was decided, RFC 3339 UTC.
    pub at: String,
    /// `POST`, `GET`, …
    pub method: String,
    /// Path and query, as received.
    pub path: String,
    /// The `Idempotency-Key` header, as received.
    pub idempotency_key: Option<String>,
    /// The fault applied (from the header or a rule), e.g. `"timeout_after_write"`.
    pub fault: Option<String>,
    /// Status answered; `None` when held or dropped.
    pub status: Option<u16>,
    /// How it ended.
    pub outcome: Outcome,
    /// The answer was an idempotent replay.
    pub replayed: bool,
    /// Record created, read or deleted, if any.
    pub record_id: Option<String>,
}

#[derive(Debug, Default)]
pub(crate) struct Collection {
    next: u64,
    /// In creation order.
    records: Vec<Map<String, Value>>,
    /// External id (string form) → record id.
    external_ids: HashMap<String, String>,
}

/// Why a create failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CreateError {
    DuplicateExternalId { existing_id: String },
}

#[derive(Debug, Default)]
pub(crate) struct Data {
    pub(crate) collections: BTreeMap<String, Collection>,
    pub(crate) idempotency: IdempotencyStore,
    log: VecDeque<LogEntry>,
    log_seq: u64,
    faults: Vec<FaultRule>,
    fault_seq: u64,
    /// The vendor fakes' records, tokens and settings.
    pub(crate) vendors: VendorData,
}

impl Data {
    fn fresh() -> Self {
        let mut d = Data::default();
        d.seed();
        d
    }

    fn seed(&mut self) {
        for c in BUILTIN_COLLECTIONS {
            self.collections.entry(c.to_string()).or_default();
        }
    }
}

struct Inner {
    config: SandboxConfig,
    data: Mutex<Data>,
    shutdown: watch::Sender<bool>,
}

/// The sandbox's shared state. Cheap to clone; all clones see the same data.
#[derive(Clone)]
pub struct SandboxState {
    inner: Arc<Inner>,
}

impl fmt::Debug for SandboxState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SandboxState")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl Default for SandboxState {
    fn default() -> Self {
        SandboxState::new(SandboxConfig::default())
    }
}

/// The string a field is compared by in find-by-field (`?field=value`) and external-id
/// uniqueness: a string as is, anything else as compact JSON (`42`, `true`, `null`).
pub fn string_form(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `deals` → `deal`, `contacts` → `contact`; names not ending in `s` stay as they are.
pub fn id_prefix(collection: &str) -> &str {
    match collection.strip_suffix('s') {
        Some(p) if !p.is_empty() => p,
        _ => collection,
    }
}

/// Is this a collection name the sandbox serves? `[a-z0-9_-]{1,64}`, except the reserved
/// `_sandbox` and the vendor fakes' prefixes (`hubspot`, `stripe`, `slack`, `sheets`, `oauth`).
pub fn valid_collection(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name != "_sandbox"
        && !super::vendors::reserved_prefixes().any(|p| p == name)
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

impl SandboxState {
    /// Empty sandbox (the built-in collections exist, empty).
    pub fn new(config: SandboxConfig) -> Self {
        let (shutdown, _) = watch::channel(false);
        SandboxState {
            inner: Arc::new(Inner {
                config,
                data: Mutex::new(Data::fresh()),
                shutdown,
            }),
        }
    }

    /// The settings.
    pub fn config(&self) -> &SandboxConfig {
        &self.inner.config
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Data> {
        // A poisoned lock only means a panic elsewhere; the data is still consistent enough
        // for a test double.
        self.inner.data.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn now_ms(&self) -> i64 {
        self.inner.config.clock.now_ms()
    }

    pub(crate) fn now_rfc3339(&self) -> String {
        rfc3339(self.now_ms())
    }

    /// Release held requests (`timeout_after_write`, `slow`): they drop their connections
    /// (holds) or carry on (delays). Also what [`super::SandboxHandle::shutdown`] calls.
    pub fn signal_shutdown(&self) {
        self.inner.shutdown.send_replace(true);
    }

    /// Has [`SandboxState::signal_shutdown`] been called?
    pub fn is_shutting_down(&self) -> bool {
        *self.inner.shutdown.borrow()
    }

    /// Resolves once [`SandboxState::signal_shutdown`] has been called.
    pub async fn shutdown_signalled(&self) {
        let mut rx = self.inner.shutdown.subscribe();
        // Err only if the sender is gone, which cannot happen while `self` holds it.
        let _ = rx.wait_for(|v| *v).await;
    }

    // ---- records ----

    /// Records of one collection, in creation order (empty if it doesn't exist).
    pub fn records(&self, collection: &str) -> Vec<Value> {
        self.lock()
            .collections
            .get(collection)
            .map(|c| c.records.iter().cloned().map(Value::Object).collect())
            .unwrap_or_default()
    }

    /// Every collection with its records.
    pub fn all_records(&self) -> BTreeMap<String, Vec<Value>> {
        self.lock()
            .collections
            .iter()
            .map(|(name, c)| {
                (
                    name.clone(),
                    c.records.iter().cloned().map(Value::Object).collect(),
                )
            })
            .collect()
    }

    /// Records per kind in the vendor fakes (`hubspot contacts` → 2), kinds with none left
    /// out.
    pub fn vendor_counts(&self) -> BTreeMap<String, usize> {
        super::vendors::counts(&self.lock().vendors)
    }

    /// Records per collection and per vendor-fake kind (`deals` → 1, `hubspot contacts` → 2),
    /// without copying them: what `fluxo check` compares before and after each call.
    pub fn counts(&self) -> BTreeMap<String, usize> {
        let state = self.lock();
        let mut out: BTreeMap<String, usize> = state
            .collections
            .iter()
            .map(|(name, c)| (name.clone(), c.records.len()))
            .collect();
        out.extend(super::vendors::counts(&state.vendors));
        out
    }

    /// One record by id.
    pub fn record(&self, collection: &str, id: &str) -> Option<Value> {
        self.lock()
            .collections
            .get(collection)
            .and_then(|c| c.records.iter().find(|r| record_id(r) == Some(id)))
            .cloned()
            .map(Value::Object)
    }

    /// Records whose top-level fields all equal (by [`string_form`]) the given values.
    pub fn find(&self, collection: &str, filters: &[(String, String)]) -> Vec<Value> {
        self.lock()
            .collections
            .get(collection)
            .map(|c| {
                c.records
                    .iter()
                    .filter(|r| {
                        filters
                            .iter()
                            .all(|(k, v)| r.get(k).is_some_and(|x| string_form(x) == *v))
                    })
                    .cloned()
                    .map(Value::Object)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Create a record from `body`: assigns `id` and `created_at` (overriding any given),
    /// enforces unique `external_id` (compared by [`string_form`], so `42` and `"42"` clash).
    /// The caller has checked the collection name and the `external_id` type.
    pub(crate) fn create(
        &self,
        collection: &str,
        body: Map<String, Value>,
    ) -> Result<Map<String, Value>, CreateError> {
        let created_at = self.now_rfc3339();
        let mut data = self.lock();
        let coll = data.collections.entry(collection.to_string()).or_default();
        let external = body
            .get("external_id")
            .filter(|v| !v.is_null())
            .map(string_form);
        if let Some(ext) = &external {
            if let Some(existing) = coll.external_ids.get(ext) {
                return Err(CreateError::DuplicateExternalId {
                    existing_id: existing.clone(),
                });
            }
        }
        coll.next += 1;
        let id = format!("{}_{:04}", id_prefix(collection), coll.next);
        let mut record = Map::with_capacity(body.len() + 2);
        record.insert("id".into(), Value::String(id.clone()));
        for (k, v) in body {
            if k != "id" && k != "created_at" {
                record.insert(k, v);
            }
        }
        record.insert("created_at".into(), Value::String(created_at));
        if let Some(ext) = external {
            coll.external_ids.insert(ext, id);
        }
        coll.records.push(record.clone());
        Ok(record)
    }

    /// Delete a record; returns it if it existed.
    pub(crate) fn delete(&self, collection: &str, id: &str) -> Option<Map<String, Value>> {
        let mut data = self.lock();
        let coll = data.collections.get_mut(collection)?;
        let pos = coll.records.iter().position(|r| record_id(r) == Some(id))?;
        let record = coll.records.remove(pos);
        coll.external_ids.retain(|_, rid| rid != id);
        Some(record)
    }

    /// Forget records, idempotency keys, the log and fault rules (built-in collections come
    /// back empty; id counters restart).
    pub fn reset(&self) {
        let mut data = self.lock();
        let (log_seq, fault_seq) = (data.log_seq, data.fault_seq);
        // Cleared in place so claim tokens stay unique: a request in flight across the reset
        // cannot complete a newer claim of the same key.
        let mut idempotency = std::mem::take(&mut data.idempotency);
        idempotency.clear();
        *data = Data::fresh();
        data.idempotency = idempotency;
        data.log_seq = log_seq;
        data.fault_seq = fault_seq;
    }

    /// Idempotency keys held (claimed by a running request or answered, not yet expired).
    pub fn idempotency_key_count(&self) -> usize {
        self.lock().idempotency.len()
    }

    // ---- log ----

    /// The request log, oldest first.
    pub fn log(&self) -> Vec<LogEntry> {
        self.lock().log.iter().cloned().collect()
    }

    pub(crate) fn push_log(&self, mut entry: LogEntry) {
        let max = self.inner.config.max_log_entries;
        let mut data = self.lock();
        data.log_seq += 1;
        entry.seq = data.log_seq;
        data.log.push_back(entry);
        while data.log.len() > max {
            data.log.pop_front();
        }
    }

    // ---- faults ----

    /// Add a per-route fault rule.
    pub fn add_fault(&self, spec: FaultRuleSpec) -> Result<FaultRule, String> {
        let matcher = RouteMatcher::parse(&spec.route)?;
        if spec.times == Some(0) {
            return Err("times must be at least 1 (omit it for until cleared)".into());
        }
        let mut data = self.lock();
        data.fault_seq += 1;
        let rule = FaultRule {
            id: format!("fault_{}", data.fault_seq),
            route: spec.route.trim().to_string(),
            fault: spec.fault,
            times: spec.times,
            remaining: spec.times,
            matcher,
        };
        data.faults.push(rule.clone());
        Ok(rule)
    }

    /// Active fault rules, oldest first.
    pub fn faults(&self) -> Vec<FaultRule> {
        self.lock().faults.clone()
    }

    /// Remove every fault rule.
    pub fn clear_faults(&self) {
        self.lock().faults.clear();
    }

    /// Remove one fault rule; `false` if there was none with that id.
    pub fn remove_fault(&self, id: &str) -> bool {
        let mut data = self.lock();
        let before = data.faults.len();
        data.faults.retain(|r| r.id != id);
        data.faults.len() != before
    }

    /// The fault for a request without a fault header: the oldest matching rule, which uses up
    /// one of its `times` (and goes away at zero).
    pub(crate) fn take_route_fault(&self, method: &str, path: &str) -> Option<Fault> {
        let mut data = self.lock();
        let pos = data
            .faults
            .iter()
            .position(|r| r.matcher.matches(method, path))?;
        let rule = &mut data.faults[pos];
        let fault = rule.fault;
        if let Some(n) = rule.remaining.as_mut() {
            *n = n.saturating_sub(1);
            if *n == 0 {
                data.faults.remove(pos);
            }
        }
        Some(fault)
    }
}

pub(crate) fn record_id(r: &Map<String, Value>) -> Option<&str> {
    r.get("id").and_then(Value::as_str)
}

fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn names_and_prefixes() {
        assert!(valid_collection("deals"));
        assert!(valid_collection("a-b_1"));
        assert!(!valid_collection("Deals"));
        assert!(!valid_collection("_sandbox"));
        assert!(!valid_collection(&"a".repeat(65)));
        assert_eq!(id_prefix("deals"), "deal");
        assert_eq!(id_prefix("s"), "s");
        assert_eq!(id_prefix("ledger"), "ledger");
    }

    #[test]
    fn create_find_delete() {
        let s = SandboxState::default();
        let a = s
            .create(
                "deals",
                obj(json!({"id": "x", "external_id": 42, "amount": 5})),
            )
            .unwrap();
        assert_eq!(a["id"], "deal_0001");
        assert_eq!(
            s.create("deals", obj(json!({"external_id": "42"}))),
            Err(CreateError::DuplicateExternalId {
                existing_id: "deal_0001".into()
            })
        );
        assert_eq!(s.find("deals", &[("amount".into(), "5".into())]).len(), 1);
        assert!(s.delete("deals", "deal_0001").is_some());
        // The external id is free again; ids are not reused.
        let b = s.create("deals", obj(json!({"external_id": 42}))).unwrap();
        assert_eq!(b["id"], "deal_0002");
        s.reset();
        assert!(s.records("deals").is_empty());
        assert!(s.all_records().contains_key("tickets"));
    }
}
