//! Scale: a long chain of transforms runs in time linear in its length (issue 13: the
//! template context used to copy every earlier output for every step, so a 10,000-step chain
//! took 20–27 s). No timed assertion: the figures are in `examples/chain.rs`.

#[path = "../examples/common/chain_workflow.rs"]
mod chain_workflow;
mod common;

use chain_workflow::chain;
use common::{compile, Harness};
use fluxo::run::RunStatus;
use serde_json::json;

#[tokio::test]
async fn a_5000_step_chain_finishes_and_every_step_sees_its_predecessor() {
    let wf = compile(&chain(5000));
    let h = Harness::new();
    let run = h.run(&wf, json!({"n": 0})).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    assert_eq!(run.steps.len(), 5001);
    assert_eq!(run.steps[1].output, Some(json!({"n": 1})));
    assert_eq!(run.steps[5000].output, Some(json!({"n": 5000})));
}
