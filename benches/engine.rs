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
use fluxo::workflow::template::{EnvView, Scope, Templates};
use serde_json::json;

// The same allocator as the `fluxo` binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

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

const ONE_STEP: &str = r#"{
  "id": "bench1", "name": "bench1", "version": 1,
  "steps": [{"id": "t", "kind": "manual_trigger", "config": {}}],
  "edges": []
}"#;

/// Dry runs of a 1-step and a 5-step workflow on the Stripe `invoice.paid` payload. The
/// per-step executor overhead is `(t5 − t1) / 4`: it leaves out the per-run fixed costs
/// (copying the 6 KB input, storing the record). Each batch gets a fresh in-memory store so
/// stored runs do not pile up across iterations.
fn executor(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let registry = Registry::builtin();
    let input: serde_json::Value = serde_json::from_str(include_str!(
        "../tests/fixtures/payloads/stripe/invoice.paid.json"
    ))
    .unwrap();
    let mut g = c.benchmark_group("executor");
    for (name, text, steps) in [
        ("dry_run_1_step", ONE_STEP, 1),
        ("dry_run_5_steps", FIVE_STEPS, 5),
    ] {
        let wf = load_text(text, &registry).expect("bench workflow validates");
        let http: Arc<dyn fluxo::runtime::http::HttpTransport> =
            Arc::new(fluxo::runtime::http::SimulatedHttp);
        g.throughput(Throughput::Elements(steps));
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
                let engine = Engine::new(store, Arc::new(SystemClock) as Arc<dyn Clock>)
                    .with_http(http.clone());
                let inputs: Vec<serde_json::Value> = (0..iters).map(|_| input.clone()).collect();
                rt.block_on(async {
                    let start = std::time::Instant::now();
                    for input in inputs {
                        let run = engine
                            .run(&wf, RunRequest::new(input, Trigger::Cli, Mode::Dry))
                            .await
                            .unwrap();
                        debug_assert_eq!(run.steps.len() as u64, steps);
                        std::hint::black_box(run);
                    }
                    start.elapsed()
                })
            })
        });
    }
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
        EnvView::plain(&BTreeMap::new()),
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
    let payload: serde_json::Value = serde_json::from_str(include_str!(
        "../tests/fixtures/payloads/stripe/invoice.paid.json"
    ))
    .unwrap();
    g.bench_function("scope_from_6kb_payload", |b| {
        b.iter(|| {
            Scope::new(
                &payload,
                &json!({"id": "r"}),
                EnvView::plain(&BTreeMap::new()),
            )
        })
    });
    g.bench_function("clone_6kb_payload", |b| b.iter(|| payload.clone()));
    g.finish();
}

fn memory_claims(c: &mut Criterion) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = SledConfig::new(dir.path().join("store"));
    cfg.flush_every_ms = None;
    let store = SledStore::open(&cfg).unwrap();
    let opts = WriteOptions {
        allow_overwrite: false,
        ttl_ms: Some(86_400_000),
        owner: None,
    };
    let v = json!(true);
    let mut n: u64 = 0;
    let mut g = c.benchmark_group("memory_claim");
    g.throughput(Throughput::Elements(1));
    g.bench_function("sled_no_flush", |b| {
        b.to_async(&rt).iter_batched(
            || {
                n += 1;
                format!("evt_{n}")
            },
            |k| {
                let (store, v) = (&store, &v);
                async move { store.write("bench", &k, v, opts, 0).await.unwrap() }
            },
            BatchSize::SmallInput,
        )
    });
    g.sample_size(20);
    g.bench_function("sled_flush_each", |b| {
        b.to_async(&rt).iter_batched(
            || {
                n += 1;
                format!("evt_{n}")
            },
            |k| {
                let (store, v) = (&store, &v);
                async move {
                    store.write("bench", &k, v, opts, 0).await.unwrap();
                    store.flush().await.unwrap();
                }
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

/// What a step pays for the crash-loop record (`store::flight`): its start and its end, two
/// `write(2)` calls of about 90 bytes, no fsync.
fn in_flight_log(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let log = fluxo::store::flight::FlightLog::start(dir.path(), &[], &[]).unwrap();
    let run = "01a23220-72dc-72d7-b149-b2c54d5c5d29";
    c.bench_function("flight/step", |b| {
        b.iter(|| drop(log.step(run, run, "create_deal")))
    });
}

criterion_group!(benches, executor, templates, memory_claims, in_flight_log);
criterion_main!(benches);
