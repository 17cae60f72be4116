//! Duplicates stopped (issue 37): every delivery of an event after its first, and where Fluxo
//! stopped it, so the guarantee can be seen where people look (a run's deliveries, the list's
//! "+N duplicates stopped", the history chart) and not only in `/metrics`.
//!
//! What counts as a stopped duplicate, and the run it is listed on (the run that holds the
//! effect):
//!
//! * **the door** ([`StoppedBy::Door`]): a webhook delivery answered `200 duplicate: true`;
//!   listed on the run its first delivery started;
//! * **the run API** ([`StoppedBy::RunApi`]): a repeat of a run-starting `POST` with the same
//!   `Idempotency-Key`, answered from the stored answer; listed on the run it answered with;
//! * **a Memory claim** ([`StoppedBy::MemoryClaim`]): a live run whose claim (a Memory write
//!   with `allow_overwrite: false`) found the key held by another lineage; listed on the
//!   holder's run (`claimed_by`), naming the run it stopped;
//! * **the app** ([`StoppedBy::App`]): a live run whose connector write or `find_or_create`
//!   answered that the record existed already (a native key's replay, an upsert, a conflict
//!   read as "exists", a find, a kept id); listed on that run itself, naming the strategy.
//!
//! **Never on the door's path**: a door duplicate is one count in an in-memory tally (a
//! sharded map, no store access, no await); the tally is written every
//! [`FLUSH_EVERY`] by a background task (and before this process answers a read), one
//! record per run per flush. A process killed before its flush loses at most that second's
//! tallies: these are records for people, not the dedupe itself (the claim is). A run's
//! records are read by key prefix, so processes sharing a database never overwrite each
//! other's (each record's key names the process).
//!
//! **Where**: Memory namespace [`NAMESPACE`] (so every store, sled and PostgreSQL, keeps them
//! with its TTL sweeping): `r/<run id>/<first at ms, 13 digits>-<process>-<n>` (the record)
//! and `t/<first at ms, 13 digits>/<process>-<n>` (the same count, by time, for the chart).
//! A door record expires with the trigger's dedupe window (after it, a repeat is a new run
//! anyway); a run's own record after [`IN_RUN_TTL_MS`].

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::watch;

use super::{AppError, AppResult, AppState};
use crate::run::{Mode, RunRecord, Timestamp, Trigger};
use crate::store::{StoreResult, WriteOptions};

/// The Memory namespace the records live in.
pub const NAMESPACE: &str = "fluxo.duplicates";

/// How often a process writes its tallies.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);

/// How long a record of a duplicate stopped inside a run is kept: 30 days (the `fan_out`
/// window's default).
pub const IN_RUN_TTL_MS: i64 = 30 * 86_400_000;

/// Most records one run lists (the newest); its total counts them all.
pub const MAX_LISTED: usize = 200;

/// Most records one chart or filter reads (the chart then says `complete: false`).
pub const MAX_SCANNED: usize = 100_000;

/// Where a duplicate was stopped.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum StoppedBy {
    /// The webhook door: a repeat of a key within the trigger's dedupe window, answered
    /// `200 {"duplicate": true}` with no second run.
    Door,
    /// The run API: a repeat of a `POST` that started a run (a run, a replay, a resume) with
    /// the same `Idempotency-Key`, answered with the stored answer and no second run.
    RunApi,
    /// A Memory claim at `step_id` found the key held by this run's lineage.
    MemoryClaim { step_id: String },
    /// The app's own dedupe at `step_id`: `strategy` is the write's declared one
    /// (`native_key`, `upsert`, `conflict_is_exists`, `kept_id`, `find_then_create`), or
    /// `find_or_create` for that step kind.
    App { step_id: String, strategy: String },
}

