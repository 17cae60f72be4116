//! `fluxo check`: prove a workflow is safe to re-run, against the sandbox, automatically.
//!
//! [`check`] takes a workflow definition and one real event, and replays the seed scenario on
//! a throw-away data dir with every destination pointed at a private [`crate::sandbox`]:
//!
//! | row | what happens | passes when |
//! |---|---|---|
//! | first delivery | the event once | the run succeeds and writes at least one record |
//! | same event twice | the event again | no record more; the redelivery succeeds |
//! | new event | a variant with new ids (below) | the run succeeds and writes new records, at most as many per collection as the first delivery |
//! | timeout after write on `R`, then redelivery | per write route `R`: the sandbox writes, then withholds the answer once; then the event again | exactly the first delivery's records; the redelivery succeeds |
//! | engine killed during `R` | per write route `R`: the sandbox writes, then withholds the answer while the engine "dies" (the run's task is dropped; its stored record is what a crash leaves); crash recovery runs on that record as a restart does | the run is resumed automatically and succeeds; exactly the first delivery's records (a write without an `Idempotency-Key` is left `interrupted` for a person: the row fails) |
//! | forced failure on `R` | per write route `R`: every call answers 500 before writing | the run does not succeed, and every Memory claim it took is released (compensation) |
//! | replay of the failed run | the fault cleared, [`Engine::replay`] of that run | it succeeds; exactly the first delivery's records, besides what steps declared an expected effect on the failure path wrote (an alert) |
//!
//! **Why and fix.** Every failed row says why in one sentence ([`CheckRow::why`]) and what
//! to change ([`CheckRow::fix`]): for an unguarded write, the linter's `lint_unguarded_write`
//! hint for the step that wrote (the check's transport attributes each call, and the records
//! it created, to the step that made it); for a claim still held, the compensation.
//!
//! **Expected effects on the failure path.** A step whose config says `expected_on_failure:
//! true` ([`crate::steps::StepKind::expected_on_failure`]; every kind that calls a
//! destination accepts it) and that is reachable from an `error` port writes what the failure
//! rows expect: its records are counted apart and named (`1 notification expected: `notify` is
//! declared an expected effect on the failure path`). An undeclared step on a failure path that
//! writes fails the replay row, the declaration being its fix.
//!
//! Each scenario starts clean (a fresh sled store in the throw-away dir, the sandbox reset),
//! so one scenario's claims and records never mask another's. The write routes are those the
//! first delivery wrote through (`POST /deals`, …: requests that created a record).
//!
//! How the check drives the workflow, and what it leaves out:
//!
//! * **Destinations**: every `env.NAME` a step's config references is set to the sandbox's URL
//!   (on `127.0.0.1:0`). A URL field (`url`, `*_url`) that does not start with a template is a
//!   fixed address and refused as bad input; at run time the check's transport refuses any
//!   request that is not for its sandbox, so no byte leaves the machine.
//! * **Runs** go through the real engine ([`Engine`] over a [`SledStore`]), started with the
//!   workflow's trigger (`webhook` or `manual`), not through the server: the at-the-door webhook
//!   dedupe is deliberately bypassed (it only covers a redelivery carrying the same key within
//!   its window, and is tested with the server); the check proves the workflow's own guards.
//! * **Time**: a request the sandbox is withholding (`timeout_after_write`) is reported to the
//!   step as a timeout at once, exactly what the client would see after `timeout_s`; backoff
//!   waits move the run's clock without really waiting. Retry counts, `Retry-After` caps and
//!   the run deadline apply as in production.
//! * **The variant** ("new event"): each value at an id path (`--id-path`; by default the
//!   business-id paths the workflow's own keys read ([`key_id_paths`]: `issue.id` from a
//!   `{{ input.issue.id }}` dedupe key), plus `id` and `data.object.id` where the event has
//!   them, as Stripe events carry the business id there) gets
//!   a new value (text: `-variant` appended; a number: plus 1 000 000), and every other text
//!   anywhere in the event equal to an old id text is replaced the same way. Nothing else
//!   changes.
//!
//! * **Scheduled and fan-out workflows** ([`fan_out`]): a workflow with a `fan_out` step is
//!   checked with the workflows it fans out to ([`CheckOptions::targets`]): its runs start
//!   their item runs through the fan-out's claim into a queue the check drains, and the rows
//!   are the poll's (first poll, a poll with nothing new, overlapping polls after a new item)
//!   followed by the rows above for one item run. A `schedule_trigger` workflow without a
//!   fan-out is checked like a manual one, its `input` being the event.
//!
//! The report ([`CheckReport`]) serializes to JSON, for the editor's "Check" button (a server
//! route or an IPC command calls [`check`] and shows the table).

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::clock::{Clock, SystemClock};
use crate::run::{Mode, RunRecord, RunStatus, Trigger};
use crate::runtime::http::{HttpAnswer, HttpCall, HttpTransport, LiveHttp, TransportError};
use crate::runtime::{Engine, RunRequest};
use crate::sandbox::state::id_prefix;
use crate::sandbox::{
    Fault, FaultRuleSpec, Outcome, Sandbox, SandboxConfig, SandboxHandle, SandboxState,
};
use crate::steps::Registry;
use crate::store::{MemoryStore, RunStore, SledConfig, SledStore, Store};
use crate::workflow::env::env_names;
use crate::workflow::{self, Compiled, Problem, Severity, Workflow};

pub mod fan_out;

/// Suffix the variant appends to text ids.
pub const VARIANT_SUFFIX: &str = "-variant";
/// What the variant adds to numeric ids.
pub const VARIANT_OFFSET: i64 = 1_000_000;

/// Options of a check.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckOptions {
    /// Dot paths of the event's business ids (`id`, `issue.id`, `items.0.id`). Empty: `id`,
    /// plus `data.object.id` when the event has it.
    #[serde(default)]
    pub id_paths: Vec<String>,
    /// Definitions of the workflows the checked one fans out to, by id (see [`fan_out_targets`]
    /// for the ids a definition needs). A fan-out whose target is missing here is bad input.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub targets: BTreeMap<String, Value>,
}

/// The verdict of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    Fail,
    /// Not run: an earlier row it depends on failed.
    NotRun,
}

impl Verdict {
    /// `PASS`, `FAIL`, `not run`.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::NotRun => "not run",
        }
    }
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CheckRow {
    /// What was done, e.g. `timeout after write on POST /deals, then redelivery`.
    pub check: String,
    /// What a workflow safe to re-run does.
    pub expected: String,
    /// What this one did. What steps declared an expected effect on the failure path wrote
    /// is said to be expected, naming those steps.
    pub seen: String,
    pub verdict: Verdict,
    /// Why the row failed, in one sentence (failed rows only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub why: Option<String>,
    /// What to change so that it passes (failed rows only): the step and the guard, claim or
    /// declaration to add.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub fix: Option<String>,
}

impl CheckRow {
    /// This row with its `why` and `fix`, when it failed (a passing row keeps none).
    pub fn because(mut self, why: impl Into<String>, fix: impl Into<String>) -> Self {
        if self.verdict == Verdict::Fail {
            self.why = Some(why.into());
            self.fix = Some(fix.into());
        }
        self
    }
}

/// The result of [`check`]: every row, and whether all passed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct CheckReport {
    pub workflow_id: String,
    pub workflow_version: u64,
    /// Every row passed.
    pub passed: bool,
    pub checks: Vec<CheckRow>,
    /// The `env` names pointed at the sandbox.
    pub env: Vec<String>,
    /// The connections (of `action` steps) pointed at the sandbox's app fakes.
    #[serde(default)]
    pub connections: Vec<String>,
    /// The id paths the variant changed.
    pub id_paths: Vec<String>,
    /// Linter warnings of the workflow (`Problem` display form).
    pub warnings: Vec<String>,
    /// How the check ran (what it bypasses, how time is handled).
    pub notes: Vec<String>,
}

impl CheckReport {
    /// Rows that failed.
    pub fn failures(&self) -> impl Iterator<Item = &CheckRow> {
        self.checks.iter().filter(|r| r.verdict == Verdict::Fail)
    }
}

/// Why a check could not run (the workflow or the event is unusable, or no sandbox could start).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CheckError {
    /// The definition does not validate: every error.
    #[error("the workflow is not valid: {}", .0.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("; "))]
    Invalid(Vec<Problem>),
    /// The event, an id path or a destination is unusable; the message names it.
    #[error("{0}")]
    BadInput(String),
    /// The sandbox or the throw-away store could not start.
    #[error("the check could not start: {0}")]
    Setup(String),
}

