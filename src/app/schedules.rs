//! Schedules as people read them: the next fire times of a cron expression in its zone (the
//! editor's preview while typing), and each scheduled workflow's next tick (the workflow
//! list's "next run"). Times come from the same [`Schedule`] the scheduler fires by, DST
//! rules included.

use serde::Serialize;
use serde_json::json;

use super::{AppError, AppResult, AppState};
use crate::clock::rfc3339;
use crate::steps::parse_config;
use crate::steps::schedule_trigger::{Config, Schedule};

/// Most fire times one preview lists.
pub const MAX_PREVIEW: usize = 20;

/// The next fire times of a cron expression.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct SchedulePreview {
    pub cron: String,
    /// IANA zone the expression is read in.
    pub timezone: String,
    /// The next fire times, RFC 3339 in UTC, oldest first (fewer when the expression stops
    /// matching).
    pub next: Vec<String>,
    /// The same instants on the zone's wall clock, RFC 3339 with its offset.
    pub next_local: Vec<String>,
}

/// The next `count` (default 5, at most [`MAX_PREVIEW`]) fire times of `cron` in `timezone`
/// (default `UTC`) after now. Errors: `invalid_schedule` (400) with `problems` naming the
/// field (`cron`, `timezone`) when the expression or the zone does not parse or never fires.
pub fn preview(
    state: &AppState,
    cron: &str,
    timezone: Option<&str>,
    count: Option<usize>,
) -> AppResult<SchedulePreview> {
    let timezone = timezone.filter(|t| !t.is_empty()).unwrap_or("UTC");
    let schedule = Schedule::parse(cron, timezone).map_err(|problems| {
        let message = problems
            .iter()
            .map(|p| format!("{}: {}", p.path, p.message))
            .collect::<Vec<_>>()
            .join("; ");
        let problems: Vec<_> = problems
            .iter()
            .map(|p| json!({"path": p.path, "message": p.message}))
            .collect();
        AppError::bad_request("invalid_schedule", message).with_extra(json!({"problems": problems}))
    })?;
    let count = count.unwrap_or(5).clamp(1, MAX_PREVIEW);
    let mut at = state.clock().now_ms();
    let (mut next, mut next_local) = (Vec::new(), Vec::new());
    while next.len() < count {
        let Some(t) = schedule.next_after(at) else {
            break;
        };
        next.push(rfc3339(t));
        next_local.push(schedule.local_rfc3339(t).unwrap_or_else(|| rfc3339(t)));
        at = t;
    }
    Ok(SchedulePreview {
        cron: cron.to_string(),
        timezone: timezone.to_string(),
        next,
        next_local,
    })
}

/// A scheduled workflow and its next tick.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct ScheduledWorkflow {
    pub workflow_id: String,
    pub cron: String,
    pub timezone: String,
    /// The next tick after now, RFC 3339 in UTC (absent if the expression never fires again).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub next_at: Option<String>,
}

/// Every valid workflow that starts with a `schedule_trigger`, with its next tick, by id.
/// (Ticks fire while a `fluxo serve` or the desktop app runs.)
pub fn list(state: &AppState) -> Vec<ScheduledWorkflow> {
    let now = state.clock().now_ms();
    state
        .workflows()
        .list()
        .iter()
        .filter_map(|entry| {
            let wf = entry.compiled.as_ref()?;
            let trigger = wf.trigger();
            if trigger.kind != "schedule_trigger" {
                return None;
            }
            let config: Config = parse_config(&trigger.config).ok()?;
            let schedule = Schedule::of(&config).ok()?;
            Some(ScheduledWorkflow {
                workflow_id: entry.id.clone(),
                cron: config.cron.clone(),
                timezone: config.timezone.clone(),
                next_at: schedule.next_after(now).map(rfc3339),
            })
        })
        .collect()
}
