//! `schedule_trigger` and the scheduler, on the controlled clock: no test waits for real time
//! to pass (a run "takes 3 s" by holding its HTTP call at a gated mock while the test moves
//! the manual clock).

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use common::server::{GatedMock, Setup};
use fluxo::app::scheduler::{tick_key, Fire, Fired, Scheduler};
use fluxo::clock::{parse_rfc3339, rfc3339, Clock, ManualClock};
use fluxo::run::{RunRecord, RunStatus, Timestamp, Trigger};
use fluxo::runtime::Engine;
use fluxo::store::{GroupCommit, InMemoryStore, RunQuery, Store};
use fluxo::workflow::dir::WorkflowDir;

/// 2026-01-01T00:00:00Z.
const T0: i64 = 1_767_225_600_000;
const SEC: i64 = 1000;
const MIN: i64 = 60 * SEC;

fn ms(s: &str) -> i64 {
    parse_rfc3339(s).unwrap_or_else(|| panic!("bad instant {s}"))
}

/// `schedule_trigger` (with `config`) → `transform`, or → `http_request` POST to `url`.
fn scheduled(id: &str, config: Value, url: Option<&str>) -> Value {
    let second = match url {
        Some(url) => json!({"id": "call", "kind": "http_request",
            "config": {"method": "POST", "url": url,
                       "headers": {"Idempotency-Key": "tick-{{ input.scheduled_at }}"},
                       "body": {"at": "{{ input.scheduled_at }}"},
                       "retries": 0, "timeout_s": 30}}),
        None => json!({"id": "shape", "kind": "transform",
            "config": {"fields": {"at": "{{ input.scheduled_at }}"}}}),
    };
    let to = second["id"].clone();
    json!({
        "id": id, "name": id, "version": 1,
        "steps": [{"id": "tick", "kind": "schedule_trigger", "config": config}, second],
        "edges": [{"from": "tick", "to": to}]
    })
}

/// A workflow folder, a store, an engine on a manual clock, and schedulers that record what
/// they hand to the workers instead of executing it.
struct Rig {
    clock: Arc<ManualClock>,
    store: Arc<dyn Store>,
    engine: Engine,
    commit: GroupCommit,
    dir: WorkflowDir,
    _tmp: tempfile::TempDir,
    dispatched: Arc<Mutex<Vec<String>>>,
}

impl Rig {
    fn new(workflows: &[Value], store: Arc<dyn Store>, start_ms: i64) -> Rig {
        let tmp = tempfile::tempdir().unwrap();
        for wf in workflows {
            std::fs::write(
                tmp.path()
                    .join(format!("{}.json", wf["id"].as_str().unwrap())),
                serde_json::to_string_pretty(wf).unwrap(),
            )
            .unwrap();
        }
        let clock = Arc::new(ManualClock::new(start_ms));
        let commit = GroupCommit::start(store.clone());
        let engine = Engine::new(store.clone(), clock.clone() as Arc<dyn Clock>)
            .with_group_commit(commit.clone());
        let dir = WorkflowDir::load(tmp.path(), engine.registry().clone()).unwrap();
        for e in dir.list() {
            assert!(e.compiled.is_some(), "{}: {:?}", e.id, e.problems);
        }
        Rig {
            clock,
            store,
            engine,
            commit,
            dir,
            _tmp: tmp,
            dispatched: Arc::new(Mutex::new(Vec::new())),
        }
    }

    fn memory(workflows: &[Value], start_ms: i64) -> Rig {
        Rig::new(workflows, Arc::new(InMemoryStore::new()), start_ms)
    }

    fn scheduler(&self) -> Scheduler {
        let d = self.dispatched.clone();
        Scheduler::new(
            self.engine.clone(),
            self.commit.clone(),
            Arc::new(move |id| d.lock().unwrap().push(id)),
        )
    }

    async fn poll(&self, s: &mut Scheduler) -> Vec<Fired> {
        s.poll(&self.dir.list()).await
    }

    fn set(&self, at: i64) {
        self.clock.set(at);
    }

    /// Mark every dispatched run succeeded (as a worker would have), now.
    async fn finish_dispatched(&self) {
        let dispatched: Vec<String> = self.dispatched.lock().unwrap().drain(..).collect();
        for id in dispatched {
            let mut r = self.store.get_run(&id).await.unwrap().unwrap();
            r.status = RunStatus::Succeeded;
            r.finished_at = Some(Timestamp(self.clock.now_ms()));
            self.store.put_run(&r).await.unwrap();
        }
    }

