//! No crash loops (issue 42, item 3), against a real `fluxo serve` child process restarted on
//! the same data dir: a run in flight at two consecutive crashes is quarantined at the next
//! start (`failed`, error code `quarantined`, the step named), never executed automatically
//! again, and the server stays up; a person resumes it once the cause is fixed. Runs that
//! were merely queued at both crashes are executed, not quarantined.
//!
//! The process is made to die without fault injection in the product: the step's request
//! reaches a destination in this test that SIGKILLs the child (a `GET`, safe to repeat, so
//! crash recovery resumes the run); or, for a run the store still holds `queued` (its take not
//! durable), the test SIGKILLs the child while the in-flight log shows the run executing a
//! long pure step. Loopback only; every wait is bounded.

mod common;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::child::{free_port, serve_command, wait_ready};
use serde_json::{json, Value};

const TOKEN: &str = "quarantine-token-0123456789abcdef0123456789";

/// A destination that SIGKILLs the `fluxo serve` child when a request reaches it while armed
/// (or, while `hold` is on, keeps the request unanswered for a minute).
struct Killer {
    url: String,
    hits: Arc<AtomicUsize>,
    armed: Arc<AtomicBool>,
    hold: Arc<AtomicBool>,
    pid: Arc<AtomicI32>,
}

