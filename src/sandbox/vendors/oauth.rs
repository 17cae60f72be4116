//! The fake OAuth 2 server (`/oauth`): authorization code with PKCE (S256 only) and a loopback
//! redirect (RFC 6749 §4.1, RFC 7636, RFC 8252), refresh tokens that rotate.
//!
//! One server for every fake: its access tokens work on all four apps. Any `client_id` is
//! accepted (a public client; a `client_secret`, if sent, is not checked); the code is bound to
//! the client, the `redirect_uri` and the PKCE challenge it was issued for.

use std::collections::{HashMap, HashSet};

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::header::{CACHE_CONTROL, LOCATION, PRAGMA};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use super::{
    begin, is_json, ok_json, parse_form, query_pairs, random_alnum, Answer, Auth, AuthFailure,
    Style,
};
use crate::sandbox::handlers::{control, problem};
use crate::sandbox::state::SandboxState;

/// How long an authorization code can be exchanged (RFC 6749 recommends at most 10 minutes).
const CODE_TTL_MS: i64 = 10 * 60 * 1000;

/// The PKCE S256 challenge of a verifier: BASE64URL(SHA-256(verifier)) without padding
/// (RFC 7636 §4.2). A client sends it to `/oauth/authorize` as `code_challenge`.
pub fn pkce_s256(verifier: &str) -> String {
    base64url(&Sha256::digest(verifier.as_bytes()))
}

