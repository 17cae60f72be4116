//! Validation and lint (SPEC §1): the shipped workflow files load, and bad files are refused
//! with every problem at once, each naming what is wrong, the step and the path.

mod common;

use std::path::PathBuf;

use serde_json::{json, Value};

use fluxo::steps::Registry;
use fluxo::workflow::{check_text, load_text, Problem, Severity};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn check(v: &Value) -> Vec<Problem> {
    check_text(
        &serde_json::to_string_pretty(v).unwrap(),
        &Registry::builtin(),
    )
    .1
}

fn errors(v: &Value) -> Vec<Problem> {
    check(v)
        .into_iter()
        .filter(|p| p.severity == Severity::Error)
        .collect()
}

fn warnings(v: &Value) -> Vec<Problem> {
    check(v)
        .into_iter()
        .filter(|p| p.severity == Severity::Warning)
        .collect()
}

fn listing(ps: &[Problem]) -> String {
    ps.iter().map(|p| format!("  {p}\n")).collect()
}

/// The one problem with `code` (panics listing all if there is not exactly one).
fn only<'a>(ps: &'a [Problem], code: &str) -> &'a Problem {
    let hits: Vec<&Problem> = ps.iter().filter(|p| p.code == code).collect();
    assert_eq!(
        hits.len(),
        1,
        "expected exactly one `{code}`, got:\n{}",
        listing(ps)
    );
    hits[0]
}

/// A valid workflow: start → claim → call (guarded POST) → done.
fn base() -> Value {
    json!({
        "id": "base",
        "name": "Base",
        "version": 1,
        "settings": { "run_timeout_s": 50 },
        "steps": [
            { "id": "start", "kind": "manual_trigger", "config": {} },
            { "id": "claim", "kind": "memory", "config": {
                "operation": "write", "namespace": "ns", "key": "{{ input.id }}",
                "allow_overwrite": false } },
            { "id": "call", "kind": "http_request", "config": {
                "method": "POST", "url": "http://127.0.0.1:9/x",
                "headers": { "Idempotency-Key": "k-{{ input.id }}" } } },
            { "id": "done", "kind": "transform", "config": { "fields": { "ok": true } } }
        ],
        "edges": [
            { "from": "start", "to": "claim" },
            { "from": "claim", "to": "call" },
            { "from": "call", "to": "done" }
        ]
    })
}

// ---------------------------------------------------------------------------------------------
// The shipped workflows
// ---------------------------------------------------------------------------------------------

#[test]
fn every_shipped_workflow_loads_without_errors() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("workflows");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "no workflow files found in {}: this test must check at least one",
        dir.display()
    );
    let registry = Registry::builtin();
    let mut failures = String::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let (compiled, problems) = check_text(&text, &registry);
        let errs: Vec<&Problem> = problems
            .iter()
            .filter(|p| p.severity == Severity::Error)
            .collect();
        if !errs.is_empty() || compiled.is_none() {
            failures.push_str(&format!("{}:\n", path.display()));
            for p in errs {
                failures.push_str(&format!("  {p}\n"));
            }
            continue;
        }
        let c = compiled.unwrap();
        let stem = path.file_stem().unwrap().to_string_lossy();
        if c.id() != stem {
            failures.push_str(&format!(
                "{}: holds id `{}`, the file must be `<id>.json`\n",
                path.display(),
                c.id()
            ));
        }
        for w in problems.iter().filter(|p| p.severity == Severity::Warning) {
            eprintln!("{}: {w}", path.display());
        }
    }
    assert!(
        failures.is_empty(),
        "workflow files with errors:\n{failures}"
    );
}

#[test]
fn the_base_workflow_is_clean() {
    let ps = check(&base());
    assert!(ps.is_empty(), "{}", listing(&ps));
    let c = load_text(&base().to_string(), &Registry::builtin()).unwrap();
    assert!(c.warnings.is_empty());
    assert_eq!(c.id(), "base");
}

// ---------------------------------------------------------------------------------------------
// Bad input
// ---------------------------------------------------------------------------------------------