/// One record: `count` duplicates stopped the same way between `first_at` and `last_at`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Stopped {
    /// The run that holds the effect (the one the record is listed on).
    pub run_id: String,
    pub workflow_id: String,
    #[serde(flatten)]
    pub by: StoppedBy,
    /// How many deliveries this record counts (≥ 1).
    pub count: u64,
    /// The first and last of them.
    pub first_at: Timestamp,
    pub last_at: Timestamp,
    /// The HTTP status the sender was answered (`200` for the door's repeat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub answer: Option<u16>,
    /// The run the duplicate started and that stopped (a Memory claim's loser).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub stopped_run: Option<String>,
}

/// A run's deliveries (`GET /api/v1/runs/{id}/deliveries`): the first (the run itself), then
/// each record of duplicates stopped, oldest first.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Deliveries {
    pub run_id: String,
    /// How the run started and when: the first delivery.
    pub first: FirstDelivery,
    /// Every duplicate stopped, summed over `stopped` (which lists at most 200 records).
    pub duplicates_stopped: u64,
    pub stopped: Vec<Stopped>,
}

/// The delivery that started a run.
#[derive(Debug, Clone, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FirstDelivery {
    pub at: Timestamp,
    pub trigger: Trigger,
    /// The key it was deduped on (the webhook's `Idempotency-Key` or event id, the API's key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub key: Option<String>,
    /// The HTTP status a webhook sender was answered: `202`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub answer: Option<u16>,
}

/// What a tally is kept under until its flush.
#[derive(PartialEq, Eq, Hash)]
struct TallyKey {
    run_id: String,
    by: StoppedBy,
    stopped_run: Option<String>,
}

struct Tally {
    workflow_id: String,
    count: u64,
    first_at: i64,
    last_at: i64,
    answer: Option<u16>,
    ttl_ms: i64,
}

const SHARDS: usize = 16;

/// This process's tallies of stopped duplicates, not yet written ([`Self::flush`]).
pub struct DuplicateLog {
    shards: [Mutex<HashMap<TallyKey, Tally>>; SHARDS],
    /// Names this process in record keys.
    process: String,
    seq: AtomicU64,
}

impl Default for DuplicateLog {
    fn default() -> Self {
        DuplicateLog {
            shards: std::array::from_fn(|_| Mutex::new(HashMap::new())),
            process: uuid::Uuid::new_v4().simple().to_string()[..8].to_string(),
            seq: AtomicU64::new(0),
        }
    }
}

impl DuplicateLog {
    fn shard(&self, run_id: &str) -> &Mutex<HashMap<TallyKey, Tally>> {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        run_id.hash(&mut h);
        &self.shards[(h.finish() as usize) % SHARDS]
    }

    /// Count one duplicate stopped at `at` (unix ms), listed on `run_id`; kept `ttl_ms` once
    /// written. In memory only: no store access.
    #[allow(clippy::too_many_arguments)]
    pub fn note(
        &self,
        workflow_id: &str,
        run_id: String,
        by: StoppedBy,
        stopped_run: Option<String>,
        answer: Option<u16>,
        at: i64,
        ttl_ms: i64,
    ) {
        let mut shard = self
            .shard(&run_id)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let key = TallyKey {
            run_id,
            by,
            stopped_run,
        };
        let t = shard.entry(key).or_insert_with(|| Tally {
            workflow_id: workflow_id.to_string(),
            count: 0,
            first_at: at,
            last_at: at,
            answer,
            ttl_ms,
        });
        t.count += 1;
        t.first_at = t.first_at.min(at);
        t.last_at = t.last_at.max(at);
    }

