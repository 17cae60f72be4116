//! Request bodies of the HTTP adapter: read within the body limit (`413`, `408` on a slow
//! body, `503` on a shed one, `400 bad_body`), parsed as JSON (`400 invalid_json`). A leaf: every handler module
//! uses it, it uses none of them.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use serde_json::{json, Value};

use super::error::{ApiError, ApiResult};
use super::layers::BodyRefused;

/// Parse a JSON request body (empty = `{}`), naming the problem.
pub fn json_body(body: Result<Bytes, BytesRejection>, limit: usize) -> ApiResult<Value> {
    let bytes = body_bytes(body, limit)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    parse_json(&bytes)
}

/// A request body within `limit` bytes: over it `413 payload_too_large`; a body refused by
/// the rules it is read under ([`super::layers::BodyRefused`]: `408 request_timeout` when it
/// stalled, missed its deadline or came too slowly, `413` when its `Content-Length` is over
/// the limit, `503 server_busy` when it was shed for other clients; the connection is closed,
/// since the rest of the body is not read); otherwise unreadable `400 bad_body`.
pub fn body_bytes(body: Result<Bytes, BytesRejection>, limit: usize) -> ApiResult<Bytes> {
    body.map_err(|rej| {
        if let Some(why) = refused(&rej) {
            let detail = why.to_string();
            match why {
                BodyRefused::TooLarge { .. } => {
                    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", detail)
                }
                BodyRefused::Shed(_) => ApiError {
                    retry_after_s: Some(1),
                    ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "server_busy", detail)
                },
                _ => ApiError::new(StatusCode::REQUEST_TIMEOUT, "request_timeout", detail),
            }
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

/// Why the rules refused a body ([`BodyRefused`], anywhere in the rejection's sources).
fn refused(rej: &BytesRejection) -> Option<&BodyRefused> {
    let mut e: Option<&(dyn std::error::Error + 'static)> = Some(rej);
    while let Some(err) = e {
        if let Some(why) = err.downcast_ref::<BodyRefused>() {
            return Some(why);
        }
        e = err.source();
    }
    None
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
