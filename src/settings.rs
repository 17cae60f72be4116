//! App settings kept in the data dir (`settings.json`): environment variables for templates,
//! retention, the desktop listener address, the host names the server answers to, the
//! outbound allowlist. Shared by `fluxo serve` and the desktop app.
//!
//! Values set here override the command-line defaults (`--retention-runs`, …); env variables
//! set here win over `FLUXO_ENV_*` process variables of the same name.
//!
//! Secret env values (see [`crate::secrets`]: a name with `KEY`, `TOKEN`, `SECRET`, …, or one
//! listed in `secret_env`) are shown masked by [`AppSettings::masked`] and come back as that
//! mask when the UI saves the form unchanged: [`AppSettings::resolve_masked`] keeps the stored
//! value then. The file is written with mode 0600 in a 0700 data dir.

use std::collections::{BTreeMap, BTreeSet};
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
    /// Env variables that are secret although their names do not say so (e.g.
    /// `SLACK_WEBHOOK_URL`); names with `KEY`, `TOKEN`, `SECRET`, `PASSWORD`, `AUTH`, … are
    /// secret anyway. Secret values are masked in run records and never shown by the API.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub secret_env: BTreeSet<String>,
    /// Keep the newest N finished runs per workflow (default: the server's flag, 10,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_runs: Option<usize>,
    /// Keep finished runs for D days (default: no age limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_days: Option<u32>,
    /// Desktop app: address of the local listener (default `127.0.0.1:8787`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listener_addr: Option<String>,
    /// Desktop app: run the sandbox destination (the test CRM/ledger of `fluxo sandbox`, on a
    /// free loopback port) while the app is open, and point every `env.NAME` the workflows use
    /// that no setting gives at it, so the templates run end to end on a new machine. Set on
    /// at the first launch; from the next start when changed. `fluxo serve` ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<bool>,
    /// Non-public destinations that steps with `allow_input_host` may still reach (SPEC §5):
    /// host names (`crm.internal`: whatever it resolves to), IP addresses (`127.0.0.1`,
    /// `::1`) and CIDR blocks (`10.0.0.0/8`, `fd00::/8`), on every port, or with `:port` on
    /// that port only (`crm.internal:8443`, `127.0.0.1:9000`, `10.0.0.0/8:8080`; IPv6 in
    /// brackets: `[::1]:9000`, `[fd00::]/8:8080`). The port is the request's: the URL's, or
    /// 80 / 443 by its scheme. Without an entry, a host from run data that is or resolves to a
    /// loopback, private, link-local, CGNAT, multicast or cloud-metadata address is refused
    /// (`url_not_allowed`). Hosts written in a workflow or taken from `env.*` need no entry.
    /// `FLUXO_OUTBOUND_ALLOW` (comma-separated, same forms) adds to it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outbound_allow: Vec<String>,
    /// More names the server answers to, besides its bound address and `localhost`,
    /// `127.0.0.1`, `[::1]` with its port: each `name` (any port) or `name:port`, e.g.
    /// `fluxo.example.com` behind a reverse proxy or a tunnel's host name. A request whose
    /// `Host` is none of these is refused with `421 misdirected_request` (a DNS-rebinding
    /// defence; see `server::door`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<String>,
}

/// A host as the `Host` header (RFC 9110 §7.2: `uri-host [ ":" port ]`) and the
/// `allowed_hosts` setting write it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPort {
    /// The host, lowercased: a DNS name (`localhost`, `fluxo.example.com`; a trailing dot is
    /// dropped), an IPv4 address, or an IPv6 address written as it is in brackets.
    pub host: Host,
    /// The port, if one was written.
    pub port: Option<u16>,
}

/// A host name or an IP address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    Name(String),
    Ip(std::net::IpAddr),
}

