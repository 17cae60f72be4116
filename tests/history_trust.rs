//! History that testers and analysts can trust (issue 15), over real HTTP on port 0:
//! * C12: one webhook body with a duplicated member is read the same way by every surface
//!   (the dedupe key, the router, the stored input, the list, a replay, a dry run);
//! * C13: the event stream resumes after `Last-Event-ID` with every missed event once, in
//!   order, and says `reset` when it cannot;
//! * exports: `GET /runs/export` as CSV that spreadsheets open safely, and as JSON Lines.

mod common;

use std::time::Duration;

use common::server::{Setup, TestServer, TOKEN};
use reqwest::Method;
use serde_json::{json, Value};

// ---------------------------------------------------------------------------------------------
// C12
// ---------------------------------------------------------------------------------------------

/// webhook (key `{{ input.order_id }}`) → router (`b` when `input.order_id == "B"`) → `matched`
/// on `b`, `other` on `default`.
fn orders_workflow() -> Value {
    json!({
        "id": "orders",
        "name": "orders",
        "version": 1,
        "steps": [
            {"id": "hook", "kind": "webhook_trigger",
             "config": {"dedupe_key": "{{ input.order_id }}"}},
            {"id": "route", "kind": "router",
             "config": {"routes": [{"name": "b", "when": "input.order_id == \"B\""}]}},
            {"id": "matched", "kind": "transform",
             "config": {"fields": {"order": "{{ input.order_id }}"}}},
            {"id": "other", "kind": "transform",
             "config": {"fields": {"order": "{{ input.order_id }}"}}}
        ],
        "edges": [
            {"from": "hook", "to": "route"},
            {"from": "route", "port": "b", "to": "matched"},
            {"from": "route", "port": "default", "to": "other"}
        ]
    })
}

fn step<'a>(run: &'a Value, id: &str) -> Option<&'a Value> {
    run["steps"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["step_id"] == id))
}

/// What every surface must agree on: the input is `{"order_id": "B"}`, the router took `b`.
fn assert_reads_b(run: &Value, what: &str) {
    assert_eq!(run["input"], json!({"order_id": "B"}), "{what}: {run}");
    let route = step(run, "route").unwrap_or_else(|| panic!("{what}: no route step: {run}"));
    assert_eq!(route["output"], json!({"route": "b"}), "{what}: {run}");
    let matched = step(run, "matched").unwrap_or_else(|| panic!("{what}: `b` not taken: {run}"));
    assert_eq!(matched["output"], json!({"order": "B"}), "{what}");
    assert!(step(run, "other").is_none(), "{what}: default taken too");
}

