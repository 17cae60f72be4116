//! The executor: walks a compiled workflow's graph over ports, one step at a time.
//!
//! * The walk starts at the trigger (its output is the run input) and follows the edges of the
//!   port(s) each step leaves by, depth first in edge order; each step runs at most once a run.
//! * A failed step with edges on its `error` port sends the walk there with `error` in scope;
//!   without them the run fails at once (SPEC §1).
//! * `error_handler` modes are carried out here (see [`crate::steps::error_handler`]).
//! * The run deadline (`settings.run_timeout_s`) bounds everything: no step starts past it
//!   outside an error branch (compensation still runs), retries never wait past it, and the run
//!   then ends `timed_out` with the last error kept.
//! * The run record is written to the store as it goes and an event is broadcast per change.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

use serde::Serialize;
use serde_json::{json, Value};
use tokio::sync::broadcast;

use super::effects::Effects;
use super::http::{HttpTransport, LiveHttp};
use super::outbound::{BadAllowEntry, OutboundAllow, OutboundPolicy};
use super::resume;
use crate::clock::Clock;
use crate::run::{
    new_run_id, Attempt, ErrorInfo, Mode, RunRecord, RunStatus, StepRecord, StepStatus, Timestamp,
    Trigger,
};
use crate::secrets::Masker;
use crate::steps::error_handler::{self, HandlerMode};
use crate::steps::{parse_rendered, Registry, StepContext, StepError, StepOutput};
use crate::store::{Store, StoreError};
use crate::workflow::model::{PORT_ERROR, PORT_OUT};
use crate::workflow::template::Scope;
use crate::workflow::Compiled;

tokio::task_local! {
    /// The step whose kind is running (`(workflow id, step id)`), for [`current_step`].
    static CURRENT_STEP: (String, String);
}

/// The step whose kind is running on this task, as `(workflow id, step id)`: what a transport
/// reads to tell which step a call comes from (`fluxo check` attributes each record the
/// sandbox writes to its step). `None` outside a step.
pub fn current_step() -> Option<(String, String)> {
    CURRENT_STEP.try_with(Clone::clone).ok()
}

/// Prefix of process variables visible to templates as `env.NAME` (SPEC §2).
pub const ENV_PREFIX: &str = "FLUXO_ENV_";

/// How long an error-branch step that starts after the run deadline (a compensation) may
/// spend rendering its config, in milliseconds.
pub const RENDER_GRACE_MS: u64 = 1_000;

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRequest {
    pub input: crate::run::RunInput,
    pub trigger: Trigger,
    pub mode: Mode,
    pub idempotency_key: Option<String>,
    pub replay_of: Option<String>,
    /// The run this one resumes ([`Engine::resume_run`]).
    pub resume_of: Option<String>,
    /// The step a resume executes from, when chosen.
    pub resume_from: Option<String>,
    /// The lineage's root run id; `None` = the new run starts its own lineage.
    pub root_run_id: Option<String>,
    /// The input was edited by a person (a replay with a corrected payload).
    pub input_edited: bool,
}

impl RunRequest {
    /// A live or dry run of `input` started by `trigger`.
    pub fn new(input: impl Into<crate::run::RunInput>, trigger: Trigger, mode: Mode) -> Self {
        RunRequest {
            input: input.into(),
            trigger,
            mode,
            idempotency_key: None,
            replay_of: None,
            resume_of: None,
            resume_from: None,
            root_run_id: None,
            input_edited: false,
        }
    }
}

/// Which definition a replay runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum VersionChoice {
    /// The workflow as it is now (default).
    #[default]
    Current,
    /// The snapshot the original run recorded.
    Original,
}

/// A change in a run, broadcast to subscribers (the server's SSE stream, the app): the `data`
/// of a `run` server-sent event.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct RunEvent {
    /// `run_started`, `step_finished`, `run_finished`.
    pub event: &'static str,
    pub run_id: String,
    pub workflow_id: String,
    /// The step, on `step_finished`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_id: Option<String>,
    /// Run status, or the step's status for `step_finished`.
    pub status: String,
    pub mode: Mode,
    pub at: Timestamp,
}

/// The engine: a store, a clock, an HTTP transport, the step registry and env variables.
/// Cheap to clone; share one per process.
#[derive(Clone)]
pub struct Engine {
    store: Arc<dyn Store>,
    registry: Arc<Registry>,
    clock: Arc<dyn Clock>,
    http: Arc<dyn HttpTransport>,
    outbound: Arc<OutboundPolicy>,
    env: Arc<RwLock<EnvLayers>>,
    events: broadcast::Sender<RunEvent>,
    journal: Arc<super::journal::EventJournal>,
    commit: Option<crate::store::GroupCommit>,
    children: Arc<RwLock<Option<Arc<super::children::ChildHooks>>>>,
    /// The in-flight log steps are recorded in ([`Engine::set_flight_log`]), shared by every
    /// clone.
    flight: Arc<std::sync::OnceLock<crate::store::flight::FlightLog>>,
    /// Where connector steps read their connections ([`Engine::set_connections`]), shared by
    /// every clone.
    connections: Arc<RwLock<Arc<dyn crate::connections::ConnectionStore>>>,
    /// Connector requests paced per connection ([`crate::connections::pace`]).
    pacer: Arc<crate::connections::pace::Pacer>,
    /// OAuth 2 connections' refresh locks and the tokens to mask
    /// ([`crate::connections::oauth`]).
    oauth: Arc<crate::connections::oauth::Tokens>,
}

