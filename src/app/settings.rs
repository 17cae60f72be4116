//! Settings (env variables for templates, retention, listener address) and the API token:
//! the use cases of `GET|PUT /api/v1/settings`, `GET|POST /api/v1/settings/token` and the
//! desktop's settings commands, and the token file in the data dir (`fluxo serve`, the app's
//! launch).
//!
//! On a shared PostgreSQL database (`fluxo serve --store postgres://…`) the settings and the
//! token are documents in the database ([`crate::store::SharedSettings`]): the first process
//! seeds them ([`join_shared`]), a save or a new token goes to the database, and every process
//! takes up what another saved within [`SHARED_POLL`] ([`refresh`]). A token given with
//! `--token`/`FLUXO_TOKEN` stays the process's own.

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

/// Replace the settings: validated, saved to `<data-dir>/settings.json` (or to the shared
/// database) and applied ([`AppState::set_settings`]; a secret sent back as its mask keeps the
/// stored value).
/// Answers the new [`view`]. Errors: `invalid_settings`, `save_failed`.
pub async fn save(state: &AppState, settings: AppSettings) -> AppResult<Value> {
    state.set_settings(settings).await.map_err(|e| match e {
        SettingsError::Io { .. } => {
            tracing::error!(error = %e, "settings save failed");
            AppError::internal("save_failed", "the settings file could not be written")
        }
        SettingsError::Shared(_) => {
            tracing::error!(error = %e, "settings save failed");
            AppError::internal(
                "save_failed",
                "the shared database did not take the settings",
            )
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

/// Regenerate the API token: a new random one, in force at once (the old one stops
/// working). Saved to the shared database when there is one and the token was not given
/// (every process takes it up, [`refresh`]), else to `<data-dir>/token` (mode 0600) when
/// there is a data dir. On a write error (logged) nothing changes: `save_failed`.
pub async fn new_token(state: &AppState) -> AppResult<String> {
    let token = generate_token();
    match shared_token_store(state) {
        Some(shared) => {
            let rev = shared
                .put_document(SHARED_TOKEN, &json!({ "token": token }))
                .await
                .map_err(|e| {
                    tracing::error!(error = %e, "shared token write failed");
                    AppError::internal("save_failed", "the shared database did not take the token")
                })?;
            state.revisions().token = rev;
            adopt_token(state, token.clone());
        }
        None => {
            if let Some(dir) = &state.options().data_dir {
                write_secret(&dir.join("token"), &token).map_err(|e| {
                    tracing::error!(error = %e, "token file write failed");
                    AppError::internal("save_failed", "the token file could not be written")
                })?;
            }
            state.set_token(token.clone());
        }
    }
    tracing::info!("API token regenerated");
    Ok(token)
}

/// Put the shared database's token in force here, and into `<data-dir>/token` (when there is
/// a data dir) so that the file holds the token that works; a file write error is logged (the
/// database holds the token).
fn adopt_token(state: &AppState, token: String) {
    if let Some(dir) = &state.options().data_dir {
        if let Err(e) = write_secret(&dir.join("token"), &token) {
            tracing::warn!(error = %e, "token file write failed");
        }
    }
    state.set_token(token);
}

/// The name of the settings document on a shared database ([`crate::store::SharedSettings`]).
pub const SHARED_SETTINGS: &str = "settings";
/// The name of the API token document on a shared database: `{"token": "<hex>"}`. Used only
/// by processes whose token was not given (`--token`/`FLUXO_TOKEN` wins and stays local).
pub const SHARED_TOKEN: &str = "token";
/// How often a process on a shared database looks for settings or a token another process
/// saved ([`refresh`], from the lease keeper): a change applies everywhere within this.
pub const SHARED_POLL: std::time::Duration = std::time::Duration::from_secs(2);

/// The revisions of the shared documents in force in this process (0: none yet).
#[derive(Debug, Default, Clone, Copy)]
pub struct Revisions {
    pub settings: i64,
    pub token: i64,
}

/// The shared database's documents, when the token is shared too.
fn shared_token_store(state: &AppState) -> Option<&dyn crate::store::SharedSettings> {
    if state.options().token_given {
        return None;
    }
    state.store().shared_settings()
}

/// At start, on a shared database: the settings in force are the database's; a process that
/// finds none seeds them with `local` (its data dir's). Likewise the token, unless it was
/// given; a token other than this process's own is adopted (`adopt_token`). Answers the
/// settings to apply (`local` on an embedded store). Errors: the database could not be read
/// or written, or holds settings this version cannot read.
pub async fn join_shared(state: &AppState, local: AppSettings) -> Result<AppSettings, String> {
    let Some(shared) = state.store().shared_settings() else {
        return Ok(local);
    };
    let doc = serde_json::to_value(&local).map_err(|e| e.to_string())?;
    let (rev, doc) = shared
        .put_document_if_absent(SHARED_SETTINGS, &doc)
        .await
        .map_err(|e| format!("shared settings: {e}"))?;
    let settings = shared_settings_of(doc)?;
    state.revisions().settings = rev;
    if let Some(shared) = shared_token_store(state) {
        let mine = json!({ "token": state.token() });
        let (rev, doc) = shared
            .put_document_if_absent(SHARED_TOKEN, &mine)
            .await
            .map_err(|e| format!("shared token: {e}"))?;
        let token = shared_token_of(&doc)?;
        if token != state.token() {
            adopt_token(state, token);
        }
        state.revisions().token = rev;
    }
    Ok(settings)
}

/// Take up settings or a token another process saved to the shared database since this one
/// last looked (called every [`SHARED_POLL`]); nothing on an embedded store. A document this
/// version cannot read is logged and skipped (the settings in force stay).
pub async fn refresh(state: &AppState) {
    let Some(shared) = state.store().shared_settings() else {
        return;
    };
    let known = state.revisions().settings;
    if let Some((rev, doc)) = newer(shared, SHARED_SETTINGS, known).await {
        match shared_settings_of(doc)
            .and_then(|s| state.apply_settings(s).map_err(|e| e.to_string()))
        {
            Ok(()) => {
                state.revisions().settings = rev;
                tracing::info!(revision = rev, "settings saved by another process applied");
            }
            Err(e) => tracing::warn!(revision = rev, error = %e, "shared settings skipped"),
        }
    }
    let Some(shared) = shared_token_store(state) else {
        return;
    };
    let known = state.revisions().token;
    if let Some((rev, doc)) = newer(shared, SHARED_TOKEN, known).await {
        match shared_token_of(&doc) {
            Ok(t) => {
                adopt_token(state, t);
                state.revisions().token = rev;
                tracing::info!(
                    revision = rev,
                    "API token regenerated by another process applied"
                );
            }
            Err(e) => tracing::warn!(revision = rev, error = %e, "shared token skipped"),
        }
    }
}

/// Document `name` when its revision is above `known`; a read error is logged (the next poll
/// tries again).
async fn newer(
    shared: &dyn crate::store::SharedSettings,
    name: &str,
    known: i64,
) -> Option<(i64, Value)> {
    match shared.get_document(name).await {
        Ok(Some((rev, doc))) if rev > known => Some((rev, doc)),
        Ok(_) => None,
        Err(e) => {
            tracing::warn!(document = name, error = %e, "reading a shared document failed");
            None
        }
    }
}

fn shared_settings_of(doc: Value) -> Result<AppSettings, String> {
    let s: AppSettings = serde_json::from_value(doc)
        .map_err(|e| format!("the shared settings are not valid: {e}"))?;
    s.validate()
        .map_err(|e| format!("the shared settings are not valid: {e}"))?;
    Ok(s)
}

fn shared_token_of(doc: &Value) -> Result<String, String> {
    match doc.get("token").and_then(Value::as_str).map(str::trim) {
        Some(t) if !t.is_empty() => Ok(t.to_string()),
        _ => Err("the shared token document has no `token` string".into()),
    }
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

/// The shortest API token `fluxo serve` accepts when one is given (`--token`, `FLUXO_TOKEN`,
/// `--token-file`), in characters: a generated one has 64.
pub const MIN_TOKEN_CHARS: usize = 32;

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
