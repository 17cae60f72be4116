//! The long-chain workflow shared by `examples/chain.rs` (timing) and `tests/long_chain.rs`.

use serde_json::{json, Value};

/// `manual_trigger → s1 → … → sN`, each transform adding 1 to the previous one's `n`
/// (`{{ steps.s<i-1>.output.n + 1 }}`); run timeout 3600 s.
pub fn chain(n: usize) -> Value {
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
            "t".to_string()
        } else {
            format!("s{}", i - 1)
        };
        edges.push(json!({"from": from, "to": format!("s{i}")}));
    }
    json!({"id": "chain", "name": "chain", "version": 1,
           "settings": {"run_timeout_s": 3600}, "steps": steps, "edges": edges})
}