#[test]
fn malformed_json_names_line_and_column() {
    let text = "{\n  \"id\": \"x\",\n  \"steps\": [\n    { \"id\": \"a\" ,, }\n  ]\n}\n";
    let (c, ps) = check_text(text, &Registry::builtin());
    assert!(c.is_none());
    let p = only(&ps, "json_syntax");
    assert_eq!(p.severity, Severity::Error);
    assert!(p.path.contains("line 4"), "{p}");
    assert!(p.path.contains("column"), "{p}");
    assert!(p.message.contains("line 4"), "{p}");
    // load_text gives the same, as an error list.
    let errs = load_text(text, &Registry::builtin()).unwrap_err();
    assert_eq!(errs.len(), 1);
    // Truncated and empty input too.
    for t in ["", "{", "[1, 2", "{\"id\": \"x\", }"] {
        let (_, ps) = check_text(t, &Registry::builtin());
        assert_eq!(ps.len(), 1, "{t:?}: {}", listing(&ps));
        assert_eq!(ps[0].code, "json_syntax");
        assert!(ps[0].path.starts_with("line "), "{}", ps[0]);
    }
    // Valid JSON of the wrong shape.
    let (_, ps) = check_text("[1, 2]", &Registry::builtin());
    assert_eq!(ps.len(), 1);
    assert_eq!(ps[0].severity, Severity::Error);
}

#[test]
fn unknown_kind_names_the_kind_and_the_step() {
    let mut v = base();
    v["steps"][3]["kind"] = json!("send_email");
    let ps = errors(&v);
    let p = only(&ps, "unknown_kind");
    assert_eq!(p.step.as_deref(), Some("done"));
    assert_eq!(p.path, "steps[3].kind");
    assert!(p.message.contains("send_email"), "{p}");
    assert!(
        p.message.contains("transform"),
        "lists the known kinds: {p}"
    );
}

#[test]
fn unknown_top_level_field_is_named() {
    let mut v = base();
    v["colour"] = json!("blue");
    let ps = errors(&v);
    let p = only(&ps, "unknown_field");
    assert!(p.message.contains("colour"), "{p}");
    assert!(p.path.contains("colour"), "{p}");
    // settings too
    let mut v = base();
    v["settings"]["run_timeout"] = json!(5);
    let ps = errors(&v);
    assert!(
        ps.iter()
            .any(|p| p.message.contains("run_timeout") && p.path.starts_with("settings")),
        "{}",
        listing(&ps)
    );
}

#[test]
fn unknown_step_field_names_the_field_and_the_step() {
    let mut v = base();
    v["steps"][2]["retries"] = json!(3); // belongs in config
    let ps = errors(&v);
    let p = only(&ps, "unknown_field");
    assert_eq!(p.step.as_deref(), Some("call"));
    assert!(p.message.contains("retries"), "{p}");
    assert!(p.path.starts_with("steps[2]"), "{p}");
}

#[test]
fn unknown_edge_field_names_the_field_and_the_edge() {
    let mut v = base();
    v["edges"][1]["label"] = json!("x");
    let ps = errors(&v);
    let p = only(&ps, "unknown_field");
    assert!(p.message.contains("label"), "{p}");
    assert!(p.path.starts_with("edges[1]"), "{p}");
    assert_eq!(
        p.step.as_deref(),
        Some("claim"),
        "the edge's `from` step: {p}"
    );
}

#[test]
fn unknown_config_field_names_the_field_and_the_step() {
    let mut v = base();
    v["steps"][2]["config"]["retry"] = json!(3); // typo of `retries`
    v["steps"][1]["config"]["overwrite"] = json!(false); // typo of `allow_overwrite`
    let ps = errors(&v);
    let hits: Vec<&Problem> = ps.iter().filter(|p| p.code == "unknown_field").collect();
    assert_eq!(hits.len(), 2, "{}", listing(&ps));
    let call = hits
        .iter()
        .find(|p| p.step.as_deref() == Some("call"))
        .unwrap();
    assert!(call.message.contains("`retry`"), "{call}");
    assert!(call.path.starts_with("steps[2].config"), "{call}");
    let claim = hits
        .iter()
        .find(|p| p.step.as_deref() == Some("claim"))
        .unwrap();
    assert!(claim.message.contains("`overwrite`"), "{claim}");
    assert!(claim.path.starts_with("steps[1].config"), "{claim}");
}

