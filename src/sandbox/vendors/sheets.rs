//! Google Sheets API v4 values (`/sheets/v4/spreadsheets/{id}/values/{range}…`), from Google's
//! public API reference.
//!
//! What matters for dedupe: `values:append` has no key and no unique column, so a retried
//! append writes the row again below the last one (as the real API does); the find is a read
//! of the range and a scan for the row's key. Spreadsheets are created on first use (with one
//! sheet, `Sheet1`) or by `POST /v4/spreadsheets` or the control route. Errors are Google's
//! `{"error": {"code", "message", "status"}}`.

use std::collections::BTreeMap;

use axum::extract::{Path, Request, State};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Map, Value};

use super::{
    begin, object, query_pairs, random_alnum, Answer, Auth, AuthFailure, Ctx, Fake, Style,
    VendorData, SHEETS_TOKEN_PREFIX,
};
use crate::sandbox::state::SandboxState;

const CT: &str = "application/json; charset=UTF-8";

/// A new sheet's grid: 1000 rows, 26 columns (A–Z); it grows as rows are written.
const GRID_ROWS: usize = 1000;
const GRID_COLS: usize = 26;

#[derive(Debug, Clone)]
struct Sheet {
    id: i64,
    title: String,
    /// Rows of cells; `Null` is an empty cell.
    rows: Vec<Vec<Value>>,
}

impl Sheet {
    fn grid(&self) -> (usize, usize) {
        let cols = self.rows.iter().map(Vec::len).max().unwrap_or(0);
        (self.rows.len().max(GRID_ROWS), cols.max(GRID_COLS))
    }

    fn cell(&self, r: usize, c: usize) -> &Value {
        self.rows
            .get(r)
            .and_then(|row| row.get(c))
            .unwrap_or(&Value::Null)
    }

    fn set(&mut self, r: usize, c: usize, v: Value) {
        if self.rows.len() <= r {
            self.rows.resize(r + 1, Vec::new());
        }
        let row = &mut self.rows[r];
        if row.len() <= c {
            row.resize(c + 1, Value::Null);
        }
        row[c] = v;
    }
}

#[derive(Debug, Clone)]
struct Book {
    title: String,
    sheets: Vec<Sheet>,
}

impl Book {
    fn new(title: &str, sheet_titles: &[String]) -> Self {
        let sheets = sheet_titles
            .iter()
            .enumerate()
            .map(|(i, t)| Sheet {
                id: i as i64,
                title: t.clone(),
                rows: Vec::new(),
            })
            .collect();
        Book {
            title: title.to_string(),
            sheets,
        }
    }

    fn sheet(&self, title: &str) -> Option<usize> {
        self.sheets
            .iter()
            .position(|s| s.title == title)
            .or_else(|| {
                self.sheets
                    .iter()
                    .position(|s| s.title.eq_ignore_ascii_case(title))
            })
    }
}

/// Sheets' memory: spreadsheets by id.
#[derive(Debug, Default)]
pub(crate) struct SheetsData {
    books: BTreeMap<String, Book>,
}

impl SheetsData {
    /// The spreadsheet `id`, created (with `Sheet1`) if it does not exist.
    fn book(&mut self, id: &str) -> &mut Book {
        self.books
            .entry(id.to_string())
            .or_insert_with(|| Book::new("Untitled spreadsheet", &["Sheet1".to_string()]))
    }
}

// ---------------------------------------------------------------------------------------------
// A1 notation

/// `0` → `A`, `25` → `Z`, `26` → `AA`.
fn col_name(mut c: usize) -> String {
    let mut out = Vec::new();
    loop {
        out.push(b'A' + (c % 26) as u8);
        if c < 26 {
            break;
        }
        c = c / 26 - 1;
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// A sheet name as A1 notation writes it: quoted unless letters, digits and `_` only.
fn sheet_ref(title: &str) -> String {
    if !title.is_empty() && title.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        title.to_string()
    } else {
        format!("'{}'", title.replace('\'', "''"))
    }
}

fn a1(sheet: &str, c0: usize, r0: usize, c1: usize, r1: usize) -> String {
    format!(
        "{}!{}{}:{}{}",
        sheet_ref(sheet),
        col_name(c0),
        r0 + 1,
        col_name(c1),
        r1 + 1
    )
}

/// A range: the sheet (index) and 0-based bounds, `None` where open.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Range {
    sheet: usize,
    c0: Option<usize>,
    r0: Option<usize>,
    c1: Option<usize>,
    r1: Option<usize>,
}

