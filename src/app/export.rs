//! Exports of the run history (issue 15): every run matching the list's filters, newest first,
//! as **CSV** that spreadsheets open safely or as **JSON Lines**, produced page by page (500
//! runs a page through [`super::runs::list`]), so any number of runs streams in bounded memory.
//! `GET /api/v1/runs/export` streams it; the desktop's `export_runs` writes the same bytes to a
//! file ([`write_file`]).
//!
//! * **CSV** (RFC 4180, CRLF, written with the `csv` crate): a header row, then one row per run:
//!   the summary columns ([`SUMMARY_COLUMNS`]), then one column per `fields` path, named by the
//!   path (`input.data.object.customer`). Without `fields`, one `input` column holds the whole
//!   input as compact JSON; `fields=` (empty) gives the summary columns only.
//! * **JSON Lines** (`application/x-ndjson`): one JSON object per line: the run's summary (as
//!   `GET /runs` lists it) plus its whole `input`. `fields` is checked but not applied.
//! * **Formula injection** ([`csv_cell`], the one rule): a text cell that begins with `=`, `+`,
//!   `-`, `@`, a tab or a carriage return gets a leading `'`, so a spreadsheet shows it as text
//!   and never runs it (`=HYPERLINK("x")` → `'=HYPERLINK("x")`), unless the whole text is a
//!   plain decimal number (`-5`, `+1.5e3`), which no spreadsheet runs. JSON numbers are written
//!   as numbers (`-5`), booleans as `true`/`false`, `null` and missing paths as an empty cell,
//!   objects and arrays as compact JSON text.

use std::path::{Path, PathBuf};

use futures_core::Stream;
use serde::Deserialize;
use serde_json::Value;
use utoipa::IntoParams;

use super::runs::RunsParams;
use super::{AppError, AppResult, AppState};

/// Runs read per page (one chunk of output per page).
pub const EXPORT_PAGE: usize = 500;
/// Most `fields` paths one export takes.
pub const MAX_FIELDS: usize = 64;

/// The summary columns of a CSV export, in order (the names of `GET /runs`' summary members).
pub const SUMMARY_COLUMNS: [&str; 20] = [
    "id",
    "workflow_id",
    "workflow_version",
    "status",
    "mode",
    "trigger",
    "idempotency_key",
    "created_at",
    "finished_at",
    "duration_ms",
    "error_code",
    "error_message",
    "error_step",
    "error_http_status",
    "replay_of",
    "resume_of",
    "root_run_id",
    "parent_run",
    "fixed_by",
    "resumed_by",
];

/// Query of `GET /runs/export`: the format, the input paths, and the list's filters (an empty
/// value is no filter).
#[derive(Debug, Deserialize, Default, Clone, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ExportParams {
    /// `csv` (default) or `jsonl`.
    #[param(pattern = "^(csv|jsonl)$")]
    pub format: Option<String>,
    /// CSV columns taken from each run's input, comma-separated dot paths starting at `input`
    /// (`input.data.object.customer,input.amount`; a number segment indexes an array:
    /// `input.items.0.sku`), at most 64. Absent: one `input` column with the whole input as
    /// JSON. Empty: no input column.
    pub fields: Option<String>,
    /// Only runs of this workflow id.
    pub workflow: Option<String>,
    /// Only runs with this status.
    #[param(value_type = Option<crate::run::RunStatus>, inline)]
    pub status: Option<String>,
    /// Only `live` or only `dry` runs.
    #[param(value_type = Option<crate::run::Mode>, inline)]
    pub mode: Option<String>,
    /// Only runs started by this trigger.
    #[param(value_type = Option<crate::run::Trigger>, inline)]
    pub trigger: Option<String>,
    /// Only runs with exactly this idempotency (or event) key.
    pub key: Option<String>,
    /// Only runs created at or after this instant: RFC 3339, or unix milliseconds.
    pub since: Option<String>,
    /// Only runs created before this instant: RFC 3339, or unix milliseconds.
    pub until: Option<String>,
    /// Free search, as in the list: a run id, a key or a value inside the run.
    pub q: Option<String>,
    /// Only runs that failed for this reason (`HTTP 500 at create`).
    pub error: Option<String>,
    /// `stopped`: only runs that stopped a duplicate delivery.
    #[param(pattern = "^stopped$")]
    pub duplicates: Option<String>,
}

/// The output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Csv,
    Jsonl,
}

/// One input path of a CSV column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldPath {
    /// As given (the column's name).
    pub name: String,
    /// The segments after `input`.
    pub segments: Vec<String>,
}

