//! Settings: env variables for templates, retention, the listener address (applied at the next
//! launch), and the local API token. Like `GET|PUT /api/v1/settings` and
//! `GET|POST /api/v1/settings/token`: each over the same [`fluxo::app::settings`] call.

use fluxo::app::{settings, AppState};
use fluxo::settings::AppSettings;
use serde_json::Value;
use tauri::State;

use crate::error::IpcResult;

#[tauri::command]
pub async fn get_settings(state: State<'_, AppState>) -> IpcResult<Value> {
    Ok(settings::view(&state))
}

/// Validate, save to `<data-dir>/settings.json` and apply (env variables at once, retention
/// from the next maintenance pass, the listener address at the next launch).
#[tauri::command]
pub async fn save_settings(state: State<'_, AppState>, settings: AppSettings) -> IpcResult<Value> {
    Ok(self::settings::save(&state, settings).await?)
}

/// The token of the local listener's `/api/v1`.
#[tauri::command]
pub async fn get_token(state: State<'_, AppState>) -> IpcResult<String> {
    Ok(settings::token(&state))
}

/// A new token; the old one stops working at once.
#[tauri::command]
pub async fn regenerate_token(state: State<'_, AppState>) -> IpcResult<String> {
    Ok(settings::new_token(&state).await?)
}
