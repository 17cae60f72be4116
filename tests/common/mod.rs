//! Shared helpers for the integration tests: a scriptable mock HTTP server on a real local
//! socket, and an engine harness on an in-memory store with a manual clock.
//!
//! The mock is a raw `tokio::net::TcpListener` on `127.0.0.1:0` (no framework in between, so
//! it can misbehave on purpose). Each connection carries exactly one request: every answer says
//! `Connection: close`, so a request count is a connection count and the client's pool never
//! hides or repeats a request. Scripted actions:
//! * [`Action::Respond`]: an answer with a status, headers and a body;
//! * [`Action::Reset`]: read the request, then drop the socket with `SO_LINGER 0` (an RST,
//!   "connection reset by peer") without answering;
//! * [`Action::Hang`]: read the request and never answer, holding the socket until the client
//!   gives up (its attempt timeout) or 10 s pass.
//!
//! Actions are taken from a queue in order; once it is empty the fallback action answers.
#![allow(dead_code)]

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use fluxo::clock::{Clock, ManualClock};
use fluxo::run::{Mode, RunRecord, StepRecord, Trigger};
use fluxo::runtime::{Engine, RunRequest};
use fluxo::steps::Registry;
use fluxo::store::{InMemoryStore, MemoryEntry, MemoryStore};
use fluxo::workflow::{self, Compiled};

/// A real `fluxo serve` child process (kill tests, logs, the binary's flags).
pub mod child;
/// A throwaway PostgreSQL server, one database per test (`tests/store_conformance.rs`).
pub mod pg;
/// The in-process HTTP server harness (`tests/server_*.rs`).
pub mod server;

// ---------------------------------------------------------------------------------------------
// Mock HTTP server
// ---------------------------------------------------------------------------------------------

/// What the mock does with one request.
#[derive(Debug, Clone)]
pub enum Action {
    /// Answer with this status, these headers and this body.
    Respond {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// Read the request, then reset the connection without answering.
    Reset,
    /// Read the request and never answer (until the client closes, at most 10 s).
    Hang,
}

impl Action {
    /// `status` with a JSON body `{"status": status}`.
    pub fn status(status: u16) -> Self {
        Action::json(status, serde_json::json!({ "status": status }))
    }
    /// `status` with a JSON body.
    pub fn json(status: u16, body: Value) -> Self {
        Action::Respond {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string(),
        }
    }
    /// Add a header to a response.
    pub fn header(self, name: &str, value: &str) -> Self {
        match self {
            Action::Respond {
                status,
                mut headers,
                body,
            } => {
                headers.push((name.to_string(), value.to_string()));
                Action::Respond {
                    status,
                    headers,
                    body,
                }
            }
            other => other,
        }
    }
}

/// One request as the mock received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// Path and query as sent (`/deals?x=1`).
    pub target: String,
    /// Lower-case header names.
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

impl Recorded {
    /// A header by (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
    /// The body parsed as JSON (`Null` if it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

#[derive(Debug)]
struct MockState {
    script: Mutex<VecDeque<Action>>,
    fallback: Action,
    requests: Mutex<Vec<Recorded>>,
}

/// A scripted HTTP server on `127.0.0.1:<free port>`. Stops when dropped.
pub struct Mock {
    addr: std::net::SocketAddr,
    state: Arc<MockState>,
    task: JoinHandle<()>,
}

impl Drop for Mock {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Mock {
    /// Answer with `script` in order, then with `fallback` for every later request.
    pub async fn start(script: impl IntoIterator<Item = Action>, fallback: Action) -> Mock {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind mock");
        let addr = listener.local_addr().expect("mock addr");
        let state = Arc::new(MockState {
            script: Mutex::new(script.into_iter().collect()),
            fallback,
            requests: Mutex::new(Vec::new()),
        });
        let st = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    continue;
                };
                let st = st.clone();
                tokio::spawn(async move {
                    let _ = serve_one(sock, st).await;
                });
            }
        });
        Mock { addr, state, task }
    }

    /// The same answer to every request.
    pub async fn always(action: Action) -> Mock {
        Mock::start([], action).await
    }

    /// `http://127.0.0.1:<port>` (no trailing slash).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many complete requests arrived.
    pub fn count(&self) -> usize {
        self.state.requests.lock().unwrap().len()
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }
}

