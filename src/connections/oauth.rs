//! OAuth 2 token refresh for connector steps (issue 35, "Token refresh"): an `action` step on a
//! [`Credential::Oauth2`] connection asks [`Tokens::access_token`] for the access token to send,
//! and again, naming the token the app refused, after a `refresh_token` answer (a 401, Slack's
//! `token_expired`: the connector's error rules, [`crate::connectors::Outcome::RefreshToken`]).
//!
//! # Where the current tokens live
//!
//! A connection's credential holds the tokens it was connected with. The tokens a refresh
//! answers (a new access token, the *rotated* refresh token, their expiry) are kept in the
//! engine's store Memory, namespace [`STATE_NAMESPACE`], key = the connection id, with no TTL:
//! every `fluxo serve` process on one PostgreSQL database sees them (sled: one process). The
//! entry's value is [`SealedState`]: the tokens encrypted with XChaCha20-Poly1305 (never plain
//! text), plus three non-secret fields:
//!
//! * `origin`: a fingerprint of the credential the tokens descend from (SHA-256 of the
//!   connection id and the credential's refresh token, or its access token when it has none;
//!   the first [`ORIGIN_BYTES`] bytes, hex). Re-connecting (a new credential put into the
//!   connection store) changes it, so tokens of the old grant are ignored, never sent.
//! * `generation`: 1 for the first refresh of an origin, +1 for each later one (the
//!   credential's own tokens are generation 0). A process waiting for another's refresh waits
//!   for it to change.
//! * `key_id`: which key sealed it (the first 8 bytes of SHA-256 of the sealing key, hex).
//!
//! The sealing key is derived (SHA-256 with a domain label) from the connections store's own
//! key ([`super::ConnectionStore::state_key`]: the encrypted file store's
//! [`super::key::ConnectionKey`]), so every process given the same connections key reads the
//! state; a process with another key gets a `connection_unavailable` error naming both key
//! ids. A store without a key ([`super::MemConnections`], tests and embedders) seals with a
//! random key made once per process: the state is then readable by this process only (every
//! engine in it), which is enough for one process and must not be used across processes.
//! The associated data binds a sealed state to its connection id, origin and generation.
//!
//! State whose origin matches the credential wins over the credential's tokens; the rotated
//! refresh token is therefore never lost while the Memory entry exists. (Deleting the
//! namespace by hand forgets it, and the credential's refresh token, already spent, is then
//! refused: reconnect.)
//!
//! # Fresh
//!
//! An access token is fresh when `expires_at_ms - SKEW_MS > now` on the engine's clock (the
//! clock steps get), [`SKEW_MS`] = 60 s. A token of unknown expiry is fresh until the app
//! refuses it.
//!
//! # Single flight
//!
//! In one process: a `tokio::sync::Mutex` per connection, held by the engine (as the
//! [`super::pace::Pacer`] is), taken only when the token is not fresh. Across processes: a
//! Memory claim (`allow_overwrite: false`, TTL [`CLAIM_TTL_MS`]) at [`CLAIM_NAMESPACE`], key the connection id.
//! After taking the mutex, and after every lost claim, the state is read again first
//! (double-checked): a refresh someone else finished is used, not repeated. The claim's
//! winner posts the refresh grant (RFC 6749 §6) to the credential's `token_url` through the
//! `oauth2` crate, `client_id` and `client_secret` (when set) in the request body, over the
//! run's own HTTP transport (the same outbound rules as the step's calls; the token URL is the
//! connection's, as trusted as its `base_url`), with a timeout of [`REFRESH_TIMEOUT_MS`]
//! within the run deadline. It then writes the new state (overwriting; the old refresh token
//! is kept when the answer has none) and deletes the claim. A loser polls the state every
//! [`POLL_MS`] of real time (no clock movement) until a usable token appears; when the claim
//! is gone without one (the winner failed, or its claim expired) it claims in turn. It gives
//! up at the run deadline or after [`CLAIM_TTL_MS`] of real time (`oauth_refresh_failed`).
//!
//! # Errors (as a step's [`StepError`])
//!
//! * `auth_failed`: the token endpoint refused the grant (`invalid_grant`: the refresh token
//!   was revoked or already used; `invalid_client`, `unauthorized_client`, any other OAuth
//!   error code but the two below), or the token expired and the connection has no refresh
//!   token: the message names the connection id and says to reconnect it.
//! * `oauth_refresh_failed`: no answer from the token endpoint (timeout, connection error),
//!   the OAuth error `server_error` or `temporarily_unavailable`, an answer that is not a
//!   token response, or a wait for another process's refresh that did not end in time.
//! * `connection_unavailable`: the stored state cannot be read (another key, damage) or
//!   written (the store).
//!
//! None is retried within the step (the next run asks again). No message quotes a token.
//!
//! # Masking
//!
//! Every token this process reads from the state or receives from a refresh is remembered
//! ([`Tokens::known_secrets`], the last [`KEEP_PER_CONNECTION`] per connection) and masked in
//! run records: the engine adds them to its masker ([`crate::runtime::Engine::masker`]) and a
//! running walk takes up new ones before it masks each step record
//! ([`Tokens::secrets_version`]). Tokens are never logged.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::{Connection, Credential};
use crate::clock::Clock;
use crate::steps::http::{HttpCall, HttpTransport, TransportError};
use crate::steps::StepError;
use crate::store::{MemoryStore, WriteOptions, WriteResult};

