//! Connections (issue 35): the use cases of `GET /api/v1/connections`, `GET|PUT|DELETE
//! /api/v1/connections/{id}` and `fluxo connections list|add|remove`, over the engine's
//! [`ConnectionStore`] (the encrypted file of [`crate::connections::file`] under `fluxo serve`
//! and the desktop app).
//!
//! What a client sees of a connection is its view ([`view`]): everything but the secrets,
//! each secret field shown as its mask ([`crate::secrets::mask`]: `••••` plus the last 4
//! characters of a value of 12 or more). A `PUT` that sends a mask back for a secret field
//! keeps the stored value when the mask is exactly the stored value's (the UI saves a form it
//! did not change), as the settings do ([`crate::settings::AppSettings::resolve_masked`]);
//! any other mask is refused, so a placeholder is never stored as a secret.
//!
//! A change through these functions rebuilds the engine's masker at once
//! ([`crate::runtime::Engine::refresh_connection_secrets`]): a new secret is masked in the
//! records of every run from then on.

use serde_json::{json, Map, Value};

use super::{AppError, AppResult, AppState, ErrorKind};
use crate::connections::{validate_id, Connection, ConnectionError, ConnectionStore, Credential};

/// A credential field: `(name, secret, required)`.
type Field = (&'static str, bool, bool);

/// The credential kinds and, for each, its fields.
const KINDS: &[(&str, &[Field])] = &[
    ("bearer", &[("token", true, true)]),
    (
        "basic",
        &[("username", false, true), ("password", true, true)],
    ),
    ("webhook_url", &[("url", true, true)]),
    (
        "oauth2",
        &[
            ("access_token", true, true),
            ("refresh_token", true, false),
            ("expires_at_ms", false, false),
            ("token_url", false, true),
            ("client_id", false, true),
            ("client_secret", true, false),
        ],
    ),
];

/// Top-level members of a connection body.
const MEMBERS: &[&str] = &["id", "app", "name", "credential", "base_url", "values"];

fn kind_fields(kind: &str) -> Option<&'static [Field]> {
    KINDS.iter().find(|(k, _)| *k == kind).map(|(_, f)| *f)
}

/// The names of a credential kind's secret fields (`bearer` → `token`).
pub fn secret_fields(kind: &str) -> Vec<&'static str> {
    kind_fields(kind)
        .unwrap_or_default()
        .iter()
        .filter(|(_, secret, _)| *secret)
        .map(|(n, _, _)| *n)
        .collect()
}

/// A connection as clients see it: `{id, app, name, credential: {kind, …}, base_url?,
/// values?}` with every secret field of `credential` masked (`"token": "••••3456"`); the
/// other fields (`username`, `token_url`, `client_id`, `expires_at_ms`) as stored.
pub fn view(c: &Connection) -> Value {
    let mut v = serde_json::to_value(c).unwrap_or(Value::Null);
    if let Some(cred) = v.get_mut("credential").and_then(Value::as_object_mut) {
        for field in secret_fields(c.credential.kind()) {
            if let Some(Value::String(s)) = cred.get_mut(field) {
                *s = crate::secrets::mask(s);
            }
        }
    }
    if let Some(m) = v.as_object_mut() {
        m.entry("base_url").or_insert(Value::Null);
        m.entry("values").or_insert_with(|| json!({}));
    }
    v
}

/// The answer of a store error: `invalid_connection` (400) for a refused input,
/// `connections_unavailable` (503, no retry hint: it needs the operator) when the store cannot
/// be read or written (its message names the file and, for a wrong key, both key ids).
pub fn store_error(e: ConnectionError) -> AppError {
    match e {
        ConnectionError::Invalid(m) => AppError::bad_request("invalid_connection", m),
        ConnectionError::Unavailable(m) => {
            tracing::error!(error = %m, "connections store unavailable");
            AppError::new(ErrorKind::Unavailable, "connections_unavailable", m)
        }
    }
}

fn not_found(id: &str) -> AppError {
    AppError::not_found("connection_not_found", format!("no connection `{id}`"))
}

/// Every connection of `store`, by id, as [`view`]s.
pub fn list_in(store: &dyn ConnectionStore) -> AppResult<Vec<Value>> {
    Ok(store
        .list()
        .map_err(store_error)?
        .iter()
        .map(view)
        .collect())
}

