//! `GET /api/v1/schedules` and `GET /api/v1/schedules/preview`: adapters over
//! [`crate::app::schedules`].

use axum::extract::{Query, State};
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::{ApiError, ApiResult, Problem};
use super::AppState;
use crate::app::schedules::{self, SchedulePreview, ScheduledWorkflow};

/// Routes under `/api/v1`, each with its documentation.
pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(preview))
}

#[utoipa::path(
    get,
    path = "/schedules",
    tag = "workflows",
    summary = "Scheduled workflows and their next tick",
    description = "Every valid workflow that starts with a `schedule_trigger`, with its cron \
        expression, zone and next fire time. Ticks fire while a `fluxo serve` (or the desktop \
        app) is running.",
    responses((status = 200, description = "The scheduled workflows, by id.", body = Vec<ScheduledWorkflow>)),
)]
async fn list(State(state): State<AppState>) -> Json<Vec<ScheduledWorkflow>> {
    Json(schedules::list(&state))
}

/// Query of `GET /schedules/preview`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PreviewParams {
    /// Cron expression: 5 fields, or 6 with seconds first.
    pub cron: String,
    /// IANA time zone (default `UTC`).
    pub timezone: Option<String>,
    /// How many fire times (default 5, at most 20).
    pub count: Option<usize>,
}

#[utoipa::path(
    get,
    path = "/schedules/preview",
    tag = "workflows",
    summary = "The next fire times of a cron expression",
    description = "Computed by the scheduler's own rules (the zone's DST included), for the \
        editor's preview while typing.",
    params(PreviewParams),
    responses(
        (status = 200, description = "The next fire times.", body = SchedulePreview),
        (status = 400, description = "`invalid_schedule` (with `problems` naming `cron` or \
            `timezone`), `invalid_parameter`.", body = Problem,
            content_type = "application/problem+json"),
    ),
)]
async fn preview(
    State(state): State<AppState>,
    params: Result<Query<PreviewParams>, axum::extract::rejection::QueryRejection>,
) -> ApiResult<Json<SchedulePreview>> {
    let Query(p) = params.map_err(|e| ApiError::bad_request("invalid_parameter", e.body_text()))?;
    Ok(Json(schedules::preview(
        &state,
        &p.cron,
        p.timezone.as_deref(),
        p.count,
    )?))
}
