//! The run event journal: every [`RunEvent`] the engine emits gets an id and is kept in a
//! bounded ring buffer, so a client of the event stream that reconnects with the last id it
//! saw receives everything after it, once, in order (SPEC §5 `GET /events`, handed case C13).
//!
//! * **Ids** are decimal integers that only grow, across restarts too: the first event of a
//!   process is `start × 1,000,000 + 1` (`start`: the process's start in unix milliseconds,
//!   from the system clock), then `+1` per event. So an id from an earlier process lifetime is
//!   always below this one's first id, and is told apart from an id this process gave.
//! * **The buffer** keeps the newest [`EVENT_BUFFER`] (1,024) events. An id older than the
//!   buffer, from another process lifetime, newer than the newest event or not a number
//!   cannot be resumed from: [`EventJournal::resume`] answers a [`Reset`] saying what was
//!   lost instead of silently skipping.
//! * **No gap, no repeat:** an id is assigned, the event is buffered and it is broadcast under
//!   one lock, and a subscriber takes its receiver and its copy of the buffer under the same
//!   lock; so each event is either in the copy or on the receiver, never both nor neither.
//!   Consumers still drop any id at or below the last one they delivered.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use tokio::sync::broadcast;

use super::executor::RunEvent;

/// How many recent events the journal keeps for reconnecting clients.
pub const EVENT_BUFFER: usize = 1024;

/// An event with its id.
#[derive(Debug, Clone, PartialEq)]
pub struct Journaled {
    /// The event id (see the module doc).
    pub id: u64,
    pub event: RunEvent,
}

/// Why a resume from a `Last-Event-ID` is not possible: the `data` of a `reset` event. The
/// client should reload what it shows (the run list), then go on with the live events.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[schema(as = EventReset)]
pub struct Reset {
    /// `too_old` (the events after it left the buffer), `restarted` (the id is from an earlier
    /// process lifetime: this process's events started after it), `unknown` (newer than the
    /// newest event, or not an id of this stream).
    pub reason: &'static str,
    /// The `Last-Event-ID` the client sent.
    pub last_event_id: String,
    /// How many events after it are lost, when known (`too_old`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub missed: Option<u64>,
    /// The oldest event id still buffered, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oldest_available: Option<String>,
    /// The id of the newest event before the live ones that follow: the `id` of the `reset`
    /// event itself, so the next reconnect resumes from there.
    #[serde(skip)]
    pub id: u64,
}

/// What a subscriber starts with: a reset or the buffered events after its id, then the live
/// events on `live` (whose ids at or below `last_id` are already delivered).
pub struct Resume {
    pub reset: Option<Reset>,
    pub backlog: Vec<Arc<Journaled>>,
    pub live: broadcast::Receiver<Arc<Journaled>>,
    /// The newest id delivered by `reset`/`backlog` (or the newest event at subscription).
    pub last_id: u64,
}

struct Inner {
    /// The newest id given (the first id minus one before any event).
    last: u64,
    buf: VecDeque<Arc<Journaled>>,
}

/// The journal (one per engine; cheap to share through an `Arc`).
pub struct EventJournal {
    /// The id before this process's first event.
    base: u64,
    cap: usize,
    inner: Mutex<Inner>,
    tx: broadcast::Sender<Arc<Journaled>>,
}

impl Default for EventJournal {
    fn default() -> Self {
        Self::new(EVENT_BUFFER)
    }
}

impl EventJournal {
    /// A journal keeping the newest `cap` events (at least 1), ids based on the system clock.
    pub fn new(cap: usize) -> Self {
        let start_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        Self::with_base(cap, start_ms.saturating_mul(1_000_000))
    }

