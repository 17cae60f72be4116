//! Property tests over generated inputs (issue 13): nothing that comes from outside panics.
//!
//! * **Workflow JSON**: structurally random documents and mutated copies of every shipped
//!   workflow → validation answers a compiled workflow with no error, or at least one error
//!   naming what and where; a workflow that compiles also dry-runs to a final status.
//! * **Templates**: random template strings over random inputs and env → compiling and
//!   rendering answer a value or a template error; in a run, the step fails with
//!   `template_error` and nothing else.
//! * **The webhook door**: random bytes in `Idempotency-Key`, `X-Fluxo-Event-Id` and
//!   `X-Fluxo-Signature` (and signatures with extreme timestamps, and valid ones), random
//!   bodies (bytes, JSON, mutated real payloads) sent as raw HTTP/1.1 to a real listener →
//!   an answer, always 2xx or 4xx, never 5xx, never a dropped connection.
//!
//! CI-sized by default (each property's `cases` below; the whole file stays well under 20 s
//! in a debug build); `PROPTEST_CASES=N` overrides every property, and `make fuzz` runs them
//! with many more cases in release mode.

mod common;

use std::io::{Read, Write};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use proptest::prelude::*;
use serde_json::{json, Value};

use common::server::{hook_workflow, Setup, TestServer};
use fluxo::clock::{Clock, ManualClock};
use fluxo::run::{Mode, RunStatus, Trigger};
use fluxo::runtime::{Engine, RunRequest};
use fluxo::steps::Registry;
use fluxo::store::InMemoryStore;
use fluxo::workflow::template::{EnvView, Scope, Templates};
use fluxo::workflow::{check_text, check_value, Severity};

/// `default` cases, or `PROPTEST_CASES` when set (`make fuzz`).
fn config(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        // Shrinking a slow failure must not look like a hang.
        max_shrink_time: 30_000,
        ..ProptestConfig::default()
    }
}

/// One runtime for every async part of every case.
static RT: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
});

static REGISTRY: LazyLock<Registry> = LazyLock::new(Registry::builtin);

// ---------------------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------------------

const WORDS: &[&str] = &[
    "",
    "id",
    "hook",
    "a",
    "b",
    "c",
    "start",
    "out",
    "error",
    "default",
    "skip",
    "webhook_trigger",
    "manual_trigger",
    "memory",
    "router",
    "error_handler",
    "http_request",
    "publish_output",
    "transform",
    "find_or_create",
    "POST",
    "GET",
    "PATCH",
    "write",
    "read",
    "delete",
    "persistent",
    "run",
    "log",
    "retry_once",
    "fallback",
    "rethrow",
    "exponential",
    "fixed",
    "none",
    "http://127.0.0.1:1/x",
    "{{ env.CRM_URL }}/deals",
    "{{ input.url }}",
    "ftp://x/",
    "{{ input.id }}",
    "{{ input.data.object.id }}",
    "{{ steps.a.output }}",
    "{{ env.MISSING }}",
    "{{ input.id | default('none') }}",
    "{{",
    "}}",
    "{% if input.id %}x{% endif %}",
    "{{ error.message }}",
    "input.amount > 10",
    "input[\"a.b\"]",
    "evt_1",
    "-1",
    "1e309",
    "\u{0}",
    "é",
    "日本",
    "\u{202e}",
    " ",
];

const KEYS: &[&str] = &[
    "id",
    "name",
    "version",
    "steps",
    "edges",
    "settings",
    "kind",
    "config",
    "from",
    "to",
    "port",
    "method",
    "url",
    "headers",
    "query",
    "body",
    "fields",
    "operation",
    "namespace",
    "key",
    "value",
    "allow_overwrite",
    "ttl_s",
    "scope",
    "routes",
    "condition",
    "mode",
    "fallback_value",
    "run_timeout_s",
    "retries",
    "timeout_s",
    "retry_strategy",
    "retry_base_delay_ms",
    "max_retry_delay_s",
    "dedupe_key",
    "dedupe_window_s",
    "signing_secret",
    "sample_input",
    "dry_run",
    "idempotency_key",
    "Idempotency-Key",
    "description",
    "position",
    "x",
    "y",
    "",
];

