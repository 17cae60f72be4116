//! Workflow files (SPEC §1) and what the editor does with them: list (with the drafts of
//! [`super::drafts`]), get, save (only a valid workflow goes live), delete, validate, dry run, and the re-run safety check
//! ([`crate::check`]). Shared by `/api/v1/workflows…`, the desktop's workflow, `dry_run` and
//! `check_workflow` commands; [`dir_error`] is the one mapping of the folder's errors.

use std::sync::Arc;

use serde_json::{json, Value};

use super::{AppError, AppResult, AppState, ErrorKind};
use crate::check::{CheckError, CheckOptions, CheckReport};
use crate::run::{Mode, RunRecord, Trigger};
use crate::runtime::RunRequest;
use crate::workflow::check_value;
use crate::workflow::dir::{DirError, WorkflowEntry};
use crate::workflow::{Compiled, Problem};

/// What was being done to the folder when it refused (names the `…_failed` code of a write
/// error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirOp {
    Save,
    Delete,
}

/// The application error of a refused save or delete: a bad or mismatched id is
/// `invalid_workflow`; a body that is not structurally a workflow is `invalid_workflow`
/// (unprocessable) with its `problems`; a file that could not be written is `save_failed` /
/// `delete_failed` (logged).
pub fn dir_error(e: DirError, op: DirOp) -> AppError {
    match e {
        DirError::BadId(_) | DirError::IdMismatch { .. } => {
            AppError::bad_request("invalid_workflow", e.to_string())
        }
        DirError::Invalid(problems) => AppError::new(
            ErrorKind::Unprocessable,
            "invalid_workflow",
            "the workflow is not structurally valid; see `problems`",
        )
        .with_extra(json!({"problems": problems})),
        DirError::NotValid(problems) => AppError::new(
            ErrorKind::Unprocessable,
            "workflow_invalid",
            "the workflow has validation errors and cannot go live; see `problems`",
        )
        .with_extra(json!({"problems": problems})),
        DirError::Io { .. } => match op {
            DirOp::Save => {
                tracing::error!(error = %e, "workflow save failed");
                save_failed()
            }
            DirOp::Delete => {
                tracing::error!(error = %e, "workflow delete failed");
                AppError::internal("delete_failed", "the workflow file could not be deleted")
            }
        },
    }
}

fn save_failed() -> AppError {
    AppError::internal("save_failed", "the workflow file could not be written")
}

fn not_found(id: &str) -> AppError {
    AppError::not_found("workflow_not_found", format!("no workflow `{id}`"))
}

/// One summary per file in the folder, valid or not, with `has_draft` and `draft_only:
/// false`; then one per workflow that only has a draft (`draft_only: true`, version 0), in id
/// order.
pub fn list(state: &AppState) -> Vec<Value> {
    let mut drafts = state.drafts().all();
    let mut rows: Vec<(String, Value)> = state
        .workflows()
        .list()
        .iter()
        .map(|e| {
            let mut row = e.summary();
            row["has_draft"] = json!(drafts.remove(&e.id).is_some());
            row["draft_only"] = json!(false);
            (e.id.clone(), row)
        })
        .collect();
    for (id, d) in &drafts {
        rows.push((id.clone(), super::drafts::draft_only_summary(state, id, d)));
    }
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    rows.into_iter().map(|(_, r)| r).collect()
}

/// The workflow file `id` as loaded (its text exactly, its JSON, its problems), or
/// `workflow_not_found`.
pub fn get(state: &AppState, id: &str) -> AppResult<Arc<WorkflowEntry>> {
    state.workflows().get(id).ok_or_else(|| not_found(id))
}

/// The JSON of workflow file `id` (key order kept): `workflow_not_found`, or `invalid_json`
/// with its `problems` when the file is not JSON.
pub fn get_json(state: &AppState, id: &str) -> AppResult<Value> {
    let e = get(state, id)?;
    e.value.clone().ok_or_else(|| {
        AppError::bad_request(
            "invalid_json",
            format!("the file {} is not JSON", e.path.display()),
        )
        .with_extra(json!({"problems": e.problems}))
    })
}

/// Save `body` as the live workflow `id` atomically, bumping its `version` ("save and
/// publish"): `{workflow, version, valid, problems}`. A workflow with validation errors is
/// refused with `workflow_invalid` (unprocessable, with every problem) and nothing is written
/// (an editor keeps it as a draft: [`super::drafts`]); other refusals: [`dir_error`]. A draft
/// of `id` is left as it is. The save waits for the workflow's lock and fsyncs: it runs off
/// the async threads.
pub async fn save(state: &AppState, id: &str, body: Value) -> AppResult<Value> {
    let saver = state.clone();
    let id = id.to_string();
    let body_for_env = body.clone();
    let saved = tokio::task::spawn_blocking(move || saver.workflows().publish(&id, body))
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "workflow save task failed");
            save_failed()
        })?;
    let entry = saved.map_err(|e| match e {
        DirError::NotValid(mut problems) => {
            problems.extend(env_problems(state, &body_for_env));
            dir_error(DirError::NotValid(problems), DirOp::Save)
        }
        e => dir_error(e, DirOp::Save),
    })?;
    let mut problems = entry.problems.clone();
    if let Some(v) = &entry.value {
        problems.extend(env_problems(state, v));
    }
    Ok(json!({
        "workflow": entry.value,
        "version": entry.version(),
        "valid": entry.compiled.is_some(),
        "problems": problems,
    }))
}

