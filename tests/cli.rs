//! The `fluxo` binary as a user runs it: the README quick start against the sandbox, and bad
//! input (exit code 2, a message naming the place, nothing written).

use std::path::Path;
use std::process::{Command, Output};

use fluxo::sandbox::Sandbox;

const BIN: &str = env!("CARGO_BIN_EXE_fluxo");
const INVOICE: &str = "tests/fixtures/payloads/stripe/invoice.paid.json";
const INVOICE_2: &str = "tests/fixtures/payloads/stripe/invoice.paid.second.json";

fn fluxo(data: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(BIN);
    c.arg("--data-dir").arg(data).args(args);
    c.env_remove("FLUXO_DATA_DIR");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("fluxo runs")
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Run the binary off the async runtime (the sandbox serves on it meanwhile).
async fn fluxo_async(data: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let data = data.to_path_buf();
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        fluxo(&data, &args, &env)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn quick_start_creates_once_then_skips() {
    let sandbox = Sandbox::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let url = sandbox.url();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let env = [("FLUXO_ENV_CRM_URL", url.as_str())];
    let input = format!("@{INVOICE}");

    let first = fluxo_async(
        &data,
        &[
            "run",
            "workflows/invoice-paid-once.json",
            "--input",
            &input,
            "--json",
        ],
        &env,
    )
    .await;
    assert_eq!(first.status.code(), Some(0), "{:?}", text(&first));
    let run1: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(run1["status"], "succeeded");
    let seen = run1["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step_id"] == "seen")
        .unwrap();
    assert_eq!(seen["output"]["written"], true);
    assert!(run1["steps"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["step_id"] == "create" && s["output"]["status"] == 201));

    let second = fluxo_async(
        &data,
        &["run", "workflows/invoice-paid-once.json", "--input", &input],
        &env,
    )
    .await;
    let (out, err) = text(&second);
    assert_eq!(second.status.code(), Some(0), "{out}\n{err}");
    assert!(
        out.contains("\"written\":false,\"reason\":\"exists\""),
        "{out}"
    );
    assert!(out.contains("│ skip "), "the skip branch ran: {out}");
    assert!(!out.contains("│ create "), "no second create: {out}");
    assert_eq!(
        sandbox.state().records("deals").len(),
        1,
        "exactly one deal at the destination"
    );

    // A new event creates a second deal; the history lists three runs.
    let input2 = format!("@{INVOICE_2}");
    let third = fluxo_async(
        &data,
        &[
            "run",
            "workflows/invoice-paid-once.json",
            "--input",
            &input2,
        ],
        &env,
    )
    .await;
    assert_eq!(third.status.code(), Some(0));
    assert_eq!(sandbox.state().records("deals").len(), 2);
    let list = fluxo_async(
        &data,
        &["runs", "list", "--workflow", "invoice-paid-once", "--json"],
        &[],
    )
    .await;
    let page: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(page["runs"].as_array().unwrap().len(), 3);
    let mem = fluxo_async(
        &data,
        &[
            "memory",
            "get",
            "processed-invoices",
            "evt_1Pgc76B7WZ01zgkWwyRHS12y",
        ],
        &[],
    )
    .await;
    assert_eq!(mem.status.code(), Some(0), "{:?}", text(&mem));
    sandbox.shutdown().await;
}

#[test]
fn failed_run_exits_1_and_compensates() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // Nothing listens on port 9 (discard): the create step fails, the claim is released.
    let o = fluxo(
        &data,
        &[
            "run",
            "workflows/invoice-paid-once.json",
            "--input",
            &format!("@{INVOICE}"),
            "--json",
        ],
        &[("FLUXO_ENV_CRM_URL", "http://127.0.0.1:9")],
    );
    assert_eq!(o.status.code(), Some(1), "{:?}", text(&o));
    let run: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(run["status"], "failed");
    assert_eq!(run["error"]["step"], "create");
    let undo = run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step_id"] == "undo")
        .unwrap();
    assert_eq!(undo["output"]["deleted"], true);
    let mem = fluxo(
        &data,
        &[
            "memory",
            "get",
            "processed-invoices",
            "evt_1Pgc76B7WZ01zgkWwyRHS12y",
        ],
        &[],
    );
    assert_eq!(mem.status.code(), Some(2), "the claim is gone");
}

