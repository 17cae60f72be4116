//! Request bodies of the HTTP adapter: read within the body limit (`413`, `408` on a stalled
//! body, `400 bad_body`), parsed as JSON (`400 invalid_json`). A leaf: every handler module
//! uses it, it uses none of them.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use serde_json::{json, Value};

use super::error::{ApiError, ApiResult};

/// Parse a JSON request body (empty = `{}`), naming the problem.
pub fn json_body(body: Result<Bytes, BytesRejection>, limit: usize) -> ApiResult<Value> {
    let bytes = body_bytes(body, limit)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    parse_json(&bytes)
}

/// A request body within `limit` bytes: over it `413 payload_too_large`; a body that stalled
/// past the body read timeout ([`crate::app::ConnLimits::body_read_timeout`]) `408
/// request_timeout` (RFC 9110 §15.5.9; the connection is closed); otherwise unreadable `400
/// bad_body`.
pub fn body_bytes(body: Result<Bytes, BytesRejection>, limit: usize) -> ApiResult<Bytes> {
    body.map_err(|rej| {
        if timed_out(&rej) {
            ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                "the request body stalled: no data came within the body read timeout",
            )
            .closing()
        } else if rej.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!("the body is over the limit of {limit} bytes"),
            )
        } else {
            ApiError::bad_request("bad_body", rej.body_text())
        }
    })
}

/// Whether a body failed because the body read timeout fired ([`super::layers::BodyTimedOut`],
/// anywhere in its sources).
fn timed_out(rej: &BytesRejection) -> bool {
    let mut e: Option<&(dyn std::error::Error + 'static)> = Some(rej);
    while let Some(err) = e {
        if err.is::<super::layers::BodyTimedOut>() {
            return true;
        }
        e = err.source();
    }
    false
}

/// JSON, or `400 invalid_json` naming the line and column.
pub fn parse_json(bytes: &[u8]) -> ApiResult<Value> {
    serde_json::from_slice(bytes).map_err(invalid_json)
}

/// A webhook body as a run's input: checked to be well-formed JSON and kept as its text, with
/// no `Value` built ([`crate::run::RunInput::from_json_bytes`]); the same `400 invalid_json` as
/// [`parse_json`].
pub fn json_input(bytes: &[u8]) -> ApiResult<crate::run::RunInput> {
    crate::run::RunInput::from_json_bytes(bytes).map_err(invalid_json)
}

fn invalid_json(e: serde_json::Error) -> ApiError {
    ApiError::bad_request(
        "invalid_json",
        format!(
            "the body is not JSON (line {}, column {}): {e}",
            e.line(),
            e.column()
        ),
    )
}
