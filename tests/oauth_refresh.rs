//! OAuth 2 token refresh of connector steps (issue 35, point 3), against the sandbox's fake
//! OAuth server and app fakes over real HTTP (port 0), on the engine's manual clock (shared
//! with the sandbox: tokens expire by moving it or by the fake's `expire_access_tokens`, never
//! by sleeping):
//!
//! * each of the four apps: an expired token → exactly one refresh, the call succeeds;
//! * 20 concurrent runs on one connection (sled) → one refresh, 20 successes;
//! * three engines, each with its own PostgreSQL store handle and its own refresh locks, on one
//!   database → one refresh in all; a later expiry refreshes again with the *rotated* refresh
//!   token (the fake refuses a spent one);
//! * a 401 mid-life → one refresh, the retried call succeeds; a refused refresh is
//!   `auth_failed` naming the connection, quoting no token;
//! * no token the fake issued appears in any stored run record or in Memory.
//!
//! And with real processes, on the wall clock
//! (`three_fluxo_serve_processes_on_postgres_refresh_once`): three `fluxo serve --store
//! postgres://…` children on one database (`tests/common/pg.rs`), each with its own data dir
//! holding the same sealed connections file and the same `FLUXO_CONNECTIONS_KEY`, the sandbox
//! (system clock) in the test process. 20 webhook deliveries at once, spread over the three, on a
//! connection whose token expired a second ago, while the token endpoint answers slowly once →
//! exactly one refresh, 20 succeeded runs (each call sent once), 20 HubSpot contacts. The fake's
//! tokens live 72 s, so the refreshed one is stale for the engines 12 s later (the one-minute
//! skew): after that (a bounded wait on the wall clock) 6 more deliveries → exactly one more
//! refresh, with the rotated refresh token (no refused or reused refresh token). No token the fake
//! issued appears in a run record as `GET /api/v1/runs/{id}` serves it, nor in the children's logs
//! (`FLUXO_LOG=info`).

mod common;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

use common::pg::TestPg;
use common::{compile, step};
use fluxo::clock::{Clock, ManualClock};
use fluxo::connections::file::FileConnections;
use fluxo::connections::key::{ConnectionKey, KeySource};
use fluxo::connections::oauth::{SKEW_MS, STATE_NAMESPACE};
use fluxo::connections::{Connection, ConnectionStore, Credential, MemConnections};
use fluxo::run::{Mode, RunRecord, RunStatus, Trigger};
use fluxo::runtime::{Engine, RunRequest};
use fluxo::sandbox::vendors::pkce_s256;
use fluxo::sandbox::{Sandbox, SandboxConfig, SandboxHandle};
use fluxo::store::{PgStore, SledStore, Store};
use fluxo::workflow::Compiled;

