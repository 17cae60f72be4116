//! Drafts and publishing (issue 14, item 2): the editor's Save keeps a draft, Publish makes a
//! valid draft the live workflow file.
//!
//! A draft is `<data-dir>/drafts/<id>.json` (0600, written atomically; the folder 0700):
//! `{"workflow": <the definition exactly as the editor sent it>, "based_on_version": <the live
//! version it was saved over, or null>, "saved_at": <unix ms>}`. Webhooks, schedules and API
//! runs never see it: they use the live file (`<workflows>/<id>.json`), which only
//! [`publish`] (and the API's save-and-publish `PUT`) writes. Without a data dir (tests)
//! drafts are kept in memory. Drafts are per data dir: several `fluxo serve` sharing a
//! PostgreSQL store each have their own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::workflows;
use super::{AppError, AppResult, AppState, ErrorKind};
use crate::workflow::check_value;
use crate::workflow::dir::write_atomic_mode;
use crate::workflow::validate::valid_workflow_id;
use crate::workflow::Severity;

/// One draft, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Draft {
    /// The definition exactly as the editor sent it (it may not validate).
    pub workflow: Value,
    /// The live file's version when the draft was saved (null: never published).
    pub based_on_version: Option<u64>,
    /// When it was saved (unix ms, the engine clock).
    pub saved_at: i64,
}

/// The drafts of this process's data dir (a cache of the folder, written through).
pub struct Drafts {
    /// `<data-dir>/drafts`, or none: in memory only.
    dir: Option<PathBuf>,
    map: Mutex<BTreeMap<String, Draft>>,
}

impl Drafts {
    /// Drafts kept in memory only.
    pub fn in_memory() -> Drafts {
        Drafts {
            dir: None,
            map: Mutex::new(BTreeMap::new()),
        }
    }

