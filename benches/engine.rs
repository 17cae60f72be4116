//! Criterion benches of the engine's hot paths. Figures are in the README ("Benchmarks").
//!
//! * `executor/dry_run_5_steps`: one dry run of a 5-step workflow (trigger → transform →
//!   memory claim → router → HTTP POST), in-memory store; divide by 5 for the per-step cost.
//! * `template/*`: rendering a text template and a whole-value template.
//! * `memory_claim/sled_*`: no-overwrite claims on a real sled store, without and with a
//!   blocking flush per claim.

use std::collections::BTreeMap;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use fluxo::clock::{Clock, SystemClock};
use fluxo::run::{Mode, Trigger};
use fluxo::runtime::{Engine, RunRequest};
use fluxo::steps::Registry;
use fluxo::store::{InMemoryStore, MemoryStore, SledConfig, SledStore, Store, WriteOptions};
use fluxo::workflow::load_text;
use fluxo::workflow::template::{Scope, Templates};
use serde_json::json;

const FIVE_STEPS: &str = r#"{
  "id": "bench", "name": "bench", "version": 1,
  "steps": [
    {"id": "t", "kind": "manual_trigger", "config": {}},
    {"id": "shape", "kind": "transform", "config": {"fields": {"invoice": "{{ input.data.object.id }}", "amount": "{{ input.data.object.amount_paid }}"}}},
    {"id": "claim", "kind": "memory", "config": {"operation": "write", "namespace": "bench", "key": "{{ input.id }}", "allow_overwrite": false, "ttl_s": 86400}},
    {"id": "route", "kind": "router", "config": {"routes": [{"name": "skip", "when": "steps.claim.output.written == false"}]}},
    {"id": "create", "kind": "http_request", "config": {"method": "POST", "url": "http://127.0.0.1:9/deals", "headers": {"Idempotency-Key": "deal-{{ steps.shape.output.invoice }}"}, "body": {"invoice": "{{ steps.shape.output.invoice }}", "amount": "{{ steps.shape.output.amount }}"}}}
  ],
  "edges": [
    {"from": "t", "to": "shape"}, {"from": "shape", "to": "claim"}, {"from": "claim", "to": "route"},
    {"from": "route", "port": "default", "to": "create"}
  ]
}"#;

fn executor(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let registry = Registry::builtin();
    let wf = load_text(FIVE_STEPS, &registry).expect("bench workflow validates");
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    let engine = Engine::new(store, Arc::new(SystemClock) as Arc<dyn Clock>);
    let input: serde_json::Value = serde_json::from_str(include_str!(
        "../tests/fixtures/payloads/stripe/invoice.paid.json"
    ))
    .unwrap();
    let mut g = c.benchmark_group("executor");
    g.throughput(Throughput::Elements(5));
    g.bench_function("dry_run_5_steps", |b| {
        b.to_async(&rt).iter(|| async {
            let run = engine
                .run(&wf, RunRequest::new(input.clone(), Trigger::Cli, Mode::Dry))
                .await
                .unwrap();
            assert_eq!(run.steps.len(), 5);
            run
        })
    });
    g.finish();
}

fn templates(c: &mut Criterion) {
    let mut t = Templates::new();
    let text = "Invoice {{ input.invoice_id }} for {{ input.customer.name }}";
    let whole = "{{ input.amount }}";
    t.add(text).unwrap();
    t.add(whole).unwrap();
    let scope = Scope::new(
        &json!({"invoice_id": "INV-1", "customer": {"name": "Ada"}, "amount": 1000}),
        &json!({"id": "r"}),
        &BTreeMap::new(),
    );
    let ctx = scope.context();
    let mut g = c.benchmark_group("template");
    g.bench_function("text", |b| {
        b.iter(|| t.render_str(text, &ctx, "f").unwrap())
    });
    g.bench_function("whole_value", |b| {
        b.iter(|| t.render_str(whole, &ctx, "f").unwrap())
    });
    g.bench_function("context_build", |b| b.iter(|| scope.context()));
    g.finish();
}

fn memory_claims(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = SledConfig::new(dir.path().join("store"));
    cfg.flush_every_ms = None;
    let store = SledStore::open(&cfg).unwrap();
    let opts = WriteOptions {
        allow_overwrite: false,
        ttl_ms: Some(86_400_000),
    };
    let v = json!(true);
    let mut n: u64 = 0;
    let mut g = c.benchmark_group("memory_claim");
    g.throughput(Throughput::Elements(1));
    g.bench_function("sled_no_flush", |b| {
        b.iter_batched(
            || {
                n += 1;
                format!("evt_{n}")
            },
            |k| store.write("bench", &k, &v, opts, 0).unwrap(),
            BatchSize::SmallInput,
        )
    });
    g.sample_size(20);
    g.bench_function("sled_flush_each", |b| {
        b.iter_batched(
            || {
                n += 1;
                format!("evt_{n}")
            },
            |k| {
                store.write("bench", &k, &v, opts, 0).unwrap();
                store.flush().unwrap();
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(benches, executor, templates, memory_claims);
criterion_main!(benches);
