//! Bounded intake: which connections and bodies in progress the server keeps when clients
//! crowd it (issue 42). The only accounting Fluxo owns beside hyper's and tokio's own limits
//! ([`super::listen`]): a count per client address, and the order in which connections and
//! bodies came, so that the oldest can make room.
//!
//! * **A body in progress** (a "slow body") is a request body that made its handler wait for
//!   data at least once ([`super::layers::GuardedBody`]), until it is read whole or fails. A
//!   body that came with its head (the usual webhook, the API's small JSON) never is one.
//! * **Bodies in progress per address** ([`ConnLimits::max_slow_bodies_per_ip`], default 64):
//!   past it, that address's oldest body in progress is shed.
//! * **The reserve** ([`ConnLimits::reserved_connections`], default 64): at most
//!   `max_connections - reserved_connections` bodies are in progress at once, from all
//!   addresses; past it the oldest of them all is shed. So slow uploads never hold the last
//!   connection slots: `/healthz`, the API and a webhook whose body comes at once always find
//!   one, whoever sends the slow bodies, from whatever address.
//! * **Connections per address** ([`ConnLimits::max_connections_per_ip`], default 256), while
//!   the server is crowded (`max_connections - reserved_connections` or more open): a new
//!   connection from an address that has that many sheds the address's oldest body in
//!   progress; if it has none, the new connection is refused (`503 too_many_connections`,
//!   closed). Connections that wait for a request head are never shed: one may be a client
//!   sharing the address with an attacker (one NAT, a proxy, loopback in the tests), about to
//!   send its request.
//!
//! A body that is shed fails with [`Shed`], answered `503 server_busy` with `Retry-After: 1`
//! and `Connection: close` ([`super::body::body_bytes`]); nothing of it was accepted, so the
//! sender's retry is a first delivery. An idle connection that is shed is closed, as the
//! keep-alive timeout closes one. The oldest go first: a legitimate body arrives within
//! milliseconds, so it is seldom the oldest, while a slow upload only ever gets older; the
//! time limits of [`super::layers::GuardedBody`] end the rest.
//!
//! One mutex guards the accounting; it is taken once per connection (accept and close), and
//! per body only when that body has to wait (twice: it starts to wait, it ends).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Waker;

use futures_util::task::AtomicWaker;
use tokio::sync::Notify;

use super::idle::IdleClock;
use crate::app::ConnLimits;

/// Why a connection or a body was shed, with the limit that shed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shed {
    /// Its address had `--max-slow-bodies-per-ip` bodies in progress, and a newer one came.
    SlowBodiesPerIp(usize),
    /// `max_connections - reserved_connections` bodies were in progress, and a newer one came.
    Reserve(usize),
    /// Its address had `--max-connections-per-ip` connections, and a newer one came.
    ConnectionsPerIp(usize),
}

impl std::fmt::Display for Shed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Shed::SlowBodiesPerIp(n) => write!(
                f,
                "the server is busy: {n} request bodies from your address were in progress, \
                 this was the oldest (--max-slow-bodies-per-ip); retry"
            ),
            Shed::Reserve(n) => write!(
                f,
                "the server is busy: {n} request bodies were in progress, this was the oldest \
                 (--max-connections minus --reserved-connections); retry"
            ),
            Shed::ConnectionsPerIp(n) => write!(
                f,
                "the server is busy: {n} connections from your address were open \
                 (--max-connections-per-ip); retry"
            ),
        }
    }
}

impl Shed {
    fn code(self) -> u8 {
        match self {
            Shed::SlowBodiesPerIp(_) => 1,
            Shed::Reserve(_) => 2,
            Shed::ConnectionsPerIp(_) => 3,
        }
    }
}

/// The limits of [`Intake`], from [`ConnLimits`].
#[derive(Debug, Clone, Copy)]
struct Caps {
    conns_per_ip: usize,
    bodies_per_ip: usize,
    bodies: usize,
}

/// The accounting of connections and bodies in progress, per address and in all.
pub struct Intake {
    caps: Caps,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Numbers connections and bodies in progress in the order they came.
    next: u64,
    /// Connections open (accepted, not yet closed).
    open: usize,
    by_ip: HashMap<IpAddr, PerIp>,
    /// Every body in progress, oldest first.
    bodies: BTreeMap<u64, Arc<Conn>>,
}