    /// Note what a finished live run stopped inside itself: each Memory claim that found its
    /// key held by another lineage (listed on the holder's run) and each write the app
    /// answered as existing (listed on this run). Steps reused by a resume were counted by
    /// the run that executed them. Dry runs stop nothing.
    pub fn note_run(&self, run: &RunRecord) {
        if run.mode != Mode::Live {
            return;
        }
        for step in run.steps.iter().filter(|s| s.reused_from.is_none()) {
            let Some(out) = &step.output else { continue };
            let at = step.finished_at.map(|t| t.0).unwrap_or(step.started_at.0);
            match step.kind.as_str() {
                "memory" => {
                    let claim = step.resolved_config.get("allow_overwrite")
                        != Some(&Value::Bool(true))
                        && step
                            .resolved_config
                            .get("operation")
                            .and_then(Value::as_str)
                            == Some("write");
                    let lost = out.get("written") == Some(&Value::Bool(false))
                        && out.get("reason").and_then(Value::as_str) == Some("exists");
                    if !(claim && lost) {
                        continue;
                    }
                    let holder = out
                        .get("claimed_by")
                        .and_then(Value::as_str)
                        .filter(|h| *h != run.root())
                        .map(str::to_string);
                    let (listed_on, stopped_run) = match holder {
                        Some(h) => (h, Some(run.id.clone())),
                        None => (run.id.clone(), None),
                    };
                    let by = StoppedBy::MemoryClaim {
                        step_id: step.step_id.clone(),
                    };
                    self.note(
                        &run.workflow_id,
                        listed_on,
                        by,
                        stopped_run,
                        None,
                        at,
                        IN_RUN_TTL_MS,
                    );
                }
                "action" | "find_or_create" => {
                    let existing = out.get("existing") == Some(&Value::Bool(true))
                        || (step.kind == "find_or_create"
                            && out.get("created") == Some(&Value::Bool(false)));
                    if !existing {
                        continue;
                    }
                    let strategy = match step.kind.as_str() {
                        "action" => crate::steps::action::strategy(&step.resolved_config)
                            .map(|d| d.as_str())
                            .unwrap_or("app"),
                        _ => "find_or_create",
                    };
                    let by = StoppedBy::App {
                        step_id: step.step_id.clone(),
                        strategy: strategy.to_string(),
                    };
                    self.note(
                        &run.workflow_id,
                        run.id.clone(),
                        by,
                        None,
                        None,
                        at,
                        IN_RUN_TTL_MS,
                    );
                }
                _ => {}
            }
        }
    }

    /// Note a repeat of a run API request answered from its stored answer (`status`,
    /// `body`), when that answer is a run (`{id, workflow_id, …}`); kept `ttl_ms`.
    pub fn note_api_replay(&self, status: u16, body: &str, now: i64, ttl_ms: i64) {
        let Ok(v) = serde_json::from_str::<Value>(body) else {
            return;
        };
        if let (Some(id), Some(wf)) = (
            v.get("id").and_then(Value::as_str),
            v.get("workflow_id").and_then(Value::as_str),
        ) {
            self.note(
                wf,
                id.to_string(),
                StoppedBy::RunApi,
                None,
                Some(status),
                now,
                ttl_ms,
            );
        }
    }

    fn take(&self) -> Vec<(TallyKey, Tally)> {
        let mut all = Vec::new();
        for shard in &self.shards {
            let mut s = shard.lock().unwrap_or_else(|e| e.into_inner());
            if !s.is_empty() {
                all.extend(s.drain());
            }
        }
        all
    }

