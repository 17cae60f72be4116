//! Crash test: a real `fluxo serve` child process takes a storm of webhook deliveries (fresh
//! keys and repeats, from concurrent clients) and is killed with SIGKILL at random moments,
//! many times, restarted on the same data dir each time. Afterwards the store must open cleanly
//! and hold exactly the promises the server made:
//!
//! * a key answered `202` has exactly one run, the one the answer named;
//! * no key ever got two `202`s, and no key has two runs;
//! * every `duplicate: true` answer names the run of its key, and that run exists (a
//!   duplicate is only answered once the claim it reports is durable);
//! * after a last restart (and a graceful stop) every run ends `succeeded` or `interrupted`
//!   (recovery: queued runs execute, running ones are never re-executed).
//!
//! Loopback only; every loop is bounded. `FLUXO_CRASH_SEED` replays a storm.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};

mod common;

use common::child::{free_port, serve_command, wait_ready};
use fluxo::run::RunStatus;
use fluxo::store::{RunQuery, RunStore, SledConfig, SledStore};

const TOKEN: &str = "crash-test-token-0123456789abcdef0123456789";
const CLIENTS: usize = 12;
const KILLS: usize = 20;

fn spawn_server(data: &Path, workflows: &Path, log: &Path) -> (Child, String) {
    let port = free_port();
    let child = serve_command(port, workflows, data, TOKEN, log)
        .args(["--cache-mb", "16"])
        // Every run must stay for the count at the end: no retention pruning (the default
        // keeps 10,000 per workflow, fewer than a fast machine's storm creates).
        .args(["--retention-runs", "100000000"])
        .env("FLUXO_LOG", "warn")
        .spawn()
        .expect("spawn fluxo serve");
    (child, format!("http://127.0.0.1:{port}"))
}

#[derive(Default)]
struct Ledger {
    /// key → run ids answered 202 (must be one at most).
    accepted: BTreeMap<String, Vec<String>>,
    /// key → run ids answered `duplicate: true`.
    duplicates: BTreeMap<String, BTreeSet<String>>,
    /// Every key sent at least once.
    sent: BTreeSet<String>,
}

#[derive(Default)]
struct Counts {
    deliveries: AtomicUsize,
    accepted: AtomicUsize,
    duplicates: AtomicUsize,
    unavailable: AtomicUsize,
    failed: AtomicUsize,
    other: AtomicUsize,
}

