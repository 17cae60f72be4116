//! `memory`: the persistent key-value store that makes "claim, then act" possible.
//!
//! `write` with `allow_overwrite: false` is an atomic claim: of concurrent writers exactly one
//! gets `written: true`; the others get `written: false, reason: "exists"` and the router sends
//! them to a quiet skip. `ttl_s` is measured from the write, in UTC; an expired key is absent and
//! can be claimed again. `scope: run` keeps the key for this run only.
//!
//! Output: write `{written, reason?: "exists", key, expires_at?, claimed_by?, reclaimed?}`;
//! read `{found, value?, expires_at?}`; delete `{deleted}` (SPEC §3). `expires_at` is RFC 3339
//! UTC.
//!
//! Persistent writes record their owner: the run lineage's root run id and this step's id
//! ([`crate::store::ClaimOwner`]). A claim that finds the key held by its own lineage and
//! step is this step's earlier write, cut off from its record by a crash or repeated by a
//! resume: it answers `written: true, reclaimed: true` (keeping the entry and its expiry),
//! so the lineage goes on as the first attempt did (SPEC §4 "Resume"). Any other holder,
//! a replay's new lineage included, gets `written: false, reason: "exists"` with
//! `claimed_by` naming the holder's root run when known.
//!
//! A resume that reuses a claim re-takes it when a compensation released it, so the lineage
//! goes on holding its event; if another run took the key meanwhile, the claim step executes
//! again and answers `exists` ([`StepKind::confirm_reuse`]).

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{
    key_text, parse_config, parse_rendered, schema_of, Category, ConfigProblem, Descriptor, Preset,
    PresetFill, StepContext, StepError, StepKind, StepOutput,
};
use crate::clock::rfc3339;
use crate::store::{ClaimOwner, WriteOptions, WriteResult};

/// Memory operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    Write,
    Read,
    Delete,
}

/// Where the key lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Survives across runs and restarts (the store).
    #[default]
    Persistent,
    /// This run only.
    Run,
}

/// Memory step config.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `write`, `read` or `delete`.
    #[schemars(title = "Operation")]
    pub operation: Operation,
    /// Namespace, e.g. `processed-invoices`: 1–128 bytes, no control characters (checked
    /// again once rendered: `invalid_namespace`).
    #[schemars(title = "Namespace")]
    pub namespace: String,
    /// Key template, e.g. `{{ input.id }}`: the rendered key is 1–1024 bytes. Rendering to
    /// empty is an `empty_key` error; longer than 1024 bytes, `key_too_long`.
    #[schemars(with = "String")]
    #[schemars(title = "Key")]
    pub key: Value,
    /// Value to store (write only); any JSON, templates allowed. Default `true`.
    #[serde(default)]
    #[schemars(title = "Value")]
    pub value: Option<Value>,
    /// `false` = write only if the key is absent (the atomic claim). Default `true`.
    #[serde(default = "yes")]
    #[schemars(title = "Overwrite an existing key")]
    pub allow_overwrite: bool,
    /// How long the key lives from the write: `4d`, `36h`, `90s`, or a number of seconds;
    /// absent = no expiry.
    #[serde(default, deserialize_with = "crate::duration::opt_secs")]
    #[schemars(title = "Expires after", with = "Option<crate::duration::Seconds>")]
    pub ttl_s: Option<u64>,
    /// `persistent` (default) or `run`.
    #[serde(default)]
    #[schemars(title = "Scope")]
    pub scope: Scope,
}

fn yes() -> bool {
    true
}

/// The `memory` kind.
pub struct Memory;

