//! The shipped `polling-sync` (schedule → read cursor → list → fan_out → save cursor) and
//! `polling-sync-item` (claim → create with an Idempotency-Key → compensate), against the real
//! sandbox (in-process, port 0) with the scheduler driven by the controlled clock: overlapping
//! polls, one while the previous one's children are still queued, sync each payment exactly
//! once, and payments added between polls are picked up; an item whose create fails is not
//! restarted by later polls (the fan-out key stays claimed) and a replay syncs it once.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use fluxo::app::scheduler::{Fire, Scheduler};
use fluxo::clock::{Clock, ManualClock};
use fluxo::run::{Mode, RunRecord, RunStatus};
use fluxo::runtime::children::ChildHooks;
use fluxo::runtime::Engine;
use fluxo::sandbox::{FaultRuleSpec, Sandbox, SandboxConfig, SandboxHandle};
use fluxo::store::{GroupCommit, InMemoryStore, Store};
use fluxo::workflow::dir::WorkflowDir;

/// 2026-01-01T00:00:00Z.
const T0: i64 = 1_767_225_600_000;
const SEC: i64 = 1000;
const MIN: i64 = 60 * SEC;

struct Rig {
    clock: Arc<ManualClock>,
    store: Arc<dyn Store>,
    engine: Engine,
    dir: Arc<WorkflowDir>,
    scheduler: Scheduler,
    parents: Arc<Mutex<Vec<String>>>,
    children: Arc<Mutex<Vec<String>>>,
    sandbox: SandboxHandle,
    http: reqwest::Client,
    _tmp: tempfile::TempDir,
}

impl Rig {
    async fn new() -> Rig {
        let clock = Arc::new(ManualClock::new(T0 + 30 * SEC));
        let sandbox = Sandbox::start_with(
            "127.0.0.1:0".parse().unwrap(),
            SandboxConfig {
                clock: clock.clone() as Arc<dyn Clock>,
                ..SandboxConfig::default()
            },
        )
        .await
        .unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("workflows");
        for id in ["polling-sync", "polling-sync-item"] {
            std::fs::copy(
                root.join(format!("{id}.json")),
                tmp.path().join(format!("{id}.json")),
            )
            .unwrap();
        }
        let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
        let commit = GroupCommit::start(store.clone());
        let engine = Engine::new(store.clone(), clock.clone() as Arc<dyn Clock>)
            .with_group_commit(commit.clone());
        engine.set_env([("CRM_URL".to_string(), sandbox.url())].into());
        let dir = Arc::new(WorkflowDir::load(tmp.path(), engine.registry().clone()).unwrap());
        for e in dir.list() {
            assert!(e.compiled.is_some(), "{}: {:?}", e.id, e.problems);
        }
        let children = Arc::new(Mutex::new(Vec::new()));
        let (d, c) = (dir.clone(), children.clone());
        engine.set_child_hooks(ChildHooks {
            workflow: Box::new(move |id| d.get(id).and_then(|e| e.compiled.clone())),
            dispatch: Box::new(move |id| c.lock().unwrap().push(id)),
        });
        let parents = Arc::new(Mutex::new(Vec::new()));
        let p = parents.clone();
        let scheduler = Scheduler::new(
            engine.clone(),
            commit,
            Arc::new(move |id| p.lock().unwrap().push(id)),
        );
        Rig {
            clock,
            store,
            engine,
            dir,
            scheduler,
            parents,
            children,
            sandbox,
            http: reqwest::Client::new(),
            _tmp: tmp,
        }
    }

    /// A payment in the source list, created now (sandbox clock = engine clock).
    async fn pay(&self, amount: u64) -> String {
        let r: Value = self
            .http
            .post(format!("{}/payments", self.sandbox.url()))
            .json(
                &json!({"amount": amount, "currency": "eur", "status": "succeeded",
                          "customer": "cus_1", "object": "charge"}),
            )
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        r["id"].as_str().unwrap().to_string()
    }

    /// Move the clock and poll the scheduler: the tick must start one `polling-sync` run.
    async fn tick(&mut self, at: i64) -> String {
        self.clock.set(at);
        let fired = self.scheduler.poll(&self.dir.list()).await;
        assert_eq!(fired.len(), 1, "{fired:?}");
        assert_eq!(fired[0].fire, Fire::Started, "{fired:?}");
        self.parents.lock().unwrap().pop().unwrap()
    }

