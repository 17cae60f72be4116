//! `fluxo serve`: the production runtime and the API the desktop app and browser UI use
//! (SPEC §5).
//!
//! * [`hooks`]: `POST /hooks/{workflow_id}`: dedupe at the door (claim + queued run in one
//!   transaction, made durable by the [`crate::store::GroupCommit`] before the 202).
//! * [`runs`]: start runs (idempotent with `Idempotency-Key`), list, detail, replay, stats.
//! * [`api`]: workflows CRUD, validate, dry-run, memory, step kinds, events (SSE), health.
//! * [`idempotency`]: the REST API's Idempotency-Key semantics.
//! * [`connections`]: the connections connector steps act as (secrets never answered).
//! * [`door`]: what every request must show before a handler runs (the `Host` allowlist).
//! * [`auth`], [`error`]: bearer token; problem+json errors.
//! * [`body`], [`headers`]: reading request bodies (limit, timeout, JSON) and key headers,
//!   the leaves every handler module shares.
//! * [`layers`]: the request id and span around every route; the rules request bodies are
//!   read under (chunk timeout, whole-body deadline, minimum rate, `Content-Length` limit).
//! * [`listen`]: the connection layer: HTTP/1.1 with header and body time limits and bounds
//!   on open connections.
//! * [`intake`]: connections and bodies in progress per client address, and the reserve of
//!   connections slow bodies never take (the oldest make room).
//! * [`openapi`]: the OpenAPI 3.1 document, built from the same routes as the router.

// Handlers return `ApiResult<T>`; `ApiError` is large (a problem document in the making) but
// only travels on the error path, so boxing it would cost every handler clarity for nothing.
#![allow(clippy::result_large_err)]

pub mod api;
pub mod auth;
pub mod body;
pub mod connections;
pub mod door;
pub mod error;
pub mod headers;
pub mod hooks;
pub mod idempotency;
mod idle;
pub mod intake;
pub mod layers;
pub mod listen;
pub mod metrics;
pub mod openapi;
pub mod runs;
pub mod schedules;
pub mod settings;

use std::net::SocketAddr;

use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower_layer::Layer as _;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use crate::app::{AppState, ServerOptions, DEFAULT_BODY_LIMIT};
use crate::runtime::Engine;
use crate::workflow::dir::WorkflowDir;

/// The routes under `/api/v1`, each with its OpenAPI documentation; [`router`] puts the token
/// check in front of every one of them (and [`openapi::document`] says so).
pub fn api_routes() -> OpenApiRouter<AppState> {
    api::routes()
        .merge(runs::routes())
        .merge(schedules::routes())
        .merge(settings::routes())
        .merge(connections::routes())
}

/// The routes outside the token-protected API, each with its OpenAPI documentation.
pub fn public_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(openapi::webhook))
        .routes(routes!(api::healthz))
        .routes(routes!(api::readyz))
        .routes(routes!(metrics::metrics))
        .routes(routes!(api::openapi))
        .routes(routes!(connections::oauth_callback))
}

/// The full router: `/hooks`, `/api/v1` (token required), `/healthz`, `/readyz`, the UI at `/`, all
/// behind the `Host` check ([`door`]). Every
/// route comes from [`public_routes`] and [`api_routes`], the source of the OpenAPI document
/// too ([`openapi`]).
pub fn router(state: AppState) -> Router {
    let limit = state.options().body_limit_bytes;
    let (api, _) = api_routes().split_for_parts();
    let api = api
        .route_layer(axum::middleware::from_fn_with_state(
            (
                state.clone(),
                std::sync::Arc::new(auth::AuthFailures::default()),
            ),
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
        .layer(DefaultBodyLimit::max(limit));
    if let Some(dir) = &state.options().ui_dir {
        app = app.fallback_service(
            tower_http::services::ServeDir::new(dir)
                .fallback(tower_http::services::ServeFile::new(dir.join("index.html"))),
        );
    }
    let app = app.with_state(state.clone());
    // The layers every request passes (API, webhooks, the UI, unknown paths), around the whole
    // router once: `Router::layer` wraps each route on its own, and axum clones a route's
    // boxed service, one per layer, for every request (`cargo bench --bench door`, a
    // duplicate delivery, best of two: 3.39 → 3.27 µs).
    //
    // Outermost: a Host this server answers to (a DNS-rebinding defence, see `door`).
    let checked = door::HostCheckLayer::new(state.clone()).layer(
        // The client's `X-Request-Id` or a new one, the request's span, the id on the answer.
        // (The time limits of request bodies, the header timeout and the connection bounds
        // are the connection layer's, `listen`: they need the connection and its address.)
        layers::RequestIdLayer.layer(app),
    );
    Router::new().fallback_service(checked)
}

/// A started server.
pub struct RunningServer {
    pub addr: SocketAddr,
    pub state: AppState,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl RunningServer {
    /// The base URL a client on this machine uses (`http://127.0.0.1:port`). A server bound
    /// to every interface (`0.0.0.0`, `::`) answers on loopback too, and an unspecified
    /// address is not one a browser or a sender can open, so its URL names the loopback
    /// address of the same family (`http://127.0.0.1:port`, `http://[::1]:port`).
    pub fn url(&self) -> String {
        let mut addr = self.addr;
        if addr.ip().is_unspecified() {
            addr.set_ip(match addr.ip() {
                std::net::IpAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                std::net::IpAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        format!("http://{addr}")
    }
    /// Stop accepting, let running runs finish (up to their deadline), flush the store. A
    /// clean stop: the runs in flight are no crash suspects at the next start, even when the
    /// caller stops waiting (`crate::app::quarantine`).
    pub async fn shutdown(self) {
        crate::app::quarantine::clean_stop(&self.state);
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
    // The metrics recorder, before anything records.
    crate::telemetry::handle();
    let (state, receiver) = AppState::open(addr, engine, workflows, token, options.clone()).await?;
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let background = crate::app::Background::start(&state, receiver, shutdown_rx.clone()).await?;
    let app = router(state.clone());
    let limits = options.limits;
    let body_limit = options.body_limit_bytes;
    let rx = shutdown_rx.clone();
    let task = tokio::spawn(async move {
        listen::serve(listener, app, limits, body_limit, rx).await;
        background.stop().await;
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