#[test]
fn bad_config_values_name_step_and_path() {
    let mut v = base();
    v["steps"][2]["config"]["retries"] = json!("three");
    v["steps"][2]["config"]["timeout_s"] = json!(0);
    let ps = errors(&v);
    assert!(
        ps.iter().all(|p| p.step.as_deref() == Some("call")),
        "{}",
        listing(&ps)
    );
    assert!(
        ps.iter().any(|p| p.path == "steps[2].config.retries"),
        "{}",
        listing(&ps)
    );
    let mut v = base();
    v["steps"][2]["config"]["timeout_s"] = json!(0);
    let ps = errors(&v);
    let p = only(&ps, "bad_config");
    assert_eq!(p.path, "steps[2].config.timeout_s");
}

#[test]
fn cycles_are_reported_with_their_steps() {
    let mut v = base();
    v["edges"]
        .as_array_mut()
        .unwrap()
        .push(json!({ "from": "done", "to": "claim" }));
    let ps = errors(&v);
    let p = only(&ps, "cycle");
    for id in ["claim", "call", "done"] {
        assert!(p.message.contains(id), "{p}");
    }
    // A self-loop.
    let mut v = base();
    v["edges"]
        .as_array_mut()
        .unwrap()
        .push(json!({ "from": "done", "to": "done" }));
    let ps = errors(&v);
    let p = only(&ps, "cycle");
    assert_eq!(p.step.as_deref(), Some("done"));
    // Through an error edge too.
    let mut v = base();
    v["steps"].as_array_mut().unwrap().push(json!({
        "id": "h", "kind": "error_handler", "config": { "mode": "log" } }));
    let edges = v["edges"].as_array_mut().unwrap();
    edges.push(json!({ "from": "call", "port": "error", "to": "h" }));
    edges.push(json!({ "from": "h", "to": "call" }));
    let ps = errors(&v);
    only(&ps, "cycle");
}

#[test]
fn duplicate_ids_are_reported() {
    let mut v = base();
    v["steps"][3]["id"] = json!("call");
    let ps = errors(&v);
    let p = only(&ps, "duplicate_id");
    assert_eq!(p.step.as_deref(), Some("call"));
    assert_eq!(p.path, "steps[3].id");
    // The original `call` is still wired and reachable (the edge to the renamed `done` is
    // now to an unknown step).
    assert!(
        ps.iter().all(|p| p.code != "unreachable"),
        "{}",
        listing(&ps)
    );
    only(&ps, "unknown_step");
    assert_eq!(ps.len(), 2, "{}", listing(&ps));
}

#[test]
fn edges_to_unknown_steps_or_ports_are_reported() {
    let mut v = base();
    let edges = v["edges"].as_array_mut().unwrap();
    edges.push(json!({ "from": "done", "to": "nowhere" }));
    edges.push(json!({ "from": "ghost", "to": "done" }));
    edges.push(json!({ "from": "call", "port": "sideways", "to": "done" }));
    let ps = errors(&v);
    let unknown: Vec<&Problem> = ps.iter().filter(|p| p.code == "unknown_step").collect();
    assert_eq!(unknown.len(), 2, "{}", listing(&ps));
    assert!(unknown
        .iter()
        .any(|p| p.path == "edges[3].to" && p.message.contains("nowhere")));
    assert!(unknown
        .iter()
        .any(|p| p.path == "edges[4].from" && p.message.contains("ghost")));
    let port = only(&ps, "unknown_port");
    assert_eq!(port.path, "edges[5].port");
    assert_eq!(port.step.as_deref(), Some("call"));
    assert!(port.message.contains("sideways"), "{port}");
}

#[test]
fn router_ports_are_its_routes_and_default() {
    let v = json!({
        "id": "r", "steps": [
            { "id": "start", "kind": "manual_trigger", "config": {} },
            { "id": "route", "kind": "router", "config": { "routes": [
                { "name": "paid", "when": "input.status == 'paid'" } ] } },
            { "id": "a", "kind": "transform", "config": { "fields": {} } },
            { "id": "b", "kind": "transform", "config": { "fields": {} } },
            { "id": "c", "kind": "transform", "config": { "fields": {} } }
        ],
        "edges": [
            { "from": "start", "to": "route" },
            { "from": "route", "port": "paid", "to": "a" },
            { "from": "route", "port": "default", "to": "b" },
            { "from": "route", "port": "void", "to": "c" }
        ]
    });
    let ps = errors(&v);
    let p = only(&ps, "unknown_port");
    assert_eq!(p.path, "edges[3].port");
    assert!(p.message.contains("void"));
    // `c` is then unreachable as well: both reported.
    assert_eq!(only(&ps, "unreachable").step.as_deref(), Some("c"));
}