    async fn execute(&self, workflow: &str, run_id: &str) -> RunRecord {
        let wf = self.dir.get(workflow).unwrap().compiled.clone().unwrap();
        let run = self.store.get_run(run_id).await.unwrap().unwrap();
        let done = self.engine.execute(&wf, run).await.unwrap();
        assert_eq!(done.status, RunStatus::Succeeded, "{:?}", done.error);
        done
    }

    /// Run a poll (the scheduled run) to its end: its children stay queued.
    async fn poll_at(&mut self, at: i64) -> Value {
        let id = self.tick(at).await;
        let run = self.execute("polling-sync", &id).await;
        run.steps
            .iter()
            .find(|s| s.step_id == "fan")
            .and_then(|s| s.output.clone())
            .expect("fan output")
    }

    /// Execute every queued child at once.
    async fn drain_children(&self) -> usize {
        let ids: Vec<String> = self.children.lock().unwrap().drain(..).collect();
        let n = ids.len();
        let wf = self
            .dir
            .get("polling-sync-item")
            .unwrap()
            .compiled
            .clone()
            .unwrap();
        let mut tasks = Vec::new();
        for id in ids {
            let run = self.store.get_run(&id).await.unwrap().unwrap();
            let (engine, wf) = (self.engine.clone(), wf.clone());
            tasks.push(tokio::spawn(async move {
                engine.execute(&wf, run).await.unwrap()
            }));
        }
        for t in tasks {
            let done = t.await.unwrap();
            assert_eq!(done.status, RunStatus::Succeeded, "{:?}", done.error);
        }
        n
    }

    /// Execute every queued child, one after another, whatever their outcome.
    async fn drain_children_in_order(&self) -> Vec<RunRecord> {
        let ids: Vec<String> = self.children.lock().unwrap().drain(..).collect();
        let wf = self
            .dir
            .get("polling-sync-item")
            .unwrap()
            .compiled
            .clone()
            .unwrap();
        let mut out = Vec::new();
        for id in ids {
            let run = self.store.get_run(&id).await.unwrap().unwrap();
            out.push(self.engine.execute(&wf, run).await.unwrap());
        }
        out
    }

