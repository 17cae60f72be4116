//! Step kinds: the contract every kind implements and the one registry that lists them.
//!
//! Each kind lives in its own file with a `Config` type (serde `deny_unknown_fields`,
//! `schemars::JsonSchema`; its doc comments become the editor's help text) and an
//! implementation of [`StepKind`]. The palette, the inspector forms, validation and
//! `GET /api/v1/step-kinds` all read [`Registry::builtin`]. Adding a kind is one new file plus
//! one line in [`Registry::builtin`] and its tests.
//!
//! Steps never reach storage or the network directly: [`StepContext`] hands them the Memory
//! store, the HTTP transport and the clock, already chosen for the run's mode (live or dry).

pub mod action;
pub mod children;
pub mod effects;
pub mod error_handler;
pub mod fan_out;
pub mod find_or_create;
pub mod http;
pub mod http_request;
pub mod manual_trigger;
pub mod memory;
pub mod outbound;
pub mod publish_output;
pub mod retry;
pub mod router;
pub mod schedule_trigger;
pub mod transform;
pub mod webhook_trigger;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use crate::clock::Clock;
use crate::run::{Attempt, Mode};
use crate::template::Templates;
use effects::Effects;

/// The normal output port every step has.
pub const PORT_OUT: &str = "out";
/// The error port every step has.
pub const PORT_ERROR: &str = "error";
/// A router's no-match port.
pub const PORT_DEFAULT: &str = "default";

/// Palette grouping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    Trigger,
    Data,
    Flow,
    Network,
    Errors,
}

/// What a kind is, for the palette and the catalog.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Descriptor {
    pub kind: &'static str,
    pub title: &'static str,
    pub category: Category,
    pub description: &'static str,
    /// Entry point of a workflow (exactly one per workflow).
    pub trigger: bool,
    /// The output shape, as documentation (SPEC §3).
    pub output: &'static str,
    /// Ports beyond `out`/`error` come from the config (the router's routes + `default`).
    pub dynamic_ports: bool,
    /// Acts on the world (Memory writes, HTTP calls, published output). A live run's progress
    /// is stored after each such step, so a crash leaves a record of what was done; after a
    /// pure step (trigger, transform, router, error handler) nothing needs recording until
    /// the next effect or the run's end.
    pub side_effects: bool,
}

/// A ready-made step the editor's palette offers beside its kind (Memory's "Claim the
/// event"): a name and a config, some members of which the editor fills from the workflow
/// ([`PresetFill`]).
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Preset {
    /// Stable id within the kind (`claim`).
    pub id: &'static str,
    /// The palette card's title, and the new step's name.
    pub title: &'static str,
    pub description: &'static str,
    /// The new step's config.
    pub config: Value,
    /// Config members the editor fills from the workflow, by member name.
    pub fill: std::collections::BTreeMap<&'static str, PresetFill>,
}

/// What the editor fills a [`Preset`] member with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PresetFill {
    /// The template of the event's id: the webhook trigger's `dedupe_key` when it has one,
    /// else `{{ input.id }}` (what the templates' claims use).
    EventId,
    /// A Memory namespace of the workflow's own: `processed-<workflow id>`.
    WorkflowNamespace,
}

/// Whether a step may be executed again after a crash may have cut it mid-flight
/// ([`StepKind::repeat_safety`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RepeatSafety {
    /// Pure, or its effect is idempotent (a Memory operation, a GET/PUT/DELETE, a write that
    /// carries an `Idempotency-Key`).
    Safe,
    /// Repeating it may duplicate an effect; the reason, as a person should read it (e.g.
    /// "POST without an Idempotency-Key may have reached the destination").
    Unsafe(String),
}

impl RepeatSafety {
    /// True for [`RepeatSafety::Safe`].
    pub fn is_safe(&self) -> bool {
        matches!(self, RepeatSafety::Safe)
    }
}

/// A URL a step sends requests to, as written (for the outbound rules of SPEC §5, applied
/// by validation, the linter and the live transport: [`crate::steps::outbound`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundUrl {
    /// The config field holding it (`url`, `find_url`, `create_url`).
    pub field: &'static str,
    /// The URL template as written.
    pub template: String,
    /// The step lets this URL's host come from run data (`allow_input_host`).
    pub allow_input_host: bool,
}