impl Engine {
    /// An engine over `store` and `clock`, with the live HTTP transport, the built-in kinds and
    /// the `FLUXO_ENV_*` process variables as `env`.
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>) -> Self {
        let (events, _) = broadcast::channel(1024);
        let journal = Arc::new(super::journal::EventJournal::default());
        let outbound = Arc::new(OutboundPolicy::default());
        let pacer = Arc::new(crate::connections::pace::Pacer::new(clock.clone()));
        Engine {
            store,
            registry: Arc::new(Registry::builtin()),
            clock,
            http: Arc::new(LiveHttp::with_policy(outbound.clone())),
            outbound,
            env: Arc::new(RwLock::new(EnvLayers::new())),
            events,
            journal,
            commit: None,
            children: Arc::new(RwLock::new(None)),
            flight: Arc::default(),
            pacer,
            oauth: Arc::default(),
            connections: Arc::new(RwLock::new(Arc::new(
                crate::connections::MemConnections::default(),
            ))),
        }
    }

    /// Record every step a stored run executes in `log` (the server's crash-loop guard,
    /// [`crate::store::flight`]): one `write(2)` when the step starts and one when it is done.
    /// Shared by every clone of this engine; set once (a second log is refused: `false`).
    pub fn set_flight_log(&self, log: crate::store::flight::FlightLog) -> bool {
        self.flight.set(log).is_ok()
    }

    /// The in-flight log, if one was set.
    pub fn flight_log(&self) -> Option<&crate::store::flight::FlightLog> {
        self.flight.get()
    }

    /// Make a live run's `running` state durable before its first step, and its final state
    /// before `execute` returns, through `commit` (batched with other writers' writes). Then
    /// a crash never leaves a run that acted as `queued` (it would be executed again on
    /// restart instead of becoming `interrupted`), nor loses a finished run's outcome.
    pub fn with_group_commit(mut self, commit: crate::store::GroupCommit) -> Self {
        self.commit = Some(commit);
        self
    }

    /// The group commit, if the engine writes through one.
    pub fn group_commit(&self) -> Option<&crate::store::GroupCommit> {
        self.commit.as_ref()
    }

    /// Let live runs start child runs (`fan_out`): `hooks` find target workflows and hand
    /// queued runs to the workers. Shared by every clone of this engine. Without hooks a live
    /// `fan_out` fails with a clear error; a dry one predicts from the store.
    pub fn set_child_hooks(&self, hooks: super::children::ChildHooks) {
        *self.children.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(hooks));
    }

    /// The starter of child runs for a run in `mode`.
    fn child_starter(&self, mode: Mode) -> Arc<dyn super::children::RunStarter> {
        use super::children::{DryStarter, LiveStarter, NoStarter};
        let hooks = self
            .children
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match (mode, hooks) {
            (Mode::Live, Some(hooks)) => Arc::new(LiveStarter {
                engine: self.clone(),
                hooks,
            }),
            (Mode::Live, None) => Arc::new(NoStarter),
            (Mode::Dry, hooks) => Arc::new(DryStarter {
                engine: self.clone(),
                hooks,
            }),
        }
    }

    /// Store `run` durably: through the group commit (batched with other writers), or
    /// directly when there is none (tests, the CLI: the store's own flushing applies).
    async fn put_durable(&self, run: RunRecord) -> Result<RunRecord, StoreError> {
        match &self.commit {
            Some(c) => c.put_run(run).await,
            None => self.store.put_run(&run).await.map(|()| run),
        }
    }

    /// Replace the HTTP transport (tests, embedding). [`Engine::set_outbound_allow`] reaches
    /// only the engine's own transport: give a replacement [`LiveHttp`] its policy with
    /// [`LiveHttp::with_policy`]`(engine.outbound_policy().clone())`.
    pub fn with_http(mut self, http: Arc<dyn HttpTransport>) -> Self {
        self.http = http;
        self
    }

    /// Set the settings' `outbound_allow` entries (the `FLUXO_OUTBOUND_ALLOW` ones stay): the
    /// non-public destinations a host from run data may still reach (SPEC §5).
    pub fn set_outbound_allow(&self, entries: &[String]) -> Result<(), BadAllowEntry> {
        self.outbound.set_allow(OutboundAllow::parse(entries)?);
        Ok(())
    }

    /// The HTTP transport steps send through (its outbound rules apply to whatever uses it:
    /// "Test connection" too).
    pub fn http(&self) -> &Arc<dyn HttpTransport> {
        &self.http
    }

    /// The outbound policy (allowlist, resolver) of the engine's live transport.
    pub fn outbound_policy(&self) -> &Arc<OutboundPolicy> {
        &self.outbound
    }

    /// Set the embedder's variables visible as `env.NAME` (they win over process variables of
    /// the same name; replaces earlier `set_env` values).
    pub fn set_env(&self, vars: BTreeMap<String, String>) {
        let mut layers = self.env.write().unwrap_or_else(|e| e.into_inner());
        layers.embedder = vars;
        layers.merge();
    }

    /// Set the variables of the app settings (`settings.json`): they win over the embedder's
    /// and the process's (replaces earlier settings values).
    pub fn set_settings_env(&self, vars: BTreeMap<String, String>) {
        let mut layers = self.env.write().unwrap_or_else(|e| e.into_inner());
        layers.settings = vars;
        layers.merge();
    }

    /// Names of env variables that are secret although their names do not say so (the
    /// settings' `secret_env`; see [`crate::secrets::is_secret_env`]). Replaces earlier names.
    pub fn set_secret_env(&self, names: std::collections::BTreeSet<String>) {
        let mut layers = self.env.write().unwrap_or_else(|e| e.into_inner());
        layers.secret_names = names;
        layers.merge();
    }

    /// The masker of the env and the connections in force: what run records hide (see
    /// [`crate::secrets`]). Takes up the connections' secrets first
    /// ([`Engine::refresh_connection_secrets`]), so a connection added by any means (the API,
    /// the CLI writing the same store) is masked from the next run on.
    pub fn masker(&self) -> Arc<Masker> {
        self.refresh_connection_secrets();
        self.env
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .masker
            .clone()
    }

    /// Read every secret of the connection store ([`crate::connections::Credential::secrets`])
    /// and the OAuth 2 tokens this process has read or refreshed
    /// ([`crate::connections::oauth::Tokens::known_secrets`]), and rebuild the masker when they
    /// changed; answers whether it did. A store that cannot
    /// be read (a wrong key, a damaged file) is logged and the secrets known so far stay
    /// masked. Called by [`Engine::masker`] and [`Engine::set_connections`]; a store's own
    /// reads are cheap (the file store keeps its list in memory).
    pub fn refresh_connection_secrets(&self) -> bool {
        let secrets = match self.connections().list() {
            Ok(list) => {
                let mut s: Vec<String> = list
                    .iter()
                    .flat_map(|c| c.credential.secrets())
                    .map(str::to_string)
                    .chain(self.oauth.known_secrets())
                    .collect();
                s.sort();
                s.dedup();
                s
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the connections to mask their secrets");
                return false;
            }
        };
        if self
            .env
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .connection_secrets
            == secrets
        {
            return false;
        }
        let mut layers = self.env.write().unwrap_or_else(|e| e.into_inner());
        layers.connection_secrets = secrets;
        layers.merge();
        true
    }

    /// `env` (this engine's, or a dry run's with placeholders) as the templates of a workflow
    /// declaring `declared` see it: secret variables (by name, the settings' `secret_env`, or
    /// declared) as handles, the undeclared ones unusable ([`crate::template::EnvView`]).
    pub fn env_view(
        &self,
        env: &BTreeMap<String, String>,
        declared: &[String],
    ) -> crate::template::EnvView {
        let flagged = self
            .env
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .secret_names
            .clone();
        let declared: std::collections::BTreeSet<String> = declared.iter().cloned().collect();
        crate::template::EnvView::new(
            env,
            |name| crate::secrets::is_secret_env(name, &flagged),
            &declared,
        )
    }

    /// The names in `env` that are secret (by name, or the settings' `secret_env`), sorted.
    pub fn secret_env_names(&self, env: &BTreeMap<String, String>) -> Vec<String> {
        let layers = self.env.read().unwrap_or_else(|e| e.into_inner());
        env.keys()
            .filter(|n| crate::secrets::is_secret_env(n, &layers.secret_names))
            .cloned()
            .collect()
    }

    /// Use `store` for the connections of connector steps (every clone sees it), and mask
    /// every secret it holds in run records from now on ([`Engine::masker`]).
    pub fn set_connections(&self, store: Arc<dyn crate::connections::ConnectionStore>) {
        *self.connections.write().unwrap_or_else(|e| e.into_inner()) = store;
        self.refresh_connection_secrets();
    }

    /// The connections connector steps act as (an empty in-memory store until
    /// [`Engine::set_connections`]).
    pub fn connections(&self) -> Arc<dyn crate::connections::ConnectionStore> {
        self.connections
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The variables templates see as `env`.
    pub fn env(&self) -> BTreeMap<String, String> {
        self.env
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .merged
            .clone()
    }

    /// The OAuth 2 tokens this engine's steps send and refresh (single-flight per connection:
    /// [`crate::connections::oauth::Tokens`]); "Test connection" asks it for a current token.
    pub fn oauth_tokens(&self) -> &Arc<crate::connections::oauth::Tokens> {
        &self.oauth
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }
    /// The step registry.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }
    /// The clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }
    /// Subscribe to run events.
    pub fn subscribe(&self) -> broadcast::Receiver<RunEvent> {
        self.events.subscribe()
    }

    /// The journal of run events (ids, the recent ones buffered): what the event stream
    /// resumes from ([`super::journal`]).
    pub fn journal(&self) -> &Arc<super::journal::EventJournal> {
        &self.journal
    }

    /// A new `queued` run record for `wf` (not stored).
    pub fn new_run(&self, wf: &Compiled, req: RunRequest) -> RunRecord {
        let now = self.clock.now_ms();
        let id = new_run_id(now);
        RunRecord {
            root_run_id: req.root_run_id.unwrap_or_else(|| id.clone()),
            id,
            workflow_id: wf.workflow.id.clone(),
            workflow_version: wf.workflow.version,
            definition_hash: wf.hash.clone(),
            trigger: req.trigger,
            idempotency_key: req.idempotency_key,
            mode: req.mode,
            replay_of: req.replay_of,
            replayed_by: Vec::new(),
            resume_of: req.resume_of,
            resume_from: req.resume_from,
            resumed_by: Vec::new(),
            input_edited: req.input_edited,
            parent_run: None,
            trace_parent: None,
            input: req.input,
            status: RunStatus::Queued,
            created_at: Timestamp(now),
            started_at: None,
            finished_at: None,
            duration_ms: None,
            error: None,
            warnings: Vec::new(),
            steps: Vec::new(),
            snapshot: wf.snapshot.clone(),
        }
    }

    /// Create and execute a run; the final record is stored and returned.
    pub async fn run(&self, wf: &Compiled, req: RunRequest) -> Result<RunRecord, StoreError> {
        let run = self.new_run(wf, req);
        self.execute(wf, run).await
    }

    /// Replay `original` (SPEC §4): a new run linked by `replay_of`, with the original input
    /// (or `edited_input`, recorded as `input_edited`), a fresh time budget, trigger `replay`
    /// and a lineage of its own (the workflow's claims stop it where the original's effects
    /// happened: that is the point); `wf` is the definition to run (the current one, or one
    /// compiled from `original.snapshot`). Answers the new queued run (not stored) and the
    /// original with the new run added to its `replayed_by`; store both, then execute.
    pub fn replay_run(
        &self,
        original: &RunRecord,
        wf: &Compiled,
        mode: Mode,
        edited_input: Option<Value>,
    ) -> (RunRecord, RunRecord) {
        let input_edited = edited_input.as_ref().is_some_and(|i| *i != original.input);
        let input = edited_input
            .map(crate::run::RunInput::from)
            .unwrap_or_else(|| original.input.clone());
        let mut req = RunRequest::new(input, Trigger::Replay, mode);
        req.replay_of = Some(original.id.clone());
        req.idempotency_key = original.idempotency_key.clone();
        req.input_edited = input_edited;
        let run = self.new_run(wf, req);
        let mut orig = original.clone();
        orig.replayed_by.push(run.id.clone());
        (run, orig)
    }

    /// Start a replay of `original` ([`Engine::replay_run`]): the original with its new
    /// `replayed_by` is stored, and the new run (not stored, not executed) answered. The one
    /// path of every replay: `app::runs::replay_run` (HTTP, IPC) and [`Engine::replay`] (the
    /// CLI, the check).
    pub async fn link_replay(
        &self,
        original: &RunRecord,
        wf: &Compiled,
        mode: Mode,
        edited_input: Option<Value>,
    ) -> Result<RunRecord, StoreError> {
        let (run, orig) = self.replay_run(original, wf, mode, edited_input);
        self.store.put_run(&orig).await?;
        Ok(run)
    }

    /// Replay `original` and execute it at once ([`Engine::link_replay`], then
    /// [`Engine::execute`]).
    pub async fn replay(
        &self,
        original: &RunRecord,
        wf: &Compiled,
        mode: Mode,
    ) -> Result<RunRecord, StoreError> {
        let run = self.link_replay(original, wf, mode, None).await?;
        self.execute(wf, run).await
    }

    /// Execute a (queued) run to its end, storing progress as it goes. Progress writes that
    /// fail are logged; the final write's failure is returned. A run with `resume_of` reuses
    /// the records of the run it resumes ([`resume::plan`]); `wf` must then be compiled from
    /// its snapshot.
    pub async fn execute(&self, wf: &Compiled, run: RunRecord) -> Result<RunRecord, StoreError> {
        self.walk_run(wf, run, true).await
    }

    /// The dry walk of `run` (its mode is set to `dry`), never stored and never announced:
    /// what the run would do, for a preview.
    pub async fn preview(&self, wf: &Compiled, mut run: RunRecord) -> RunRecord {
        run.mode = Mode::Dry;
        match self.walk_run(wf, run.clone(), false).await {
            Ok(r) => r,
            // Unreachable: an unstored walk writes nothing that could fail.
            Err(_) => run,
        }
    }

    async fn walk_run(
        &self,
        wf: &Compiled,
        mut run: RunRecord,
        persist: bool,
    ) -> Result<RunRecord, StoreError> {
        let started = self.clock.now_ms();
        run.status = RunStatus::Running;
        run.started_at = Some(Timestamp(started));
        // `running` is made durable just before the first step with side effects (see
        // `Walk::exec_step`), not here: a crash before it leaves the run `queued`, and
        // executing it again on restart repeats only pure steps. A workflow of pure steps is
        // then written once, at its end.
        if persist {
            self.emit(&run, "run_started", None, run.status.as_str());
        }
        let effects = match run.mode {
            Mode::Live => Effects::live(self.store.clone(), self.http.clone())
                .with_pacer(self.pacer.clone())
                .with_oauth(self.oauth.clone()),
            Mode::Dry => Effects::dry(self.store.clone()),
        }
        .with_children(self.child_starter(run.mode))
        .with_connections(self.connections());
        let mut env = self.env();
        if run.mode == Mode::Dry {
            // A dry run sends nothing: an unset variable gets a placeholder (and a warning)
            // instead of failing the template that names it.
            for name in crate::workflow::env::env_names(&wf.workflow) {
                if let std::collections::btree_map::Entry::Vacant(slot) = env.entry(name) {
                    let p = crate::workflow::env::dry_placeholder(slot.key());
                    run.warnings.push(format!(
                        "env.{} is not set: this dry run used `{p}`; a live run would fail \
                         on it",
                        slot.key()
                    ));
                    slot.insert(p);
                }
            }
        }
        // The version first: a token added meanwhile is taken up at the first step.
        let oauth_masked = self.oauth.secrets_version();
        let mask = (*self.masker()).clone();
        let run_meta = json!({
            "id": run.id,
            "workflow_id": run.workflow_id,
            "attempt": 1,
            "mode": run.mode.as_str(),
            "replay_of": run.replay_of,
            "resume_of": run.resume_of,
            "root_run_id": run.root(),
        });
        // A resume reuses the original's records before its resume point (recomputed here, so
        // a queued resume needs nothing but its own record).
        let (reuse, plan_error) = match &run.resume_of {
            None => (BTreeMap::new(), None),
            Some(orig) => match self.resume_plan(wf, orig, run.resume_from.as_deref()).await {
                Ok(reuse) => (reuse, None),
                Err(message) => (
                    BTreeMap::new(),
                    Some(ErrorInfo {
                        code: "resume_unavailable".into(),
                        message,
                        step: run.resume_from.clone().unwrap_or_default(),
                        attempts: 0,
                        http_status: None,
                    }),
                ),
            },
        };
        let scope = Scope::new(
            &run.input,
            &run_meta,
            self.env_view(&env, &wf.workflow.secrets),
        );
        let deadline_ms = started.saturating_add(
            (wf.workflow.settings.run_timeout_s.secs() as i64).saturating_mul(1000),
        );
        let t0 = Instant::now();
        let mut walk = Walk {
            engine: self,
            wf,
            effects,
            scope,
            deadline_ms,
            visited: vec![false; wf.workflow.steps.len()],
            fatal: None,
            rethrow: None,
            timed_out: false,
            deadline_failed: Vec::new(),
            running_durable: run.mode == Mode::Dry,
            reuse,
            persist,
            records: run
                .steps
                .iter()
                .enumerate()
                .map(|(i, r)| (r.step_id.clone(), i))
                .collect(),
            mask,
            oauth_masked,
            handler_config: None,
        };
        match plan_error {
            Some(e) => walk.fatal = Some(e),
            None => walk.walk(&mut run).await,
        }
        let (status, error) = match (walk.fatal.take(), walk.rethrow.take()) {
            (Some(e), _) | (None, Some(e)) => (
                if walk.timed_out || walk.deadline_failed.contains(&e.step) {
                    RunStatus::TimedOut
                } else {
                    RunStatus::Failed
                },
                Some(e),
            ),
            (None, None) => (RunStatus::Succeeded, None),
        };
        run.status = status;
        run.error = error;
        walk.take_up_oauth_tokens();
        walk.mask.run_outcome(&mut run);
        run.finished_at = Some(Timestamp(self.clock.now_ms()));
        run.duration_ms = Some(t0.elapsed().as_millis() as u64);
        let seconds = t0.elapsed().as_secs_f64();
        let counted = |run: &RunRecord| {
            crate::telemetry::run_finished(
                &run.workflow_id,
                run.status.as_str(),
                run.mode.as_str(),
                seconds,
            )
        };
        if !persist {
            counted(&run);
            return Ok(run);
        }
        if run.mode == Mode::Live {
            run = self.put_durable(run).await?;
        } else {
            self.store.put_run(&run).await?;
        }
        // Counted once stored: a scrape that sees it finished finds it so in the store.
        counted(&run);
        self.emit(&run, "run_finished", None, run.status.as_str());
        Ok(run)
    }

    /// The records a resume of run `original_id` reuses (see [`resume::plan`]); an error
    /// message when the original is gone or the plan no longer holds.
    async fn resume_plan(
        &self,
        wf: &Compiled,
        original_id: &str,
        from_step: Option<&str>,
    ) -> Result<BTreeMap<String, StepRecord>, String> {
        let original = self
            .store
            .get_run(original_id)
            .await
            .map_err(|e| format!("the resumed run `{original_id}` could not be read: {e}"))?
            .ok_or_else(|| format!("the resumed run `{original_id}` no longer exists"))?;
        // The original was marked resumed when this run was created: plan as of its end.
        let mut original = original;
        if original.status == RunStatus::Running || original.status == RunStatus::Queued {
            original.status = RunStatus::Interrupted;
        }
        resume::plan(&original, wf, from_step)
            .map(|p| p.reuse)
            .map_err(|e| e.to_string())
    }

    fn emit(&self, run: &RunRecord, event: &'static str, step: Option<&str>, status: &str) {
        let ev = RunEvent {
            event,
            run_id: run.id.clone(),
            workflow_id: run.workflow_id.clone(),
            step_id: step.map(String::from),
            status: status.to_string(),
            mode: run.mode,
            at: Timestamp(self.clock.now_ms()),
        };
        if self.events.receiver_count() > 0 {
            let _ = self.events.send(ev.clone());
        }
        self.journal.publish(ev);
    }

    /// Store a live run's progress after a step with side effects
    /// ([`crate::steps::Descriptor::side_effects`]), so a crash leaves a record of which side
    /// effects happened. Dry runs act on nothing and are answered synchronously: they are
    /// stored once, at the end.
    async fn save_progress(&self, run: &RunRecord) {
        if run.mode == Mode::Dry {
            return;
        }
        if let Err(e) = self.store.put_run(run).await {
            tracing::error!(run_id = %run.id, error = %e, "could not store run progress");
        }
    }
}

