//! Idempotency-Key for the REST API (`POST /api/v1/workflows/{id}/runs`, replay), after
//! Stripe's idempotent requests and the IETF `draft-ietf-httpapi-idempotency-key-header`:
//!
//! * the key is scoped to the API token (a hash of it) and lives 24 h;
//! * the request's fingerprint is SHA-256 of method + path + canonical JSON body (key order
//!   and whitespace don't count);
//! * a repeat with the same fingerprint gets the stored status and body byte for byte, with
//!   `Idempotent-Replayed: true`;
//! * the same key with another fingerprint → `409 idempotency_conflict`;
//! * while the first is processed → `409 idempotency_in_progress`;
//! * an in-progress record whose owner died is reclaimable after its lease
//!   (run time limit + 30 s).

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::auth::token_scope;
use super::error::{ApiError, ApiResult};
use super::AppState;
use crate::store::{ApiBegin, ApiRecord, ApiRecordState};
use crate::workflow::canonical_json;

/// How long API idempotency records live: 24 h in ms.
pub const API_KEY_TTL_MS: i64 = 24 * 3600 * 1000;
/// Extra lease beyond the run's time limit, ms.
pub const LEASE_EXTRA_MS: i64 = 30_000;

/// Fingerprint of a request: SHA-256 hex of `METHOD \n path \n canonical-json(body)`.
pub fn fingerprint(method: &str, path: &str, body: &Value) -> String {
    let mut h = Sha256::new();
    h.update(method.as_bytes());
    h.update(b"\n");
    h.update(path.as_bytes());
    h.update(b"\n");
    h.update(canonical_json(body).as_bytes());
    hex::encode(h.finalize())
}

/// A request that holds an idempotency key: complete it with the answer.
pub struct Guard {
    state: AppState,
    scope: String,
    key: String,
    done: bool,
}

/// What to do with a request.
pub enum Begin {
    /// No key: just process.
    NoKey,
    /// Process, then [`Guard::complete`].
    Process(Guard),
    /// Answer this stored response.
    Replay(Response),
}

/// Read the request's `Idempotency-Key` and begin (or replay) it.
pub async fn begin(
    state: &AppState,
    headers: &HeaderMap,
    method: &str,
    path: &str,
    body: &Value,
    lease_ms: i64,
) -> ApiResult<Begin> {
    let Some(key) = super::headers::key_header(headers, "idempotency-key", "Idempotency-Key")?
    else {
        return Ok(Begin::NoKey);
    };
    let now = state.clock().now_ms();
    let scope = token_scope(&state.token());
    let record = ApiRecord {
        scope: scope.clone(),
        key: key.clone(),
        fingerprint: fingerprint(method, path, body),
        created_at: now,
        expires_at: now + API_KEY_TTL_MS,
        state: ApiRecordState::InProgress {
            owner: state.instance_id().to_string(),
            lease_until: now + lease_ms + LEASE_EXTRA_MS,
        },
    };
    match state
        .store()
        .api_begin(&record, now)
        .await
        .map_err(ApiError::store)?
    {
        ApiBegin::Started => Ok(Begin::Process(Guard {
            state: state.clone(),
            scope,
            key,
            done: false,
        })),
        ApiBegin::Conflict => Err(ApiError::conflict(
            "idempotency_conflict",
            format!("Idempotency-Key `{key}` was already used with a different request (method, path or body)"),
        )),
        ApiBegin::InProgress => Err(ApiError::conflict(
            "idempotency_in_progress",
            format!("a request with Idempotency-Key `{key}` is still being processed; retry later"),
        )),
        ApiBegin::Replay { status, body } => {
            // A repeat that started a run is a duplicate stopped: listed on that run.
            state
                .duplicates()
                .note_api_replay(status, &body, now, API_KEY_TTL_MS);
            Ok(Begin::Replay(stored_response(status, body, true)))
        }
    }
}

/// A stored (or to-be-stored) JSON answer.
pub fn stored_response(status: u16, body: String, replayed: bool) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let content_type = if status.is_success() {
        "application/json"
    } else {
        "application/problem+json"
    };
    let mut resp = (status, body).into_response();
    resp.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        HeaderValue::from_static(content_type),
    );
    if replayed {
        resp.headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    resp
}

impl Guard {
    /// The request's key (without RFC 8941 quotes).
    pub fn key(&self) -> &str {
        &self.key
    }
    /// Store the answer for replays and return it.
    pub async fn complete(mut self, status: StatusCode, body: String) -> Response {
        self.done = true;
        if let Err(e) = self
            .state
            .store()
            .api_complete(&self.scope, &self.key, status.as_u16(), &body)
            .await
        {
            tracing::error!(error = %e, "could not store idempotent answer");
        }
        stored_response(status.as_u16(), body, false)
    }

    /// Release the key of a request that ended without an answer worth replaying (an error
    /// before the run was created), so the client can retry at once.
    pub async fn abandon(mut self) {
        self.done = true;
        if let Err(e) = self.state.store().api_abandon(&self.scope, &self.key).await {
            tracing::error!(error = %e, "could not release idempotency key");
        }
    }
}

impl Drop for Guard {
    /// A guard dropped without [`Guard::complete`] or [`Guard::abandon`] (an early return, a
    /// panic) releases its key in the background, so the client can retry.
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let (state, scope, key) = (self.state.clone(), self.scope.clone(), self.key.clone());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if let Err(e) = state.store().api_abandon(&scope, &key).await {
                    tracing::error!(error = %e, "could not release idempotency key");
                }
            });
        }
    }
}
