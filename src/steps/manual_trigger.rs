//! `manual_trigger`: entry point for runs started from the app, the CLI or the REST API.
//! Output: the run's `input`.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{
    parse_config, schema_of, Category, ConfigProblem, Descriptor, StepContext, StepError, StepKind,
    StepOutput,
};

/// Manual trigger config.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Example input offered in the editor's Dry Run panel.
    #[serde(default)]
    #[schemars(title = "Sample input")]
    pub sample_input: Option<Value>,
}

/// The `manual_trigger` kind.
pub struct ManualTrigger;

#[async_trait]
impl StepKind for ManualTrigger {
    fn descriptor(&self) -> Descriptor {
        Descriptor {
            kind: "manual_trigger",
            title: "Manual trigger",
            category: Category::Trigger,
            description: "Entry point for runs started from the app, the CLI or the REST API.",
            trigger: true,
            output: "the run input",
            dynamic_ports: false,
            side_effects: false,
        }
    }
    fn config_schema(&self) -> Value {
        schema_of::<Config>()
    }
    fn check(&self, config: &Value) -> Vec<ConfigProblem> {
        parse_config::<Config>(config).err().unwrap_or_default()
    }
    fn unrendered_fields(&self) -> &'static [&'static str] {
        &["sample_input"]
    }
    async fn run(&self, cx: &StepContext<'_>, _config: Value) -> Result<StepOutput, StepError> {
        Ok(StepOutput::out(cx.input.clone()))
    }
}