#[test]
fn two_triggers_or_none_are_reported() {
    let mut v = base();
    v["steps"].as_array_mut().unwrap().push(json!({
        "id": "hook", "kind": "webhook_trigger", "config": {} }));
    v["edges"]
        .as_array_mut()
        .unwrap()
        .push(json!({ "from": "hook", "to": "claim" }));
    let ps = errors(&v);
    let p = only(&ps, "trigger_count");
    assert_eq!(p.step.as_deref(), Some("hook"));

    let mut v = base();
    v["steps"][0]["kind"] = json!("transform");
    v["steps"][0]["config"] = json!({ "fields": {} });
    let ps = errors(&v);
    only(&ps, "trigger_count");
}

#[test]
fn unreachable_steps_are_reported() {
    let mut v = base();
    v["steps"].as_array_mut().unwrap().push(json!({
        "id": "orphan", "kind": "transform", "config": { "fields": {} } }));
    let ps = errors(&v);
    let p = only(&ps, "unreachable");
    assert_eq!(p.step.as_deref(), Some("orphan"));
    assert_eq!(p.path, "steps[4]");
}

#[test]
fn template_syntax_errors_name_step_and_path() {
    let mut v = base();
    v["steps"][2]["config"]["headers"]["Idempotency-Key"] = json!("k-{{ input.id ");
    v["steps"][3]["config"]["fields"]["ok"] = json!("{{ input.a | }}");
    let ps = errors(&v);
    let hits: Vec<&Problem> = ps.iter().filter(|p| p.code == "template_syntax").collect();
    assert_eq!(hits.len(), 2, "{}", listing(&ps));
    let h = hits
        .iter()
        .find(|p| p.step.as_deref() == Some("call"))
        .unwrap();
    assert_eq!(h.path, "steps[2].config.headers.Idempotency-Key");
    assert!(
        h.message.contains("k-{{ input.id "),
        "quotes the template: {h}"
    );
    let f = hits
        .iter()
        .find(|p| p.step.as_deref() == Some("done"))
        .unwrap();
    assert_eq!(f.path, "steps[3].config.fields.ok");
}

#[test]
fn router_expression_syntax_errors_are_reported() {
    let v = json!({
        "id": "r", "steps": [
            { "id": "start", "kind": "manual_trigger", "config": {} },
            { "id": "route", "kind": "router", "config": { "routes": [
                { "name": "a", "when": "input.status ==" },
                { "name": "b", "when": "{{ input.x }}" } ] } }
        ],
        "edges": [ { "from": "start", "to": "route" } ]
    });
    let ps = errors(&v);
    assert!(
        ps.iter()
            .any(|p| p.path == "steps[1].config.routes[0].when"
                && p.step.as_deref() == Some("route")),
        "{}",
        listing(&ps)
    );
    assert!(
        ps.iter()
            .any(|p| p.path == "steps[1].config.routes[1].when"),
        "braces in a condition: {}",
        listing(&ps)
    );
}

