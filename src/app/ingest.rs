//! Webhook deliveries (SPEC §5 "Webhooks"): dedupe at the door. A delivery's key is claimed
//! and its run queued in one transaction, batched with other deliveries by the
//! [`crate::store::GroupCommit`] and made durable before the answer; a repeat of a live claim is
//! answered with the original run, once that claim is durable. The HTTP adapter
//! (`server::hooks`) reads the request (body, key, signature) and renders a [`Delivery`].

use std::sync::Arc;

use super::{AppError, AppResult, AppState};
use crate::steps::{parse_config, webhook_trigger, ConfigProblem};
use crate::store::{ClaimOutcome, WebhookClaim};
use crate::workflow::Compiled;

/// What became of a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// A new delivery: its run is durable and queued.
    Accepted { run_id: String },
    /// A repeat of a key within the dedupe window: the run its first delivery started.
    Duplicate { run_id: String },
}

/// A repeat answered with its first delivery's run: counted, logged, and noted on that run
/// as stopped at the door ([`super::duplicates`]; in memory, kept `window_ms` once written).
fn duplicate(
    state: &AppState,
    workflow_id: &str,
    run_id: String,
    now: i64,
    window_ms: i64,
) -> Delivery {
    tracing::info!(workflow_id = %workflow_id, run_id = %run_id, "duplicate delivery");
    crate::telemetry::delivery_duplicate();
    state.duplicates().note(
        workflow_id,
        run_id.clone(),
        super::duplicates::StoppedBy::Door,
        None,
        Some(200),
        now,
        window_ms,
    );
    Delivery::Duplicate { run_id }
}

/// Recently seen durable claims, `(workflow_id, key)` → `(run_id, expires_at)`, so a repeat
/// delivery is answered without a store read. Only durable claims go in (a claim this process
/// made durable, or a repeat's claim confirmed after a flush), and claims are
/// never changed within their window (only undone before they are durable, or swept after
/// they expire), so an entry stays true until its `expires_at`. Bounded (oldest and least
/// used out first); a miss is claimed, and the claim answers a repeat.
pub struct RecentClaims(quick_cache::sync::Cache<ClaimId, (String, i64)>);

/// A claim's `(workflow_id, key)` as [`RecentClaims`] keeps it.
#[derive(PartialEq, Eq, Hash)]
struct ClaimId {
    workflow_id: String,
    key: String,
}

/// A borrowed [`ClaimId`]: a lookup builds no key (same fields, same hash).
#[derive(Hash)]
struct ClaimRef<'a> {
    workflow_id: &'a str,
    key: &'a str,
}

impl quick_cache::Equivalent<ClaimId> for ClaimRef<'_> {
    fn equivalent(&self, id: &ClaimId) -> bool {
        self.workflow_id == id.workflow_id && self.key == id.key
    }
}

impl RecentClaims {
    /// Entries kept.
    pub const CAPACITY: usize = 50_000;

    /// The live claim's run id, if cached.
    pub fn get(&self, workflow_id: &str, key: &str, now: i64) -> Option<String> {
        self.0
            .get(&ClaimRef { workflow_id, key })
            .filter(|(_, expires_at)| *expires_at > now)
            .map(|(run_id, _)| run_id)
    }

    pub fn insert(&self, workflow_id: &str, key: &str, run_id: &str, expires_at: i64) {
        let id = ClaimId {
            workflow_id: workflow_id.to_string(),
            key: key.to_string(),
        };
        self.0.insert(id, (run_id.to_string(), expires_at));
    }
}

impl Default for RecentClaims {
    fn default() -> Self {
        RecentClaims(quick_cache::sync::Cache::new(Self::CAPACITY))
    }
}

/// A webhook trigger's config as the door reads it on every delivery: parsed once per
/// workflow definition, not per delivery (its `sample_input`, the editor's example payload,
/// can be as large as a delivery; it is dropped from `config`, which the door never reads it
/// from).
#[derive(Debug)]
pub struct WebhookDoor {
    pub config: webhook_trigger::Config,
    /// `config.allowed_origins`, parsed (an entry that does not parse never matches).
    pub allowed_origins: Vec<webhook_trigger::WebOrigin>,
}

/// [`WebhookDoor`]s by definition hash ([`Compiled::hash`]: a changed workflow is parsed
/// anew), at most [`TriggerConfigs::CAPACITY`].
pub struct TriggerConfigs(quick_cache::sync::Cache<String, Arc<WebhookDoor>>);

impl TriggerConfigs {
    /// Definitions kept.
    pub const CAPACITY: usize = 1_000;

