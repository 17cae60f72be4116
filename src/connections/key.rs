//! The key of the connections store ([`super::file`]): 32 random bytes, and where they came
//! from ([`KeySource`]), which every error about the key names.
//!
//! `fluxo serve` and the CLI take, in this order:
//! 1. `FLUXO_CONNECTIONS_KEY`: the key itself, as 64 hex characters or base64 (standard or
//!    URL-safe alphabet, padded or not: `openssl rand -base64 32`);
//! 2. a key file (`--connections-key-file <path>`, `FLUXO_CONNECTIONS_KEY_FILE`): its first
//!    line, in either form (systemd credentials and Docker secrets provide one);
//! 3. `<data-dir>/connections.key` (mode 0600), generated on first use with a log line: the key
//!    then sits next to the data it protects (as n8n keeps its encryption key in
//!    `~/.n8n/config`), which guards a copied `connections.enc` but not a copied data dir:
//!    move the file elsewhere and give it with (2).
//!
//! Giving both (1) and (2) is refused. When `connections.enc` exists but no key was given and
//! there is no `connections.key`, nothing is generated: the store refuses to open, saying
//! which key it needs ([`resolve`]).
//!
//! The desktop app keeps its key in the OS keyring ([`resolve_with_keyring`],
//! [`KeySource::Keyring`]): `FLUXO_CONNECTIONS_KEY` (tests, CI), else the keyring entry
//! (service: the app identifier, user [`KEYRING_USER`]), else a `<data-dir>/connections.key` it finds is moved
//! into the keyring (the file deleted once the keyring gives the key back), else a new key is
//! generated there. When the keyring cannot be used (no Secret Service, as under Xvfb or in
//! CI; locked; denied) it falls back to (3) with a warning saying why
//! ([`KeySource::KeyringFallback`]), and a later start with a keyring moves the key. A
//! `connections.enc` whose key is in neither place is refused, naming both. The keyring is a
//! trait ([`Keyring`]): its implementation (the `keyring` crate) lives in the desktop crate,
//! so this crate, and `fluxo serve`, link no D-Bus.

use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use sha2::{Digest, Sha256};

use super::ConnectionError;

/// The environment variable holding the key itself.
pub const KEY_ENV: &str = "FLUXO_CONNECTIONS_KEY";
/// The environment variable naming a key file (as `--connections-key-file`).
pub const KEY_FILE_ENV: &str = "FLUXO_CONNECTIONS_KEY_FILE";
/// The generated key file's name inside the data dir.
pub const KEY_FILE: &str = "connections.key";
/// Bytes of a key.
pub const KEY_BYTES: usize = 32;
/// Bytes of SHA-256(key) that make its id (hex: 16 characters).
pub const KEY_ID_BYTES: usize = 8;

/// A 256-bit key of the connections store. `Debug` shows its id only, never the key.
#[derive(Clone, PartialEq, Eq)]
pub struct ConnectionKey {
    bytes: [u8; KEY_BYTES],
}

impl fmt::Debug for ConnectionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ConnectionKey({})", self.id_hex())
    }
}

impl ConnectionKey {
    /// A key of these bytes.
    pub fn from_bytes(bytes: [u8; KEY_BYTES]) -> Self {
        ConnectionKey { bytes }
    }

    /// A new random key (the OS RNG).
    pub fn generate() -> Self {
        use rand::RngCore;
        let mut bytes = [0u8; KEY_BYTES];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        ConnectionKey { bytes }
    }

    /// Parse a key written as 64 hex characters or as base64 of 32 bytes (standard or
    /// URL-safe alphabet, with or without padding); surrounding white space is ignored.
    /// Errors say which form was expected and what was found (never the text itself).
    pub fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        if t.is_empty() {
            return Err("it is empty".into());
        }
        if t.len() == 2 * KEY_BYTES && t.bytes().all(|b| b.is_ascii_hexdigit()) {
            let mut bytes = [0u8; KEY_BYTES];
            hex::decode_to_slice(t, &mut bytes).map_err(|e| e.to_string())?;
            return Ok(ConnectionKey { bytes });
        }
        use base64::engine::general_purpose::{
            STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD,
        };
        let decoded = [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
            .iter()
            .find_map(|e| e.decode(t).ok());
        match decoded {
            Some(v) if v.len() == KEY_BYTES => {
                let mut bytes = [0u8; KEY_BYTES];
                bytes.copy_from_slice(&v);
                Ok(ConnectionKey { bytes })
            }
            Some(v) => Err(format!(
                "it decodes (base64) to {} bytes; a key has {KEY_BYTES} (`openssl rand -base64 \
                 32` or `openssl rand -hex 32` makes one)",
                v.len()
            )),
            None => Err(format!(
                "it is neither 64 hex characters nor base64 of {KEY_BYTES} bytes ({} \
                 characters; `openssl rand -base64 32` or `openssl rand -hex 32` makes one)",
                t.chars().count()
            )),
        }
    }

