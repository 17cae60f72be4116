//! Safe retries: which failures are retried, how long to wait, and never past the deadline.
//!
//! Rules (SPEC §3, `http_request`):
//! * Retry only timeouts, connection errors, 408, 429 and 5xx; never another 4xx (the request
//!   itself is wrong; sending it again cannot help and may duplicate).
//! * Wait before retry n (n = 1, 2, …): `exponential` = full jitter, uniform in
//!   `[0, min(max_retry_delay, base·2^(n−1))]` (AWS Architecture Blog, "Exponential Backoff And
//!   Jitter"); `fixed` = base (capped likewise); `none` = no retries.
//! * A valid `Retry-After` (delay-seconds or HTTP-date, RFC 9110 §10.2.3) replaces that wait,
//!   capped at `max_retry_delay_s`; a past date means retry now; a malformed value is ignored
//!   (the strategy's wait applies), never read as zero.
//! * The run deadline counts the waits: no wait is scheduled past it and each attempt's
//!   timeout is clipped to the time left. The step then fails with `deadline: true` and the
//!   last real error kept.
//! * The request (and so its `Idempotency-Key`) is built once per step execution and sent
//!   identically on every attempt.
//! * A call an outbound rule refuses (`url_not_allowed`, `redirect_not_followed`,
//!   `response_too_large`, see [`super::outbound`]) is not retried.

use std::time::{Duration, Instant};

use rand::Rng;
use schemars::JsonSchema;
use serde::Deserialize;

use super::http::{HttpAnswer, HttpCall, TransportError};
use crate::run::{Attempt, Timestamp};
use crate::steps::{StepContext, StepError};

/// How waits between attempts grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum RetryStrategy {
    /// Full jitter: uniform in `[0, min(cap, base·2^(n−1))]`.
    #[default]
    Exponential,
    /// Always `base`.
    Fixed,
    /// No retries.
    None,
}

/// The call policy fields of every step that calls out (`http_request`, `find_or_create`,
/// `publish_output`, `action`): one definition flattened into each config (`#[serde(flatten)]`,
/// the same JSON members as before), one check ([`CallPolicy::problems`]) and one
/// [`RetryPolicy`] from it.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct CallPolicy {
    /// Timeout of one attempt: `10s`, `500ms`, or a number of seconds (default 10; more than
    /// 0, at most 3600 seconds).
    #[serde(
        default = "default_timeout",
        deserialize_with = "crate::duration::secs_f64"
    )]
    #[schemars(title = "Timeout per attempt", with = "crate::duration::Seconds")]
    pub timeout_s: f64,
    /// Retries after the first attempt (default 2, at most 20): timeouts, connection errors,
    /// 408, 429 and 5xx only.
    #[serde(default = "default_retries")]
    #[schemars(title = "Retries")]
    pub retries: u32,
    /// `exponential` (default, full jitter), `fixed` or `none`.
    #[serde(default)]
    #[schemars(title = "Backoff")]
    pub retry_strategy: RetryStrategy,
    /// Backoff base: `500ms`, `2s`, or a number of milliseconds (default 500).
    #[serde(default = "default_base", deserialize_with = "crate::duration::millis")]
    #[schemars(title = "First retry delay", with = "crate::duration::Millis")]
    pub retry_base_delay_ms: u64,
    /// Cap of any single wait, backoff or `Retry-After`: `30s`, `5m`, or a number of seconds
    /// (default 30, at most 3600 seconds).
    #[serde(
        default = "default_max_delay",
        deserialize_with = "crate::duration::secs_f64"
    )]
    #[schemars(title = "Longest retry delay", with = "crate::duration::Seconds")]
    pub max_retry_delay_s: f64,
    /// An alert or audit log meant to run when the flow fails: Check counts what it writes
    /// there as expected. Runs are unchanged.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[schemars(title = "Expected effect on the failure path")]
    pub expected_on_failure: bool,
}

impl Default for CallPolicy {
    fn default() -> Self {
        CallPolicy {
            timeout_s: default_timeout(),
            retries: default_retries(),
            retry_strategy: RetryStrategy::default(),
            retry_base_delay_ms: default_base(),
            max_retry_delay_s: default_max_delay(),
            expected_on_failure: false,
        }
    }
}

