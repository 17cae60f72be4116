//! A folder of workflow files (`<id>.json`), the source of truth for `fluxo serve` and the
//! desktop app: loaded at start, saved with a version bump and an atomic rename (nothing
//! half-written), deleted on request.
//!
//! Saves of one workflow are serialised by a per-workflow lock around the whole
//! read-modify-write (read the current version, bump it, write a unique temporary file,
//! fsync, rename, publish the entry), so concurrent saves never share a temporary file, each
//! gets its own strictly higher version, and the entry served (`GET` answers its `text`) is
//! the bytes of the last file renamed into place. Saves of different workflows do not wait
//! for each other.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use serde_json::Value;

use super::validate::valid_workflow_id;
use super::{check_value, Compiled, Problem, Severity, Workflow};
use crate::steps::Registry;

/// One workflow file as loaded.
#[derive(Debug)]
pub struct WorkflowEntry {
    pub id: String,
    pub path: PathBuf,
    /// The file's text exactly (what `GET /api/v1/workflows/{id}` answers).
    pub text: String,
    /// Parsed JSON, if the text is JSON.
    pub value: Option<Value>,
    /// Runnable form, if it validates.
    pub compiled: Option<Arc<Compiled>>,
    /// Errors and lint warnings.
    pub problems: Vec<Problem>,
}

impl WorkflowEntry {
    fn from_text(id: String, path: PathBuf, text: String, registry: &Registry) -> Self {
        let (value, compiled, mut problems) = match serde_json::from_str::<Value>(&text) {
            Ok(v) => {
                let (c, p) = check_value(&v, registry);
                (Some(v), c.map(Arc::new), p)
            }
            Err(e) => (
                None,
                None,
                vec![Problem::error(
                    "json_syntax",
                    format!("line {}, column {}", e.line(), e.column()),
                    None,
                    format!("not valid JSON: {e}"),
                )],
            ),
        };
        if let Some(file_id) = value
            .as_ref()
            .and_then(|v| v.get("id"))
            .and_then(Value::as_str)
        {
            if file_id != id {
                problems.push(Problem::error(
                    "id_mismatch",
                    "id",
                    None,
                    format!(
                        "the file {} holds workflow id `{file_id}`; rename one to match",
                        path.display()
                    ),
                ));
            }
        }
        let compiled = if problems.iter().any(|p| p.severity == Severity::Error) {
            None
        } else {
            compiled
        };
        WorkflowEntry {
            id,
            path,
            text,
            value,
            compiled,
            problems,
        }
    }

    /// Display name (the workflow's `name`, else its id).
    pub fn name(&self) -> String {
        self.value
            .as_ref()
            .and_then(|v| v.get("name"))
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .unwrap_or(&self.id)
            .to_string()
    }

    /// One row of a workflow list (`GET /api/v1/workflows`, the app's list):
    /// `{id, name, version, valid, errors, warnings, trigger}`.
    pub fn summary(&self) -> Value {
        let errors = self
            .problems
            .iter()
            .filter(|p| p.severity == Severity::Error)
            .count();
        serde_json::json!({
            "id": self.id,
            "name": self.name(),
            "version": self.version(),
            "valid": self.compiled.is_some(),
            "errors": errors,
            "warnings": self.problems.len() - errors,
            "trigger": self.compiled.as_ref().map(|c| c.trigger().kind.clone()),
        })
    }

    /// The file's `version`.
    pub fn version(&self) -> u64 {
        self.value
            .as_ref()
            .and_then(|v| v.get("version"))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    }
}

/// Why a save or delete was refused.
#[derive(Debug, thiserror::Error)]
pub enum DirError {
    #[error("`{0}` is not a valid workflow id ([a-z0-9][a-z0-9_-]{{0,63}})")]
    BadId(String),
    #[error("the workflow is not structurally valid")]
    Invalid(Vec<Problem>),
    /// Structurally a workflow, with validation errors: refused by [`WorkflowDir::publish`]
    /// (every problem, warnings too).
    #[error("the workflow has validation errors")]
    NotValid(Vec<Problem>),
    #[error("the body's id `{body}` does not match the path's `{path}`")]
    IdMismatch { body: String, path: String },
    #[error("cannot write {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// The folder and its loaded workflows.
pub struct WorkflowDir {
    dir: PathBuf,
    registry: Arc<Registry>,
    entries: RwLock<BTreeMap<String, Arc<WorkflowEntry>>>,
    /// One lock per workflow id, held across a save's or delete's read-modify-write.
    locks: Mutex<HashMap<String, Arc<Mutex<()>>>>,
}

impl WorkflowDir {
    /// Load every `*.json` in `dir` (created if missing). Invalid files load too, with their
    /// problems, so the editor can open and fix them.
    pub fn load(dir: &Path, registry: Arc<Registry>) -> std::io::Result<Self> {
        std::fs::create_dir_all(dir)?;
        let wd = WorkflowDir {
            dir: dir.to_path_buf(),
            registry,
            entries: RwLock::new(BTreeMap::new()),
            locks: Mutex::new(HashMap::new()),
        };
        wd.reload()?;
        Ok(wd)
    }

