//! `fluxo serve`: the production runtime and the API the desktop app and browser UI use
//! (SPEC §5).
//!
//! * [`hooks`]: `POST /hooks/{workflow_id}`: dedupe at the door (claim + queued run in one
//!   transaction, made durable by the [`crate::store::GroupCommit`] before the 202).
//! * [`runs`]: start runs (idempotent with `Idempotency-Key`), list, detail, replay, stats.
//! * [`api`]: workflows CRUD, validate, dry-run, memory, step kinds, events (SSE), health.
//! * [`idempotency`]: the REST API's Idempotency-Key semantics.
//! * [`queue`]: the worker pool and crash recovery.
//! * [`door`]: what every request must show before a handler runs (the `Host` allowlist).
//! * [`auth`], [`error`]: bearer token; problem+json errors.
//! * [`listen`]: the connection layer: HTTP/1.1 with header and body read timeouts and a
//!   bound on open connections.
//! * [`openapi`]: the OpenAPI 3.1 document, built from the same routes as the router.

// Handlers return `ApiResult<T>`; `ApiError` is large (a problem document in the making) but
// only travels on the error path, so boxing it would cost every handler clarity for nothing.
#![allow(clippy::result_large_err)]

pub mod api;
pub mod auth;
pub mod door;
pub mod error;
pub mod hooks;
pub mod idempotency;
pub mod listen;
pub mod openapi;
pub mod queue;
pub mod runs;
pub mod scheduler;
pub mod settings;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower_http::request_id::{
    MakeRequestUuid, PropagateRequestIdLayer, RequestId, SetRequestIdLayer,
};
use tower_http::timeout::RequestBodyTimeoutLayer;
use tower_http::trace::TraceLayer;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::clock::Clock;
use crate::runtime::Engine;
use crate::store::{Retention, Store};
use crate::workflow::dir::WorkflowDir;

/// Default body limit of webhook and API requests: 1 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 1024 * 1024;

/// How to run the server.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Body limit in bytes (default 1 MiB); larger bodies get 413.
    pub body_limit_bytes: usize,
    /// Runs executed at once (default 8).
    pub workers: usize,
    pub retention: Retention,
    /// Built browser UI to serve at `/` (e.g. `ui/dist`), if any.
    pub ui_dir: Option<PathBuf>,
    /// Data dir: where `settings.json` and the `token` file live (`None`: settings are kept
    /// in memory only, e.g. in tests).
    pub data_dir: Option<PathBuf>,
    /// What start-up does with runs a dead process left `running` (`--recover`; default:
    /// resume those whose in-flight step is safe to repeat).
    pub recover: crate::runtime::RecoverPolicy,
    /// Slow-client timeouts and the connection bound ([`listen::ConnLimits`]).
    pub limits: listen::ConnLimits,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            body_limit_bytes: DEFAULT_BODY_LIMIT,
            workers: 8,
            retention: Retention::default(),
            ui_dir: None,
            data_dir: None,
            recover: crate::runtime::RecoverPolicy::default(),
            limits: listen::ConnLimits::default(),
        }
    }
}

/// Shared state of every handler. Cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

struct Inner {
    /// The bound address (the listener's).
    addr: SocketAddr,
    engine: Engine,
    workflows: WorkflowDir,
    token: RwLock<String>,
    commit: crate::store::GroupCommit,
    queue: queue::Queue,
    options: ServerOptions,
    settings: RwLock<crate::settings::AppSettings>,
    /// Identifies this process as the owner of in-progress idempotency records.
    instance_id: String,
    /// Webhook claims written but not yet durable.
    pending_claims: hooks::PendingClaims,
    /// Durable webhook claims seen lately (answers repeats without a store read).
    recent_claims: hooks::RecentClaims,
    /// The hosts this server answers to: its bound address and the settings' `allowed_hosts`.
    hosts: RwLock<door::HostRules>,
}