/// Each bad input: exit 2, a message naming the place, and no data dir created.
#[test]
fn bad_input_exits_2_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let w = |name: &str, body: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, body).unwrap();
        p.to_string_lossy().into_owned()
    };
    let malformed = w("malformed.json", "{\"id\": \"x\", \"steps\": [");
    let unknown_kind = w(
        "kind.json",
        r#"{"id":"x","steps":[{"id":"t","kind":"manual_trigger","config":{}},{"id":"s","kind":"teleport","config":{}}],"edges":[{"from":"t","to":"s"}]}"#,
    );
    let unknown_field = w(
        "field.json",
        r#"{"id":"x","steps":[{"id":"t","kind":"manual_trigger","config":{},"colour":"red"}]}"#,
    );
    let cycle = w(
        "cycle.json",
        r#"{"id":"x","steps":[{"id":"t","kind":"manual_trigger","config":{}},{"id":"a","kind":"transform","config":{"fields":{}}},{"id":"b","kind":"transform","config":{"fields":{}}}],"edges":[{"from":"t","to":"a"},{"from":"a","to":"b"},{"from":"b","to":"a"}]}"#,
    );
    let bad_template = w(
        "tmpl.json",
        r#"{"id":"x","steps":[{"id":"t","kind":"manual_trigger","config":{}},{"id":"a","kind":"transform","config":{"fields":{"v":"{{ input. }}"}}}],"edges":[{"from":"t","to":"a"}]}"#,
    );
    let good = "workflows/invoice-paid-once.json".to_string();
    let not_json = w("payload.txt", "amount=10&currency=usd");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["run".into(), malformed.clone()], "line 1, column"),
        (
            vec!["run".into(), unknown_kind.clone()],
            "unknown kind `teleport`",
        ),
        (vec!["run".into(), unknown_field.clone()], "colour"),
        (vec!["run".into(), cycle.clone()], "cycle"),
        (
            vec!["run".into(), bad_template.clone()],
            "steps[1].config.fields.v",
        ),
        (
            vec![
                "run".into(),
                good.clone(),
                "--input".into(),
                format!("@{not_json}"),
            ],
            "is not JSON (line 1, column 1)",
        ),
        (
            vec![
                "run".into(),
                good.clone(),
                "--input".into(),
                "{\"a\":".into(),
            ],
            "--input",
        ),
        (
            vec![
                "run".into(),
                good.clone(),
                "--input".into(),
                "@/nonexistent/payload.json".into(),
            ],
            "/nonexistent/payload.json",
        ),
        (
            vec!["run".into(), "/nonexistent/wf.json".into()],
            "/nonexistent/wf.json",
        ),
        (
            vec!["validate".into(), unknown_kind.clone(), cycle.clone()],
            "teleport",
        ),
        (
            vec![
                "runs".into(),
                "list".into(),
                "--status".into(),
                "done".into(),
            ],
            "--status",
        ),
        (
            vec![
                "runs".into(),
                "list".into(),
                "--cursor".into(),
                "garbage".into(),
            ],
            "--cursor",
        ),
        (vec!["frobnicate".into()], "unrecognized subcommand"),
    ];
    for (args, needle) in cases {
        let data = dir.path().join("data-never-created");
        let args_ref: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = fluxo(&data, &args_ref, &[]);
        let (out, err) = text(&o);
        assert_eq!(
            o.status.code(),
            Some(2),
            "{args:?}: exit {:?}\n{out}\n{err}",
            o.status.code()
        );
        assert!(
            out.contains(needle) || err.contains(needle),
            "{args:?}: expected `{needle}` in\n{out}\n{err}"
        );
        if args[0] == "run" || args[0] == "validate" {
            assert!(!data.exists(), "{args:?} wrote a data dir");
        }
    }
}