    async fn runs(&self, wf: &str) -> Vec<RunRecord> {
        let page = self
            .store
            .list_runs(&RunQuery {
                workflow: Some(wf.into()),
                limit: 500,
                ..Default::default()
            })
            .await
            .unwrap();
        let mut runs: Vec<RunRecord> = Vec::new();
        for s in &page.runs {
            runs.push(self.store.get_run(&s.id).await.unwrap().unwrap());
        }
        runs.reverse();
        runs
    }
}

fn started(fired: &[Fired]) -> Vec<i64> {
    fired
        .iter()
        .filter(|f| f.fire == Fire::Started)
        .map(|f| f.scheduled_at)
        .collect()
}

#[tokio::test]
async fn every_five_minutes_fires_once_at_each_boundary() {
    let wf = scheduled("five", json!({"cron": "*/5 * * * *"}), None);
    let rig = Rig::memory(&[wf], T0 + 30 * SEC);
    let mut s = rig.scheduler();
    assert!(rig.poll(&mut s).await.is_empty(), "nothing is due at start");
    assert_eq!(s.next_tick(), Some(T0 + 5 * MIN));
    let mut fires = Vec::new();
    // Every 20 s of virtual time for 31 minutes, two polls per instant.
    for i in 1..=93 {
        rig.set(T0 + 30 * SEC + i * 20 * SEC);
        fires.extend(started(&rig.poll(&mut s).await));
        fires.extend(started(&rig.poll(&mut s).await));
        rig.finish_dispatched().await;
    }
    let want: Vec<i64> = (1..=6).map(|k| T0 + k * 5 * MIN).collect();
    assert_eq!(fires, want);
    let runs = rig.runs("five").await;
    assert_eq!(runs.len(), 6);
    for (r, at) in runs.iter().zip(&want) {
        assert_eq!(r.trigger, Trigger::Schedule);
        assert_eq!(
            r.idempotency_key.as_deref(),
            Some(tick_key("five", *at).as_str())
        );
        assert_eq!(r.input["scheduled_at"], rfc3339(*at));
    }
    // The previous success is the previous tick (each run was finished before the next).
    assert_eq!(runs[0].input.get("previous_success_at"), None);
    assert_eq!(runs[2].input["previous_success_at"], rfc3339(want[1]));
}