    /// A journal whose first id is `base + 1` (tests).
    pub fn with_base(cap: usize, base: u64) -> Self {
        let cap = cap.max(1);
        let (tx, _) = broadcast::channel(cap);
        EventJournal {
            base,
            cap,
            inner: Mutex::new(Inner {
                last: base,
                buf: VecDeque::with_capacity(cap),
            }),
            tx,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Give `event` the next id, buffer it (dropping the oldest past the capacity) and
    /// broadcast it.
    pub fn publish(&self, event: RunEvent) {
        let mut inner = self.lock();
        inner.last += 1;
        let j = Arc::new(Journaled {
            id: inner.last,
            event,
        });
        if inner.buf.len() == self.cap {
            inner.buf.pop_front();
        }
        inner.buf.push_back(j.clone());
        let _ = self.tx.send(j);
    }

    /// The newest id given so far (the id before the first event when there is none).
    pub fn last_id(&self) -> u64 {
        self.lock().last
    }

    /// Subscribe, resuming after `last_event_id` (the `Last-Event-ID` header) when given: the
    /// buffered events after it, or a [`Reset`] when they are not all buffered.
    pub fn resume(&self, last_event_id: Option<&str>) -> Resume {
        let inner = self.lock();
        let live = self.tx.subscribe();
        let Some(given) = last_event_id else {
            return Resume {
                reset: None,
                backlog: Vec::new(),
                live,
                last_id: inner.last,
            };
        };
        match self.after(&inner, given) {
            Ok(backlog) => Resume {
                reset: None,
                last_id: backlog.last().map(|j| j.id).unwrap_or(inner.last),
                backlog,
                live,
            },
            Err(reset) => Resume {
                last_id: reset.id,
                reset: Some(reset),
                backlog: Vec::new(),
                live,
            },
        }
    }

    /// The buffered events after `last` (a slow subscriber catching up), or a [`Reset`].
    pub fn catch_up(&self, last: u64) -> Result<Vec<Arc<Journaled>>, Reset> {
        let inner = self.lock();
        self.after(&inner, &last.to_string())
    }

    fn after(&self, inner: &Inner, given: &str) -> Result<Vec<Arc<Journaled>>, Reset> {
        let oldest = inner.buf.front().map(|j| j.id);
        let reset = |reason: &'static str, missed: Option<u64>| Reset {
            reason,
            last_event_id: given.chars().take(64).collect(),
            missed,
            oldest_available: oldest.map(|o| o.to_string()),
            id: inner.last,
        };
        let Ok(id) = given.trim().parse::<u64>() else {
            return Err(reset("unknown", None));
        };
        if id > inner.last {
            return Err(reset("unknown", None));
        }
        if id < self.base {
            return Err(reset("restarted", None));
        }
        // Every id in (id, last] must still be buffered: the first one missing is id + 1.
        let first_needed = id + 1;
        match oldest {
            Some(o) if o > first_needed => Err(reset("too_old", Some(o - first_needed))),
            None if id < inner.last => Err(reset("too_old", Some(inner.last - id))),
            _ => Ok(inner.buf.iter().filter(|j| j.id > id).cloned().collect()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{Mode, Timestamp};

    fn ev(n: u64) -> RunEvent {
        RunEvent {
            event: "run_started",
            run_id: format!("r{n}"),
            workflow_id: "wf".into(),
            step_id: None,
            status: "running".into(),
            mode: Mode::Live,
            at: Timestamp(0),
        }
    }

    fn ids(v: &[Arc<Journaled>]) -> Vec<u64> {
        v.iter().map(|j| j.id).collect()
    }

    #[test]
    fn resumes_after_an_id_in_the_buffer_and_resets_before_it() {
        let j = EventJournal::with_base(4, 1000);
        for n in 0..6 {
            j.publish(ev(n));
        }
        // Ids 1001..=1006; the buffer holds 1003..=1006.
        assert_eq!(j.last_id(), 1006);
        let r = j.resume(Some("1004"));
        assert!(r.reset.is_none());
        assert_eq!(ids(&r.backlog), vec![1005, 1006]);
        assert_eq!(r.last_id, 1006);
        // The oldest buffered id minus one is still complete.
        assert_eq!(
            ids(&j.resume(Some("1002")).backlog),
            vec![1003, 1004, 1005, 1006]
        );
        let r = j.resume(Some("1006"));
        assert!(r.reset.is_none() && r.backlog.is_empty());

        let reset = j.resume(Some("1001")).reset.expect("too old");
        assert_eq!(reset.reason, "too_old");
        assert_eq!(reset.missed, Some(1));
        assert_eq!(reset.oldest_available.as_deref(), Some("1003"));
        assert_eq!(reset.id, 1006);
        assert_eq!(j.resume(Some("999")).reset.unwrap().reason, "restarted");
        assert_eq!(j.resume(Some("1007")).reset.unwrap().reason, "unknown");
        assert_eq!(j.resume(Some("abc")).reset.unwrap().reason, "unknown");
    }

    #[test]
    fn an_empty_journal_resumes_from_its_base_and_a_live_event_follows() {
        let j = EventJournal::with_base(4, 50);
        let mut r = j.resume(Some("50"));
        assert!(r.reset.is_none() && r.backlog.is_empty());
        j.publish(ev(1));
        assert_eq!(r.live.try_recv().unwrap().id, 51);
        assert_eq!(j.catch_up(51).unwrap().len(), 0);
        assert_eq!(ids(&j.catch_up(50).unwrap()), vec![51]);
    }
}