#[test]
fn step_kinds_prints_the_catalog() {
    let dir = tempfile::tempdir().unwrap();
    let o = fluxo(dir.path(), &["step-kinds"], &[]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let kinds: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kind"].as_str().unwrap())
        .collect();
    for k in [
        "webhook_trigger",
        "manual_trigger",
        "memory",
        "router",
        "error_handler",
        "http_request",
        "publish_output",
        "transform",
    ] {
        assert!(kinds.contains(&k), "{k} missing from {kinds:?}");
    }
    assert!(v[0]["config_schema"]["properties"].is_object());
}

#[test]
fn validate_reports_lint_warnings_with_step_ids() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("unguarded.json");
    std::fs::write(
        &p,
        r#"{"id":"unguarded","steps":[{"id":"t","kind":"webhook_trigger","config":{}},{"id":"post","kind":"http_request","config":{"method":"POST","url":"http://example.invalid/x"}}],"edges":[{"from":"t","to":"post"}]}"#,
    )
    .unwrap();
    let o = fluxo(dir.path(), &["validate", p.to_str().unwrap()], &[]);
    let (out, _) = text(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "warnings do not fail validation: {out}"
    );
    assert!(
        out.contains("lint_unguarded_write") && out.contains("step `post`"),
        "{out}"
    );
    let all = fluxo(
        dir.path(),
        &[
            "validate",
            "workflows/invoice-paid-once.json",
            "workflows/ai-enrichment-relay.json",
            "workflows/github-issue-to-ticket.json",
        ],
        &[],
    );
    assert_eq!(all.status.code(), Some(0), "{:?}", text(&all));
}

/// `fluxo serve` until it printed its start-up lines (up to `webhooks:`), then stopped.
fn serve_banner(data: &Path, extra: &[&str]) -> String {
    serve_banner_on(data, "127.0.0.1:0", extra)
}

/// [`serve_banner`] on another address; the workflows are in `<data>/../wf`.
fn serve_banner_on(data: &Path, addr: &str, extra: &[&str]) -> String {
    serve_banner_with(data, addr, true, extra)
}

/// [`serve_banner_on`], with a built browser UI in `<data>/../ui` or none (`ui` false). It runs
/// in `<data>/..`, so a `ui/dist` built in the checkout is not picked up.
fn serve_banner_with(data: &Path, addr: &str, ui: bool, extra: &[&str]) -> String {
    use std::io::BufRead;
    let root = data.parent().unwrap();
    let workflows = root.join("wf");
    std::fs::create_dir_all(&workflows).unwrap();
    let mut ui_args: Vec<std::ffi::OsString> = Vec::new();
    if ui {
        let dir = root.join("ui");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("index.html"), "<!doctype html>").unwrap();
        ui_args.extend(["--ui".into(), dir.into_os_string()]);
    }
    let mut child = Command::new(BIN)
        .current_dir(root)
        .arg("--data-dir")
        .arg(data)
        .args(["serve", "--addr", addr, "--workflows"])
        .arg(&workflows)
        .args(&ui_args)
        .args(extra)
        .env_remove("FLUXO_TOKEN")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn fluxo serve");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let last = line.contains("webhooks:");
            if tx.send(line).is_err() || last {
                break;
            }
        }
    });
    let mut out = String::new();
    while let Ok(line) = rx.recv_timeout(std::time::Duration::from_secs(30)) {
        out.push_str(&line);
        out.push('\n');
        if line.contains("webhooks:") {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(out.contains("webhooks:"), "serve did not start:\n{out}");
    out
}

/// The API token is printed (in the browser UI's URL) only on the start that generated it;
/// later starts, and a token given with --token, print where it is instead of its value.
#[test]
fn serve_prints_the_token_only_when_it_generated_it() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let first = serve_banner(&data, &[]);
    let token = std::fs::read_to_string(data.join("token"))
        .unwrap()
        .trim()
        .to_string();
    assert_eq!(token.len(), 64);
    assert!(first.contains(&format!("/#token={token}")), "{first}");
    assert!(first.contains("shown this once"), "{first}");
    assert!(
        first.contains(&format!(
            "store:     sled in {}",
            data.join("store").display()
        )),
        "{first}"
    );

    let again = serve_banner(&data, &[]);
    assert!(
        !again.contains(&token),
        "the file's token was printed:\n{again}"
    );
    assert!(
        again.contains(&data.join("token").display().to_string()),
        "{again}"
    );
    assert!(again.contains("#token=<API token>"), "{again}");

    let given = serve_banner(
        &data,
        &[
            "--token",
            "given-secret-token-123-0123456789abcdef0123456789",
        ],
    );
    assert!(
        !given.contains("given-secret-token-123-0123456789abcdef0123456789"),
        "{given}"
    );
    assert!(!given.contains(&token), "{given}");
    assert!(given.contains("as given"), "{given}");
}