    /// Write every tally as a record (two Memory entries each). A tally whose write fails is
    /// counted again at the next flush (nothing is dropped while the store is down, up to the
    /// tallies' memory: one entry per run and way).
    pub async fn flush(&self, state: &AppState) -> StoreResult<()> {
        let tallies = self.take();
        if tallies.is_empty() {
            return Ok(());
        }
        let memory = state.store().clone();
        let mut failed = None;
        let mut tallies = tallies.into_iter();
        for (key, t) in tallies.by_ref() {
            let n = self.seq.fetch_add(1, Ordering::Relaxed);
            let id = format!("{}-{n}", self.process);
            let record = Stopped {
                run_id: key.run_id.clone(),
                workflow_id: t.workflow_id.clone(),
                by: key.by.clone(),
                count: t.count,
                first_at: Timestamp(t.first_at),
                last_at: Timestamp(t.last_at),
                answer: t.answer,
                stopped_run: key.stopped_run.clone(),
            };
            let value = serde_json::to_value(&record).unwrap_or(Value::Null);
            let opts = WriteOptions {
                allow_overwrite: true,
                ttl_ms: Some(t.ttl_ms.max(1) as u64),
                owner: None,
            };
            let now = state.clock().now_ms();
            let by_run = format!("r/{}/{:013}-{id}", key.run_id, t.first_at.max(0));
            let by_time = format!("t/{:013}/{id}", t.first_at.max(0));
            let time_value = serde_json::json!({"workflow_id": t.workflow_id, "run_id": key.run_id, "count": t.count});
            let res = async {
                memory.write(NAMESPACE, &by_run, &value, opts, now).await?;
                memory
                    .write(NAMESPACE, &by_time, &time_value, opts, now)
                    .await
            }
            .await;
            if let Err(e) = res {
                tracing::warn!(error = %e, "duplicates stopped: the record could not be written; kept for the next flush");
                self.restore(key, t);
                failed = Some(e);
                break;
            }
        }
        if failed.is_some() {
            for (key, t) in tallies {
                self.restore(key, t);
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Put a tally back (its flush failed), merged with any counted since.
    fn restore(&self, key: TallyKey, t: Tally) {
        let mut shard = self
            .shard(&key.run_id)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match shard.get_mut(&key) {
            Some(now) => {
                now.count += t.count;
                now.first_at = now.first_at.min(t.first_at);
                now.last_at = now.last_at.max(t.last_at);
            }
            None => {
                shard.insert(key, t);
            }
        }
    }
}

/// Write this process's tallies every [`FLUSH_EVERY`] until `shutdown`, then once more.
pub fn spawn_flusher(
    state: AppState,
    mut shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(FLUSH_EVERY) => {}
                _ = shutdown.wait_for(|s| *s) => break,
            }
            let _ = state.duplicates().flush(&state).await;
        }
        let _ = state.duplicates().flush(&state).await;
    })
}

/// Read this namespace's records under `prefix` in key order, after `after` (exclusive),
/// at most [`MAX_SCANNED`]: `visit` gets each and answers whether to go on. `true` when the
/// read ended (every record read, or `visit` stopped it), `false` when the cap cut it.
async fn scan(
    state: &AppState,
    prefix: &str,
    mut after: Option<String>,
    mut visit: impl FnMut(crate::store::MemoryEntry) -> bool,
) -> AppResult<bool> {
    let now = state.clock().now_ms();
    let mut scanned = 0;
    loop {
        let page = state
            .store()
            .list(NAMESPACE, prefix, after.as_deref(), 1_000, now)
            .await
            .map_err(AppError::store)?;
        let Some(last) = page.last().map(|e| e.key.clone()) else {
            return Ok(true);
        };
        for e in page {
            scanned += 1;
            if !visit(e) {
                return Ok(true);
            }
        }
        if scanned >= MAX_SCANNED {
            return Ok(false);
        }
        after = Some(last);
    }
}

/// Whether a record's value is of `workflow` (any, without one).
fn of_workflow(value: &Value, workflow: Option<&str>) -> bool {
    workflow.is_none_or(|w| value.get("workflow_id").and_then(Value::as_str) == Some(w))
}

/// Records of `run_id` (this process's tallies written first), oldest first, at most
/// [`MAX_LISTED`] (the newest), and the sum of all of them.
pub async fn stopped_for(state: &AppState, run_id: &str) -> AppResult<(u64, Vec<Stopped>)> {
    flush_for_read(state).await;
    let mut all: Vec<Stopped> = Vec::new();
    scan(state, &format!("r/{run_id}/"), None, |e| {
        all.extend(serde_json::from_value::<Stopped>(e.value).ok());
        true
    })
    .await?;
    let total = all.iter().map(|s| s.count).sum();
    all.sort_by_key(|s| (s.first_at.0, s.last_at.0));
    if all.len() > MAX_LISTED {
        all.drain(..all.len() - MAX_LISTED);
    }
    Ok((total, all))
}

