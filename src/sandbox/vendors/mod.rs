//! Vendor fakes: HubSpot, Stripe, Slack and Google Sheets as their connectors see them, plus a
//! fake OAuth 2 server, mounted under path prefixes of the sandbox (`/hubspot`, `/stripe`,
//! `/slack`, `/sheets`, `/oauth`).
//!
//! Written from the vendors' public documentation, not from their OpenAPI documents or code.
//! They fake what a connector's dedupe strategy depends on: the endpoints it calls, the auth
//! it sends, each vendor's real duplicate behaviour and error bodies. The [module
//! docs](super) list the routes per app, the tokens and the controls.
//!
//! Every vendor request goes through one pipeline (`begin`, then the endpoint, then
//! `Ctx::done`) over the sandbox's own request handling, so it is logged in the request log
//! and the fault rules and the `X-Sandbox-Fault` header apply to it, answered in the vendor's
//! own error shapes: `rate_limit_429` is the vendor's 429 with `Retry-After`,
//! `error_500_*` its 500, `timeout_after_write` and `drop_connection*` as for collections. The
//! order: the body is read, the token checked (a refused token uses up no fault rule), the
//! fault chosen, `rate_limit_429` and `drop_connection` strike, `slow` waits,
//! `error_500_before_write` strikes, the endpoint runs, then the after-write faults.
//!
//! # Adding a fake
//!
//! One file `src/sandbox/vendors/<app>.rs` with a unit struct implementing `Fake` (its routes
//! under `/<app>`, its static-token prefix, its error bodies for a refused token, a 429, a 500
//! and an unknown route, a snapshot and a control command), its state as a field of
//! `VendorData` (so `POST /_sandbox/reset` forgets it), an entry in `FAKES`, and tests in
//! `tests/vendor_fakes.rs`.

mod hubspot;
mod oauth;
mod sheets;
mod slack;
mod stripe;

use std::collections::BTreeMap;

use axum::body::{to_bytes, Body, Bytes};
use axum::extract::{Path, Request, State};
use axum::http::header::{AUTHORIZATION, CONTENT_LENGTH, RETRY_AFTER};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::fault::Fault;
use super::handlers::{control, header_fault, problem, Call};
use super::idempotency::StoredResponse;
use super::state::SandboxState;

pub use oauth::pkce_s256;
pub use slack::DEFAULT_WEBHOOK_SECRET as SLACK_WEBHOOK_SECRET;

/// Static HubSpot tokens: any bearer token starting with this (like a private-app token).
pub const HUBSPOT_TOKEN_PREFIX: &str = "pat-sandbox-";
/// Static Stripe keys: any secret key starting with this (like a test-mode key).
pub const STRIPE_TOKEN_PREFIX: &str = "sk_test_sandbox_";
/// Static Slack tokens: any bot token starting with this.
pub const SLACK_TOKEN_PREFIX: &str = "xoxb-sandbox-";
/// Static Google tokens: any access token starting with this.
pub const SHEETS_TOKEN_PREFIX: &str = "ya29.sandbox-";

/// The fakes, in the order they are listed by `GET /_sandbox/vendors`.
static FAKES: [&dyn Fake; 4] = [
    &hubspot::HubSpot,
    &stripe::Stripe,
    &slack::Slack,
    &sheets::Sheets,
];

/// Path prefixes (without `/`) the fakes and the OAuth server own: never collection names.
pub fn reserved_prefixes() -> impl Iterator<Item = &'static str> {
    FAKES.iter().map(|f| f.app()).chain(["oauth"])
}

// ---------------------------------------------------------------------------------------------
// What every fake provides

/// Why a request's credentials were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AuthFailure {
    /// No `Authorization: Bearer …` header.
    Missing,
    /// A token the sandbox never issued (or issued for another app).
    Invalid { token: String },
    /// An OAuth access token past its expiry, by `ago_s` seconds.
    Expired { token: String, ago_s: u64 },
}

/// How an endpoint family renders the answers the pipeline gives on its behalf.
pub(crate) trait Style: Sync {
    /// `hubspot`, `stripe`, …: the path prefix without `/`, and the log's app name.
    fn app(&self) -> &'static str;
    /// A refused token, in the vendor's shape.
    fn unauthorized(&self, why: &AuthFailure) -> Answer;
    /// The vendor's 429 (the pipeline adds `Retry-After`).
    fn rate_limited(&self, retry_after_s: u64) -> Answer;
    /// The vendor's 500.
    fn server_error(&self) -> Answer;
    /// An unknown route under the prefix (`path` without the prefix).
    fn not_found(&self, method: &str, path: &str) -> Answer;
    /// A body that cannot be read (too large, not UTF-8, not the right format).
    fn bad_request(&self, message: &str) -> Answer;
}