    /// The door config of `wf`'s trigger (which the caller checked is a `webhook_trigger`).
    /// Errors: the config does not parse (the problems, with their paths).
    pub fn get(&self, wf: &Compiled) -> Result<Arc<WebhookDoor>, Vec<ConfigProblem>> {
        self.0.get_or_insert_with(&wf.hash, || {
            let mut config: webhook_trigger::Config = parse_config(&wf.trigger().config)?;
            // The door never reads the example payload; not keeping it bounds an entry.
            config.sample_input = None;
            let allowed_origins = config
                .allowed_origins
                .iter()
                .filter_map(|o| webhook_trigger::WebOrigin::parse(o).ok())
                .collect();
            Ok(Arc::new(WebhookDoor {
                config,
                allowed_origins,
            }))
        })
    }
}

impl Default for TriggerConfigs {
    fn default() -> Self {
        TriggerConfigs(quick_cache::sync::Cache::new(Self::CAPACITY))
    }
}

/// The answer to a repeat of a claim this process has seen durable ([`RecentClaims`]), without
/// a store read; `None` for any other key, which is then claimed: the claim itself answers a
/// repeat ([`ClaimOutcome::Duplicate`], confirmed by a read after a flush in [`accept`]).
/// Claim first, as `INSERT … ON CONFLICT` does: a read before every claim cost each new key a
/// store round trip (a blocking-pool hop on sled, a statement on PostgreSQL) to spare the
/// rarer repeat the cache misses a body check and a batched write (+6–16% new keys on sled;
/// README, "Webhook ingest").
pub fn cached_duplicate(
    state: &AppState,
    workflow_id: &str,
    key: &str,
    now: i64,
    window_ms: i64,
) -> Option<Delivery> {
    let run_id = state.recent_claims().get(workflow_id, key, now)?;
    Some(duplicate(state, workflow_id, run_id, now, window_ms))
}

/// Wait for the flush that covers an in-flight claim naming `run_id`, then answer it as the
/// duplicate, or 503 if it was undone meanwhile.
async fn confirm_duplicate(
    state: &AppState,
    workflow_id: &str,
    key: &str,
    run_id: &str,
    now: i64,
    window_ms: i64,
) -> AppResult<Delivery> {
    let retry = || {
        AppError::unavailable(
            "the first delivery of this key is not confirmed yet; retry",
            1,
        )
    };
    state.commit().durable().await.map_err(|e| {
        tracing::error!(error = %e, "flush failed before a duplicate answer");
        retry()
    })?;
    match state
        .store()
        .get_claim(workflow_id, key, now)
        .await
        .map_err(AppError::store)?
    {
        Some(c) if c.run_id == run_id => {
            // Durable now (read after a flush that began after it was written), and a claim
            // never changes within its window: the next repeat is answered from memory.
            state
                .recent_claims()
                .insert(workflow_id, key, &c.run_id, c.expires_at);
            Ok(duplicate(state, workflow_id, c.run_id, now, window_ms))
        }
        _ => Err(retry()),
    }
}

/// Claim the key and queue the run (one transaction, batched with other deliveries by the
/// group commit), make it durable, hand it to the workers.
pub async fn accept(
    state: AppState,
    workflow_id: String,
    key: Option<String>,
    run: crate::run::RunRecord,
    now: i64,
    window_ms: i64,
) -> AppResult<Delivery> {
    let run_id = run.id.clone();
    // Counted while it waits for its claim: a burst makes the workers yield (door_first).
    let _in_door = state.door().enter();
    match key {
        Some(key) => {
            let claim = WebhookClaim {
                workflow_id: workflow_id.clone(),
                key: key.clone(),
                run_id: run_id.clone(),
                claimed_at: now,
                expires_at: now.saturating_add(window_ms),
            };
            let expires_at = claim.expires_at;
            let outcome = state.commit().claim_and_enqueue_run(claim, run).await;
            match outcome {
                Ok((ClaimOutcome::Duplicate { run_id: original }, _)) => {
                    // The claim found is durable unless an earlier batch's flush failed and
                    // its undo has not run yet: confirm it after the next flush.
                    confirm_duplicate(&state, &workflow_id, &key, &original, now, window_ms).await
                }
                Ok((ClaimOutcome::Claimed, run)) => {
                    state
                        .recent_claims()
                        .insert(&workflow_id, &key, &run_id, expires_at);
                    tracing::info!(workflow_id = %workflow_id, run_id = %run_id, "delivery accepted");
                    state.queue().push_run(run);
                    {
                        crate::telemetry::delivery_accepted();
                        Ok(Delivery::Accepted { run_id })
                    }
                }
                Err(e) => {
                    // Undone before the answer: the sender's retry must not find it. A store
                    // whose failed batch left nothing behind (or all of it, durable) needs
                    // none; during a database outage that saves a second wait for a
                    // connection before the `503`.
                    if state.store().failed_writes_linger() {
                        tracing::error!(error = %e, "claim not made durable; undoing");
                        undo_claim(&state, &workflow_id, &key, &run_id).await;
                    } else {
                        tracing::error!(error = %e, "claim not written");
                    }
                    Err(AppError::unavailable(
                        "the delivery could not be made durable; retry",
                        1,
                    ))
                }
            }
        }
        None => {
            let run = state.commit().put_run(run).await.map_err(|e| {
                tracing::error!(error = %e, "run not made durable");
                AppError::unavailable("the run could not be made durable; retry", 1)
            })?;
            state.queue().push_run(run);
            {
                crate::telemetry::delivery_accepted();
                Ok(Delivery::Accepted { run_id })
            }
        }
    }
}

