//! `fluxo check` (the replay test of a workflow against a private sandbox) and the
//! `find_or_create` step kind.
//!
//! * Every template in `workflows/` passes `fluxo check` with a real payload, through the
//!   library (the serializable report) and through the binary (the table, exit 0); the
//!   scheduled fan-out `polling-sync` with its item workflow and overlapping polls.
//! * Fan-outs that would sync an item twice (a key that changes per run), a missing or
//!   unusable target, and a fan-out whose items come with the event.
//! * Deliberately unsafe variants of `invoice-paid-once` fail with rows that say what went
//!   wrong (exit 1); unusable input exits 2.
//! * `find_or_create` against the real sandbox: created then found, the key derived from the
//!   business id surviving a lost answer, a 409 race, dry runs, ports and validation.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::{json, Value};

use fluxo::check::{check, CheckError, CheckOptions, CheckReport, Verdict};
use fluxo::clock::{Clock, ManualClock};
use fluxo::run::{Mode, RunRecord, RunStatus, Trigger};
use fluxo::runtime::{Engine, RunRequest};
use fluxo::sandbox::{FaultRuleSpec, Sandbox};
use fluxo::steps::Registry;
use fluxo::store::{SledConfig, SledStore, Store};
use fluxo::workflow::{self, Compiled, Severity};