    /// The key's bytes (for the cipher).
    pub(crate) fn bytes(&self) -> &[u8; KEY_BYTES] {
        &self.bytes
    }

    /// The key's id: the first [`KEY_ID_BYTES`] bytes of SHA-256 of the key. It names the key
    /// in the file header and in errors without revealing it.
    pub fn id(&self) -> [u8; KEY_ID_BYTES] {
        let digest = Sha256::digest(self.bytes);
        let mut id = [0u8; KEY_ID_BYTES];
        id.copy_from_slice(&digest[..KEY_ID_BYTES]);
        id
    }

    /// [`ConnectionKey::id`] as 16 lower-case hex characters (`3fa2c9d10b7e4a51`).
    pub fn id_hex(&self) -> String {
        hex::encode(self.id())
    }

    /// The key as 64 hex characters (what a generated key file holds).
    pub fn to_hex(&self) -> String {
        hex::encode(self.bytes)
    }
}

/// Where the key in force came from; its `Display` ("the key from FLUXO_CONNECTIONS_KEY",
/// "the key in /run/secrets/k (--connections-key-file)") is what errors about the key say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// `FLUXO_CONNECTIONS_KEY`.
    Env,
    /// A key file the operator gave (`--connections-key-file`, `FLUXO_CONNECTIONS_KEY_FILE`).
    GivenFile(PathBuf),
    /// `<data-dir>/connections.key`, read as it was.
    DataDirFile(PathBuf),
    /// `<data-dir>/connections.key`, generated by this start.
    Generated(PathBuf),
    /// Handed over by the embedder (tests).
    Embedder(String),
    /// An OS keyring entry (the desktop app, [`resolve_with_keyring`]).
    Keyring { service: String, user: String },
    /// `<data-dir>/connections.key` where the desktop app would use the OS keyring entry
    /// `service`/`user` but could not, for the reason `why` (the keyring is unavailable, or
    /// holds another key): read as it was, or `generated` by this start.
    KeyringFallback {
        path: PathBuf,
        generated: bool,
        service: String,
        user: String,
        why: String,
    },
}

impl fmt::Display for KeySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeySource::Env => write!(f, "the key from {KEY_ENV}"),
            KeySource::GivenFile(p) => write!(
                f,
                "the key in {} (--connections-key-file / {KEY_FILE_ENV})",
                p.display()
            ),
            KeySource::DataDirFile(p) => write!(f, "the key in {}", p.display()),
            KeySource::Generated(p) => write!(f, "the key just generated in {}", p.display()),
            KeySource::Embedder(what) => write!(f, "the key from {what}"),
            KeySource::Keyring { service, user } => write!(
                f,
                "the key in the OS keyring (service {service}, user {user})"
            ),
            KeySource::KeyringFallback {
                path,
                generated,
                service,
                user,
                why,
            } => write!(
                f,
                "the key {}in {} (not in the OS keyring entry {service}/{user}: {why})",
                if *generated { "just generated " } else { "" },
                path.display()
            ),
        }
    }
}

/// What the operator gave: the key's text (`FLUXO_CONNECTIONS_KEY`) and/or a key file.
#[derive(Debug, Clone, Default)]
pub struct KeyChoice {
    /// The key itself (never logged).
    pub key: Option<String>,
    /// A key file to read.
    pub key_file: Option<PathBuf>,
}

impl KeyChoice {
    /// `FLUXO_CONNECTIONS_KEY` from the process environment, and `key_file` (the
    /// `--connections-key-file` flag, which clap also fills from `FLUXO_CONNECTIONS_KEY_FILE`).
    /// An empty variable counts as unset.
    pub fn from_env(key_file: Option<PathBuf>) -> Self {
        KeyChoice {
            key: std::env::var(KEY_ENV).ok().filter(|k| !k.trim().is_empty()),
            key_file,
        }
    }
}

