//! The encrypted file store of connections: `<data-dir>/connections.enc`, what `fluxo serve`,
//! the CLI and the desktop app read connections from.
//!
//! # Format (version 1)
//!
//! ```text
//! offset  bytes  what
//!      0      8  magic "FLXCONN\0"
//!      8      1  format version (1)
//!      9      8  key id: the first 8 bytes of SHA-256(key) (super::key::ConnectionKey::id)
//!     17     24  nonce, random for every write
//!     41      …  XChaCha20-Poly1305 ciphertext of the UTF-8 JSON list of connections,
//!                followed by its 16-byte tag
//! ```
//!
//! The 41 header bytes are the associated data: changing any of them (the key id, the
//! version) fails authentication like a change to the ciphertext. The key id lets a wrong key
//! be named before decryption is tried: "connections.enc was encrypted with key 3fa2…; the
//! key from FLUXO_CONNECTIONS_KEY is 8be0…".
//!
//! # Writes
//!
//! Every change writes the whole list with a fresh nonce to a temporary file (0600) renamed
//! over `connections.enc` ([`crate::workflow::dir::write_atomic_mode`]): a reader sees the
//! old file or the new one. A file that cannot be opened (wrong key, damaged, a newer
//! version) is never written over: every operation fails with the reason until it is fixed.
//!
//! # Readers
//!
//! The store keeps the decrypted list in memory and reads the file again when it changed on
//! disk (size, modification time or inode: writers replace the file by a rename), so a connection the CLI added to the data dir of a
//! running server is seen by the server's next read. Writes by two processes at the same
//! instant are not serialised (the last rename wins): change connections through one process
//! at a time (the server's API while it runs).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

use super::key::{ConnectionKey, KeySource, KEY_ENV, KEY_FILE_ENV, KEY_ID_BYTES};
use super::{Connection, ConnectionError, ConnectionStore};

/// The file's name inside the data dir.
pub const FILE: &str = "connections.enc";
/// The first 8 bytes of the file.
pub const MAGIC: &[u8; 8] = b"FLXCONN\0";
/// The format version this code writes and reads.
pub const VERSION: u8 = 1;
/// Bytes of the nonce (XChaCha20).
pub const NONCE_BYTES: usize = 24;
/// Bytes of the header: magic, version, key id, nonce.
pub const HEADER_BYTES: usize = MAGIC.len() + 1 + KEY_ID_BYTES + NONCE_BYTES;
/// Bytes of the authentication tag after the ciphertext.
pub const TAG_BYTES: usize = 16;

/// Why the bytes of a connections file could not be opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatError {
    /// Written with another key: the file's key id and the given key's, hex.
    WrongKey { file_key: String, given_key: String },
    /// Written by a newer format version.
    NewerVersion(u8),
    /// Not a connections file, cut short, or changed since written: why.
    Damaged(String),
}

/// Encrypt `connections` under `key` with a fresh random nonce: the bytes of a version-1
/// file (see the module doc).
pub fn seal(key: &ConnectionKey, connections: &[Connection]) -> Vec<u8> {
    use rand::RngCore;
    let mut nonce = [0u8; NONCE_BYTES];
    rand::rngs::OsRng.fill_bytes(&mut nonce);
    seal_with_nonce(key, connections, &nonce)
}

fn seal_with_nonce(
    key: &ConnectionKey,
    connections: &[Connection],
    nonce: &[u8; NONCE_BYTES],
) -> Vec<u8> {
    let mut header = Vec::with_capacity(HEADER_BYTES);
    header.extend_from_slice(MAGIC);
    header.push(VERSION);
    header.extend_from_slice(&key.id());
    header.extend_from_slice(nonce);
    // Serialising plain strings and maps cannot fail.
    let plain = serde_json::to_vec(connections).unwrap_or_else(|_| b"[]".to_vec());
    let cipher = XChaCha20Poly1305::new(key.bytes().into());
    let sealed = cipher
        .encrypt(
            XNonce::from_slice(nonce),
            Payload {
                msg: &plain,
                aad: &header,
            },
        )
        // Only a message over 256 GiB fails.
        .unwrap_or_default();
    let mut out = header;
    out.extend_from_slice(&sealed);
    out
}