/// Default attempt timeout, seconds.
pub const DEFAULT_TIMEOUT_S: f64 = 10.0;
/// Default retries after the first attempt.
pub const DEFAULT_RETRIES: u32 = 2;
/// Default backoff base, milliseconds.
pub const DEFAULT_BASE_DELAY_MS: u64 = 500;
/// Default cap of one wait, seconds.
pub const DEFAULT_MAX_RETRY_DELAY_S: f64 = 30.0;

fn default_timeout() -> f64 {
    DEFAULT_TIMEOUT_S
}
fn default_retries() -> u32 {
    DEFAULT_RETRIES
}
fn default_base() -> u64 {
    DEFAULT_BASE_DELAY_MS
}
fn default_max_delay() -> f64 {
    DEFAULT_MAX_RETRY_DELAY_S
}

impl CallPolicy {
    /// The policy in milliseconds (seconds become milliseconds, rounded; negatives are 0).
    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy {
            retries: self.retries,
            strategy: self.retry_strategy,
            base_delay_ms: self.retry_base_delay_ms,
            max_delay_ms: (self.max_retry_delay_s.max(0.0) * 1000.0).round() as u64,
            timeout_ms: (self.timeout_s.max(0.0) * 1000.0).round() as u64,
        }
    }

    /// Problems of the fields, each with its config path: `timeout_s` more than 0 and at most
    /// 3600, `max_retry_delay_s` 0 to 3600, `retries` at most 20.
    pub fn problems(&self) -> Vec<super::ConfigProblem> {
        let mut p = Vec::new();
        let mut bad = |path: &str, message: &str| {
            p.push(super::ConfigProblem {
                path: path.into(),
                message: message.into(),
            })
        };
        if !(self.timeout_s > 0.0 && self.timeout_s <= 3600.0) {
            bad("timeout_s", "must be more than 0 and at most 3600 seconds");
        }
        if !(0.0..=3600.0).contains(&self.max_retry_delay_s) {
            bad("max_retry_delay_s", "must be between 0 and 3600 seconds");
        }
        if self.retries > 20 {
            bad("retries", "at most 20 retries");
        }
        p
    }
}

/// Retry and timeout settings of one HTTP step, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub retries: u32,
    pub strategy: RetryStrategy,
    pub base_delay_ms: u64,
    /// Cap of any single wait, backoff or `Retry-After`.
    pub max_delay_ms: u64,
    /// Timeout of one attempt.
    pub timeout_ms: u64,
}

impl RetryPolicy {
    /// Attempts in all (1 + retries, or 1 with strategy `none`).
    pub fn max_attempts(&self) -> u32 {
        match self.strategy {
            RetryStrategy::None => 1,
            _ => self.retries.saturating_add(1),
        }
    }

    /// The largest wait before retry `n` (1-based), in ms: `min(cap, base·2^(n−1))` for
    /// exponential, `min(cap, base)` for fixed, 0 for none.
    pub fn delay_ceiling_ms(&self, n: u32) -> u64 {
        match self.strategy {
            RetryStrategy::None => 0,
            RetryStrategy::Fixed => self.base_delay_ms.min(self.max_delay_ms),
            RetryStrategy::Exponential => {
                let factor = 1u64.checked_shl(n.saturating_sub(1)).unwrap_or(u64::MAX);
                self.base_delay_ms
                    .saturating_mul(factor)
                    .min(self.max_delay_ms)
            }
        }
    }

    /// The wait before retry `n` (1-based), in ms, drawn with `rng` (full jitter).
    pub fn backoff_ms(&self, n: u32, rng: &mut impl Rng) -> u64 {
        let ceiling = self.delay_ceiling_ms(n);
        match self.strategy {
            RetryStrategy::Exponential if ceiling > 0 => rng.gen_range(0..=ceiling),
            _ => ceiling,
        }
    }