/// The layers of `env`: process variables (`FLUXO_ENV_*`), then the embedder's
/// ([`Engine::set_env`]), then the app settings' ([`Engine::set_settings_env`]); later wins.
struct EnvLayers {
    process: BTreeMap<String, String>,
    embedder: BTreeMap<String, String>,
    settings: BTreeMap<String, String>,
    merged: BTreeMap<String, String>,
    /// Secret by the settings' word ([`Engine::set_secret_env`]).
    secret_names: std::collections::BTreeSet<String>,
    /// The secret values of the connections ([`Engine::refresh_connection_secrets`]), sorted.
    connection_secrets: Vec<String>,
    /// Masks the secret values of `merged` and `connection_secrets`.
    masker: Arc<Masker>,
}

impl EnvLayers {
    fn new() -> Self {
        let process = env_from_process();
        let mut layers = EnvLayers {
            merged: BTreeMap::new(),
            process,
            embedder: BTreeMap::new(),
            settings: BTreeMap::new(),
            secret_names: Default::default(),
            connection_secrets: Vec::new(),
            masker: Default::default(),
        };
        layers.merge();
        layers
    }
    fn merge(&mut self) {
        let mut m = self.process.clone();
        m.extend(self.embedder.clone());
        m.extend(self.settings.clone());
        let mut masker = Masker::new(&m, &self.secret_names);
        for secret in &self.connection_secrets {
            masker.add(secret);
        }
        self.masker = Arc::new(masker);
        self.merged = m;
    }
}

