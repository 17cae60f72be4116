//! `fluxo check` of a workflow that fans out: the poll (or the event's list) and its item runs.
//!
//! A `fan_out` step starts one run of another workflow per item, each item's key claimed in
//! that workflow's scope. The check gives the engine the targets ([`super::CheckOptions::targets`])
//! and a queue it drains itself (the item runs are executed as a worker would, after their
//! parent ended), then shows that overlapping cycles start each item once:
//!
//! | row | what happens | passes when |
//! |---|---|---|
//! | first poll | 3 items in the source the poll lists | the poll succeeds and starts 3 item runs; each succeeds; they write records |
//! | poll again, nothing new | a second poll | it starts nothing (3 duplicates); no record more |
//! | a new item, then two overlapping polls before its run starts | 1 item added; two polls while neither's item runs have run | 1 item run in all; it succeeds and writes at most one item's share |
//! | item run rows | the single-workflow rows (module doc of [`super`]) on the target, with the first item run's `input` as the event | as there |
//!
//! **Which event.** For a `schedule_trigger` workflow, `--event` is **one item of the source
//! the poll lists** (e.g. a payment). The check first runs one poll on the empty sandbox to see
//! which collection it lists (its first `GET /<collection>` to the sandbox), then seeds that
//! collection with 3 copies of the item (the sandbox assigns `id` and `created_at`; an
//! `external_id` gets `-1`, `-2`, … so the copies do not clash). A Stripe-style event
//! (`"object": "event"`) stands for its `data.object`, so a sample webhook payload works too. Polls run with trigger
//! `schedule` and the tick's `input` (`{"scheduled_at": <now, RFC 3339>}`). For any other
//! trigger the event is the run's `input` and carries the items itself; the rows are then
//! "first delivery" and "same event twice, the second while the first's item runs are still
//! queued".
//!
//! Left out: faults on the poll's own writes (a poll writes its cursor to Memory, not to a
//! destination); the item rows cover the first target only when there are several.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use super::{
    diff, fmt_counts, fmt_diff, given_id_paths, inferred_id_paths, no_store, run_summary, total,
    variant_of, CheckError, CheckOptions, CheckRow, Counts, Ctx, Lane, Verdict,
};
use crate::run::{RunRecord, RunStatus, Trigger};
use crate::sandbox::state::valid_collection;
use crate::steps::Registry;
use crate::workflow::{self, Compiled, Severity, Workflow};

/// How many source items the first poll finds.
pub const SEEDED_ITEMS: usize = 3;

/// What a fan-out that starts an item twice gets wrong.
const RESTART_HINT: &str = "the fan-out's `key` must be the item's stable id (e.g. \
                            `{{ item.id }}`), the same in every poll";

/// The compiled targets of `wf`'s `fan_out` steps, from `given` (definitions by id). Errors
/// (bad input): a target missing from `given`, not valid, or not started by `manual_trigger`.
pub(super) fn compile_targets(
    wf: &Workflow,
    given: &BTreeMap<String, Value>,
    registry: &Registry,
) -> Result<BTreeMap<String, Arc<Compiled>>, CheckError> {
    let mut out = BTreeMap::new();
    for step in wf.steps.iter().filter(|s| s.kind == "fan_out") {
        let Some(id) = step.config.get("workflow").and_then(Value::as_str) else {
            continue; // validation already named it
        };
        if out.contains_key(id) {
            continue;
        }
        let Some(definition) = given.get(id) else {
            return Err(CheckError::BadInput(format!(
                "step `{}` fans out to `{id}`, which the check was not given: the check runs \
                 the item runs too (save `{id}`, or put `{id}.json` beside the checked file)",
                step.id
            )));
        };
        let (compiled, problems) = workflow::check_value(definition, registry);
        let Some(compiled) = compiled else {
            let errors: Vec<String> = problems
                .iter()
                .filter(|p| p.severity == Severity::Error)
                .map(|p| p.to_string())
                .collect();
            return Err(CheckError::BadInput(format!(
                "step `{}` fans out to `{id}`, which is not valid: {}",
                step.id,
                errors.join("; ")
            )));
        };
        let kind = &compiled.trigger().kind;
        if kind != "manual_trigger" {
            return Err(CheckError::BadInput(format!(
                "step `{}` fans out to `{id}`, which starts with `{kind}`; fan_out starts only \
                 workflows whose trigger is `manual_trigger`",
                step.id
            )));
        }
        out.insert(id.to_string(), Arc::new(compiled));
    }
    Ok(out)
}

