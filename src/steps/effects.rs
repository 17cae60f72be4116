//! The side effects of a run, chosen once per run by its mode: live effects act; dry effects
//! simulate (SPEC §4). Steps reach Memory, HTTP and waits only through [`Effects`], so a dry
//! run is the same walk with these swapped, not `if dry` checks scattered through the steps.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::children::{NoStarter, RunStarter};
use super::http::{HttpTransport, SimulatedHttp};
use crate::clock::Clock;
use crate::connections::oauth::Tokens;
use crate::connections::pace::Pacer;
use crate::connections::{ConnectionStore, MemConnections};
use crate::run::Mode;
use crate::steps::memory::Scope;
use crate::store::{MemoryEntry, MemoryStore, StoreResult, WriteOptions, WriteResult};

/// Memory, HTTP and waits for one run.
pub struct Effects {
    mode: Mode,
    memory: Arc<dyn MemoryStore>,
    run_memory: Overlay,
    http: Arc<dyn HttpTransport>,
    children: Arc<dyn RunStarter>,
    connections: Arc<dyn ConnectionStore>,
    pacer: Option<Arc<Pacer>>,
    oauth: Option<Arc<Tokens>>,
}

impl Effects {
    /// Refresh OAuth 2 connections' tokens through `tokens` (the engine's, for live runs).
    pub fn with_oauth(mut self, tokens: Arc<Tokens>) -> Self {
        self.oauth = Some(tokens);
        self
    }

    /// The OAuth 2 tokens of connections ([`crate::connections::oauth`]), when this run
    /// refreshes them (live runs of an engine); `None`: the credential's access token is sent
    /// as it is.
    pub fn oauth(&self) -> Option<&Tokens> {
        self.oauth.as_deref()
    }

    /// Set how this run starts child runs (`fan_out`; the engine sets it per mode).
    pub fn with_children(mut self, starter: Arc<dyn RunStarter>) -> Self {
        self.children = starter;
        self
    }

    /// Set where connector steps read their connections (the engine's store).
    pub fn with_connections(mut self, connections: Arc<dyn ConnectionStore>) -> Self {
        self.connections = connections;
        self
    }

    /// Pace connector requests per connection with `pacer` (the engine's, for live runs).
    pub fn with_pacer(mut self, pacer: Arc<Pacer>) -> Self {
        self.pacer = Some(pacer);
        self
    }

    /// The rate limiters of connections ([`crate::connections::pace`]), if requests are paced.
    pub fn pacer(&self) -> Option<&Pacer> {
        self.pacer.as_deref()
    }

    /// The connections connector steps act as ([`crate::connections`]); none by default.
    pub fn connections(&self) -> &dyn ConnectionStore {
        self.connections.as_ref()
    }

    /// How this run starts child runs: live, claim + queued run; dry, a prediction that
    /// writes nothing.
    pub fn children(&self) -> &dyn RunStarter {
        self.children.as_ref()
    }

    /// Live: the real store and the real network; waits really wait.
    pub fn live(store: Arc<dyn MemoryStore>, http: Arc<dyn HttpTransport>) -> Self {
        Effects {
            mode: Mode::Live,
            memory: store,
            run_memory: Overlay::new(None),
            http,
            children: Arc::new(NoStarter),
            connections: Arc::new(MemConnections::default()),
            pacer: None,
            oauth: None,
        }
    }

    /// Dry: Memory through an overlay (reads see the real store plus this run's simulated
    /// writes; nothing is written to the store), HTTP simulated, waits skipped.
    pub fn dry(store: Arc<dyn MemoryStore>) -> Self {
        Effects {
            mode: Mode::Dry,
            memory: Arc::new(Overlay::new(Some(store))),
            run_memory: Overlay::new(None),
            http: Arc::new(SimulatedHttp),
            children: Arc::new(NoStarter),
            connections: Arc::new(MemConnections::default()),
            pacer: None,
            oauth: None,
        }
    }

    /// The run's mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Memory for a scope: the store (or its dry overlay) for `persistent`, this run's own
    /// map for `run`.
    pub fn memory(&self, scope: Scope) -> &dyn MemoryStore {
        match scope {
            Scope::Persistent => self.memory.as_ref(),
            Scope::Run => &self.run_memory,
        }
    }

    /// The HTTP transport.
    pub fn http(&self) -> &dyn HttpTransport {
        self.http.as_ref()
    }

    /// The HTTP transport, shared (for work that must own it: the OAuth 2 refresh).
    pub fn http_shared(&self) -> Arc<dyn HttpTransport> {
        self.http.clone()
    }