impl FieldPath {
    /// The value at this path in `input`, if any.
    pub fn lookup<'a>(&self, input: &'a Value) -> Option<&'a Value> {
        self.segments.iter().try_fold(input, |v, seg| match v {
            Value::Object(m) => m.get(seg),
            Value::Array(a) => seg.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        })
    }
}

/// A checked export request.
#[derive(Debug, Clone)]
pub struct ExportPlan {
    pub format: Format,
    /// The CSV input columns; `None`: the whole input in one `input` column.
    pub fields: Option<Vec<FieldPath>>,
    /// The listing parameters (pages of [`EXPORT_PAGE`]).
    list: RunsParams,
}

/// Parse `fields` (comma-separated `input…` paths), or `400 invalid_field` naming the bad one.
pub fn parse_fields(text: &str) -> AppResult<Vec<FieldPath>> {
    let mut out = Vec::new();
    for raw in text.split(',') {
        let name = raw.trim();
        if name.is_empty() {
            continue;
        }
        let bad = |why: &str| {
            AppError::bad_request(
                "invalid_field",
                format!(
                    "`fields`: `{}` {why}; write dot paths starting at `input`, e.g. \
                     `input.data.object.customer,input.amount`",
                    name.chars().take(80).collect::<String>()
                ),
            )
        };
        if name.len() > 256 {
            return Err(bad("is longer than 256 bytes"));
        }
        let mut segs = name.split('.');
        if segs.next() != Some("input") {
            return Err(bad("does not start at `input`"));
        }
        let segments: Vec<String> = segs.map(str::to_string).collect();
        if segments.iter().any(|s| s.is_empty()) {
            return Err(bad("has an empty segment"));
        }
        if segments
            .iter()
            .any(|s| s.chars().any(|c| c.is_control() || c.is_whitespace()))
        {
            return Err(bad("has a space or a control character"));
        }
        out.push(FieldPath {
            name: name.to_string(),
            segments,
        });
    }
    if out.len() > MAX_FIELDS {
        return Err(AppError::bad_request(
            "invalid_field",
            format!("`fields`: {} paths; at most {MAX_FIELDS}", out.len()),
        ));
    }
    Ok(out)
}

/// Check an export request: `400 invalid_parameter` (an unknown `format`, a bad filter value,
/// as the list answers them), `400 invalid_field` (a bad `fields` path).
pub fn plan(p: &ExportParams) -> AppResult<ExportPlan> {
    let format = match p.format.as_deref().map(str::trim) {
        None | Some("") | Some("csv") => Format::Csv,
        Some("jsonl") => Format::Jsonl,
        Some(f) => {
            return Err(AppError::bad_request(
                "invalid_parameter",
                format!(
                    "`format`: `{}` is not csv or jsonl",
                    f.chars().take(80).collect::<String>()
                ),
            ))
        }
    };
    let fields = p.fields.as_deref().map(parse_fields).transpose()?;
    let list = RunsParams {
        workflow: p.workflow.clone(),
        status: p.status.clone(),
        mode: p.mode.clone(),
        trigger: p.trigger.clone(),
        key: p.key.clone(),
        since: p.since.clone(),
        until: p.until.clone(),
        q: p.q.clone(),
        error: p.error.clone(),
        duplicates: p.duplicates.clone(),
        limit: Some(EXPORT_PAGE),
        cursor: None,
    };
    list.to_query()?;
    Ok(ExportPlan {
        format,
        fields,
        list,
    })
}

impl ExportPlan {
    /// The media type of the output.
    pub fn content_type(&self) -> &'static str {
        match self.format {
            Format::Csv => "text/csv; charset=utf-8",
            Format::Jsonl => "application/x-ndjson",
        }
    }

    /// A file name for it: `fluxo-runs-<YYYYMMDD-HHMMSS>.csv|jsonl` (UTC).
    pub fn file_name(&self, now_ms: i64) -> String {
        let t = crate::clock::rfc3339(now_ms);
        let stamp: String = t
            .chars()
            .take(19)
            .filter(|c| c.is_ascii_digit() || *c == 'T')
            .map(|c| if c == 'T' { '-' } else { c })
            .collect();
        let ext = match self.format {
            Format::Csv => "csv",
            Format::Jsonl => "jsonl",
        };
        format!("fluxo-runs-{stamp}.{ext}")
    }

    fn needs_input(&self) -> bool {
        self.format == Format::Jsonl || self.fields.as_ref().is_none_or(|f| !f.is_empty())
    }

    fn header(&self) -> Vec<String> {
        let mut h: Vec<String> = SUMMARY_COLUMNS.iter().map(|c| c.to_string()).collect();
        match &self.fields {
            None => h.push("input".into()),
            Some(f) => h.extend(f.iter().map(|p| p.name.clone())),
        }
        h
    }
}

