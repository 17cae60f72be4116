//! Where the app keeps its data and where its listener answers. Everything else the user sets
//! (env variables, retention, the listener address) is the library's
//! [`fluxo::settings::AppSettings`] in `<data-dir>/settings.json`, loaded by the server and
//! edited through the `get_settings`/`save_settings` commands.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use fluxo::settings::AppSettings;

/// Default address of the local listener (the same port as `fluxo serve`).
pub const DEFAULT_LISTENER: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 8787);

/// Overrides the app-data dir (tests use a throw-away one).
pub const DATA_DIR_VAR: &str = "FLUXO_DESKTOP_DATA_DIR";
/// Overrides the listener's port (`0` = any free port).
pub const PORT_VAR: &str = "FLUXO_DESKTOP_PORT";

/// The data dir: `FLUXO_DESKTOP_DATA_DIR` if set, else the platform's app-data dir.
pub fn data_dir(app_data_dir: impl FnOnce() -> Option<PathBuf>) -> Option<PathBuf> {
    std::env::var_os(DATA_DIR_VAR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(app_data_dir)
}

/// The listener's address: `listener_addr` of the settings (default 127.0.0.1:8787), with the
/// port from `FLUXO_DESKTOP_PORT` if set. A bad settings file is reported, not ignored.
pub fn listener_addr(data_dir: &Path) -> Result<SocketAddr, String> {
    let settings = AppSettings::load(data_dir).map_err(|e| e.to_string())?;
    let mut addr = match settings.listener_addr.as_deref() {
        Some(a) => a
            .parse()
            .map_err(|_| format!("listener_addr `{a}` is not an address like 127.0.0.1:8787"))?,
        None => DEFAULT_LISTENER,
    };
    if let Ok(p) = std::env::var(PORT_VAR) {
        addr.set_port(
            p.trim()
                .parse()
                .map_err(|_| format!("{PORT_VAR}: `{p}` is not a port number"))?,
        );
    }
    Ok(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listener_from_settings() {
        let dir = tempfile::tempdir().unwrap();
        // (FLUXO_DESKTOP_PORT is not set in the test environment.)
        assert_eq!(listener_addr(dir.path()).unwrap(), DEFAULT_LISTENER);
        std::fs::write(
            dir.path().join("settings.json"),
            r#"{"listener_addr": "127.0.0.1:9911", "env": {"CRM_URL": "http://x"}}"#,
        )
        .unwrap();
        assert_eq!(listener_addr(dir.path()).unwrap().port(), 9911);
        std::fs::write(dir.path().join("settings.json"), r#"{"prot": 1}"#).unwrap();
        let e = listener_addr(dir.path()).unwrap_err();
        assert!(e.contains("prot"), "{e}");
    }
}