/// Base64url without padding (RFC 4648 §5).
fn base64url(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(ABC[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

#[derive(Debug, Clone)]
struct Code {
    client_id: String,
    redirect_uri: String,
    challenge: String,
    scope: Option<String>,
    expires_at_ms: i64,
}

#[derive(Debug, Clone)]
struct Grant {
    client_id: String,
    scope: Option<String>,
}

/// The server's memory.
#[derive(Debug, Default)]
pub(crate) struct OAuthData {
    /// Set by `POST /_sandbox/oauth`; `None`: the config's `access_token_ttl`.
    ttl_override_s: Option<u64>,
    deny: bool,
    codes: HashMap<String, Code>,
    /// Access token → expiry (UTC unix ms).
    access: HashMap<String, i64>,
    refresh: HashMap<String, Grant>,
    /// Refresh tokens rotated out (reusing one is `invalid_grant`).
    retired: HashSet<String>,
    authorizations: u64,
    exchanges: u64,
    refreshes: u64,
    refresh_failures: u64,
    reused_refresh_tokens: u64,
}

impl OAuthData {
    /// When an access token the server issued expires.
    pub(crate) fn access_expiry(&self, token: &str) -> Option<i64> {
        self.access.get(token).copied()
    }

    fn ttl_s(&self, state: &SandboxState) -> u64 {
        self.ttl_override_s
            .unwrap_or_else(|| state.config().access_token_ttl.as_secs())
    }

    /// A new access and refresh token pair, as the token endpoint answers it.
    fn issue(&mut self, ttl_s: u64, now: i64, grant: Grant) -> Value {
        let access = format!("sbx_at_{}", random_alnum(32));
        let refresh = format!("sbx_rt_{}", random_alnum(32));
        let ttl_ms = i64::try_from(ttl_s.saturating_mul(1000)).unwrap_or(i64::MAX);
        self.access
            .insert(access.clone(), now.saturating_add(ttl_ms));
        let scope = grant.scope.clone();
        self.refresh.insert(refresh.clone(), grant);
        let mut v = json!({
            "access_token": access,
            "token_type": "bearer",
            "expires_in": ttl_s,
            "refresh_token": refresh,
        });
        if let Some(s) = scope {
            v["scope"] = json!(s);
        }
        v
    }

    fn status(&self, ttl_s: u64, now: i64) -> Value {
        let active = self.access.values().filter(|e| now < **e).count();
        json!({
            "access_token_ttl_s": ttl_s,
            "deny_authorization": self.deny,
            "authorizations": self.authorizations,
            "code_exchanges": self.exchanges,
            "refreshes": self.refreshes,
            "refresh_failures": self.refresh_failures,
            "reused_refresh_tokens": self.reused_refresh_tokens,
            "access_tokens": {"active": active, "expired": self.access.len() - active},
            "refresh_tokens": self.refresh.len(),
        })
    }
}

/// The OAuth server's answers (RFC 6749 §5.2 error bodies).
pub(crate) struct OAuth;

fn oauth_error(status: u16, error: &str, description: &str) -> Answer {
    Answer::json(
        status,
        "application/json",
        &json!({"error": error, "error_description": description}),
    )
    .header("cache-control", "no-store")
}

impl Style for OAuth {
    fn app(&self) -> &'static str {
        "oauth"
    }
    fn unauthorized(&self, _why: &AuthFailure) -> Answer {
        oauth_error(401, "invalid_client", "client authentication failed")
    }
    fn rate_limited(&self, _retry_after_s: u64) -> Answer {
        oauth_error(
            429,
            "temporarily_unavailable",
            "sandbox fault: too many requests",
        )
    }
    fn server_error(&self) -> Answer {
        oauth_error(500, "server_error", "sandbox fault: internal error")
    }
    fn not_found(&self, _method: &str, _path: &str) -> Answer {
        oauth_error(
            404,
            "not_found",
            "the OAuth server has /oauth/authorize and /oauth/token",
        )
    }
    fn bad_request(&self, message: &str) -> Answer {
        oauth_error(400, "invalid_request", message)
    }
}

pub(super) fn routes() -> Router<SandboxState> {
    Router::new()
        .route("/oauth/authorize", get(authorize))
        .route("/oauth/token", post(token))
}

/// Is `uri` a loopback `http` redirect (RFC 8252 §7.3; `localhost` allowed too)?
fn loopback(uri: &str) -> Option<reqwest::Url> {
    let url = reqwest::Url::parse(uri).ok()?;
    let host = url.host_str()?;
    let host_ok = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => v6
            .parse::<std::net::Ipv6Addr>()
            .is_ok_and(|ip| ip.is_loopback()),
        None => {
            host.eq_ignore_ascii_case("localhost")
                || host
                    .parse::<std::net::Ipv4Addr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
    };
    (url.scheme() == "http" && host_ok && url.fragment().is_none()).then_some(url)
}

fn redirect(mut to: reqwest::Url, params: &[(&str, &str)]) -> Answer {
    {
        let mut q = to.query_pairs_mut();
        for (k, v) in params {
            q.append_pair(k, v);
        }
    }
    Answer::text(302, "text/plain; charset=utf-8", "").header(LOCATION.as_str(), to.as_str())
}

fn valid_challenge(c: &str) -> bool {
    (43..=128).contains(&c.len())
        && c.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'))
}

/// `GET /oauth/authorize`: approve at once and redirect to the loopback `redirect_uri` with
/// `code` and `state` (or `error` and `state`).
async fn authorize(State(state): State<SandboxState>, req: Request) -> Response {
    let ctx = match begin(&OAuth, "", Auth::Open, state, req).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let q: HashMap<String, String> = query_pairs(&ctx.parts).into_iter().collect();
    let get = |k: &str| q.get(k).map(String::as_str).filter(|v| !v.is_empty());
    // Errors that must not redirect (RFC 6749 §4.1.2.1): no client, a bad redirect URI.
    let Some(client_id) = get("client_id").map(str::to_string) else {
        return ctx.refuse(oauth_error(400, "invalid_request", "client_id is required"));
    };
    let Some(redirect_uri) = get("redirect_uri").map(str::to_string) else {
        return ctx.refuse(oauth_error(
            400,
            "invalid_request",
            "redirect_uri is required",
        ));
    };
    let Some(to) = loopback(&redirect_uri) else {
        return ctx.refuse(oauth_error(
            400,
            "invalid_request",
            "redirect_uri must be a loopback http URL (http://127.0.0.1:<port>/…, RFC 8252)",
        ));
    };
    let st = get("state").unwrap_or_default().to_string();
    let fail = |error: &str, description: &str| {
        let mut p = vec![("error", error), ("error_description", description)];
        if !st.is_empty() {
            p.push(("state", st.as_str()));
        }
        redirect(to.clone(), &p)
    };
    if get("response_type") != Some("code") {
        return ctx.refuse(fail(
            "unsupported_response_type",
            "only response_type=code is supported",
        ));
    }
    let challenge = get("code_challenge").unwrap_or_default().to_string();
    if get("code_challenge_method") != Some("S256") || !valid_challenge(&challenge) {
        return ctx.refuse(fail(
            "invalid_request",
            "PKCE is required: code_challenge (43-128 characters) with code_challenge_method=S256",
        ));
    }
    let scope = get("scope").map(str::to_string);
    ctx.run(|_, data, now| {
        if data.oauth.deny {
            return Err(fail("access_denied", "the user denied the request"));
        }
        let code = format!("sbx_code_{}", random_alnum(24));
        data.oauth.codes.retain(|_, c| now < c.expires_at_ms);
        data.oauth.codes.insert(
            code.clone(),
            Code {
                client_id,
                redirect_uri,
                challenge,
                scope,
                expires_at_ms: now + CODE_TTL_MS,
            },
        );
        data.oauth.authorizations += 1;
        let mut p = vec![("code", code.as_str())];
        if !st.is_empty() {
            p.push(("state", st.as_str()));
        }
        Ok((redirect(to.clone(), &p), None))
    })
    .await
}

/// The client id of a token request: the `client_id` parameter or HTTP Basic's user name.
fn client_of(params: &HashMap<String, String>, headers: &HeaderMap) -> Option<String> {
    if let Some(c) = params.get("client_id").filter(|c| !c.is_empty()) {
        return Some(c.clone());
    }
    let user = super::basic_user(headers)?;
    let user = percent_encoding::percent_decode_str(&user)
        .decode_utf8()
        .ok()?
        .into_owned();
    (!user.is_empty()).then_some(user)
}

/// Standard base64 (padding optional).
pub(crate) fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes().filter(|&c| c != b'=') {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

/// `POST /oauth/token`: `authorization_code` (with `code_verifier`) and `refresh_token`
/// (rotating).
async fn token(State(state): State<SandboxState>, req: Request) -> Response {
    let ctx = match begin(&OAuth, "", Auth::Open, state, req).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let params: HashMap<String, String> = if is_json(&ctx.parts) {
        match serde_json::from_slice::<HashMap<String, Value>>(&ctx.body) {
            Ok(m) => m
                .into_iter()
                .filter_map(|(k, v)| v.as_str().map(|s| (k, s.to_string())))
                .collect(),
            Err(e) => return ctx.refuse(oauth_error(400, "invalid_request", &e.to_string())),
        }
    } else {
        match parse_form(&ctx.body) {
            Ok(p) => p.into_iter().collect(),
            Err(e) => return ctx.refuse(oauth_error(400, "invalid_request", &e)),
        }
    };
    let client = client_of(&params, &ctx.parts.headers);
    let param = |k: &str| params.get(k).cloned().filter(|v| !v.is_empty());
    let ttl_state = ctx.call.state.clone();
    match params.get("grant_type").map(String::as_str) {
        Some("authorization_code") => {
            let (Some(code), Some(verifier)) = (param("code"), param("code_verifier")) else {
                return ctx.refuse(oauth_error(
                    400,
                    "invalid_request",
                    "code and code_verifier are required",
                ));
            };
            let redirect_uri = param("redirect_uri");
            ctx.run(move |_, data, now| {
                let o = &mut data.oauth;
                // A code is single use: taken out whatever the outcome.
                let Some(c) = o.codes.remove(&code).filter(|c| now < c.expires_at_ms) else {
                    return Err(oauth_error(
                        400,
                        "invalid_grant",
                        "the authorization code is invalid, expired or already used",
                    ));
                };
                if client.as_deref() != Some(c.client_id.as_str()) {
                    return Err(oauth_error(
                        400,
                        "invalid_grant",
                        "the authorization code was issued to another client",
                    ));
                }
                if redirect_uri.as_deref() != Some(c.redirect_uri.as_str()) {
                    return Err(oauth_error(
                        400,
                        "invalid_grant",
                        "redirect_uri does not match the one the code was issued for",
                    ));
                }
                if pkce_s256(&verifier) != c.challenge {
                    return Err(oauth_error(
                        400,
                        "invalid_grant",
                        "code_verifier does not match the code_challenge",
                    ));
                }
                o.exchanges += 1;
                let ttl = o.ttl_s(&ttl_state);
                let v = o.issue(
                    ttl,
                    now,
                    Grant {
                        client_id: c.client_id,
                        scope: c.scope,
                    },
                );
                Ok((token_answer(&v), None))
            })
            .await
        }
        Some("refresh_token") => {
            let Some(rt) = param("refresh_token") else {
                return ctx.refuse(oauth_error(
                    400,
                    "invalid_request",
                    "refresh_token is required",
                ));
            };
            ctx.run(move |_, data, now| {
                let o = &mut data.oauth;
                let Some(grant) = o.refresh.get(&rt).cloned() else {
                    o.refresh_failures += 1;
                    let reused = o.retired.contains(&rt);
                    if reused {
                        o.reused_refresh_tokens += 1;
                    }
                    return Err(oauth_error(
                        400,
                        "invalid_grant",
                        if reused {
                            "the refresh token was already used (refresh tokens rotate: use the \
                             one the last refresh returned)"
                        } else {
                            "the refresh token is invalid"
                        },
                    ));
                };
                if client.as_deref().is_some_and(|c| c != grant.client_id) {
                    o.refresh_failures += 1;
                    return Err(oauth_error(
                        400,
                        "invalid_grant",
                        "the refresh token was issued to another client",
                    ));
                }
                o.refresh.remove(&rt);
                o.retired.insert(rt);
                o.refreshes += 1;
                let ttl = o.ttl_s(&ttl_state);
                let v = o.issue(ttl, now, grant);
                Ok((token_answer(&v), None))
            })
            .await
        }
        Some(other) => ctx.refuse(oauth_error(
            400,
            "unsupported_grant_type",
            &format!("grant_type {other:?} is not supported (authorization_code, refresh_token)"),
        )),
        None => ctx.refuse(oauth_error(
            400,
            "invalid_request",
            "grant_type is required",
        )),
    }
}

fn token_answer(v: &Value) -> Answer {
    Answer::json(200, "application/json", v)
        .header(CACHE_CONTROL.as_str(), "no-store")
        .header(PRAGMA.as_str(), "no-cache")
}

// ---------------------------------------------------------------------------------------------
// Controls

/// `GET /_sandbox/oauth`: settings and counters.
pub(super) async fn control_get(State(state): State<SandboxState>) -> Response {
    let now = state.now_ms();
    let data = state.lock();
    let ttl = data.vendors.oauth.ttl_s(&state);
    ok_json(StatusCode::OK, &data.vendors.oauth.status(ttl, now))
}

/// `GET /_sandbox/oauth/issued`: every token the server issued since the last reset
/// (`{"access_tokens": [...], "refresh_tokens": [...]}`, sorted; refresh tokens include the
/// rotated-out ones), so a test can check that none of them leaked into what it stores.
pub(super) async fn control_issued(State(state): State<SandboxState>) -> Response {
    let data = state.lock();
    let o = &data.vendors.oauth;
    let mut access: Vec<&String> = o.access.keys().collect();
    access.sort();
    let mut refresh: Vec<&String> = o.refresh.keys().chain(&o.retired).collect();
    refresh.sort();
    ok_json(
        StatusCode::OK,
        &json!({"access_tokens": access, "refresh_tokens": refresh}),
    )
}

/// Body of `POST /_sandbox/oauth`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OAuthSettings {
    /// Lifetime of access tokens issued from now on.
    #[serde(default)]
    access_token_ttl_s: Option<u64>,
    /// Expire every access token issued so far.
    #[serde(default)]
    expire_access_tokens: bool,
    /// Answer every authorization with `error=access_denied`.
    #[serde(default)]
    deny_authorization: Option<bool>,
}

/// `POST /_sandbox/oauth`: change settings, expire tokens; answers like `GET`.
pub(super) async fn control_post(State(state): State<SandboxState>, body: Bytes) -> Response {
    let s: OAuthSettings = match serde_json::from_slice(&body) {
        Ok(s) => s,
        Err(e) => {
            return control(problem(
                StatusCode::BAD_REQUEST,
                "invalid_oauth_settings",
                format!(
                    "expected {{\"access_token_ttl_s\": n, \"expire_access_tokens\": true, \
                     \"deny_authorization\": false}} (each optional): {e}"
                ),
            ))
        }
    };
    if s.access_token_ttl_s.is_some_and(|t| t > 366 * 86_400) {
        return control(problem(
            StatusCode::BAD_REQUEST,
            "invalid_oauth_settings",
            "access_token_ttl_s is at most a year",
        ));
    }
    let now = state.now_ms();
    let mut data = state.lock();
    let o = &mut data.vendors.oauth;
    if let Some(t) = s.access_token_ttl_s {
        o.ttl_override_s = Some(t);
    }
    if let Some(d) = s.deny_authorization {
        o.deny = d;
    }
    if s.expire_access_tokens {
        for e in o.access.values_mut() {
            *e = (*e).min(now);
        }
    }
    let ttl = o.ttl_s(&state);
    ok_json(StatusCode::OK, &o.status(ttl, now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_matches_rfc7636_appendix_b() {
        assert_eq!(
            pkce_s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        assert_eq!(base64url(b"f"), "Zg");
        assert_eq!(base64url(b"fo"), "Zm8");
        assert_eq!(base64url(b"foo"), "Zm9v");
        assert_eq!(base64_decode("Zm9vOmJhcg==").unwrap(), b"foo:bar");
    }

    #[test]
    fn loopback_redirects_only() {
        assert!(loopback("http://127.0.0.1:5000/cb").is_some());
        assert!(loopback("http://[::1]:5000/cb").is_some());
        assert!(loopback("http://localhost/cb").is_some());
        assert!(loopback("https://127.0.0.1/cb").is_none());
        assert!(loopback("http://example.com/cb").is_none());
        assert!(loopback("not a url").is_none());
    }
}