/// C12: `{"order_id":"A","order_id":"B"}` is `B` for the dedupe key, the router, the stored
/// input, the history list and search, a replay and a dry run; `{"order_id":"B"}` is then a
/// duplicate of it, while `{"order_id":"A"}` is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c12_a_duplicated_member_is_read_as_its_last_value_everywhere() {
    let s = Setup::new().workflow(orders_workflow()).start().await;
    let body = br#"{"order_id":"A","order_id":"B"}"#;

    let first = s.hook("orders", None, body).await;
    assert_eq!(first.status, 202, "{}", first.text);
    let run_id = first.json()["run_id"].as_str().unwrap().to_string();
    s.wait_final(&run_id).await;

    // The stored run, as the history view and the editor's "Debug in editor" read it.
    let detail = s
        .api(Method::GET, &format!("/runs/{run_id}"), &[], None)
        .await;
    assert_eq!(detail.status, 200);
    let run = detail.json();
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["idempotency_key"], "B");
    assert_reads_b(&run, "the stored run");
    assert!(
        !detail.text.contains(r#""order_id":"A""#),
        "the first member is gone from the record: {}",
        detail.text
    );

    // The history list finds it under key B (not A).
    let by_b = s.get_json("/runs?workflow=orders&key=B").await;
    assert_eq!(by_b["runs"][0]["id"], run_id.as_str());
    let by_a = s.get_json("/runs?workflow=orders&key=A").await;
    assert_eq!(by_a["runs"], json!([]));

    // `{"order_id":"B"}` is the same event: a duplicate of that run.
    let again = s.hook("orders", None, br#"{"order_id":"B"}"#).await;
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(again.json(), json!({"run_id": run_id, "duplicate": true}));
    // The same bytes again too; and `A` was never claimed.
    let same = s.hook("orders", None, body).await;
    assert_eq!(same.json()["duplicate"], true);
    let a = s.hook("orders", None, br#"{"order_id":"A"}"#).await;
    assert_eq!(a.status, 202, "A is another event: {}", a.text);
    let a_run = s.wait_final(a.json()["run_id"].as_str().unwrap()).await;
    assert_eq!(a_run.input, json!({"order_id": "A"}));

    // A replay reads the stored input: B again, the route matches.
    let replay = s
        .api(
            Method::POST,
            &format!("/runs/{run_id}/replay"),
            &[],
            Some("{}"),
        )
        .await;
    assert_eq!(replay.status, 200, "{}", replay.text);
    let replay = replay.json();
    assert_eq!(replay["replay_of"], run_id.as_str());
    assert_reads_b(&replay, "the replay");

    // The editor's Dry Run sends its input text: the same reading.
    let dry = s
        .api(
            Method::POST,
            "/workflows/orders/dry-run",
            &[],
            Some(r#"{"input":{"order_id":"A","order_id":"B"}}"#),
        )
        .await;
    assert_eq!(dry.status, 200, "{}", dry.text);
    assert_reads_b(&dry.json(), "the dry run");
}

// ---------------------------------------------------------------------------------------------
// C13
// ---------------------------------------------------------------------------------------------

/// `manual_trigger` → `transform`: four events per run (started, two steps, finished).
fn ticks_workflow() -> Value {
    json!({
        "id": "ticks",
        "name": "ticks",
        "version": 1,
        "steps": [
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "shape", "kind": "transform", "config": {"fields": {"n": "{{ input.n }}"}}}
        ],
        "edges": [{"from": "start", "to": "shape"}]
    })
}

/// One server-sent event as read off the wire.
#[derive(Debug, Clone)]
struct Sse {
    event: String,
    id: Option<String>,
    data: String,
}

impl Sse {
    fn id(&self) -> u64 {
        self.id
            .as_deref()
            .and_then(|i| i.parse().ok())
            .unwrap_or_else(|| panic!("an event without a numeric id: {self:?}"))
    }
    fn json(&self) -> Value {
        serde_json::from_str(&self.data).expect("JSON data")
    }
}

/// A streaming reader of `GET /api/v1/events` (the body read chunk by chunk as it arrives).
struct EventStream {
    resp: reqwest::Response,
    buf: String,
    /// The id a connection without `Last-Event-ID` starts from (its first, data-less event).
    start: Option<u64>,
}

impl EventStream {
    async fn open(s: &TestServer, last_event_id: Option<&str>) -> EventStream {
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let mut req = client
            .get(format!("{}/api/v1/events", s.url))
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("accept", "text/event-stream");
        if let Some(id) = last_event_id {
            req = req.header("last-event-id", id);
        }
        let resp = req.send().await.expect("the stream opens");
        assert_eq!(resp.status(), 200);
        assert!(resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream"));
        let mut stream = EventStream {
            resp,
            buf: String::new(),
            start: None,
        };
        if last_event_id.is_none() {
            let mark = stream.next().await.expect("the starting id");
            assert!(mark.data.is_empty() && mark.event == "message", "{mark:?}");
            stream.start = Some(mark.id());
        }
        stream
    }

    /// The next event (comments skipped), or None after 5 s without one.
    async fn next(&mut self) -> Option<Sse> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let (mut event, mut id, mut data) = (String::from("message"), None, Vec::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        event = v.trim_start().to_string();
                    } else if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim_start().to_string());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v.trim_start().to_string());
                    }
                }
                if data.is_empty() && id.is_none() {
                    continue; // a keep-alive comment
                }
                return Some(Sse {
                    event,
                    id,
                    data: data.join("\n"),
                });
            }
            match tokio::time::timeout(Duration::from_secs(5), self.resp.chunk()).await {
                Ok(Ok(Some(bytes))) => self.buf.push_str(&String::from_utf8_lossy(&bytes)),
                _ => return None,
            }
        }
    }

    /// Events until `done` says the last one read is the last wanted (at most 5 s apart).
    async fn until(&mut self, mut done: impl FnMut(&[Sse]) -> bool) -> Vec<Sse> {
        let mut out = Vec::new();
        while !done(&out) {
            match self.next().await {
                Some(e) => out.push(e),
                None => panic!("the stream went quiet after {} events: {out:?}", out.len()),
            }
        }
        out
    }
}