/// A config problem: `path` is relative to the step's `config` (`retries`, `routes[1].when`).
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigProblem {
    pub path: String,
    pub message: String,
}

/// A step's failure, turned into [`crate::run::ErrorInfo`] by the executor.
#[derive(Debug, Clone, PartialEq)]
pub struct StepError {
    /// `template_error`, `empty_key`, `config`, `http_status`, `timeout`, `connection`,
    /// `deadline_exceeded`, `store`, `invalid_input`; Memory: `invalid_namespace`,
    /// `key_too_long`; the outbound rules' `url_not_allowed`, `redirect_not_followed`,
    /// `response_too_large` ([`crate::steps::outbound`]).
    pub code: &'static str,
    pub message: String,
    pub http_status: Option<u16>,
    /// The run deadline ended the step (the run ends `timed_out`); `code`/`message` keep the
    /// last real error when there was one.
    pub deadline: bool,
    /// Attempts made (0 = the executor counts one).
    pub attempts: u32,
    /// The wait the answer asked for (`Retry-After`, RFC 9110 §10.2.3), in milliseconds, when
    /// it gave one: what a caller retrying on its own (a find-then-create) waits.
    pub retry_after_ms: Option<u64>,
}

impl StepError {
    /// A new error.
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        StepError {
            code,
            message: message.into(),
            http_status: None,
            deadline: false,
            attempts: 0,
            retry_after_ms: None,
        }
    }
}

impl From<crate::store::StoreError> for StepError {
    /// `store` for a store failure; `invalid_input` for an input the store refused
    /// ([`crate::store::StoreError::Invalid`], which no retry changes).
    fn from(e: crate::store::StoreError) -> Self {
        let code = if e.is_transient() {
            "store"
        } else {
            "invalid_input"
        };
        StepError::new(code, e.to_string())
    }
}

/// What a step produced: its output and the port(s) the walk leaves by.
#[derive(Debug, Clone, PartialEq)]
pub struct StepOutput {
    pub output: Value,
    /// `out` for most kinds; the router names its route(s) or `default`.
    pub ports: Vec<String>,
}

impl StepOutput {
    /// Output on the `out` port.
    pub fn out(output: Value) -> Self {
        StepOutput {
            output,
            ports: vec![PORT_OUT.to_string()],
        }
    }
}

/// Everything a step may touch while it runs.
pub struct StepContext<'a> {
    pub step_id: &'a str,
    pub run_id: &'a str,
    /// The lineage's root run id ([`crate::run::RunRecord::root`]): `run_id` unless the run
    /// resumes another. Owns the Memory claims the step makes and keys outbound calls that
    /// default per run, so a resumed step acts as the first attempt did.
    pub root_run_id: &'a str,
    pub workflow_id: &'a str,
    pub mode: Mode,
    /// The run's input (the trigger payload).
    pub input: &'a Value,
    /// Side effects for this run's mode (live, or simulated for dry runs).
    pub effects: &'a Effects,
    pub clock: &'a dyn Clock,
    /// The run deadline (UTC unix ms): no wait is scheduled past it.
    pub deadline_ms: i64,
    /// `false` for an `error_handler`'s `retry_once` re-attempt: a single attempt, no retries.
    pub retries_enabled: bool,
    pub templates: &'a Templates,
    /// The template context of this step (for expressions evaluated at run time).
    pub scope: &'a minijinja::Value,
    /// The step's config as written (templates unrendered), when the executor provides it.
    raw_config: Option<&'a Value>,
    attempts: Mutex<Vec<Attempt>>,
}