/// `FLUXO_ENV_NAME=value` process variables as `NAME -> value`; nothing else of the process
/// environment is visible to templates.
pub fn env_from_process() -> BTreeMap<String, String> {
    std::env::vars()
        .filter_map(|(k, v)| {
            k.strip_prefix(ENV_PREFIX)
                .filter(|n| !n.is_empty())
                .map(|n| (n.to_string(), v))
        })
        .collect()
}

/// A failure travelling down an error edge.
#[derive(Debug, Clone)]
struct Failure {
    step: usize,
    info: ErrorInfo,
}

struct Frame {
    step: usize,
    error: Option<Arc<Failure>>,
}

struct Walk<'a> {
    engine: &'a Engine,
    wf: &'a Compiled,
    effects: Effects,
    scope: Scope,
    deadline_ms: i64,
    visited: Vec<bool>,
    /// The run failed here (no error edge): stop.
    fatal: Option<ErrorInfo>,
    /// An error handler rethrew (or a retry_once failed): fail after the walk.
    rethrow: Option<ErrorInfo>,
    /// The walk stopped because a step could not start before the deadline.
    timed_out: bool,
    /// Steps whose latest failure was the deadline (a wait or attempt cut by it). The run ends
    /// `timed_out` when the error that ends it is one of these, not when a deadline failure
    /// was recovered (fallback, log) and a later step failed for another reason.
    deadline_failed: Vec<String>,
    /// The run's `running` state is durable (always true for dry runs, which act on nothing).
    running_durable: bool,
    /// A resume's reused records, by step id: taken instead of executing the step.
    reuse: BTreeMap<String, StepRecord>,
    /// Store progress and announce events (false for a preview).
    persist: bool,
    /// Step id → index of its record in `run.steps` (records are only pushed, never removed,
    /// and only by the walk), so finding a step's record is O(1), not a scan per step.
    records: HashMap<String, usize>,
    /// Masks each step record as it is made (secrets are never stored or shown); learns the
    /// secrets the run reveals.
    mask: Masker,
    /// The version of the engine's OAuth 2 tokens `mask` knows
    /// ([`crate::connections::oauth::Tokens::secrets_version`]).
    oauth_masked: u64,
    /// The last error handler's resolved config before masking (its mode and fallback).
    handler_config: Option<Value>,
}