async fn run_ticks(s: &TestServer, from: u64, n: u64) -> Vec<String> {
    let mut ids = Vec::new();
    for i in from..from + n {
        let a = s
            .api(
                Method::POST,
                "/workflows/ticks/runs",
                &[],
                Some(&json!({"input": {"n": i}}).to_string()),
            )
            .await;
        assert_eq!(a.status, 200, "{}", a.text);
        ids.push(a.json()["id"].as_str().unwrap().to_string());
    }
    ids
}

fn finished_all(runs: &[String]) -> impl FnMut(&[Sse]) -> bool + '_ {
    move |evs: &[Sse]| {
        runs.iter().all(|r| {
            evs.iter().any(|e| {
                e.event == "run"
                    && e.json()["event"] == "run_finished"
                    && e.json()["run_id"] == r.as_str()
            })
        })
    }
}

/// Ids one more than the previous each, starting right after `after`.
fn assert_contiguous(evs: &[Sse], after: u64) {
    let ids: Vec<u64> = evs.iter().map(Sse::id).collect();
    let want: Vec<u64> = (after + 1..after + 1 + ids.len() as u64).collect();
    assert_eq!(ids, want, "ids after {after} with no gap and no repeat");
}

/// C13: a client reads events 1..n, disconnects, runs finish meanwhile, it reconnects with
/// `Last-Event-ID: n` and gets every event after n exactly once, in order, then the live
/// ones with no gap; an id older than the buffer, or from another process lifetime, gets a
/// `reset` event saying what was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c13_a_reconnecting_event_stream_loses_nothing() {
    let s = Setup::new().workflow(ticks_workflow()).start().await;

    // Events 1..n: two runs, read to their end.
    let mut first = EventStream::open(&s, None).await;
    let start = first.start.unwrap();
    assert_eq!(start, s.running().state.engine().journal().last_id());
    let runs = run_ticks(&s, 0, 2).await;
    let seen = first.until(finished_all(&runs)).await;
    assert!(seen.iter().all(|e| e.event == "run"), "{seen:?}");
    assert_eq!(seen.len(), 8, "4 events per run: {seen:?}");
    assert_contiguous(&seen, start);
    let n = seen.last().unwrap().id();
    drop(first);

    // Disconnected: three runs start and finish.
    let missed_runs = run_ticks(&s, 2, 3).await;

    // Reconnect with Last-Event-ID: n.
    let mut again = EventStream::open(&s, Some(&n.to_string())).await;
    let replayed = again.until(|evs| evs.len() == 12).await;
    assert_contiguous(&replayed, n);
    let order: Vec<(String, String)> = replayed
        .iter()
        .map(|e| {
            let j = e.json();
            (
                j["run_id"].as_str().unwrap().to_string(),
                j["event"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for (i, run) in missed_runs.iter().enumerate() {
        let of_run: Vec<&str> = order
            .iter()
            .filter(|(r, _)| r == run)
            .map(|(_, e)| e.as_str())
            .collect();
        assert_eq!(
            of_run,
            [
                "run_started",
                "step_finished",
                "step_finished",
                "run_finished"
            ],
            "missed run {i}"
        );
    }
    // Then the live part, continuing the same ids.
    let live_runs = run_ticks(&s, 5, 1).await;
    let live = again.until(finished_all(&live_runs)).await;
    assert_contiguous(&live, n + 12);
    // Nothing else comes (no repeat of the replayed part).
    assert!(again.next().await.is_none());
    drop(again);

    // More than the buffer (1,024 events) since n: a reset naming what was lost.
    let buffer = fluxo::app::events::EVENT_BUFFER as u64;
    run_ticks(&s, 6, buffer / 4 + 1).await;
    let newest = s.running().state.engine().journal().last_id();
    let mut old = EventStream::open(&s, Some(&n.to_string())).await;
    let reset = old.next().await.expect("a reset event");
    assert_eq!(reset.event, "reset", "{reset:?}");
    assert_eq!(reset.id(), newest, "the reset carries the newest id");
    let why = reset.json();
    assert_eq!(why["reason"], "too_old");
    assert_eq!(why["last_event_id"], n.to_string());
    let oldest: u64 = why["oldest_available"].as_str().unwrap().parse().unwrap();
    assert_eq!(oldest, newest - buffer + 1);
    assert_eq!(why["missed"], oldest - n - 1);
    // Then only live events, right after the reset's id.
    let live_runs = run_ticks(&s, 9000, 1).await;
    let live = old.until(finished_all(&live_runs)).await;
    assert_contiguous(&live, newest);
    drop(old);

    // An id from an earlier lifetime of the server (ids only grow across restarts).
    let mut stale = EventStream::open(&s, Some("1700000000000000007")).await;
    let reset = stale.next().await.expect("a reset event");
    assert_eq!(reset.event, "reset");
    assert_eq!(reset.json()["reason"], "restarted");
    assert!(reset.json().get("missed").is_none());
    drop(stale);
    // Not an id of this stream at all.
    let mut odd = EventStream::open(&s, Some("not-an-id")).await;
    assert_eq!(odd.next().await.unwrap().json()["reason"], "unknown");
}

// ---------------------------------------------------------------------------------------------
// Exports
// ---------------------------------------------------------------------------------------------

/// `manual_trigger` → `transform` echoing the note.
fn notes_workflow() -> Value {
    json!({
        "id": "notes",
        "name": "notes",
        "version": 1,
        "steps": [
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "shape", "kind": "transform", "config": {"fields": {"note": "{{ input.note }}"}}}
        ],
        "edges": [{"from": "start", "to": "shape"}]
    })
}

/// CSV records of an export (the header first).
fn csv_rows(text: &str) -> Vec<Vec<String>> {
    csv::ReaderBuilder::new()
        .has_headers(false)
        .from_reader(text.as_bytes())
        .records()
        .map(|r| r.expect("a CSV record").iter().map(String::from).collect())
        .collect()
}

/// The export of a run whose input holds `=HYPERLINK("x")` and `-5`: the note cell is the text
/// `'=HYPERLINK("x")` (never a formula) and the amount the number -5, in chosen input columns
/// or in the default whole-input column; JSON Lines carry the summary and the whole input, one
/// parseable object per line, across pages; bad requests are precise 400s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exports_are_safe_in_spreadsheets_and_stream_as_json_lines() {
    let s = Setup::new().workflow(notes_workflow()).start().await;
    let input = json!({"note": "=HYPERLINK(\"x\")", "amount": -5, "nested": {"who": "@ann"}});
    let a = s
        .api(
            Method::POST,
            "/workflows/notes/runs",
            &[],
            Some(&json!({ "input": input }).to_string()),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.text);
    let run_id = a.json()["id"].as_str().unwrap().to_string();

    // CSV with chosen input paths.
    let csv = s
        .api(
            Method::GET,
            "/runs/export?format=csv&workflow=notes&fields=input.note,input.amount,input.nested.who,input.missing",
            &[],
            None,
        )
        .await;
    assert_eq!(csv.status, 200, "{}", csv.text);
    assert_eq!(csv.header("content-type"), Some("text/csv; charset=utf-8"));
    let disposition = csv.header("content-disposition").unwrap();
    assert!(
        disposition.starts_with("attachment; filename=\"fluxo-runs-")
            && disposition.ends_with(".csv\""),
        "{disposition}"
    );
    // On the wire: RFC 4180 quoting of the neutralised text, the number bare.
    assert!(
        csv.text.contains(r#","'=HYPERLINK(""x"")",-5,'@ann,"#),
        "{}",
        csv.text
    );
    assert!(csv.text.ends_with("\r\n"));
    let rows = csv_rows(&csv.text);
    assert_eq!(rows.len(), 2, "a header and one run: {rows:?}");
    let header = &rows[0];
    assert_eq!(&header[..3], ["id", "workflow_id", "workflow_version"]);
    assert_eq!(
        &header[header.len() - 4..],
        [
            "input.note",
            "input.amount",
            "input.nested.who",
            "input.missing"
        ]
    );
    let cell = |name: &str| {
        let i = header.iter().position(|h| h == name).unwrap();
        rows[1][i].clone()
    };
    assert_eq!(cell("id"), run_id);
    assert_eq!(cell("status"), "succeeded");
    assert_eq!(cell("input.note"), r#"'=HYPERLINK("x")"#);
    assert_eq!(cell("input.amount"), "-5");
    assert_eq!(cell("input.nested.who"), "'@ann");
    assert_eq!(cell("input.missing"), "");

    // The desktop's `export_runs` writes the same bytes into a file (`export::write_file`).
    let dir = tempfile::tempdir().unwrap();
    let params = fluxo::app::export::ExportParams {
        format: Some("csv".into()),
        fields: Some("input.note,input.amount,input.nested.who,input.missing".into()),
        workflow: Some("notes".into()),
        ..Default::default()
    };
    let plan = fluxo::app::export::plan(&params).unwrap();
    let file = fluxo::app::export::write_file(&s.running().state, plan, dir.path())
        .await
        .unwrap();
    assert_eq!(std::fs::read_to_string(&file.path).unwrap(), csv.text);
    assert_eq!(file.bytes, csv.text.len() as u64);
    assert_eq!(file.path.parent(), Some(dir.path()));
    let name = file.path.file_name().unwrap().to_str().unwrap();
    assert!(disposition.contains(name), "{name} in {disposition}");

    // The default: one `input` column with the whole input as JSON text (safe: it starts with `{`).
    let whole = s
        .api(Method::GET, "/runs/export?workflow=notes", &[], None)
        .await;
    assert_eq!(whole.status, 200);
    let rows = csv_rows(&whole.text);
    assert_eq!(rows[0].last().unwrap(), "input");
    let parsed: Value = serde_json::from_str(rows[1].last().unwrap()).unwrap();
    assert_eq!(parsed, input);
    // `fields=` (empty): the summary columns only.
    let bare = s
        .api(
            Method::GET,
            "/runs/export?workflow=notes&fields=",
            &[],
            None,
        )
        .await;
    assert_eq!(csv_rows(&bare.text)[0].last().unwrap(), "resumed_by");
    // No run matches: the header alone.
    let none = s
        .api(Method::GET, "/runs/export?workflow=nope", &[], None)
        .await;
    assert_eq!(csv_rows(&none.text).len(), 1);

    // JSON Lines over several pages (500 runs a page): 505 dry runs, each line parses.
    for i in 0..505 {
        let d = s
            .api(
                Method::POST,
                "/workflows/notes/dry-run",
                &[],
                Some(&json!({"input": {"note": format!("n{i}"), "amount": i}}).to_string()),
            )
            .await;
        assert_eq!(d.status, 200, "{}", d.text);
    }
    let jsonl = s
        .api(
            Method::GET,
            "/runs/export?format=jsonl&workflow=notes&mode=dry",
            &[],
            None,
        )
        .await;
    assert_eq!(jsonl.status, 200);
    assert_eq!(jsonl.header("content-type"), Some("application/x-ndjson"));
    assert!(jsonl.text.ends_with('\n'));
    let lines: Vec<Value> = jsonl
        .text
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert_eq!(lines.len(), 505);
    let ids: std::collections::BTreeSet<&str> =
        lines.iter().map(|l| l["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 505, "each run once");
    // Newest first: the last dry run heads the file.
    assert_eq!(lines[0]["input"], json!({"note": "n504", "amount": 504}));
    assert_eq!(lines[504]["input"], json!({"note": "n0", "amount": 0}));
    assert!(lines
        .iter()
        .all(|l| l["mode"] == "dry" && l["workflow_id"] == "notes"));
    // The live run's line holds the whole input, numbers as numbers.
    let live = s
        .api(
            Method::GET,
            "/runs/export?format=jsonl&mode=live",
            &[],
            None,
        )
        .await;
    let line: Value = serde_json::from_str(live.text.lines().next().unwrap()).unwrap();
    assert_eq!(line["id"], run_id.as_str());
    assert_eq!(line["input"], input);

    // Precise 400s.
    let bad = s
        .api(Method::GET, "/runs/export?format=xlsx", &[], None)
        .await;
    let p = bad.problem(400, "invalid_parameter");
    assert!(
        p["detail"].as_str().unwrap().contains("`format`: `xlsx`"),
        "{p}"
    );
    for fields in ["data.customer", "input..x", "input.a%20b"] {
        let bad = s
            .api(
                Method::GET,
                &format!("/runs/export?fields={fields}"),
                &[],
                None,
            )
            .await;
        let p = bad.problem(400, "invalid_field");
        assert!(p["detail"].as_str().unwrap().contains("`fields`"), "{p}");
    }
    let bad = s
        .api(Method::GET, "/runs/export?status=done", &[], None)
        .await;
    bad.problem(400, "invalid_parameter");
    let bad = s.api(Method::GET, "/runs/export?limit=5", &[], None).await;
    bad.problem(400, "invalid_parameter");
}
