//! `POST /hooks/{workflow_id}`: the webhook trigger with dedupe at the door (SPEC §5).
//!
//! 0. Every route: the `Host` must be one of the server's names (421, [`super::door`]).
//! 1. The workflow must exist, validate and start with a `webhook_trigger`.
//! 2. The door ([`super::door`]): no request a browser sends on another site's behalf unless
//!    its origin is on the trigger's `allowed_origins` (403 `cross_site_request`), and a JSON
//!    media type (415 `unsupported_media_type`).
//! 3. Optional HMAC signature (401), JSON body (400). (The body limit, 413, and the body read
//!    timeout, 408, apply while the body is read, before any of this.)
//! 4. Key: `Idempotency-Key` (bare or RFC 8941 quoted), else `X-Fluxo-Event-Id`, else the
//!    trigger's `dedupe_key` template over the body, else no dedupe. A malformed key is
//!    `400 invalid_idempotency_key`, never a silent run without dedupe. With a
//!    `signing_secret` the key headers are ignored: the key is the `dedupe_key` (default
//!    `{{ input.id }}`) over the signed body, so a captured signed delivery replayed with
//!    `Idempotency-Key: <another event>` cannot claim that event's key.
//! 5. The claim (window from the first delivery, never extended) and the queued run are
//!    written in one transaction, made durable by the group commit, then `202
//!    {"run_id", "duplicate": false}`. A repeat within the window is `200 {"run_id":
//!    <original>, "duplicate": true}` and writes nothing. If queuing fails nothing stays
//!    claimed: `503` with `Retry-After`.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use super::door;
use super::error::{ApiError, ApiResult};
use super::runs::{body_bytes, parse_json};
use super::AppState;
use crate::run::{Mode, Trigger};
use crate::runtime::RunRequest;
use crate::steps::webhook_trigger::{self, validate_key};
use crate::steps::{key_text, parse_config};
use crate::store::{ClaimOutcome, WebhookClaim};
use crate::workflow::template::{Scope, Templates};

/// Signature header: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`.
pub const SIGNATURE_HEADER: &str = "x-fluxo-signature";
/// Signature timestamp tolerance: 5 minutes.
pub const SIGNATURE_TOLERANCE_S: i64 = 300;

/// The webhook handler.
pub async fn webhook(
    State(state): State<AppState>,
    Path(workflow_id): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    let body = body_bytes(body, state.options().body_limit_bytes)?;
    let entry = state.workflows().get(&workflow_id).ok_or_else(|| {
        ApiError::not_found("workflow_not_found", format!("no workflow `{workflow_id}`"))
    })?;
    let wf = entry.compiled.clone().ok_or_else(|| {
        ApiError::conflict(
            "workflow_invalid",
            format!("workflow `{workflow_id}` has validation errors; fix them in the editor first"),
        )
    })?;
    let trigger = wf.trigger();
    if trigger.kind != "webhook_trigger" {
        return Err(ApiError::not_found(
            "no_webhook_trigger",
            format!(
                "workflow `{workflow_id}` starts with `{}`, not a webhook_trigger",
                trigger.kind
            ),
        ));
    }
    let config: webhook_trigger::Config = parse_config(&trigger.config).map_err(|_| {
        ApiError::conflict(
            "workflow_invalid",
            format!("workflow `{workflow_id}`: bad trigger config"),
        )
    })?;
    let allowed_origins: Vec<webhook_trigger::WebOrigin> = config
        .allowed_origins
        .iter()
        .filter_map(|o| webhook_trigger::WebOrigin::parse(o).ok())
        .collect();
    door::check_cross_site(&headers, &allowed_origins)?;
    door::check_media_type(&headers)?;
    let now = state.clock().now_ms();

    if let Some(secret_tmpl) = &config.signing_secret {
        let secret =
            render_text(secret_tmpl, &Value::Null, &state.engine().env()).map_err(|e| {
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "signing_secret_unavailable",
                    format!("the trigger's signing_secret cannot be resolved: {e}"),
                )
            })?;
        verify_signature(&headers, &body, &secret, now / 1000)?;
    }

    // A key from a header is known before the body is read: a repeat of a live claim is
    // answered at once (a plain read: no body parsing, no transaction, no run built). A signed
    // delivery's key comes from its signed body only: the signature does not cover headers,
    // so a captured delivery replayed with another key header must not claim that key.
    let signed = config.signing_secret.is_some();
    let header_key = if signed { None } else { header_key(&headers)? };
    if let Some(k) = &header_key {
        if let Some(resp) = known_duplicate(&state, &workflow_id, k, now).await? {
            return Ok(resp);
        }
    }

    let input = parse_json(&body)?;

    let key = match header_key {
        Some(k) => Some(k),
        None => {
            let k = template_key(&config, &input, &state.engine().env())?;
            if let Some(k) = &k {
                if let Some(resp) = known_duplicate(&state, &workflow_id, k, now).await? {
                    return Ok(resp);
                }
            }
            k
        }
    };
    let mut req = RunRequest::new(input, Trigger::Webhook, Mode::Live);
    req.idempotency_key = key.clone();
    let run = state.engine().new_run(&wf, req);
    // In a task of its own: a sender that disconnects (its timeout) must not cancel the
    // delivery between the claim and the queue push, which would leave the key claimed for a
    // run that never executes (its retry would be answered as a duplicate of it).
    let window_ms = (config.dedupe_window_s as i64).saturating_mul(1000);
    tokio::spawn(accept(state, workflow_id, key, run, now, window_ms))
        .await
        .map_err(|_| ApiError::unavailable("the delivery could not be queued; retry", 1))?
}

