//! `fan_out`: one child run per item, each item's key claimed once in the target workflow's
//! scope; dry runs claim and queue nothing.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use common::{compile, output};
use fluxo::clock::{Clock, ManualClock};
use fluxo::run::{Mode, RunRecord, RunStatus, Trigger};
use fluxo::runtime::children::ChildHooks;
use fluxo::runtime::{Engine, RunRequest};
use fluxo::store::{IdempotencyStore, InMemoryStore, RunQuery, RunStore, Store};
use fluxo::workflow::Compiled;

fn parent(fan_out: Value) -> Value {
    json!({
        "id": "poller", "name": "poller", "version": 1,
        "steps": [
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "fan", "kind": "fan_out", "config": fan_out}
        ],
        "edges": [{"from": "start", "to": "fan"}]
    })
}

fn child(id: &str, trigger: &str) -> Value {
    let config = if trigger == "schedule_trigger" {
        json!({"cron": "* * * * *"})
    } else {
        json!({})
    };
    json!({
        "id": id, "name": id, "version": 1,
        "steps": [
            {"id": "start", "kind": trigger, "config": config},
            {"id": "shape", "kind": "transform", "config": {"fields": {"id": "{{ input.id }}"}}}
        ],
        "edges": [{"from": "start", "to": "shape"}]
    })
}

struct Rig {
    store: Arc<InMemoryStore>,
    engine: Engine,
    dispatched: Arc<Mutex<Vec<String>>>,
}

impl Rig {
    fn new() -> Rig {
        let store = Arc::new(InMemoryStore::new());
        let clock = Arc::new(ManualClock::at_2026());
        let engine = Engine::new(store.clone(), clock as Arc<dyn Clock>);
        let targets: HashMap<String, Arc<Compiled>> = [
            ("sync-one", "manual_trigger"),
            ("scheduled", "schedule_trigger"),
        ]
        .into_iter()
        .map(|(id, t)| (id.to_string(), Arc::new(compile(&child(id, t)))))
        .collect();
        let dispatched = Arc::new(Mutex::new(Vec::new()));
        let d = dispatched.clone();
        engine.set_child_hooks(ChildHooks {
            workflow: Box::new(move |id| targets.get(id).cloned()),
            dispatch: Box::new(move |id| d.lock().unwrap().push(id)),
        });
        Rig {
            store,
            engine,
            dispatched,
        }
    }

    async fn run(&self, wf: &Compiled, input: Value, mode: Mode) -> RunRecord {
        self.engine
            .run(wf, RunRequest::new(input, Trigger::Manual, mode))
            .await
            .unwrap()
    }

    async fn children(&self) -> Vec<RunRecord> {
        let page = self
            .store
            .list_runs(&RunQuery {
                workflow: Some("sync-one".into()),
                limit: 500,
                ..Default::default()
            })
            .await
            .unwrap();
        let mut runs = Vec::new();
        for s in &page.runs {
            runs.push(self.store.get_run(&s.id).await.unwrap().unwrap());
        }
        runs
    }
}

fn items(ids: &[&str]) -> Value {
    json!({"items": ids.iter().map(|id| json!({"id": id, "amount": 100})).collect::<Vec<_>>()})
}

fn fan(extra: Value) -> Value {
    let mut c =
        json!({"items": "{{ input.items }}", "key": "pay-{{ item.id }}", "workflow": "sync-one"});
    for (k, v) in extra.as_object().unwrap() {
        c[k] = v.clone();
    }
    c
}

#[tokio::test]
async fn a_list_with_duplicate_ids_starts_each_id_once() {
    let rig = Rig::new();
    let wf = compile(&parent(fan(json!({}))));
    let run = rig
        .run(&wf, items(&["a", "b", "a", "c", "b"]), Mode::Live)
        .await;
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    let out = output(&run, "fan");
    assert_eq!(out["started"], 3);
    assert_eq!(out["duplicates"], 2);
    assert_eq!(out["run_ids"].as_array().unwrap().len(), 3);
    let children = rig.children().await;
    assert_eq!(children.len(), 3);
    let mut keys: Vec<_> = children
        .iter()
        .map(|c| c.idempotency_key.clone().unwrap())
        .collect();
    keys.sort();
    assert_eq!(keys, ["pay-a", "pay-b", "pay-c"]);
    for c in &children {
        assert_eq!(c.parent_run.as_deref(), Some(run.id.as_str()));
        assert_eq!(c.trigger, Trigger::FanOut);
        assert_eq!(c.status, RunStatus::Queued);
        assert_eq!(c.input["amount"], 100, "the item is the input");
    }
    assert_eq!(rig.dispatched.lock().unwrap().len(), 3);
    // The same page again (the next poll): nothing new starts.
    let again = rig.run(&wf, items(&["a", "b", "c"]), Mode::Live).await;
    assert_eq!(output(&again, "fan")["started"], 0);
    assert_eq!(output(&again, "fan")["duplicates"], 3);
    assert_eq!(rig.children().await.len(), 3);
}

