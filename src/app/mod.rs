//! The application layer: the state every adapter shares and the use cases they call.
//!
//! ```text
//! adapters   server/ (HTTP: axum, problem+json)   src-tauri/ (IPC: {code, message})   cli.rs
//!               \                    |                          /
//! app        this module: AppState and one function per use case, errors as AppError
//! engine     runtime/, steps/, workflow/
//! store      store/ (traits; sled, in-memory)
//! ```
//!
//! * [`AppState`]: engine, workflow folder, settings and API token, the claim caches, the run
//!   queue; [`AppState::open`] builds it (settings loaded, engine configured, `fan_out`
//!   wired to the queue).
//! * [`Background`]: what runs without any adapter: crash recovery, the worker pool,
//!   retention and sweeping ([`worker`]), schedules ([`scheduler`]).
//! * [`door_first`]: while a burst of deliveries is at the door, executions yield to it.
//! * [`ingest`]: webhook deliveries: the claim and its queued run in one group-committed
//!   transaction, the recent claims cache, duplicates confirmed after a flush,
//!   the undo of a claim that could not be made durable.
//! * [`runs`]: start, queue, list, stats, replay and resume runs.
//! * [`events`]: the live run events, resumable after the last id a client saw.
//! * [`export`]: the runs matching a filter as CSV (safe in spreadsheets) or JSON Lines,
//!   streamed page by page.
//! * [`schedules`]: next fire times of a cron expression (the editor's preview) and of each
//!   scheduled workflow.
//! * [`workflows`]: the workflow files (list, get, save, delete, validate; the one mapping of
//!   the folder's errors), dry runs from the editor, the re-run safety check.
//! * [`drafts`]: the editor's drafts (`<data-dir>/drafts/<id>.json`) and publishing one as
//!   the live workflow file.
//! * [`memory`]: the Memory browser (namespaces, a page of keys, one key, delete by hand).
//! * [`catalog`]: step kinds, workflow templates, sample payloads.
//! * [`settings`]: the settings view (secrets masked) and save, the API token and its file.
//! * [`connections`]: the connections connector steps act as (list, get, put, remove; secrets
//!   masked in every answer, a mask sent back keeps the stored secret).
//! * [`health`]: readiness (the store answers).
//! * [`hosts`]: the names this server answers to.
//! * [`error`]: [`AppError`], which the HTTP adapter maps to problem+json and IPC to
//!   `{code, message}`.
//!
//! Nothing here knows HTTP: an adapter reads its request, calls one function, and renders
//! the answer or the [`AppError`].

// Use cases return `AppResult<T>`; `AppError` only travels on the error path.
#![allow(clippy::result_large_err)]

pub mod catalog;
pub mod connections;
pub mod door_first;
pub mod drafts;
pub mod duplicates;
pub mod error;
pub mod events;
pub mod export;
pub mod health;
pub mod hosts;
pub mod ingest;
pub mod memory;
pub mod quarantine;
pub mod runs;
pub mod scheduler;
pub mod schedules;
pub mod settings;
pub mod templates;
pub mod worker;
pub mod workflows;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::watch;

pub use error::{AppError, AppResult, ErrorKind};

use crate::clock::Clock;
use crate::runtime::Engine;
use crate::store::{Retention, Store};
use crate::workflow::dir::WorkflowDir;

/// Who may read `GET /metrics` (`--metrics-auth`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum MetricsAuth {
    /// Open when the server listens on a loopback address (a scraper on the same host);
    /// the API token otherwise. Not behind a reverse proxy on the same host: every request
    /// it forwards comes from loopback.
    Loopback,
    /// Always the API token (`Authorization: Bearer …`): the default (issue 42).
    #[default]
    Token,
    /// Always open (a private network, or a proxy in front that authenticates).
    None,
}

/// Default [`ConnLimits::header_read_timeout`]: 10 s.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Default [`ConnLimits::body_read_timeout`]: 30 s.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Default [`ConnLimits::max_connections`]: 512.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;
/// Default [`ConnLimits::body_deadline`]: 60 s for a whole body (1 MiB in 60 s is 17 KiB/s).
pub const DEFAULT_BODY_DEADLINE: Duration = Duration::from_secs(60);
/// Default [`ConnLimits::body_min_rate`]: 1,024 bytes/s on average.
pub const DEFAULT_BODY_MIN_RATE: u64 = 1024;
/// Default [`ConnLimits::body_rate_grace`]: 5 s.
pub const DEFAULT_BODY_RATE_GRACE: Duration = Duration::from_secs(5);
/// Default [`ConnLimits::max_connections_per_ip`]: 256.
pub const DEFAULT_MAX_CONNECTIONS_PER_IP: usize = 256;
/// Default [`ConnLimits::max_slow_bodies_per_ip`]: 64.
pub const DEFAULT_MAX_SLOW_BODIES_PER_IP: usize = 64;
/// Default [`ConnLimits::reserved_connections`]: 64.
pub const DEFAULT_RESERVED_CONNECTIONS: usize = 64;

