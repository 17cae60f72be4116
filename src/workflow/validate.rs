//! Validation (SPEC §1): every problem at once, each with its step id and JSON path, then
//! compilation into a [`Compiled`] workflow.
//!
//! Checked: JSON syntax (line and column), unknown fields (top level, steps, edges, configs),
//! ids, unknown kinds, each kind's config, template and expression syntax, duplicate ids,
//! edges to unknown steps or ports, edges into a trigger, exactly one trigger, cycles and
//! unreachable steps, and URLs whose host is rendered from run data without the step's
//! `allow_input_host` (`input_host`, SPEC §5: see [`crate::steps::outbound`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::model::{Edge, Settings, StepDef, Workflow};
use super::template::Templates;
use super::{lint, Compiled, Problem, Severity};
use crate::steps::outbound::{host_source, HostSource};
use crate::steps::{Registry, StepKind};

const TOP_FIELDS: &[&str] = &[
    "id",
    "name",
    "description",
    "version",
    "settings",
    "secrets",
    "steps",
    "edges",
];

/// The `secrets` list: env variable names (`[A-Za-z_][A-Za-z0-9_]*`), sorted, duplicates
/// dropped; `bad_field` naming the entry otherwise.
fn declared_secrets(v: Option<&Value>, problems: &mut Vec<Problem>) -> Vec<String> {
    let mut out = std::collections::BTreeSet::new();
    let items = match v {
        None | Some(Value::Null) => return Vec::new(),
        Some(Value::Array(a)) => a,
        Some(_) => {
            problems.push(Problem::error(
                "bad_field",
                "secrets",
                None,
                "`secrets` must be a list of env variable names, e.g. [\"API_KEY\"]",
            ));
            return Vec::new();
        }
    };
    for (i, item) in items.iter().enumerate() {
        let name = item.as_str().unwrap_or("");
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if valid {
            out.insert(name.to_string());
        } else {
            problems.push(Problem::error(
                "bad_field",
                format!("secrets[{i}]"),
                None,
                format!(
                    "secrets[{i}] must be an env variable name (letters, digits and `_`, not \
                     starting with a digit), got {item}"
                ),
            ));
        }
    }
    out.into_iter().collect()
}

/// Is `s` a valid workflow id: `[a-z0-9][a-z0-9_-]{0,63}` (it names the file and the URL).
pub fn valid_workflow_id(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_' || *c == b'-')
}

/// Is `s` a valid step id: `[A-Za-z_][A-Za-z0-9_-]{0,63}`.
pub fn valid_step_id(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'_' || *c == b'-')
}

/// Parse and check workflow text: all problems (errors and lint warnings) and, when there are
/// no errors, the compiled workflow.
pub fn check_text(text: &str, registry: &Registry) -> (Option<Compiled>, Vec<Problem>) {
    match serde_json::from_str::<Value>(text) {
        Ok(v) => check_value(&v, registry),
        Err(e) => (
            None,
            vec![Problem::error(
                "json_syntax",
                format!("line {}, column {}", e.line(), e.column()),
                None,
                format!("not valid JSON: {e}"),
            )],
        ),
    }
}

/// Load workflow text: the compiled workflow (with its warnings) or every error.
pub fn load_text(text: &str, registry: &Registry) -> Result<Compiled, Vec<Problem>> {
    match check_text(text, registry) {
        (Some(c), _) => Ok(c),
        (None, problems) => Err(problems
            .into_iter()
            .filter(|p| p.severity == Severity::Error)
            .collect()),
    }
}

/// Load a workflow file; an unreadable file is one problem naming the path.
pub fn load_file(path: &Path, registry: &Registry) -> Result<Compiled, Vec<Problem>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        vec![Problem::error(
            "io",
            path.display().to_string(),
            None,
            format!("cannot read {}: {e}", path.display()),
        )]
    })?;
    load_text(&text, registry)
}

