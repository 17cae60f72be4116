//! `transform`: builds a new object from templates. Output: the object, one member per field.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::{
    parse_config, parse_rendered, schema_of, Category, ConfigProblem, Descriptor, StepContext,
    StepError, StepKind, StepOutput,
};

/// Transform config.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// `name -> template`; a whole-value template keeps its JSON type.
    #[schemars(title = "Fields")]
    pub fields: Map<String, Value>,
}

/// The `transform` kind.
pub struct Transform;

#[async_trait]
impl StepKind for Transform {
    fn descriptor(&self) -> Descriptor {
        Descriptor {
            kind: "transform",
            title: "Transform",
            category: Category::Data,
            description: "Builds a new object from templates (fields: {name: template}).",
            trigger: false,
            output: "the object",
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
    async fn run(&self, _cx: &StepContext<'_>, config: Value) -> Result<StepOutput, StepError> {
        let c: Config = parse_rendered(config)?;
        Ok(StepOutput::out(Value::Object(c.fields)))
    }
}