/// `{connections: [view…]}`: every connection of the engine's store, by id.
pub fn list(state: &AppState) -> AppResult<Value> {
    Ok(json!({ "connections": list_in(state.engine().connections().as_ref())? }))
}

/// The [`view`] of connection `id`. Errors: `connection_not_found`, `connections_unavailable`.
pub fn get(state: &AppState, id: &str) -> AppResult<Value> {
    match state.engine().connections().get(id).map_err(store_error)? {
        Some(c) => Ok(view(&c)),
        None => Err(not_found(id)),
    }
}

/// Add or replace connection `id` in `store` from a request body (see [`parse`]); answers the
/// stored connection's [`view`]. Errors: `invalid_connection` naming the field,
/// `connections_unavailable`.
pub fn put_in(store: &dyn ConnectionStore, id: &str, body: &Value) -> AppResult<Value> {
    validate_id(id).map_err(store_error)?;
    let stored = store.get(id).map_err(store_error)?;
    let c = parse(id, body, stored.as_ref())?;
    crate::connections::validate(&c).map_err(store_error)?;
    store.put(c.clone()).map_err(store_error)?;
    Ok(view(&c))
}

/// [`put_in`] the engine's store, then mask the new secrets in run records at once.
pub fn put(state: &AppState, id: &str, body: &Value) -> AppResult<Value> {
    let v = put_in(state.engine().connections().as_ref(), id, body)?;
    state.engine().refresh_connection_secrets();
    tracing::info!(connection = %id, "connection saved");
    Ok(v)
}

/// Remove connection `id` from `store`. Errors: `connection_not_found`,
/// `connections_unavailable`.
pub fn remove_in(store: &dyn ConnectionStore, id: &str) -> AppResult<()> {
    if store.remove(id).map_err(store_error)? {
        Ok(())
    } else {
        Err(not_found(id))
    }
}

/// [`remove_in`] the engine's store, then rebuild the masker without its secrets (nothing
/// uses them any more).
pub fn remove(state: &AppState, id: &str) -> AppResult<()> {
    remove_in(state.engine().connections().as_ref(), id)?;
    state.engine().refresh_connection_secrets();
    tracing::info!(connection = %id, "connection removed");
    Ok(())
}

/// The connection `id` a request body describes: `{app, name?, credential: {kind, …},
/// base_url?, values?}` (an `id` member, if any, must be `id`). A secret field sent as a mask
/// takes the value of `stored` (the connection now stored under `id`) when its mask is
/// exactly that; otherwise it is refused. Errors (`invalid_connection`) name the member and
/// never quote a secret. The result is not yet checked by [`crate::connections::validate`].
pub fn parse(id: &str, body: &Value, stored: Option<&Connection>) -> AppResult<Connection> {
    let bad = |m: String| AppError::bad_request("invalid_connection", m);
    let Some(obj) = body.as_object() else {
        return Err(bad(
            "the body must be a JSON object: {app, name?, credential: \
                        {kind, …}, base_url?, values?}"
                .into(),
        ));
    };
    if let Some(k) = obj.keys().find(|k| !MEMBERS.contains(&k.as_str())) {
        return Err(bad(format!(
            "unknown member `{k}` (a connection has {})",
            MEMBERS.join(", ")
        )));
    }
    match obj.get("id") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s == id => {}
        Some(_) => {
            return Err(bad(format!(
                "id: the body's id differs from the path's `{id}` (leave it out)"
            )))
        }
    }
    let string = |name: &str, required: bool| -> AppResult<Option<String>> {
        match obj.get(name) {
            None | Some(Value::Null) if !required => Ok(None),
            None | Some(Value::Null) => Err(bad(format!("{name} is missing"))),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(bad(format!("{name} must be a string"))),
        }
    };
    let app = string("app", true)?.unwrap_or_default();
    let name = string("name", false)?.unwrap_or_default();
    let base_url = string("base_url", false)?;
    let values = match obj.get("values") {
        None | Some(Value::Null) => Default::default(),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                _ => Err(bad(format!("values.{k} must be a string"))),
            })
            .collect::<AppResult<_>>()?,
        Some(_) => return Err(bad("values must be an object of strings".into())),
    };
    let credential = parse_credential(id, obj.get("credential"), stored)?;
    Ok(Connection {
        id: id.to_string(),
        app,
        name,
        credential,
        base_url,
        values,
    })
}

