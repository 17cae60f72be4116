//! Request headers of the HTTP adapter shared by handler modules: the key headers
//! (`Idempotency-Key`, `X-Fluxo-Event-Id`). A leaf: handler modules use it, it uses none of
//! them.

use axum::http::HeaderMap;

use super::error::{ApiError, ApiResult};
use crate::steps::webhook_trigger::validate_key;

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

/// The W3C `traceparent` header ([`crate::traces::parse_traceparent`]): `None` when absent,
/// invalid or given more than once (ignored, as Trace Context §3.2.2 asks; never a 400).
pub fn traceparent(headers: &HeaderMap) -> Option<String> {
    let mut values = headers.get_all("traceparent").iter();
    let v = values.next()?;
    if values.next().is_some() {
        return None;
    }
    crate::traces::parse_traceparent(v.to_str().ok()?)
}
