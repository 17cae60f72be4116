//! Handed case C10, the seed scenario, end to end through the real server and the sandbox:
//! one record per event.
//!
//! `fluxo::server::start` on `127.0.0.1:0` over a sled store in a temp dir and the system
//! clock, with a workflows folder holding `invoice-paid-once` and `env.CRM_URL` pointing at a
//! sandbox started here. Stripe's `invoice.paid` is sent twice, then `invoice.paid.second`: two
//! deals, one acknowledged duplicate. Then the create step is pointed at a failing URL (a `PUT`
//! of the workflow) and a new event is sent: the run fails and its compensation deletes the
//! Memory claim. The URL is fixed (another `PUT`) and the failed run is replayed from history
//! (`POST /api/v1/runs/{id}/replay`): it succeeds and the destination has exactly one deal for
//! that event. Runs are awaited by polling `GET /api/v1/runs/{id}` (bounded).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use fluxo::clock::{Clock, SystemClock};
use fluxo::runtime::Engine;
use fluxo::sandbox::Sandbox;
use fluxo::server::{self, ServerOptions};
use fluxo::store::{SledConfig, SledStore, Store};
use fluxo::workflow::dir::WorkflowDir;

const TOKEN: &str = "c10-token-0123456789-0123456789abcdef0123456789";
const WF: &str = "invoice-paid-once";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixture(rel: &str) -> Vec<u8> {
    std::fs::read(root().join("tests/fixtures/payloads").join(rel)).expect("fixture")
}

struct Api {
    url: String,
    client: reqwest::Client,
}

impl Api {
    async fn hook(&self, body: Vec<u8>) -> (StatusCode, Value) {
        let r = self
            .client
            .post(format!("{}/hooks/{WF}", self.url))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("the server answers");
        let status = r.status();
        (status, r.json().await.expect("JSON answer"))
    }

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = self
            .client
            .request(method, format!("{}/api/v1{path}", self.url))
            .bearer_auth(TOKEN)
            .header("prefer", "respond-async");
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.expect("the server answers");
        let status = r.status();
        let text = r.text().await.unwrap_or_default();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// Poll the run until it is final (bounded: 30 s in 10 ms steps).
    async fn wait_final(&self, run_id: &str) -> Value {
        for _ in 0..3000 {
            let (status, run) = self
                .call(reqwest::Method::GET, &format!("/runs/{run_id}"), None)
                .await;
            assert_eq!(status, StatusCode::OK, "GET run {run_id}: {run}");
            if !matches!(run["status"].as_str(), Some("queued" | "running")) {
                return run;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("run {run_id} did not finish in 30 s");
    }
}

fn step<'r>(run: &'r Value, id: &str) -> &'r Value {
    run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step_id"] == id)
        .unwrap_or_else(|| panic!("step `{id}` did not run: {run:#}"))
}