impl HostPort {
    /// Parse `name`, `name:port`, `1.2.3.4[:port]` or `[v6][:port]` (RFC 3986 §3.2.2–3.2.3,
    /// restricted to what names really are: letters, digits, `-`, `.`, `_`). An empty port
    /// (`name:`) is no port. Anything else (a scheme, a path, user info, a bare IPv6 address,
    /// a port over 65535) is refused with the reason.
    pub fn parse(s: &str) -> Result<HostPort, String> {
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            let (v6, after) = rest
                .split_once(']')
                .ok_or("an IPv6 address in brackets lacks its `]`")?;
            let ip: std::net::Ipv6Addr = v6
                .parse()
                .map_err(|_| format!("`[{v6}]` is not an IPv6 address"))?;
            let port = match after {
                "" => None,
                p => Some(
                    p.strip_prefix(':')
                        .ok_or("text after `]` that is not `:port`")?,
                ),
            };
            (Host::Ip(std::net::IpAddr::V6(ip)), port)
        } else {
            let (name, port) = match s.split_once(':') {
                Some((n, p)) => (n, Some(p)),
                None => (s, None),
            };
            let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
            if name.is_empty() {
                return Err("the host name is empty".into());
            }
            if let Ok(ip) = name.parse::<std::net::Ipv4Addr>() {
                (Host::Ip(std::net::IpAddr::V4(ip)), port)
            } else {
                if !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
                {
                    return Err(
                        "a host name has only letters, digits, `-`, `.` and `_` (no scheme, \
                         path, `@` or spaces; an IPv6 address goes in brackets)"
                            .into(),
                    );
                }
                (Host::Name(name), port)
            }
        };
        let port = match port {
            None | Some("") => None,
            Some(p) if p.bytes().all(|b| b.is_ascii_digit()) && p.len() <= 5 => Some(
                p.parse::<u16>()
                    .map_err(|_| format!("port `{p}` is over 65535"))?,
            ),
            Some(_) => return Err("the port is not a number".into()),
        };
        Ok(HostPort { host, port })
    }
}

impl std::fmt::Display for HostPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.host {
            Host::Name(n) => write!(f, "{n}")?,
            Host::Ip(std::net::IpAddr::V6(ip)) => write!(f, "[{ip}]")?,
            Host::Ip(ip) => write!(f, "{ip}")?,
        }
        match self.port {
            Some(p) => write!(f, ":{p}"),
            None => Ok(()),
        }
    }
}

/// Why settings were refused.
#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("env variable name `{0}` must match [A-Z_][A-Z0-9_]* (it is used as env.{0})")]
    BadEnvName(String),
    #[error("secret_env: `{0}` must match [A-Z_][A-Z0-9_]* (an env variable name)")]
    BadSecretName(String),
    #[error(
        "env.{0}: `{1}` is the masked placeholder of a secret, but no stored value of {0} has \
         that mask; type the value again"
    )]
    MaskedValue(String, String),
    #[error("retention_runs must be at least 1")]
    BadRetentionRuns,
    #[error("retention_days must be at least 1")]
    BadRetentionDays,
    #[error("listener_addr `{0}` is not an address like 127.0.0.1:8787")]
    BadAddr(String),
    #[error(transparent)]
    BadOutboundAllow(#[from] crate::runtime::outbound::BadAllowEntry),
    #[error("allowed_hosts[{index}] `{entry}`: {why} (write a host name, or name:port, e.g. fluxo.example.com)")]
    BadHost {
        index: usize,
        entry: String,
        why: String,
    },
    #[error("{path} is not a valid settings file: {message}")]
    BadFile { path: String, message: String },
    #[error("cannot write {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
    /// The shared database (`fluxo serve --store postgres://…`) did not take the settings.
    #[error("the shared settings could not be written: {0}")]
    Shared(String),
}

impl AppSettings {
    /// Check every field.
    pub fn validate(&self) -> Result<(), SettingsError> {
        let ok = |name: &str| {
            !name.is_empty()
                && name
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_uppercase() || c == '_')
                && name
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        };
        if let Some(name) = self.env.keys().find(|n| !ok(n)) {
            return Err(SettingsError::BadEnvName(name.clone()));
        }
        if let Some(name) = self.secret_env.iter().find(|n| !ok(n)) {
            return Err(SettingsError::BadSecretName(name.clone()));
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
        for (index, entry) in self.allowed_hosts.iter().enumerate() {
            HostPort::parse(entry).map_err(|why| SettingsError::BadHost {
                index,
                entry: entry.clone(),
                why,
            })?;
        }
        Ok(())
    }

    /// `outbound_allow`, parsed.
    pub fn outbound_allow(
        &self,
    ) -> Result<crate::runtime::outbound::OutboundAllow, crate::runtime::outbound::BadAllowEntry>
    {
        crate::runtime::outbound::OutboundAllow::parse(&self.outbound_allow)
    }

    /// Whether env variable `name` is secret ([`crate::secrets::is_secret_env`] with
    /// `secret_env`).
    pub fn is_secret(&self, name: &str) -> bool {
        crate::secrets::is_secret_env(name, &self.secret_env)
    }

    /// The names of the env variables that are secret, sorted.
    pub fn secret_names(&self) -> Vec<String> {
        self.env
            .keys()
            .filter(|n| self.is_secret(n))
            .cloned()
            .collect()
    }

    /// These settings as the API shows them: every secret env value replaced by its mask
    /// ([`crate::secrets::mask`], `••••1234`).
    pub fn masked(&self) -> AppSettings {
        let mut s = self.clone();
        for (name, value) in s.env.iter_mut() {
            if crate::secrets::is_secret_env(name, &self.secret_env) {
                *value = crate::secrets::mask(value);
            }
        }
        s
    }