/// Check a parsed workflow value: all problems, and the compiled workflow if no errors.
pub fn check_value(v: &Value, registry: &Registry) -> (Option<Compiled>, Vec<Problem>) {
    let mut problems = Vec::new();
    let Some(top) = v.as_object() else {
        problems.push(Problem::error(
            "bad_shape",
            "$",
            None,
            "a workflow must be a JSON object",
        ));
        return (None, problems);
    };
    for k in top.keys() {
        if !TOP_FIELDS.contains(&k.as_str()) {
            problems.push(Problem::error(
                "unknown_field",
                k.clone(),
                None,
                format!(
                    "unknown field `{k}` (expected one of {})",
                    TOP_FIELDS.join(", ")
                ),
            ));
        }
    }
    let id = match top.get("id") {
        Some(Value::String(s)) if valid_workflow_id(s) => s.clone(),
        Some(Value::String(s)) => {
            problems.push(Problem::error(
                "bad_id",
                "id",
                None,
                format!("workflow id `{s}` must match [a-z0-9][a-z0-9_-]{{0,63}}"),
            ));
            s.clone()
        }
        Some(_) => {
            problems.push(Problem::error(
                "bad_id",
                "id",
                None,
                "workflow id must be a string",
            ));
            String::new()
        }
        None => {
            problems.push(Problem::error(
                "missing_field",
                "id",
                None,
                "missing field `id`",
            ));
            String::new()
        }
    };
    let name = match top.get("name") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            problems.push(Problem::error(
                "bad_field",
                "name",
                None,
                "`name` must be a string",
            ));
            String::new()
        }
    };
    let description = match top.get("description") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => {
            problems.push(Problem::error(
                "bad_field",
                "description",
                None,
                "`description` must be a string",
            ));
            None
        }
    };
    let version = match top.get("version") {
        None => 0,
        Some(v) => v.as_u64().unwrap_or_else(|| {
            problems.push(Problem::error(
                "bad_field",
                "version",
                None,
                "`version` must be a non-negative integer",
            ));
            0
        }),
    };
    let settings = match top.get("settings") {
        None => Settings::default(),
        Some(s) => match serde_path_to_error::deserialize::<_, Settings>(s) {
            Ok(s) => {
                if s.run_timeout_s.secs() == 0 || s.run_timeout_s.secs() > 86_400 {
                    problems.push(Problem::error(
                        "bad_settings",
                        "settings.run_timeout_s",
                        None,
                        "must be between 1 and 86400 seconds",
                    ));
                }
                s
            }
            Err(e) => {
                problems.push(Problem::error(
                    "bad_settings",
                    join_path("settings", &e.path().to_string()),
                    None,
                    e.into_inner().to_string(),
                ));
                Settings::default()
            }
        },
    };
    let secrets = declared_secrets(top.get("secrets"), &mut problems);

    // Steps, one by one so every bad step is reported.
    let mut steps: Vec<StepDef> = Vec::new();
    let mut step_ok: Vec<bool> = Vec::new();
    match top.get("steps") {
        None => problems.push(Problem::error(
            "missing_field",
            "steps",
            None,
            "missing field `steps`",
        )),
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let sid = item.get("id").and_then(Value::as_str).map(String::from);
                match serde_path_to_error::deserialize::<_, StepDef>(item) {
                    Ok(s) => {
                        steps.push(s);
                        step_ok.push(true);
                    }
                    Err(e) => {
                        let path = join_path(&format!("steps[{i}]"), &e.path().to_string());
                        let msg = e.into_inner().to_string();
                        let code = if msg.starts_with("unknown field") {
                            "unknown_field"
                        } else {
                            "bad_step"
                        };
                        problems.push(Problem::error(code, path, sid.as_deref(), msg));
                        // Keep a placeholder so indexes line up for the checks below.
                        steps.push(StepDef {
                            id: sid.unwrap_or_default(),
                            kind: String::new(),
                            name: None,
                            position: None,
                            config: Value::Null,
                        });
                        step_ok.push(false);
                    }
                }
            }
        }
        Some(_) => problems.push(Problem::error(
            "bad_field",
            "steps",
            None,
            "`steps` must be an array",
        )),
    }
    let mut edges: Vec<Edge> = Vec::new();
    let mut edge_ok: Vec<bool> = Vec::new();
    match top.get("edges") {
        None => {}
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                match serde_path_to_error::deserialize::<_, Edge>(item) {
                    Ok(e) => {
                        edges.push(e);
                        edge_ok.push(true);
                    }
                    Err(e) => {
                        let msg = e.into_inner().to_string();
                        let code = if msg.starts_with("unknown field") {
                            "unknown_field"
                        } else {
                            "bad_edge"
                        };
                        // Name the step the edge leaves, so the editor can point at it.
                        let from = item.get("from").and_then(Value::as_str);
                        problems.push(Problem::error(code, format!("edges[{i}]"), from, msg));
                        edges.push(Edge {
                            from: String::new(),
                            port: None,
                            to: String::new(),
                        });
                        edge_ok.push(false);
                    }
                }
            }
        }
        Some(_) => problems.push(Problem::error(
            "bad_field",
            "edges",
            None,
            "`edges` must be an array",
        )),
    }

    // Ids, kinds, configs, templates.
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut kinds: Vec<Option<Arc<dyn StepKind>>> = Vec::new();
    let mut templates = Templates::new();
    for (i, s) in steps.iter().enumerate() {
        if !step_ok[i] {
            kinds.push(None);
            continue;
        }
        let sid = Some(s.id.as_str());
        if !valid_step_id(&s.id) {
            problems.push(Problem::error(
                "bad_id",
                format!("steps[{i}].id"),
                sid,
                format!(
                    "step id `{}` must match [A-Za-z_][A-Za-z0-9_-]{{0,63}}",
                    s.id
                ),
            ));
        } else if index.contains_key(&s.id) {
            // The first definition keeps the id (edges resolve to it); `insert` would move it
            // to the duplicate and report the original as unreachable.
            problems.push(Problem::error(
                "duplicate_id",
                format!("steps[{i}].id"),
                sid,
                format!("step id `{}` is used more than once", s.id),
            ));
        } else {
            index.insert(s.id.clone(), i);
        }
        let Some(kind) = registry.get(&s.kind) else {
            problems.push(Problem::error(
                "unknown_kind",
                format!("steps[{i}].kind"),
                sid,
                format!(
                    "unknown kind `{}` (known kinds: {})",
                    s.kind,
                    registry.names().join(", ")
                ),
            ));
            kinds.push(None);
            continue;
        };
        if !s.config.is_object() {
            problems.push(Problem::error(
                "bad_config",
                format!("steps[{i}].config"),
                sid,
                "config must be an object",
            ));
            kinds.push(None);
            continue;
        }
        let config_problems = kind.check(&s.config);
        for p in &config_problems {
            let code = if p.message.starts_with("unknown field") {
                "unknown_field"
            } else {
                "bad_config"
            };
            problems.push(Problem::error(
                code,
                join_path(&format!("steps[{i}].config"), &p.path),
                sid,
                p.message.clone(),
            ));
        }
        // Outbound URLs whose host comes from run data need the step's opt-in (SPEC §5).
        if config_problems.is_empty() {
            for u in kind.outbound_urls(&s.config) {
                if let (HostSource::Data(vars), false) =
                    (host_source(&u.template), u.allow_input_host)
                {
                    problems.push(Problem::error(
                        "input_host",
                        format!("steps[{i}].config.{}", u.field),
                        sid,
                        format!(
                            "the host of `{}` is rendered from run data ({}): whoever sends this \
                             workflow an event would choose where Fluxo connects, including \
                             services only this machine reaches (SSRF). Write the host, or take \
                             it from env.*; or set allow_input_host: true, and then only public \
                             addresses (and those in settings outbound_allow) are reached",
                            u.template,
                            vars.join(", ")
                        ),
                    ));
                }
            }
        }
        // Templates in rendered fields; expressions where the kind says so.
        let skip = kind.unrendered_fields();
        if let Some(obj) = s.config.as_object() {
            for (field, value) in obj {
                if skip.contains(&field.as_str()) {
                    continue;
                }
                collect_template_problems(
                    &mut templates,
                    value,
                    &format!("steps[{i}].config.{field}"),
                    sid,
                    &mut problems,
                );
            }
        }
        for (path, expr) in kind.expressions(&s.config) {
            if let Err(e) = templates.add_expression(&expr) {
                problems.push(Problem::error(
                    "template_syntax",
                    format!("steps[{i}].config.{path}"),
                    sid,
                    format!("expression syntax error in `{expr}`: {}", e.message),
                ));
            }
        }
        kinds.push(if config_problems.is_empty() {
            Some(kind.clone())
        } else {
            None
        });
    }

    // Edges and ports.
    let mut out: Vec<BTreeMap<String, Vec<usize>>> = vec![BTreeMap::new(); steps.len()];
    let mut incoming: Vec<usize> = vec![0; steps.len()];
    for (j, e) in edges.iter().enumerate() {
        if !edge_ok[j] {
            continue;
        }
        let from = index.get(&e.from).copied();
        let to = index.get(&e.to).copied();
        if from.is_none() {
            problems.push(Problem::error(
                "unknown_step",
                format!("edges[{j}].from"),
                None,
                format!("edge from unknown step `{}`", e.from),
            ));
        }
        if to.is_none() {
            problems.push(Problem::error(
                "unknown_step",
                format!("edges[{j}].to"),
                None,
                format!("edge to unknown step `{}`", e.to),
            ));
        }
        let (Some(f), Some(t)) = (from, to) else {
            continue;
        };
        if let Some(k) = &kinds[f] {
            let ports = k.ports(&steps[f].config);
            if !ports.iter().any(|p| p == e.port()) {
                problems.push(Problem::error(
                    "unknown_port",
                    format!("edges[{j}].port"),
                    Some(&e.from),
                    format!(
                        "step `{}` has no port `{}` (ports: {})",
                        e.from,
                        e.port(),
                        ports.join(", ")
                    ),
                ));
                continue;
            }
        }
        if let Some(k) = &kinds[t] {
            if k.descriptor().trigger {
                problems.push(Problem::error(
                    "edge_into_trigger",
                    format!("edges[{j}].to"),
                    Some(&e.to),
                    format!("trigger `{}` cannot have incoming edges", e.to),
                ));
                continue;
            }
        }
        if f == t {
            problems.push(Problem::error(
                "cycle",
                format!("edges[{j}]"),
                Some(&e.from),
                format!("step `{}` is wired to itself", e.from),
            ));
            continue;
        }
        let targets = out[f].entry(e.port().to_string()).or_default();
        if !targets.contains(&t) {
            targets.push(t);
            incoming[t] += 1;
        }
    }

    // Exactly one trigger.
    let triggers: Vec<usize> = kinds
        .iter()
        .enumerate()
        .filter(|(_, k)| k.as_ref().is_some_and(|k| k.descriptor().trigger))
        .map(|(i, _)| i)
        .collect();
    if triggers.is_empty()
        && steps.iter().all(|s| {
            registry
                .get(&s.kind)
                .is_none_or(|k| !k.descriptor().trigger)
        })
    {
        problems.push(Problem::error(
            "trigger_count",
            "steps",
            None,
            "the workflow has no trigger (add a webhook_trigger or manual_trigger)",
        ));
    }
    if triggers.len() > 1 {
        for &t in &triggers[1..] {
            problems.push(Problem::error(
                "trigger_count",
                format!("steps[{t}]"),
                Some(&steps[t].id),
                format!(
                    "more than one trigger (`{}` and `{}`)",
                    steps[triggers[0]].id, steps[t].id
                ),
            ));
        }
    }

    // Cycles (iterative DFS, white/grey/black).
    for cycle in find_cycles(&out) {
        let names: Vec<&str> = cycle.iter().map(|&i| steps[i].id.as_str()).collect();
        problems.push(Problem::error(
            "cycle",
            format!("steps[{}]", cycle[0]),
            Some(names[0]),
            format!("cycle: {} → {}", names.join(" → "), names[0]),
        ));
    }

    // Unreachable steps.
    if let Some(&t) = triggers.first() {
        let mut seen = vec![false; steps.len()];
        let mut stack = vec![t];
        while let Some(i) = stack.pop() {
            if std::mem::replace(&mut seen[i], true) {
                continue;
            }
            for targets in out[i].values() {
                stack.extend(targets.iter().copied());
            }
        }
        for (i, s) in steps.iter().enumerate() {
            // A duplicate id is already reported; edges never resolve to the duplicate.
            if !seen[i] && step_ok[i] && index.get(&s.id) == Some(&i) {
                problems.push(Problem::error(
                    "unreachable",
                    format!("steps[{i}]"),
                    Some(&s.id),
                    format!(
                        "step `{}` is not reachable from the trigger `{}`",
                        s.id, steps[t].id
                    ),
                ));
            }
        }
    }

    let has_errors = problems.iter().any(|p| p.severity == Severity::Error);
    let workflow = Workflow {
        id,
        name,
        description,
        version,
        settings,
        secrets,
        steps,
        edges,
    };
    if !has_errors {
        problems.extend(lint::lint(&workflow, registry));
    }
    if has_errors {
        return (None, problems);
    }
    let warnings: Vec<Problem> = problems.clone();
    let kinds: Vec<Arc<dyn StepKind>> = kinds.into_iter().map(|k| k.expect("checked")).collect();
    // Outbound URL fields render with run data encoded per path segment (SPEC §5).
    let mut templates = templates;
    let url_fields: Vec<Vec<&'static str>> = workflow
        .steps
        .iter()
        .zip(&kinds)
        .map(|(s, k)| {
            let urls = k.outbound_urls(&s.config);
            for u in &urls {
                // Compiled above as plain text; a URL that compiled there compiles here.
                let _ = templates.add_url(&u.template);
            }
            urls.iter().map(|u| u.field).collect()
        })
        .collect();
    let hash = workflow.definition_hash();
    let snapshot = serde_json::to_value(&workflow).unwrap_or(Value::Null);
    let compiled = Compiled {
        workflow,
        hash,
        snapshot,
        templates,
        warnings,
        kinds,
        url_fields,
        index,
        out,
        trigger: triggers[0],
    };
    (Some(compiled), problems)
}

