//! File modes (SPEC §5, issue 13): the data dir is 0700, `settings.json` and `token` 0600, and
//! the store's folders and files owner-only, whatever the umask of the process (a real
//! `fluxo serve` started under `umask 0`); a data dir an older version left open is tightened
//! on start, with a log line.
#![cfg(unix)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o777
}

fn chmod(p: &Path, m: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
}

/// Every path under `dir` (not `dir` itself).
fn tree(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p.clone());
            }
            out.push(p);
        }
    }
    out
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Serve {
    child: Child,
    url: String,
    log: PathBuf,
}

/// `fluxo serve` under `umask 0` (so only explicit modes can make files private), without
/// `--token` (the token file is generated).
fn serve(data: &Path, workflows: &Path, log: &Path) -> Serve {
    let port = free_port();
    let child = Command::new("sh")
        .arg("-c")
        .arg(r#"umask 0; exec "$0" "$@""#)
        .arg(env!("CARGO_BIN_EXE_fluxo"))
        .args(["serve", "--addr", &format!("127.0.0.1:{port}")])
        .arg("--workflows")
        .arg(workflows)
        .arg("--data-dir")
        .arg(data)
        .env("FLUXO_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("spawn fluxo serve");
    Serve {
        child,
        url: format!("http://127.0.0.1:{port}"),
        log: log.to_path_buf(),
    }
}

impl Serve {
    async fn ready(&mut self, client: &reqwest::Client) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(r) = client.get(format!("{}/healthz", self.url)).send().await {
                if r.status().is_success() {
                    return;
                }
            }
            if let Ok(Some(s)) = self.child.try_wait() {
                panic!(
                    "fluxo serve exited ({s}):\n{}",
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("fluxo serve was not ready in 20 s");
    }

    /// SIGTERM (a graceful stop), then wait.
    fn stop(mut self) -> String {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while self.child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.wait();
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

fn workflows_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let wf = json!({
        "id": "hook", "name": "hook", "version": 1,
        "steps": [
            {"id": "hook", "kind": "webhook_trigger", "config": {}},
            {"id": "claim", "kind": "memory", "config": {
                "operation": "write", "namespace": "seen", "key": "{{ input.id }}",
                "value": true, "allow_overwrite": false}}
        ],
        "edges": [{"from": "hook", "to": "claim"}]
    });
    std::fs::write(dir.path().join("hook.json"), wf.to_string()).unwrap();
    dir
}

/// Deliver one event and save settings, so the store, `token` and `settings.json` exist.
async fn use_it(s: &Serve, client: &reqwest::Client, data: &Path) {
    let token = std::fs::read_to_string(data.join("token")).unwrap();
    let r = client
        .put(format!("{}/api/v1/settings", s.url))
        .bearer_auth(token.trim())
        .json(&json!({"env": {"API_KEY": "sk_test_0123456789abcdef"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let r = client
        .post(format!("{}/hooks/hook", s.url))
        .header("content-type", "application/json")
        .body(json!({"id": "evt_modes"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202, "{}", r.text().await.unwrap());
}

fn assert_owner_only(data: &Path) {
    assert_eq!(mode(data), 0o700, "data dir");
    assert_eq!(mode(&data.join("token")), 0o600, "token");
    assert_eq!(mode(&data.join("settings.json")), 0o600, "settings.json");
    assert_eq!(mode(&data.join("store")), 0o700, "store dir");
    let store = tree(&data.join("store"));
    assert!(store.len() >= 2, "sled's files: {store:?}");
    for p in store {
        let m = mode(&p);
        assert_eq!(
            m & 0o077,
            0,
            "{} is {m:04o}: readable by others",
            p.display()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_data_dir_is_owner_only_whatever_the_umask() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("new/data");
    let workflows = workflows_dir();
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut s = serve(&data, workflows.path(), &root.path().join("serve.log"));
    s.ready(&client).await;
    use_it(&s, &client, &data).await;
    assert_owner_only(&data);
    let log = s.stop();
    assert_owner_only(&data);
    assert!(
        !log.contains("tightened"),
        "nothing to tighten on a new data dir:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_data_dir_is_tightened_on_start_with_a_log_line() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let workflows = workflows_dir();
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    // As an older version left it: everything readable by everyone.
    let mut s = serve(&data, workflows.path(), &root.path().join("first.log"));
    s.ready(&client).await;
    use_it(&s, &client, &data).await;
    s.stop();
    chmod(&data, 0o755);
    for p in tree(&data) {
        chmod(&p, if p.is_dir() { 0o755 } else { 0o644 });
    }
    assert_eq!(mode(&data.join("settings.json")), 0o644);

    let mut s = serve(&data, workflows.path(), &root.path().join("second.log"));
    s.ready(&client).await;
    assert_owner_only(&data);
    let log = s.stop();
    for what in [
        data.display().to_string(),
        data.join("token").display().to_string(),
        data.join("settings.json").display().to_string(),
        "the store was readable by other users".to_string(),
    ] {
        assert!(
            log.lines().any(
                |l| l.contains("WARN") && l.contains("tightened") && l.contains(&what)
                    || l.contains(&what) && what.starts_with("the store")
            ),
            "no log line about {what}:\n{log}"
        );
    }
}
