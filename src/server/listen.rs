//! The connection layer: accepts TCP connections, bounds how many are open at once (in all
//! and per client address), and serves HTTP/1.1 on each with hyper, timing out slow clients
//! (SPEC §5, "The server times out slow clients (headers and bodies) and bounds
//! connections"; issue 42, bounded intake).
//!
//! * **Header read timeout** ([`ConnLimits::header_read_timeout`], default 10 s): the longest a
//!   connection may go without a request in progress: from its accept, and on a kept-alive one
//!   from the end of its last answer, until the next request's head (request line and
//!   headers) is complete. So it is also the idle timeout. A client that has not sent a
//!   complete head by then is disconnected without an answer (a half-sent request, a
//!   "slowloris" client, or an idle connection). It is the rule of hyper's
//!   `http1::Builder::header_read_timeout`, kept per connection rather than per request: hyper
//!   arms a tokio timer for every request head (a timer entry made and dropped, an epoll wait
//!   with a deadline); `IdleClock` re-arms one timer per timeout period, and a request only
//!   stamps two atomics. Duplicate deliveries answered: +3% (six alternated loads, medians
//!   75,200 → 77,900 req/s).
//! * **Request bodies** ([`GuardedBody`], with [`BodyRules`] from these limits; nginx's
//!   `client_body_timeout` and Apache's `mod_reqtimeout` `body=…,MinRate=…` are the models):
//!   - the next chunk within [`ConnLimits::body_read_timeout`] (default 30 s,
//!     `--body-timeout-s`);
//!   - the whole body within [`ConnLimits::body_deadline`] of the end of its head (default
//!     60 s, `--body-deadline-s`): 1 MiB, the body limit, in 60 s is 17 KiB/s;
//!   - after [`ConnLimits::body_rate_grace`] (default 5 s, `--body-rate-grace-s`), at least
//!     [`ConnLimits::body_min_rate`] bytes/s on average since the head (default 1,024,
//!     `--body-min-rate`): a body sent a byte at a time is cut after the grace, not after 1 MiB
//!     × 30 s;
//!   - a `Content-Length` over the body limit is `413` before any byte is read.
//!
//!   A body that breaks a time rule is answered `408 request_timeout` naming the flag, and the
//!   connection is closed. Webhook handlers check the workflow and its trigger before they
//!   read the body at all ([`super::hooks`]).
//! * **Connection bound** ([`ConnLimits::max_connections`], default 512, a tokio
//!   [`Semaphore`]): a connection is accepted only while fewer are open; past the bound new
//!   ones wait in the kernel's accept backlog until one closes (timeouts make sure one does),
//!   so a flood of idle sockets cannot exhaust file descriptors or memory.
//! * **Per address and the reserve** ([`Intake`], see [`super::intake`]): at most 64 bodies
//!   in progress per client address (`--max-slow-bodies-per-ip`), and bodies in progress never
//!   hold the last 64 connection slots (`--reserved-connections`); past either the oldest body
//!   is shed (`503 server_busy`). While the reserve is in use, an address with 256
//!   connections (`--max-connections-per-ip`) loses its oldest body in progress to a new one,
//!   or the new one is refused. So slow uploads, from one address or many, never lock
//!   `/healthz`, the API or a webhook out.
//!
//! Graceful shutdown: the listener stops accepting, every open connection finishes its
//! request in progress and closes (hyper-util's `GracefulShutdown`), as `axum::serve` did.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use axum::body::Body;
use axum::http::{Request, Response};
use axum::Router;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use pin_project_lite::pin_project;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use super::intake::{BodySlot, ClientAddr, Conn, Intake};
use super::layers::{BodyRules, GuardedBody};
pub use crate::app::{
    ConnLimits, DEFAULT_BODY_DEADLINE, DEFAULT_BODY_MIN_RATE, DEFAULT_BODY_RATE_GRACE,
    DEFAULT_BODY_READ_TIMEOUT, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_IP, DEFAULT_MAX_SLOW_BODIES_PER_IP, DEFAULT_RESERVED_CONNECTIONS,
};