impl Walk<'_> {
    /// Mask the OAuth 2 tokens refreshed (here or by another run) since `mask` was made.
    fn take_up_oauth_tokens(&mut self) {
        let v = self.engine.oauth.secrets_version();
        if v != self.oauth_masked {
            for t in self.engine.oauth.known_secrets() {
                self.mask.add(&t);
            }
            self.oauth_masked = v;
        }
    }

    /// The record of step `id` in `run`, if it has one.
    fn record_mut<'r>(&self, run: &'r mut RunRecord, id: &str) -> Option<&'r mut StepRecord> {
        let i = *self.records.get(id)?;
        run.steps.get_mut(i).filter(|r| r.step_id == id)
    }

    /// Append a step's record to `run`.
    fn push_record(&mut self, run: &mut RunRecord, rec: StepRecord) {
        self.records.insert(rec.step_id.clone(), run.steps.len());
        run.steps.push(rec);
    }

    async fn walk(&mut self, run: &mut RunRecord) {
        let mut stack = vec![Frame {
            step: self.wf.trigger_index(),
            error: None,
        }];
        while let Some(frame) = stack.pop() {
            if self.fatal.is_some() {
                break;
            }
            if std::mem::replace(&mut self.visited[frame.step], true) {
                continue;
            }
            if frame.error.is_none() {
                let id = &self.wf.workflow.steps[frame.step].id;
                if let Some(rec) = self.reuse.remove(id) {
                    if self.confirm_reuse(run, frame.step, &rec).await {
                        self.reuse_step(run, frame.step, rec, &mut stack);
                        continue;
                    }
                    // It executes again, and so does everything after it.
                    for (i, below) in self.wf.downstream(frame.step).into_iter().enumerate() {
                        if below {
                            self.reuse.remove(&self.wf.workflow.steps[i].id);
                        }
                    }
                }
            }
            if frame.error.is_none() && self.engine.clock.now_ms() >= self.deadline_ms {
                self.timed_out = true;
                let id = &self.wf.workflow.steps[frame.step].id;
                self.fatal = Some(last_error(run).unwrap_or(ErrorInfo {
                    code: "deadline_exceeded".into(),
                    message: format!("the run deadline passed before step `{id}` could start"),
                    step: id.clone(),
                    attempts: 0,
                    http_status: None,
                }));
                break;
            }
            match &frame.error {
                Some(f) => self.scope.set_error(&error_value(&f.info)),
                None => self.scope.clear_error(),
            }
            let is_handler = self.wf.workflow.steps[frame.step].kind == "error_handler";
            match (is_handler, frame.error.clone()) {
                (true, Some(failure)) => {
                    self.handle_error(run, frame.step, failure, &mut stack)
                        .await
                }
                _ => {
                    let result = self.exec_step(run, frame.step, true).await;
                    self.follow(run, frame.step, result, frame.error, &mut stack);
                }
            }
        }
    }

    /// Ask the step's kind whether reusing `rec` still holds
    /// ([`crate::steps::StepKind::confirm_reuse`]);
    /// on an error the step executes again (and meets the error itself).
    async fn confirm_reuse(&self, run: &RunRecord, step: usize, rec: &StepRecord) -> bool {
        let Some(output) = &rec.output else {
            return true;
        };
        // A recorded output with a masked secret (a token a login step answered) lost the
        // value later steps need: the step executes again.
        if crate::secrets::contains_mask(output) {
            return false;
        }
        let def = &self.wf.workflow.steps[step];
        let ctx = self.scope.context();
        let cx = StepContext::new(
            &def.id,
            &run.id,
            &run.workflow_id,
            run.mode,
            &run.input,
            &self.effects,
            self.engine.clock.as_ref(),
            self.deadline_ms,
            false,
            &self.wf.templates,
            &ctx,
        )
        .with_root_run_id(run.root());
        match self
            .wf
            .kind(step)
            .confirm_reuse(&cx, &rec.resolved_config, output)
            .await
        {
            Ok(holds) => holds,
            Err(e) => {
                tracing::warn!(run_id = %run.id, step = %def.id, error = %e.message,
                    "could not confirm a reused step; executing it again");
                false
            }
        }
    }

    /// Take a resumed run's recorded step instead of executing it: its output goes into scope
    /// and the walk leaves by the ports it left by then.
    fn reuse_step(
        &mut self,
        run: &mut RunRecord,
        step: usize,
        rec: StepRecord,
        stack: &mut Vec<Frame>,
    ) {
        if let Some(o) = &rec.output {
            if step == self.wf.trigger_index() {
                self.scope.set_output_to_input(&rec.step_id);
            } else {
                self.scope.set_output(&rec.step_id, o);
            }
        }
        let mut next = Vec::new();
        for port in &rec.ports {
            next.extend(self.wf.targets(step, port).iter().copied());
        }
        push_all(stack, &next, None);
        if self.persist {
            self.engine
                .emit(run, "step_finished", Some(&rec.step_id), "succeeded");
        }
        self.push_record(run, rec);
    }

    /// Push the successors of a finished step, or route its failure.
    fn follow(
        &mut self,
        _run: &mut RunRecord,
        step: usize,
        result: Result<StepOutput, ErrorInfo>,
        carried: Option<Arc<Failure>>,
        stack: &mut Vec<Frame>,
    ) {
        match result {
            Ok(out) => {
                let mut next = Vec::new();
                for port in &out.ports {
                    next.extend(self.wf.targets(step, port).iter().copied());
                }
                push_all(stack, &next, carried);
            }
            Err(info) => {
                let targets = self.wf.targets(step, PORT_ERROR).to_vec();
                if targets.is_empty() {
                    self.fatal = Some(info);
                } else {
                    let failure = Arc::new(Failure { step, info });
                    push_all(stack, &targets, Some(failure));
                }
            }
        }
    }

    async fn handle_error(
        &mut self,
        run: &mut RunRecord,
        handler: usize,
        failure: Arc<Failure>,
        stack: &mut Vec<Frame>,
    ) {
        if let Err(info) = self.exec_step(run, handler, true).await {
            // The handler itself failed (e.g. a bad template): the run fails with it.
            self.fatal = Some(info);
            return;
        }
        let resolved = self.handler_config.take().unwrap_or(Value::Null);
        let config: error_handler::Config = match parse_rendered(resolved) {
            Ok(c) => c,
            Err(e) => {
                self.fatal = Some(self.info_of(handler, &e));
                return;
            }
        };
        let handler_out = self.wf.targets(handler, PORT_OUT).to_vec();
        let failed = failure.step;
        match config.mode {
            HandlerMode::Log => {
                run.warnings.push(format!(
                    "step `{}` failed ({}: {}); logged by `{}`",
                    failure.info.step,
                    failure.info.code,
                    failure.info.message,
                    self.wf.workflow.steps[handler].id
                ));
                push_all(stack, &handler_out, Some(failure));
            }
            HandlerMode::Rethrow => {
                self.rethrow.get_or_insert_with(|| failure.info.clone());
                push_all(stack, &handler_out, Some(failure));
            }
            HandlerMode::Fallback => {
                let value = config.fallback_value.unwrap_or(Value::Null);
                let failed_id = self.wf.workflow.steps[failed].id.clone();
                if let Some(rec) = self.record_mut(run, &failed_id) {
                    rec.status = StepStatus::Fallback;
                    let mut recorded = value.clone();
                    self.mask.value(&mut recorded);
                    rec.output = Some(recorded);
                    rec.ports = vec![PORT_OUT.to_string()];
                }
                self.scope.set_output(&failed_id, &value);
                self.scope.clear_error();
                let next = self.wf.targets(failed, PORT_OUT).to_vec();
                push_all(stack, &next, None);
            }
            HandlerMode::RetryOnce => {
                self.scope.clear_error();
                match self.exec_step(run, failed, false).await {
                    Ok(out) => {
                        let mut next = Vec::new();
                        for port in &out.ports {
                            next.extend(self.wf.targets(failed, port).iter().copied());
                        }
                        push_all(stack, &next, None);
                    }
                    Err(info) => {
                        self.rethrow.get_or_insert_with(|| info.clone());
                        let again = Arc::new(Failure { step: failed, info });
                        self.scope.set_error(&error_value(&again.info));
                        push_all(stack, &handler_out, Some(again));
                    }
                }
            }
        }
    }

    fn info_of(&self, step: usize, e: &StepError) -> ErrorInfo {
        ErrorInfo {
            code: e.code.to_string(),
            message: e.message.clone(),
            step: self.wf.workflow.steps[step].id.clone(),
            attempts: e.attempts.max(1),
            http_status: e.http_status,
        }
    }

    /// Render a step's config (every field but `skip`; the outbound URL fields `urls` with run
    /// data encoded): the resolved fields so far and the
    /// error that stopped rendering, if any. Plain-path templates render here; a config with
    /// templates that may loop or compute ([`crate::workflow::template::Templates::is_costly`])
    /// renders on the blocking pool, so a runaway template never stalls the async threads
    /// (each render is bounded by its fuel), and inside the run deadline: past it the step
    /// fails with `deadline_exceeded` (the run ends `timed_out`) and the render stops before
    /// its next template. An error-branch step that starts after the deadline (compensation)
    /// gets [`RENDER_GRACE_MS`].
    async fn render_config(
        &self,
        def: &crate::workflow::model::StepDef,
        fields: Fields<'_>,
        ctx: &minijinja::Value,
    ) -> (serde_json::Map<String, Value>, Option<StepError>) {
        let Fields { skip, urls, secret } = fields;
        let templates = &self.wf.templates;
        let costly = def.config.as_object().is_some_and(|o| {
            o.iter()
                .any(|(f, v)| !skip.contains(&f.as_str()) && templates.is_costly(v))
        });
        if !costly {
            let fields = Fields { skip, urls, secret };
            return render_fields(templates, &def.id, &def.config, fields, ctx, None);
        }
        let cancel = Arc::new(AtomicBool::new(false));
        let task = {
            let (templates, config, id) = (templates.clone(), def.config.clone(), def.id.clone());
            let (ctx, cancel, urls) = (ctx.clone(), cancel.clone(), urls.to_vec());
            tokio::task::spawn_blocking(move || {
                let fields = Fields {
                    skip,
                    urls: &urls,
                    secret,
                };
                render_fields(&templates, &id, &config, fields, &ctx, Some(&cancel))
            })
        };
        let remaining = self.deadline_ms - self.engine.clock.now_ms();
        let budget_ms = if remaining > 0 {
            remaining as u64
        } else {
            RENDER_GRACE_MS
        };
        match tokio::time::timeout(std::time::Duration::from_millis(budget_ms), task).await {
            Ok(Ok(rendered)) => rendered,
            Ok(Err(e)) => (
                serde_json::Map::new(),
                Some(StepError::new(
                    "template_error",
                    format!("step `{}`: rendering its config failed: {e}", def.id),
                )),
            ),
            Err(_) => {
                cancel.store(true, Ordering::Relaxed);
                let mut e = StepError::new(
                    "deadline_exceeded",
                    format!(
                        "step `{}`: rendering its config was still running at the run deadline \
                         ({budget_ms} ms after it started)",
                        def.id
                    ),
                );
                e.deadline = true;
                (serde_json::Map::new(), Some(e))
            }
        }
    }

    /// Render, run and record one step. A re-run (`retry_once`) appends to its record.
    async fn exec_step(
        &mut self,
        run: &mut RunRecord,
        step: usize,
        retries_enabled: bool,
    ) -> Result<StepOutput, ErrorInfo> {
        let def = &self.wf.workflow.steps[step];
        let kind = self.wf.kind(step).clone();
        // In flight from before its config renders until it returns: a step that kills the
        // process is found in the log at the next start (`crate::store::flight`).
        let engine = self.engine;
        let in_flight = match (self.persist, engine.flight.get()) {
            (true, Some(log)) => log.step(&run.id, run.root(), &def.id),
            _ => None,
        };
        let clock = self.engine.clock.as_ref();
        let started = clock.now_ms();
        let t0 = Instant::now();
        let ctx = self.scope.context();

        // Render every field but the kind's expression fields.
        let (resolved, render_error) = self
            .render_config(
                def,
                Fields {
                    skip: kind.unrendered_fields(),
                    urls: self.wf.url_fields(step),
                    secret: kind.secret_fields(),
                },
                &ctx,
            )
            .await;
        let resolved = Value::Object(resolved);
        let side_effects = kind.descriptor().side_effects;
        let mut pre_error = render_error;
        if pre_error.is_none() && side_effects {
            // A step that is not safe to repeat (a POST without an Idempotency-Key) is
            // recorded `running` durably before it starts: crash recovery then knows it was
            // in flight (and asks a person), and that a later one never started.
            let marker = run.mode == Mode::Live && !kind.repeat_safety(&resolved).is_safe();
            if marker {
                match self.record_mut(run, &def.id) {
                    Some(rec) => rec.status = StepStatus::Running,
                    None => {
                        let mut masked = resolved.clone();
                        self.mask.value(&mut masked);
                        let rec = in_flight_record(def, &kind, started, &masked);
                        self.push_record(run, rec);
                    }
                }
            }
            // Before the first side effect: a crash from here on must leave the run `running`
            // (then recovered on restart), never `queued` (executed again from scratch).
            if marker || !self.running_durable {
                match self.engine.put_durable(run.clone()).await {
                    Ok(_) => self.running_durable = true,
                    Err(e) => {
                        pre_error = Some(StepError::new(
                            "store",
                            format!(
                                "the run's state could not be made durable before step `{}`: {e}",
                                def.id
                            ),
                        ))
                    }
                }
            }
        }
        let cx = StepContext::new(
            &def.id,
            &run.id,
            &run.workflow_id,
            run.mode,
            &run.input,
            &self.effects,
            clock,
            self.deadline_ms,
            retries_enabled,
            &self.wf.templates,
            &ctx,
        )
        .with_root_run_id(run.root())
        .with_raw_config(&def.config);
        let result = match pre_error {
            Some(e) => Err(e),
            None => {
                // One span per execution of the step (its attempt; an HTTP step's retries
                // are `attempt` spans inside it): `crate::traces`.
                let span = tracing::info_span!(
                    "step",
                    otel.name = %format!("step {}", def.id),
                    run_id = %run.id,
                    step_id = %def.id,
                    kind = %def.kind,
                    otel.status_code = tracing::field::Empty,
                );
                let result = CURRENT_STEP
                    .scope(
                        (run.workflow_id.clone(), def.id.clone()),
                        tracing::Instrument::instrument(
                            kind.run(&cx, resolved.clone()),
                            span.clone(),
                        ),
                    )
                    .await;
                if result.is_err() {
                    span.record("otel.status_code", "ERROR");
                }
                result
            }
        };
        drop(in_flight);
        let mut attempts = cx.take_attempts();
        drop(cx);
        let duration_ms = t0.elapsed().as_millis() as u64;
        if attempts.is_empty() {
            attempts.push(Attempt {
                started_at: Timestamp(started),
                duration_ms,
                delay_before_ms: 0,
                http_status: result.as_ref().err().and_then(|e| e.http_status),
                error: result.as_ref().err().map(|e| e.message.clone()),
            });
        }
        crate::telemetry::step_finished(
            &def.kind,
            result.is_ok(),
            attempts.len(),
            duration_ms as f64 / 1000.0,
        );
        let finished = Timestamp(clock.now_ms());
        let (status, output, error, ports) = match &result {
            Ok(o) => (
                StepStatus::Succeeded,
                Some(o.output.clone()),
                None,
                o.ports.clone(),
            ),
            Err(e) => {
                self.deadline_failed.retain(|id| *id != def.id);
                if e.deadline {
                    self.deadline_failed.push(def.id.clone());
                }
                let mut info = self.info_of(step, e);
                // A `retry_once` re-run appends to the step's record: count every attempt.
                let earlier = self
                    .record_mut(run, &def.id)
                    .map(|r| r.attempts.len())
                    .unwrap_or(0);
                info.attempts = info
                    .attempts
                    .max(attempts.len() as u32)
                    .max((earlier + attempts.len()) as u32);
                (
                    StepStatus::Failed,
                    None,
                    Some(info),
                    vec![PORT_ERROR.to_string()],
                )
            }
        };
        if let Some(o) = &output {
            if step == self.wf.trigger_index() {
                self.scope.set_output_to_input(&def.id);
            } else {
                self.scope.set_output(&def.id, o);
            }
        }
        let error_out = error.clone();
        if kind.descriptor().kind == "error_handler" {
            self.handler_config = Some(resolved.clone());
        }
        match self.record_mut(run, &def.id) {
            Some(rec) => {
                rec.status = status;
                rec.finished_at = Some(finished);
                rec.duration_ms += duration_ms;
                rec.resolved_config = resolved;
                rec.output = output;
                rec.error = error;
                rec.attempts.extend(attempts);
                rec.ports = ports;
            }
            None => self.push_record(
                run,
                StepRecord {
                    step_id: def.id.clone(),
                    kind: def.kind.clone(),
                    status,
                    started_at: Timestamp(started),
                    finished_at: Some(finished),
                    duration_ms,
                    resolved_config: resolved,
                    output,
                    error,
                    attempts,
                    ports,
                    reused_from: None,
                },
            ),
        }
        self.take_up_oauth_tokens();
        if let Some(rec) = self.record_mut(run, &def.id) {
            let is_trigger = step == self.wf.trigger_index();
            self.mask.step_record(rec, is_trigger);
        }
        let error_out = error_out.map(|mut e| {
            self.mask.error(&mut e);
            e
        });
        let status_str = match status {
            StepStatus::Succeeded => "succeeded",
            _ => "failed",
        };
        if side_effects && self.persist {
            self.engine.save_progress(run).await;
        }
        if self.persist {
            self.engine
                .emit(run, "step_finished", Some(&def.id), status_str);
        }
        match result {
            Ok(o) => Ok(o),
            Err(_) => Err(error_out.expect("error recorded")),
        }
    }
}