/// How long a client may take, and how many may be connected (the HTTP listener's limits,
/// `server::listen`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnLimits {
    /// Longest wait for a request's head (request line and headers), also between requests on
    /// a kept-alive connection; then the connection is closed. Default 10 s.
    pub header_read_timeout: Duration,
    /// Longest wait for the next chunk of a request body; then `408 request_timeout` and the
    /// connection is closed. Default 30 s.
    pub body_read_timeout: Duration,
    /// Most connections open at once; more wait in the accept backlog. Default 512 (at least
    /// 1 is used).
    pub max_connections: usize,
    /// Longest time a whole request body may take, from the end of its head; then `408
    /// request_timeout` and the connection is closed. Default 60 s.
    pub body_deadline: Duration,
    /// Least average rate of a body (bytes/s since the end of its head) once
    /// [`ConnLimits::body_rate_grace`] has passed; slower is `408 request_timeout`. Default
    /// 1,024; 0: no minimum.
    pub body_min_rate: u64,
    /// How long a body may take before [`ConnLimits::body_min_rate`] applies. Default 5 s.
    pub body_rate_grace: Duration,
    /// Most connections open at once from one client address while the server is crowded
    /// (the reserve in use): a new one past it sheds the address's oldest body in progress,
    /// or is refused (`503`). Default 256.
    pub max_connections_per_ip: usize,
    /// Most bodies in progress (slow bodies, see `server::intake`) from one client address;
    /// past it that address's oldest is shed (`503`). Default 64.
    pub max_slow_bodies_per_ip: usize,
    /// Connections slow bodies can never take: at most `max_connections -
    /// reserved_connections` bodies are in progress at once (past it the oldest is shed), so
    /// the API, health checks and fast webhooks always find a slot. Default 64 (at most half
    /// of `max_connections` is used).
    pub reserved_connections: usize,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            body_read_timeout: DEFAULT_BODY_READ_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            body_deadline: DEFAULT_BODY_DEADLINE,
            body_min_rate: DEFAULT_BODY_MIN_RATE,
            body_rate_grace: DEFAULT_BODY_RATE_GRACE,
            max_connections_per_ip: DEFAULT_MAX_CONNECTIONS_PER_IP,
            max_slow_bodies_per_ip: DEFAULT_MAX_SLOW_BODIES_PER_IP,
            reserved_connections: DEFAULT_RESERVED_CONNECTIONS,
        }
    }
}

/// Default body limit of webhook and API requests: 1 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;

/// How to run the server.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Body limit in bytes (default 1 MiB); larger bodies get 413.
    pub body_limit_bytes: usize,
    /// Runs executed at once (default 8).
    pub workers: usize,
    /// Deliveries in the door at once from which, while the CPU is contended, only one worker
    /// takes new runs ([`door_first`]; default [`door_first::DOOR_BUSY_AT`], 8; 0: executions
    /// never yield).
    pub door_busy_at: usize,
    /// The runtime the workers execute runs on (`None`, the default: the caller's). `fluxo
    /// serve` gives one whose threads run at a lower CPU priority ([`worker::run_runtime`]).
    pub run_on: Option<tokio::runtime::Handle>,
    /// Who may read `GET /metrics` ([`MetricsAuth`], default: the API token).
    pub metrics_auth: MetricsAuth,
    /// How long a run taken from a shared queue (PostgreSQL) stays leased to this process
    /// without a heartbeat (default 30 s): a dead process's runs are taken over after it
    /// ([`worker`]).
    pub lease: Duration,
    pub retention: Retention,
    /// Built browser UI to serve at `/` (e.g. `ui/dist`), if any.
    pub ui_dir: Option<PathBuf>,
    /// Data dir: where `settings.json`, the `token` file and the editor's `drafts/` live
    /// (`None`: settings and drafts are kept in memory only, e.g. in tests).
    pub data_dir: Option<PathBuf>,
    /// What start-up does with runs a dead process left `running` (`--recover`; default:
    /// resume those whose in-flight step is safe to repeat).
    pub recover: crate::runtime::RecoverPolicy,
    /// A run in flight at this many consecutive crashes of the process is quarantined at the
    /// next start instead of executed again (`--quarantine-after`; default
    /// [`quarantine::DEFAULT_QUARANTINE_AFTER`], 2; 0: never): [`quarantine`].
    pub quarantine_after: u32,
    /// Slow-client timeouts and the connection bound ([`ConnLimits`]).
    pub limits: ConnLimits,
    /// The token came from `--token`/`FLUXO_TOKEN`: on a shared database it is neither taken
    /// from nor written to the database ([`settings::SHARED_TOKEN`]).
    pub token_given: bool,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            body_limit_bytes: DEFAULT_BODY_LIMIT,
            workers: 8,
            door_busy_at: door_first::DOOR_BUSY_AT,
            run_on: None,
            lease: Duration::from_secs(30),
            metrics_auth: MetricsAuth::default(),
            retention: Retention::default(),
            ui_dir: None,
            data_dir: None,
            recover: crate::runtime::RecoverPolicy::default(),
            quarantine_after: quarantine::DEFAULT_QUARANTINE_AFTER,
            limits: ConnLimits::default(),
            token_given: false,
        }
    }
}