async fn serve_one(mut sock: TcpStream, st: Arc<MockState>) -> std::io::Result<()> {
    let Some(req) = read_request(&mut sock).await? else {
        return Ok(());
    };
    let action = {
        // Record and pick the action under one lock each, in arrival order.
        st.requests.lock().unwrap().push(req);
        st.script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| st.fallback.clone())
    };
    match action {
        Action::Respond {
            status,
            headers,
            body,
        } => {
            let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
            for (k, v) in &headers {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
            head.push_str(&format!(
                "content-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            ));
            sock.write_all(head.as_bytes()).await?;
            sock.write_all(body.as_bytes()).await?;
            sock.flush().await?;
            let _ = sock.shutdown().await;
        }
        Action::Reset => {
            sock.set_zero_linger()?;
            drop(sock);
        }
        Action::Hang => {
            let mut buf = [0u8; 1024];
            let _ = tokio::time::timeout(Duration::from_secs(10), async {
                loop {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                }
            })
            .await;
        }
    }
    Ok(())
}

/// Read one HTTP/1.1 request (head + `content-length` body). `None` if the peer closed first.
async fn read_request(sock: &mut TcpStream) -> std::io::Result<Option<Recorded>> {
    let mut buf = Vec::with_capacity(4096);
    let mut tmp = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let first = lines.next().unwrap_or_default();
    let mut parts = first.split(' ');
    let method = parts.next().unwrap_or_default().to_string();
    let target = parts.next().unwrap_or_default().to_string();
    let mut headers = BTreeMap::new();
    for line in lines {
        if let Some((k, v)) = line.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            return Ok(None);
        }
        body.extend_from_slice(&tmp[..n]);
    }
    body.truncate(len);
    Ok(Some(Recorded {
        method,
        target,
        headers,
        body,
    }))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        408 => "Request Timeout",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

// ---------------------------------------------------------------------------------------------
// Engine harness
// ---------------------------------------------------------------------------------------------

/// An engine over an in-memory store and a manual clock (at 2026-01-01T00:00:00Z).
pub struct Harness {
    pub store: Arc<InMemoryStore>,
    pub clock: Arc<ManualClock>,
    pub engine: Engine,
}

impl Harness {
    pub fn new() -> Self {
        let store = Arc::new(InMemoryStore::new());
        let clock = Arc::new(ManualClock::at_2026());
        let engine = Engine::new(store.clone(), clock.clone());
        Harness {
            store,
            clock,
            engine,
        }
    }

    /// Set `env.NAME` variables for templates (never the process environment).
    pub fn env(self, vars: &[(&str, &str)]) -> Self {
        self.engine.set_env(
            vars.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        self
    }

    /// A live run started from the CLI.
    pub async fn run(&self, wf: &Compiled, input: Value) -> RunRecord {
        self.run_mode(wf, input, Mode::Live).await
    }

    /// A dry run.
    pub async fn dry(&self, wf: &Compiled, input: Value) -> RunRecord {
        self.run_mode(wf, input, Mode::Dry).await
    }

    pub async fn run_mode(&self, wf: &Compiled, input: Value, mode: Mode) -> RunRecord {
        self.engine
            .run(wf, RunRequest::new(input, Trigger::Cli, mode))
            .await
            .expect("run is stored")
    }

    /// The clock now (UTC unix ms).
    pub fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Every live entry of a namespace.
    pub async fn entries(&self, ns: &str) -> Vec<MemoryEntry> {
        self.store
            .list(ns, "", None, 1000, self.now())
            .await
            .expect("list memory")
    }
}

impl Default for Harness {
    fn default() -> Self {
        Self::new()
    }
}

/// Compile a workflow given as JSON; panics listing every problem.
pub fn compile(v: &Value) -> Compiled {
    let text = serde_json::to_string_pretty(v).unwrap();
    match workflow::load_text(&text, &Registry::builtin()) {
        Ok(c) => c,
        Err(problems) => panic!(
            "workflow does not compile:\n{}",
            problems
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        ),
    }
}

/// A workflow value from its steps and edges (`settings` may be `Value::Null`).
pub fn workflow(id: &str, settings: Value, steps: Value, edges: Value) -> Value {
    let mut wf = serde_json::json!({
        "id": id,
        "name": id,
        "version": 1,
        "steps": steps,
        "edges": edges,
    });
    if !settings.is_null() {
        wf["settings"] = settings;
    }
    wf
}

/// The record of a step that must have run.
pub fn step<'a>(run: &'a RunRecord, id: &str) -> &'a StepRecord {
    run.step(id).unwrap_or_else(|| {
        panic!(
            "step `{id}` did not run; steps that ran: {:?}\nrun: {}",
            ran_ids(run),
            serde_json::to_string_pretty(run).unwrap()
        )
    })
}

/// Ids of the steps that ran, in order.
pub fn ran_ids(run: &RunRecord) -> Vec<&str> {
    run.steps.iter().map(|s| s.step_id.as_str()).collect()
}

/// The output of a step that must have run and produced one.
pub fn output<'a>(run: &'a RunRecord, id: &str) -> &'a Value {
    step(run, id)
        .output
        .as_ref()
        .unwrap_or_else(|| panic!("step `{id}` has no output: {:?}", step(run, id)))
}

/// Pretty JSON of a run, for assertion messages.
pub fn dump(run: &RunRecord) -> String {
    serde_json::to_string_pretty(run).unwrap()
}
