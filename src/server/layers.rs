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
//! * [`GuardedBody`]: the rules a request body is read under ([`BodyRules`]): the next chunk
//!   within the chunk timeout (nginx's `client_body_timeout`), the whole body within its
//!   deadline, at least a minimum average rate after a grace (Apache `mod_reqtimeout`'s
//!   `MinRate`), and a `Content-Length` within the body limit, checked before any byte is
//!   read. Beyond the start time taken with the head, the clock is read and a timer armed
//!   only while the body makes the handler wait: a body already in the connection's buffer,
//!   the usual webhook, never starts one. A body that
//!   breaks a rule fails with [`BodyRefused`], which [`super::body::body_bytes`] answers (`408
//!   request_timeout`, `413`, or `503` when [`super::intake`] shed it). It wraps each request
//!   body in the connection layer ([`super::listen`]), which knows the connection and its
//!   address; tower-http's `RequestBodyTimeoutLayer` bounds only the wait per chunk.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::{Duration, Instant};

use crate::app::ConnLimits;

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

/// The rules every request body is read under ([`GuardedBody`]): from the server's
/// [`ConnLimits`] and its body limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyRules {
    /// Longest wait for the next chunk (`--body-timeout-s`).
    pub chunk_timeout: Duration,
    /// Longest time for the whole body, from the end of the head (`--body-deadline-s`).
    pub deadline: Duration,
    /// Least average rate in bytes/s once `grace` has passed (`--body-min-rate`; 0: none).
    pub min_rate: u64,
    /// When `min_rate` starts to apply (`--body-rate-grace-s`).
    pub grace: Duration,
    /// The body limit (`--body-limit`): a `Content-Length` over it is refused unread.
    pub limit: usize,
}

impl BodyRules {
    /// The rules of `limits`, with the body limit `limit` (bytes).
    pub fn new(limits: &ConnLimits, limit: usize) -> Self {
        BodyRules {
            chunk_timeout: limits.body_read_timeout,
            deadline: limits.body_deadline,
            min_rate: limits.body_min_rate,
            grace: limits.body_rate_grace,
            limit,
        }
    }
}

/// Why a request body was refused before it was read whole: the error [`GuardedBody`] fails
/// with, which [`super::body::body_bytes`] answers (each names the `fluxo serve` flag).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyRefused {
    /// No chunk came within the chunk timeout: `408 request_timeout`.
    Stalled(Duration),
    /// The whole body did not come within the deadline: `408 request_timeout`.
    Deadline(Duration),
    /// Slower than the minimum rate on average, after the grace: `408 request_timeout`.
    TooSlow { min_rate: u64, grace: Duration },
    /// Its `Content-Length` is over the body limit (nothing was read): `413
    /// payload_too_large`.
    TooLarge { length: u64, limit: usize },
    /// Shed to make room for other clients ([`super::intake`]): `503` with `Retry-After`.
    Shed(super::intake::Shed),
}

impl std::fmt::Display for BodyRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyRefused::Stalled(d) => write!(
                f,
                "the request body stalled: no data came within {} (--body-timeout-s)",
                human(*d)
            ),
            BodyRefused::Deadline(d) => write!(
                f,
                "the request body did not arrive whole within {} (--body-deadline-s)",
                human(*d)
            ),
            BodyRefused::TooSlow { min_rate, grace } => write!(
                f,
                "the request body came slower than {min_rate} bytes/s on average after its \
                 first {} (--body-min-rate, --body-rate-grace-s)",
                human(*grace)
            ),
            BodyRefused::TooLarge { length, limit } => write!(
                f,
                "the body (Content-Length {length}) is over the limit of {limit} bytes \
                 (--body-limit)"
            ),
            BodyRefused::Shed(why) => write!(f, "{why}"),
        }
    }
}

impl std::error::Error for BodyRefused {}

/// `30 s`, or `300 ms` under a second.
fn human(d: Duration) -> String {
    if d >= Duration::from_secs(1) && d.subsec_millis() == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// Which rule an armed timer of [`GuardedBody`] stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Rule {
    Stalled,
    Deadline,
    TooSlow,
}

pin_project! {
    /// A request body read under [`BodyRules`], from the end of its head (`started`):
    ///
    /// * a `Content-Length` over the limit fails at the first read, before any byte is read;
    /// * each wait for the next chunk is at most `chunk_timeout`;
    /// * the whole body must come within `deadline`;
    /// * after `grace`, the bytes received must keep up with `min_rate` on average (at time
    ///   `t` from the start, `received >= min_rate * t`).
    ///
    /// The rules are checked, and one timer armed for the earliest of them, only when the
    /// inner body is not ready: a body already in the connection's buffer (the usual webhook)
    /// never reads the clock again or makes a timer. While it waits, the body is a body in
    /// progress of its connection's [`super::intake::BodySlot`], which may shed it.
    pub struct GuardedBody<B> {
        #[pin]
        inner: B,
        #[pin]
        sleep: Option<tokio::time::Sleep>,
        armed: Rule,
        rules: BodyRules,
        started: tokio::time::Instant,
        received: u64,
        waiting_since: Option<tokio::time::Instant>,
        length_checked: bool,
        slot: Option<super::intake::BodySlot>,
    }
}

