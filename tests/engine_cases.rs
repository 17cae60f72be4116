//! The engine against real local HTTP mocks and a manual clock: handed cases C4 (step level),
//! C5–C9, Retry-After, the run deadline, error handler modes and outbound idempotency keys.
//!
//! No test sleeps for a backoff: every wait goes through the [`ManualClock`], which advances
//! virtual time at once. The only real time spent is an attempt timeout of 0.2 s in the
//! read-timeout cases.

mod common;

use std::time::Duration;

use serde_json::{json, Value};

use common::{compile, dump, output, ran_ids, step, workflow, Action, Harness, Mock};
use fluxo::run::{RunStatus, StepStatus};
use fluxo::store::MemoryStore;
use fluxo::workflow::Compiled;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// `start (manual) → call (http_request POST <url>/deals)`, with `extra` merged into the HTTP
/// step's config, `settings` as the workflow's, and `more_steps`/`more_edges` appended.
fn http_workflow(
    url: &str,
    extra: Value,
    settings: Value,
    more_steps: Vec<Value>,
    more_edges: Vec<Value>,
) -> Compiled {
    let mut config = json!({
        "method": "POST",
        "url": format!("{url}/deals"),
        "headers": { "Idempotency-Key": "deal-{{ input.id }}" },
        "body": { "id": "{{ input.id }}" },
    });
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        config[k] = v;
    }
    let mut steps = vec![
        json!({ "id": "start", "kind": "manual_trigger", "config": {} }),
        json!({ "id": "call", "kind": "http_request", "config": config }),
    ];
    steps.extend(more_steps);
    let mut edges = vec![json!({ "from": "start", "to": "call" })];
    edges.extend(more_edges);
    compile(&workflow("http-case", settings, json!(steps), json!(edges)))
}

