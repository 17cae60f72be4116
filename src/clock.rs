//! Time as the engine sees it.
//!
//! Every stored instant is UTC unix **milliseconds** (`i64`), rendered as RFC 3339 at the edges.
//! Every wait the engine schedules (retry backoff, `Retry-After`) goes through [`Clock::sleep`],
//! so tests swap in a [`ManualClock`] and test a 24-hour dedupe window or a backoff schedule in
//! microseconds of real time instead of sleeping.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use async_trait::async_trait;

/// A source of UTC time plus a way to wait.
#[async_trait]
pub trait Clock: Send + Sync + 'static {
    /// Now, as UTC unix milliseconds.
    fn now_ms(&self) -> i64;
    /// Wait for `d`. The system clock sleeps; the manual clock advances itself by `d` and returns.
    async fn sleep(&self, d: Duration);
}

/// The real clock: `SystemTime` for instants, `tokio::time::sleep` for waits.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

#[async_trait]
impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        chrono::Utc::now().timestamp_millis()
    }
    async fn sleep(&self, d: Duration) {
        tokio::time::sleep(d).await;
    }
}

/// A clock the tests control. Starts at a fixed instant; [`ManualClock::advance`] moves it;
/// [`Clock::sleep`] advances it by the requested duration at once (virtual time), so a backoff
/// schedule is observable via [`ManualClock::slept`] without real waiting.
#[derive(Debug)]
pub struct ManualClock {
    now: AtomicI64,
    slept: AtomicI64,
}

impl ManualClock {
    /// A clock at `start_ms` (UTC unix ms).
    pub fn new(start_ms: i64) -> Self {
        Self {
            now: AtomicI64::new(start_ms),
            slept: AtomicI64::new(0),
        }
    }
    /// A clock at 2026-01-01T00:00:00Z.
    pub fn at_2026() -> Self {
        Self::new(1_767_225_600_000)
    }
    /// Move time forward by `d`.
    pub fn advance(&self, d: Duration) {
        self.now.fetch_add(d.as_millis() as i64, Ordering::SeqCst);
    }
    /// Set the current instant (UTC unix ms).
    pub fn set(&self, ms: i64) {
        self.now.store(ms, Ordering::SeqCst);
    }
    /// Total time spent in [`Clock::sleep`] so far, in milliseconds.
    pub fn slept(&self) -> i64 {
        self.slept.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now.load(Ordering::SeqCst)
    }
    async fn sleep(&self, d: Duration) {
        let ms = d.as_millis() as i64;
        self.slept.fetch_add(ms, Ordering::SeqCst);
        self.now.fetch_add(ms, Ordering::SeqCst);
        tokio::task::yield_now().await;
    }
}

/// Format UTC unix ms as RFC 3339 with millisecond precision (`2026-01-01T00:00:00.000Z`).
pub fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Parse RFC 3339 into UTC unix ms.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|d| d.timestamp_millis())
}
