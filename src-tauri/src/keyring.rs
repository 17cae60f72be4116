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
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    use super::*;

    /// A child process killed when dropped.
    struct Daemon(Child);
    impl Drop for Daemon {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// The real Secret Service on Linux, in a session of its own: a private D-Bus session bus
    /// and gnome-keyring's secrets component, unlocked, over a temp home (the developer's own
    /// keyring is never touched): the keyring keeps and forgets an entry, and the desktop's
    /// start-up order moves a legacy key file into it. (Start-up with no usable keyring is
    /// `fluxo::connections::key`'s tests, over a keyring that fails.)
    #[test]
    #[cfg(target_os = "linux")]
    fn the_secret_service_keeps_the_key_and_takes_a_legacy_key_file() {
        let tmp = tempfile::tempdir().unwrap();
        let e = KeyringEntry::new("dev.fluxo.test", format!("probe-{}", std::process::id()));
        let bus = format!("unix:path={}", tmp.path().join("bus").display());
        let _dbus = Daemon(
            Command::new("dbus-daemon")
                .args(["--session", "--nofork", &format!("--address={bus}")])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("dbus-daemon (scripts/setup.sh test installs it)"),
        );
        std::env::set_var("DBUS_SESSION_BUS_ADDRESS", &bus);
        let home = tmp.path().join("home");
        std::fs::create_dir_all(&home).unwrap();
        let mut keyring = Command::new("gnome-keyring-daemon")
            .args(["--foreground", "--unlock", "--components=secrets"])
            .env("HOME", &home)
            .env("XDG_DATA_HOME", home.join("data"))
            .env("XDG_RUNTIME_DIR", tmp.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("gnome-keyring-daemon (scripts/setup.sh test installs it)");
        {
            use std::io::Write as _;
            let mut stdin = keyring.stdin.take().unwrap();
            stdin.write_all(b"test-password\n").unwrap();
        }
        let _keyring = Daemon(keyring);
        // Bounded wait for the service to own its name and its collection to be unlocked.
        let ring = OsKeyring;
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match ring.get(&e) {
                Ok(v) => {
                    assert_eq!(v, None);
                    break;
                }
                Err(why) => assert!(Instant::now() < deadline, "no Secret Service: {why}"),
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        ring.set(&e, "0123abcd").unwrap();
        assert_eq!(ring.get(&e), Ok(Some("0123abcd".into())));
        ring.delete(&e).unwrap();
        assert_eq!(ring.get(&e), Ok(None));

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
}