/// How the fields of a step's config render.
#[derive(Clone, Copy)]
struct Fields<'a> {
    /// Copied as written ([`crate::steps::StepKind::unrendered_fields`]).
    skip: &'static [&'static str],
    /// Outbound URLs: run data encoded, a secret allowed in the credentials or at the start.
    urls: &'a [&'static str],
    /// Where a secret renders whole ([`crate::steps::StepKind::secret_fields`]).
    secret: &'static [&'static str],
}

/// Render every field of `config` but `skip` (copied as written), the outbound URL fields
/// `urls` with run data encoded ([`crate::workflow::template::Templates::render_url`]), then
/// put each secret in where its field allows it ([`crate::template::reveal`]); stops at the
/// first error, answering the fields rendered so far.
fn render_fields(
    templates: &crate::workflow::template::Templates,
    step_id: &str,
    config: &Value,
    fields: Fields<'_>,
    ctx: &minijinja::Value,
    cancel: Option<&AtomicBool>,
) -> (serde_json::Map<String, Value>, Option<StepError>) {
    use crate::template::{reveal, Sink};
    let Fields { skip, urls, secret } = fields;
    let mut resolved = serde_json::Map::new();
    if let Some(obj) = config.as_object() {
        for (field, value) in obj {
            if skip.contains(&field.as_str()) {
                resolved.insert(field.clone(), value.clone());
                continue;
            }
            let is_url = urls.contains(&field.as_str());
            let rendered = match value {
                Value::String(s) if is_url => templates.render_url(s, ctx, field),
                _ => templates.render_value_until(value, ctx, field, cancel),
            };
            let sink = if is_url {
                Sink::Url
            } else if secret.contains(&field.as_str()) {
                Sink::Whole
            } else {
                Sink::Nowhere
            };
            let rendered = rendered.and_then(|v| reveal(ctx, v, field, sink));
            match rendered {
                Ok(v) => {
                    resolved.insert(field.clone(), v);
                }
                Err(e) => {
                    let e = StepError::new("template_error", format!("step `{step_id}`: {e}"));
                    return (resolved, Some(e));
                }
            }
        }
    }
    (resolved, None)
}

