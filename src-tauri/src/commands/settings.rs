//! Settings: env variables for templates, retention, the listener address (applied at the next
//! launch), and the local API token. Like `GET|PUT /api/v1/settings` and
//! `GET|POST /api/v1/settings/token`.

use fluxo::server::auth::{generate_token, write_secret};
use fluxo::server::AppState;
use fluxo::settings::{AppSettings, SettingsError};
use serde_json::{json, Value};
use tauri::State;

use crate::error::{IpcError, IpcResult};

/// `{settings, effective, data_dir, workflows_dir}`.
fn view(state: &AppState) -> Value {
    let r = state.retention();
    json!({
        "settings": state.settings(),
        "effective": {
            "retention_runs": r.max_runs_per_workflow,
            "retention_days": r.max_age_ms.map(|ms| ms / 86_400_000),
        },
        "data_dir": state.options().data_dir,
        "workflows_dir": state.workflows().path(),
    })
}

#[tauri::command]
pub async fn get_settings(state: State<'_, AppState>) -> IpcResult<Value> {
    Ok(view(&state))
}

/// Validate, save to `<data-dir>/settings.json` and apply (env variables at once, retention
/// from the next maintenance pass, the listener address at the next launch).
#[tauri::command]
pub async fn save_settings(state: State<'_, AppState>, settings: AppSettings) -> IpcResult<Value> {
    state.set_settings(settings).map_err(|e| match e {
        SettingsError::Io { .. } => {
            tracing::error!(error = %e, "settings save failed");
            IpcError::new("save_failed", "the settings file could not be written")
        }
        other => IpcError::new("invalid_settings", other.to_string()),
    })?;
    Ok(view(&state))
}

/// The token of the local listener's `/api/v1`.
#[tauri::command]
pub async fn get_token(state: State<'_, AppState>) -> IpcResult<String> {
    Ok(state.token())
}

/// A new token; the old one stops working at once.
#[tauri::command]
pub async fn regenerate_token(state: State<'_, AppState>) -> IpcResult<String> {
    let token = generate_token();
    if let Some(dir) = &state.options().data_dir {
        write_secret(&dir.join("token"), &token).map_err(|e| {
            tracing::error!(error = %e, "token file write failed");
            IpcError::new("save_failed", "the token file could not be written")
        })?;
    }
    state.set_token(token.clone());
    tracing::info!("API token regenerated");
    Ok(token)
}