    /// Re-read the folder.
    pub fn reload(&self) -> std::io::Result<()> {
        let mut map = BTreeMap::new();
        for e in std::fs::read_dir(&self.dir)? {
            let path = e?.path();
            if path.extension().and_then(|x| x.to_str()) != Some("json") {
                continue;
            }
            let Some(id) = path.file_stem().and_then(|s| s.to_str()).map(String::from) else {
                continue;
            };
            let text = std::fs::read_to_string(&path)?;
            let entry = WorkflowEntry::from_text(id.clone(), path, text, &self.registry);
            map.insert(id, Arc::new(entry));
        }
        *self.entries.write().unwrap_or_else(|e| e.into_inner()) = map;
        Ok(())
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// One workflow.
    pub fn get(&self, id: &str) -> Option<Arc<WorkflowEntry>> {
        self.entries
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
    }

    /// Every workflow, by id.
    pub fn list(&self) -> Vec<Arc<WorkflowEntry>> {
        self.entries
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// The lock of workflow `id` (created on first use).
    fn lock_of(&self, id: &str) -> Arc<Mutex<()>> {
        self.locks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(id.to_string())
            .or_default()
            .clone()
    }

    /// Save `body` as workflow `id`: the version becomes one more than the largest of the
    /// served entry's, the file's on disk and the body's, so concurrent saves get distinct,
    /// strictly increasing versions; written to a unique temporary file, fsynced and renamed
    /// over the old one, under the workflow's lock (see the module doc). Blocks on the lock
    /// and on fsync: call it off the async threads. A body that is not structurally a workflow
    /// (unknown fields, wrong types) is refused; one that parses but does not validate is
    /// saved with its problems (a draft).
    pub fn save(&self, id: &str, body: Value) -> Result<Arc<WorkflowEntry>, DirError> {
        self.write(id, body, false)
    }

    /// [`WorkflowDir::save`] of a workflow that validates: one with validation errors is
    /// refused ([`DirError::NotValid`]) and nothing is written. What makes a version live
    /// (publishing a draft, the API's save-and-publish).
    pub fn publish(&self, id: &str, body: Value) -> Result<Arc<WorkflowEntry>, DirError> {
        self.write(id, body, true)
    }

    fn write(
        &self,
        id: &str,
        mut body: Value,
        require_valid: bool,
    ) -> Result<Arc<WorkflowEntry>, DirError> {
        if !valid_workflow_id(id) {
            return Err(DirError::BadId(id.to_string()));
        }
        if let Some(obj) = body.as_object_mut() {
            match obj.get("id").and_then(Value::as_str) {
                None => {
                    obj.insert("id".into(), Value::String(id.to_string()));
                }
                Some(b) if b != id => {
                    return Err(DirError::IdMismatch {
                        body: b.to_string(),
                        path: id.to_string(),
                    })
                }
                _ => {}
            }
        }
        let mut wf: Workflow = serde_json::from_value(body.clone()).map_err(|_| {
            let (_, problems) = check_value(&body, &self.registry);
            let errors: Vec<Problem> = problems
                .into_iter()
                .filter(|p| p.severity == Severity::Error)
                .collect();
            DirError::Invalid(errors)
        })?;
        if require_valid {
            let (compiled, problems) = check_value(&body, &self.registry);
            if compiled.is_none() || problems.iter().any(|p| p.severity == Severity::Error) {
                return Err(DirError::NotValid(problems));
            }
        }
        let lock = self.lock_of(id);
        let _held = lock.lock().unwrap_or_else(|e| e.into_inner());
        let path = self.dir.join(format!("{id}.json"));
        // The file may have been edited by hand since it was loaded: its version counts too.
        let on_disk = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .and_then(|v| v.get("version").and_then(Value::as_u64))
            .unwrap_or(0);
        let current = self.get(id).map(|e| e.version()).unwrap_or(0).max(on_disk);
        wf.version = current.max(wf.version).saturating_add(1);
        let text = wf.to_file_string();
        write_atomic(&path, text.as_bytes()).map_err(|source| DirError::Io {
            path: path.display().to_string(),
            source,
        })?;
        let entry = Arc::new(WorkflowEntry::from_text(
            id.to_string(),
            path,
            text,
            &self.registry,
        ));
        self.entries
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id.to_string(), entry.clone());
        Ok(entry)
    }

    /// Delete a workflow file; `false` if there was none. Waits for a save of it in progress.
    pub fn delete(&self, id: &str) -> Result<bool, DirError> {
        let lock = self.lock_of(id);
        let _held = lock.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = self.get(id) else {
            return Ok(false);
        };
        std::fs::remove_file(&entry.path).map_err(|source| DirError::Io {
            path: entry.path.display().to_string(),
            source,
        })?;
        self.entries
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        Ok(true)
    }
}

impl crate::steps::webhook_trigger::Triggers for WorkflowDir {
    fn triggers(&self) -> Vec<(String, String, Value)> {
        self.list()
            .iter()
            .filter_map(|e| {
                let t = e.compiled.as_ref()?.trigger();
                Some((e.id.clone(), t.kind.clone(), t.config.clone()))
            })
            .collect()
    }
}

/// Write `bytes` to `path` atomically with the mode `path` has (0644 for a new file): see
/// [`write_atomic_mode`].
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    #[cfg(unix)]
    let mode = {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(path)
            .map(|m| m.permissions().mode() & 0o7777)
            .unwrap_or(0o644)
    };
    #[cfg(not(unix))]
    let mode = 0o644;
    write_atomic_mode(path, bytes, mode)
}

/// Write `bytes` to `path` atomically, with Unix permissions `mode` (e.g. 0o600), whatever
/// the umask: a temporary file with a unique name in the same folder (so concurrent writers
/// never share one; created 0600), written, fsynced, given `mode`, renamed over `path`, then
/// the folder fsynced. Readers see the old or the new file, never half of one; on an error
/// the temporary file is removed and `path` is untouched.
pub fn write_atomic_mode(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::io::Write;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .tempfile_in(dir)?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        tmp.as_file()
            .set_permissions(std::fs::Permissions::from_mode(mode))?;
    }
    #[cfg(not(unix))]
    let _ = mode;
    tmp.persist(path).map_err(|e| e.error)?;
    // The rename is durable once the folder is (best effort: not every filesystem allows it).
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}