fn word() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => prop::sample::select(WORDS).prop_map(String::from),
        2 => ".{0,12}",
        1 => Just("x".repeat(300)),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(KEYS).prop_map(String::from),
        1 => ".{0,8}",
    ]
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-5i64..100).prop_map(|n| json!(n)),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f)
            .map(Value::Number)),
        word().prop_map(Value::String),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(4, 40, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// A document shaped like a workflow, with random parts.
fn workflow_like() -> impl Strategy<Value = Value> {
    let step = (
        prop::sample::select(&["a", "b", "c", "hook", "start", ""][..]),
        word(),
        json_value(),
    )
        .prop_map(|(id, kind, config)| json!({"id": id, "kind": kind, "config": config}));
    let edge = (
        prop::sample::select(&["a", "b", "c", "hook", "x"][..]),
        prop::sample::select(&["a", "b", "c", "hook", "x"][..]),
        prop::option::of(word()),
    )
        .prop_map(|(f, t, p)| {
            let mut e = json!({"from": f, "to": t});
            if let Some(p) = p {
                e["port"] = json!(p);
            }
            e
        });
    (
        word(),
        json_leaf(),
        prop::collection::vec(step, 0..5),
        prop::collection::vec(edge, 0..6),
        prop::option::of(json_value()),
    )
        .prop_map(|(id, version, steps, edges, settings)| {
            let mut wf = json!({"id": id, "name": "n", "version": version,
                                "steps": steps, "edges": edges});
            if let Some(s) = settings {
                wf["settings"] = s;
            }
            wf
        })
}

/// The shipped workflows (`workflows/*.json`), each valid.
static SHIPPED: LazyLock<Vec<Value>> = LazyLock::new(|| {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("workflows");
    let mut out: Vec<Value> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            (p.extension()? == "json")
                .then(|| serde_json::from_slice(&std::fs::read(&p).ok()?).ok())?
        })
        .collect();
    out.sort_by_key(|v| v["id"].as_str().unwrap_or("").to_string());
    assert!(out.len() >= 3, "shipped workflows");
    out
});

#[derive(Debug, Clone)]
enum Mutation {
    Remove,
    Replace(Value),
    RenameKey(String),
    Duplicate,
    Swap(usize),
}

fn mutation() -> impl Strategy<Value = (usize, Mutation)> {
    (
        any::<usize>(),
        prop_oneof![
            Just(Mutation::Remove),
            json_value().prop_map(Mutation::Replace),
            key().prop_map(Mutation::RenameKey),
            Just(Mutation::Duplicate),
            any::<usize>().prop_map(Mutation::Swap),
        ],
    )
}

/// Every path of `v` (object keys and array indexes), the root first.
fn paths(v: &Value, here: &mut Vec<Seg>, out: &mut Vec<Vec<Seg>>) {
    out.push(here.clone());
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                here.push(Seg::Key(k.clone()));
                paths(x, here, out);
                here.pop();
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                here.push(Seg::Index(i));
                paths(x, here, out);
                here.pop();
            }
        }
        _ => {}
    }
}

#[derive(Debug, Clone)]
enum Seg {
    Key(String),
    Index(usize),
}

fn at<'a>(v: &'a mut Value, path: &[Seg]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, s| match s {
        Seg::Key(k) => v.get_mut(k.as_str()),
        Seg::Index(i) => v.get_mut(*i),
    })
}

