//! The scheduler: fires the ticks of every valid workflow that starts with a
//! `schedule_trigger` ([`crate::steps::schedule_trigger`]).
//!
//! * Each tick is claimed like a webhook key, `<workflow_id>@<scheduled instant, RFC 3339 UTC>`,
//!   with its run in one transaction through the group commit
//!   ([`crate::store::GroupCommit::claim_and_enqueue`]): however many schedulers run on one
//!   store, a tick starts at most one run (or records one skip). The run's trigger is
//!   `schedule` and its `input` is `{scheduled_at, previous_success_at?, missed?}`.
//! * `overlap: skip`: a tick while an earlier run of the workflow is queued or running starts
//!   nothing and is recorded as a run with status `skipped` (never executed; its warning names
//!   the run it yielded to), so history shows every tick. `queue`: the tick's run is stored
//!   `queued` and handed to the workers once no earlier run of the workflow is queued or
//!   running (one at a time, oldest first). `allow`: handed to the workers at once.
//! * `catch_up`, on the scheduler's first look at a workflow: the ticks after the workflow's
//!   newest scheduled run in history and up to now were missed; `none` fires nothing for them,
//!   `last` one run for the newest (with `missed` = how many ticks it stands for), `all` one run
//!   per tick (the newest [`MAX_CATCH_UP`]). The same rule covers ticks that pass while the
//!   process is stalled (a laptop asleep): only the newest fires unless `catch_up` says more.
//! * A workflow whose trigger config changes (a PUT) is rescheduled from now; one that no longer
//!   validates or no longer exists is dropped.
//!
//! All instants come from the engine clock ([`crate::clock::Clock::now_ms`]); [`Scheduler::poll`]
//! fires what is due at that instant, so tests drive it with a manual clock. The server's loop
//! ([`spawn`]) polls at the next tick and at least once a second of real time (to pick up
//! reloaded workflows and release `queue`d runs).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::sync::watch;

use super::AppState;
use crate::clock::rfc3339;
use crate::run::{Mode, RunStatus, Timestamp, Trigger};
use crate::runtime::{Engine, RunRequest};
use crate::steps::parse_config;
use crate::steps::schedule_trigger::{CatchUp, Config, Overlap, Schedule, MAX_CATCH_UP};
use crate::store::{ClaimOutcome, GroupCommit, RunQuery, WebhookClaim};
use crate::workflow::dir::WorkflowEntry;
use crate::workflow::Compiled;

/// How long a tick's claim is kept (7 days, in ms): far longer than any two schedulers on a
/// store can disagree about which ticks are due.
pub const TICK_CLAIM_WINDOW_MS: i64 = 7 * 24 * 3600 * 1000;

/// The longest the server's loop waits between two polls (real time).
pub const MAX_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// The idempotency key of a tick: `<workflow_id>@<scheduled instant, RFC 3339 UTC, ms>`.
pub fn tick_key(workflow_id: &str, scheduled_ms: i64) -> String {
    format!("{workflow_id}@{}", rfc3339(scheduled_ms))
}

/// What a poll did with one tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fire {
    /// Claimed; its run was handed to the workers.
    Started,
    /// Claimed; its run is stored `queued` and waits for the earlier run (`overlap: queue`).
    Held,
    /// Claimed and recorded as a `skipped` run (`overlap: skip`).
    Skipped,
    /// Another scheduler had claimed this tick: nothing was written.
    Duplicate,
    /// The claim could not be made durable (undone; logged).
    Failed(String),
}

/// One tick handled by [`Scheduler::poll`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fired {
    pub workflow_id: String,
    /// The tick's scheduled instant (UTC unix ms).
    pub scheduled_at: i64,
    /// The run this tick wrote (or, on `Duplicate`, the run the other scheduler wrote).
    pub run_id: String,
    pub fire: Fire,
}

/// What the scheduler keeps per scheduled workflow.
struct Plan {
    /// The trigger config it was computed from (a change reschedules).
    signature: String,
    config: Config,
    schedule: Schedule,
    /// Ticks up to this instant are handled.
    cursor: i64,
    /// `overlap: queue` runs stored `queued` and not yet handed to the workers, oldest first.
    held: VecDeque<String>,
}

/// Hands a stored `queued` run to the workers.
pub type Dispatch = Arc<dyn Fn(String) + Send + Sync>;

/// Fires schedule ticks (see the module docs).
pub struct Scheduler {
    engine: Engine,
    commit: GroupCommit,
    dispatch: Dispatch,
    plans: HashMap<String, Plan>,
    /// False until the first poll: catch-up from history applies to the workflows seen then.
    started: bool,
}

impl Scheduler {
    /// A scheduler writing through `commit` and handing runs to `dispatch`.
    pub fn new(engine: Engine, commit: GroupCommit, dispatch: Dispatch) -> Self {
        Scheduler {
            engine,
            commit,
            dispatch,
            plans: HashMap::new(),
            started: false,
        }
    }