/// Keys whose claim is written but maybe not yet durable: a request enters its key before its
/// claim transaction and leaves once the group commit made it durable (or undid it). A
/// duplicate answer for a key in here waits for the next flush first; any other live claim
/// read from the store is durable already (its writer left only after its flush, and a
/// restarted store only holds what was flushed). Process-local, like the sled store it guards.
#[derive(Default)]
pub struct PendingClaims(std::sync::Mutex<std::collections::HashMap<String, u32>>);

impl PendingClaims {
    fn id(workflow_id: &str, key: &str) -> String {
        format!("{workflow_id}\0{key}")
    }
    fn map(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, u32>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
    /// Enter a key for the life of the returned guard.
    pub fn enter(&self, workflow_id: &str, key: &str) -> PendingGuard<'_> {
        let id = Self::id(workflow_id, key);
        *self.map().entry(id.clone()).or_default() += 1;
        PendingGuard { set: self, id }
    }
    /// Whether some request is between its claim and its flush for this key.
    pub fn contains(&self, workflow_id: &str, key: &str) -> bool {
        self.map().contains_key(&Self::id(workflow_id, key))
    }
}

/// Recently seen durable claims, `(workflow_id, key)` → `(run_id, expires_at)`, so a repeat
/// delivery is answered without a store read. Only durable claims go in (a claim this process
/// made durable, or one read from the store while no request had it pending), and claims are
/// never changed within their window (only undone before they are durable, or swept after
/// they expire), so an entry stays true until its `expires_at`. Bounded (oldest and least
/// used out first); a miss falls through to the store.
pub struct RecentClaims(quick_cache::sync::Cache<String, (String, i64)>);

impl RecentClaims {
    /// Entries kept.
    pub const CAPACITY: usize = 50_000;

    /// The live claim's run id, if cached.
    fn get(&self, workflow_id: &str, key: &str, now: i64) -> Option<String> {
        self.0
            .get(&PendingClaims::id(workflow_id, key))
            .filter(|(_, expires_at)| *expires_at > now)
            .map(|(run_id, _)| run_id)
    }

    fn insert(&self, workflow_id: &str, key: &str, run_id: &str, expires_at: i64) {
        self.0.insert(
            PendingClaims::id(workflow_id, key),
            (run_id.to_string(), expires_at),
        );
    }
}

impl Default for RecentClaims {
    fn default() -> Self {
        RecentClaims(quick_cache::sync::Cache::new(Self::CAPACITY))
    }
}

/// Leaves [`PendingClaims`] when dropped.
pub struct PendingGuard<'a> {
    set: &'a PendingClaims,
    id: String,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        let mut map = self.set.map();
        if let Some(n) = map.get_mut(&self.id) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.id);
            }
        }
    }
}

/// The webhook's answer: `202 {"run_id", "duplicate": false}` for a new delivery, `200
/// {"run_id": <original>, "duplicate": true}` for a repeat.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct WebhookAnswer {
    /// The run this delivery started, or (on a repeat) the one its first delivery started.
    pub run_id: String,
    /// True on a repeat of a key within the dedupe window.
    pub duplicate: bool,
}