/// `A1`, `A`, `1` → (column, row), either optional, 0-based.
fn cell_ref(s: &str) -> Option<(Option<usize>, Option<usize>)> {
    let letters: String = s.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
    let digits = &s[letters.len()..];
    if (letters.is_empty() && digits.is_empty())
        || !digits.chars().all(|c| c.is_ascii_digit())
        || letters.len() > 3
    {
        return None;
    }
    let col = (!letters.is_empty()).then(|| {
        letters
            .to_ascii_uppercase()
            .bytes()
            .fold(0usize, |acc, b| acc * 26 + usize::from(b - b'A' + 1))
            - 1
    });
    let row = if digits.is_empty() {
        None
    } else {
        Some(digits.parse::<usize>().ok().filter(|r| *r >= 1)? - 1)
    };
    Some((col, row))
}

fn parse_cells(sheet: usize, cells: &str) -> Option<Range> {
    let (a, b) = match cells.split_once(':') {
        Some((a, b)) => (cell_ref(a)?, cell_ref(b)?),
        None => {
            let c = cell_ref(cells)?;
            // A single cell, or a whole column or row.
            (c, c)
        }
    };
    Some(Range {
        sheet,
        c0: a.0,
        r0: a.1,
        c1: b.0,
        r1: b.1,
    })
}

/// Parse A1 notation against a spreadsheet: `Sheet1`, `Sheet1!A1:C5`, `'My sheet'!A:C`,
/// `A1:C5` (the first sheet). `Err`: Google's message.
fn parse_range(book: &Book, s: &str) -> Result<Range, String> {
    let bad = || format!("Unable to parse range: {s}");
    let (sheet_part, cells) = if let Some(rest) = s.strip_prefix('\'') {
        // A quoted name: '' is a quote.
        let mut name = String::new();
        let mut chars = rest.char_indices().peekable();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            if c == '\'' {
                if chars.peek().is_some_and(|(_, n)| *n == '\'') {
                    name.push('\'');
                    chars.next();
                } else {
                    end = Some(i + 1);
                    break;
                }
            } else {
                name.push(c);
            }
        }
        let rest = &rest[end.ok_or_else(bad)?..];
        match rest.strip_prefix('!') {
            Some(cells) => (Some(name), Some(cells)),
            None if rest.is_empty() => (Some(name), None),
            None => return Err(bad()),
        }
    } else {
        match s.split_once('!') {
            Some((n, cells)) => (Some(n.to_string()), Some(cells)),
            None => match book.sheet(s) {
                Some(_) => (Some(s.to_string()), None),
                None => (None, Some(s)),
            },
        }
    };
    let sheet = match sheet_part {
        Some(n) => book.sheet(&n).ok_or_else(bad)?,
        None => 0,
    };
    match cells {
        None => Ok(Range {
            sheet,
            c0: None,
            r0: None,
            c1: None,
            r1: None,
        }),
        Some(c) => parse_cells(sheet, c).ok_or_else(bad),
    }
}

// ---------------------------------------------------------------------------------------------
// Values

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Input {
    Raw,
    UserEntered,
}

fn input_option(q: &[(String, String)]) -> Result<Input, Answer> {
    match q
        .iter()
        .find(|(k, _)| k == "valueInputOption")
        .map(|(_, v)| v.as_str())
    {
        Some("RAW") => Ok(Input::Raw),
        Some("USER_ENTERED") => Ok(Input::UserEntered),
        Some(other) => Err(invalid(&format!(
            "Invalid value at 'value_input_option' (TYPE_ENUM), \"{other}\""
        ))),
        None => Err(invalid("'valueInputOption' is required but not specified")),
    }
}

/// A cell as stored: RAW keeps strings as strings; USER_ENTERED reads numbers and booleans
/// out of strings (formulas are kept as text, not evaluated).
fn cell_value(v: &Value, input: Input, at: (usize, usize)) -> Result<Value, Answer> {
    Ok(match v {
        Value::Null => Value::Null,
        Value::Bool(_) | Value::Number(_) => v.clone(),
        Value::String(s) if s.is_empty() => Value::Null,
        Value::String(s) => match input {
            Input::Raw => v.clone(),
            Input::UserEntered => {
                if let Ok(n) = s.trim().parse::<i64>() {
                    json!(n)
                } else if let Some(n) = s
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite())
                    .and_then(serde_json::Number::from_f64)
                {
                    Value::Number(n)
                } else if s.eq_ignore_ascii_case("true") {
                    json!(true)
                } else if s.eq_ignore_ascii_case("false") {
                    json!(false)
                } else {
                    v.clone()
                }
            }
        },
        _ => return Err(invalid(&format!("Invalid values[{}][{}]: {v}", at.0, at.1))),
    })
}

