//! Operating the binary: shell completions and man pages generated from the clap definitions,
//! and JSON logs whose lines carry the request, run and workflow ids (issue 16, items 4-5).

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

mod common;

use common::child::{free_port, serve_command, wait_ready};

fn fluxo() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fluxo"))
}

#[test]
fn completions_cover_every_subcommand_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let out = fluxo().args(["completions", shell]).output().unwrap();
        assert!(
            out.status.success(),
            "{shell}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        for sub in ["serve", "check", "runs", "memory", "db"] {
            assert!(text.contains(sub), "{shell} completion lacks `{sub}`");
        }
    }
    let bad = fluxo().args(["completions", "nosh"]).output().unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("possible values"));
}

#[test]
fn man_pages_are_written_per_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let out = fluxo()
        .args(["man", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let serve = std::fs::read_to_string(dir.path().join("fluxo-serve.1")).unwrap();
    assert!(
        serve.starts_with(".ie") || serve.contains(".TH"),
        "roff: {serve:.80}"
    );
    assert!(
        serve.contains("lease"),
        "the serve page documents --lease-s"
    );
    assert!(dir.path().join("fluxo.1").exists());
}

/// A `fluxo serve` child on a free port over a folder holding one webhook → transform
/// workflow `wf_id` (none when `None`), started with `args` and `env`, ready to answer.
struct Served {
    _tmp: tempfile::TempDir,
    child: std::process::Child,
    log: std::path::PathBuf,
    url: String,
    client: reqwest::Client,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn serve(wf_id: Option<&str>, token: &str, args: &[&str], env: &[(&str, &str)]) -> Served {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("workflows")).unwrap();
    if let Some(id) = wf_id {
        let wf = json!({
            "id": id, "name": id, "version": 1,
            "steps": [
                {"id": "hook", "kind": "webhook_trigger", "config": {}},
                {"id": "shape", "kind": "transform", "config": {"fields": {"id": "{{ input.id }}"}}}
            ],
            "edges": [{"from": "hook", "to": "shape"}]
        });
        std::fs::write(
            tmp.path().join(format!("workflows/{id}.json")),
            wf.to_string(),
        )
        .unwrap();
    }
    let port = free_port();
    let log = tmp.path().join("serve.log");
    let mut child = serve_command(
        port,
        &tmp.path().join("workflows"),
        &tmp.path().join("data"),
        token,
        &log,
    )
    .args(args)
    .envs(env.iter().copied())
    .spawn()
    .unwrap();
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let url = format!("http://127.0.0.1:{port}");
    wait_ready(&client, &url, &mut child, &log).await;
    Served {
        _tmp: tmp,
        child,
        log,
        url,
        client,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_carry_request_run_and_workflow_ids() {
    let served = serve(
        Some("logged"),
        "log-token-0123456789abcdef0123456789",
        &["--log-format", "json"],
        &[("FLUXO_LOG", "info")],
    )
    .await;
    let (client, url, log) = (&served.client, &served.url, &served.log);
    let r = client
        .post(format!("{url}/hooks/logged"))
        .header("idempotency-key", "evt_1")
        .header("x-request-id", "req-abc")
        .json(&json!({"id": "evt_1"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let run_id = r.json::<Value>().await.unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    // Bounded wait for the accepted delivery's line and a line of its run.
    let deadline = Instant::now() + Duration::from_secs(10);
    let (mut request_line, mut run_line) = (None, None);
    while Instant::now() < deadline && (request_line.is_none() || run_line.is_none()) {
        for line in std::fs::read_to_string(log).unwrap().lines() {
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("a log line is not JSON ({e}): {line}"));
            let spans = v["spans"].as_array().cloned().unwrap_or_default();
            if spans.iter().any(|s| s["request_id"] == json!("req-abc")) {
                request_line = Some(v.clone());
            }
            if spans
                .iter()
                .any(|s| s["run_id"] == json!(run_id) && s["workflow_id"] == json!("logged"))
            {
                run_line = Some(v.clone());
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop(served);
    let request_line = request_line.expect("a log line inside the request's span");
    assert!(request_line["level"].is_string() && request_line["timestamp"].is_string());
    run_line.expect("a log line inside the run's span, with run and workflow ids");
}

/// `GET /metrics` after a small storm: the counters match the runs and duplicates made, the
/// exposition parses, and off loopback the token is required.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_what_a_small_storm_did() {
    let served = serve(
        Some("counted"),
        "metrics-token-0123456789abcdef0123456789",
        &[],
        &[],
    )
    .await;
    let (client, url) = (&served.client, &served.url);
    // 6 new events, 4 repeats, 2 rejections (unknown workflow, bad JSON).
    for i in 0..6 {
        for _ in 0..if i < 4 { 2 } else { 1 } {
            let r = client
                .post(format!("{url}/hooks/counted"))
                .header("idempotency-key", format!("evt_{i}"))
                .json(&json!({"id": i}))
                .send()
                .await
                .unwrap();
            assert!(r.status().is_success());
        }
    }
    let r = client
        .post(format!("{url}/hooks/nope"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let r = client
        .post(format!("{url}/hooks/counted"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    // Bounded wait until the 6 runs ended (the runs counter says so).
    let deadline = Instant::now() + Duration::from_secs(10);
    let scrape = loop {
        let text = client
            .get(format!("{url}/metrics"))
            .bearer_auth("metrics-token-0123456789abcdef0123456789")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string())))
            .expect("the exposition format parses");
        if value(
            &scrape,
            "fluxo_runs_total",
            &[("workflow", "counted"), ("status", "succeeded")],
        ) == 6.0
        {
            break scrape;
        }
        assert!(
            Instant::now() < deadline,
            "the runs never all counted:\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    drop(served);
    let deliveries = |outcome: &str| {
        value(
            &scrape,
            "fluxo_webhook_deliveries_total",
            &[("outcome", outcome)],
        )
    };
    assert_eq!(deliveries("accepted"), 6.0);
    assert_eq!(deliveries("duplicate"), 4.0);
    assert_eq!(deliveries("rejected"), 2.0);
    assert_eq!(
        value(
            &scrape,
            "fluxo_webhook_deliveries_total",
            &[("code", "workflow_not_found")]
        ),
        1.0
    );
    assert_eq!(
        value(
            &scrape,
            "fluxo_step_attempts_total",
            &[("kind", "transform"), ("outcome", "succeeded")]
        ),
        6.0
    );
    assert_eq!(value(&scrape, "fluxo_queue_depth", &[]), 0.0);
    // The deliveries went through the claims lane, the runs' final states through the runs lane.
    for lane in ["claims", "runs"] {
        assert!(
            value(&scrape, "fluxo_commit_batch_size_count", &[("lane", lane)]) >= 1.0,
            "no batch in the {lane} lane"
        );
    }
}

/// The sum of the samples of `name` whose labels include `labels`.
fn value(scrape: &prometheus_parse::Scrape, name: &str, labels: &[(&str, &str)]) -> f64 {
    scrape
        .samples
        .iter()
        .filter(|s| s.metric == name)
        .filter(|s| labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
        .map(|s| match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => 0.0,
        })
        .sum()
}

/// `/metrics` needs the token by default (issue 42: a reverse proxy on the same host made
/// the former loopback default open to everyone); `--metrics-auth none` opens it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_need_the_token_unless_opened() {
    let served = serve(None, "metrics-token-0123456789abcdef0123456789", &[], &[]).await;
    let (client, url) = (&served.client, &served.url);
    let open = client.get(format!("{url}/metrics")).send().await.unwrap();
    let with = client
        .get(format!("{url}/metrics"))
        .bearer_auth("metrics-token-0123456789abcdef0123456789")
        .send()
        .await
        .unwrap();
    drop(served);
    assert_eq!(open.status().as_u16(), 401);
    assert_eq!(with.status().as_u16(), 200);

    let served = serve(
        None,
        "metrics-token-0123456789abcdef0123456789",
        &["--metrics-auth", "none"],
        &[],
    )
    .await;
    let open = served
        .client
        .get(format!("{}/metrics", served.url))
        .send()
        .await
        .unwrap();
    assert_eq!(open.status().as_u16(), 200);
}

/// One span a collector received: its ids (hex), name and string/int attributes.
#[derive(Debug, Clone)]
struct GotSpan {
    trace_id: String,
    span_id: String,
    parent_span_id: String,
    name: String,
    attrs: std::collections::HashMap<String, String>,
}

/// A collector stand-in on port 0: `POST /v1/traces` with an OTLP/HTTP protobuf export
/// request, decoded into [`GotSpan`]s (with the service name checked once).
async fn otlp_collector() -> (String, std::sync::Arc<std::sync::Mutex<Vec<GotSpan>>>) {
    let (url, got, _) = otlp_collector_raw().await;
    (url, got)
}

/// [`otlp_collector`], also keeping every export request's bytes as received.
type Raw = std::sync::Arc<std::sync::Mutex<Vec<u8>>>;
async fn otlp_collector_raw() -> (String, std::sync::Arc<std::sync::Mutex<Vec<GotSpan>>>, Raw) {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    use prost::Message as _;
    let got: std::sync::Arc<std::sync::Mutex<Vec<GotSpan>>> = Default::default();
    let raw: Raw = Default::default();
    let sink = got.clone();
    let bytes = raw.clone();
    let app = axum::Router::new().route(
        "/v1/traces",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let sink = sink.clone();
                bytes.lock().unwrap().extend_from_slice(&body);
                async move {
                    assert_eq!(
                        headers.get("content-type").unwrap(),
                        "application/x-protobuf",
                        "OTLP/HTTP protobuf"
                    );
                    let req = ExportTraceServiceRequest::decode(body).expect("an OTLP export");
                    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
                    for rs in req.resource_spans {
                        let service = rs
                            .resource
                            .iter()
                            .flat_map(|r| &r.attributes)
                            .find(|a| a.key == "service.name")
                            .and_then(|a| a.value.as_ref()?.value.clone());
                        assert_eq!(service, Some(Any::StringValue("fluxo".into())));
                        for ss in rs.scope_spans {
                            for s in ss.spans {
                                let attrs = s
                                    .attributes
                                    .iter()
                                    .filter_map(|a| {
                                        let v = match a.value.as_ref()?.value.as_ref()? {
                                            Any::StringValue(s) => s.clone(),
                                            Any::IntValue(i) => i.to_string(),
                                            other => format!("{other:?}"),
                                        };
                                        Some((a.key.clone(), v))
                                    })
                                    .collect();
                                sink.lock().unwrap().push(GotSpan {
                                    trace_id: hex(&s.trace_id),
                                    span_id: hex(&s.span_id),
                                    parent_span_id: hex(&s.parent_span_id),
                                    name: s.name,
                                    attrs,
                                });
                            }
                        }
                    }
                    (
                        [("content-type", "application/x-protobuf")],
                        Vec::<u8>::new(),
                    )
                }
            },
        ),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, got, raw)
}

/// Issue 35: a connection's secret reaches the app and no exported span: the spans of a run
/// whose `action` step called HubSpot's fake as a connection carry ids and statuses only, and
/// the export requests' bytes hold no part of the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connections_secret_is_in_no_exported_span() {
    let (collector, got, raw) = otlp_collector_raw().await;
    let sandbox = fluxo::sandbox::Sandbox::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let secret = "pat-sandbox-span-secret-0123456789";
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("workflows")).unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let key = fluxo::connections::key::ConnectionKey::generate();
    let mut conn =
        fluxo::sandbox::vendors::sandbox_connection("hubspot", "crm", &sandbox.url(), "bearer")
            .unwrap();
    conn.credential = fluxo::connections::Credential::Bearer {
        token: secret.into(),
    };
    std::fs::write(
        data.join(fluxo::connections::file::FILE),
        fluxo::connections::file::seal(&key, &[conn]),
    )
    .unwrap();
    let wf = json!({
        "id": "traced_app", "name": "traced app", "version": 1,
        "steps": [
            {"id": "hook", "kind": "webhook_trigger", "config": {}},
            {"id": "create", "kind": "action", "config": {
                "connector": "hubspot", "operation": "create_contact", "connection": "crm",
                "params": {"email": "{{ input.id }}@example.com"}}}
        ],
        "edges": [{"from": "hook", "to": "create"}]
    });
    std::fs::write(tmp.path().join("workflows/traced_app.json"), wf.to_string()).unwrap();
    let port = free_port();
    let log = tmp.path().join("serve.log");
    let mut child = serve_command(
        port,
        &tmp.path().join("workflows"),
        &data,
        "trace-token-0123456789abcdef0123456789",
        &log,
    )
    .args(["--otlp-endpoint", &collector])
    .env("OTEL_BSP_SCHEDULE_DELAY", "100")
    .env("FLUXO_LOG", "debug")
    .env(fluxo::connections::key::KEY_ENV, key.to_hex())
    .spawn()
    .unwrap();
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let url = format!("http://127.0.0.1:{port}");
    wait_ready(&client, &url, &mut child, &log).await;
    let served = Served {
        _tmp: tmp,
        child,
        log: log.clone(),
        url: url.clone(),
        client: client.clone(),
    };
    let r = client
        .post(format!("{url}/hooks/traced_app"))
        .header("idempotency-key", "evt_span")
        .json(&json!({"id": "evt_span"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let deadline = Instant::now() + Duration::from_secs(15);
    let spans = loop {
        let spans = got.lock().unwrap().clone();
        if spans.iter().any(|s| s.name == "step create")
            && spans.iter().any(|s| s.name == "run traced_app")
        {
            break spans;
        }
        assert!(
            Instant::now() < deadline,
            "spans so far: {:?}\n{}",
            spans.iter().map(|s| &s.name).collect::<Vec<_>>(),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // The token went to the app …
    let contacts: Value = client
        .get(format!("{}/_sandbox/vendors/hubspot", sandbox.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        contacts["contacts"].as_array().unwrap().len(),
        1,
        "{contacts}"
    );
    // … and into no span, no export byte, no log line (at debug).
    let tail = &secret[secret.len() - 12..];
    for s in &spans {
        assert!(!s.name.contains(tail), "{s:?}");
        assert!(s.attrs.values().all(|v| !v.contains(tail)), "{s:?}");
    }
    let bytes = raw.lock().unwrap().clone();
    assert!(!bytes.is_empty());
    assert!(
        !bytes.windows(tail.len()).any(|w| w == tail.as_bytes()),
        "the export requests hold the token"
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.is_empty(), "a debug log was written");
    assert!(!text.contains(tail), "the log holds the token");
    drop(served);
    sandbox.shutdown().await;
}

/// Issue 16: with `--otlp-endpoint`, a webhook delivery carrying a W3C `traceparent` yields
/// spans of its run (run → step → HTTP attempt) in the sender's trace, each with the run id,
/// and the step's outbound call carries the attempt span as its `traceparent`; a run started
/// through the run API with a `traceparent` is that caller's child too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_of_a_run_reach_the_collector_in_the_senders_trace() {
    let (collector, got) = otlp_collector().await;
    let dest = common::Mock::always(common::Action::json(201, json!({"id": "deal_1"}))).await;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("workflows")).unwrap();
    let wf = json!({
        "id": "traced", "name": "traced", "version": 1,
        "steps": [
            {"id": "hook", "kind": "webhook_trigger", "config": {}},
            {"id": "create", "kind": "http_request", "config": {
                "method": "POST", "url": format!("{}/deals", dest.url()),
                "headers": {"Idempotency-Key": "deal-{{ input.id }}"},
                "body": {"id": "{{ input.id }}"}}}
        ],
        "edges": [{"from": "hook", "to": "create"}]
    });
    std::fs::write(tmp.path().join("workflows/traced.json"), wf.to_string()).unwrap();
    let port = free_port();
    let log = tmp.path().join("serve.log");
    let mut child = serve_command(
        port,
        &tmp.path().join("workflows"),
        &tmp.path().join("data"),
        "trace-token-0123456789abcdef0123456789",
        &log,
    )
    .args(["--otlp-endpoint", &collector])
    .env("OTEL_BSP_SCHEDULE_DELAY", "100")
    .spawn()
    .unwrap();
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let url = format!("http://127.0.0.1:{port}");
    wait_ready(&client, &url, &mut child, &log).await;
    // Killed when dropped, also when an assertion below fails.
    let served = Served {
        _tmp: tmp,
        child,
        log: log.clone(),
        url: url.clone(),
        client: client.clone(),
    };

    let (trace_id, sender_span) = ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7");
    let r = client
        .post(format!("{url}/hooks/traced"))
        .header("traceparent", format!("00-{trace_id}-{sender_span}-01"))
        .header("idempotency-key", "evt_traced")
        .json(&json!({"id": "evt_traced"}))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let answer: Value = r.json().await.unwrap();
    assert_eq!(status, 202, "{answer}");
    let run_id = answer["run_id"].as_str().unwrap().to_string();

    // Bounded wait for the run, step and attempt spans (the batch exports every 100 ms).
    let deadline = Instant::now() + Duration::from_secs(15);
    let spans = loop {
        let spans = got.lock().unwrap().clone();
        let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
        if ["run traced", "step hook", "step create", "attempt 1"]
            .iter()
            .all(|n| names.contains(n))
        {
            break spans;
        }
        assert!(
            Instant::now() < deadline,
            "spans so far: {names:?}\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // The run API takes a `traceparent` too: its run's span is the caller's child.
    let (api_trace, api_span) = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
    let r = client
        .post(format!("{url}/api/v1/workflows/traced/runs"))
        .bearer_auth("trace-token-0123456789abcdef0123456789")
        .header("traceparent", format!("00-{api_trace}-{api_span}-01"))
        .header("prefer", "respond-async")
        .json(&json!({"input": {"id": "evt_api"}}))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let answer: Value = r.json().await.unwrap();
    assert!(status == 200 || status == 202, "{status} {answer}");
    let api_run = answer["run_id"]
        .as_str()
        .or_else(|| answer["id"].as_str())
        .unwrap_or_else(|| panic!("a run id in {answer}"))
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(15);
    let api_run_span = loop {
        let found = got
            .lock()
            .unwrap()
            .iter()
            .find(|s| s.name == "run traced" && s.attrs.get("run_id") == Some(&api_run))
            .cloned();
        if let Some(s) = found {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "no span of the API's run {api_run}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(api_run_span.trace_id, api_trace);
    assert_eq!(api_run_span.parent_span_id, api_span);
    drop(served);
    let spans: Vec<GotSpan> = spans
        .into_iter()
        .filter(|s| s.attrs.get("run_id") == Some(&run_id))
        .collect();

    let named = |n: &str| spans.iter().find(|s| s.name == n).unwrap().clone();
    let (run, create, attempt) = (
        named("run traced"),
        named("step create"),
        named("attempt 1"),
    );
    for s in &spans {
        assert_eq!(
            s.trace_id, trace_id,
            "every span is in the sender's trace: {s:?}"
        );
        assert_eq!(s.attrs.get("run_id"), Some(&run_id), "the run id on {s:?}");
    }
    assert_eq!(
        run.parent_span_id, sender_span,
        "the run's parent is the sender's span"
    );
    assert_eq!(
        run.attrs.get("workflow_id").map(String::as_str),
        Some("traced")
    );
    assert_eq!(create.parent_span_id, run.span_id);
    assert_eq!(named("step hook").parent_span_id, run.span_id);
    assert_eq!(
        create.attrs.get("kind").map(String::as_str),
        Some("http_request")
    );
    assert_eq!(attempt.parent_span_id, create.span_id);
    assert_eq!(
        attempt
            .attrs
            .get("http.response.status_code")
            .map(String::as_str),
        Some("201")
    );

    // The webhook run's outbound call carried its attempt's context (the API's run made the
    // other call).
    let calls: Vec<_> = dest
        .requests()
        .into_iter()
        .filter(|c| c.json()["id"] == "evt_traced")
        .collect();
    assert_eq!(calls.len(), 1);
    assert_eq!(
        calls[0].header("traceparent"),
        Some(format!("00-{trace_id}-{}-01", attempt.span_id).as_str()),
        "the destination got the attempt span as its parent"
    );
}
