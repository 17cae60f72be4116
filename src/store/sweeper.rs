//! Background housekeeping: removes expired Memory entries, webhook claims and API
//! idempotency records on a timer.
//!
//! Expired records are already invisible to reads (every read checks expiry against the
//! caller's clock); the sweeper only reclaims their space.

use std::sync::Arc;
use std::time::Duration;

use super::Store;
use crate::clock::Clock;

/// Records removed per store call; a pass repeats calls until one removes fewer.
const SWEEP_BATCH: usize = 1_000;

/// Upper bound of store calls per pass and kind, so one pass cannot run forever while
/// records keep expiring.
const MAX_CALLS_PER_PASS: usize = 100;

/// What one sweep pass removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Expired Memory entries removed.
    pub memory: usize,
    /// Expired webhook claims and API idempotency records removed.
    pub idempotency: usize,
}

/// One sweep pass at `now_ms` (UTC unix ms): calls [`super::MemoryStore::sweep_expired`] and
/// [`super::IdempotencyStore::sweep_idempotency`] in batches until nothing due is left (or a
/// bounded number of batches ran).
pub async fn sweep_once(store: &dyn Store, now_ms: i64) -> super::StoreResult<SweepReport> {
    let mut report = SweepReport::default();
    for _ in 0..MAX_CALLS_PER_PASS {
        let n = store.sweep_expired(now_ms, SWEEP_BATCH).await?;
        report.memory += n;
        if n < SWEEP_BATCH {
            break;
        }
    }
    for _ in 0..MAX_CALLS_PER_PASS {
        let n = store.sweep_idempotency(now_ms, SWEEP_BATCH).await?;
        report.idempotency += n;
        if n < SWEEP_BATCH {
            break;
        }
    }
    Ok(report)
}

/// Spawns a task that runs [`sweep_once`] at `clock.now_ms()` every `every` (first pass right
/// away). The period is real (tokio) time rather than
/// [`Clock::sleep`], because a manual clock's sleep returns at once and would spin. Failures
/// are logged and retried at the next tick. Abort the returned handle to stop it.
pub fn spawn_sweeper(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every.max(Duration::from_millis(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match sweep_once(&*store, clock.now_ms()).await {
                Ok(r) if r != SweepReport::default() => {
                    tracing::debug!(memory = r.memory, idempotency = r.idempotency, "swept")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "store sweep failed"),
            }
        }
    })
}
