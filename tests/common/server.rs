//! Helpers for the HTTP server tests: an in-process `fluxo serve` on `127.0.0.1:0` over a
//! store the test picks (in-memory, sled in a temp dir, or sled behind a fault-injecting
//! wrapper) and a [`ManualClock`], a small HTTP client for its routes, and a gated mock
//! destination whose answers the test releases (a "slow" downstream without sleeping).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::{Notify, Semaphore};

use fluxo::clock::{Clock, ManualClock};
use fluxo::run::{RunRecord, RunStatus};
use fluxo::runtime::Engine;
use fluxo::server::{self, RunningServer, ServerOptions};
use fluxo::store::{
    ApiBegin, ApiRecord, ClaimOutcome, IdempotencyStore, InMemoryStore, MemoryEntry, MemoryStore,
    Retention, RunPage, RunQuery, RunStore, SledStore, Store, StoreError, StoreResult,
    WebhookClaim, WriteOptions, WriteResult,
};
use fluxo::workflow::dir::WorkflowDir;

/// The API token every test server uses.
pub const TOKEN: &str = "test-token-0123456789-0123456789abcdef0123456789";

/// The Stripe `invoice.paid` fixture (~6 KB).
pub fn invoice_paid() -> Vec<u8> {
    std::fs::read(fixture("stripe/invoice.paid.json")).expect("invoice.paid fixture")
}

/// Path of a payload fixture.
pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/payloads")
        .join(rel)
}

/// `webhook_trigger` (with `trigger_config`) → `transform` that reads `input.id` when present.
pub fn hook_workflow(id: &str, trigger_config: Value) -> Value {
    json!({
        "id": id,
        "name": id,
        "version": 1,
        "steps": [
            {"id": "hook", "kind": "webhook_trigger", "config": trigger_config},
            {"id": "shape", "kind": "transform",
             "config": {"fields": {"event": "{{ input.id | default('none') }}"}}}
        ],
        "edges": [{"from": "hook", "to": "shape"}]
    })
}

/// `workflow` declaring the secret `name` (its `secrets`).
#[allow(dead_code)]
pub fn declaring(mut workflow: Value, name: &str) -> Value {
    workflow["secrets"] = json!([name]);
    workflow
}

/// `manual_trigger` → `transform` echoing `input.invoice_id` (default `none`).
pub fn api_workflow(id: &str) -> Value {
    json!({
        "id": id,
        "name": id,
        "version": 1,
        "steps": [
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "shape", "kind": "transform",
             "config": {"fields": {"invoice": "{{ input.invoice_id | default('none') }}"}}}
        ],
        "edges": [{"from": "start", "to": "shape"}]
    })
}

/// `manual_trigger` → `http_request` POST to `url` (no retries): a run that takes as long as
/// the destination does.
pub fn slow_api_workflow(id: &str, url: &str) -> Value {
    json!({
        "id": id,
        "name": id,
        "version": 1,
        "steps": [
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "call", "kind": "http_request",
             "config": {"method": "POST", "url": url,
                        "headers": {"Idempotency-Key": "call-{{ run.id }}"},
                        "body": {"invoice": "{{ input.invoice_id | default('none') }}"},
                        "retries": 0, "timeout_s": 30}}
        ],
        "edges": [{"from": "start", "to": "call"}]
    })
}

// ---------------------------------------------------------------------------------------------
// A store that fails on demand
// ---------------------------------------------------------------------------------------------

/// A [`Store`] that delegates to a real [`SledStore`] and fails chosen operations on demand
/// (an injected fault, [`StoreError::Injected`]), changing nothing when it does.
pub struct FaultStore {
    pub inner: Arc<SledStore>,
    /// How many coming `claim_and_enqueue` calls fail.
    pub fail_claims: AtomicUsize,
    /// How many coming `flush` calls fail.
    pub fail_flushes: AtomicUsize,
    /// While set, `put_run` fails (a store that cannot take writes).
    pub fail_put_run: AtomicBool,
    /// How many `claim_and_enqueue` calls were made.
    pub claim_calls: AtomicUsize,
    /// How many `get_claim` calls were made.
    pub get_claim_calls: AtomicUsize,
    /// While set, `flush` waits (a slow disk), at most 10 s.
    pub hold_flushes: AtomicBool,
    /// How many `flush` calls are waiting on `hold_flushes`.
    pub held: AtomicUsize,
}