/// A vendor fake: its routes and static tokens besides its error shapes.
pub(crate) trait Fake: Style {
    /// Static tokens this app accepts: any bearer token starting with this.
    fn token_prefix(&self) -> &'static str;
    /// Routes, with full paths (`/hubspot/crm/v3/…`).
    fn routes(&self) -> Router<SandboxState>;
    /// What `GET /_sandbox/vendors/{app}` shows.
    fn snapshot(&self, data: &VendorData, now_ms: i64) -> Value;
    /// `POST /_sandbox/vendors/{app}`: a setup command; `Err` is a 400's detail.
    fn control(&self, data: &mut VendorData, body: Value) -> Result<Value, String>;
    /// How many records of each kind it holds (`("hubspot contacts", 2)`): what `fluxo
    /// check` compares between deliveries. Kinds with none may be left out.
    fn counts(&self, data: &VendorData) -> Vec<(String, usize)>;
}

/// The desktop's sandbox layer over its connections store, as its env layer is over `env`:
/// a connection the store holds wins; one an `action` step names that nobody added is pointed
/// at its app's fake in the sandbox at `url` ([`sandbox_connection`]), so a template runs in
/// the sandbox before any account is connected. Listing, writes and the key are the store's:
/// Settings shows and edits only the connections a person added.
pub struct SandboxFallback {
    primary: std::sync::Arc<dyn crate::connections::ConnectionStore>,
    url: String,
}

impl SandboxFallback {
    /// `primary`, falling back to the fakes of the sandbox at `url`.
    pub fn new(
        primary: std::sync::Arc<dyn crate::connections::ConnectionStore>,
        url: impl Into<String>,
    ) -> Self {
        SandboxFallback {
            primary,
            url: url.into(),
        }
    }
}

impl crate::connections::ConnectionStore for SandboxFallback {
    fn get(
        &self,
        id: &str,
    ) -> Result<Option<crate::connections::Connection>, crate::connections::ConnectionError> {
        self.primary.get(id)
    }
    fn list(
        &self,
    ) -> Result<Vec<crate::connections::Connection>, crate::connections::ConnectionError> {
        self.primary.list()
    }
    fn put(
        &self,
        connection: crate::connections::Connection,
    ) -> Result<(), crate::connections::ConnectionError> {
        self.primary.put(connection)
    }
    fn remove(&self, id: &str) -> Result<bool, crate::connections::ConnectionError> {
        self.primary.remove(id)
    }
    fn state_key(&self) -> Option<crate::connections::key::ConnectionKey> {
        self.primary.state_key()
    }
    fn get_for(
        &self,
        id: &str,
        app: &str,
        kind: &str,
    ) -> Result<Option<crate::connections::Connection>, crate::connections::ConnectionError> {
        match self.primary.get_for(id, app, kind)? {
            Some(c) => Ok(Some(c)),
            None if crate::connections::validate_id(id).is_ok() => {
                Ok(sandbox_connection(app, id, &self.url, kind))
            }
            None => Ok(None),
        }
    }
}