fn mutate(v: &mut Value, (pick, m): &(usize, Mutation)) {
    let mut all = Vec::new();
    paths(v, &mut Vec::new(), &mut all);
    let path = all[pick % all.len()].clone();
    let Some((last, parent_path)) = path.split_last() else {
        if let Mutation::Replace(x) = m {
            *v = x.clone();
        }
        return;
    };
    let Some(parent) = at(v, parent_path) else {
        return;
    };
    match (parent, last) {
        (Value::Object(o), Seg::Key(k)) => match m {
            Mutation::Remove => {
                o.remove(k);
            }
            Mutation::Replace(x) => {
                o.insert(k.clone(), x.clone());
            }
            Mutation::RenameKey(n) => {
                if let Some(x) = o.remove(k) {
                    o.insert(n.clone(), x);
                }
            }
            Mutation::Duplicate => {
                let x = o[k].clone();
                o.insert(format!("{k}{k}"), x);
            }
            Mutation::Swap(j) => {
                let keys: Vec<String> = o.keys().cloned().collect();
                let other = keys[j % keys.len()].clone();
                let a = o[k].clone();
                let b = o[&other].clone();
                o.insert(k.clone(), b);
                o.insert(other, a);
            }
        },
        (Value::Array(a), Seg::Index(i)) => match m {
            Mutation::Remove => {
                a.remove(*i);
            }
            Mutation::Replace(x) => a[*i] = x.clone(),
            Mutation::RenameKey(n) => a[*i] = Value::String(n.clone()),
            Mutation::Duplicate => {
                let x = a[*i].clone();
                a.insert(*i, x);
            }
            Mutation::Swap(j) => {
                let n = a.len();
                a.swap(*i, j % n);
            }
        },
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// Workflow JSON
// ---------------------------------------------------------------------------------------------

/// Validation's contract: compiled with no error, or not compiled with at least one error;
/// every problem says what (code, message).
fn check_contract(v: &Value) -> Result<Option<fluxo::workflow::Compiled>, TestCaseError> {
    let (compiled, problems) = check_value(v, &REGISTRY);
    let errors = problems
        .iter()
        .filter(|p| p.severity == Severity::Error)
        .count();
    for p in &problems {
        prop_assert!(
            !p.code.is_empty() && !p.message.is_empty(),
            "problem without a code or message: {:?}",
            p
        );
    }
    match &compiled {
        Some(_) => prop_assert_eq!(errors, 0, "compiled with errors: {:?}", problems),
        None => prop_assert!(errors > 0, "not compiled and no error: {:?}", problems),
    }
    // The text form says the same.
    let text = serde_json::to_string(v).unwrap();
    let (c2, p2) = check_text(&text, &REGISTRY);
    prop_assert_eq!(c2.is_some(), compiled.is_some());
    prop_assert_eq!(p2.len(), problems.len());
    Ok(compiled)
}

/// A dry run of a compiled workflow ends in a final status, whatever the input.
fn dry_run_ends(wf: &fluxo::workflow::Compiled, input: Value) -> Result<(), TestCaseError> {
    let engine = Engine::new(
        Arc::new(InMemoryStore::new()),
        Arc::new(ManualClock::at_2026()) as Arc<dyn Clock>,
    );
    let run = RT
        .block_on(engine.run(wf, RunRequest::new(input, Trigger::Cli, Mode::Dry)))
        .map_err(|e| TestCaseError::fail(format!("store: {e}")))?;
    prop_assert!(run.status.is_final(), "run ended {}", run.status);
    Ok(())
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn validation_answers_random_documents(v in prop_oneof![json_value(), workflow_like()]) {
        if let Some(wf) = check_contract(&v)? {
            dry_run_ends(&wf, json!({}))?;
        }
    }

    #[test]
    fn validation_answers_mutated_shipped_workflows(
        which in any::<usize>(),
        mutations in prop::collection::vec(mutation(), 1..4),
        input in json_value(),
    ) {
        let mut v = SHIPPED[which % SHIPPED.len()].clone();
        for m in &mutations {
            mutate(&mut v, m);
        }
        if let Some(wf) = check_contract(&v)? {
            dry_run_ends(&wf, input)?;
        }
    }

    #[test]
    fn validation_answers_truncated_text(which in any::<usize>(), cut in any::<usize>()) {
        let text = serde_json::to_string_pretty(&SHIPPED[which % SHIPPED.len()]).unwrap();
        let mut end = cut % (text.len() + 1);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let (c, problems) = check_text(&text[..end], &REGISTRY);
        prop_assert!(c.is_some() || problems.iter().any(|p| p.severity == Severity::Error));
    }
}

// ---------------------------------------------------------------------------------------------
// Templates
// ---------------------------------------------------------------------------------------------

const TOKENS: &[&str] = &[
    "{{ ",
    " }}",
    "{% ",
    " %}",
    "{#",
    "#}",
    "input",
    "env",
    "steps",
    "run",
    "error",
    ".",
    "[",
    "]",
    "(",
    ")",
    "\"a.b\"",
    "'x'",
    "|",
    "default(",
    "upper",
    "lower",
    "length",
    "int",
    "float",
    "tojson",
    "join",
    "replace(",
    "first",
    "last",
    "abs",
    "round",
    "trim",
    " + ",
    " - ",
    " * ",
    " / ",
    " // ",
    " % ",
    " ~ ",
    " == ",
    " != ",
    " < ",
    " and ",
    " or ",
    " not ",
    " is ",
    "defined",
    "none",
    "true",
    "if ",
    "else",
    "endif",
    "for x in ",
    "endfor",
    "range(",
    " 3 ",
    " 0 ",
    " -1 ",
    " 9 ",
    "set y = ",
    "x",
    "y",
    "id",
    "data",
    "object",
    "amount",
    "CRM_URL",
    "API_KEY",
    ",",
    ":",
    "{",
    "}",
    " ",
    "\n",
    "é",
    "\u{0}",
    "loop.index",
    "break",
    "continue",
    " * 100000000000",
    "[1]",
    "'ab'",
    " | indent(",
    " | join",
    "namespace(",
];

fn template_source() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            8 => prop::sample::select(TOKENS).prop_map(String::from),
            1 => ".{0,3}",
        ],
        0..24,
    )
    .prop_map(|t| t.concat())
}

