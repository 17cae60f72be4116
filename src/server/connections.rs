//! Connection routes (issue 35): the accounts connector steps act as, kept encrypted in
//! `<data-dir>/connections.enc` ([`crate::connections::file`]).
//!
//! * `GET /api/v1/connections` → every connection, secrets masked.
//! * `GET /api/v1/connections/{id}` → one, secrets masked.
//! * `PUT /api/v1/connections/{id}` → add or replace it (validated; a secret sent back as its
//!   mask keeps the stored value).
//! * `DELETE /api/v1/connections/{id}` → remove it.
//! * `POST /api/v1/connections/{id}/test` → run the app's test request as it: `{ok, status,
//!   message}`.
//! * `POST /api/v1/connections/oauth/start` → start connecting an app with OAuth 2 (PKCE):
//!   `{authorize_url, state}`; the browser comes back to
//! * `GET /api/v1/connections/oauth/callback` (no API token: the app's authorization page
//!   redirects the browser to it; only a live `state` of a flow started here is accepted),
//!   which exchanges the code, stores the connection and answers a small HTML page;
//! * `GET /api/v1/connections/oauth/{state}` → what became of the flow (the UI polls it).
//!
//! The use cases are [`crate::app::connections`]; no answer ever carries a secret.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::Json;
use serde_json::Value;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::body::json_body;
use super::error::{ApiResult, Problem};
use super::openapi as doc;
use crate::app::{connections, AppState};

/// Routes under `/api/v1`, each with its documentation.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_connections))
        .routes(routes!(get_connection, put_connection, delete_connection))
        .routes(routes!(test_connection))
        .routes(routes!(oauth_start))
        .routes(routes!(oauth_status))
}

/// The path of the OAuth callback (outside the token check: see [`oauth_callback`]).
pub const CALLBACK_PATH: &str = "/api/v1/connections/oauth/callback";

/// The redirect URI of this server: its own callback, on loopback when it listens on every
/// interface (RFC 8252 §7.3: `http://127.0.0.1:<port>/…`).
pub fn redirect_uri(state: &AppState) -> String {
    let mut addr = state.local_addr();
    if addr.ip().is_unspecified() {
        addr.set_ip(match addr.ip() {
            std::net::IpAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::IpAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    format!("http://{addr}{CALLBACK_PATH}")
}

#[utoipa::path(
    post,
    path = "/connections/{id}/test",
    tag = "connections",
    summary = "Test a connection",
    description = "Runs the connector's test request (a cheap read, e.g. HubSpot `GET \
        /crm/v3/objects/contacts?limit=1`, Slack `auth.test`) as the connection, through the \
        engine's outbound HTTP rules, as action steps send. `ok` is true when the app accepted \
        the credential; a 401, 403 or Slack's `invalid_auth` says the app refused the \
        credentials; no answer says it could not be reached. The message never quotes a secret.",
    params(("id" = String, Path, description = "The connection id.")),
    responses(
        (status = 200, description = "The result (also when the app refused).",
            body = doc::ConnectionTest),
        (status = 404, description = "`connection_not_found`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "`connections_unavailable`.", body = Problem,
            content_type = "application/problem+json"),
    ),
)]
async fn test_connection(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    Ok(Json(connections::test(&state, &id).await?))
}

#[utoipa::path(
    post,
    path = "/connections/oauth/start",
    tag = "connections",
    summary = "Start connecting an app with OAuth 2",
    description = "Authorization code with PKCE (S256) and a loopback redirect (RFC 8252): \
        answers the app's authorize URL to open in a browser and the flow's `state`. The \
        browser comes back to this server's `GET /api/v1/connections/oauth/callback`, which \
        exchanges the code at the token URL and stores the connection (credential `oauth2`). \
        The PKCE verifier stays in this process; a flow waits 10 minutes. `authorize_url`, \
        `token_url` and `scopes` default to the connector's; give them for a sandbox fake \
        (`http://127.0.0.1:<port>/oauth/authorize`, `…/oauth/token`).",
    request_body(content = doc::OAuthStartInput, content_type = "application/json"),
    responses(
        (status = 200, description = "The URL to open and the flow's state.",
            body = doc::OAuthStarted),
        (status = 400, description = "`invalid_connection` (the message names the member), \
            `oauth_not_offered` (the app takes no OAuth 2), `invalid_json`.",
            body = Problem, content_type = "application/problem+json"),
    ),
)]
async fn oauth_start(
    State(state): State<AppState>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Value>> {
    let body = json_body(body, state.options().body_limit_bytes)?;
    let uri = redirect_uri(&state);
    Ok(Json(connections::oauth_start(&state, &body, &uri)?))
}

#[utoipa::path(
    get,
    path = "/connections/oauth/{state}",
    tag = "connections",
    summary = "What became of an OAuth connect flow",
    description = "`pending` (the browser has not come back), `exchanging`, `connected` (with \
        the connection, masked) or `failed` (with the reason: consent denied, the token \
        endpoint's refusal, an expired flow). Kept 10 minutes after the flow ends.",
    params(("state" = String, Path, description = "The flow's state, as `start` answered it.")),
    responses(
        (status = 200, description = "The flow.", body = doc::OAuthFlow),
        (status = 404, description = "`oauth_state_unknown`.", body = Problem,
            content_type = "application/problem+json"),
    ),
)]
async fn oauth_status(
    State(state): State<AppState>,
    Path(flow): Path<String>,
) -> ApiResult<Json<Value>> {
    Ok(Json(connections::oauth_status(&state, &flow)?))
}