/// Records per kind in every fake (`hubspot contacts` → 2), kinds with none left out.
pub(crate) fn counts(data: &VendorData) -> BTreeMap<String, usize> {
    FAKES
        .iter()
        .flat_map(|f| f.counts(data))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// A connection of `app` (a connector's app id: `hubspot`, `stripe`, `slack`,
/// `google_sheets`) to the fakes of the sandbox at `sandbox_url`, with a static token the
/// fake accepts, or for `kind` `webhook_url` the Slack webhook every fresh sandbox has.
/// `None` for an app without a fake. What `fluxo check` and the desktop's sandbox use.
pub fn sandbox_connection(
    app: &str,
    id: &str,
    sandbox_url: &str,
    kind: &str,
) -> Option<crate::connections::Connection> {
    use crate::connections::{Connection, Credential};
    let base = sandbox_url.trim_end_matches('/');
    let (prefix, token) = match app {
        "hubspot" => ("hubspot", HUBSPOT_TOKEN_PREFIX),
        "stripe" => ("stripe", STRIPE_TOKEN_PREFIX),
        "slack" => ("slack", SLACK_TOKEN_PREFIX),
        "google_sheets" => ("sheets", SHEETS_TOKEN_PREFIX),
        _ => return None,
    };
    let credential = if kind == "webhook_url" && app == "slack" {
        Credential::WebhookUrl {
            url: format!("{base}{}", slack::webhook_path(SLACK_WEBHOOK_SECRET)),
        }
    } else {
        Credential::Bearer {
            token: format!("{token}fluxo"),
        }
    };
    Some(Connection {
        id: id.to_string(),
        app: app.to_string(),
        name: format!("{app} (sandbox)"),
        credential,
        base_url: Some(format!("{base}/{prefix}")),
        values: Default::default(),
    })
}

/// The fakes' memory, inside the sandbox's state (so `POST /_sandbox/reset` forgets it).
#[derive(Debug)]
pub(crate) struct VendorData {
    pub(crate) oauth: oauth::OAuthData,
    /// Registered static tokens → the apps they work for (`None`: every app).
    pub(crate) tokens: BTreeMap<String, Option<Vec<String>>>,
    pub(crate) hubspot: hubspot::HubSpotData,
    pub(crate) stripe: stripe::StripeData,
    pub(crate) slack: slack::SlackData,
    pub(crate) sheets: sheets::SheetsData,
}

impl Default for VendorData {
    fn default() -> Self {
        VendorData {
            oauth: Default::default(),
            tokens: BTreeMap::new(),
            hubspot: Default::default(),
            stripe: Default::default(),
            slack: slack::SlackData::seeded(),
            sheets: Default::default(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Answers

/// An answer with the headers a stored response has no room for (rate-limit headers, …).
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub(crate) resp: StoredResponse,
    pub(crate) headers: Vec<(HeaderName, HeaderValue)>,
}

impl Answer {
    pub(crate) fn json(status: u16, content_type: &str, body: &Value) -> Self {
        Answer {
            resp: StoredResponse {
                status,
                content_type: content_type.into(),
                location: None,
                body: Bytes::from(body.to_string()),
            },
            headers: Vec::new(),
        }
    }

    pub(crate) fn text(status: u16, content_type: &str, body: &str) -> Self {
        Answer {
            resp: StoredResponse {
                status,
                content_type: content_type.into(),
                location: None,
                body: Bytes::from(body.to_string()),
            },
            headers: Vec::new(),
        }
    }

    pub(crate) fn stored(resp: StoredResponse) -> Self {
        Answer {
            resp,
            headers: Vec::new(),
        }
    }

    /// Add a header (skipped if the value is not a valid header value).
    pub(crate) fn header(mut self, name: &'static str, value: impl ToString) -> Self {
        if let Ok(v) = HeaderValue::from_str(&value.to_string()) {
            self.headers.push((HeaderName::from_static(name), v));
        }
        self
    }

    fn apply(&self, mut r: Response) -> Response {
        for (k, v) in &self.headers {
            r.headers_mut().insert(k.clone(), v.clone());
        }
        r
    }
}

/// A fresh `correlationId`-style id.
pub(crate) fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// `n` random letters and digits.
pub(crate) fn random_alnum(n: usize) -> String {
    use rand::distributions::Alphanumeric;
    use rand::Rng;
    rand::thread_rng()
        .sample_iter(&Alphanumeric)
        .take(n)
        .map(char::from)
        .collect()
}

/// RFC 3339 UTC with milliseconds, as HubSpot and Google write instants.
pub(crate) fn iso_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

// ---------------------------------------------------------------------------------------------
// Bodies

/// `application/x-www-form-urlencoded` pairs, in order (`+` is a space). `Err`: not UTF-8.
pub(crate) fn parse_form(bytes: &[u8]) -> Result<Vec<(String, String)>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "the body is not UTF-8".to_string())?;
    let decode = |s: &str| {
        let s = s.replace('+', " ");
        percent_encoding::percent_decode_str(&s)
            .decode_utf8()
            .map(|c| c.into_owned())
            .map_err(|_| "a form value is not UTF-8 once decoded".to_string())
    };
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            Ok((decode(k)?, decode(v)?))
        })
        .collect()
}

/// The query of a request as pairs.
pub(crate) fn query_pairs(parts: &Parts) -> Vec<(String, String)> {
    parse_form(parts.uri.query().unwrap_or("").as_bytes()).unwrap_or_default()
}