    /// The next instant (UTC unix ms) at which a tick is due, over every scheduled workflow.
    pub fn next_tick(&self) -> Option<i64> {
        self.plans
            .values()
            .filter_map(|p| p.schedule.next_after(p.cursor))
            .min()
    }

    /// Fire every tick due at the engine clock's now, for `workflows` (the folder's entries;
    /// those without a valid `schedule_trigger` are ignored), and hand held `queue` runs to the
    /// workers once their workflow is idle. Returns what was done with each tick.
    pub async fn poll(&mut self, workflows: &[Arc<WorkflowEntry>]) -> Vec<Fired> {
        let now = self.engine.clock().now_ms();
        let first = !self.started;
        self.started = true;
        let mut fired = Vec::new();
        let mut seen = Vec::new();
        for entry in workflows {
            let Some(wf) = entry.compiled.as_ref() else {
                continue;
            };
            let trigger = wf.trigger();
            if trigger.kind != "schedule_trigger" {
                continue;
            }
            let Ok(config) = parse_config::<Config>(&trigger.config) else {
                continue;
            };
            let Ok(schedule) = Schedule::of(&config) else {
                continue;
            };
            let id = entry.id.clone();
            seen.push(id.clone());
            let signature = trigger.config.to_string();
            let replan = self.plans.get(&id).is_none_or(|p| p.signature != signature);
            if replan {
                let held = self.plans.remove(&id).map(|p| p.held).unwrap_or_default();
                let cursor = if first && config.catch_up != CatchUp::None {
                    self.last_tick_in_history(&id).await.unwrap_or(now).min(now)
                } else {
                    now
                };
                self.plans.insert(
                    id.clone(),
                    Plan {
                        signature,
                        config: config.clone(),
                        schedule: schedule.clone(),
                        cursor,
                        held,
                    },
                );
            }
            let plan = &self.plans[&id];
            let (due, total) =
                plan.schedule
                    .ticks_between(plan.cursor, now, MAX_CATCH_UP, 1_000_000);
            let fire: Vec<(i64, Option<usize>)> = match (due.last(), plan.config.catch_up) {
                (None, _) => Vec::new(),
                (Some(&last), CatchUp::None) => vec![(last, None)],
                (Some(&last), CatchUp::Last) => vec![(last, (total > 1).then_some(total - 1))],
                (Some(_), CatchUp::All) => due.iter().map(|&t| (t, None)).collect(),
            };
            if let Some(p) = self.plans.get_mut(&id) {
                p.cursor = now.max(p.cursor);
            }
            for (at, missed) in fire {
                fired.push(self.fire(wf, at, missed).await);
            }
            self.release_held(&id).await;
        }
        self.plans.retain(|id, _| seen.contains(id));
        fired
    }

    /// The scheduled instant of the workflow's newest scheduled run (from its tick key).
    async fn last_tick_in_history(&self, workflow_id: &str) -> Option<i64> {
        let page = self
            .engine
            .store()
            .list_runs(&RunQuery {
                workflow: Some(workflow_id.to_string()),
                trigger: Some(Trigger::Schedule),
                limit: 1,
                ..Default::default()
            })
            .await
            .ok()?;
        let run = page.runs.first()?;
        scheduled_of_key(run.idempotency_key.as_deref()?)
    }

    /// The RFC 3339 scheduled instant of the workflow's newest scheduled run that succeeded.
    async fn previous_success(&self, workflow_id: &str) -> Option<String> {
        let page = self
            .engine
            .store()
            .list_runs(&RunQuery {
                workflow: Some(workflow_id.to_string()),
                status: Some(RunStatus::Succeeded),
                trigger: Some(Trigger::Schedule),
                limit: 1,
                ..Default::default()
            })
            .await
            .ok()?;
        let key = page.runs.first()?.idempotency_key.clone()?;
        scheduled_of_key(&key).map(rfc3339)
    }

    /// An earlier run of the workflow that is running, or queued and already handed to the
    /// workers (held `queue` runs do not count).
    async fn active_run(&self, workflow_id: &str) -> Option<String> {
        let held = self
            .plans
            .get(workflow_id)
            .map(|p| p.held.clone())
            .unwrap_or_default();
        for status in [RunStatus::Running, RunStatus::Queued] {
            let page = self
                .engine
                .store()
                .list_runs(&RunQuery {
                    workflow: Some(workflow_id.to_string()),
                    status: Some(status),
                    limit: held.len() + 1,
                    ..Default::default()
                })
                .await
                .ok()?;
            if let Some(r) = page.runs.iter().find(|r| !held.contains(&r.id)) {
                return Some(r.id.clone());
            }
        }
        None
    }

    /// Hand the oldest held `queue` run to the workers once nothing else of the workflow is
    /// queued or running.
    async fn release_held(&mut self, workflow_id: &str) {
        let has_held = self
            .plans
            .get(workflow_id)
            .is_some_and(|p| !p.held.is_empty());
        if !has_held || self.active_run(workflow_id).await.is_some() {
            return;
        }
        if let Some(id) = self
            .plans
            .get_mut(workflow_id)
            .and_then(|p| p.held.pop_front())
        {
            (self.dispatch)(id);
        }
    }