/// The key for the store in `data_dir` (see the module doc for the order). A generated key
/// is written to `<data-dir>/connections.key` (0600, atomically) and logged as a warning that
/// says where it sits and how to move it. Errors ([`ConnectionError::Unavailable`]): both a
/// key and a key file given; a key or key file that is not a key (the message says why,
/// never the text); an unreadable key file; `connections.enc` exists but no key was given and
/// `connections.key` is missing (nothing is generated then); the key file cannot be written.
pub fn resolve(
    choice: &KeyChoice,
    data_dir: &Path,
) -> Result<(ConnectionKey, KeySource), ConnectionError> {
    let bad = |m: String| ConnectionError::Unavailable(m);
    match (&choice.key, &choice.key_file) {
        (Some(_), Some(path)) => {
            return Err(bad(format!(
                "both {KEY_ENV} and a key file ({}) were given for the connections store: give \
                 one",
                path.display()
            )))
        }
        (Some(text), None) => {
            let key = ConnectionKey::parse(text)
                .map_err(|why| bad(format!("{KEY_ENV} is not a connections key: {why}")))?;
            return Ok((key, KeySource::Env));
        }
        (None, Some(path)) => {
            let key = read_key_file(path, "--connections-key-file")?;
            return Ok((key, KeySource::GivenFile(path.clone())));
        }
        (None, None) => {}
    }
    let path = data_dir.join(KEY_FILE);
    if path.exists() {
        crate::secrets::secure_file(&path)
            .map_err(|e| bad(format!("cannot make {} owner-only: {e}", path.display())))?;
        let key = read_key_file(&path, "the data dir's key file")?;
        return Ok((key, KeySource::DataDirFile(path)));
    }
    let store = data_dir.join(super::file::FILE);
    if store.exists() {
        return Err(bad(format!(
            "{} exists but no key was given and {} is missing: give the key it was written \
             with ({KEY_ENV}, --connections-key-file or {KEY_FILE_ENV}), or put its key file \
             back",
            store.display(),
            path.display()
        )));
    }
    let key = ConnectionKey::generate();
    write_key_file(data_dir, &path, &key)?;
    tracing::warn!(
        path = %path.display(),
        key_id = %key.id_hex(),
        "generated the connections key in {} (mode 0600). It sits next to the encrypted \
         connections it protects, so anyone who can read this data dir can read them: move it \
         out of the data dir (keep a copy: connections cannot be read without it) and give it \
         with --connections-key-file <path> or {KEY_FILE_ENV}, or its contents as {KEY_ENV}",
        path.display()
    );
    Ok((key, KeySource::Generated(path)))
}

/// An OS keyring (the desktop app's: the Secret Service on Linux, the macOS Keychain, the
/// Windows Credential Manager) reduced to what [`resolve_with_keyring`] needs, so that the
/// order it decides is testable without one. Errors are the keyring's own words ("no Secret
/// Service", "locked", "denied"), never a secret.
pub trait Keyring {
    /// The secret `entry` holds; `Ok(None)` when there is no such entry.
    fn get(&self, entry: &KeyringEntry) -> Result<Option<String>, String>;
    /// Store `secret` as `entry`'s (created or replaced).
    fn set(&self, entry: &KeyringEntry, secret: &str) -> Result<(), String>;
    /// Remove `entry` (none is not an error).
    fn delete(&self, entry: &KeyringEntry) -> Result<(), String>;
}

/// Where in the keyring the key is kept: its service and user (the desktop's: the app
/// identifier and `connections-key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyringEntry {
    pub service: String,
    pub user: String,
}

/// The keyring entry's user name of the connections key.
pub const KEYRING_USER: &str = "connections-key";

impl KeyringEntry {
    /// The entry `user` of `service`.
    pub fn new(service: impl Into<String>, user: impl Into<String>) -> Self {
        KeyringEntry {
            service: service.into(),
            user: user.into(),
        }
    }

    /// [`KeySource::Keyring`] of this entry.
    pub fn source(&self) -> KeySource {
        KeySource::Keyring {
            service: self.service.clone(),
            user: self.user.clone(),
        }
    }

    fn fallback(&self, path: &Path, generated: bool, why: &str) -> KeySource {
        KeySource::KeyringFallback {
            path: path.to_path_buf(),
            generated,
            service: self.service.clone(),
            user: self.user.clone(),
            why: why.to_string(),
        }
    }
}

impl fmt::Display for KeyringEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the OS keyring entry (service {}, user {})",
            self.service, self.user
        )
    }
}