/// Is the request body JSON (by its `Content-Type`)?
pub(crate) fn is_json(parts: &Parts) -> bool {
    parts
        .headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("application/json")
        })
}

// ---------------------------------------------------------------------------------------------
// Auth

/// The bearer token of a request (`Authorization: Bearer <token>`, scheme case-insensitive).
pub(crate) fn bearer(headers: &HeaderMap) -> Option<String> {
    let v = headers.get(AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = v.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then(|| token.to_string())
}

/// Check a token for `app`: an OAuth access token the fake server issued and that has not
/// expired, a registered static token for the app, or one starting with the app's prefix.
pub(crate) fn check_token(
    state: &SandboxState,
    app: &str,
    token_prefix: &str,
    token: Option<String>,
) -> Result<(), AuthFailure> {
    let Some(token) = token else {
        return Err(AuthFailure::Missing);
    };
    if !token_prefix.is_empty()
        && token.len() > token_prefix.len()
        && token.starts_with(token_prefix)
    {
        return Ok(());
    }
    let now = state.now_ms();
    let data = state.lock();
    if let Some(apps) = data.vendors.tokens.get(&token) {
        if apps
            .as_ref()
            .is_none_or(|apps| apps.iter().any(|a| a == app))
        {
            return Ok(());
        }
    }
    match data.vendors.oauth.access_expiry(&token) {
        Some(expires) if now < expires => Ok(()),
        Some(expires) => Err(AuthFailure::Expired {
            ago_s: u64::try_from((now - expires) / 1000).unwrap_or(0),
            token,
        }),
        None => Err(AuthFailure::Invalid { token }),
    }
}

// ---------------------------------------------------------------------------------------------
// The pipeline

/// Whether an endpoint wants a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Auth {
    /// `Authorization: Bearer <token>` checked with [`check_token`].
    Bearer,
    /// The same, or HTTP Basic with the token as the user name (Stripe's two ways).
    BearerOrBasic,
    /// None (incoming webhooks: the URL is the secret; the OAuth server).
    Open,
}

/// The user name of `Authorization: Basic …`.
pub(crate) fn basic_user(headers: &HeaderMap) -> Option<String> {
    let v = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, b64) = v.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let text = String::from_utf8(oauth::base64_decode(b64.trim())?).ok()?;
    let user = text.split(':').next()?;
    (!user.is_empty()).then(|| user.to_string())
}

/// A vendor request past the front door: body read, token accepted, fault chosen, and neither
/// a 429 nor a dropped connection.
pub(crate) struct Ctx {
    pub(in crate::sandbox) call: Call,
    pub(crate) parts: Parts,
    pub(crate) body: Bytes,
    style: &'static dyn Style,
}

/// Send a refusal in `style` through `call` (logged, no after-write fault).
fn refuse_with(call: &Call, a: Answer) -> Response {
    let r = call.answer(&a.resp, false, None);
    a.apply(r)
}

/// The front of every vendor request. `Err`: already answered (and logged).
pub(crate) async fn begin(
    style: &'static dyn Style,
    token_prefix: &str,
    auth: Auth,
    state: SandboxState,
    req: Request,
) -> Result<Ctx, Response> {
    let (parts, body) = req.into_parts();
    let mut call = Call::new(state, &parts);
    let max = call.state.config().max_body_bytes;
    let declared = parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let too_large = format!("request bodies are limited to {max} bytes");
    if declared.is_some_and(|n| n > max as u64) {
        return Err(refuse_with(&call, style.bad_request(&too_large)));
    }
    let body = match to_bytes(body, max).await {
        Ok(b) => b,
        Err(_) => return Err(refuse_with(&call, style.bad_request(&too_large))),
    };
    let token = match auth {
        Auth::Open => None,
        Auth::Bearer => Some(bearer(&parts.headers)),
        Auth::BearerOrBasic => Some(bearer(&parts.headers).or_else(|| basic_user(&parts.headers))),
    };
    if let Some(token) = token {
        if let Err(why) = check_token(&call.state, style.app(), token_prefix, token) {
            return Err(refuse_with(&call, style.unauthorized(&why)));
        }
    }
    call.fault = match header_fault(&parts.headers) {
        Err(msg) => {
            return Err(call.fail(problem(StatusCode::BAD_REQUEST, "invalid_fault", msg)));
        }
        Ok(Some(choice)) => choice,
        Ok(None) => call
            .state
            .take_route_fault(parts.method.as_str(), &call.path),
    };
    match call.fault {
        Some(Fault::RateLimit429 { retry_after_s }) => {
            let a = style
                .rate_limited(retry_after_s)
                .header(RETRY_AFTER.as_str(), retry_after_s);
            return Err(refuse_with(&call, a));
        }
        Some(Fault::DropConnection) => return Err(call.drop_connection(false, None)),
        _ => {}
    }
    Ok(Ctx {
        call,
        parts,
        body,
        style,
    })
}