/// A scheduled fan-out's event is a source item ([`source_item`]): a JSON object with fields.
pub(super) fn validate_event(wf: &Compiled, event: &Value) -> Result<(), CheckError> {
    if !is_scheduled(wf) {
        return Ok(());
    }
    let what = match source_item(event) {
        Some(item) if !item.is_empty() => return Ok(()),
        Some(_) => "an empty object".to_string(),
        None => format!("a JSON {}", crate::steps::json_type(event)),
    };
    Err(CheckError::BadInput(format!(
        "the event is {what}: for a scheduled workflow that fans out, give one item of the \
         source the poll lists (a JSON object, e.g. a payment); the check seeds the source \
         with copies of it"
    )))
}

/// The source item an event stands for: the event itself, or, for a Stripe-style event
/// (`"object": "event"` with an object at `data.object`), that object (what a list returns).
fn source_item(event: &Value) -> Option<&Map<String, Value>> {
    let obj = event.as_object()?;
    match event.pointer("/data/object") {
        Some(Value::Object(inner)) if obj.get("object") == Some(&json!("event")) => Some(inner),
        _ => Some(obj),
    }
}

fn is_scheduled(wf: &Compiled) -> bool {
    wf.trigger().kind == "schedule_trigger"
}

/// The rows of a fan-out workflow (module doc), the id paths of the item rows, and notes.
pub(super) async fn run(
    ctx: &mut Ctx<'_>,
    event: &Value,
    options: &CheckOptions,
) -> (Vec<CheckRow>, Vec<String>, Vec<String>) {
    let mut notes = vec![
        "item runs were started by the fan-out's claim into a queue the check drained after \
         each poll, as the workers would; overlapping polls ran while earlier item runs were \
         still queued"
            .to_string(),
    ];
    let (mut rows, first_item) = if is_scheduled(ctx.wf) {
        scheduled(ctx, event, &mut notes).await
    } else {
        event_driven(ctx, event).await
    };
    let (item_rows, id_paths) = item_rows(ctx, first_item, options, &mut notes).await;
    rows.extend(item_rows);
    (rows, id_paths, notes)
}

/// `started`, `duplicates` summed over the run's `fan_out` steps.
fn fanned(run: &RunRecord) -> (u64, u64) {
    run.steps
        .iter()
        .filter(|s| s.kind == "fan_out")
        .filter_map(|s| s.output.as_ref())
        .fold((0, 0), |(a, b), o| {
            (
                a + o.get("started").and_then(Value::as_u64).unwrap_or(0),
                b + o.get("duplicates").and_then(Value::as_u64).unwrap_or(0),
            )
        })
}

/// `succeeded (3 started, 0 duplicates)`, or the failure.
fn poll_summary(r: &Result<RunRecord, String>) -> String {
    match r {
        Ok(run) if run.status == RunStatus::Succeeded => {
            let (s, d) = fanned(run);
            format!("succeeded ({s} started, {d} duplicates)")
        }
        Ok(run) => run_summary(run),
        Err(e) => e.clone(),
    }
}

fn ok_with(r: &Result<RunRecord, String>, started: u64, duplicates: Option<u64>) -> bool {
    matches!(r, Ok(run) if run.status == RunStatus::Succeeded
        && fanned(run).0 == started
        && duplicates.is_none_or(|d| fanned(run).1 == d))
}