#[async_trait]
impl StepKind for Memory {
    fn descriptor(&self) -> Descriptor {
        Descriptor {
            kind: "memory",
            title: "Memory",
            category: Category::Data,
            description: "Persistent key-value store. A write with allow_overwrite off is an \
                          atomic claim: exactly one concurrent writer wins; the others get \
                          written: false, reason: \"exists\".",
            trigger: false,
            output: "write: {written, reason?, key, expires_at?, claimed_by?, reclaimed?}; \
                     read: {found, value?, expires_at?}; delete: {deleted}",
            dynamic_ports: false,
            side_effects: true,
        }
    }
    fn config_schema(&self) -> Value {
        schema_of::<Config>()
    }
    /// "Claim the event": a write that never overwrites (the atomic claim), keyed by the
    /// event's id, kept four days (Stripe retries for three).
    fn presets(&self) -> Vec<Preset> {
        vec![Preset {
            id: "claim",
            title: "Claim the event",
            description: "Claim the event's id in Memory, once: the first run gets written: \
                          true, a duplicate gets written: false. Follow it with a router that \
                          skips duplicates.",
            config: json!({
                "operation": "write",
                "namespace": "processed-events",
                "key": "{{ input.id }}",
                "allow_overwrite": false,
                "ttl_s": "4d",
            }),
            fill: [
                ("key", PresetFill::EventId),
                ("namespace", PresetFill::WorkflowNamespace),
            ]
            .into_iter()
            .collect(),
        }]
    }
    fn check(&self, config: &Value) -> Vec<ConfigProblem> {
        let c = match parse_config::<Config>(config) {
            Ok(c) => c,
            Err(p) => return p,
        };
        let mut problems = Vec::new();
        if let Err(e) = crate::store::check_namespace(&c.namespace) {
            problems.push(ConfigProblem {
                path: "namespace".into(),
                message: e.to_string(),
            });
        }
        if matches!(&c.key, Value::String(s) if s.trim().is_empty()) || c.key.is_null() {
            problems.push(ConfigProblem {
                path: "key".into(),
                message: "is empty: give a key template such as {{ input.id }}".into(),
            });
        }
        if c.ttl_s == Some(0) {
            problems.push(ConfigProblem {
                path: "ttl_s".into(),
                message: "must be at least 1 second (omit it for no expiry)".into(),
            });
        }
        if c.operation != Operation::Write {
            for (set, field) in [
                (c.value.is_some(), "value"),
                (c.ttl_s.is_some(), "ttl_s"),
                (!c.allow_overwrite, "allow_overwrite"),
            ] {
                if set {
                    problems.push(ConfigProblem {
                        path: field.into(),
                        message: "only applies to operation `write`".into(),
                    });
                }
            }
        }
        problems
    }
    /// A reused claim (`written: true`) must still be the lineage's: re-take it if a
    /// compensation released it (the TTL counts again from now); if another run holds it now,
    /// the reuse does not hold and the step executes again (answering `exists`).
    async fn confirm_reuse(
        &self,
        cx: &StepContext<'_>,
        config: &Value,
        output: &Value,
    ) -> Result<bool, StepError> {
        let Ok(c) = serde_json::from_value::<Config>(config.clone()) else {
            return Ok(true);
        };
        let claim = c.operation == Operation::Write
            && !c.allow_overwrite
            && c.scope == Scope::Persistent
            && output.get("written") == Some(&Value::Bool(true));
        if !claim {
            return Ok(true);
        }
        let key = key_text(&c.key, "key")?;
        let owner = ClaimOwner {
            run_id: cx.root_run_id.to_string(),
            step_id: cx.step_id.to_string(),
        };
        let opts = WriteOptions {
            allow_overwrite: false,
            ttl_ms: c.ttl_s.map(|s| s.saturating_mul(1000)),
            owner: Some(&owner),
        };
        let value = c.value.unwrap_or(Value::Bool(true));
        let store = cx.effects.memory(c.scope);
        Ok(
            match store
                .write(&c.namespace, &key, &value, opts, cx.clock.now_ms())
                .await?
            {
                WriteResult::Written { .. } => true,
                WriteResult::Exists { existing } => existing.owner.as_ref() == Some(&owner),
            },
        )
    }
    async fn run(&self, cx: &StepContext<'_>, config: Value) -> Result<StepOutput, StepError> {
        let c: Config = parse_rendered(config)?;
        // Both may be rendered from the trigger's payload: the rules apply to what was
        // rendered, before the store sees it.
        crate::store::check_namespace(&c.namespace)
            .map_err(|e| StepError::new(e.code(), format!("config.namespace: {e}")))?;
        let key = key_text(&c.key, "key")?;
        crate::store::check_memory_key(&key)
            .map_err(|e| StepError::new(e.code(), format!("config.key: {e}")))?;
        let store = cx.effects.memory(c.scope);
        let now = cx.clock.now_ms();
        let out = match c.operation {
            Operation::Write => {
                let value = c.value.unwrap_or(Value::Bool(true));
                let owner = ClaimOwner {
                    run_id: cx.root_run_id.to_string(),
                    step_id: cx.step_id.to_string(),
                };
                let opts = WriteOptions {
                    allow_overwrite: c.allow_overwrite,
                    ttl_ms: c.ttl_s.map(|s| s.saturating_mul(1000)),
                    owner: (c.scope == Scope::Persistent).then_some(&owner),
                };
                let with_expiry = |mut o: Value, at: Option<i64>| {
                    if let Some(e) = at {
                        o["expires_at"] = json!(rfc3339(e));
                    }
                    o
                };
                match store.write(&c.namespace, &key, &value, opts, now).await? {
                    WriteResult::Written { expires_at } => {
                        with_expiry(json!({"written": true, "key": key}), expires_at)
                    }
                    WriteResult::Exists { existing }
                        if opts.owner.is_some() && existing.owner.as_ref() == opts.owner =>
                    {
                        with_expiry(
                            json!({"written": true, "reclaimed": true, "key": key}),
                            existing.expires_at,
                        )
                    }
                    WriteResult::Exists { existing } => {
                        let mut o = json!({"written": false, "reason": "exists", "key": key});
                        if let Some(owner) = &existing.owner {
                            o["claimed_by"] = json!(owner.run_id);
                        }
                        with_expiry(o, existing.expires_at)
                    }
                }
            }
            Operation::Read => match store.read(&c.namespace, &key, now).await? {
                Some(e) => {
                    let mut o = json!({"found": true, "value": e.value});
                    if let Some(x) = e.expires_at {
                        o["expires_at"] = json!(rfc3339(x));
                    }
                    o
                }
                None => json!({"found": false}),
            },
            Operation::Delete => json!({"deleted": store.delete(&c.namespace, &key, now).await?}),
        };
        Ok(StepOutput::out(out))
    }
}
