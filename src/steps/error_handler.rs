//! `error_handler`: receives a failed step's error on its `error` edge (SPEC §3).
//!
//! The executor carries out the mode (it owns the walk); this file declares the config.
//! * `log`: record the error as a run warning, end the failed branch; the run succeeds.
//! * `retry_once`: one more attempt of the failed step, a single attempt without its own
//!   retries (layers don't multiply); if it fails again the run fails.
//! * `fallback`: continue on the failed step's `out` with `fallback_value` as its output,
//!   flagged `fallback: true` in the step record.
//! * `rethrow`: the run ends `failed` with the original error, after the handler's own `out`
//!   steps run (a compensating Memory delete, a notification).
//!
//! The handler's `out` steps run whenever the branch ends in failure or a logged error (`log`,
//! `rethrow`, a failed `retry_once`); when it recovers (`fallback`, a successful `retry_once`)
//! the walk continues on the failed step's `out` instead.
//! Output: `{error}` with `message`, `code`, `step`, `attempts`, `http_status`.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{
    parse_config, schema_of, Category, ConfigProblem, Descriptor, StepContext, StepError, StepKind,
    StepOutput,
};

/// What the handler does with the error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HandlerMode {
    Log,
    RetryOnce,
    Fallback,
    Rethrow,
}

/// Error handler config.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `log`, `retry_once`, `fallback` or `rethrow`.
    #[schemars(title = "On error")]
    pub mode: HandlerMode,
    /// The failed step's output in `fallback` mode (templates allowed).
    #[serde(default)]
    #[schemars(title = "Fallback output")]
    pub fallback_value: Option<Value>,
}

/// The `error_handler` kind.
pub struct ErrorHandler;

#[async_trait]
impl StepKind for ErrorHandler {
    fn descriptor(&self) -> Descriptor {
        Descriptor {
            kind: "error_handler",
            title: "Error handler",
            category: Category::Errors,
            description: "Wire a step's error port here. log: record and end the branch; \
                          retry_once: one more single attempt; fallback: continue with \
                          fallback_value; rethrow: run the compensation on out, then fail the run.",
            trigger: false,
            output: "{error: {message, code, step, attempts, http_status}}",
            dynamic_ports: false,
            side_effects: false,
        }
    }
    fn config_schema(&self) -> Value {
        schema_of::<Config>()
    }
    fn check(&self, config: &Value) -> Vec<ConfigProblem> {
        match parse_config::<Config>(config) {
            Err(p) => p,
            Ok(c) if c.mode != HandlerMode::Fallback && c.fallback_value.is_some() => {
                vec![ConfigProblem {
                    path: "fallback_value".into(),
                    message: "only applies to mode `fallback`".into(),
                }]
            }
            Ok(_) => Vec::new(),
        }
    }
    async fn run(&self, cx: &StepContext<'_>, _config: Value) -> Result<StepOutput, StepError> {
        let error = cx
            .scope
            .get_attr("error")
            .ok()
            .and_then(|e| serde_json::to_value(&e).ok())
            .unwrap_or(Value::Null);
        Ok(StepOutput::out(json!({ "error": error })))
    }
}
