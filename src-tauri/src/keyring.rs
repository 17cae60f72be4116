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

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the real keyring of this session: store, read back, delete an entry of its
    /// own. Ignored (it needs a Secret Service / Keychain and writes to it); run with
    /// `dbus-run-session -- sh -c 'echo pw | gnome-keyring-daemon --unlock --components=secrets
    /// && cargo test -p fluxo-desktop keyring -- --ignored'`.
    #[test]
    #[ignore]
    fn a_real_keyring_keeps_and_forgets_an_entry() {
        let e = KeyringEntry::new("dev.fluxo.test", format!("probe-{}", std::process::id()));
        let ring = OsKeyring;
        assert_eq!(ring.get(&e), Ok(None));
        ring.set(&e, "0123abcd").unwrap();
        assert_eq!(ring.get(&e), Ok(Some("0123abcd".into())));
        ring.delete(&e).unwrap();
        assert_eq!(ring.get(&e), Ok(None));
        ring.delete(&e).unwrap();

        // The desktop's start-up order over it: a legacy key file moves into the keyring.
        use fluxo::connections::key::{resolve, resolve_with_keyring, KeyChoice, KEY_FILE};
        let dir = tempfile::tempdir().unwrap();
        let (legacy, _) = resolve(&KeyChoice::default(), dir.path()).unwrap();
        let none = KeyChoice::default();
        let (key, source) = resolve_with_keyring(&none, dir.path(), &ring, &e).unwrap();
        assert_eq!((&key, &source), (&legacy, &e.source()));
        assert!(!dir.path().join(KEY_FILE).exists());
        assert_eq!(ring.get(&e), Ok(Some(legacy.to_hex())));
        let (again, _) = resolve_with_keyring(&none, dir.path(), &ring, &e).unwrap();
        assert_eq!(again, legacy);
        ring.delete(&e).unwrap();
    }

    /// Without a usable keyring a read fails with a reason, soon, rather than hanging or
    /// claiming there is no entry. Ignored: with a keyring it would succeed. Seen on Linux:
    /// no session bus ("Unable to autolaunch a dbus-daemon without a $DISPLAY for X11"), a
    /// Secret Service with no unlocked collection ("Secret Service: no result found"), the
    /// entry in a locked collection with no display for the prompt ("Cannot get secret of a
    /// locked object").
    #[test]
    #[ignore]
    fn no_keyring_is_an_error_with_a_reason() {
        let e = KeyringEntry::new("dev.fluxo.test", "absent");
        let t = std::time::Instant::now();
        let why = OsKeyring.get(&e).unwrap_err();
        assert!(!why.is_empty());
        assert!(
            t.elapsed() < std::time::Duration::from_secs(30),
            "{:?}",
            t.elapsed()
        );
        eprintln!("no keyring: {why}");
    }
}