/// The Memory namespace of the sealed token states (key: the connection id).
pub const STATE_NAMESPACE: &str = "fluxo.oauth.tokens";
/// The Memory namespace of the refresh claims (key: the connection id).
pub const CLAIM_NAMESPACE: &str = "fluxo.oauth.refresh";
/// How long a refresh claim lives, in **milliseconds** of the engine clock (30 s): a process
/// that dies while refreshing holds others back at most this long.
pub const CLAIM_TTL_MS: u64 = 30_000;
/// An access token is refreshed this many **milliseconds** before its expiry (60 s).
pub const SKEW_MS: i64 = 60_000;
/// The longest wait for the token endpoint, in **milliseconds** (10 s; less when the run
/// deadline is nearer).
pub const REFRESH_TIMEOUT_MS: u64 = 10_000;
/// How often a process waiting for another's refresh reads the state again, in **real
/// milliseconds**.
pub const POLL_MS: u64 = 20;
/// Bytes of SHA-256 kept in an origin fingerprint.
pub const ORIGIN_BYTES: usize = 12;
/// Tokens remembered for masking per connection (the newest).
pub const KEEP_PER_CONNECTION: usize = 8;

const NONCE_BYTES: usize = 24;

/// A connection's current tokens (secret: never serialised outside [`SealedState`]).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenSet {
    pub access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// When the access token expires (UTC unix **ms**), if the app said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<i64>,
}

impl std::fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSet")
            .field("expires_at_ms", &self.expires_at_ms)
            .finish_non_exhaustive()
    }
}

impl TokenSet {
    /// Whether the access token is fresh at `now_ms`: `expires_at_ms - SKEW_MS > now_ms`, or
    /// no expiry known.
    pub fn fresh(&self, now_ms: i64) -> bool {
        self.expires_at_ms
            .is_none_or(|e| e.saturating_sub(SKEW_MS) > now_ms)
    }
}

/// The Memory value of a connection's state: `{"v": 1, "origin": hex, "generation": n,
/// "key_id": hex, "nonce": hex, "sealed": hex}`; `sealed` is the XChaCha20-Poly1305
/// ciphertext (with its tag) of the [`TokenSet`] as JSON.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SealedState {
    pub v: u32,
    pub origin: String,
    pub generation: u64,
    pub key_id: String,
    pub nonce: String,
    pub sealed: String,
}

/// A connection's tokens and where they stand.
#[derive(Debug, Clone)]
struct Current {
    tokens: TokenSet,
    generation: u64,
}

/// The origin fingerprint of `conn`'s credential (see the module doc); `None` for a
/// credential that is not OAuth 2.
pub fn origin(conn: &Connection) -> Option<String> {
    let Credential::Oauth2 {
        access_token,
        refresh_token,
        ..
    } = &conn.credential
    else {
        return None;
    };
    let mut h = Sha256::new();
    h.update(b"fluxo.oauth.origin\0");
    h.update(conn.id.as_bytes());
    h.update(b"\0");
    h.update(refresh_token.as_deref().unwrap_or(access_token).as_bytes());
    Some(hex::encode(&h.finalize()[..ORIGIN_BYTES]))
}