impl State {
    /// Shed `conn`: it no longer counts as its address's connection nor as a body in
    /// progress (it is going away), and its task and body reader are told.
    fn shed(&mut self, conn: &Arc<Conn>, why: Shed) {
        let body = conn.body.swap(0, Ordering::AcqRel);
        if body != 0 {
            self.bodies.remove(&body);
        }
        if let Some(per) = self.by_ip.get_mut(&conn.ip) {
            per.bodies.remove(&body);
            per.conns.remove(&conn.id);
        }
        conn.make_shed(why);
    }

    /// Shed the connection of the body in progress numbered `body`.
    fn shed_body(&mut self, body: u64, why: Shed) {
        match self.bodies.get(&body).cloned() {
            Some(conn) => self.shed(&conn, why),
            // Not in progress (cannot happen: both are changed together); forget it.
            None => {
                for per in self.by_ip.values_mut() {
                    per.bodies.remove(&body);
                }
            }
        }
    }
}

#[derive(Default)]
struct PerIp {
    /// The address's connections, oldest first.
    conns: BTreeMap<u64, Arc<Conn>>,
    /// The address's bodies in progress, oldest first.
    bodies: BTreeSet<u64>,
}

/// One connection as the intake knows it.
/// The client address of a request (its connection's peer), set by the connection layer as
/// a request extension: what per-address rules read (wrong API tokens, [`super::auth`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub IpAddr);

pub struct Conn {
    id: u64,
    ip: IpAddr,
    /// Its requests in progress and idle time (the header read timeout's clock).
    pub(super) clock: IdleClock,
    /// The number of its body in progress; 0 if none. Written under the intake's mutex.
    body: AtomicU64,
    /// 0, or the [`Shed::code`] it was shed with (then `shed_limit`).
    shed: AtomicU8,
    shed_limit: AtomicU64,
    /// The task reading its body in progress, woken when it is shed.
    waker: AtomicWaker,
    /// Tells the connection's task it was shed (see [`super::listen`]).
    pub(super) closing: Notify,
}

impl Conn {
    /// The client's address.
    pub(super) fn ip(&self) -> IpAddr {
        self.ip
    }

    /// Why it was shed, if it was.
    pub fn shed(&self) -> Option<Shed> {
        let limit = || self.shed_limit.load(Ordering::Acquire) as usize;
        match self.shed.load(Ordering::Acquire) {
            0 => None,
            1 => Some(Shed::SlowBodiesPerIp(limit())),
            2 => Some(Shed::Reserve(limit())),
            _ => Some(Shed::ConnectionsPerIp(limit())),
        }
    }

    /// Mark it shed, wake its body's reader and its task.
    fn make_shed(&self, why: Shed) {
        let limit = match why {
            Shed::SlowBodiesPerIp(n) | Shed::Reserve(n) | Shed::ConnectionsPerIp(n) => n,
        };
        self.shed_limit.store(limit as u64, Ordering::Release);
        if self
            .shed
            .compare_exchange(0, why.code(), Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.waker.wake();
            self.closing.notify_one();
        }
    }
}

