//! Secrets are never stored or shown (SPEC §5, issue 13): a secret sent to a destination (the
//! destination receives the real value) is absent from the run record in the store, from
//! `fluxo runs show --json`, from the API's run detail and list, from every file of the data
//! dir but `settings.json`, and from the server's log; the settings API shows secret values
//! masked and keeps the stored value when the mask comes back.

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::response::IntoResponse;
use serde_json::{json, Value};

use common::child::{free_port, serve_command, wait_ready, wait_run_final};
use common::{compile, step, Harness};
use fluxo::store::RunStore;

/// From the process environment (`FLUXO_ENV_API_KEY`).
const API_KEY: &str = "sk_live_Zq81vXw0RkT7mB4nA2c9";
/// From the settings (`env.DB_PASSWORD`).
const DB_PASSWORD: &str = "pw-Correct-Horse-7731";
/// Answered by the destination in `Set-Cookie`.
const COOKIE: &str = "sid_9f8e7d6c5b4a39281706";
/// From the settings, secret by `secret_env` only (its name does not say so).
const HOOK_URL_SECRET: &str = "hooks-T1234-B5678-xyzzy";
const SECRETS: [&str; 4] = [API_KEY, DB_PASSWORD, COOKIE, HOOK_URL_SECRET];
const TOKEN: &str = "secrets-test-token-0123456789abcdef0123456789";

/// Fail naming where a secret, or a transformed one, showed up: the secret, reversed, upper-
/// and lower-cased, and every 8-character window of each of these.
fn assert_no_secret(what: &str, text: &str) {
    for s in SECRETS {
        for form in derived(s) {
            assert!(
                !text.contains(&form),
                "{what} contains `{form}`, from the secret `{s}`:\n{}",
                excerpt(text, &form)
            );
        }
    }
}

fn derived(s: &str) -> Vec<String> {
    let whole = [
        s.to_string(),
        s.chars().rev().collect(),
        s.to_uppercase(),
        s.to_lowercase(),
    ];
    let mut out = Vec::new();
    for w in whole {
        let chars: Vec<char> = w.chars().collect();
        out.extend(chars.windows(8).map(|c| c.iter().collect::<String>()));
        out.push(w);
    }
    out
}

fn excerpt(text: &str, s: &str) -> String {
    let i = text.find(s).unwrap_or(0);
    let a = text[..i]
        .char_indices()
        .rev()
        .nth(200)
        .map_or(0, |(j, _)| j);
    let b = (i + s.len() + 200).min(text.len());
    let b = (b..=text.len())
        .find(|&j| text.is_char_boundary(j))
        .unwrap();
    text[a..b].to_string()
}

/// A destination that echoes what it got (method, target, headers, body) and sets a cookie.
struct Echo {
    url: String,
    got: Arc<Mutex<Vec<Value>>>,
}