/// How a read shows a cell: `FORMATTED_VALUE` (the default) as text, the others as stored.
fn rendered(v: &Value, formatted: bool) -> Value {
    if !formatted {
        return if v.is_null() { json!("") } else { v.clone() };
    }
    match v {
        Value::Null => json!(""),
        Value::Bool(b) => json!(if *b { "TRUE" } else { "FALSE" }),
        Value::Number(n) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => json!(format!("{}", f as i64)),
            _ => json!(n.to_string()),
        },
        other => other.clone(),
    }
}

/// The body's `values` as rows (`majorDimension: COLUMNS` transposed).
fn body_rows(body: &Value, input: Input) -> Result<Vec<Vec<Value>>, Answer> {
    let values =
        match body.get("values") {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Array(v)) => v,
            Some(_) => return Err(invalid(
                "Invalid value at 'data.values' (type.googleapis.com/google.protobuf.ListValue)",
            )),
        };
    let mut rows = Vec::new();
    for (i, row) in values.iter().enumerate() {
        let Value::Array(cells) = row else {
            return Err(invalid(&format!(
                "Invalid value at 'data.values[{i}]' (type.googleapis.com/google.protobuf.ListValue)"
            )));
        };
        rows.push(
            cells
                .iter()
                .enumerate()
                .map(|(j, c)| cell_value(c, input, (i, j)))
                .collect::<Result<Vec<_>, _>>()?,
        );
    }
    match body.get("majorDimension").and_then(Value::as_str) {
        None | Some("ROWS") | Some("DIMENSION_UNSPECIFIED") => Ok(rows),
        Some("COLUMNS") => Ok(transpose(&rows, Value::Null)),
        Some(other) => Err(invalid(&format!(
            "Invalid value at 'data.major_dimension' (TYPE_ENUM), \"{other}\""
        ))),
    }
}