/// The key token states are sealed with.
#[derive(Clone)]
struct SealKey {
    bytes: [u8; 32],
    id: String,
}

impl SealKey {
    fn derive(material: &[u8]) -> SealKey {
        let mut h = Sha256::new();
        h.update(b"fluxo.oauth.tokens.key\0");
        h.update(material);
        let bytes: [u8; 32] = h.finalize().into();
        let id = hex::encode(&Sha256::digest(bytes)[..8]);
        SealKey { bytes, id }
    }
}

/// The random key of a process whose connections store has none (see the module doc).
static PROCESS_KEY: std::sync::LazyLock<SealKey> = std::sync::LazyLock::new(|| {
    use rand::RngCore;
    let mut b = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut b);
    SealKey::derive(&b)
});

fn seal_key(store_key: Option<&super::key::ConnectionKey>) -> SealKey {
    match store_key {
        Some(k) => SealKey::derive(k.bytes()),
        None => PROCESS_KEY.clone(),
    }
}

fn aad(id: &str, origin: &str, generation: u64) -> Vec<u8> {
    format!("fluxo.oauth.tokens\0{id}\0{origin}\0{generation}").into_bytes()
}

fn seal(key: &SealKey, id: &str, origin: &str, generation: u64, t: &TokenSet) -> SealedState {
    use rand::RngCore;
    let mut nonce = [0u8; NONCE_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut nonce);
    let plain = serde_json::to_vec(t).unwrap_or_default();
    let cipher = XChaCha20Poly1305::new((&key.bytes).into());
    let sealed = cipher
        .encrypt(
            XNonce::from_slice(&nonce),
            Payload {
                msg: &plain,
                aad: &aad(id, origin, generation),
            },
        )
        .unwrap_or_default();
    SealedState {
        v: 1,
        origin: origin.to_string(),
        generation,
        key_id: key.id.clone(),
        nonce: hex::encode(nonce),
        sealed: hex::encode(sealed),
    }
}

fn unseal(key: &SealKey, id: &str, s: &SealedState) -> Result<TokenSet, String> {
    if s.key_id != key.id {
        return Err(format!(
            "the saved tokens of connection `{id}` were sealed with key {} and this process's \
             connections key is {}: give every process the same connections key",
            s.key_id, key.id
        ));
    }
    let damaged = || format!("the saved tokens of connection `{id}` are damaged");
    let nonce = hex::decode(&s.nonce).map_err(|_| damaged())?;
    let sealed = hex::decode(&s.sealed).map_err(|_| damaged())?;
    if nonce.len() != NONCE_BYTES {
        return Err(damaged());
    }
    let cipher = XChaCha20Poly1305::new((&key.bytes).into());
    let plain = cipher
        .decrypt(
            XNonce::from_slice(&nonce),
            Payload {
                msg: &sealed,
                aad: &aad(id, &s.origin, s.generation),
            },
        )
        .map_err(|_| damaged())?;
    serde_json::from_slice(&plain).map_err(|_| damaged())
}

/// What a token request needs from the step: its Memory, HTTP transport, clock and deadline,
/// and the connections store's key.
pub struct Io<'a> {
    pub memory: &'a dyn MemoryStore,
    pub http: Arc<dyn HttpTransport>,
    pub clock: &'a dyn Clock,
    /// The run deadline (UTC unix ms).
    pub deadline_ms: i64,
    /// The connections store's key ([`super::ConnectionStore::state_key`]), if it has one.
    pub store_key: Option<super::key::ConnectionKey>,
}

/// The OAuth 2 tokens of every connection used in this process: the per-connection refresh
/// locks and the tokens to mask. One per engine, shared by its clones.
#[derive(Default)]
pub struct Tokens {
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    seen: Mutex<BTreeMap<String, VecDeque<String>>>,
    version: AtomicU64,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens").finish_non_exhaustive()
    }
}

impl Tokens {
    /// No tokens yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Changes each time a token joins [`Tokens::known_secrets`].
    pub fn secrets_version(&self) -> u64 {
        self.version.load(Ordering::SeqCst)
    }

