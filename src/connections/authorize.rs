//! Connecting an app with OAuth 2 (issue 35): the authorization code grant with PKCE (RFC
//! 6749 §4.1, RFC 7636, S256) and a loopback redirect (RFC 8252 §7.3), through the `oauth2`
//! crate.
//!
//! [`Flows::begin`] keeps a pending flow in memory (never on disk): the connection it will
//! make, a random `state` (the CSRF token the callback must bring back) and the PKCE verifier,
//! which never leaves the process; it answers the authorize URL to open in a browser. A flow
//! lives [`FLOW_TTL_MS`] (10 minutes). [`Flows::take`] hands a live flow to its callback once
//! (a `state` is single use); [`exchange`] trades the code for tokens at the token URL and
//! gives the [`Credential::Oauth2`] to store. What became of a flow ([`Outcome`]) is kept for
//! another [`FLOW_TTL_MS`] so a client polling for it learns the end.
//!
//! Errors ([`FlowError`]) are precise (an unknown or expired `state`, consent denied, the token
//! endpoint's refusal with its RFC 6749 §5.2 `error`, an unreachable endpoint) and never quote
//! a secret (a client secret, a code, a verifier, a token).
//!
//! The use cases (`start`, `finish`, the status) are [`crate::app::connections`]'s; the
//! adapters (`fluxo serve`'s callback route, the desktop app's one-shot loopback listener)
//! only carry the redirect to them.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use oauth2::basic::BasicClient;
use oauth2::{
    AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, RequestTokenError, Scope, TokenResponse, TokenUrl,
};

use super::Credential;

/// How long a started flow waits for its callback, in milliseconds (10 minutes).
pub const FLOW_TTL_MS: i64 = 10 * 60 * 1000;

/// How long the token endpoint may take.
pub const TOKEN_TIMEOUT: Duration = Duration::from_secs(30);

/// The most flows pending at once (older ones are dropped first).
const MAX_FLOWS: usize = 256;

/// What a flow is started with.
#[derive(Clone)]
pub struct FlowStart {
    /// The connector's app (`hubspot`).
    pub app: String,
    /// The connection id to store under.
    pub id: String,
    /// Its label.
    pub name: String,
    pub client_id: String,
    pub client_secret: Option<String>,
    /// The connection's `base_url` (a sandbox fake).
    pub base_url: Option<String>,
    pub authorize_url: String,
    pub token_url: String,
    pub scopes: Vec<String>,
    /// Where the browser comes back: a loopback URL of this process.
    pub redirect_uri: String,
}

impl std::fmt::Debug for FlowStart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlowStart")
            .field("app", &self.app)
            .field("id", &self.id)
            .field("authorize_url", &self.authorize_url)
            .field("token_url", &self.token_url)
            .field("redirect_uri", &self.redirect_uri)
            .finish_non_exhaustive()
    }
}

/// A started flow waiting for its callback: what it will store, and the PKCE verifier.
pub struct Pending {
    pub start: FlowStart,
    verifier: PkceCodeVerifier,
    pub expires_at_ms: i64,
}

/// What became of a flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Waiting for the browser to come back.
    Pending,
    /// Exchanging the code.
    Exchanging,
    /// Stored as connection `id` of `app`.
    Connected { app: String, id: String },
    /// Ended without a connection: why (no secret in it).
    Failed(String),
}

impl Outcome {
    /// `pending`, `exchanging`, `connected`, `failed`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Pending => "pending",
            Outcome::Exchanging => "exchanging",
            Outcome::Connected { .. } => "connected",
            Outcome::Failed(_) => "failed",
        }
    }
}

