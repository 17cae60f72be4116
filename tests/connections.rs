//! The connections store (issue 35, part 3) through a real `fluxo serve` and the CLI: a
//! connection put over HTTP is answered masked only, kept encrypted in
//! `<data-dir>/connections.enc` across a restart with the same key, and masked in the records
//! of a run that outputs its token; a restart with another key, or over a damaged file, stops
//! the server with a message naming the key ids (or the damage) and leaves the file as it was;
//! no file of the data dir, no export, nor the log, ever holds the token in clear. `fluxo connections add`
//! reads the secret from stdin or a file, and `list` shows it masked.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use common::child::{free_port, serve_command, wait_ready, wait_run_final};
use fluxo::connections::key::ConnectionKey;

const BIN: &str = env!("CARGO_BIN_EXE_fluxo");
const API_TOKEN: &str = "connections-test-token-0123456789abcdef0123";
/// The connection's secret.
const SECRET: &str = "pat-na1-7f3c9a1e5b2d4c6e8a0b";
const KEY_A: &str = "1111111111111111111111111111111111111111111111111111111111111111";
const KEY_B: &str = "2222222222222222222222222222222222222222222222222222222222222222";

fn key_id(k: &str) -> String {
    ConnectionKey::parse(k).unwrap().id_hex()
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// No file under `dir` holds `secret` (as bytes, anywhere).
fn assert_nowhere(dir: &Path, secret: &str) {
    let files = files(dir);
    assert!(!files.is_empty());
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "{} holds the secret in clear",
            f.display()
        );
    }
}

struct Dirs {
    _t: tempfile::TempDir,
    data: PathBuf,
    workflows: PathBuf,
    log: PathBuf,
}

fn dirs() -> Dirs {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("data");
    let workflows = t.path().join("workflows");
    std::fs::create_dir_all(&workflows).unwrap();
    // Its output is the connection's secret, built from two halves so that neither the
    // workflow nor the run's snapshot holds it whole: the engine must mask it.
    let (a, b) = SECRET.split_at(10);
    let wf = json!({
        "id": "echo", "name": "echo", "version": 1,
        "steps": [
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "shape", "kind": "transform",
             "config": {"fields": {"leak": format!("{{{{ '{a}' ~ '{b}' }}}}")}}}
        ],
        "edges": [{"from": "start", "to": "shape"}]
    });
    std::fs::write(workflows.join("echo.json"), wf.to_string()).unwrap();
    let log = t.path().join("serve.log");
    Dirs {
        _t: t,
        data,
        workflows,
        log,
    }
}

fn serve(d: &Dirs, key: &str) -> (Child, String) {
    let port = free_port();
    let child = serve_command(port, &d.workflows, &d.data, API_TOKEN, &d.log)
        .env("FLUXO_CONNECTIONS_KEY", key)
        .env_remove("FLUXO_CONNECTIONS_KEY_FILE")
        .env("FLUXO_LOG", "info")
        .spawn()
        .expect("spawn fluxo serve");
    (child, format!("http://127.0.0.1:{port}"))
}

/// SIGTERM, then wait (10 s at most).
fn stop(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    panic!("fluxo serve did not stop on SIGTERM within 10 s");
}

/// Wait (20 s at most) for a child that must exit by itself; answers its exit status.
fn exited(mut child: Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    panic!("fluxo serve did not exit");
}