    /// Worst case of one step in ms: every attempt times out and every wait is at its ceiling.
    pub fn worst_case_ms(&self) -> u64 {
        let attempts = self.max_attempts() as u64;
        let waits: u64 = (1..attempts as u32).map(|n| self.delay_ceiling_ms(n)).sum();
        attempts
            .saturating_mul(self.timeout_ms)
            .saturating_add(waits)
    }
}

/// Statuses worth retrying: 408, 429 and 5xx (not when the answer says it is a stored result
/// replayed for the request's idempotency key: see [`send_with_retries`]).
pub fn is_retryable_status(status: u16) -> bool {
    status == 408 || status == 429 || (500..=599).contains(&status)
}

/// Parse `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an HTTP-date. Returns the wait in
/// ms from `now_ms` (0 for a past date), or `None` if malformed.
pub fn parse_retry_after(value: &str, now_ms: i64) -> Option<u64> {
    let v = value.trim();
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        // Valid delay-seconds too large for u64 saturate (and are then capped by the caller),
        // rather than being ignored as malformed.
        return Some(v.parse::<u64>().unwrap_or(u64::MAX).saturating_mul(1000));
    }
    let when = httpdate::parse_http_date(v).ok()?;
    let when_ms = when.duration_since(std::time::UNIX_EPOCH).ok()?.as_millis() as i64;
    Some(when_ms.saturating_sub(now_ms).max(0) as u64)
}

/// Send `call` with the policy's retries inside the run deadline, recording every attempt on
/// `cx`. `Ok` only for a 2xx answer. Errors: `http_status` (non-2xx after retries, or a
/// non-retryable 4xx at once), `timeout`, `connection`, with `deadline: true` when the run
/// deadline stopped the retries.
pub async fn send_with_retries(
    cx: &StepContext<'_>,
    call: &HttpCall,
    policy: &RetryPolicy,
    dry_sample: Option<&serde_json::Value>,
) -> Result<HttpAnswer, StepError> {
    send_with_retries_keeping(cx, call, policy, dry_sample, &|_| false).await
}

