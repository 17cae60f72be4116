//! Child runs: how a step (`fan_out`) starts runs of another workflow without reaching into the
//! server. The step asks its run's [`Effects`](crate::steps::effects::Effects) for a
//! [`RunStarter`] (the interface, [`crate::steps::children`]):
//! live, the engine's [`ChildHooks`] (the server's workflow folder and worker queue) with the
//! claim and the queued run written in one transaction (the webhook claim,
//! [`crate::store::IdempotencyStore::claim_and_enqueue`], scoped to the target workflow); dry,
//! a prediction that reads the claims and writes nothing.

use std::sync::Arc;

use async_trait::async_trait;

use super::executor::{Engine, RunRequest};
use crate::run::{Mode, Trigger};
use crate::steps::StepError;
use crate::store::{ClaimOutcome, WebhookClaim};
use crate::workflow::Compiled;

pub use crate::steps::children::{ChildRun, ChildStart, NoStarter, RunStarter};

/// Looks a workflow up by id: its current compiled definition, if it exists and validates.
pub type WorkflowLookup = Box<dyn Fn(&str) -> Option<Arc<Compiled>> + Send + Sync>;

/// What the engine needs from its host to start child runs: the workflow folder and the
/// worker queue (the server's; tests bring their own).
pub struct ChildHooks {
    /// The current compiled definition of a workflow, if it exists and validates.
    pub workflow: WorkflowLookup,
    /// Hand a stored `queued` run to the workers.
    pub dispatch: Box<dyn Fn(String) + Send + Sync>,
}

/// The target workflow, checked: it exists, validates and starts with `manual_trigger`.
fn target(hooks: &ChildHooks, id: &str) -> Result<Arc<Compiled>, StepError> {
    let wf = (hooks.workflow)(id).ok_or_else(|| {
        StepError::new(
            "config",
            format!("config.workflow: workflow `{id}` does not exist or does not validate"),
        )
    })?;
    let kind = &wf.trigger().kind;
    if kind != "manual_trigger" {
        return Err(StepError::new(
            "config",
            format!(
                "config.workflow: workflow `{id}` starts with `{kind}`; fan_out starts only \
                 workflows whose trigger is `manual_trigger`"
            ),
        ));
    }
    Ok(wf)
}

/// The live starter: claim and queued run in one transaction, then the workers.
pub struct LiveStarter {
    pub engine: Engine,
    pub hooks: Arc<ChildHooks>,
}

#[async_trait]
impl RunStarter for LiveStarter {
    async fn start(&self, child: &ChildRun) -> Result<ChildStart, StepError> {
        let wf = target(&self.hooks, &child.workflow_id)?;
        let mut req = RunRequest::new(child.input.clone(), Trigger::FanOut, Mode::Live);
        req.idempotency_key = Some(child.key.clone());
        let mut run = self.engine.new_run(&wf, req);
        run.parent_run = Some(child.parent_run.clone());
        // The item run's span is a child of the `fan_out` step's (traces on).
        run.trace_parent = crate::traces::current_traceparent();
        let now = run.created_at.0;
        let run_id = run.id.clone();
        let claim = WebhookClaim {
            workflow_id: child.workflow_id.clone(),
            key: child.key.clone(),
            run_id: run_id.clone(),
            claimed_at: now,
            expires_at: now.saturating_add(child.window_ms),
        };
        let outcome = match self.engine.group_commit() {
            Some(c) => {
                let r = c.claim_and_enqueue(claim, run).await;
                if r.is_err() {
                    let _ = self
                        .engine
                        .store()
                        .release_claim(&child.workflow_id, &child.key, &run_id)
                        .await;
                }
                r
            }
            None => {
                self.engine
                    .store()
                    .claim_and_enqueue(&claim, &run, now)
                    .await
            }
        }
        .map_err(StepError::from)?;
        Ok(match outcome {
            ClaimOutcome::Claimed => {
                (self.hooks.dispatch)(run_id.clone());
                ChildStart::Started {
                    run_id: Some(run_id),
                }
            }
            ClaimOutcome::Duplicate { run_id } => ChildStart::Duplicate { run_id },
        })
    }
}

/// The dry starter: a live claim is a duplicate; anything else would start. Nothing is written.
pub struct DryStarter {
    pub engine: Engine,
    pub hooks: Option<Arc<ChildHooks>>,
}

#[async_trait]
impl RunStarter for DryStarter {
    async fn start(&self, child: &ChildRun) -> Result<ChildStart, StepError> {
        if let Some(h) = &self.hooks {
            target(h, &child.workflow_id)?;
        }
        let now = self.engine.clock().now_ms();
        match self
            .engine
            .store()
            .get_claim(&child.workflow_id, &child.key, now)
            .await?
        {
            Some(c) => Ok(ChildStart::Duplicate { run_id: c.run_id }),
            None => Ok(ChildStart::Started { run_id: None }),
        }
    }
}