/// Ticks every 2 s; each run takes 3 s (its call is held at a gated mock): under `skip` no two
/// runs overlap and every tick in between is a `skipped` run in history.
#[tokio::test]
async fn skip_never_overlaps_and_records_skipped_ticks() {
    let mock = GatedMock::start().await;
    let wf = scheduled("every2", json!({"cron": "*/2 * * * * *"}), Some(&mock.url));
    let rig = Rig::memory(std::slice::from_ref(&wf), T0);
    let compiled = rig.dir.get("every2").unwrap().compiled.clone().unwrap();
    let mut s = rig.scheduler();
    rig.poll(&mut s).await;
    let mut in_flight: Option<(i64, tokio::task::JoinHandle<RunRecord>)> = None;
    let mut skipped = 0;
    for sec in 1..=20 {
        rig.set(T0 + sec * SEC);
        if let Some((start, _)) = &in_flight {
            if rig.clock.now_ms() >= start + 3 * SEC {
                let (_, task) = in_flight.take().unwrap();
                mock.release(1);
                let done = task.await.unwrap();
                assert_eq!(done.status, RunStatus::Succeeded, "{:?}", done.error);
            }
        }
        for f in rig.poll(&mut s).await {
            match f.fire {
                Fire::Started => {
                    assert!(
                        in_flight.is_none(),
                        "a tick started while a run was running"
                    );
                    let id = rig.dispatched.lock().unwrap().pop().unwrap();
                    let run = rig.store.get_run(&id).await.unwrap().unwrap();
                    let (engine, wf) = (rig.engine.clone(), compiled.clone());
                    let task = tokio::spawn(async move { engine.execute(&wf, run).await.unwrap() });
                    mock.wait_arrival().await;
                    in_flight = Some((rig.clock.now_ms(), task));
                }
                Fire::Skipped => skipped += 1,
                other => panic!("unexpected {other:?}"),
            }
        }
    }
    if let Some((_, task)) = in_flight.take() {
        mock.release(1);
        task.await.unwrap();
    }
    let runs = rig.runs("every2").await;
    let ran: Vec<&RunRecord> = runs
        .iter()
        .filter(|r| r.status == RunStatus::Succeeded)
        .collect();
    let skips: Vec<&RunRecord> = runs
        .iter()
        .filter(|r| r.status == RunStatus::Skipped)
        .collect();
    // Started at +2, +6, +10, +14, +18 (each ends 3 s later); skipped at +4, +8, +12, +16, +20.
    let at = |r: &RunRecord| parse_rfc3339(r.input["scheduled_at"].as_str().unwrap()).unwrap();
    assert_eq!(
        ran.iter().map(|r| at(r)).collect::<Vec<_>>(),
        [2, 6, 10, 14, 18].map(|k| T0 + k * SEC)
    );
    assert_eq!(
        skips.iter().map(|r| at(r)).collect::<Vec<_>>(),
        [4, 8, 12, 16, 20].map(|k| T0 + k * SEC)
    );
    assert_eq!(skipped, 5);
    assert_eq!(mock.hits(), 5);
    for w in ran.windows(2) {
        assert!(
            w[0].finished_at.unwrap() <= w[1].started_at.unwrap(),
            "runs overlap"
        );
    }
    for r in &skips {
        assert_eq!(r.trigger, Trigger::Schedule);
        assert!(r.steps.is_empty(), "a skipped tick executes nothing");
        assert!(r.warnings[0].contains("overlap: skip"), "{:?}", r.warnings);
    }
    // A skipped tick is history: the listing filters find it.
    let page = rig
        .store
        .list_runs(&RunQuery {
            workflow: Some("every2".into()),
            status: Some(RunStatus::Skipped),
            trigger: Some(Trigger::Schedule),
            limit: 50,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.runs.len(), 5);
}

/// `queue`: the tick's run waits for the earlier one and is handed over once it ended.
#[tokio::test]
async fn queue_holds_the_tick_until_the_earlier_run_ends() {
    let wf = scheduled(
        "queued",
        json!({"cron": "* * * * *", "overlap": "queue"}),
        None,
    );
    let rig = Rig::memory(&[wf], T0);
    let mut s = rig.scheduler();
    rig.poll(&mut s).await;
    rig.set(T0 + MIN);
    assert_eq!(started(&rig.poll(&mut s).await), [T0 + MIN]);
    rig.set(T0 + 2 * MIN);
    let f = rig.poll(&mut s).await;
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].fire, Fire::Held);
    assert_eq!(
        rig.dispatched.lock().unwrap().len(),
        1,
        "held, not dispatched"
    );
    rig.finish_dispatched().await;
    rig.set(T0 + 2 * MIN + SEC);
    assert!(rig.poll(&mut s).await.is_empty());
    assert_eq!(*rig.dispatched.lock().unwrap(), [f[0].run_id.clone()]);
}

#[tokio::test]
async fn catch_up_last_after_a_twenty_minute_stop_starts_one_run() {
    // `all` is paired with `overlap: queue` (one run per missed tick, one at a time): under
    // `skip` the first catch-up run, still queued, would make the others skipped ticks.
    for (catch_up, overlap, want_runs) in [
        ("last", "skip", 1),
        ("none", "skip", 0),
        ("all", "queue", 4),
    ] {
        let wf = scheduled(
            "poll",
            json!({"cron": "*/5 * * * *", "catch_up": catch_up, "overlap": overlap}),
            None,
        );
        let rig = Rig::memory(&[wf], T0 + 30 * SEC);
        let mut first = rig.scheduler();
        rig.poll(&mut first).await;
        rig.set(T0 + 5 * MIN);
        assert_eq!(started(&rig.poll(&mut first).await), [T0 + 5 * MIN]);
        rig.finish_dispatched().await;
        drop(first); // the server stops for 20 minutes
        rig.set(T0 + 25 * MIN + 30 * SEC);
        let mut second = rig.scheduler();
        let fired: Vec<i64> = rig
            .poll(&mut second)
            .await
            .iter()
            .filter(|f| matches!(f.fire, Fire::Started | Fire::Held))
            .map(|f| f.scheduled_at)
            .collect();
        assert_eq!(fired.len(), want_runs, "catch_up {catch_up}: {fired:?}");
        let runs = rig.runs("poll").await;
        assert_eq!(runs.len(), 1 + want_runs);
        match catch_up {
            "last" => {
                assert_eq!(fired, [T0 + 25 * MIN]);
                let input = &runs[1].input;
                assert_eq!(input["missed"], 3, "{input}");
                assert_eq!(input["previous_success_at"], rfc3339(T0 + 5 * MIN));
            }
            "all" => assert_eq!(fired, [10, 15, 20, 25].map(|m| T0 + m * MIN)),
            _ => {}
        }
        // Then the schedule goes on as usual (held catch-up runs are handed over one by one).
        for _ in 0..4 {
            rig.finish_dispatched().await;
            rig.poll(&mut second).await;
        }
        rig.finish_dispatched().await;
        rig.set(T0 + 30 * MIN);
        assert_eq!(started(&rig.poll(&mut second).await), [T0 + 30 * MIN]);
    }
}

