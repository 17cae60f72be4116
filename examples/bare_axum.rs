//! The ceiling for the ingest load benchmark (`scripts/load.sh`): a bare axum handler with the
//! same stack as `fluxo serve` (tokio, axum, mimalloc, the same 1 MiB body limit) that reads
//! the body and answers `202 {"run_id": <uuid v7>, "duplicate": false}` without touching any
//! store. Not part of the product.
//!
//! `cargo run --release --example bare_axum -- 127.0.0.1:8799`

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path};
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use serde_json::json;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

async fn hook(Path(_workflow): Path<String>, body: Bytes) -> (StatusCode, Json<serde_json::Value>) {
    std::hint::black_box(&body);
    (
        StatusCode::ACCEPTED,
        Json(json!({"run_id": uuid::Uuid::now_v7().to_string(), "duplicate": false})),
    )
}

#[tokio::main]
async fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8799".into());
    let app = Router::new()
        .route("/hooks/{workflow_id}", post(hook))
        .route("/healthz", axum::routing::get(|| async { "ok" }))
        .layer(DefaultBodyLimit::max(fluxo::server::DEFAULT_BODY_LIMIT));
    let listener = tokio::net::TcpListener::bind(&addr).await.expect("bind");
    println!("bare axum listening on http://{addr}");
    axum::serve(listener, app).await.expect("serve");
}
