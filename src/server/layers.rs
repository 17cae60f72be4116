//! The per-request layers every route shares (see [`super::router`]), written as plain tower
//! services: they are on the webhook hot path, where tower-http's general ones cost more than
//! the handler (measured in-process with `cargo bench --bench door`: the request id, trace and
//! propagate layers took ~1.4 µs of a 5.7 µs duplicate delivery, the body timeout ~0.4 µs).
//!
//! * [`RequestIdLayer`]: the request's id and span. The client's `X-Request-Id` is kept as
//!   sent, else one is made (a UUID v4); the handler runs inside the span `request{request_id,
//!   method, path}` (what JSON logs and trace exports tag a request's lines with), and the
//!   answer carries the id back in `X-Request-Id`. With `FLUXO_LOG=debug` every answer is
//!   logged with its status and latency (ms); a `5xx` answer is logged at error level.
//! * [`BodyTimeoutLayer`]: the longest wait for the next chunk of a request body (nginx's
//!   `client_body_timeout`). The timer runs only while the body makes the handler wait: a body
//!   already in the connection's buffer, the usual webhook, never starts one. A body that
//!   stalls longer fails with [`BodyTimedOut`], which [`super::body::body_bytes`] answers `408
//!   request_timeout`.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, Request};
use axum::response::Response;
use http_body::Frame;
use pin_project_lite::pin_project;
use tracing::instrument::Instrumented;
use tracing::Instrument as _;

/// `X-Request-Id`.
pub static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// Adds [`RequestId`] around a service.
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestIdLayer;

impl<S> tower_layer::Layer<S> for RequestIdLayer {
    type Service = RequestId<S>;
    fn layer(&self, inner: S) -> RequestId<S> {
        RequestId { inner }
    }
}

/// See [`RequestIdLayer`].
#[derive(Clone, Debug)]
pub struct RequestId<S> {
    inner: S,
}

/// A new request id: a UUID v4 in its hyphenated lower-case form (36 characters).
fn new_id() -> HeaderValue {
    let mut buf = [0u8; uuid::fmt::Hyphenated::LENGTH];
    let text = uuid::Uuid::new_v4().hyphenated().encode_lower(&mut buf);
    HeaderValue::from_str(text).expect("a UUID is visible ASCII")
}

impl<S, B> tower_service::Service<Request<B>> for RequestId<S>
where
    S: tower_service::Service<Request<B>, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = RequestIdFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let id = match req.headers().get(&X_REQUEST_ID) {
            Some(id) => id.clone(),
            None => new_id(),
        };
        // The fields are only formatted when a subscriber wants the span.
        let span = tracing::info_span!(
            "request",
            request_id = %String::from_utf8_lossy(id.as_bytes()),
            method = %req.method(),
            path = %req.uri().path(),
        );
        let started = tracing::enabled!(tracing::Level::DEBUG).then(Instant::now);
        RequestIdFuture {
            inner: self.inner.call(req).instrument(span),
            id: Some(id),
            started,
        }
    }
}

pin_project! {
    /// The answer of [`RequestId`]: the inner one, with `X-Request-Id`.
    pub struct RequestIdFuture<F> {
        #[pin]
        inner: Instrumented<F>,
        id: Option<HeaderValue>,
        started: Option<Instant>,
    }
}

impl<F, E> Future for RequestIdFuture<F>
where
    F: Future<Output = Result<Response, E>>,
{
    type Output = Result<Response, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let mut res = ready!(this.inner.as_mut().poll(cx))?;
        let status = res.status();
        if let Some(id) = this.id.take() {
            res.headers_mut().insert(X_REQUEST_ID.clone(), id);
        }
        let _in = this.inner.span().enter();
        if let Some(started) = this.started {
            let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
            tracing::debug!(status = status.as_u16(), latency_ms, "answered");
        }
        if status.is_server_error() {
            tracing::error!(status = status.as_u16(), "answered with a server error");
        }
        Poll::Ready(Ok(res))
    }
}

/// Adds [`BodyTimeout`] around a service: `timeout` is the longest wait for the next chunk.
#[derive(Clone, Copy, Debug)]
pub struct BodyTimeoutLayer {
    timeout: Duration,
}

impl BodyTimeoutLayer {
    pub fn new(timeout: Duration) -> Self {
        BodyTimeoutLayer { timeout }
    }
}

impl<S> tower_layer::Layer<S> for BodyTimeoutLayer {
    type Service = BodyTimeout<S>;
    fn layer(&self, inner: S) -> BodyTimeout<S> {
        BodyTimeout {
            inner,
            timeout: self.timeout,
        }
    }
}

/// See [`BodyTimeoutLayer`].
#[derive(Clone, Debug)]
pub struct BodyTimeout<S> {
    inner: S,
    timeout: Duration,
}

impl<S> tower_service::Service<Request<Body>> for BodyTimeout<S>
where
    S: tower_service::Service<Request<Body>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Body>) -> S::Future {
        let timeout = self.timeout;
        self.inner.call(req.map(|body| {
            Body::new(TimeoutBody {
                inner: body,
                sleep: None,
                timeout,
            })
        }))
    }
}

/// A request body that waited longer than the body read timeout for its next chunk.
#[derive(Debug)]
pub struct BodyTimedOut(pub Duration);

impl std::fmt::Display for BodyTimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "no data of the request body came within {} ms",
            self.0.as_millis()
        )
    }
}

impl std::error::Error for BodyTimedOut {}

pin_project! {
    /// A body whose every wait for the next frame is bounded by `timeout`; the timer is made
    /// only when the inner body is not ready.
    struct TimeoutBody {
        #[pin]
        inner: Body,
        #[pin]
        sleep: Option<tokio::time::Sleep>,
        timeout: Duration,
    }
}

impl http_body::Body for TimeoutBody {
    type Data = axum::body::Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let mut this = self.project();
        if let Poll::Ready(frame) = this.inner.poll_frame(cx) {
            // A frame came: the next wait starts afresh.
            this.sleep.set(None);
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if this.sleep.is_none() {
            this.sleep.set(Some(tokio::time::sleep(*this.timeout)));
        }
        let sleep = this.sleep.as_pin_mut().expect("set above");
        ready!(sleep.poll(cx));
        Poll::Ready(Some(Err(Box::new(BodyTimedOut(*this.timeout)))))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}