impl<'a> StepContext<'a> {
    /// A context; the executor builds one per step execution.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        step_id: &'a str,
        run_id: &'a str,
        workflow_id: &'a str,
        mode: Mode,
        input: &'a Value,
        effects: &'a Effects,
        clock: &'a dyn Clock,
        deadline_ms: i64,
        retries_enabled: bool,
        templates: &'a Templates,
        scope: &'a minijinja::Value,
    ) -> Self {
        StepContext {
            step_id,
            run_id,
            root_run_id: run_id,
            workflow_id,
            mode,
            input,
            effects,
            clock,
            deadline_ms,
            retries_enabled,
            templates,
            scope,
            raw_config: None,
            attempts: Mutex::new(Vec::new()),
        }
    }

    /// Set the lineage's root run id (default: the run's own id).
    pub fn with_root_run_id(mut self, root: &'a str) -> Self {
        self.root_run_id = root;
        self
    }

    /// Attach the step's config as written, so a kind can tell a field configured empty from
    /// one whose template rendered empty.
    pub fn with_raw_config(mut self, raw: &'a Value) -> Self {
        self.raw_config = Some(raw);
        self
    }

    /// The step's config as written (templates unrendered), if attached.
    pub fn raw_config(&self) -> Option<&'a Value> {
        self.raw_config
    }

    /// Record one attempt (HTTP kinds record each try; the executor records one for others).
    pub fn record_attempt(&self, a: Attempt) {
        self.attempts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(a);
    }

    /// How many attempts were recorded so far.
    pub fn attempt_count(&self) -> u32 {
        self.attempts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len() as u32
    }

    /// Take the attempts recorded so far.
    pub fn take_attempts(&self) -> Vec<Attempt> {
        std::mem::take(&mut *self.attempts.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// One step kind.
#[async_trait]
pub trait StepKind: Send + Sync + 'static {
    /// Name, title, category, output shape.
    fn descriptor(&self) -> Descriptor;
    /// JSON Schema of the config (generated from the Rust type).
    fn config_schema(&self) -> Value;
    /// Every problem of a config as written (templates unrendered).
    fn check(&self, config: &Value) -> Vec<ConfigProblem>;
    /// Ready-made steps of this kind for the palette. Default: none.
    fn presets(&self) -> Vec<Preset> {
        Vec::new()
    }
    /// Output ports for this config. Default: `out`, `error`.
    fn ports(&self, _config: &Value) -> Vec<String> {
        vec![PORT_OUT.to_string(), PORT_ERROR.to_string()]
    }
    /// Top-level config fields that hold expressions, not templates: left unrendered and
    /// compiled as expressions (the router's `routes`).
    fn expressions(&self, _config: &Value) -> Vec<(String, String)> {
        Vec::new()
    }
    /// Top-level config fields the executor must not render (they hold expressions).
    fn unrendered_fields(&self) -> &'static [&'static str] {
        &[]
    }
    /// Whether this step, with this config (rendered, or as written: the answer must not
    /// depend on values templates fill in), may be executed again when a crash cut it
    /// mid-flight and nobody knows whether its effect happened (SPEC §4 "Crash recovery").
    /// Crash recovery resumes a run automatically only when its in-flight step answers
    /// [`RepeatSafety::Safe`]; the linter and the resume and replay previews read the same
    /// answer. Default: safe (pure steps, and kinds whose effect is idempotent).
    fn repeat_safety(&self, _config: &Value) -> RepeatSafety {
        RepeatSafety::Safe
    }
    /// The step is declared an expected effect on the failure path (`expected_on_failure:
    /// true`, a member of every config that flattens [`retry::CallPolicy`]: the kinds that
    /// call a destination): `fluxo check` counts what it writes while it runs after an error
    /// port as expected (an alert, an audit log), not as an effect a re-run must not leave.
    /// Default: the config's `expected_on_failure` member (validation refuses it on kinds
    /// whose config does not name it).
    fn expected_on_failure(&self, config: &Value) -> bool {
        config.get("expected_on_failure").and_then(Value::as_bool) == Some(true)
    }
    /// The URLs this step sends to, as written in `config` (kinds that send HTTP). Validation
    /// refuses one whose host is rendered from run data unless it allows it, and the linter
    /// flags those that do (SPEC §5). Default: none.
    fn outbound_urls(&self, _config: &Value) -> Vec<OutboundUrl> {
        Vec::new()
    }
    /// Config fields where a secret may render whole (`Bearer {{ env.API_KEY }}`): header
    /// maps, a signing secret. Anywhere else but the outbound URLs' credentials (and their very
    /// start), a secret fails the render ([`crate::template::reveal`]). Default: none.
    fn secret_fields(&self) -> &'static [&'static str] {
        &[]
    }
    /// A resumed run is about to reuse this step's recorded `output` (with `config` as it
    /// was rendered then) instead of executing it: answer whether the reuse still holds in the
    /// world as it is now, restoring what the step established where it can. `false` executes
    /// the step again instead. Default: the reuse holds. The Memory kind re-takes a claim
    /// that a compensation released, and answers `false` when another run took it meanwhile.
    async fn confirm_reuse(
        &self,
        _cx: &StepContext<'_>,
        _config: &Value,
        _output: &Value,
    ) -> Result<bool, StepError> {
        Ok(true)
    }
    /// Run with the rendered config.
    async fn run(&self, cx: &StepContext<'_>, config: Value) -> Result<StepOutput, StepError>;
}