/// `3 item runs, 3 succeeded`, and the first failure.
fn items_summary(items: &[RunRecord]) -> String {
    let ok = items
        .iter()
        .filter(|r| r.status == RunStatus::Succeeded)
        .count();
    let mut s = match items.len() {
        0 => "no item run".to_string(),
        1 => format!("1 item run, {ok} succeeded"),
        n => format!("{n} item runs, {ok} succeeded"),
    };
    if let Some(bad) = items.iter().find(|r| r.status != RunStatus::Succeeded) {
        s.push_str(&format!("; e.g. {}", run_summary(bad)));
    }
    s
}

fn all_succeeded(items: &[RunRecord]) -> bool {
    items.iter().all(|r| r.status == RunStatus::Succeeded)
}

/// Why a first poll (or delivery) that fans out failed: the run, the item runs, or no record.
fn first_poll_why(
    first: &Result<RunRecord, String>,
    items: &[RunRecord],
    want: u64,
    written: &std::collections::BTreeMap<String, i64>,
) -> String {
    match first {
        Err(e) => format!("the check could not record the run: {e}"),
        Ok(r) if r.status != RunStatus::Succeeded => {
            format!("the run did not succeed: {}", run_summary(r))
        }
        Ok(r) if fanned(r).0 != want => format!(
            "it started {} item runs where {want} were expected",
            fanned(r).0
        ),
        Ok(_) => match items.iter().find(|r| r.status != RunStatus::Succeeded) {
            Some(bad) => format!("an item run did not succeed: {}", run_summary(bad)),
            None if written.values().all(|n| *n <= 0) => {
                "the item runs wrote no record at the sandbox, so there is nothing to count"
                    .to_string()
            }
            None => "the item runs did not all run".to_string(),
        },
    }
}

fn not_run(check: impl Into<String>, why: &str) -> CheckRow {
    CheckRow {
        check: check.into(),
        expected: String::new(),
        seen: why.to_string(),
        verdict: Verdict::NotRun,
        why: None,
        fix: None,
    }
}

fn row(
    check: impl Into<String>,
    expected: impl Into<String>,
    seen: String,
    pass: bool,
) -> CheckRow {
    super::row(check, expected, seen, pass)
}

impl Ctx<'_> {
    /// Execute every queued child run, in start order, with its target; answer their records.
    async fn drain(&self, lane: &Lane) -> Vec<RunRecord> {
        let ids: Vec<String> =
            std::mem::take(&mut *lane.queued.lock().unwrap_or_else(|e| e.into_inner()));
        let mut out = Vec::new();
        for id in ids {
            let Ok(Some(run)) = crate::store::RunStore::get_run(lane.store.as_ref(), &id).await
            else {
                continue;
            };
            let Some(wf) = self.targets.get(&run.workflow_id) else {
                continue;
            };
            if let Ok(done) = lane.engine.execute(wf, run).await {
                out.push(done);
            }
        }
        out
    }

    /// The tick's `input`, as the scheduler gives it.
    fn tick(&self, lane: &Lane) -> Value {
        json!({"scheduled_at": crate::clock::rfc3339(lane.engine.clock().now_ms())})
    }

    async fn poll(&self, lane: &Lane) -> Result<RunRecord, String> {
        let tick = self.tick(lane);
        self.deliver(lane, &tick).await
    }

    /// The collection the poll lists: its first `GET /<collection>` to the sandbox.
    fn listed_collection(&self) -> Option<String> {
        self.state()
            .log()
            .iter()
            .filter(|e| e.method == "GET")
            .filter_map(|e| {
                let path = e.path.split('?').next()?.trim_start_matches('/');
                (!path.contains('/') && valid_collection(path)).then(|| path.to_string())
            })
            .next()
    }
}

/// `external_id`s of the copies get `-1`, `-2`, … so they do not clash.
fn seed_copy(sample: &Map<String, Value>, n: usize) -> Map<String, Value> {
    let mut body = sample.clone();
    body.remove("id");
    body.remove("created_at");
    if let Some(Value::String(ext)) = body.get_mut("external_id") {
        ext.push_str(&format!("-{n}"));
    }
    body
}