impl AppState {
    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.0.engine
    }
    /// The store.
    pub fn store(&self) -> &Arc<dyn Store> {
        self.0.engine.store()
    }
    /// The clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        self.0.engine.clock()
    }
    /// The workflow folder.
    pub fn workflows(&self) -> &WorkflowDir {
        &self.0.workflows
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
    pub fn queue(&self) -> &queue::Queue {
        &self.0.queue
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
    /// Replace the settings: saved to the data dir (if any) and applied (env variables to the
    /// engine; retention from the next maintenance pass). A secret env value sent back as the
    /// mask the API showed keeps the stored value
    /// ([`crate::settings::AppSettings::resolve_masked`]).
    pub fn set_settings(
        &self,
        s: crate::settings::AppSettings,
    ) -> Result<(), crate::settings::SettingsError> {
        let s = s.resolve_masked(&self.settings())?;
        s.validate()?;
        if let Some(dir) = &self.0.options.data_dir {
            s.save(dir)?;
        }
        self.0.engine.set_secret_env(s.secret_env.clone());
        self.0.engine.set_settings_env(s.env.clone());
        self.0.engine.set_outbound_allow(&s.outbound_allow)?;
        {
            let mut hosts = self.0.hosts.write().unwrap_or_else(|e| e.into_inner());
            *hosts = door::HostRules::new(self.0.addr, &s.allowed_hosts);
        }
        *self.0.settings.write().unwrap_or_else(|e| e.into_inner()) = s;
        Ok(())
    }
    /// The address the server is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.0.addr
    }
    /// `Ok` if the request's `Host` is one of this server's names, else the problem to answer
    /// (`400 invalid_host`, `421 misdirected_request`; see [`door`]).
    pub fn check_host<B>(&self, req: &axum::http::Request<B>) -> Result<(), error::ApiError> {
        self.0
            .hosts
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .check(req)
    }
    /// The retention policy in force: settings over the command-line defaults.
    pub fn retention(&self) -> Retention {
        self.settings().retention(self.0.options.retention)
    }
    /// This process's owner id for idempotency leases.
    pub fn instance_id(&self) -> &str {
        &self.0.instance_id
    }
    /// Webhook claims written but not yet durable.
    pub fn pending_claims(&self) -> &hooks::PendingClaims {
        &self.0.pending_claims
    }
    /// Durable webhook claims seen lately.
    pub fn recent_claims(&self) -> &hooks::RecentClaims {
        &self.0.recent_claims
    }
}

/// The routes under `/api/v1`, each with its OpenAPI documentation; [`router`] puts the token
/// check in front of every one of them (and [`openapi::document`] says so).
pub fn api_routes() -> OpenApiRouter<AppState> {
    api::routes()
        .merge(runs::routes())
        .merge(settings::routes())
}

/// The routes outside the token-protected API, each with its OpenAPI documentation.
pub fn public_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(openapi::webhook))
        .routes(routes!(api::healthz))
        .routes(routes!(api::openapi))
}

/// The full router: `/hooks`, `/api/v1` (token required), `/healthz`, the UI at `/`, all
/// behind the `Host` check ([`door`]). Every
/// route comes from [`public_routes`] and [`api_routes`], the source of the OpenAPI document
/// too ([`openapi`]).
pub fn router(state: AppState) -> Router {
    let limit = state.options().body_limit_bytes;
    let (api, _) = api_routes().split_for_parts();
    let api = api
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ))
        // Unknown API paths are problems, not the UI's index.html.
        .fallback(|uri: axum::http::Uri| async move {
            error::ApiError::not_found(
                "no_such_route",
                format!("no API route /api/v1{}", uri.path()),
            )
        });
    let (public, _) = public_routes().split_for_parts();
    let mut app = public
        .nest("/api/v1", api)
        .layer(DefaultBodyLimit::max(limit))
        // A body that stalls longer than this between two chunks ends its request (408, see
        // `runs::body_bytes`); the header timeout and the connection bound are in `listen`.
        .layer(RequestBodyTimeoutLayer::new(
            state.options().limits.body_read_timeout,
        ))
        // Read bottom-up (the last layer is the outermost): take the client's `X-Request-Id`
        // or make one (UUID v4), open the request's span with it, echo it on the answer (tower-http's layers: no boxing
        // per request, unlike a `from_fn` middleware, which cost ~14% of duplicate throughput).
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(TraceLayer::new_for_http().make_span_with(request_span))
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid));
    if let Some(dir) = &state.options().ui_dir {
        app = app.fallback_service(
            tower_http::services::ServeDir::new(dir)
                .fallback(tower_http::services::ServeFile::new(dir.join("index.html"))),
        );
    }
    // Outermost, after the fallback: every request (API, webhooks, the UI, unknown paths)
    // shows a Host this server answers to (a DNS-rebinding defence, see `door`).
    app.layer(door::HostCheckLayer::new(state.clone()))
        .with_state(state)
}

