//! Connections (issue 35): the accounts app actions act as. Like `GET /api/v1/connections` and
//! `GET|PUT|DELETE /api/v1/connections/{id}`: each over the same [`fluxo::app::connections`]
//! call; secrets are answered masked.

use fluxo::app::{connections, AppState};
use serde_json::Value;
use tauri::State;

use crate::commands::app::AppInfo;
use crate::error::IpcResult;

/// `{connections: [...], key_source}`: each masked; `key_source` says where the key that
/// encrypts them lives ("the key in the OS keyring (service dev.fluxo.app, user
/// connections-key)", or the data dir's key file and why the keyring was not used).
#[tauri::command]
pub async fn list_connections(
    state: State<'_, AppState>,
    info: State<'_, AppInfo>,
) -> IpcResult<Value> {
    let mut answer = connections::list(&state)?;
    answer["key_source"] = Value::String(info.connections_key.clone());
    Ok(answer)
}

/// Add or replace connection `id` (a mask sent back keeps the stored secret); the masked view.
#[tauri::command]
pub async fn put_connection(
    state: State<'_, AppState>,
    id: String,
    connection: Value,
) -> IpcResult<Value> {
    Ok(connections::put(&state, &id, &connection)?)
}

/// Remove connection `id`.
#[tauri::command]
pub async fn delete_connection(state: State<'_, AppState>, id: String) -> IpcResult<()> {
    Ok(connections::remove(&state, &id)?)
}

/// "Test connection": the app's test request as connection `id`: `{ok, status, message}`.
#[tauri::command]
pub async fn test_connection(state: State<'_, AppState>, id: String) -> IpcResult<Value> {
    Ok(connections::test(&state, &id).await?)
}

/// Start connecting an app with OAuth 2 (authorization code + PKCE): the redirect goes to a
/// one-shot loopback listener on `127.0.0.1:0` (RFC 8252 §7.3), which hands the browser's
/// callback to [`connections::oauth_finish`] and answers it a small page; the system browser
/// is opened on the authorize URL. Answers `{authorize_url, state, …}` like `POST
/// /api/v1/connections/oauth/start`; the window polls [`oauth_connection_status`].
#[tauri::command]
pub async fn start_oauth_connection(state: State<'_, AppState>, start: Value) -> IpcResult<Value> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
        .await
        .map_err(|e| {
            crate::error::IpcError::new(
                "loopback_unavailable",
                format!("cannot listen on 127.0.0.1 for the OAuth redirect: {e}"),
            )
        })?;
    let port = listener
        .local_addr()
        .map_err(|_| crate::error::IpcError::internal("the loopback listener"))?
        .port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");
    let started = connections::oauth_start(&state, &start, &redirect_uri)?;
    let app_state: AppState = (*state).clone();
    tokio::spawn(loopback::serve_once(listener, app_state));
    if let Some(url) = started["authorize_url"].as_str() {
        if let Err(e) = loopback::open_browser(url) {
            tracing::warn!(error = %e, "cannot open the system browser; the window shows the URL");
        }
    }
    Ok(started)
}

/// What became of the OAuth flow `flow` (`pending`, `connected`, `failed`).
#[tauri::command]
pub async fn oauth_connection_status(state: State<'_, AppState>, flow: String) -> IpcResult<Value> {
    Ok(connections::oauth_status(&state, &flow)?)
}

/// The one-shot loopback redirect listener of the desktop OAuth flow (RFC 8252 §7.3): an axum
/// server on `127.0.0.1:0` whose one route is `GET /callback`, stopped after the first callback
/// or the flow's lifetime.
mod loopback {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use axum::extract::{Query, State};
    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;
    use axum::routing::get;
    use fluxo::app::{connections, AppState};
    use tokio::sync::oneshot;

    /// How long the listener waits for the browser (the flow's own lifetime).
    const WAIT: Duration = Duration::from_secs(10 * 60);

    #[derive(Clone)]
    struct Redirect {
        state: AppState,
        done: Arc<Mutex<Option<oneshot::Sender<()>>>>,
    }

