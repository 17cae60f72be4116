//! The idempotency/retry linter: warnings that do not stop a workflow from running but predict
//! duplicates or timeouts. Shown by `fluxo validate`, returned with every save, drawn on the
//! editor's nodes.
//!
//! Rules:
//! * `lint_unguarded_write`: an `action` whose write has no dedupe at the app (strategy `none`)
//!   and retries, or has no dedupe upstream; a POST/PATCH `http_request` with no
//!   `Idempotency-Key` header that retries (a timeout after the destination wrote makes the retry write again, whatever dedupe
//!   is upstream), or that has no dedupe upstream (a webhook `dedupe_key` or a Memory claim on
//!   every path from the trigger); a `publish_output` with a per-run key and no dedupe upstream.
//! * `lint_retries_exceed_deadline`: a step whose worst case (every attempt timing out, every
//!   wait at its ceiling) is longer than `run_timeout_s`.
//! * `lint_stacked_retries`: an `error_handler` in `retry_once` on a step that already retries;
//!   with `settings.sender_retries` the multiplication is spelled out.
//! * `lint_claim_ttl_short`: a Memory claim whose `ttl_s` is shorter than the webhook trigger's
//!   dedupe window: a redelivery after the claim expires passes both guards' gap.
//! * `lint_input_host`: a URL whose host is rendered from run data, allowed by the step's
//!   `allow_input_host`: the sender of an event chooses where Fluxo connects (only non-public
//!   addresses are refused; see [`crate::steps::outbound`]).
//! * `lint_raw_path`: a URL that inserts a value with `| raw_path`, unencoded, where run data
//!   is otherwise one percent-encoded path segment ([`crate::template`]'s URL rule).
//! * `unknown_sample`: `settings.sample` names no built-in sample payload
//!   ([`crate::samples::PAYLOADS`]).
//! * `lint_secret_undeclared`: a step reads `env.NAME` whose name says it is secret
//!   ([`crate::secrets::is_secret_env`]) and the workflow's `secrets` does not list it: a run
//!   fails on it (the `template::secret` module).
//! * `lint_secret_misplaced`: a secret (declared, or secret by its name) in a field where no
//!   secret may render: anything but a header value, an outbound URL or a signing secret
//!   ([`crate::steps::StepKind::secret_fields`]).
//! * `lint_secret_unused`: a name in `secrets` no step reads.

use serde_json::Value;

use super::model::{Workflow, PORT_ERROR};
use super::Problem;
use crate::connectors::Dedupe;
use crate::steps::outbound::{host_source, HostSource};
use crate::steps::retry::{RetryPolicy, RetryStrategy};
use crate::steps::{
    action, error_handler, http_request, memory, publish_output, webhook_trigger, Registry,
};

/// `lint_secret_undeclared`, `lint_secret_misplaced` and `lint_secret_unused` (module doc).
fn secret_rules(wf: &Workflow, registry: &Registry, out: &mut Vec<Problem>) {
    use std::collections::BTreeSet;
    let declared: BTreeSet<&str> = wf.secrets.iter().map(String::as_str).collect();
    let no_flags = BTreeSet::new();
    let is_secret = |n: &str| declared.contains(n) || crate::secrets::is_secret_env(n, &no_flags);
    let mut read = BTreeSet::new();
    for (i, s) in wf.steps.iter().enumerate() {
        let Some(kind) = registry.get(&s.kind) else {
            continue;
        };
        let urls: Vec<&str> = kind
            .outbound_urls(&s.config)
            .iter()
            .map(|u| u.field)
            .collect();
        let Some(fields) = s.config.as_object() else {
            continue;
        };
        for (field, value) in fields {
            let mut names = BTreeSet::new();
            super::env::visit_strings(value, &mut |t| super::env::scan_env(t, &mut names));
            let allowed =
                kind.secret_fields().contains(&field.as_str()) || urls.contains(&field.as_str());
            for name in names.into_iter().filter(|n| is_secret(n)) {
                let path = format!("steps[{i}].config.{field}");
                if !declared.contains(name.as_str()) {
                    out.push(Problem::warning(
                        "lint_secret_undeclared",
                        path.clone(),
                        Some(&s.id),
                        format!(
                            "env.{name} looks secret and the workflow's `secrets` does not list \
                             it: a run fails on it. Add \"{name}\" to `secrets`."
                        ),
                    ));
                }
                if !allowed {
                    out.push(Problem::warning(
                        "lint_secret_misplaced",
                        path,
                        Some(&s.id),
                        format!(
                            "env.{name} is secret and `{field}` is not a place for one: a \
                             secret renders only whole in a header value, an outbound URL's \
                             credentials or a signing secret; a run fails here."
                        ),
                    ));
                }
                read.insert(name);
            }
        }
    }
    for name in declared.iter().filter(|n| !read.contains(**n)) {
        out.push(Problem::warning(
            "lint_secret_unused",
            "secrets",
            None,
            format!("`secrets` lists {name}, which no step reads: remove it"),
        ));
    }
}