impl FaultStore {
    pub fn new(inner: Arc<SledStore>) -> Self {
        FaultStore {
            inner,
            fail_claims: AtomicUsize::new(0),
            fail_flushes: AtomicUsize::new(0),
            fail_put_run: AtomicBool::new(false),
            claim_calls: AtomicUsize::new(0),
            get_claim_calls: AtomicUsize::new(0),
            hold_flushes: AtomicBool::new(false),
            held: AtomicUsize::new(0),
        }
    }

    fn take(counter: &AtomicUsize) -> bool {
        counter
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

#[async_trait::async_trait]
impl MemoryStore for FaultStore {
    async fn write(
        &self,
        namespace: &str,
        key: &str,
        value: &Value,
        opts: WriteOptions<'_>,
        now_ms: i64,
    ) -> StoreResult<WriteResult> {
        self.inner.write(namespace, key, value, opts, now_ms).await
    }
    async fn read(
        &self,
        namespace: &str,
        key: &str,
        now_ms: i64,
    ) -> StoreResult<Option<MemoryEntry>> {
        self.inner.read(namespace, key, now_ms).await
    }
    async fn delete(&self, namespace: &str, key: &str, now_ms: i64) -> StoreResult<bool> {
        self.inner.delete(namespace, key, now_ms).await
    }
    async fn list(
        &self,
        namespace: &str,
        prefix: &str,
        after: Option<&str>,
        limit: usize,
        now_ms: i64,
    ) -> StoreResult<Vec<MemoryEntry>> {
        self.inner
            .list(namespace, prefix, after, limit, now_ms)
            .await
    }
    async fn namespaces(&self) -> StoreResult<Vec<String>> {
        self.inner.namespaces().await
    }
    async fn sweep_expired(&self, now_ms: i64, max: usize) -> StoreResult<usize> {
        self.inner.sweep_expired(now_ms, max).await
    }
}

#[async_trait::async_trait]
impl RunStore for FaultStore {
    async fn put_run(&self, run: &RunRecord) -> StoreResult<()> {
        if self.fail_put_run.load(Ordering::SeqCst) {
            return Err(StoreError::Injected("put_run disabled by the test".into()));
        }
        self.inner.put_run(run).await
    }
    async fn get_run(&self, id: &str) -> StoreResult<Option<RunRecord>> {
        self.inner.get_run(id).await
    }
    async fn list_runs(&self, query: &RunQuery) -> StoreResult<RunPage> {
        self.inner.list_runs(query).await
    }
    async fn run_ids_with_status(&self, status: RunStatus) -> StoreResult<Vec<String>> {
        self.inner.run_ids_with_status(status).await
    }
    async fn prune_runs(&self, policy: &Retention, now_ms: i64) -> StoreResult<usize> {
        self.inner.prune_runs(policy, now_ms).await
    }
    async fn count_runs(
        &self,
        q: &fluxo::store::CountQuery,
    ) -> StoreResult<fluxo::store::RunCounts> {
        self.inner.count_runs(q).await
    }
    async fn oldest_run(
        &self,
        filter: &fluxo::store::CountFilter,
        until: i64,
    ) -> StoreResult<Option<i64>> {
        self.inner.oldest_run(filter, until).await
    }
}

#[async_trait::async_trait]
impl IdempotencyStore for FaultStore {
    async fn claim_and_enqueue(
        &self,
        claim: &WebhookClaim,
        run: &RunRecord,
        now_ms: i64,
    ) -> StoreResult<ClaimOutcome> {
        self.claim_calls.fetch_add(1, Ordering::SeqCst);
        if Self::take(&self.fail_claims) {
            return Err(StoreError::Injected(
                "queuing the run failed (injected by the test)".into(),
            ));
        }
        self.inner.claim_and_enqueue(claim, run, now_ms).await
    }
    async fn get_claim(
        &self,
        workflow_id: &str,
        key: &str,
        now_ms: i64,
    ) -> StoreResult<Option<WebhookClaim>> {
        self.get_claim_calls.fetch_add(1, Ordering::SeqCst);
        self.inner.get_claim(workflow_id, key, now_ms).await
    }
    async fn api_begin(&self, record: &ApiRecord, now_ms: i64) -> StoreResult<ApiBegin> {
        self.inner.api_begin(record, now_ms).await
    }
    async fn api_complete(
        &self,
        scope: &str,
        key: &str,
        status: u16,
        body: &str,
    ) -> StoreResult<()> {
        self.inner.api_complete(scope, key, status, body).await
    }
    async fn api_abandon(&self, scope: &str, key: &str) -> StoreResult<()> {
        self.inner.api_abandon(scope, key).await
    }
    async fn release_claim(&self, workflow_id: &str, key: &str, run_id: &str) -> StoreResult<bool> {
        self.inner.release_claim(workflow_id, key, run_id).await
    }
    async fn sweep_idempotency(&self, now_ms: i64, max: usize) -> StoreResult<usize> {
        self.inner.sweep_idempotency(now_ms, max).await
    }
}

#[async_trait::async_trait]
impl Store for FaultStore {
    async fn flush(&self) -> StoreResult<()> {
        if self.hold_flushes.load(Ordering::SeqCst) {
            self.held.fetch_add(1, Ordering::SeqCst);
            for _ in 0..10_000 {
                if !self.hold_flushes.load(Ordering::SeqCst) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            self.held.fetch_sub(1, Ordering::SeqCst);
        }
        if Self::take(&self.fail_flushes) {
            return Err(StoreError::Injected(
                "flush failed (injected by the test)".into(),
            ));
        }
        self.inner.flush().await
    }
}

// ---------------------------------------------------------------------------------------------
// The server under test
// ---------------------------------------------------------------------------------------------

/// The store a [`TestServer`] runs on, and its sled and fault-injecting layers when it has them.
type Backends = (
    Arc<dyn Store>,
    Option<Arc<SledStore>>,
    Option<Arc<FaultStore>>,
);

/// Which store backs a [`TestServer`].
pub enum StoreKind {
    Memory,
    Sled,
    Fault,
}

/// How to start a [`TestServer`].
pub struct Setup {
    workflows: Vec<Value>,
    store: StoreKind,
    options: ServerOptions,
    env: BTreeMap<String, String>,
    data_dir: Option<tempfile::TempDir>,
    workflows_dir: Option<tempfile::TempDir>,
}

impl Setup {
    pub fn new() -> Self {
        Setup {
            workflows: Vec::new(),
            store: StoreKind::Memory,
            options: ServerOptions::default(),
            env: BTreeMap::new(),
            data_dir: None,
            workflows_dir: None,
        }
    }
    pub fn workflow(mut self, wf: Value) -> Self {
        self.workflows.push(wf);
        self
    }
    pub fn store(mut self, kind: StoreKind) -> Self {
        self.store = kind;
        self
    }
    pub fn options(mut self, f: impl FnOnce(&mut ServerOptions)) -> Self {
        f(&mut self.options);
        self
    }
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.insert(name.into(), value.into());
        self
    }
    /// Use (and keep) this data dir for the sled store.
    pub fn data_dir(mut self, dir: tempfile::TempDir) -> Self {
        self.data_dir = Some(dir);
        self
    }

    /// Use (and keep) this workflows folder (e.g. the one a stopped server used).
    pub fn workflows_dir(mut self, dir: tempfile::TempDir) -> Self {
        self.workflows_dir = Some(dir);
        self
    }

    pub async fn start(self) -> TestServer {
        let workflows_dir = self
            .workflows_dir
            .unwrap_or_else(|| tempfile::tempdir().expect("temp workflows dir"));
        for wf in &self.workflows {
            let id = wf["id"].as_str().expect("workflow id");
            std::fs::write(
                workflows_dir.path().join(format!("{id}.json")),
                serde_json::to_string_pretty(wf).unwrap(),
            )
            .unwrap();
        }
        let clock = Arc::new(ManualClock::at_2026());
        let data_dir = self
            .data_dir
            .unwrap_or_else(|| tempfile::tempdir().expect("temp data dir"));
        let (store, sled, fault): Backends = match self.store {
            StoreKind::Memory => (Arc::new(InMemoryStore::new()), None, None),
            StoreKind::Sled => {
                let s = Arc::new(open_sled(data_dir.path()));
                (s.clone(), Some(s), None)
            }
            StoreKind::Fault => {
                let s = Arc::new(open_sled(data_dir.path()));
                let f = Arc::new(FaultStore::new(s.clone()));
                (f.clone(), Some(s), Some(f))
            }
        };
        let engine = Engine::new(store.clone(), clock.clone() as Arc<dyn Clock>);
        let dir = WorkflowDir::load(workflows_dir.path(), engine.registry().clone())
            .expect("load workflows");
        for e in dir.list() {
            assert!(
                e.compiled.is_some(),
                "test workflow `{}` does not validate: {:?}",
                e.id,
                e.problems
            );
        }
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let running = server::start(listener, engine, dir, TOKEN.to_string(), self.options)
            .await
            .expect("server starts");
        if !self.env.is_empty() {
            // The server applies its settings' env at start; set ours through them.
            let mut settings = running.state.settings();
            settings.env = self.env.clone();
            running
                .state
                .set_settings(settings)
                .await
                .expect("settings apply");
        }
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        TestServer {
            url: running.url(),
            running: Some(running),
            clock,
            store,
            sled,
            fault,
            client,
            workflows_dir,
            data_dir,
        }
    }
}

impl Default for Setup {
    fn default() -> Self {
        Self::new()
    }
}

/// Open a sled store in `dir/store` with a small cache.
pub fn open_sled(dir: &Path) -> SledStore {
    let mut config = fluxo::store::SledConfig::new(dir.join("store"));
    config.cache_capacity_bytes = 16 * 1024 * 1024;
    // A server that just stopped in this process may still be dropping its last handle (its
    // background tasks end on their own): wait for sled's file lock, bounded.
    let mut last = None;
    for _ in 0..500 {
        match SledStore::open(&config) {
            Ok(s) => return s,
            Err(e) => last = Some(e),
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("open sled: {last:?}")
}

/// An HTTP answer, read whole.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub text: String,
}

impl Answer {
    /// The body as JSON (panics with the body when it is not).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.text))
    }
    /// A header as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    /// Assert a problem+json answer with this status and code; returns the document.
    pub fn problem(&self, status: u16, code: &str) -> Value {
        assert_eq!(
            self.status.as_u16(),
            status,
            "expected {status} {code}, got {} {}",
            self.status,
            self.text
        );
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json"),
            "problem content type: {}",
            self.text
        );
        let doc = self.json();
        assert_eq!(doc["code"], code, "{}", self.text);
        assert_eq!(doc["status"], status, "{}", self.text);
        assert!(doc["type"].is_string() && doc["title"].is_string() && doc["detail"].is_string());
        doc
    }
}

/// A running in-process server and what a test needs around it.
pub struct TestServer {
    pub url: String,
    running: Option<RunningServer>,
    pub clock: Arc<ManualClock>,
    pub store: Arc<dyn Store>,
    pub sled: Option<Arc<SledStore>>,
    pub fault: Option<Arc<FaultStore>>,
    pub client: reqwest::Client,
    pub workflows_dir: tempfile::TempDir,
    pub data_dir: tempfile::TempDir,
}

impl TestServer {
    /// The running server (state, address).
    pub fn running(&self) -> &RunningServer {
        self.running.as_ref().expect("running")
    }

