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
//! for tests, an encrypted file for `fluxo serve` and the desktop app.

use std::collections::BTreeMap;
use std::sync::RwLock;

pub mod pace;

use serde::{Deserialize, Serialize};

/// What proves a connection's identity to its app. Every variant holds secrets: never
/// serialise one where a person or a record could read it (the store encrypts it).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
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
