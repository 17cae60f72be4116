//! The live stream of run events (`GET /api/v1/events`), resumable from the last event a
//! client saw ([`crate::runtime::journal`]: ids, the buffer of the newest 1,024 events).
//!
//! [`stream`] answers, in order: on a connection without `Last-Event-ID`, the
//! [`Delivery::Position`] it starts from; a [`Delivery::Reset`] when the events after `last_event_id`
//! are not all buffered any more (then only live events), or else every buffered event after
//! it, once, in order; then the live events. A consumer too slow for the live channel catches
//! up from the buffer, or gets a reset when what it missed has left the buffer too. Ids only
//! grow, and none is delivered twice.

use std::sync::Arc;

use futures_core::Stream;
use tokio::sync::broadcast::error::RecvError;

use super::AppState;
use crate::runtime::journal::{EventJournal, Resume};
pub use crate::runtime::journal::{Journaled, Reset, EVENT_BUFFER};

/// One item of the event stream.
#[derive(Debug, Clone)]
pub enum Delivery {
    /// A run event with its id.
    Run(Arc<Journaled>),
    /// The events after the client's id cannot all be sent: reload, then follow the live ones.
    Reset(Reset),
    /// Where the stream starts, on a connection without `Last-Event-ID`: the id of the newest
    /// event so far (sent as an `id:` line without data, which sets a browser `EventSource`'s
    /// last id without firing an event), so a reconnect before any event still resumes from
    /// the moment of the first connection.
    Position(u64),
}

struct Cursor {
    journal: Arc<EventJournal>,
    resume: Resume,
    /// Reset and backlog, still to deliver (in order).
    pending: std::collections::VecDeque<Delivery>,
}

/// The run events after `last_event_id` (the client's `Last-Event-ID`, if any; without one,
/// only the events from now on), then the live ones, as [`Delivery`] items. Never ends while
/// the engine lives.
pub fn stream(state: &AppState, last_event_id: Option<&str>) -> impl Stream<Item = Delivery> {
    let journal = state.engine().journal().clone();
    let mut resume = journal.resume(last_event_id);
    let mut pending: std::collections::VecDeque<Delivery> = Default::default();
    if last_event_id.is_none() {
        pending.push_back(Delivery::Position(resume.last_id));
    }
    if let Some(r) = resume.reset.take() {
        pending.push_back(Delivery::Reset(r));
    }
    pending.extend(resume.backlog.drain(..).map(Delivery::Run));
    let cursor = Cursor {
        journal,
        resume,
        pending,
    };
    futures_util::stream::unfold(cursor, |mut c| async move {
        loop {
            if let Some(d) = c.pending.pop_front() {
                return Some((d, c));
            }
            match c.resume.live.recv().await {
                Ok(j) if j.id <= c.resume.last_id => continue,
                Ok(j) => {
                    c.resume.last_id = j.id;
                    return Some((Delivery::Run(j), c));
                }
                Err(RecvError::Lagged(_)) => match c.journal.catch_up(c.resume.last_id) {
                    Ok(missed) => {
                        if let Some(last) = missed.last() {
                            c.resume.last_id = last.id;
                        }
                        c.pending.extend(missed.into_iter().map(Delivery::Run));
                    }
                    Err(reset) => {
                        c.resume.last_id = reset.id;
                        c.pending.push_back(Delivery::Reset(reset));
                    }
                },
                Err(RecvError::Closed) => return None,
            }
        }
    })
}
