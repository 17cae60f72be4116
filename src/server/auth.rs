//! Bearer-token auth for management routes (`/api/v1/...`).
//!
//! The token comes from `--token`/`FLUXO_TOKEN`, else from `<data-dir>/token`, else it is
//! generated (256 random bits, hex) into that file with mode 0600 and printed once.
//! Comparison is constant-time. Idempotency records are scoped by a hash of the token.

use std::path::Path;

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::Response;
use sha2::{Digest, Sha256};

use super::error::ApiError;
use super::AppState;

/// Where the token came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenSource {
    Given,
    File,
    Generated,
}

/// Resolve the API token for a data dir. The data dir is made 0700 (created so, or tightened
/// with a log line) and an existing token file 0600 ([`crate::secrets`]).
pub fn resolve_token(
    given: Option<String>,
    data_dir: &Path,
) -> std::io::Result<(String, TokenSource)> {
    crate::secrets::secure_dir(data_dir)?;
    if let Some(t) = given.filter(|t| !t.trim().is_empty()) {
        return Ok((t.trim().to_string(), TokenSource::Given));
    }
    let path = data_dir.join("token");
    crate::secrets::secure_file(&path)?;
    if let Ok(t) = std::fs::read_to_string(&path) {
        let t = t.trim().to_string();
        if !t.is_empty() {
            return Ok((t, TokenSource::File));
        }
    }
    let token = generate_token();
    write_secret(&path, &token)?;
    Ok((token, TokenSource::Generated))
}

/// A new random token: 32 bytes from the OS RNG, hex.
pub fn generate_token() -> String {
    use rand::RngCore;
    let mut b = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut b);
    hex::encode(b)
}

/// Write a secret file readable by its owner only (0600, whatever the umask), atomically,
/// in a folder made 0700.
pub fn write_secret(path: &Path, secret: &str) -> std::io::Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => {
            crate::secrets::secure_dir(dir)?;
        }
        _ => {}
    }
    crate::workflow::dir::write_atomic_mode(path, format!("{secret}\n").as_bytes(), 0o600)
}

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

/// Middleware: `Authorization: Bearer <token>` or 401 problem+json.
pub async fn require_token(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim);
    match given {
        None => Err(ApiError::new(
            axum::http::StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing `Authorization: Bearer <token>` (the token is in <data-dir>/token)",
        )),
        Some(t) if constant_time_eq(t.as_bytes(), state.token().as_bytes()) => {
            Ok(next.run(req).await)
        }
        Some(_) => Err(ApiError::new(
            axum::http::StatusCode::UNAUTHORIZED,
            "unauthorized",
            "wrong API token",
        )),
    }
}
