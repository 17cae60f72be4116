//! Timing of a long chain of transforms: `cargo run --release --example chain -- 10000`.
//!
//! Builds `manual_trigger → s1 → s2 → … → sN`, where each transform reads the previous one's
//! output (`{{ steps.s<i-1>.output.n + 1 }}`), then times the compile (validation + lint) and
//! one live run on an in-memory store. Prints one line per phase, in milliseconds.

use std::sync::Arc;
use std::time::Instant;

use fluxo::clock::SystemClock;
use fluxo::run::{Mode, RunStatus, Trigger};
use fluxo::runtime::{Engine, RunRequest};
use fluxo::steps::Registry;
use fluxo::store::InMemoryStore;
use fluxo::workflow::load_text;
use serde_json::json;

#[path = "common/chain_workflow.rs"]
mod chain_workflow;

// The same allocator as the `fluxo` binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let text = chain_workflow::chain(n).to_string();

    let t0 = Instant::now();
    let wf = load_text(&text, &Registry::builtin()).expect("the chain compiles");
    println!("compile {n} steps: {} ms", t0.elapsed().as_millis());

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let engine = Engine::new(Arc::new(InMemoryStore::new()), Arc::new(SystemClock));
    let t1 = Instant::now();
    let run = rt
        .block_on(engine.run(
            &wf,
            RunRequest::new(json!({"n": 0}), Trigger::Cli, Mode::Live),
        ))
        .expect("the run is stored");
    println!("run {n} steps: {} ms", t1.elapsed().as_millis());
    assert_eq!(run.status, RunStatus::Succeeded, "{:?}", run.error);
    let last = run.steps.last().and_then(|s| s.output.clone());
    assert_eq!(last, Some(json!({"n": n})));
}