/// The application: engine, workflows, settings and token, the claim caches, the run queue.
/// Every adapter (HTTP handlers, IPC commands) holds one. Cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

struct Inner {
    /// The bound address (the listener's).
    addr: SocketAddr,
    engine: Engine,
    workflows: WorkflowDir,
    /// The editor's drafts (never run: webhooks, schedules and API runs use `workflows`).
    drafts: drafts::Drafts,
    token: RwLock<String>,
    commit: crate::store::GroupCommit,
    queue: worker::Queue,
    /// Deliveries in the door, which executions yield to ([`door_first`]).
    door: door_first::DoorFirst,
    options: ServerOptions,
    settings: RwLock<crate::settings::AppSettings>,
    /// Identifies this process as the owner of in-progress idempotency records.
    instance_id: String,
    /// Durable webhook claims seen lately (answers repeats without a store read).
    recent_claims: ingest::RecentClaims,
    /// Duplicates stopped, counted until their next write ([`duplicates`]).
    duplicates: duplicates::DuplicateLog,
    /// Webhook triggers' configs, parsed once per definition.
    trigger_configs: ingest::TriggerConfigs,
    /// The hosts this server answers to: its bound address and the settings' `allowed_hosts`.
    hosts: RwLock<hosts::HostRules>,
    /// On a shared database: the revisions of the settings and token documents in force here
    /// ([`settings::refresh`]).
    revisions: std::sync::Mutex<settings::Revisions>,
    /// Template previews rendering at once ([`templates::PREVIEW_CONCURRENCY`]).
    previews: Arc<tokio::sync::Semaphore>,
    /// OAuth connect flows waiting for their browser ([`connections::oauth_start`]).
    oauth_flows: crate::connections::authorize::Flows,
}