/// Why a flow could not start or finish. No message quotes a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowError {
    /// A field of the start is wrong: the message names it.
    #[error("{0}")]
    Invalid(String),
    /// No flow has this `state` (never started here, already finished, or this process
    /// restarted since).
    #[error(
        "no connect flow is waiting for this state: it was never started here, already \
         finished, or Fluxo restarted since; start connecting again"
    )]
    UnknownState,
    /// The flow waited longer than [`FLOW_TTL_MS`].
    #[error("this connect flow expired (a flow waits 10 minutes for the browser); start connecting again")]
    Expired,
    /// The app's authorization page answered an error (`access_denied`: the person said no).
    #[error("{0}")]
    Denied(String),
    /// The token endpoint refused the code (RFC 6749 §5.2 `error`, its description).
    #[error("{0}")]
    Refused(String),
    /// The token endpoint could not be reached or answered something unreadable.
    #[error("{0}")]
    Unreachable(String),
}

struct Entry {
    app: String,
    id: String,
    pending: Option<Pending>,
    outcome: Outcome,
    /// When the entry is forgotten.
    expires_at_ms: i64,
}

/// The flows of this process (in memory: a restart forgets them, and their `state`s).
#[derive(Default)]
pub struct Flows {
    inner: Mutex<HashMap<String, Entry>>,
}

impl std::fmt::Debug for Flows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Flows({})", self.lock().len())
    }
}

fn http_url(field: &str, s: &str) -> Result<(), FlowError> {
    match reqwest::Url::parse(s) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => Ok(()),
        _ => Err(FlowError::Invalid(format!(
            "{field}: must be an http:// or https:// URL with a host"
        ))),
    }
}

impl Flows {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Start a flow: answers the authorize URL to open and the flow's `state`.
    pub fn begin(&self, start: FlowStart, now_ms: i64) -> Result<(String, String), FlowError> {
        http_url("authorize_url", &start.authorize_url)?;
        http_url("token_url", &start.token_url)?;
        http_url("redirect_uri", &start.redirect_uri)?;
        if start.client_id.trim().is_empty() {
            return Err(FlowError::Invalid(
                "client_id is empty: give the OAuth app's client id (from the app's developer \
                 console)"
                    .into(),
            ));
        }
        let client = BasicClient::new(ClientId::new(start.client_id.clone()))
            .set_auth_uri(
                AuthUrl::new(start.authorize_url.clone())
                    .map_err(|_| FlowError::Invalid("authorize_url: not a URL".into()))?,
            )
            .set_redirect_uri(
                RedirectUrl::new(start.redirect_uri.clone())
                    .map_err(|_| FlowError::Invalid("redirect_uri: not a URL".into()))?,
            );
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let (url, csrf) = client
            .authorize_url(CsrfToken::new_random)
            .add_scopes(start.scopes.iter().cloned().map(Scope::new))
            .set_pkce_challenge(challenge)
            .url();
        let state = csrf.secret().clone();
        let mut flows = self.lock();
        flows.retain(|_, e| now_ms < e.expires_at_ms);
        while flows.len() >= MAX_FLOWS {
            let oldest = flows
                .iter()
                .min_by_key(|(_, e)| e.expires_at_ms)
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => flows.remove(&k),
                None => break,
            };
        }
        flows.insert(
            state.clone(),
            Entry {
                app: start.app.clone(),
                id: start.id.clone(),
                pending: Some(Pending {
                    start,
                    verifier,
                    expires_at_ms: now_ms + FLOW_TTL_MS,
                }),
                outcome: Outcome::Pending,
                expires_at_ms: now_ms + FLOW_TTL_MS,
            },
        );
        Ok((url.to_string(), state))
    }

    /// The live flow `state`, handed out once (its callback): [`FlowError::UnknownState`] for
    /// a state never started or already taken, [`FlowError::Expired`] past its 10 minutes.
    pub fn take(&self, state: &str, now_ms: i64) -> Result<Pending, FlowError> {
        let mut flows = self.lock();
        let Some(entry) = flows.get_mut(state) else {
            return Err(FlowError::UnknownState);
        };
        let Some(pending) = entry.pending.take() else {
            return Err(FlowError::UnknownState);
        };
        if now_ms >= pending.expires_at_ms {
            entry.outcome = Outcome::Failed(FlowError::Expired.to_string());
            return Err(FlowError::Expired);
        }
        entry.outcome = Outcome::Exchanging;
        Ok(pending)
    }

    /// Record how flow `state` ended (kept [`FLOW_TTL_MS`] for a client polling it).
    pub fn settle(&self, state: &str, outcome: Outcome, now_ms: i64) {
        if let Some(e) = self.lock().get_mut(state) {
            e.outcome = outcome;
            e.expires_at_ms = now_ms + FLOW_TTL_MS;
        }
    }

    /// What became of flow `state`, with its app and connection id; `None`: unknown or
    /// forgotten.
    pub fn status(&self, state: &str, now_ms: i64) -> Option<(Outcome, String, String)> {
        let flows = self.lock();
        let e = flows.get(state).filter(|e| now_ms < e.expires_at_ms)?;
        let outcome = match (&e.outcome, &e.pending) {
            (Outcome::Pending, Some(p)) if now_ms >= p.expires_at_ms => {
                Outcome::Failed(FlowError::Expired.to_string())
            }
            (o, _) => o.clone(),
        };
        Some((outcome, e.app.clone(), e.id.clone()))
    }
}