#[tokio::test]
async fn two_overlapping_fan_outs_of_one_page_start_each_item_once() {
    let rig = Rig::new();
    let wf = compile(&parent(fan(json!({}))));
    let ids: Vec<String> = (0..60).map(|i| format!("py_{i:03}")).collect();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let mut page_b: Vec<&str> = refs[20..].to_vec();
    page_b.reverse();
    let (a, b) = tokio::join!(
        rig.run(&wf, items(&refs[..40]), Mode::Live),
        rig.run(&wf, items(&page_b), Mode::Live),
    );
    let started = output(&a, "fan")["started"].as_u64().unwrap()
        + output(&b, "fan")["started"].as_u64().unwrap();
    let dups = output(&a, "fan")["duplicates"].as_u64().unwrap()
        + output(&b, "fan")["duplicates"].as_u64().unwrap();
    assert_eq!(started, 60);
    assert_eq!(dups, 20);
    let children = rig.children().await;
    assert_eq!(children.len(), 60);
    let mut keys: Vec<_> = children
        .iter()
        .map(|c| c.idempotency_key.clone().unwrap())
        .collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 60, "each item once");
}

#[tokio::test]
async fn too_many_items_is_a_clear_error_and_starts_nothing() {
    let rig = Rig::new();
    let wf = compile(&parent(fan(json!({"max_items": 3}))));
    let run = rig
        .run(&wf, items(&["a", "b", "c", "d", "e"]), Mode::Live)
        .await;
    assert_eq!(run.status, RunStatus::Failed);
    let e = run.error.unwrap();
    assert_eq!(e.code, "too_many_items");
    assert!(
        e.message.contains("5 items") && e.message.contains("max_items is 3"),
        "{}",
        e.message
    );
    assert!(rig.children().await.is_empty());
}

#[tokio::test]
async fn dry_run_claims_and_queues_nothing() {
    let rig = Rig::new();
    let wf = compile(&parent(fan(json!({}))));
    let dry = rig.run(&wf, items(&["a", "b", "a"]), Mode::Dry).await;
    assert_eq!(dry.status, RunStatus::Succeeded, "{:?}", dry.error);
    assert_eq!(output(&dry, "fan")["started"], 2, "the prediction");
    assert_eq!(output(&dry, "fan")["duplicates"], 1);
    assert_eq!(output(&dry, "fan")["run_ids"], json!([]));
    assert!(rig.children().await.is_empty());
    assert!(rig.dispatched.lock().unwrap().is_empty());
    assert_eq!(
        rig.store
            .get_claim("sync-one", "pay-a", rig.engine.clock().now_ms())
            .await
            .unwrap(),
        None
    );
    // After a live run, a dry run predicts the duplicates.
    rig.run(&wf, items(&["a"]), Mode::Live).await;
    let dry = rig.run(&wf, items(&["a", "b"]), Mode::Dry).await;
    assert_eq!(output(&dry, "fan")["started"], 1);
    assert_eq!(output(&dry, "fan")["duplicates"], 1);
    assert_eq!(rig.children().await.len(), 1);
}

#[tokio::test]
async fn bad_targets_and_items_are_named() {
    let rig = Rig::new();
    let wf = compile(&parent(fan(json!({"workflow": "scheduled"}))));
    let run = rig.run(&wf, items(&["a"]), Mode::Live).await;
    let e = run.error.unwrap();
    assert!(e.message.contains("manual_trigger"), "{}", e.message);
    let wf = compile(&parent(fan(json!({"workflow": "nope"}))));
    let e = rig.run(&wf, items(&["a"]), Mode::Live).await.error.unwrap();
    assert!(e.message.contains("`nope` does not exist"), "{}", e.message);
    let wf = compile(&parent(fan(json!({}))));
    let e = rig
        .run(&wf, json!({"items": {"id": "a"}}), Mode::Live)
        .await
        .error
        .unwrap();
    assert!(e.message.contains("JSON array"), "{}", e.message);
    let e = rig
        .run(&wf, json!({"items": [{"id": "a"}, {"x": 1}]}), Mode::Live)
        .await
        .error
        .unwrap();
    assert!(e.message.contains("items[1]"), "{}", e.message);
    assert!(rig.children().await.is_empty(), "a bad item starts nothing");
    // An engine without a host queue (`fluxo run`) refuses a live fan-out clearly.
    let bare = Engine::new(
        Arc::new(InMemoryStore::new()) as Arc<dyn Store>,
        Arc::new(ManualClock::at_2026()) as Arc<dyn Clock>,
    );
    let run = bare
        .run(
            &wf,
            RunRequest::new(items(&["a"]), Trigger::Cli, Mode::Live),
        )
        .await
        .unwrap();
    assert!(run.error.unwrap().message.contains("fluxo serve"));
}