impl<B> GuardedBody<B> {
    /// `inner` under `rules`, from now; `slot` is its connection's place in the intake
    /// accounting (`None`: no accounting, e.g. in unit tests).
    pub fn new(inner: B, rules: BodyRules, slot: Option<super::intake::BodySlot>) -> Self {
        GuardedBody {
            inner,
            sleep: None,
            armed: Rule::Stalled,
            rules,
            started: tokio::time::Instant::now(),
            received: 0,
            waiting_since: None,
            length_checked: false,
            slot,
        }
    }
}

impl<B> http_body::Body for GuardedBody<B>
where
    B: http_body::Body<Data = axum::body::Bytes>,
    B::Error: Into<axum::BoxError>,
{
    type Data = axum::body::Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let mut this = self.project();
        let refuse = |why: BodyRefused| Poll::Ready(Some(Err(why.into())));
        if let Some(why) = this.slot.as_ref().and_then(|s| s.shed()) {
            return refuse(BodyRefused::Shed(why));
        }
        if !*this.length_checked {
            *this.length_checked = true;
            let length = this.inner.size_hint().lower();
            if length > this.rules.limit as u64 {
                return refuse(BodyRefused::TooLarge {
                    length,
                    limit: this.rules.limit,
                });
            }
        }
        match this.inner.as_mut().poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    *this.received += data.len() as u64;
                }
                *this.waiting_since = None;
                return Poll::Ready(Some(Ok(frame)));
            }
            Poll::Ready(other) => {
                // The end, or the connection's error: no longer in progress.
                if let Some(slot) = this.slot.as_mut() {
                    slot.done();
                }
                return Poll::Ready(other.map(|r| r.map_err(Into::into)));
            }
            Poll::Pending => {}
        }
        let now = tokio::time::Instant::now();
        let since = *this.waiting_since.get_or_insert(now);
        if let Some(slot) = this.slot.as_mut() {
            if let Some(why) = slot.waiting(cx.waker()) {
                return refuse(BodyRefused::Shed(why));
            }
        }
        let rules = this.rules;
        let mut at = (since + rules.chunk_timeout, Rule::Stalled);
        let deadline = *this.started + rules.deadline;
        if deadline < at.0 {
            at = (deadline, Rule::Deadline);
        }
        // No minimum rate (0): no such deadline.
        if let Some(earned_ms) = this
            .received
            .saturating_mul(1000)
            .checked_div(rules.min_rate)
        {
            let slow_at = *this.started + rules.grace.max(Duration::from_millis(earned_ms));
            if slow_at < at.0 {
                at = (slow_at, Rule::TooSlow);
            }
        }
        let (at, rule) = at;
        let refused = |rule| match rule {
            Rule::Stalled => BodyRefused::Stalled(rules.chunk_timeout),
            Rule::Deadline => BodyRefused::Deadline(rules.deadline),
            Rule::TooSlow => BodyRefused::TooSlow {
                min_rate: rules.min_rate,
                grace: rules.grace,
            },
        };
        if at <= now {
            return refuse(refused(rule));
        }
        *this.armed = rule;
        match this.sleep.as_mut().as_pin_mut() {
            Some(sleep) => {
                if sleep.deadline() != at {
                    sleep.reset(at);
                }
            }
            None => this.sleep.set(Some(tokio::time::sleep_until(at))),
        }
        let sleep = this.sleep.as_pin_mut().expect("set above");
        ready!(sleep.poll(cx));
        refuse(refused(*this.armed))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    //! [`GuardedBody`]'s rules on tokio's paused clock: the sender is a channel the test feeds
    //! while it moves time forward.
    use super::*;
    use axum::body::Bytes;
    use http_body::Body as _;
    use tokio::sync::mpsc;

    /// A body fed chunk by chunk through a channel, with an optional `Content-Length`.
    struct Fed {
        rx: mpsc::UnboundedReceiver<Bytes>,
        length: Option<u64>,
    }

    impl http_body::Body for Fed {
        type Data = Bytes;
        type Error = std::convert::Infallible;
        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            self.rx.poll_recv(cx).map(|c| c.map(|b| Ok(Frame::data(b))))
        }
        fn size_hint(&self) -> http_body::SizeHint {
            self.length.map_or_else(
                http_body::SizeHint::default,
                http_body::SizeHint::with_exact,
            )
        }
    }

    fn rules(deadline_ms: u64, min_rate: u64, grace_ms: u64) -> BodyRules {
        BodyRules {
            chunk_timeout: Duration::from_secs(30),
            deadline: Duration::from_millis(deadline_ms),
            min_rate,
            grace: Duration::from_millis(grace_ms),
            limit: 1024 * 1024,
        }
    }

    /// Feeds `chunk` every `every` (at most `times`) while reading the body; answers how the
    /// read ended (`Ok(bytes)` or the rule) and when, from the start.
    async fn trickle(
        rules: BodyRules,
        chunk: &'static [u8],
        every: Duration,
        times: usize,
    ) -> (Result<usize, BodyRefused>, Duration) {
        let (tx, rx) = mpsc::unbounded_channel();
        let started = tokio::time::Instant::now();
        let mut body = Box::pin(GuardedBody::new(Fed { rx, length: None }, rules, None));
        let feeder = tokio::spawn(async move {
            for _ in 0..times {
                tokio::time::sleep(every).await;
                if tx.send(Bytes::from_static(chunk)).is_err() {
                    return;
                }
            }
        });
        let mut got = 0;
        let end = loop {
            match std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
                Some(Ok(f)) => got += f.into_data().map_or(0, |d| d.len()),
                Some(Err(e)) => break Err(*e.downcast::<BodyRefused>().expect("a rule")),
                None => break Ok(got),
            }
        };
        feeder.abort();
        (end, started.elapsed())
    }

    /// A byte every 100 ms never stalls, but the whole body must come within the deadline.
    #[tokio::test(start_paused = true)]
    async fn the_whole_body_has_a_deadline() {
        let (end, at) = trickle(rules(1_000, 0, 0), b"x", Duration::from_millis(100), 100).await;
        assert_eq!(end, Err(BodyRefused::Deadline(Duration::from_secs(1))));
        assert_eq!(at, Duration::from_secs(1));
    }

    /// Under the minimum rate: refused when the grace ends (what came by then is not enough);
    /// at the rate or above, read whole.
    #[tokio::test(start_paused = true)]
    async fn a_body_must_keep_a_minimum_rate_after_the_grace() {
        // 10 bytes every 500 ms is 20 bytes/s; at least 100 bytes/s after 2 s.
        let slow = rules(60_000, 100, 2_000);
        let (end, at) = trickle(slow, b"0123456789", Duration::from_millis(500), 100).await;
        assert_eq!(
            end,
            Err(BodyRefused::TooSlow {
                min_rate: 100,
                grace: Duration::from_secs(2)
            })
        );
        assert_eq!(at, Duration::from_secs(2));
        // 10 bytes every 50 ms is 200 bytes/s: 60 chunks (3 s) are read whole.
        let (end, _) = trickle(slow, b"0123456789", Duration::from_millis(50), 60).await;
        assert_eq!(end, Ok(600));
    }

    /// A body ahead of the rate may pause: the time it earned counts. 1,000 bytes at once
    /// earn 10 s at 100 bytes/s, so a 5 s pause then the rest is fine.
    #[tokio::test(start_paused = true)]
    async fn bytes_ahead_of_the_rate_earn_time() {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut body = Box::pin(GuardedBody::new(
            Fed { rx, length: None },
            rules(60_000, 100, 1_000),
            None,
        ));
        tx.send(Bytes::from(vec![b' '; 1000])).unwrap();
        let first = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await;
        assert!(matches!(first, Some(Ok(_))));
        let next = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            tx.send(Bytes::from_static(b"{}")).unwrap();
        });
        let second = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await;
        assert!(
            matches!(second, Some(Ok(_))),
            "{:?}",
            second.map(|r| r.is_ok())
        );
        next.await.unwrap();
    }

    /// The wait for one chunk is bounded by the chunk timeout, whatever the other rules allow.
    #[tokio::test(start_paused = true)]
    async fn a_stalled_body_times_out() {
        let mut r = rules(60_000, 0, 0);
        r.chunk_timeout = Duration::from_millis(300);
        let (end, at) = trickle(r, b"x", Duration::from_secs(10), 1).await;
        assert_eq!(end, Err(BodyRefused::Stalled(Duration::from_millis(300))));
        assert_eq!(at, Duration::from_millis(300));
    }

    /// A `Content-Length` over the limit is refused at the first read, before any byte.
    #[tokio::test(start_paused = true)]
    async fn a_length_over_the_limit_is_refused_unread() {
        let (tx, rx) = mpsc::unbounded_channel();
        tx.send(Bytes::from_static(b"{}")).unwrap();
        let mut body = Box::pin(GuardedBody::new(
            Fed {
                rx,
                length: Some(2 * 1024 * 1024),
            },
            rules(60_000, 0, 0),
            None,
        ));
        let Some(Err(e)) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await else {
            panic!("not refused");
        };
        assert_eq!(
            *e.downcast::<BodyRefused>().unwrap(),
            BodyRefused::TooLarge {
                length: 2 * 1024 * 1024,
                limit: 1024 * 1024
            }
        );
        assert!(!body.inner.rx.is_empty(), "nothing was read");
    }
}