/// The scheduled rows; answers the first item run's input, if one ran.
async fn scheduled(
    ctx: &mut Ctx<'_>,
    event: &Value,
    notes: &mut Vec<String>,
) -> (Vec<CheckRow>, Option<Value>) {
    let mut first_name = format!("first poll ({SEEDED_ITEMS} items in the source)");
    let nothing_new = "poll again, nothing new";
    let overlap = "a new item, then two overlapping polls before its run starts";
    let skip_rest = |rows: &mut Vec<CheckRow>, why: &str| {
        rows.push(not_run(nothing_new, why));
        rows.push(not_run(overlap, why));
    };
    let mut rows = Vec::new();
    let sample = source_item(event).cloned().unwrap_or_default();

    // The probe: one poll on the empty sandbox shows which collection it lists.
    let source = match ctx.lane() {
        Ok(lane) => {
            let probe = ctx.poll(&lane).await;
            match (&probe, ctx.listed_collection()) {
                (_, Some(c)) => Ok(c),
                (Ok(r), None) if r.status == RunStatus::Succeeded => Err(
                    "the poll listed nothing in the sandbox (no `GET /<collection>`): nothing \
                     to seed"
                        .to_string(),
                ),
                (r, None) => Err(format!(
                    "a poll of the empty source did not list it: {}",
                    poll_summary(r)
                )),
            }
        }
        Err(e) => Err(format!("could not open a store: {e}")),
    };
    let source = match source {
        Ok(s) => s,
        Err(e) => {
            rows.push(
                row(
                    first_name,
                    "the poll succeeds and starts one item run per item",
                    e.clone(),
                    false,
                )
                .because(
                    format!("the check could not find what the poll lists: {e}"),
                    "make the poll list its source with a `GET {{ env.NAME }}/<collection>` (the check points env variables at its sandbox and seeds that collection)",
                ),
            );
            skip_rest(&mut rows, "not run: the first poll must succeed");
            return (rows, None);
        }
    };
    first_name = format!("first poll ({SEEDED_ITEMS} items in `{source}`)");
    notes.push(format!(
        "the poll lists `{source}`: each scenario's sandbox started with {SEEDED_ITEMS} copies \
         of the event there (ids and created_at assigned by the sandbox)"
    ));
    ctx.seed = (1..=SEEDED_ITEMS)
        .map(|n| (source.clone(), seed_copy(&sample, n)))
        .collect();

    // First poll.
    let lane = match ctx.lane() {
        Ok(l) => l,
        Err(e) => {
            rows.push(no_store(first_name, "", &e));
            skip_rest(&mut rows, "not run: the first poll must succeed");
            return (rows, None);
        }
    };
    let seeded = ctx.counts(); // empty: the seed is not counted
    let first = ctx.poll(&lane).await;
    let items = ctx.drain(&lane).await;
    let baseline = diff(&seeded, &ctx.counts());
    let ok = ok_with(&first, SEEDED_ITEMS as u64, None)
        && items.len() == SEEDED_ITEMS
        && all_succeeded(&items)
        && baseline.values().any(|n| *n > 0);
    rows.push(
        row(
            first_name,
            format!(
                "the poll succeeds and starts {SEEDED_ITEMS} item runs; each succeeds and writes"
            ),
            format!(
                "poll {}; {}; {}",
                poll_summary(&first),
                items_summary(&items),
                fmt_diff(&baseline)
            ),
            ok,
        )
        .because(
            first_poll_why(&first, &items, SEEDED_ITEMS as u64, &baseline),
            "dry-run the poll and an item run in the editor: the fan-out's `items` must render the list the source answers, and each item run must succeed and write at `{{ env.NAME }}/path`",
        ),
    );
    let first_item = items.first().map(|r| r.input.value().clone());
    if !ok {
        skip_rest(&mut rows, "not run: the first poll must succeed");
        return (rows, first_item);
    }

    // Poll again: every item is a duplicate.
    let before = ctx.counts();
    let again = ctx.poll(&lane).await;
    let items = ctx.drain(&lane).await;
    let added = diff(&before, &ctx.counts());
    let mut seen = format!("poll {}; {}", poll_summary(&again), fmt_diff(&added));
    if again.as_ref().is_ok_and(|r| fanned(r).0 > 0) {
        seen.push_str(&format!(
            "; items the first poll started were started again: {RESTART_HINT}"
        ));
    }
    let restarted = again.as_ref().is_ok_and(|r| fanned(r).0 > 0);
    rows.push(
        row(
            nothing_new,
            format!("it starts nothing ({SEEDED_ITEMS} duplicates); no record more"),
            seen,
            ok_with(&again, 0, Some(SEEDED_ITEMS as u64)) && items.is_empty() && added.is_empty(),
        )
        .because(
            if restarted {
                "a poll with nothing new started the items the first poll had started: their keys changed between polls"
                    .to_string()
            } else if !added.is_empty() {
                format!(
                    "a poll with nothing new wrote records ({})",
                    fmt_diff(&added)
                )
            } else {
                format!(
                    "a poll with nothing new did not succeed: {}",
                    poll_summary(&again)
                )
            },
            if restarted || added.is_empty() {
                RESTART_HINT.to_string()
            } else {
                "a poll itself must not write at a destination: write in the item workflow, behind the fan-out's key"
                    .to_string()
            },
        ),
    );

    // A new item, then two polls before either's item runs run.
    let new = ctx
        .state()
        .create(&source, seed_copy(&sample, SEEDED_ITEMS + 1));
    let before = ctx.counts();
    let a = ctx.poll(&lane).await;
    let b = ctx.poll(&lane).await;
    let items = ctx.drain(&lane).await;
    let added = diff(&before, &ctx.counts());
    // One item's share of the first poll's records, per collection (rounded up).
    let share = |c: &str| {
        let n = baseline.get(c).copied().unwrap_or(0);
        (n + SEEDED_ITEMS as i64 - 1) / SEEDED_ITEMS as i64
    };
    let within = added.iter().all(|(c, n)| *n > 0 && *n <= share(c));
    let started = [&a, &b]
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|r| fanned(r).0)
        .sum::<u64>();
    let both_ok = [&a, &b]
        .iter()
        .all(|r| matches!(r, Ok(r) if r.status == RunStatus::Succeeded));
    let overlap_why = if new.is_err() {
        format!("the check could not add an item to `{source}`")
    } else if started != 1 {
        format!("two overlapping polls started {started} item runs where the one new item needs 1")
    } else if !both_ok {
        "an overlapping poll did not succeed".to_string()
    } else {
        format!(
            "the new item's run did not succeed or wrote other than one item's records ({})",
            fmt_diff(&added)
        )
    };
    rows.push(
        row(
            overlap,
            "1 item run in all; it succeeds and writes one item's records".to_string(),
            if new.is_err() {
                format!("could not add an item to `{source}`")
            } else {
                format!(
                    "polls {}, then {}; {}; {}",
                    poll_summary(&a),
                    poll_summary(&b),
                    items_summary(&items),
                    fmt_diff(&added)
                )
            },
            new.is_ok()
                && both_ok
                && started == 1
                && items.len() == 1
                && all_succeeded(&items)
                && !added.is_empty()
                && within,
        )
        .because(overlap_why, RESTART_HINT),
    );
    (rows, first_item)
}