    /// Load `<data_dir>/drafts/*.json` (the folder created 0700). A file that is not a draft
    /// is skipped with a log line (it stays on disk for a person to look at).
    pub fn load(data_dir: &Path) -> std::io::Result<Drafts> {
        let dir = data_dir.join("drafts");
        crate::secrets::secure_dir(&dir)?;
        let mut map = BTreeMap::new();
        for e in std::fs::read_dir(&dir)? {
            let path = e?.path();
            if path.extension().and_then(|x| x.to_str()) != Some("json") {
                continue;
            }
            let Some(id) = path.file_stem().and_then(|s| s.to_str()).map(String::from) else {
                continue;
            };
            if !valid_workflow_id(&id) {
                continue;
            }
            let text = std::fs::read_to_string(&path)?;
            match serde_json::from_str::<Draft>(&text) {
                Ok(d) => {
                    map.insert(id, d);
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "not a draft: skipped")
                }
            }
        }
        Ok(Drafts {
            dir: Some(dir),
            map: Mutex::new(map),
        })
    }

    fn path_of(&self, id: &str) -> Option<PathBuf> {
        self.dir.as_ref().map(|d| d.join(format!("{id}.json")))
    }

    /// The draft of `id`, if any.
    pub fn get(&self, id: &str) -> Option<Draft> {
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
    }

    /// Every draft, by id.
    pub fn all(&self) -> BTreeMap<String, Draft> {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Store `draft` as the draft of `id` (file first, then the cache). Blocks on fsync.
    pub fn put(&self, id: &str, draft: Draft) -> std::io::Result<()> {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(path) = self.path_of(id) {
            let text = serde_json::to_vec_pretty(&draft).map_err(std::io::Error::other)?;
            write_atomic_mode(&path, &text, 0o600)?;
        }
        map.insert(id.to_string(), draft);
        Ok(())
    }

    /// Remove the draft of `id` when `only_if` is none or equals it (a draft saved again
    /// meanwhile is kept); answers whether one was removed.
    pub fn remove(&self, id: &str, only_if: Option<&Draft>) -> std::io::Result<bool> {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        match (map.get(id), only_if) {
            (None, _) => return Ok(false),
            (Some(cur), Some(expected)) if cur != expected => return Ok(false),
            _ => {}
        }
        if let Some(path) = self.path_of(id) {
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        map.remove(id);
        Ok(true)
    }
}

fn bad_id(id: &str) -> AppError {
    AppError::bad_request(
        "invalid_workflow",
        format!("`{id}` is not a valid workflow id ([a-z0-9][a-z0-9_-]{{0,63}})"),
    )
}

fn draft_not_found(id: &str) -> AppError {
    AppError::not_found("draft_not_found", format!("workflow `{id}` has no draft"))
}

fn io_failed(what: &'static str, code: &'static str, e: std::io::Error) -> AppError {
    tracing::error!(error = %e, "{what}");
    AppError::internal(code, format!("{what}; see the server log"))
}

/// A definition with its `id` set to `id` when absent (what validation and publishing see).
fn with_id(id: &str, workflow: &Value) -> Value {
    let mut v = workflow.clone();
    if let Some(obj) = v.as_object_mut() {
        obj.entry("id")
            .or_insert_with(|| Value::String(id.to_string()));
    }
    v
}

/// `{workflow, based_on_version, saved_at, live_version}` of the draft of `id` (`live_version`:
/// the live file's version now, null when there is none): `invalid_workflow` for a bad id,
/// `draft_not_found`.
pub fn get_draft(state: &AppState, id: &str) -> AppResult<Value> {
    if !valid_workflow_id(id) {
        return Err(bad_id(id));
    }
    let d = state.drafts().get(id).ok_or_else(|| draft_not_found(id))?;
    Ok(json!({
        "workflow": d.workflow,
        "based_on_version": d.based_on_version,
        "saved_at": d.saved_at,
        "live_version": state.workflows().get(id).map(|e| e.version()),
    }))
}

/// Save `body` as the draft of `id`, with or without validation errors: `{valid, problems,
/// based_on_version, saved_at}` (`problems` as [`workflows::validate`] answers them). Refused
/// (`invalid_workflow`, nothing written): a bad id, a body that is not a JSON object, a body
/// whose `id` is not `id`. Errors writing: `draft_save_failed`.
pub async fn save_draft(state: &AppState, id: &str, body: Value) -> AppResult<Value> {
    if !valid_workflow_id(id) {
        return Err(bad_id(id));
    }
    let Some(obj) = body.as_object() else {
        return Err(AppError::bad_request(
            "invalid_workflow",
            "a draft must be a JSON object (a workflow definition)",
        ));
    };
    match obj.get("id") {
        None => {}
        Some(Value::String(b)) if b == id => {}
        Some(other) => {
            return Err(AppError::bad_request(
                "invalid_workflow",
                format!("the body's id {other} does not match the path's `{id}`"),
            ))
        }
    }
    let draft = Draft {
        based_on_version: state.workflows().get(id).map(|e| e.version()),
        saved_at: state.clock().now_ms(),
        workflow: body,
    };
    let validation = workflows::validate(state, &with_id(id, &draft.workflow));
    let answer = json!({
        "valid": validation["valid"],
        "problems": validation["problems"],
        "based_on_version": draft.based_on_version,
        "saved_at": draft.saved_at,
    });
    let saver = state.clone();
    let id = id.to_string();
    tokio::task::spawn_blocking(move || saver.drafts().put(&id, draft))
        .await
        .map_err(std::io::Error::other)
        .and_then(|r| r)
        .map_err(|e| io_failed("the draft could not be written", "draft_save_failed", e))?;
    Ok(answer)
}

/// Delete the draft of `id` (the live file is untouched): `invalid_workflow` for a bad id,
/// `draft_not_found`, `draft_delete_failed`.
pub fn discard_draft(state: &AppState, id: &str) -> AppResult<()> {
    if !valid_workflow_id(id) {
        return Err(bad_id(id));
    }
    match state.drafts().remove(id, None) {
        Ok(true) => Ok(()),
        Ok(false) => Err(draft_not_found(id)),
        Err(e) => Err(io_failed(
            "the draft could not be deleted",
            "draft_delete_failed",
            e,
        )),
    }
}

/// Publish the draft of `id`: a draft with validation errors is refused with `workflow_invalid`
/// (unprocessable, with every `problem`; the live file untouched); a valid one is saved as the
/// live file the way [`workflows::save`] does (its version bumped) and the draft is deleted
/// (unless it was saved again meanwhile). Answers like [`workflows::save`]. Errors also:
/// `invalid_workflow` (bad id), `draft_not_found`.
pub async fn publish(state: &AppState, id: &str) -> AppResult<Value> {
    if !valid_workflow_id(id) {
        return Err(bad_id(id));
    }
    let draft = state.drafts().get(id).ok_or_else(|| draft_not_found(id))?;
    let definition = with_id(id, &draft.workflow);
    let (compiled, mut problems) = check_value(&definition, state.engine().registry());
    if compiled.is_none() || problems.iter().any(|p| p.severity == Severity::Error) {
        problems.extend(workflows::env_problems(state, &definition));
        return Err(AppError::new(
            ErrorKind::Unprocessable,
            "workflow_invalid",
            "the draft has validation errors and cannot be published; see `problems`",
        )
        .with_extra(json!({"problems": problems})));
    }
    let saved = workflows::save(state, id, definition).await?;
    if let Err(e) = state.drafts().remove(id, Some(&draft)) {
        // Published all the same: the draft left behind is the published definition.
        tracing::error!(error = %e, workflow = id, "the published draft could not be deleted");
    }
    Ok(saved)
}

/// A list row for a workflow that only has a draft: `{id, name, version: 0, valid, errors,
/// warnings, trigger, has_draft: true, draft_only: true}`.
pub fn draft_only_summary(state: &AppState, id: &str, draft: &Draft) -> Value {
    let definition = with_id(id, &draft.workflow);
    let (compiled, problems) = check_value(&definition, state.engine().registry());
    let errors = problems
        .iter()
        .filter(|p| p.severity == Severity::Error)
        .count();
    let compiled = compiled.filter(|_| errors == 0);
    let name = definition
        .get("name")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .unwrap_or(id);
    json!({
        "id": id,
        "name": name,
        "version": 0,
        "valid": compiled.is_some(),
        "errors": errors,
        "warnings": problems.len() - errors,
        "trigger": compiled.as_ref().map(|c| c.trigger().kind.clone()),
        "has_draft": true,
        "draft_only": true,
    })
}

/// Remove the draft of `id` with its workflow (`delete_failed` if it could not be).
pub(super) fn remove_with_workflow(state: &AppState, id: &str) -> AppResult<bool> {
    state.drafts().remove(id, None).map_err(|e| {
        io_failed(
            "the workflow's draft could not be deleted",
            "delete_failed",
            e,
        )
    })
}