async fn echo() -> Echo {
    let got = Arc::new(Mutex::new(Vec::new()));
    let seen = got.clone();
    let app = axum::Router::new().fallback(move |req: Request| {
        let seen = seen.clone();
        async move {
            let (parts, body) = req.into_parts();
            let body = axum::body::to_bytes(body, 1 << 20)
                .await
                .unwrap_or_default();
            let headers: BTreeMap<String, String> = parts
                .headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
                .collect();
            let echo = json!({
                "method": parts.method.as_str(),
                "target": parts.uri.to_string(),
                "headers": headers,
                "body": serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null),
            });
            seen.lock().unwrap().push(echo.clone());
            (
                [("set-cookie", format!("session={COOKIE}; Path=/; HttpOnly"))],
                axum::Json(echo),
            )
                .into_response()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Echo { url, got }
}

/// A webhook workflow that sends every kind of secret to `env.CRM_URL` and echoes it.
fn leaky_workflow() -> Value {
    json!({
        "id": "leaky",
        "name": "leaky",
        "version": 1,
        "secrets": ["API_KEY", "DB_PASSWORD", "NOTIFY_URL"],
        "steps": [
            {"id": "hook", "kind": "webhook_trigger", "config": {}},
            {"id": "send", "kind": "http_request", "config": {
                "method": "POST",
                "url": "{{ env.CRM_URL }}/deals?region=eu",
                "headers": {
                    "Authorization": "Bearer {{ env.API_KEY }}",
                    "X-Db-Pass": "{{ env.DB_PASSWORD }}",
                    "X-Notify": "{{ env.NOTIFY_URL }}",
                    "Idempotency-Key": "deal-{{ input.id }}"
                },
                "body": {"id": "{{ input.id }}"},
                "retries": 0
            }},
            {"id": "shape", "kind": "transform", "config": {"fields": {
                "cookie": "{{ steps.send.output.headers['set-cookie'] }}",
                "echoed": "{{ steps.send.output.body.headers['x-db-pass'] }}"
            }}},
            {"id": "forward", "kind": "http_request", "config": {
                "method": "PUT", "url": "{{ env.CRM_URL }}/forward",
                "body": {"got": "{{ steps.shape.output.cookie }}"}, "retries": 0
            }},
            {"id": "broken", "kind": "http_request", "config": {
                "method": "GET", "url": "{{ env.NOTIFY_URL }}:not-a-port/x", "retries": 0
            }}
        ],
        "edges": [
            {"from": "hook", "to": "send"},
            {"from": "send", "to": "shape"},
            {"from": "shape", "to": "forward"},
            {"from": "forward", "to": "broken"}
        ]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_records_are_masked_but_the_destination_gets_the_secret() {
    let dest = echo().await;
    let h = Harness::new().env(&[
        ("API_KEY", API_KEY),
        ("DB_PASSWORD", DB_PASSWORD),
        ("NOTIFY_URL", HOOK_URL_SECRET),
        ("CRM_URL", &dest.url),
    ]);
    h.engine
        .set_secret_env(["NOTIFY_URL".to_string()].into_iter().collect());
    let wf = compile(&leaky_workflow());
    let run = h.run(&wf, json!({"id": "evt_1"})).await;

    // The destination got the real values.
    let got = dest.got.lock().unwrap().clone();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(
        got[0]["headers"]["authorization"],
        format!("Bearer {API_KEY}")
    );
    assert_eq!(got[0]["headers"]["x-db-pass"], DB_PASSWORD);
    assert_eq!(got[0]["headers"]["x-notify"], HOOK_URL_SECRET);

    // Later steps' templates saw the real output (masking is for records only): the cookie
    // went on to the destination, though every record of it is masked.
    assert_eq!(
        got[1]["body"]["got"],
        format!("session={COOKIE}; Path=/; HttpOnly")
    );
    let shape = step(&run, "shape").output.clone().unwrap();
    assert_eq!(shape, json!({"cookie": "••••Only", "echoed": "••••7731"}));
    let send = step(&run, "send");
    let cfg = &send.resolved_config;
    assert_eq!(cfg["headers"]["Authorization"], "Bearer ••••A2c9");
    assert_eq!(cfg["headers"]["X-Db-Pass"], "••••7731");
    assert_eq!(cfg["headers"]["X-Notify"], "••••yzzy");
    assert_eq!(
        cfg["headers"]["Idempotency-Key"], "deal-evt_1",
        "business data stays"
    );
    assert_eq!(
        cfg["url"],
        format!("{}/deals?region=eu", dest.url),
        "env.CRM_URL is not secret: the URL stays readable"
    );
    let out = send.output.as_ref().unwrap();
    assert_eq!(
        out["headers"]["set-cookie"], "••••Only",
        "response cookies are masked"
    );
    assert_eq!(out["body"]["headers"]["authorization"], "Bearer ••••A2c9");
    // The failing step's error (a URL made of secrets) is masked too.
    let broken = step(&run, "broken");
    let error = broken.error.as_ref().expect("broken fails");
    assert!(error.message.contains("••••yzzy"), "{error:?}");
    assert!(
        run.error.as_ref().unwrap().message.contains("••••yzzy"),
        "{:?}",
        run.error
    );
    let text = serde_json::to_string(&run).unwrap();
    assert_no_secret("the run record", &text);
    let stored = h.store.get_run(&run.id).await.unwrap().unwrap();
    assert_no_secret("the stored run", &serde_json::to_string(&stored).unwrap());
}

// ---------------------------------------------------------------------------------------------
// A real `fluxo serve`
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_never_reaches_records_exports_or_logs() {
    let dest = echo().await;
    let data = tempfile::tempdir().unwrap();
    let workflows = tempfile::tempdir().unwrap();
    std::fs::write(
        workflows.path().join("leaky.json"),
        serde_json::to_string_pretty(&leaky_workflow()).unwrap(),
    )
    .unwrap();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("serve.log");
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut child = serve_command(port, workflows.path(), data.path(), TOKEN, &log)
        .env("FLUXO_ENV_API_KEY", API_KEY)
        .env("FLUXO_LOG", "debug")
        .spawn()
        .expect("spawn fluxo serve");
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    wait_ready(&client, &url, &mut child, &log).await;
    let auth = format!("Bearer {TOKEN}");

    // Settings: secret values are masked in every answer.
    let put = |body: Value| {
        client
            .put(format!("{url}/api/v1/settings"))
            .header("authorization", &auth)
            .json(&body)
            .send()
    };
    let r = put(json!({
        "env": {"DB_PASSWORD": DB_PASSWORD, "NOTIFY_URL": HOOK_URL_SECRET, "CRM_URL": dest.url},
        "secret_env": ["NOTIFY_URL"]
    }))
    .await
    .unwrap();
    assert_eq!(r.status(), 200);
    let shown: Value = r.json().await.unwrap();
    assert_no_secret("the PUT settings answer", &shown.to_string());
    assert_eq!(shown["settings"]["env"]["DB_PASSWORD"], "••••7731");
    assert_eq!(shown["settings"]["env"]["NOTIFY_URL"], "••••yzzy");
    assert_eq!(shown["settings"]["env"]["CRM_URL"], dest.url.as_str());
    assert_eq!(shown["secret_names"], json!(["DB_PASSWORD", "NOTIFY_URL"]));
    let get = || {
        client
            .get(format!("{url}/api/v1/settings"))
            .header("authorization", &auth)
            .send()
    };
    let shown: Value = get().await.unwrap().json().await.unwrap();
    assert_no_secret("GET /api/v1/settings", &shown.to_string());
    // The UI saves the form as shown: the placeholders keep the stored values.
    let mut back = shown["settings"].clone();
    back["retention_days"] = json!(30);
    let r = put(back.clone()).await.unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    let file = std::fs::read_to_string(data.path().join("settings.json")).unwrap();
    assert!(
        file.contains(DB_PASSWORD) && file.contains(HOOK_URL_SECRET),
        "{file}"
    );
    assert!(
        !file.contains('•'),
        "a placeholder was saved as a value: {file}"
    );
    // A mask that is not the stored value's is refused, naming the variable.
    back["env"]["DB_PASSWORD"] = json!("••••0000");
    let r = put(back).await.unwrap();
    assert_eq!(r.status(), 400);
    let p: Value = r.json().await.unwrap();
    assert_eq!(p["code"], "invalid_settings");
    assert!(
        p["detail"].as_str().unwrap().contains("env.DB_PASSWORD"),
        "{p}"
    );

    // A delivery: the destination gets the real values.
    let r = client
        .post(format!("{url}/hooks/leaky"))
        .header("content-type", "application/json")
        .header("idempotency-key", "evt_secret_1")
        .body(json!({"id": "evt_secret_1"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let run_id = r.json::<Value>().await.unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let detail = wait_run_final(&client, &url, TOKEN, &run_id).await;
    let got = dest.got.lock().unwrap().clone();
    assert_eq!(got.len(), 2);
    assert_eq!(
        got[0]["headers"]["authorization"],
        format!("Bearer {API_KEY}")
    );
    assert_eq!(got[0]["headers"]["x-db-pass"], DB_PASSWORD);
    assert_eq!(got[0]["headers"]["x-notify"], HOOK_URL_SECRET);

    // The API's run detail (what the UI shows and exports) and the history list.
    assert_no_secret("GET /api/v1/runs/{id}", &detail.to_string());
    let send = detail["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step_id"] == "send")
        .unwrap();
    assert_eq!(
        send["resolved_config"]["headers"]["Authorization"],
        "Bearer ••••A2c9"
    );
    let list = client
        .get(format!("{url}/api/v1/runs?workflow=leaky"))
        .header("authorization", &auth)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_no_secret("GET /api/v1/runs", &list);

    // Stop the server (SIGTERM: a graceful stop), then read what it left.
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let deadline = Instant::now() + Duration::from_secs(15);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.wait();

    // `fluxo runs show --json` (the CLI's export).
    let out = Command::new(env!("CARGO_BIN_EXE_fluxo"))
        .args(["runs", "show", &run_id, "--json", "--data-dir"])
        .arg(data.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("••••A2c9"), "{shown}");
    assert_no_secret("fluxo runs show --json", &shown);

    // Every byte the server stored, but the settings file that holds the secrets on purpose
    // (run records are LZ4 blocks, whose literals would keep a stored secret readable).
    let mut stack = vec![data.path().to_path_buf()];
    let mut files = 0;
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().unwrap() != "settings.json" {
                files += 1;
                let bytes = std::fs::read(&p).unwrap();
                assert_no_secret(
                    &format!("the stored file {}", p.display()),
                    &String::from_utf8_lossy(&bytes),
                );
            }
        }
    }
    assert!(files > 2, "the store's files were read");

    // The server's log, at debug level.
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.is_empty(), "the log captured something");
    assert_no_secret("the server log", &text);
}

// ---------------------------------------------------------------------------------------------
// Derived secrets (issue 42, hole 5): a template never computes on a secret
// ---------------------------------------------------------------------------------------------

/// A workflow that declares `API_KEY` and sends one request whose header `X-Probe` is `probe`:
/// each probe below fails the render, naming the secret.
fn probe_workflow(id: &str, field: (&str, &str)) -> Value {
    let (place, template) = field;
    let mut send = json!({
        "method": "POST",
        "url": "{{ env.CRM_URL }}/probe",
        "headers": {"Idempotency-Key": "probe-{{ input.id }}"},
        "body": {"id": "{{ input.id }}"},
        "retries": 0
    });
    match place {
        "header" => send["headers"]["X-Probe"] = json!(template),
        "body" => send["body"]["probe"] = json!(template),
        _ => send["url"] = json!(template),
    }
    json!({
        "id": id,
        "name": id,
        "version": 1,
        "secrets": ["API_KEY"],
        "steps": [
            {"id": "hook", "kind": "webhook_trigger", "config": {}},
            {"id": "send", "kind": "http_request", "config": send}
        ],
        "edges": [{"from": "hook", "to": "send"}]
    })
}

/// Templates that would leak a transformed secret, where each sits, and the secret the error
/// must name.
const PROBES: &[(&str, &str, &str)] = &[
    ("header", "{{ env.API_KEY | reverse }}", "API_KEY"),
    ("header", "{{ env.API_KEY | upper }}", "API_KEY"),
    ("header", "{{ env.API_KEY | lower }}", "API_KEY"),
    ("header", "{{ env.API_KEY[0:8] }}", "API_KEY"),
    ("header", "{{ env.API_KEY[3] }}", "API_KEY"),
    ("header", "{{ env.API_KEY | list | join(',') }}", "API_KEY"),
    ("header", "{{ env.API_KEY.lower() }}", "API_KEY"),
    (
        "header",
        "{{ ('Bearer ' ~ env.API_KEY) | title }}",
        "API_KEY",
    ),
    (
        "header",
        "{% if env.API_KEY == 'x' %}yes{% else %}no{% endif %}",
        "API_KEY",
    ),
    (
        "header",
        "{% if 'sk_' in env.API_KEY %}yes{% endif %}",
        "API_KEY",
    ),
    (
        "header",
        "{{ env.API_KEY is startingwith('sk') }}",
        "API_KEY",
    ),
    ("header", "{{ env.API_KEY + 'x' }}", "API_KEY"),
    (
        "header",
        "{{ [env.API_KEY] | map('reverse') | join }}",
        "API_KEY",
    ),
    ("header", "Bearer {{ env.DB_PASSWORD }}", "DB_PASSWORD"),
    ("body", "key {{ env.API_KEY }}", "API_KEY"),
    (
        "url",
        "{{ env.CRM_URL }}/probe?key={{ env.API_KEY }}",
        "API_KEY",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transformed_secrets_fail_naming_the_secret_and_are_never_stored_or_previewed() {
    let dest = echo().await;
    let data = tempfile::tempdir().unwrap();
    let workflows = tempfile::tempdir().unwrap();
    for (i, (place, template, _)) in PROBES.iter().enumerate() {
        let wf = probe_workflow(&format!("probe-{i}"), (place, template));
        std::fs::write(
            workflows.path().join(format!("probe-{i}.json")),
            serde_json::to_string_pretty(&wf).unwrap(),
        )
        .unwrap();
    }
    // The control: the secret whole in a header reaches the destination.
    let ok = probe_workflow("whole", ("header", "Bearer {{ env.API_KEY }}"));
    std::fs::write(workflows.path().join("whole.json"), ok.to_string()).unwrap();
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("serve.log");
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut child = serve_command(port, workflows.path(), data.path(), TOKEN, &log)
        .env("FLUXO_ENV_API_KEY", API_KEY)
        .env("FLUXO_ENV_DB_PASSWORD", DB_PASSWORD)
        .env("FLUXO_ENV_CRM_URL", &dest.url)
        .spawn()
        .expect("spawn fluxo serve");
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    wait_ready(&client, &url, &mut child, &log).await;
    let auth = format!("Bearer {TOKEN}");
    let post = |path: String, body: Value| {
        client
            .post(format!("{url}{path}"))
            .header("authorization", &auth)
            .json(&body)
            .send()
    };
    let deliver = |id: String| {
        client
            .post(format!("{url}/hooks/{id}"))
            .header("content-type", "application/json")
            .header("idempotency-key", format!("evt-{id}"))
            .body(json!({"id": format!("evt-{id}")}).to_string())
            .send()
    };

    let r = deliver("whole".into()).await.unwrap();
    assert_eq!(r.status(), 202);
    let run_id = r.json::<Value>().await.unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let detail = wait_run_final(&client, &url, TOKEN, &run_id).await;
    assert_eq!(detail["status"], "succeeded", "{detail}");
    assert_eq!(
        dest.got.lock().unwrap()[0]["headers"]["x-probe"],
        format!("Bearer {API_KEY}")
    );

    let mut answers = String::new();
    for (i, (place, template, secret)) in PROBES.iter().enumerate() {
        let id = format!("probe-{i}");
        let r = deliver(id.clone()).await.unwrap();
        assert_eq!(r.status(), 202, "{template}");
        let run_id = r.json::<Value>().await.unwrap()["run_id"]
            .as_str()
            .unwrap()
            .to_string();
        let detail = wait_run_final(&client, &url, TOKEN, &run_id).await;
        assert_eq!(detail["status"], "failed", "{template}: {detail}");
        let error = &detail["error"];
        assert_eq!(error["code"], "template_error", "{template}: {error}");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains(&format!("env.{secret}")),
            "{template}: the error names the secret: {message}"
        );
        answers.push_str(&detail.to_string());
        // The replay and resume previews walk the same templates.
        for path in [
            format!("/api/v1/runs/{run_id}/replay/preview"),
            format!("/api/v1/runs/{run_id}/resume/preview"),
        ] {
            let r = post(path.clone(), json!({})).await.unwrap();
            let text = r.text().await.unwrap();
            assert!(
                text.contains(&format!("env.{secret}")),
                "{path} of {template}: {text}"
            );
            answers.push_str(&text);
        }
        // The editor's preview of the field, told where it sits and what the workflow declares.
        let r = post(
            "/api/v1/templates/preview".into(),
            json!({"template": template, "secrets": ["API_KEY"],
                   "place": if *place == "body" { "other" } else { place },
                   "input": {"id": "x"}}),
        )
        .await
        .unwrap();
        assert_eq!(r.status(), 200);
        let answer: Value = r.json().await.unwrap();
        let why = answer["error"]
            .as_str()
            .unwrap_or_else(|| panic!("{template}: {answer}"));
        assert!(why.contains(&format!("env.{secret}")), "{template}: {why}");
        answers.push_str(&answer.to_string());
    }
    assert_eq!(dest.got.lock().unwrap().len(), 1, "no probe sent anything");
    assert_no_secret("the runs, previews and template previews", &answers);

    // A whole secret in a header previews as its mask.
    let r = post(
        "/api/v1/templates/preview".into(),
        json!({"template": "Bearer {{ env.API_KEY }}", "secrets": ["API_KEY"], "place": "header"}),
    )
    .await
    .unwrap();
    let answer: Value = r.json().await.unwrap();
    assert_eq!(answer["value"], "Bearer ••••A2c9", "{answer}");

    let _ = child.kill();
    let _ = child.wait();
    // Every byte the server stored.
    let mut stack = vec![data.path().to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let bytes = std::fs::read(&p).unwrap();
                assert_no_secret(
                    &format!("the stored file {}", p.display()),
                    &String::from_utf8_lossy(&bytes),
                );
            }
        }
    }
}

/// A token is only its own render's: halves of one let out by a run, put back together in an
/// event, are text to the next run, never its secret (found by a black-box probe, when the
/// nonce was drawn once per process).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_let_out_by_one_run_is_only_text_to_the_next() {
    let dest = echo().await;
    let h = Harness::new().env(&[("API_KEY", API_KEY), ("CRM_URL", &dest.url)]);
    let leak = compile(&json!({
        "id": "halves", "name": "halves", "version": 1, "secrets": ["API_KEY"],
        "steps": [
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "cut", "kind": "transform", "config": {"fields": {
                "a": "{{ ('x' ~ env.API_KEY)[1:12] }}",
                "b": "{{ ('x' ~ env.API_KEY)[12:60] }}"
            }}}
        ],
        "edges": [{"from": "start", "to": "cut"}]
    }));
    let run = h.run(&leak, json!({})).await;
    let out = step(&run, "cut").output.clone().unwrap();
    let forged = format!(
        "{}{}",
        out["a"].as_str().unwrap(),
        out["b"].as_str().unwrap()
    );
    assert!(forged.ends_with(":API_KEY\u{fdd1}"), "{forged:?}");

    let forward = compile(&json!({
        "id": "forward", "name": "forward", "version": 1, "secrets": ["API_KEY"],
        "steps": [
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "send", "kind": "http_request", "config": {
                "method": "POST", "url": "{{ env.CRM_URL }}/f",
                "headers": {"X-Ref": "{{ input.t }}", "Idempotency-Key": "f-1"},
                "body": {}, "retries": 0
            }}
        ],
        "edges": [{"from": "start", "to": "send"}]
    }));
    let run = h.run(&forward, json!({"t": forged})).await;
    assert_eq!(
        run.status,
        fluxo::run::RunStatus::Succeeded,
        "{:?}",
        run.error
    );
    let got = dest.got.lock().unwrap().clone();
    // (The echo shows a header that is not visible ASCII as "".)
    let sent = got.last().unwrap()["headers"]["x-ref"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(sent, API_KEY);
    // What was sent is the event's text, recorded as it came (not a mask of the secret).
    let header = &step(&run, "send").resolved_config["headers"]["X-Ref"];
    assert_eq!(header.as_str(), Some(forged.as_str()), "{header}");
    assert_no_secret("the forwarding run", &serde_json::to_string(&run).unwrap());
}
