//! Workflows: the file model, validation that reports every problem at once, templates, the
//! idempotency/retry linter, and compilation into a runnable [`Compiled`] workflow.

pub mod dir;
pub mod env;
pub mod lint;
pub mod model;
pub mod validate;

/// The template engine ([`crate::template`], a leaf the step kinds use too).
pub use crate::template;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;

use serde::Serialize;

pub use model::{canonical_json, Edge, Position, Settings, StepDef, Workflow};
pub use validate::{check_text, check_value, compile, load_file, load_text};

use crate::steps::StepKind;
use template::Templates;

/// How bad a problem is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// The workflow cannot run.
    Error,
    /// A linter finding: it runs, but may duplicate or time out.
    Warning,
}

/// One validation error or lint warning, with where it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = ValidationProblem)]
pub struct Problem {
    pub severity: Severity,
    /// Stable machine code: `json_syntax`, `unknown_field`, `unknown_kind`, `bad_config`,
    /// `duplicate_id`, `unknown_step`, `unknown_port`, `cycle`, `trigger_count`,
    /// `unreachable`, `template_syntax`, `input_host`, …; lint codes start with `lint_`.
    pub code: String,
    pub message: String,
    /// The step concerned, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub step: Option<String>,
    /// JSON path in the file, e.g. `steps[2].config.retries`, `edges[0].to`.
    pub path: String,
}

impl Problem {
    /// An error.
    pub fn error(
        code: &str,
        path: impl Into<String>,
        step: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        Problem {
            severity: Severity::Error,
            code: code.into(),
            message: message.into(),
            step: step.map(String::from),
            path: path.into(),
        }
    }
    /// A warning.
    pub fn warning(
        code: &str,
        path: impl Into<String>,
        step: Option<&str>,
        message: impl Into<String>,
    ) -> Self {
        Problem {
            severity: Severity::Warning,
            ..Problem::error(code, path, step, message)
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        match &self.step {
            Some(s) => write!(
                f,
                "{sev}[{}] step `{s}` at {}: {}",
                self.code, self.path, self.message
            ),
            None => write!(f, "{sev}[{}] at {}: {}", self.code, self.path, self.message),
        }
    }
}

/// A validated workflow, ready to run: kinds resolved, ports wired, templates compiled.
pub struct Compiled {
    pub workflow: Workflow,
    /// `definition_hash` of runs (SHA-256 of canonical JSON).
    pub hash: String,
    pub templates: Templates,
    /// The definition as JSON, recorded on each run as its `snapshot`.
    pub snapshot: serde_json::Value,
    /// Linter warnings (the workflow runs regardless).
    pub warnings: Vec<Problem>,
    pub(crate) kinds: Vec<Arc<dyn StepKind>>,
    /// Per step: its outbound URL fields ([`StepKind::outbound_urls`]), rendered with
    /// [`Templates::render_url`].
    pub(crate) url_fields: Vec<Vec<&'static str>>,
    pub(crate) index: HashMap<String, usize>,
    /// Per step: port → target step indexes, in edge order.
    pub(crate) out: Vec<BTreeMap<String, Vec<usize>>>,
    pub(crate) trigger: usize,
}

impl fmt::Debug for Compiled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Compiled")
            .field("id", &self.workflow.id)
            .field("version", &self.workflow.version)
            .finish_non_exhaustive()
    }
}

impl Compiled {
    /// Step `step`'s outbound URL fields (none for an index out of range).
    pub(crate) fn url_fields(&self, step: usize) -> &[&'static str] {
        self.url_fields.get(step).map_or(&[], Vec::as_slice)
    }
    /// The workflow id.
    pub fn id(&self) -> &str {
        &self.workflow.id
    }
    /// Index of the trigger step.
    pub fn trigger_index(&self) -> usize {
        self.trigger
    }
    /// The trigger step.
    pub fn trigger(&self) -> &StepDef {
        &self.workflow.steps[self.trigger]
    }
    /// Targets of a step's port.
    pub fn targets(&self, step: usize, port: &str) -> &[usize] {
        self.out[step].get(port).map(Vec::as_slice).unwrap_or(&[])
    }
    /// Every port of a step that has edges, with its targets (edge order).
    pub fn ports_of(&self, step: usize) -> impl Iterator<Item = (&str, &[usize])> {
        self.out[step]
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_slice()))
    }
    /// The steps reachable from `step` over edges of any port (`step` itself included).
    pub fn downstream(&self, step: usize) -> Vec<bool> {
        let mut seen = vec![false; self.workflow.steps.len()];
        let mut stack = vec![step];
        while let Some(i) = stack.pop() {
            if std::mem::replace(&mut seen[i], true) {
                continue;
            }
            for (_, targets) in self.ports_of(i) {
                stack.extend(targets.iter().copied());
            }
        }
        seen
    }
    /// The kind implementation of a step.
    pub fn kind(&self, step: usize) -> &Arc<dyn StepKind> {
        &self.kinds[step]
    }
    /// Index of a step by id.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.index.get(id).copied()
    }
}
