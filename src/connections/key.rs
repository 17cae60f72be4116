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
//! The desktop app will keep its key in the OS keyring; until then it uses (3). A keyring is
//! one more [`KeySource`] variant and one more branch in the desktop's start-up.

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
    /// Handed over by the embedder (tests, a future OS keyring on the desktop).
    Embedder(String),
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
    crate::secrets::secure_dir(data_dir)
        .and_then(|_| {
            let text = format!("{}\n", key.to_hex());
            crate::workflow::dir::write_atomic_mode(&path, text.as_bytes(), 0o600)
        })
        .map_err(|e| {
            bad(format!(
                "cannot write the connections key {}: {e}",
                path.display()
            ))
        })?;
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
}