fn env_map() -> impl Strategy<Value = std::collections::BTreeMap<String, String>> {
    prop::collection::btree_map(
        prop::sample::select(&["CRM_URL", "API_KEY", "X", "EMPTY"][..]).prop_map(String::from),
        word(),
        0..4,
    )
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn templates_render_or_fail_with_a_template_error(
        src in template_source(),
        input in json_value(),
        env in env_map(),
    ) {
        let scope = Scope::new(&input, &json!({"id": "r", "attempt": 1}), EnvView::plain(&env));
        let ctx = scope.context();
        let mut t = Templates::new();
        let added = t.add(&src);
        // Rendered whether it was added (compiled once) or not (compiled on the spot).
        let rendered = t.render_str(&src, &ctx, "field");
        if added.is_err() {
            prop_assert!(rendered.is_err(), "a syntax error rendered: {:?}", rendered);
        }
        if let Err(e) = &rendered {
            prop_assert_eq!(&e.field, "field");
            prop_assert!(!e.to_string().is_empty());
        }
        let _ = t.eval_value(&src, &ctx, "field");
        let _ = t.eval_condition(&src, &ctx, "field");
        let _ = t.render_value(&json!({"a": [src.clone(), {"b": src}]}), &ctx, "");
    }
}

/// Operands for the metered-operator properties: small values of every kind an operator takes.
const OPERANDS: &[&str] = &[
    "1",
    "-2",
    "3.5",
    "0",
    "'ab'",
    "''",
    "'é'",
    "[1, 'x']",
    "[]",
    "input.n",
    "input.s",
    "input.l",
    "input.o",
    "none",
    "true",
    "(input.n + 1)",
    "range(3)",
];
const OPERATORS: &[&str] = &[" + ", " * ", " ~ ", " - ", " // ", " == ", " ** "];

/// A random expression over [`OPERANDS`], with parentheses, filters and a conditional.
fn small_expr() -> impl Strategy<Value = String> {
    let leaf = prop::sample::select(OPERANDS).prop_map(String::from);
    leaf.prop_recursive(4, 24, 2, |inner| {
        prop_oneof![
            (
                inner.clone(),
                prop::sample::select(OPERATORS),
                inner.clone()
            )
                .prop_map(|(a, op, b)| format!("{a}{op}{b}")),
            inner.clone().prop_map(|a| format!("({a})")),
            inner.clone().prop_map(|a| format!("{a} | length")),
            inner.clone().prop_map(|a| format!("{a} | string")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("{a} if input.n else {b}")),
            (inner.clone(), inner).prop_map(|(a, b)| format!("[{a}, {b}][0]")),
        ]
    })
}