/// How many duplicates each run of `run_ids` stopped (runs with none are absent): one prefix
/// read per run, all at once.
pub async fn counts(state: &AppState, run_ids: &[&str]) -> AppResult<HashMap<String, u64>> {
    flush_for_read(state).await;
    let now = state.clock().now_ms();
    let store = state.store();
    let reads = run_ids.iter().map(|id| async move {
        let prefix = format!("r/{id}/");
        let entries = store
            .list(NAMESPACE, &prefix, None, MAX_LISTED, now)
            .await?;
        let n: u64 = entries
            .iter()
            .filter_map(|e| e.value.get("count").and_then(Value::as_u64))
            .sum();
        StoreResult::Ok((id.to_string(), n))
    });
    let counted = futures_util::future::try_join_all(reads)
        .await
        .map_err(AppError::store)?;
    Ok(counted.into_iter().filter(|(_, n)| *n > 0).collect())
}

/// Duplicates stopped in `[since, until)` (by their record's first time), optionally of one
/// workflow: `(total, bars of bucket_ms aligned on the epoch from drawn_since, complete)`.
pub async fn over_time(
    state: &AppState,
    workflow: Option<&str>,
    since: i64,
    until: i64,
    bucket_ms: i64,
    drawn_since: i64,
) -> AppResult<(u64, std::collections::BTreeMap<i64, u64>, bool)> {
    flush_for_read(state).await;
    let end = format!("t/{:013}", until.max(0));
    let mut total = 0;
    let mut bars = std::collections::BTreeMap::new();
    let complete = scan(state, "t/", Some(format!("t/{:013}", since.max(0))), |e| {
        if e.key >= end {
            return false;
        }
        if of_workflow(&e.value, workflow) {
            let at: i64 = e.key.get(2..15).and_then(|t| t.parse().ok()).unwrap_or(0);
            let n = e.value.get("count").and_then(Value::as_u64).unwrap_or(0);
            total += n;
            if at >= drawn_since && bucket_ms > 0 {
                *bars.entry(at - at.rem_euclid(bucket_ms)).or_default() += n;
            }
        }
        true
    })
    .await?;
    Ok((total, bars, complete))
}

/// The ids of runs with duplicates stopped (of `workflow`, when given), at most
/// [`MAX_SCANNED`] records read.
pub async fn run_ids(
    state: &AppState,
    workflow: Option<&str>,
) -> AppResult<std::collections::HashSet<String>> {
    flush_for_read(state).await;
    let mut ids = std::collections::HashSet::new();
    scan(state, "r/", None, |e| {
        if of_workflow(&e.value, workflow) {
            if let Some(id) = e.value.get("run_id").and_then(Value::as_str) {
                ids.insert(id.to_string());
            }
        }
        true
    })
    .await?;
    Ok(ids)
}

/// A run's deliveries: the first (the run) and every duplicate stopped.
pub async fn deliveries(state: &AppState, run: &RunRecord) -> AppResult<Deliveries> {
    let (duplicates_stopped, stopped) = stopped_for(state, &run.id).await?;
    Ok(Deliveries {
        run_id: run.id.clone(),
        first: FirstDelivery {
            at: run.created_at,
            trigger: run.trigger,
            key: run.idempotency_key.clone(),
            answer: (run.trigger == Trigger::Webhook).then_some(202),
        },
        duplicates_stopped,
        stopped,
    })
}

