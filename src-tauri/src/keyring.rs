//! The connections key in the OS keyring: [`OsKeyring`], the `keyring` crate behind
//! [`fluxo::connections::key::Keyring`] (the Secret Service over D-Bus on Linux, the Keychain
//! on macOS, the Credential Manager on Windows). The order of the key's places (environment,
//! keyring, a legacy or fallback `connections.key`) is decided in the engine crate,
//! [`fluxo::connections::key::resolve_with_keyring`], so the server binary links no D-Bus.

use fluxo::connections::key::{Keyring, KeyringEntry};

/// The platform's keyring. Elsewhere (no backend built in) every call fails with a reason,
/// so the key stays in the data dir's key file, with a warning.
#[derive(Debug, Clone, Copy, Default)]
pub struct OsKeyring;

#[cfg(any(target_os = "linux", target_os = "macos", windows))]
impl OsKeyring {
    fn entry(e: &KeyringEntry) -> Result<keyring::Entry, String> {
        keyring::Entry::new(&e.service, &e.user).map_err(|e| e.to_string())
    }
}

#[cfg(any(target_os = "linux", target_os = "macos", windows))]
impl Keyring for OsKeyring {
    fn get(&self, e: &KeyringEntry) -> Result<Option<String>, String> {
        match Self::entry(e)?.get_password() {
            Ok(secret) => Ok(Some(secret)),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(err) => Err(err.to_string()),
        }
    }

    fn set(&self, e: &KeyringEntry, secret: &str) -> Result<(), String> {
        Self::entry(e)?
            .set_password(secret)
            .map_err(|e| e.to_string())
    }

    fn delete(&self, e: &KeyringEntry) -> Result<(), String> {
        match Self::entry(e)?.delete_credential() {
            Ok(()) | Err(keyring::Error::NoEntry) => Ok(()),
            Err(err) => Err(err.to_string()),
        }
    }
}

#[cfg(not(any(target_os = "linux", target_os = "macos", windows)))]
impl Keyring for OsKeyring {
    fn get(&self, _: &KeyringEntry) -> Result<Option<String>, String> {
        Err("this build has no OS keyring for this platform".into())
    }
    fn set(&self, _: &KeyringEntry, _: &str) -> Result<(), String> {
        Err("this build has no OS keyring for this platform".into())
    }
    fn delete(&self, _: &KeyringEntry) -> Result<(), String> {
        Ok(())
    }
}