    /// The tokens this process has read or received (the newest [`KEEP_PER_CONNECTION`] per
    /// connection), to mask in run records.
    pub fn known_secrets(&self) -> Vec<String> {
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.values().flatten().cloned().collect()
    }

    fn remember(&self, id: &str, t: &TokenSet) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let list = seen.entry(id.to_string()).or_default();
        let mut added = false;
        for s in std::iter::once(&t.access_token).chain(t.refresh_token.as_ref()) {
            if !list.contains(s) {
                list.push_back(s.clone());
                added = true;
            }
        }
        while list.len() > KEEP_PER_CONNECTION {
            list.pop_front();
        }
        if added {
            self.version.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn lock_of(&self, id: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.locks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(id.to_string())
            .or_default()
            .clone()
    }

    /// The access token to send for the OAuth 2 connection `conn`: the current one when it is
    /// fresh (and not `rejected`, the token the app just refused), else the one a refresh
    /// gives, refreshed once for every process (see the module doc). Errors: `auth_failed`,
    /// `oauth_refresh_failed`, `connection_unavailable`, `config` (not an OAuth 2 connection).
    pub async fn access_token(
        &self,
        io: &Io<'_>,
        conn: &Connection,
        rejected: Option<&str>,
    ) -> Result<String, StepError> {
        let Some(origin) = origin(conn) else {
            return Err(StepError::new(
                "config",
                format!("connection `{}` is not an OAuth 2 connection", conn.id),
            ));
        };
        let key = seal_key(io.store_key.as_ref());
        let current = self.current(io, conn, &origin, &key).await?;
        if usable(&current, io.clock.now_ms(), rejected) {
            return Ok(current.tokens.access_token);
        }
        let lock = self.lock_of(&conn.id);
        let _held = lock.lock().await;
        let started = std::time::Instant::now();
        loop {
            // Double-checked: another run of this process, or another process, may have
            // refreshed while this one waited.
            let now = io.clock.now_ms();
            let current = self.current(io, conn, &origin, &key).await?;
            if usable(&current, now, rejected) {
                return Ok(current.tokens.access_token);
            }
            let claim = WriteOptions {
                allow_overwrite: false,
                ttl_ms: Some(CLAIM_TTL_MS),
                owner: None,
            };
            let claimed = io
                .memory
                .write(
                    CLAIM_NAMESPACE,
                    &conn.id,
                    &Value::from(std::process::id()),
                    claim,
                    now,
                )
                .await
                .map_err(|e| unavailable(&conn.id, e))?;
            if let WriteResult::Written { .. } = claimed {
                // Read once more under the claim: a refresh may have ended between the read
                // above and the claim.
                let current = self.current(io, conn, &origin, &key).await;
                let done = match current {
                    Ok(c) if usable(&c, io.clock.now_ms(), rejected) => Ok(c.tokens.access_token),
                    Ok(c) => self.refresh(io, conn, &origin, &key, c).await,
                    Err(e) => Err(e),
                };
                let _ = io
                    .memory
                    .delete(CLAIM_NAMESPACE, &conn.id, io.clock.now_ms())
                    .await;
                return done;
            }
            // Another process refreshes: wait for its answer in real time.
            if io.clock.now_ms() >= io.deadline_ms
                || started.elapsed() >= Duration::from_millis(CLAIM_TTL_MS)
            {
                let mut e = StepError::new(
                    "oauth_refresh_failed",
                    format!(
                        "another process was refreshing the tokens of connection `{}` and no \
                         new token came in time",
                        conn.id
                    ),
                );
                e.deadline = io.clock.now_ms() >= io.deadline_ms;
                return Err(e);
            }
            tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
        }
    }

    /// The tokens in force: the state in Memory when its origin is the credential's, else the
    /// credential's own (generation 0).
    async fn current(
        &self,
        io: &Io<'_>,
        conn: &Connection,
        origin: &str,
        key: &SealKey,
    ) -> Result<Current, StepError> {
        let entry = io
            .memory
            .read(STATE_NAMESPACE, &conn.id, io.clock.now_ms())
            .await
            .map_err(|e| unavailable(&conn.id, e))?;
        let state = entry.and_then(|e| serde_json::from_value::<SealedState>(e.value).ok());
        let current = match state {
            Some(s) if s.origin == origin => {
                let tokens = unseal(key, &conn.id, &s)
                    .map_err(|m| StepError::new("connection_unavailable", m))?;
                Current {
                    tokens,
                    generation: s.generation,
                }
            }
            _ => {
                let Credential::Oauth2 {
                    access_token,
                    refresh_token,
                    expires_at_ms,
                    ..
                } = &conn.credential
                else {
                    unreachable!("origin() is Some for OAuth 2 only")
                };
                Current {
                    tokens: TokenSet {
                        access_token: access_token.clone(),
                        refresh_token: refresh_token.clone(),
                        expires_at_ms: *expires_at_ms,
                    },
                    generation: 0,
                }
            }
        };
        self.remember(&conn.id, &current.tokens);
        Ok(current)
    }

    /// Post the refresh grant for `current` and save what it answers (under the claim).
    async fn refresh(
        &self,
        io: &Io<'_>,
        conn: &Connection,
        origin: &str,
        key: &SealKey,
        current: Current,
    ) -> Result<String, StepError> {
        let Credential::Oauth2 {
            token_url,
            client_id,
            client_secret,
            ..
        } = &conn.credential
        else {
            unreachable!("origin() is Some for OAuth 2 only")
        };
        let Some(refresh_token) = current.tokens.refresh_token.clone() else {
            return Err(StepError::new(
                "auth_failed",
                format!(
                    "the access token of connection `{}` expired and the connection has no \
                     refresh token: reconnect it in Settings → Connections",
                    conn.id
                ),
            ));
        };
        let now = io.clock.now_ms();
        let remaining = u64::try_from(io.deadline_ms.saturating_sub(now)).unwrap_or(0);
        if remaining == 0 {
            let mut e = StepError::new(
                "deadline_exceeded",
                format!(
                    "the run deadline passed before the tokens of connection `{}` could be \
                     refreshed",
                    conn.id
                ),
            );
            e.deadline = true;
            return Err(e);
        }
        let timeout = Duration::from_millis(REFRESH_TIMEOUT_MS.min(remaining));
        let answer = post_refresh(
            io.http.clone(),
            timeout,
            token_url.clone(),
            client_id.clone(),
            client_secret.clone(),
            refresh_token.clone(),
        )
        .await;
        let (access, rotated, expires_in) = match answer {
            Ok(t) => t,
            // The endpoint is down or busy (RFC 6749 §5.2 has no such code; providers answer
            // `server_error`, `temporarily_unavailable` as in §4.1.2.1): not the grant's fault.
            Err(Refused::Grant { error, .. })
                if matches!(error.as_str(), "server_error" | "temporarily_unavailable") =>
            {
                return Err(StepError::new(
                    "oauth_refresh_failed",
                    format!(
                        "refreshing the tokens of connection `{}` failed: the token endpoint \
                         answered {error}",
                        conn.id
                    ),
                ))
            }
            Err(Refused::Grant { error, description }) => {
                let description = description.replace(&refresh_token, "…");
                return Err(StepError::new(
                    "auth_failed",
                    format!(
                        "the app refused to refresh the tokens of connection `{}` ({error}{}): \
                         reconnect it in Settings → Connections",
                        conn.id,
                        if description.is_empty() {
                            String::new()
                        } else {
                            format!(": {description}")
                        }
                    ),
                ));
            }
            Err(Refused::Transport(m)) => {
                return Err(StepError::new(
                    "oauth_refresh_failed",
                    format!(
                        "refreshing the tokens of connection `{}` failed: {m}",
                        conn.id
                    ),
                ))
            }
        };
        let tokens = TokenSet {
            access_token: access,
            // RFC 6749 §6: no new refresh token in the answer → the old one stays valid.
            refresh_token: rotated.or(Some(refresh_token)),
            expires_at_ms: expires_in.map(|d| {
                io.clock
                    .now_ms()
                    .saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            }),
        };
        self.remember(&conn.id, &tokens);
        let generation = current.generation + 1;
        let sealed = seal(key, &conn.id, origin, generation, &tokens);
        let value = serde_json::to_value(&sealed).unwrap_or(Value::Null);
        let opts = WriteOptions {
            allow_overwrite: true,
            ttl_ms: None,
            owner: None,
        };
        io.memory
            .write(STATE_NAMESPACE, &conn.id, &value, opts, io.clock.now_ms())
            .await
            .map_err(|e| unavailable(&conn.id, e))?;
        tracing::info!(connection = %conn.id, generation, "refreshed the OAuth 2 tokens");
        Ok(tokens.access_token)
    }
}

/// Whether `c` may be sent at `now`: fresh, and not the token the app refused.
fn usable(c: &Current, now: i64, rejected: Option<&str>) -> bool {
    c.tokens.fresh(now) && rejected != Some(c.tokens.access_token.as_str())
}

fn unavailable(id: &str, e: impl std::fmt::Display) -> StepError {
    StepError::new(
        "connection_unavailable",
        format!("the saved tokens of connection `{id}` cannot be read or written: {e}"),
    )
}

/// Why a refresh gave no tokens.
enum Refused {
    /// The token endpoint answered an OAuth error (`invalid_grant`, …) and its description.
    Grant { error: String, description: String },
    /// No usable answer: why (never quoting a token).
    Transport(String),
}

/// The error of the `oauth2` crate's HTTP client closure.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct SendFailed(String);

type SendFuture<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<oauth2::HttpResponse, SendFailed>> + Send + 'a>,
>;

/// The `oauth2` crate's HTTP client: the step's transport. A struct rather than a closure
/// (the crate implements its client trait for closures too): with the closure's blanket impl,
/// rustc cannot prove the crate's request future `Send` for every lifetime, and an `action`
/// step's future must be `Send`; here the future type is named and `Send` for each lifetime.
struct Sender {
    http: Arc<dyn HttpTransport>,
    timeout: Duration,
}

impl<'c> oauth2::AsyncHttpClient<'c> for Sender {
    type Error = SendFailed;
    type Future = SendFuture<'c>;
    fn call(&'c self, request: oauth2::HttpRequest) -> Self::Future {
        Box::pin(send_request(self.http.as_ref(), self.timeout, request))
    }
}

/// Post the refresh grant with the `oauth2` crate over `http`: the new access token, the
/// rotated refresh token if any, and the access token's lifetime if given.
async fn post_refresh(
    http: Arc<dyn HttpTransport>,
    timeout: Duration,
    token_url: String,
    client_id: String,
    client_secret: Option<String>,
    refresh_token: String,
) -> Result<(String, Option<String>, Option<Duration>), Refused> {
    use oauth2::basic::BasicClient;
    use oauth2::{
        AuthType, ClientId, ClientSecret, RefreshToken, RequestTokenError, TokenResponse, TokenUrl,
    };
    let url = TokenUrl::new(token_url)
        .map_err(|_| Refused::Transport("the connection's token_url is not a URL".into()))?;
    let client = BasicClient::new(ClientId::new(client_id));
    let client = match client_secret {
        Some(s) => client.set_client_secret(ClientSecret::new(s)),
        None => client,
    };
    let client = client
        .set_token_uri(url)
        .set_auth_type(AuthType::RequestBody);
    let send = Sender { http, timeout };
    let rt = RefreshToken::new(refresh_token);
    match client
        .exchange_refresh_token(&rt)
        .request_async(&send)
        .await
    {
        Ok(t) => Ok((
            t.access_token().secret().clone(),
            t.refresh_token().map(|r| r.secret().clone()),
            t.expires_in(),
        )),
        Err(RequestTokenError::ServerResponse(e)) => Err(Refused::Grant {
            error: e.error().to_string(),
            description: e.error_description().cloned().unwrap_or_default(),
        }),
        Err(RequestTokenError::Request(e)) => Err(Refused::Transport(e.0)),
        // The body may hold tokens: never quoted.
        Err(RequestTokenError::Parse(_, _)) => Err(Refused::Transport(
            "the token endpoint's answer is not a token response".into(),
        )),
        Err(RequestTokenError::Other(m)) => Err(Refused::Transport(m)),
    }
}

/// One request of the `oauth2` crate sent through the step's transport: the form body goes
/// as `application/x-www-form-urlencoded` (the transport encodes a JSON object of strings so).
async fn send_request(
    http: &dyn HttpTransport,
    timeout: Duration,
    req: oauth2::HttpRequest,
) -> Result<oauth2::HttpResponse, SendFailed> {
    let (parts, body) = req.into_parts();
    let form: Map<String, Value> = oauth2::url::form_urlencoded::parse(&body)
        .map(|(k, v)| (k.into_owned(), Value::String(v.into_owned())))
        .collect();
    let mut headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect();
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        headers.push((
            "content-type".into(),
            "application/x-www-form-urlencoded".into(),
        ));
    }
    let call = HttpCall {
        headers,
        body: Some(Value::Object(form)),
        ..HttpCall::new(parts.method.as_str(), parts.uri.to_string())
    };
    let answer = http.send(&call, timeout, None).await.map_err(|e| {
        SendFailed(match e {
            TransportError::Timeout => {
                format!("the token endpoint did not answer within {timeout:?}")
            }
            TransportError::Connection(m) => format!("cannot reach the token endpoint: {m}"),
            TransportError::Invalid(m) => m,
            TransportError::Refused { code, message, .. } => format!("{code}: {message}"),
        })
    })?;
    let bytes = match &answer.body {
        Value::String(s) => s.clone().into_bytes(),
        other => serde_json::to_vec(other).unwrap_or_default(),
    };
    let mut resp = oauth2::http::Response::builder().status(answer.status);
    if let Some(ct) = answer.header("content-type") {
        resp = resp.header("content-type", ct);
    }
    resp.body(bytes)
        .map_err(|_| SendFailed("the token endpoint's answer cannot be read".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn(rt: &str) -> Connection {
        Connection {
            id: "hs".into(),
            app: "hubspot".into(),
            name: String::new(),
            credential: Credential::Oauth2 {
                access_token: "at-0123456789".into(),
                refresh_token: Some(rt.into()),
                expires_at_ms: Some(1_000),
                token_url: "http://127.0.0.1:9/oauth/token".into(),
                client_id: "c".into(),
                client_secret: None,
            },
            base_url: None,
            values: Default::default(),
        }
    }

    #[test]
    fn sealed_state_round_trips_binds_its_place_and_hides_the_tokens() {
        let key = SealKey::derive(&[7u8; 32]);
        let t = TokenSet {
            access_token: "access-secret-value".into(),
            refresh_token: Some("refresh-secret-value".into()),
            expires_at_ms: Some(42),
        };
        let s = seal(&key, "hs", "abc", 3, &t);
        let text = serde_json::to_string(&s).unwrap();
        assert!(!text.contains("secret-value"), "{text}");
        assert_eq!(unseal(&key, "hs", &s).unwrap(), t);
        // Moved to another connection or generation: refused.
        assert!(unseal(&key, "other", &s).is_err());
        let mut g = s.clone();
        g.generation = 4;
        assert!(unseal(&key, "hs", &g).is_err());
        // Another key is named, not tried.
        let e = unseal(&SealKey::derive(&[8u8; 32]), "hs", &s).unwrap_err();
        assert!(e.contains("same connections key"), "{e}");
    }

    #[test]
    fn origin_follows_the_credential_and_freshness_has_a_skew() {
        assert_eq!(origin(&conn("rt-1")), origin(&conn("rt-1")));
        assert_ne!(origin(&conn("rt-1")), origin(&conn("rt-2")));
        let t = TokenSet {
            access_token: "a".into(),
            refresh_token: None,
            expires_at_ms: Some(100_000),
        };
        assert!(t.fresh(100_000 - SKEW_MS - 1));
        assert!(!t.fresh(100_000 - SKEW_MS));
        let never = TokenSet {
            expires_at_ms: None,
            ..t
        };
        assert!(never.fresh(i64::MAX));
    }

    #[test]
    fn remembered_tokens_are_bounded_per_connection() {
        let tokens = Tokens::new();
        for i in 0..20 {
            tokens.remember(
                "hs",
                &TokenSet {
                    access_token: format!("access-{i}"),
                    refresh_token: Some(format!("refresh-{i}")),
                    expires_at_ms: None,
                },
            );
        }
        let known = tokens.known_secrets();
        assert_eq!(known.len(), KEEP_PER_CONNECTION);
        assert!(known.contains(&"refresh-19".to_string()));
        assert!(tokens.secrets_version() >= 20);
    }
}