fn delays(run: &fluxo::run::RunRecord, id: &str) -> Vec<u64> {
    step(run, id)
        .attempts
        .iter()
        .map(|a| a.delay_before_ms)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// C5. Router on missing or odd values
// ---------------------------------------------------------------------------------------------

fn router_workflow(field: &str) -> Compiled {
    compile(&workflow(
        "router-case",
        Value::Null,
        json!([
            { "id": "start", "kind": "manual_trigger", "config": {} },
            { "id": "route", "kind": "router", "config": { "routes": [
                { "name": "paid", "when": format!("{field} == \"paid\"") },
                { "name": "void", "when": format!("{field} == \"void\"") }
            ] } },
            { "id": "A", "kind": "transform", "config": { "fields": { "branch": "A" } } },
            { "id": "B", "kind": "transform", "config": { "fields": { "branch": "B" } } },
            { "id": "C", "kind": "transform", "config": { "fields": { "branch": "C" } } }
        ]),
        json!([
            { "from": "start", "to": "route" },
            { "from": "route", "port": "paid", "to": "A" },
            { "from": "route", "port": "void", "to": "B" },
            { "from": "route", "port": "default", "to": "C" }
        ]),
    ))
}

#[tokio::test]
async fn c5_router_sends_each_input_down_exactly_one_branch() {
    let h = Harness::new();
    let on_status = router_workflow("input.status");
    let on_order = router_workflow("input.order.status");
    let cases: Vec<(&Compiled, Value, &str)> = vec![
        (&on_status, json!({"status": "paid"}), "A"),
        (&on_status, json!({"status": "void"}), "B"),
        (&on_status, json!({}), "C"),
        (&on_status, json!({"status": null}), "C"),
        (&on_status, json!({"status": "PAID"}), "C"),
        (&on_order, json!({"order": {}}), "C"),
    ];
    for (wf, input, want) in cases {
        let run = h.run(wf, input.clone()).await;
        assert_eq!(
            run.status,
            RunStatus::Succeeded,
            "input {input}: {}",
            dump(&run)
        );
        let branches: Vec<&str> = ran_ids(&run)
            .into_iter()
            .filter(|id| ["A", "B", "C"].contains(id))
            .collect();
        assert_eq!(branches, vec![want], "input {input}");
        let expected_port = match want {
            "A" => "paid",
            "B" => "void",
            _ => "default",
        };
        assert_eq!(step(&run, "route").ports, vec![expected_port.to_string()]);
        assert_eq!(output(&run, "route"), &json!({ "route": expected_port }));
        assert_eq!(output(&run, want), &json!({ "branch": want }));
    }
}

#[tokio::test]
async fn c5_router_odd_shapes_are_no_match_never_a_failure() {
    let h = Harness::new();
    let on_order = router_workflow("input.order.status");
    let on_item = router_workflow("input.items[0].status");
    let cases: Vec<(&Compiled, Value, &str)> = vec![
        (&on_order, json!({"order": null}), "C"),
        (&on_order, json!({"order": "paid"}), "C"),
        (&on_order, json!({"order": []}), "C"),
        (&on_order, json!({"order": 5}), "C"),
        (&on_order, json!(null), "C"),
        (&on_order, json!("paid"), "C"),
        (&on_order, json!({"order": {"status": ["paid"]}}), "C"),
        (&on_order, json!({"order": {"status": "void"}}), "B"),
        (&on_item, json!({"items": []}), "C"),
        (&on_item, json!({"items": null}), "C"),
        (&on_item, json!({}), "C"),
        (&on_item, json!({"items": [{"status": "paid"}]}), "A"),
    ];
    for (wf, input, want) in cases {
        let run = h.run(wf, input.clone()).await;
        assert_eq!(run.status, RunStatus::Succeeded, "{input}: {}", dump(&run));
        let branches: Vec<&str> = ran_ids(&run)
            .into_iter()
            .filter(|id| ["A", "B", "C"].contains(id))
            .collect();
        assert_eq!(branches, vec![want], "input {input}");
    }
}

#[tokio::test]
async fn router_all_mode_takes_every_matching_route() {
    let wf = compile(&workflow(
        "router-all",
        Value::Null,
        json!([
            { "id": "start", "kind": "manual_trigger", "config": {} },
            { "id": "route", "kind": "router", "config": { "mode": "all", "routes": [
                { "name": "big", "when": "input.amount > 100" },
                { "name": "eur", "when": "input.currency == 'eur'" },
                { "name": "vip", "when": "input.customer.vip" }
            ] } },
            { "id": "A", "kind": "transform", "config": { "fields": { "b": "A" } } },
            { "id": "B", "kind": "transform", "config": { "fields": { "b": "B" } } },
            { "id": "V", "kind": "transform", "config": { "fields": { "b": "V" } } },
            { "id": "C", "kind": "transform", "config": { "fields": { "b": "C" } } }
        ]),
        json!([
            { "from": "start", "to": "route" },
            { "from": "route", "port": "big", "to": "A" },
            { "from": "route", "port": "eur", "to": "B" },
            { "from": "route", "port": "vip", "to": "V" },
            { "from": "route", "port": "default", "to": "C" }
        ]),
    ));
    let h = Harness::new();
    let run = h.run(&wf, json!({"amount": 500, "currency": "eur"})).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    assert_eq!(output(&run, "route"), &json!({"routes": ["big", "eur"]}));
    assert_eq!(ran_ids(&run), vec!["start", "route", "A", "B"]);
    let run = h.run(&wf, json!({"amount": 5, "currency": "usd"})).await;
    assert_eq!(output(&run, "route"), &json!({"routes": ["default"]}));
    assert_eq!(ran_ids(&run), vec!["start", "route", "C"]);
}

// ---------------------------------------------------------------------------------------------
// C6. A retry that succeeds is a success
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn c6_retry_that_succeeds_is_a_success() {
    let mock = Mock::start(
        [Action::status(503)],
        Action::json(200, json!({"deal": "D-1", "ok": true})),
    )
    .await;
    let wf = http_workflow(
        &mock.url(),
        json!({ "retry_strategy": "fixed", "retry_base_delay_ms": 100, "retries": 2 }),
        Value::Null,
        vec![json!({ "id": "handler", "kind": "error_handler",
                    "config": { "mode": "fallback", "fallback_value": {"status": 0} } })],
        vec![json!({ "from": "call", "port": "error", "to": "handler" })],
    );
    let h = Harness::new();
    let run = h.run(&wf, json!({"id": "INV-1"})).await;

    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    assert_eq!(mock.count(), 2);
    let call = step(&run, "call");
    assert_eq!(call.status, StepStatus::Succeeded);
    assert_eq!(
        output(&run, "call")["body"],
        json!({"deal": "D-1", "ok": true})
    );
    assert_eq!(output(&run, "call")["status"], json!(200));
    assert_eq!(output(&run, "call")["attempts"], json!(2));
    assert!(run.step("handler").is_none(), "{:?}", ran_ids(&run));
    assert_eq!(call.attempts.len(), 2);
    assert_eq!(call.attempts[0].http_status, Some(503));
    assert_eq!(call.attempts[0].delay_before_ms, 0);
    assert!(call.attempts[0].error.is_some());
    assert_eq!(call.attempts[1].http_status, Some(200));
    assert_eq!(call.attempts[1].delay_before_ms, 100);
    assert!(call.attempts[1].error.is_none());
    assert_eq!(h.clock.slept(), 100);
    assert!(run.error.is_none());
}

// ---------------------------------------------------------------------------------------------
// C7. What gets retried
// ---------------------------------------------------------------------------------------------

/// Exponential strategy, 3 retries, against a mock answering `action` every time: the run
/// fails with `code`/`http` after exactly `expected_requests` requests.
async fn c7_fails(action: Action, expected_requests: usize, code: &str, http: Option<u16>) {
    let mock = Mock::always(action).await;
    let wf = http_workflow(
        &mock.url(),
        json!({ "retry_strategy": "exponential", "retries": 3, "timeout_s": 0.2 }),
        Value::Null,
        vec![],
        vec![],
    );
    let h = Harness::new();
    let run = h.run(&wf, json!({"id": "INV-7"})).await;
    assert_eq!(mock.count(), expected_requests, "{}", dump(&run));
    assert_eq!(run.status, RunStatus::Failed, "{}", dump(&run));
    let err = run.error.as_ref().expect("run error");
    assert_eq!(err.code, code, "{err:?}");
    assert_eq!(err.http_status, http);
    assert_eq!(err.step, "call");
    assert_eq!(err.attempts as usize, expected_requests);
    let call = step(&run, "call");
    assert_eq!(call.status, StepStatus::Failed);
    assert_eq!(call.attempts.len(), expected_requests);
    for a in &call.attempts {
        assert_eq!(a.http_status, http);
        assert!(a.error.is_some());
    }
    // The same request every time, key included.
    let keys: Vec<Option<String>> = mock
        .requests()
        .iter()
        .map(|r| r.header("idempotency-key").map(String::from))
        .collect();
    assert!(keys.iter().all(|k| k.as_deref() == Some("deal-INV-7")));
    // Waits are full jitter within the exponential ceilings (base 500 ms), all on the clock.
    assert_eq!(call.attempts[0].delay_before_ms, 0);
    for (i, a) in call.attempts.iter().enumerate().skip(1) {
        let ceiling = 500u64 << (i - 1);
        assert!(a.delay_before_ms <= ceiling, "attempt {i}: {a:?}");
    }
    assert_eq!(
        h.clock.slept() as u64,
        call.attempts.iter().map(|a| a.delay_before_ms).sum::<u64>()
    );
}

#[tokio::test]
async fn c7_400_not_retried() {
    c7_fails(Action::status(400), 1, "http_status", Some(400)).await;
}
#[tokio::test]
async fn c7_401_not_retried() {
    c7_fails(Action::status(401), 1, "http_status", Some(401)).await;
}
#[tokio::test]
async fn c7_404_not_retried() {
    c7_fails(Action::status(404), 1, "http_status", Some(404)).await;
}
#[tokio::test]
async fn c7_422_not_retried() {
    c7_fails(Action::status(422), 1, "http_status", Some(422)).await;
}
#[tokio::test]
async fn c7_429_retried() {
    c7_fails(Action::status(429), 4, "http_status", Some(429)).await;
}
#[tokio::test]
async fn c7_408_retried() {
    c7_fails(Action::status(408), 4, "http_status", Some(408)).await;
}
#[tokio::test]
async fn c7_500_retried() {
    c7_fails(Action::status(500), 4, "http_status", Some(500)).await;
}
#[tokio::test]
async fn c7_502_retried() {
    c7_fails(Action::status(502), 4, "http_status", Some(502)).await;
}
#[tokio::test]
async fn c7_503_retried() {
    c7_fails(Action::status(503), 4, "http_status", Some(503)).await;
}
#[tokio::test]
async fn c7_connection_reset_retried() {
    c7_fails(Action::Reset, 4, "connection", None).await;
}
#[tokio::test]
async fn c7_read_timeout_retried() {
    c7_fails(Action::Hang, 4, "timeout", None).await;
}
#[tokio::test]
async fn c7_200_is_one_request() {
    let mock = Mock::always(Action::json(200, json!({"ok": 1}))).await;
    let wf = http_workflow(
        &mock.url(),
        json!({ "retry_strategy": "exponential", "retries": 3 }),
        Value::Null,
        vec![],
        vec![],
    );
    let h = Harness::new();
    let run = h.run(&wf, json!({"id": "INV-7"})).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    assert_eq!(mock.count(), 1);
    assert_eq!(step(&run, "call").attempts.len(), 1);
    assert_eq!(h.clock.slept(), 0);
    let req = &mock.requests()[0];
    assert_eq!(req.method, "POST");
    assert_eq!(req.target, "/deals");
    assert_eq!(req.json(), json!({"id": "INV-7"}));
}

#[tokio::test]
async fn c7_nothing_listening_is_a_retried_connection_error() {
    // A port that was free a moment ago: connection refused on every attempt.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let wf = http_workflow(
        &format!("http://127.0.0.1:{port}"),
        json!({ "retry_strategy": "fixed", "retry_base_delay_ms": 10, "retries": 3 }),
        Value::Null,
        vec![],
        vec![],
    );
    let h = Harness::new();
    let run = h.run(&wf, json!({"id": "x"})).await;
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.error.as_ref().unwrap().code, "connection");
    assert_eq!(step(&run, "call").attempts.len(), 4);
    assert_eq!(h.clock.slept(), 30);
}

// ---------------------------------------------------------------------------------------------
// Retry-After
// ---------------------------------------------------------------------------------------------

/// 503 with `Retry-After: value`, then 200. Returns the second attempt's delay.
async fn retry_after_delay(value: &str, strategy: Value) -> (u64, i64) {
    let mock = Mock::start(
        [Action::status(503).header("Retry-After", value)],
        Action::json(200, json!({})),
    )
    .await;
    let mut cfg = json!({ "retries": 1, "max_retry_delay_s": 10 });
    for (k, v) in strategy.as_object().cloned().unwrap() {
        cfg[k] = v;
    }
    let wf = http_workflow(&mock.url(), cfg, Value::Null, vec![], vec![]);
    let h = Harness::new();
    let run = h.run(&wf, json!({"id": "ra"})).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    assert_eq!(mock.count(), 2);
    let d = delays(&run, "call");
    assert_eq!(d.len(), 2);
    (d[1], h.clock.slept())
}

fn http_date_in(ms_from_2026: i64) -> String {
    let base = fluxo::clock::ManualClock::at_2026();
    use fluxo::clock::Clock;
    let t =
        std::time::UNIX_EPOCH + Duration::from_millis((base.now_ms() + ms_from_2026).max(0) as u64);
    httpdate::fmt_http_date(t)
}

