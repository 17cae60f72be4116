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
//! * `POST /_sandbox/reset` — forget records, keys, log and fault rules, and the vendor fakes'
//!   records, tokens and settings.
//! * `GET|POST|DELETE /_sandbox/faults`, `DELETE /_sandbox/faults/{id}` — per-route fault
//!   rules: `POST` `{"route": "POST /deals", "fault": "timeout_after_write", "times": 1}`
//!   (`times` omitted: until cleared).
//! * `GET /healthz`.
//!
//! Errors are RFC 9457 problem details (`application/problem+json`) with a `code` member, as in
//! Fluxo's own API (SPEC §5).
//!
//! # Vendor fakes
//!
//! The same server fakes the four apps the connectors write to (issue 35), each under its own
//! prefix, so a connection's base URL is `http://127.0.0.1:<port>/hubspot` (and `/stripe`,
//! `/slack`, `/sheets`). Written from the vendors' public documentation; what they fake is
//! what a connector's dedupe depends on: each vendor's duplicate behaviour and error bodies.
//! Their records live in the sandbox's state (`POST /_sandbox/reset` forgets them), their
//! requests go to the request log, and the fault rules and `X-Sandbox-Fault` apply to them,
//! answered in the vendor's own shapes (`rate_limit_429` is the vendor's 429 with
//! `Retry-After`; the `*_500_*` faults its 500). The prefixes are not collection names. See
//! [`vendors`] for the pipeline and how to add a fake.
//!
//! **Tokens.** Every vendor route but Slack's webhooks wants `Authorization: Bearer <token>`:
//! an access token of the fake OAuth server (good for every app until it expires), a static
//! token starting with the app's prefix (`pat-sandbox-…` HubSpot, `sk_test_sandbox_…` Stripe,
//! which also takes it as the HTTP Basic user name like Stripe, `xoxb-sandbox-…` Slack,
//! `ya29.sandbox-…` Google), or one registered with `POST /_sandbox/tokens`. A refused token
//! is the vendor's own 401 (Slack: `200 {"ok": false, "error": "not_authed" | "invalid_auth" |
//! "token_expired"}`); it uses up no fault rule.
//!
//! **HubSpot** (`/hubspot`, CRM v3 objects, `contacts` and `deals`):
//!
//! * `POST /crm/v3/objects/{contacts|deals}` `{"properties": {...}}` → `201 {"id": "1001",
//!   "properties", "createdAt", "updatedAt", "archived": false}` (values stored as strings). A
//!   contact whose `email` exists (case-insensitive) → `409 {"status": "error", "message":
//!   "Contact already exists. Existing ID: 1001", "correlationId", "category": "CONFLICT"}`.
//!   Deals have no unique property: every create is a new deal.
//! * `POST /crm/v3/objects/contacts/batch/upsert` `{"inputs": [{"idProperty": "email", "id",
//!   "properties"}]}` → `200 {"status": "COMPLETE", "results": [... "new": bool]}`.
//! * `POST /crm/v3/objects/{type}/search` (`filterGroups` of `EQ`, `NEQ`, `LT`…`GTE`,
//!   `BETWEEN`, `IN`, `NOT_IN`, `HAS_PROPERTY`, `NOT_HAS_PROPERTY`, `CONTAINS_TOKEN`;
//!   `properties`, `limit`, `after`) → `{"total", "results", "paging"}`; records younger than
//!   `search_lag_ms` (0 unless set) are not found yet, like HubSpot's search index.
//! * `GET /crm/v3/objects/{type}?limit=&after=&properties=`, `GET|PATCH
//!   /crm/v3/objects/{type}/{id}` (`?idProperty=email` finds a contact by email).
//! * Errors `{"status": "error", "message", "correlationId", "category"}`: `401
//!   INVALID_AUTHENTICATION` ("Authentication credentials not found…"), an expired OAuth
//!   token `401 EXPIRED_AUTHENTICATION` ("The OAuth token used to make this call expired …
//!   ago."), `400 VALIDATION_ERROR`, `404 OBJECT_NOT_FOUND`; 429 `{"errorType":
//!   "RATE_LIMIT", "policyName": "TEN_SECONDLY_ROLLING", "message": "You have reached your
//!   ten_secondly_rolling limit."}` with `X-HubSpot-RateLimit-*` headers.
//!
//! **Stripe** (`/stripe`, form-encoded bodies):
//!
//! * `POST /v1/customers` (`email`, `name`, `description`, `phone`, `metadata[key]`,
//!   `address[field]`; anything else `400 parameter_unknown`) → `200` customer
//!   `{"id": "cus_…", "object": "customer", …}`; `POST /v1/customers/{id}` updates (an empty
//!   value clears). Every `POST` honours `Idempotency-Key`: the same key and parameters replay
//!   the first answer with `Idempotent-Replayed: true`; the same key with other parameters (or
//!   another endpoint) → `400 {"error": {"type": "idempotency_error", "message": "Keys for
//!   idempotent requests can only be used with the same parameters they were first used
//!   with…"}}`; still running → `409 idempotency_key_in_use`; over 255 characters → `400`.
//!   As for collections, results of requests that ran are kept (after-write faults included),
//!   refusals before the write are not.
//! * `GET /v1/customers?email=&limit=&starting_after=&ending_before=` → `{"object": "list",
//!   "data", "has_more", "url": "/v1/customers"}`, newest first, consistent (the find);
//!   `GET /v1/customers/{id}` (missing: `404 resource_missing`).
//! * Errors `{"error": {"type", "code", "message", "param"}}`: a bad key `401 "Invalid API Key
//!   provided: sk_test_****1234"` (masked like Stripe), expired `401 api_key_expired`, 429
//!   `rate_limit`, 500 `api_error`.
//!
//! **Slack** (`/slack`):
//!
//! * `POST /api/chat.postMessage` (JSON or form: `channel` as `C…`, `name` or `#name`, `text`,
//!   `blocks`, `thread_ts`) → `200 {"ok": true, "channel": "C000000001", "ts":
//!   "1767225600.000001", "message"}`; no dedupe (a retry is a second message).
//! * `POST /api/chat.update` (`channel`, `ts`, `text`/`blocks`); `GET|POST
//!   /api/conversations.history?channel=&limit=&oldest=&latest=` (newest first); `GET|POST
//!   /api/auth.test`.
//! * Errors are `200 {"ok": false, "error": "channel_not_found" | "no_text" |
//!   "message_not_found" | "invalid_blocks" | "msg_too_long" | …}`; a rate limit is `429
//!   {"ok": false, "error": "ratelimited"}` with `Retry-After`.
//! * Channels `#general`, `#random`, `#alerts` exist. Incoming webhooks: `POST
//!   /services/T000/B000/<secret>` (JSON, or form `payload=`) → `200 ok` (plain text) and the
//!   message in its channel; a URL that is not a webhook → `404 no_service`; no text → `400
//!   no_text`. `/services/T000/B000/XXXXXXXXXXXXXXXXXXXXXXXX` posts to `#general`.
//!
//! **Google Sheets** (`/sheets`, API v4):
//!
//! * `POST /v4/spreadsheets/{id}/values/{range}:append?valueInputOption=RAW|USER_ENTERED`
//!   `{"values": [[...]]}` → `{"spreadsheetId", "tableRange", "updates": {"updatedRange":
//!   "Sheet1!A5:C5", "updatedRows", "updatedColumns", "updatedCells"}}`, written below the last
//!   row with data in the range's columns; no dedupe (a retried append is a second row).
//! * `GET /v4/spreadsheets/{id}/values/{range}[?majorDimension=&valueRenderOption=]` →
//!   `{"range", "majorDimension": "ROWS", "values"}` (formatted as text unless
//!   `UNFORMATTED_VALUE`); `PUT /v4/spreadsheets/{id}/values/{range}?valueInputOption=`;
//!   `POST /v4/spreadsheets`, `GET /v4/spreadsheets/{id}`.
//! * A spreadsheet id (`[A-Za-z0-9_-]`) is created on first use with one sheet `Sheet1`.
//! * Errors `{"error": {"code", "message", "status"}}`: `401 UNAUTHENTICATED` (with an
//!   `ErrorInfo` reason `CREDENTIALS_MISSING` or `ACCESS_TOKEN_EXPIRED`), `400
//!   INVALID_ARGUMENT` ("Unable to parse range: …"), `429 RESOURCE_EXHAUSTED`, `500 INTERNAL`.
//!
//! **OAuth** (`/oauth`, one fake server for every app):
//!
//! * `GET /oauth/authorize?response_type=code&client_id=&redirect_uri=&state=&code_challenge=
//!   &code_challenge_method=S256[&scope=]`: approves at once and redirects (`302`) to the
//!   `redirect_uri`, which must be a loopback `http` URL, with `code` and `state` (or `error`).
//! * `POST /oauth/token` (form or JSON): `grant_type=authorization_code` (`code`,
//!   `redirect_uri`, `client_id`, `code_verifier` checked against the S256 challenge; a code
//!   is single use) or `grant_type=refresh_token`. Answers `{"access_token", "token_type":
//!   "bearer", "expires_in", "refresh_token"}`; access tokens live 1800 s
//!   ([`SandboxConfig::access_token_ttl`]); refresh tokens rotate: each refresh returns a new
//!   one and spends the old, whose reuse is `400 {"error": "invalid_grant"}`. Any `client_id`
//!   is accepted.
//!
//! Vendor controls (never logged, never faulted):
//!
//! * `GET /_sandbox/vendors` — the fakes with their prefixes and static-token prefixes.
//! * `GET /_sandbox/vendors/{app}` — the fake's records: HubSpot's contacts and deals,
//!   Stripe's customers, Slack's channels with their messages and the webhooks with what each
//!   received, the spreadsheets' cells.
//! * `POST /_sandbox/vendors/{app}` — setup: HubSpot `{"search_lag_ms": 2000}`; Slack
//!   `{"channel": "deals"}` (a channel) or `{"webhook": {"channel": "deals"}}` (answers the
//!   new webhook's path); Sheets `{"spreadsheet": "id", "sheets": ["Events", "Log"]}`.
//! * `POST /_sandbox/tokens` `{"token": "…", "apps": ["slack"]}` — a static token (`apps`
//!   omitted: every app).
//! * `GET /_sandbox/oauth` — `{"access_token_ttl_s", "refreshes", "refresh_failures",
//!   "reused_refresh_tokens", "authorizations", "code_exchanges", "access_tokens": {"active",
//!   "expired"}, …}`; `POST /_sandbox/oauth` `{"access_token_ttl_s": 1,
//!   "expire_access_tokens": true, "deny_authorization": true}` (each optional).
//! * `GET /_sandbox/oauth/issued` — `{"access_tokens": [...], "refresh_tokens": [...]}`:
//!   every token issued since the last reset (rotated-out refresh tokens included).
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