/// Compile an already-typed workflow (re-checks everything).
pub fn compile(workflow: &Workflow, registry: &Registry) -> Result<Compiled, Vec<Problem>> {
    let v = serde_json::to_value(workflow)
        .map_err(|e| vec![Problem::error("bad_shape", "$", None, e.to_string())])?;
    match check_value(&v, registry) {
        (Some(c), _) => Ok(c),
        (None, p) => Err(p
            .into_iter()
            .filter(|p| p.severity == Severity::Error)
            .collect()),
    }
}

fn join_path(base: &str, rest: &str) -> String {
    if rest.is_empty() || rest == "." {
        base.to_string()
    } else if rest.starts_with('[') {
        format!("{base}{rest}")
    } else {
        format!("{base}.{rest}")
    }
}

fn collect_template_problems(
    t: &mut Templates,
    v: &Value,
    path: &str,
    step: Option<&str>,
    out: &mut Vec<Problem>,
) {
    match v {
        Value::String(s) => {
            if let Err(e) = t.add(s) {
                out.push(Problem::error(
                    "template_syntax",
                    path,
                    step,
                    format!("template syntax error in `{s}`: {}", e.message),
                ));
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                collect_template_problems(t, x, &format!("{path}[{i}]"), step, out);
            }
        }
        Value::Object(m) => {
            for (k, x) in m {
                collect_template_problems(t, x, &format!("{path}.{k}"), step, out);
            }
        }
        _ => {}
    }
}