fn answer(status: StatusCode, run_id: &str, duplicate: bool) -> Response {
    let body = WebhookAnswer {
        run_id: run_id.to_string(),
        duplicate,
    };
    (status, Json(body)).into_response()
}

/// `200 {"run_id", "duplicate": true}`.
fn duplicate_answer(workflow_id: &str, run_id: &str) -> Response {
    tracing::info!(workflow_id = %workflow_id, run_id = %run_id, "duplicate delivery");
    answer(StatusCode::OK, run_id, true)
}

/// The answer to a repeat of a live claim, once that claim is durable; `None` if the key has
/// no live claim. The claim we report may still be in flight (another request wrote it and
/// waits for its flush): then answer only after the next flush, and only if the claim is still
/// there (a failed flush undoes it), so a crash cannot leave the sender with a "duplicate" of
/// a run that was never kept.
async fn known_duplicate(
    state: &AppState,
    workflow_id: &str,
    key: &str,
    now: i64,
) -> ApiResult<Option<Response>> {
    if let Some(run_id) = state.recent_claims().get(workflow_id, key, now) {
        return Ok(Some(duplicate_answer(workflow_id, &run_id)));
    }
    let Some(claim) = state
        .store()
        .get_claim(workflow_id, key, now)
        .await
        .map_err(ApiError::store)?
    else {
        return Ok(None);
    };
    if !state.pending_claims().contains(workflow_id, key) {
        state
            .recent_claims()
            .insert(workflow_id, key, &claim.run_id, claim.expires_at);
        return Ok(Some(duplicate_answer(workflow_id, &claim.run_id)));
    }
    confirm_duplicate(state, workflow_id, key, &claim.run_id, now)
        .await
        .map(Some)
}

/// Wait for the flush that covers an in-flight claim naming `run_id`, then answer it as the
/// duplicate, or 503 if it was undone meanwhile.
async fn confirm_duplicate(
    state: &AppState,
    workflow_id: &str,
    key: &str,
    run_id: &str,
    now: i64,
) -> ApiResult<Response> {
    let retry = || {
        ApiError::unavailable(
            "the first delivery of this key is not confirmed yet; retry",
            1,
        )
    };
    state.commit().durable().await.map_err(|e| {
        tracing::error!(error = %e, "flush failed before a duplicate answer");
        retry()
    })?;
    match state
        .store()
        .get_claim(workflow_id, key, now)
        .await
        .map_err(ApiError::store)?
    {
        Some(c) if c.run_id == run_id => Ok(duplicate_answer(workflow_id, run_id)),
        _ => Err(retry()),
    }
}

/// Claim the key and queue the run (one transaction, batched with other deliveries by the
/// group commit), make it durable, hand it to the workers.
async fn accept(
    state: AppState,
    workflow_id: String,
    key: Option<String>,
    run: crate::run::RunRecord,
    now: i64,
    window_ms: i64,
) -> ApiResult<Response> {
    let run_id = run.id.clone();
    match key {
        Some(key) => {
            let claim = WebhookClaim {
                workflow_id: workflow_id.clone(),
                key: key.clone(),
                run_id: run_id.clone(),
                claimed_at: now,
                expires_at: now.saturating_add(window_ms),
            };
            let expires_at = claim.expires_at;
            let pending = state.pending_claims().enter(&workflow_id, &key);
            let outcome = state.commit().claim_and_enqueue(claim, run).await;
            match outcome {
                Ok(ClaimOutcome::Duplicate { run_id: original }) => {
                    drop(pending);
                    // The claim found is durable unless an earlier batch's flush failed and
                    // its undo has not run yet: confirm it after the next flush.
                    confirm_duplicate(&state, &workflow_id, &key, &original, now).await
                }
                Ok(ClaimOutcome::Claimed) => {
                    state
                        .recent_claims()
                        .insert(&workflow_id, &key, &run_id, expires_at);
                    drop(pending);
                    tracing::info!(workflow_id = %workflow_id, run_id = %run_id, "delivery accepted");
                    state.queue().push(run_id.clone());
                    Ok(accepted(&run_id))
                }
                Err(e) => {
                    tracing::error!(error = %e, "claim not made durable; undoing");
                    undo_claim(&state, &workflow_id, &key, &run_id).await;
                    Err(ApiError::unavailable(
                        "the delivery could not be made durable; retry",
                        1,
                    ))
                }
            }
        }
        None => {
            state.commit().put_run(run).await.map_err(|e| {
                tracing::error!(error = %e, "run not made durable");
                ApiError::unavailable("the run could not be made durable; retry", 1)
            })?;
            state.queue().push(run_id.clone());
            Ok(accepted(&run_id))
        }
    }
}

