//! `fan_out`: starts one run of another workflow per item of a list (SPEC §3). Each item's key
//! is claimed atomically in the target workflow's scope (the webhook claim, with its own
//! window), so overlapping polls start each item once; the item is the child's `input` and the
//! child's record names this run in `parent_run`. The engine's runs stay one walk each: this
//! starts runs, it does not loop inside one.
//!
//! Output: `{"started": N, "duplicates": M, "run_ids": [<started child run ids>]}` (a dry run
//! claims and queues nothing: `started` counts the items that would start, `run_ids` is empty).

use std::collections::HashSet;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{
    json_type, key_text, parse_config, parse_rendered, schema_of, Category, ConfigProblem,
    Descriptor, RepeatSafety, StepContext, StepError, StepKind, StepOutput,
};
use crate::steps::children::{ChildRun, ChildStart};
use crate::template::Templates;

/// Default key window: 30 days, in seconds.
pub const DEFAULT_WINDOW_S: u64 = 2_592_000;
/// Default most items per execution.
pub const DEFAULT_MAX_ITEMS: usize = 1000;

/// Fan-out config.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// A whole-value template that renders a JSON array, e.g. `{{ steps.list.output.body.data }}`.
    #[schemars(title = "Items")]
    pub items: Value,
    /// Template over `item` (and the usual `input`, `steps`, `env`): the item's stable id, e.g.
    /// `{{ item.id }}`. Claimed in the target workflow's scope: an item whose key is claimed
    /// (by an earlier item, an overlapping poll or a webhook delivery) starts nothing.
    #[schemars(title = "Item key")]
    pub key: String,
    /// The id of the workflow to start per item; its trigger must be `manual_trigger`.
    #[schemars(title = "Workflow to start")]
    pub workflow: String,
    /// How long an item's key is remembered from its first claim: `30d`, `12h`, or a number
    /// of seconds (default 2592000 = 30 days).
    #[serde(default = "default_window", deserialize_with = "crate::duration::secs")]
    #[schemars(title = "Remember keys for", with = "crate::duration::Seconds")]
    pub window_s: u64,
    /// Most items one execution accepts (default 1000); a longer list fails the step, naming
    /// the count, before anything is started.
    #[serde(default = "default_max_items")]
    #[schemars(title = "Most items per run")]
    pub max_items: usize,
}

fn default_window() -> u64 {
    DEFAULT_WINDOW_S
}

fn default_max_items() -> usize {
    DEFAULT_MAX_ITEMS
}

/// The `fan_out` kind.
pub struct FanOut;

#[async_trait]
impl StepKind for FanOut {
    fn descriptor(&self) -> Descriptor {
        Descriptor {
            kind: "fan_out",
            title: "Fan out",
            category: Category::Flow,
            description: "Starts one run of another workflow per item of a list; each item's \
                          key is claimed once in that workflow's scope.",
            trigger: false,
            output: "{started, duplicates, run_ids}",
            dynamic_ports: false,
            side_effects: true,
        }
    }
    fn config_schema(&self) -> Value {
        schema_of::<Config>()
    }
    fn check(&self, config: &Value) -> Vec<ConfigProblem> {
        let c = match parse_config::<Config>(config) {
            Ok(c) => c,
            Err(p) => return p,
        };
        let mut problems = Vec::new();
        if c.key.trim().is_empty() {
            problems.push(ConfigProblem {
                path: "key".into(),
                message: "the key is empty: every item would share one key".into(),
            });
        } else if let Err(e) = Templates::new().add(&c.key) {
            problems.push(ConfigProblem {
                path: "key".into(),
                message: e.to_string(),
            });
        }
        if c.workflow.trim().is_empty() {
            problems.push(ConfigProblem {
                path: "workflow".into(),
                message: "name the workflow to start per item".into(),
            });
        }
        if c.max_items == 0 {
            problems.push(ConfigProblem {
                path: "max_items".into(),
                message: "must be at least 1".into(),
            });
        }
        if c.window_s == 0 {
            problems.push(ConfigProblem {
                path: "window_s".into(),
                message: "must be at least 1 second".into(),
            });
        }
        problems
    }
    fn unrendered_fields(&self) -> &'static [&'static str] {
        &["key"]
    }
    /// Safe: repeating it claims the same keys again, which start nothing the second time.
    fn repeat_safety(&self, _config: &Value) -> RepeatSafety {
        RepeatSafety::Safe
    }
    async fn run(&self, cx: &StepContext<'_>, config: Value) -> Result<StepOutput, StepError> {
        let c: Config = parse_rendered(config)?;
        let items = match &c.items {
            Value::Array(a) => a,
            other => {
                return Err(StepError::new(
                    "invalid_input",
                    format!(
                        "config.items must render to a JSON array, got an {}",
                        json_type(other)
                    ),
                ))
            }
        };
        if items.len() > c.max_items {
            return Err(StepError::new(
                "too_many_items",
                format!(
                    "config.items rendered {} items; max_items is {} (raise max_items or page \
                     the list)",
                    items.len(),
                    c.max_items
                ),
            ));
        }
        // Every key first: a bad item fails the step before any child starts.
        let mut keys = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let ctx = minijinja::context! {
                item => minijinja::Value::from_serialize(item),
                ..cx.scope.clone()
            };
            let field = format!("key (items[{i}])");
            let v = cx
                .templates
                .render_str(&c.key, &ctx, &field)
                .and_then(|v| {
                    crate::template::reveal(&ctx, v, &field, crate::template::Sink::Nowhere)
                })
                .map_err(|e| StepError::new("template_error", e.to_string()))?;
            keys.push(key_text(&v, &field)?);
        }
        let starter = cx.effects.children();
        let window_ms = (c.window_s as i64).saturating_mul(1000);
        let (mut started, mut duplicates, mut run_ids) = (0u64, 0u64, Vec::new());
        let mut seen = HashSet::new();
        for (item, key) in items.iter().zip(keys) {
            if !seen.insert(key.clone()) {
                duplicates += 1;
                continue;
            }
            let child = ChildRun {
                workflow_id: c.workflow.clone(),
                key,
                input: item.clone(),
                parent_run: cx.run_id.to_string(),
                window_ms,
            };
            match starter.start(&child).await? {
                ChildStart::Started { run_id } => {
                    started += 1;
                    run_ids.extend(run_id);
                }
                ChildStart::Duplicate { .. } => duplicates += 1,
            }
        }
        Ok(StepOutput::out(json!({
            "started": started,
            "duplicates": duplicates,
            "run_ids": run_ids,
        })))
    }
}
