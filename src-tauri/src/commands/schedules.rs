//! Schedules: the same answers as `GET /api/v1/schedules` and `/schedules/preview`.

use fluxo::app::schedules::{self, SchedulePreview, ScheduledWorkflow};
use fluxo::app::AppState;
use tauri::State;

use crate::error::IpcResult;

/// Scheduled workflows and their next tick.
#[tauri::command]
pub async fn list_schedules(state: State<'_, AppState>) -> IpcResult<Vec<ScheduledWorkflow>> {
    Ok(schedules::list(&state))
}

/// The next fire times of a cron expression (`invalid_schedule` with `problems` when it does
/// not parse).
#[tauri::command]
pub async fn preview_schedule(
    state: State<'_, AppState>,
    cron: String,
    timezone: Option<String>,
    count: Option<usize>,
) -> IpcResult<SchedulePreview> {
    Ok(schedules::preview(
        &state,
        &cron,
        timezone.as_deref(),
        count,
    )?)
}