/// `202 {"run_id", "duplicate": false}`.
fn accepted(run_id: &str) -> Response {
    answer(StatusCode::ACCEPTED, run_id, false)
}

/// Best effort after a failed flush: remove the claim and the queued run so a retry is
/// accepted.
async fn undo_claim(state: &AppState, workflow_id: &str, key: &str, run_id: &str) {
    if let Err(e) = state.store().release_claim(workflow_id, key, run_id).await {
        tracing::error!(error = %e, "could not undo claim");
    }
}

/// A key header (`Idempotency-Key`, `X-Fluxo-Event-Id`): `None` when absent; the key (without
/// RFC 8941 quotes) when valid; else `400 invalid_idempotency_key`: a header given more than
/// once, a character outside visible ASCII, or a value that opens an RFC 8941 quoted string
/// without being one (`"abc`, `"a"b"`, a bad escape).
pub fn key_header(
    headers: &HeaderMap,
    name: &str,
    label: &'static str,
) -> ApiResult<Option<String>> {
    let invalid = |why: String| ApiError::bad_request("invalid_idempotency_key", why);
    let mut values = headers.get_all(name).iter();
    let Some(v) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(invalid(format!("{label} appears more than once")));
    }
    let text = v.to_str().map_err(|_| {
        invalid(format!(
            "{label} contains a character outside visible ASCII"
        ))
    })?;
    if text.starts_with('"') && (text.len() < 2 || !text.ends_with('"')) {
        return Err(invalid(format!(
            "{label} is a malformed RFC 8941 quoted string"
        )));
    }
    validate_key(label, text)
        .map(Some)
        .map_err(|e| invalid(e.to_string()))
}

/// The delivery's key: header, else event-id header, else the trigger's template; for a
/// trigger with a `signing_secret`, the template only (see [`template_key`]).
pub fn delivery_key(
    headers: &HeaderMap,
    config: &webhook_trigger::Config,
    input: &Value,
    env: &std::collections::BTreeMap<String, String>,
) -> ApiResult<Option<String>> {
    if config.signing_secret.is_some() {
        return template_key(config, input, env);
    }
    match header_key(headers)? {
        Some(k) => Ok(Some(k)),
        None => template_key(config, input, env),
    }
}

/// The key from the headers: `Idempotency-Key`, else `X-Fluxo-Event-Id`.
pub fn header_key(headers: &HeaderMap) -> ApiResult<Option<String>> {
    for (name, label) in [
        ("idempotency-key", "Idempotency-Key"),
        ("x-fluxo-event-id", "X-Fluxo-Event-Id"),
    ] {
        if let Some(key) = key_header(headers, name, label)? {
            return Ok(Some(key));
        }
    }
    Ok(None)
}

/// The key from the trigger's `dedupe_key` template over the body, if it has one; a body it
/// cannot render a valid key from is `400 invalid_idempotency_key`. A trigger with a
/// `signing_secret` always has one: its `dedupe_key`, else
/// [`webhook_trigger::SIGNED_DEDUPE_KEY`] (`{{ input.id }}`), since key headers are not
/// signed and are ignored on signed deliveries.
pub fn template_key(
    config: &webhook_trigger::Config,
    input: &Value,
    env: &std::collections::BTreeMap<String, String>,
) -> ApiResult<Option<String>> {
    let signed = config.signing_secret.is_some();
    let Some(tmpl) = config
        .dedupe_key
        .as_deref()
        .or(signed.then_some(webhook_trigger::SIGNED_DEDUPE_KEY))
    else {
        return Ok(None);
    };
    let why_template = if signed {
        "a signed delivery takes its key from the signed body (key headers are ignored), and \
         the trigger's dedupe_key"
    } else {
        "no Idempotency-Key header, and the trigger's dedupe_key"
    };
    let mut t = Templates::new();
    t.add(tmpl)
        .map_err(|e| ApiError::conflict("workflow_invalid", format!("dedupe_key: {e}")))?;
    let scope = Scope::new(input, &Value::Null, env);
    let v = t
        .render_str(tmpl, &scope.context(), "dedupe_key")
        .map_err(|e| {
            ApiError::bad_request(
                "invalid_idempotency_key",
                format!("{why_template} `{tmpl}` failed on this body: {e}"),
            )
        })?;
    let key = key_text(&v, "dedupe_key").map_err(|e| {
        ApiError::bad_request(
            "invalid_idempotency_key",
            format!("dedupe_key `{tmpl}`: {}", e.message),
        )
    })?;
    webhook_trigger::check_key_text("dedupe_key", &key)
        .map_err(|e| ApiError::bad_request("invalid_idempotency_key", e.to_string()))?;
    Ok(Some(key))
}

