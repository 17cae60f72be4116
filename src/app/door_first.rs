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
//! Hence this second, store-independent rule: while [`DoorFirst::busy`], only the first worker
//! takes new runs; the others wait until it is not ([`DoorFirst::turn`]). Busy means both:
//!
//! * a burst: at least `busy_at` deliveries are inside [`super::ingest::accept`] at once,
//!   waiting for their claim to be made durable. At 1,000 deliveries/s with a claim made
//!   durable in 5 ms about 5 are there at once; a burst from 64 connections keeps ~60 there;
//! * the CPU is contended: tasks waited for a CPU during at least [`CPU_CONTENDED`] (20%) of
//!   the last ~100 ms, by Linux's pressure stall information (`/proc/pressure/cpu`, `some`;
//!   77% under the load benchmark's bursts here, 0% idle). A machine with cores to spare
//!   executes at full speed however many deliveries it takes at once: many concurrent senders
//!   alone must not stall the queue. Without the file (another OS, a kernel without PSI) the
//!   CPU never counts as contended, so executions never yield (the workers' nice value still
//!   applies where it can).
//!
//! No run starves (one worker always executes), a server that is not saturated executes at
//! full speed, and nothing accepted is lost: the queue is durable. What it does not see: a
//! shared database saturated on another host while this one idles.
//!
//! `busy_at` is [`DOOR_BUSY_AT`] (8) in `fluxo serve` with `--run-nice` above 0, and 0
//! (never busy) with `--run-nice 0`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// Deliveries in the door at once from which executions yield ([`DoorFirst`]) when the CPU is
/// contended: 8. Three processes sharing a burst from 64 connections keep ~20 each there.
pub const DOOR_BUSY_AT: usize = 8;

/// Share of time tasks waited for a CPU from which the CPU counts as contended: 20%.
pub const CPU_CONTENDED: f64 = 0.2;

/// How often a waiting worker looks again even without a wake-up: 50 ms.
const RECHECK: Duration = Duration::from_millis(50);

/// Shortest interval the CPU's pressure is measured over: 100 ms.
const PRESSURE_EVERY: Duration = Duration::from_millis(100);

/// Whether the CPU is contended now ([`CpuPressure`] on Linux; a fixed answer in tests).
pub type Contended = Box<dyn Fn() -> bool + Send + Sync>;

/// The count of deliveries in the door, whether the CPU is contended, and the wake-up of the
/// workers waiting for the door to be less busy ([`DoorFirst::turn`]).
pub struct DoorFirst {
    in_door: AtomicUsize,
    /// 0: never busy.
    busy_at: usize,
    contended: Contended,
    quiet: Notify,
}

impl std::fmt::Debug for DoorFirst {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DoorFirst")
            .field("in_door", &self.in_door)
            .field("busy_at", &self.busy_at)
            .finish_non_exhaustive()
    }
}

/// Linux's CPU pressure (`/proc/pressure/cpu`, the `some` line's `total`: µs during which at
/// least one runnable task waited for a CPU), measured over the time since the last reading
/// once at least `PRESSURE_EVERY` (100 ms) has passed; readings in between answer the last
/// verdict.
pub struct CpuPressure {
    /// The last reading: when, the `some` total then, the verdict over the span before it.
    last: Mutex<(Instant, u64, bool)>,
}

impl CpuPressure {
    /// `None` where the kernel gives no CPU pressure (another OS, PSI disabled).
    pub fn new() -> Option<Self> {
        let total = Self::read()?;
        Some(CpuPressure {
            last: Mutex::new((Instant::now(), total, false)),
        })
    }

    /// The `some` total in µs.
    fn read() -> Option<u64> {
        let text = std::fs::read_to_string("/proc/pressure/cpu").ok()?;
        let some = text.lines().find(|l| l.starts_with("some "))?;
        some.split_whitespace()
            .find_map(|f| f.strip_prefix("total="))?
            .parse()
            .ok()
    }

    /// Whether tasks waited for a CPU during at least [`CPU_CONTENDED`] of the time measured.
    pub fn contended(&self) -> bool {
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        let (at, total, verdict) = *last;
        if now.duration_since(at) < PRESSURE_EVERY {
            return verdict;
        }
        let Some(t) = Self::read() else {
            return false;
        };
        let waited = t.saturating_sub(total) as f64;
        let span = now.duration_since(at).as_micros().max(1) as f64;
        let verdict = waited / span >= CPU_CONTENDED;
        *last = (now, t, verdict);
        verdict
    }
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
    /// Executions yield while at least `busy_at` deliveries are in the door and the CPU is
    /// contended ([`CpuPressure`]); 0 never yields, nor does a system without CPU pressure.
    pub fn new(busy_at: usize) -> Self {
        let contended: Contended = match CpuPressure::new() {
            Some(p) if busy_at > 0 => Box::new(move || p.contended()),
            _ => Box::new(|| false),
        };
        Self::with_contended(busy_at, contended)
    }

    /// [`DoorFirst::new`] with `contended` telling whether the CPU is contended (tests).
    pub fn with_contended(busy_at: usize, contended: Contended) -> Self {
        DoorFirst {
            in_door: AtomicUsize::new(0),
            busy_at,
            contended,
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

    /// Whether executions yield now: at least `busy_at` deliveries are in the door and the
    /// CPU is contended.
    pub fn busy(&self) -> bool {
        self.busy_at > 0 && self.in_door() >= self.busy_at && (self.contended)()
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

    fn contended(busy_at: usize) -> DoorFirst {
        DoorFirst::with_contended(busy_at, Box::new(|| true))
    }

    /// Busy from the mark on, with the CPU contended; 0 never; the guard counts until dropped.
    #[test]
    fn busy_from_the_mark() {
        let door = contended(2);
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

        let never = contended(0);
        let _g: Vec<_> = (0..100).map(|_| never.enter()).collect();
        assert!(!never.busy());

        // Many deliveries at once on a CPU with time to spare: not busy.
        let spare = DoorFirst::with_contended(2, Box::new(|| false));
        let _g: Vec<_> = (0..100).map(|_| spare.enter()).collect();
        assert!(!spare.busy());
    }

    /// The pressure of a busy CPU is read as contended, of an idle one not (Linux with PSI;
    /// elsewhere the reading is absent and nothing yields).
    #[test]
    fn cpu_pressure_follows_the_machine() {
        let Some(p) = CpuPressure::new() else {
            assert!(!DoorFirst::new(1).busy(), "no PSI: never busy");
            return;
        };
        // More spinning threads than cores for a few readings: tasks wait for a CPU.
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let spinners: Vec<_> = (0..cores * 3)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        std::thread::sleep(PRESSURE_EVERY * 2);
        let busy = p.contended();
        stop.store(true, Ordering::Relaxed);
        for s in spinners {
            s.join().unwrap();
        }
        assert!(busy, "three spinning threads per core: contended");
    }

    /// Worker 0 always takes runs; another worker waits while the door is busy and goes on
    /// as soon as a delivery leaves it below the mark (woken, not after a poll: time is
    /// paused, so only the wake-up can end the wait before the 50 ms recheck).
    #[tokio::test(start_paused = true)]
    async fn other_workers_wait_while_busy() {
        let door = Arc::new(contended(1));
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
        assert!(
            !waiting.is_finished(),
            "worker 3 waits while the door is busy"
        );
        drop(guard);
        let waited = waiting.await.expect("task");
        assert_eq!(
            waited,
            Duration::from_millis(120),
            "woken when the door went quiet"
        );
    }
}
