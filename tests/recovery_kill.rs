//! Crash recovery with a real `fluxo serve` child process, SIGKILLed while its run's POST is in
//! flight at a destination that holds the request (SPEC §4 "Crash recovery"):
//!
//! * a keyed POST (`Idempotency-Key`) is safe to repeat: on restart the run is resumed
//!   automatically, and the destination sees the same key again;
//! * an unkeyed POST is not: the run becomes `interrupted`, the reason says why, and nothing
//!   is sent again;
//! * `--recover none` leaves even the keyed one to a person.
//!
//! Loopback only; every wait is bounded.

mod common;

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use common::child::{free_port, serve_command, wait_ready};
use common::{Action, Mock};
use serde_json::{json, Value};

const TOKEN: &str = "recovery-kill-token-0123456789abcdef0123456789";

fn workflow(keyed: bool) -> Value {
    let mut headers = json!({});
    if keyed {
        headers["Idempotency-Key"] = json!("deal-{{ input.id }}");
    }
    json!({
        "id": "wf", "name": "wf", "version": 1,
        "steps": [
            {"id": "hook", "kind": "webhook_trigger", "config": {}},
            {"id": "seen", "kind": "memory",
             "config": {"operation": "write", "namespace": "events", "key": "{{ input.id }}",
                        "allow_overwrite": false}},
            {"id": "route", "kind": "router",
             "config": {"routes": [{"name": "skip", "when": "steps.seen.output.written == false"}]}},
            {"id": "create", "kind": "http_request",
             "config": {"method": "POST", "url": "{{ env.CRM }}/deals", "headers": headers,
                        "body": {"event": "{{ input.id }}"}, "retries": 0, "timeout_s": 30}},
            {"id": "fail", "kind": "error_handler", "config": {"mode": "rethrow"}},
            {"id": "undo", "kind": "memory",
             "config": {"operation": "delete", "namespace": "events", "key": "{{ input.id }}"}}
        ],
        "edges": [
            {"from": "hook", "to": "seen"},
            {"from": "seen", "to": "route"},
            {"from": "route", "port": "default", "to": "create"},
            {"from": "create", "port": "error", "to": "fail"},
            {"from": "fail", "to": "undo"}
        ]
    })
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

impl Serve {
    async fn start(dir: &Path, crm: &str, extra: &[&str]) -> Serve {
        let port = free_port();
        let log = dir.join("serve.log");
        let mut child = serve_command(port, &dir.join("workflows"), &dir.join("data"), TOKEN, &log)
            .args(extra)
            .env("FLUXO_ENV_CRM", crm)
            .env("FLUXO_LOG", "warn")
            .spawn()
            .expect("spawn fluxo serve");
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap();
        let url = format!("http://127.0.0.1:{port}");
        wait_ready(&client, &url, &mut child, &log).await;
        Serve { child, url, client }
    }

    /// SIGKILL, no goodbye.
    fn kill(mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reaped");
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

    /// Poll a run until it is final (bounded).
    async fn final_run(&self, id: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(20);
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
}

/// Start a server, deliver one event, SIGKILL the server while the create POST is held at the
/// destination, restart it with `restart_args`; answers the restarted server, the run id and
/// the destination.
async fn kill_mid_post(
    keyed: bool,
    restart_args: &[&str],
) -> (tempfile::TempDir, Serve, String, Mock) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("workflows")).unwrap();
    std::fs::write(
        dir.path().join("workflows/wf.json"),
        serde_json::to_string_pretty(&workflow(keyed)).unwrap(),
    )
    .unwrap();
    // The first create is held (never answered); later ones are answered.
    let crm = Mock::start([Action::Hang], Action::json(201, json!({"id": "deal_1"}))).await;
    let serve = Serve::start(dir.path(), &crm.url(), &[]).await;
    let r = serve
        .client
        .post(format!("{}/hooks/wf", serve.url))
        .header("idempotency-key", "evt_1")
        .header("content-type", "application/json")
        .body(json!({"id": "evt_1"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let run_id = r.json::<Value>().await.unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    while crm.count() == 0 {
        assert!(Instant::now() < deadline, "the create POST never arrived");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    serve.kill();
    let serve = Serve::start(dir.path(), &crm.url(), restart_args).await;
    (dir, serve, run_id, crm)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_during_a_keyed_post_is_resumed_with_the_same_key() {
    let (_dir, serve, run_id, crm) = kill_mid_post(true, &[]).await;
    let original = serve.final_run(&run_id).await;
    assert_eq!(original["status"], "interrupted", "{original}");
    assert_eq!(original["error"]["code"], "interrupted");
    let message = original["error"]["message"].as_str().unwrap();
    assert!(message.contains("resumed automatically"), "{message}");
    let resumes = original["resumed_by"].as_array().expect("resumed_by");
    assert_eq!(resumes.len(), 1, "{original}");
    let resumed = serve.final_run(resumes[0].as_str().unwrap()).await;
    assert_eq!(resumed["status"], "succeeded", "{resumed}");
    assert_eq!(resumed["trigger"], "resume");
    assert_eq!(resumed["root_run_id"], run_id.as_str());
    // The claim is the lineage's own: the resume goes on to create, not to the skip branch.
    let seen = resumed["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step_id"] == "seen")
        .unwrap();
    assert_eq!(seen["output"]["written"], true, "{seen}");

    let posts = crm.requests();
    assert_eq!(posts.len(), 2, "the held POST, then the resumed one");
    for p in &posts {
        assert_eq!(p.header("idempotency-key"), Some("deal-evt_1"));
    }
    // A redelivery of the event is still a duplicate of the original run.
    let r = serve
        .client
        .post(format!("{}/hooks/wf", serve.url))
        .header("idempotency-key", "evt_1")
        .header("content-type", "application/json")
        .body(json!({"id": "evt_1"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.json::<Value>().await.unwrap()["run_id"], run_id.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_during_an_unkeyed_post_waits_for_a_person() {
    let (_dir, serve, run_id, crm) = kill_mid_post(false, &[]).await;
    let original = serve.final_run(&run_id).await;
    assert_eq!(original["status"], "interrupted", "{original}");
    assert_eq!(original["error"]["step"], "create");
    let message = original["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("POST without an Idempotency-Key may have reached the destination")
            && message.contains("check it, then resume"),
        "{message}"
    );
    assert!(original.get("resumed_by").is_none(), "{original}");
    let active = serve.get("/runs?status=queued").await;
    assert_eq!(active["runs"], json!([]));
    assert_eq!(crm.count(), 1, "nothing was sent again");

    // The person checked the destination: a resume sends it again, and says so first.
    let preview: Value = serve
        .client
        .post(format!("{}/api/v1/runs/{run_id}/resume/preview", serve.url))
        .bearer_auth(TOKEN)
        .json(&json!({}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(preview["warnings"][0]["code"], "repeat_unsafe", "{preview}");
    assert_eq!(crm.count(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recover_none_leaves_every_run_to_a_person() {
    let (_dir, serve, run_id, crm) = kill_mid_post(true, &["--recover", "none"]).await;
    let original = serve.final_run(&run_id).await;
    assert_eq!(original["status"], "interrupted", "{original}");
    assert!(original["error"]["message"]
        .as_str()
        .unwrap()
        .contains("--recover none"));
    assert!(original.get("resumed_by").is_none());
    assert_eq!(crm.count(), 1);
}