const BIN: &str = env!("CARGO_BIN_EXE_fluxo");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read_json(rel: &str) -> Value {
    let path = root().join(rel);
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn payload(rel: &str) -> Value {
    read_json(&format!("tests/fixtures/payloads/{rel}"))
}

/// One charge as a poller lists it (the object of Stripe's `charge.succeeded` fixture).
fn polled_charge() -> Value {
    payload("stripe/charge.succeeded.json")["data"]["object"].clone()
}

/// Every template with the event and id paths it is checked with.
fn customer_with_email() -> Value {
    let mut e = payload("stripe/customer.created.json");
    e["data"]["object"]["email"] = json!("jenny.rosen@example.com");
    e["data"]["object"]["name"] = json!("Jenny Rosen");
    e
}

fn template_cases() -> Vec<(&'static str, Value, Vec<String>)> {
    vec![
        (
            "invoice-paid-once",
            payload("stripe/invoice.paid.json"),
            vec![],
        ),
        (
            "ai-enrichment-relay",
            payload("stripe/invoice.paid.json"),
            vec![],
        ),
        (
            "stripe-to-ledger",
            payload("stripe/invoice.paid.json"),
            vec![],
        ),
        (
            "github-issue-to-ticket",
            // Its id paths (`issue.id`, `issue.number`) come from its own keys.
            payload("github/issues.opened.payload.json"),
            vec![],
        ),
        ("polling-sync-item", polled_charge(), vec![]),
        (
            "invoice-paid-to-hubspot",
            payload("stripe/invoice.paid.json"),
            vec![],
        ),
        // Stripe's fixture customer has no email; the event a customer with one sends. The
        // upsert matches on the email, so a new customer is one with a new email.
        (
            "stripe-customer-to-hubspot",
            customer_with_email(),
            vec![
                "id".into(),
                "data.object.id".into(),
                "data.object.email".into(),
            ],
        ),
        // The poll's event is one item of the source it lists (the check seeds 3 copies).
        ("polling-sync", polled_charge(), vec![]),
    ]
}

fn table(r: &CheckReport) -> String {
    r.checks
        .iter()
        .map(|c| {
            format!(
                "{:?} | {} | expected: {} | seen: {} | why: {} | fix: {}",
                c.verdict,
                c.check,
                c.expected,
                c.seen,
                c.why.as_deref().unwrap_or(""),
                c.fix.as_deref().unwrap_or("")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn row<'r>(r: &'r CheckReport, starts: &str) -> &'r fluxo::check::CheckRow {
    r.checks
        .iter()
        .find(|c| c.check.starts_with(starts))
        .unwrap_or_else(|| panic!("no row `{starts}…` in\n{}", table(r)))
}

/// The definitions of `definition`'s fan-out targets, from `workflows/`.
fn targets_of(definition: &Value) -> BTreeMap<String, Value> {
    fluxo::check::fan_out_targets(definition)
        .into_iter()
        .map(|id| {
            let v = read_json(&format!("workflows/{id}.json"));
            (id, v)
        })
        .collect()
}

async fn check_file(rel: &str, event: &Value, id_paths: &[String]) -> CheckReport {
    let definition = read_json(rel);
    check(
        &definition,
        event,
        &CheckOptions {
            id_paths: id_paths.to_vec(),
            targets: targets_of(&definition),
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{rel}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_template_passes_the_check() {
    // Every file in workflows/ has a case here: a new template must come with its check.
    let mut files: Vec<String> = std::fs::read_dir(root().join("workflows"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".json").map(String::from)
        })
        .collect();
    files.sort();
    let mut cases: Vec<String> = template_cases().iter().map(|c| c.0.to_string()).collect();
    cases.sort();
    assert_eq!(files, cases, "every template in workflows/ is checked");

    for (id, event, paths) in template_cases() {
        let r = check_file(&format!("workflows/{id}.json"), &event, &paths).await;
        assert!(r.passed, "{id} must pass:\n{}", table(&r));
        assert_eq!(r.workflow_id, id);
        assert!(r.checks.iter().all(|c| c.verdict == Verdict::Pass));
        // A fan-out's single-workflow rows are its item run's.
        let prefix = match fluxo::check::fan_out_targets(&read_json(&format!(
            "workflows/{id}.json"
        )))
        .first()
        {
            Some(target) => {
                for name in [
                    "first poll (3 items in `payments`)",
                    "poll again, nothing new",
                    "a new item, then two overlapping polls",
                ] {
                    row(&r, name);
                }
                format!("item run (`{target}`): ")
            }
            None => String::new(),
        };
        for name in [
            "first delivery",
            "same event twice",
            "new event (",
            "timeout after write on POST /",
            "engine killed during POST /",
            "forced failure on POST /",
            "replay of the run failed on POST /",
        ] {
            row(&r, &format!("{prefix}{name}"));
        }
        assert!(
            !r.env.is_empty() || !r.connections.is_empty(),
            "{id}: destinations pointed at the sandbox"
        );
        assert!(r.warnings.is_empty(), "{id}: lint clean: {:?}", r.warnings);
        // The report is what the editor's Check button shows: it round-trips as JSON.
        let v = serde_json::to_value(&r).unwrap();
        let back: CheckReport = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(back, r);
        assert_eq!(v["checks"][0]["verdict"], "pass");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stripe_to_ledger_finds_the_customer_for_a_new_invoice() {
    let r = check_file(
        "workflows/stripe-to-ledger.json",
        &payload("stripe/invoice.paid.json"),
        &[],
    )
    .await;
    assert_eq!(r.env, vec!["CRM_URL", "LEDGER_URL"]);
    assert_eq!(r.id_paths, vec!["id", "data.object.id"]);
    assert_eq!(
        row(&r, "first delivery").seen,
        "succeeded; 1 contact, 1 invoice"
    );
    // A new invoice of the same customer: one more invoice, the contact found, not doubled.
    assert_eq!(row(&r, "new event").seen, "succeeded; +1 invoice");
    // Both write routes were put through a lost answer and a forced failure.
    row(&r, "timeout after write on POST /contacts");
    row(&r, "timeout after write on POST /invoices");
    row(&r, "replay of the run failed on POST /contacts");
    row(&r, "replay of the run failed on POST /invoices");
}

// ---------------------------------------------------------------------------------------------
// The binary

fn fluxo(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(root())
        .env_remove("FLUXO_DATA_DIR")
        .output()
        .expect("fluxo runs")
}

fn out(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn cli_prints_an_all_pass_table_for_every_template() {
    let dir = tempfile::tempdir().unwrap();
    for (id, event, paths) in template_cases() {
        let event_file = dir.path().join(format!("{id}.event.json"));
        std::fs::write(&event_file, event.to_string()).unwrap();
        let wf = format!("workflows/{id}.json");
        let ev = format!("@{}", event_file.display());
        let mut args = vec!["check", wf.as_str(), "--event", ev.as_str()];
        let joined = paths.join(",");
        if !paths.is_empty() {
            args.extend(["--id-path", joined.as_str()]);
        }
        let o = fluxo(&args);
        let (stdout, stderr) = out(&o);
        println!("$ fluxo {}\n{stdout}", args.join(" "));
        assert_eq!(o.status.code(), Some(0), "{id}:\n{stdout}\n{stderr}");
        assert!(stdout.contains("│ check"), "a table: {stdout}");
        assert!(stdout.contains("PASS"), "{stdout}");
        assert!(!stdout.contains("FAIL"), "{stdout}");
        assert!(stdout.contains("checks passed: safe to re-run"), "{stdout}");
    }
}

#[test]
fn cli_json_report_and_bad_input() {
    let o = fluxo(&[
        "check",
        "workflows/invoice-paid-once.json",
        "--event",
        "@tests/fixtures/payloads/stripe/invoice.paid.json",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{:?}", out(&o));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["passed"], true);
    assert_eq!(r["workflow_id"], "invoice-paid-once");
    let checks = r["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 7);
    let killed = checks
        .iter()
        .find(|c| c["check"] == "engine killed during POST /deals (after the write), restart")
        .expect("the crash row");
    assert_eq!(killed["verdict"], "pass", "{killed}");
    assert!(
        killed["seen"]
            .as_str()
            .unwrap()
            .starts_with("resumed: succeeded"),
        "{killed}"
    );

    // An id path the event does not have (without one, the workflow's keys name theirs).
    let o = fluxo(&[
        "check",
        "workflows/github-issue-to-ticket.json",
        "--event",
        "@tests/fixtures/payloads/github/issues.opened.payload.json",
        "--id-path",
        "id",
    ]);
    let (_, err) = out(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("id path `id`: the event has no value there"),
        "{err}"
    );

    // An event that is not JSON.
    let o = fluxo(&[
        "check",
        "workflows/invoice-paid-once.json",
        "--event",
        "{nope",
    ]);
    let (_, err) = out(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--event"), "{err}");

    // A fixed destination the check cannot point at its sandbox; an invalid workflow.
    let dir = tempfile::tempdir().unwrap();
    let mut fixed = read_json("workflows/invoice-paid-once.json");
    fixed["steps"][4]["config"]["url"] = json!("https://crm.example.com/deals");
    let fixed_path = dir.path().join("fixed.json");
    std::fs::write(&fixed_path, fixed.to_string()).unwrap();
    let mut invalid = read_json("workflows/invoice-paid-once.json");
    invalid["steps"][4]["kind"] = json!("teleport");
    let invalid_path = dir.path().join("invalid.json");
    std::fs::write(&invalid_path, invalid.to_string()).unwrap();
    for (path, needle) in [
        (&fixed_path, "fixed address `https://crm.example.com/deals`"),
        (&invalid_path, "teleport"),
    ] {
        let o = fluxo(&[
            "check",
            path.to_str().unwrap(),
            "--event",
            "@tests/fixtures/payloads/stripe/invoice.paid.json",
        ]);
        let (_, err) = out(&o);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains(needle), "{err}");
    }
}

// ---------------------------------------------------------------------------------------------
// Fan-out workflows: the poll and its item runs

/// `polling-sync` with the fan-out's key made `item.id` plus the run id: every poll claims
/// new keys, so a poll re-starts items an earlier one started.
fn unstable_poll() -> Value {
    let mut wf = read_json("workflows/polling-sync.json");
    let fan = wf["steps"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|s| s["id"] == "fan")
        .unwrap();
    fan["config"]["key"] = json!("{{ item.id }}-{{ run.id }}");
    wf
}

async fn check_with_targets(wf: &Value, event: &Value) -> Result<CheckReport, CheckError> {
    let options = CheckOptions {
        targets: targets_of(wf),
        ..CheckOptions::default()
    };
    check(wf, event, &options).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poll_whose_fan_out_key_changes_per_run_fails_the_overlap_rows() {
    let r = check_with_targets(&unstable_poll(), &polled_charge())
        .await
        .unwrap();
    println!("{}", table(&r));
    assert!(!r.passed);
    assert_eq!(
        row(&r, "first poll").verdict,
        Verdict::Pass,
        "{}",
        table(&r)
    );
    let again = row(&r, "poll again, nothing new");
    assert_eq!(again.verdict, Verdict::Fail);
    assert!(
        again.seen.contains("3 started, 0 duplicates"),
        "{}",
        again.seen
    );
    let overlap = row(&r, "a new item, then two overlapping polls");
    assert_eq!(overlap.verdict, Verdict::Fail);
    // Both polls started the new item (and the old ones again).
    assert!(overlap.seen.contains("4 started"), "{}", overlap.seen);
    // Each failed row says why and names the fan-out's key as what to change.
    assert_eq!(
        again.why.as_deref(),
        Some(
            "a poll with nothing new started the items the first poll had started: their keys \
             changed between polls"
        )
    );
    for failed in [again, overlap] {
        let fix = failed.fix.as_deref().unwrap_or_default();
        assert!(fix.contains("fan-out's `key`"), "{fix}");
    }
    assert!(
        overlap
            .why
            .as_deref()
            .is_some_and(|w| w.contains("started 8 item runs where the one new item needs 1")),
        "{:?}",
        overlap.why
    );
    // The item workflow's own claim still kept the records to one per payment; the item rows
    // pass: the failure is the poll's.
    assert!(r
        .checks
        .iter()
        .filter(|c| c.check.starts_with("item run"))
        .all(|c| c.verdict == Verdict::Pass));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stripe_event_stands_for_its_object_as_the_polled_item() {
    let r = check_with_targets(
        &read_json("workflows/polling-sync.json"),
        &payload("stripe/charge.succeeded.json"),
    )
    .await
    .unwrap();
    assert!(r.passed, "{}", table(&r));
    // The item runs created records from the charge's fields.
    assert!(
        row(&r, "first poll").seen.contains("+3 payment_records"),
        "{}",
        table(&r)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fan_out_of_the_events_items_starts_each_once() {
    let wf = json!({
        "id": "batch-sync", "name": "Batch sync", "version": 1,
        "steps": [
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "fan", "kind": "fan_out", "config": {
                "items": "{{ input.payments }}", "key": "{{ item.id }}",
                "workflow": "polling-sync-item"}}
        ],
        "edges": [{"from": "start", "to": "fan"}]
    });
    let charge = polled_charge();
    let mut second = charge.clone();
    second["id"] = json!(format!("{}_2", charge["id"].as_str().unwrap()));
    let event = json!({"payments": [charge, second]});
    let r = check_with_targets(&wf, &event).await.unwrap();
    println!("{}", table(&r));
    assert!(r.passed, "{}", table(&r));
    let first = row(&r, "first delivery");
    assert!(
        first.seen.contains("2 started") && first.seen.contains("2 payment_records"),
        "{}",
        first.seen
    );
    let twice = row(&r, "same event twice, the second while");
    assert!(
        twice
            .seen
            .contains("then succeeded (0 started, 2 duplicates)"),
        "{}",
        twice.seen
    );
    row(
        &r,
        "item run (`polling-sync-item`): engine killed during POST /payment_records",
    );
}

#[tokio::test]
async fn a_missing_or_unusable_fan_out_target_is_bad_input() {
    let poll = read_json("workflows/polling-sync.json");
    // Not given.
    let e = check(&poll, &polled_charge(), &CheckOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(e, CheckError::BadInput(_)), "{e}");
    assert!(
        e.to_string()
            .contains("fans out to `polling-sync-item`, which the check was not given"),
        "{e}"
    );
    // Started by a webhook, not `manual_trigger`.
    let mut hooked = read_json("workflows/polling-sync-item.json");
    hooked["steps"][0] = json!({"id": "item", "kind": "webhook_trigger", "config": {}});
    let options = CheckOptions {
        targets: [("polling-sync-item".to_string(), hooked)].into(),
        ..CheckOptions::default()
    };
    let e = check(&poll, &polled_charge(), &options).await.unwrap_err();
    assert!(
        e.to_string().contains("starts with `webhook_trigger`"),
        "{e}"
    );
    // Invalid.
    let mut broken = read_json("workflows/polling-sync-item.json");
    broken["steps"][4]["kind"] = json!("teleport");
    let options = CheckOptions {
        targets: [("polling-sync-item".to_string(), broken)].into(),
        ..CheckOptions::default()
    };
    let e = check(&poll, &polled_charge(), &options).await.unwrap_err();
    assert!(
        e.to_string().contains("which is not valid") && e.to_string().contains("teleport"),
        "{e}"
    );
    // A scheduled poll's event is a source item: an object.
    for (event, what) in [
        (json!([1, 2]), "a JSON array"),
        (json!({}), "an empty object"),
    ] {
        let e = check_with_targets(&poll, &event).await.unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains(&format!("the event is {what}")), "{msg}");
        assert!(
            msg.contains("one item of the source the poll lists"),
            "{msg}"
        );
    }

    // The CLI reads the target beside the file, and names the file it could not read.
    let dir = tempfile::tempdir().unwrap();
    let alone = dir.path().join("polling-sync.json");
    std::fs::write(&alone, poll.to_string()).unwrap();
    let event = dir.path().join("charge.json");
    std::fs::write(&event, polled_charge().to_string()).unwrap();
    let ev = format!("@{}", event.display());
    let o = fluxo(&["check", alone.to_str().unwrap(), "--event", &ev]);
    let (_, err) = out(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("polling-sync-item.json") && err.contains("beside"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// Unsafe variants of invoice-paid-once

/// `invoice-paid-once` without the Memory claim (the create wired from the trigger) and
/// without the Idempotency-Key header; `keep_external_id`: the destination's unique field
/// stays in the body.
fn unsafe_invoice(keep_external_id: bool) -> Value {
    let mut wf = read_json("workflows/invoice-paid-once.json");
    let steps: Vec<Value> = wf["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| !matches!(s["id"].as_str(), Some("seen" | "route" | "skip")))
        .cloned()
        .map(|mut s| {
            if s["id"] == "create" {
                s["config"].as_object_mut().unwrap().remove("headers");
                if !keep_external_id {
                    s["config"]["body"]
                        .as_object_mut()
                        .unwrap()
                        .remove("external_id");
                }
            }
            s
        })
        .collect();
    wf["steps"] = Value::Array(steps);
    wf["edges"] = json!([
        {"from": "hook", "to": "create"},
        {"from": "create", "port": "error", "to": "fail"},
        {"from": "fail", "to": "undo"}
    ]);
    wf
}

async fn check_value(wf: &Value) -> CheckReport {
    check(
        wf,
        &payload("stripe/invoice.paid.json"),
        &CheckOptions::default(),
    )
    .await
    .expect("the check runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsafe_variant_without_any_guard_duplicates_and_fails() {
    let r = check_value(&unsafe_invoice(false)).await;
    println!("{}", table(&r));
    assert!(!r.passed);
    let twice = row(&r, "same event twice");
    assert_eq!(twice.verdict, Verdict::Fail);
    assert_eq!(twice.expected, "1 deal in all; the redelivery succeeds");
    assert!(twice.seen.starts_with("2 deals;"), "{}", twice.seen);
    let timeout = row(&r, "timeout after write on POST /deals, then redelivery");
    assert_eq!(timeout.verdict, Verdict::Fail);
    assert_eq!(timeout.expected, "1 deal in all; the redelivery succeeds");
    // The retry after the lost answer wrote again, and so did the redelivery.
    assert!(timeout.seen.starts_with("3 deals;"), "{}", timeout.seen);
    // Why, in one sentence, and the fix: the linter's hint for the unguarded write.
    assert_eq!(
        twice.why.as_deref(),
        Some(
            "the redelivery wrote again (+1 deal): nothing in the workflow recognised the event \
             as already handled"
        )
    );
    let fix = twice.fix.as_deref().unwrap();
    assert!(
        fix.starts_with("on `create`: POST retries (2) without an Idempotency-Key header"),
        "{fix}"
    );
    assert!(
        fix.contains("Add an Idempotency-Key header from business data"),
        "{fix}"
    );
    assert!(
        timeout
            .why
            .as_deref()
            .unwrap()
            .starts_with("after the answer of POST /deals was lost, it was written again: 3 deals"),
        "{:?}",
        timeout.why
    );
    assert_eq!(timeout.fix, twice.fix);
    let crash = row(&r, "engine killed during POST /deals");
    assert_eq!(crash.verdict, Verdict::Fail);
    assert!(
        crash.why.as_deref().unwrap().contains("not safe to repeat"),
        "{:?}",
        crash.why
    );
    assert_eq!(crash.fix, twice.fix);
    // Every failed row says why and what to change; a passing one neither.
    for c in &r.checks {
        let failed = c.verdict == Verdict::Fail;
        assert_eq!(c.why.is_some(), failed, "{}", table(&r));
        assert_eq!(c.fix.is_some(), failed, "{}", table(&r));
    }
    // A new event and a failure replayed are not where this variant goes wrong.
    assert_eq!(row(&r, "new event").verdict, Verdict::Pass);
    assert_eq!(row(&r, "replay of the run failed").verdict, Verdict::Pass);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsafe_variant_without_claim_and_key_fails_its_redeliveries() {
    // The unique external_id keeps the record count at one, but every redelivery now fails
    // (a 409 the sender retries for days, paging someone each time).
    let r = check_value(&unsafe_invoice(true)).await;
    println!("{}", table(&r));
    assert!(!r.passed);
    let twice = row(&r, "same event twice");
    assert_eq!(twice.verdict, Verdict::Fail);
    assert_eq!(
        twice.seen,
        "1 deal; redelivery failed at `create`: HTTP 409"
    );
    let timeout = row(&r, "timeout after write on POST /deals");
    assert_eq!(timeout.verdict, Verdict::Fail);
    assert!(
        timeout
            .seen
            .contains("first run failed at `create`: HTTP 409 after 2 attempts"),
        "{}",
        timeout.seen
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_without_compensation_loses_the_event() {
    let mut wf = read_json("workflows/invoice-paid-once.json");
    let steps: Vec<Value> = wf["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| !matches!(s["id"].as_str(), Some("fail" | "undo")))
        .cloned()
        .collect();
    wf["steps"] = Value::Array(steps);
    let edges: Vec<Value> = wf["edges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["from"] != "create" && e["from"] != "fail")
        .cloned()
        .collect();
    wf["edges"] = Value::Array(edges);
    let r = check_value(&wf).await;
    println!("{}", table(&r));
    assert!(!r.passed);
    let failure = row(&r, "forced failure on POST /deals");
    assert_eq!(failure.verdict, Verdict::Fail);
    assert!(
        failure
            .seen
            .contains("claim processed-invoices/evt_1Pgc76B7WZ01zgkWwyRHS12y still held"),
        "{}",
        failure.seen
    );
    assert_eq!(
        failure.why.as_deref(),
        Some(
            "the claim processed-invoices/evt_1Pgc76B7WZ01zgkWwyRHS12y was still held after the \
             run failed, so the sender's retry and a replay are skipped as duplicates"
        )
    );
    assert!(
        failure
            .fix
            .as_deref()
            .unwrap()
            .contains("then a Memory delete of the same namespace and key"),
        "{:?}",
        failure.fix
    );
    let replay = row(&r, "replay of the run failed on POST /deals");
    assert_eq!(replay.verdict, Verdict::Fail);
    assert_eq!(replay.seen, "replay succeeded (skip); no records");
    assert!(
        replay
            .why
            .as_deref()
            .unwrap()
            .contains("it was stopped as a duplicate of the failed run"),
        "{:?}",
        replay.why
    );
    assert_eq!(row(&r, "same event twice").verdict, Verdict::Pass);
}

#[test]
fn cli_fails_the_unsafe_variant_with_a_clear_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("invoice-paid-once.unsafe.json");
    std::fs::write(&path, unsafe_invoice(false).to_string()).unwrap();
    let o = fluxo(&[
        "check",
        path.to_str().unwrap(),
        "--event",
        "@tests/fixtures/payloads/stripe/invoice.paid.json",
    ]);
    let (stdout, stderr) = out(&o);
    println!("{stdout}");
    assert_eq!(o.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(stdout.contains("FAIL"), "{stdout}");
    assert!(stdout.contains("2 deals; redelivery succeeded"), "{stdout}");
    assert!(
        stdout.contains("left interrupted for a person: step create:"),
        "{stdout}"
    );
    assert!(
        stdout.contains("3 of 7 checks failed: invoice-paid-once is not safe to re-run"),
        "{stdout}"
    );
    // Under the table, each failed row: why, and what to change.
    assert!(
        stdout.contains(
            "FAIL same event twice\n  why: the redelivery wrote again (+1 deal): nothing in \
             the workflow recognised the event as already handled\n  fix: on `create`: POST \
             retries (2)"
        ),
        "{stdout}"
    );
    assert_eq!(stdout.matches("\n  why: ").count(), 3, "{stdout}");
    assert_eq!(stdout.matches("\n  fix: ").count(), 3, "{stdout}");
}

// ---------------------------------------------------------------------------------------------
// Expected effects on the failure path

/// Issue 37's flow: `invoice-paid-once` whose failure path (Error Handler in rethrow → delete
/// the claim) then posts a notification with its own key; `declared`: the notification is
/// declared an expected effect on the failure path.
fn notify_on_failure(declared: bool) -> Value {
    let mut wf = read_json("workflows/invoice-paid-once.json");
    let mut config = json!({
        "method": "POST",
        "url": "{{ env.CRM_URL }}/notifications",
        "headers": {"Idempotency-Key": "notify-{{ input.id }}"},
        "body": {"text": "invoice {{ input.data.object.id }} failed: {{ error.message }}"}
    });
    if declared {
        config["expected_on_failure"] = json!(true);
    }
    wf["steps"]
        .as_array_mut()
        .unwrap()
        .push(json!({"id": "notify", "kind": "http_request", "config": config}));
    wf["edges"]
        .as_array_mut()
        .unwrap()
        .push(json!({"from": "undo", "to": "notify"}));
    wf
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failure_notification_declared_expected_passes_and_is_explained() {
    let r = check_value(&notify_on_failure(true)).await;
    println!("{}", table(&r));
    assert!(r.passed, "{}", table(&r));
    let failure = row(&r, "forced failure on POST /deals");
    assert!(
        failure.seen.ends_with(
            "; the failure path wrote 1 notification, expected: `notify` is declared an \
             expected effect on the failure path"
        ),
        "{}",
        failure.seen
    );
    let replay = row(&r, "replay of the run failed on POST /deals");
    assert_eq!(replay.verdict, Verdict::Pass);
    assert_eq!(
        replay.expected,
        "the replay succeeds; 1 deal in all, besides 1 notification the failure path is \
         declared to write"
    );
    assert_eq!(
        replay.seen,
        "replay succeeded; 1 deal, 1 notification (1 notification expected: `notify` is \
         declared an expected effect on the failure path)"
    );
    assert!(r.checks.iter().all(|c| c.why.is_none() && c.fix.is_none()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undeclared_failure_notification_fails_with_why_and_the_declaration_as_fix() {
    let r = check_value(&notify_on_failure(false)).await;
    println!("{}", table(&r));
    assert!(!r.passed);
    assert_eq!(r.failures().count(), 1, "{}", table(&r));
    let failure = row(&r, "forced failure on POST /deals");
    assert_eq!(failure.verdict, Verdict::Pass);
    assert!(
        failure.seen.ends_with(
            "; the failure path wrote 1 notification (`notify` not declared an expected effect)"
        ),
        "{}",
        failure.seen
    );
    let replay = row(&r, "replay of the run failed on POST /deals");
    assert_eq!(replay.verdict, Verdict::Fail);
    assert_eq!(replay.seen, "replay succeeded; 1 deal, 1 notification");
    assert_eq!(
        replay.why.as_deref(),
        Some(
            "`notify` wrote 1 notification on the failure path and is not declared an expected \
             effect, so a failure and its replay leave 1 deal, 1 notification where one \
             delivery leaves 1 deal"
        )
    );
    let fix = replay.fix.as_deref().unwrap();
    assert!(
        fix.starts_with(
            "if `notify` is meant to run when the flow fails (an alert, an audit log), declare \
             it: tick \"Expected effect on the failure path\" in its inspector \
             (`\"expected_on_failure\": true` in its config)"
        ),
        "{fix}"
    );
}

#[test]
fn expected_on_failure_is_a_member_of_every_kind_that_calls_a_destination() {
    let registry = Registry::builtin();
    for kind in ["http_request", "publish_output", "find_or_create", "action"] {
        let schema = registry.get(kind).unwrap().config_schema();
        let member = &schema["properties"]["expected_on_failure"];
        assert_eq!(member["type"], "boolean", "{kind}: {schema}");
        assert_eq!(
            member["title"], "Expected effect on the failure path",
            "{kind}"
        );
    }
    for kind in ["memory", "transform", "router", "error_handler"] {
        let schema = registry.get(kind).unwrap().config_schema();
        assert!(
            schema["properties"].get("expected_on_failure").is_none(),
            "{kind}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// find_or_create

struct Bench {
    engine: Engine,
    _dir: tempfile::TempDir,
}

fn bench(crm_url: &str) -> Bench {
    let dir = tempfile::tempdir().unwrap();
    let mut config = SledConfig::new(dir.path().join("store"));
    config.cache_capacity_bytes = 8 * 1024 * 1024;
    let store = Arc::new(SledStore::open(&config).unwrap());
    let engine = Engine::new(
        store as Arc<dyn Store>,
        Arc::new(ManualClock::at_2026()) as Arc<dyn Clock>,
    );
    engine.set_env([("CRM_URL".to_string(), crm_url.to_string())].into());
    Bench { engine, _dir: dir }
}

impl Bench {
    async fn run(&self, wf: &Compiled, input: Value, mode: Mode) -> RunRecord {
        self.engine
            .run(wf, RunRequest::new(input, Trigger::Manual, mode))
            .await
            .unwrap()
    }
}

/// manual → customer (find_or_create) → `found`: old, `created`: new, `out`: after.
fn customer_flow(extra: Value) -> Compiled {
    let mut config = json!({
        "find_url": "{{ env.CRM_URL }}/contacts",
        "match_field": "external_id",
        "match_value": "{{ input.customer }}",
        "create_body": {"name": "{{ input.name }}"},
        "retries": 2,
        "timeout_s": 5
    });
    for (k, v) in extra.as_object().unwrap() {
        config[k] = v.clone();
    }
    let wf = json!({
        "id": "customer-flow", "name": "customer flow", "version": 1,
        "steps": [
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "customer", "kind": "find_or_create", "config": config},
            {"id": "old", "kind": "transform", "config": {"fields": {"found": "{{ steps.customer.output.record.id }}"}}},
            {"id": "new", "kind": "transform", "config": {"fields": {"created": "{{ steps.customer.output.record.id }}"}}},
            {"id": "after", "kind": "transform", "config": {"fields": {"contact": "{{ steps.customer.output.record.id }}"}}}
        ],
        "edges": [
            {"from": "start", "to": "customer"},
            {"from": "customer", "port": "found", "to": "old"},
            {"from": "customer", "port": "created", "to": "new"},
            {"from": "customer", "to": "after"}
        ]
    });
    let (c, problems) = workflow::check_value(&wf, &Registry::builtin());
    assert!(
        problems.iter().all(|p| p.severity != Severity::Error),
        "{problems:?}"
    );
    c.expect("compiles")
}

fn ran(run: &RunRecord) -> Vec<&str> {
    run.steps.iter().map(|s| s.step_id.as_str()).collect()
}

fn output<'r>(run: &'r RunRecord, step: &str) -> &'r Value {
    run.step(step)
        .and_then(|s| s.output.as_ref())
        .unwrap_or_else(|| {
            panic!(
                "no output of `{step}`: {}",
                serde_json::to_string_pretty(run).unwrap()
            )
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_or_create_creates_once_then_finds() {
    let sandbox = Sandbox::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let b = bench(&sandbox.url());
    let wf = customer_flow(json!({}));
    let input = json!({"customer": "cus_42", "name": "Ada"});

    let first = b.run(&wf, input.clone(), Mode::Live).await;
    assert_eq!(first.status, RunStatus::Succeeded, "{:?}", first.error);
    let out = output(&first, "customer");
    assert_eq!(out["found"], false);
    assert_eq!(out["created"], true);
    assert_eq!(out["record"]["id"], "contact_0001");
    // match_field: match_value was added to the body, so the next find finds it.
    assert_eq!(out["record"]["external_id"], "cus_42");
    assert_eq!(out["record"]["name"], "Ada");
    assert_eq!(ran(&first), vec!["start", "customer", "new", "after"]);
    assert_eq!(output(&first, "after")["contact"], "contact_0001");
    assert_eq!(
        first.step("customer").unwrap().ports,
        vec!["created", "out"]
    );

    let log = sandbox.state().log();
    assert_eq!(log.len(), 2);
    assert_eq!(log[0].method, "GET");
    assert_eq!(log[0].path, "/contacts?external_id=cus_42");
    assert_eq!(log[1].method, "POST");
    assert_eq!(log[1].idempotency_key.as_deref(), Some("customer-cus_42"));

    let second = b.run(&wf, input, Mode::Live).await;
    assert_eq!(second.status, RunStatus::Succeeded);
    let out = output(&second, "customer");
    assert_eq!(out["found"], true);
    assert_eq!(out["created"], false);
    assert_eq!(out["record"]["id"], "contact_0001");
    assert_eq!(ran(&second), vec!["start", "customer", "old", "after"]);
    assert_eq!(sandbox.state().records("contacts").len(), 1);
    assert_eq!(sandbox.state().log().len(), 3, "the second run only finds");
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_or_create_key_survives_a_lost_answer() {
    let sandbox = Sandbox::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let b = bench(&sandbox.url());
    // The record is written, then the connection drops without an answer: the retry sends the
    // same key and gets the stored answer instead of a second contact.
    sandbox
        .state()
        .add_fault(FaultRuleSpec {
            route: "POST /contacts".into(),
            fault: "drop_connection_after_write".parse().unwrap(),
            times: Some(1),
        })
        .unwrap();
    let wf = customer_flow(json!({"idempotency_key": "contact-{{ input.customer }}"}));
    let run = b
        .run(
            &wf,
            json!({"customer": "cus_7", "name": "Grace"}),
            Mode::Live,
        )
        .await;
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    let step = run.step("customer").unwrap();
    assert_eq!(step.attempts.len(), 3, "find, lost create, retried create");
    assert_eq!(output(&run, "customer")["record"]["id"], "contact_0001");
    assert_eq!(sandbox.state().records("contacts").len(), 1);
    let posts: Vec<_> = sandbox
        .state()
        .log()
        .into_iter()
        .filter(|e| e.method == "POST")
        .collect();
    assert_eq!(posts.len(), 2);
    assert!(posts
        .iter()
        .all(|e| e.idempotency_key.as_deref() == Some("contact-cus_7")));
    assert!(posts[1].replayed);
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_or_create_fails_on_its_error_port() {
    let sandbox = Sandbox::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let b = bench(&sandbox.url());
    let wf = customer_flow(json!({}));
    // Every create answers 500: the step fails with the status (3 attempts), on `error`.
    sandbox
        .state()
        .add_fault(FaultRuleSpec {
            route: "POST /contacts".into(),
            fault: "error_500_before_write".parse().unwrap(),
            times: None,
        })
        .unwrap();
    let run = b
        .run(&wf, json!({"customer": "cus_2", "name": "Mo"}), Mode::Live)
        .await;
    assert_eq!(run.status, RunStatus::Failed);
    assert_eq!(ran(&run), vec!["start", "customer"]);
    let err = run.error.as_ref().unwrap();
    assert_eq!(err.step, "customer");
    assert_eq!(err.http_status, Some(500));
    assert_eq!(err.attempts, 4, "one find and three creates");
    sandbox.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_or_create_takes_the_winner_after_a_409() {
    // A destination where another writer wins the race: the find misses, the create answers
    // 409, the second find sees the other writer's record. It also ignores the find's filter.
    use axum::routing::get;
    let finds = Arc::new(AtomicUsize::new(0));
    let f = finds.clone();
    let app = axum::Router::new().route(
        "/contacts",
        get(move || {
            let n = f.fetch_add(1, Ordering::SeqCst);
            async move {
                if n == 0 {
                    // An endpoint that ignores the filter: another customer's contact must
                    // not be taken for ours.
                    axum::Json(json!({"data": [{"id": "contact_1", "external_id": "cus_other"}]}))
                } else {
                    axum::Json(json!({"data": [{"id": "contact_9", "external_id": "cus_9"}]}))
                }
            }
        })
        .post(|| async {
            (
                axum::http::StatusCode::CONFLICT,
                axum::Json(json!({"code": "duplicate_external_id"})),
            )
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let b = bench(&url);
    let run = b
        .run(
            &customer_flow(json!({})),
            json!({"customer": "cus_9", "name": "X"}),
            Mode::Live,
        )
        .await;
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    let out = output(&run, "customer");
    assert_eq!(out["found"], true);
    assert_eq!(out["record"]["id"], "contact_9");
    assert_eq!(ran(&run), vec!["start", "customer", "old", "after"]);
    assert_eq!(finds.load(Ordering::SeqCst), 2);
    server.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_or_create_dry_runs_simulate_both_calls() {
    let sandbox = Sandbox::start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let b = bench(&sandbox.url());
    let input = json!({"customer": "cus_5", "name": "Dry"});
    let run = b
        .run(&customer_flow(json!({})), input.clone(), Mode::Dry)
        .await;
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    let out = output(&run, "customer");
    assert_eq!(out["created"], true);
    assert_eq!(out["record"]["id"], "dry_run");
    assert_eq!(out["record"]["external_id"], "cus_5");
    assert_eq!(run.step("customer").unwrap().attempts.len(), 2);

    let found = customer_flow(
        json!({"dry_run": {"find": {"status": 200, "body": {"data": [{"id": "contact_dry"}]}}}}),
    );
    let run = b.run(&found, input, Mode::Dry).await;
    assert_eq!(output(&run, "customer")["found"], true);
    assert_eq!(output(&run, "after")["contact"], "contact_dry");
    assert!(sandbox.state().log().is_empty(), "no byte left the machine");
    sandbox.shutdown().await;
}

#[test]
fn find_or_create_is_in_the_catalog_and_validates_its_ports() {
    let registry = Registry::builtin();
    assert!(registry.names().contains(&"find_or_create"));
    let catalog = registry.catalog();
    let entry = catalog
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kind"] == "find_or_create")
        .unwrap();
    let props = &entry["config_schema"]["properties"];
    for f in [
        "find_url",
        "match_field",
        "match_value",
        "create_body",
        "idempotency_key",
        "dry_run",
    ] {
        assert!(props.get(f).is_some(), "schema has {f}: {props}");
    }
    let wf = |config: Value, port: &str| {
        json!({
            "id": "bad-port", "name": "x", "version": 1,
            "steps": [
                {"id": "start", "kind": "manual_trigger", "config": {}},
                {"id": "c", "kind": "find_or_create", "config": config},
                {"id": "t", "kind": "transform", "config": {"fields": {}}}
            ],
            "edges": [{"from": "start", "to": "c"}, {"from": "c", "port": port, "to": "t"}]
        })
    };
    let good = json!({"find_url": "{{ env.CRM_URL }}/contacts", "match_field": "email",
                      "match_value": "{{ input.email }}"});
    for port in ["found", "created", "out", "error"] {
        let (c, problems) = workflow::check_value(&wf(good.clone(), port), &registry);
        assert!(c.is_some(), "port {port}: {problems:?}");
    }
    let problems = |v: Value| -> Vec<String> {
        let (c, problems) = workflow::check_value(&v, &registry);
        assert!(c.is_none());
        problems.iter().map(|p| p.to_string()).collect()
    };
    let text = problems(wf(good.clone(), "missing"));
    assert!(
        text.iter()
            .any(|p| p.contains("no port `missing`") && p.contains("found, created")),
        "{text:?}"
    );
    let mut bad = good;
    bad["retries"] = json!(50);
    bad["create_url"] = json!("ftp://nope");
    let text = problems(wf(bad, "out"));
    assert!(
        text.iter().any(|p| p.contains("steps[1].config.retries")),
        "{text:?}"
    );
    assert!(
        text.iter()
            .any(|p| p.contains("steps[1].config.create_url")),
        "{text:?}"
    );
    // No linter warning: the create always carries an idempotency key.
    let ok = customer_flow(json!({}));
    assert!(ok.warnings.is_empty(), "{:?}", ok.warnings);
}

/// The CLI's progress line: `check_with_progress` reports every scenario as it starts and every
/// delivered event, counting up by one, and its report is the one `check` gives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_counts_scenarios_and_deliveries_as_they_happen() {
    let definition = read_json("workflows/invoice-paid-once.json");
    let event = payload("stripe/invoice.paid.json");
    let seen = std::sync::Mutex::new(Vec::new());
    let report =
        fluxo::check::check_with_progress(&definition, &event, &CheckOptions::default(), &|p| {
            seen.lock().unwrap().push(p)
        })
        .await
        .unwrap();
    let seen = seen.into_inner().unwrap();
    assert!(report.passed, "{}", table(&report));
    let last = *seen.last().expect("progress was reported");
    assert!(
        last.scenarios >= 4 && last.deliveries >= last.scenarios,
        "{} scenarios, {} deliveries for {} rows",
        last.scenarios,
        last.deliveries,
        report.checks.len()
    );
    // One step at a time: each report moves exactly one counter by one.
    for w in seen.windows(2) {
        let (a, b) = (w[0], w[1]);
        let steps = (b.scenarios - a.scenarios) + (b.deliveries - a.deliveries);
        assert_eq!(steps, 1, "{a:?} then {b:?}");
    }
    assert_eq!(
        seen[0].scenarios, 1,
        "the first report is the first scenario"
    );
}

/// A webhook workflow whose one write is `operation` of `connector`, as connection `conn`.
fn app_write(connector: &str, operation: &str, params: Value, key: Option<&str>) -> Value {
    let mut config = json!({
        "connector": connector, "operation": operation, "connection": format!("{connector}-main"),
        "params": params
    });
    if let Some(k) = key {
        config["idempotency_key"] = json!(k);
    }
    json!({
        "id": format!("{connector}-{operation}"), "name": "app write", "version": 1,
        "steps": [
            {"id": "hook", "kind": "webhook_trigger", "config": {}},
            {"id": "write", "kind": "action", "config": config}
        ],
        "edges": [{"from": "hook", "to": "write"}]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_apps_write_passes_the_check_through_its_fake() {
    let email = "{{ input.data.object.id | lower }}@example.com";
    let invoice = "{{ input.data.object.id }}";
    let cases = [
        (
            app_write("hubspot", "upsert_contact", json!({"email": email}), None),
            "hubspot contact",
        ),
        (
            app_write("hubspot", "create_contact", json!({"email": email}), None),
            "hubspot contact",
        ),
        (
            app_write(
                "stripe",
                "create_customer",
                json!({"email": email}),
                Some(invoice),
            ),
            "stripe customer",
        ),
        (
            app_write(
                "slack",
                "post_message",
                json!({"channel": "alerts", "text": "paid: {{ input.data.object.id }}"}),
                Some(invoice),
            ),
            "slack message",
        ),
        (
            app_write(
                "google_sheets",
                "append_row",
                json!({"spreadsheet_id": "ledger", "key": invoice, "values": ["{{ input.data.object.amount_paid }}"]}),
                None,
            ),
            "sheets row",
        ),
    ];
    for (wf, record) in cases {
        let r = check_value(&wf).await;
        let t = table(&r);
        println!("{}:\n{t}", wf["id"]);
        assert!(r.passed, "{}:\n{t}", wf["id"]);
        assert!(r.warnings.is_empty(), "{}: {:?}", wf["id"], r.warnings);
        let first = row(&r, "first delivery");
        assert!(first.seen.ends_with(&format!("; 1 {record}")), "{t}");
        // Every write route was faulted: a timeout after the write and a crash there.
        assert!(t.contains("timeout after write on POST /"), "{t}");
        assert!(t.contains("engine killed during POST /"), "{t}");
        assert!(
            r.notes.iter().any(|n| n.contains(&format!(
                "`{}-main`",
                wf["steps"][1]["config"]["connector"].as_str().unwrap()
            ))),
            "{:?}",
            r.notes
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_without_dedupe_and_without_a_claim_fails_the_check_with_the_linters_hint() {
    let wf = app_write(
        "slack",
        "send_webhook",
        json!({"text": "paid: {{ input.data.object.id }}"}),
        None,
    );
    let r = check_value(&wf).await;
    let t = table(&r);
    println!("{t}\n{:?}", r.warnings);
    assert!(!r.passed, "{t}");
    let twice = row(&r, "same event twice");
    assert_eq!(twice.verdict, Verdict::Fail, "{t}");
    assert!(twice.seen.starts_with("2 slack messages;"), "{t}");
    // The linter says the same, with what to do.
    let lint = r
        .warnings
        .iter()
        .find(|w| w.contains("lint_unguarded_write"))
        .unwrap_or_else(|| panic!("{:?}", r.warnings));
    assert!(lint.contains("Memory"), "{lint}");
}
