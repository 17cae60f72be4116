//! Scale-out (SPEC §8): three real `fluxo serve --store postgres://…` processes on one
//! database take a storm of webhook deliveries in which the copies of one event go to
//! different processes, while random processes are SIGKILLed and restarted. Each run POSTs to
//! a slow destination with an `Idempotency-Key`, so kills land mid-run and the runs they leave
//! `running` must be recovered by another process. Afterwards, read straight from the
//! database:
//!
//! * every key that got a `202` has exactly one run lineage, rooted at the run the answer
//!   named; no key has two;
//! * every run ended (none `queued` or `running`), and every lineage's newest run succeeded
//!   (an original cut short by a kill is `interrupted` and resumed by another process);
//! * every key with a `202` reached the destination (its effect happened);
//! * a dead process's runs were taken over within the lease (2 s here) plus the orphan scan
//!   period (a quarter lease), with scheduling slack.
//!
//! The PostgreSQL server is the test's own (`tests/common/pg.rs`). Size: `FLUXO_SCALE_SECS`
//! (default 8 s of storm; the README's manual figure uses more). `FLUXO_SCALE_SEED` replays
//! a storm.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

mod common;

use common::child::{free_port, serve_command, wait_ready};
use common::pg::TestPg;
use fluxo::run::{RunRecord, RunStatus, Trigger};
use fluxo::store::{PgStore, RunQuery, RunStore};

const TOKEN: &str = "scale-out-token-0123456789abcdef0123456789";
const PROCESSES: usize = 3;
const CLIENTS: usize = 6;
const LEASE_S: u64 = 2;