/// The desktop app's key for the store in `data_dir`, kept in `entry` of `keyring`. In order:
/// 1. a key or key file in `choice` (`FLUXO_CONNECTIONS_KEY`, `FLUXO_CONNECTIONS_KEY_FILE`:
///    tests and CI), as [`resolve`];
/// 2. the keyring entry. When `<data-dir>/connections.key` is there too: the same key (a
///    move that stopped half-way) deletes the file; another key is a conflict that deletes
///    nothing: the keyring's key is used when `connections.enc` was written with it, else
///    the file's ([`KeySource::KeyringFallback`], with a warning naming both key ids);
/// 3. no entry, but `<data-dir>/connections.key` (from before the keyring, or from a start
///    without one): its key is moved into the keyring, and the file is deleted only once the
///    key read back from the keyring is the same;
/// 4. neither, and no `connections.enc`: a new key, stored in the keyring (and read back);
/// 5. neither, but `connections.enc` exists: an error naming the keyring entry and the file;
///    nothing is generated, nothing written.
///
/// When the keyring cannot be used (no Secret Service, as under Xvfb or in CI; locked;
/// denied; a key stored but not read back the same), the key lives in
/// `<data-dir>/connections.key` as [`resolve`] keeps it (read, or generated when there is no
/// `connections.enc`), logged as a warning saying why, and the source says so
/// ([`KeySource::KeyringFallback`]); a later start with a keyring moves it there (3).
///
/// Errors ([`ConnectionError::Unavailable`]): those of [`resolve`]; a keyring entry that
/// holds no key (left as it is); (5).
pub fn resolve_with_keyring(
    choice: &KeyChoice,
    data_dir: &Path,
    keyring: &dyn Keyring,
    entry: &KeyringEntry,
) -> Result<(ConnectionKey, KeySource), ConnectionError> {
    let bad = |m: String| ConnectionError::Unavailable(m);
    if choice.key.is_some() || choice.key_file.is_some() {
        return resolve(choice, data_dir);
    }
    let path = data_dir.join(KEY_FILE);
    let store = data_dir.join(super::file::FILE);
    let stored = match keyring.get(entry) {
        Ok(stored) => stored,
        Err(why) => {
            let why = format!("the keyring is unavailable: {why}");
            return keyring_fallback(data_dir, &path, &store, entry, &why);
        }
    };
    match stored {
        Some(text) => {
            let key = ConnectionKey::parse(&text).map_err(|why| {
                bad(format!(
                    "{entry} does not hold a connections key: {why}. It was left as it is: \
                     remove it (the system's password manager) to store a new key, or give \
                     the key {} was written with as {KEY_ENV}",
                    store.display()
                ))
            })?;
            if !path.exists() {
                return Ok((key, entry.source()));
            }
            let file_key = read_key_file(&path, "the data dir's key file")?;
            if file_key == key {
                // A move into the keyring that stopped before the file was deleted.
                remove_moved_file(&path, entry);
                return Ok((key, entry.source()));
            }
            let conflict = format!(
                "{entry} holds key {} and {} holds key {}",
                key.id_hex(),
                path.display(),
                file_key.id_hex()
            );
            if store_key_id(&store).as_deref() == Some(key.id_hex().as_str()) {
                tracing::warn!(
                    "{conflict}; {} was written with the keyring's, which is used. {} was \
                     left as it is: delete it once you know no copy of the connections needs \
                     it",
                    store.display(),
                    path.display()
                );
                return Ok((key, entry.source()));
            }
            let why = format!("{conflict}; the file's is used and both were left as they are");
            tracing::warn!(
                "{why}: {} was not written with the keyring's key",
                store.display()
            );
            Ok((file_key, entry.fallback(&path, false, &why)))
        }
        None if path.exists() => {
            crate::secrets::secure_file(&path)
                .map_err(|e| bad(format!("cannot make {} owner-only: {e}", path.display())))?;
            let key = read_key_file(&path, "the data dir's key file")?;
            match store_in_keyring(keyring, entry, &key) {
                Ok(()) => {
                    tracing::info!(
                        key_id = %key.id_hex(),
                        "moved the connections key from {} into {entry}",
                        path.display()
                    );
                    remove_moved_file(&path, entry);
                    Ok((key, entry.source()))
                }
                Err(why) => {
                    tracing::warn!(
                        "the connections key stays in {}: it could not be moved into {entry}: \
                         {why}",
                        path.display()
                    );
                    Ok((key, entry.fallback(&path, false, &why)))
                }
            }
        }
        None if store.exists() => Err(bad(format!(
            "{} exists but {entry} holds no key and {} is missing: give the key it was written \
             with ({KEY_ENV}), or put its key file back. The file was left as it is.",
            store.display(),
            path.display()
        ))),
        None => {
            let key = ConnectionKey::generate();
            match store_in_keyring(keyring, entry, &key) {
                Ok(()) => {
                    tracing::info!(
                        key_id = %key.id_hex(),
                        "generated the connections key in {entry}"
                    );
                    Ok((key, entry.source()))
                }
                Err(why) => {
                    write_key_file(data_dir, &path, &key)?;
                    warn_file_key(&path, entry, &why);
                    Ok((key, entry.fallback(&path, true, &why)))
                }
            }
        }
    }
}