#[tokio::test]
async fn retry_after_seconds_replaces_the_backoff() {
    let fixed = json!({ "retry_strategy": "fixed", "retry_base_delay_ms": 100 });
    assert_eq!(retry_after_delay("3", fixed.clone()).await, (3000, 3000));
    // Exponential jitter would be ≤ 500 ms: the header wins.
    assert_eq!(
        retry_after_delay("4", json!({ "retry_strategy": "exponential" })).await,
        (4000, 4000)
    );
    assert_eq!(retry_after_delay("0", fixed).await, (0, 0));
}

#[tokio::test]
async fn retry_after_is_capped_at_max_retry_delay() {
    let fixed = json!({ "retry_strategy": "fixed", "retry_base_delay_ms": 100 });
    // max_retry_delay_s is 10.
    assert_eq!(
        retry_after_delay("120", fixed.clone()).await,
        (10_000, 10_000)
    );
    assert_eq!(
        retry_after_delay("86400000", fixed.clone()).await,
        (10_000, 10_000)
    );
    // Valid delay-seconds beyond u64 saturate, then are capped (not ignored as malformed).
    assert_eq!(
        retry_after_delay("99999999999999999999999", fixed.clone()).await,
        (10_000, 10_000)
    );
    assert_eq!(
        retry_after_delay(&http_date_in(3_600_000), fixed).await,
        (10_000, 10_000)
    );
}

#[tokio::test]
async fn retry_after_http_date_is_honoured() {
    let fixed = json!({ "retry_strategy": "fixed", "retry_base_delay_ms": 100 });
    assert_eq!(
        retry_after_delay(&http_date_in(5_000), fixed.clone()).await,
        (5000, 5000)
    );
    // A date in the past means "retry now".
    assert_eq!(
        retry_after_delay(&http_date_in(-60_000), fixed).await,
        (0, 0)
    );
}