    /// Settings sent back by a client that was shown [`AppSettings::masked`]: an env value
    /// that is a mask (`••••…`) keeps the value stored in `current` under the same name when
    /// its mask is exactly that; any other mask is refused ([`SettingsError::MaskedValue`]),
    /// so a placeholder is never saved as a value.
    pub fn resolve_masked(mut self, current: &AppSettings) -> Result<AppSettings, SettingsError> {
        for (name, value) in self.env.iter_mut() {
            if !crate::secrets::is_masked(value) {
                continue;
            }
            match current.env.get(name) {
                Some(stored) if crate::secrets::mask(stored) == *value => {
                    *value = stored.clone();
                }
                _ => return Err(SettingsError::MaskedValue(name.clone(), value.clone())),
            }
        }
        Ok(self)
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

    /// Load `<dir>/settings.json`; a missing file is the defaults. A file that group or
    /// others can read (an older version's 0644) is tightened to 0600 first, with a log line.
    pub fn load(dir: &Path) -> Result<Self, SettingsError> {
        let path = dir.join(FILE);
        crate::secrets::secure_file(&path).map_err(|e| SettingsError::BadFile {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
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

    /// Save atomically to `<dir>/settings.json`, mode 0600 (it holds secrets), in `dir` made
    /// 0700 ([`crate::secrets::secure_dir`]).
    pub fn save(&self, dir: &Path) -> Result<(), SettingsError> {
        self.validate()?;
        let path = dir.join(FILE);
        let mut text = serde_json::to_string_pretty(self).unwrap_or_default();
        text.push('\n');
        crate::secrets::secure_dir(dir)
            .and_then(|_| crate::workflow::dir::write_atomic_mode(&path, text.as_bytes(), 0o600))
            .map_err(|source| SettingsError::Io {
                path: path.display().to_string(),
                source,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    #[test]
    fn host_forms() {
        let hp = |s: &str| HostPort::parse(s).unwrap();
        assert_eq!(
            hp("LocalHost.:8787"),
            HostPort {
                host: Host::Name("localhost".into()),
                port: Some(8787)
            }
        );
        assert_eq!(hp("fluxo.example.com").port, None);
        assert_eq!(hp("fluxo.example.com:").port, None);
        assert_eq!(
            hp("127.0.0.1:80").host,
            Host::Ip(IpAddr::from([127, 0, 0, 1]))
        );
        assert_eq!(
            hp("[::1]:8787").host,
            Host::Ip("::1".parse::<IpAddr>().unwrap())
        );
        assert_eq!(hp("[::1]:8787").to_string(), "[::1]:8787");
        for bad in [
            "",
            ":80",
            "http://x",
            "x/y",
            "user@x",
            "::1",
            "[::1",
            "[::1]x",
            "[nope]",
            "x:65536",
            "x:8o",
            "x:1:2",
            "a b",
            "*.example.com",
        ] {
            assert!(HostPort::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn allowed_hosts_are_validated() {
        let s = AppSettings {
            allowed_hosts: vec!["ok.example.com".into(), "https://bad".into()],
            ..Default::default()
        };
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("allowed_hosts[1]"), "{e}");
    }

    #[test]
    fn outbound_allow_entries_with_a_port_are_validated() {
        let with = |entries: &[&str]| AppSettings {
            outbound_allow: entries.iter().map(|e| e.to_string()).collect(),
            ..Default::default()
        };
        let ok = with(&[
            "crm.internal",
            "crm.internal:8443",
            "127.0.0.1:9000",
            "10.0.0.0/8:8080",
            "[::1]:9000",
            "[fd00::]/8:8080",
        ]);
        ok.validate().unwrap();
        let allow = ok.outbound_allow().unwrap();
        assert!(allow.allows_ip("127.0.0.1".parse().unwrap(), Some(9000)));
        assert!(!allow.allows_ip("127.0.0.1".parse().unwrap(), Some(9090)));
        for (bad, why) in [
            ("127.0.0.1:0", "port 0"),
            ("127.0.0.1:70000", "port `70000` is over 65535"),
            ("crm.internal:", "the port after `:` is missing"),
            ("::1:99999", "goes in brackets: `[::1]:99999`"),
        ] {
            let e = with(&["crm.internal", bad]).validate().unwrap_err();
            assert!(matches!(e, SettingsError::BadOutboundAllow(_)), "{e:?}");
            let e = e.to_string();
            assert!(
                e.starts_with(&format!("outbound_allow[1] `{bad}`: ")),
                "{e}"
            );
            assert!(e.contains(why), "{e}");
        }
    }
}