/// Without a browser UI the generated token is printed on its own line, once: the UI's
/// address is where it is shown otherwise.
#[test]
fn serve_without_a_ui_prints_the_generated_token_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let first = serve_banner_with(&data, "127.0.0.1:0", false, &[]);
    let token = std::fs::read_to_string(data.join("token"))
        .unwrap()
        .trim()
        .to_string();
    assert!(first.contains("browser UI: not built"), "{first}");
    assert!(
        first.contains(&format!("shown this once: {token}")),
        "{first}"
    );
    let again = serve_banner_with(&data, "127.0.0.1:0", false, &[]);
    assert!(
        !again.contains(&token),
        "the file's token was printed:\n{again}"
    );
}

/// Listening beyond loopback, `fluxo serve` names the webhooks that take unsigned deliveries
/// and how to require a signature; on loopback it does not. On every interface the URLs it
/// prints are loopback ones.
#[test]
fn serve_warns_of_unsigned_webhooks_beyond_loopback() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(dir.path().join("wf")).unwrap();
    std::fs::copy(
        "workflows/invoice-paid-once.json",
        dir.path().join("wf/invoice-paid-once.json"),
    )
    .unwrap();
    let open = serve_banner_on(&data, "0.0.0.0:0", &[]);
    assert!(
        open.contains("warning: these webhook workflows have no signing secret: invoice-paid-once"),
        "{open}"
    );
    assert!(open.contains("signing_secret"), "{open}");
    // Bound to every interface, it says so, and the URLs it prints are ones a browser or a
    // sender on this machine can open (loopback), never `http://0.0.0.0:…`.
    assert!(
        open.contains("(every interface; on this machine http://127.0.0.1:"),
        "{open}"
    );
    assert!(open.contains("webhooks:  POST http://127.0.0.1:"), "{open}");
    assert!(!open.contains("http://0.0.0.0"), "{open}");
    let local = serve_banner(&data, &[]);
    assert!(!local.contains("no signing secret"), "{local}");
}