async fn api(
    c: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    body: Option<&Value>,
) -> (u16, String) {
    let mut r = c
        .request(method, url)
        .header("authorization", format!("Bearer {API_TOKEN}"));
    if let Some(b) = body {
        r = r.json(b);
    }
    let resp = r.send().await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_keeps_connections_encrypted_masked_and_refuses_another_key() {
    let d = dirs();
    let c = reqwest::Client::new();
    let masked = format!("••••{}", &SECRET[SECRET.len() - 4..]);

    // Put a connection; every answer shows the mask only.
    let (mut child, url) = serve(&d, KEY_A);
    wait_ready(&c, &url, &mut child, &d.log).await;
    let conns = format!("{url}/api/v1/connections");
    let body = json!({
        "app": "hubspot",
        "name": "HubSpot (sales)",
        "credential": {"kind": "bearer", "token": SECRET},
        "values": {"portal_id": "42"},
    });
    let (status, text) = api(
        &c,
        reqwest::Method::PUT,
        &format!("{conns}/crm"),
        Some(&body),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert!(!text.contains(SECRET), "{text}");
    let (status, text) = api(&c, reqwest::Method::GET, &format!("{conns}/crm"), None).await;
    assert_eq!(status, 200, "{text}");
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["credential"], json!({"kind": "bearer", "token": masked}));
    assert_eq!(v["values"], json!({"portal_id": "42"}));
    let (_, listed) = api(&c, reqwest::Method::GET, &conns, None).await;
    assert!(
        listed.contains(&masked) && !listed.contains(SECRET),
        "{listed}"
    );

    // A run whose step outputs the secret: its record holds the mask.
    let (status, text) = api(
        &c,
        reqwest::Method::POST,
        &format!("{url}/api/v1/workflows/echo/runs"),
        Some(&json!({"input": {}})),
    )
    .await;
    assert_eq!(status, 200, "{text}");
    let run: Value = serde_json::from_str(&text).unwrap();
    let run_id = run["run_id"].as_str().or(run["id"].as_str()).unwrap();
    let detail = wait_run_final(&c, &url, API_TOKEN, run_id).await;
    assert_eq!(detail["status"], "succeeded", "{detail}");
    let shape = detail["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step_id"] == "shape")
        .unwrap();
    assert_eq!(shape["output"]["leak"], masked.as_str(), "{shape}");
    assert!(!detail.to_string().contains(SECRET));
    // Nor in an export of the history (traces carry ids and statuses only: `crate::traces`).
    for format in ["jsonl", "csv"] {
        let (status, text) = api(
            &c,
            reqwest::Method::GET,
            &format!("{url}/api/v1/runs/export?format={format}"),
            None,
        )
        .await;
        assert_eq!(status, 200, "{text}");
        assert!(text.contains(run_id), "{format}: {text}");
        assert!(!text.contains(SECRET), "{format}: {text}");
    }
    stop(child);

    // The same key: still there.
    let (mut child, url) = serve(&d, KEY_A);
    wait_ready(&c, &url, &mut child, &d.log).await;
    let (status, text) = api(
        &c,
        reqwest::Method::GET,
        &format!("{url}/api/v1/connections/crm"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains(&masked), "{text}");
    stop(child);

    // Another key: the server does not start, names both keys, and the file is untouched.
    let file = d.data.join("connections.enc");
    let before = std::fs::read(&file).unwrap();
    let log_len = std::fs::metadata(&d.log).unwrap().len() as usize;
    let (child, _) = serve(&d, KEY_B);
    let status = exited(child);
    assert!(!status.success(), "{status}");
    let log = std::fs::read_to_string(&d.log).unwrap();
    let said = &log[log_len..];
    let want = format!(
        "was encrypted with key {}; the key from FLUXO_CONNECTIONS_KEY is {}: give the key \
         it was written with",
        key_id(KEY_A),
        key_id(KEY_B)
    );
    assert!(said.contains(&want), "{said}");
    assert!(said.contains(&file.display().to_string()), "{said}");
    assert_eq!(
        std::fs::read(&file).unwrap(),
        before,
        "the file was rewritten"
    );

    // A damaged file: the server does not start and says so, naming the file.
    let mut damaged = before.clone();
    let i = damaged.len() - 3;
    damaged[i] ^= 0x20;
    std::fs::write(&file, &damaged).unwrap();
    let log_len = std::fs::metadata(&d.log).unwrap().len() as usize;
    let (child, _) = serve(&d, KEY_A);
    assert!(!exited(child).success());
    let log = std::fs::read_to_string(&d.log).unwrap();
    let said = &log[log_len..];
    assert!(
        said.contains(&format!("{} is damaged", file.display())),
        "{said}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), damaged);
    std::fs::write(&file, &before).unwrap();

    // Nowhere in clear: not in any file of the data dir (the store, the run records, the
    // encrypted file), nor in the log.
    assert_nowhere(&d.data, SECRET);
    assert!(!log.contains(SECRET), "the log holds the secret");
}

fn fluxo(data: &Path, args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Output {
    use std::io::Write;
    let mut c = Command::new(BIN);
    c.arg("--data-dir")
        .arg(data)
        .args(args)
        .env_remove("FLUXO_CONNECTIONS_KEY")
        .env_remove("FLUXO_CONNECTIONS_KEY_FILE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(s) = stdin {
        input.write_all(s.as_bytes()).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn cli_adds_from_stdin_and_lists_masked() {
    let t = tempfile::tempdir().unwrap();
    let data = t.path().join("data");
    let masked = format!("••••{}", &SECRET[SECRET.len() - 4..]);

    // Nothing yet: `list` generates no key.
    let o = fluxo(&data, &["connections", "list"], &[], None);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(!data.join("connections.key").exists());

    let o = fluxo(
        &data,
        &[
            "connections",
            "add",
            "--id",
            "crm",
            "--app",
            "hubspot",
            "--kind",
            "bearer",
        ],
        &[],
        Some(&format!("{SECRET}\n")),
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(out.contains("connection `crm` saved"), "{out}");
    // The generated key: said on stderr, 0600.
    let key_file = data.join("connections.key");
    assert!(err.contains("generated the connections key"), "{err}");
    assert!(err.contains("--connections-key-file"), "{err}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        for f in [&key_file, &data.join("connections.enc")] {
            let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", f.display());
        }
    }

    // A second one from a file, basic.
    let pw = t.path().join("pw");
    std::fs::write(&pw, "correct-horse-battery-staple\n").unwrap();
    let pw_arg = pw.display().to_string();
    let o = fluxo(
        &data,
        &[
            "connections",
            "add",
            "--id",
            "ledger",
            "--app",
            "ledger",
            "--kind",
            "basic",
            "--username",
            "ann",
            "--token-file",
            &pw_arg,
        ],
        &[],
        None,
    );
    assert!(o.status.success(), "{:?}", text(&o));

    let o = fluxo(&data, &["connections", "list"], &[], None);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(out.contains("crm") && out.contains(&masked), "{out}");
    assert!(
        out.contains("username=ann") && out.contains("password=••••aple"),
        "{out}"
    );
    assert!(
        !out.contains(SECRET) && !out.contains("correct-horse"),
        "{out}"
    );
    let o = fluxo(&data, &["connections", "list", "--json"], &[], None);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["connections"][0]["credential"]["token"], masked.as_str());

    // Bad input: named, nothing read or written.
    let o = fluxo(
        &data,
        &["connections", "add", "--id", "Bad Id", "--app", "x"],
        &[],
        Some("secret-value-123\n"),
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).1.contains("--id `Bad Id`: must match"),
        "{:?}",
        text(&o)
    );
    let o = fluxo(
        &data,
        &["connections", "add", "--id", "x", "--app", "x"],
        &[],
        Some("\n"),
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o).1.contains("standard input holds no secret"),
        "{:?}",
        text(&o)
    );

    // Another key: refused with both key ids, the file untouched.
    let before = std::fs::read(data.join("connections.enc")).unwrap();
    let generated = std::fs::read_to_string(&key_file).unwrap();
    let o = fluxo(
        &data,
        &["connections", "list"],
        &[("FLUXO_CONNECTIONS_KEY", KEY_B)],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o).1;
    assert!(
        err.contains(&format!(
            "was encrypted with key {}; the key from FLUXO_CONNECTIONS_KEY is {}",
            key_id(generated.trim()),
            key_id(KEY_B)
        )),
        "{err}"
    );
    let o = fluxo(
        &data,
        &["connections", "add", "--id", "y", "--app", "x"],
        &[("FLUXO_CONNECTIONS_KEY", KEY_B)],
        Some("secret-value-123\n"),
    );
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(std::fs::read(data.join("connections.enc")).unwrap(), before);

    // The key moved out of the data dir and given as a file: it still opens.
    let moved = t.path().join("moved.key");
    std::fs::rename(&key_file, &moved).unwrap();
    let moved_arg = moved.display().to_string();
    let o = fluxo(&data, &["connections", "list"], &[], None);
    assert_eq!(o.status.code(), Some(2), "no key: refused, none generated");
    assert!(text(&o).1.contains("no key was given"), "{:?}", text(&o));
    assert!(!key_file.exists());
    let o = fluxo(
        &data,
        &[
            "connections",
            "remove",
            "crm",
            "--connections-key-file",
            &moved_arg,
        ],
        &[],
        None,
    );
    assert!(o.status.success(), "{:?}", text(&o));
    let o = fluxo(
        &data,
        &["connections", "list", "--json"],
        &[("FLUXO_CONNECTIONS_KEY_FILE", &moved_arg)],
        None,
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["connections"].as_array().unwrap().len(), 1);
    assert_eq!(v["connections"][0]["id"], "ledger");
    assert_nowhere(&data, SECRET);
    assert_nowhere(&data, "correct-horse-battery-staple");
}
