//! Bearer-token auth for management routes (`/api/v1/...`).
//!
//! The token comes from `--token`/`FLUXO_TOKEN`, else from `<data-dir>/token`, else it is
//! generated (256 random bits, hex) into that file with mode 0600 and printed once.
//! Comparison is constant-time. Idempotency records are scoped by a hash of the token.
//!
//! **Wrong tokens are limited per client address** ([`AuthFailures`]; issue 42): after
//! [`FAILURES_ALLOWED`] wrong tokens in a row from one address (each answered 401), that
//! address is answered `429 too_many_auth_failures` with `Retry-After` for [`BLOCK_FIRST`],
//! doubling with each further wrong token up to [`BLOCK_MAX`], before any token it sends is
//! compared, so guessing goes no faster than that. A right token resets the count; a request without a token counts nothing.
//! The rule is fail2ban's and OpenSSH's `PerSourcePenalties` (a lockout that grows), not a
//! token bucket: a bucket would still compare every guess and only answer wrong ones
//! differently. Behind a reverse proxy every client shares the proxy's address.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use sha2::{Digest, Sha256};

use super::error::ApiError;
use super::intake::ClientAddr;
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

/// Wrong tokens in a row from one address before it is held off.
pub const FAILURES_ALLOWED: u32 = 20;
/// The first hold-off; each further wrong token doubles it.
pub const BLOCK_FIRST: Duration = Duration::from_secs(10);
/// The longest hold-off.
pub const BLOCK_MAX: Duration = Duration::from_secs(300);
/// Addresses remembered at most (the oldest entries go first).
const ADDRESSES_KEPT: usize = 10_000;

/// Wrong API tokens per client address (see the module doc). One per router (per server).
#[derive(Debug, Default)]
pub struct AuthFailures {
    by_addr: Mutex<HashMap<IpAddr, Failures>>,
}

#[derive(Debug, Clone, Copy)]
struct Failures {
    /// Wrong tokens in a row.
    count: u32,
    /// Held off until then (after [`FAILURES_ALLOWED`]).
    until: Option<tokio::time::Instant>,
    last: tokio::time::Instant,
}

impl AuthFailures {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Failures>> {
        self.by_addr.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `Err(seconds to wait)` while `addr` is held off.
    pub fn check(&self, addr: IpAddr) -> Result<(), u64> {
        let now = tokio::time::Instant::now();
        match self.lock().get(&addr).and_then(|f| f.until) {
            Some(until) if until > now => Err((until - now).as_secs_f64().ceil().max(1.0) as u64),
            _ => Ok(()),
        }
    }

    /// A wrong token from `addr`; answers the hold-off it now has, if any (from the
    /// [`FAILURES_ALLOWED`]th in a row on).
    pub fn failed(&self, addr: IpAddr) -> Option<Duration> {
        let now = tokio::time::Instant::now();
        let mut map = self.lock();
        if map.len() >= ADDRESSES_KEPT && !map.contains_key(&addr) {
            let oldest = map.iter().min_by_key(|(_, f)| f.last).map(|(a, _)| *a);
            if let Some(a) = oldest {
                map.remove(&a);
            }
        }
        let f = map.entry(addr).or_insert(Failures {
            count: 0,
            until: None,
            last: now,
        });
        f.count = f.count.saturating_add(1);
        f.last = now;
        let over = f.count.checked_sub(FAILURES_ALLOWED)?;
        let hold = BLOCK_FIRST
            .saturating_mul(1u32 << over.min(16))
            .min(BLOCK_MAX);
        f.until = Some(now + hold);
        Some(hold)
    }

    /// A right token from `addr`: its count starts again.
    pub fn succeeded(&self, addr: IpAddr) {
        let mut map = self.lock();
        if map.contains_key(&addr) {
            map.remove(&addr);
        }
    }
}

/// Middleware: `Authorization: Bearer <token>` (scheme in any case, see [`bearer_token`]) or
/// 401 problem+json; an address held off for wrong tokens gets 429 before its token is read.
pub async fn require_token(
    State((state, failures)): State<(AppState, Arc<AuthFailures>)>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let addr = req.extensions().get::<ClientAddr>().map(|c| c.0);
    if let Some(addr) = addr {
        failures.check(addr).map_err(too_many_failures)?;
    }
    match check_token(&state, req.headers()) {
        Ok(()) => {
            if let Some(addr) = addr {
                failures.succeeded(addr);
            }
            Ok(next.run(req).await)
        }
        Err(e) => {
            // A wrong token counts (its next requests may be held off); a request without one
            // compared nothing and counts nothing.
            let compared = req
                .headers()
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(bearer_token)
                .is_some();
            if let (Some(addr), true) = (addr, compared) {
                failures.failed(addr);
            }
            Err(e)
        }
    }
}

fn too_many_failures(retry_after_s: u64) -> ApiError {
    let mut e = ApiError::new(
        axum::http::StatusCode::TOO_MANY_REQUESTS,
        "too_many_auth_failures",
        format!(
            "{FAILURES_ALLOWED} wrong API tokens in a row from this address: its requests are \
             refused for {retry_after_s} s (Retry-After)"
        ),
    );
    e.retry_after_s = Some(retry_after_s);
    e
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
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn wrong_tokens_hold_an_address_off_for_longer_each_time() {
        let f = AuthFailures::default();
        let (a, b): (IpAddr, IpAddr) = ("127.0.0.2".parse().unwrap(), "127.0.0.3".parse().unwrap());
        for _ in 0..FAILURES_ALLOWED - 1 {
            assert_eq!(f.failed(a), None);
        }
        assert!(f.check(a).is_ok());
        assert_eq!(f.failed(a), Some(BLOCK_FIRST));
        assert_eq!(f.check(a), Err(10));
        assert!(f.check(b).is_ok(), "another address is not held off");
        tokio::time::advance(BLOCK_FIRST).await;
        assert!(f.check(a).is_ok());
        assert_eq!(f.failed(a), Some(BLOCK_FIRST * 2));
        for _ in 0..20 {
            f.failed(a);
        }
        assert_eq!(f.check(a), Err(BLOCK_MAX.as_secs()));
        f.succeeded(a);
        assert!(f.check(a).is_ok(), "a right token resets the address");
    }

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
