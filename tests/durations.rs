//! Claims made plain (issue 37, point 8), over the HTTP API of an in-process server on port 0
//! with sled in a temp dir and the engine's manual clock:
//!
//! * every field that asks for a time takes units (`4d`, `36h`, `90s`, `500ms`) or a plain
//!   number in its old unit; the file keeps what was written (`"run_timeout_s": "2m"`);
//! * a bad duration is refused with the field's path and the accepted forms;
//! * the linter still compares a claim's TTL with the dedupe window, and says both in units;
//! * a claim written with `ttl_s: "4d"` expires four days after the write, by the engine's
//!   clock; a dry run (the preview) predicts the same;
//! * the catalog offers Memory's "Claim the event" preset: no overwrite, the event's id as key,
//!   a TTL in units; its schema marks every duration field.

mod common;

use common::server::{Setup, StoreKind, TestServer};
use common::{Action, Mock};
use fluxo::clock::Clock;
use reqwest::Method;
use serde_json::{json, Value};

const DAY_MS: i64 = 86_400_000;

/// A webhook → claim → route → skip / create flow, its times written with units.
fn flow(id: &str, ttl: Value, window: Value) -> Value {
    flow_to(id, ttl, window, "http://127.0.0.1:9")
}

/// [`flow`] with its CRM at `crm`.
fn flow_to(id: &str, ttl: Value, window: Value, crm: &str) -> Value {
    json!({
        "id": id, "name": id, "version": 1,
        "settings": {"run_timeout_s": "2m"},
        "steps": [
            {"id": "hook", "kind": "webhook_trigger",
             "config": {"dedupe_window_s": window, "dedupe_key": "{{ input.id }}"}},
            {"id": "claim", "kind": "memory", "name": "Claim the event",
             "config": {"operation": "write", "namespace": "processed-events",
                        "key": "{{ input.id }}", "allow_overwrite": false, "ttl_s": ttl}},
            {"id": "route", "kind": "router",
             "config": {"routes": [{"name": "skip", "when": "steps.claim.output.written == false"}]}},
            {"id": "skip", "kind": "transform", "config": {"fields": {"skipped": true}}},
            {"id": "create", "kind": "http_request",
             "config": {"method": "POST", "url": format!("{crm}/deals"),
                        "headers": {"Idempotency-Key": "deal-{{ input.id }}"},
                        "timeout_s": "500ms", "retry_base_delay_ms": "2s",
                        "max_retry_delay_s": "1m", "retries": 1,
                        "dry_run": {"status": 201, "body": {"id": "d1"}}}}
        ],
        "edges": [
            {"from": "hook", "to": "claim"},
            {"from": "claim", "to": "route"},
            {"from": "route", "port": "skip", "to": "skip"},
            {"from": "route", "port": "default", "to": "create"}
        ]
    })
}

async fn server() -> TestServer {
    Setup::new().store(StoreKind::Sled).start().await
}