fn render_text(
    tmpl: &str,
    input: &Value,
    env: &std::collections::BTreeMap<String, String>,
) -> Result<String, String> {
    let mut t = Templates::new();
    t.add(tmpl).map_err(|e| e.to_string())?;
    let scope = Scope::new(input, &Value::Null, env);
    match t.render_str(tmpl, &scope.context(), "signing_secret") {
        Ok(Value::String(s)) if !s.is_empty() => Ok(s),
        Ok(_) => Err("it rendered empty".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// Check `X-Fluxo-Signature: t=<unix seconds>,v1=<hex>` = HMAC-SHA256(secret, `"<t>.<body>"`)
/// within ±[`SIGNATURE_TOLERANCE_S`] (300 s) of `now_s` (unix seconds). Several `v1=` values are
/// accepted (secret rotation); other `key=value` parts are ignored (future schemes).
///
/// Every failure is `401 invalid_signature`, never a panic: `t` must be given once, as 1–19
/// ASCII digits (a non-negative `i64`; no sign, no spaces), and the distance to `now_s` is
/// computed with [`i64::abs_diff`], which cannot overflow whatever both values are (a
/// `t=-9223372036854775808` once overflowed `now_s - t`).
pub fn verify_signature(
    headers: &HeaderMap,
    body: &[u8],
    secret: &str,
    now_s: i64,
) -> ApiResult<()> {
    let unauthorized = |why: &str| {
        ApiError::new(
            StatusCode::UNAUTHORIZED,
            "invalid_signature",
            why.to_string(),
        )
    };
    let mut values = headers.get_all(SIGNATURE_HEADER).iter();
    let header = values
        .next()
        .ok_or_else(|| unauthorized("missing X-Fluxo-Signature header"))?;
    if values.next().is_some() {
        return Err(unauthorized("X-Fluxo-Signature appears more than once"));
    }
    let header = header.to_str().map_err(|_| {
        unauthorized("X-Fluxo-Signature contains a character outside visible ASCII")
    })?;
    let mut t: Option<&str> = None;
    let mut sigs = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", _)) if t.is_some() => {
                return Err(unauthorized("X-Fluxo-Signature has more than one t="));
            }
            Some(("t", v)) => t = Some(v),
            Some(("v1", v)) => sigs.push(v),
            _ => {}
        }
    }
    let t = t
        .and_then(parse_unix_seconds)
        .ok_or_else(|| unauthorized("X-Fluxo-Signature has no valid t=<unix seconds>"))?;
    if now_s.abs_diff(t) > SIGNATURE_TOLERANCE_S.unsigned_abs() {
        return Err(unauthorized(
            "X-Fluxo-Signature timestamp is outside the 5-minute tolerance",
        ));
    }
    for sig in sigs {
        let Ok(bytes) = hex::decode(sig) else {
            continue;
        };
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes())
            .map_err(|_| unauthorized("bad secret"))?;
        mac.update(t.to_string().as_bytes());
        mac.update(b".");
        mac.update(body);
        if mac.verify_slice(&bytes).is_ok() {
            return Ok(());
        }
    }
    Err(unauthorized("X-Fluxo-Signature does not match the body"))
}

/// Unix seconds as the signature's `t=` carries them: 1–19 ASCII digits that fit an `i64`.
fn parse_unix_seconds(v: &str) -> Option<i64> {
    if v.is_empty() || v.len() > 19 || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse::<i64>().ok()
}

/// Compute a signature header value (for senders and tests).
pub fn sign(secret: &str, t: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("any key length");
    mac.update(t.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("t={t},v1={}", hex::encode(mac.finalize().into_bytes()))
}