/// Whether `s` is a plain decimal number (`-5`, `+1.25`, `-3e-2`): safe in a spreadsheet.
fn plain_number(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let digits = |i: &mut usize| {
        let start = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > start
    };
    if !digits(&mut i) {
        return false;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        if !digits(&mut i) {
            return false;
        }
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        if !digits(&mut i) {
            return false;
        }
    }
    i == b.len()
}

/// Text for a spreadsheet cell: a leading `'` when it begins with `=`, `+`, `-`, `@`, a tab or
/// a carriage return (a formula to a spreadsheet), unless it is a plain number.
pub fn neutralise(s: &str) -> std::borrow::Cow<'_, str> {
    match s.as_bytes().first() {
        Some(b'=' | b'+' | b'-' | b'@' | b'\t' | b'\r') if !plain_number(s) => {
            std::borrow::Cow::Owned(format!("'{s}"))
        }
        _ => std::borrow::Cow::Borrowed(s),
    }
}

/// A JSON value as a CSV cell (see the module doc): numbers as written, text neutralised,
/// `null` empty, objects and arrays as compact JSON.
pub fn csv_cell(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::String(s)) => neutralise(s).into_owned(),
        Some(other) => neutralise(&other.to_string()).into_owned(),
    }
}

/// A summary column of a run as a CSV cell (lists joined with spaces).
fn summary_cell(summary: &Value, column: &str) -> String {
    match summary.get(column) {
        Some(Value::Array(a)) => neutralise(
            &a.iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| v.to_string())
                })
                .collect::<Vec<_>>()
                .join(" "),
        )
        .into_owned(),
        v => csv_cell(v),
    }
}

fn csv_error(e: csv::Error) -> AppError {
    AppError::new(
        super::ErrorKind::Internal,
        "export_failed",
        format!("the CSV could not be written: {e}"),
    )
}

/// One page as bytes: CSV rows (with the header first when `header`), or JSON lines.
async fn render_page(
    state: &AppState,
    plan: &ExportPlan,
    runs: &[crate::store::RunSummary],
    header: bool,
) -> AppResult<Vec<u8>> {
    let mut csv_out = (plan.format == Format::Csv).then(|| {
        csv::WriterBuilder::new()
            .terminator(csv::Terminator::CRLF)
            .from_writer(Vec::new())
    });
    let mut jsonl = Vec::new();
    if let (Some(w), true) = (csv_out.as_mut(), header) {
        w.write_record(plan.header()).map_err(csv_error)?;
    }
    for s in runs {
        let input = if plan.needs_input() {
            state
                .store()
                .get_run(&s.id)
                .await
                .map_err(AppError::store)?
                .map(|r| r.input.into_value())
        } else {
            None
        };
        let summary = serde_json::to_value(s).unwrap_or_default();
        match csv_out.as_mut() {
            Some(w) => {
                let mut row: Vec<String> = SUMMARY_COLUMNS
                    .iter()
                    .map(|c| summary_cell(&summary, c))
                    .collect();
                match &plan.fields {
                    None => row.push(csv_cell(input.as_ref())),
                    Some(f) => row.extend(
                        f.iter()
                            .map(|p| csv_cell(input.as_ref().and_then(|i| p.lookup(i)))),
                    ),
                }
                w.write_record(&row).map_err(csv_error)?;
            }
            None => {
                let mut line = summary;
                if let Value::Object(m) = &mut line {
                    m.insert("input".into(), input.unwrap_or(Value::Null));
                }
                serde_json::to_writer(&mut jsonl, &line).unwrap_or_default();
                jsonl.push(b'\n');
            }
        }
    }
    match csv_out {
        Some(w) => w.into_inner().map_err(|e| csv_error(e.into_error().into())),
        None => Ok(jsonl),
    }
}

struct Pages {
    state: AppState,
    plan: ExportPlan,
    first: bool,
    done: bool,
}