/// Size-amplifying expressions: repeats, doubling loops and filters whose arguments choose
/// the size, with factors from harmless to 10^11.
fn amplifying() -> impl Strategy<Value = String> {
    let n = prop::sample::select(&["3", "1000", "100000000", "100000000000", "input.n"][..]);
    let base = prop::sample::select(&["'ab'", "[1]", "input.s", "[input.s]", "range(9)"][..]);
    let step = (
        prop::sample::select(
            &[
                "* N",
                "~ X",
                "+ X",
                "| indent(N)",
                "| replace('a', 'aaaaaaaa')",
                "| join(X)",
                "| list",
                "| tojson",
                "| string",
                "| batch(N)",
                "| slice(N) | list",
                "| escape",
                "| tojson(indent=N)",
                "| format(N)",
                "| center(N)",
            ][..],
        ),
        n.clone(),
        base.clone(),
    )
        .prop_map(|(op, n, x)| op.replace('N', n).replace('X', x));
    prop_oneof![
        (base.clone(), prop::collection::vec(step, 1..5)).prop_map(|(b, steps)| {
            steps.iter().fold(b.to_string(), |acc, s| format!("({acc}) {s}"))
        }),
        (base, 0u32..64, prop::sample::select(&["~", "+"][..])).prop_map(|(b, k, op)| format!(
            "{{% set ns = namespace(v={b}) %}}{{% for i in range({k}) %}}{{% set ns.v = ns.v {op} ns.v %}}{{% endfor %}}{{{{ ns.v | length }}}}"
        )),
    ]
}

proptest! {
    #![proptest_config(config(512))]

    /// A metered operator gives minijinja's own answer: the rewrite into guarded calls changes
    /// no value and no error into a success (or back) on values within the budget.
    #[test]
    fn metered_operators_answer_as_minijinja_does(expr in small_expr(), n in -3i64..4) {
        let input = json!({"n": n, "s": "xy", "l": [1, 2], "o": {"a": 1}});
        let scope = Scope::new(&input, &json!({}), EnvView::plain(&Default::default()));
        let mut t = Templates::new();
        let src = format!("<{{{{ {expr} }}}}>");
        let ours = t.add(&src).map_err(|e| e.message).and_then(|()| {
            t.render_str(&src, &scope.context(), "f").map_err(|e| e.message)
        });
        let mut plain = minijinja::Environment::new();
        plain.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
        plain.set_formatter(|out, state, value| {
            if value.is_none() {
                return Ok(());
            }
            minijinja::escape_formatter(out, state, value)
        });
        let theirs = plain.render_str(&src, minijinja::context! { input => input });
        match (&ours, &theirs) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a.as_str(), Some(b.as_str()), "{}", src),
            (Err(_), Err(_)) => {}
            _ => prop_assert!(false, "{}: metered {:?}, minijinja {:?}", src, ours, theirs),
        }
    }

    /// However much a template asks for, a render answers: a value within the budget, or a
    /// template error. (Without the budget, several of these ask for terabytes and abort.)
    #[test]
    fn amplifying_templates_stay_within_the_memory_budget(expr in amplifying(), n in 0u64..200_000_000_000) {
        let input = json!({"n": n, "s": "ab".repeat(500)});
        let scope = Scope::new(&input, &json!({}), EnvView::plain(&Default::default()));
        let src = if expr.starts_with("{%") { expr.clone() } else { format!("{{{{ {expr} }}}}") };
        let mut t = Templates::new();
        if t.add(&src).is_ok() {
            match t.render_str(&src, &scope.context(), "f") {
                Ok(v) => prop_assert!(
                    serde_json::to_string(&v).unwrap().len() <= 2 * fluxo::workflow::template::MAX_VALUE_BYTES,
                    "{}", src
                ),
                Err(e) => prop_assert!(!e.message.is_empty()),
            }
        }
    }
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn a_template_in_a_run_fails_only_with_template_error(
        src in template_source(),
        input in json_value(),
    ) {
        let wf = json!({
            "id": "t", "name": "t", "version": 1,
            "steps": [
                {"id": "start", "kind": "manual_trigger", "config": {}},
                {"id": "shape", "kind": "transform", "config": {"fields": {"v": src}}}
            ],
            "edges": [{"from": "start", "to": "shape"}]
        });
        let (compiled, problems) = check_value(&wf, &REGISTRY);
        let Some(compiled) = compiled else {
            prop_assert!(
                problems.iter().any(|p| p.severity == Severity::Error
                    && p.path.contains("fields")),
                "refused without naming the field: {:?}", problems
            );
            return Ok(());
        };
        let engine = Engine::new(
            Arc::new(InMemoryStore::new()),
            Arc::new(ManualClock::at_2026()) as Arc<dyn Clock>,
        );
        let run = RT
            .block_on(engine.run(&compiled, RunRequest::new(input, Trigger::Cli, Mode::Live)))
            .map_err(|e| TestCaseError::fail(format!("store: {e}")))?;
        let shape = run.step("shape").expect("shape ran");
        match &shape.error {
            None => prop_assert_eq!(run.status, RunStatus::Succeeded),
            Some(e) => {
                prop_assert_eq!(e.code.as_str(), "template_error", "{:?}", e);
                prop_assert!(e.message.contains("shape"), "{:?}", e);
                prop_assert_eq!(run.status, RunStatus::Failed);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The webhook door, over raw HTTP/1.1
// ---------------------------------------------------------------------------------------------

const SIGNING_SECRET: &str = "whsec_props_0123456789";

struct Door {
    server: TestServer,
    addr: String,
    now_s: i64,
}

static DOOR: LazyLock<Door> = LazyLock::new(|| {
    let server = RT.block_on(
        Setup::new()
            .workflow(hook_workflow("plain", json!({})))
            .workflow(hook_workflow(
                "keyed",
                json!({"dedupe_key": "{{ input.id }}-{{ input.type }}"}),
            ))
            .workflow(hook_workflow(
                "signed",
                json!({"signing_secret": SIGNING_SECRET}),
            ))
            .start(),
    );
    let addr = server.url.trim_start_matches("http://").to_string();
    let now_s = server.clock.now_ms() / 1000;
    Door {
        server,
        addr,
        now_s,
    }
});

/// Header bytes as a client could send them: anything but CR and LF (which would end the
/// header, not be part of it).
fn header_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..300),
        "[ -~]{0,300}".prop_map(String::into_bytes),
        Just(b"\"evt_\\\"quoted\\\\\"".to_vec()),
        Just(b"\"unterminated".to_vec()),
        Just(Vec::new()),
        Just(vec![b'a'; 256]),
        Just("évt-ünïcode".as_bytes().to_vec()),
    ]
    .prop_map(|mut v| {
        v.retain(|b| *b != b'\r' && *b != b'\n');
        v
    })
}