/// How far a check is, for a progress display ([`check_with_progress`]): scenarios started
/// (each on a clean store) and events delivered so far, both counting up from 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckProgress {
    pub scenarios: usize,
    pub deliveries: usize,
}

/// The counters behind [`CheckProgress`], shared by the main and the item workflow's rows.
struct Progress<'a> {
    scenarios: std::sync::atomic::AtomicUsize,
    deliveries: std::sync::atomic::AtomicUsize,
    report: &'a (dyn Fn(CheckProgress) + Sync),
}

impl Progress<'_> {
    fn bump(&self, scenario: bool) {
        use std::sync::atomic::Ordering::Relaxed;
        let (s, d) = if scenario {
            (
                self.scenarios.fetch_add(1, Relaxed) + 1,
                self.deliveries.load(Relaxed),
            )
        } else {
            (
                self.scenarios.load(Relaxed),
                self.deliveries.fetch_add(1, Relaxed) + 1,
            )
        };
        (self.report)(CheckProgress {
            scenarios: s,
            deliveries: d,
        });
    }
}

/// Run every check of a workflow definition with `event`. See the module doc.
pub async fn check(
    definition: &Value,
    event: &Value,
    options: &CheckOptions,
) -> Result<CheckReport, CheckError> {
    check_with_progress(definition, event, options, &|_| {}).await
}

/// [`check`], calling `progress` as each scenario starts and each event is delivered (the
/// CLI's progress line).
pub async fn check_with_progress(
    definition: &Value,
    event: &Value,
    options: &CheckOptions,
    progress: &(dyn Fn(CheckProgress) + Sync),
) -> Result<CheckReport, CheckError> {
    let progress = Progress {
        scenarios: Default::default(),
        deliveries: Default::default(),
        report: progress,
    };
    let registry = Registry::builtin();
    let (compiled, problems) = workflow::check_value(definition, &registry);
    let wf = compiled.ok_or_else(|| {
        CheckError::Invalid(
            problems
                .into_iter()
                .filter(|p| p.severity == Severity::Error)
                .collect(),
        )
    })?;
    let targets = fan_out::compile_targets(&wf.workflow, &options.targets, &registry)?;
    fixed_destinations(&wf.workflow)?;
    let mut env_names: BTreeSet<String> = env_names(&wf.workflow).into_iter().collect();
    for t in targets.values() {
        fixed_destinations(&t.workflow)?;
        env_names.extend(crate::workflow::env::env_names(&t.workflow));
    }
    let env_names: Vec<String> = env_names.into_iter().collect();
    // A fan-out's event is the poll's source item or its input; the item run's ids are
    // changed for its own rows ([`fan_out`]).
    let plan = if targets.is_empty() {
        let id_paths =
            given_id_paths(options).unwrap_or_else(|| inferred_id_paths(&[&wf.workflow], event));
        let variant = variant_of(event, &id_paths)?;
        Plan::Single { id_paths, variant }
    } else {
        fan_out::validate_event(&wf, event)?;
        Plan::FanOut
    };

    let sandbox = Sandbox::start_with(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        SandboxConfig {
            // Held answers are cut short by the transport (seen as a timeout) and by shutdown.
            hold: Duration::from_secs(600),
            ..SandboxConfig::default()
        },
    )
    .await
    .map_err(|e| CheckError::Setup(format!("cannot start the sandbox: {e}")))?;
    let scratch = Scratch::new()
        .map_err(|e| CheckError::Setup(format!("cannot create a throw-away data dir: {e}")))?;
    let env: BTreeMap<String, String> = env_names
        .iter()
        .map(|n| (n.clone(), sandbox.url()))
        .collect();
    let trigger = match wf.workflow.steps[wf.trigger_index()].kind.as_str() {
        "webhook_trigger" => Trigger::Webhook,
        "schedule_trigger" if !targets.is_empty() => Trigger::Schedule,
        _ => Trigger::Manual,
    };
    let (mut failure_path, mut expected) = failure_paths(&wf.workflow, &registry);
    for t in targets.values() {
        let (f, e) = failure_paths(&t.workflow, &registry);
        failure_path.extend(f);
        expected.extend(e);
    }
    let mut ctx = Ctx {
        wf: &wf,
        sandbox: &sandbox,
        scratch: &scratch,
        env,
        trigger,
        lanes: 0,
        lane_prefix: "lane",
        targets: &targets,
        seed: Vec::new(),
        connections: sandbox_connections(
            std::iter::once(&wf.workflow).chain(targets.values().map(|t| &t.workflow)),
            &sandbox.url(),
        ),
        progress: &progress,
        failure_path,
        expected,
    };
    let (rows, id_paths, extra_notes) = match plan {
        Plan::Single { id_paths, variant } => {
            let rows = ctx.run_all(event, &variant, &id_paths).await;
            (rows, id_paths, Vec::new())
        }
        Plan::FanOut => fan_out::run(&mut ctx, event, options).await,
    };
    let mut rows = rows;
    // Every failed row says why and what to change; the rows above name both, this is the
    // net under a row that does not.
    for r in rows
        .iter_mut()
        .filter(|r| r.verdict == Verdict::Fail && r.why.is_none())
    {
        r.why = Some(format!(
            "it saw {} where a workflow safe to re-run shows {}",
            r.seen, r.expected
        ));
        r.fix = Some("dry-run the event in the editor and compare each step's output".into());
    }
    let connection_ids: Vec<String> = ctx.connections.iter().map(|c| c.id.clone()).collect();
    let connections: Vec<String> = connection_ids.iter().map(|c| format!("`{c}`")).collect();
    drop(ctx);
    sandbox.shutdown().await;
    drop(scratch);

    let mut notes = vec![
        match trigger {
            Trigger::Webhook => "runs went through the engine with trigger `webhook` on a \
                                 throw-away data dir; the server's at-the-door dedupe was \
                                 bypassed (it only stops a redelivery with the same key inside \
                                 its window), so these rows prove the workflow's own guards"
                .to_string(),
            Trigger::Schedule => "poll runs went through the engine with trigger `schedule` \
                                  (the tick's `input`) on a throw-away data dir, as the \
                                  scheduler starts them"
                .to_string(),
            _ => "runs went through the engine with trigger `manual` on a throw-away data dir, \
                  as the app, the API or a poller starts them"
                .to_string(),
        },
        "each scenario started clean (new store, sandbox reset); a withheld answer counted as \
         a timeout at once and backoff waits moved the run clock without waiting"
            .to_string(),
    ];
    notes.extend(extra_notes);
    if !connections.is_empty() {
        notes.push(format!(
            "connections {} were pointed at the sandbox's app fakes (with tokens the fakes \
             accept); the workflow's own connections were not used",
            connections.join(", ")
        ));
    }
    if env_names.is_empty() && connections.is_empty() {
        notes.push(
            "the workflow references no env variables: nothing was pointed at the sandbox".into(),
        );
    }
    Ok(CheckReport {
        workflow_id: wf.workflow.id.clone(),
        workflow_version: wf.workflow.version,
        passed: rows.iter().all(|r| r.verdict == Verdict::Pass),
        checks: rows,
        env: env_names,
        connections: connection_ids,
        id_paths,
        warnings: wf.warnings.iter().map(|w| w.to_string()).collect(),
        notes,
    })
}

// ---------------------------------------------------------------------------------------------
// Scenarios

struct Ctx<'a> {
    wf: &'a Compiled,
    sandbox: &'a SandboxHandle,
    scratch: &'a Scratch,
    env: BTreeMap<String, String>,
    trigger: Trigger,
    lanes: usize,
    /// Lane data dirs are `<scratch>/<lane_prefix>-<n>` (one prefix per `Ctx`).
    lane_prefix: &'static str,
    /// The compiled fan-out targets, by workflow id (empty: the workflow does not fan out).
    targets: &'a BTreeMap<String, Arc<Compiled>>,
    /// Records each lane's sandbox starts with, `(collection, body)` (a poll's source items).
    seed: Vec<(String, serde_json::Map<String, Value>)>,
    /// The connections `action` steps name, pointed at the sandbox's app fakes.
    connections: Vec<crate::connections::Connection>,
    progress: &'a Progress<'a>,
    /// Steps on a failure path (reachable from an `error` port), as `(workflow, step)`.
    failure_path: StepSet,
    /// Those of them declared an expected effect there: what they write is expected on the
    /// failure rows.
    expected: StepSet,
}