/// Write this process's tallies before a read, so what it counted is seen at once (a failed
/// write is logged and read later).
async fn flush_for_read(state: &AppState) {
    if let Err(e) = state.duplicates().flush(state).await {
        tracing::warn!(error = %e, "duplicates stopped: flush before a read failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn step(id: &str, kind: &str, config: Value, output: Value) -> Value {
        json!({"step_id": id, "kind": kind, "status": "succeeded",
               "started_at": "2026-12-06T10:00:00Z", "finished_at": "2026-12-06T10:00:01Z",
               "duration_ms": 1000, "resolved_config": config, "output": output,
               "attempts": [], "ports": ["out"]})
    }

    fn run(mode: &str, steps: Vec<Value>) -> RunRecord {
        serde_json::from_value(json!({
            "id": "run-b", "workflow_id": "wf", "workflow_version": 1, "definition_hash": "h",
            "trigger": "webhook", "mode": mode, "input": {}, "status": "succeeded",
            "created_at": "2026-12-06T10:00:00Z", "steps": steps
        }))
        .unwrap()
    }

    fn claim_lost() -> Value {
        step(
            "claim",
            "memory",
            json!({"operation": "write", "namespace": "n", "key": "k", "allow_overwrite": false}),
            json!({"written": false, "reason": "exists", "claimed_by": "run-a"}),
        )
    }

    fn upserted() -> Value {
        step(
            "crm",
            "action",
            json!({"connector": "hubspot", "operation": "upsert_contact", "connection": "c"}),
            json!({"id": "1", "existing": true}),
        )
    }

    fn tallies(log: &DuplicateLog) -> Vec<(String, StoppedBy, Option<String>, u64)> {
        let mut v: Vec<_> = log
            .take()
            .into_iter()
            .map(|(k, t)| (k.run_id, k.by, k.stopped_run, t.count))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// A lost claim is listed on the holder naming the stopped run; an app's "existing" on the
    /// run itself with the write's declared strategy; a claim this run won, a write that
    /// created, a read, reused steps and dry runs count nothing.
    #[test]
    fn a_finished_run_notes_what_it_stopped_and_nothing_else() {
        let log = DuplicateLog::default();
        let mut reused = upserted();
        reused["step_id"] = json!("crm_again");
        reused["reused_from"] = json!("run-0");
        log.note_run(&run(
            "live",
            vec![
                claim_lost(),
                upserted(),
                reused,
                step(
                    "won",
                    "memory",
                    json!({"operation": "write", "namespace": "n", "key": "j", "allow_overwrite": false}),
                    json!({"written": true, "key": "j"}),
                ),
                step(
                    "overwrite",
                    "memory",
                    json!({"operation": "write", "namespace": "n", "key": "k", "allow_overwrite": true}),
                    json!({"written": false, "reason": "exists"}),
                ),
                step(
                    "created",
                    "action",
                    json!({"connector": "hubspot", "operation": "create_contact", "connection": "c"}),
                    json!({"id": "2", "existing": false}),
                ),
            ],
        ));
        assert_eq!(
            tallies(&log),
            vec![
                (
                    "run-a".to_string(),
                    StoppedBy::MemoryClaim {
                        step_id: "claim".into()
                    },
                    Some("run-b".to_string()),
                    1
                ),
                (
                    "run-b".to_string(),
                    StoppedBy::App {
                        step_id: "crm".into(),
                        strategy: "upsert".into()
                    },
                    None,
                    1
                ),
            ]
        );
        log.note_run(&run("dry", vec![claim_lost(), upserted()]));
        assert!(tallies(&log).is_empty(), "a dry run stops nothing");
    }

    /// Repeats of one run at the door add up in one tally, from their first to last time.
    #[test]
    fn door_repeats_add_up_in_one_tally() {
        let log = DuplicateLog::default();
        for at in [3_000, 1_000, 2_000] {
            log.note(
                "wf",
                "run-a".into(),
                StoppedBy::Door,
                None,
                Some(200),
                at,
                60_000,
            );
        }
        let all = log.take();
        assert_eq!(all.len(), 1);
        let (_, t) = &all[0];
        assert_eq!((t.count, t.first_at, t.last_at), (3, 1_000, 3_000));
        assert!(log.take().is_empty(), "taken once");
    }
}
