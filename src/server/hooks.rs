//! `POST /hooks/{workflow_id}`: the webhook trigger with dedupe at the door (SPEC §5).
//!
//! 0. Every route: the `Host` must be one of the server's names (421, [`super::door`]).
//! 1. The workflow must exist, validate and start with a `webhook_trigger`.
//! 2. The door ([`super::door`]): no request a browser sends on another site's behalf unless
//!    its origin is on the trigger's `allowed_origins` (403 `cross_site_request`), and a JSON
//!    media type (415 `unsupported_media_type`).
//!
//!    Steps 1 and 2 read the head only: the body is not read before they pass, so a slow or
//!    unwanted upload to a workflow that does not exist costs one answer, not a connection
//!    held for as long as its sender likes.
//! 3. The body is read: a `Content-Length` over the limit is 413 before any byte is read; the
//!    body's time limits (408) and shedding (503) are those of [`super::layers::GuardedBody`]
//!    and [`super::intake`]. Then the optional HMAC signature (401), JSON body (400).
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
use axum::extract::{FromRequest as _, Path, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use super::body::{body_bytes, json_input};
use super::door;
use super::error::{ApiError, ApiResult};
use super::headers::key_header;
use super::AppState;
use crate::app::ingest::{self, Delivery};
use crate::run::{Mode, Trigger};
use crate::runtime::RunRequest;
use crate::steps::key_text;
use crate::steps::webhook_trigger;
use crate::template::{reveal, EnvView, Sink};
use crate::workflow::template::{Scope, Templates};

/// Signature header: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`.
pub const SIGNATURE_HEADER: &str = "x-fluxo-signature";
/// Signature timestamp tolerance: 5 minutes.
pub const SIGNATURE_TOLERANCE_S: i64 = 300;

/// The webhook handler. It takes the request whole, so its headers are moved out rather than
/// copied (axum's `HeaderMap` extractor clones them).
pub async fn webhook(
    State(state): State<AppState>,
    Path(workflow_id): Path<String>,
    mut req: Request,
) -> ApiResult<Response> {
    let headers = std::mem::take(req.headers_mut());
    let answer = deliver(state, workflow_id, headers, req).await;
    if let Err(e) = &answer {
        crate::telemetry::delivery_rejected(e.code);
    }
    answer
}

async fn deliver(
    state: AppState,
    workflow_id: String,
    headers: HeaderMap,
    req: Request,
) -> ApiResult<Response> {
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
    let door_config = state.trigger_configs().get(&wf).map_err(|_| {
        ApiError::conflict(
            "workflow_invalid",
            format!("workflow `{workflow_id}`: bad trigger config"),
        )
    })?;
    let config = &door_config.config;
    door::check_cross_site(&headers, &door_config.allowed_origins)?;
    door::check_media_type(&headers)?;
    // Only now is the body read: an unknown workflow, a trigger that is not a webhook or a
    // refused sender is answered from the head alone (a `Content-Length` over the limit is
    // `413` at the first read, before any byte; see `layers::GuardedBody`).
    let body = body_bytes(
        Bytes::from_request(req, &state).await,
        state.options().body_limit_bytes,
    )?;
    let now = state.clock().now_ms();

    // Built only for a delivery that renders a template (a signature, a `dedupe_key`): the
    // hot path of a keyed delivery copies no env.
    let env = || {
        state
            .engine()
            .env_view(&state.engine().env(), &wf.workflow.secrets)
    };
    if let Some(secret_tmpl) = &config.signing_secret {
        let secret = render_text(secret_tmpl, &Value::Null, &env()).map_err(|e| {
            ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "signing_secret_unavailable",
                format!("the trigger's signing_secret cannot be resolved: {e}"),
            )
        })?;
        verify_signature(&headers, &body, &secret, now / 1000)?;
    }

    // A key from a header is known before the body is read: a repeat this process has seen
    // durable is answered at once, from memory (no body parsing, no transaction, no run
    // built); any other repeat is answered by its claim. A signed delivery's key comes from
    // its signed body only: the signature does not cover headers, so a captured delivery
    // replayed with another key header must not claim that key.
    let signed = config.signing_secret.is_some();
    let window_ms = (config.dedupe_window_s as i64).saturating_mul(1000);
    let header_key = if signed { None } else { header_key(&headers)? };
    if let Some(k) = &header_key {
        if let Some(d) = ingest::cached_duplicate(&state, &workflow_id, k, now, window_ms) {
            return Ok(delivery_answer(d));
        }
    }

    // Checked and kept as its text: with a header key nothing parses it on the way to the
    // store (the worker does, when a step reads it); a `dedupe_key` template parses it here.
    let input = json_input(&body)?;

    let key = match header_key {
        Some(k) => Some(k),
        None => {
            let k = match (&config.dedupe_key, signed) {
                (None, false) => None,
                _ => template_key(config, &input, &env())?,
            };
            if let Some(k) = &k {
                if let Some(d) = ingest::cached_duplicate(&state, &workflow_id, k, now, window_ms) {
                    return Ok(delivery_answer(d));
                }
            }
            k
        }
    };
    let mut req = RunRequest::new(input, Trigger::Webhook, Mode::Live);
    req.idempotency_key = key.clone();
    let mut run = state.engine().new_run(&wf, req);
    run.trace_parent = super::headers::traceparent(&headers);
    // In a task of its own: a sender that disconnects (its timeout) must not cancel the
    // delivery between the claim and the queue push, which would leave the key claimed for a
    // run that never executes (its retry would be answered as a duplicate of it).
    let delivery = tokio::spawn(tracing::Instrument::in_current_span(ingest::accept(
        state,
        workflow_id,
        key,
        run,
        now,
        window_ms,
    )))
    .await
    .map_err(|_| ApiError::unavailable("the delivery could not be queued; retry", 1))??;
    Ok(delivery_answer(delivery))
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

fn answer(status: StatusCode, run_id: String, duplicate: bool) -> Response {
    let body = WebhookAnswer { run_id, duplicate };
    (status, Json(body)).into_response()
}

/// The HTTP answer to a delivery: `202` for a new one, `200` with `duplicate: true` for a repeat.
fn delivery_answer(d: Delivery) -> Response {
    match d {
        Delivery::Accepted { run_id } => answer(StatusCode::ACCEPTED, run_id, false),
        Delivery::Duplicate { run_id } => answer(StatusCode::OK, run_id, true),
    }
}

/// The delivery's key: header, else event-id header, else the trigger's template; for a
/// trigger with a `signing_secret`, the template only (see [`template_key`]).
pub fn delivery_key(
    headers: &HeaderMap,
    config: &webhook_trigger::Config,
    input: &Value,
    env: &EnvView,
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
    env: &EnvView,
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
    let scope = Scope::new(input, &Value::Null, env.clone());
    let ctx = scope.context();
    let v = t
        .render_str(tmpl, &ctx, "dedupe_key")
        .and_then(|v| reveal(&ctx, v, "dedupe_key", Sink::Nowhere))
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

fn render_text(tmpl: &str, input: &Value, env: &EnvView) -> Result<String, String> {
    let mut t = Templates::new();
    t.add(tmpl).map_err(|e| e.to_string())?;
    let scope = Scope::new(input, &Value::Null, env.clone());
    let ctx = scope.context();
    let rendered = t
        .render_str(tmpl, &ctx, "signing_secret")
        .and_then(|v| reveal(&ctx, v, "signing_secret", Sink::Whole));
    match rendered {
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
