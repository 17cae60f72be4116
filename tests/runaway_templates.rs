//! Runaway templates (SPEC §5, issue 13 item 5): fuel, the size of built values, rendering off
//! the async threads and inside the run deadline.
//!
//! The server tests run on a **current-thread** runtime: the server, its workers and the test
//! share one thread, so a render on the async threads would hold `/healthz` for its whole
//! duration. They pass only because costly templates render on the blocking pool.

mod common;

use std::time::{Duration, Instant};

use common::server::{Setup, TestServer};
use common::{compile, step, workflow, Harness};
use fluxo::run::{RunRecord, RunStatus};
use reqwest::Method;
use serde_json::{json, Value};

/// A nested `range` loop: 10^10 iterations without fuel.
const NESTED: &str =
    "{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}{% endfor %}";

/// Within the fuel of one render (one full `range`), but slow in bulk.
const ONE_RANGE: &str = "{% for i in range(100000) %}{% endfor %}x";

fn one_transform(id: &str, timeout_s: u64, fields: Value) -> Value {
    workflow(
        id,
        json!({"run_timeout_s": timeout_s}),
        json!([
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "shape", "kind": "transform", "config": {"fields": fields}}
        ]),
        json!([{"from": "start", "to": "shape"}]),
    )
}

/// 400 fields of [`ONE_RANGE`]: about 100 ms each in a debug build, 8 ms in release, so the
/// step renders for far longer than a 1 s deadline either way.
fn slow_fields() -> Value {
    Value::Object(
        (0..400)
            .map(|i| (format!("f{i}"), json!(ONE_RANGE)))
            .collect(),
    )
}

