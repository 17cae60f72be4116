//! Bearer-token auth for management routes (`/api/v1/...`).
//!
//! The token comes from `--token`/`FLUXO_TOKEN`, else from `<data-dir>/token`, else it is
//! generated (256 random bits, hex) into that file with mode 0600 and printed once.
//! Comparison is constant-time. Idempotency records are scoped by a hash of the token.

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use sha2::{Digest, Sha256};

use super::error::ApiError;
use super::AppState;

// The token file is the application's (`fluxo serve` and the desktop app resolve it alike).
pub use crate::app::settings::{generate_token, resolve_token, write_secret, TokenSource};

/// SHA-256 of the token, hex: the scope of idempotency records (never the token itself).
pub fn token_scope(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let ha = Sha256::digest(a);
    let hb = Sha256::digest(b);
    ha.iter()
        .zip(hb.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

/// The token of an `Authorization: Bearer <token>` value, or `None` for another scheme or no
/// token. The scheme is matched case-insensitively (`Bearer`, `bearer`, `BEARER`: RFC 9110
/// §11.1, "auth-scheme is case-insensitive"; RFC 6750 §2.1 for Bearer), followed by one or more
/// spaces (`credentials = auth-scheme [ 1*SP ( token68 / … ) ]`); the token itself is compared
/// exactly.
pub fn bearer_token(value: &str) -> Option<&str> {
    let (scheme, rest) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = rest.trim_matches(' ');
    (!token.is_empty()).then_some(token)
}

/// Middleware: `Authorization: Bearer <token>` (scheme in any case, see [`bearer_token`]) or
/// 401 problem+json.
pub async fn require_token(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    check_token(&state, req.headers())?;
    Ok(next.run(req).await)
}

/// `Ok` when `headers` carry `Authorization: Bearer <the API token>`, else the 401 problem.
pub fn check_token(state: &AppState, headers: &axum::http::HeaderMap) -> Result<(), ApiError> {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_token);
    match given {
        None => Err(ApiError::new(
            axum::http::StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing `Authorization: Bearer <token>` (the token is in <data-dir>/token)",
        )),
        Some(t) if constant_time_eq(t.as_bytes(), state.token().as_bytes()) => Ok(()),
        Some(_) => Err(ApiError::new(
            axum::http::StatusCode::UNAUTHORIZED,
            "unauthorized",
            "wrong API token",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::bearer_token;

    #[test]
    fn the_scheme_is_case_insensitive() {
        for v in ["Bearer t0k", "bearer t0k", "BEARER t0k", "bEaReR   t0k "] {
            assert_eq!(bearer_token(v), Some("t0k"), "{v}");
        }
        for v in [
            "Basic dXNlcg==",
            "Bearer",
            "Bearer ",
            "Bearert0k",
            "t0k",
            "",
        ] {
            assert_eq!(bearer_token(v), None, "{v}");
        }
        // The token is compared as given.
        assert_eq!(bearer_token("Bearer T0K"), Some("T0K"));
    }
}
