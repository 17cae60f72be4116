//! Settings: env variables for templates, retention, the listener address (applied at the next
//! launch), and the local API token. Like `GET|PUT /api/v1/settings` and
//! `GET|POST /api/v1/settings/token`.

use fluxo::server::settings::{new_token, view};
use fluxo::server::AppState;
use fluxo::settings::{AppSettings, SettingsError};
use serde_json::Value;
use tauri::State;

use crate::error::{IpcError, IpcResult};

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
    new_token(&state)
        .map_err(|_| IpcError::new("save_failed", "the token file could not be written"))
}
