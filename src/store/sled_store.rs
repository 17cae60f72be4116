//! sled backend (work in progress on this branch; the in-memory backend is complete).

use std::path::PathBuf;

use super::{StoreError, StoreResult};

/// How to open a [`SledStore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SledConfig {
    /// Directory of the database.
    pub path: PathBuf,
    /// sled's page cache, in bytes (sled's own default of 1 GiB is far too much here).
    pub cache_capacity_bytes: u64,
    /// Background flush period in milliseconds; `None` = only explicit [`super::Store::flush`].
    pub flush_every_ms: Option<u64>,
}

impl SledConfig {
    /// Defaults: 64 MiB cache, background flush every 500 ms.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        SledConfig {
            path: path.into(),
            cache_capacity_bytes: 64 * 1024 * 1024,
            flush_every_ms: Some(500),
        }
    }
}

/// The sled-backed store.
pub struct SledStore {
    #[allow(dead_code)]
    db: sled::Db,
}

impl SledStore {
    /// Open (or create) the database.
    pub fn open(config: &SledConfig) -> StoreResult<Self> {
        let db = sled::Config::new()
            .path(&config.path)
            .cache_capacity(config.cache_capacity_bytes)
            .flush_every_ms(config.flush_every_ms)
            .open()
            .map_err(|e| StoreError::Backend(e.to_string()))?;
        Ok(SledStore { db })
    }
}