#[tokio::test]
async fn malformed_retry_after_falls_back_to_the_strategy() {
    let fixed = json!({ "retry_strategy": "fixed", "retry_base_delay_ms": 100 });
    for bad in [
        "soon",
        "-1",
        "1.5",
        "",
        "3 s",
        "Thu, 32 Foo 2026 99:00:00 GMT",
        "2026-01-01T00:00:05Z",
    ] {
        assert_eq!(
            retry_after_delay(bad, fixed.clone()).await,
            (100, 100),
            "Retry-After: {bad:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The run deadline
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn deadline_ends_the_run_timed_out_with_the_last_error() {
    let mock = Mock::always(Action::status(503)).await;
    // Fixed 600 ms: attempt 1 at 0, wait to 600, attempt 2; the next wait would end at
    // 1200 > 1000, so it is never scheduled.
    let wf = http_workflow(
        &mock.url(),
        json!({ "retry_strategy": "fixed", "retry_base_delay_ms": 600, "retries": 10 }),
        json!({ "run_timeout_s": 1 }),
        vec![json!({ "id": "after", "kind": "transform", "config": { "fields": { "x": 1 } } })],
        vec![json!({ "from": "call", "to": "after" })],
    );
    let h = Harness::new();
    let start = h.now();
    let run = h.run(&wf, json!({"id": "dl"})).await;
    assert_eq!(run.status, RunStatus::TimedOut, "{}", dump(&run));
    assert_eq!(mock.count(), 2);
    assert_eq!(h.clock.slept(), 600);
    assert!(start + h.clock.slept() < start + 1000);
    let err = run.error.as_ref().expect("last error kept");
    assert_eq!(err.code, "http_status");
    assert_eq!(err.http_status, Some(503));
    assert_eq!(err.step, "call");
    assert_eq!(err.attempts, 2);
    assert!(run.step("after").is_none());
    assert_eq!(delays(&run, "call"), vec![0, 600]);
}

#[tokio::test]
async fn deadline_with_a_huge_base_schedules_no_wait_at_all() {
    let mock = Mock::always(Action::status(503)).await;
    let wf = http_workflow(
        &mock.url(),
        json!({ "retry_strategy": "fixed", "retry_base_delay_ms": 60000,
                "max_retry_delay_s": 120, "retries": 5 }),
        json!({ "run_timeout_s": 1 }),
        vec![],
        vec![],
    );
    let h = Harness::new();
    let run = h.run(&wf, json!({"id": "dl"})).await;
    assert_eq!(run.status, RunStatus::TimedOut, "{}", dump(&run));
    assert_eq!(mock.count(), 1);
    assert_eq!(h.clock.slept(), 0);
    assert_eq!(run.error.as_ref().unwrap().http_status, Some(503));
}

#[tokio::test]
async fn deadline_caps_a_retry_after_wait_too() {
    let mock = Mock::always(Action::status(503).header("Retry-After", "5")).await;
    let wf = http_workflow(
        &mock.url(),
        json!({ "retry_strategy": "fixed", "retry_base_delay_ms": 10, "retries": 3 }),
        json!({ "run_timeout_s": 2 }),
        vec![],
        vec![],
    );
    let h = Harness::new();
    let run = h.run(&wf, json!({"id": "dl"})).await;
    assert_eq!(run.status, RunStatus::TimedOut, "{}", dump(&run));
    assert_eq!(mock.count(), 1);
    assert_eq!(h.clock.slept(), 0);
}

#[tokio::test]
async fn deadline_clips_the_attempt_timeout() {
    // The step's timeout is 10 s but the run has 1 s left: the hanging attempt is cut at the
    // deadline (real time here, since the mock holds the request), and the run is timed out.
    let mock = Mock::always(Action::Hang).await;
    let wf = http_workflow(
        &mock.url(),
        json!({ "retries": 3, "timeout_s": 10 }),
        json!({ "run_timeout_s": 1 }),
        vec![],
        vec![],
    );
    // A clock that follows real time for this one, so the clipped timeout is observable.
    let store = std::sync::Arc::new(fluxo::store::InMemoryStore::new());
    let engine = fluxo::runtime::Engine::new(store, std::sync::Arc::new(fluxo::clock::SystemClock));
    let t0 = std::time::Instant::now();
    let run = engine
        .run(
            &wf,
            fluxo::runtime::RunRequest::new(
                json!({"id": "x"}),
                fluxo::run::Trigger::Cli,
                fluxo::run::Mode::Live,
            ),
        )
        .await
        .unwrap();
    let took = t0.elapsed();
    assert_eq!(run.status, RunStatus::TimedOut, "{}", dump(&run));
    assert_eq!(mock.count(), 1);
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert_eq!(run.error.as_ref().unwrap().code, "timeout");
}

#[tokio::test]
async fn deadline_stop_then_retry_once_makes_its_single_attempt() {
    // The wait before retry 2 would pass the deadline, so the step stops at 600 ms; retry_once
    // may still make its single attempt (the deadline has not passed yet). That attempt fails
    // with a plain 503, not because of the deadline, so the run is `failed` with that error.
    let mock = Mock::always(Action::status(503)).await;
    let wf = http_workflow(
        &mock.url(),
        json!({ "retry_strategy": "fixed", "retry_base_delay_ms": 600, "retries": 10 }),
        json!({ "run_timeout_s": 1 }),
        vec![
            json!({ "id": "handler", "kind": "error_handler", "config": { "mode": "retry_once" } }),
        ],
        vec![json!({ "from": "call", "port": "error", "to": "handler" })],
    );
    let h = Harness::new();
    let run = h.run(&wf, json!({"id": "dl"})).await;
    assert_eq!(run.status, RunStatus::Failed, "{}", dump(&run));
    assert_eq!(mock.count(), 3);
    assert_eq!(h.clock.slept(), 600);
    let err = run.error.as_ref().unwrap();
    assert_eq!(
        (err.code.as_str(), err.http_status),
        ("http_status", Some(503))
    );
}

#[tokio::test]
async fn deadline_then_rethrow_compensates_and_times_out() {
    let mock = Mock::always(Action::status(503)).await;
    let wf = compile(&workflow(
        "deadline-rethrow",
        json!({ "run_timeout_s": 1 }),
        json!([
            { "id": "start", "kind": "manual_trigger", "config": {} },
            { "id": "claim", "kind": "memory", "config": {
                "operation": "write", "namespace": "claims", "key": "{{ input.id }}",
                "allow_overwrite": false } },
            { "id": "create", "kind": "http_request", "config": {
                "method": "POST", "url": mock.url(),
                "headers": { "Idempotency-Key": "{{ input.id }}" },
                "retries": 10, "retry_strategy": "fixed", "retry_base_delay_ms": 400 } },
            { "id": "fail", "kind": "error_handler", "config": { "mode": "rethrow" } },
            { "id": "undo", "kind": "memory", "config": {
                "operation": "delete", "namespace": "claims", "key": "{{ input.id }}" } }
        ]),
        json!([
            { "from": "start", "to": "claim" },
            { "from": "claim", "to": "create" },
            { "from": "create", "port": "error", "to": "fail" },
            { "from": "fail", "to": "undo" }
        ]),
    ));
    let h = Harness::new();
    let run = h.run(&wf, json!({"id": "e1"})).await;
    assert_eq!(run.status, RunStatus::TimedOut, "{}", dump(&run));
    assert_eq!(mock.count(), 3);
    assert_eq!(h.clock.slept(), 800);
    assert_eq!(output(&run, "undo"), &json!({"deleted": true}));
    let err = run.error.as_ref().unwrap();
    assert_eq!((err.step.as_str(), err.http_status), ("create", Some(503)));
    assert!(h
        .store
        .read("claims", "e1", h.now())
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn a_recovered_deadline_failure_does_not_make_a_later_failure_timed_out() {
    // `call` stops at the deadline (its next wait would pass it) and a fallback recovers it;
    // `second` then fails with a 400 of its own: the run failed, it did not time out.
    let slow = Mock::always(Action::status(503)).await;
    let bad = Mock::always(Action::status(400)).await;
    let wf = http_workflow(
        &slow.url(),
        json!({ "retry_strategy": "fixed", "retry_base_delay_ms": 600, "retries": 10 }),
        json!({ "run_timeout_s": 1 }),
        vec![
            json!({ "id": "handler", "kind": "error_handler",
                    "config": { "mode": "fallback", "fallback_value": { "status": 0 } } }),
            json!({ "id": "second", "kind": "http_request",
                    "config": { "method": "GET", "url": bad.url(), "retries": 0 } }),
        ],
        vec![
            json!({ "from": "call", "port": "error", "to": "handler" }),
            json!({ "from": "call", "to": "second" }),
        ],
    );
    let h = Harness::new();
    let run = h.run(&wf, json!({"id": "dl"})).await;
    assert_eq!(step(&run, "call").status, StepStatus::Fallback);
    assert_eq!(bad.count(), 1);
    assert_eq!(run.status, RunStatus::Failed, "{}", dump(&run));
    assert_eq!(run.error.as_ref().unwrap().http_status, Some(400));
    assert_eq!(run.error.as_ref().unwrap().step, "second");
}

// ---------------------------------------------------------------------------------------------
// C8. Dry run leaves no trace
// ---------------------------------------------------------------------------------------------

fn c8_workflow(publish: &str) -> Compiled {
    compile(&workflow(
        "dry-case",
        Value::Null,
        json!([
            { "id": "hook", "kind": "webhook_trigger", "config": {} },
            { "id": "seen", "kind": "memory", "config": {
                "operation": "write", "namespace": "invoices",
                "key": "inv:{{ input.invoice_id }}", "value": "{{ input.invoice_id }}",
                "allow_overwrite": false } },
            { "id": "create", "kind": "http_request", "config": {
                "method": "POST", "url": "{{ env.CRM_URL }}/deals",
                "headers": { "Idempotency-Key": "deal-{{ input.invoice_id }}" },
                "body": { "invoice": "{{ input.invoice_id }}",
                          "first": "{{ steps.seen.output.written }}" },
                "dry_run": { "status": 201, "body": { "id": "simulated" } } } },
            { "id": "publish", "kind": "publish_output", "config": {
                "url": format!("{publish}/out"),
                "idempotency_key": "pub-{{ input.invoice_id }}" } }
        ]),
        json!([
            { "from": "hook", "to": "seen" },
            { "from": "seen", "to": "create" },
            { "from": "create", "to": "publish" }
        ]),
    ))
}

#[tokio::test]
async fn c8_dry_run_leaves_no_trace_and_predicts_the_live_run() {
    let crm = Mock::always(Action::json(201, json!({"id": "D-3"}))).await;
    let publish = Mock::always(Action::json(200, json!({"ok": true}))).await;
    let h = Harness::new().env(&[("CRM_URL", &crm.url())]);
    let wf = c8_workflow(&publish.url());
    // Something already in the store, in another namespace and in this one.
    let now = h.now();
    let opts = fluxo::store::WriteOptions {
        allow_overwrite: true,
        ttl_ms: None,
        owner: None,
    };
    h.store
        .write("other", "k", &json!(1), opts, now)
        .await
        .expect("seed");
    h.store
        .write("invoices", "inv:INV-1", &json!("INV-1"), opts, now)
        .await
        .expect("seed");
    let before = (
        h.entries("invoices").await,
        h.entries("other").await,
        h.store.namespaces().await.unwrap(),
    );

    let input = json!({"invoice_id": "INV-3"});
    let dry = h.dry(&wf, input.clone()).await;
    assert_eq!(dry.status, RunStatus::Succeeded, "{}", dump(&dry));
    assert_eq!(dry.mode, fluxo::run::Mode::Dry);
    assert_eq!(crm.count(), 0, "no byte leaves the machine");
    assert_eq!(publish.count(), 0, "no byte leaves the machine");
    let after = (
        h.entries("invoices").await,
        h.entries("other").await,
        h.store.namespaces().await.unwrap(),
    );
    assert_eq!(before, after, "the store is unchanged");
    assert_eq!(output(&dry, "seen")["written"], json!(true));
    assert_eq!(output(&dry, "seen")["key"], json!("inv:INV-3"));
    // The simulated answer is the step's sample; the request was still rendered for real.
    assert_eq!(output(&dry, "create")["status"], json!(201));
    assert_eq!(output(&dry, "create")["body"], json!({"id": "simulated"}));
    assert_eq!(
        step(&dry, "create").resolved_config["url"],
        json!(format!("{}/deals", crm.url()))
    );
    assert_eq!(output(&dry, "publish")["status"], json!(200));
    assert_eq!(
        output(&dry, "publish")["idempotency_key"],
        json!("pub-INV-3")
    );

    // Live: acts once.
    let live = h.run(&wf, input.clone()).await;
    assert_eq!(live.status, RunStatus::Succeeded, "{}", dump(&live));
    assert_eq!(output(&live, "seen")["written"], json!(true));
    assert_eq!(crm.count(), 1);
    assert_eq!(publish.count(), 1);
    let post = &crm.requests()[0];
    assert_eq!(post.method, "POST");
    assert_eq!(post.header("idempotency-key"), Some("deal-INV-3"));
    // A whole-value template keeps the boolean.
    assert_eq!(post.json(), json!({"invoice": "INV-3", "first": true}));
    assert_eq!(
        publish.requests()[0].header("idempotency-key"),
        Some("pub-INV-3")
    );
    let stored = h
        .store
        .read("invoices", "inv:INV-3", h.now())
        .await
        .unwrap()
        .expect("live run wrote the claim");
    assert_eq!(stored.value, json!("INV-3"));

    // A second dry run now sees the key, and still sends nothing.
    let before = (
        h.entries("invoices").await,
        h.store.namespaces().await.unwrap(),
    );
    let dry2 = h.dry(&wf, input).await;
    assert_eq!(output(&dry2, "seen")["written"], json!(false));
    assert_eq!(output(&dry2, "seen")["reason"], json!("exists"));
    assert_eq!(crm.count(), 1);
    assert_eq!(publish.count(), 1);
    assert_eq!(
        before,
        (
            h.entries("invoices").await,
            h.store.namespaces().await.unwrap()
        )
    );
}

#[tokio::test]
async fn dry_run_overlay_reads_its_own_writes_and_deletes() {
    let h = Harness::new();
    let wf = compile(&workflow(
        "dry-overlay",
        Value::Null,
        json!([
            { "id": "start", "kind": "manual_trigger", "config": {} },
            { "id": "w1", "kind": "memory", "config": {
                "operation": "write", "namespace": "ns", "key": "k", "value": "v1",
                "allow_overwrite": false } },
            { "id": "w2", "kind": "memory", "config": {
                "operation": "write", "namespace": "ns", "key": "k", "value": "v2",
                "allow_overwrite": false } },
            { "id": "r1", "kind": "memory", "config": {
                "operation": "read", "namespace": "ns", "key": "k" } },
            { "id": "d", "kind": "memory", "config": {
                "operation": "delete", "namespace": "ns", "key": "k" } },
            { "id": "r2", "kind": "memory", "config": {
                "operation": "read", "namespace": "ns", "key": "k" } }
        ]),
        json!([
            { "from": "start", "to": "w1" }, { "from": "w1", "to": "w2" },
            { "from": "w2", "to": "r1" }, { "from": "r1", "to": "d" }, { "from": "d", "to": "r2" }
        ]),
    ));
    let dry = h.dry(&wf, json!({})).await;
    assert_eq!(dry.status, RunStatus::Succeeded, "{}", dump(&dry));
    assert_eq!(output(&dry, "w1")["written"], json!(true));
    assert_eq!(output(&dry, "w2")["written"], json!(false));
    assert_eq!(output(&dry, "r1"), &json!({"found": true, "value": "v1"}));
    assert_eq!(output(&dry, "d"), &json!({"deleted": true}));
    assert_eq!(output(&dry, "r2"), &json!({"found": false}));
    assert!(h.store.namespaces().await.unwrap().is_empty());
    // Live does the same for real.
    let live = h.run(&wf, json!({})).await;
    assert_eq!(output(&live, "r1"), &json!({"found": true, "value": "v1"}));
    assert_eq!(output(&live, "r2"), &json!({"found": false}));
}

// ---------------------------------------------------------------------------------------------
// C9. Templates
// ---------------------------------------------------------------------------------------------

fn transform(fields: Value) -> Compiled {
    compile(&workflow(
        "templates",
        Value::Null,
        json!([
            { "id": "start", "kind": "manual_trigger", "config": {} },
            { "id": "render", "kind": "transform", "config": { "fields": fields } },
            { "id": "again", "kind": "transform", "config": { "fields": {
                "copy": "{{ steps.render.output }}" } } }
        ]),
        json!([{ "from": "start", "to": "render" }, { "from": "render", "to": "again" }]),
    ))
}

#[tokio::test]
async fn c9_missing_path_is_a_template_error_naming_path_and_step() {
    let wf = transform(json!({
        "text": "Invoice {{ input.invoice_id }} for {{ input.customer.name }}"
    }));
    let h = Harness::new();
    let run = h.run(&wf, json!({"invoice_id": "INV-1"})).await;
    assert_eq!(run.status, RunStatus::Failed, "{}", dump(&run));
    let err = run.error.as_ref().unwrap();
    assert_eq!(err.code, "template_error");
    assert_eq!(err.step, "render");
    assert!(
        err.message.contains("input.customer.name"),
        "message names the path: {}",
        err.message
    );
    assert!(
        err.message.contains("render"),
        "names the step: {}",
        err.message
    );
    assert!(run.step("again").is_none());

    // Also when only the last segment is missing, as text and as a whole value.
    for tpl in [
        "Invoice {{ input.invoice_id }} for {{ input.customer.name }}",
        "{{ input.customer.name }}",
    ] {
        for input in [
            json!({"invoice_id": 1, "customer": {}}),
            json!({"invoice_id": 1}),
        ] {
            let wf = transform(json!({ "v": tpl }));
            let run = h.run(&wf, input.clone()).await;
            assert_eq!(run.status, RunStatus::Failed, "{tpl} on {input}");
            let err = run.error.as_ref().unwrap();
            assert_eq!(err.code, "template_error");
            assert!(
                err.message.contains("input.customer.name") && err.message.contains("render"),
                "{tpl} on {input}: {}",
                err.message
            );
        }
    }

    // `default(...)` opts in (for the last segment: as in Jinja, reading an attribute of a
    // missing parent is still an error).
    let wf = transform(json!({
        "v": "{{ input.customer.name | default('nobody') }}",
        "t": "for {{ input.customer.name | default('nobody') }}",
        "n": "{{ input.customer.name | default(none) }}"
    }));
    let run = h.run(&wf, json!({"customer": {}})).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    assert_eq!(
        output(&run, "render"),
        &json!({"v": "nobody", "t": "for nobody", "n": null})
    );
}

#[tokio::test]
async fn c9_null_in_text_is_empty_and_whole_null_stays_null() {
    let wf = transform(json!({
        "text": "Invoice {{ input.invoice_id }} for {{ input.customer.name }}",
        "whole": "{{ input.invoice_id }}"
    }));
    let h = Harness::new();
    let run = h
        .run(
            &wf,
            json!({"invoice_id": null, "customer": {"name": "Ada"}}),
        )
        .await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    assert_eq!(output(&run, "render")["text"], json!("Invoice  for Ada"));
    assert_eq!(output(&run, "render")["whole"], Value::Null);
}

#[tokio::test]
async fn c9_indexes_brackets_and_types() {
    let h = Harness::new();
    let wf = transform(json!({ "sku": "{{ input.items[0].sku }}" }));
    let run = h.run(&wf, json!({"items": [{"sku": "X"}]})).await;
    assert_eq!(output(&run, "render")["sku"], json!("X"));

    let wf =
        transform(json!({ "who": "{{ input[\"客户\"] }}", "hi": "Hi {{ input[\"客户\"] }}!" }));
    let run = h.run(&wf, json!({"客户": "Ada"})).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    assert_eq!(output(&run, "render")["who"], json!("Ada"));
    assert_eq!(output(&run, "render")["hi"], json!("Hi Ada!"));

    let wf = transform(
        json!({ "n": "{{ input[\"a.b\"] }}", "t": "n={{ input[\"a.b\"] }}",
                               "spaced": "{{ input[\"a b\"] }}" }),
    );
    let run = h.run(&wf, json!({"a.b": 1, "a b": true})).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    assert_eq!(
        output(&run, "render")["n"],
        json!(1),
        "whole value keeps the number"
    );
    assert_eq!(output(&run, "render")["t"], json!("n=1"));
    assert_eq!(output(&run, "render")["spaced"], json!(true));

    // A whole value keeps objects and arrays.
    let wf = transform(json!({ "o": "{{ input.o }}", "a": "{{ input.o.list }}" }));
    let run = h.run(&wf, json!({"o": {"list": [1, "2", null]}})).await;
    assert_eq!(output(&run, "render")["o"], json!({"list": [1, "2", null]}));
    assert_eq!(output(&run, "render")["a"], json!([1, "2", null]));

    // A missing index is missing too.
    let wf = transform(json!({ "sku": "{{ input.items[3].sku }}" }));
    let run = h.run(&wf, json!({"items": [{"sku": "X"}]})).await;
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.error.as_ref().unwrap().code, "template_error");
}

#[tokio::test]
async fn c9_rendered_values_are_never_evaluated_again() {
    let wf = transform(json!({
        "whole": "{{ input.note }}",
        "text": "Note: {{ input.note }}"
    }));
    let h = Harness::new();
    let run = h
        .run(
            &wf,
            json!({"note": "{{ input.secret }}", "secret": "s3cret"}),
        )
        .await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    assert_eq!(output(&run, "render")["whole"], json!("{{ input.secret }}"));
    assert_eq!(
        output(&run, "render")["text"],
        json!("Note: {{ input.secret }}")
    );
    // Carried into the next step, still text.
    assert_eq!(
        output(&run, "again")["copy"]["whole"],
        json!("{{ input.secret }}")
    );
    for id in ["render", "again"] {
        let rec = serde_json::to_string(step(&run, id)).unwrap();
        assert!(
            !rec.contains("s3cret"),
            "`{id}` evaluated the payload: {rec}"
        );
    }
}

#[tokio::test]
async fn c9_templates_directly() {
    use fluxo::workflow::template::{EnvView, Scope, Templates};
    use std::collections::BTreeMap;
    let src = "Invoice {{ input.invoice_id }} for {{ input.customer.name }}";
    let mut t = Templates::new();
    t.add(src).unwrap();
    let env = BTreeMap::new();
    let scope = Scope::new(
        &json!({"invoice_id": "INV-1"}),
        &json!({}),
        EnvView::plain(&env),
    );
    let err = t.render_str(src, &scope.context(), "subject").unwrap_err();
    assert_eq!(err.missing.as_deref(), Some("input.customer.name"));
    assert!(err.to_string().contains("input.customer.name"));
    assert!(err.to_string().contains("subject"));

    let scope = Scope::new(
        &json!({"invoice_id": null, "customer": {"name": "Ada"}}),
        &json!({}),
        EnvView::plain(&env),
    );
    assert_eq!(
        t.render_str(src, &scope.context(), "subject").unwrap(),
        json!("Invoice  for Ada")
    );
    // env is only what was given.
    let mut env = BTreeMap::new();
    env.insert("CRM_URL".to_string(), "http://crm".to_string());
    let scope = Scope::new(&json!({}), &json!({}), EnvView::plain(&env));
    let mut t = Templates::new();
    t.add("{{ env.CRM_URL }}/x").unwrap();
    t.add("{{ env.PATH }}").unwrap();
    assert_eq!(
        t.render_str("{{ env.CRM_URL }}/x", &scope.context(), "url")
            .unwrap(),
        json!("http://crm/x")
    );
    let err = t
        .render_str("{{ env.PATH }}", &scope.context(), "url")
        .unwrap_err();
    assert_eq!(err.missing.as_deref(), Some("env.PATH"));
}

#[tokio::test]
async fn empty_memory_key_is_an_empty_key_error() {
    let wf = compile(&workflow(
        "empty-key",
        Value::Null,
        json!([
            { "id": "start", "kind": "manual_trigger", "config": {} },
            { "id": "claim", "kind": "memory", "config": {
                "operation": "write", "namespace": "ns", "key": "{{ input.id }}",
                "allow_overwrite": false } }
        ]),
        json!([{ "from": "start", "to": "claim" }]),
    ));
    let h = Harness::new();
    for input in [json!({"id": ""}), json!({"id": null}), json!({"id": "  "})] {
        let run = h.run(&wf, input.clone()).await;
        assert_eq!(run.status, RunStatus::Failed, "{input}");
        assert_eq!(run.error.as_ref().unwrap().code, "empty_key", "{input}");
    }
    assert!(h.store.namespaces().await.unwrap().is_empty());
}

// ---------------------------------------------------------------------------------------------
// Error handler modes
// ---------------------------------------------------------------------------------------------

/// `start → call (retries as given) -error→ handler(mode) -out→ handler_out`;
/// `call -out→ next` where `next` reads `steps.call.output.body`.
fn handler_workflow(url: &str, call_extra: Value, handler: Value) -> Compiled {
    http_workflow(
        url,
        call_extra,
        Value::Null,
        vec![
            json!({ "id": "handler", "kind": "error_handler", "config": handler }),
            json!({ "id": "handler_out", "kind": "transform", "config": { "fields": {
                "code": "{{ error.code }}", "status": "{{ error.http_status }}",
                "step": "{{ error.step }}" } } }),
            json!({ "id": "next", "kind": "transform", "config": { "fields": {
                "body": "{{ steps.call.output.body }}" } } }),
        ],
        vec![
            json!({ "from": "call", "port": "error", "to": "handler" }),
            json!({ "from": "handler", "to": "handler_out" }),
            json!({ "from": "call", "to": "next" }),
        ],
    )
}

#[tokio::test]
async fn handler_log_records_a_warning_and_the_run_succeeds() {
    let mock = Mock::always(Action::status(500)).await;
    let wf = handler_workflow(
        &mock.url(),
        json!({ "retries": 0 }),
        json!({ "mode": "log" }),
    );
    let h = Harness::new();
    let run = h.run(&wf, json!({"id": "L"})).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    assert!(run.error.is_none());
    assert_eq!(mock.count(), 1);
    assert_eq!(run.warnings.len(), 1, "{:?}", run.warnings);
    assert!(run.warnings[0].contains("call"), "{:?}", run.warnings);
    assert_eq!(step(&run, "call").status, StepStatus::Failed);
    assert_eq!(
        output(&run, "handler_out"),
        &json!({"code": "http_status", "status": 500, "step": "call"})
    );
    assert_eq!(output(&run, "handler")["error"]["http_status"], json!(500));
    assert!(run.step("next").is_none(), "the failed branch ends");
}

#[tokio::test]
async fn handler_retry_once_on_a_step_without_retries() {
    let mock = Mock::start([Action::status(500)], Action::json(200, json!({"n": 2}))).await;
    let wf = handler_workflow(
        &mock.url(),
        json!({ "retries": 0 }),
        json!({ "mode": "retry_once" }),
    );
    let h = Harness::new();
    let run = h.run(&wf, json!({"id": "R"})).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    assert_eq!(mock.count(), 2);
    let call = step(&run, "call");
    assert_eq!(call.status, StepStatus::Succeeded);
    assert_eq!(call.attempts.len(), 2, "both attempts on the record");
    assert_eq!(output(&run, "next"), &json!({"body": {"n": 2}}));
    assert!(run.step("handler_out").is_none());
    // Both requests carry the same key.
    let keys: Vec<_> = mock
        .requests()
        .iter()
        .map(|r| r.header("idempotency-key").map(String::from))
        .collect();
    assert_eq!(keys, vec![Some("deal-R".to_string()); 2]);
}

#[tokio::test]
async fn handler_retry_once_adds_exactly_one_attempt_without_retries_of_its_own() {
    // retries 2 → 3 attempts, all 500; retry_once → exactly one more (the 4th), which fails
    // too: the run fails, and no 5th/6th/7th request is made.
    let mock = Mock::always(Action::status(500)).await;
    let wf = handler_workflow(
        &mock.url(),
        json!({ "retries": 2, "retry_strategy": "fixed", "retry_base_delay_ms": 50 }),
        json!({ "mode": "retry_once" }),
    );
    let h = Harness::new();
    let run = h.run(&wf, json!({"id": "R"})).await;
    assert_eq!(run.status, RunStatus::Failed, "{}", dump(&run));
    assert_eq!(mock.count(), 4);
    assert_eq!(step(&run, "call").attempts.len(), 4);
    assert_eq!(h.clock.slept(), 100, "the extra attempt waits for nothing");
    let err = run.error.as_ref().unwrap();
    assert_eq!(err.code, "http_status");
    assert_eq!(err.http_status, Some(500));
    assert_eq!(err.step, "call");
    assert_eq!(err.attempts, 4, "every attempt of the step counts");
    assert!(run.step("next").is_none());
    assert!(
        run.step("handler_out").is_some(),
        "the handler's out runs on failure"
    );

    // And when the 4th succeeds, the run does.
    let mock = Mock::start(
        [
            Action::status(500),
            Action::status(500),
            Action::status(500),
        ],
        Action::json(200, json!({"n": 4})),
    )
    .await;
    let wf = handler_workflow(
        &mock.url(),
        json!({ "retries": 2, "retry_strategy": "fixed", "retry_base_delay_ms": 50 }),
        json!({ "mode": "retry_once" }),
    );
    let run = h.run(&wf, json!({"id": "R"})).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    assert_eq!(mock.count(), 4);
    assert_eq!(output(&run, "next"), &json!({"body": {"n": 4}}));
}

#[tokio::test]
async fn handler_fallback_continues_with_the_fallback_value() {
    let mock = Mock::always(Action::status(502)).await;
    let wf = handler_workflow(
        &mock.url(),
        json!({ "retries": 0 }),
        json!({ "mode": "fallback",
                "fallback_value": { "body": { "plan": "{{ input.id }}-default" } } }),
    );
    let h = Harness::new();
    let run = h.run(&wf, json!({"id": "F"})).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    assert_eq!(mock.count(), 1);
    let call = step(&run, "call");
    assert_eq!(call.status, StepStatus::Fallback);
    assert_eq!(
        call.output.as_ref().unwrap()["body"],
        json!({"plan": "F-default"})
    );
    assert_eq!(
        output(&run, "next"),
        &json!({"body": {"plan": "F-default"}})
    );
    assert!(run.step("handler_out").is_none());
    assert!(run.error.is_none());
}

#[tokio::test]
async fn handler_rethrow_compensates_then_fails_with_the_original_error() {
    let mock = Mock::always(Action::status(502)).await;
    let wf = compile(&workflow(
        "rethrow",
        Value::Null,
        json!([
            { "id": "start", "kind": "manual_trigger", "config": {} },
            { "id": "claim", "kind": "memory", "config": {
                "operation": "write", "namespace": "claims", "key": "{{ input.id }}",
                "allow_overwrite": false, "ttl_s": 3600 } },
            { "id": "create", "kind": "http_request", "config": {
                "method": "POST", "url": format!("{}/deals", mock.url()),
                "headers": { "Idempotency-Key": "deal-{{ input.id }}" },
                "retries": 1, "retry_strategy": "fixed", "retry_base_delay_ms": 10 } },
            { "id": "fail", "kind": "error_handler", "config": { "mode": "rethrow" } },
            { "id": "undo", "kind": "memory", "config": {
                "operation": "delete", "namespace": "claims", "key": "{{ input.id }}" } },
            { "id": "notify", "kind": "transform", "config": { "fields": {
                "msg": "{{ error.step }} failed with {{ error.http_status }}" } } }
        ]),
        json!([
            { "from": "start", "to": "claim" },
            { "from": "claim", "to": "create" },
            { "from": "create", "port": "error", "to": "fail" },
            { "from": "fail", "to": "undo" },
            { "from": "undo", "to": "notify" }
        ]),
    ));
    let h = Harness::new();
    let run = h.run(&wf, json!({"id": "evt-9"})).await;
    assert_eq!(run.status, RunStatus::Failed, "{}", dump(&run));
    assert_eq!(mock.count(), 2);
    let err = run.error.as_ref().unwrap();
    assert_eq!(err.code, "http_status");
    assert_eq!(err.http_status, Some(502));
    assert_eq!(err.step, "create");
    assert_eq!(err.attempts, 2);
    assert_eq!(output(&run, "undo"), &json!({"deleted": true}));
    assert_eq!(
        output(&run, "notify"),
        &json!({"msg": "create failed with 502"})
    );
    assert!(h
        .store
        .read("claims", "evt-9", h.now())
        .await
        .unwrap()
        .is_none());
    // The claim is free again, so a replay can act.
    let again = h.run(&wf, json!({"id": "evt-9"})).await;
    assert_eq!(output(&again, "claim")["written"], json!(true));
}

#[tokio::test]
async fn unhandled_failure_fails_the_run_at_once() {
    let mock = Mock::always(Action::status(500)).await;
    let wf = http_workflow(
        &mock.url(),
        json!({ "retries": 0 }),
        Value::Null,
        vec![json!({ "id": "after", "kind": "transform", "config": { "fields": { "x": 1 } } })],
        vec![json!({ "from": "call", "to": "after" })],
    );
    let h = Harness::new();
    let run = h.run(&wf, json!({"id": "u"})).await;
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(run.error.as_ref().unwrap().http_status, Some(500));
    assert!(run.step("after").is_none());
    // The stored record is the returned one.
    let stored = h.engine.store().get_run(&run.id).await.unwrap().unwrap();
    assert_eq!(stored, run);
}

// ---------------------------------------------------------------------------------------------
// Outbound Idempotency-Key: identical on every attempt
// ---------------------------------------------------------------------------------------------

fn keys(mock: &Mock) -> Vec<String> {
    mock.requests()
        .iter()
        .map(|r| r.header("idempotency-key").unwrap_or("<none>").to_string())
        .collect()
}

#[tokio::test]
async fn http_request_sends_the_same_key_and_body_on_every_attempt() {
    let mock = Mock::start(
        [Action::status(503), Action::status(503)],
        Action::json(200, json!({})),
    )
    .await;
    let wf = http_workflow(
        &mock.url(),
        json!({ "retries": 2, "retry_strategy": "fixed", "retry_base_delay_ms": 100,
                "body": { "id": "{{ input.id }}", "run": "{{ run.id }}" } }),
        Value::Null,
        vec![],
        vec![],
    );
    let h = Harness::new();
    let run = h.run(&wf, json!({"id": "K1"})).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    assert_eq!(keys(&mock), vec!["deal-K1"; 3]);
    let bodies: Vec<Value> = mock.requests().iter().map(|r| r.json()).collect();
    assert_eq!(bodies, vec![json!({"id": "K1", "run": run.id}); 3]);
    assert_eq!(delays(&run, "call"), vec![0, 100, 100]);
    assert_eq!(h.clock.slept(), 200);
}

fn publish_workflow(url: &str, key: Option<&str>) -> Compiled {
    let mut cfg = json!({
        "url": format!("{url}/hook"),
        "retries": 2, "retry_strategy": "fixed", "retry_base_delay_ms": 100,
    });
    if let Some(k) = key {
        cfg["idempotency_key"] = json!(k);
    }
    compile(&workflow(
        "publish-case",
        Value::Null,
        json!([
            { "id": "start", "kind": "manual_trigger", "config": {} },
            { "id": "shape", "kind": "transform", "config": { "fields": { "total": "{{ input.total }}" } } },
            { "id": "pub", "kind": "publish_output", "config": cfg }
        ]),
        json!([{ "from": "start", "to": "shape" }, { "from": "shape", "to": "pub" }]),
    ))
}

#[tokio::test]
async fn publish_output_per_run_key_is_stable_across_attempts_and_new_per_run() {
    let mock = Mock::start(
        [Action::status(503), Action::status(503)],
        Action::json(200, json!({})),
    )
    .await;
    for key in [None, Some("")] {
        let wf = publish_workflow(&mock.url(), key);
        let h = Harness::new();
        let first = mock.count();
        let run = h.run(&wf, json!({"id": "P", "total": 42})).await;
        assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
        let sent = &keys(&mock)[first..];
        let expected = format!("{}.pub", run.id);
        if key.is_none() {
            assert_eq!(sent, vec![expected.clone(); 3].as_slice());
        } else {
            assert_eq!(sent, vec![expected.clone()].as_slice());
        }
        assert_eq!(output(&run, "pub")["idempotency_key"], json!(expected));
        // The default body carries the outputs so far.
        let body = mock.requests().last().unwrap().json();
        assert_eq!(body["run_id"], json!(run.id));
        assert_eq!(body["outputs"]["shape"], json!({"total": 42}));
        // Another run: another key.
        let other = h.run(&wf, json!({"id": "P", "total": 42})).await;
        assert_ne!(
            output(&other, "pub")["idempotency_key"],
            output(&run, "pub")["idempotency_key"]
        );
    }
}

#[tokio::test]
async fn publish_output_templated_key_comes_from_data() {
    let mock = Mock::start(
        [Action::status(503), Action::status(503)],
        Action::json(200, json!({})),
    )
    .await;
    let wf = publish_workflow(&mock.url(), Some("order-{{ input.id }}"));
    let h = Harness::new();
    let run = h.run(&wf, json!({"id": "P7", "total": 1})).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    assert_eq!(keys(&mock), vec!["order-P7"; 3]);
    let again = h.run(&wf, json!({"id": "P7", "total": 1})).await;
    assert_eq!(again.status, RunStatus::Succeeded);
    assert_eq!(keys(&mock), vec!["order-P7"; 4], "stable across runs");
    // A key that renders empty is refused before anything is sent.
    let wf = publish_workflow(&mock.url(), Some("{{ input.id }}"));
    for id in [json!(""), json!(null), json!(" ")] {
        let run = h.run(&wf, json!({"id": id, "total": 1})).await;
        assert_eq!(run.status, RunStatus::Failed, "{}", dump(&run));
        assert_eq!(run.error.as_ref().unwrap().code, "empty_key");
    }
    assert_eq!(mock.count(), 4);
}

#[tokio::test]
async fn publish_output_replaces_a_configured_idempotency_header() {
    let mock = Mock::always(Action::json(200, json!({}))).await;
    let wf = compile(&workflow(
        "publish-header",
        Value::Null,
        json!([
            { "id": "start", "kind": "manual_trigger", "config": {} },
            { "id": "pub", "kind": "publish_output", "config": {
                "url": format!("{}/hook", mock.url()),
                "headers": { "idempotency-key": "from-header", "X-Tenant": "t1" },
                "idempotency_key": "k-{{ input.id }}", "body": { "id": "{{ input.id }}" } } }
        ]),
        json!([{ "from": "start", "to": "pub" }]),
    ));
    let h = Harness::new();
    let run = h.run(&wf, json!({"id": 5})).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    let req = &mock.requests()[0];
    assert_eq!(req.header("idempotency-key"), Some("k-5"));
    assert_eq!(req.header("x-tenant"), Some("t1"));
    assert_eq!(req.method, "POST");
    assert_eq!(req.json(), json!({"id": 5}));
}

// ---------------------------------------------------------------------------------------------
// C4 at the step level: Memory TTL and no-overwrite on the manual clock
// ---------------------------------------------------------------------------------------------

fn memory_workflow(op: &str) -> Compiled {
    let config = match op {
        "write" => json!({ "operation": "write", "namespace": "inv", "key": "inv:{{ input.id }}",
                            "value": "{{ input.value }}", "allow_overwrite": false, "ttl_s": 2 }),
        _ => json!({ "operation": "read", "namespace": "inv", "key": "inv:{{ input.id }}" }),
    };
    compile(&workflow(
        &format!("memory-{op}"),
        Value::Null,
        json!([
            { "id": "start", "kind": "manual_trigger", "config": {} },
            { "id": "mem", "kind": "memory", "config": config }
        ]),
        json!([{ "from": "start", "to": "mem" }]),
    ))
}

#[tokio::test]
async fn c4_memory_ttl_and_no_overwrite_at_the_step_level() {
    let h = Harness::new();
    let write = memory_workflow("write");
    let read = memory_workflow("read");
    let t0 = h.now();
    let rfc = fluxo::clock::rfc3339;

    let r = h.run(&write, json!({"id": "INV-1", "value": "a"})).await;
    assert_eq!(
        output(&r, "mem"),
        &json!({"written": true, "key": "inv:INV-1", "expires_at": rfc(t0 + 2000)})
    );

    h.clock.advance(Duration::from_secs(1));
    let r = h.run(&write, json!({"id": "INV-1", "value": "b"})).await;
    assert_eq!(r.status, RunStatus::Succeeded);
    assert_eq!(output(&r, "mem")["written"], json!(false));
    assert_eq!(output(&r, "mem")["reason"], json!("exists"));
    assert_eq!(output(&r, "mem")["expires_at"], json!(rfc(t0 + 2000)));
    let r = h.run(&read, json!({"id": "INV-1"})).await;
    assert_eq!(output(&r, "mem")["value"], json!("a"), "not overwritten");

    h.clock.advance(Duration::from_secs(2));
    let r = h.run(&read, json!({"id": "INV-1"})).await;
    assert_eq!(
        output(&r, "mem"),
        &json!({"found": false}),
        "expired without a sweep"
    );

    let r = h.run(&write, json!({"id": "INV-1", "value": "c"})).await;
    assert_eq!(output(&r, "mem")["written"], json!(true));
    let r = h.run(&read, json!({"id": "INV-1"})).await;
    assert_eq!(
        output(&r, "mem"),
        &json!({"found": true, "value": "c", "expires_at": rfc(t0 + 3000 + 2000)})
    );
}

#[tokio::test]
async fn run_scoped_memory_does_not_outlive_the_run() {
    let wf = compile(&workflow(
        "run-scope",
        Value::Null,
        json!([
            { "id": "start", "kind": "manual_trigger", "config": {} },
            { "id": "w", "kind": "memory", "config": { "operation": "write", "namespace": "tmp",
                "key": "k", "allow_overwrite": false, "scope": "run" } },
            { "id": "r", "kind": "memory", "config": { "operation": "read", "namespace": "tmp",
                "key": "k", "scope": "run" } }
        ]),
        json!([{ "from": "start", "to": "w" }, { "from": "w", "to": "r" }]),
    ));
    let h = Harness::new();
    for _ in 0..2 {
        let run = h.run(&wf, json!({})).await;
        assert_eq!(output(&run, "w")["written"], json!(true));
        assert_eq!(output(&run, "r"), &json!({"found": true, "value": true}));
    }
    assert!(h.store.namespaces().await.unwrap().is_empty());
}

// ---------------------------------------------------------------------------------------------
// Dry runs and unset env variables
// ---------------------------------------------------------------------------------------------

/// A dry run sends nothing, so an `env.NAME` the settings lack gets a placeholder under the
/// `.invalid` TLD and a run warning instead of failing the template; a live run of the same
/// workflow still fails on it, and a set variable is used as is.
#[tokio::test]
async fn a_dry_run_stands_a_placeholder_in_for_an_unset_env_variable() {
    let wf = compile(&workflow(
        "dry-env",
        json!({}),
        json!([
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "call", "kind": "http_request", "config": {
                "method": "POST", "url": "{{ env.CRM_URL }}/deals",
                "headers": {"Idempotency-Key": "deal-{{ input.id }}", "X-Region": "{{ env.REGION }}"},
                "body": {"id": "{{ input.id }}"}}}
        ]),
        json!([{"from": "start", "to": "call"}]),
    ));
    let h = Harness::new().env(&[("REGION", "eu")]);
    let dry = h.dry(&wf, json!({"id": "x1"})).await;
    assert_eq!(dry.status, RunStatus::Succeeded, "{}", dump(&dry));
    let config = &step(&dry, "call").resolved_config;
    assert_eq!(config["url"], "https://crm-url.unset.invalid/deals");
    assert_eq!(config["headers"]["X-Region"], "eu");
    assert_eq!(dry.warnings.len(), 1, "{:?}", dry.warnings);
    assert!(
        dry.warnings[0].starts_with(
            "env.CRM_URL is not set: this dry run used `https://crm-url.unset.invalid`"
        ),
        "{:?}",
        dry.warnings
    );

    let live = h.run(&wf, json!({"id": "x1"})).await;
    assert_eq!(live.status, RunStatus::Failed, "{}", dump(&live));
    assert_eq!(live.error.as_ref().unwrap().code, "template_error");
    assert!(live.error.as_ref().unwrap().message.contains("env.CRM_URL"));
    assert!(live.warnings.is_empty());
}