/// Steps, as `(workflow id, step id)`.
type StepSet = BTreeSet<(String, String)>;

/// How [`check`] proceeds: the single-workflow rows, or a fan-out's ([`fan_out::run`]).
enum Plan {
    Single {
        id_paths: Vec<String>,
        variant: Value,
    },
    FanOut,
}

/// One clean scenario: its own store and engine; the sandbox reset.
struct Lane {
    engine: Engine,
    store: Arc<SledStore>,
    http: Arc<CheckHttp>,
    /// Child runs a fan-out stored as `queued`, in start order, until [`Ctx::drain`].
    queued: Arc<std::sync::Mutex<Vec<String>>>,
}

/// Records per collection (collections with none left out).
type Counts = BTreeMap<String, usize>;

impl Ctx<'_> {
    fn state(&self) -> &SandboxState {
        self.sandbox.state()
    }

    fn lane(&mut self) -> Result<Lane, String> {
        self.lanes += 1;
        self.progress.bump(true);
        self.state().reset();
        for (collection, body) in &self.seed {
            self.state()
                .create(collection, body.clone())
                .map_err(|e| format!("cannot seed `{collection}`: {e:?}"))?;
        }
        let mut config = SledConfig::new(
            self.scratch
                .path()
                .join(format!("{}-{}", self.lane_prefix, self.lanes)),
        );
        config.cache_capacity_bytes = 8 * 1024 * 1024;
        config.flush_every_ms = None;
        let store = Arc::new(SledStore::open(&config).map_err(|e| e.to_string())?);
        let http = Arc::new(CheckHttp::new(self.sandbox));
        let engine = Engine::new(
            store.clone() as Arc<dyn Store>,
            Arc::new(CheckClock::default()) as Arc<dyn Clock>,
        )
        .with_http(http.clone());
        engine.set_env(self.env.clone());
        let connections = crate::connections::MemConnections::default();
        for c in &self.connections {
            crate::connections::ConnectionStore::put(&connections, c.clone())
                .map_err(|e| e.to_string())?;
        }
        engine.set_connections(Arc::new(connections));
        let queued = Arc::new(std::sync::Mutex::new(Vec::new()));
        if !self.targets.is_empty() {
            let (targets, q) = ((*self.targets).clone(), queued.clone());
            engine.set_child_hooks(crate::runtime::children::ChildHooks {
                workflow: Box::new(move |id| targets.get(id).cloned()),
                dispatch: Box::new(move |id| q.lock().unwrap_or_else(|e| e.into_inner()).push(id)),
            });
        }
        Ok(Lane {
            engine,
            store,
            http,
            queued,
        })
    }

    async fn deliver(&self, lane: &Lane, event: &Value) -> Result<RunRecord, String> {
        self.progress.bump(false);
        lane.engine
            .run(
                self.wf,
                RunRequest::new(event.clone(), self.trigger, Mode::Live),
            )
            .await
            .map_err(|e| format!("the run could not be stored: {e}"))
    }

    /// Records per collection, less the lane's seed (a poll's source items are not writes),
    /// and per kind in the app fakes (`hubspot contacts`).
    fn counts(&self) -> Counts {
        let mut counts: Counts = self
            .state()
            .all_records()
            .into_iter()
            .map(|(c, r)| {
                let seeded = self.seed.iter().filter(|(s, _)| *s == c).count();
                let n = r.len().saturating_sub(seeded);
                (c, n)
            })
            .filter(|(_, n)| *n > 0)
            .collect();
        counts.extend(self.state().vendor_counts());
        counts
    }

    /// `METHOD /path` of requests that created a record, in first-seen order.
    fn write_routes(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for e in self.state().log() {
            let wrote = !matches!(e.method.as_str(), "GET" | "HEAD" | "OPTIONS")
                && e.outcome == Outcome::Answered
                && e.status.is_some_and(|s| (200..300).contains(&s))
                && !e.replayed
                && e.record_id.is_some();
            if !wrote {
                continue;
            }
            let path = e.path.split('?').next().unwrap_or_default();
            let route = format!("{} {path}", e.method);
            if !out.contains(&route) {
                out.push(route);
            }
        }
        out
    }

    fn fault_hit(&self, fault: &str) -> bool {
        self.state()
            .log()
            .iter()
            .any(|e| e.fault.as_deref() == Some(fault))
    }

    fn add_fault(&self, route: &str, fault: Fault, times: Option<u32>) -> Result<(), String> {
        self.state()
            .add_fault(FaultRuleSpec {
                route: route.to_string(),
                fault,
                times,
            })
            .map(|_| ())
    }

    /// Deliver `event` with `route` writing and then withholding its answer, "kill" the engine
    /// there (the run's task is dropped; its stored record is what a crash leaves), then run
    /// crash recovery on that record as a restart does. Answers what was seen, whether the
    /// run was resumed to success with exactly the first delivery's records, and why not.
    async fn crash_during(
        &self,
        lane: &Lane,
        route: &str,
        event: &Value,
        baseline: &Counts,
    ) -> Result<(String, bool, String), String> {
        self.add_fault(route, Fault::TimeoutAfterWrite, Some(1))?;
        lane.http.crash_on_hold.store(true, Ordering::SeqCst);
        let run = lane.engine.new_run(
            self.wf,
            RunRequest::new(event.clone(), self.trigger, Mode::Live),
        );
        let id = run.id.clone();
        let crashed = {
            // Dropping the run's future mid-call is the kill: nothing after that point runs.
            let exec = lane.engine.execute(self.wf, run);
            tokio::pin!(exec);
            tokio::select! {
                _ = lane.http.crashed.notified() => true,
                _ = &mut exec => false,
            }
        };
        lane.http.crash_on_hold.store(false, Ordering::SeqCst);
        self.state().clear_faults();
        if !crashed {
            return Err(format!(
                "the fault never struck: this delivery did not call {route}"
            ));
        }
        let left = lane
            .store
            .get_run(&id)
            .await
            .map_err(|e| e.to_string())?
            .ok_or("the run left no record")?;
        let outcome = match lane
            .engine
            .recover_running(left, crate::runtime::RecoverPolicy::ResumeSafe)
            .await
        {
            crate::runtime::Recovery::Interrupted(r) => {
                let why = r.error.map(|e| e.message).unwrap_or_default();
                return Ok((
                    format!("left interrupted for a person: {why}"),
                    false,
                    format!(
                        "the write on {route} is not safe to repeat, so after a crash Fluxo \
                         cannot tell whether it happened and leaves the run for a person"
                    ),
                ));
            }
            crate::runtime::Recovery::Resumed {
                original,
                resume,
                workflow,
            } => {
                lane.store
                    .put_run(&original)
                    .await
                    .map_err(|e| e.to_string())?;
                lane.engine
                    .execute(&workflow, *resume)
                    .await
                    .map_err(|e| format!("the resume could not be stored: {e}"))
            }
        };
        let after = self.counts();
        let expected = self.expected_by_step(&lane.http.calls_since(0));
        let baseline_ok = minus(&after, &sum(&expected)) == *baseline;
        let why = if !succeeded(&outcome) {
            format!("the resumed run did not succeed ({})", summary(&outcome))
        } else {
            format!(
                "the resumed run wrote {route} again: {} where one delivery leaves {}",
                fmt_counts(&after),
                fmt_counts(baseline)
            )
        };
        Ok((
            format!(
                "resumed: {}; {}",
                summary(&outcome),
                with_expected(&after, &expected)
            ),
            succeeded(&outcome) && baseline_ok,
            why,
        ))
    }

    /// What the calls of steps declared an expected effect on the failure path (and on one)
    /// wrote, by step, in first-call order.
    fn expected_by_step(&self, calls: &[Call]) -> Vec<(String, Counts)> {
        by_step(calls, |c| {
            self.expected
                .contains(&(c.workflow.clone(), c.step.clone()))
        })
    }

    /// What the calls of steps on a failure path that are not declared expected wrote, by step.
    fn undeclared_failure_writes(&self, calls: &[Call]) -> Vec<(String, Counts)> {
        by_step(calls, |c| {
            let k = (c.workflow.clone(), c.step.clone());
            self.failure_path.contains(&k) && !self.expected.contains(&k)
        })
    }

    /// The steps whose calls on `route` (any route: `None`) wrote, or, without one, that
    /// called it.
    fn steps_on(&self, calls: &[Call], route: Option<&str>) -> Vec<String> {
        let on: Vec<&Call> = calls
            .iter()
            .filter(|c| !c.step.is_empty() && route.is_none_or(|r| c.route == r))
            .collect();
        let mut out: Vec<String> = Vec::new();
        let wrote: Vec<&&Call> = on.iter().filter(|c| total(&c.wrote) > 0).collect();
        let pick: Vec<&Call> = if wrote.is_empty() {
            on.clone()
        } else {
            wrote.into_iter().copied().collect()
        };
        for c in pick {
            if !out.contains(&c.step) {
                out.push(c.step.clone());
            }
        }
        out
    }

    /// What to change so that a write is recognised when it comes again: the linter's hint
    /// (`lint_unguarded_write`) for each of `steps` that has one, else a key or a claim.
    fn guard_fix(&self, steps: &[String]) -> String {
        let hints: Vec<String> = steps
            .iter()
            .filter_map(|s| {
                self.wf
                    .warnings
                    .iter()
                    .find(|p| p.code == "lint_unguarded_write" && p.step.as_deref() == Some(s))
                    .map(|p| format!("on `{s}`: {}", p.message))
            })
            .collect();
        if !hints.is_empty() {
            return hints.join(" ");
        }
        let names = if steps.is_empty() {
            "the write".to_string()
        } else {
            ticks(steps)
        };
        format!(
            "give {names} an Idempotency-Key header (an `idempotency_key`) made from the event's \
             business id, e.g. `{{{{ input.id }}}}`, so the destination answers a repeat with its \
             first answer; or claim the event in Memory before it (a write with \
             allow_overwrite off, then a router that skips when it was not written)"
        )
    }

    async fn run_all(
        &mut self,
        event: &Value,
        variant: &Value,
        id_paths: &[String],
    ) -> Vec<CheckRow> {
        let mut rows = Vec::new();
        let first_name = "first delivery";
        let first_expected = "the run succeeds and writes at least one record";
        let lane = match self.lane() {
            Ok(l) => l,
            Err(e) => {
                rows.push(no_store(first_name, first_expected, &e));
                return rows;
            }
        };
        let first = self.deliver(&lane, event).await;
        let baseline = self.counts();
        let routes = self.write_routes();
        let first_calls = lane.http.calls_since(0);
        let ok =
            matches!(&first, Ok(r) if r.status == RunStatus::Succeeded) && total(&baseline) > 0;
        let seen = match &first {
            Ok(r) => format!("{}; {}", run_summary(r), fmt_counts(&baseline)),
            Err(e) => e.clone(),
        };
        let first_row = row(first_name, first_expected, seen, ok);
        rows.push(match &first {
            Err(e) => first_row.because(
                format!("the check could not record the first run ({e})"),
                "make room in the temp dir and run the check again",
            ),
            Ok(r) if r.status != RunStatus::Succeeded => {
                let step = r.error.as_ref().map(|e| e.step.clone()).unwrap_or_default();
                first_row.because(
                    format!(
                        "one delivery of this event does not succeed ({}), so there is nothing \
                         to compare a re-run with",
                        run_summary(r)
                    ),
                    format!(
                        "dry-run this event in the editor and fix `{step}` first (its URL must \
                         be `{{{{ env.NAME }}}}/path`: the check points every env variable at \
                         its sandbox)"
                    ),
                )
            }
            Ok(r) => first_row.because(
                format!(
                    "the run {} but wrote no record at the sandbox, so there is nothing to count",
                    run_summary(r)
                ),
                if first_calls.is_empty() {
                    "send the workflow's writes to `{{ env.NAME }}/path` URLs (the check points \
                     every env variable at its sandbox), or check it with an event that takes \
                     the path that writes"
                        .to_string()
                } else {
                    "check it with an event that takes the path that writes (this one wrote \
                     nothing new)"
                        .to_string()
                },
            ),
        });
        if !ok {
            let why = "not run: the first delivery must succeed and write a record";
            for name in [
                "same event twice".to_string(),
                format!("new event ({} changed)", id_paths.join(", ")),
                "timeout after write, then redelivery".to_string(),
                "forced failure, compensation".to_string(),
                "replay of the failed run".to_string(),
            ] {
                rows.push(CheckRow {
                    check: name,
                    expected: String::new(),
                    seen: why.to_string(),
                    verdict: Verdict::NotRun,
                    why: None,
                    fix: None,
                });
            }
            return rows;
        }
        let n = fmt_counts(&baseline);
        let write_steps = self.steps_on(&first_calls, None);

        // Same event twice.
        let mark = lane.http.mark();
        let again = self.deliver(&lane, event).await;
        let after = self.counts();
        let calls = lane.http.calls_since(mark);
        let expected = self.expected_by_step(&calls);
        let counted = minus(&after, &sum(&expected));
        let ok = counted == baseline && succeeded(&again);
        let r = row(
            "same event twice",
            format!("{n} in all; the redelivery succeeds"),
            format!(
                "{}; redelivery {}",
                with_expected(&after, &expected),
                summary(&again)
            ),
            ok,
        );
        rows.push(if counted != baseline {
            let extra = fmt_diff(&diff(&baseline, &counted));
            let steps = self.steps_on(&calls, None);
            r.because(
                format!(
                    "the redelivery wrote again ({extra}): nothing in the workflow recognised \
                     the event as already handled"
                ),
                self.guard_fix(&steps),
            )
        } else {
            let step = failed_step(&again);
            r.because(
                format!(
                    "the redelivery failed ({}): the workflow does not recognise a repeat \
                     before writing, so every retry of the sender fails",
                    summary(&again)
                ),
                self.guard_fix(&step.map_or(write_steps.clone(), |s| vec![s])),
            )
        });

        // A new event.
        let before = self.counts();
        let new = self.deliver(&lane, variant).await;
        let after = self.counts();
        let added = diff(&before, &after);
        let within = added
            .iter()
            .all(|(c, k)| *k <= baseline.get(c).copied().unwrap_or(0) as i64);
        let grew = added.values().any(|k| *k > 0) && added.values().all(|k| *k >= 0);
        let paths = id_paths.join(", ");
        let r = row(
            format!("new event ({paths} changed)"),
            format!("the run succeeds and writes new records (at most {n} more)"),
            format!("{}; {}", summary(&new), fmt_diff(&added)),
            succeeded(&new) && grew && within,
        );
        rows.push(if !succeeded(&new) {
            r.because(
                format!(
                    "a new event (its {paths} changed) failed: {}",
                    summary(&new)
                ),
                "dry-run the event with its ids changed; if the workflow reads the business id \
                 at another path, give that id path (CLI `--id-path`, the Check tab's id paths)",
            )
        } else if !grew {
            r.because(
                format!(
                    "the new event wrote no record: the workflow took it for a repeat of the \
                     first, so its claim or key does not change with {paths}"
                ),
                "make the claim, the dedupe key and the Idempotency-Key from the event's \
                 business id (e.g. `{{ input.id }}`), or give the id paths they read",
            )
        } else {
            r.because(
                format!(
                    "the new event wrote more than one delivery does ({} where one delivery \
                     wrote {n})",
                    fmt_diff(&added)
                ),
                "find the step that writes more than once per event (a retry without an \
                 Idempotency-Key, a loop) and give it a key from the event's business id",
            )
        });
        drop(lane);

        // Timeout after write, per write route, then the same event again.
        for route in &routes {
            let name = format!("timeout after write on {route}, then redelivery");
            let expected = format!("{n} in all; the redelivery succeeds");
            let lane = match self.lane() {
                Ok(l) => l,
                Err(e) => {
                    rows.push(no_store(name, expected, &e));
                    continue;
                }
            };
            if let Err(e) = self.add_fault(route, Fault::TimeoutAfterWrite, Some(1)) {
                rows.push(fault_not_set(name, expected, &e));
                continue;
            }
            let a = self.deliver(&lane, event).await;
            let hit = self.fault_hit("timeout_after_write");
            self.state().clear_faults();
            let b = self.deliver(&lane, event).await;
            let after = self.counts();
            let calls = lane.http.calls_since(0);
            let exp = self.expected_by_step(&calls);
            let counted = minus(&after, &sum(&exp));
            let replayed = self.state().log().iter().filter(|e| e.replayed).count();
            let seen = if hit {
                let mut s = format!(
                    "{}; first run {}, redelivery {}",
                    with_expected(&after, &exp),
                    summary(&a),
                    summary(&b)
                );
                if replayed > 0 {
                    s.push_str(&format!(
                        "; the destination replayed {replayed} stored answer(s) for a repeated key"
                    ));
                }
                s
            } else {
                format!("the fault never struck: this delivery did not call {route}")
            };
            let r = row(
                name,
                expected,
                seen,
                hit && counted == baseline && succeeded(&b),
            );
            let steps = self.steps_on(&calls, Some(route));
            rows.push(if !hit {
                r.because(
                    format!("this delivery never called {route}, so the fault could not strike"),
                    "check with an event that takes the same path as the first delivery",
                )
            } else if counted != baseline {
                r.because(
                    format!(
                        "after the answer of {route} was lost, it was written again: {} where \
                         one delivery leaves {n}",
                        fmt_counts(&counted)
                    ),
                    self.guard_fix(&steps),
                )
            } else {
                r.because(
                    format!(
                        "the redelivery failed ({}) after the first run's answer from {route} \
                         was lost",
                        summary(&b)
                    ),
                    self.guard_fix(&steps),
                )
            });
        }

        // The engine dies during the write, per write route; restarted, recovery resumes the
        // run (or leaves it to a person, which fails the row).
        for route in &routes {
            let name = format!("engine killed during {route} (after the write), restart");
            let expected = format!("resumed automatically; {n} in all");
            let route_steps = self.steps_on(&first_calls, Some(route));
            let (seen, why) = match self.lane() {
                Ok(lane) => match self.crash_during(&lane, route, event, &baseline).await {
                    Ok((seen, pass, why)) => {
                        rows.push(
                            row(name, expected, seen, pass)
                                .because(why, self.guard_fix(&route_steps)),
                        );
                        continue;
                    }
                    Err(e) => {
                        let why = format!("the crash could not be staged on {route}: {e}");
                        (e, why)
                    }
                },
                Err(e) => (
                    format!("could not open a store: {e}"),
                    "the check could not open its throw-away store".to_string(),
                ),
            };
            rows.push(row(name, expected, seen, false).because(
                why,
                "check with an event that takes the same path as the first delivery, with room \
                 in the temp dir",
            ));
        }

        // Forced failure, per write route; then the replay of the failed run.
        for route in &routes {
            let name = format!("forced failure on {route} (500 before write), compensation");
            let expected = "the run fails and releases every claim it took".to_string();
            let replay_name = format!("replay of the run failed on {route}");
            let replay_expected = format!("the replay succeeds; {n} in all");
            let lane = match self.lane() {
                Ok(l) => l,
                Err(e) => {
                    rows.push(no_store(name, expected, &e));
                    continue;
                }
            };
            if let Err(e) = self.add_fault(route, Fault::Error500BeforeWrite, None) {
                rows.push(fault_not_set(name, expected, &e));
                continue;
            }
            let failed = self.deliver(&lane, event).await;
            self.state().clear_faults();
            let failed = match failed {
                Ok(r) => r,
                Err(e) => {
                    rows.push(row(name, expected, e.clone(), false).because(
                        format!("the check could not record the failed run ({e})"),
                        "make room in the temp dir and run the check again",
                    ));
                    continue;
                }
            };
            let failed_calls = lane.http.calls_since(0);
            let held = held_claims(&lane, &failed).await;
            let taken = claims_taken(&failed);
            let ended_failed = matches!(failed.status, RunStatus::Failed | RunStatus::TimedOut);
            let claims = if taken.is_empty() {
                "no claim taken".to_string()
            } else if held.is_empty() {
                format!("claim {} released", taken.join(", "))
            } else {
                format!(
                    "claim {} still held: the sender's retry and a replay will be skipped",
                    held.join(", ")
                )
            };
            let mut seen = format!("run {}; {claims}", run_summary(&failed));
            if failed.status == RunStatus::Succeeded {
                seen.push_str("; the failure was swallowed, the event is lost");
            }
            // What the failure path wrote: declared expected effects (an alert, an audit
            // log), and the writes of steps on it that are not declared.
            let expected_writes = self.expected_by_step(&failed_calls);
            let undeclared = self.undeclared_failure_writes(&failed_calls);
            if !expected_writes.is_empty() {
                seen.push_str(&format!(
                    "; the failure path wrote {}, expected: {}",
                    fmt_counts(&sum(&expected_writes)),
                    declared(&expected_writes)
                ));
            }
            if !undeclared.is_empty() {
                seen.push_str(&format!(
                    "; the failure path wrote {} ({} not declared an expected effect)",
                    fmt_counts(&sum(&undeclared)),
                    ticks(
                        &undeclared
                            .iter()
                            .map(|(s, _)| s.clone())
                            .collect::<Vec<_>>()
                    )
                ));
            }
            let failing = failed
                .error
                .as_ref()
                .map(|e| e.step.clone())
                .unwrap_or_default();
            let r = row(name, expected, seen, ended_failed && held.is_empty());
            rows.push(if !ended_failed {
                r.because(
                    format!(
                        "the failure on {route} was swallowed: the run {}, so the sender never \
                         retries and the event is lost",
                        failed.status
                    ),
                    "end the error path with an Error Handler in `rethrow` mode (not `log` or \
                     `fallback`), so the run fails after its compensation",
                )
            } else {
                r.because(
                    format!(
                        "the claim {} was still held after the run failed, so the sender's \
                         retry and a replay are skipped as duplicates",
                        held.join(", ")
                    ),
                    format!(
                        "wire `{failing}`'s error port to an Error Handler in `rethrow` mode, \
                         then a Memory delete of the same namespace and key (the compensation)"
                    ),
                )
            });

            let replay_mark = lane.http.mark();
            let replay = lane
                .engine
                .replay(&failed, self.wf, Mode::Live)
                .await
                .map_err(|e| format!("the replay could not be stored: {e}"));
            let after = self.counts();
            let all_calls = lane.http.calls_since(0);
            let expected_all = self.expected_by_step(&all_calls);
            let want = plus(&baseline, &sum(&expected_all));
            let replay_expected = if expected_all.is_empty() {
                replay_expected
            } else {
                format!(
                    "{replay_expected}, besides {} the failure path is declared to write",
                    fmt_counts(&sum(&expected_all))
                )
            };
            let r = row(
                replay_name,
                replay_expected,
                format!(
                    "replay {}; {}",
                    summary(&replay),
                    with_expected(&after, &expected_all)
                ),
                succeeded(&replay) && after == want,
            );
            let replay_calls = lane.http.calls_since(replay_mark);
            rows.push(if !succeeded(&replay) {
                r.because(
                    format!("the replay of the failed run failed: {}", summary(&replay)),
                    "open the failed run in Runs and dry-run its replay to see which step fails",
                )
            } else if !undeclared.is_empty() && after != want {
                let steps: Vec<String> = undeclared.iter().map(|(s, _)| s.clone()).collect();
                let (one, verb) = if steps.len() == 1 {
                    (ticks(&steps), "is")
                } else {
                    (ticks(&steps), "are")
                };
                r.because(
                    format!(
                        "{one} wrote {} on the failure path and {verb} not declared an expected \
                         effect, so a failure and its replay leave {} where one delivery leaves {n}",
                        fmt_counts(&sum(&undeclared)),
                        fmt_counts(&after)
                    ),
                    format!(
                        "if {one} is meant to run when the flow fails (an alert, an audit log), \
                         declare it: tick \"Expected effect on the failure path\" in its \
                         inspector (`\"expected_on_failure\": true` in its config); if not, take \
                         it off the error path"
                    ),
                )
            } else if total(&minus(&after, &want)) > 0 {
                let extra = minus(&after, &want);
                r.because(
                    format!(
                        "the replay wrote again what the failed run had written ({}): {} where \
                         one delivery leaves {n}",
                        fmt_counts(&extra),
                        fmt_counts(&after)
                    ),
                    self.guard_fix(&self.steps_on(&replay_calls, None)),
                )
            } else {
                r.because(
                    format!(
                        "the replay wrote less than one delivery does ({} where one delivery \
                         leaves {n}): it was stopped as a duplicate of the failed run",
                        fmt_counts(&after)
                    ),
                    format!(
                        "release the claim when `{failing}` fails: its error port to an Error \
                         Handler in `rethrow` mode, then a Memory delete of the claim's key"
                    ),
                )
            });
        }
        rows
    }
}