async fn call(s: &TestServer, method: Method, path: &str, body: &Value) -> (u16, Value) {
    let a = s.api(method, path, &[], Some(&body.to_string())).await;
    (a.status.as_u16(), a.json())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn times_take_units_and_the_file_keeps_them() {
    let s = server().await;
    let wf = flow("units", json!("4d"), json!("24h"));
    let (status, saved) = call(&s, Method::PUT, "/workflows/units", &wf).await;
    assert_eq!(status, 200, "{saved}");

    // GET answers the file: the units as written.
    let got = s.get_json("/workflows/units").await;
    assert_eq!(got["settings"]["run_timeout_s"], "2m");
    assert_eq!(got["steps"][1]["config"]["ttl_s"], "4d");
    assert_eq!(got["steps"][0]["config"]["dedupe_window_s"], "24h");
    let text = std::fs::read_to_string(s.workflows_dir.path().join("units.json")).unwrap();
    assert!(text.contains(r#""run_timeout_s": "2m""#), "{text}");
    assert!(text.contains(r#""ttl_s": "4d""#), "{text}");

    // Plain numbers keep their old unit.
    let mut plain = flow("plain", json!(345600), json!(86400));
    plain["settings"]["run_timeout_s"] = json!(120);
    plain["steps"][4]["config"]["timeout_s"] = json!(0.5);
    plain["steps"][4]["config"]["retry_base_delay_ms"] = json!(2000);
    let (status, saved) = call(&s, Method::PUT, "/workflows/plain", &plain).await;
    assert_eq!(status, 200, "{saved}");
    let (status, v) = call(&s, Method::POST, "/workflows/validate", &plain).await;
    assert_eq!(status, 200, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_with_a_ttl_in_days_expires_days_later_by_the_engines_clock() {
    let s = server().await;
    let crm = Mock::always(Action::json(201, json!({"id": "deal_1"}))).await;
    let (status, saved) = call(
        &s,
        Method::PUT,
        "/workflows/ttl",
        &flow_to("ttl", json!("4d"), json!("24h"), &crm.url()),
    )
    .await;
    assert_eq!(status, 200, "{saved}");
    let input = json!({"id": "evt_4d"});

    // The preview (a dry run) predicts the expiry; nothing is written.
    let (status, dry) = call(
        &s,
        Method::POST,
        "/workflows/ttl/dry-run",
        &json!({ "input": input }),
    )
    .await;
    assert_eq!(status, 200, "{dry}");
    let claim = dry["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|st| st["step_id"] == "claim")
        .unwrap();
    assert_eq!(claim["output"]["written"], true, "{dry}");
    let now = s.clock.now_ms();
    let expected = fluxo::clock::rfc3339(now + 4 * DAY_MS);
    assert_eq!(claim["output"]["expires_at"], expected.as_str());

    // A delivery writes it, by the engine's clock.
    let a = s
        .hook("ttl", Some("k-4d"), input.to_string().as_bytes())
        .await;
    assert_eq!(a.status.as_u16(), 202, "{}", a.text);
    let run = s.wait_final(a.json()["run_id"].as_str().unwrap()).await;
    assert_eq!(run.status, fluxo::run::RunStatus::Succeeded, "{run:?}");
    assert_eq!(crm.count(), 1);
    let entry = s.get_json("/memory/processed-events/evt_4d").await;
    assert_eq!(entry["expires_at"], expected.as_str(), "{entry}");

    // Four days later, minus a second, it still holds; a second more and it is gone.
    s.advance(std::time::Duration::from_millis((4 * DAY_MS - 1000) as u64));
    let a = s
        .api(Method::GET, "/memory/processed-events/evt_4d", &[], None)
        .await;
    assert_eq!(a.status.as_u16(), 200, "{}", a.text);
    s.advance(std::time::Duration::from_millis(1000));
    let a = s
        .api(Method::GET, "/memory/processed-events/evt_4d", &[], None)
        .await;
    assert_eq!(a.status.as_u16(), 404, "{}", a.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_duration_names_the_field_and_the_accepted_forms() {
    let s = server().await;
    for (wf, path) in [
        (
            flow("bad", json!("4 dayz"), json!("24h")),
            "steps[1].config.ttl_s",
        ),
        (
            flow("bad", json!("4d"), json!("soon")),
            "steps[0].config.dedupe_window_s",
        ),
        (
            {
                let mut w = flow("bad", json!("4d"), json!("24h"));
                w["steps"][4]["config"]["timeout_s"] = json!("fast");
                w
            },
            "steps[4].config.timeout_s",
        ),
        (
            {
                let mut w = flow("bad", json!("4d"), json!("24h"));
                w["settings"]["run_timeout_s"] = json!("a while");
                w
            },
            "settings.run_timeout_s",
        ),
    ] {
        let (status, v) = call(&s, Method::POST, "/workflows/validate", &wf).await;
        assert_eq!(status, 200, "{v}");
        let problems = v["problems"].as_array().unwrap();
        let p = problems
            .iter()
            .find(|p| p["path"].as_str().is_some_and(|x| x.starts_with(path)))
            .unwrap_or_else(|| panic!("{path} in {v}"));
        let message = p["message"].as_str().unwrap();
        assert!(message.contains("is not a duration"), "{message}");
        assert!(message.contains("`4d`, `36h`, `90s`, `500ms`"), "{message}");
    }
    // A claim's TTL in whole seconds only.
    let (_, v) = call(
        &s,
        Method::POST,
        "/workflows/validate",
        &flow("bad", json!("1500ms"), json!("24h")),
    )
    .await;
    assert!(
        v.to_string().contains("not a whole number of seconds"),
        "{v}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_linter_compares_a_ttl_in_units_with_the_window() {
    let s = server().await;
    let (_, v) = call(
        &s,
        Method::POST,
        "/workflows/validate",
        &flow("short", json!("36h"), json!("2d")),
    )
    .await;
    let p = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["code"] == "lint_claim_ttl_short")
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(p["path"], "steps[1].config.ttl_s");
    assert_eq!(p["step"], "claim");
    let message = p["message"].as_str().unwrap();
    assert!(
        message.contains("expires after 1d 12h") && message.contains("dedupe window is 2d"),
        "{message}"
    );
    // Long enough: no warning.
    let (_, v) = call(
        &s,
        Method::POST,
        "/workflows/validate",
        &flow("long", json!("4d"), json!("24h")),
    )
    .await;
    assert!(!v.to_string().contains("lint_claim_ttl_short"), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_catalog_offers_claim_the_event_and_marks_durations() {
    let s = server().await;
    let kinds = s.get_json("/step-kinds").await;
    let kind = |k: &str| {
        kinds
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["kind"] == k)
            .unwrap()
            .clone()
    };
    let memory = kind("memory");
    let claim = &memory["presets"][0];
    assert_eq!(claim["id"], "claim");
    assert_eq!(claim["title"], "Claim the event");
    assert_eq!(claim["config"]["operation"], "write");
    assert_eq!(claim["config"]["allow_overwrite"], false);
    assert_eq!(claim["config"]["ttl_s"], "4d");
    assert_eq!(claim["fill"]["key"], "event_id");
    assert_eq!(claim["fill"]["namespace"], "workflow_namespace");
    // The preset's config is a valid Memory config as it stands.
    let mut wf = flow("preset", json!("4d"), json!("24h"));
    wf["steps"][1]["config"] = claim["config"].clone();
    let (_, v) = call(&s, Method::POST, "/workflows/validate", &wf).await;
    assert!(
        !v["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["severity"] == "error"),
        "{v}"
    );
    assert_eq!(kind("router")["presets"], json!([]));

    for (k, field, unit) in [
        ("memory", "ttl_s", "s"),
        ("webhook_trigger", "dedupe_window_s", "s"),
        ("fan_out", "window_s", "s"),
        ("http_request", "timeout_s", "s"),
        ("http_request", "retry_base_delay_ms", "ms"),
        ("publish_output", "max_retry_delay_s", "s"),
    ] {
        let schema = kind(k)["config_schema"]["properties"][field].clone();
        assert_eq!(schema["x-fluxo-duration"], unit, "{k}.{field}: {schema}");
        let d = schema["description"].as_str().unwrap_or_default();
        assert!(!d.is_empty(), "{k}.{field} is documented: {schema}");
    }
}