/// Each cycle once, as the step indexes along it.
fn find_cycles(out: &[BTreeMap<String, Vec<usize>>]) -> Vec<Vec<usize>> {
    let n = out.len();
    let succ: Vec<Vec<usize>> = out
        .iter()
        .map(|m| {
            let mut v: Vec<usize> = m.values().flatten().copied().collect();
            v.sort_unstable();
            v.dedup();
            v
        })
        .collect();
    let mut color = vec![0u8; n]; // 0 white, 1 grey, 2 black
    let mut cycles = Vec::new();
    let mut reported: HashSet<Vec<usize>> = HashSet::new();
    for start in 0..n {
        if color[start] != 0 {
            continue;
        }
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        let mut path: Vec<usize> = vec![start];
        color[start] = 1;
        while let Some((node, next)) = stack.last_mut() {
            let node = *node;
            if *next < succ[node].len() {
                let m = succ[node][*next];
                *next += 1;
                match color[m] {
                    0 => {
                        color[m] = 1;
                        stack.push((m, 0));
                        path.push(m);
                    }
                    1 => {
                        let pos = path.iter().position(|&x| x == m).unwrap_or(0);
                        let cyc = path[pos..].to_vec();
                        let mut key = cyc.clone();
                        key.sort_unstable();
                        if reported.insert(key) {
                            cycles.push(cyc);
                        }
                    }
                    _ => {}
                }
            } else {
                color[node] = 2;
                stack.pop();
                path.pop();
            }
        }
    }
    cycles
}