/// The rows of a fan-out whose items come with the event; answers the first item run's input.
async fn event_driven(ctx: &mut Ctx<'_>, event: &Value) -> (Vec<CheckRow>, Option<Value>) {
    let first_name = "first delivery";
    let twice = "same event twice, the second while the first's item runs are still queued";
    let mut rows = Vec::new();
    let lane = match ctx.lane() {
        Ok(l) => l,
        Err(e) => {
            rows.push(no_store(first_name, "", &e));
            rows.push(not_run(twice, "not run: the first delivery must succeed"));
            return (rows, None);
        }
    };
    let first = ctx.deliver(&lane, event).await;
    let items = ctx.drain(&lane).await;
    let baseline: Counts = ctx.counts();
    let started = first.as_ref().map(|r| fanned(r).0).unwrap_or(0);
    let ok = matches!(&first, Ok(r) if r.status == RunStatus::Succeeded)
        && started > 0
        && items.len() as u64 == started
        && all_succeeded(&items)
        && total(&baseline) > 0;
    rows.push(
        row(
            first_name,
            "the run succeeds and starts one item run per item; each succeeds and writes",
            format!(
                "run {}; {}; {}",
                poll_summary(&first),
                items_summary(&items),
                fmt_counts(&baseline)
            ),
            ok,
        )
        .because(
            first_poll_why(&first, &items, started.max(1), &diff(&Counts::new(), &baseline)),
            "dry-run this event and an item run in the editor: the fan-out's `items` must render the event's list, and each item run must succeed and write at `{{ env.NAME }}/path`",
        ),
    );
    let first_item = items.first().map(|r| r.input.value().clone());
    if !ok {
        rows.push(not_run(twice, "not run: the first delivery must succeed"));
        return (rows, first_item);
    }
    let seen = match ctx.lane() {
        Ok(lane) => {
            let a = ctx.deliver(&lane, event).await;
            let b = ctx.deliver(&lane, event).await;
            let items = ctx.drain(&lane).await;
            let after = ctx.counts();
            let pass = ok_with(&a, started, None)
                && ok_with(&b, 0, Some(started))
                && all_succeeded(&items)
                && after == baseline;
            (
                format!(
                    "runs {}, then {}; {}; {}",
                    poll_summary(&a),
                    poll_summary(&b),
                    items_summary(&items),
                    fmt_counts(&after)
                ),
                pass,
            )
        }
        Err(e) => (format!("could not open a store: {e}"), false),
    };
    rows.push(
        row(
            twice,
            format!(
                "the second starts nothing ({started} duplicates); {} in all",
                fmt_counts(&baseline)
            ),
            seen.0,
            seen.1,
        )
        .because(
            "the same event, delivered again while its item runs were queued, started items again or wrote more than once",
            RESTART_HINT,
        ),
    );
    (rows, first_item)
}