/// Parse a config into its typed form, or every problem with its path. A member the type's
/// JSON Schema does not name is refused as serde's `deny_unknown_fields` would ("unknown field
/// `x`, expected one of …"): the configs that flatten the shared [`retry::CallPolicy`] cannot
/// say `deny_unknown_fields` (serde does not support both), and get the same rule here.
pub fn parse_config<C: DeserializeOwned + schemars::JsonSchema + 'static>(
    config: &Value,
) -> Result<C, Vec<ConfigProblem>> {
    let c = serde_path_to_error::deserialize::<_, C>(config).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            // serde loses the path inside a flattened struct: ask the call policy's fields
            // alone, which name it.
            if let Some(p) = call_policy_problem(config) {
                return vec![p];
            }
        }
        vec![ConfigProblem {
            path: if path == "." { String::new() } else { path },
            message: e.into_inner().to_string(),
        }]
    })?;
    if let Some(given) = config.as_object() {
        if let Some(known) = member_names::<C>() {
            if let Some(unknown) = given.keys().find(|k| !known.contains(*k)) {
                let names: Vec<String> = known.iter().map(|k| format!("`{k}`")).collect();
                return Err(vec![ConfigProblem {
                    path: unknown.clone(),
                    message: format!(
                        "unknown field `{unknown}`, expected one of {}",
                        names.join(", ")
                    ),
                }]);
            }
        }
    }
    Ok(c)
}

/// The members a config type's JSON Schema names, in its order (`None`: it names none), built
/// once per type: validation runs for every step of every check.
fn member_names<C: schemars::JsonSchema + 'static>() -> Option<std::sync::Arc<Vec<String>>> {
    use std::any::TypeId;
    use std::collections::HashMap;
    use std::sync::{Arc, LazyLock, Mutex};
    type Cache = Mutex<HashMap<TypeId, Option<Arc<Vec<String>>>>>;
    static CACHE: LazyLock<Cache> = LazyLock::new(Default::default);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    cache
        .entry(TypeId::of::<C>())
        .or_insert_with(|| {
            let schema = schema_of::<C>();
            let props = schema.get("properties")?.as_object()?;
            Some(Arc::new(props.keys().cloned().collect()))
        })
        .clone()
}