impl Ctx {
    /// `slow` waits, then `error_500_before_write` strikes. `Err`: answered.
    pub(crate) async fn before_write(&self) -> Result<(), Response> {
        self.call.delay().await;
        if self.call.fault == Some(Fault::Error500BeforeWrite) {
            return Err(refuse_with(&self.call, self.style.server_error()));
        }
        Ok(())
    }

    /// Answer a request the endpoint refused before writing (bad input): no after-write fault.
    pub(crate) fn refuse(self, a: Answer) -> Response {
        refuse_with(&self.call, a)
    }

    /// The endpoint ran and answered `a`: `error_500_after_write` replaces it (the write
    /// stays).
    pub(crate) fn ran(&self, a: Answer) -> Answer {
        if self.call.fault == Some(Fault::Error500AfterWrite) {
            self.style.server_error()
        } else {
            a
        }
    }

    /// Send `a` through the after-write faults (`timeout_after_write` holds it,
    /// `drop_connection_after_write` drops the connection).
    pub(crate) async fn finish(
        self,
        a: Answer,
        replayed: bool,
        record_id: Option<String>,
    ) -> Response {
        let r = self.call.finish(a.resp.clone(), replayed, record_id).await;
        a.apply(r)
    }

    /// [`Ctx::ran`] then [`Ctx::finish`].
    pub(crate) async fn done(self, a: Answer, record_id: Option<String>) -> Response {
        let a = self.ran(a);
        self.finish(a, false, record_id).await
    }

    /// Run a whole endpoint: the before-write faults, then `f` under the state's lock, then
    /// the after-write faults. `f` returns the answer and the record id for the log; an
    /// `Err` answer is a refusal (nothing written, no after-write fault).
    pub(crate) async fn run(
        self,
        f: impl FnOnce(&Ctx, &mut VendorData, i64) -> Result<(Answer, Option<String>), Answer>,
    ) -> Response {
        if let Err(r) = self.before_write().await {
            return r;
        }
        let now = self.call.state.now_ms();
        let result = {
            let state = self.call.state.clone();
            let mut data = state.lock();
            f(&self, &mut data.vendors, now)
        };
        match result {
            Ok((a, id)) => self.done(a, id).await,
            Err(a) => self.refuse(a),
        }
    }
}