fn parse_credential(
    id: &str,
    v: Option<&Value>,
    stored: Option<&Connection>,
) -> AppResult<Credential> {
    let bad = |m: String| AppError::bad_request("invalid_connection", m);
    let kinds = KINDS.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ");
    let Some(Value::Object(cred)) = v else {
        return Err(bad(format!(
            "credential is missing or not an object: give {{\"kind\": one of {kinds}, …}}"
        )));
    };
    let kind = match cred.get("kind") {
        Some(Value::String(k)) if kind_fields(k).is_some() => k.as_str(),
        Some(Value::String(k)) => {
            return Err(bad(format!(
                "credential.kind `{}` is not one of {kinds}",
                k.chars().take(40).collect::<String>()
            )))
        }
        _ => return Err(bad(format!("credential.kind is missing: one of {kinds}"))),
    };
    let fields = kind_fields(kind).unwrap_or_default();
    if let Some(k) = cred
        .keys()
        .find(|k| *k != "kind" && !fields.iter().any(|(n, _, _)| n == k))
    {
        let names: Vec<&str> = fields.iter().map(|(n, _, _)| *n).collect();
        return Err(bad(format!(
            "credential.{k}: not a field of a {kind} credential (it has {})",
            names.join(", ")
        )));
    }
    // The stored credential's fields, when it is of the same kind (for masks sent back).
    let stored_fields: Map<String, Value> = stored
        .filter(|s| s.credential.kind() == kind)
        .and_then(|s| serde_json::to_value(&s.credential).ok())
        .and_then(|v| match v {
            Value::Object(m) => Some(m),
            _ => None,
        })
        .unwrap_or_default();
    let mut out = Map::new();
    out.insert("kind".into(), Value::String(kind.into()));
    for (name, secret, required) in fields {
        let value = match cred.get(*name) {
            None | Some(Value::Null) if *required => {
                return Err(bad(format!(
                    "credential.{name} is missing (a {kind} credential needs it)"
                )))
            }
            None | Some(Value::Null) => continue,
            Some(v) => v,
        };
        if *name == "expires_at_ms" {
            if !value.is_i64() {
                return Err(bad(
                    "credential.expires_at_ms must be an integer (UTC unix milliseconds)".into(),
                ));
            }
            out.insert((*name).into(), value.clone());
            continue;
        }
        let Value::String(s) = value else {
            return Err(bad(format!("credential.{name} must be a string")));
        };
        let s = if *secret && crate::secrets::is_masked(s) {
            match stored_fields.get(*name).and_then(Value::as_str) {
                Some(old) if crate::secrets::mask(old) == *s => old.to_string(),
                _ => {
                    return Err(bad(format!(
                        "credential.{name}: `{s}` is the masked placeholder of a secret, but \
                         connection `{id}` has no stored {kind} {name} with that mask: type \
                         the value again"
                    )))
                }
            }
        } else {
            s.clone()
        };
        out.insert((*name).into(), Value::String(s));
    }
    // The shape was checked above: this cannot fail, and its message (which may quote a
    // value) is not shown.
    serde_json::from_value(Value::Object(out))
        .map_err(|_| bad(format!("credential: not a valid {kind} credential")))
}

// ---------------------------------------------------------------------------------------------
// Connect with OAuth 2 (authorization code + PKCE, loopback redirect) and "Test connection"

/// Members of an OAuth start body.
const START_MEMBERS: &[&str] = &[
    "app",
    "id",
    "name",
    "client_id",
    "client_secret",
    "base_url",
    "authorize_url",
    "token_url",
    "scopes",
];