/// The key id a file's header names, hex (`None` when it has no valid header).
pub fn file_key_id(bytes: &[u8]) -> Option<String> {
    (bytes.len() >= HEADER_BYTES && &bytes[..MAGIC.len()] == MAGIC)
        .then(|| hex::encode(&bytes[MAGIC.len() + 1..MAGIC.len() + 1 + KEY_ID_BYTES]))
}

/// Decrypt the bytes of a connections file with `key`: the connections, or why not. The key
/// id is compared before decryption ([`FormatError::WrongKey`]); a header or ciphertext that
/// fails authentication is [`FormatError::Damaged`].
pub fn open(key: &ConnectionKey, bytes: &[u8]) -> Result<Vec<Connection>, FormatError> {
    if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
        return Err(FormatError::Damaged(
            "it does not start with the connections file header".into(),
        ));
    }
    if bytes.len() < HEADER_BYTES + TAG_BYTES {
        return Err(FormatError::Damaged(format!(
            "it is cut short ({} bytes; a file has at least {})",
            bytes.len(),
            HEADER_BYTES + TAG_BYTES
        )));
    }
    let version = bytes[MAGIC.len()];
    if version > VERSION {
        return Err(FormatError::NewerVersion(version));
    }
    if version != VERSION {
        return Err(FormatError::Damaged(format!(
            "its format version {version} is unknown"
        )));
    }
    let (header, sealed) = bytes.split_at(HEADER_BYTES);
    let file_key = &header[MAGIC.len() + 1..MAGIC.len() + 1 + KEY_ID_BYTES];
    if file_key != key.id() {
        return Err(FormatError::WrongKey {
            file_key: hex::encode(file_key),
            given_key: key.id_hex(),
        });
    }
    let nonce = &header[HEADER_BYTES - NONCE_BYTES..];
    let cipher = XChaCha20Poly1305::new(key.bytes().into());
    let plain = cipher
        .decrypt(
            XNonce::from_slice(nonce),
            Payload {
                msg: sealed,
                aad: header,
            },
        )
        .map_err(|_| {
            FormatError::Damaged(format!(
                "it fails authentication with key {} (changed or cut short since it was \
                 written)",
                key.id_hex()
            ))
        })?;
    // serde's messages may quote values (secrets): say where only.
    serde_json::from_slice(&plain).map_err(|e| {
        FormatError::Damaged(format!(
            "its decrypted contents are not a list of connections (line {}, column {})",
            e.line(),
            e.column()
        ))
    })
}

/// The error of a file at `path` that could not be opened with the key from `source`, in
/// words that name the file, both key ids and what to do; it always says the file was left
/// as it is.
pub fn describe(e: &FormatError, path: &Path, source: &KeySource) -> String {
    let p = path.display();
    match e {
        FormatError::WrongKey {
            file_key,
            given_key,
        } => format!(
            "{p} was encrypted with key {file_key}; {source} is {given_key}: give the key it \
             was written with ({KEY_ENV}, --connections-key-file or {KEY_FILE_ENV}). The file \
             was left as it is."
        ),
        FormatError::NewerVersion(v) => format!(
            "{p} has format version {v}, written by a newer Fluxo; this one reads version \
             {VERSION}. The file was left as it is."
        ),
        FormatError::Damaged(why) => format!(
            "{p} is damaged: {why}. The file was left as it is: restore it from a backup, or \
             move it away to start with no connections."
        ),
    }
}

/// When the file was last seen: a change of any of these means another writer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
    inode: u64,
}