/// An unknown route under a fake's prefix: the fake's 404, logged.
pub(crate) fn unknown_route(state: SandboxState, req: Request) -> Option<Response> {
    let path = req.uri().path().to_string();
    let (fake, rest) = FAKES
        .iter()
        .copied()
        .map(|f| f as &'static dyn Style)
        .chain([&oauth::OAuth as &'static dyn Style])
        .find_map(|f| {
            let rest = path.strip_prefix('/')?.strip_prefix(f.app())?;
            (rest.is_empty() || rest.starts_with('/')).then(|| (f, rest.to_string()))
        })?;
    let (parts, _) = req.into_parts();
    let call = Call::new(state, &parts);
    Some(refuse_with(
        &call,
        fake.not_found(parts.method.as_str(), &rest),
    ))
}

// ---------------------------------------------------------------------------------------------
// Routes and controls

/// The fakes' routes, the OAuth server and their controls, to merge into the sandbox router.
pub(crate) fn routes() -> Router<SandboxState> {
    let mut r = Router::new()
        .route("/_sandbox/vendors", get(list_vendors))
        .route(
            "/_sandbox/vendors/{app}",
            get(vendor_snapshot).post(vendor_control),
        )
        .route("/_sandbox/tokens", post(add_token))
        .route(
            "/_sandbox/oauth",
            get(oauth::control_get).post(oauth::control_post),
        )
        .route("/_sandbox/oauth/issued", get(oauth::control_issued))
        .merge(oauth::routes());
    for f in FAKES {
        r = r.merge(f.routes());
    }
    r
}

fn ok_json(status: StatusCode, v: &Value) -> Response {
    let mut r = Response::new(Body::from(v.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn find_fake(app: &str) -> Option<&'static dyn Fake> {
    FAKES.iter().copied().find(|f| f.app() == app)
}

async fn list_vendors() -> Response {
    let data: Vec<Value> = FAKES
        .iter()
        .map(|f| {
            json!({
                "app": f.app(),
                "prefix": format!("/{}", f.app()),
                "token_prefix": f.token_prefix(),
            })
        })
        .collect();
    ok_json(StatusCode::OK, &json!({"object": "list", "data": data}))
}

async fn vendor_snapshot(State(state): State<SandboxState>, Path(app): Path<String>) -> Response {
    let Some(fake) = find_fake(&app) else {
        return control(problem(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no vendor fake {app:?}"),
        ));
    };
    let now = state.now_ms();
    let v = fake.snapshot(&state.lock().vendors, now);
    ok_json(StatusCode::OK, &v)
}

async fn vendor_control(
    State(state): State<SandboxState>,
    Path(app): Path<String>,
    body: Bytes,
) -> Response {
    let Some(fake) = find_fake(&app) else {
        return control(problem(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no vendor fake {app:?}"),
        ));
    };
    let body: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return control(problem(
                StatusCode::BAD_REQUEST,
                "invalid_json",
                format!("body is not JSON: {e}"),
            ))
        }
    };
    let result = fake.control(&mut state.lock().vendors, body);
    match result {
        Ok(v) => ok_json(StatusCode::OK, &v),
        Err(msg) => control(problem(StatusCode::BAD_REQUEST, "invalid_control", msg)),
    }
}

/// Body of `POST /_sandbox/tokens`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenSpec {
    token: String,
    #[serde(default)]
    apps: Option<Vec<String>>,
}

async fn add_token(State(state): State<SandboxState>, body: Bytes) -> Response {
    let spec: TokenSpec = match serde_json::from_slice(&body) {
        Ok(s) => s,
        Err(e) => {
            return control(problem(
                StatusCode::BAD_REQUEST,
                "invalid_token_spec",
                format!("expected {{\"token\": \"...\", \"apps\": [\"hubspot\", ...]}}: {e}"),
            ))
        }
    };
    if spec.token.trim().is_empty() || spec.token.chars().any(|c| c.is_whitespace()) {
        return control(problem(
            StatusCode::BAD_REQUEST,
            "invalid_token_spec",
            "token must be non-empty, without whitespace",
        ));
    }
    if let Some(bad) = spec.apps.iter().flatten().find(|a| find_fake(a).is_none()) {
        let known: Vec<&str> = FAKES.iter().map(|f| f.app()).collect();
        return control(problem(
            StatusCode::BAD_REQUEST,
            "invalid_token_spec",
            format!("unknown app {bad:?}; expected one of {}", known.join(", ")),
        ));
    }
    let answer = json!({"token": spec.token, "apps": spec.apps});
    state.lock().vendors.tokens.insert(spec.token, spec.apps);
    ok_json(StatusCode::CREATED, &answer)
}

/// `Map` from a JSON value that should be an object (empty otherwise).
pub(crate) fn object(v: &Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(
            parse_form(b"email=a%40b.com&name=Ada+Lovelace&metadata[k]=v&flag").unwrap(),
            vec![
                ("email".into(), "a@b.com".into()),
                ("name".into(), "Ada Lovelace".into()),
                ("metadata[k]".into(), "v".into()),
                ("flag".into(), "".into()),
            ]
        );
        assert!(parse_form(b"a=%FF").is_err());
    }

    #[test]
    fn bearer_tokens() {
        let mut h = HeaderMap::new();
        assert_eq!(bearer(&h), None);
        h.insert(AUTHORIZATION, HeaderValue::from_static("bearer  abc "));
        assert_eq!(bearer(&h).as_deref(), Some("abc"));
        h.insert(AUTHORIZATION, HeaderValue::from_static("Basic abc"));
        assert_eq!(bearer(&h), None);
    }

    #[test]
    fn prefixes_are_reserved() {
        let all: Vec<&str> = reserved_prefixes().collect();
        assert_eq!(all, ["hubspot", "stripe", "slack", "sheets", "oauth"]);
    }
}