/// Daily 02:30 in Europe/Berlin, polled every 5 minutes across both 2026 DST changes: one run
/// per local day; on 29 March (02:00 → 03:00) 02:30 does not exist and fires at 03:00 CEST;
/// on 25 October (03:00 → 02:00) 02:30 exists twice and fires at the first, 02:30 CEST.
#[tokio::test]
async fn daily_0230_berlin_fires_once_a_day_across_dst() {
    let wf = scheduled(
        "nightly",
        json!({"cron": "30 2 * * *", "timezone": "Europe/Berlin", "overlap": "allow"}),
        None,
    );
    for (from, to, want) in [
        (
            "2026-03-27T00:00:00Z",
            "2026-03-31T00:00:00Z",
            [
                "2026-03-27T01:30:00Z", // 02:30 CET
                "2026-03-28T01:30:00Z",
                "2026-03-29T01:00:00Z", // 02:30 does not exist: 03:00 CEST
                "2026-03-30T00:30:00Z", // 02:30 CEST
            ],
        ),
        (
            "2026-10-23T00:00:00Z",
            "2026-10-27T00:00:00Z",
            [
                "2026-10-23T00:30:00Z", // 02:30 CEST
                "2026-10-24T00:30:00Z",
                "2026-10-25T00:30:00Z", // 02:30 twice: the first (CEST) only
                "2026-10-26T01:30:00Z", // 02:30 CET
            ],
        ),
    ] {
        let rig = Rig::memory(std::slice::from_ref(&wf), ms(from));
        let mut s = rig.scheduler();
        let mut fired = Vec::new();
        let mut t = ms(from);
        while t < ms(to) {
            rig.set(t);
            fired.extend(started(&rig.poll(&mut s).await));
            t += 5 * MIN;
        }
        let fired: Vec<String> = fired.iter().map(|&m| rfc3339(m)).collect();
        let want: Vec<String> = want.iter().map(|w| rfc3339(ms(w))).collect();
        assert_eq!(fired, want);
    }
}

/// Two schedulers (each with its own group commit) on one sled store: each tick starts one run.
#[tokio::test]
async fn two_schedulers_on_one_sled_store_fire_a_tick_once() {
    let data = tempfile::tempdir().unwrap();
    let sled: Arc<dyn Store> = Arc::new(common::server::open_sled(data.path()));
    let wf = scheduled(
        "shared",
        json!({"cron": "*/5 * * * *", "overlap": "allow"}),
        None,
    );
    let a = Rig::new(std::slice::from_ref(&wf), sled.clone(), T0 + SEC);
    let b = Rig::new(&[wf], sled.clone(), T0 + SEC);
    let (mut sa, mut sb) = (a.scheduler(), b.scheduler());
    a.poll(&mut sa).await;
    b.poll(&mut sb).await;
    for k in 1..=6 {
        a.set(T0 + k * 5 * MIN);
        b.set(T0 + k * 5 * MIN + 7);
        let (fa, fb) = tokio::join!(a.poll(&mut sa), b.poll(&mut sb));
        let all: Vec<&Fired> = fa.iter().chain(&fb).collect();
        assert_eq!(all.len(), 2, "{all:?}");
        assert_eq!(all.iter().filter(|f| f.fire == Fire::Started).count(), 1);
        assert_eq!(all.iter().filter(|f| f.fire == Fire::Duplicate).count(), 1);
        assert_eq!(all[0].run_id, all[1].run_id, "the duplicate names the run");
    }
    let runs = a.runs("shared").await;
    assert_eq!(runs.len(), 6);
    let mut keys: Vec<_> = runs
        .iter()
        .filter_map(|r| r.idempotency_key.clone())
        .collect();
    keys.dedup();
    assert_eq!(keys.len(), 6);
    assert_eq!(
        a.dispatched.lock().unwrap().len() + b.dispatched.lock().unwrap().len(),
        6
    );
}