impl AppState {
    /// The slots of template previews rendering at once.
    pub(crate) fn preview_slots(&self) -> &Arc<tokio::sync::Semaphore> {
        &self.0.previews
    }
    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.0.engine
    }
    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        self.0.engine.store()
    }
    /// The OAuth connect flows waiting for their browser (in memory).
    pub fn oauth_flows(&self) -> &crate::connections::authorize::Flows {
        &self.0.oauth_flows
    }
    /// The clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        self.0.engine.clock()
    }
    /// The workflow folder.
    pub fn workflows(&self) -> &WorkflowDir {
        &self.0.workflows
    }
    /// The editor's drafts.
    pub fn drafts(&self) -> &drafts::Drafts {
        &self.0.drafts
    }
    /// The API token.
    pub fn token(&self) -> String {
        self.0
            .token
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
    /// Replace the API token (settings: regenerate).
    pub fn set_token(&self, t: String) {
        *self.0.token.write().unwrap_or_else(|e| e.into_inner()) = t;
    }
    /// Group commit.
    pub fn commit(&self) -> &crate::store::GroupCommit {
        &self.0.commit
    }
    /// The run queue.
    pub fn queue(&self) -> &worker::Queue {
        &self.0.queue
    }
    /// The deliveries in the door, which executions yield to ([`door_first`]).
    pub fn door(&self) -> &door_first::DoorFirst {
        &self.0.door
    }
    /// Server options.
    pub fn options(&self) -> &ServerOptions {
        &self.0.options
    }
    /// The app settings (env variables, retention, listener address).
    pub fn settings(&self) -> crate::settings::AppSettings {
        self.0
            .settings
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
    /// Replace the settings: saved (to the shared database when there is one, so every
    /// process applies them, [`settings::refresh`]; else to the data dir, if any) and applied
    /// (env variables to the engine; retention from the next maintenance pass). A secret env
    /// value sent back as the mask the API showed keeps the stored value
    /// ([`crate::settings::AppSettings::resolve_masked`]). Errors: invalid settings, or the
    /// file or database write failed (nothing applied).
    pub async fn set_settings(
        &self,
        s: crate::settings::AppSettings,
    ) -> Result<(), crate::settings::SettingsError> {
        let s = s.resolve_masked(&self.settings())?;
        s.validate()?;
        if let Some(shared) = self.store().shared_settings() {
            let doc = serde_json::to_value(&s)
                .map_err(|e| crate::settings::SettingsError::Shared(e.to_string()))?;
            let rev = shared
                .put_document(settings::SHARED_SETTINGS, &doc)
                .await
                .map_err(|e| crate::settings::SettingsError::Shared(e.to_string()))?;
            self.revisions().settings = rev;
        } else if let Some(dir) = &self.0.options.data_dir {
            s.save(dir)?;
        }
        self.apply_settings(s)
    }
    /// Put settings in force in this process: env variables and secrets to the engine, the
    /// outbound allowlist, the host rules, then the settings themselves.
    pub(crate) fn apply_settings(
        &self,
        s: crate::settings::AppSettings,
    ) -> Result<(), crate::settings::SettingsError> {
        self.0.engine.set_outbound_allow(&s.outbound_allow)?;
        self.0.engine.set_secret_env(s.secret_env.clone());
        self.0.engine.set_settings_env(s.env.clone());
        {
            let mut hosts = self.0.hosts.write().unwrap_or_else(|e| e.into_inner());
            *hosts = hosts::HostRules::new(self.0.addr, &s.allowed_hosts);
        }
        *self.0.settings.write().unwrap_or_else(|e| e.into_inner()) = s;
        Ok(())
    }
    pub(crate) fn revisions(&self) -> std::sync::MutexGuard<'_, settings::Revisions> {
        self.0.revisions.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// The address the server is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.0.addr
    }
    /// Run `f` over the names this server answers to ([`hosts::HostRules`]; the HTTP door
    /// checks each request's `Host` with them).
    pub fn with_host_rules<R>(&self, f: impl FnOnce(&hosts::HostRules) -> R) -> R {
        f(&self.0.hosts.read().unwrap_or_else(|e| e.into_inner()))
    }
    /// The retention policy in force: settings over the command-line defaults.
    pub fn retention(&self) -> Retention {
        self.settings().retention(self.0.options.retention)
    }
    /// This process's owner id for idempotency leases.
    pub fn instance_id(&self) -> &str {
        &self.0.instance_id
    }
    /// Durable webhook claims seen lately.
    pub fn recent_claims(&self) -> &ingest::RecentClaims {
        &self.0.recent_claims
    }
    /// Duplicates stopped, counted until their next write.
    pub fn duplicates(&self) -> &duplicates::DuplicateLog {
        &self.0.duplicates
    }
    /// Webhook triggers' configs, parsed once per definition.
    pub fn trigger_configs(&self) -> &ingest::TriggerConfigs {
        &self.0.trigger_configs
    }
}

