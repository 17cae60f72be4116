//! Settings (env variables for templates, retention, listener address) and the API token:
//! the use cases of `GET|PUT /api/v1/settings`, `GET|POST /api/v1/settings/token` and the
//! desktop's settings commands, and the token file in the data dir (`fluxo serve`, the app's
//! launch).

use std::path::Path;

use serde_json::{json, Value};

use super::{AppError, AppResult, AppState};
use crate::settings::{AppSettings, SettingsError};

/// `{settings, secret_names, effective, data_dir, workflows_dir}`: the settings (secret env
/// values masked, `••••1234`, never in clear) and the read-only facts.
pub fn view(state: &AppState) -> Value {
    let s = state.settings();
    let r = state.retention();
    json!({
        "settings": s.masked(),
        "secret_names": s.secret_names(),
        "effective": {
            "retention_runs": r.max_runs_per_workflow,
            "retention_days": r.max_age_ms.map(|ms| ms / 86_400_000),
        },
        "data_dir": state.options().data_dir,
        "workflows_dir": state.workflows().path(),
    })
}

/// Replace the settings: validated, saved to `<data-dir>/settings.json` and applied
/// ([`AppState::set_settings`]; a secret sent back as its mask keeps the stored value).
/// Answers the new [`view`]. Errors: `invalid_settings`, `save_failed`.
pub fn save(state: &AppState, settings: AppSettings) -> AppResult<Value> {
    state.set_settings(settings).map_err(|e| match e {
        SettingsError::Io { .. } => {
            tracing::error!(error = %e, "settings save failed");
            AppError::internal("save_failed", "the settings file could not be written")
        }
        other => AppError::bad_request("invalid_settings", other.to_string()),
    })?;
    Ok(view(state))
}

/// The settings of a request body (JSON): `invalid_settings` naming what is wrong.
pub fn parse(body: Value) -> AppResult<AppSettings> {
    serde_json::from_value(body)
        .map_err(|e| AppError::bad_request("invalid_settings", format!("settings: {e}")))
}

/// The API token in force.
pub fn token(state: &AppState) -> String {
    state.token()
}

/// Regenerate the API token: a new random one, saved to `<data-dir>/token` (mode 0600) when
/// there is a data dir, in force at once (the old one stops working). On a write error
/// (logged) nothing changes: `save_failed`.
pub fn new_token(state: &AppState) -> AppResult<String> {
    let token = generate_token();
    if let Some(dir) = &state.options().data_dir {
        write_secret(&dir.join("token"), &token).map_err(|e| {
            tracing::error!(error = %e, "token file write failed");
            AppError::internal("save_failed", "the token file could not be written")
        })?;
    }
    state.set_token(token.clone());
    tracing::info!("API token regenerated");
    Ok(token)
}

/// Where the token came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenSource {
    Given,
    File,
    Generated,
}

/// Resolve the API token for a data dir: `given` (`--token`/`FLUXO_TOKEN`), else
/// `<data-dir>/token`, else a new one written there. The data dir is made 0700 (created so,
/// or tightened with a log line) and an existing token file 0600 ([`crate::secrets`]).
pub fn resolve_token(
    given: Option<String>,
    data_dir: &Path,
) -> std::io::Result<(String, TokenSource)> {
    crate::secrets::secure_dir(data_dir)?;
    if let Some(t) = given.filter(|t| !t.trim().is_empty()) {
        return Ok((t.trim().to_string(), TokenSource::Given));
    }
    let path = data_dir.join("token");
    crate::secrets::secure_file(&path)?;
    if let Ok(t) = std::fs::read_to_string(&path) {
        let t = t.trim().to_string();
        if !t.is_empty() {
            return Ok((t, TokenSource::File));
        }
    }
    let token = generate_token();
    write_secret(&path, &token)?;
    Ok((token, TokenSource::Generated))
}

/// A new random token: 32 bytes from the OS RNG, hex.
pub fn generate_token() -> String {
    use rand::RngCore;
    let mut b = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut b);
    hex::encode(b)
}

/// Write a secret file readable by its owner only (0600, whatever the umask), atomically,
/// in a folder made 0700.
pub fn write_secret(path: &Path, secret: &str) -> std::io::Result<()> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => {
            crate::secrets::secure_dir(dir)?;
        }
        _ => {}
    }
    crate::workflow::dir::write_atomic_mode(path, format!("{secret}\n").as_bytes(), 0o600)
}
