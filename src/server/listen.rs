//! The connection layer: accepts TCP connections, bounds how many are open at once, and serves
//! HTTP/1.1 on each with hyper, timing out slow clients (SPEC §5, "The server times out slow
//! clients (headers and bodies) and bounds connections").
//!
//! * **Header read timeout** ([`ConnLimits::header_read_timeout`], default 10 s): hyper's own
//!   `http1::Builder::header_read_timeout` with tokio's timer. It runs while hyper waits for a
//!   request's head (request line and headers): on a new connection, and on a kept-alive one
//!   between requests, so it is also the idle timeout. A client that has not sent a complete
//!   head by then is disconnected without an answer (a half-sent request, a "slowloris"
//!   client, or an idle connection).
//! * **Body read timeout** ([`ConnLimits::body_read_timeout`], default 30 s):
//!   [`super::layers::BodyTimeoutLayer`] (see [`super::router`]), the longest wait for the
//!   next chunk of a body, as nginx's `client_body_timeout`. A body that stalls answers `408 request_timeout`
//!   and the connection is closed. With the body limit (1 MiB) and the connection bound, a
//!   trickling client holds one slot for a bounded time.
//! * **Connection bound** ([`ConnLimits::max_connections`], default 512): a connection is
//!   accepted only while fewer are open; past the bound new ones wait in the kernel's accept
//!   backlog until one closes (timeouts make sure one does), so a flood of idle sockets
//!   cannot exhaust file descriptors or memory.
//!
//! Graceful shutdown: the listener stops accepting, every open connection finishes its
//! request in progress and closes (hyper-util's `GracefulShutdown`), as `axum::serve` did.

use std::sync::Arc;

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

pub use crate::app::{
    ConnLimits, DEFAULT_BODY_READ_TIMEOUT, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
};

/// Serve `app` on `listener` until `shutdown` turns true, then close gracefully.
pub(crate) async fn serve(
    mut listener: TcpListener,
    app: Router,
    limits: ConnLimits,
    mut shutdown: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    loop {
        // A slot first: past the bound, connections stay in the kernel's backlog.
        let slot = tokio::select! {
            s = slots.clone().acquire_owned() => match s {
                Ok(s) => s,
                Err(_) => break,
            },
            _ = shutdown.wait_for(|s| *s) => break,
        };
        // axum's accept: retries after an accept error (e.g. too many open files) itself.
        let (io, _peer) = tokio::select! {
            c = axum::serve::Listener::accept(&mut listener) => c,
            _ = shutdown.wait_for(|s| *s) => break,
        };
        let service = TowerToHyperService::new(app.clone());
        let conn = graceful.watch(http.serve_connection(TokioIo::new(io), service));
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "connection closed with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