    /// Stop the server and give back the data dir (to restart on it).
    pub async fn stop(mut self) -> tempfile::TempDir {
        if let Some(r) = self.running.take() {
            r.shutdown().await;
        }
        let TestServer {
            data_dir,
            store,
            sled,
            fault,
            ..
        } = self;
        drop((store, sled, fault));
        data_dir
    }

    /// Stop the server and give back the data dir and the workflows folder (to restart on
    /// both).
    pub async fn stop_keeping_folders(mut self) -> (tempfile::TempDir, tempfile::TempDir) {
        if let Some(r) = self.running.take() {
            r.shutdown().await;
        }
        let TestServer {
            data_dir,
            workflows_dir,
            store,
            sled,
            fault,
            ..
        } = self;
        drop((store, sled, fault));
        (data_dir, workflows_dir)
    }

    /// Send a request; `headers` are appended in order (a name may repeat).
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &[u8])],
        body: Option<Vec<u8>>,
    ) -> Answer {
        let mut req = self.client.request(method, format!("{}{}", self.url, path));
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.append(
                reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_bytes(value).expect("a header value reqwest can send"),
            );
        }
        req = req.headers(map);
        if let Some(b) = body {
            req = req.header("content-type", "application/json").body(b);
        }
        let resp = req.send().await.expect("request reaches the server");
        let status = resp.status();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap_or_default();
        Answer {
            status,
            headers,
            text,
        }
    }

    /// `POST /hooks/{wf}` with an optional `Idempotency-Key`.
    pub async fn hook(&self, wf: &str, key: Option<&str>, body: &[u8]) -> Answer {
        let headers: Vec<(&str, &[u8])> = key
            .map(|k| vec![("idempotency-key", k.as_bytes())])
            .unwrap_or_default();
        self.send(
            Method::POST,
            &format!("/hooks/{wf}"),
            &headers,
            Some(body.to_vec()),
        )
        .await
    }

    /// `POST /hooks/{wf}` with raw headers.
    pub async fn hook_with(&self, wf: &str, headers: &[(&str, &[u8])], body: &[u8]) -> Answer {
        self.send(
            Method::POST,
            &format!("/hooks/{wf}"),
            headers,
            Some(body.to_vec()),
        )
        .await
    }

    /// An authorised API call; `body` is sent as given.
    pub async fn api(
        &self,
        method: Method,
        path: &str,
        extra: &[(&str, &str)],
        body: Option<&str>,
    ) -> Answer {
        let auth = format!("Bearer {TOKEN}");
        let mut headers: Vec<(&str, &[u8])> = vec![("authorization", auth.as_bytes())];
        for (k, v) in extra {
            headers.push((k, v.as_bytes()));
        }
        self.send(
            method,
            &format!("/api/v1{path}"),
            &headers,
            body.map(|b| b.as_bytes().to_vec()),
        )
        .await
    }

    /// `GET /api/v1{path}` answering 200 JSON.
    pub async fn get_json(&self, path: &str) -> Value {
        let a = self.api(Method::GET, path, &[], None).await;
        assert_eq!(a.status, StatusCode::OK, "GET {path}: {}", a.text);
        a.json()
    }

    /// Every run of a workflow with this key, straight from the store.
    pub async fn runs_with_key(&self, wf: &str, key: &str) -> Vec<String> {
        let page = self
            .store
            .list_runs(&RunQuery {
                workflow: Some(wf.into()),
                key: Some(key.into()),
                limit: 500,
                ..Default::default()
            })
            .await
            .expect("list runs");
        page.runs.into_iter().map(|r| r.id).collect()
    }

    /// Every run of a workflow, newest first.
    pub async fn runs_of(&self, wf: &str) -> Vec<String> {
        let page = self
            .store
            .list_runs(&RunQuery {
                workflow: Some(wf.into()),
                limit: 500,
                ..Default::default()
            })
            .await
            .expect("list runs");
        page.runs.into_iter().map(|r| r.id).collect()
    }

    /// Wait (real time, bounded) until the run is final; returns it.
    pub async fn wait_final(&self, run_id: &str) -> RunRecord {
        for _ in 0..1000 {
            if let Some(r) = self.store.get_run(run_id).await.expect("get run") {
                if r.status.is_final() {
                    return r;
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("run {run_id} did not finish in 5 s");
    }

    /// Move the server's clock.
    pub fn advance(&self, d: Duration) {
        self.clock.advance(d);
    }
}

// ---------------------------------------------------------------------------------------------
// A gated mock destination
// ---------------------------------------------------------------------------------------------

/// An HTTP destination that holds every request until the test opens the gate: lets a test
/// keep a run "still running" for exactly as long as it needs, without sleeping.
pub struct GatedMock {
    pub url: String,
    hits: Arc<AtomicUsize>,
    arrived: Arc<Notify>,
    gate: Arc<Semaphore>,
    bodies: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for GatedMock {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl GatedMock {
    pub async fn start() -> GatedMock {
        use axum::routing::any;
        let hits = Arc::new(AtomicUsize::new(0));
        let arrived = Arc::new(Notify::new());
        let gate = Arc::new(Semaphore::new(0));
        let bodies = Arc::new(Mutex::new(Vec::new()));
        let (h, a, g, b) = (hits.clone(), arrived.clone(), gate.clone(), bodies.clone());
        let app = axum::Router::new().fallback(any(move |body: String| {
            let (h, a, g, b) = (h.clone(), a.clone(), g.clone(), b.clone());
            async move {
                h.fetch_add(1, Ordering::SeqCst);
                b.lock().unwrap().push(body);
                a.notify_one();
                let permit = g.acquire().await.expect("gate open");
                permit.forget();
                axum::Json(json!({"ok": true}))
            }
        }));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        GatedMock {
            url,
            hits,
            arrived,
            gate,
            bodies,
            task,
        }
    }
    /// Requests received so far.
    pub fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
    /// Wait (bounded) until a request has arrived.
    pub async fn wait_arrival(&self) {
        tokio::time::timeout(Duration::from_secs(10), self.arrived.notified())
            .await
            .expect("a request reached the mock");
    }
    /// Let `n` held requests answer.
    pub fn release(&self, n: usize) {
        self.gate.add_permits(n);
    }
    /// Bodies received.
    pub fn bodies(&self) -> Vec<String> {
        self.bodies.lock().unwrap().clone()
    }
}