#[test]
fn every_problem_of_a_file_is_reported_at_once() {
    let v = json!({
        "id": "many",
        "colour": "blue",
        "steps": [
            { "id": "start", "kind": "manual_trigger", "config": {} },
            { "id": "hook", "kind": "webhook_trigger", "config": {} },
            { "id": "a", "kind": "transform", "config": { "fields": { "x": "{{ input.x " } } },
            { "id": "a", "kind": "transform", "config": { "fields": {} } },
            { "id": "b", "kind": "teleport", "config": {} },
            { "id": "c", "kind": "http_request", "config": { "method": "GET", "url": "http://x", "retry": 1 } },
            { "id": "d", "kind": "transform", "config": { "fields": {} }, "colour": "red" },
            { "id": "e", "kind": "transform", "config": { "fields": {} } },
            { "id": "f", "kind": "transform", "config": { "fields": {} } },
            { "id": "g", "kind": "transform", "config": { "fields": {} } }
        ],
        "edges": [
            { "from": "start", "to": "a" },
            { "from": "a", "to": "c" },
            { "from": "a", "to": "zzz" },
            { "from": "a", "port": "nope", "to": "e" },
            { "from": "start", "to": "f", "weight": 2 },
            { "from": "start", "to": "e" },
            { "from": "e", "to": "f" },
            { "from": "f", "to": "e" }
        ]
    });
    let ps = check(&v);
    let codes: std::collections::BTreeSet<&str> = ps.iter().map(|p| p.code.as_str()).collect();
    for code in [
        "unknown_field",
        "trigger_count",
        "template_syntax",
        "duplicate_id",
        "unknown_kind",
        "unknown_step",
        "unknown_port",
        "cycle",
        "unreachable",
    ] {
        assert!(
            codes.contains(code),
            "missing `{code}` in:\n{}",
            listing(&ps)
        );
    }
    // The four unknown fields: top level, step, edge, config.
    let unknown: Vec<&Problem> = ps.iter().filter(|p| p.code == "unknown_field").collect();
    assert_eq!(unknown.len(), 4, "{}", listing(&ps));
    for field in ["colour", "weight", "retry"] {
        assert!(
            unknown.iter().any(|p| p.message.contains(field)),
            "`{field}`:\n{}",
            listing(&ps)
        );
    }
    assert!(unknown
        .iter()
        .any(|p| p.step.as_deref() == Some("d") && p.message.contains("colour")));
    assert!(unknown
        .iter()
        .any(|p| p.step.as_deref() == Some("c") && p.message.contains("retry")));
    assert!(
        ps.iter().all(|p| p.severity == Severity::Error),
        "{}",
        listing(&ps)
    );
    // No cascade from the duplicate id: edges resolve to the first `a`, which is reachable.
    let unreachable: Vec<&str> = ps
        .iter()
        .filter(|p| p.code == "unreachable")
        .filter_map(|p| p.step.as_deref())
        .collect();
    assert!(unreachable.contains(&"g"), "{}", listing(&ps));
    assert!(!unreachable.contains(&"a"), "{}", listing(&ps));
    assert!(
        ps.iter().any(|p| p.code == "unknown_field"
            && p.step.as_deref() == Some("start")
            && p.path == "edges[4]"),
        "an edge's unknown field names the step it leaves: {}",
        listing(&ps)
    );
    // load_text refuses it with the same list.
    let errs = load_text(&v.to_string(), &Registry::builtin()).unwrap_err();
    assert_eq!(errs.len(), ps.len());
}

#[test]
fn bad_workflow_ids_and_settings() {
    let mut v = base();
    v["id"] = json!("Has Spaces");
    v["settings"]["run_timeout_s"] = json!(0);
    let ps = errors(&v);
    assert!(ps.iter().any(|p| p.path == "id"), "{}", listing(&ps));
    assert!(
        ps.iter().any(|p| p.path == "settings.run_timeout_s"),
        "{}",
        listing(&ps)
    );
    let mut v = base();
    v.as_object_mut().unwrap().remove("steps");
    let ps = errors(&v);
    assert!(ps.iter().any(|p| p.path == "steps"), "{}", listing(&ps));
}

// ---------------------------------------------------------------------------------------------
// Lint
// ---------------------------------------------------------------------------------------------

/// `start (manual) → call (POST, no key)`.
fn unguarded() -> Value {
    json!({
        "id": "unguarded",
        "steps": [
            { "id": "start", "kind": "manual_trigger", "config": {} },
            { "id": "call", "kind": "http_request", "config": {
                "method": "POST", "url": "http://127.0.0.1:9/x" } }
        ],
        "edges": [ { "from": "start", "to": "call" } ]
    })
}