/// The answer to a connection refused by [`Intake::connect`] (written once, best effort,
/// before it is closed; nothing of its request is read).
const REFUSED: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: application/problem+json\r\nretry-after: 1\r\nconnection: close\r\n\
content-length: 226\r\n\r\n\
{\"type\":\"https://fluxo.dev/problems/too-many-connections\",\"title\":\"Service Unavailable\",\
\"status\":503,\"detail\":\"too many connections from your address are in use \
(--max-connections-per-ip); retry\",\"code\":\"too_many_connections\"}";

/// Serve `app` on `listener` until `shutdown` turns true, then close gracefully. Request
/// bodies are read under `limits` and the body limit `body_limit` ([`GuardedBody`]).
pub(crate) async fn serve(
    mut listener: TcpListener,
    app: Router,
    limits: ConnLimits,
    body_limit: usize,
    mut shutdown: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let intake = Arc::new(Intake::new(&limits));
    let rules = BodyRules::new(&limits, body_limit);
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    // The header read timeout is the connection's `IdleClock`, not hyper's per-request timer.
    http.header_read_timeout(None);
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
        let (io, peer) = tokio::select! {
            c = axum::serve::Listener::accept(&mut listener) => c,
            _ = shutdown.wait_for(|s| *s) => break,
        };
        let conn = match intake.connect(peer.ip()) {
            Ok(conn) => conn,
            Err(why) => {
                tracing::debug!(peer = %peer, %why, "connection refused");
                let _ = io.try_write(REFUSED);
                continue;
            }
        };
        let service = TowerToHyperService::new(Tracked {
            inner: app.clone(),
            conn: conn.clone(),
            intake: intake.clone(),
            rules,
        });
        let served = graceful.watch(http.serve_connection(TokioIo::new(io), service));
        let header_timeout = limits.header_read_timeout;
        let intake = intake.clone();
        tokio::spawn(async move {
            let mut served = std::pin::pin!(served);
            loop {
                tokio::select! {
                    done = &mut served => {
                        if let Err(e) = done {
                            tracing::debug!(error = %e, "connection closed with an error");
                        }
                        break;
                    }
                    // Dropping the connection closes it, without an answer.
                    () = conn.clock.expired(header_timeout) => {
                        tracing::debug!("connection closed: no request head within the header read timeout");
                        break;
                    }
                    // Shed for a newer connection ([`Intake`]): closed at once when it waits
                    // for a request head; a body in progress is answered `503` by its handler
                    // (the body fails), which closes the connection.
                    () = conn.closing.notified() => if conn.clock.is_idle() {
                        tracing::debug!("connection closed: shed for a newer one");
                        break;
                    }
                }
            }
            intake.disconnect(&conn);
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// Ends a request on its connection's `IdleClock` when dropped.
struct InProgress(Arc<Conn>);

impl Drop for InProgress {
    fn drop(&mut self) {
        self.0.clock.end();
    }
}

/// The router of one connection, counting its requests on the connection's `IdleClock`
/// and reading their bodies under the [`BodyRules`] and the [`Intake`].
#[derive(Clone)]
struct Tracked<S> {
    inner: S,
    conn: Arc<Conn>,
    intake: Arc<Intake>,
    rules: BodyRules,
}

impl<S, B> tower_service::Service<Request<B>> for Tracked<S>
where
    S: tower_service::Service<Request<Body>, Response = Response<Body>, Error = Infallible>,
    B: http_body::Body<Data = axum::body::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = TrackedFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: Request<B>) -> Self::Future {
        self.conn.clock.begin();
        req.extensions_mut().insert(ClientAddr(self.conn.ip()));
        let slot = BodySlot::new(self.intake.clone(), self.conn.clone());
        let rules = self.rules;
        TrackedFuture {
            inner: self
                .inner
                .call(req.map(|b| Body::new(GuardedBody::new(b, rules, Some(slot))))),
            in_progress: Some(InProgress(self.conn.clone())),
        }
    }
}

pin_project! {
    /// The answer of [`Tracked`]: its body keeps the request in progress until it is dropped
    /// (sent, or the connection gone).
    struct TrackedFuture<F> {
        #[pin]
        inner: F,
        in_progress: Option<InProgress>,
    }
}

impl<F> Future for TrackedFuture<F>
where
    F: Future<Output = Result<Response<Body>, Infallible>>,
{
    type Output = Result<Response<Body>, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let res = ready!(this.inner.poll(cx))?;
        let in_progress = this.in_progress.take();
        Poll::Ready(Ok(res.map(|inner| {
            Body::new(TrackedBody {
                inner,
                _in_progress: in_progress,
            })
        })))
    }
}

pin_project! {
    /// An answer's body that holds its request's [`InProgress`].
    struct TrackedBody {
        #[pin]
        inner: Body,
        _in_progress: Option<InProgress>,
    }
}

impl http_body::Body for TrackedBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        self.project().inner.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