/// The span of a request: its id (`X-Request-Id`, the client's or a generated one), method and
/// path; payload bodies are never logged at info level.
fn request_span<B>(req: &axum::http::Request<B>) -> tracing::Span {
    let id = req
        .extensions()
        .get::<RequestId>()
        .and_then(|id| id.header_value().to_str().ok())
        .unwrap_or("-");
    tracing::info_span!("request", request_id = %id, method = %req.method(), path = %req.uri().path())
}

/// A started server.
pub struct RunningServer {
    pub addr: SocketAddr,
    pub state: AppState,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl RunningServer {
    /// The base URL (`http://127.0.0.1:port`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
    /// Stop accepting, let running runs finish (up to their deadline), flush the store.
    pub async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.task.await;
    }
}

/// Start a server on `listener` over an engine and a workflow folder: recovers runs left by a
/// crash (`queued` → executed, `running` → resumed when safe, else `interrupted`), starts workers, the group commit,
/// the Memory sweeper and retention pruning.
pub async fn start(
    listener: TcpListener,
    engine: Engine,
    workflows: WorkflowDir,
    token: String,
    options: ServerOptions,
) -> std::io::Result<RunningServer> {
    let addr = listener.local_addr()?;
    let store = engine.store().clone();
    let commit = crate::store::GroupCommit::start(store.clone());
    // Runs' `running` and final states go through the same group commit (crash recovery).
    let engine = engine.with_group_commit(commit.clone());
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let (queue, receiver) = queue::Queue::new();
    let settings = match &options.data_dir {
        Some(dir) => {
            // Owner-only (0700, tightened with a log line): the store, settings and token.
            crate::secrets::secure_dir(dir)?;
            crate::settings::AppSettings::load(dir)
                .map_err(|e| std::io::Error::other(e.to_string()))?
        }
        None => crate::settings::AppSettings::default(),
    };
    engine.set_secret_env(settings.secret_env.clone());
    engine.set_settings_env(settings.env.clone());
    engine
        .set_outbound_allow(&settings.outbound_allow)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let hosts = door::HostRules::new(addr, &settings.allowed_hosts);
    let state = AppState(Arc::new(Inner {
        addr,
        engine,
        workflows,
        token: RwLock::new(token),
        commit,
        queue,
        options: options.clone(),
        settings: RwLock::new(settings),
        instance_id: uuid::Uuid::new_v4().to_string(),
        pending_claims: hooks::PendingClaims::default(),
        recent_claims: hooks::RecentClaims::default(),
        hosts: RwLock::new(hosts),
    }));
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
    queue::recover(&state)
        .await
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let workers = queue::spawn_workers(
        state.clone(),
        receiver,
        options.workers.max(1),
        shutdown_rx.clone(),
    );
    let maintenance = queue::spawn_maintenance(state.clone(), shutdown_rx.clone());
    let scheduler = scheduler::spawn(state.clone(), shutdown_rx.clone());
    let app = router(state.clone());
    let limits = options.limits;
    let rx = shutdown_rx.clone();
    let task = tokio::spawn(async move {
        listen::serve(listener, app, limits, rx).await;
        // The scheduler stops with the workers: no tick is claimed once shutdown began.
        let _ = scheduler.await;
        for w in workers {
            let _ = w.await;
        }
        maintenance.abort();
        let _ = maintenance.await;
        if let Err(e) = store.flush().await {
            tracing::error!(error = %e, "flushing the store at shutdown failed");
        }
    });
    Ok(RunningServer {
        addr,
        state,
        shutdown: shutdown_tx,
        task,
    })
}

/// Wait for Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}

/// Grace period after the last run deadline before shutdown gives up waiting.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