async fn sandbox(clock: Arc<ManualClock>) -> SandboxHandle {
    let config = SandboxConfig {
        hold: Duration::from_secs(3),
        clock,
        ..SandboxConfig::default()
    };
    Sandbox::start_with("127.0.0.1:0".parse().unwrap(), config)
        .await
        .unwrap()
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// A grant from the fake: authorize (auto-approved, PKCE) and exchange the code. The access
/// and refresh tokens.
async fn connect(base: &str) -> (String, String) {
    let c = client();
    let verifier = "a-verifier-of-at-least-forty-three-characters-0123456789";
    let redirect = "http://127.0.0.1:9/callback";
    let r = c
        .get(format!("{base}/oauth/authorize"))
        .query(&[
            ("response_type", "code"),
            ("client_id", "fluxo-tests"),
            ("redirect_uri", redirect),
            ("code_challenge", &pkce_s256(verifier)),
            ("code_challenge_method", "S256"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 302);
    let location = reqwest::Url::parse(r.headers()["location"].to_str().unwrap()).unwrap();
    let code = location
        .query_pairs()
        .find(|(k, _)| k == "code")
        .unwrap()
        .1
        .into_owned();
    let tokens: Value = c
        .post(format!("{base}/oauth/token"))
        .form(&[
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", redirect),
            ("client_id", "fluxo-tests"),
            ("code_verifier", verifier),
        ])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    (
        tokens["access_token"].as_str().unwrap().to_string(),
        tokens["refresh_token"].as_str().unwrap().to_string(),
    )
}

/// An OAuth 2 connection `id` for `app` (its fake at `<base>/<path>`).
fn oauth_conn(
    id: &str,
    app: &str,
    base: &str,
    (access, refresh): &(String, String),
    expires_at_ms: i64,
) -> Connection {
    let path = if app == "google_sheets" {
        "sheets"
    } else {
        app
    };
    Connection {
        id: id.into(),
        app: app.into(),
        name: id.into(),
        credential: Credential::Oauth2 {
            access_token: access.clone(),
            refresh_token: Some(refresh.clone()),
            expires_at_ms: Some(expires_at_ms),
            token_url: format!("{base}/oauth/token"),
            client_id: "fluxo-tests".into(),
            client_secret: None,
        },
        base_url: Some(format!("{base}/{path}")),
        values: Default::default(),
    }
}

/// The fake OAuth server's counters.
async fn stats(base: &str) -> Value {
    client()
        .get(format!("{base}/_sandbox/oauth"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Expire every access token the fake issued so far (the apps answer 401 / token_expired).
async fn expire_at_the_fake(base: &str) {
    let r = client()
        .post(format!("{base}/_sandbox/oauth"))
        .json(&json!({"expire_access_tokens": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

/// The next refresh answers after 300 ms of real time: the runs that arrive meanwhile find
/// it in flight (the claim taken, or this process's lock held).
async fn slow_token_endpoint(base: &str) {
    slow_token_endpoint_ms(base, 300).await;
}

/// The next refresh answers after `ms` of real time.
async fn slow_token_endpoint_ms(base: &str, ms: u64) {
    let r = client()
        .post(format!("{base}/_sandbox/faults"))
        .json(&json!({"route": "POST /oauth/token", "fault": format!("slow:{ms}"), "times": 1}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
}

/// Every token the fake issued (access and refresh, rotated-out ones included).
async fn issued(base: &str) -> Vec<String> {
    let v: Value = client()
        .get(format!("{base}/_sandbox/oauth/issued"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut all: Vec<String> = ["access_tokens", "refresh_tokens"]
        .iter()
        .flat_map(|k| v[k].as_array().unwrap().clone())
        .map(|t| t.as_str().unwrap().to_string())
        .collect();
    all.sort();
    all.dedup();
    assert!(!all.is_empty());
    all
}

/// The tokens' secret part after the fake's prefix (`sbx_at_`, `sbx_rt_`): what must never be
/// stored, whole or masked down to a tail longer than 4 characters.
fn assert_no_token_in(texts: &[String], tokens: &[String]) {
    for t in tokens {
        let body = t
            .trim_start_matches("sbx_at_")
            .trim_start_matches("sbx_rt_");
        let probe = &body[..16];
        for text in texts {
            assert!(
                !text.contains(probe),
                "a token leaked into a stored record: {}",
                text.chars().take(400).collect::<String>()
            );
        }
    }
}

/// The stored runs (as JSON) and the Memory entries of the token state, as text.
async fn stored_texts(store: &dyn Store, runs: &[RunRecord], now: i64) -> Vec<String> {
    let mut out = Vec::new();
    for r in runs {
        let stored = store.get_run(&r.id).await.unwrap().expect("run stored");
        out.push(serde_json::to_string(&stored).unwrap());
    }
    for e in store
        .list(STATE_NAMESPACE, "", None, 100, now)
        .await
        .unwrap()
    {
        out.push(serde_json::to_string(&e).unwrap());
    }
    out
}

fn action(config: Value) -> Compiled {
    compile(&json!({
        "id": "app", "name": "app", "version": 1,
        "steps": [
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "act", "kind": "action", "config": config}
        ],
        "edges": [{"from": "start", "to": "act"}]
    }))
}

/// A HubSpot contact per event on connection `conn`.
fn contact(conn: &str) -> Compiled {
    action(json!({
        "connector": "hubspot", "operation": "create_contact", "connection": conn,
        "params": {"email": "{{ input.email }}", "firstname": "Ada"},
        "timeout_s": 5, "retries": 0
    }))
}

async fn live(engine: &Engine, wf: &Compiled, input: Value) -> RunRecord {
    engine
        .run(wf, RunRequest::new(input, Trigger::Cli, Mode::Live))
        .await
        .expect("run is stored")
}

fn succeeded(run: &RunRecord) -> &Value {
    assert_eq!(
        run.status,
        RunStatus::Succeeded,
        "{:?} / {:?}",
        run.error,
        step(run, "act").error
    );
    step(run, "act").output.as_ref().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_app_refreshes_an_expired_token_once_and_the_call_succeeds() {
    let h = common::Harness::new();
    let sb = sandbox(h.clock.clone()).await;
    let base = sb.url();
    let conns = Arc::new(MemConnections::default());
    h.engine.set_connections(conns.clone());
    let cases = [
        (
            "hubspot",
            json!({"operation": "create_contact",
                   "params": {"email": "ada@example.com", "firstname": "Ada"}}),
        ),
        (
            "stripe",
            json!({"operation": "create_customer", "params": {"email": "ada@example.com"},
                   "idempotency_key": "customer-1"}),
        ),
        (
            "slack",
            json!({"operation": "post_message",
                   "params": {"channel": "alerts", "text": "paid"}, "idempotency_key": "m1"}),
        ),
        (
            "google_sheets",
            json!({"operation": "append_row",
                   "params": {"spreadsheet_id": "book1", "key": "in_1", "values": ["10"]}}),
        ),
    ];
    let mut runs = Vec::new();
    for (n, (app, op)) in cases.into_iter().enumerate() {
        let grant = connect(&base).await;
        // Expired for the engine (past its clock) and at the fake.
        conns
            .put(oauth_conn(app, app, &base, &grant, h.now() - 1_000))
            .unwrap();
        expire_at_the_fake(&base).await;
        let mut config = op;
        config["connector"] = json!(app);
        config["connection"] = json!(app);
        let run = live(&h.engine, &action(config), json!({})).await;
        succeeded(&run);
        let s = stats(&base).await;
        assert_eq!(s["refreshes"], n as u64 + 1, "{app}: one refresh: {s}");
        assert_eq!(s["refresh_failures"], 0, "{s}");
        runs.push(run);
    }
    let texts = stored_texts(h.store.as_ref(), &runs, h.now()).await;
    assert_no_token_in(&texts, &issued(&base).await);
    sb.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_concurrent_runs_refresh_once_on_sled() {
    let clock = Arc::new(ManualClock::at_2026());
    let sb = sandbox(clock.clone()).await;
    let base = sb.url();
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SledStore::open_path(dir.path().join("db")).unwrap());
    let engine = Engine::new(store.clone(), clock.clone());
    let conns = Arc::new(MemConnections::default());
    let grant = connect(&base).await;
    conns
        .put(oauth_conn(
            "hs",
            "hubspot",
            &base,
            &grant,
            clock.now_ms() - 1_000,
        ))
        .unwrap();
    engine.set_connections(conns);
    expire_at_the_fake(&base).await;
    slow_token_endpoint(&base).await;
    let wf = Arc::new(contact("hs"));
    let tasks: Vec<_> = (0..20)
        .map(|i| {
            let (engine, wf) = (engine.clone(), wf.clone());
            tokio::spawn(async move {
                live(&engine, &wf, json!({"email": format!("p{i}@example.com")})).await
            })
        })
        .collect();
    let mut runs = Vec::new();
    for t in tasks {
        let run = t.await.unwrap();
        assert_eq!(succeeded(&run)["attempts"], 1);
        runs.push(run);
    }
    let s = stats(&base).await;
    assert_eq!(s["refreshes"], 1, "{s}");
    assert_eq!(s["refresh_failures"], 0, "{s}");
    let contacts = client()
        .get(format!("{base}/_sandbox/vendors/hubspot"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(contacts.matches("@example.com").count(), 20, "{contacts}");
    let texts = stored_texts(store.as_ref(), &runs, clock.now_ms()).await;
    assert_eq!(texts.len(), 21, "20 runs and one sealed token state");
    assert_no_token_in(&texts, &issued(&base).await);
    sb.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_engines_on_one_postgres_refresh_once_and_keep_the_rotated_token() {
    let pg = TestPg::shared();
    let url = pg.fresh_db().await;
    let clock = Arc::new(ManualClock::at_2026());
    let sb = sandbox(clock.clone()).await;
    let base = sb.url();
    let grant = connect(&base).await;
    let dir = tempfile::tempdir().unwrap();
    // Three "processes": each its own store handle (pool), connections file (the same key, as
    // `FLUXO_CONNECTIONS_KEY` gives every process) and engine (its own refresh locks).
    let key = ConnectionKey::generate();
    let mut engines = Vec::new();
    let mut stores: Vec<Arc<PgStore>> = Vec::new();
    for i in 0..3 {
        let store = Arc::new(PgStore::connect(&url).await.unwrap());
        if i == 0 {
            store.migrate().await.unwrap();
        }
        let conns = FileConnections::open(
            dir.path().join(format!("connections-{i}.enc")),
            key.clone(),
            KeySource::Env,
        )
        .unwrap();
        conns
            .put(oauth_conn(
                "hs",
                "hubspot",
                &base,
                &grant,
                clock.now_ms() - 1_000,
            ))
            .unwrap();
        let engine = Engine::new(store.clone(), clock.clone());
        engine.set_connections(Arc::new(conns));
        engines.push(engine);
        stores.push(store);
    }
    expire_at_the_fake(&base).await;
    slow_token_endpoint(&base).await;
    let wf = Arc::new(contact("hs"));
    let wave = |tag: &'static str| {
        let tasks: Vec<_> = (0..12)
            .map(|i| {
                let (engine, wf) = (engines[i % 3].clone(), wf.clone());
                tokio::spawn(async move {
                    live(
                        &engine,
                        &wf,
                        json!({"email": format!("{tag}{i}@example.com")}),
                    )
                    .await
                })
            })
            .collect::<Vec<_>>();
        async move {
            let mut runs = Vec::new();
            for t in tasks {
                let run = t.await.unwrap();
                succeeded(&run);
                runs.push(run);
            }
            runs
        }
    };
    let mut runs = wave("a").await;
    let s = stats(&base).await;
    assert_eq!(s["refreshes"], 1, "one refresh for three processes: {s}");
    assert_eq!(s["refresh_failures"], 0, "{s}");

    // Half an hour later every token has expired (the fake's clock is the engines'): the next
    // refresh must use the rotated refresh token; the credential's own is spent and refused.
    clock.advance(Duration::from_secs(31 * 60));
    slow_token_endpoint(&base).await;
    runs.extend(wave("b").await);
    let s = stats(&base).await;
    assert_eq!(s["refreshes"], 2, "{s}");
    assert_eq!(
        s["refresh_failures"], 0,
        "no spent refresh token was sent: {s}"
    );
    assert_eq!(s["reused_refresh_tokens"], 0, "{s}");

    let texts = stored_texts(stores[0].as_ref(), &runs, clock.now_ms()).await;
    assert_eq!(texts.len(), runs.len() + 1);
    assert!(
        texts.last().unwrap().contains("\"generation\":2"),
        "two refreshes"
    );
    assert_no_token_in(&texts, &issued(&base).await);
    sb.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_mid_life_refreshes_once_and_a_refused_refresh_asks_to_reconnect() {
    let h = common::Harness::new();
    let sb = sandbox(h.clock.clone()).await;
    let base = sb.url();
    let conns = Arc::new(MemConnections::default());
    h.engine.set_connections(conns.clone());
    let grant = connect(&base).await;
    // Fresh for the engine for another hour, but the app no longer takes it (revoked early).
    conns
        .put(oauth_conn(
            "hs",
            "hubspot",
            &base,
            &grant,
            h.now() + 3_600_000,
        ))
        .unwrap();
    expire_at_the_fake(&base).await;
    let first = live(
        &h.engine,
        &contact("hs"),
        json!({"email": "ada@example.com"}),
    )
    .await;
    let out = succeeded(&first);
    assert_eq!(out["attempts"], 2, "the 401, then the retry: {out}");
    assert_eq!(stats(&base).await["refreshes"], 1);
    // The new token serves the next run with no refresh.
    let next = live(
        &h.engine,
        &contact("hs"),
        json!({"email": "grace@example.com"}),
    )
    .await;
    assert_eq!(succeeded(&next)["attempts"], 1);
    assert_eq!(stats(&base).await["refreshes"], 1);

    // A refresh token the token endpoint refuses (revoked, spent): reconnect.
    let bogus = (
        "sbx_at_not-a-token-the-fake-issued".to_string(),
        "sbx_rt_not-a-refresh-token-it-issued".to_string(),
    );
    conns
        .put(oauth_conn("bad", "hubspot", &base, &bogus, h.now() - 1))
        .unwrap();
    let refused = live(
        &h.engine,
        &contact("bad"),
        json!({"email": "x@example.com"}),
    )
    .await;
    assert_eq!(refused.status, RunStatus::Failed);
    let e = step(&refused, "act").error.clone().unwrap();
    assert_eq!(e.code, "auth_failed", "{e:?}");
    assert!(e.message.contains("`bad`"), "{}", e.message);
    assert!(e.message.contains("reconnect"), "{}", e.message);
    assert!(e.message.contains("invalid_grant"), "{}", e.message);
    assert!(!e.message.contains("not-a-refresh-token"), "{}", e.message);

    let runs = [first, next, refused];
    let texts = stored_texts(h.store.as_ref(), &runs, h.now()).await;
    assert_no_token_in(&texts, &issued(&base).await);
    sb.shutdown().await;
}

// ---------------------------------------------------------------------------------------------
// Three real `fluxo serve` processes on one PostgreSQL database
// ---------------------------------------------------------------------------------------------

/// The API token of the `fluxo serve` children.
const SERVE_TOKEN: &str = "oauth-refresh-serve-token-0123456789abcdef";
/// The workflow the children run: a webhook → HubSpot's *Create a contact* on [`SERVE_CONN`].
const SERVE_WF: &str = "pg_refresh";
const SERVE_CONN: &str = "hs";
/// The lifetime of the access tokens the fake issues in the process test: 72 s, so a refreshed
/// token is fresh for the engines for 12 s (72 s less [`SKEW_MS`]) and stale after that by the
/// wall clock, while the fake still takes it.
const SERVE_TTL_S: u64 = 72;

/// A `fluxo serve` child, SIGKILLed when dropped (a failing test leaves no process behind).
struct Serve {
    child: std::process::Child,
    url: String,
    log: std::path::PathBuf,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wall_ms() -> i64 {
    fluxo::clock::SystemClock.now_ms()
}

/// `GET {url}/api/v1{path}` with the bearer token, as JSON (a few tries on no answer).
async fn api(c: &reqwest::Client, url: &str, path: &str) -> Value {
    let mut last = String::new();
    for _ in 0..20 {
        match c
            .get(format!("{url}/api/v1{path}"))
            .bearer_auth(SERVE_TOKEN)
            .send()
            .await
        {
            Ok(r) if r.status().is_success() => return r.json().await.unwrap(),
            Ok(r) => last = format!("{} {}", r.status(), r.text().await.unwrap_or_default()),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("GET /api/v1{path}: {last}");
}

/// One webhook delivery of event `key` (`{"email": "<key>@pg.example"}`) to a child, sent
/// again on no answer or a 503 (at most 10 s); the run id of its `202`.
async fn deliver(c: &reqwest::Client, url: &str, key: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut last = String::new();
    while std::time::Instant::now() < deadline {
        match c
            .post(format!("{url}/hooks/{SERVE_WF}"))
            .header("idempotency-key", key)
            .json(&json!({"email": format!("{key}@pg.example")}))
            .send()
            .await
        {
            Ok(r) => {
                let status = r.status().as_u16();
                let v: Value = r.json().await.unwrap_or_default();
                if status == 202 && v["duplicate"] == false && v["run_id"].is_string() {
                    return v["run_id"].as_str().unwrap().to_string();
                }
                assert_eq!(status, 503, "delivery of {key}: {v}");
                last = v.to_string();
            }
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("delivery of {key} got no 202 in 10 s: {last}");
}

/// Deliver `n` events (`<tag><i>`) at once, event `i` to child `i % 3`; wait (at most 60 s)
/// until every run they started is final; their details (from the run's own child), and how
/// long the deliveries took to be accepted (all of them).
async fn serve_wave(
    c: &reqwest::Client,
    procs: &[Serve],
    tag: &str,
    n: usize,
) -> (Vec<Value>, Duration) {
    let started = std::time::Instant::now();
    let sends: Vec<_> = (0..n)
        .map(|i| {
            let (c, url) = (c.clone(), procs[i % procs.len()].url.clone());
            let key = format!("{tag}{i}");
            tokio::spawn(async move { (url.clone(), deliver(&c, &url, &key).await) })
        })
        .collect();
    let mut ids = Vec::new();
    for s in sends {
        ids.push(s.await.unwrap());
    }
    let accepted_in = started.elapsed();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut done = Vec::new();
    for (url, id) in ids {
        loop {
            let d = api(c, &url, &format!("/runs/{id}")).await;
            if matches!(
                d["status"].as_str(),
                Some("succeeded" | "failed" | "timed_out" | "interrupted")
            ) {
                done.push(d);
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "run {id} did not finish in 60 s: {d}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    for d in &done {
        assert_eq!(d["status"], "succeeded", "{d}");
        let act = d["steps"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["step_id"] == "act"))
            .unwrap_or_else(|| panic!("no step `act`: {d}"));
        // The call went once, with a fresh token: never a 401 and a second refresh.
        assert_eq!(act["output"]["attempts"], 1, "{act}");
    }
    (done, accepted_in)
}

/// The contacts HubSpot's fake holds for the process test (emails `…@pg.example`).
async fn pg_contacts(base: &str) -> usize {
    client()
        .get(format!("{base}/_sandbox/vendors/hubspot"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
        .matches("@pg.example")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_fluxo_serve_processes_on_postgres_refresh_once() {
    let pg = TestPg::shared();
    let store_url = pg.fresh_db().await;
    let migrate = std::process::Command::new(env!("CARGO_BIN_EXE_fluxo"))
        .args(["db", "migrate", "--store", &store_url])
        .output()
        .unwrap();
    assert!(
        migrate.status.success(),
        "fluxo db migrate: {}",
        String::from_utf8_lossy(&migrate.stderr)
    );

    // The fake on the wall clock: the children's engines use the system clock.
    let sb = Sandbox::start_with(
        "127.0.0.1:0".parse().unwrap(),
        SandboxConfig {
            hold: Duration::from_secs(3),
            access_token_ttl: Duration::from_secs(SERVE_TTL_S),
            ..SandboxConfig::default()
        },
    )
    .await
    .unwrap();
    let base = sb.url();
    let grant = connect(&base).await;
    // Expired for the engines (a second ago by the wall clock) and at the fake.
    let conn = oauth_conn(SERVE_CONN, "hubspot", &base, &grant, wall_ms() - 1_000);
    expire_at_the_fake(&base).await;

    // One connections store for all: the same sealed file in each data dir, the same key.
    let tmp = tempfile::tempdir().unwrap();
    let key = ConnectionKey::generate();
    let workflows = tmp.path().join("workflows");
    std::fs::create_dir_all(&workflows).unwrap();
    let wf = json!({
        "id": SERVE_WF, "name": "OAuth refresh across processes", "version": 1,
        "settings": {"run_timeout_s": 30},
        "steps": [
            {"id": "hook", "kind": "webhook_trigger", "config": {}},
            {"id": "act", "kind": "action", "config": {
                "connector": "hubspot", "operation": "create_contact", "connection": SERVE_CONN,
                "params": {"email": "{{ input.email }}", "firstname": "Ada"},
                "timeout_s": 5, "retries": 0}}
        ],
        "edges": [{"from": "hook", "to": "act"}]
    });
    std::fs::write(workflows.join("pg_refresh.json"), wf.to_string()).unwrap();
    let c = client();
    let mut procs = Vec::new();
    for i in 0..3 {
        let data = tmp.path().join(format!("data-{i}"));
        std::fs::create_dir_all(&data).unwrap();
        std::fs::write(
            data.join(fluxo::connections::file::FILE),
            fluxo::connections::file::seal(&key, std::slice::from_ref(&conn)),
        )
        .unwrap();
        let log = tmp.path().join(format!("serve-{i}.log"));
        let port = common::child::free_port();
        let child = common::child::serve_command(port, &workflows, &data, SERVE_TOKEN, &log)
            .args(["--store", &store_url])
            .args(["--lease-s", "5", "--workers", "8"])
            .env(fluxo::connections::key::KEY_ENV, key.to_hex())
            .env("FLUXO_LOG", "info")
            .spawn()
            .expect("spawn fluxo serve");
        procs.push(Serve {
            child,
            url: format!("http://127.0.0.1:{port}"),
            log,
        });
    }
    for p in &mut procs {
        let url = p.url.clone();
        common::child::wait_ready(&c, &url, &mut p.child, &p.log).await;
    }

    // 20 runs over three processes find the expired token while the one refresh is in flight.
    let slow = Duration::from_millis(1_000);
    slow_token_endpoint_ms(&base, slow.as_millis() as u64).await;
    let started = std::time::Instant::now();
    let (mut runs, accepted_in) = serve_wave(&c, &procs, "a", 20).await;
    let first_wave = started.elapsed();
    // The refreshed token went stale for the engines 12 s after the refresh answered, which was
    // before the wave ended.
    let stale_at = wall_ms() + (SERVE_TTL_S as i64 * 1_000 - SKEW_MS) + 1_000;
    let s = stats(&base).await;
    assert_eq!(s["refreshes"], 1, "one refresh for three processes: {s}");
    assert_eq!(s["refresh_failures"], 0, "{s}");
    assert_eq!(pg_contacts(&base).await, 20);
    assert!(
        first_wave >= slow,
        "the wave waited for the slow refresh: {first_wave:?}"
    );

    // Once the refreshed token is stale by the wall clock (bounded wait), 6 more runs: one
    // more refresh, with the rotated refresh token (the fake refuses a spent one).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while wall_ms() < stale_at {
        assert!(
            std::time::Instant::now() < deadline,
            "the wall clock stalled"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    slow_token_endpoint_ms(&base, 500).await;
    runs.extend(serve_wave(&c, &procs, "b", 6).await.0);
    let s = stats(&base).await;
    assert_eq!(s["refreshes"], 2, "{s}");
    assert_eq!(
        s["refresh_failures"], 0,
        "no spent refresh token was sent: {s}"
    );
    assert_eq!(s["reused_refresh_tokens"], 0, "{s}");
    assert_eq!(pg_contacts(&base).await, 26);

    // No token the fake issued in a run record (as the API serves it) or in a child's log.
    let mut texts: Vec<String> = runs.iter().map(Value::to_string).collect();
    for p in &procs {
        texts.push(std::fs::read_to_string(&p.log).unwrap());
    }
    let tokens = issued(&base).await;
    assert_eq!(tokens.len(), 6, "3 access and 3 refresh tokens: {tokens:?}");
    assert_no_token_in(&texts, &tokens);
    eprintln!(
        "first wave (20 runs, 3 processes): accepted in {accepted_in:?}, done in \
         {first_wave:?}; test {:?}",
        started.elapsed()
    );
    drop(procs);
    sb.shutdown().await;
}