/// The text of an authorization error redirect (`error`, `error_description`): consent denied
/// says so in plain words.
pub fn denied(app_title: &str, error: &str, description: Option<&str>) -> FlowError {
    let error: String = error.chars().take(80).collect();
    let description: Option<String> = description.map(|d| d.chars().take(300).collect());
    if error == "access_denied" {
        FlowError::Denied(format!(
            "{app_title} answered access_denied: the authorization was refused on its consent \
             page, so nothing was connected"
        ))
    } else {
        FlowError::Denied(format!(
            "{app_title}'s authorization page answered {error}{}",
            description.map(|d| format!(": {d}")).unwrap_or_default()
        ))
    }
}

/// Trade `code` for tokens at the flow's token URL (with the PKCE verifier); the credential
/// to store, its `expires_at_ms` from `expires_in` and `now_ms` (the engine's clock).
pub async fn exchange(
    pending: Pending,
    code: &str,
    app_title: &str,
    now_ms: i64,
) -> Result<Credential, FlowError> {
    let s = &pending.start;
    let mut client = BasicClient::new(ClientId::new(s.client_id.clone()))
        .set_token_uri(
            TokenUrl::new(s.token_url.clone())
                .map_err(|_| FlowError::Invalid("token_url: not a URL".into()))?,
        )
        .set_redirect_uri(
            RedirectUrl::new(s.redirect_uri.clone())
                .map_err(|_| FlowError::Invalid("redirect_uri: not a URL".into()))?,
        );
    if let Some(secret) = &s.client_secret {
        client = client.set_client_secret(ClientSecret::new(secret.clone()));
    }
    // No redirects (a token endpoint that redirects could send the code elsewhere).
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(TOKEN_TIMEOUT)
        .build()
        .map_err(|e| FlowError::Unreachable(format!("cannot build an HTTP client: {e}")))?;
    let send = |req: oauth2::HttpRequest| {
        let http = http.clone();
        async move { send_token_request(&http, req).await }
    };
    let host = reqwest::Url::parse(&s.token_url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default();
    let token = client
        .exchange_code(AuthorizationCode::new(code.to_string()))
        .set_pkce_verifier(pending.verifier)
        .request_async(&send)
        .await
        .map_err(|e| match e {
            RequestTokenError::ServerResponse(r) => FlowError::Refused(format!(
                "{app_title}'s token endpoint refused the authorization code: {}{}",
                r.error(),
                r.error_description()
                    .map(|d| format!(" ({})", d.chars().take(300).collect::<String>()))
                    .unwrap_or_default()
            )),
            RequestTokenError::Request(e) => FlowError::Unreachable(format!(
                "could not reach {app_title}'s token endpoint at {host}: {e}"
            )),
            RequestTokenError::Parse(_, _) => FlowError::Unreachable(format!(
                "{app_title}'s token endpoint at {host} answered something that is not an \
                 OAuth 2 token response"
            )),
            RequestTokenError::Other(m) => FlowError::Unreachable(format!(
                "{app_title}'s token endpoint at {host}: {}",
                m.chars().take(200).collect::<String>()
            )),
        })?;
    let expires_at_ms = token
        .expires_in()
        .map(|d| now_ms.saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 2)));
    Ok(Credential::Oauth2 {
        access_token: token.access_token().secret().clone(),
        refresh_token: token.refresh_token().map(|r| r.secret().clone()),
        expires_at_ms,
        token_url: s.token_url.clone(),
        client_id: s.client_id.clone(),
        client_secret: s.client_secret.clone(),
    })
}