/// [`send_with_retries`], answering `Ok` also with a non-2xx answer that `keep` accepts (a
/// connector reads a `409` as "exists", a `400` through its error rules); such an answer is
/// never retried.
pub async fn send_with_retries_keeping(
    cx: &StepContext<'_>,
    call: &HttpCall,
    policy: &RetryPolicy,
    dry_sample: Option<&serde_json::Value>,
    keep: &(dyn Fn(&HttpAnswer) -> bool + Sync),
) -> Result<HttpAnswer, StepError> {
    let max_attempts = if cx.retries_enabled {
        policy.max_attempts()
    } else {
        1
    };
    let mut delay_before = 0u64;
    let mut last: Option<StepError> = None;
    for attempt in 1..=max_attempts {
        let now = cx.clock.now_ms();
        let remaining = cx.deadline_ms - now;
        if remaining <= 0 {
            return Err(deadline_error(last, attempt - 1));
        }
        let timeout_ms = policy.timeout_ms.min(remaining as u64);
        let t0 = Instant::now();
        // One span per attempt (`crate::traces`); its context is the call's `traceparent`.
        let span = tracing::info_span!(
            "attempt",
            otel.name = %format!("attempt {attempt}"),
            otel.kind = "client",
            run_id = %cx.run_id,
            step_id = %cx.step_id,
            attempt,
            http.request.method = %call.method,
            http.response.status_code = tracing::field::Empty,
            otel.status_code = tracing::field::Empty,
        );
        let result = tracing::Instrument::instrument(
            cx.effects
                .http()
                .send(call, Duration::from_millis(timeout_ms), dry_sample),
            span.clone(),
        )
        .await;
        match &result {
            Ok(answer) => {
                span.record("http.response.status_code", answer.status);
                if !(200..300).contains(&answer.status) {
                    span.record("otel.status_code", "ERROR");
                }
            }
            Err(_) => {
                span.record("otel.status_code", "ERROR");
            }
        }
        let duration_ms = t0.elapsed().as_millis() as u64;
        let mut record = Attempt {
            started_at: Timestamp(now),
            duration_ms,
            delay_before_ms: delay_before,
            http_status: None,
            error: None,
        };
        let (err, retry_after) = match result {
            Ok(answer) if (200..300).contains(&answer.status) => {
                record.http_status = Some(answer.status);
                cx.record_attempt(record);
                return Ok(answer);
            }
            Ok(answer) if keep(&answer) => {
                record.http_status = Some(answer.status);
                cx.record_attempt(record);
                return Ok(answer);
            }
            Ok(answer) => {
                record.http_status = Some(answer.status);
                // A stored answer replayed for this Idempotency-Key (Stripe's
                // `Idempotent-Replayed: true`): the destination will answer the same every time,
                // so retrying cannot change it; a person must look.
                let replayed = answer
                    .header("idempotent-replayed")
                    .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
                let mut e = StepError::new(
                    "http_status",
                    if replayed {
                        format!(
                            "{} {} answered {}, a result the destination stored for this \
                             Idempotency-Key and replays (Idempotent-Replayed: true): retrying \
                             cannot change it",
                            call.method, call.url, answer.status
                        )
                    } else {
                        format!("{} {} answered {}", call.method, call.url, answer.status)
                    },
                );
                e.http_status = Some(answer.status);
                record.error = Some(e.message.clone());
                let retry_after = answer
                    .header("retry-after")
                    .and_then(|v| parse_retry_after(v, cx.clock.now_ms()));
                let retryable = is_retryable_status(answer.status) && !replayed;
                cx.record_attempt(record);
                if !retryable {
                    e.attempts = attempt;
                    return Err(e);
                }
                (e, retry_after)
            }
            Err(TransportError::Timeout) => {
                let clipped = timeout_ms < policy.timeout_ms;
                let e = StepError::new(
                    "timeout",
                    format!(
                        "{} {} did not answer within {} ms",
                        call.method, call.url, timeout_ms
                    ),
                );
                record.error = Some(e.message.clone());
                cx.record_attempt(record);
                if clipped {
                    return Err(deadline_error(Some(e), attempt));
                }
                (e, None)
            }
            Err(TransportError::Connection(msg)) => {
                let e = StepError::new(
                    "connection",
                    format!("{} {} failed: {msg}", call.method, call.url),
                );
                record.error = Some(e.message.clone());
                cx.record_attempt(record);
                (e, None)
            }
            Err(TransportError::Refused {
                code,
                message,
                status,
            }) => {
                // An outbound rule (SPEC §5): sending it again cannot change the answer.
                let mut e = StepError::new(code, message);
                e.http_status = status;
                record.http_status = status;
                record.error = Some(e.message.clone());
                cx.record_attempt(record);
                e.attempts = attempt;
                return Err(e);
            }
            Err(TransportError::Invalid(msg)) => {
                let e = StepError::new("config", msg);
                record.error = Some(e.message.clone());
                cx.record_attempt(record);
                let mut e = e;
                e.attempts = attempt;
                return Err(e);
            }
        };
        if attempt == max_attempts {
            let mut e = err;
            e.attempts = attempt;
            e.retry_after_ms = retry_after;
            return Err(e);
        }
        let delay = match retry_after {
            Some(ms) => ms.min(policy.max_delay_ms),
            None => policy.backoff_ms(attempt, &mut rand::thread_rng()),
        };
        if cx.clock.now_ms().saturating_add(delay as i64) >= cx.deadline_ms {
            let mut e = deadline_error(Some(err), attempt);
            e.message = format!(
                "{} (retry {attempt} would wait {delay} ms, past the run deadline)",
                e.message
            );
            return Err(e);
        }
        cx.effects
            .wait(cx.clock, Duration::from_millis(delay))
            .await;
        delay_before = delay;
        last = Some(err);
    }
    Err(deadline_error(last, max_attempts))
}

fn deadline_error(last: Option<StepError>, attempts: u32) -> StepError {
    let mut e = last.unwrap_or_else(|| {
        StepError::new(
            "deadline_exceeded",
            "the run deadline passed before the step could run",
        )
    });
    e.deadline = true;
    e.attempts = attempts;
    e
}
