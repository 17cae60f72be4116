//! Criterion bench of the webhook door in-process: one request through the whole router
//! (every layer, the handler, the answer's body) without sockets, so the figure is the
//! server's own CPU per delivery, free of the kernel's and the load tool's noise. Figures are
//! in the README ("Benchmarks").
//!
//! * `door/bare`: a router with just the route and the body limit, the handler reading the
//!   body and answering 202 (the same ceiling as `examples/bare_axum.rs`).
//! * `door/duplicate`: `fluxo`'s router on sled, a repeat of a delivered `Idempotency-Key`
//!   (the duplicate answer the load script measures).
//! * `door/input`: a new delivery's body taken in as its run input
//!   (`RunInput::from_json_bytes`: checked to be JSON, kept as its text, its search values
//!   found), the largest cost of a new key in the door's own code.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{Request, StatusCode};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use fluxo::clock::{Clock, SystemClock};
use fluxo::runtime::Engine;
use fluxo::server::{self, ServerOptions};
use fluxo::store::{SledConfig, SledStore, Store};
use fluxo::workflow::dir::WorkflowDir;
use tower_service::Service as _;

// The same allocator as the `fluxo` binary.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BODY: &str = include_str!("../tests/fixtures/payloads/stripe/invoice.paid.json");

const HOOK: &str = r#"{
  "id": "load", "name": "load", "version": 1,
  "steps": [
    {"id": "hook", "kind": "webhook_trigger", "config": {}},
    {"id": "shape", "kind": "transform", "config": {"fields": {"invoice": "{{ input.data.object.id }}"}}}
  ],
  "edges": [{"from": "hook", "to": "shape"}]
}"#;

fn request(host: &str, key: &str) -> Request<Body> {
    Request::post("/hooks/load")
        .header("host", host)
        .header("content-type", "application/json")
        .header("idempotency-key", key)
        .header("content-length", BODY.len())
        .body(Body::from(Bytes::from_static(BODY.as_bytes())))
        .unwrap()
}

async fn call(mut router: axum::Router, req: Request<Body>) -> StatusCode {
    let res = router.call(req).await.unwrap();
    let status = res.status();
    let _ = axum::body::to_bytes(res.into_body(), usize::MAX)
        .await
        .unwrap();
    status
}

fn door(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("door");
    group.throughput(Throughput::Elements(1));

    let bare = axum::Router::new()
        .route(
            "/hooks/{workflow_id}",
            axum::routing::post(|_: axum::extract::Path<String>, body: Bytes| async move {
                std::hint::black_box(&body);
                (
                    StatusCode::ACCEPTED,
                    axum::Json(serde_json::json!({
                        "run_id": uuid::Uuid::now_v7().to_string(), "duplicate": false
                    })),
                )
            }),
        )
        .layer(axum::extract::DefaultBodyLimit::max(
            server::DEFAULT_BODY_LIMIT,
        ));
    group.bench_function("input", |b| {
        b.iter(|| fluxo::run::RunInput::from_json_bytes(std::hint::black_box(BODY.as_bytes())))
    });
    group.bench_function("bare", |b| {
        b.to_async(&rt)
            .iter(|| call(bare.clone(), request("127.0.0.1", "k")))
    });

    let dir = tempfile::tempdir().unwrap();
    let workflows = dir.path().join("workflows");
    std::fs::create_dir_all(&workflows).unwrap();
    std::fs::write(workflows.join("load.json"), HOOK).unwrap();
    let (running, router) = rt.block_on(async {
        let store: Arc<dyn Store> =
            Arc::new(SledStore::open(&SledConfig::new(dir.path().join("store"))).unwrap());
        let engine = Engine::new(store, Arc::new(SystemClock) as Arc<dyn Clock>);
        let wf = WorkflowDir::load(&workflows, engine.registry().clone()).unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let running = server::start(listener, engine, wf, "t".into(), ServerOptions::default())
            .await
            .unwrap();
        let router = server::router(running.state.clone());
        let host = running.addr.to_string();
        // The first delivery claims the key; every repeat is the duplicate answer.
        assert_eq!(
            call(router.clone(), request(&host, "dup")).await,
            StatusCode::ACCEPTED
        );
        assert_eq!(
            call(router.clone(), request(&host, "dup")).await,
            StatusCode::OK
        );
        (running, router)
    });
    let host = running.addr.to_string();
    group.bench_function("duplicate", |b| {
        b.to_async(&rt)
            .iter(|| call(router.clone(), request(&host, "dup")))
    });
    group.finish();
    rt.block_on(running.shutdown());
}

criterion_group!(benches, door);
criterion_main!(benches);