fn ran(run: &Value) -> Vec<String> {
    run["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step_id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c10_one_record_per_event_through_server_and_sandbox() {
    // The destination.
    let sandbox = Sandbox::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let deals = || sandbox.state().records("deals");

    // The server: a workflows folder with the template, sled in a temp dir, the real clock.
    let workflows = tempfile::tempdir().unwrap();
    let original_text =
        std::fs::read_to_string(root().join("workflows/invoice-paid-once.json")).unwrap();
    std::fs::write(workflows.path().join(format!("{WF}.json")), &original_text).unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut config = SledConfig::new(data.path().join("store"));
    config.cache_capacity_bytes = 16 * 1024 * 1024;
    let store = Arc::new(SledStore::open(&config).unwrap());
    let engine = Engine::new(
        store as Arc<dyn Store>,
        Arc::new(SystemClock) as Arc<dyn Clock>,
    );
    let dir = WorkflowDir::load(workflows.path(), engine.registry().clone()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let running = server::start(
        listener,
        engine,
        dir,
        TOKEN.to_string(),
        ServerOptions::default(),
    )
    .await
    .unwrap();
    // env.CRM_URL → the sandbox (set once the server runs: it applies its settings' env at
    // start).
    running
        .state
        .engine()
        .set_env([("CRM_URL".to_string(), sandbox.url())].into());
    let api = Api {
        url: running.url(),
        client: reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap(),
    };

    // 1. invoice.paid twice, then invoice.paid.second. The workflow's dedupe_key
    //    ({{ input.id }}) is the key at the door.
    let (s1, a1) = api.hook(fixture("stripe/invoice.paid.json")).await;
    assert_eq!(s1, StatusCode::ACCEPTED, "{a1}");
    assert_eq!(a1["duplicate"], false);
    let (s2, a2) = api.hook(fixture("stripe/invoice.paid.json")).await;
    assert_eq!(s2, StatusCode::OK, "{a2}");
    assert_eq!(
        a2["duplicate"], true,
        "the repeat is an acknowledged duplicate"
    );
    assert_eq!(a2["run_id"], a1["run_id"], "no second run");
    let (s3, a3) = api.hook(fixture("stripe/invoice.paid.second.json")).await;
    assert_eq!(s3, StatusCode::ACCEPTED, "{a3}");
    assert_eq!(a3["duplicate"], false);

    for a in [&a1, &a3] {
        let run = api.wait_final(a["run_id"].as_str().unwrap()).await;
        assert_eq!(run["status"], "succeeded", "{run:#}");
        assert_eq!(step(&run, "seen")["output"]["written"], true);
        assert_eq!(step(&run, "create")["output"]["status"], 201);
    }
    let (_, page) = api
        .call(reqwest::Method::GET, &format!("/runs?workflow={WF}"), None)
        .await;
    assert_eq!(
        page["runs"].as_array().unwrap().len(),
        2,
        "two runs for three deliveries"
    );
    // The two runs may execute at once (several workers): their records land in either order.
    let mut invoices: Vec<String> = deals()
        .iter()
        .map(|d| d["invoice"].as_str().unwrap_or_default().to_string())
        .collect();
    invoices.sort();
    assert_eq!(
        invoices,
        ["in_1Pgc6tB7WZ01zgkWu9fdqL6I", "in_1Pgd9PB7WZ01zgkWr1x5QaZt"],
        "2 records at the destination"
    );

    // 2. Point the create step at a failing URL (a port nothing listens on) and send a new
    //    event.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let (status, current) = api
        .call(reqwest::Method::GET, &format!("/workflows/{WF}"), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let mut broken = current.clone();
    let create = broken["steps"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|s| s["id"] == "create")
        .unwrap();
    create["config"]["url"] = json!(format!("http://127.0.0.1:{closed}/deals"));
    let (status, saved) = api
        .call(
            reqwest::Method::PUT,
            &format!("/workflows/{WF}"),
            Some(broken),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{saved}");
    assert_eq!(saved["valid"], true, "{saved}");

    let mut event: Value = serde_json::from_slice(&fixture("stripe/invoice.paid.json")).unwrap();
    event["id"] = json!("evt_c10_new_event");
    event["data"]["object"]["id"] = json!("in_c10_new_invoice");
    let (status, a4) = api.hook(serde_json::to_vec(&event).unwrap()).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{a4}");
    let failed_id = a4["run_id"].as_str().unwrap().to_string();
    let failed = api.wait_final(&failed_id).await;
    assert_eq!(failed["status"], "failed", "{failed:#}");
    assert_eq!(failed["error"]["step"], "create");
    assert_eq!(failed["error"]["code"], "connection");
    assert_eq!(failed["error"]["attempts"], 3, "the create retried twice");
    assert_eq!(
        ran(&failed),
        vec!["hook", "seen", "route", "create", "fail", "undo"]
    );
    // The compensation deleted the claim.
    assert_eq!(step(&failed, "undo")["output"]["deleted"], true);
    let (status, _) = api
        .call(
            reqwest::Method::GET,
            "/memory/processed-invoices/evt_c10_new_event",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "no claim left behind");
    assert_eq!(deals().len(), 2, "nothing reached the destination");

    // 3. Fix the URL and replay the failed run from history.
    let original: Value = serde_json::from_str(&original_text).unwrap();
    let (status, saved) = api
        .call(
            reqwest::Method::PUT,
            &format!("/workflows/{WF}"),
            Some(original),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{saved}");
    assert_eq!(saved["valid"], true);
    let (status, queued) = api
        .call(
            reqwest::Method::POST,
            &format!("/runs/{failed_id}/replay"),
            Some(json!({"mode": "live"})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{queued}");
    let replay_id = queued["id"].as_str().expect("the queued run").to_string();
    let replay = api.wait_final(&replay_id).await;
    assert_eq!(replay["status"], "succeeded", "{replay:#}");
    assert_eq!(replay["replay_of"], failed_id.as_str());
    assert_eq!(replay["trigger"], "replay");
    assert_eq!(step(&replay, "seen")["output"]["written"], true);
    assert_eq!(step(&replay, "create")["output"]["status"], 201);
    let for_event: Vec<Value> = deals()
        .into_iter()
        .filter(|d| d["invoice"] == "in_c10_new_invoice")
        .collect();
    assert_eq!(for_event.len(), 1, "exactly one record for that event");
    assert_eq!(deals().len(), 3);
    let (status, claim) = api
        .call(
            reqwest::Method::GET,
            "/memory/processed-invoices/evt_c10_new_event",
            None,
        )
        .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "the replay claimed the event: {claim}"
    );
    let (_, original_run) = api
        .call(reqwest::Method::GET, &format!("/runs/{failed_id}"), None)
        .await;
    assert_eq!(original_run["replayed_by"], json!([replay_id]));

    // A second replay of the same failed run is stopped by the workflow's own claim.
    let (status, again) = api
        .call(
            reqwest::Method::POST,
            &format!("/runs/{failed_id}/replay"),
            Some(json!({"mode": "live"})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{again}");
    let again = api.wait_final(again["id"].as_str().unwrap()).await;
    assert_eq!(again["status"], "succeeded");
    assert_eq!(step(&again, "route")["output"]["route"], "skip");
    assert_eq!(deals().len(), 3, "still one record per event");

    running.shutdown().await;
    sandbox.shutdown().await;
}