/// The query of the OAuth callback.
#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CallbackParams {
    /// The flow's state (required: a redirect without a live one is refused).
    state: Option<String>,
    /// The authorization code.
    code: Option<String>,
    /// The authorization page's error (`access_denied`: the person said no).
    error: Option<String>,
    error_description: Option<String>,
}

#[utoipa::path(
    get,
    path = "/api/v1/connections/oauth/callback",
    tag = "connections",
    summary = "OAuth redirect target (a browser page)",
    description = "Where the app's authorization page sends the browser back (the \
        `redirect_uri` of `POST /api/v1/connections/oauth/start`). It needs no API token, as \
        the browser carries none, and accepts only the `state` of a live flow started here \
        (once). It exchanges the code with the flow's PKCE verifier, stores the connection and \
        answers a small HTML page: \"Connected HubSpot as crm. You can close this window.\" or \
        the error (400 an unknown or expired state, 403 consent denied, 422 the token \
        endpoint refused or could not be reached).",
    params(CallbackParams),
    responses(
        (status = 200, description = "Connected: a page saying so to a browser (`Accept: \
            text/html`), else `{app, title, connection}` (the connection masked).",
            content_type = "text/html"),
        (status = 400, description = "`oauth_state_expired` (the flow waited more than 10 \
            minutes), `oauth_state_unknown` (no state). A browser gets the message as a page.",
            body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "`oauth_denied`: consent denied (`error=access_denied`) \
            or another error of the authorization page.",
            body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`oauth_state_unknown`: no live flow has this state \
            (never started here, already finished, or the server restarted).",
            body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`oauth_token_refused` (the token endpoint's RFC 6749 \
            `error`), `oauth_token_unreachable`.",
            body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn oauth_callback(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
    Query(q): Query<CallbackParams>,
) -> Response {
    let cb = connections::OAuthCallback {
        state: q.state,
        code: q.code,
        error: q.error,
        error_description: q.error_description,
    };
    // A browser (it accepts text/html) gets the page; any other client the API's answers.
    let html = headers
        .get_all(axum::http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.contains("text/html"));
    let done = connections::oauth_finish(&state, &cb).await;
    if !html {
        return match done {
            Ok(v) => Json(v).into_response(),
            Err(e) => super::error::ApiError::from(e).into_response(),
        };
    }
    let (status, title, text) = match done {
        Ok(v) => (
            StatusCode::OK,
            "Connected".to_string(),
            format!(
                "Connected {} as {}. You can close this window.",
                v["title"].as_str().unwrap_or_default(),
                v["connection"]["id"].as_str().unwrap_or_default()
            ),
        ),
        Err(e) => (
            super::error::status_of(e.kind),
            "Not connected".to_string(),
            e.message,
        ),
    };
    let mut r = (status, Html(page(&title, &text))).into_response();
    let h = r.headers_mut();
    h.insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    h.insert(
        axum::http::header::REFERRER_POLICY,
        axum::http::HeaderValue::from_static("no-referrer"),
    );
    r
}

/// The callback's page: `title` and `text`, escaped.
pub fn page(title: &str, text: &str) -> String {
    fn esc(s: &str) -> String {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
            .replace('"', "&quot;")
    }
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t} · \
         Fluxo</title><style>body{{font:16px/1.5 system-ui,sans-serif;margin:3rem auto;\
         max-width:36rem;color:#1f2937}}h1{{font-size:1.3rem}}</style></head><body>\
         <h1>{t}</h1><p id=\"message\">{m}</p></body></html>",
        t = esc(title),
        m = esc(text)
    )
}

#[utoipa::path(
    get,
    path = "/connections",
    tag = "connections",
    summary = "Every connection, secrets masked",
    description = "The connections connector steps act as, by id. Each secret field of a \
        credential (`token`, `password`, `url` of a webhook URL, `access_token`, \
        `refresh_token`, `client_secret`) is masked: `••••` plus the last 4 characters of a \
        value of 12 or more, else `••••`; the value itself is never answered.",
    responses(
        (status = 200, description = "The connections.", body = doc::ConnectionList),
        (status = 503, description = "`connections_unavailable`: the store cannot be read \
            (a wrong key, a damaged file: the message says which).",
            body = Problem, content_type = "application/problem+json"),
    ),
)]
async fn list_connections(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    Ok(Json(connections::list(&state)?))
}

#[utoipa::path(
    get,
    path = "/connections/{id}",
    tag = "connections",
    summary = "One connection, secrets masked",
    params(("id" = String, Path, description = "The connection id.")),
    responses(
        (status = 200, description = "The connection.", body = doc::ConnectionView),
        (status = 404, description = "`connection_not_found`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "`connections_unavailable`.", body = Problem,
            content_type = "application/problem+json"),
    ),
)]
async fn get_connection(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    Ok(Json(connections::get(&state, &id)?))
}