/// A row whose fault could not be set in the sandbox.
fn fault_not_set(check: String, expected: String, e: &str) -> CheckRow {
    row(
        check,
        expected,
        format!("could not set the fault: {e}"),
        false,
    )
    .because(
        format!("the sandbox refused the fault ({e})"),
        "report this: the check could not stage its scenario",
    )
}

/// The step a failed run failed at.
fn failed_step(r: &Result<RunRecord, String>) -> Option<String> {
    r.as_ref().ok()?.error.as_ref().map(|e| e.step.clone())
}

/// `` `a`, `b` ``.
fn ticks(steps: &[String]) -> String {
    steps
        .iter()
        .map(|s| format!("`{s}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// What `calls` that `pick` selects wrote, by step, in first-call order (steps that wrote
/// nothing left out).
fn by_step(calls: &[Call], pick: impl Fn(&Call) -> bool) -> Vec<(String, Counts)> {
    let mut out: Vec<(String, Counts)> = Vec::new();
    for c in calls.iter().filter(|c| pick(c) && total(&c.wrote) > 0) {
        let i = match out.iter().position(|(s, _)| *s == c.step) {
            Some(i) => i,
            None => {
                out.push((c.step.clone(), Counts::new()));
                out.len() - 1
            }
        };
        for (k, n) in &c.wrote {
            *out[i].1.entry(k.clone()).or_default() += n;
        }
    }
    out
}

fn sum(by_step: &[(String, Counts)]) -> Counts {
    let mut out = Counts::new();
    for (_, c) in by_step {
        out = plus(&out, c);
    }
    out
}

fn plus(a: &Counts, b: &Counts) -> Counts {
    let mut out = a.clone();
    for (k, n) in b {
        *out.entry(k.clone()).or_default() += n;
    }
    out
}

/// `a` less `b`, per collection (collections left with none dropped).
fn minus(a: &Counts, b: &Counts) -> Counts {
    a.iter()
        .map(|(k, n)| (k.clone(), n.saturating_sub(b.get(k).copied().unwrap_or(0))))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// `1 deal, 1 notification`, and, when steps declared an expected effect on the failure path
/// wrote some of them, ` (1 notification expected: `notify` is declared an expected effect on
/// the failure path)`.
fn with_expected(counts: &Counts, expected: &[(String, Counts)]) -> String {
    let mut s = fmt_counts(counts);
    if expected.is_empty() {
        return s;
    }
    s.push_str(&format!(
        " ({} expected: {})",
        fmt_counts(&sum(expected)),
        declared(expected)
    ));
    s
}

/// `` `notify` is declared an expected effect on the failure path ``.
fn declared(expected: &[(String, Counts)]) -> String {
    let steps: Vec<String> = expected.iter().map(|(s, _)| s.clone()).collect();
    let what = if steps.len() == 1 {
        "is declared an expected effect"
    } else {
        "are declared expected effects"
    };
    format!("{} {what} on the failure path", ticks(&steps))
}

/// The steps of `wf` reachable from an `error` port (the failure paths), and those of them
/// declared an expected effect there ([`crate::steps::StepKind::expected_on_failure`]), as
/// `(workflow id, step id)`.
fn failure_paths(wf: &Workflow, registry: &Registry) -> (StepSet, StepSet) {
    let mut on: BTreeSet<String> = BTreeSet::new();
    let mut stack: Vec<&str> = wf
        .edges
        .iter()
        .filter(|e| e.port() == crate::workflow::model::PORT_ERROR)
        .map(|e| e.to.as_str())
        .collect();
    while let Some(s) = stack.pop() {
        if on.insert(s.to_string()) {
            stack.extend(
                wf.edges
                    .iter()
                    .filter(|e| e.from == s)
                    .map(|e| e.to.as_str()),
            );
        }
    }
    let key = |s: &str| (wf.id.clone(), s.to_string());
    let expected = wf
        .steps
        .iter()
        .filter(|s| on.contains(&s.id))
        .filter(|s| {
            registry
                .get(&s.kind)
                .is_some_and(|k| k.expected_on_failure(&s.config))
        })
        .map(|s| key(&s.id))
        .collect();
    (on.iter().map(|s| key(s)).collect(), expected)
}

fn row(
    check: impl Into<String>,
    expected: impl Into<String>,
    seen: impl Into<String>,
    pass: bool,
) -> CheckRow {
    CheckRow {
        check: check.into(),
        expected: expected.into(),
        seen: seen.into(),
        verdict: if pass { Verdict::Pass } else { Verdict::Fail },
        why: None,
        fix: None,
    }
}

/// A row that failed because its scenario's store could not open.
fn no_store(check: impl Into<String>, expected: impl Into<String>, why: &str) -> CheckRow {
    row(
        check,
        expected,
        format!("could not open a store: {why}"),
        false,
    )
    .because(
        format!(
            "the check could not open its throw-away store ({why}), so this scenario did not run"
        ),
        "make room in the temp dir (or set TMPDIR to a roomier one) and run the check again",
    )
}

fn succeeded(r: &Result<RunRecord, String>) -> bool {
    matches!(r, Ok(r) if r.status == RunStatus::Succeeded)
}

fn summary(r: &Result<RunRecord, String>) -> String {
    match r {
        Ok(r) => run_summary(r),
        Err(e) => e.clone(),
    }
}

/// `succeeded`, `succeeded (skip)`, `failed at create: http_status: POST … answered 409`.
pub fn run_summary(r: &RunRecord) -> String {
    let mut s = r.status.to_string();
    // The routes routers took, when not `default` (e.g. a skip).
    let routes: Vec<&str> = r
        .steps
        .iter()
        .filter(|s| s.kind == "router")
        .flat_map(|s| s.ports.iter())
        .map(String::as_str)
        .filter(|p| *p != "default" && *p != "error")
        .collect();
    if !routes.is_empty() && r.status == RunStatus::Succeeded {
        s.push_str(&format!(" ({})", routes.join(", ")));
    }
    if let Some(e) = &r.error {
        match e.http_status {
            Some(h) => s.push_str(&format!(" at `{}`: HTTP {h}", e.step)),
            None => {
                let mut msg = e.message.clone();
                if msg.chars().count() > 110 {
                    msg = format!("{}…", msg.chars().take(110).collect::<String>());
                }
                s.push_str(&format!(" at `{}`: {}: {msg}", e.step, e.code));
            }
        }
        if e.attempts > 1 {
            s.push_str(&format!(" after {} attempts", e.attempts));
        }
    }
    s
}

fn total(c: &Counts) -> usize {
    c.values().sum()
}

fn noun(collection: &str, n: i64) -> String {
    if n.abs() == 1 {
        id_prefix(collection).to_string()
    } else {
        collection.to_string()
    }
}

/// `1 deal, 2 contacts`, or `no records`.
pub fn fmt_counts(c: &Counts) -> String {
    if total(c) == 0 {
        return "no records".into();
    }
    c.iter()
        .map(|(k, n)| format!("{n} {}", noun(k, *n as i64)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn diff(before: &Counts, after: &Counts) -> BTreeMap<String, i64> {
    let keys: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    keys.into_iter()
        .map(|k| {
            let b = before.get(k).copied().unwrap_or(0) as i64;
            let a = after.get(k).copied().unwrap_or(0) as i64;
            (k.clone(), a - b)
        })
        .filter(|(_, d)| *d != 0)
        .collect()
}

fn fmt_diff(d: &BTreeMap<String, i64>) -> String {
    if d.is_empty() {
        return "no new records".into();
    }
    d.iter()
        .map(|(k, n)| format!("{n:+} {}", noun(k, *n)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `namespace/key` of every Memory claim the run took (a persistent `write` with
/// `allow_overwrite: false` that answered `written: true`).
fn claims_taken(run: &RunRecord) -> Vec<String> {
    claim_keys(run)
        .into_iter()
        .map(|(ns, k)| format!("{ns}/{k}"))
        .collect()
}

fn claim_keys(run: &RunRecord) -> Vec<(String, String)> {
    run.steps
        .iter()
        .filter(|s| s.kind == "memory")
        .filter(|s| {
            let c = &s.resolved_config;
            c.get("operation").and_then(Value::as_str) == Some("write")
                && c.get("allow_overwrite").and_then(Value::as_bool) == Some(false)
                && c.get("scope")
                    .and_then(Value::as_str)
                    .unwrap_or("persistent")
                    == "persistent"
        })
        .filter_map(|s| {
            let out = s.output.as_ref()?;
            if out.get("written").and_then(Value::as_bool) != Some(true) {
                return None;
            }
            let ns = s.resolved_config.get("namespace")?.as_str()?.to_string();
            let key = out.get("key")?.as_str()?.to_string();
            Some((ns, key))
        })
        .collect()
}

/// Claims the run took that are still in the store.
async fn held_claims(lane: &Lane, run: &RunRecord) -> Vec<String> {
    let now = lane.engine.clock().now_ms();
    let mut held = Vec::new();
    for (ns, k) in claim_keys(run) {
        if matches!(lane.store.read(&ns, &k, now).await, Ok(Some(_))) {
            held.push(format!("{ns}/{k}"));
        }
    }
    held
}

// ---------------------------------------------------------------------------------------------
// Inputs: env names, fixed destinations, the variant

/// URL fields (`url`, `*_url`) must be templates (`{{ env.NAME }}/path`): a fixed address
/// cannot be pointed at the sandbox.
/// A connection for every one an `action` step of `workflows` names, to its app's fake in
/// the sandbox at `url` (a static token; Slack's webhook for a webhook-only operation). A
/// step whose app has no fake gets none: it fails with `connection_not_found`, which its row
/// shows.
fn sandbox_connections<'w>(
    workflows: impl Iterator<Item = &'w Workflow>,
    url: &str,
) -> Vec<crate::connections::Connection> {
    let mut out: Vec<crate::connections::Connection> = Vec::new();
    for step in workflows.flat_map(|w| &w.steps) {
        if step.kind != "action" {
            continue;
        }
        let text = |k: &str| {
            step.config
                .get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let (app, id) = (text("connector"), text("connection"));
        if out.iter().any(|c| c.id == id) {
            continue;
        }
        let kind = crate::connectors::get(app)
            .and_then(|c| c.operations.get(text("operation")))
            .and_then(|op| op.auth.first())
            .map_or("bearer", String::as_str);
        out.extend(crate::sandbox::vendors::sandbox_connection(
            app, id, url, kind,
        ));
    }
    out
}

fn fixed_destinations(wf: &Workflow) -> Result<(), CheckError> {
    let mut bad = Vec::new();
    for (i, s) in wf.steps.iter().enumerate() {
        let Some(obj) = s.config.as_object() else {
            continue;
        };
        for (field, v) in obj {
            if field != "url" && !field.ends_with("_url") {
                continue;
            }
            let Some(text) = v.as_str() else { continue };
            if !text.trim_start().starts_with("{{") {
                bad.push(format!(
                    "step `{}` (steps[{i}].config.{field}) sends to the fixed address `{text}`; \
                     write it as `{{{{ env.NAME }}}}/path` so the check can point it at its sandbox",
                    s.id
                ));
            }
        }
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(CheckError::BadInput(bad.join("\n")))
    }
}

/// The `--id-path` values given (trimmed, empty ones dropped), if any.
fn given_id_paths(options: &CheckOptions) -> Option<Vec<String>> {
    let paths: Vec<String> = options
        .id_paths
        .iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .collect();
    (!paths.is_empty()).then_some(paths)
}

/// The ids of the workflows a definition's `fan_out` steps start (`config.workflow`), sorted,
/// without repeats: what [`CheckOptions::targets`] must hold. Read from the raw JSON, so a
/// caller can look them up before anything is compiled.
pub fn fan_out_targets(definition: &Value) -> Vec<String> {
    let mut ids = BTreeSet::new();
    for s in definition
        .get("steps")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if s.get("kind").and_then(Value::as_str) == Some("fan_out") {
            if let Some(id) = s.pointer("/config/workflow").and_then(Value::as_str) {
                ids.insert(id.to_string());
            }
        }
    }
    ids.into_iter().collect()
}

/// The id paths a check changes for its "new event" when none are given: the paths of the
/// event's business ids that the workflow's own keys read ([`key_id_paths`]), plus `id` and
/// `data.object.id` where the event has them; `id` when none is found (the check then says
/// the event has no value there).
pub fn inferred_id_paths(workflows: &[&Workflow], event: &Value) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for p in default_id_paths(event)
        .into_iter()
        .chain(workflows.iter().flat_map(|w| key_id_paths(w)))
    {
        let present = matches!(
            get_path(event, &p),
            Some(Value::String(_) | Value::Number(_))
        );
        if present && !paths.contains(&p) {
            paths.push(p);
        }
    }
    if paths.is_empty() {
        paths.push("id".into());
    }
    paths
}

/// The `input.<path>` references of a workflow's keys that name a business id: the webhook
/// trigger's `dedupe_key`, a Memory step's `key`, an `Idempotency-Key` header, an
/// `idempotency_key`; a path counts when its last segment is `id`, ends in `_id` or is
/// `number` (`issue.id`, `data.object.id`, `issue.number`), not the other data a key may mix
/// in (`action`, `repository.full_name`), which a new event keeps.
pub fn key_id_paths(wf: &Workflow) -> Vec<String> {
    let mut texts: Vec<&str> = Vec::new();
    for step in &wf.steps {
        let c = &step.config;
        for field in ["dedupe_key", "idempotency_key"] {
            texts.extend(c.get(field).and_then(Value::as_str));
        }
        if step.kind == "memory" {
            texts.extend(c.get("key").and_then(Value::as_str));
        }
        if let Some(h) = c.get("headers").and_then(Value::as_object) {
            texts.extend(
                h.iter()
                    .filter(|(k, _)| k.eq_ignore_ascii_case("idempotency-key"))
                    .filter_map(|(_, v)| v.as_str()),
            );
        }
    }
    let mut out: Vec<String> = Vec::new();
    for t in texts {
        let mut rest = t;
        while let Some(i) = rest.find("input.") {
            let before = rest[..i].chars().next_back();
            rest = &rest[i + "input.".len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.') {
                continue;
            }
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
                .unwrap_or(rest.len());
            let path = rest[..end].trim_end_matches('.');
            let last = path.rsplit('.').next().unwrap_or_default();
            let id_like = last == "id" || last.ends_with("_id") || last == "number";
            if id_like && !out.iter().any(|p| p == path) {
                out.push(path.to_string());
            }
        }
    }
    out
}

/// `id`, plus `data.object.id` when the event has a text or number there.
pub fn default_id_paths(event: &Value) -> Vec<String> {
    let mut paths = vec!["id".to_string()];
    if matches!(
        get_path(event, "data.object.id"),
        Some(Value::String(_) | Value::Number(_))
    ) {
        paths.push("data.object.id".into());
    }
    paths
}

fn get_path<'v>(v: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.').try_fold(v, |cur, seg| match cur {
        Value::Object(m) => m.get(seg),
        Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

fn get_path_mut<'v>(v: &'v mut Value, path: &str) -> Option<&'v mut Value> {
    path.split('.').try_fold(v, |cur, seg| match cur {
        Value::Object(m) => m.get_mut(seg),
        Value::Array(a) => seg.parse::<usize>().ok().and_then(move |i| a.get_mut(i)),
        _ => None,
    })
}

/// The "new event": see the module doc for the rule.
pub fn variant_of(event: &Value, id_paths: &[String]) -> Result<Value, CheckError> {
    if id_paths.is_empty() {
        return Err(CheckError::BadInput(
            "id paths: give at least one dot path of the event's business id (e.g. `id`)".into(),
        ));
    }
    let mut out = event.clone();
    let mut texts: Vec<(String, String)> = Vec::new();
    for path in id_paths {
        let Some(old) = get_path(event, path) else {
            return Err(CheckError::BadInput(format!(
                "id path `{path}`: the event has no value there (give the dot path of its \
                 business id, e.g. `id` or `issue.id`)"
            )));
        };
        let new = match old {
            Value::String(s) if !s.is_empty() => {
                let n = format!("{s}{VARIANT_SUFFIX}");
                texts.push((s.clone(), n.clone()));
                Value::String(n)
            }
            Value::Number(n) => match (n.as_i64(), n.as_f64()) {
                (Some(i), _) => Value::from(i.saturating_add(VARIANT_OFFSET)),
                (None, Some(f)) => Value::from(f + VARIANT_OFFSET as f64),
                _ => Value::from(VARIANT_OFFSET),
            },
            other => {
                return Err(CheckError::BadInput(format!(
                    "id path `{path}` holds {}; give the path of a text or number id",
                    crate::steps::json_type(other)
                )))
            }
        };
        if let Some(slot) = get_path_mut(&mut out, path) {
            *slot = new;
        }
    }
    replace_texts(&mut out, &texts);
    Ok(out)
}

fn replace_texts(v: &mut Value, texts: &[(String, String)]) {
    match v {
        Value::String(s) => {
            if let Some((_, new)) = texts.iter().find(|(old, _)| old == s) {
                *s = new.clone();
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| replace_texts(x, texts)),
        Value::Object(m) => m.values_mut().for_each(|x| replace_texts(x, texts)),
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// Time, transport, scratch dir

/// Real time, except that waits (retry backoff) move this clock instead of sleeping.
#[derive(Debug, Default)]
struct CheckClock {
    skipped_ms: AtomicI64,
}

#[async_trait]
impl Clock for CheckClock {
    fn now_ms(&self) -> i64 {
        SystemClock
            .now_ms()
            .saturating_add(self.skipped_ms.load(Ordering::SeqCst))
    }
    async fn sleep(&self, d: Duration) {
        self.skipped_ms
            .fetch_add(d.as_millis().min(i64::MAX as u128) as i64, Ordering::SeqCst);
        tokio::task::yield_now().await;
    }
}

/// The live transport, limited to the sandbox; an answer the sandbox withholds is a timeout
/// at once.
struct CheckHttp {
    live: LiveHttp,
    sandbox: SandboxState,
    base: String,
    /// A withheld answer "kills the engine": the call never returns and `crashed` fires (the
    /// crash-during-write rows), instead of being reported as a timeout.
    crash_on_hold: std::sync::atomic::AtomicBool,
    crashed: tokio::sync::Notify,
    /// Every call carried, in order, with the step that made it and what it wrote.
    calls: std::sync::Mutex<Vec<Call>>,
}

/// One call the check's transport carried: the step that made it (read from the executor,
/// [`crate::runtime::executor::current_step`]), its route and the records it created.
#[derive(Debug, Clone, Default)]
struct Call {
    workflow: String,
    step: String,
    /// `POST /deals`.
    route: String,
    wrote: Counts,
}

impl CheckHttp {
    fn new(sandbox: &SandboxHandle) -> Self {
        CheckHttp {
            live: LiveHttp::new(),
            sandbox: sandbox.state().clone(),
            base: sandbox.url(),
            crash_on_hold: Default::default(),
            crashed: Default::default(),
            calls: Default::default(),
        }
    }

    /// How many calls so far (for [`CheckHttp::calls_since`]).
    fn mark(&self) -> usize {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// The calls made since `mark`.
    fn calls_since(&self, mark: usize) -> Vec<Call> {
        let calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        calls.get(mark..).map(<[Call]>::to_vec).unwrap_or_default()
    }

    fn record(&self, call: &HttpCall, before: &Counts) {
        let (workflow, step) = crate::runtime::executor::current_step().unwrap_or_default();
        let after = self.sandbox.counts();
        let wrote: Counts = after
            .into_iter()
            .filter_map(|(c, n)| {
                let b = before.get(&c).copied().unwrap_or(0);
                (n > b).then(|| (c, n - b))
            })
            .collect();
        let path = call
            .url
            .strip_prefix(&self.base)
            .unwrap_or(&call.url)
            .split('?')
            .next()
            .unwrap_or_default();
        let path = if path.is_empty() { "/" } else { path };
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Call {
                workflow,
                step,
                route: format!("{} {path}", call.method),
                wrote,
            });
    }

    fn held(&self) -> usize {
        self.sandbox
            .log()
            .iter()
            .filter(|e| e.outcome == Outcome::Held)
            .count()
    }
}

#[async_trait]
impl HttpTransport for CheckHttp {
    async fn send(
        &self,
        call: &HttpCall,
        timeout: Duration,
        dry_sample: Option<&Value>,
    ) -> Result<HttpAnswer, TransportError> {
        let ours = call.url == self.base
            || call
                .url
                .strip_prefix(&self.base)
                .is_some_and(|rest| rest.starts_with(['/', '?']));
        if !ours {
            return Err(TransportError::Invalid(format!(
                "fluxo check sends only to its sandbox ({}); `{}` is elsewhere",
                self.base, call.url
            )));
        }
        let held_before = self.held();
        let before = self.sandbox.counts();
        let send = self.live.send(call, timeout, dry_sample);
        tokio::pin!(send);
        let withheld = async {
            loop {
                tokio::time::sleep(Duration::from_millis(2)).await;
                if self.held() > held_before {
                    break;
                }
            }
        };
        let answer = tokio::select! {
            answer = &mut send => answer,
            _ = withheld => {
                if self.crash_on_hold.load(Ordering::SeqCst) {
                    self.record(call, &before);
                    self.crashed.notify_one();
                    std::future::pending::<()>().await;
                }
                Err(TransportError::Timeout)
            }
        };
        self.record(call, &before);
        answer
    }
}

/// A throw-away directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> std::io::Result<Self> {
        let dir = std::env::temp_dir().join(format!("fluxo-check-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch(dir))
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn env_names_are_found_in_templates() {
        let mut n = BTreeSet::new();
        crate::workflow::env::scan_env(
            "{{ env.CRM_URL }}/x {{ env['AI_URL'] }} {{ env[\"OUT\"] }} environment x.env.NO",
            &mut n,
        );
        assert_eq!(
            n.into_iter().collect::<Vec<_>>(),
            vec!["AI_URL", "CRM_URL", "OUT"]
        );
    }

    #[test]
    fn id_paths_come_from_the_workflows_own_keys() {
        let wf: Workflow = serde_json::from_value(serde_json::json!({
            "id": "gh", "name": "gh", "version": 1,
            "steps": [
                {"id": "hook", "kind": "webhook_trigger", "config": {
                    "dedupe_key": "gh-{{ input.issue.id }}-{{ input.action }}"}},
                {"id": "claim", "kind": "memory", "config": {"operation": "write",
                    "key": "{{ input.repository.full_name }}#{{input.issue.number}}"}},
                {"id": "post", "kind": "http_request", "config": {"method": "POST",
                    "url": "https://x.example", "headers": {"idempotency-key": "t-{{ input.issue.id }}"}}}
            ],
            "edges": []
        }))
        .unwrap();
        assert_eq!(key_id_paths(&wf), ["issue.id", "issue.number"]);
        let event = serde_json::json!({"action": "opened", "issue": {"id": 7, "number": 3}});
        assert_eq!(
            inferred_id_paths(&[&wf], &event),
            ["issue.id", "issue.number"]
        );
        // Stripe: the event id and its object's id, read by the keys or present.
        let stripe = serde_json::json!({"id": "evt_1", "data": {"object": {"id": "in_1"}}});
        assert_eq!(inferred_id_paths(&[], &stripe), ["id", "data.object.id"]);
        // Nothing found: `id`, which the variant then reports missing.
        assert_eq!(inferred_id_paths(&[&wf], &serde_json::json!({})), ["id"]);
    }

    #[test]
    fn variant_changes_ids_and_their_copies() {
        let e = json!({"id": "evt_1", "data": {"object": {"id": "in_1", "lines": [{"invoice": "in_1"}]}},
                       "issue": {"number": 7}, "other": "in_1x"});
        assert_eq!(default_id_paths(&e), vec!["id", "data.object.id"]);
        let v = variant_of(&e, &default_id_paths(&e)).unwrap();
        assert_eq!(v["id"], "evt_1-variant");
        assert_eq!(v["data"]["object"]["id"], "in_1-variant");
        assert_eq!(v["data"]["object"]["lines"][0]["invoice"], "in_1-variant");
        assert_eq!(v["other"], "in_1x");
        let v = variant_of(&e, &["issue.number".into()]).unwrap();
        assert_eq!(v["issue"]["number"], 1_000_007);
        assert!(matches!(
            variant_of(&e, &["nope".into()]),
            Err(CheckError::BadInput(_))
        ));
        assert!(matches!(
            variant_of(&e, &["data".into()]),
            Err(CheckError::BadInput(_))
        ));
    }

    #[test]
    fn counts_read_naturally() {
        let c: Counts = [("deals".to_string(), 1), ("contacts".to_string(), 2)].into();
        assert_eq!(fmt_counts(&c), "2 contacts, 1 deal");
        assert_eq!(fmt_counts(&Counts::new()), "no records");
        let d = diff(&Counts::new(), &c);
        assert_eq!(fmt_diff(&d), "+2 contacts, +1 deal");
    }
}
