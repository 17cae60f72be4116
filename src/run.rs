//! The run record (SPEC §4): what one execution of a workflow did, step by step and attempt by
//! attempt. This is what the store keeps, `fluxo run --json` prints, and the API answers.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::clock::{parse_rfc3339, rfc3339};

pub mod input;
pub use input::RunInput;

/// A UTC instant, unix milliseconds in memory, RFC 3339 (`2026-01-01T00:00:00.000Z`) on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(pub i64);

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&rfc3339(self.0))
    }
}

/// On the wire a string (`format: date-time`), whatever the in-memory ms.
impl utoipa::PartialSchema for Timestamp {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)))
            .description(Some(
                "A UTC instant, RFC 3339 with milliseconds (`2026-01-01T00:00:00.000Z`).",
            ))
            .examples(["2026-01-01T00:00:00.000Z"])
            .into()
    }
}

impl utoipa::ToSchema for Timestamp {}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_rfc3339(&s)
            .map(Timestamp)
            .ok_or_else(|| serde::de::Error::custom(format!("`{s}` is not an RFC 3339 timestamp")))
    }
}

/// Where a run came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    Webhook,
    Api,
    Manual,
    Replay,
    Cli,
    /// A resume of a failed, timed-out or interrupted run (by a person, or by crash recovery).
    Resume,
    /// A tick of a `schedule_trigger` (its key is `<workflow_id>@<scheduled instant>`).
    Schedule,
    /// A child run started by a `fan_out` step (its record names the parent in `parent_run`).
    FanOut,
}

/// `live` runs act; `dry` runs simulate every side effect (SPEC §4 "Dry run").
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    #[default]
    Live,
    Dry,
}

/// Run lifecycle (SPEC §4). `queued` and `running` are the only non-final states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Queued,
    Running,
    Succeeded,
    Failed,
    TimedOut,
    Interrupted,
    /// A schedule tick that started nothing (`overlap: skip` while an earlier run of the
    /// workflow was queued or running): recorded so history shows it, never executed.
    Skipped,
}

impl RunStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [RunStatus; 7] = [
        RunStatus::Queued,
        RunStatus::Running,
        RunStatus::Succeeded,
        RunStatus::Failed,
        RunStatus::TimedOut,
        RunStatus::Interrupted,
        RunStatus::Skipped,
    ];
    /// The wire name (`timed_out`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Queued => "queued",
            RunStatus::Running => "running",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::TimedOut => "timed_out",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Skipped => "skipped",
        }
    }
    /// Parse a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }
    /// True once the run can no longer change.
    pub fn is_final(self) -> bool {
        !matches!(self, RunStatus::Queued | RunStatus::Running)
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Trigger {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Webhook => "webhook",
            Trigger::Api => "api",
            Trigger::Manual => "manual",
            Trigger::Replay => "replay",
            Trigger::Cli => "cli",
            Trigger::Resume => "resume",
            Trigger::Schedule => "schedule",
            Trigger::FanOut => "fan_out",
        }
    }
}

impl Mode {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Live => "live",
            Mode::Dry => "dry",
        }
    }
}

/// Status of one step inside a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Running,
    Succeeded,
    Failed,
    /// Failed, then recovered by an `error_handler` in `fallback` mode.
    Fallback,
}

/// A step's failure, as recorded and as seen by templates in `error` (SPEC §2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ErrorInfo {
    /// Machine-readable code: `template_error`, `empty_key`, `http_status`, `timeout`,
    /// `connection`, `deadline_exceeded`, `config`, `store`, `rethrown`, …
    pub code: String,
    /// Human-readable message naming what and where.
    pub message: String,
    /// The step that failed.
    pub step: String,
    /// Attempts made before giving up.
    #[serde(default)]
    #[schema(required = true)]
    pub attempts: u32,
    /// The last HTTP status seen, if the failure was an HTTP answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub http_status: Option<u16>,
}

/// One attempt of one step (SPEC §4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Attempt {
    /// When the attempt started.
    pub started_at: Timestamp,
    /// How long the attempt took, in milliseconds.
    pub duration_ms: u64,
    /// Wait before this attempt (backoff or `Retry-After`), in milliseconds; 0 for the first.
    pub delay_before_ms: u64,
    /// The HTTP status answered, if the attempt got an answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub http_status: Option<u16>,
    /// Why the attempt failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub error: Option<String>,
}

