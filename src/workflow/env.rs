//! Environment variables a workflow uses: every `env.NAME` (or `env["NAME"]`) its steps'
//! configs reference. The check points them at its sandbox, validation warns about names the
//! settings lack (`env_unset`), and a dry run stands a placeholder in for them
//! ([`dry_placeholder`]) instead of failing on a variable it would never send to.

use std::collections::BTreeSet;

use serde_json::Value;

use super::Workflow;

/// What a dry run renders for an unset `env.NAME`: `https://env-name.unset.invalid`, a URL
/// (most variables are base URLs) under the `.invalid` TLD, which never resolves (RFC 2606).
pub fn dry_placeholder(name: &str) -> String {
    let host: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    format!("https://{host}.unset.invalid")
}

/// Every `NAME` referenced by the `steps[*].config` of a raw definition, sorted, each with the
/// index of the first step that uses it: for validating a file that may not compile.
pub fn env_uses(definition: &Value) -> Vec<(String, usize)> {
    let mut first: std::collections::BTreeMap<String, usize> = Default::default();
    for (i, step) in definition
        .get("steps")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let mut names = BTreeSet::new();
        if let Some(config) = step.get("config") {
            visit_strings(config, &mut |text| scan_env(text, &mut names));
        }
        for n in names {
            first.entry(n).or_insert(i);
        }
    }
    first.into_iter().collect()
}

/// Every `NAME` a step's config references as `env.NAME` or `env["NAME"]`, sorted.
pub fn env_names(wf: &Workflow) -> Vec<String> {
    let mut names = BTreeSet::new();
    for s in &wf.steps {
        visit_strings(&s.config, &mut |text| scan_env(text, &mut names));
    }
    names.into_iter().collect()
}

/// The secrets `wf` declares, each with the ids of the steps that read it (none for an unused
/// one), in `secrets` order: what `fluxo validate` and the API's validation list.
pub fn secrets_read(wf: &Workflow) -> Vec<(String, Vec<String>)> {
    wf.secrets
        .iter()
        .map(|name| {
            let steps = wf
                .steps
                .iter()
                .filter(|s| {
                    let mut names = BTreeSet::new();
                    visit_strings(&s.config, &mut |t| scan_env(t, &mut names));
                    names.contains(name)
                })
                .map(|s| s.id.clone())
                .collect();
            (name.clone(), steps)
        })
        .collect()
}

/// `[{"name": "API_KEY", "steps": ["send"]}, …]`: [`secrets_read`] as JSON.
pub fn secrets_read_json(wf: &Workflow) -> Value {
    secrets_read(wf)
        .into_iter()
        .map(|(name, steps)| serde_json::json!({"name": name, "steps": steps}))
        .collect()
}

pub(crate) fn visit_strings(v: &Value, f: &mut impl FnMut(&str)) {
    match v {
        Value::String(s) => f(s),
        Value::Array(a) => a.iter().for_each(|x| visit_strings(x, f)),
        Value::Object(m) => m.values().for_each(|x| visit_strings(x, f)),
        _ => {}
    }
}

pub fn scan_env(text: &str, names: &mut BTreeSet<String>) {
    let b = text.as_bytes();
    let mut i = 0;
    while let Some(pos) = text[i..].find("env") {
        let at = i + pos;
        i = at + 3;
        // A whole word `env` (not `environment`, not `x.env`).
        if at > 0 && (b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_' || b[at - 1] == b'.') {
            continue;
        }
        let rest = &text[at + 3..];
        if let Some(r) = rest.strip_prefix('.') {
            let name: String = r
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                names.insert(name);
            }
        } else if let Some(r) = rest.trim_start().strip_prefix('[') {
            let r = r.trim_start();
            if let Some(q) = r.chars().next().filter(|c| *c == '"' || *c == '\'') {
                if let Some(end) = r[1..].find(q) {
                    let name = &r[1..1 + end];
                    if !name.is_empty() {
                        names.insert(name.to_string());
                    }
                }
            }
        }
    }
}
