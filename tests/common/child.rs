//! A real `fluxo serve` child process, for the tests that SIGKILL it, read its log or use the
//! binary's own flags (`tests/crash.rs`, `chaos.rs`, `recovery_kill.rs`, `secrets.rs`): a
//! free loopback port, the command with the usual flags, and a bounded wait until it answers.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A free port on 127.0.0.1 (bound, then released for the child to take).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `fluxo serve --addr 127.0.0.1:<port> --workflows <workflows> --data-dir <data> --token
/// <token>`, stdin and stdout closed, its log (stderr) appended to `log`. Add env and flags,
/// then spawn.
pub fn serve_command(port: u16, workflows: &Path, data: &Path, token: &str, log: &Path) -> Command {
    serve_args(
        Command::new(env!("CARGO_BIN_EXE_fluxo")),
        port,
        workflows,
        data,
        token,
        log,
    )
}

/// [`serve_command`] under `prlimit --as=<bytes>`: an address space of `bytes`, so a test of
/// a runaway allocation fails the child (an abort) instead of eating the machine.
#[allow(dead_code)]
pub fn serve_command_limited(
    as_bytes: u64,
    port: u16,
    workflows: &Path,
    data: &Path,
    token: &str,
    log: &Path,
) -> Command {
    let mut cmd = Command::new("prlimit");
    cmd.arg(format!("--as={as_bytes}"))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_fluxo"));
    serve_args(cmd, port, workflows, data, token, log)
}

fn serve_args(
    mut cmd: Command,
    port: u16,
    workflows: &Path,
    data: &Path,
    token: &str,
    log: &Path,
) -> Command {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("open the serve log");
    cmd.args(["serve", "--addr", &format!("127.0.0.1:{port}")])
        .arg("--workflows")
        .arg(workflows)
        .arg("--data-dir")
        .arg(data)
        .args(["--token", token])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    cmd
}

/// Wait (at most 20 s) until `GET {url}/healthz` answers 2xx; panics with the log if the child
/// exits first or never answers.
pub async fn wait_ready(client: &reqwest::Client, url: &str, child: &mut Child, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Ok(r) = client.get(format!("{url}/healthz")).send().await {
            if r.status().is_success() {
                return;
            }
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "fluxo serve exited ({status}) before it was ready:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!(
        "fluxo serve was not ready in 20 s:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

/// `GET {url}/api/v1/runs/{run_id}` (with bearer `token`) until the run is final
/// (`succeeded`, `failed`, `timed_out` or `interrupted`), at most 30 s; answers its detail.
#[allow(dead_code)]
pub async fn wait_run_final(
    client: &reqwest::Client,
    url: &str,
    token: &str,
    run_id: &str,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let d: serde_json::Value = client
            .get(format!("{url}/api/v1/runs/{run_id}"))
            .header("authorization", format!("Bearer {token}"))
            .send()
            .await
            .expect("GET the run")
            .json()
            .await
            .expect("the run as JSON");
        if matches!(
            d["status"].as_str(),
            Some("succeeded" | "failed" | "timed_out" | "interrupted")
        ) {
            return d;
        }
        assert!(Instant::now() < deadline, "the run did not finish: {d}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