    /// Finish the flow with the redirect's query and answer the page a person sees.
    async fn callback(
        State(r): State<Redirect>,
        Query(cb): Query<connections::OAuthCallback>,
    ) -> impl IntoResponse {
        let (status, title, text) = match connections::oauth_finish(&r.state, &cb).await {
            Ok(v) => (
                StatusCode::OK,
                "Connected",
                format!(
                    "Connected {} as {}. You can close this window and return to Fluxo.",
                    v["title"].as_str().unwrap_or_default(),
                    v["connection"]["id"].as_str().unwrap_or_default()
                ),
            ),
            Err(e) => (StatusCode::BAD_REQUEST, "Not connected", e.message),
        };
        if let Some(tx) = r.done.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = tx.send(());
        }
        (
            status,
            [
                (header::CONTENT_TYPE, "text/html; charset=utf-8"),
                (header::CACHE_CONTROL, "no-store"),
            ],
            fluxo::server::connections::page(title, &text),
        )
    }

    /// Serve `GET /callback` on `listener` until one callback was answered (a browser's probe
    /// of `/favicon.ico` gets a 404 and changes nothing) or [`WAIT`] passed.
    pub async fn serve_once(listener: tokio::net::TcpListener, state: AppState) {
        let (tx, rx) = oneshot::channel();
        let app = axum::Router::new()
            .route("/callback", get(callback))
            .with_state(Redirect {
                state,
                done: Arc::new(Mutex::new(Some(tx))),
            });
        let stop = async move {
            tokio::select! {
                _ = rx => {}
                _ = tokio::time::sleep(WAIT) => {}
            }
        };
        if let Err(e) = axum::serve(listener, app)
            .with_graceful_shutdown(stop)
            .await
        {
            tracing::warn!(error = %e, "the OAuth redirect listener stopped");
        }
    }

    /// Open `url` in the system browser. (The app has no opener plugin: the platform's own
    /// command, `xdg-open`, `open` or `explorer`, does it.)
    pub fn open_browser(url: &str) -> std::io::Result<()> {
        #[cfg(target_os = "macos")]
        let mut cmd = std::process::Command::new("open");
        #[cfg(target_os = "windows")]
        let mut cmd = std::process::Command::new("explorer");
        #[cfg(not(any(target_os = "macos", target_os = "windows")))]
        let mut cmd = std::process::Command::new("xdg-open");
        cmd.arg(url)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use fluxo::app::connections;
    use fluxo::clock::{Clock, SystemClock};
    use fluxo::connections::{Credential, MemConnections};
    use fluxo::runtime::Engine;
    use fluxo::server::{self, ServerOptions};
    use fluxo::store::{InMemoryStore, Store};
    use fluxo::workflow::dir::WorkflowDir;
    use serde_json::json;

    /// The desktop's OAuth redirect end to end against `fluxo sandbox`'s fake OAuth server: the
    /// loopback listener answers a probe with 404, finishes the flow with the callback (the
    /// connection stored with its OAuth tokens), and stops.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_loopback_redirect_finishes_the_flow_once_then_stops() {
        let sandbox = fluxo::sandbox::Sandbox::start("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let engine = Engine::new(
            Arc::new(InMemoryStore::new()) as Arc<dyn Store>,
            Arc::new(SystemClock) as Arc<dyn Clock>,
        );
        engine.set_connections(Arc::new(MemConnections::default()));
        let folder = tempfile::tempdir().unwrap();
        let dir = WorkflowDir::load(folder.path(), engine.registry().clone()).unwrap();
        let api = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = server::start(api, engine, dir, "t".repeat(40), ServerOptions::default())
            .await
            .unwrap();
        let state = server.state.clone();

        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0))
            .await
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let redirect = format!("http://127.0.0.1:{port}/callback");
        let s = sandbox.url();
        let started = connections::oauth_start(
            &state,
            &json!({"app": "hubspot", "id": "crm", "client_id": "fluxo-desktop",
                    "base_url": format!("{s}/hubspot"),
                    "authorize_url": format!("{s}/oauth/authorize"),
                    "token_url": format!("{s}/oauth/token")}),
            &redirect,
        )
        .unwrap();
        let listening = tokio::spawn(super::loopback::serve_once(listener, state.clone()));

        let http = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        // The fake approves at once: its Location is the loopback callback.
        let r = http
            .get(started["authorize_url"].as_str().unwrap())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 302);
        let callback = r.headers()["location"].to_str().unwrap().to_string();
        assert!(callback.starts_with(&redirect), "{callback}");
        let probe = http
            .get(format!("http://127.0.0.1:{port}/favicon.ico"))
            .send()
            .await
            .unwrap();
        assert_eq!(probe.status(), 404);
        let page = http.get(&callback).send().await.unwrap();
        assert_eq!(page.status(), 200);
        let text = page.text().await.unwrap();
        assert!(text.contains("Connected HubSpot as crm."), "{text}");

        let stored = state.engine().connections().get("crm").unwrap().unwrap();
        assert!(matches!(stored.credential, Credential::Oauth2 { .. }));
        let flow = connections::oauth_status(&state, started["state"].as_str().unwrap()).unwrap();
        assert_eq!(flow["state"], "connected", "{flow}");
        // One callback, then the listener is gone.
        tokio::time::timeout(std::time::Duration::from_secs(10), listening)
            .await
            .expect("the listener stops after the callback")
            .unwrap();
        assert!(http.get(&callback).send().await.is_err());
        sandbox.shutdown().await;
    }
}
