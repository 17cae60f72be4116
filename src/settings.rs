//! App settings kept in the data dir (`settings.json`): environment variables for templates,
//! retention, the desktop listener address, the outbound allowlist. Shared by `fluxo serve` and the desktop app.
//!
//! Values set here override the command-line defaults (`--retention-runs`, …); env variables
//! set here win over `FLUXO_ENV_*` process variables of the same name.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::store::Retention;

/// File name inside the data dir.
pub const FILE: &str = "settings.json";

/// The settings document.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AppSettings {
    /// Variables visible to templates as `env.NAME` (names `[A-Z_][A-Z0-9_]*`).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Keep the newest N finished runs per workflow (default: the server's flag, 10,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_runs: Option<usize>,
    /// Keep finished runs for D days (default: no age limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_days: Option<u32>,
    /// Desktop app: address of the local listener (default `127.0.0.1:8787`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listener_addr: Option<String>,
    /// Non-public destinations that steps with `allow_input_host` may still reach (SPEC §5):
    /// host names (`crm.internal`: whatever it resolves to), IP addresses (`127.0.0.1`,
    /// `::1`) and CIDR blocks (`10.0.0.0/8`, `fd00::/8`). Without an entry, a host from run
    /// data that is or resolves to a loopback, private, link-local, CGNAT, multicast or
    /// cloud-metadata address is refused (`url_not_allowed`). Hosts written in a workflow or
    /// taken from `env.*` need no entry. `FLUXO_OUTBOUND_ALLOW` (comma-separated) adds to it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outbound_allow: Vec<String>,
}

/// Why settings were refused.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("env variable name `{0}` must match [A-Z_][A-Z0-9_]* (it is used as env.{0})")]
    BadEnvName(String),
    #[error("retention_runs must be at least 1")]
    BadRetentionRuns,
    #[error("retention_days must be at least 1")]
    BadRetentionDays,
    #[error("listener_addr `{0}` is not an address like 127.0.0.1:8787")]
    BadAddr(String),
    #[error(transparent)]
    BadOutboundAllow(#[from] crate::runtime::outbound::BadAllowEntry),
    #[error("{path} is not a valid settings file: {message}")]
    BadFile { path: String, message: String },
    #[error("cannot write {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

impl AppSettings {
    /// Check every field.
    pub fn validate(&self) -> Result<(), SettingsError> {
        for name in self.env.keys() {
            let ok = !name.is_empty()
                && name
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_uppercase() || c == '_')
                && name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            if !ok {
                return Err(SettingsError::BadEnvName(name.clone()));
            }
        }
        if self.retention_runs == Some(0) {
            return Err(SettingsError::BadRetentionRuns);
        }
        if self.retention_days == Some(0) {
            return Err(SettingsError::BadRetentionDays);
        }
        if let Some(a) = &self.listener_addr {
            if a.parse::<std::net::SocketAddr>().is_err() {
                return Err(SettingsError::BadAddr(a.clone()));
            }
        }
        self.outbound_allow()?;
        Ok(())
    }

    /// `outbound_allow`, parsed.
    pub fn outbound_allow(
        &self,
    ) -> Result<crate::runtime::outbound::OutboundAllow, crate::runtime::outbound::BadAllowEntry>
    {
        crate::runtime::outbound::OutboundAllow::parse(&self.outbound_allow)
    }

    /// The retention policy: these settings over `defaults`.
    pub fn retention(&self, defaults: Retention) -> Retention {
        Retention {
            max_runs_per_workflow: self.retention_runs.or(defaults.max_runs_per_workflow),
            max_age_ms: self
                .retention_days
                .map(|d| d as i64 * 86_400_000)
                .or(defaults.max_age_ms),
        }
    }

    /// Load `<dir>/settings.json`; a missing file is the defaults.
    pub fn load(dir: &Path) -> Result<Self, SettingsError> {
        let path = dir.join(FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => {
                return Err(SettingsError::BadFile {
                    path: path.display().to_string(),
                    message: e.to_string(),
                })
            }
        };
        let s: AppSettings = serde_json::from_str(&text).map_err(|e| SettingsError::BadFile {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        s.validate()?;
        Ok(s)
    }

    /// Save atomically to `<dir>/settings.json`.
    pub fn save(&self, dir: &Path) -> Result<(), SettingsError> {
        self.validate()?;
        let path = dir.join(FILE);
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        std::fs::create_dir_all(dir)
            .and_then(|_| crate::workflow::dir::write_atomic(&path, text.as_bytes()))
            .map_err(|source| SettingsError::Io {
                path: path.display().to_string(),
                source,
            })
    }
}
