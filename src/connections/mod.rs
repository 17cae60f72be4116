//! Connections (issue 35): the accounts a workflow's connector steps act as, kept apart from
//! workflows and settings.
//!
//! A [`Connection`] names a connector app (`hubspot`, `stripe`, `slack`, `google_sheets`), its
//! [`Credential`] and the values the app's base URL needs (Salesforce `instance_url`, …). A
//! workflow refers to a connection by id only; its secrets never reach a workflow file, a run
//! record, an export, a log line or the UI: whatever a step sends from one is masked in the
//! records as env secrets are ([`crate::secrets`]).
//!
//! [`ConnectionStore`] is the one interface the engine reads them through: [`MemConnections`]
//! for tests, an encrypted file for `fluxo serve` and the desktop app
//! ([`file::FileConnections`], its key: [`key`]). [`validate`] is the rule every stored
//! connection meets. OAuth 2 connections are refreshed once for every process ([`oauth`]).

pub mod authorize;
pub mod file;
pub mod key;
pub mod oauth;

use std::collections::BTreeMap;
use std::sync::RwLock;

pub mod pace;

use serde::{Deserialize, Serialize};

/// What proves a connection's identity to its app. Every variant holds secrets: never
/// serialise one where a person or a record could read it (the store encrypts it).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Credential {
    /// A bearer token: an API key, a private-app token, a Slack bot token (`xoxb-…`).
    Bearer { token: String },
    /// HTTP Basic (RFC 7617).
    Basic { username: String, password: String },
    /// A secret URL that is itself the credential (a Slack incoming webhook).
    WebhookUrl { url: String },
    /// OAuth 2 (RFC 6749) tokens, refreshed at `token_url` when `expires_at_ms` passes.
    Oauth2 {
        access_token: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        refresh_token: Option<String>,
        /// When the access token expires (UTC unix ms), if the app said.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires_at_ms: Option<i64>,
        token_url: String,
        client_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_secret: Option<String>,
    },
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credential::{}(…)", self.kind())
    }
}

impl Credential {
    /// The variant's name: `bearer`, `basic`, `webhook_url`, `oauth2`.
    pub fn kind(&self) -> &'static str {
        match self {
            Credential::Bearer { .. } => "bearer",
            Credential::Basic { .. } => "basic",
            Credential::WebhookUrl { .. } => "webhook_url",
            Credential::Oauth2 { .. } => "oauth2",
        }
    }

    /// The `Authorization` header value a request as this credential carries: `Bearer
    /// <token>` (an OAuth 2 one sends `oauth_token`, the current token after a refresh, when
    /// given, else its stored access token), `Basic <base64(user:password)>` (RFC 7617);
    /// `None` for a webhook URL, which is its own credential.
    pub fn authorization(&self, oauth_token: Option<&str>) -> Option<String> {
        match self {
            Credential::Bearer { token } => Some(format!("Bearer {token}")),
            Credential::Oauth2 { access_token, .. } => {
                Some(format!("Bearer {}", oauth_token.unwrap_or(access_token)))
            }
            Credential::Basic { username, password } => {
                use base64::Engine as _;
                let b = base64::engine::general_purpose::STANDARD
                    .encode(format!("{username}:{password}"));
                Some(format!("Basic {b}"))
            }
            Credential::WebhookUrl { .. } => None,
        }
    }

    /// Every secret value it holds (for masking records).
    pub fn secrets(&self) -> Vec<&str> {
        match self {
            Credential::Bearer { token } => vec![token],
            Credential::Basic { password, .. } => vec![password],
            Credential::WebhookUrl { url } => vec![url],
            Credential::Oauth2 {
                access_token,
                refresh_token,
                client_secret,
                ..
            } => std::iter::once(access_token.as_str())
                .chain(refresh_token.as_deref())
                .chain(client_secret.as_deref())
                .collect(),
        }
    }
}

/// One connected account.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Connection {
    /// `[a-z0-9][a-z0-9_-]{0,63}`: what a step's `connection` names.
    pub id: String,
    /// The connector's app id (`hubspot`).
    pub app: String,
    /// A person's label (`HubSpot (sales)`).
    #[serde(default)]
    pub name: String,
    pub credential: Credential,
    /// Replaces the connector's base URL (a sandbox fake, a regional host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// Values the connector's base URL or requests read as `connection.<name>`
    /// (`instance_url`, `realm_id`, `tenant_id`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub values: BTreeMap<String, String>,
}

/// Why a connection could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionError {
    /// The store cannot be opened or read (a wrong key, a damaged file): the message says which.
    #[error("{0}")]
    Unavailable(String),
    /// Bad input: the message names the field.
    #[error("{0}")]
    Invalid(String),
}

/// The most characters of a connection id, an app id, a value's name.
pub const MAX_ID_CHARS: usize = 64;
/// The most characters of a connection's `name`.
pub const MAX_NAME_CHARS: usize = 200;

/// Check a connection id: `[a-z0-9][a-z0-9_-]{0,63}`. The error names the field and the rule.
pub fn validate_id(id: &str) -> Result<(), ConnectionError> {
    let ok = id.len() <= MAX_ID_CHARS
        && id
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if ok {
        return Ok(());
    }
    Err(ConnectionError::Invalid(format!(
        "id `{}`: must match [a-z0-9][a-z0-9_-]{{0,63}} (lower-case letters, digits, `_` and          `-`, starting with a letter or a digit, at most {MAX_ID_CHARS} characters)",
        id.chars().take(80).collect::<String>()
    )))
}

/// Whether `s` is an absolute `http://` or `https://` URL with a host.
fn is_http_url(s: &str) -> bool {
    reqwest::Url::parse(s)
        .map(|u| {
            matches!(u.scheme(), "http" | "https") && u.host_str().is_some_and(|h| !h.is_empty())
        })
        .unwrap_or(false)
}