/// The first problem of the [`retry::CallPolicy`] members of `config`, with its path.
fn call_policy_problem(config: &Value) -> Option<ConfigProblem> {
    let given = config.as_object()?;
    let schema = schema_of::<retry::CallPolicy>();
    let names = schema.get("properties")?.as_object()?;
    let part: serde_json::Map<String, Value> = given
        .iter()
        .filter(|(k, _)| names.contains_key(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let e = serde_path_to_error::deserialize::<_, retry::CallPolicy>(Value::Object(part)).err()?;
    Some(ConfigProblem {
        path: e.path().to_string(),
        message: e.into_inner().to_string(),
    })
}

/// Parse a rendered config at run time; a failure is a `config` step error.
pub fn parse_rendered<C: DeserializeOwned>(config: Value) -> Result<C, StepError> {
    serde_path_to_error::deserialize::<_, C>(config).map_err(|e| {
        let path = e.path().to_string();
        StepError::new(
            "config",
            format!("rendered config.{path} is invalid: {}", e.into_inner()),
        )
    })
}

/// JSON Schema of a config type.
pub fn schema_of<C: schemars::JsonSchema>() -> Value {
    serde_json::to_value(schemars::schema_for!(C)).unwrap_or(Value::Null)
}

/// A rendered key (Memory key, dedupe key, idempotency key) as text: strings as they are,
/// numbers and booleans in their JSON form; `null`, "" or only whitespace → `empty_key`
/// (SPEC §2: an empty key would merge every event into one).
pub fn key_text(v: &Value, field: &str) -> Result<String, StepError> {
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null => String::new(),
        _ => {
            return Err(StepError::new(
                "config",
                format!(
                    "config.{field} must render to text, got an {}",
                    json_type(v)
                ),
            ))
        }
    };
    if s.trim().is_empty() {
        return Err(StepError::new(
            "empty_key",
            format!("config.{field} rendered to an empty key"),
        ));
    }
    Ok(s)
}

/// "object", "array", "string", …
pub fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The kinds, by name.
pub struct Registry {
    kinds: Vec<Arc<dyn StepKind>>,
    by_name: HashMap<&'static str, Arc<dyn StepKind>>,
}

impl Registry {
    /// Every built-in kind. **Register new kinds here.**
    pub fn builtin() -> Self {
        let kinds: Vec<Arc<dyn StepKind>> = vec![
            Arc::new(webhook_trigger::WebhookTrigger),
            Arc::new(manual_trigger::ManualTrigger),
            Arc::new(schedule_trigger::ScheduleTrigger),
            Arc::new(memory::Memory),
            Arc::new(router::Router),
            Arc::new(error_handler::ErrorHandler),
            Arc::new(http_request::HttpRequest),
            Arc::new(publish_output::PublishOutput),
            Arc::new(find_or_create::FindOrCreate),
            Arc::new(transform::Transform),
            Arc::new(fan_out::FanOut),
            Arc::new(action::Action),
        ];
        let by_name = kinds
            .iter()
            .map(|k| (k.descriptor().kind, k.clone()))
            .collect();
        Registry { kinds, by_name }
    }

    /// The kind with this name.
    pub fn get(&self, kind: &str) -> Option<&Arc<dyn StepKind>> {
        self.by_name.get(kind)
    }

    /// Every kind, in palette order.
    pub fn kinds(&self) -> &[Arc<dyn StepKind>] {
        &self.kinds
    }

    /// Kind names, in palette order.
    pub fn names(&self) -> Vec<&'static str> {
        self.kinds.iter().map(|k| k.descriptor().kind).collect()
    }

    /// The catalog served by `fluxo step-kinds` and `GET /api/v1/step-kinds`: per kind its
    /// descriptor, fixed ports and config JSON Schema.
    pub fn catalog(&self) -> Value {
        Value::Array(
            self.kinds
                .iter()
                .map(|k| {
                    let d = k.descriptor();
                    let mut v = serde_json::to_value(&d).unwrap_or(Value::Null);
                    if let Value::Object(m) = &mut v {
                        // Ports of an empty config: the fixed ones (a router adds its routes).
                        let ports = k.ports(&Value::Object(Default::default()));
                        m.insert("ports".into(), serde_json::json!(ports));
                        m.insert("config_schema".into(), k.config_schema());
                        m.insert("presets".into(), serde_json::json!(k.presets()));
                    }
                    v
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The configs that flatten the call policy refuse an unknown member and name a bad one's
    /// path as a `deny_unknown_fields` config does.
    #[test]
    fn a_flattened_call_policy_keeps_unknown_fields_and_paths_precise() {
        let ok = json!({"method": "POST", "url": "https://x.example/a", "retries": 0});
        let c: http_request::Config = parse_config(&ok).unwrap();
        assert_eq!(c.call.retries, 0);
        assert_eq!(c.call.timeout_s, retry::DEFAULT_TIMEOUT_S);

        let typo = json!({"method": "POST", "url": "https://x.example/a", "retires": 3});
        let p = parse_config::<http_request::Config>(&typo).unwrap_err();
        assert_eq!(p[0].path, "retires");
        assert!(
            p[0].message
                .starts_with("unknown field `retires`, expected one of `method`"),
            "{}",
            p[0].message
        );
        assert!(
            p[0].message.contains("`max_retry_delay_s`"),
            "{}",
            p[0].message
        );

        let bad = json!({"connector": "hubspot", "operation": "create_contact",
                         "connection": "crm", "timeout_s": "soon"});
        let p = parse_config::<action::Config>(&bad).unwrap_err();
        assert_eq!(p[0].path, "timeout_s");
        assert!(
            p[0].message.contains("`soon` is not a duration"),
            "{}",
            p[0].message
        );
    }
}
