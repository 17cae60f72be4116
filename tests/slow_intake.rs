//! Bounded intake (issue 42, item 1) against a real `fluxo serve` child process: 600 slow
//! uploads, as the probe sent them (a `POST /hooks/<id>` head with `Content-Length: 1000000`,
//! then one body byte every few seconds), all from 127.0.0.1 like the legitimate clients, and
//! reconnecting whenever the server lets one go. Meanwhile `/healthz` and a real webhook
//! delivery (202, and its run exists) must each answer within 3 s.
//!
//! The rules that make room are documented in `src/server/listen.rs` and
//! `src/server/intake.rs`. Loopback only; every loop is bounded (the attack stops after the
//! probes, at most 20 s in all).

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::child::{free_port, serve_command, wait_ready};
use common::server::hook_workflow;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const TOKEN: &str = "slow-intake-test-token-0123456789abcdef0123456789";
const ATTACKERS: usize = 600;
/// Every probe must be answered within this.
const WITHIN: Duration = Duration::from_secs(3);

/// Raise this process's soft open-file limit to its hard limit (the child inherits it): 600
/// attackers, their reconnections and the server's own side need more than the usual 1024.
fn raise_nofile() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a valid, owned struct.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
    }
    lim.rlim_cur
}

/// One slow uploader: connects, sends the head and `{`, then a byte every 2 s until the
/// server answers or closes; then it connects again (at most 200 times), until `stop`.
async fn slow_upload(
    addr: String,
    stop: Arc<AtomicBool>,
    open: Arc<AtomicUsize>,
    answered: Arc<AtomicUsize>,
) {
    let head = format!(
        "POST /hooks/slow HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: 1000000\r\n\r\n{{"
    );
    for _ in 0..200 {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let Ok(Ok(mut c)) =
            tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(&addr)).await
        else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        if c.write_all(head.as_bytes()).await.is_err() {
            continue;
        }
        open.fetch_add(1, Ordering::Relaxed);
        let mut buf = [0u8; 1024];
        // At most 10 bytes (20 s) per connection.
        for _ in 0..10 {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            tokio::select! {
                r = c.read(&mut buf) => {
                    if let Ok(n) = r {
                        if n > 0 {
                            answered.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    break;
                }
                () = tokio::time::sleep(Duration::from_secs(2)) => {
                    if c.write_all(b" ").await.is_err() {
                        break;
                    }
                }
            }
        }
        open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// 600 slow uploads from 127.0.0.1 hold connections open; `/healthz` and a webhook delivery
/// (202, whose run exists) are each answered within 3 s, three times over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_uploads_leave_room_for_health_and_webhooks() {
    let nofile = raise_nofile();
    assert!(
        nofile >= 4 * ATTACKERS as u64,
        "the test needs an open-file limit of {} or more, it is {nofile}",
        4 * ATTACKERS
    );
    let tmp = tempfile::tempdir().unwrap();
    let workflows = tmp.path().join("workflows");
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&workflows).unwrap();
    for id in ["slow", "fast"] {
        std::fs::write(
            workflows.join(format!("{id}.json")),
            hook_workflow(id, json!({})).to_string(),
        )
        .unwrap();
    }
    let log = tmp.path().join("serve.log");
    let port = free_port();
    let mut child = serve_command(port, &workflows, &data, TOKEN, &log)
        .env("FLUXO_LOG", "warn")
        .spawn()
        .expect("spawn fluxo serve");
    let url = format!("http://127.0.0.1:{port}");
    let probe = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(0)
        .timeout(WITHIN)
        .build()
        .unwrap();
    wait_ready(&probe, &url, &mut child, &log).await;

    let addr = format!("127.0.0.1:{port}");
    let stop = Arc::new(AtomicBool::new(false));
    let open = Arc::new(AtomicUsize::new(0));
    let answered = Arc::new(AtomicUsize::new(0));
    let attackers: Vec<_> = (0..ATTACKERS)
        .map(|_| {
            tokio::spawn(slow_upload(
                addr.clone(),
                stop.clone(),
                open.clone(),
                answered.clone(),
            ))
        })
        .collect();
    // Until the attack is in place (at most 5 s): all 600 heads sent.
    let settle = Instant::now();
    while open.load(Ordering::Relaxed) < ATTACKERS && settle.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let in_place = open.load(Ordering::Relaxed);

    let mut failures = Vec::new();
    for round in 0..3 {
        let started = Instant::now();
        match probe.get(format!("{url}/healthz")).send().await {
            Ok(r) if r.status().is_success() => {
                eprintln!("round {round}: /healthz in {:?}", started.elapsed());
            }
            Ok(r) => failures.push(format!("round {round}: /healthz {}", r.status())),
            Err(e) => failures.push(format!(
                "round {round}: /healthz failed after {:?}: {e}",
                started.elapsed()
            )),
        }
        let started = Instant::now();
        let key = format!("evt-fast-{round}");
        match probe
            .post(format!("{url}/hooks/fast"))
            .header("idempotency-key", &key)
            .json(&json!({"id": key}))
            .send()
            .await
        {
            Ok(r) if r.status().as_u16() == 202 => {
                eprintln!("round {round}: webhook 202 in {:?}", started.elapsed());
                let v: serde_json::Value = r.json().await.unwrap();
                let run_id = v["run_id"].as_str().unwrap().to_string();
                let run = probe
                    .get(format!("{url}/api/v1/runs/{run_id}"))
                    .bearer_auth(TOKEN)
                    .send()
                    .await;
                match run {
                    Ok(r) if r.status().is_success() => {}
                    Ok(r) => failures.push(format!("round {round}: run {run_id}: {}", r.status())),
                    Err(e) => failures.push(format!("round {round}: run {run_id}: {e}")),
                }
            }
            Ok(r) => failures.push(format!(
                "round {round}: webhook {}: {}",
                r.status(),
                r.text().await.unwrap_or_default()
            )),
            Err(e) => failures.push(format!(
                "round {round}: webhook failed after {:?}: {e}",
                started.elapsed()
            )),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for a in attackers {
        a.abort();
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        failures.is_empty(),
        "with {in_place} of {ATTACKERS} slow uploads open ({} answered by the server): {failures:#?}",
        answered.load(Ordering::Relaxed)
    );
}
