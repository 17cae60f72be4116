//! `router`: sends the walk down the port of the first (or every) route whose `when` holds.
//!
//! `when` is an expression without braces (`input.status == "paid"`), evaluated against the
//! same names as templates. A `when` that reads a missing path is false (no match), never an
//! error; comparisons are exact (case-sensitive). No match → the `default` port.
//! Output: `{route}` in `first` mode, `{routes}` in `all` mode.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{
    parse_config, parse_rendered, schema_of, Category, ConfigProblem, Descriptor, StepContext,
    StepError, StepKind, StepOutput,
};
use crate::steps::{PORT_DEFAULT, PORT_ERROR, PORT_OUT};

/// One route: its port name and condition.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// Port name: `[A-Za-z0-9_-]{1,64}`, not `default`, `out` or `error`.
    pub name: String,
    /// Condition expression without braces, e.g. `steps.seen.output.written == false`.
    pub when: String,
}

/// Which routes fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum RouteMode {
    /// The first matching route (default).
    #[default]
    First,
    /// Every matching route.
    All,
}

/// Router config.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Ordered routes.
    #[schemars(title = "Routes")]
    pub routes: Vec<Route>,
    /// `first` (default) or `all`.
    #[serde(default)]
    #[schemars(title = "Match")]
    pub mode: RouteMode,
}

/// The `router` kind.
pub struct Router;

#[async_trait]
impl StepKind for Router {
    fn descriptor(&self) -> Descriptor {
        Descriptor {
            kind: "router",
            title: "Router",
            category: Category::Flow,
            description: "Sends the run down the first (or every) route whose condition holds; \
                          no match goes to `default`. A condition on a missing path is false.",
            trigger: false,
            output: "{route} (first mode) or {routes} (all mode)",
            dynamic_ports: true,
            side_effects: false,
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
        let mut seen = std::collections::HashSet::new();
        for (i, r) in c.routes.iter().enumerate() {
            let valid = !r.name.is_empty()
                && r.name.len() <= 64
                && r.name
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-');
            if !valid {
                problems.push(ConfigProblem {
                    path: format!("routes[{i}].name"),
                    message: format!(
                        "`{}` is not a valid port name ([A-Za-z0-9_-]{{1,64}})",
                        r.name
                    ),
                });
            } else if [PORT_DEFAULT, PORT_OUT, PORT_ERROR].contains(&r.name.as_str()) {
                problems.push(ConfigProblem {
                    path: format!("routes[{i}].name"),
                    message: format!("`{}` is a reserved port name", r.name),
                });
            } else if !seen.insert(r.name.clone()) {
                problems.push(ConfigProblem {
                    path: format!("routes[{i}].name"),
                    message: format!("route `{}` appears twice", r.name),
                });
            }
            if r.when.contains("{{") {
                problems.push(ConfigProblem {
                    path: format!("routes[{i}].when"),
                    message: "is an expression: write it without {{ }}".into(),
                });
            }
        }
        problems
    }
    fn ports(&self, config: &Value) -> Vec<String> {
        let mut ports: Vec<String> = config
            .get("routes")
            .and_then(Value::as_array)
            .map(|rs| {
                rs.iter()
                    .filter_map(|r| r.get("name").and_then(Value::as_str).map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        ports.push(PORT_DEFAULT.into());
        ports.push(PORT_ERROR.into());
        ports
    }
    fn expressions(&self, config: &Value) -> Vec<(String, String)> {
        config
            .get("routes")
            .and_then(Value::as_array)
            .map(|rs| {
                rs.iter()
                    .enumerate()
                    .filter_map(|(i, r)| {
                        r.get("when")
                            .and_then(Value::as_str)
                            .map(|w| (format!("routes[{i}].when"), w.to_string()))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
    fn unrendered_fields(&self) -> &'static [&'static str] {
        &["routes"]
    }
    async fn run(&self, cx: &StepContext<'_>, config: Value) -> Result<StepOutput, StepError> {
        let c: Config = parse_rendered(config)?;
        let mut matched = Vec::new();
        for (i, r) in c.routes.iter().enumerate() {
            let hit = cx
                .templates
                .eval_condition(&r.when, cx.scope, &format!("routes[{i}].when"))
                .map_err(|e| StepError::new("template_error", e.to_string()))?;
            if hit {
                matched.push(r.name.clone());
                if c.mode == RouteMode::First {
                    break;
                }
            }
        }
        if matched.is_empty() {
            matched.push(PORT_DEFAULT.to_string());
        }
        let output = match c.mode {
            RouteMode::First => json!({"route": matched[0]}),
            RouteMode::All => json!({"routes": matched}),
        };
        Ok(StepOutput {
            output,
            ports: matched,
        })
    }
}
