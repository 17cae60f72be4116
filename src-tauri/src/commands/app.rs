//! The app itself: where the local listener answers (webhook URLs to show in the editor) and
//! where the data lives.

use fluxo::app::AppState;
use serde_json::{json, Value};
use tauri::State;

use crate::error::IpcResult;

/// Where this app listens and keeps its data, fixed at launch.
pub struct AppInfo {
    pub listener_url: String,
    pub data_dir: std::path::PathBuf,
    /// Plain-words notices of this launch (the first launch's "these webhooks have no signing
    /// secret"), for the window to show once.
    pub notices: Vec<String>,
    /// The sandbox destination, while it runs (settings `sandbox`); kept here so it lives as
    /// long as the app.
    pub sandbox: Option<fluxo::sandbox::SandboxHandle>,
    /// Where the connections key lives, in words (`Shell::connections_key`).
    pub connections_key: String,
}

/// `{listener_url, webhook_base, data_dir, workflows_dir, notices, sandbox_url}`: the URL a sender posts
/// webhooks to is `<webhook_base>/<workflow_id>` (the page's own origin is
/// `tauri://localhost`); `notices` are this launch's plain-words notices (empty but on the
/// first launch).
#[tauri::command]
pub async fn app_info(info: State<'_, AppInfo>, state: State<'_, AppState>) -> IpcResult<Value> {
    Ok(json!({
        "listener_url": info.listener_url,
        "webhook_base": format!("{}/hooks", info.listener_url),
        "data_dir": info.data_dir,
        "workflows_dir": state.workflows().path(),
        "notices": info.notices,
        "sandbox_url": info.sandbox.as_ref().map(|s| s.url()),
    }))
}