#[test]
fn lint_unguarded_post() {
    let ws = warnings(&unguarded());
    let p = only(&ws, "lint_unguarded_write");
    assert_eq!(p.step.as_deref(), Some("call"));
    assert!(p.path.starts_with("steps[1]"), "{p}");
    // It still loads: warnings do not stop a workflow.
    let c = load_text(&unguarded().to_string(), &Registry::builtin()).unwrap();
    assert_eq!(c.warnings.len(), 1);

    // PATCH too; GET and PUT are not flagged.
    for (method, flagged) in [
        ("PATCH", true),
        ("GET", false),
        ("PUT", false),
        ("DELETE", false),
    ] {
        let mut v = unguarded();
        v["steps"][1]["config"]["method"] = json!(method);
        let ws = warnings(&v);
        assert_eq!(
            ws.iter().any(|p| p.code == "lint_unguarded_write"),
            flagged,
            "{method}: {}",
            listing(&ws)
        );
    }
    // A key header (any case) guards it.
    let mut v = unguarded();
    v["steps"][1]["config"]["headers"] = json!({ "idempotency-key": "k-{{ input.id }}" });
    assert!(warnings(&v).is_empty(), "{}", listing(&warnings(&v)));
    // So does a Memory claim on the way, for a step that does not retry.
    assert!(warnings(&base()).is_empty());
    let mut v = base();
    v["steps"][2]["config"]
        .as_object_mut()
        .unwrap()
        .remove("headers");
    let ws = warnings(&v);
    assert!(
        only(&ws, "lint_unguarded_write")
            .message
            .contains("retries"),
        "a retrying POST without a key is flagged even behind a claim: {}",
        listing(&ws)
    );
    v["steps"][2]["config"]["retries"] = json!(0);
    assert!(warnings(&v).is_empty(), "{}", listing(&warnings(&v)));
    // But not a claim on only one of two paths.
    v["edges"]
        .as_array_mut()
        .unwrap()
        .push(json!({ "from": "start", "to": "call" }));
    assert_eq!(
        only(&warnings(&v), "lint_unguarded_write").step.as_deref(),
        Some("call")
    );
}

#[test]
fn lint_publish_output_with_a_per_run_key() {
    let v = json!({
        "id": "pub",
        "steps": [
            { "id": "start", "kind": "manual_trigger", "config": {} },
            { "id": "pub", "kind": "publish_output", "config": { "url": "http://127.0.0.1:9/x" } },
            { "id": "pub2", "kind": "publish_output", "config": {
                "url": "http://127.0.0.1:9/x", "idempotency_key": "{{ input.id }}" } }
        ],
        "edges": [ { "from": "start", "to": "pub" }, { "from": "pub", "to": "pub2" } ]
    });
    let ws = warnings(&v);
    assert_eq!(
        only(&ws, "lint_unguarded_write").step.as_deref(),
        Some("pub")
    );
}

#[test]
fn lint_retries_exceeding_the_deadline() {
    let mut v = base();
    // 6 attempts × 10 s timeout = 60 s > 50 s.
    v["steps"][2]["config"]["retries"] = json!(5);
    v["steps"][2]["config"]["timeout_s"] = json!(10);
    let ws = warnings(&v);
    let p = only(&ws, "lint_retries_exceed_deadline");
    assert_eq!(p.step.as_deref(), Some("call"));
    assert!(p.path.starts_with("steps[2]"), "{p}");
    // Waits count: 3 × 10 s + 2 waits capped at 30 s = 90 s > 50 s.
    let mut v = base();
    v["steps"][2]["config"]["retries"] = json!(2);
    v["steps"][2]["config"]["retry_base_delay_ms"] = json!(60_000);
    only(&warnings(&v), "lint_retries_exceed_deadline");
    // The defaults fit in the default deadline (3 × 10 s + 0.5 s + 1 s).
    assert!(warnings(&base()).is_empty());
    // And a longer deadline clears it.
    let mut v = base();
    v["steps"][2]["config"]["retries"] = json!(5);
    v["settings"]["run_timeout_s"] = json!(600);
    assert!(warnings(&v).is_empty(), "{}", listing(&warnings(&v)));
}

#[test]
fn lint_retry_once_on_a_retrying_step() {
    let mut v = base();
    v["steps"].as_array_mut().unwrap().push(json!({
        "id": "again", "kind": "error_handler", "config": { "mode": "retry_once" } }));
    v["edges"]
        .as_array_mut()
        .unwrap()
        .push(json!({ "from": "call", "port": "error", "to": "again" }));
    let ws = warnings(&v);
    let p = only(&ws, "lint_stacked_retries");
    assert_eq!(p.step.as_deref(), Some("again"));
    assert!(p.message.contains("call"), "{p}");
    // With the sender's retries the multiplication is spelled out: (2+1+1) × (5+1) = 24.
    v["settings"]["sender_retries"] = json!(5);
    let p = only(&warnings(&v), "lint_stacked_retries").clone();
    assert!(p.message.contains("24"), "{p}");
    // Not on a step without retries.
    v["steps"][2]["config"]["retries"] = json!(0);
    assert!(warnings(&v)
        .iter()
        .all(|p| p.code != "lint_stacked_retries"));
    v["steps"][2]["config"]["retries"] = json!(3);
    v["steps"][2]["config"]["retry_strategy"] = json!("none");
    assert!(warnings(&v)
        .iter()
        .all(|p| p.code != "lint_stacked_retries"));
}

