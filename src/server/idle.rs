//! A connection's idle clock (the header read timeout of [`super::listen`]), apart from the
//! connection layer so that the intake accounting ([`super::intake`]) reads it too.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// A connection's idle clock, for the header read timeout: how many of its requests are in
/// progress (from the head read to the end of the answer's body), and since when none has
/// been. A request stamps two atomics; the one timer, [`IdleClock::expired`], sleeps to the
/// deadline those stamps give and re-reads them when it wakes.
pub(super) struct IdleClock {
    started: Instant,
    /// Requests in progress.
    busy: AtomicUsize,
    /// When `busy` last fell to 0 (or the accept), in ms since `started`.
    idle_since_ms: AtomicU64,
}

impl IdleClock {
    pub(super) fn new() -> Self {
        IdleClock {
            started: Instant::now(),
            busy: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(0),
        }
    }

    /// Whether no request is in progress (the connection waits for a request head).
    pub(super) fn is_idle(&self) -> bool {
        self.busy.load(Ordering::Acquire) == 0
    }

    pub(super) fn begin(&self) {
        self.busy.fetch_add(1, Ordering::AcqRel);
    }

    pub(super) fn end(&self) {
        let ms = self.started.elapsed().as_millis() as u64;
        // Stamped before the count falls: whoever sees 0 sees this stamp or a later one.
        self.idle_since_ms.fetch_max(ms, Ordering::AcqRel);
        self.busy.fetch_sub(1, Ordering::AcqRel);
    }

    /// Resolves once the connection has gone `timeout` with no request in progress. While
    /// one is, it checks again a whole `timeout` later: the earliest the connection can then
    /// have been idle for that long.
    pub(super) async fn expired(&self, timeout: Duration) {
        let mut deadline = self.started + timeout;
        loop {
            tokio::time::sleep_until(deadline).await;
            if self.busy.load(Ordering::Acquire) > 0 {
                deadline = Instant::now() + timeout;
                continue;
            }
            let idle_since = Duration::from_millis(self.idle_since_ms.load(Ordering::Acquire));
            let idle_deadline = self.started + idle_since + timeout;
            if idle_deadline <= Instant::now() {
                return;
            }
            deadline = idle_deadline;
        }
    }
}