/// Why the token request could not be sent or read (its text names no secret: reqwest's
/// errors name the URL, which carries none here).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct SendError(String);

/// Send one token request with `http` (the `oauth2` crate's async client).
async fn send_token_request(
    http: &reqwest::Client,
    req: oauth2::HttpRequest,
) -> Result<oauth2::HttpResponse, SendError> {
    let (parts, body) = req.into_parts();
    let method = reqwest::Method::from_bytes(parts.method.as_str().as_bytes())
        .map_err(|e| SendError(e.to_string()))?;
    let mut rb = http.request(method, parts.uri.to_string()).body(body);
    for (name, value) in &parts.headers {
        rb = rb.header(name.as_str(), value.as_bytes());
    }
    let resp = rb.send().await.map_err(|e| {
        SendError(if e.is_timeout() {
            "it did not answer in time".into()
        } else if e.is_connect() {
            "the connection failed (is it running, is the URL right?)".into()
        } else {
            e.without_url().to_string()
        })
    })?;
    let mut out = oauth2::http::Response::builder().status(resp.status().as_u16());
    for (name, value) in resp.headers() {
        out = out.header(name.as_str(), value.as_bytes());
    }
    let bytes = resp
        .bytes()
        .await
        .map_err(|e| SendError(e.without_url().to_string()))?;
    out.body(bytes.to_vec())
        .map_err(|e| SendError(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start() -> FlowStart {
        FlowStart {
            app: "hubspot".into(),
            id: "crm".into(),
            name: String::new(),
            client_id: "cid".into(),
            client_secret: Some("very-secret-client".into()),
            base_url: None,
            authorize_url: "https://auth.example/authorize".into(),
            token_url: "https://auth.example/token".into(),
            scopes: vec!["a".into(), "b".into()],
            redirect_uri: "http://127.0.0.1:5000/cb".into(),
        }
    }

    #[test]
    fn the_authorize_url_carries_pkce_and_state_but_no_secret() {
        let flows = Flows::default();
        let (url, state) = flows.begin(start(), 0).unwrap();
        let u = reqwest::Url::parse(&url).unwrap();
        let q: HashMap<_, _> = u.query_pairs().into_owned().collect();
        assert_eq!(q["response_type"], "code");
        assert_eq!(q["client_id"], "cid");
        assert_eq!(q["code_challenge_method"], "S256");
        assert_eq!(q["state"], state);
        assert_eq!(q["scope"], "a b");
        assert_eq!(q["redirect_uri"], "http://127.0.0.1:5000/cb");
        assert!(!url.contains("very-secret-client"));
        assert!(state.len() >= 16);
    }

    #[test]
    fn a_state_is_taken_once_and_expires() {
        let flows = Flows::default();
        let (_, state) = flows.begin(start(), 0).unwrap();
        assert_eq!(flows.status(&state, 1).unwrap().0, Outcome::Pending);
        assert!(flows.take("nope", 1).is_err());
        assert!(flows.take(&state, 1).is_ok());
        assert!(matches!(
            flows.take(&state, 2),
            Err(FlowError::UnknownState)
        ));
        let (_, late) = flows.begin(start(), 0).unwrap();
        assert!(matches!(
            flows.take(&late, FLOW_TTL_MS),
            Err(FlowError::Expired)
        ));
        let mut bad = start();
        bad.token_url = "ftp://x".into();
        let e = flows.begin(bad, 0).unwrap_err();
        assert!(e.to_string().starts_with("token_url"), "{e}");
    }
}