/// Check a whole connection; the error ([`ConnectionError::Invalid`]) names the first field
/// that breaks its rule, never quoting a secret:
/// * `id`: [`validate_id`];
/// * `app`: `[a-z0-9_]+`, at most 64 characters;
/// * `name`: at most 200 characters;
/// * `credential.*`: every field present is non-empty (`token`, `username`, `password`, `url`,
///   `access_token`, `token_url`, `client_id`, and `refresh_token`, `client_secret` when
///   given); `credential.url` and `credential.token_url` are http(s) URLs;
/// * `base_url`, when given: an http(s) URL with a host;
/// * `values`: names `[A-Za-z_][A-Za-z0-9_]*` of at most 64 characters.
pub fn validate(c: &Connection) -> Result<(), ConnectionError> {
    let bad = |m: String| Err(ConnectionError::Invalid(m));
    validate_id(&c.id)?;
    if c.app.is_empty() {
        return bad("app is empty: give the connector's app id (e.g. `hubspot`)".into());
    }
    if c.app.len() > MAX_ID_CHARS
        || !c
            .app
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return bad(format!(
            "app `{}`: must match [a-z0-9_]+ (at most {MAX_ID_CHARS} characters), e.g.              `hubspot`, `google_sheets`",
            c.app.chars().take(80).collect::<String>()
        ));
    }
    if c.name.chars().count() > MAX_NAME_CHARS {
        return bad(format!("name: at most {MAX_NAME_CHARS} characters"));
    }
    let fields: Vec<(&str, Option<&str>)> = match &c.credential {
        Credential::Bearer { token } => vec![("token", Some(token))],
        Credential::Basic { username, password } => {
            vec![("username", Some(username)), ("password", Some(password))]
        }
        Credential::WebhookUrl { url } => vec![("url", Some(url))],
        Credential::Oauth2 {
            access_token,
            refresh_token,
            token_url,
            client_id,
            client_secret,
            ..
        } => vec![
            ("access_token", Some(access_token)),
            ("refresh_token", refresh_token.as_deref()),
            ("token_url", Some(token_url)),
            ("client_id", Some(client_id)),
            ("client_secret", client_secret.as_deref()),
        ],
    };
    for (field, value) in fields {
        match value {
            Some(v) if v.trim().is_empty() => {
                return bad(format!(
                    "credential.{field} is empty (a {} credential needs it)",
                    c.credential.kind()
                ))
            }
            Some(v) if matches!(field, "url" | "token_url") && !is_http_url(v) => {
                return bad(format!(
                    "credential.{field}: must be an http:// or https:// URL with a host"
                ))
            }
            _ => {}
        }
    }
    if let Some(u) = &c.base_url {
        if !is_http_url(u) {
            return bad(format!(
                "base_url `{}`: must be an http:// or https:// URL with a host",
                crate::secrets::Masker::default().text(u)
            ));
        }
    }
    for name in c.values.keys() {
        let ok = name.len() <= MAX_ID_CHARS
            && name
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !ok {
            return bad(format!(
                "values: name `{}` must match [A-Za-z_][A-Za-z0-9_]* (at most {MAX_ID_CHARS} \
                 characters; a connector reads it as connection.<name>)",
                name.chars().take(80).collect::<String>()
            ));
        }
    }
    Ok(())
}

/// Where connections are kept. Implementations are safe to share between runs.
pub trait ConnectionStore: Send + Sync {
    /// The connection `id`, if any.
    fn get(&self, id: &str) -> Result<Option<Connection>, ConnectionError>;
    /// Every connection, by id.
    fn list(&self) -> Result<Vec<Connection>, ConnectionError>;
    /// Add or replace a connection (whole).
    fn put(&self, connection: Connection) -> Result<(), ConnectionError>;
    /// Remove `id`; `false` when there was none.
    fn remove(&self, id: &str) -> Result<bool, ConnectionError>;
    /// The key this store encrypts with, if it has one: what the OAuth 2 tokens a refresh
    /// answers are sealed with in Memory, derived per use ([`oauth`]). `None` (the default,
    /// [`MemConnections`]): they are sealed with a random key of this process.
    fn state_key(&self) -> Option<key::ConnectionKey> {
        None
    }
    /// The connection an `action` step of app `app`, whose operation takes credential kind
    /// `kind` (`bearer`, `webhook_url`, …), acts as when it names `id`. The default is
    /// [`ConnectionStore::get`]; a store may supply one it does not hold (the desktop's
    /// sandbox points a connection nobody added at its app's fake:
    /// [`crate::sandbox::vendors::SandboxFallback`]).
    fn get_for(
        &self,
        id: &str,
        app: &str,
        kind: &str,
    ) -> Result<Option<Connection>, ConnectionError> {
        let _ = (app, kind);
        self.get(id)
    }
}

/// Connections in memory (tests, and an engine nobody gave a store: it has none).
#[derive(Debug, Default)]
pub struct MemConnections {
    inner: RwLock<BTreeMap<String, Connection>>,
}

impl ConnectionStore for MemConnections {
    fn get(&self, id: &str) -> Result<Option<Connection>, ConnectionError> {
        Ok(self
            .inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned())
    }
    fn list(&self) -> Result<Vec<Connection>, ConnectionError> {
        Ok(self
            .inner
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect())
    }
    fn put(&self, connection: Connection) -> Result<(), ConnectionError> {
        self.inner
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(connection.id.clone(), connection);
        Ok(())
    }
    fn remove(&self, id: &str) -> Result<bool, ConnectionError> {
        Ok(self
            .inner
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id)
            .is_some())
    }
}