impl Killer {
    async fn start() -> Killer {
        let hits = Arc::new(AtomicUsize::new(0));
        let armed = Arc::new(AtomicBool::new(false));
        let pid = Arc::new(AtomicI32::new(0));
        let hold = Arc::new(AtomicBool::new(false));
        let (h, a, p, o) = (hits.clone(), armed.clone(), pid.clone(), hold.clone());
        let app = axum::Router::new().fallback(move || {
            let (h, a, p, o) = (h.clone(), a.clone(), p.clone(), o.clone());
            async move {
                h.fetch_add(1, Ordering::SeqCst);
                if o.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                }
                let pid = p.load(Ordering::SeqCst);
                if a.load(Ordering::SeqCst) && pid > 0 {
                    // SAFETY: kill(2) only reads its arguments.
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                    }
                }
                axum::Json(json!({"ok": true}))
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Killer {
            url,
            hits,
            armed,
            hold,
            pid,
        }
    }
    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

struct Serve {
    child: Child,
    url: String,
    client: reqwest::Client,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Dir {
    _tmp: tempfile::TempDir,
    root: PathBuf,
}

impl Dir {
    fn new(workflows: &[Value]) -> Dir {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        std::fs::create_dir_all(root.join("workflows")).unwrap();
        for wf in workflows {
            let id = wf["id"].as_str().unwrap();
            std::fs::write(
                root.join(format!("workflows/{id}.json")),
                serde_json::to_string_pretty(wf).unwrap(),
            )
            .unwrap();
        }
        Dir { _tmp: tmp, root }
    }
    fn data(&self) -> PathBuf {
        self.root.join("data")
    }
    fn log(&self) -> PathBuf {
        self.root.join("serve.log")
    }
    fn log_text(&self) -> String {
        std::fs::read_to_string(self.log()).unwrap_or_default()
    }
}

/// Spawn `fluxo serve` on `dir` (the killer knows its pid at once); not waited for.
fn spawn(dir: &Dir, killer: &Killer, extra: &[&str]) -> Serve {
    let port = free_port();
    let child = serve_command(
        port,
        &dir.root.join("workflows"),
        &dir.data(),
        TOKEN,
        &dir.log(),
    )
    .args(extra)
    .env("FLUXO_ENV_KILLER", &killer.url)
    .env("FLUXO_LOG", "warn")
    .spawn()
    .expect("spawn fluxo serve");
    killer.pid.store(child.id() as i32, Ordering::SeqCst);
    Serve {
        child,
        url: format!("http://127.0.0.1:{port}"),
        client: reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap(),
    }
}

/// Spawn and wait until it answers.
async fn start(dir: &Dir, killer: &Killer, extra: &[&str]) -> Serve {
    let mut s = spawn(dir, killer, extra);
    wait_ready(&s.client, &s.url, &mut s.child, &dir.log()).await;
    s
}

impl Serve {
    /// Wait (bounded) until the process has died; false if it is still alive then.
    async fn died_within(&mut self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self.child.try_wait().unwrap().is_some() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// SIGTERM (a clean stop begins: the server waits for its runs), then, after `wait`,
    /// SIGKILL: the stop gave up waiting, as the desktop app's quit does after a while.
    async fn stop_then_kill(&mut self, wait: Duration) {
        // SAFETY: kill(2) only reads its arguments.
        unsafe {
            libc::kill(self.child.id() as i32, libc::SIGTERM);
        }
        tokio::time::sleep(wait).await;
        self.sigkill();
    }

    fn sigkill(&mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reaped");
    }

    async fn deliver(&self, wf: &str, body: Value) -> String {
        let id = body["id"].as_str().unwrap().to_string();
        let r = self
            .client
            .post(format!("{}/hooks/{wf}", self.url))
            .header("idempotency-key", &id)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 202, "delivery of {id}");
        r.json::<Value>().await.unwrap()["run_id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    async fn get(&self, path: &str) -> Value {
        let r = self
            .client
            .get(format!("{}/api/v1{path}", self.url))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "GET {path}: {}", r.status());
        r.json().await.unwrap()
    }

    async fn final_run(&self, id: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let run = self.get(&format!("/runs/{id}")).await;
            let status = run["status"].as_str().unwrap_or_default().to_string();
            if !["queued", "running"].contains(&status.as_str()) {
                return run;
            }
            assert!(Instant::now() < deadline, "run {id} still {status}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn metrics(&self) -> String {
        self.client
            .get(format!("{}/metrics", self.url))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}

fn fine_workflow() -> Value {
    json!({
        "id": "fine", "name": "fine", "version": 1,
        "steps": [
            {"id": "hook", "kind": "webhook_trigger", "config": {}},
            {"id": "shape", "kind": "transform", "config": {"fields": {"event": "{{ input.id }}"}}}
        ],
        "edges": [{"from": "hook", "to": "shape"}]
    })
}

/// A workflow whose `call` step (a GET: safe to repeat, so crash recovery resumes it) reaches
/// the killer.
fn boom_workflow() -> Value {
    json!({
        "id": "boom", "name": "boom", "version": 1,
        "steps": [
            {"id": "hook", "kind": "webhook_trigger", "config": {}},
            {"id": "call", "kind": "http_request",
             "config": {"method": "GET", "url": "{{ env.KILLER }}/boom?event={{ input.id }}",
                        "retries": 0, "timeout_s": 10}},
            {"id": "after", "kind": "transform", "config": {"fields": {"done": "{{ input.id }}"}}}
        ],
        "edges": [{"from": "hook", "to": "call"}, {"from": "call", "to": "after"}]
    })
}

/// The crash loop of the `boom` workflow, up to its end: two fine runs succeed, the boom
/// event's `call` kills the first process, and the restart resumes it and dies again; the
/// second restart quarantines the resume and stays up. Answers the live server, the boom run
/// (now interrupted), its quarantined resume and the fine runs.
async fn crash_loop(dir: &Dir, killer: &Killer) -> (Serve, String, String, Vec<String>) {
    let s0 = start(dir, killer, &[]).await;
    let mut fine = Vec::new();
    for e in ["f1", "f2"] {
        let id = s0.deliver("fine", json!({"id": e})).await;
        assert_eq!(s0.final_run(&id).await["status"], "succeeded");
        fine.push(id);
    }
    killer.armed.store(true, Ordering::SeqCst);
    let mut s0 = s0;
    let boom = s0.deliver("boom", json!({"id": "b1"})).await;
    assert!(
        s0.died_within(Duration::from_secs(20)).await,
        "the step killed the process"
    );
    assert_eq!(killer.hits(), 1);

    // Restart 1: the run was in flight at one crash: resumed as before (its GET is safe to
    // repeat), and it kills this process too.
    let mut s1 = spawn(dir, killer, &[]);
    assert!(
        s1.died_within(Duration::from_secs(30)).await,
        "the resume killed the first restart:\n{}",
        dir.log_text()
    );
    assert_eq!(killer.hits(), 2, "the resume repeated the step once");
    drop(s1);

    // Restart 2: in flight at two consecutive crashes: quarantined, the process stays up.
    let mut s2 = start(dir, killer, &[]).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        s2.alive(),
        "the second restart stays up:\n{}",
        dir.log_text()
    );
    assert_eq!(
        killer.hits(),
        2,
        "the quarantined run is not executed again"
    );
    let original = s2.final_run(&boom).await;
    assert_eq!(original["status"], "interrupted", "{original}");
    let resumes = original["resumed_by"].as_array().expect("resumed_by");
    assert_eq!(resumes.len(), 1, "{original}");
    let resume = resumes[0].as_str().unwrap().to_string();
    (s2, boom, resume, fine)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_that_kills_the_process_twice_is_quarantined_and_the_server_stays_up() {
    let killer = Killer::start().await;
    let dir = Dir::new(&[fine_workflow(), boom_workflow()]);
    let (mut s2, boom, resume, mut fine) = crash_loop(&dir, &killer).await;

    let q = s2.final_run(&resume).await;
    assert_eq!(q["status"], "failed", "{q}");
    assert_eq!(q["error"]["code"], "quarantined", "{q}");
    assert_eq!(q["error"]["step"], "call", "{q}");
    let message = q["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("the process died twice while running this step (step call)"),
        "{message}"
    );
    assert_eq!(q["root_run_id"], boom.as_str());
    // Listed for an operator: the failed runs are the quarantined one only.
    let failed = s2.get("/runs?status=failed").await;
    let ids: Vec<&str> = failed["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![resume.as_str()], "{failed}");
    assert_eq!(failed["runs"][0]["error_code"], "quarantined", "{failed}");
    // A log line at start, and the metric.
    assert!(
        dir.log_text().contains("run quarantined"),
        "{}",
        dir.log_text()
    );
    let metrics = s2.metrics().await;
    assert!(
        metrics.contains("fluxo_runs_recovered_total{outcome=\"quarantined\"} 1"),
        "{metrics}"
    );
    // No other run is affected, and new ones run.
    fine.push(s2.deliver("fine", json!({"id": "f3"})).await);
    for id in &fine {
        assert_eq!(s2.final_run(id).await["status"], "succeeded", "{id}");
    }

    // Restart 3 (after a crash with nothing in flight): up, and nothing runs again.
    s2.sigkill();
    let mut s3 = start(&dir, &killer, &[]).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert!(s3.alive(), "the third restart stays up");
    assert_eq!(killer.hits(), 2);
    assert_eq!(s3.final_run(&resume).await["error"]["code"], "quarantined");
    for id in &fine {
        assert_eq!(s3.final_run(id).await["status"], "succeeded", "{id}");
    }
    let active = s3.get("/runs?status=queued").await;
    assert_eq!(active["runs"], json!([]), "{active}");

    // The operator's listing (the store is the CLI's once the server is gone).
    s3.sigkill();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fluxo"))
        .arg("--data-dir")
        .arg(dir.data())
        .args(["runs", "list", "--status", "failed"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&resume) && text.contains("quarantined"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quarantined_run_is_resumed_by_a_person_after_the_fix() {
    let killer = Killer::start().await;
    let dir = Dir::new(&[fine_workflow(), boom_workflow()]);
    let (s2, boom, resume, _) = crash_loop(&dir, &killer).await;
    assert_eq!(s2.final_run(&resume).await["error"]["code"], "quarantined");

    // The fix: the destination no longer kills.
    killer.armed.store(false, Ordering::SeqCst);
    let r = s2
        .client
        .post(format!("{}/api/v1/runs/{resume}/resume", s2.url))
        .bearer_auth(TOKEN)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let done: Value = r.json().await.unwrap();
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(done["resume_of"], resume.as_str());
    assert_eq!(done["root_run_id"], boom.as_str());
    assert_eq!(killer.hits(), 3, "the resume executed the step once more");
    let q = s2.final_run(&resume).await;
    assert_eq!(q["resumed_by"], json!([done["id"]]), "{q}");
}

/// A `slow` run whose transform renders for tens of seconds (pure: the store holds it
/// `queued` until its end), behind it a backlog of `fine` runs on one worker.
fn slow_workflow() -> Value {
    json!({
        "id": "slow", "name": "slow", "version": 1,
        "settings": {"run_timeout_s": 60},
        "steps": [
            {"id": "hook", "kind": "webhook_trigger", "config": {}},
            {"id": "crunch", "kind": "transform",
             "config": {"fields": {"n": "{% for i in range(2000) %}{{ input.items|sort|length }}{% endfor %}"}}}
        ],
        "edges": [{"from": "hook", "to": "crunch"}]
    })
}

/// Wait until the in-flight log of `data` shows `run` executing `step`.
async fn wait_in_flight(data: &Path, run: &str, step: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let prior = fluxo::store::flight::read_prior(data).unwrap();
        if prior
            .suspects
            .iter()
            .any(|s| s.run_id == run && s.step == step)
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "run {run} never showed in flight at {step}: {prior:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_run_in_flight_twice_is_quarantined_and_the_backlog_behind_it_runs() {
    let killer = Killer::start().await;
    let dir = Dir::new(&[fine_workflow(), slow_workflow()]);
    let one = ["--workers", "1"];
    let items: Vec<u64> = (0..50_000u64).map(|i| (i * 7919) % 100_003).collect();

    let mut s0 = start(&dir, &killer, &one).await;
    let slow = s0
        .deliver("slow", json!({"id": "s1", "items": items}))
        .await;
    wait_in_flight(&dir.data(), &slow, "crunch").await;
    // The backlog: queued behind the one worker, never started.
    let mut backlog = Vec::new();
    for i in 0..5 {
        backlog.push(s0.deliver("fine", json!({"id": format!("q{i}")})).await);
    }
    for id in &backlog {
        assert_eq!(s0.get(&format!("/runs/{id}")).await["status"], "queued");
    }
    assert_eq!(s0.get(&format!("/runs/{slow}")).await["status"], "queued");
    s0.sigkill();
    // Only the run executing a step was in flight.
    let prior = fluxo::store::flight::read_prior(&dir.data()).unwrap();
    let flying: Vec<&str> = prior.suspects.iter().map(|s| s.run_id.as_str()).collect();
    assert_eq!(flying, vec![slow.as_str()], "{prior:?}");

    // Restart 1: the run is still `queued` in the store (its take was never durable): it is
    // executed again, first; the backlog waits behind it again.
    let mut s1 = start(&dir, &killer, &one).await;
    wait_in_flight(&dir.data(), &slow, "crunch").await;
    for id in &backlog {
        assert_eq!(s1.get(&format!("/runs/{id}")).await["status"], "queued");
    }
    s1.sigkill();

    // Restart 2: quarantined; the backlog (queued at both crashes) is executed.
    let mut s2 = start(&dir, &killer, &one).await;
    let q = s2.final_run(&slow).await;
    assert_eq!(q["status"], "failed", "{q}");
    assert_eq!(q["error"]["code"], "quarantined", "{q}");
    assert_eq!(q["error"]["step"], "crunch", "{q}");
    assert!(
        q["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("the process died twice while running this step (step crunch)"),
        "{q}"
    );
    for id in &backlog {
        let run = s2.final_run(id).await;
        assert_eq!(run["status"], "succeeded", "{run}");
    }
    assert!(s2.alive());
    let failed = s2.get("/runs?status=failed").await;
    assert_eq!(failed["runs"].as_array().unwrap().len(), 1, "{failed}");
}

/// PostgreSQL (several processes, leases): the same rule through the lease's takeover count.
/// Each process dies holding the run (the first executing it, the next executing its
/// automatic resume); the process that takes it over the second time quarantines it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_a_run_whose_holders_die_twice_is_quarantined_by_its_taker() {
    let pg = common::pg::TestPg::shared();
    let store = pg.fresh_db().await;
    let killer = Killer::start().await;
    let dir = Dir::new(&[fine_workflow(), boom_workflow()]);
    let args = ["--store", store.as_str(), "--lease-s", "1"];

    let mut p1 = start(&dir, &killer, &args).await;
    let fine = p1.deliver("fine", json!({"id": "f1"})).await;
    assert_eq!(p1.final_run(&fine).await["status"], "succeeded");
    killer.armed.store(true, Ordering::SeqCst);
    let boom = p1.deliver("boom", json!({"id": "b1"})).await;
    assert!(p1.died_within(Duration::from_secs(20)).await);
    assert_eq!(killer.hits(), 1);

    // The next process takes the run over once its lease expired (one takeover): resumed as
    // before, and the resume kills it.
    let mut p2 = spawn(&dir, &killer, &args);
    assert!(
        p2.died_within(Duration::from_secs(30)).await,
        "the resume killed the second process:\n{}",
        dir.log_text()
    );
    assert_eq!(killer.hits(), 2);
    drop(p2);

    // The third takes the resume over: its second crash; quarantined, and it stays up.
    let mut p3 = start(&dir, &killer, &args).await;
    let original = p3.final_run(&boom).await;
    assert_eq!(original["status"], "interrupted", "{original}");
    let resume = original["resumed_by"][0]
        .as_str()
        .expect("resumed")
        .to_string();
    let q = p3.final_run(&resume).await;
    assert_eq!(q["status"], "failed", "{q}");
    assert_eq!(q["error"]["code"], "quarantined", "{q}");
    assert_eq!(q["error"]["step"], "call", "{q}");
    assert!(
        q["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("the process died twice while running this step (step call)"),
        "{q}"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(p3.alive(), "{}", dir.log_text());
    assert_eq!(killer.hits(), 2);
    let f2 = p3.deliver("fine", json!({"id": "f2"})).await;
    assert_eq!(p3.final_run(&f2).await["status"], "succeeded");
    assert_eq!(p3.final_run(&fine).await["status"], "succeeded");

    // After the fix, a person resumes it.
    killer.armed.store(false, Ordering::SeqCst);
    let r = p3
        .client
        .post(format!("{}/api/v1/runs/{resume}/resume", p3.url))
        .bearer_auth(TOKEN)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let done: Value = r.json().await.unwrap();
    assert_eq!(done["status"], "succeeded", "{done}");
}

/// The lease row of `run` on `store`: its takeover count, once a live lease holds it.
async fn wait_leased(store: &str, run: &str, takeovers: i32) {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(store).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let row: Option<(i32,)> = sqlx::query_as(
            "SELECT takeovers FROM run_leases WHERE run_id = $1 AND lease_until > $2 \
             AND owner <> ''",
        )
        .bind(run)
        .bind(now)
        .fetch_optional(&mut conn)
        .await
        .unwrap();
        if row == Some((takeovers,)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "run {run} never leased with {takeovers} takeovers: {row:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// PostgreSQL, a run still `queued` (its pure step runs before any durable write): its lease
/// is what says a process was executing it; the second takeover quarantines it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgresql_a_queued_run_taken_over_twice_is_quarantined() {
    let pg = common::pg::TestPg::shared();
    let store = pg.fresh_db().await;
    let killer = Killer::start().await;
    let dir = Dir::new(&[fine_workflow(), slow_workflow()]);
    let args = [
        "--store",
        store.as_str(),
        "--lease-s",
        "1",
        "--workers",
        "1",
    ];
    let items: Vec<u64> = (0..50_000u64).map(|i| (i * 7919) % 100_003).collect();

    let mut p1 = start(&dir, &killer, &args).await;
    let slow = p1
        .deliver("slow", json!({"id": "s1", "items": items}))
        .await;
    wait_leased(&store, &slow, 0).await;
    p1.sigkill();
    let mut p2 = start(&dir, &killer, &args).await;
    wait_leased(&store, &slow, 1).await;
    assert_eq!(p2.get(&format!("/runs/{slow}")).await["status"], "queued");
    p2.sigkill();

    let p3 = start(&dir, &killer, &args).await;
    let q = p3.final_run(&slow).await;
    assert_eq!(q["status"], "failed", "{q}");
    assert_eq!(q["error"]["code"], "quarantined", "{q}");
    assert!(
        q["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("the process died twice while running this step"),
        "{q}"
    );
    let f = p3.deliver("fine", json!({"id": "f1"})).await;
    assert_eq!(p3.final_run(&f).await["status"], "succeeded");
}

/// A run in flight when a clean stop begins is no crash suspect, even when the stop is cut
/// short (SIGKILL while it waits for the run): twice in a row, the run is recovered as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_in_flight_at_clean_stops_is_never_quarantined() {
    let killer = Killer::start().await;
    killer.hold.store(true, Ordering::SeqCst);
    let dir = Dir::new(&[boom_workflow()]);
    let mut s0 = start(&dir, &killer, &[]).await;
    let boom = s0.deliver("boom", json!({"id": "b1"})).await;
    let wait_hits = |n: usize| {
        let hits = killer.hits.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(30);
            while hits.load(Ordering::SeqCst) < n {
                assert!(
                    Instant::now() < deadline,
                    "the step never reached the destination"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    wait_hits(1).await;
    s0.stop_then_kill(Duration::from_millis(700)).await;
    assert!(fluxo::store::flight::read_prior(&dir.data()).unwrap().clean);

    // Recovered as usual: the resume repeats the GET, held again; stopped the same way.
    let mut s1 = start(&dir, &killer, &[]).await;
    wait_hits(2).await;
    s1.stop_then_kill(Duration::from_millis(700)).await;

    killer.hold.store(false, Ordering::SeqCst);
    let s2 = start(&dir, &killer, &[]).await;
    let original = s2.final_run(&boom).await;
    assert_eq!(original["status"], "interrupted", "{original}");
    let r2 = original["resumed_by"][0].as_str().unwrap().to_string();
    let second = s2.final_run(&r2).await;
    assert_eq!(second["status"], "interrupted", "{second}");
    assert_eq!(
        second["error"]["code"], "interrupted",
        "not quarantined: {second}"
    );
    let r3 = second["resumed_by"][0].as_str().unwrap().to_string();
    assert_eq!(s2.final_run(&r3).await["status"], "succeeded");
    assert!(!dir.log_text().contains("run quarantined"));
}
