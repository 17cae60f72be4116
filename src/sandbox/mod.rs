//! `fluxo sandbox`: a local stand-in for a destination system.
//!
//! A small CRM/ledger that workflows post to in tests, demos and `fluxo check`, built to show
//! what makes automations unsafe to re-run and what makes them safe: idempotency keys, unique
//! external ids, find-or-create, and the faults that turn a naive retry into a duplicate.
//!
//! # Routes
//!
//! Collections: `contacts`, `deals`, `invoices`, `tickets` exist from the start; any other name
//! matching `[a-z0-9_-]{1,64}` works too (created on first write).
//!
//! * `POST /{collection}` — create from a JSON object body (anything else: `400`
//!   problem+json). Assigns `id` (`deal_0001`, `contact_0002`, …: the name without its final
//!   `s`, then a per-collection counter that is never reused) and `created_at` (RFC 3339 UTC),
//!   overriding any given. Answers `201` with the record and `Location`. An `external_id`
//!   (non-empty string or number) must be unique in the collection, compared by string form:
//!   a second one → `409 {"code": "duplicate_external_id", "existing_id": "deal_0001", …}`.
//!   Honours `Idempotency-Key` (see [`idempotency`] for the rules and where each comes from).
//! * `GET /{collection}` — `{"object": "list", "data": [...]}` in creation order;
//!   `GET /{collection}?field=value&…` keeps records whose top-level fields all equal the values
//!   (exact match on the field's string form: strings as is, others as JSON, e.g. `42`, `true`):
//!   the "find" half of find-or-create.
//! * `GET /{collection}/{id}` — the record, or `404`.
//! * `DELETE /{collection}/{id}` — `{"id": ..., "deleted": true}`, or `404`.
//!
//! Controls (never logged, never faulted):
//!
//! * `GET /_sandbox/log` — the request log ([`LogEntry`]: method, path, idempotency key, fault,
//!   status, outcome, time, replayed, record id), oldest first.
//! * `GET /_sandbox/records` — every collection with its records.
//! * `POST /_sandbox/reset` — forget records, keys, log and fault rules.
//! * `GET|POST|DELETE /_sandbox/faults`, `DELETE /_sandbox/faults/{id}` — per-route fault
//!   rules: `POST` `{"route": "POST /deals", "fault": "timeout_after_write", "times": 1}`
//!   (`times` omitted: until cleared).
//! * `GET /healthz`.
//!
//! Errors are RFC 9457 problem details (`application/problem+json`) with a `code` member, as in
//! Fluxo's own API (SPEC §5).
//!
//! # Faults
//!
//! Per request with `X-Sandbox-Fault: <fault>` (`none` disables a route rule for that request),
//! or per route with a rule; see [`Fault`] for the list (`timeout_after_write`,
//! `error_500_before_write`, `error_500_after_write`, `rate_limit_429[:secs]`, `slow:<ms>`,
//! `drop_connection`, `drop_connection_after_write`). Answered requests carrying a fault get an
//! `X-Sandbox-Fault-Applied` header.
//!
//! # Idempotency keys, in one paragraph
//!
//! Stripe's semantics ("Idempotent requests"): the first result of a keyed `POST` is stored and
//! replayed byte for byte with `Idempotent-Replayed: true`; the same key with a different body
//! (canonical JSON) → `409 idempotency_conflict`; while the first is running →
//! `409 idempotency_in_progress` (IETF draft-ietf-httpapi-idempotency-key-header); results of
//! requests refused before they ran (`rate_limit_429`, `error_500_before_write`,
//! `drop_connection`, invalid bodies) are not stored, so a retry runs afresh; a request that ran
//! stores its result even if the client never saw it (`timeout_after_write`,
//! `drop_connection_after_write`) or saw a 500 (`error_500_after_write`), so a retry with the
//! same key gets that result instead of a duplicate record.
//!
//! # Example
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use fluxo::sandbox::Sandbox;
//! let sandbox = Sandbox::start("127.0.0.1:0".parse().unwrap()).await?;
//! println!("sandbox at {}", sandbox.url());
//! // ... post to sandbox.url() + "/deals" ...
//! let deals = sandbox.state().records("deals");
//! sandbox.shutdown().await;
//! # let _ = deals; Ok(()) }
//! ```

pub mod conn;
pub mod fault;
mod handlers;
pub mod idempotency;
pub mod state;
pub mod vendors;

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub use conn::ConnHandle;
pub use fault::{Fault, FaultRule, FaultRuleSpec, FAULT_HEADER};
pub use handlers::{router, FAULT_APPLIED_HEADER};
pub use idempotency::REPLAYED_HEADER;
pub use state::{LogEntry, Outcome, SandboxConfig, SandboxState, BUILTIN_COLLECTIONS};

/// How long [`SandboxHandle::shutdown`] waits for connections to wind down before aborting.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Starts sandbox servers.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sandbox;

impl Sandbox {
    /// Bind `addr` (port 0 picks a free port) and serve with the default settings.
    pub async fn start(addr: SocketAddr) -> io::Result<SandboxHandle> {
        Self::start_with(addr, SandboxConfig::default()).await
    }

    /// Bind `addr` and serve with `config`.
    pub async fn start_with(addr: SocketAddr, config: SandboxConfig) -> io::Result<SandboxHandle> {
        let listener = TcpListener::bind(addr).await?;
        Self::serve(listener, SandboxState::new(config))
    }

    /// Serve `state` on a bound listener, in a background task. This server can drop
    /// connections on purpose (`drop_connection`), which a [`router`] mounted elsewhere cannot.
    pub fn serve(listener: TcpListener, state: SandboxState) -> io::Result<SandboxHandle> {
        let addr = listener.local_addr()?;
        let app = router(state.clone()).into_make_service_with_connect_info::<ConnHandle>();
        let signal = state.clone();
        let task = tokio::spawn(async move {
            axum::serve(conn::KillableListener::new(listener), app)
                .with_graceful_shutdown(async move { signal.shutdown_signalled().await })
                .await
        });
        Ok(SandboxHandle {
            addr,
            state,
            task: Some(task),
        })
    }
}

/// A running sandbox. Dropping it signals shutdown without waiting; prefer
/// [`SandboxHandle::shutdown`].
#[derive(Debug)]
pub struct SandboxHandle {
    /// The bound address (the real port when bound to port 0).
    pub addr: SocketAddr,
    state: SandboxState,
    task: Option<JoinHandle<io::Result<()>>>,
}

impl SandboxHandle {
    /// `http://{addr}`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The live state: records, request log, fault rules, reset.
    pub fn state(&self) -> &SandboxState {
        &self.state
    }

    /// Stop: held requests drop their connections, delayed ones carry on at once, idle
    /// connections close; waits for that (up to 5 s, then aborts the server task).
    pub async fn shutdown(mut self) {
        self.state.signal_shutdown();
        if let Some(mut task) = self.task.take() {
            if tokio::time::timeout(SHUTDOWN_GRACE, &mut task)
                .await
                .is_err()
            {
                task.abort();
            }
        }
    }
}

impl Drop for SandboxHandle {
    fn drop(&mut self) {
        self.state.signal_shutdown();
    }
}