/// The export of `plan`, one chunk of bytes per page of runs (the CSV header in the first, even
/// with no run). A store failure mid-way ends the stream with that error (after what was
/// already sent), so the output is cut rather than silently short.
pub fn stream(state: &AppState, plan: ExportPlan) -> impl Stream<Item = AppResult<Vec<u8>>> {
    let pages = Pages {
        state: state.clone(),
        plan,
        first: true,
        done: false,
    };
    futures_util::stream::unfold(pages, |mut p| async move {
        if p.done {
            return None;
        }
        let page = match super::runs::list(&p.state, &p.plan.list).await {
            Ok(page) => page,
            Err(e) => {
                p.done = true;
                return Some((Err(e), p));
            }
        };
        let chunk = render_page(&p.state, &p.plan, &page.runs, p.first).await;
        p.first = false;
        match page.next_cursor {
            Some(c) if chunk.is_ok() => p.plan.list.cursor = Some(c),
            _ => p.done = true,
        }
        Some((chunk, p))
    })
}

/// Where the desktop app saves exports: the user's Downloads folder, else `exports/` in the
/// data dir, else the temp dir.
pub fn default_dir(state: &AppState) -> PathBuf {
    directories::UserDirs::new()
        .and_then(|d| d.download_dir().map(Path::to_path_buf))
        .or_else(|| state.options().data_dir.as_ref().map(|d| d.join("exports")))
        .unwrap_or_else(std::env::temp_dir)
}

/// What [`write_file`] wrote.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ExportFile {
    /// The file's path.
    pub path: PathBuf,
    /// Its size in bytes.
    pub bytes: u64,
}

/// Write the export of `plan` into a new file in `dir` named by [`ExportPlan::file_name`] (the
/// same bytes `GET /runs/export` streams). Errors: the store's, or `500 export_failed` when
/// the file cannot be written (a partial file is removed).
pub async fn write_file(state: &AppState, plan: ExportPlan, dir: &Path) -> AppResult<ExportFile> {
    use futures_util::StreamExt;
    use tokio::io::AsyncWriteExt;
    let path = dir.join(plan.file_name(state.clock().now_ms()));
    let io_err = |e: std::io::Error| {
        AppError::new(
            super::ErrorKind::Internal,
            "export_failed",
            format!("the export could not be written to {}: {e}", path.display()),
        )
    };
    let result = async {
        tokio::fs::create_dir_all(dir).await.map_err(io_err)?;
        let mut file = tokio::fs::File::create(&path).await.map_err(io_err)?;
        let mut bytes = 0u64;
        let chunks = stream(state, plan);
        futures_util::pin_mut!(chunks);
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk?;
            file.write_all(&chunk).await.map_err(io_err)?;
            bytes += chunk.len() as u64;
        }
        file.flush().await.map_err(io_err)?;
        Ok(bytes)
    }
    .await;
    match result {
        Ok(bytes) => Ok(ExportFile { path, bytes }),
        Err(e) => {
            let _ = tokio::fs::remove_file(&path).await;
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn formulas_are_neutralised_and_numbers_stay_numbers() {
        assert_eq!(
            csv_cell(Some(&json!("=HYPERLINK(\"x\")"))),
            "'=HYPERLINK(\"x\")"
        );
        for s in [
            "+1+2", "-1+A1", "@SUM(A1)", "\tx", "\rx", "-", "+", "=", "-inf",
        ] {
            assert_eq!(csv_cell(Some(&json!(s))), format!("'{s}"), "{s:?}");
        }
        for s in ["-5", "+5", "-1.25", "-3e-2", "plain", "", "a=b", "0-1"] {
            assert_eq!(csv_cell(Some(&json!(s))), s, "{s:?}");
        }
        assert_eq!(csv_cell(Some(&json!(-5))), "-5");
        assert_eq!(csv_cell(Some(&json!(-0.5))), "-0.5");
        assert_eq!(csv_cell(Some(&json!(true))), "true");
        assert_eq!(csv_cell(Some(&Value::Null)), "");
        assert_eq!(csv_cell(None), "");
        assert_eq!(csv_cell(Some(&json!({"a": "=x"}))), r#"{"a":"=x"}"#);
    }

    #[test]
    fn field_paths_start_at_input() {
        let f = parse_fields(" input.data.object.customer , input.items.0.sku,input ").unwrap();
        assert_eq!(f.len(), 3);
        let input = json!({"data": {"object": {"customer": "cus_1"}}, "items": [{"sku": "X"}]});
        assert_eq!(f[0].lookup(&input), Some(&json!("cus_1")));
        assert_eq!(f[1].lookup(&input), Some(&json!("X")));
        assert_eq!(f[2].lookup(&input), Some(&input));
        assert!(parse_fields("").unwrap().is_empty());
        for bad in [
            "data.x",
            "input..x",
            "input.",
            "inputs.x",
            "input.a b",
            "=cmd",
        ] {
            assert_eq!(
                parse_fields(bad).unwrap_err().code,
                "invalid_field",
                "{bad}"
            );
        }
    }
}