    /// Claim one tick and write its run (queued, held or skipped).
    async fn fire(&mut self, wf: &Arc<Compiled>, at: i64, missed: Option<usize>) -> Fired {
        let workflow_id = wf.workflow.id.clone();
        let overlap = self.plans[&workflow_id].config.overlap;
        let active = match overlap {
            Overlap::Allow => None,
            Overlap::Skip | Overlap::Queue => self.active_run(&workflow_id).await,
        };
        let mut input = Map::new();
        input.insert("scheduled_at".into(), json!(rfc3339(at)));
        if let Some(prev) = self.previous_success(&workflow_id).await {
            input.insert("previous_success_at".into(), json!(prev));
        }
        if let Some(n) = missed {
            input.insert("missed".into(), json!(n));
        }
        let key = tick_key(&workflow_id, at);
        let mut req = RunRequest::new(Value::Object(input), Trigger::Schedule, Mode::Live);
        req.idempotency_key = Some(key.clone());
        let mut run = self.engine.new_run(wf, req);
        let now = run.created_at.0;
        let skipped = overlap == Overlap::Skip && active.is_some();
        if let (true, Some(other)) = (skipped, &active) {
            run.status = RunStatus::Skipped;
            run.finished_at = Some(Timestamp(now));
            run.duration_ms = Some(0);
            run.warnings.push(format!(
                "tick {} skipped: run `{other}` of this workflow was still queued or running \
                 (overlap: skip)",
                rfc3339(at)
            ));
        }
        let run_id = run.id.clone();
        let claim = WebhookClaim {
            workflow_id: workflow_id.clone(),
            key: key.clone(),
            run_id: run_id.clone(),
            claimed_at: now,
            expires_at: now.saturating_add(TICK_CLAIM_WINDOW_MS),
        };
        let done = |run_id: String, fire: Fire| Fired {
            workflow_id: workflow_id.clone(),
            scheduled_at: at,
            run_id,
            fire,
        };
        match self.commit.claim_and_enqueue(claim, run).await {
            Ok(ClaimOutcome::Duplicate { run_id: other }) => done(other, Fire::Duplicate),
            Ok(ClaimOutcome::Claimed) if skipped => {
                tracing::info!(workflow_id = %workflow_id, run_id = %run_id, "schedule tick skipped");
                crate::telemetry::tick("skipped");
                done(run_id, Fire::Skipped)
            }
            Ok(ClaimOutcome::Claimed) if overlap == Overlap::Queue && active.is_some() => {
                if let Some(p) = self.plans.get_mut(&workflow_id) {
                    p.held.push_back(run_id.clone());
                }
                crate::telemetry::tick("fired");
                done(run_id, Fire::Held)
            }
            Ok(ClaimOutcome::Claimed) => {
                tracing::info!(workflow_id = %workflow_id, run_id = %run_id, "schedule tick fired");
                crate::telemetry::tick("fired");
                (self.dispatch)(run_id.clone());
                done(run_id, Fire::Started)
            }
            Err(e) => {
                tracing::error!(workflow_id = %workflow_id, error = %e, "schedule tick not made durable; undoing");
                if let Err(e) = self
                    .engine
                    .store()
                    .release_claim(&workflow_id, &key, &run_id)
                    .await
                {
                    tracing::error!(error = %e, "could not undo a tick claim");
                }
                done(run_id, Fire::Failed(e.to_string()))
            }
        }
    }
}

/// The scheduled instant of a tick key (`<workflow_id>@<RFC 3339>`).
pub fn scheduled_of_key(key: &str) -> Option<i64> {
    key.rsplit_once('@')
        .and_then(|(_, at)| crate::clock::parse_rfc3339(at))
}

/// The server's scheduler loop: poll, then wait until the next tick (by the engine clock) or
/// [`MAX_POLL_INTERVAL`] of real time, whichever is first; stops on `shutdown`.
pub fn spawn(state: AppState, mut shutdown: watch::Receiver<bool>) -> tokio::task::JoinHandle<()> {
    let queue = state.queue().clone();
    let dispatch: Dispatch = Arc::new(move |id| queue.push(id));
    let mut scheduler = Scheduler::new(state.engine().clone(), state.commit().clone(), dispatch);
    tokio::spawn(async move {
        loop {
            if *shutdown.borrow() {
                break;
            }
            let list = state.workflows().list();
            scheduler.poll(&list).await;
            let now = state.clock().now_ms();
            let wait = scheduler
                .next_tick()
                .map(|t| Duration::from_millis(t.saturating_sub(now).max(1) as u64))
                .unwrap_or(MAX_POLL_INTERVAL)
                .min(MAX_POLL_INTERVAL);
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.wait_for(|s| *s) => break,
            }
        }
    })
}