#[derive(Debug, Clone)]
enum Sig {
    Random(Vec<u8>),
    /// `t=<t>,v1=<hex>` with any timestamp (overflow at the extremes).
    Stamped(i64, Vec<u8>),
    /// Valid for the body at `now + skew` seconds.
    Valid(i64),
}

fn signature() -> impl Strategy<Value = Sig> {
    prop_oneof![
        header_bytes().prop_map(Sig::Random),
        (
            prop_oneof![
                Just(i64::MIN),
                Just(i64::MAX),
                Just(i64::MIN + 1),
                Just(0i64),
                Just(-1i64),
                any::<i64>()
            ],
            prop::collection::vec(any::<u8>(), 0..40)
        )
            .prop_map(|(t, mac)| Sig::Stamped(t, mac)),
        (-400i64..400).prop_map(Sig::Valid),
    ]
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..512),
        json_value().prop_map(|v| serde_json::to_vec(&v).unwrap()),
        (json_value(), any::<usize>()).prop_map(|(v, cut)| {
            let b = serde_json::to_vec(&v).unwrap();
            b[..cut % (b.len() + 1)].to_vec()
        }),
        (any::<usize>(), prop::collection::vec(mutation(), 0..3)).prop_map(|(i, ms)| {
            let mut v: Value = serde_json::from_slice(&fixture_payloads()[i % 3]).unwrap();
            for m in &ms {
                mutate(&mut v, m);
            }
            serde_json::to_vec(&v).unwrap()
        }),
        Just(b"{\"id\": \"evt_1\", \"type\": \"t\"}".to_vec()),
    ]
}

fn fixture_payloads() -> &'static [Vec<u8>] {
    static P: LazyLock<Vec<Vec<u8>>> = LazyLock::new(|| {
        [
            "stripe/invoice.paid.json",
            "stripe/charge.succeeded.json",
            "github/issues.opened.payload.json",
        ]
        .iter()
        .map(|p| std::fs::read(common::server::fixture(p)).unwrap())
        .collect()
    });
    &P
}

