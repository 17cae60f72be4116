//! Readiness: whether this process can take deliveries now (`GET /readyz`), as opposed to
//! liveness (`GET /healthz`: the process answers). Kubernetes' probes make the same split: a
//! load balancer stops sending to a process that is not ready, and nothing restarts it for
//! that (its database being down is no reason to restart it).

use std::time::Duration;

use super::{AppError, AppResult, AppState};

/// Longest wait for the store's answer before the process is reported not ready.
pub const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// `Ok` when the store answers within [`READY_TIMEOUT`] (always, on the embedded store);
/// else `unavailable` (`503`, `Retry-After: 1`) naming the store's error.
pub async fn ready(state: &AppState) -> AppResult<()> {
    state.store().ping(READY_TIMEOUT).await.map_err(|e| {
        tracing::warn!(error = %e, "not ready: the store does not answer");
        AppError::unavailable(format!("the store does not answer: {e}"), 1)
    })
}