impl Intake {
    /// The accounting for `limits` (the reserve is at most half of `max_connections`; every
    /// cap is at least 1).
    pub fn new(limits: &ConnLimits) -> Self {
        let max = limits.max_connections.max(1);
        let reserve = limits.reserved_connections.min(max / 2);
        Intake {
            caps: Caps {
                conns_per_ip: limits.max_connections_per_ip.max(1),
                bodies_per_ip: limits.max_slow_bodies_per_ip.max(1),
                bodies: (max - reserve).max(1),
            },
            state: Mutex::new(State::default()),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // The accounting stays consistent whatever panicked while holding it (each change is
        // made whole before anything can panic), so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new connection from `ip`: its record, or the reason it is refused (every connection
    /// of its address has a request in its handler).
    pub fn connect(&self, ip: IpAddr) -> Result<Arc<Conn>, Shed> {
        let ip = ip.to_canonical();
        let caps = self.caps;
        let mut st = self.state();
        let st = &mut *st;
        st.next += 1;
        let id = st.next;
        let per = st.by_ip.entry(ip).or_default();
        // Only while the server is crowded (the reserve is in use): with slots to spare,
        // refusing a connection helps nobody, and it may be a client sharing the address.
        if per.conns.len() >= caps.conns_per_ip && st.open >= caps.bodies {
            // Its oldest body in progress makes room (a sender known to be slow); a
            // connection that may be about to send its request never does.
            let why = Shed::ConnectionsPerIp(caps.conns_per_ip);
            let Some(old) = per.bodies.first().and_then(|b| st.bodies.get(b)).cloned() else {
                return Err(why);
            };
            st.shed(&old, why);
        }
        let per = st.by_ip.entry(ip).or_default();
        let conn = Arc::new(Conn {
            id,
            ip,
            clock: IdleClock::new(),
            body: AtomicU64::new(0),
            shed: AtomicU8::new(0),
            shed_limit: AtomicU64::new(0),
            waker: AtomicWaker::new(),
            closing: Notify::new(),
        });
        per.conns.insert(id, conn.clone());
        st.open += 1;
        Ok(conn)
    }

    /// The connection closed.
    pub fn disconnect(&self, conn: &Conn) {
        let mut st = self.state();
        let st = &mut *st;
        st.open -= 1;
        let body = conn.body.swap(0, Ordering::AcqRel);
        if body != 0 {
            st.bodies.remove(&body);
        }
        if let Some(per) = st.by_ip.get_mut(&conn.ip) {
            per.conns.remove(&conn.id);
            per.bodies.remove(&body);
            if per.conns.is_empty() && per.bodies.is_empty() {
                st.by_ip.remove(&conn.ip);
            }
        }
    }

    /// `conn`'s body starts to wait: it is in progress from now on (once), and the oldest
    /// bodies past the caps are shed.
    fn body_waits(&self, conn: &Arc<Conn>) {
        let caps = self.caps;
        let mut st = self.state();
        let st = &mut *st;
        if conn.body.load(Ordering::Acquire) != 0 || conn.shed().is_some() {
            return;
        }
        st.next += 1;
        let n = st.next;
        conn.body.store(n, Ordering::Release);
        st.bodies.insert(n, conn.clone());
        st.by_ip.entry(conn.ip).or_default().bodies.insert(n);
        let why = Shed::SlowBodiesPerIp(caps.bodies_per_ip);
        while let Some(oldest) = st
            .by_ip
            .get(&conn.ip)
            .filter(|per| per.bodies.len() > caps.bodies_per_ip)
            .and_then(|per| per.bodies.first().copied())
        {
            st.shed_body(oldest, why);
        }
        let why = Shed::Reserve(caps.bodies);
        while st.bodies.len() > caps.bodies {
            let Some(oldest) = st.bodies.keys().next().copied() else {
                break;
            };
            st.shed_body(oldest, why);
        }
    }

    /// `conn`'s body is no longer in progress (read whole, failed or dropped).
    fn body_done(&self, conn: &Conn) {
        if conn.body.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut st = self.state();
        let body = conn.body.swap(0, Ordering::AcqRel);
        if body == 0 {
            return;
        }
        st.bodies.remove(&body);
        if let Some(per) = st.by_ip.get_mut(&conn.ip) {
            per.bodies.remove(&body);
        }
    }

    /// Bodies in progress now, in all and from `ip` (for tests and logs).
    pub fn bodies_in_progress(&self, ip: IpAddr) -> (usize, usize) {
        let st = self.state();
        let of_ip = st
            .by_ip
            .get(&ip.to_canonical())
            .map_or(0, |p| p.bodies.len());
        (st.bodies.len(), of_ip)
    }
}

/// A request body's place in the intake: its connection's record (see
/// [`super::layers::GuardedBody`]). Ends the body in progress when dropped.
pub struct BodySlot {
    intake: Arc<Intake>,
    conn: Arc<Conn>,
    waiting: bool,
}

impl BodySlot {
    pub fn new(intake: Arc<Intake>, conn: Arc<Conn>) -> Self {
        BodySlot {
            intake,
            conn,
            waiting: false,
        }
    }

    /// Why the connection was shed, if it was.
    pub fn shed(&self) -> Option<Shed> {
        self.conn.shed()
    }

    /// The body waits for data: it is in progress (from the first wait on); `waker` is woken
    /// if it is shed. Answers why it was shed, if it was.
    pub fn waiting(&mut self, waker: &Waker) -> Option<Shed> {
        self.conn.waker.register(waker);
        if !self.waiting {
            self.waiting = true;
            self.intake.body_waits(&self.conn);
        }
        self.conn.shed()
    }

    /// The body is no longer in progress.
    pub fn done(&mut self) {
        if self.waiting {
            self.waiting = false;
            self.intake.body_done(&self.conn);
        }
    }
}

impl Drop for BodySlot {
    fn drop(&mut self) {
        self.done();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;
    use std::task::Waker;

    fn limits(max: usize, reserve: usize, per_ip_conns: usize, per_ip_bodies: usize) -> ConnLimits {
        ConnLimits {
            max_connections: max,
            reserved_connections: reserve,
            max_connections_per_ip: per_ip_conns,
            max_slow_bodies_per_ip: per_ip_bodies,
            ..ConnLimits::default()
        }
    }

    fn ip(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(127, 0, 0, last))
    }

    /// A connection of `ip` whose body waits (a request in progress, as hyper makes one).
    fn slow_body(intake: &Arc<Intake>, ip: IpAddr) -> (Arc<Conn>, BodySlot) {
        let conn = intake.connect(ip).unwrap();
        conn.clock.begin();
        let mut slot = BodySlot::new(intake.clone(), conn.clone());
        slot.waiting(Waker::noop());
        (conn, slot)
    }

    /// Past the per-address cap the address's oldest body is shed; another address's are not.
    #[test]
    fn the_oldest_body_of_an_address_is_shed() {
        let intake = Arc::new(Intake::new(&limits(100, 10, 50, 3)));
        let (other, _o) = slow_body(&intake, ip(9));
        let bodies: Vec<_> = (0..4).map(|_| slow_body(&intake, ip(2))).collect();
        assert_eq!(bodies[0].0.shed(), Some(Shed::SlowBodiesPerIp(3)));
        assert!(bodies[1..].iter().all(|(c, _)| c.shed().is_none()));
        assert_eq!(other.shed(), None);
        assert_eq!(intake.bodies_in_progress(ip(2)), (4, 3));
    }

    /// Past `max - reserve` bodies in all, the oldest of any address is shed.
    #[test]
    fn bodies_never_take_the_reserve() {
        let intake = Arc::new(Intake::new(&limits(10, 4, 50, 50)));
        let bodies: Vec<_> = (0..8).map(|i| slow_body(&intake, ip(i + 1))).collect();
        let shed: Vec<_> = bodies.iter().map(|(c, _)| c.shed()).collect();
        assert_eq!(shed[0], Some(Shed::Reserve(6)));
        assert_eq!(shed[1], Some(Shed::Reserve(6)));
        assert!(shed[2..].iter().all(Option::is_none), "{shed:?}");
        assert_eq!(intake.bodies_in_progress(ip(1)).0, 6);
        // A finished body leaves room.
        drop(bodies);
        assert_eq!(intake.bodies_in_progress(ip(1)).0, 0);
    }

    /// While the server is crowded, a new connection past the per-address cap sheds the
    /// address's oldest body in progress; with none, it is refused; never a connection that
    /// waits for its request. With slots to spare the cap does not apply.
    #[test]
    fn a_new_connection_past_the_cap_sheds_a_body_or_is_refused() {
        // max 4, reserve 2: crowded from 2 open connections on.
        let intake = Arc::new(Intake::new(&limits(4, 2, 2, 10)));
        let (slow, _slot) = slow_body(&intake, ip(2));
        let idle = intake.connect(ip(2)).unwrap();
        let newer = intake.connect(ip(2)).unwrap();
        assert_eq!(slow.shed(), Some(Shed::ConnectionsPerIp(2)));
        assert_eq!(idle.shed(), None, "waiting for its request: never shed");
        assert_eq!(intake.connect(ip(2)).err(), Some(Shed::ConnectionsPerIp(2)));
        // Another address is not affected; a closed connection leaves room.
        assert!(intake.connect(ip(3)).is_ok());
        intake.disconnect(&slow);
        intake.disconnect(&newer);
        assert!(intake.connect(ip(2)).is_ok());
        // Not crowded: the cap does not apply.
        let roomy = Intake::new(&limits(100, 10, 2, 10));
        assert!((0..5).all(|_| roomy.connect(ip(2)).is_ok()));
    }

    /// A shed body's slot no longer counts, and ending it twice is harmless.
    #[test]
    fn a_shed_body_leaves_the_count_at_once() {
        let intake = Arc::new(Intake::new(&limits(100, 10, 50, 1)));
        let (first, mut slot) = slow_body(&intake, ip(2));
        let (_second, _s2) = slow_body(&intake, ip(2));
        assert!(first.shed().is_some());
        assert_eq!(intake.bodies_in_progress(ip(2)), (1, 1));
        slot.done();
        slot.done();
        assert_eq!(intake.bodies_in_progress(ip(2)), (1, 1));
        // A shed connection's body does not start to count again.
        assert!(slot.waiting(Waker::noop()).is_some());
        assert_eq!(intake.bodies_in_progress(ip(2)), (1, 1));
    }
}