/// Delete workflow file `id` and its draft: `workflow_not_found` if there was neither, else
/// [`dir_error`] (or `delete_failed` for the draft).
pub fn delete(state: &AppState, id: &str) -> AppResult<()> {
    let had_file = state
        .workflows()
        .delete(id)
        .map_err(|e| dir_error(e, DirOp::Delete))?;
    let had_draft = super::drafts::remove_with_workflow(state, id)?;
    if had_file || had_draft {
        Ok(())
    } else {
        Err(not_found(id))
    }
}

/// Every problem of a definition, errors and lint warnings at once, and an `env_unset`
/// warning per variable the steps use that the settings lack, and the secrets it declares with
/// the steps that read each: `{valid, problems, secrets}`.
pub fn validate(state: &AppState, definition: &Value) -> Value {
    let (compiled, mut problems) = check_value(definition, state.engine().registry());
    problems.extend(env_problems(state, definition));
    let secrets = compiled
        .as_ref()
        .map(|c| crate::workflow::env::secrets_read_json(&c.workflow))
        .unwrap_or_else(|| json!([]));
    json!({"valid": compiled.is_some(), "problems": problems, "secrets": secrets})
}

/// `env_unset` (a warning at the first step that uses it) for every `env.NAME` of
/// `definition` that is not set (Settings → Environment variables, or the secrets).
pub fn env_problems(state: &AppState, definition: &Value) -> Vec<Problem> {
    let env = state.engine().env();
    let steps = definition.get("steps").and_then(Value::as_array);
    crate::workflow::env::env_uses(definition)
        .into_iter()
        .filter(|(name, _)| !env.contains_key(name))
        .map(|(name, i)| {
            let step = steps
                .and_then(|s| s.get(i))
                .and_then(|s| s.get("id"))
                .and_then(Value::as_str);
            Problem::warning(
                "env_unset",
                format!("steps[{i}].config"),
                step,
                format!(
                    "env.{name} is not set: add it under Settings → Environment variables \
                     (a dry run uses a placeholder; a live run fails)"
                ),
            )
        })
        .collect()
}

/// `definition` compiled, or `workflow_invalid` (unprocessable) with its `problems`.
fn compile_given(state: &AppState, definition: &Value) -> AppResult<Arc<Compiled>> {
    let (c, problems) = check_value(definition, state.engine().registry());
    c.map(Arc::new).ok_or_else(|| {
        AppError::new(
            ErrorKind::Unprocessable,
            "workflow_invalid",
            "the workflow has validation errors; see `problems`",
        )
        .with_extra(json!({"problems": problems}))
    })
}

/// Dry-run `workflow` (the editor's unsaved canvas) or, without it, the saved workflow `id`,
/// with `input` (default `{}`): the same walk with every side effect simulated, recorded with
/// `mode: dry`; answers the finished run.
pub async fn dry_run(
    state: &AppState,
    id: &str,
    input: Option<Value>,
    workflow: Option<Value>,
) -> AppResult<RunRecord> {
    let wf = match workflow {
        Some(def) => compile_given(state, &def)?,
        None => super::runs::runnable(state, id)?,
    };
    let req = RunRequest::new(
        input.unwrap_or_else(|| json!({})),
        Trigger::Manual,
        Mode::Dry,
    );
    state.engine().run(&wf, req).await.map_err(AppError::store)
}

/// The re-run safety check ([`crate::check`]) of `workflow` (the editor's unsaved canvas)
/// or, without it, of the saved workflow `id`, with `event` (a real payload), against a
/// throw-away sandbox and store. `id_paths`: dot paths of the event's business ids (empty:
/// `id`, plus `data.object.id` when the event has it). Errors: `workflow_not_found`,
/// `workflow_invalid` (a saved file that is not JSON; or validation errors with `problems`),
/// `invalid_check` naming the bad input, `unavailable` when no sandbox could start.
pub async fn check(
    state: &AppState,
    id: &str,
    event: &Value,
    id_paths: Vec<String>,
    workflow: Option<Value>,
) -> AppResult<CheckReport> {
    let definition = match workflow {
        Some(d) => d,
        None => get(state, id)?.value.clone().ok_or_else(|| {
            AppError::conflict(
                "workflow_invalid",
                format!("workflow `{id}` is not valid JSON"),
            )
        })?,
    };
    let mut targets = std::collections::BTreeMap::new();
    for target in crate::check::fan_out_targets(&definition) {
        // A missing target is named by the check itself (bad input).
        if let Some(value) = state.workflows().get(&target).and_then(|e| e.value.clone()) {
            targets.insert(target, value);
        }
    }
    let options = CheckOptions { id_paths, targets };
    crate::check::check(&definition, event, &options)
        .await
        .map_err(|e| match e {
            CheckError::Invalid(problems) => AppError::new(
                ErrorKind::Unprocessable,
                "workflow_invalid",
                "the workflow has validation errors; see `problems`",
            )
            .with_extra(json!({"problems": problems})),
            CheckError::BadInput(m) => AppError::bad_request("invalid_check", m),
            CheckError::Setup(m) => {
                tracing::error!(error = %m, "check setup failed");
                AppError::unavailable("the check could not start its sandbox; retry", 1)
            }
        })
}