fn transpose(rows: &[Vec<Value>], fill: Value) -> Vec<Vec<Value>> {
    let width = rows.iter().map(Vec::len).max().unwrap_or(0);
    (0..width)
        .map(|c| {
            rows.iter()
                .map(|r| r.get(c).cloned().unwrap_or_else(|| fill.clone()))
                .collect()
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Errors

fn gerror(code: u16, status: &str, message: &str) -> Answer {
    Answer::json(
        code,
        CT,
        &json!({"error": {"code": code, "message": message, "status": status}}),
    )
}

fn invalid(message: &str) -> Answer {
    gerror(400, "INVALID_ARGUMENT", message)
}

fn entity_not_found() -> Answer {
    gerror(404, "NOT_FOUND", "Requested entity was not found.")
}

/// The Google Sheets fake.
pub(crate) struct Sheets;

impl Style for Sheets {
    fn app(&self) -> &'static str {
        "sheets"
    }

    fn unauthorized(&self, why: &AuthFailure) -> Answer {
        let (message, reason) = match why {
            AuthFailure::Missing => (
                "Request is missing required authentication credential. Expected OAuth 2 \
                 access token, login cookie or other valid authentication credential. See \
                 https://developers.google.com/identity/sign-in/web/devconsole-project.",
                "CREDENTIALS_MISSING",
            ),
            AuthFailure::Invalid { .. } => (
                "Request had invalid authentication credentials. Expected OAuth 2 access \
                 token, login cookie or other valid authentication credential. See \
                 https://developers.google.com/identity/sign-in/web/devconsole-project.",
                "ACCESS_TOKEN_TYPE_UNSUPPORTED",
            ),
            AuthFailure::Expired { .. } => (
                "Request had invalid authentication credentials. Expected OAuth 2 access \
                 token, login cookie or other valid authentication credential. See \
                 https://developers.google.com/identity/sign-in/web/devconsole-project.",
                "ACCESS_TOKEN_EXPIRED",
            ),
        };
        Answer::json(
            401,
            CT,
            &json!({"error": {
                "code": 401,
                "message": message,
                "status": "UNAUTHENTICATED",
                "details": [{
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": reason,
                    "domain": "googleapis.com",
                    "metadata": {"service": "sheets.googleapis.com"},
                }],
            }}),
        )
        .header(
            "www-authenticate",
            "Bearer realm=\"https://accounts.google.com/\", error=\"invalid_token\"",
        )
    }

    fn rate_limited(&self, _retry_after_s: u64) -> Answer {
        gerror(
            429,
            "RESOURCE_EXHAUSTED",
            "Quota exceeded for quota metric 'Write requests' and limit 'Write requests per \
             minute per user' of service 'sheets.googleapis.com' for consumer \
             'project_number:0'.",
        )
    }

    fn server_error(&self) -> Answer {
        gerror(500, "INTERNAL", "Internal error encountered.")
    }

    fn not_found(&self, method: &str, path: &str) -> Answer {
        gerror(
            404,
            "NOT_FOUND",
            &format!("The requested URL {path} was not found ({method})."),
        )
    }

    fn bad_request(&self, message: &str) -> Answer {
        invalid(message)
    }
}

impl Fake for Sheets {
    fn token_prefix(&self) -> &'static str {
        SHEETS_TOKEN_PREFIX
    }

    fn routes(&self) -> Router<SandboxState> {
        Router::new()
            .route("/sheets/v4/spreadsheets", post(create_spreadsheet))
            .route("/sheets/v4/spreadsheets/{id}", get(spreadsheet))
            .route(
                "/sheets/v4/spreadsheets/{id}/values/{range}",
                get(read_values).post(append).put(update_values),
            )
    }

    fn counts(&self, data: &VendorData) -> Vec<(String, usize)> {
        let rows = data
            .sheets
            .books
            .values()
            .flat_map(|b| &b.sheets)
            .map(|s| s.rows.len())
            .sum();
        vec![("sheets rows".into(), rows)]
    }

    fn snapshot(&self, data: &VendorData, _now_ms: i64) -> Value {
        let books: Map<String, Value> = data
            .sheets
            .books
            .iter()
            .map(|(id, b)| {
                let sheets: Map<String, Value> = b
                    .sheets
                    .iter()
                    .map(|s| {
                        let rows: Vec<Value> = s
                            .rows
                            .iter()
                            .map(|r| Value::Array(r.iter().map(|c| rendered(c, false)).collect()))
                            .collect();
                        (s.title.clone(), Value::Array(rows))
                    })
                    .collect();
                (id.clone(), json!({"title": b.title, "sheets": sheets}))
            })
            .collect();
        json!({ "spreadsheets": books })
    }

    fn control(&self, data: &mut VendorData, body: Value) -> Result<Value, String> {
        let m = object(&body);
        let id = m
            .get("spreadsheet")
            .and_then(Value::as_str)
            .filter(|id| valid_id(id))
            .ok_or("expected {\"spreadsheet\": \"<id: A-Z a-z 0-9 - _>\", \"sheets\": [\"Sheet1\", …], \"title\": \"…\"}")?;
        let titles: Vec<String> = match m.get("sheets") {
            None => vec!["Sheet1".into()],
            Some(Value::Array(a)) if !a.is_empty() => a
                .iter()
                .map(|t| t.as_str().map(str::to_string).ok_or("sheets are names"))
                .collect::<Result<_, _>>()?,
            Some(_) => return Err("sheets must be a non-empty list of names".into()),
        };
        let title = m
            .get("title")
            .and_then(Value::as_str)
            .unwrap_or("Untitled spreadsheet");
        data.sheets
            .books
            .insert(id.to_string(), Book::new(title, &titles));
        Ok(json!({"spreadsheetId": id, "sheets": titles}))
    }
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 100
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

async fn start(state: SandboxState, req: Request) -> Result<Ctx, Response> {
    begin(&Sheets, SHEETS_TOKEN_PREFIX, Auth::Bearer, state, req).await
}

fn metadata(id: &str, b: &Book) -> Value {
    json!({
        "spreadsheetId": id,
        "properties": {"title": b.title, "locale": "en_US", "timeZone": "Etc/GMT"},
        "sheets": b.sheets.iter().enumerate().map(|(i, s)| {
            let (rows, cols) = s.grid();
            json!({"properties": {
                "sheetId": s.id,
                "title": s.title,
                "index": i,
                "sheetType": "GRID",
                "gridProperties": {"rowCount": rows, "columnCount": cols},
            }})
        }).collect::<Vec<_>>(),
        "spreadsheetUrl": format!("https://docs.google.com/spreadsheets/d/{id}/edit"),
    })
}

/// `POST /v4/spreadsheets`: `{"properties": {"title"}, "sheets": [{"properties": {"title"}}]}`.
async fn create_spreadsheet(State(state): State<SandboxState>, req: Request) -> Response {
    let ctx = match start(state, req).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let body: Value = if ctx.body.is_empty() {
        json!({})
    } else {
        match serde_json::from_slice(&ctx.body) {
            Ok(v) => v,
            Err(e) => return ctx.refuse(invalid(&format!("Invalid JSON payload received. {e}"))),
        }
    };
    let title = body
        .pointer("/properties/title")
        .and_then(Value::as_str)
        .unwrap_or("Untitled spreadsheet")
        .to_string();
    let mut titles: Vec<String> = body
        .get("sheets")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.pointer("/properties/title").and_then(Value::as_str))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    if titles.is_empty() {
        titles.push("Sheet1".into());
    }
    ctx.run(|_, data, _| {
        let id = random_alnum(44);
        let b = Book::new(&title, &titles);
        let v = metadata(&id, &b);
        data.sheets.books.insert(id.clone(), b);
        Ok((Answer::json(200, CT, &v), Some(id)))
    })
    .await
}

/// `GET /v4/spreadsheets/{id}`: the spreadsheet's properties and sheets.
async fn spreadsheet(
    State(state): State<SandboxState>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let ctx = match start(state, req).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    if !valid_id(&id) {
        return ctx.refuse(entity_not_found());
    }
    ctx.run(|_, data, _| {
        let b = data.sheets.book(&id);
        Ok((Answer::json(200, CT, &metadata(&id, b)), Some(id.clone())))
    })
    .await
}

/// `GET /v4/spreadsheets/{id}/values/{range}[?majorDimension=&valueRenderOption=]`.
async fn read_values(
    State(state): State<SandboxState>,
    Path((id, range)): Path<(String, String)>,
    req: Request,
) -> Response {
    let ctx = match start(state, req).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    if !valid_id(&id) {
        return ctx.refuse(entity_not_found());
    }
    let q = query_pairs(&ctx.parts);
    let param = |name: &str| q.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    let columns = match param("majorDimension") {
        None | Some("ROWS") => false,
        Some("COLUMNS") => true,
        Some(other) => {
            return ctx.refuse(invalid(&format!(
                "Invalid value at 'major_dimension' (TYPE_ENUM), \"{other}\""
            )))
        }
    };
    let formatted = match param("valueRenderOption") {
        None | Some("FORMATTED_VALUE") => true,
        Some("UNFORMATTED_VALUE" | "FORMULA") => false,
        Some(other) => {
            return ctx.refuse(invalid(&format!(
                "Invalid value at 'value_render_option' (TYPE_ENUM), \"{other}\""
            )))
        }
    };
    ctx.run(|_, data, _| {
        let b = data.sheets.book(&id);
        let r = parse_range(b, &range).map_err(|e| invalid(&e))?;
        let s = &b.sheets[r.sheet];
        let (rows, cols) = s.grid();
        let c0 = r.c0.unwrap_or(0);
        let r0 = r.r0.unwrap_or(0);
        let c1 = r.c1.unwrap_or(cols - 1).max(c0);
        let r1 = r.r1.unwrap_or(rows - 1).max(r0);
        let mut values: Vec<Vec<Value>> = (r0..=r1.min(s.rows.len().saturating_sub(1)))
            .filter(|_| !s.rows.is_empty())
            .map(|ri| {
                let mut row: Vec<Value> = (c0..=c1.min(s.rows[ri].len().saturating_sub(1)))
                    .filter(|_| !s.rows[ri].is_empty())
                    .map(|ci| s.cell(ri, ci).clone())
                    .collect();
                while row.last().is_some_and(Value::is_null) {
                    row.pop();
                }
                row
            })
            .collect();
        while values.last().is_some_and(Vec::is_empty) {
            values.pop();
        }
        if columns {
            values = transpose(&values, Value::Null);
        }
        let values: Vec<Value> = values
            .iter()
            .map(|row| Value::Array(row.iter().map(|c| rendered(c, formatted)).collect()))
            .collect();
        let mut v = json!({
            "range": a1(&s.title, c0, r0, c1, r1),
            "majorDimension": if columns { "COLUMNS" } else { "ROWS" },
        });
        if !values.is_empty() {
            v["values"] = Value::Array(values);
        }
        Ok((Answer::json(200, CT, &v), None))
    })
    .await
}

/// `POST /v4/spreadsheets/{id}/values/{range}:append?valueInputOption=RAW|USER_ENTERED`:
/// writes the rows below the last row with data in the range's columns. No dedupe: the same
/// append twice writes two rows.
async fn append(
    State(state): State<SandboxState>,
    Path((id, range)): Path<(String, String)>,
    req: Request,
) -> Response {
    let ctx = match start(state, req).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let Some(range) = range.strip_suffix(":append").map(str::to_string) else {
        let path = ctx.call.path.trim_start_matches("/sheets").to_string();
        return ctx.refuse(Sheets.not_found("POST", &path));
    };
    if !valid_id(&id) {
        return ctx.refuse(entity_not_found());
    }
    let q = query_pairs(&ctx.parts);
    let input = match input_option(&q) {
        Ok(i) => i,
        Err(a) => return ctx.refuse(a),
    };
    let with_values = q
        .iter()
        .any(|(k, v)| k == "includeValuesInResponse" && v == "true");
    let body: Value = match serde_json::from_slice(&ctx.body) {
        Ok(v) => v,
        Err(e) => return ctx.refuse(invalid(&format!("Invalid JSON payload received. {e}"))),
    };
    let rows = match body_rows(&body, input) {
        Ok(r) => r,
        Err(a) => return ctx.refuse(a),
    };
    ctx.run(|_, data, _| {
        let b = data.sheets.book(&id);
        let r = parse_range(b, &range).map_err(|e| invalid(&e))?;
        let s = &mut b.sheets[r.sheet];
        let (c0, r0) = (r.c0.unwrap_or(0), r.r0.unwrap_or(0));
        let c1 = r.c1.unwrap_or(usize::MAX);
        // The table: rows from r0 with data in columns c0..=c1.
        let mut first = None;
        let mut last = None;
        let (mut tc0, mut tc1) = (usize::MAX, 0);
        for (ri, row) in s.rows.iter().enumerate().skip(r0) {
            for (ci, v) in row.iter().enumerate() {
                if ci >= c0 && ci <= c1 && !v.is_null() {
                    first.get_or_insert(ri);
                    last = Some(ri);
                    tc0 = tc0.min(ci);
                    tc1 = tc1.max(ci);
                }
            }
        }
        let mut updates = json!({"spreadsheetId": id});
        let mut out = json!({"spreadsheetId": id});
        if let (Some(f), Some(l)) = (first, last) {
            out["tableRange"] = json!(a1(&s.title, tc0, f, tc1, l));
        }
        let width = rows.iter().map(Vec::len).max().unwrap_or(0);
        if !rows.is_empty() && width > 0 {
            let start_row = last.map_or(r0, |l| l + 1);
            let start_col = if last.is_some() { tc0 } else { c0 };
            for (i, row) in rows.iter().enumerate() {
                for (j, v) in row.iter().enumerate() {
                    s.set(start_row + i, start_col + j, v.clone());
                }
            }
            let range = a1(
                &s.title,
                start_col,
                start_row,
                start_col + width - 1,
                start_row + rows.len() - 1,
            );
            updates["updatedRange"] = json!(range);
            updates["updatedRows"] = json!(rows.len());
            updates["updatedColumns"] = json!(width);
            updates["updatedCells"] = json!(rows.iter().map(Vec::len).sum::<usize>());
            if with_values {
                updates["updatedData"] = json!({
                    "range": range,
                    "majorDimension": "ROWS",
                    "values": rows.iter().map(|r| r.iter().map(|c| rendered(c, true)).collect::<Vec<_>>()).collect::<Vec<_>>(),
                });
            }
        }
        let record = updates
            .get("updatedRange")
            .and_then(Value::as_str)
            .map(str::to_string);
        out["updates"] = updates;
        Ok((Answer::json(200, CT, &out), record))
    })
    .await
}

/// `PUT /v4/spreadsheets/{id}/values/{range}?valueInputOption=`: write the rows from the
/// range's first cell (over what is there).
async fn update_values(
    State(state): State<SandboxState>,
    Path((id, range)): Path<(String, String)>,
    req: Request,
) -> Response {
    let ctx = match start(state, req).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    if !valid_id(&id) {
        return ctx.refuse(entity_not_found());
    }
    let input = match input_option(&query_pairs(&ctx.parts)) {
        Ok(i) => i,
        Err(a) => return ctx.refuse(a),
    };
    let body: Value = match serde_json::from_slice(&ctx.body) {
        Ok(v) => v,
        Err(e) => return ctx.refuse(invalid(&format!("Invalid JSON payload received. {e}"))),
    };
    let rows = match body_rows(&body, input) {
        Ok(r) => r,
        Err(a) => return ctx.refuse(a),
    };
    ctx.run(|_, data, _| {
        let b = data.sheets.book(&id);
        let r = parse_range(b, &range).map_err(|e| invalid(&e))?;
        let s = &mut b.sheets[r.sheet];
        let (c0, r0) = (r.c0.unwrap_or(0), r.r0.unwrap_or(0));
        let width = rows.iter().map(Vec::len).max().unwrap_or(0);
        let fits_rows =
            r.r1.is_none_or(|r1| rows.is_empty() || r0 + rows.len() - 1 <= r1);
        let fits_cols = r.c1.is_none_or(|c1| width == 0 || c0 + width - 1 <= c1);
        if !fits_rows || !fits_cols {
            return Err(invalid(&format!(
                "Requested writing within range [{range}], but tried writing past its end."
            )));
        }
        for (i, row) in rows.iter().enumerate() {
            for (j, v) in row.iter().enumerate() {
                s.set(r0 + i, c0 + j, v.clone());
            }
        }
        let mut v = json!({"spreadsheetId": id});
        if width > 0 && !rows.is_empty() {
            let range = a1(&s.title, c0, r0, c0 + width - 1, r0 + rows.len() - 1);
            v["updatedRange"] = json!(range);
            v["updatedRows"] = json!(rows.len());
            v["updatedColumns"] = json!(width);
            v["updatedCells"] = json!(rows.iter().map(Vec::len).sum::<usize>());
        }
        let record = v
            .get("updatedRange")
            .and_then(Value::as_str)
            .map(str::to_string);
        Ok((Answer::json(200, CT, &v), record))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn book() -> Book {
        Book::new("t", &["Sheet1".into(), "My sheet".into()])
    }

    #[test]
    fn a1_notation() {
        assert_eq!(col_name(0), "A");
        assert_eq!(col_name(25), "Z");
        assert_eq!(col_name(26), "AA");
        assert_eq!(col_name(701), "ZZ");
        assert_eq!(col_name(702), "AAA");
        assert_eq!(a1("Sheet1", 0, 4, 2, 4), "Sheet1!A5:C5");
        assert_eq!(a1("My sheet", 0, 0, 0, 0), "'My sheet'!A1:A1");
        let b = book();
        let r = |s| parse_range(&b, s);
        assert_eq!(
            r("Sheet1").unwrap(),
            Range {
                sheet: 0,
                c0: None,
                r0: None,
                c1: None,
                r1: None
            }
        );
        assert_eq!(
            r("'My sheet'!B2:C").unwrap(),
            Range {
                sheet: 1,
                c0: Some(1),
                r0: Some(1),
                c1: Some(2),
                r1: None
            }
        );
        assert_eq!(
            r("A1:C5").unwrap(),
            Range {
                sheet: 0,
                c0: Some(0),
                r0: Some(0),
                c1: Some(2),
                r1: Some(4)
            }
        );
        assert_eq!(
            r("Sheet1!A:C").unwrap(),
            Range {
                sheet: 0,
                c0: Some(0),
                r0: None,
                c1: Some(2),
                r1: None
            }
        );
        assert!(r("Nope!A1").is_err());
        assert!(r("Sheet1!A0").is_err());
        assert!(r("'unterminated").is_err());
    }

    #[test]
    fn values_render() {
        assert_eq!(
            cell_value(&json!("42"), Input::UserEntered, (0, 0)).unwrap(),
            json!(42)
        );
        assert_eq!(
            cell_value(&json!("42"), Input::Raw, (0, 0)).unwrap(),
            json!("42")
        );
        assert!(cell_value(&json!({"a": 1}), Input::Raw, (0, 0)).is_err());
        assert_eq!(rendered(&json!(3.0), true), json!("3"));
        assert_eq!(rendered(&json!(true), true), json!("TRUE"));
        assert_eq!(rendered(&json!(2.5), false), json!(2.5));
    }
}
