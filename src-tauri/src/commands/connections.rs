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

/// The one-shot loopback redirect listener of the desktop OAuth flow.
mod loopback {
    use std::time::Duration;

    use fluxo::app::{connections, AppState};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// How long the listener waits for the browser (the flow's own lifetime).
    const WAIT: Duration = Duration::from_secs(10 * 60);

    /// Accept connections until one carries `GET /callback?…` (a browser may probe
    /// `/favicon.ico` first), finish the flow with its query, answer the page, stop.
    pub async fn serve_once(listener: tokio::net::TcpListener, state: AppState) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let accepted = tokio::time::timeout_at(deadline, listener.accept()).await;
            let Ok(Ok((mut sock, _))) = accepted else {
                return;
            };
            let mut buf = vec![0u8; 8192];
            let mut n = 0;
            while n < buf.len() {
                match tokio::time::timeout(Duration::from_secs(10), sock.read(&mut buf[n..])).await
                {
                    Ok(Ok(0)) | Err(_) | Ok(Err(_)) => break,
                    Ok(Ok(k)) => {
                        n += k;
                        if buf[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                            break;
                        }
                    }
                }
            }
            let head = String::from_utf8_lossy(&buf[..n]);
            let target = head
                .lines()
                .next()
                .and_then(|l| l.strip_prefix("GET "))
                .and_then(|l| l.split(' ').next())
                .unwrap_or_default()
                .to_string();
            let Some(query) = target.strip_prefix("/callback") else {
                let _ = sock
                    .write_all(
                        b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    )
                    .await;
                continue;
            };
            let query = query.trim_start_matches('?');
            let cb = connections::OAuthCallback::from_query(query);
            let (status, title, text) = match connections::oauth_finish(&state, &cb).await {
                Ok(v) => (
                    "200 OK",
                    "Connected",
                    format!(
                        "Connected {} as {}. You can close this window and return to Fluxo.",
                        v["title"].as_str().unwrap_or_default(),
                        v["connection"]["id"].as_str().unwrap_or_default()
                    ),
                ),
                Err(e) => ("400 Bad Request", "Not connected", e.message),
            };
            let body = fluxo::server::connections::page(title, &text);
            let resp = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nCache-Control: \
                 no-store\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = sock.write_all(resp.as_bytes()).await;
            return;
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