/// The destination: holds each request 50–250 ms (so kills land mid-run), remembers every
/// `Idempotency-Key` it saw.
async fn destination() -> (String, Arc<Mutex<BTreeMap<String, usize>>>) {
    let seen: Arc<Mutex<BTreeMap<String, usize>>> = Arc::default();
    let s = seen.clone();
    let app = axum::Router::new().route(
        "/deals",
        axum::routing::post(move |headers: HeaderMap| {
            let s = s.clone();
            async move {
                let key = headers
                    .get("idempotency-key")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("")
                    .to_string();
                let wait = 50 + (key.len() as u64 * 37 + rand::random::<u64>()) % 200;
                tokio::time::sleep(Duration::from_millis(wait)).await;
                *s.lock().unwrap().entry(key).or_default() += 1;
                (axum::http::StatusCode::CREATED, "{\"id\":\"deal\"}")
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

struct Proc {
    child: Child,
    url: String,
}

struct Cluster {
    dir: PathBuf,
    store: String,
    crm: String,
    procs: Vec<Proc>,
}

/// The tests' HTTP client (no proxy, 5 s per request).
fn probe() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

impl Cluster {
    /// No process yet, in `dir`, on database `store`, with `FLUXO_ENV_CRM` = `crm`.
    fn new(dir: &Path, store: &str, crm: impl Into<String>) -> Cluster {
        Cluster {
            dir: dir.to_path_buf(),
            store: store.to_string(),
            crm: crm.into(),
            procs: Vec::new(),
        }
    }

    fn spawn(&self, i: usize) -> Proc {
        self.spawn_with(i, &self.dir.join("workflows"), 4)
    }

    /// Process `i` over its own data dir, reading `workflows`, with `workers` workers.
    fn spawn_with(&self, i: usize, workflows: &Path, workers: usize) -> Proc {
        let port = free_port();
        let data = self.dir.join(format!("data-{i}"));
        let log = self.dir.join(format!("serve-{i}.log"));
        let child = serve_command(port, workflows, &data, TOKEN, &log)
            .args(["--store", &self.store])
            .args(["--lease-s", &LEASE_S.to_string()])
            .args(["--workers", &workers.to_string()])
            .args(["--retention-runs", "100000000"])
            .env("FLUXO_ENV_CRM", &self.crm)
            .env("FLUXO_LOG", "warn")
            .spawn()
            .expect("spawn fluxo serve");
        Proc {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }

    async fn ready(&mut self, i: usize, probe: &reqwest::Client) {
        let log = self.dir.join(format!("serve-{i}.log"));
        let p = &mut self.procs[i];
        wait_ready(probe, &p.url.clone(), &mut p.child, &log).await;
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for p in &mut self.procs {
            let _ = p.child.kill();
            let _ = p.child.wait();
        }
    }
}

fn workflow(dir: &Path) {
    std::fs::create_dir_all(dir.join("workflows")).unwrap();
    let wf = webhook_then_post("storm", "create", "/deals", "deal-{{ input.id }}", 2, 10);
    std::fs::write(dir.join("workflows/storm.json"), wf.to_string()).unwrap();
}

/// Workflow `id`: `webhook_trigger` → `http_request` step `step` POSTing `{"event": input.id}`
/// to `{{ env.CRM }}{path}` with `Idempotency-Key: key` (a template).
fn webhook_then_post(
    id: &str,
    step: &str,
    path: &str,
    key: &str,
    retries: u32,
    timeout_s: u64,
) -> Value {
    json!({
        "id": id, "name": id, "version": 1,
        "steps": [
            {"id": "hook", "kind": "webhook_trigger", "config": {}},
            {"id": step, "kind": "http_request",
             "config": {"method": "POST", "url": format!("{{{{ env.CRM }}}}{path}"),
                        "headers": {"Idempotency-Key": key},
                        "body": {"event": "{{ input.id }}"},
                        "retries": retries, "timeout_s": timeout_s}}
        ],
        "edges": [{"from": "hook", "to": step}]
    })
}

#[derive(Default)]
struct Ledger {
    /// key → run ids answered 202.
    accepted: BTreeMap<String, Vec<String>>,
    /// key → run ids answered `duplicate: true`.
    duplicates: BTreeMap<String, BTreeSet<String>>,
    sent: BTreeSet<String>,
}

/// One client: each new event goes to two different processes at once (the at-least-once
/// sender's retry landing elsewhere), now and then a third copy later.
async fn client_loop(
    id: usize,
    seed: u64,
    urls: Arc<RwLock<Vec<String>>>,
    stop: Arc<AtomicBool>,
    next_key: Arc<AtomicUsize>,
    ledger: Arc<Mutex<Ledger>>,
) {
    let client = probe();
    let mut rng = StdRng::seed_from_u64(seed ^ (id as u64 + 1).wrapping_mul(0x9E37_79B9));
    while !stop.load(Ordering::SeqCst) {
        let key = format!("evt-{}", next_key.fetch_add(1, Ordering::SeqCst));
        ledger.lock().unwrap().sent.insert(key.clone());
        let targets: Vec<String> = {
            let urls = urls.read().unwrap();
            let a = rng.gen_range(0..urls.len());
            let b = (a + rng.gen_range(1..urls.len())) % urls.len();
            let mut t = vec![urls[a].clone(), urls[b].clone()];
            if rng.gen_bool(0.2) {
                t.push(urls[rng.gen_range(0..urls.len())].clone());
            }
            t
        };
        let sends = targets.into_iter().map(|base| {
            let client = client.clone();
            let key = key.clone();
            async move {
                client
                    .post(format!("{base}/hooks/storm"))
                    .header("idempotency-key", &key)
                    .json(&json!({"id": key, "type": "invoice.paid"}))
                    .send()
                    .await
            }
        });
        for resp in futures_util::future::join_all(sends).await {
            // Killed mid-request or down: the outcome is unknown, which is allowed.
            let Ok(r) = resp else { continue };
            let status = r.status().as_u16();
            let Ok(body) = r.json::<Value>().await else {
                continue;
            };
            let run_id = body["run_id"].as_str().unwrap_or_default().to_string();
            let mut l = ledger.lock().unwrap();
            match (status, body["duplicate"].as_bool()) {
                (202, Some(false)) => l.accepted.entry(key.clone()).or_default().push(run_id),
                (200, Some(true)) => {
                    l.duplicates.entry(key.clone()).or_default().insert(run_id);
                }
                (503, _) => {}
                other => panic!("unexpected answer for {key}: {other:?} {body}"),
            }
        }
    }
}

async fn runs_of(store: &PgStore, q: RunQuery) -> Vec<RunRecord> {
    let mut out = Vec::new();
    let mut cursor = None;
    for _ in 0..100_000 {
        let page = store
            .list_runs(&RunQuery {
                limit: 500,
                cursor,
                ..q.clone()
            })
            .await
            .unwrap();
        for s in &page.runs {
            out.push(store.get_run(&s.id).await.unwrap().expect("listed run"));
        }
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_processes_one_database_sigkill_storm_keeps_every_promise() {
    let seed: u64 = std::env::var("FLUXO_SCALE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    let storm = Duration::from_secs(
        std::env::var("FLUXO_SCALE_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(8),
    );
    eprintln!("scale-out seed: {seed} (FLUXO_SCALE_SEED={seed} replays it)");
    let mut rng = StdRng::seed_from_u64(seed);

    let pg = TestPg::shared();
    let store_url = pg.fresh_db().await;
    // `fluxo db migrate` creates the schema (the servers would too, at start).
    let migrate = std::process::Command::new(env!("CARGO_BIN_EXE_fluxo"))
        .args(["db", "migrate", "--store", &store_url])
        .output()
        .unwrap();
    assert!(
        migrate.status.success(),
        "fluxo db migrate: {}",
        String::from_utf8_lossy(&migrate.stderr)
    );

    let tmp = tempfile::tempdir().unwrap();
    workflow(tmp.path());
    let (crm, effects) = destination().await;
    let mut cluster = Cluster::new(tmp.path(), &store_url, crm);
    let probe = probe();
    for i in 0..PROCESSES {
        let p = cluster.spawn(i);
        cluster.procs.push(p);
        cluster.ready(i, &probe).await;
    }
    let urls = Arc::new(RwLock::new(
        cluster
            .procs
            .iter()
            .map(|p| p.url.clone())
            .collect::<Vec<_>>(),
    ));
    let stop = Arc::new(AtomicBool::new(false));
    let next_key = Arc::new(AtomicUsize::new(0));
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            tokio::spawn(client_loop(
                i,
                seed,
                urls.clone(),
                stop.clone(),
                next_key.clone(),
                ledger.clone(),
            ))
        })
        .collect();

    // Kill a random process now and then; restart it a moment later (a new instance: the
    // dead one's leases are left to expire).
    let started = Instant::now();
    let mut kills: Vec<i64> = Vec::new();
    while started.elapsed() < storm {
        tokio::time::sleep(Duration::from_millis(rng.gen_range(700..1_500))).await;
        let i = rng.gen_range(0..PROCESSES);
        cluster.procs[i].child.kill().expect("SIGKILL");
        cluster.procs[i].child.wait().unwrap();
        kills.push(chrono::Utc::now().timestamp_millis());
        tokio::time::sleep(Duration::from_millis(rng.gen_range(50..400))).await;
        cluster.procs[i] = cluster.spawn(i);
        cluster.ready(i, &probe).await;
        urls.write().unwrap()[i] = cluster.procs[i].url.clone();
    }
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.await.expect("a client panicked (unexpected answer)");
    }

    // Every run ends: the survivors drain the queue and recover what the dead left running.
    // A longer storm leaves a longer queue (12 workers, each run ~150 ms at the destination),
    // so the bound is on progress: some run must end at least every `stall` (a run stuck
    // `queued` or `running` stops the count from falling, whatever the backlog).
    let store = PgStore::connect(&store_url).await.unwrap();
    let stall = Duration::from_secs(LEASE_S * 5 + 30);
    let (mut fewest, mut progressed) = (usize::MAX, Instant::now());
    loop {
        let mut open = 0;
        for status in [RunStatus::Queued, RunStatus::Running] {
            open += store.run_ids_with_status(status).await.unwrap().len();
        }
        if open == 0 {
            break;
        }
        if open < fewest {
            (fewest, progressed) = (open, Instant::now());
        }
        assert!(
            progressed.elapsed() < stall,
            "{open} runs still queued or running, none ended for {stall:?} after the storm"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A run whose holders were killed twice while it ran is quarantined (issue 42: a storm
    // of outside kills looks like a crash loop); an operator resumes it, as after a fix.
    let mut by_hand = std::collections::BTreeSet::new();
    for id in store.run_ids_with_status(RunStatus::Failed).await.unwrap() {
        let run = store.get_run(&id).await.unwrap().expect("a failed run");
        if run.error.as_ref().map(|e| e.code.as_str()) != Some("quarantined") {
            continue;
        }
        let r = probe
            .post(format!("{}/api/v1/runs/{id}/resume", cluster.procs[0].url))
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("prefer", "respond-async")
            .send()
            .await
            .expect("resume a quarantined run");
        let status = r.status();
        let answer: serde_json::Value = r.json().await.unwrap_or_default();
        assert!(status.is_success(), "resuming quarantined {id}: {answer}");
        let resume = answer["id"].as_str().or(answer["run_id"].as_str());
        by_hand.insert(resume.expect("the resume's id").to_string());
    }
    let quarantined = by_hand.len();
    let (mut fewest, mut progressed) = (usize::MAX, Instant::now());
    loop {
        let mut open = 0;
        for status in [RunStatus::Queued, RunStatus::Running] {
            open += store.run_ids_with_status(status).await.unwrap().len();
        }
        if open == 0 {
            break;
        }
        if open < fewest {
            (fewest, progressed) = (open, Instant::now());
        }
        assert!(
            progressed.elapsed() < stall,
            "{open} resumes still queued or running after {stall:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let ledger = std::mem::take(&mut *ledger.lock().unwrap());
    let runs = runs_of(
        &store,
        RunQuery {
            workflow: Some("storm".into()),
            ..Default::default()
        },
    )
    .await;
    let mut lineages: BTreeMap<String, Vec<&RunRecord>> = BTreeMap::new();
    for r in &runs {
        lineages.entry(r.root().to_string()).or_default().push(r);
    }
    let mut roots_by_key: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (root, members) in &lineages {
        let first = members
            .iter()
            .find(|r| r.id == *root)
            .expect("the root run");
        let key = first
            .idempotency_key
            .clone()
            .expect("a webhook run has its key");
        roots_by_key.entry(key).or_default().push(root.clone());
    }
    let mut problems = Vec::new();
    for (key, roots) in &roots_by_key {
        if roots.len() != 1 {
            problems.push(format!(
                "key {key} has {} run lineages: {roots:?}",
                roots.len()
            ));
        }
    }
    for (key, ids) in &ledger.accepted {
        if ids.len() != 1 {
            problems.push(format!(
                "key {key} was answered 202 {} times: {ids:?}",
                ids.len()
            ));
        }
        match roots_by_key.get(key) {
            Some(roots) if roots == ids => {}
            other => problems.push(format!(
                "key {key} answered 202 with {ids:?} but its lineages are {other:?}"
            )),
        }
        if !effects.lock().unwrap().contains_key(&format!("deal-{key}")) {
            problems.push(format!(
                "key {key} was accepted but never reached the destination"
            ));
        }
    }
    for (key, dups) in &ledger.duplicates {
        for d in dups {
            if roots_by_key.get(key) != Some(&vec![d.clone()]) {
                problems.push(format!(
                    "key {key}: duplicate named {d}, lineages {:?}",
                    roots_by_key.get(key)
                ));
            }
        }
    }
    let mut statuses: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut resumed = 0;
    let mut takeover_ms: Vec<i64> = Vec::new();
    for (root, members) in &lineages {
        for r in members {
            *statuses.entry(r.status.as_str()).or_default() += 1;
            if r.trigger == Trigger::Resume && !by_hand.contains(&r.id) {
                resumed += 1;
                let at = r.created_at.0;
                if let Some(k) = kills.iter().rev().find(|k| **k <= at) {
                    takeover_ms.push(at - k);
                }
            }
        }
        let newest = members
            .iter()
            .max_by_key(|r| (r.created_at.0, r.id.clone()))
            .unwrap();
        if newest.status != RunStatus::Succeeded {
            problems.push(format!(
                "lineage {root}: its newest run {} ended {:?} ({:?})",
                newest.id, newest.status, newest.error
            ));
        }
    }
    let slowest = takeover_ms.iter().copied().max().unwrap_or(0);
    println!(
        "scale-out: {PROCESSES} processes, {} SIGKILLs in {:.1} s; {} keys sent by {CLIENTS} \
         clients, {} answered 202, {} with duplicate answers; {} runs in {} lineages, {resumed} \
         resumed by another process (takeover after a kill: slowest {slowest} ms), {quarantined} \
         quarantined and resumed by hand; by status {statuses:?}",
        kills.len(),
        started.elapsed().as_secs_f64(),
        ledger.sent.len(),
        ledger.accepted.len(),
        ledger.duplicates.len(),
        runs.len(),
        lineages.len(),
    );
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(
        ledger.accepted.len() > 50,
        "the storm was too small to prove anything"
    );
    assert!(
        !ledger.duplicates.is_empty(),
        "no copy of an event was answered as a duplicate"
    );
    // Lease + the orphan scan period (a quarter lease) + polling and scheduling slack.
    let bound = (LEASE_S * 1000) as i64 * 5 / 4 + 1_500;
    assert!(
        slowest <= bound,
        "a dead process's run was taken over {slowest} ms after the kill (bound {bound} ms)"
    );
}

/// Schedule ticks fire once across the cluster (SPEC §8): three processes schedule the same
/// every-second workflow; each tick is claimed like a webhook key, so each has one run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedule_ticks_fire_once_across_three_processes() {
    let pg = TestPg::shared();
    let store_url = pg.fresh_db().await;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("workflows")).unwrap();
    let wf = json!({
        "id": "tick", "name": "tick", "version": 1,
        "steps": [
            {"id": "every", "kind": "schedule_trigger",
             "config": {"cron": "* * * * * *", "overlap": "allow"}},
            {"id": "shape", "kind": "transform",
             "config": {"fields": {"at": "{{ input.scheduled_at }}"}}}
        ],
        "edges": [{"from": "every", "to": "shape"}]
    });
    std::fs::write(tmp.path().join("workflows/tick.json"), wf.to_string()).unwrap();
    let mut cluster = Cluster::new(tmp.path(), &store_url, "http://127.0.0.1:9");
    let probe = probe();
    for i in 0..PROCESSES {
        let p = cluster.spawn(i);
        cluster.procs.push(p);
        cluster.ready(i, &probe).await;
    }
    let store = PgStore::connect(&store_url).await.unwrap();
    let query = RunQuery {
        workflow: Some("tick".into()),
        ..Default::default()
    };
    // Bounded wait for a few ticks with all three processes up.
    let deadline = Instant::now() + Duration::from_secs(20);
    while runs_of(&store, query.clone()).await.len() < 4 {
        assert!(
            Instant::now() < deadline,
            "the schedule never fired 4 times"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(cluster);
    let runs = runs_of(&store, query).await;
    let mut by_tick: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in &runs {
        assert_eq!(r.trigger, Trigger::Schedule);
        let key = r.idempotency_key.clone().expect("a tick key");
        by_tick.entry(key).or_default().push(r.id.clone());
    }
    let twice: Vec<_> = by_tick.iter().filter(|(_, ids)| ids.len() > 1).collect();
    assert!(
        twice.is_empty(),
        "ticks that fired more than once: {twice:?}"
    );
    assert!(by_tick.len() >= 4);
}

/// A run executes the definition that accepted it, whichever process executes it. Process 0
/// (version 2 of the workflow in its folder, its one worker held by a run waiting on a gated
/// destination) accepts; process 1 (version 1 in its own folder) takes it from the shared
/// queue and executes it. Before, process 1 ran its own version 1 and recorded it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_executes_the_version_that_accepted_it_on_any_process() {
    let pg = TestPg::shared();
    let store_url = pg.fresh_db().await;
    let tmp = tempfile::tempdir().unwrap();
    // The gate: answers once released; counts the requests it holds.
    let (release, released) = tokio::sync::watch::channel(false);
    let held = Arc::new(AtomicUsize::new(0));
    let h = held.clone();
    let gate = axum::Router::new().route(
        "/hold",
        axum::routing::post(move || {
            let (h, mut released) = (h.clone(), released.clone());
            async move {
                h.fetch_add(1, Ordering::SeqCst);
                let _ = released.wait_for(|r| *r).await;
                "{}"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let gate_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, gate).await });

    let version = |v: u64, says: &str| {
        json!({
            "id": "versioned", "name": "versioned", "version": v,
            "steps": [
                {"id": "hook", "kind": "webhook_trigger", "config": {}},
                {"id": "shape", "kind": "transform", "config": {"fields": {"says": says}}}
            ],
            "edges": [{"from": "hook", "to": "shape"}]
        })
    };
    let hold = webhook_then_post("hold", "call", "/hold", "hold-{{ run.id }}", 0, 60);
    let folders = [tmp.path().join("wf-v2"), tmp.path().join("wf-v1")];
    for (dir, wf) in folders.iter().zip([version(2, "two"), version(1, "one")]) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("versioned.json"), wf.to_string()).unwrap();
    }
    std::fs::write(folders[0].join("hold.json"), hold.to_string()).unwrap();
    let mut cluster = Cluster::new(tmp.path(), &store_url, gate_url);
    let probe = probe();
    let deliver = |url: String, workflow: &'static str, key: &'static str| {
        let probe = probe.clone();
        async move {
            let res = probe
                .post(format!("{url}/hooks/{workflow}"))
                .header("content-type", "application/json")
                .header("idempotency-key", key)
                .body(r#"{"id": "evt"}"#)
                .send()
                .await
                .unwrap();
            assert_eq!(res.status(), 202, "delivery {key}");
            let body: Value = res.json().await.unwrap();
            body["run_id"].as_str().unwrap().to_string()
        }
    };
    // Process 0 alone first, its one worker held by `hold` before process 1 exists (so
    // process 1 never takes that run, whose workflow its folder lacks).
    let p = cluster.spawn_with(0, &folders[0], 1);
    cluster.procs.push(p);
    cluster.ready(0, &probe).await;
    deliver(cluster.procs[0].url.clone(), "hold", "hold").await;
    let deadline = Instant::now() + Duration::from_secs(20);
    while held.load(Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < deadline,
            "the held run never reached the gate"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let p = cluster.spawn_with(1, &folders[1], 2);
    cluster.procs.push(p);
    cluster.ready(1, &probe).await;
    let accepted = [
        deliver(cluster.procs[0].url.clone(), "versioned", "to-v2").await,
        deliver(cluster.procs[1].url.clone(), "versioned", "to-v1").await,
    ];
    // Process 0's worker is held: process 1 executes both. Bounded wait.
    let store = PgStore::connect(&store_url).await.unwrap();
    let mut done = Vec::new();
    for id in &accepted {
        loop {
            let run = store.get_run(id).await.unwrap().expect("the accepted run");
            if run.status == RunStatus::Succeeded {
                done.push(run);
                break;
            }
            assert!(
                Instant::now() < deadline,
                "run {id} did not succeed: {:?}",
                run.status
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    assert_eq!(
        held.load(Ordering::SeqCst),
        1,
        "process 0's worker was held throughout"
    );
    let said = |r: &RunRecord| {
        r.steps
            .iter()
            .find(|s| s.step_id == "shape")
            .and_then(|s| s.output.clone())
    };
    assert_eq!(
        done[0].workflow_version, 2,
        "accepted by the process on version 2"
    );
    assert_eq!(said(&done[0]), Some(json!({"says": "two"})));
    assert_eq!(done[0].snapshot["version"], 2);
    assert_eq!(
        done[1].workflow_version, 1,
        "accepted by the process on version 1"
    );
    assert_eq!(said(&done[1]), Some(json!({"says": "one"})));
    let _ = release.send(true);
}

/// A database outage: a delivery is answered `503` with `Retry-After` (on PostgreSQL a failed
/// batch left nothing to undo), `/readyz` says `503` while `/healthz` says the process is
/// alive, and the sender's retries after the outage get the delivery accepted once: one run
/// for the key, executed, its effect delivered once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_during_a_database_outage_is_refused_and_its_retry_runs_once() {
    let pg = TestPg::start();
    let store_url = pg.fresh_db().await;
    let tmp = tempfile::tempdir().unwrap();
    workflow(tmp.path());
    let (crm, seen) = destination().await;
    let mut cluster = Cluster::new(tmp.path(), &store_url, crm);
    let p = cluster.spawn(0);
    cluster.procs.push(p);
    let probe = probe();
    cluster.ready(0, &probe).await;
    // Longer than the pool's wait for a connection (5 s): the 503 comes after it.
    let sender = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let url = format!("{}/hooks/storm", cluster.procs[0].url);
    let deliver = |key: &'static str| {
        sender
            .post(&url)
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .body(format!(r#"{{"id": "{key}"}}"#))
            .send()
    };
    assert_eq!(deliver("before").await.unwrap().status(), 202);
    let ready = |url: String| {
        let sender = sender.clone();
        async move {
            let res = sender.get(format!("{url}/readyz")).send().await.unwrap();
            res.status().as_u16()
        }
    };
    let base = cluster.procs[0].url.clone();
    assert_eq!(
        ready(base.clone()).await,
        200,
        "ready while the database answers"
    );

    pg.stop("fast");
    let t0 = Instant::now();
    let refused = deliver("during").await.unwrap();
    // Printed, not asserted (the README quotes it): a stopped server is refused at once.
    eprintln!(
        "outage: answered {} in {:?}",
        refused.status(),
        t0.elapsed()
    );
    assert_eq!(
        refused.status(),
        503,
        "a delivery while the database is down"
    );
    assert!(refused.headers().contains_key("retry-after"));
    assert_eq!(
        refused.headers()["content-type"],
        "application/problem+json"
    );
    // Alive, not ready.
    let alive = sender.get(format!("{base}/healthz")).send().await.unwrap();
    assert_eq!(alive.status(), 200);
    assert_eq!(
        ready(base.clone()).await,
        503,
        "not ready while the database is down"
    );
    pg.start_again();

    // The sender retries, as senders do, until it is answered 2xx (bounded).
    let deadline = Instant::now() + Duration::from_secs(60);
    let run_id = loop {
        let res = deliver("during").await.unwrap();
        match res.status().as_u16() {
            200 | 202 => {
                let body: Value = res.json().await.unwrap();
                break body["run_id"].as_str().unwrap().to_string();
            }
            503 => {}
            other => panic!("a retry after the outage answered {other}"),
        }
        assert!(
            Instant::now() < deadline,
            "no retry accepted after the outage"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let store = PgStore::connect(&store_url).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let runs = runs_of(
            &store,
            RunQuery {
                key: Some("during".into()),
                ..RunQuery::default()
            },
        )
        .await;
        assert_eq!(runs.len(), 1, "one run for the key: {runs:?}");
        assert_eq!(runs[0].id, run_id);
        if runs[0].status == RunStatus::Succeeded {
            break;
        }
        assert!(
            !runs[0].status.is_final(),
            "the run ended {:?}",
            runs[0].status
        );
        assert!(Instant::now() < deadline, "the accepted run never finished");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(seen.lock().unwrap().get("deal-during"), Some(&1));
    assert_eq!(ready(base).await, 200, "ready again after the outage");
}
