//! Scale: a long chain of transforms runs in time linear in its length (issue 13: the
//! template context used to copy every earlier output for every step, so a 10,000-step chain
//! took 20–27 s). No timed assertion: the figures are in `examples/chain.rs`.

mod common;

use common::{compile, Harness};
use fluxo::run::RunStatus;
use serde_json::{json, Value};

/// `manual_trigger → s1 → … → sN`, each transform adding 1 to the previous one's `n`.
fn chain(n: usize) -> Value {
    let mut steps = vec![json!({"id": "t", "kind": "manual_trigger", "config": {}})];
    let mut edges = Vec::new();
    for i in 1..=n {
        let prev = if i == 1 {
            "input".to_string()
        } else {
            format!("steps.s{}.output", i - 1)
        };
        steps.push(json!({"id": format!("s{i}"), "kind": "transform",
                          "config": {"fields": {"n": format!("{{{{ {prev}.n + 1 }}}}")}}}));
        let from = if i == 1 {
            "t".into()
        } else {
            format!("s{}", i - 1)
        };
        edges.push(json!({"from": from, "to": format!("s{i}")}));
    }
    json!({"id": "chain", "name": "chain", "version": 1,
           "settings": {"run_timeout_s": 3600}, "steps": steps, "edges": edges})
}

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