/// Lint a workflow that validated without errors.
pub fn lint(wf: &Workflow, registry: &Registry) -> Vec<Problem> {
    let mut out = Vec::new();
    if let Some(name) = &wf.settings.sample {
        if !crate::samples::PAYLOADS.iter().any(|(n, _)| n == name) {
            let known: Vec<&str> = crate::samples::PAYLOADS.iter().map(|(n, _)| *n).collect();
            out.push(Problem::warning(
                "unknown_sample",
                "settings.sample",
                None,
                format!(
                    "settings.sample `{name}` is not a built-in sample payload; one of: {}",
                    known.join(", ")
                ),
            ));
        }
    }
    secret_rules(wf, registry, &mut out);
    for (i, s) in wf.steps.iter().enumerate() {
        let Some(kind) = registry.get(&s.kind) else {
            continue;
        };
        for u in kind.outbound_urls(&s.config) {
            if let (HostSource::Data(vars), true) = (host_source(&u.template), u.allow_input_host) {
                out.push(Problem::warning(
                    "lint_input_host",
                    format!("steps[{i}].config.{}", u.field),
                    Some(&s.id),
                    format!(
                        "the host of `{}` is rendered from run data ({}) and allow_input_host is \
                         on: whoever sends an event chooses where Fluxo connects; only non-public \
                         addresses not in settings outbound_allow are refused. Prefer a host you \
                         write or take from env.*, and let the event choose a path segment (it is percent-encoded).",
                        u.template,
                        vars.join(", ")
                    ),
                ));
            }
            if crate::template::uses_raw_path(&u.template) {
                out.push(Problem::warning(
                    "lint_raw_path",
                    format!("steps[{i}].config.{}", u.field),
                    Some(&s.id),
                    format!(
                        "`{}` inserts a value unencoded with `| raw_path`: a value holding `/`, \
                         `..`, `?` or `#` changes which resource is called. Without the filter, \
                         run data in a URL path is one percent-encoded segment.",
                        u.template
                    ),
                ));
            }
        }
    }
    let n = wf.steps.len();
    let index: std::collections::HashMap<&str, usize> = wf
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    let idx = |id: &str| index.get(id).copied();
    // Predecessors over every edge (error edges included).
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
    for e in &wf.edges {
        if let (Some(f), Some(t)) = (idx(&e.from), idx(&e.to)) {
            preds[t].push(f);
        }
    }
    let trigger = wf.steps.iter().position(|s| {
        matches!(
            s.kind.as_str(),
            "webhook_trigger" | "manual_trigger" | "schedule_trigger"
        )
    });
    let webhook: Option<webhook_trigger::Config> = wf
        .steps
        .iter()
        .find(|s| s.kind == "webhook_trigger")
        .and_then(|s| serde_json::from_value(s.config.clone()).ok());
    let trigger_dedupes = webhook.as_ref().is_some_and(|c| c.dedupe_key.is_some());
    let deadline_ms = wf.settings.run_timeout_s.secs().saturating_mul(1000);

    let is_claim = |i: usize| -> bool {
        let s = &wf.steps[i];
        s.kind == "memory"
            && serde_json::from_value::<memory::Config>(s.config.clone()).is_ok_and(|c| {
                c.operation == memory::Operation::Write
                    && !c.allow_overwrite
                    && c.scope == memory::Scope::Persistent
            })
    };
    // A step is guarded when every path from the trigger passes a claim.
    let guarded = |target: usize| -> bool {
        // Search for a path trigger → target avoiding claims; if none exists, it is guarded.
        let Some(t) = trigger else { return false };
        let mut seen = vec![false; n];
        let mut stack = vec![target];
        while let Some(i) = stack.pop() {
            if i == t {
                return false;
            }
            if std::mem::replace(&mut seen[i], true) || (i != target && is_claim(i)) {
                continue;
            }
            stack.extend(preds[i].iter().copied());
        }
        true
    };

    for (i, s) in wf.steps.iter().enumerate() {
        let path = format!("steps[{i}]");
        let sid = Some(s.id.as_str());
        match s.kind.as_str() {
            "http_request" => {
                let Ok(c) = serde_json::from_value::<http_request::Config>(s.config.clone()) else {
                    continue;
                };
                // The kind's own answer (also read by crash recovery and the resume preview):
                // a POST/PATCH without an Idempotency-Key may not be repeated.
                let unguarded = !c.repeat_safety().is_safe();
                let retries = c.call.retry_strategy != RetryStrategy::None && c.call.retries > 0;
                if unguarded && retries {
                    out.push(Problem::warning(
                        "lint_unguarded_write",
                        format!("{path}.config.headers"),
                        sid,
                        format!(
                            "{} retries ({}) without an Idempotency-Key header: when the destination \
                             writes and then times out, the retry writes again, whatever dedupe is \
                             upstream. Add an Idempotency-Key header from business data, or set retries to 0.",
                            c.method.as_str(),
                            c.call.retries
                        ),
                    ));
                } else if unguarded && !trigger_dedupes && !guarded(i) {
                    out.push(Problem::warning(
                        "lint_unguarded_write",
                        format!("{path}.config.headers"),
                        sid,
                        format!(
                            "{} without an Idempotency-Key header and no dedupe upstream: a redelivered \
                             event creates a duplicate. Add an Idempotency-Key header from business \
                             data, or claim the event in Memory first.",
                            c.method.as_str()
                        ),
                    ));
                }
                let p = c.call.retry_policy();
                deadline_rule(&mut out, &path, sid, &p, deadline_ms);
            }
            "publish_output" => {
                let Ok(c) = serde_json::from_value::<publish_output::Config>(s.config.clone())
                else {
                    continue;
                };
                let per_run = match &c.idempotency_key {
                    None => true,
                    Some(Value::String(k)) => k.trim().is_empty(),
                    Some(_) => false,
                };
                if per_run && !trigger_dedupes && !guarded(i) {
                    out.push(Problem::warning(
                        "lint_unguarded_write",
                        format!("{path}.config.idempotency_key"),
                        sid,
                        "idempotency_key is empty, so the key is per run: a redelivered event starts a \
                         new run with a new key and publishes twice. Template it from business data \
                         (e.g. {{ input.id }}) or claim the event in Memory first.",
                    ));
                }
                let p = c.call.retry_policy();
                deadline_rule(&mut out, &path, sid, &p, deadline_ms);
            }
            "action" => {
                let Ok(c) = serde_json::from_value::<action::Config>(s.config.clone()) else {
                    continue;
                };
                let Ok((app, op)) = action::resolve(&c) else {
                    continue;
                };
                let retries = c.call.retry_strategy != RetryStrategy::None && c.call.retries > 0;
                // A key the app dedupes on (or a kept id is found by) that is per run: a
                // redelivered event starts a new run with a new key and writes again.
                let per_run_key = match &c.idempotency_key {
                    None | Some(Value::Null) => true,
                    Some(Value::String(k)) => k.trim().is_empty(),
                    Some(_) => false,
                };
                let keyed = matches!(
                    action::strategy(&s.config),
                    Some(Dedupe::NativeKey { .. } | Dedupe::KeptId { .. })
                );
                if keyed && per_run_key && !trigger_dedupes && !guarded(i) {
                    out.push(Problem::warning(
                        "lint_unguarded_write",
                        format!("{path}.config.idempotency_key"),
                        sid,
                        format!(
                            "{} `{}` dedupes on the step's idempotency key, which is empty, so \
                             one per run: a redelivered event starts a new run with a new key \
                             and writes again. Template it from business data (e.g. \
                             {{{{ input.id }}}}) or claim the event in Memory first.",
                            app.title, op.title
                        ),
                    ));
                }
                if matches!(action::strategy(&s.config), Some(Dedupe::None))
                    && (retries || (!trigger_dedupes && !guarded(i)))
                {
                    let why = if retries {
                        format!(
                            "retries ({}): when {} writes and then times out, the retry writes \
                             again. Set retries to 0 and claim the event in Memory first.",
                            c.call.retries, app.title
                        )
                    } else {
                        "no dedupe upstream: a redelivered event creates a duplicate. Claim the \
                         event in Memory first."
                            .to_string()
                    };
                    out.push(Problem::warning(
                        "lint_unguarded_write",
                        format!("{path}.config.operation"),
                        sid,
                        format!(
                            "{} `{}` has no dedupe at the app (strategy none) and {why}",
                            app.title, op.title
                        ),
                    ));
                }
                let p = c.call.retry_policy();
                deadline_rule(&mut out, &path, sid, &p, deadline_ms);
            }
            "memory" => {
                let (Some(w), true) = (&webhook, is_claim(i)) else {
                    continue;
                };
                let Ok(c) = serde_json::from_value::<memory::Config>(s.config.clone()) else {
                    continue;
                };
                if let Some(ttl) = c.ttl_s {
                    if ttl < w.dedupe_window_s {
                        let window = crate::duration::human_secs(w.dedupe_window_s);
                        out.push(Problem::warning(
                            "lint_claim_ttl_short",
                            format!("{path}.config.ttl_s"),
                            sid,
                            format!(
                                "the claim expires after {} ({ttl} s) but the trigger's dedupe \
                                 window is {window} ({} s): a redelivery between the two passes \
                                 the claim. Make ttl_s at least {window}.",
                                crate::duration::human_secs(ttl),
                                w.dedupe_window_s
                            ),
                        ));
                    }
                }
            }
            "error_handler" => {
                let Ok(c) = serde_json::from_value::<error_handler::Config>(s.config.clone())
                else {
                    continue;
                };
                if c.mode != error_handler::HandlerMode::RetryOnce {
                    continue;
                }
                for e in wf
                    .edges
                    .iter()
                    .filter(|e| e.to == s.id && e.port() == PORT_ERROR)
                {
                    let Some(f) = idx(&e.from) else { continue };
                    let Some(retries) = step_retries(&wf.steps[f]) else {
                        continue;
                    };
                    if retries == 0 {
                        continue;
                    }
                    let per_run = (retries as u64 + 1) + 1;
                    let mut msg = format!(
                        "retry_once on `{}`, which already retries {retries} time(s): up to {per_run} attempts per run",
                        e.from
                    );
                    if let Some(sender) = wf.settings.sender_retries {
                        msg.push_str(&format!(
                            ", times {} deliveries from the sender = {} calls per event",
                            sender as u64 + 1,
                            per_run * (sender as u64 + 1)
                        ));
                    }
                    msg.push_str(". Prefer one retry layer.");
                    out.push(Problem::warning(
                        "lint_stacked_retries",
                        path.clone(),
                        sid,
                        msg,
                    ));
                }
            }
            _ => {}
        }
    }
    out
}