fn stamp(path: &Path) -> std::io::Result<Option<Stamp>> {
    match std::fs::metadata(path) {
        Ok(m) => {
            #[cfg(unix)]
            let inode = std::os::unix::fs::MetadataExt::ino(&m);
            #[cfg(not(unix))]
            let inode = 0;
            Ok(Some(Stamp {
                len: m.len(),
                modified: m.modified().ok(),
                inode,
            }))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

struct Loaded {
    /// The file as last read or written (`None`: there was none).
    stamp: Option<Stamp>,
    connections: BTreeMap<String, Connection>,
}

/// Connections kept encrypted in one file (see the module doc). Safe to share between
/// threads; every operation takes one lock.
pub struct FileConnections {
    path: PathBuf,
    key: ConnectionKey,
    source: KeySource,
    loaded: Mutex<Loaded>,
}

impl std::fmt::Debug for FileConnections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileConnections")
            .field("path", &self.path)
            .field("key_id", &self.key.id_hex())
            .field("source", &self.source)
            .finish()
    }
}

impl FileConnections {
    /// Open the store at `path` with `key` (which came from `source`, named in errors): the
    /// file is read and decrypted now, so a wrong key or a damaged file is known at start. A
    /// missing file is an empty store (created by the first `put`); an existing one is made
    /// 0600 if it was more open. Errors ([`ConnectionError::Unavailable`], see [`describe`]):
    /// encrypted with another key (both key ids named), damaged, a newer format, unreadable.
    /// The file is never written by `open`.
    pub fn open(
        path: impl Into<PathBuf>,
        key: ConnectionKey,
        source: KeySource,
    ) -> Result<Self, ConnectionError> {
        let store = FileConnections {
            path: path.into(),
            key,
            source,
            loaded: Mutex::new(Loaded {
                stamp: None,
                connections: BTreeMap::new(),
            }),
        };
        crate::secrets::secure_file(&store.path).map_err(|e| store.io("read", e))?;
        drop(store.fresh()?);
        Ok(store)
    }

    /// Resolve the key for `data_dir` ([`super::key::resolve`]: `FLUXO_CONNECTIONS_KEY`, a key
    /// file, else `<data-dir>/connections.key`, generated on first use) and open
    /// `<data-dir>/connections.enc` with it. Errors: those of both.
    pub fn open_in(
        data_dir: &Path,
        choice: &super::key::KeyChoice,
    ) -> Result<Self, ConnectionError> {
        let (key, source) = super::key::resolve(choice, data_dir)?;
        Self::open(data_dir.join(FILE), key, source)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The id of the key in use (16 hex characters).
    pub fn key_id(&self) -> String {
        self.key.id_hex()
    }

    /// Where the key in use came from.
    pub fn key_source(&self) -> &KeySource {
        &self.source
    }

    fn io(&self, what: &str, e: std::io::Error) -> ConnectionError {
        ConnectionError::Unavailable(format!("cannot {what} {}: {e}", self.path.display()))
    }

    /// The loaded list, read again first when the file changed on disk. On an error the
    /// list in memory is left as it was, and the caller fails (nothing is written).
    fn fresh(&self) -> Result<MutexGuard<'_, Loaded>, ConnectionError> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        let now = stamp(&self.path).map_err(|e| self.io("read", e))?;
        if now == loaded.stamp {
            return Ok(loaded);
        }
        let connections = match now {
            None => BTreeMap::new(),
            Some(_) => {
                let bytes = match std::fs::read(&self.path) {
                    Ok(b) => b,
                    Err(e) => return Err(self.io("read", e)),
                };
                open(&self.key, &bytes)
                    .map_err(|e| {
                        ConnectionError::Unavailable(describe(&e, &self.path, &self.source))
                    })?
                    .into_iter()
                    .map(|c| (c.id.clone(), c))
                    .collect()
            }
        };
        // Stamped before the read: a write during it is read again next time.
        loaded.stamp = now;
        loaded.connections = connections;
        Ok(loaded)
    }

    /// Write `connections` as the whole file, then make them the loaded list.
    fn write(
        &self,
        loaded: &mut Loaded,
        connections: BTreeMap<String, Connection>,
    ) -> Result<(), ConnectionError> {
        let list: Vec<Connection> = connections.values().cloned().collect();
        let bytes = seal(&self.key, &list);
        crate::workflow::dir::write_atomic_mode(&self.path, &bytes, 0o600)
            .map_err(|e| self.io("write", e))?;
        loaded.stamp = stamp(&self.path).map_err(|e| self.io("read", e))?;
        loaded.connections = connections;
        Ok(())
    }
}

impl ConnectionStore for FileConnections {
    fn get(&self, id: &str) -> Result<Option<Connection>, ConnectionError> {
        Ok(self.fresh()?.connections.get(id).cloned())
    }

    fn list(&self) -> Result<Vec<Connection>, ConnectionError> {
        Ok(self.fresh()?.connections.values().cloned().collect())
    }

    fn put(&self, connection: Connection) -> Result<(), ConnectionError> {
        super::validate(&connection)?;
        let mut loaded = self.fresh()?;
        let mut next = loaded.connections.clone();
        next.insert(connection.id.clone(), connection);
        self.write(&mut loaded, next)
    }

    fn state_key(&self) -> Option<ConnectionKey> {
        Some(self.key.clone())
    }
    fn remove(&self, id: &str) -> Result<bool, ConnectionError> {
        let mut loaded = self.fresh()?;
        if !loaded.connections.contains_key(id) {
            return Ok(false);
        }
        let mut next = loaded.connections.clone();
        next.remove(id);
        self.write(&mut loaded, next)?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connections::Credential;

    fn conn(id: &str, token: &str) -> Connection {
        Connection {
            id: id.into(),
            app: "hubspot".into(),
            name: "HubSpot (sales)".into(),
            credential: Credential::Bearer {
                token: token.into(),
            },
            base_url: Some("http://127.0.0.1:9/api".into()),
            values: [("portal_id".to_string(), "42".to_string())].into(),
        }
    }

    const TOKEN: &str = "pat-na1-0123456789abcdef";

    fn key(b: u8) -> ConnectionKey {
        ConnectionKey::from_bytes([b; 32])
    }

    #[test]
    fn round_trip_and_a_fresh_nonce_per_write() {
        let k = key(1);
        let list = vec![conn("crm", TOKEN), conn("crm-2", "another-token-xyz")];
        let a = seal(&k, &list);
        let b = seal(&k, &list);
        assert_eq!(open(&k, &a).unwrap(), list);
        assert_eq!(open(&k, &b).unwrap(), list);
        assert_eq!(&a[..MAGIC.len()], MAGIC);
        assert_eq!(a[MAGIC.len()], VERSION);
        assert_eq!(file_key_id(&a).unwrap(), k.id_hex());
        assert_ne!(
            a[HEADER_BYTES - NONCE_BYTES..HEADER_BYTES],
            b[HEADER_BYTES - NONCE_BYTES..HEADER_BYTES],
            "each write has its own nonce"
        );
        assert_ne!(a[HEADER_BYTES..], b[HEADER_BYTES..]);
        assert!(
            !a.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()),
            "the token is not in clear"
        );
        assert_eq!(open(&k, &seal(&k, &[])).unwrap(), vec![]);
    }

    #[test]
    fn a_wrong_key_names_both_key_ids() {
        let bytes = seal(&key(1), &[conn("crm", TOKEN)]);
        let e = open(&key(2), &bytes).unwrap_err();
        assert_eq!(
            e,
            FormatError::WrongKey {
                file_key: key(1).id_hex(),
                given_key: key(2).id_hex()
            }
        );
        let msg = describe(&e, Path::new("/d/connections.enc"), &KeySource::Env);
        assert!(
            msg.starts_with(&format!(
                "/d/connections.enc was encrypted with key {}; the key from \
                 FLUXO_CONNECTIONS_KEY is {}: give the key it was written with",
                key(1).id_hex(),
                key(2).id_hex()
            )),
            "{msg}"
        );
    }

    #[test]
    fn any_flipped_byte_is_damage_or_a_wrong_key() {
        let k = key(1);
        let bytes = seal(&k, &[conn("crm", TOKEN)]);
        let key_id = MAGIC.len() + 1..MAGIC.len() + 1 + KEY_ID_BYTES;
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x01;
            match open(&k, &bad) {
                Err(FormatError::WrongKey { .. }) => assert!(key_id.contains(&i), "byte {i}"),
                Err(FormatError::Damaged(why)) => {
                    assert!(!key_id.contains(&i), "byte {i}");
                    if i > MAGIC.len() {
                        assert!(why.contains("fails authentication"), "byte {i}: {why}");
                    }
                }
                Err(FormatError::NewerVersion(v)) => panic!("byte {i}: version {v}"),
                Ok(_) => panic!("byte {i} flipped still opened"),
            }
        }
        let e = open(&k, &bytes[..bytes.len() - 1]).unwrap_err();
        assert!(matches!(e, FormatError::Damaged(ref w) if w.contains("authentication")));
        let e = open(&k, &bytes[..20]).unwrap_err();
        assert!(matches!(e, FormatError::Damaged(ref w) if w.contains("cut short")));
        let msg = describe(&e, Path::new("/d/connections.enc"), &KeySource::Env);
        assert!(msg.starts_with("/d/connections.enc is damaged: "), "{msg}");
        let mut newer = bytes.clone();
        newer[MAGIC.len()] = 2;
        assert_eq!(open(&k, &newer).unwrap_err(), FormatError::NewerVersion(2));
    }

    #[test]
    fn the_store_keeps_connections_across_opens() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join(FILE);
        let s = FileConnections::open(&path, key(1), KeySource::Env).unwrap();
        assert!(s.list().unwrap().is_empty());
        assert!(!path.exists(), "opening writes nothing");
        s.put(conn("crm", TOKEN)).unwrap();
        s.put(conn("other", "second-token-123")).unwrap();
        assert!(s.remove("other").unwrap());
        assert!(!s.remove("other").unwrap());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        let again = FileConnections::open(&path, key(1), KeySource::Env).unwrap();
        assert_eq!(again.list().unwrap(), vec![conn("crm", TOKEN)]);
        assert_eq!(again.get("crm").unwrap(), Some(conn("crm", TOKEN)));
        // Another writer (the CLI) changes the file: the first store reads it again.
        again.put(conn("cli", "cli-added-token-1")).unwrap();
        assert!(s.get("cli").unwrap().is_some());
        let bad = Connection {
            id: "Bad Id".into(),
            ..conn("x", TOKEN)
        };
        assert!(matches!(s.put(bad), Err(ConnectionError::Invalid(_))));
    }

    #[test]
    fn a_file_that_cannot_be_opened_is_never_written() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join(FILE);
        let s = FileConnections::open(&path, key(1), KeySource::Env).unwrap();
        s.put(conn("crm", TOKEN)).unwrap();
        let before = std::fs::read(&path).unwrap();

        let source = KeySource::GivenFile("/k".into());
        let e = FileConnections::open(&path, key(2), source.clone()).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains(&key(1).id_hex()) && msg.contains(&key(2).id_hex()),
            "{msg}"
        );
        assert!(
            msg.contains("the key in /k (--connections-key-file"),
            "{msg}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), before);

        // Damaged under a running store: every operation fails, the file stays as it is.
        let mut damaged = before.clone();
        let last = damaged.len() - 1;
        damaged[last] ^= 0x80;
        // Replaced as writers do (a rename: a new inode), as a restore from a backup would.
        crate::workflow::dir::write_atomic_mode(&path, &damaged, 0o600).unwrap();
        for r in [
            s.put(conn("new", "new-token-123456")).map(|_| ()),
            s.remove("crm").map(|_| ()),
            s.list().map(|_| ()),
        ] {
            let msg = r.unwrap_err().to_string();
            assert!(
                msg.contains(&path.display().to_string()) && msg.contains("is damaged"),
                "{msg}"
            );
        }
        assert_eq!(std::fs::read(&path).unwrap(), damaged);
        let e = FileConnections::open(&path, key(1), KeySource::Env).unwrap_err();
        assert!(e.to_string().contains("is damaged"), "{e}");
        assert_eq!(std::fs::read(&path).unwrap(), damaged);
    }
}