    fn synced(&self) -> BTreeSet<String> {
        let records = self.sandbox.state().records("payment_records");
        let ids: BTreeSet<String> = records
            .iter()
            .map(|r| r["external_id"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            ids.len(),
            records.len(),
            "one record per payment: {records:?}"
        );
        ids
    }

    async fn cursor(&self) -> Option<Value> {
        self.store
            .read("polling-sync-cursor", "payments", self.clock.now_ms())
            .await
            .unwrap()
            .map(|e| e.value)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_polls_sync_each_payment_once() {
    let mut rig = Rig::new().await;
    let mut seeded = BTreeSet::new();
    for (i, amount) in [100, 200, 300].into_iter().enumerate() {
        rig.clock.set(T0 + (i as i64 + 1) * MIN);
        seeded.insert(rig.pay(amount).await);
    }
    assert!(rig.scheduler.poll(&rig.dir.list()).await.is_empty());

    // Poll 1 at 00:05: no cursor yet, lists everything, starts 3 children (left queued).
    let fan = rig.poll_at(T0 + 5 * MIN).await;
    assert_eq!(fan["started"], 3, "{fan}");
    assert_eq!(rig.cursor().await, Some(json!((T0 + 3 * MIN) / 1000)));

    // A payment between polls; poll 2 at 00:10 while poll 1's children are still queued: its
    // window (cursor − 10 min) overlaps poll 1's, so it lists all 4 and starts only the new one.
    rig.clock.set(T0 + 7 * MIN);
    seeded.insert(rig.pay(400).await);
    let fan = rig.poll_at(T0 + 10 * MIN).await;
    assert_eq!(
        (fan["started"].clone(), fan["duplicates"].clone()),
        (json!(1), json!(3)),
        "{fan}"
    );
    assert_eq!(rig.cursor().await, Some(json!((T0 + 7 * MIN) / 1000)));

    // Poll 3 at 00:15, still before any child ran, after one more payment.
    rig.clock.set(T0 + 12 * MIN);
    seeded.insert(rig.pay(500).await);
    let fan = rig.poll_at(T0 + 15 * MIN).await;
    assert_eq!(
        (fan["started"].clone(), fan["duplicates"].clone()),
        (json!(1), json!(4)),
        "{fan}"
    );

    // Now the children drain, all at once.
    assert_eq!(rig.drain_children().await, 5);

    // Poll 4 at 00:20 finds nothing new; an empty-window poll keeps the cursor.
    let fan = rig.poll_at(T0 + 20 * MIN).await;
    assert_eq!(fan["started"], 0, "{fan}");
    assert_eq!(rig.drain_children().await, 0);
    assert_eq!(rig.cursor().await, Some(json!((T0 + 12 * MIN) / 1000)));
    // Poll 5 much later: the window is the cursor (00:12) minus 10 minutes, not the clock, so
    // the margin re-lists the payments from 00:02 on; all are duplicates, nothing starts.
    let fan = rig.poll_at(T0 + 40 * MIN).await;
    assert_eq!(
        (fan["started"].clone(), fan["duplicates"].clone()),
        (json!(0), json!(4)),
        "{fan}"
    );
    assert_eq!(rig.cursor().await, Some(json!((T0 + 12 * MIN) / 1000)));

    // The sandbox's created records are the distinct payments, each once.
    let records = rig.sandbox.state().records("payment_records");
    let synced: Vec<String> = records
        .iter()
        .map(|r| r["external_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(synced.len(), seeded.len(), "{records:?}");
    assert_eq!(synced.into_iter().collect::<BTreeSet<_>>(), seeded);
    // And the source list is untouched by the sync.
    assert_eq!(rig.sandbox.state().records("payments").len(), 5);
}

/// A child whose create fails releases its Memory claim, but the fan-out's key for the payment
/// stays claimed: later polls list it again and start nothing; a replay of the failed run
/// syncs it, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_item_is_not_restarted_by_later_polls_and_a_replay_syncs_it_once() {
    let mut rig = Rig::new().await;
    rig.clock.set(T0 + MIN);
    let first = rig.pay(100).await;
    rig.clock.set(T0 + 2 * MIN);
    let second = rig.pay(200).await;
    assert!(rig.scheduler.poll(&rig.dir.list()).await.is_empty());

    let fan = rig.poll_at(T0 + 5 * MIN).await;
    assert_eq!(fan["started"], 2, "{fan}");
    // Every attempt of the first child's create (1 + 2 retries) answers 500 before writing.
    rig.sandbox
        .state()
        .add_fault(FaultRuleSpec {
            route: "POST /payment_records".into(),
            fault: "error_500_before_write".parse().unwrap(),
            times: Some(3),
        })
        .unwrap();
    let runs = rig.drain_children_in_order().await;
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0].input["id"], json!(first));
    assert_eq!(runs[0].status, RunStatus::Failed, "{:?}", runs[0].error);
    assert_eq!(runs[1].status, RunStatus::Succeeded, "{:?}", runs[1].error);
    assert_eq!(rig.synced(), BTreeSet::from([second.clone()]));
    // Compensation released the item's Memory claim.
    let now = rig.clock.now_ms();
    assert!(rig
        .store
        .read("synced-items", &first, now)
        .await
        .unwrap()
        .is_none());

    // The next poll lists both again and starts nothing.
    let fan = rig.poll_at(T0 + 10 * MIN).await;
    assert_eq!(
        (fan["started"].clone(), fan["duplicates"].clone()),
        (json!(0), json!(2)),
        "{fan}"
    );
    assert!(rig.children.lock().unwrap().is_empty());

    // A replay of the failed run syncs the payment; polls after it still start nothing.
    let wf = rig
        .dir
        .get("polling-sync-item")
        .unwrap()
        .compiled
        .clone()
        .unwrap();
    let replayed = rig.engine.replay(&runs[0], &wf, Mode::Live).await.unwrap();
    assert_eq!(
        replayed.status,
        RunStatus::Succeeded,
        "{:?}",
        replayed.error
    );
    let fan = rig.poll_at(T0 + 15 * MIN).await;
    assert_eq!(fan["started"], 0, "{fan}");
    assert_eq!(rig.synced(), BTreeSet::from([first, second]));
}