/// Best effort after a failed flush: remove the claim and the queued run so a retry is
/// accepted.
pub async fn undo_claim(state: &AppState, workflow_id: &str, key: &str, run_id: &str) {
    if let Err(e) = state.store().release_claim(workflow_id, key, run_id).await {
        tracing::error!(error = %e, "could not undo claim");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steps::Registry;
    use serde_json::json;

    /// A cached claim is found by its borrowed `(workflow_id, key)` (the lookup builds no
    /// key, so its hash must be the stored key's), until it expires; pairs whose
    /// concatenations coincide are different claims.
    #[test]
    fn recent_claims_are_found_by_workflow_and_key() {
        let recent = RecentClaims::default();
        recent.insert("wf", "evt_1", "run-1", 2_000);
        recent.insert("a\0b", "c", "run-2", 2_000);
        assert_eq!(recent.get("wf", "evt_1", 1_000).as_deref(), Some("run-1"));
        assert_eq!(recent.get("a\0b", "c", 1_999).as_deref(), Some("run-2"));
        assert_eq!(
            recent.get("wf", "evt_1", 2_000),
            None,
            "expired at expires_at"
        );
        assert_eq!(recent.get("wf", "evt_2", 1_000), None);
        assert_eq!(recent.get("other", "evt_1", 1_000), None);
        assert_eq!(recent.get("a", "b\0c", 1_000), None);
    }

    fn compiled(window_s: u64, origins: &[&str]) -> Compiled {
        let definition = json!({
            "id": "w", "name": "w", "version": 1,
            "steps": [{"id": "hook", "kind": "webhook_trigger",
                       "config": {"dedupe_window_s": window_s, "allowed_origins": origins,
                                  "sample_input": {"id": "evt_1", "pad": "x".repeat(6000)}}}],
            "edges": []
        });
        let (c, problems) = crate::workflow::check_value(&definition, &Registry::builtin());
        c.unwrap_or_else(|| panic!("{problems:?}"))
    }

    /// A definition's trigger config is parsed once and shared (its origins too); a changed
    /// definition (another hash) is parsed anew; a config that does not parse is refused with
    /// its path and not kept.
    #[test]
    fn trigger_configs_are_parsed_once_per_definition() {
        let configs = TriggerConfigs::default();
        let a = compiled(60, &["https://app.example.com", "http://localhost:3000"]);
        let first = configs.get(&a).unwrap();
        assert_eq!(first.config.dedupe_window_s, 60);
        assert_eq!(
            first.allowed_origins,
            [
                webhook_trigger::WebOrigin::parse("https://app.example.com:443").unwrap(),
                webhook_trigger::WebOrigin::parse("http://localhost:3000").unwrap()
            ]
        );
        assert!(
            Arc::ptr_eq(&first, &configs.get(&a).unwrap()),
            "parsed once"
        );
        assert!(
            first.config.sample_input.is_none(),
            "the sample is not kept"
        );
        let b = compiled(120, &[]);
        assert_ne!(a.hash, b.hash);
        assert_eq!(configs.get(&b).unwrap().config.dedupe_window_s, 120);

        let mut bad = compiled(60, &[]);
        bad.workflow.steps[0].config = json!({"dedupe_window_s": "soon"});
        bad.hash = "another definition".into();
        let problems = configs.get(&bad).unwrap_err();
        assert_eq!(problems[0].path, "dedupe_window_s");
        bad.workflow.steps[0].config = json!({"dedupe_window_s": 5});
        assert_eq!(
            configs.get(&bad).unwrap().config.dedupe_window_s,
            5,
            "not kept"
        );
    }
}