/// The single-workflow rows on the (first) target, with `input` as the event; each row's name
/// says it is an item run's.
async fn item_rows(
    ctx: &Ctx<'_>,
    input: Option<Value>,
    options: &CheckOptions,
    notes: &mut Vec<String>,
) -> (Vec<CheckRow>, Vec<String>) {
    let Some((target_id, target)) = ctx.targets.iter().next() else {
        return (Vec::new(), Vec::new());
    };
    let label = |check: &str| format!("item run (`{target_id}`): {check}");
    let Some(input) = input else {
        return (
            vec![not_run(
                label("re-run safety"),
                "not run: no item run ran to take its input from",
            )],
            Vec::new(),
        );
    };
    let id_paths =
        given_id_paths(options).unwrap_or_else(|| inferred_id_paths(&[&target.workflow], &input));
    let variant = match variant_of(&input, &id_paths) {
        Ok(v) => v,
        Err(e) => {
            return (
                vec![row(label("new event"), "", e.to_string(), false).because(
                    format!("the check could not make a new item from the first one: {e}"),
                    "give the id path of the item's business id (CLI `--id-path`, the Check tab's id paths)",
                )],
                id_paths,
            )
        }
    };
    notes.push(format!(
        "the item rows ran `{target_id}` with the first item run's input as the event (trigger \
         `fan_out`, as a fan-out's child run; its ids changed at {} for the new event)",
        id_paths.join(", ")
    ));
    let mut item = Ctx {
        wf: target,
        sandbox: ctx.sandbox,
        scratch: ctx.scratch,
        env: ctx.env.clone(),
        trigger: Trigger::FanOut,
        lanes: 0,
        lane_prefix: "item",
        targets: ctx.targets,
        seed: ctx.seed.clone(),
        connections: ctx.connections.clone(),
        progress: ctx.progress,
        failure_path: ctx.failure_path.clone(),
        expected: ctx.expected.clone(),
    };
    let mut rows = item.run_all(&input, &variant, &id_paths).await;
    for r in &mut rows {
        r.check = label(&r.check);
    }
    (rows, id_paths)
}
