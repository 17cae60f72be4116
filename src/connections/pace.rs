//! Pacing per connection (issue 35): the vendor's documented rate limit
//! ([`crate::connectors::RateLimit`]: `requests` per `per_s` seconds) honoured for each
//! connection, so 20 runs writing to HubSpot at once queue behind the limit instead of
//! collecting 429s. One generic cell rate limiter (`governor`) per connection, in this process,
//! on the engine's clock (tests move time; nothing sleeps for real).

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use governor::clock::{Clock as GovernorClock, Reference};
use governor::middleware::NoOpMiddleware;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

use crate::clock::Clock;
use crate::connectors::RateLimit;

/// The engine's clock as governor reads it: time since the Unix epoch.
#[derive(Clone)]
struct EngineClock(Arc<dyn Clock>);

impl GovernorClock for EngineClock {
    type Instant = Duration;
    fn now(&self) -> Duration {
        Duration::from_millis(self.0.now_ms().max(0) as u64)
    }
}

type Limiter = RateLimiter<NotKeyed, InMemoryState, EngineClock, NoOpMiddleware<Duration>>;

/// The rate limiters of every connection used in this process.
pub struct Pacer {
    clock: EngineClock,
    limiters: Mutex<HashMap<String, Arc<Limiter>>>,
}

impl std::fmt::Debug for Pacer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pacer").finish_non_exhaustive()
    }
}

impl Pacer {
    /// Limiters on `clock`.
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Pacer {
            clock: EngineClock(clock),
            limiters: Mutex::new(HashMap::new()),
        }
    }

    /// Take a slot for one request of `connection` under `limit`: `Duration::ZERO` when it may
    /// go now, else how long to wait before asking again. A limit of 0 requests never waits.
    pub fn check(&self, connection: &str, limit: &RateLimit) -> Duration {
        let (Some(n), Some(per)) = (
            NonZeroU32::new(limit.requests),
            NonZeroU32::new(limit.per_s),
        ) else {
            return Duration::ZERO;
        };
        let limiter = {
            let mut map = self.limiters.lock().unwrap_or_else(|e| e.into_inner());
            map.entry(format!("{connection}\u{0}{}/{}", n, per))
                .or_insert_with(|| {
                    let period = Duration::from_secs(u64::from(per.get())) / n.get();
                    let quota = Quota::with_period(period.max(Duration::from_nanos(1)))
                        .map(|q| q.allow_burst(n))
                        .unwrap_or_else(|| Quota::per_second(n));
                    Arc::new(RateLimiter::direct_with_clock(quota, self.clock.clone()))
                })
                .clone()
        };
        match limiter.check() {
            Ok(()) => Duration::ZERO,
            Err(not_until) => {
                let now = self.clock.now();
                let at = not_until.earliest_possible();
                Duration::from_nanos(at.duration_since(now).as_u64()).max(Duration::from_millis(1))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn a_burst_of_the_limit_goes_then_requests_are_spaced_by_the_period() {
        let clock = Arc::new(ManualClock::at_2026());
        let pacer = Pacer::new(clock.clone());
        let limit = RateLimit {
            requests: 5,
            per_s: 10,
            source: None,
        };
        for _ in 0..5 {
            assert_eq!(pacer.check("hubspot-sales", &limit), Duration::ZERO);
        }
        let wait = pacer.check("hubspot-sales", &limit);
        assert!(
            wait > Duration::from_millis(1900) && wait <= Duration::from_secs(2),
            "{wait:?}"
        );
        // Another connection has its own budget.
        assert_eq!(pacer.check("hubspot-support", &limit), Duration::ZERO);
        clock.advance(Duration::from_millis(2000));
        assert_eq!(pacer.check("hubspot-sales", &limit), Duration::ZERO);
    }
}