/// The record of `def` in flight (`running`), before it starts.
fn in_flight_record(
    def: &crate::workflow::model::StepDef,
    kind: &Arc<dyn crate::steps::StepKind>,
    started: i64,
    resolved: &Value,
) -> StepRecord {
    StepRecord {
        step_id: def.id.clone(),
        kind: kind.descriptor().kind.to_string(),
        status: StepStatus::Running,
        started_at: Timestamp(started),
        finished_at: None,
        duration_ms: 0,
        resolved_config: resolved.clone(),
        output: None,
        error: None,
        attempts: Vec::new(),
        ports: Vec::new(),
        reused_from: None,
    }
}

fn push_all(stack: &mut Vec<Frame>, targets: &[usize], error: Option<Arc<Failure>>) {
    // Reverse so the first edge is walked first.
    for &t in targets.iter().rev() {
        stack.push(Frame {
            step: t,
            error: error.clone(),
        });
    }
}

fn error_value(info: &ErrorInfo) -> Value {
    json!({
        "message": info.message,
        "code": info.code,
        "step": info.step,
        "attempts": info.attempts,
        "http_status": info.http_status,
    })
}

fn last_error(run: &RunRecord) -> Option<ErrorInfo> {
    run.steps.iter().rev().find_map(|s| s.error.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connections::{Connection, ConnectionStore, Credential, MemConnections};

    fn bearer(id: &str, token: &str) -> Connection {
        Connection {
            id: id.into(),
            app: "crm".into(),
            name: String::new(),
            credential: Credential::Bearer {
                token: token.into(),
            },
            base_url: None,
            values: Default::default(),
        }
    }

    #[test]
    fn connection_secrets_join_the_masker() {
        let engine = Engine::new(
            Arc::new(crate::store::InMemoryStore::new()),
            Arc::new(crate::clock::SystemClock),
        );
        let store = Arc::new(MemConnections::default());
        store.put(bearer("a", "conn-secret-0123456789")).unwrap();
        engine.set_connections(store.clone());
        assert_eq!(
            engine.masker().text("x conn-secret-0123456789 y"),
            "x ••••6789 y"
        );
        // Changed behind the engine's back (another writer): the next masker has it.
        store.put(bearer("b", "second-secret-abcdef")).unwrap();
        assert_eq!(engine.masker().text("second-secret-abcdef"), "••••cdef");
        assert!(
            !engine.refresh_connection_secrets(),
            "nothing changed since"
        );
        // Env secrets stay when the connections change.
        engine.set_env([("API_KEY".to_string(), "env-secret-999999".to_string())].into());
        store.remove("a").unwrap();
        let m = engine.masker();
        assert_eq!(m.text("env-secret-999999"), "••••9999");
        assert_eq!(m.text("conn-secret-0123456789"), "conn-secret-0123456789");
        assert_eq!(m.text("second-secret-abcdef"), "••••cdef");
    }
}