#[tokio::test]
async fn a_nested_range_loop_fails_its_step_with_out_of_fuel() {
    let wf = compile(&one_transform("fuel", 50, json!({"loop": NESTED})));
    let h = Harness::new();
    let run = h.run(&wf, json!({})).await;
    assert_eq!(run.status, RunStatus::Failed);
    let err = step(&run, "shape").error.clone().expect("the step failed");
    assert_eq!(err.code, "template_error");
    assert!(
        err.message.contains("template ran out of fuel"),
        "{}",
        err.message
    );
    assert!(
        err.message.contains("config.fields.loop"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn a_doubled_string_past_1_mib_fails_with_a_clear_error_and_the_record_stays_small() {
    let doubling = "{% set ns = namespace(s='x') %}{% for i in range(26) %}\
                    {% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}";
    let wf = compile(&one_transform("double", 50, json!({"big": doubling})));
    let h = Harness::new();
    let run = h.run(&wf, json!({})).await;
    assert_eq!(run.status, RunStatus::Failed);
    let err = step(&run, "shape").error.clone().unwrap();
    assert_eq!(err.code, "template_error");
    assert!(
        err.message.contains("larger than 1048576 bytes"),
        "{}",
        err.message
    );
    assert!(serde_json::to_vec(&run).unwrap().len() < 64 * 1024);
}

#[tokio::test]
async fn rendering_past_the_deadline_ends_the_run_timed_out() {
    let wf = compile(&one_transform("slow", 1, slow_fields()));
    let h = Harness::new();
    let t0 = Instant::now();
    let run = h.run(&wf, json!({})).await;
    let took = t0.elapsed();
    assert_eq!(run.status, RunStatus::TimedOut, "{:?}", run.error);
    let err = run.error.clone().unwrap();
    assert_eq!(err.code, "deadline_exceeded");
    assert_eq!(err.step, "shape");
    assert!(err.message.contains("rendering"), "{}", err.message);
    assert!(took < Duration::from_secs(5), "ended {took:?} after start");
}

#[tokio::test]
async fn a_compensation_after_the_deadline_still_renders() {
    // The slow step times out; the error branch's transform (a costly template) still runs.
    let wf = compile(&workflow(
        "comp",
        json!({"run_timeout_s": 1}),
        json!([
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "shape", "kind": "transform", "config": {"fields": slow_fields()}},
            {"id": "undo", "kind": "transform",
             "config": {"fields": {"why": "{{ error.code | upper }}"}}}
        ]),
        json!([{"from": "start", "to": "shape"}, {"from": "shape", "port": "error", "to": "undo"}]),
    ));
    let h = Harness::new();
    let run = h.run(&wf, json!({})).await;
    assert_eq!(
        step(&run, "undo").output,
        Some(json!({"why": "DEADLINE_EXCEEDED"}))
    );
}

/// Start a run of `wf` asynchronously; poll `/healthz` every 10 ms until the run is final.
/// Answers the run and the slowest `/healthz`.
async fn run_while_probing_healthz(s: &TestServer, wf: &str) -> (RunRecord, Duration) {
    let a = s
        .api(
            Method::POST,
            &format!("/workflows/{wf}/runs"),
            &[("prefer", "respond-async")],
            Some(r#"{"input": {}}"#),
        )
        .await;
    assert_eq!(a.status.as_u16(), 202, "{}", a.text);
    let id = a.json()["id"].as_str().unwrap().to_string();
    let mut slowest = Duration::ZERO;
    let mut probes = 0;
    let started = Instant::now();
    loop {
        let t0 = Instant::now();
        let h = s.send(Method::GET, "/healthz", &[], None).await;
        let took = t0.elapsed();
        assert_eq!(h.status.as_u16(), 200);
        slowest = slowest.max(took);
        probes += 1;
        if let Some(r) = s.store.get_run(&id).await.unwrap() {
            if r.status.is_final() {
                assert!(probes >= 3, "the run ended before /healthz was measured");
                return (r, slowest);
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the run never ended"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn over_http_a_runaway_template_never_stalls_healthz_and_never_succeeds() {
    let s = Setup::new()
        .workflow(one_transform(
            "runaway",
            2,
            json!({"a": NESTED, "b": NESTED}),
        ))
        .workflow(one_transform("slow", 1, slow_fields()))
        .start()
        .await;
    let (run, slowest) = run_while_probing_healthz(&s, "runaway").await;
    assert_eq!(run.status, RunStatus::Failed, "{:?}", run.error);
    assert!(run
        .error
        .as_ref()
        .unwrap()
        .message
        .contains("template ran out of fuel"));
    assert!(
        slowest < Duration::from_millis(100),
        "/healthz took {slowest:?}"
    );

    let (run, slowest) = run_while_probing_healthz(&s, "slow").await;
    assert_eq!(run.status, RunStatus::TimedOut, "{:?}", run.error);
    assert!(
        slowest < Duration::from_millis(100),
        "/healthz took {slowest:?}"
    );
}

/// Issue 42, hole 2: one template asking for terabytes (`[1] * 10^11`, a string doubled past
/// 1 MiB) used to abort the process ("memory allocation of 7200000000000 bytes failed"), from
/// the preview with a token or from a webhook without one. A real `fluxo serve` under a 4 GiB
/// address space (so a regression fails this test instead of eating the machine): the preview
/// and the run each answer a clear error naming the memory budget, and the process lives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terabyte_templates_fail_on_the_memory_budget_and_the_process_lives() {
    use common::child::{free_port, serve_command_limited, wait_ready, wait_run_final};
    const TOKEN: &str = "runaway-templates-token-0123456789abcdef0123456789";
    let data = tempfile::tempdir().unwrap();
    let workflows = tempfile::tempdir().unwrap();
    let wf = json!({
        "id": "amplify", "name": "amplify", "version": 1,
        "steps": [
            {"id": "hook", "kind": "webhook_trigger", "config": {}},
            {"id": "shape", "kind": "transform", "config": {"fields": {
                "items": "{{ [1] * input.n }}"
            }}}
        ],
        "edges": [{"from": "hook", "to": "shape"}]
    });
    std::fs::write(workflows.path().join("amplify.json"), wf.to_string()).unwrap();
    let log = data.path().join("serve.log");
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let mut child = serve_command_limited(
        4 << 30,
        port,
        workflows.path(),
        &data.path().join("data"),
        TOKEN,
        &log,
    )
    .spawn()
    .expect("spawn prlimit fluxo serve");
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    wait_ready(&client, &url, &mut child, &log).await;
    let auth = format!("Bearer {TOKEN}");

    for template in [
        "{{ [1] * 100000000000 }}",
        "x{{ [1] * 1000000000 }}",
        "{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
    ] {
        let r = client
            .post(format!("{url}/api/v1/templates/preview"))
            .header("authorization", &auth)
            .json(&json!({"template": template}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{template}");
        let answer: Value = r.json().await.unwrap();
        let error = answer["error"].as_str().unwrap_or_default();
        assert!(error.contains("memory budget"), "{template}: {answer}");
    }

    let r = client
        .post(format!("{url}/hooks/amplify"))
        .header("content-type", "application/json")
        .header("idempotency-key", "evt_amplify_1")
        .body(json!({"n": 100_000_000_000u64}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let run_id = r.json::<Value>().await.unwrap()["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let run = wait_run_final(&client, &url, TOKEN, &run_id).await;
    assert_eq!(run["status"], "failed", "{run}");
    let shape = run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step_id"] == "shape")
        .unwrap_or_else(|| panic!("no shape step: {run}"));
    assert_eq!(shape["error"]["code"], "template_error", "{shape}");
    let message = shape["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("memory budget") && message.contains("config.fields.items"),
        "{message}"
    );

    assert!(child.try_wait().unwrap().is_none(), "the process died");
    let health = client.get(format!("{url}/healthz")).send().await.unwrap();
    assert!(health.status().is_success());
    child.kill().ok();
    child.wait().ok();
}

/// Issue 42, hole 4: previews used to render on the request threads with no time limit (two
/// previews held `/healthz` for 56 s). On a current-thread runtime (the server and the test
/// share one thread) six previews that each burn a render's whole fuel answer while
/// `/healthz` keeps answering: they render on the blocking pool, two at a time.
#[tokio::test]
async fn previews_render_off_the_request_threads_two_at_a_time() {
    let s = Setup::new().start().await;
    let body = json!({"template": NESTED}).to_string();
    let previews = futures_util::future::join_all(
        (0..6).map(|_| s.api(Method::POST, "/templates/preview", &[], Some(&body))),
    );
    let probe = async {
        let mut slowest = Duration::ZERO;
        for _ in 0..20 {
            let t0 = Instant::now();
            let h = s.send(Method::GET, "/healthz", &[], None).await;
            assert_eq!(h.status.as_u16(), 200);
            slowest = slowest.max(t0.elapsed());
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        slowest
    };
    let (answers, slowest) = tokio::join!(previews, probe);
    let mut out_of_fuel = 0;
    for a in answers {
        assert_eq!(a.status.as_u16(), 200, "{}", a.text);
        let error = a.json()["error"].as_str().unwrap_or_default().to_string();
        // Each is answered within the preview deadline (2 s, a slot's wait included): with
        // its render's end, or, on a loaded machine, with the deadline's message.
        let late = error.contains("the preview took longer than 2 s");
        assert!(error.contains("ran out of fuel") || late, "{}", a.text);
        out_of_fuel += usize::from(!late);
    }
    assert!(
        out_of_fuel >= 2,
        "the first two previews rendered to their end"
    );
    assert!(
        slowest < Duration::from_millis(100),
        "/healthz took {slowest:?}"
    );
}