/// Start connecting `body.app` as connection `body.id` with OAuth 2: `{app, id, name?,
/// client_id, client_secret?, base_url?, authorize_url?, token_url?, scopes?}` (the URLs and
/// scopes default to the connector's `oauth2` auth; give them for a sandbox fake or a regional
/// host). The browser comes back to `redirect_uri` (a loopback URL of this process: `fluxo
/// serve`'s callback route, the desktop app's one-shot listener), which hands the query to
/// [`oauth_finish`]. Answers `{authorize_url, state, redirect_uri, expires_at_ms}`; the PKCE
/// verifier stays in memory here. Errors: `invalid_connection` naming the member,
/// `oauth_not_offered` (the connector takes no OAuth 2).
pub fn oauth_start(state: &AppState, body: &Value, redirect_uri: &str) -> AppResult<Value> {
    use crate::connections::authorize::{FlowStart, FLOW_TTL_MS};
    let bad = |m: String| AppError::bad_request("invalid_connection", m);
    let Some(obj) = body.as_object() else {
        return Err(bad(
            "the body must be a JSON object: {app, id, name?, client_id, client_secret?, \
             base_url?, authorize_url?, token_url?}"
                .into(),
        ));
    };
    if let Some(k) = obj.keys().find(|k| !START_MEMBERS.contains(&k.as_str())) {
        return Err(bad(format!(
            "unknown member `{k}` (an OAuth start has {})",
            START_MEMBERS.join(", ")
        )));
    }
    let string = |name: &str| -> AppResult<Option<String>> {
        match obj.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.trim().to_string())),
            Some(_) => Err(bad(format!("{name} must be a string"))),
        }
    };
    let app = string("app")?.ok_or_else(|| bad("app is missing (e.g. `hubspot`)".into()))?;
    let id = string("id")?.ok_or_else(|| bad("id is missing (the connection id)".into()))?;
    validate_id(&id).map_err(store_error)?;
    let connector = crate::connectors::get(&app).ok_or_else(|| {
        bad(format!(
            "app `{}`: no such connector (one of: {})",
            app.chars().take(64).collect::<String>(),
            crate::connectors::CONNECTORS
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })?;
    let spec = connector
        .auth
        .iter()
        .find(|a| a.kind == "oauth2")
        .ok_or_else(|| {
            AppError::bad_request(
                "oauth_not_offered",
                format!(
                    "{} does not connect with OAuth 2; paste a token instead ({})",
                    connector.title,
                    connector
                        .auth
                        .iter()
                        .map(|a| a.title.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })?;
    let client_id =
        string("client_id")?.ok_or_else(|| {
            bad("client_id is missing: the OAuth app's client id (from the app's developer console)"
            .into())
        })?;
    let authorize_url = string("authorize_url")?
        .or_else(|| spec.authorize_url.clone())
        .ok_or_else(|| bad("authorize_url is missing (the connector names none)".into()))?;
    let token_url = string("token_url")?
        .or_else(|| spec.token_url.clone())
        .ok_or_else(|| bad("token_url is missing (the connector names none)".into()))?;
    let scopes = match obj.get("scopes") {
        None | Some(Value::Null) => spec.scopes.clone(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| bad("scopes must be an array of strings".into()))
            })
            .collect::<AppResult<_>>()?,
        Some(_) => return Err(bad("scopes must be an array of strings".into())),
    };
    let base_url = string("base_url")?;
    // The connection it will store must be valid: check it now, with a stand-in token.
    let probe = Connection {
        id: id.clone(),
        app: app.clone(),
        name: string("name")?.unwrap_or_default(),
        credential: Credential::Oauth2 {
            access_token: "probe".into(),
            refresh_token: None,
            expires_at_ms: None,
            token_url: token_url.clone(),
            client_id: client_id.clone(),
            client_secret: string("client_secret")?,
        },
        base_url: base_url.clone(),
        values: Default::default(),
    };
    crate::connections::validate(&probe).map_err(store_error)?;
    let Credential::Oauth2 { client_secret, .. } = probe.credential else {
        unreachable!("built above as oauth2")
    };
    let now = state.clock().now_ms();
    let start = FlowStart {
        app,
        id,
        name: probe.name,
        client_id,
        client_secret,
        base_url,
        authorize_url,
        token_url,
        scopes,
        redirect_uri: redirect_uri.to_string(),
    };
    let (url, flow) = state
        .oauth_flows()
        .begin(start, now)
        .map_err(|e| bad(e.to_string()))?;
    tracing::info!(app = %connector.app, "OAuth connect started");
    Ok(json!({
        "authorize_url": url,
        "state": flow,
        "redirect_uri": redirect_uri,
        "expires_at_ms": now + FLOW_TTL_MS,
    }))
}

/// What the app's authorization page sent back to the redirect URI (its query).
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct OAuthCallback {
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub error_description: Option<String>,
}

impl OAuthCallback {
    /// From a redirect's query string (`state=…&code=…`, without the `?`), percent-decoded.
    pub fn from_query(query: &str) -> Self {
        let mut cb = OAuthCallback::default();
        let Ok(url) = reqwest::Url::parse(&format!("http://callback/?{query}")) else {
            return cb;
        };
        for (k, v) in url.query_pairs() {
            let v = Some(v.into_owned());
            match &*k {
                "state" => cb.state = v,
                "code" => cb.code = v,
                "error" => cb.error = v,
                "error_description" => cb.error_description = v,
                _ => {}
            }
        }
        cb
    }
}

/// Finish the flow the callback's `state` names: refuse an unknown or expired state, report a
/// denied consent (`error=access_denied`), else exchange the `code` at the token URL (with
/// the PKCE verifier) and store the connection with its [`Credential::Oauth2`]
/// (`expires_at_ms` from `expires_in` on the engine's clock). Answers `{app, title,
/// connection: view}`. Errors: `oauth_state_unknown` (404), `oauth_state_expired` (400),
/// `oauth_denied` (403), `oauth_token_refused` (422, the endpoint's RFC 6749 `error`),
/// `oauth_token_unreachable` (422), and the store's. None quotes a secret.
pub async fn oauth_finish(state: &AppState, cb: &OAuthCallback) -> AppResult<Value> {
    use crate::connections::authorize::{self, FlowError, Outcome};
    let flows = state.oauth_flows();
    let Some(flow) = cb.state.as_deref().filter(|s| !s.is_empty()) else {
        return Err(AppError::bad_request(
            "oauth_state_unknown",
            "the redirect has no state: it did not come from a connect flow Fluxo started",
        ));
    };
    let now = state.clock().now_ms();
    let fail = |e: FlowError| {
        let (kind, code) = match &e {
            FlowError::UnknownState => (ErrorKind::NotFound, "oauth_state_unknown"),
            FlowError::Expired => (ErrorKind::Invalid, "oauth_state_expired"),
            FlowError::Denied(_) => (ErrorKind::Forbidden, "oauth_denied"),
            FlowError::Refused(_) => (ErrorKind::Unprocessable, "oauth_token_refused"),
            FlowError::Unreachable(_) => (ErrorKind::Unprocessable, "oauth_token_unreachable"),
            FlowError::Invalid(_) => (ErrorKind::Invalid, "invalid_connection"),
        };
        AppError::new(kind, code, e.to_string())
    };
    let pending = flows.take(flow, now).map_err(fail)?;
    let title = crate::connectors::get(&pending.start.app)
        .map_or(pending.start.app.clone(), |c| c.title.clone());
    let settle_failed = |e: FlowError| {
        flows.settle(flow, Outcome::Failed(e.to_string()), state.clock().now_ms());
        tracing::info!(error = %e, "OAuth connect failed");
        fail(e)
    };
    if let Some(error) = cb.error.as_deref() {
        return Err(settle_failed(authorize::denied(
            &title,
            error,
            cb.error_description.as_deref(),
        )));
    }
    let Some(code) = cb.code.as_deref().filter(|c| !c.is_empty()) else {
        return Err(settle_failed(FlowError::Denied(format!(
            "{title}'s authorization page came back with neither a code nor an error"
        ))));
    };
    let start = pending.start.clone();
    let credential = authorize::exchange(pending, code, &title, now)
        .await
        .map_err(settle_failed)?;
    let c = Connection {
        id: start.id.clone(),
        app: start.app.clone(),
        name: start.name.clone(),
        credential,
        base_url: start.base_url.clone(),
        values: Default::default(),
    };
    let store = state.engine().connections();
    // Values a reconnect keeps (`instance_url`, …): the stored connection's.
    let c = match store.get(&c.id).map_err(store_error)? {
        Some(old) if old.app == c.app => Connection {
            values: old.values,
            ..c
        },
        _ => c,
    };
    if let Err(e) = crate::connections::validate(&c).and_then(|()| store.put(c.clone())) {
        flows.settle(flow, Outcome::Failed(e.to_string()), state.clock().now_ms());
        return Err(store_error(e));
    }
    state.engine().refresh_connection_secrets();
    flows.settle(
        flow,
        Outcome::Connected {
            app: c.app.clone(),
            id: c.id.clone(),
        },
        state.clock().now_ms(),
    );
    tracing::info!(connection = %c.id, app = %c.app, "connection connected with OAuth");
    Ok(json!({"app": c.app, "title": title, "connection": view(&c)}))
}

/// What became of the connect flow `flow`: `{state: pending|exchanging|connected|failed, app,
/// id, message?, connection?}` (the masked connection once connected). Error:
/// `oauth_state_unknown` (never started here, or ended more than 10 minutes ago).
pub fn oauth_status(state: &AppState, flow: &str) -> AppResult<Value> {
    use crate::connections::authorize::Outcome;
    let now = state.clock().now_ms();
    let Some((outcome, app, id)) = state.oauth_flows().status(flow, now) else {
        return Err(AppError::not_found(
            "oauth_state_unknown",
            "no connect flow with this state (never started here, or it ended more than 10 \
             minutes ago)",
        ));
    };
    let mut v = json!({"state": outcome.as_str(), "app": app, "id": id});
    match outcome {
        Outcome::Failed(m) => v["message"] = json!(m),
        Outcome::Connected { id, .. } => {
            if let Some(c) = state.engine().connections().get(&id).map_err(store_error)? {
                v["connection"] = view(&c);
            }
        }
        _ => {}
    }
    Ok(v)
}

/// How long "Test connection" waits for the app.
pub const TEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Slack's answers (`200 {"ok": false, "error": …}`) that mean the token is not accepted.
const REFUSED_ERRORS: &[&str] = &[
    "invalid_auth",
    "not_authed",
    "account_inactive",
    "token_revoked",
    "token_expired",
    "no_permission",
];

/// "Test connection" of `id`: [`test_with`] over the engine's HTTP transport (its outbound
/// rules, as action steps send). Error: `connection_not_found`.
pub async fn test(state: &AppState, id: &str) -> AppResult<Value> {
    let c = state
        .engine()
        .connections()
        .get(id)
        .map_err(store_error)?
        .ok_or_else(|| not_found(id))?;
    let engine = state.engine();
    // An OAuth 2 connection is tested with its current token (refreshed when it expired), as
    // its steps would send.
    let token = match &c.credential {
        Credential::Oauth2 { .. } => {
            let clock = engine.clock();
            let io = crate::connections::oauth::Io {
                memory: engine.store().as_ref(),
                http: engine.http().clone(),
                clock: clock.as_ref(),
                deadline_ms: clock.now_ms() + TEST_TIMEOUT.as_millis() as i64,
                store_key: engine.connections().state_key(),
            };
            match engine.oauth_tokens().access_token(&io, &c, None).await {
                Ok(t) => Some(t),
                Err(e) => {
                    let v = json!({"ok": false, "status": e.http_status, "message": e.message});
                    tracing::info!(connection = %id, ok = false, "connection tested");
                    return Ok(v);
                }
            }
        }
        _ => None,
    };
    let v = test_with(&c, engine.http().as_ref(), token.as_deref()).await;
    tracing::info!(connection = %id, ok = %v["ok"], "connection tested");
    Ok(v)
}

/// Run the connector's `test` request (a cheap read) as connection `c` (an OAuth 2 one with
/// `oauth_token` when given: [`Credential::authorization`]) through `http`:
/// `{ok, status, message}`. `ok` is true when the app accepted the credential (2xx that no
/// rule of the connector calls a failure); 401, 403 and Slack's `invalid_auth` and the like
/// say "… refused the credentials"; no answer says the app could not be reached. The message
/// names the app, the status and the host, never a secret.
pub async fn test_with(
    c: &Connection,
    http: &dyn crate::steps::http::HttpTransport,
    oauth_token: Option<&str>,
) -> Value {
    use crate::steps::http::TransportError;
    let answer = |ok: bool, status: Option<u16>, message: String| json!({"ok": ok, "status": status, "message": message});
    let Some(connector) = crate::connectors::get(&c.app) else {
        return answer(
            false,
            None,
            format!("no connector `{}` to test the connection with", c.app),
        );
    };
    let title = &connector.title;
    if let Credential::WebhookUrl { .. } = c.credential {
        return answer(
            false,
            None,
            format!(
                "a {title} incoming webhook URL cannot be tested without posting a message; \
                 a dry run checks the step, the first live run the URL"
            ),
        );
    }
    let call = match crate::steps::action::test_call(connector, c, oauth_token) {
        Ok(Some(call)) => call,
        Ok(None) => return answer(false, None, format!("{title} has no test request")),
        Err(e) => {
            return answer(
                false,
                None,
                format!(
                    "the test request to {title} could not be built: {}",
                    e.message
                ),
            )
        }
    };
    let host = reqwest::Url::parse(&call.url)
        .ok()
        .map(|u| match u.port() {
            Some(p) => format!("{}:{p}", u.host_str().unwrap_or_default()),
            None => u.host_str().unwrap_or_default().to_string(),
        })
        .unwrap_or_default();
    // What the message names: the connector's test request as written (`GET /path`).
    let what = connector
        .test
        .as_ref()
        .map(|r| format!("{} {}", r.method, r.path))
        .unwrap_or_default();

    let mut masker = crate::secrets::Masker::default();
    for secret in c.credential.secrets() {
        masker.add(secret);
    }
    let safe = |m: String| masker.text(&m).into_owned();
    match http.send(&call, TEST_TIMEOUT, None).await {
        Err(TransportError::Timeout) => answer(
            false,
            None,
            format!(
                "could not reach {title} at {host}: no answer within {} s",
                TEST_TIMEOUT.as_secs()
            ),
        ),
        Err(TransportError::Connection(m)) => answer(
            false,
            None,
            safe(format!("could not reach {title} at {host}: {m}")),
        ),
        Err(TransportError::Invalid(m)) => answer(
            false,
            None,
            safe(format!(
                "the test request to {title} could not be sent: {m}"
            )),
        ),
        Err(TransportError::Refused {
            message, status, ..
        }) => answer(
            false,
            status,
            safe(format!(
                "the test request to {title} was stopped: {message}"
            )),
        ),
        Ok(a) => {
            let error = a
                .body
                .pointer("/error")
                .and_then(Value::as_str)
                .map(|e| e.chars().take(80).collect::<String>());
            let failed = connector.errors.iter().any(|r| {
                r.then == crate::connectors::Outcome::Fail && r.matches(a.status, &a.body)
            });
            let status = Some(a.status);
            if matches!(a.status, 401 | 403)
                || error
                    .as_deref()
                    .is_some_and(|e| REFUSED_ERRORS.contains(&e))
            {
                let why = error.map(|e| format!(", {e}")).unwrap_or_default();
                answer(
                    false,
                    status,
                    format!(
                        "{title} refused the credentials ({}{why} to {what}): connect \
                         again or paste a new token",
                        a.status
                    ),
                )
            } else if (200..300).contains(&a.status) && !failed {
                answer(
                    true,
                    status,
                    format!("{title} accepted the credentials ({} to {what})", a.status),
                )
            } else {
                let why = error.map(|e| format!(": {e}")).unwrap_or_default();
                answer(
                    false,
                    status,
                    safe(format!("{title} answered {} to {what}{why}", a.status)),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connections::MemConnections;

    const TOKEN: &str = "pat-na1-0123456789abcdef";

    fn body(token: &str) -> Value {
        json!({
            "app": "hubspot",
            "name": "HubSpot (sales)",
            "credential": {"kind": "bearer", "token": token},
            "base_url": "https://api.hubapi.com",
        })
    }

    fn refused(r: AppResult<Value>) -> String {
        let e = r.unwrap_err();
        assert_eq!(e.code, "invalid_connection", "{e}");
        assert!(!e.message.contains(TOKEN), "{e}");
        e.message
    }

    #[test]
    fn views_mask_every_secret_field() {
        let store = MemConnections::default();
        let v = put_in(&store, "crm", &body(TOKEN)).unwrap();
        assert_eq!(
            v,
            json!({
                "id": "crm", "app": "hubspot", "name": "HubSpot (sales)",
                "credential": {"kind": "bearer", "token": "••••cdef"},
                "base_url": "https://api.hubapi.com", "values": {},
            })
        );
        let basic = json!({"app": "crm", "credential":
            {"kind": "basic", "username": "ann", "password": "hunter2"}});
        let v = put_in(&store, "b", &basic).unwrap();
        assert_eq!(
            v["credential"],
            json!({"kind": "basic", "username": "ann", "password": "••••"})
        );
        let oauth = json!({"app": "sf", "credential": {"kind": "oauth2",
            "access_token": "access-0123456789", "refresh_token": "refresh-0123456789",
            "expires_at_ms": 1_700_000_000_000_i64, "token_url": "https://login.example/token",
            "client_id": "cid", "client_secret": "client-secret-0123"}});
        let v = put_in(&store, "sf", &oauth).unwrap();
        assert_eq!(
            v["credential"],
            json!({"kind": "oauth2", "access_token": "••••6789",
                "refresh_token": "••••6789", "expires_at_ms": 1_700_000_000_000_i64,
                "token_url": "https://login.example/token", "client_id": "cid",
                "client_secret": "••••0123"})
        );
        let listed = list_in(&store).unwrap();
        assert_eq!(listed.len(), 3);
        let text = serde_json::to_string(&listed).unwrap();
        for secret in [TOKEN, "hunter2", "access-0123456789", "client-secret-0123"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
    }

    #[test]
    fn a_mask_sent_back_keeps_the_stored_secret() {
        let store = MemConnections::default();
        put_in(&store, "crm", &body(TOKEN)).unwrap();
        let mut again = body("••••cdef");
        again["name"] = json!("renamed");
        put_in(&store, "crm", &again).unwrap();
        let c = store.get("crm").unwrap().unwrap();
        assert_eq!(c.name, "renamed");
        assert_eq!(
            c.credential,
            Credential::Bearer {
                token: TOKEN.into()
            }
        );
        let m = refused(put_in(&store, "crm", &body("••••zzzz")));
        assert!(
            m.starts_with("credential.token: `••••zzzz` is the masked placeholder"),
            "{m}"
        );
        let m = refused(put_in(&store, "new", &body("••••cdef")));
        assert!(
            m.contains("connection `new` has no stored bearer token"),
            "{m}"
        );
    }

    #[test]
    fn precise_messages_name_the_field() {
        let store = MemConnections::default();
        let cases: Vec<(&str, Value, &str)> = vec![
            (
                "Bad",
                body(TOKEN),
                "id `Bad`: must match [a-z0-9][a-z0-9_-]{0,63}",
            ),
            ("-x", body(TOKEN), "id `-x`"),
            (
                "ok",
                json!({"credential": {"kind": "bearer", "token": TOKEN}}),
                "app is missing",
            ),
            (
                "ok",
                json!({"app": "", "credential": {"kind": "bearer", "token": TOKEN}}),
                "app is empty",
            ),
            (
                "ok",
                json!({"app": "Hub Spot", "credential": {"kind": "bearer", "token": TOKEN}}),
                "app `Hub Spot`: must match [a-z0-9_]+",
            ),
            (
                "ok",
                json!({"app": "x", "credential": {"kind": "bearer", "token": ""}}),
                "credential.token is empty",
            ),
            (
                "ok",
                json!({"app": "x", "credential": {"kind": "bearer"}}),
                "credential.token is missing",
            ),
            (
                "ok",
                json!({"app": "x", "credential": {"kind": "magic"}}),
                "credential.kind `magic` is not one of bearer, basic, webhook_url, oauth2",
            ),
            (
                "ok",
                json!({"app": "x", "credential": {"kind": "bearer", "token": TOKEN,
                "password": "p"}}),
                "credential.password: not a field of a bearer credential",
            ),
            (
                "ok",
                json!({"app": "x", "credential": {"kind": "basic", "username": "u",
                "password": " "}}),
                "credential.password is empty",
            ),
            (
                "ok",
                json!({"app": "x", "credential": {"kind": "webhook_url", "url": "ftp://h/x"}}),
                "credential.url: must be an http:// or https:// URL",
            ),
            (
                "ok",
                json!({"app": "x", "base_url": "ftp://h", "credential":
                {"kind": "bearer", "token": TOKEN}}),
                "base_url `ftp://h`: must be an http:// or https:// URL",
            ),
            (
                "ok",
                json!({"app": "x", "values": {"a b": "1"}, "credential":
                {"kind": "bearer", "token": TOKEN}}),
                "values: name `a b` must match",
            ),
            (
                "ok",
                json!({"app": "x", "id": "other", "credential":
                {"kind": "bearer", "token": TOKEN}}),
                "id: the body's id differs",
            ),
            (
                "ok",
                json!({"app": "x", "colour": 1, "credential":
                {"kind": "bearer", "token": TOKEN}}),
                "unknown member `colour`",
            ),
            (
                "ok",
                json!({"app": "x", "credential": {"kind": "bearer", "token": 5}}),
                "credential.token must be a string",
            ),
        ];
        for (id, b, want) in cases {
            let m = refused(put_in(&store, id, &b));
            assert!(m.starts_with(want), "{id} {b}: {m}");
        }
        assert!(store.list().unwrap().is_empty(), "nothing stored");
    }

    #[test]
    fn remove_and_not_found() {
        let store = MemConnections::default();
        put_in(&store, "crm", &body(TOKEN)).unwrap();
        remove_in(&store, "crm").unwrap();
        let e = remove_in(&store, "crm").unwrap_err();
        assert_eq!(
            (e.kind, e.code),
            (ErrorKind::NotFound, "connection_not_found")
        );
    }
}
