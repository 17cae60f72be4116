//! Child runs as a step sees them: what `fan_out` asks its run's
//! [`Effects`](super::effects::Effects) to start and what it is told. The engine's starters
//! (live: claim and queued run in one transaction; dry: a prediction) are in
//! [`crate::runtime::children`].

use async_trait::async_trait;
use serde_json::Value;

use super::StepError;

/// One child run to start.
#[derive(Debug, Clone, PartialEq)]
pub struct ChildRun {
    /// The target workflow (its trigger must be `manual_trigger`).
    pub workflow_id: String,
    /// The item's key, claimed in the target workflow's scope.
    pub key: String,
    /// The child's `input`.
    pub input: Value,
    /// The run that starts it (`parent_run` on the child's record).
    pub parent_run: String,
    /// How long the key is remembered, in milliseconds from now.
    pub window_ms: i64,
}

/// What happened to one child.
#[derive(Debug, Clone, PartialEq)]
pub enum ChildStart {
    /// The key was free: a run was queued (`None` in a dry run: it would have been).
    Started { run_id: Option<String> },
    /// The key is claimed (by an earlier item or run): nothing was started.
    Duplicate { run_id: String },
}

/// Starts child runs for a step.
#[async_trait]
pub trait RunStarter: Send + Sync {
    /// Claim `child.key` for `child.workflow_id` and, if it was free, queue the run.
    async fn start(&self, child: &ChildRun) -> Result<ChildStart, StepError>;
}

/// A live run where the engine has no [`ChildHooks`](crate::runtime::children::ChildHooks) (`fluxo run`): starting runs needs the
/// server's queue.
pub struct NoStarter;

#[async_trait]
impl RunStarter for NoStarter {
    async fn start(&self, _child: &ChildRun) -> Result<ChildStart, StepError> {
        Err(StepError::new(
            "config",
            "starting child runs needs the server's queue: run this workflow under `fluxo \
             serve` or the desktop app (a dry run predicts what it would start)",
        ))
    }
}