/// `fluxo fmt`: the shipped templates are in the file format saves write (`--check` exits 0);
/// a hand-written file is rewritten (small objects on one line, whole positions as integers,
/// keys in their order, the same data plus the default settings, the version kept) and a
/// second run changes nothing;
/// `--check` names an unformatted file and exits 1 without writing; a file that is not a
/// workflow exits 2, named, untouched.
#[test]
fn fmt_writes_the_file_format_saves_use() {
    let data = tempfile::tempdir().unwrap();
    let templates: Vec<String> = std::fs::read_dir("workflows")
        .unwrap()
        .map(|e| e.unwrap().path().display().to_string())
        .filter(|p| p.ends_with(".json"))
        .collect();
    let mut args = vec!["fmt", "--check"];
    args.extend(templates.iter().map(String::as_str));
    let o = fluxo(data.path(), &args, &[]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hand.json");
    let hand = r#"{"id":"hand","name":"Hand","version":3,"steps":[
        {"id":"start","kind":"manual_trigger","position":{"x":0.0,"y":120},"config":{}},
        {"id":"call","kind":"http_request","position":{"x":260.5,"y":0},
         "config":{"method":"GET","url":"{{ env.CRM_URL }}/deals","timeout_s":0,
                   "headers":{"X-A":"a very long header value that takes this object past the line width of one hundred"}}}],
        "edges":[{"from":"start","to":"call"}]}"#;
    std::fs::write(&path, hand).unwrap();
    let p = path.to_str().unwrap();
    let o = fluxo(data.path(), &["fmt", "--check", p], &[]);
    assert_eq!(o.status.code(), Some(1), "{:?}", text(&o));
    assert!(text(&o).0.contains("not formatted: "), "{:?}", text(&o));
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        hand,
        "--check writes nothing"
    );

    let o = fluxo(data.path(), &["fmt", p], &[]);
    assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
    let written = std::fs::read_to_string(&path).unwrap();
    assert!(
        written.contains(r#""position": { "x": 0, "y": 120 },"#),
        "{written}"
    );
    assert!(
        written.contains(r#""position": { "x": 260.5, "y": 0 },"#),
        "{written}"
    );
    assert!(
        written.contains("\"timeout_s\": 0,"),
        "numbers as written: {written}"
    );
    assert!(
        written.contains(r#"{ "id": "start", "kind": "manual_trigger", "position": { "x": 0, "y": 120 }, "config": {} },"#),
        "a step that fits is one line: {written}"
    );
    assert!(
        written.contains("\"headers\": {\n"),
        "a long object is one member per line: {written}"
    );
    assert!(written.contains("\"version\": 3,"), "{written}");
    // The same data; the defaults a save writes (settings) are written out.
    let mut a: serde_json::Value = serde_json::from_str(hand).unwrap();
    a["steps"][0]["position"]["x"] = serde_json::json!(0); // 0.0 is written 0
    let mut b: serde_json::Value = serde_json::from_str(&written).unwrap();
    assert_eq!(b["settings"], serde_json::json!({"run_timeout_s": 50}));
    b.as_object_mut().unwrap().remove("settings");
    assert_eq!(a, b, "the same data");
    let o = fluxo(data.path(), &["fmt", "--check", p], &[]);
    assert_eq!(o.status.code(), Some(0), "formatted once: {:?}", text(&o));

    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"id": "x", "steps": 3}"#).unwrap();
    let o = fluxo(data.path(), &["fmt", bad.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(2), "{:?}", text(&o));
    assert!(
        text(&o).1.contains("bad.json is not a workflow"),
        "{:?}",
        text(&o)
    );
    assert_eq!(
        std::fs::read_to_string(&bad).unwrap(),
        r#"{"id": "x", "steps": 3}"#
    );
}

/// `fluxo runs bulk`: the preview acts on nothing; `--yes` resumes every failed live run of the
/// filter and executes the new runs here; a second pass finds them fixed and starts nothing.
#[tokio::test(flavor = "multi_thread")]
async fn runs_bulk_previews_then_resumes_every_failed_run_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // Two events fail at `create` (nothing listens on port 9).
    for input in [INVOICE, INVOICE_2] {
        let o = fluxo_async(
            &data,
            &[
                "run",
                "workflows/invoice-paid-once.json",
                "--input",
                &format!("@{input}"),
            ],
            &[("FLUXO_ENV_CRM_URL", "http://127.0.0.1:9")],
        )
        .await;
        assert_eq!(o.status.code(), Some(1), "{:?}", text(&o));
    }
    let sandbox = Sandbox::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let url = sandbox.url();
    let env = [("FLUXO_ENV_CRM_URL", url.as_str())];
    let bulk = ["runs", "bulk", "--workflow", "invoice-paid-once"];

    let preview = fluxo_async(&data, &bulk, &env).await;
    let (out, err) = text(&preview);
    assert_eq!(preview.status.code(), Some(0), "{out}\n{err}");
    assert!(
        out.contains("2 failed runs matched: 2 live (2 to resume, 0 to replay, 0 skipped)"),
        "{out}"
    );
    assert!(out.contains("add --yes"), "{out}");
    assert_eq!(
        sandbox.state().records("deals").len(),
        0,
        "a preview sends nothing"
    );

    let mut args = bulk.to_vec();
    args.extend(["--yes", "--json"]);
    let done = fluxo_async(&data, &args, &env).await;
    let (out, err) = text(&done);
    assert_eq!(done.status.code(), Some(0), "{out}\n{err}");
    let summary: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(summary["resume"], 2, "{summary}");
    let executed = summary["executed"].as_array().unwrap();
    assert_eq!(executed.len(), 2, "{summary}");
    assert!(
        executed.iter().all(|r| r["status"] == "succeeded"),
        "{summary}"
    );
    assert_eq!(
        sandbox.state().records("deals").len(),
        2,
        "one deal per event"
    );

    // The new runs are in the history, resuming the failed ones.
    let list = fluxo_async(
        &data,
        &["runs", "list", "--status", "succeeded", "--json"],
        &[],
    )
    .await;
    let page: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let resumed: Vec<&serde_json::Value> = page["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["trigger"] == "resume")
        .collect();
    assert_eq!(resumed.len(), 2, "{page}");

    // Again: both failures are fixed now; nothing is started, nothing more is sent.
    let again = fluxo_async(&data, &args, &env).await;
    let (out, err) = text(&again);
    assert_eq!(again.status.code(), Some(0), "{out}\n{err}");
    let summary: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(summary["skipped"], 2, "{summary}");
    assert_eq!(summary["executed"].as_array().unwrap().len(), 0);
    assert_eq!(sandbox.state().records("deals").len(), 2);
    sandbox.shutdown().await;
}

/// Issue 42: a token on the command line shows in `ps`. `--token-file` reads it from a file
/// (its first line); `--token` says so in the banner; an empty or missing file is refused.
#[test]
fn serve_takes_the_token_from_a_file_and_warns_about_one_in_argv() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let file = dir.path().join("api-token");
    std::fs::write(&file, "file-token-0123456789abcdef0123456789\n").unwrap();
    let from_file = serve_banner(&data, &["--token-file", file.to_str().unwrap()]);
    assert!(
        from_file.contains(&format!("API token: as given in {}", file.display())),
        "{from_file}"
    );
    assert!(!from_file.contains("file-token-"), "{from_file}");
    assert!(!from_file.contains("warning: --token"), "{from_file}");

    let in_argv = serve_banner(&data, &["--token", "argv-token-0123456789abcdef0123456789"]);
    assert!(
        in_argv.contains("warning: --token shows the token to every user"),
        "{in_argv}"
    );

    std::fs::write(&file, "\n").unwrap();
    let out = Command::new(BIN)
        .arg("--data-dir")
        .arg(&data)
        .args(["serve", "--addr", "127.0.0.1:0", "--token-file"])
        .arg(&file)
        .env_remove("FLUXO_TOKEN")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("holds no token"), "{err}");
    let out = Command::new(BIN)
        .arg("--data-dir")
        .arg(&data)
        .args(["serve", "--addr", "127.0.0.1:0", "--token-file"])
        .arg(dir.path().join("missing"))
        .env_remove("FLUXO_TOKEN")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot read the API token from"), "{err}");

    // A short token is refused at start, wherever it comes from.
    std::fs::write(&file, "short-token\n").unwrap();
    for how in [
        vec!["--token", "short-token"],
        vec!["--token-file", file.to_str().unwrap()],
    ] {
        let out = Command::new(BIN)
            .arg("--data-dir")
            .arg(&data)
            .args(["serve", "--addr", "127.0.0.1:0"])
            .args(&how)
            .env_remove("FLUXO_TOKEN")
            .output()
            .unwrap();
        assert!(!out.status.success(), "{how:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("has 11 characters; at least 32 are needed"),
            "{how:?}: {err}"
        );
        assert!(!err.contains("short-token"), "the token was echoed: {err}");
    }
}