/// The keyring could not be read (`why`): the data dir's key file, as [`resolve`] keeps it,
/// saying why; an error naming both places when `connections.enc` has no key.
fn keyring_fallback(
    data_dir: &Path,
    path: &Path,
    store: &Path,
    entry: &KeyringEntry,
    why: &str,
) -> Result<(ConnectionKey, KeySource), ConnectionError> {
    if !path.exists() && store.exists() {
        return Err(ConnectionError::Unavailable(format!(
            "{} exists but {entry} cannot be read ({why}) and {} is missing: unlock the \
             keyring (or start the desktop's Secret Service) and start again, or give the key \
             it was written with as {KEY_ENV}. The file was left as it is.",
            store.display(),
            path.display()
        )));
    }
    let (key, source) = resolve(&KeyChoice::default(), data_dir)?;
    let generated = matches!(source, KeySource::Generated(_));
    if generated {
        // `resolve` logged where the new key file is; say why it is not in the keyring.
        tracing::warn!("the connections key is not in {entry}: {why}");
    } else {
        warn_file_key(path, entry, why);
    }
    Ok((key, entry.fallback(path, generated, why)))
}

fn warn_file_key(path: &Path, entry: &KeyringEntry, why: &str) {
    tracing::warn!(
        path = %path.display(),
        "the connections key is kept in {} (mode 0600, next to the connections it protects), \
         not in {entry}: {why}. A start with the keyring available moves it there",
        path.display()
    );
}

/// Store `key` in `entry` and read it back: `Err(why)` unless the same key comes back (the
/// entry is then removed, best effort, so that nothing half-stored stays).
fn store_in_keyring(
    keyring: &dyn Keyring,
    entry: &KeyringEntry,
    key: &ConnectionKey,
) -> Result<(), String> {
    keyring
        .set(entry, &key.to_hex())
        .map_err(|e| format!("storing the key failed: {e}"))?;
    let why = match keyring.get(entry) {
        Ok(Some(text)) if ConnectionKey::parse(&text).ok().as_ref() == Some(key) => return Ok(()),
        Ok(Some(_)) => "the key read back is not the one stored".to_string(),
        Ok(None) => "the key stored could not be found again".to_string(),
        Err(e) => format!("reading the stored key back failed: {e}"),
    };
    let _ = keyring.delete(entry);
    Err(why)
}