/// A changed schedule (the workflow saved again) is rescheduled from then on.
#[tokio::test]
async fn saving_the_workflow_reschedules() {
    let wf = scheduled("resched", json!({"cron": "0 * * * *"}), None);
    let rig = Rig::memory(std::slice::from_ref(&wf), T0 + SEC);
    let mut s = rig.scheduler();
    rig.poll(&mut s).await;
    assert_eq!(s.next_tick(), Some(T0 + 60 * MIN));
    let mut edited = wf;
    edited["steps"][0]["config"]["cron"] = json!("*/10 * * * *");
    edited["version"] = json!(2);
    rig.dir.save("resched", edited).unwrap();
    rig.poll(&mut s).await;
    assert_eq!(s.next_tick(), Some(T0 + 10 * MIN));
    rig.set(T0 + 10 * MIN);
    assert_eq!(started(&rig.poll(&mut s).await), [T0 + 10 * MIN]);
    // Deleted: nothing is scheduled.
    rig.dir.delete("resched").unwrap();
    rig.poll(&mut s).await;
    assert_eq!(s.next_tick(), None);
}

#[test]
fn bad_config_is_named_at_its_field() {
    let check = |config: Value| {
        let wf = scheduled("bad", config, None);
        let text = serde_json::to_string(&wf).unwrap();
        match fluxo::workflow::load_text(&text, &fluxo::steps::Registry::builtin()) {
            Ok(_) => panic!("accepted"),
            Err(p) => p
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join("\n"),
        }
    };
    let e = check(json!({"cron": "*/5 * * *"}));
    assert!(e.contains("cron") && e.contains("4 fields"), "{e}");
    let e = check(json!({"cron": "99 * * * *"}));
    assert!(
        e.contains("cron") && e.contains("not a valid cron expression"),
        "{e}"
    );
    let e = check(json!({"cron": "* * * * *", "timezone": "Europe/Bärlin"}));
    assert!(e.contains("timezone") && e.contains("IANA"), "{e}");
    let e = check(json!({"cron": "* * * * *", "overlap": "sometimes"}));
    assert!(e.contains("overlap"), "{e}");
    let e = check(json!({"cron": "* * * * *", "catch_up": "most"}));
    assert!(e.contains("catch_up"), "{e}");
    // Two triggers are refused as for any trigger kind.
    let mut two = scheduled("two", json!({"cron": "* * * * *"}), None);
    two["steps"][1] = json!({"id": "m", "kind": "manual_trigger", "config": {}});
    let text = serde_json::to_string(&two).unwrap();
    assert!(fluxo::workflow::load_text(&text, &fluxo::steps::Registry::builtin()).is_err());
}

/// `fluxo serve` runs the scheduler: moving the server's clock past a tick starts a run with
/// trigger `schedule`; its webhook answers a clear 404.
#[tokio::test]
async fn serve_fires_ticks_and_refuses_webhooks() {
    let server = Setup::new()
        .workflow(scheduled("served", json!({"cron": "*/5 * * * *"}), None))
        .start()
        .await;
    let a = server.hook("served", Some("k1"), b"{}").await;
    let doc = a.problem(404, "no_webhook_trigger");
    assert!(doc["detail"].as_str().unwrap().contains("schedule_trigger"));
    // Let the scheduler take its first look (it polls at least once a real second).
    tokio::time::sleep(Duration::from_millis(1200)).await;
    server.advance(Duration::from_secs(5 * 60));
    let mut found = Vec::new();
    for _ in 0..300 {
        found = server.runs_of("served").await;
        if !found.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(found.len(), 1, "one tick, one run");
    let run = server.wait_final(&found[0]).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    assert_eq!(run.trigger, Trigger::Schedule);
    assert_eq!(run.input["scheduled_at"], rfc3339(T0 + 5 * MIN));
    server.stop().await;
}