impl AppState {
    /// Build the application over an engine and a workflow folder, for a process bound to
    /// `addr`: loads the settings and drafts from `options.data_dir` (owner-only; defaults when absent),
    /// applies them to the engine (env variables, secrets, outbound allowlist), starts the
    /// group commit, and wires `fan_out` to the run queue. Returns the queue's receiving end
    /// for [`Background::start`]. Errors: the data dir or its settings cannot be read.
    pub async fn open(
        addr: SocketAddr,
        engine: Engine,
        workflows: WorkflowDir,
        token: String,
        options: ServerOptions,
    ) -> std::io::Result<(AppState, worker::QueueReceiver)> {
        let store = engine.store().clone();
        let commit = crate::store::GroupCommit::start(store.clone());
        // Runs' `running` and final states go through the same group commit (crash recovery).
        let engine = engine.with_group_commit(commit.clone());
        let (queue, receiver) = worker::Queue::new(engine.store().shared_queue().is_some());
        let (settings, drafts) = match &options.data_dir {
            Some(dir) => {
                // Owner-only (0700, tightened with a log line): the store, settings and token.
                crate::secrets::secure_dir(dir)?;
                let settings = crate::settings::AppSettings::load(dir)
                    .map_err(|e| std::io::Error::other(e.to_string()))?;
                (settings, drafts::Drafts::load(dir)?)
            }
            None => (
                crate::settings::AppSettings::default(),
                drafts::Drafts::in_memory(),
            ),
        };
        let hosts = hosts::HostRules::new(addr, &[]);
        let state = AppState(Arc::new(Inner {
            addr,
            engine,
            workflows,
            drafts,
            token: RwLock::new(token),
            commit,
            queue,
            door: door_first::DoorFirst::new(options.door_busy_at),
            options: options.clone(),
            settings: RwLock::new(crate::settings::AppSettings::default()),
            instance_id: uuid::Uuid::new_v4().to_string(),
            recent_claims: ingest::RecentClaims::default(),
            duplicates: Default::default(),
            trigger_configs: ingest::TriggerConfigs::default(),
            hosts: RwLock::new(hosts),
            revisions: std::sync::Mutex::new(settings::Revisions::default()),
            previews: Arc::new(tokio::sync::Semaphore::new(templates::PREVIEW_CONCURRENCY)),
            oauth_flows: Default::default(),
        }));
        // On a shared database the settings and token in force are the database's (the first
        // process to start seeds them with its own).
        let settings = settings::join_shared(&state, settings)
            .await
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        state
            .apply_settings(settings)
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        // `fan_out` steps start runs of the folder's workflows through the worker queue. The hooks
        // hold the state weakly: the engine lives inside it.
        let weak = Arc::downgrade(&state.0);
        let dispatch_queue = state.queue().clone();
        state
            .engine()
            .set_child_hooks(crate::runtime::children::ChildHooks {
                workflow: Box::new(move |id| {
                    let inner = weak.upgrade()?;
                    inner.workflows.get(id).and_then(|e| e.compiled.clone())
                }),
                dispatch: Box::new(move |run_id| dispatch_queue.push(run_id)),
            });
        Ok((state, receiver))
    }
}

/// The work that runs without any adapter: the worker pool, retention and sweeping, schedules.
pub struct Background {
    state: AppState,
    store: Arc<dyn Store>,
    workers: Vec<tokio::task::JoinHandle<()>>,
    leases: Option<tokio::task::JoinHandle<()>>,
    maintenance: tokio::task::JoinHandle<()>,
    scheduler: tokio::task::JoinHandle<()>,
    /// Writes the duplicates stopped ([`duplicates::spawn_flusher`]).
    duplicates: tokio::task::JoinHandle<()>,
}

impl Background {
    /// Recover what a dead process left (`queued` → executed, `running` → resumed when safe,
    /// else `interrupted`), then start the workers, maintenance and the scheduler. They stop
    /// taking work when `shutdown` turns true. Errors: recovery could not read or write the
    /// store.
    pub async fn start(
        state: &AppState,
        receiver: worker::QueueReceiver,
        shutdown: watch::Receiver<bool>,
    ) -> std::io::Result<Background> {
        // On a shared queue another process's `running` runs are alive: only runs whose lease
        // expired are recovered (the lease keeper's first scan, right away).
        if state.store().shared_queue().is_none() {
            worker::recover(state)
                .await
                .map_err(|e| std::io::Error::other(e.to_string()))?;
        }
        Ok(Background {
            leases: worker::spawn_lease_keeper(state.clone(), shutdown.clone()),
            state: state.clone(),
            store: state.store().clone(),
            workers: worker::spawn_workers(
                state.clone(),
                receiver,
                state.options().workers.max(1),
                shutdown.clone(),
            ),
            maintenance: worker::spawn_maintenance(state.clone(), shutdown.clone()),
            duplicates: duplicates::spawn_flusher(state.clone(), shutdown.clone()),
            scheduler: scheduler::spawn(state.clone(), shutdown),
        })
    }

    /// Wait for the scheduler and the workers (each finishes the run it has, up to its
    /// deadline), stop maintenance, flush the store. Call after signalling shutdown.
    pub async fn stop(self) {
        // The scheduler stops with the workers: no tick is claimed once shutdown began.
        let _ = self.scheduler.await;
        for w in self.workers {
            let _ = w.await;
        }
        if let Some(l) = self.leases {
            let _ = l.await;
        }
        self.maintenance.abort();
        let _ = self.maintenance.await;
        let _ = self.duplicates.await;
        if let Err(e) = self.store.flush().await {
            tracing::error!(error = %e, "flushing the store at shutdown failed");
        }
        quarantine::clean_stop(&self.state);
    }
}