/// Delete the data dir's key file once `entry` holds its key (a warning when that fails: the
/// key is then in both places, which the next start sorts out).
fn remove_moved_file(path: &Path, entry: &KeyringEntry) {
    match std::fs::remove_file(path) {
        Ok(()) => tracing::info!("deleted {}: its key is in {entry}", path.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => tracing::warn!(
            "cannot delete {} ({e}); its key is in {entry}: delete the file",
            path.display()
        ),
    }
}

/// The key id `connections.enc` at `store` names in its header, if it can be read.
fn store_key_id(store: &Path) -> Option<String> {
    std::fs::read(store)
        .ok()
        .and_then(|b| super::file::file_key_id(&b))
}

/// Write `key` to `path` in `data_dir` (0600, atomically; the dir made 0700).
fn write_key_file(
    data_dir: &Path,
    path: &Path,
    key: &ConnectionKey,
) -> Result<(), ConnectionError> {
    crate::secrets::secure_dir(data_dir)
        .and_then(|_| {
            let text = format!("{}\n", key.to_hex());
            crate::workflow::dir::write_atomic_mode(path, text.as_bytes(), 0o600)
        })
        .map_err(|e| {
            ConnectionError::Unavailable(format!(
                "cannot write the connections key {}: {e}",
                path.display()
            ))
        })
}

fn read_key_file(path: &Path, what: &str) -> Result<ConnectionKey, ConnectionError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConnectionError::Unavailable(format!(
            "cannot read the connections key from {} ({what}): {e}",
            path.display()
        ))
    })?;
    let first = text.lines().next().unwrap_or("");
    ConnectionKey::parse(first).map_err(|why| {
        ConnectionError::Unavailable(format!(
            "{} ({what}) does not hold a connections key: {why}",
            path.display()
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse_from_hex_and_base64() {
        let k = ConnectionKey::from_bytes([7u8; 32]);
        assert_eq!(ConnectionKey::parse(&k.to_hex()).unwrap(), k);
        let b64 = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
        assert_eq!(ConnectionKey::parse(&format!(" {b64}\n")).unwrap(), k);
        let url = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([0xfbu8; 32]);
        assert_eq!(
            ConnectionKey::parse(&url).unwrap(),
            ConnectionKey::from_bytes([0xfb; 32])
        );
        let short = base64::engine::general_purpose::STANDARD.encode([1u8; 16]);
        let e = ConnectionKey::parse(&short).unwrap_err();
        assert!(e.contains("16 bytes"), "{e}");
        let e = ConnectionKey::parse("not a key!").unwrap_err();
        assert!(
            e.contains("neither 64 hex") && !e.contains("not a key!"),
            "{e}"
        );
        assert_eq!(k.id_hex().len(), 16);
        assert_eq!(format!("{k:?}"), format!("ConnectionKey({})", k.id_hex()));
    }

    #[cfg(unix)]
    #[test]
    fn a_key_is_generated_once_and_only_without_a_store() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let none = KeyChoice::default();
        let (k1, s1) = resolve(&none, t.path()).unwrap();
        let path = t.path().join(KEY_FILE);
        assert_eq!(s1, KeySource::Generated(path.clone()));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let (k2, s2) = resolve(&none, t.path()).unwrap();
        assert_eq!((k1, s2), (k2, KeySource::DataDirFile(path.clone())));
        // The store exists, its key file is gone: nothing is generated.
        std::fs::write(t.path().join(super::super::file::FILE), b"x").unwrap();
        std::fs::remove_file(&path).unwrap();
        let e = resolve(&none, t.path()).unwrap_err().to_string();
        assert!(e.contains("no key was given") && e.contains(KEY_ENV), "{e}");
        assert!(!path.exists());
        // Both given: refused.
        let both = KeyChoice {
            key: Some("x".into()),
            key_file: Some(path.clone()),
        };
        assert!(resolve(&both, t.path())
            .unwrap_err()
            .to_string()
            .contains("give one"));
    }

    /// A keyring in memory: `down` makes every call fail with that reason (no Secret
    /// Service); `drops_writes` accepts `set` but keeps nothing.
    #[derive(Default)]
    struct FakeKeyring {
        entries: std::sync::Mutex<std::collections::BTreeMap<(String, String), String>>,
        down: Option<String>,
        drops_writes: bool,
    }

    impl FakeKeyring {
        fn down(why: &str) -> Self {
            FakeKeyring {
                down: Some(why.into()),
                ..Default::default()
            }
        }
        fn held(&self, e: &KeyringEntry) -> Option<String> {
            let k = (e.service.clone(), e.user.clone());
            self.entries.lock().unwrap().get(&k).cloned()
        }
        fn put(&self, e: &KeyringEntry, v: &str) {
            let k = (e.service.clone(), e.user.clone());
            self.entries.lock().unwrap().insert(k, v.into());
        }
    }

    impl Keyring for FakeKeyring {
        fn get(&self, e: &KeyringEntry) -> Result<Option<String>, String> {
            match &self.down {
                Some(why) => Err(why.clone()),
                None => Ok(self.held(e)),
            }
        }
        fn set(&self, e: &KeyringEntry, secret: &str) -> Result<(), String> {
            if let Some(why) = &self.down {
                return Err(why.clone());
            }
            if !self.drops_writes {
                self.put(e, secret);
            }
            Ok(())
        }
        fn delete(&self, e: &KeyringEntry) -> Result<(), String> {
            let k = (e.service.clone(), e.user.clone());
            self.entries.lock().unwrap().remove(&k);
            Ok(())
        }
    }

    fn entry() -> KeyringEntry {
        KeyringEntry::new("dev.fluxo.test", KEYRING_USER)
    }

    /// Write an (empty) `connections.enc` sealed with `key` in `dir`.
    fn write_store(dir: &Path, key: &ConnectionKey) -> PathBuf {
        let path = dir.join(super::super::file::FILE);
        std::fs::write(&path, super::super::file::seal(key, &[])).unwrap();
        path
    }

    fn opens(dir: &Path, key: ConnectionKey, source: KeySource) -> Result<(), String> {
        super::super::file::FileConnections::open(dir.join(super::super::file::FILE), key, source)
            .map(drop)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_desktop_generates_its_key_in_the_keyring_once() {
        let t = tempfile::tempdir().unwrap();
        let ring = FakeKeyring::default();
        let none = KeyChoice::default();
        let (k1, s1) = resolve_with_keyring(&none, t.path(), &ring, &entry()).unwrap();
        assert_eq!(s1, entry().source());
        assert_eq!(ring.held(&entry()), Some(k1.to_hex()));
        assert!(!t.path().join(KEY_FILE).exists(), "no key file");
        assert_eq!(
            s1.to_string(),
            "the key in the OS keyring (service dev.fluxo.test, user connections-key)"
        );
        write_store(t.path(), &k1);
        let (k2, s2) = resolve_with_keyring(&none, t.path(), &ring, &entry()).unwrap();
        assert_eq!((&k2, &s2), (&k1, &entry().source()));
        opens(t.path(), k2, s2).unwrap();
        // The environment still wins (tests, CI).
        let env = KeyChoice {
            key: Some(ConnectionKey::from_bytes([3; 32]).to_hex()),
            key_file: None,
        };
        let (k3, s3) = resolve_with_keyring(&env, t.path(), &ring, &entry()).unwrap();
        assert_eq!(
            (k3, s3),
            (ConnectionKey::from_bytes([3; 32]), KeySource::Env)
        );
    }

    #[test]
    fn a_legacy_key_file_moves_into_the_keyring() {
        let t = tempfile::tempdir().unwrap();
        let (legacy, _) = resolve(&KeyChoice::default(), t.path()).unwrap();
        let store = write_store(t.path(), &legacy);
        let before = std::fs::read(&store).unwrap();
        let ring = FakeKeyring::default();
        let (k, s) =
            resolve_with_keyring(&KeyChoice::default(), t.path(), &ring, &entry()).unwrap();
        assert_eq!((&k, &s), (&legacy, &entry().source()));
        assert_eq!(ring.held(&entry()), Some(legacy.to_hex()));
        assert!(!t.path().join(KEY_FILE).exists(), "the file is deleted");
        assert_eq!(
            std::fs::read(&store).unwrap(),
            before,
            "the store is untouched"
        );
        opens(t.path(), k, s).unwrap();
        // A move that stopped before the delete: the same key in both places.
        std::fs::write(t.path().join(KEY_FILE), format!("{}\n", legacy.to_hex())).unwrap();
        let (k, s) =
            resolve_with_keyring(&KeyChoice::default(), t.path(), &ring, &entry()).unwrap();
        assert_eq!((k, s), (legacy, entry().source()));
        assert!(!t.path().join(KEY_FILE).exists());
    }

    #[test]
    fn a_keyring_that_does_not_keep_the_key_leaves_it_in_the_file() {
        let t = tempfile::tempdir().unwrap();
        let ring = FakeKeyring {
            drops_writes: true,
            ..Default::default()
        };
        // First start: generated into the file (the same key the keyring was given).
        let (k, s) =
            resolve_with_keyring(&KeyChoice::default(), t.path(), &ring, &entry()).unwrap();
        assert!(
            matches!(&s, KeySource::KeyringFallback { generated: true, why, .. }
                if why.contains("could not be found again")),
            "{s:?}"
        );
        assert_eq!(read_key_file(&t.path().join(KEY_FILE), "t").unwrap(), k);
        // A legacy file is not deleted when the keyring does not give its key back.
        let (k2, s2) =
            resolve_with_keyring(&KeyChoice::default(), t.path(), &ring, &entry()).unwrap();
        assert_eq!(k2, k);
        assert!(matches!(
            s2,
            KeySource::KeyringFallback {
                generated: false,
                ..
            }
        ));
        assert!(t.path().join(KEY_FILE).exists());
    }

    #[test]
    fn an_unavailable_keyring_falls_back_to_the_key_file_and_says_why() {
        let t = tempfile::tempdir().unwrap();
        let down = FakeKeyring::down("org.freedesktop.DBus.Error.ServiceUnknown");
        let (k1, s1) =
            resolve_with_keyring(&KeyChoice::default(), t.path(), &down, &entry()).unwrap();
        let path = t.path().join(KEY_FILE);
        assert_eq!(
            s1,
            KeySource::KeyringFallback {
                path: path.clone(),
                generated: true,
                service: "dev.fluxo.test".into(),
                user: KEYRING_USER.into(),
                why: "the keyring is unavailable: org.freedesktop.DBus.Error.ServiceUnknown".into(),
            }
        );
        let text = s1.to_string();
        assert!(
            text.contains(&path.display().to_string())
                && text.contains("dev.fluxo.test/connections-key")
                && text.contains("ServiceUnknown"),
            "{text}"
        );
        write_store(t.path(), &k1);
        // Still down: the file is read.
        let (k2, s2) =
            resolve_with_keyring(&KeyChoice::default(), t.path(), &down, &entry()).unwrap();
        assert_eq!(k2, k1);
        assert!(matches!(
            &s2,
            KeySource::KeyringFallback {
                generated: false,
                ..
            }
        ));
        opens(t.path(), k2, s2).unwrap();
        // The keyring is back: the key moves there.
        let up = FakeKeyring::default();
        let (k3, s3) =
            resolve_with_keyring(&KeyChoice::default(), t.path(), &up, &entry()).unwrap();
        assert_eq!((&k3, &s3), (&k1, &entry().source()));
        assert!(!path.exists());
        opens(t.path(), k3, s3).unwrap();
    }

    #[test]
    fn a_store_without_its_key_anywhere_is_refused_and_left_alone() {
        let t = tempfile::tempdir().unwrap();
        let store = write_store(t.path(), &ConnectionKey::from_bytes([9; 32]));
        let before = std::fs::read(&store).unwrap();
        let path = t.path().join(KEY_FILE);
        let ring = FakeKeyring::default();
        let e = resolve_with_keyring(&KeyChoice::default(), t.path(), &ring, &entry())
            .unwrap_err()
            .to_string();
        for part in [
            store.display().to_string(),
            path.display().to_string(),
            entry().to_string(),
            KEY_ENV.to_string(),
            "left as it is".to_string(),
        ] {
            assert!(e.contains(&part), "{part}: {e}");
        }
        assert_eq!(ring.held(&entry()), None, "nothing generated");
        assert!(!path.exists());
        // The same with the keyring down, which the error names with its reason.
        let down = FakeKeyring::down("the collection is locked");
        let e = resolve_with_keyring(&KeyChoice::default(), t.path(), &down, &entry())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the collection is locked")
                && e.contains(&entry().to_string())
                && e.contains(&path.display().to_string()),
            "{e}"
        );
        assert!(!path.exists());
        assert_eq!(std::fs::read(&store).unwrap(), before);
        // A keyring entry that is not a key is an error too; it stays as it was.
        ring.put(&entry(), "not a key");
        let e = resolve_with_keyring(&KeyChoice::default(), t.path(), &ring, &entry())
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not hold a connections key"), "{e}");
        assert_eq!(ring.held(&entry()).as_deref(), Some("not a key"));
    }

    #[test]
    fn another_key_in_the_keyring_than_in_the_file_deletes_nothing() {
        let t = tempfile::tempdir().unwrap();
        let (ring_key, file_key) = (
            ConnectionKey::from_bytes([1; 32]),
            ConnectionKey::from_bytes([2; 32]),
        );
        let ring = FakeKeyring::default();
        ring.put(&entry(), &ring_key.to_hex());
        let path = t.path().join(KEY_FILE);
        std::fs::write(&path, format!("{}\n", file_key.to_hex())).unwrap();
        // The store was written with the file's key: it is used.
        write_store(t.path(), &file_key);
        let (k, s) =
            resolve_with_keyring(&KeyChoice::default(), t.path(), &ring, &entry()).unwrap();
        assert_eq!(k, file_key);
        assert!(
            matches!(&s, KeySource::KeyringFallback { why, .. }
                if why.contains(&ring_key.id_hex()) && why.contains(&file_key.id_hex())),
            "{s:?}"
        );
        opens(t.path(), k, s).unwrap();
        // … with the keyring's: that one.
        write_store(t.path(), &ring_key);
        let (k, s) =
            resolve_with_keyring(&KeyChoice::default(), t.path(), &ring, &entry()).unwrap();
        assert_eq!((&k, &s), (&ring_key, &entry().source()));
        opens(t.path(), k, s).unwrap();
        assert!(path.exists(), "the file is left");
        assert_eq!(ring.held(&entry()), Some(ring_key.to_hex()));
    }
}
