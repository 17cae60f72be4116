//! `GET /metrics`: the Prometheus exposition of [`crate::telemetry`], with the queue gauges
//! read from the store at scrape time. Who may read it: [`crate::app::MetricsAuth`].

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};

use super::error::{ApiResult, Problem};
use super::{auth, AppState};
use crate::app::MetricsAuth;
use crate::run::RunStatus;

/// `GET /metrics`.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "meta",
    summary = "Prometheus metrics",
    security(("bearer" = [])),
    description = "The Prometheus text exposition format: webhook deliveries by outcome, runs \
        by workflow and final status, step attempts and retries by kind, run and step \
        durations, queue depth and the oldest queued run's age, group-commit batches, store \
        errors, recovered runs, schedule ticks (the list: `src/telemetry.rs`). Needs the API \
        token unless `--metrics-auth none` (or `loopback`: open on a loopback address).",
    responses(
        (status = 200, description = "The metrics.", body = String,
            content_type = "text/plain; version=0.0.4"),
        (status = 401, description = "`unauthorized`: the token is required here.",
            body = Problem, content_type = "application/problem+json"),
    ),
)]
pub async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> ApiResult<Response> {
    let open = match state.options().metrics_auth {
        MetricsAuth::None => true,
        MetricsAuth::Token => false,
        MetricsAuth::Loopback => state.local_addr().ip().is_loopback(),
    };
    if !open {
        auth::check_token(&state, &headers)?;
    }
    let store = state.store();
    if let Ok(queued) = store.run_ids_with_status(RunStatus::Queued).await {
        let now = state.clock().now_ms();
        let oldest = match queued.first() {
            Some(id) => match store.get_run(id).await {
                Ok(Some(r)) => (now - r.created_at.0).max(0) as f64 / 1000.0,
                _ => 0.0,
            },
            None => 0.0,
        };
        crate::telemetry::queue(queued.len(), oldest);
    }
    let body = crate::telemetry::handle().render();
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response())
}
