//! Door first: while a burst of webhook deliveries is at the door, executions yield to it.
//!
//! A delivery's sender waits for its answer (GitHub gives up after 10 s and counts the
//! delivery failed; Stripe retries and, after enough failures, disables the endpoint), while an
//! accepted run is durable in the queue and can wait. So under a burst, taking deliveries
//! comes first and executing them second.
//!
//! On one machine the workers' threads already run at a lower CPU priority
//! ([`super::worker::run_runtime`], `--run-nice`). That does not reach a database several
//! processes share: a run's statements cost PostgreSQL several times a claim's (its take, its
//! final write re-indexing the run), and the database serves them at the door's priority.
//! Hence this second, store-independent rule: while [`DoorFirst::busy`] (at least
//! `busy_at` deliveries are inside [`super::ingest::accept`] at once, waiting for their claim
//! to be made durable), only the first worker takes new runs; the others wait until the door
//! has fewer ([`DoorFirst::turn`]). No run starves (one worker always executes), an idle or
//! lightly loaded server (fewer deliveries in the door than `busy_at`) executes at full speed,
//! and nothing accepted is lost: the queue is durable.
//!
//! `busy_at` is [`DOOR_BUSY_AT`] (16) in `fluxo serve` with `--run-nice` above 0, and 0
//! (never busy) with `--run-nice 0`. At 1,000 deliveries/s with a claim made durable in 5 ms,
//! about 5 are in the door at once; a burst from 64 connections keeps ~60 there.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// Deliveries in the door at once from which executions yield ([`DoorFirst`]): 16.
pub const DOOR_BUSY_AT: usize = 16;

/// How often a waiting worker looks again even without a wake-up: 50 ms.
const RECHECK: Duration = Duration::from_millis(50);

/// The count of deliveries in the door, and the wake-up of the workers waiting for it to
/// drop ([`DoorFirst::turn`]).
#[derive(Debug, Default)]
pub struct DoorFirst {
    in_door: AtomicUsize,
    /// 0: never busy.
    busy_at: usize,
    quiet: Notify,
}

/// A delivery in the door: counted from [`DoorFirst::enter`] until dropped.
#[must_use = "the delivery is counted until the guard is dropped"]
pub struct InDoor<'a>(&'a DoorFirst);

impl Drop for InDoor<'_> {
    fn drop(&mut self) {
        let before = self.0.in_door.fetch_sub(1, Ordering::AcqRel);
        if before == self.0.busy_at {
            // Below the mark now: the waiting workers may take runs again.
            self.0.quiet.notify_waiters();
        }
    }
}

impl DoorFirst {
    /// Executions yield while at least `busy_at` deliveries are in the door; 0 never yields.
    pub fn new(busy_at: usize) -> Self {
        DoorFirst {
            in_door: AtomicUsize::new(0),
            busy_at,
            quiet: Notify::new(),
        }
    }

    /// Count a delivery in the door until the guard is dropped.
    pub fn enter(&self) -> InDoor<'_> {
        self.in_door.fetch_add(1, Ordering::AcqRel);
        InDoor(self)
    }

    /// Deliveries in the door now.
    pub fn in_door(&self) -> usize {
        self.in_door.load(Ordering::Acquire)
    }

    /// Whether executions yield now: at least `busy_at` deliveries are in the door.
    pub fn busy(&self) -> bool {
        self.busy_at > 0 && self.in_door() >= self.busy_at
    }

    /// Wait until worker `worker` (0-based) may take a run: worker 0 at once, the others
    /// once the door is not [`busy`](DoorFirst::busy) (woken when it drops below the mark,
    /// and every 50 ms in any case).
    pub async fn turn(&self, worker: usize) {
        if worker == 0 {
            return;
        }
        while self.busy() {
            let quiet = self.quiet.notified();
            tokio::pin!(quiet);
            // Registered before the check: a drop below the mark in between is not missed.
            quiet.as_mut().enable();
            if !self.busy() {
                return;
            }
            tokio::select! {
                _ = quiet => {}
                _ = tokio::time::sleep(RECHECK) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Busy from the mark on; 0 never; the guard counts until dropped.
    #[test]
    fn busy_from_the_mark() {
        let door = DoorFirst::new(2);
        assert!(!door.busy());
        let a = door.enter();
        assert!(!door.busy());
        let b = door.enter();
        assert!(door.busy());
        assert_eq!(door.in_door(), 2);
        drop(a);
        assert!(!door.busy());
        drop(b);
        assert_eq!(door.in_door(), 0);

        let never = DoorFirst::new(0);
        let _g: Vec<_> = (0..100).map(|_| never.enter()).collect();
        assert!(!never.busy());
    }

    /// Worker 0 always takes runs; another worker waits while the door is busy and goes on
    /// as soon as a delivery leaves it below the mark (woken, not after a poll: time is
    /// paused, so only the wake-up can end the wait before the 50 ms recheck).
    #[tokio::test(start_paused = true)]
    async fn other_workers_wait_while_busy() {
        let door = Arc::new(DoorFirst::new(1));
        let guard = door.enter();
        tokio::time::timeout(Duration::from_millis(1), door.turn(0))
            .await
            .expect("worker 0 never waits");
        let waiting = {
            let door = door.clone();
            tokio::spawn(async move {
                let t0 = tokio::time::Instant::now();
                door.turn(3).await;
                t0.elapsed()
            })
        };
        // Let it start waiting, with the door busy throughout several rechecks.
        tokio::time::sleep(Duration::from_millis(120)).await;
        assert!(!waiting.is_finished(), "worker 3 waits while the door is busy");
        drop(guard);
        let waited = waiting.await.expect("task");
        assert_eq!(
            waited,
            Duration::from_millis(120),
            "woken when the door went quiet"
        );
    }
}