fn deadline_rule(
    out: &mut Vec<Problem>,
    path: &str,
    sid: Option<&str>,
    p: &RetryPolicy,
    deadline_ms: u64,
) {
    let worst = p.worst_case_ms();
    if worst > deadline_ms {
        out.push(Problem::warning(
            "lint_retries_exceed_deadline",
            format!("{path}.config.retries"),
            sid,
            format!(
                "worst case {} attempts × {} ms timeout plus backoff = {} ms, longer than the run \
                 deadline of {} ms: the last retries can never happen. Lower retries or timeout_s, \
                 or raise settings.run_timeout_s.",
                p.max_attempts(),
                p.timeout_ms,
                worst,
                deadline_ms
            ),
        ));
    }
}

/// Retries configured on an HTTP step (None for other kinds).
fn step_retries(s: &super::StepDef) -> Option<u32> {
    match s.kind.as_str() {
        "http_request" => serde_json::from_value::<http_request::Config>(s.config.clone())
            .ok()
            .map(|c| {
                if c.call.retry_strategy == RetryStrategy::None {
                    0
                } else {
                    c.call.retries
                }
            }),
        "publish_output" => serde_json::from_value::<publish_output::Config>(s.config.clone())
            .ok()
            .map(|c| {
                if c.call.retry_strategy == RetryStrategy::None {
                    0
                } else {
                    c.call.retries
                }
            }),
        _ => None,
    }
}