#[utoipa::path(
    put,
    path = "/connections/{id}",
    tag = "connections",
    summary = "Add or replace a connection",
    description = "Validated, then written encrypted to `<data-dir>/connections.enc` (the \
        whole connection is replaced). Rules, each error naming its member: `id` \
        `[a-z0-9][a-z0-9_-]{0,63}`; `app` `[a-z0-9_]+`; every credential field non-empty; \
        `base_url` and a credential's `url`/`token_url` are http(s) URLs; `values` names \
        `[A-Za-z_][A-Za-z0-9_]*`. A secret field sent back as the mask `GET` showed \
        (`••••3456`) keeps the stored value; any other mask is refused. Its secrets are \
        masked in run records from the next run on.",
    params(("id" = String, Path, description = "The connection id.")),
    request_body(content = doc::ConnectionInput, content_type = "application/json"),
    responses(
        (status = 200, description = "The connection as stored, secrets masked.",
            body = doc::ConnectionView),
        (status = 400, description = "`invalid_connection` (the message names the member), \
            `invalid_json`, `bad_body`.",
            body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "`payload_too_large`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "`connections_unavailable`: the store cannot be read \
            or written; nothing was changed.",
            body = Problem, content_type = "application/problem+json"),
    ),
)]
async fn put_connection(
    State(state): State<AppState>,
    Path(id): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<Value>> {
    let body = json_body(body, state.options().body_limit_bytes)?;
    Ok(Json(connections::put(&state, &id, &body)?))
}

#[utoipa::path(
    delete,
    path = "/connections/{id}",
    tag = "connections",
    summary = "Remove a connection",
    params(("id" = String, Path, description = "The connection id.")),
    responses(
        (status = 204, description = "Removed."),
        (status = 404, description = "`connection_not_found`.", body = Problem,
            content_type = "application/problem+json"),
        (status = 503, description = "`connections_unavailable`; nothing was changed.",
            body = Problem, content_type = "application/problem+json"),
    ),
)]
async fn delete_connection(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    connections::remove(&state, &id)?;
    Ok(StatusCode::NO_CONTENT)
}