#[test]
fn lint_claim_ttl_shorter_than_the_dedupe_window() {
    let mut v = base();
    v["steps"][0] = json!({ "id": "start", "kind": "webhook_trigger",
                            "config": { "dedupe_window_s": 86400 } });
    v["steps"][1]["config"]["ttl_s"] = json!(3600);
    let ws = warnings(&v);
    let p = only(&ws, "lint_claim_ttl_short");
    assert_eq!(p.step.as_deref(), Some("claim"));
    assert_eq!(p.path, "steps[1].config.ttl_s");
    assert!(p.message.contains("86400"), "{p}");
    // Default window (24 h) too.
    v["steps"][0]["config"] = json!({});
    only(&warnings(&v), "lint_claim_ttl_short");
    // A TTL at least the window, or no TTL, is fine.
    v["steps"][1]["config"]["ttl_s"] = json!(86400);
    assert!(warnings(&v).is_empty(), "{}", listing(&warnings(&v)));
    v["steps"][1]["config"]
        .as_object_mut()
        .unwrap()
        .remove("ttl_s");
    assert!(warnings(&v).is_empty(), "{}", listing(&warnings(&v)));
}

// ---------------------------------------------------------------------------------------------
// Secrets a workflow reads (issue 42, hole 5)
// ---------------------------------------------------------------------------------------------

#[test]
fn secrets_are_declared_placed_and_listed() {
    // Declared and read in a header: clean.
    let mut wf = base();
    wf["secrets"] = json!(["API_KEY"]);
    wf["steps"][2]["config"]["headers"]["Authorization"] = json!("Bearer {{ env.API_KEY }}");
    assert!(check(&wf).is_empty(), "{}", listing(&check(&wf)));

    // Read but not declared: the run would fail on it.
    let mut undeclared = wf.clone();
    undeclared["secrets"] = json!([]);
    let ws = warnings(&undeclared);
    let p = only(&ws, "lint_secret_undeclared");
    assert_eq!(p.path, "steps[2].config.headers");
    assert_eq!(p.step.as_deref(), Some("call"));
    assert!(p.message.contains("env.API_KEY"), "{}", p.message);

    // In a body, where no secret may render; and a declared name nobody reads.
    let mut misplaced = wf.clone();
    misplaced["secrets"] = json!(["API_KEY", "UNUSED_TOKEN"]);
    misplaced["steps"][3]["config"]["fields"]["leak"] = json!("{{ env.API_KEY }}");
    let ws = warnings(&misplaced);
    let p = only(&ws, "lint_secret_misplaced");
    assert_eq!(p.path, "steps[3].config.fields");
    assert!(p.message.contains("env.API_KEY"), "{}", p.message);
    let p = only(&ws, "lint_secret_unused");
    assert!(p.message.contains("UNUSED_TOKEN"), "{}", p.message);

    // A name that is not an env variable's.
    let mut bad = wf.clone();
    bad["secrets"] = json!(["API_KEY", "1BAD", 7]);
    let es = errors(&bad);
    assert_eq!(
        es.iter().filter(|p| p.code == "bad_field").count(),
        2,
        "{}",
        listing(&es)
    );
    assert!(
        es.iter().any(|p| p.path == "secrets[1]"),
        "{}",
        listing(&es)
    );

    // `fluxo validate` lists what each declared secret is read by.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("wf.json");
    std::fs::write(&file, serde_json::to_string(&misplaced).unwrap()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_fluxo"))
        .arg("validate")
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("secret env.API_KEY: read by call, done"),
        "{text}"
    );
    assert!(
        text.contains("secret env.UNUSED_TOKEN: read by no step"),
        "{text}"
    );
}