/// Send one raw request; the status of the answer, or why there was none.
fn raw_request(addr: &str, head: &[u8], body: &[u8]) -> Result<(u16, String), String> {
    let mut s = std::net::TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(20))).ok();
    s.write_all(head).map_err(|e| e.to_string())?;
    s.write_all(body).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    s.read_to_end(&mut out)
        .map_err(|e| format!("reading the answer: {e}"))?;
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|r| r.get(..3))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no HTTP answer (connection dropped?): {text:?}"))?;
    Ok((status, text))
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn the_webhook_door_answers_2xx_or_4xx(
        wf in prop::sample::select(&["plain", "keyed", "signed", "missing"][..]),
        key in prop::option::of(header_bytes()),
        event_id in prop::option::of(header_bytes()),
        sig in prop::option::of(signature()),
        content_type in prop_oneof![
            4 => Just(Some(b"application/json".to_vec())),
            1 => Just(None),
            1 => header_bytes().prop_map(Some),
        ],
        body in body(),
    ) {
        let door = &*DOOR;
        let mut head = format!(
            "POST /hooks/{wf} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
            door.addr,
            body.len()
        )
        .into_bytes();
        let mut header = |name: &str, value: &[u8]| {
            head.extend_from_slice(name.as_bytes());
            head.extend_from_slice(b": ");
            head.extend_from_slice(value);
            head.extend_from_slice(b"\r\n");
        };
        if let Some(ct) = &content_type {
            header("Content-Type", ct);
        }
        if let Some(k) = &key {
            header("Idempotency-Key", k);
        }
        if let Some(e) = &event_id {
            header("X-Fluxo-Event-Id", e);
        }
        match &sig {
            None => {}
            Some(Sig::Random(b)) => header("X-Fluxo-Signature", b),
            Some(Sig::Stamped(t, mac)) => {
                header("X-Fluxo-Signature", format!("t={t},v1={}", hex::encode(mac)).as_bytes())
            }
            Some(Sig::Valid(skew)) => header(
                "X-Fluxo-Signature",
                fluxo::server::hooks::sign(SIGNING_SECRET, door.now_s + skew, &body).as_bytes(),
            ),
        }
        head.extend_from_slice(b"\r\n");
        let (status, text) = raw_request(&door.addr, &head, &body)
            .map_err(TestCaseError::fail)?;
        prop_assert!(
            (200..500).contains(&status),
            "answered {}: {}\nrequest head: {:?}",
            status, text, String::from_utf8_lossy(&head)
        );
        if (200..300).contains(&status) {
            let json_start = text.find("\r\n\r\n").map(|i| i + 4).unwrap_or(0);
            let answer: Value = serde_json::from_str(text[json_start..].trim())
                .map_err(|e| TestCaseError::fail(format!("2xx without JSON ({e}): {text}")))?;
            prop_assert!(answer["run_id"].is_string(), "{}", text);
        }
    }
}

#[test]
fn the_door_still_answers_after_the_properties() {
    // Runs after or alongside the properties: the listener is alive and healthy.
    let door = &*DOOR;
    let head = format!(
        "GET /healthz HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        door.addr
    );
    let (status, _) = raw_request(&door.addr, head.as_bytes(), b"").unwrap();
    assert_eq!(status, 200);
    assert!(door.server.url.ends_with(&door.addr));
}

// ---------------------------------------------------------------------------------------------
// A webhook body taken in as a run input
// ---------------------------------------------------------------------------------------------