    /// Wait before a retry: really (live) or not at all (dry; the planned delay is recorded).
    pub async fn wait(&self, clock: &dyn Clock, d: Duration) {
        if self.mode == Mode::Live {
            clock.sleep(d).await;
        }
    }
}

/// A Memory layer over an optional base store: writes and deletes stay in the layer
/// (`None` in the map = deleted here); reads fall through to the base. Used for dry runs
/// (base = the real store, read only) and `scope: run` keys (no base). The layer's lock is
/// held across the base read, so a no-overwrite write is atomic within the layer.
pub struct Overlay {
    base: Option<Arc<dyn MemoryStore>>,
    layer: tokio::sync::Mutex<Layer>,
}

/// `(namespace, key) -> entry`; `None` = deleted in the layer.
type Layer = BTreeMap<(String, String), Option<MemoryEntry>>;

impl Overlay {
    /// An empty layer over `base`.
    pub fn new(base: Option<Arc<dyn MemoryStore>>) -> Self {
        Overlay {
            base,
            layer: tokio::sync::Mutex::new(BTreeMap::new()),
        }
    }

    async fn lookup(
        &self,
        layer: &Layer,
        ns: &str,
        key: &str,
        now_ms: i64,
    ) -> StoreResult<Option<MemoryEntry>> {
        match layer.get(&(ns.to_string(), key.to_string())) {
            Some(Some(e)) if !e.is_expired(now_ms) => Ok(Some(e.clone())),
            Some(_) => Ok(None),
            None => match &self.base {
                Some(b) => b.read(ns, key, now_ms).await,
                None => Ok(None),
            },
        }
    }
}

#[async_trait::async_trait]
impl MemoryStore for Overlay {
    async fn write(
        &self,
        ns: &str,
        key: &str,
        value: &Value,
        opts: WriteOptions<'_>,
        now_ms: i64,
    ) -> StoreResult<WriteResult> {
        let mut layer = self.layer.lock().await;
        if !opts.allow_overwrite {
            if let Some(existing) = self.lookup(&layer, ns, key, now_ms).await? {
                return Ok(WriteResult::Exists { existing });
            }
        }
        let expires_at = opts.ttl_ms.map(|t| now_ms.saturating_add(t as i64));
        layer.insert(
            (ns.to_string(), key.to_string()),
            Some(MemoryEntry {
                namespace: ns.to_string(),
                key: key.to_string(),
                value: value.clone(),
                written_at: now_ms,
                expires_at,
                owner: opts.owner.cloned(),
            }),
        );
        Ok(WriteResult::Written { expires_at })
    }

    async fn read(&self, ns: &str, key: &str, now_ms: i64) -> StoreResult<Option<MemoryEntry>> {
        let layer = self.layer.lock().await;
        self.lookup(&layer, ns, key, now_ms).await
    }

    async fn delete(&self, ns: &str, key: &str, now_ms: i64) -> StoreResult<bool> {
        let mut layer = self.layer.lock().await;
        let existed = self.lookup(&layer, ns, key, now_ms).await?.is_some();
        layer.insert((ns.to_string(), key.to_string()), None);
        Ok(existed)
    }

    async fn list(
        &self,
        ns: &str,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
        now_ms: i64,
    ) -> StoreResult<Vec<MemoryEntry>> {
        let layer = self.layer.lock().await;
        let mut merged: BTreeMap<String, MemoryEntry> = match &self.base {
            Some(b) => b
                .list(ns, prefix, after, usize::MAX, now_ms)
                .await?
                .into_iter()
                .map(|e| (e.key.clone(), e))
                .collect(),
            None => BTreeMap::new(),
        };
        for ((n, k), e) in layer.iter() {
            if n != ns || !k.starts_with(prefix) || after.is_some_and(|a| k.as_str() <= a) {
                continue;
            }
            match e {
                Some(e) if !e.is_expired(now_ms) => {
                    merged.insert(k.clone(), e.clone());
                }
                _ => {
                    merged.remove(k);
                }
            }
        }
        Ok(merged.into_values().take(limit).collect())
    }

    async fn namespaces(&self) -> StoreResult<Vec<String>> {
        let layer = self.layer.lock().await;
        let mut out: Vec<String> = match &self.base {
            Some(b) => b.namespaces().await?,
            None => Vec::new(),
        };
        out.extend(layer.keys().map(|(n, _)| n.clone()));
        out.sort();
        out.dedup();
        Ok(out)
    }

    async fn sweep_expired(&self, _now_ms: i64, _max: usize) -> StoreResult<usize> {
        Ok(0)
    }
}