/// What one step did in a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct StepRecord {
    pub step_id: String,
    pub kind: String,
    pub status: StepStatus,
    pub started_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub finished_at: Option<Timestamp>,
    /// How long the step took (every attempt and wait), in milliseconds.
    pub duration_ms: u64,
    /// The step's config after template rendering.
    #[serde(default)]
    #[schema(required = true)]
    pub resolved_config: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub output: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub error: Option<ErrorInfo>,
    #[serde(default)]
    #[schema(required = true)]
    pub attempts: Vec<Attempt>,
    /// Port(s) the walk left this step by (`out`, `error`, a route name, `default`).
    #[serde(default)]
    #[schema(required = true)]
    pub ports: Vec<String>,
    /// Set on a resumed run's steps that were not executed again: the run that executed the
    /// step and whose recorded output (and ports) this run reused (SPEC §4 "Resume").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub reused_from: Option<String>,
}

/// One execution of a workflow (SPEC §4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct RunRecord {
    /// Time-sortable id (UUIDv7).
    pub id: String,
    pub workflow_id: String,
    /// The workflow file's `version` that ran.
    pub workflow_version: u64,
    /// SHA-256 (hex) of the canonical JSON of the definition that ran.
    pub definition_hash: String,
    pub trigger: Trigger,
    /// The dedupe key of the delivery or request that started it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub idempotency_key: Option<String>,
    pub mode: Mode,
    /// The run this one replays.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub replay_of: Option<String>,
    /// Runs that replayed this one (newest last).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replayed_by: Vec<String>,
    /// The run this one resumes (SPEC §4 "Resume"): it runs that run's snapshot and reuses the
    /// outputs of its steps that succeeded before the resume point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub resume_of: Option<String>,
    /// The step a resume executes from, when one was chosen (`from_step`); absent = from the
    /// failed or in-flight step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub resume_from: Option<String>,
    /// Runs that resumed this one (newest last).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resumed_by: Vec<String>,
    /// The first run of this run's lineage: the run itself, unless it resumes another (then
    /// that run's root). Memory claims are owned by the lineage, and outbound idempotency keys
    /// that default per run use it, so a resumed call sends the key of the first attempt.
    /// Empty on records written before lineages existed (read it with [`RunRecord::root`]).
    #[serde(default)]
    #[schema(required = true)]
    pub root_run_id: String,
    /// The input was edited by the person who started this replay (it differs from the
    /// replayed run's input).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub input_edited: bool,
    /// The run whose `fan_out` step started this one (trigger `fan_out`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub parent_run: Option<String>,
    /// The W3C `traceparent` of the call that started it (a webhook delivery's or run API
    /// request's header, validated; a fan-out item's `fan_out` step): its run span is that
    /// span's child ([`crate::traces`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub trace_parent: Option<String>,
    /// The trigger's input (a webhook's JSON body, `input` of an API start).
    // Kept as the text it arrived as until something reads it ([`RunInput`]).
    #[schema(value_type = Value)]
    pub input: RunInput,
    pub status: RunStatus,
    pub created_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub started_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub finished_at: Option<Timestamp>,
    /// From start to finish, in milliseconds (once finished).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub duration_ms: Option<u64>,
    /// Final error (the last error kept on `timed_out`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub error: Option<ErrorInfo>,
    /// Non-fatal notes, e.g. an error logged by an `error_handler` in `log` mode.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    #[serde(default)]
    #[schema(required = true)]
    pub steps: Vec<StepRecord>,
    /// The workflow definition as it ran (for replay of the original version and "open on canvas").
    #[serde(default)]
    #[schema(required = true)]
    pub snapshot: Value,
}

impl RunRecord {
    /// The lineage's root run id ([`RunRecord::root_run_id`], or the run's own id on records
    /// older than lineages).
    pub fn root(&self) -> &str {
        if self.root_run_id.is_empty() {
            &self.id
        } else {
            &self.root_run_id
        }
    }

    /// The record of one step, if it ran.
    pub fn step(&self, id: &str) -> Option<&StepRecord> {
        self.steps.iter().find(|s| s.step_id == id)
    }
}

/// A new time-sortable run id: UUIDv7 (RFC 9562 §5.7) stamped with `now_ms` from the engine's
/// clock, with a monotonic counter so ids made in one millisecond still sort in creation order.
pub fn new_run_id(now_ms: i64) -> String {
    use std::sync::Mutex;
    static CONTEXT: Mutex<Option<uuid::ContextV7>> = Mutex::new(None);
    let mut guard = CONTEXT.lock().unwrap_or_else(|e| e.into_inner());
    let ctx = guard.get_or_insert_with(uuid::ContextV7::new);
    let ms = now_ms.max(0) as u64;
    let ts = uuid::Timestamp::from_unix(&*ctx, ms / 1000, ((ms % 1000) * 1_000_000) as u32);
    uuid::Uuid::new_v7(ts).to_string()
}