/// JSON text as a sender may write it: members may repeat, strings may be escaped (`\uXXXX`,
/// even a lone surrogate), numbers may be past f64's range, nesting deep.
#[derive(Debug, Clone)]
enum Text {
    Lit(&'static str),
    Num(String),
    Str(String, bool),
    Arr(Vec<Text>),
    Obj(Vec<((String, bool), Text)>),
}

/// A string as JSON text; `escape`: every other character as `\uXXXX`.
fn json_string(s: &str, escape: bool) -> String {
    let mut out = String::from('"');
    for (i, c) in s.chars().enumerate() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if escape && i % 2 == 0 && (c as u32) < 0x10000 => {
                out.push_str(&format!("\\u{:04X}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl Text {
    fn render(&self, ws: &str, out: &mut String) {
        match self {
            Text::Lit(l) => out.push_str(l),
            Text::Num(n) => out.push_str(n),
            Text::Str(s, e) => out.push_str(&json_string(s, *e)),
            Text::Arr(items) => {
                out.push('[');
                for (i, t) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                        out.push_str(ws);
                    }
                    t.render(ws, out);
                }
                out.push(']');
            }
            Text::Obj(members) => {
                out.push('{');
                out.push_str(ws);
                for (i, ((name, e), t)) in members.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&json_string(name, *e));
                    out.push_str(ws);
                    out.push(':');
                    t.render(ws, out);
                }
                out.push_str(ws);
                out.push('}');
            }
        }
    }
    /// Whether an object repeats a member name (compared decoded).
    fn repeats_a_name(&self) -> bool {
        match self {
            Text::Arr(items) => items.iter().any(Text::repeats_a_name),
            Text::Obj(members) => {
                let mut names = std::collections::HashSet::new();
                members.iter().any(|((n, _), _)| !names.insert(n.as_str()))
                    || members.iter().any(|(_, t)| t.repeats_a_name())
            }
            _ => false,
        }
    }
}

fn body_text() -> impl Strategy<Value = Text> {
    let string = prop_oneof![
        4 => prop::sample::select(vec![
            "cus_QXgbTfeWzA", "in_1Nv9", "evt_1", "ada@example.com", "ORD-1042", "paid",
            "two words 12", "Hello-World", "a1", "é_ü_1", "𝄞_clef_1", "\\ud800 not an escape",
        ])
        .prop_map(String::from),
        1 => ".{0,10}",
    ];
    let leaf = prop_oneof![
        prop::sample::select(vec!["true", "false", "null"]).prop_map(Text::Lit),
        prop::sample::select(vec![
            "0",
            "-7",
            "42",
            "1.5",
            "-2.5e-3",
            "1e300",
            "1e301",
            "-1e309",
            "1e400",
            "123456789012345678901234567890",
            "1E+2",
        ])
        .prop_map(|n| Text::Num(n.to_string())),
        (string.clone(), any::<bool>()).prop_map(|(s, e)| Text::Str(s, e)),
        // A lone surrogate: a `Value` refuses it.
        Just(Text::Lit("\"\\ud800x\"")),
    ];
    let name = prop_oneof![
        prop::sample::select(vec!["id", "a", "b", "customer", "é"]).prop_map(String::from),
        ".{0,4}",
    ];
    leaf.prop_recursive(5, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Text::Arr),
            prop::collection::vec(((name.clone(), any::<bool>()), inner), 0..6).prop_map(Text::Obj),
        ]
    })
}

proptest! {
    #![proptest_config(config(400))]

    /// A body is accepted exactly when serde_json reads it as a `Value`, and then it reads as
    /// that value; its text is kept unless an object repeats a member name; its search values
    /// are those of the value (the same rule, found without building it).
    #[test]
    fn a_body_reads_as_serde_reads_it(t in body_text(), wide in any::<bool>(), depth in 0usize..140) {
        let mut text = String::new();
        // Sometimes nested deep, around serde_json's limit of 128 levels.
        let wrap = if depth > 90 { depth } else { 0 };
        text.push_str(&"[".repeat(wrap));
        t.render(if wide { " \n\t" } else { "" }, &mut text);
        text.push_str(&"]".repeat(wrap));
        let ours = fluxo::run::RunInput::from_json_bytes(text.as_bytes());
        match serde_json::from_str::<Value>(&text) {
            Err(e) => prop_assert!(ours.is_err(), "serde refuses ({e}) but it was taken: {text}"),
            Ok(v) => {
                let input = ours.map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
                prop_assert_eq!(input.value(), &v);
                prop_assert_eq!(input.raw().is_some(), !t.repeats_a_name(), "{}", text);
                if input.raw().is_some() {
                    prop_assert_eq!(
                        input.search_values(),
                        fluxo::run::RunInput::from(v).search_values()
                    );
                }
            }
        }
    }
}