/// One client: fresh keys and repeats of recent keys (often of a key another client is
/// sending at the same moment), until told to stop.
async fn client_loop(
    id: usize,
    seed: u64,
    url: Arc<RwLock<String>>,
    stop: Arc<AtomicBool>,
    next_key: Arc<AtomicUsize>,
    ledger: Arc<Mutex<Ledger>>,
    counts: Arc<Counts>,
) {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(3))
        .pool_max_idle_per_host(1)
        .build()
        .unwrap();
    let mut rng = StdRng::seed_from_u64(seed ^ (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    for _ in 0..1_000_000 {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let issued = next_key.load(Ordering::SeqCst);
        let n = if issued == 0 || rng.gen_bool(0.45) {
            next_key.fetch_add(1, Ordering::SeqCst)
        } else {
            // Mostly one of the last few keys (races with its first delivery), sometimes any.
            let back = if rng.gen_bool(0.8) {
                rng.gen_range(0..issued.min(8))
            } else {
                rng.gen_range(0..issued)
            };
            issued - 1 - back
        };
        let key = format!("evt-{n}");
        ledger.lock().unwrap().sent.insert(key.clone());
        let body = json!({"id": key, "type": "invoice.paid", "pad": "x".repeat(512)});
        let base = url.read().unwrap().clone();
        counts.deliveries.fetch_add(1, Ordering::Relaxed);
        let resp = client
            .post(format!("{base}/hooks/storm"))
            .header("idempotency-key", &key)
            .json(&body)
            .send()
            .await;
        let resp = match resp {
            Ok(r) => r,
            Err(_) => {
                // Killed mid-request, or down: the outcome is unknown, which is allowed.
                counts.failed.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(rng.gen_range(5..30))).await;
                continue;
            }
        };
        let status = resp.status().as_u16();
        let Ok(v) = resp.json::<Value>().await else {
            counts.failed.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        match (status, v["duplicate"].as_bool(), v["run_id"].as_str()) {
            (202, Some(false), Some(run)) => {
                counts.accepted.fetch_add(1, Ordering::Relaxed);
                ledger
                    .lock()
                    .unwrap()
                    .accepted
                    .entry(key)
                    .or_default()
                    .push(run.to_string());
            }
            (200, Some(true), Some(run)) => {
                counts.duplicates.fetch_add(1, Ordering::Relaxed);
                ledger
                    .lock()
                    .unwrap()
                    .duplicates
                    .entry(key)
                    .or_default()
                    .insert(run.to_string());
            }
            (503, _, _) => {
                counts.unavailable.fetch_add(1, Ordering::Relaxed);
            }
            _ => {
                counts.other.fetch_add(1, Ordering::Relaxed);
                panic!("unexpected answer {status}: {v}");
            }
        }
    }
}

fn open_store(data: &Path) -> SledStore {
    let mut config = SledConfig::new(data.join("store"));
    config.cache_capacity_bytes = 16 * 1024 * 1024;
    SledStore::open(&config).expect("the store opens cleanly after the storm")
}

async fn runs_with_key(store: &SledStore, key: &str) -> Vec<String> {
    store
        .list_runs(&RunQuery {
            workflow: Some("storm".into()),
            key: Some(key.into()),
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap()
        .runs
        .into_iter()
        .map(|r| r.id)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_storm_keeps_every_promise() {
    let seed: u64 = std::env::var("FLUXO_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("crash test seed: {seed} (FLUXO_CRASH_SEED={seed} replays it)");
    let mut rng = StdRng::seed_from_u64(seed);

    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let workflows = tmp.path().join("workflows");
    let log = tmp.path().join("serve.log");
    std::fs::create_dir_all(&workflows).unwrap();
    let wf = json!({
        "id": "storm", "name": "storm", "version": 1,
        "steps": [
            {"id": "hook", "kind": "webhook_trigger", "config": {}},
            {"id": "shape", "kind": "transform", "config": {"fields": {"event": "{{ input.id }}", "kind": "{{ input.type }}"}}}
        ],
        "edges": [{"from": "hook", "to": "shape"}]
    });
    std::fs::write(workflows.join("storm.json"), wf.to_string()).unwrap();

    let probe = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let (mut child, first_url) = spawn_server(&data, &workflows, &log);
    wait_ready(&probe, &first_url, &mut child, &log).await;

    let url = Arc::new(RwLock::new(first_url));
    let stop = Arc::new(AtomicBool::new(false));
    let next_key = Arc::new(AtomicUsize::new(0));
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let counts = Arc::new(Counts::default());
    let clients: Vec<_> = (0..CLIENTS)
        .map(|i| {
            tokio::spawn(client_loop(
                i,
                seed,
                url.clone(),
                stop.clone(),
                next_key.clone(),
                ledger.clone(),
                counts.clone(),
            ))
        })
        .collect();

    let started = Instant::now();
    for _ in 0..KILLS {
        tokio::time::sleep(Duration::from_millis(rng.gen_range(150..700))).await;
        child.kill().expect("SIGKILL");
        child.wait().unwrap();
        // Sometimes stay down a moment: clients see refused connections.
        if rng.gen_bool(0.3) {
            tokio::time::sleep(Duration::from_millis(rng.gen_range(10..100))).await;
        }
        let (c, u) = spawn_server(&data, &workflows, &log);
        child = c;
        *url.write().unwrap() = u.clone();
        wait_ready(&probe, &u, &mut child, &log).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.await.expect("a client panicked (unexpected answer)");
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let storm_secs = started.elapsed().as_secs_f64();

    // Last restart: recovery executes what was queued, then the server is killed again.
    let (mut child, u) = spawn_server(&data, &workflows, &log);
    wait_ready(&probe, &u, &mut child, &log).await;
    let mut drained = false;
    for _ in 0..500 {
        let page: Value = probe
            .get(format!("{u}/api/v1/runs?status=queued&limit=1"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let running: Value = probe
            .get(format!("{u}/api/v1/runs?status=running&limit=1"))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if page["runs"].as_array().unwrap().is_empty()
            && running["runs"].as_array().unwrap().is_empty()
        {
            drained = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(drained, "recovered queued runs did not execute");
    // A graceful stop (SIGTERM) this time, so the last finished runs are flushed: a SIGKILL
    // here could lose a final `succeeded` written less than a background flush ago (the run
    // would then come back `interrupted`, which is allowed but not what this check is about).
    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("send SIGTERM");
    assert!(term.success());
    let mut exited = false;
    for _ in 0..500 {
        if child.try_wait().unwrap().is_some() {
            exited = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if !exited {
        child.kill().unwrap();
        child.wait().unwrap();
        panic!("fluxo serve did not stop on SIGTERM within 10 s");
    }

    // The store opens cleanly and keeps every promise.
    let store = open_store(&data);
    let ledger = std::mem::take(&mut *ledger.lock().unwrap());
    let mut problems = Vec::new();
    for (key, ids) in &ledger.accepted {
        if ids.len() != 1 {
            problems.push(format!(
                "key {key} was accepted {} times: {ids:?}",
                ids.len()
            ));
        }
        let runs = runs_with_key(&store, key).await;
        if runs != vec![ids[0].clone()] {
            problems.push(format!(
                "key {key} answered 202 with {} but has runs {runs:?}",
                ids[0]
            ));
        }
    }
    for (key, dups) in &ledger.duplicates {
        let runs = runs_with_key(&store, key).await;
        for d in dups {
            if runs != vec![d.clone()] {
                problems.push(format!(
                    "key {key} answered duplicate of {d} but has runs {runs:?}"
                ));
            }
            if let Some(acc) = ledger.accepted.get(key) {
                if !acc.contains(d) {
                    problems.push(format!(
                        "key {key}: duplicate names {d}, the 202 named {acc:?}"
                    ));
                }
            }
        }
    }
    let mut statuses: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut runs_total = 0;
    for key in &ledger.sent {
        let runs = runs_with_key(&store, key).await;
        if runs.len() > 1 {
            problems.push(format!("key {key} has {} runs: {runs:?}", runs.len()));
        }
        for id in runs {
            runs_total += 1;
            let r = store
                .get_run(&id)
                .await
                .unwrap()
                .expect("listed run exists");
            *statuses.entry(r.status.as_str()).or_default() += 1;
            if !matches!(r.status, RunStatus::Succeeded | RunStatus::Interrupted) {
                problems.push(format!("run {id} ended {:?}", r.status));
            }
        }
    }
    let all_runs = store
        .list_runs(&RunQuery {
            workflow: Some("storm".into()),
            limit: 500,
            ..Default::default()
        })
        .await
        .unwrap();
    let mut listed = all_runs.runs.len();
    let mut cursor = all_runs.next_cursor;
    for _ in 0..10_000 {
        let Some(c) = cursor else { break };
        let page = store
            .list_runs(&RunQuery {
                workflow: Some("storm".into()),
                limit: 500,
                cursor: Some(c),
                ..Default::default()
            })
            .await
            .unwrap();
        listed += page.runs.len();
        cursor = page.next_cursor;
    }

    let dup_keys_without_202 = ledger
        .duplicates
        .keys()
        .filter(|k| !ledger.accepted.contains_key(*k))
        .count();
    println!(
        "crash test: {KILLS} SIGKILLs in {storm_secs:.1} s; {} deliveries from {CLIENTS} clients \
         over {} keys; {} answered 202, {} duplicate (200), {} 503, {} without an answer \
         (killed mid-request or down); runs in the store: {listed} ({runs_total} for sent keys; \
         by status {statuses:?}); {} keys whose 202 was lost to a kill but whose duplicates \
         named their run",
        counts.deliveries.load(Ordering::Relaxed),
        ledger.sent.len(),
        counts.accepted.load(Ordering::Relaxed),
        counts.duplicates.load(Ordering::Relaxed),
        counts.unavailable.load(Ordering::Relaxed),
        counts.failed.load(Ordering::Relaxed),
        dup_keys_without_202,
    );
    assert_eq!(
        listed, runs_total,
        "every run belongs to a key that was sent"
    );
    assert!(
        counts.accepted.load(Ordering::Relaxed) > 100,
        "the storm was too small to prove anything"
    );
    assert!(counts.duplicates.load(Ordering::Relaxed) > 50);
    assert!(
        problems.is_empty(),
        "{} broken promises (seed {seed}):\n{}",
        problems.len(),
        problems.join("\n")
    );
}
