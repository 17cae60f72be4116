//! Templates and expressions (SPEC §2), on minijinja in strict mode.
//!
//! * A config string that is exactly one `{{ expr }}` keeps the JSON type of the value
//!   (number, bool, object, `null`); any other string containing `{{`/`{%` renders to text.
//! * A **missing** path is an error (`template_error`) that names the path as written, e.g.
//!   `input.customer.name`: an empty string would silently merge every event into one dedupe
//!   key. `default(...)` opts in to a fallback.
//! * `null` inside text renders as the empty string; a whole-value `null` stays `null`.
//! * Rendered values are never evaluated again: a payload holding `{{ x }}` stays that text.
//! * Router conditions ([`Templates::eval_condition`]) are expressions without braces; one that
//!   reads a missing path is simply false.
//!
//! Every template of a workflow is compiled once when the workflow is compiled and rendered by
//! name afterwards, so a run pays no parsing cost.
//!
//! Runaway templates (SPEC §5):
//! * every render has a **fuel** budget of [`FUEL_PER_RENDER`] minijinja instructions; a
//!   template that runs out fails with "template ran out of fuel" (a nested `range` loop does;
//!   a loop over a 10,000-item payload uses about 150,000);
//! * a value a template **builds** is at most [`MAX_RENDERED_BYTES`] (1 MiB): text output is
//!   cut off as it is written, a whole-value result is measured as JSON. A value passed through
//!   unchanged by a plain path (`{{ steps.fetch.output.body }}`) is not capped again: it was
//!   bounded where it came in (the webhook body limit, `max_response_bytes`);
//! * templates that can loop or compute ([`Templates::is_costly`]) are rendered off the async
//!   threads, inside the run deadline (see the executor);
//! * every value a render **builds on the way** (an operand of `+`, `*`, `~`, a filter's
//!   result) is checked against the memory budget before it is built: at most
//!   [`MAX_VALUE_BYTES`] of text and [`MAX_ITEMS`] items per list (the `budget` module), so
//!   `{{ [1] * 100000000000 }}` or a loop doubling a string fails the render with a message
//!   naming the budget instead of exhausting the process's memory.
//!
//! Secrets (SPEC §5; the `secret` module): `env` gives a secret as an opaque token, so no
//! template computes on its value; filters, tests, comparisons and slices of one fail naming
//! it, and [`reveal`] puts the value in after a render only where a secret may go ([`Sink`]).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use minijinja::value::{Enumerator, Object, ObjectRepr};
use minijinja::{Environment, ErrorKind, UndefinedBehavior, Value as MjValue};
use serde_json::Value;

mod budget;
use budget::Metered;
pub use budget::{MAX_ITEMS, MAX_VALUE_BYTES};
mod secret;
pub use secret::{reveal, EnvView, Sink};
mod url;
pub use url::{uses_raw_path, AUTHOR_ROOTS};

/// The variable the whole-value wrapper template assigns.
const VALUE_VAR: &str = "__fluxo_value";

/// Fuel of one render, in minijinja instructions (most cost 1). About 0.25 s of a debug build
/// and 20 ms of a release build: no template that shapes data comes near it, a nested loop
/// over `range` does.
pub const FUEL_PER_RENDER: u64 = 1_000_000;

/// The largest value a template may build, in bytes (text output, or a whole value as JSON).
pub const MAX_RENDERED_BYTES: usize = 1024 * 1024;

/// A template that failed to render.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateError {
    /// The missing path as written (`input.customer.name`), when that was the cause.
    pub missing: Option<String>,
    /// Where in the step's config the template sits (`url`, `headers.Idempotency-Key`).
    pub field: String,
    /// Human-readable cause.
    pub message: String,
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.missing {
            Some(p) => write!(f, "missing value `{p}` in config.{}", self.field),
            None => write!(
                f,
                "template error in config.{}: {}",
                self.field, self.message
            ),
        }
    }
}

/// A template with a syntax error, found when the workflow is compiled or validated.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateSyntaxError {
    pub source: String,
    pub message: String,
}

impl fmt::Display for TemplateSyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "template syntax error in `{}`: {}",
            self.source, self.message
        )
    }
}

/// True if the string contains template syntax.
pub fn is_template(s: &str) -> bool {
    s.contains("{{") || s.contains("{%")
}

/// The expression of a string that is exactly one `{{ expr }}` (surrounding whitespace
/// allowed), else `None`.
pub fn whole_value_expr(s: &str) -> Option<&str> {
    let t = s.trim();
    let inner = t.strip_prefix("{{")?.strip_suffix("}}")?;
    let inner = inner.trim_start_matches('-').trim_end_matches('-');
    if inner.contains("{{") || inner.contains("}}") || inner.contains("{%") {
        return None;
    }
    Some(inner.trim())
}

/// The compiled templates of one workflow. Cloning is cheap (the compiled set is shared), so a
/// render can move to a blocking thread.
#[derive(Clone)]
pub struct Templates {
    env: Arc<Environment<'static>>,
}

impl fmt::Debug for Templates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Templates").finish_non_exhaustive()
    }
}

impl Default for Templates {
    fn default() -> Self {
        Self::new()
    }
}

fn text_name(source: &str) -> String {
    format!("t:{source}")
}
fn url_name(source: &str) -> String {
    format!("u:{source}")
}
fn value_name(expr: &str) -> String {
    format!("v:{expr}")
}
fn wrap_expr(expr: &str) -> String {
    format!("{{% set {VALUE_VAR} = ({expr}) %}}")
}

impl Templates {
    /// An empty set with Fluxo's rules: strict undefined, `null` prints as "", no HTML
    /// escaping, [`FUEL_PER_RENDER`] per render.
    pub fn new() -> Self {
        let mut env = Environment::new();
        env.set_fuel(Some(FUEL_PER_RENDER));
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_keep_trailing_newline(true);
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
        env.set_formatter(|out, state, value| {
            if value.is_none() {
                return Ok(());
            }
            minijinja::escape_formatter(out, state, value)
        });
        env.add_filter("unix_s", unix_s);
        budget::install(&mut env);
        url::install(&mut env);
        secret::install(&mut env);
        Templates { env: Arc::new(env) }
    }

    /// The environment, to add templates (copied first if a clone shares it).
    fn env_mut(&mut self) -> &mut Environment<'static> {
        Arc::make_mut(&mut self.env)
    }

    /// Compile a config string (no-op for plain text). Idempotent.
    pub fn add(&mut self, source: &str) -> Result<(), TemplateSyntaxError> {
        if !is_template(source) {
            return Ok(());
        }
        match whole_value_expr(source) {
            Some(expr) => self.add_expression(expr),
            None => self.add_text(text_name(source), source, |s| s.to_string()),
        }
    }

    /// Compile text template `source` as `name`, from `prepare(source)` metered.
    fn add_text(
        &mut self,
        name: String,
        source: &str,
        prepare: impl Fn(&str) -> String,
    ) -> Result<(), TemplateSyntaxError> {
        if self.env.get_template(&name).is_ok() {
            return Ok(());
        }
        let syntax_error = |message| TemplateSyntaxError {
            source: source.to_string(),
            message,
        };
        let metered = metered(&prepare(source), false).map_err(syntax_error)?;
        self.env_mut()
            .add_template_owned(name, metered)
            .map_err(|e| syntax_error(short_message(&e)))
    }

    /// Compile a bare expression (a router `when`, or the inside of a whole-value template).
    pub fn add_expression(&mut self, expr: &str) -> Result<(), TemplateSyntaxError> {
        let name = value_name(expr);
        if self.env.get_template(&name).is_ok() {
            return Ok(());
        }
        if expr.trim().is_empty() {
            return Err(TemplateSyntaxError {
                source: expr.to_string(),
                message: "empty expression".into(),
            });
        }
        if expr.contains("}}") {
            return Err(TemplateSyntaxError {
                source: expr.to_string(),
                message: budget::CLOSING_BRACES.into(),
            });
        }
        // Parse as an expression first for a precise message, then register the wrapper.
        self.env
            .compile_expression(expr)
            .map_err(|e| TemplateSyntaxError {
                source: expr.to_string(),
                message: short_message(&e),
            })?;
        let metered = metered(expr, true).map_err(|message| TemplateSyntaxError {
            source: expr.to_string(),
            message,
        })?;
        self.env_mut()
            .add_template_owned(name, wrap_expr(&metered))
            .map_err(|e| TemplateSyntaxError {
                source: expr.to_string(),
                message: short_message(&e),
            })
    }

    /// Compile every template string inside a JSON value (recursively).
    pub fn add_all(&mut self, v: &Value) -> Result<(), TemplateSyntaxError> {
        match v {
            Value::String(s) => self.add(s),
            Value::Array(a) => a.iter().try_for_each(|x| self.add_all(x)),
            Value::Object(m) => m.values().try_for_each(|x| self.add_all(x)),
            _ => Ok(()),
        }
    }

    /// Compile an outbound URL template (a step's `url`): like [`Templates::add`], with each
    /// value from run data after the authority encoded as one path segment or query component
    /// (the `url` module). Idempotent.
    pub fn add_url(&mut self, source: &str) -> Result<(), TemplateSyntaxError> {
        if !is_template(source) || whole_value_expr(source).is_some() {
            return self.add(source);
        }
        self.add_text(url_name(source), source, url::encode_data)
    }

    /// Render one config string. `field` names where it sits, for errors.
    pub fn render_str(&self, s: &str, ctx: &MjValue, field: &str) -> Result<Value, TemplateError> {
        if !is_template(s) {
            return Ok(Value::String(s.to_string()));
        }
        match whole_value_expr(s) {
            Some(expr) => self.eval_value(expr, ctx, field),
            None => self.render_text(&text_name(s), s, |s| s.to_string(), ctx, field),
        }
    }

    /// Render an outbound URL template ([`Templates::add_url`]): run data in its path and
    /// query percent-encoded. A URL that is one whole value renders as [`Templates::render_str`].
    pub fn render_url(&self, s: &str, ctx: &MjValue, field: &str) -> Result<Value, TemplateError> {
        if !is_template(s) || whole_value_expr(s).is_some() {
            return self.render_str(s, ctx, field);
        }
        self.render_text(&url_name(s), s, url::encode_data, ctx, field)
    }

    /// Render text template `name`, compiling `prepare(s)` on the spot when it was not added.
    fn render_text(
        &self,
        name: &str,
        s: &str,
        prepare: impl Fn(&str) -> String,
        ctx: &MjValue,
        field: &str,
    ) -> Result<Value, TemplateError> {
        let mut out = CappedWriter::default();
        let (rendered, source) = match self.env.get_template(name) {
            Ok(t) => (t.render_captured_to(ctx, &mut out).map(drop), None),
            Err(_) => {
                let uncompiled = metered(&prepare(s), false).map_err(|message| TemplateError {
                    missing: None,
                    field: field.to_string(),
                    message,
                })?;
                let r = self
                    .env
                    .template_from_str(&uncompiled)
                    .and_then(|t| t.render_captured_to(ctx, &mut out).map(drop));
                (r, Some(uncompiled))
            }
        };
        match rendered {
            Ok(()) => Ok(Value::String(String::from_utf8(out.buf).unwrap_or_else(
                |e| String::from_utf8_lossy(e.as_bytes()).into_owned(),
            ))),
            Err(_) if out.over => Err(too_large(field)),
            Err(e) => {
                // Error spans point into the compiled (metered) source.
                let compiled = self.env.get_template(name);
                let source = match (&source, &compiled) {
                    (Some(u), _) => u.as_str(),
                    (None, Ok(t)) => t.source(),
                    (None, Err(_)) => s,
                };
                Err(render_error(&e, source, field))
            }
        }
    }

    /// Whether rendering `v` (a config value, templates at any depth) may loop or compute:
    /// any template but plain paths (`{{ input.a.b }}`, `deal-{{ input.id }}`). Such values
    /// are rendered off the async threads; plain paths cost a lookup.
    pub fn is_costly(&self, v: &Value) -> bool {
        match v {
            Value::String(s) => is_costly_template(s),
            Value::Array(a) => a.iter().any(|x| self.is_costly(x)),
            Value::Object(m) => m.values().any(|x| self.is_costly(x)),
            _ => false,
        }
    }

    /// Evaluate an expression to a JSON value (`null` stays `null`).
    pub fn eval_value(
        &self,
        expr: &str,
        ctx: &MjValue,
        field: &str,
    ) -> Result<Value, TemplateError> {
        let v = self
            .eval_raw(expr, ctx)
            .map_err(|(e, src)| render_error(&e, &src, field))?;
        if v.is_undefined() {
            // Strict mode only errors on the use of an undefined value, and assigning it is
            // not a use: `input.customer.name` with `customer: {}` lands here. Name the path.
            return Err(TemplateError {
                missing: Some(expr.trim().to_string()),
                field: field.to_string(),
                message: "missing value".into(),
            });
        }
        // A plain path passes data through unchanged: bounded where it came in. A built value
        // is measured before it is converted (a list of a million references to one string
        // is small in memory and huge as JSON).
        if !is_plain_path(expr) {
            let size = match v.as_str() {
                Some(s) => s.len(),
                None => budget::json_len(&v, None, MAX_RENDERED_BYTES),
            };
            if size > MAX_RENDERED_BYTES {
                return Err(too_large(field));
            }
        }
        mj_to_json(&v).map_err(|message| TemplateError {
            missing: None,
            field: field.to_string(),
            message,
        })
    }

    /// Evaluate a router condition: truthiness of the expression; a missing path is `false`.
    pub fn eval_condition(
        &self,
        expr: &str,
        ctx: &MjValue,
        field: &str,
    ) -> Result<bool, TemplateError> {
        match self.eval_raw(expr, ctx) {
            Ok(v) => Ok(v.is_true()),
            Err((e, _)) if e.kind() == ErrorKind::UndefinedError => Ok(false),
            Err((e, src)) => Err(render_error(&e, &src, field)),
        }
    }

    fn eval_raw(&self, expr: &str, ctx: &MjValue) -> Result<MjValue, (minijinja::Error, String)> {
        let wrapped;
        let tmpl = match self.env.get_template(&value_name(expr)) {
            Ok(t) => t,
            Err(_) => {
                let metered = metered(expr, true).map_err(|m| {
                    (
                        minijinja::Error::new(ErrorKind::SyntaxError, m),
                        String::new(),
                    )
                })?;
                wrapped = wrap_expr(&metered);
                self.env
                    .template_from_str(&wrapped)
                    .map_err(|e| (e, wrapped.clone()))?
            }
        };
        let captured = tmpl
            .render_captured(ctx)
            .map_err(|e| (e, tmpl.source().to_string()))?;
        Ok(captured
            .state()
            .lookup(VALUE_VAR)
            .unwrap_or(MjValue::UNDEFINED))
    }

    /// Render every string of a JSON value; `path` is the field path of `v` inside the config.
    pub fn render_value(
        &self,
        v: &Value,
        ctx: &MjValue,
        path: &str,
    ) -> Result<Value, TemplateError> {
        self.render_value_until(v, ctx, path, None)
    }

    /// [`Templates::render_value`] that stops before the next template once `cancel` is set
    /// (the caller stopped waiting: the run deadline passed).
    pub fn render_value_until(
        &self,
        v: &Value,
        ctx: &MjValue,
        path: &str,
        cancel: Option<&AtomicBool>,
    ) -> Result<Value, TemplateError> {
        Ok(match v {
            Value::String(s) => {
                if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                    return Err(TemplateError {
                        missing: None,
                        field: path.to_string(),
                        message: "rendering was stopped".into(),
                    });
                }
                self.render_str(s, ctx, path)?
            }
            Value::Array(a) => Value::Array(
                a.iter()
                    .enumerate()
                    .map(|(i, x)| self.render_value_until(x, ctx, &format!("{path}[{i}]"), cancel))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(m) => {
                let mut out = serde_json::Map::with_capacity(m.len());
                for (k, x) in m {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    out.insert(k.clone(), self.render_value_until(x, ctx, &p, cancel)?);
                }
                Value::Object(out)
            }
            other => other.clone(),
        })
    }
}

/// The source to compile for `source` (a template, or with `expr` an expression): its
/// operators metered ([`budget`]). A source that does not parse is returned as it is, so
/// minijinja's own compiler reports the syntax error.
fn metered(source: &str, expr: bool) -> Result<String, String> {
    Ok(match budget::meter(source, expr)? {
        Metered::Source(s) => s,
        Metered::Unparsed => source.to_string(),
    })
}

/// Convert a minijinja value to JSON; undefined → error.
fn mj_to_json(v: &MjValue) -> Result<Value, String> {
    if v.is_undefined() {
        return Err("expression is undefined".into());
    }
    serde_json::to_value(v).map_err(|e| format!("value cannot be represented as JSON: {e}"))
}

/// An `io::Write` that keeps at most [`MAX_RENDERED_BYTES`] and fails past them (`over`).
#[derive(Default)]
struct CappedWriter {
    buf: Vec<u8>,
    len: usize,
    over: bool,
}

impl std::io::Write for CappedWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        if self.len + b.len() > MAX_RENDERED_BYTES {
            self.over = true;
            return Err(std::io::Error::other("rendered value too large"));
        }
        self.len += b.len();
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `unix_s` filter: an RFC 3339 instant (or a number, kept) as whole unix seconds, so a
/// template can do arithmetic on times: `{{ (cursor | unix_s) - 600 }}` (10 minutes earlier).
fn unix_s(v: MjValue) -> Result<i64, minijinja::Error> {
    if let Some(s) = v.as_str() {
        return crate::clock::parse_rfc3339(s)
            .map(|ms| ms.div_euclid(1000))
            .ok_or_else(|| {
                minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    format!("unix_s: `{s}` is not an RFC 3339 instant"),
                )
            });
    }
    i64::try_from(v.clone()).map_err(|_| {
        minijinja::Error::new(
            minijinja::ErrorKind::InvalidOperation,
            format!(
                "unix_s: expected an RFC 3339 string or a number, got {}",
                v.kind()
            ),
        )
    })
}

fn too_large(field: &str) -> TemplateError {
    TemplateError {
        missing: None,
        field: field.to_string(),
        message: format!(
            "the template built a value larger than {MAX_RENDERED_BYTES} bytes (1 MiB), the \
             limit for one value; pass large data through unchanged with a plain path such as \
             {{{{ steps.fetch.output.body }}}}"
        ),
    }
}

/// `input.a.b`, `steps.x.output["k"]`, `input.items[0]`: a lookup and nothing else.
pub fn is_plain_path(expr: &str) -> bool {
    let b = expr.trim().as_bytes();
    let ident = |i: &mut usize| {
        let start = *i;
        if *i < b.len() && (b[*i].is_ascii_alphabetic() || b[*i] == b'_') {
            *i += 1;
            while *i < b.len() && (b[*i].is_ascii_alphanumeric() || b[*i] == b'_') {
                *i += 1;
            }
        }
        *i > start
    };
    let mut i = 0;
    if !ident(&mut i) {
        return false;
    }
    while i < b.len() {
        match b[i] {
            b'.' => {
                i += 1;
                if !ident(&mut i) {
                    return false;
                }
            }
            b'[' => {
                i += 1;
                match b.get(i) {
                    Some(q @ (b'"' | b'\'')) => {
                        let q = *q;
                        i += 1;
                        while i < b.len() && b[i] != q && b[i] != b'\\' {
                            i += 1;
                        }
                        if b.get(i) != Some(&q) {
                            return false;
                        }
                        i += 1;
                    }
                    Some(d) if d.is_ascii_digit() => {
                        while i < b.len() && b[i].is_ascii_digit() {
                            i += 1;
                        }
                    }
                    _ => return false,
                }
                if b.get(i) != Some(&b']') {
                    return false;
                }
                i += 1;
            }
            _ => return false,
        }
    }
    true
}

/// Whether a config string may loop or compute when rendered: any `{% %}` tag, or a
/// `{{ }}` block that is not a plain path.
fn is_costly_template(s: &str) -> bool {
    if !is_template(s) {
        return false;
    }
    if s.contains("{%") {
        return true;
    }
    let mut rest = s;
    while let Some(open) = rest.find("{{") {
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            return true;
        };
        let inner = after[..close].trim_start_matches('-').trim_end_matches('-');
        if !is_plain_path(inner) {
            return true;
        }
        rest = &after[close + 2..];
    }
    false
}

/// The first line of a minijinja error, without the debug dump.
fn short_message(e: &minijinja::Error) -> String {
    if e.kind() == ErrorKind::OutOfFuel {
        return format!(
            "template ran out of fuel: it took more than {FUEL_PER_RENDER} steps (a loop too \
             large, or one that never ends)"
        );
    }
    if let Some(d) = e.detail().filter(|d| d.starts_with(secret::MESSAGE_PREFIX)) {
        return d.to_string();
    }
    let mut msg = e.kind().to_string();
    if let Some(d) = e.detail() {
        msg.push_str(": ");
        msg.push_str(d);
    }
    if let Some(line) = e.line() {
        msg.push_str(&format!(" (line {line})"));
    }
    msg
}

fn render_error(e: &minijinja::Error, source: &str, field: &str) -> TemplateError {
    if e.kind() == ErrorKind::UndefinedError {
        // A metered operator names its undefined operand itself.
        if let Some(path) = e
            .detail()
            .and_then(|d| d.strip_prefix(budget::MISSING_PREFIX))
        {
            return TemplateError {
                missing: Some(path.to_string()),
                field: field.to_string(),
                message: "missing value".into(),
            };
        }
        let path = e.range().and_then(|r| path_around(source, r));
        if let Some(path) = path.filter(|p| !p.contains("__fluxo_")) {
            return TemplateError {
                missing: Some(path),
                field: field.to_string(),
                message: "missing value".into(),
            };
        }
    }
    TemplateError {
        missing: None,
        field: field.to_string(),
        message: short_message(e),
    }
}

/// minijinja reports the span of the failing attribute access (`.customer.name`); widen it to
/// the whole path as written (`input.customer.name`, `input.items[3].sku`, `input["a b"]`).
fn path_around(source: &str, range: std::ops::Range<usize>) -> Option<String> {
    let bytes = source.as_bytes();
    if range.start > source.len() || range.end > source.len() {
        return None;
    }
    let is_path_byte = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b >= 0x80;
    // Walk left over identifiers, dots and bracket groups.
    let mut start = range.start;
    while start > 0 {
        let b = bytes[start - 1];
        if is_path_byte(b) {
            start -= 1;
        } else if b == b']' {
            match source[..start - 1].rfind('[') {
                Some(open) => start = open,
                None => break,
            }
        } else {
            break;
        }
    }
    // Walk right the same way.
    let mut end = range.end.max(start);
    while end < bytes.len() {
        let b = bytes[end];
        if is_path_byte(b) {
            end += 1;
        } else if b == b'[' {
            match source[end..].find(']') {
                Some(close) => end += close + 1,
                None => break,
            }
        } else {
            break;
        }
    }
    let path = source.get(start..end)?.trim_matches('.');
    (!path.is_empty()).then(|| path.to_string())
}

/// The names templates see (SPEC §2): `input`, `steps.<id>.output`, `run`, `error`, `env`.
///
/// Kept as minijinja values (reference-counted), so building the context of each step is a
/// handful of pointer copies. The step outputs live in one store shared by every context of
/// the run (`StepOutputs`); a context is a snapshot of it (a sequence number), so creating
/// one costs O(1) however many steps ran, and a walk of N steps is linear (it used to clone
/// every output for every step: O(N²), 20–27 s for a 10,000-step chain).
#[derive(Debug)]
pub struct Scope {
    input: MjValue,
    steps: Arc<StepOutputs>,
    run: MjValue,
    error: Option<MjValue>,
    env: MjValue,
}

impl Clone for Scope {
    /// A deep copy: outputs set on the clone are not seen by the original, nor the reverse.
    fn clone(&self) -> Self {
        let inner = self.steps.read().clone();
        Scope {
            input: self.input.clone(),
            steps: Arc::new(StepOutputs {
                inner: RwLock::new(inner),
            }),
            run: self.run.clone(),
            error: self.error.clone(),
            env: self.env.clone(),
        }
    }
}

impl Scope {
    /// A scope with the trigger payload, the run's metadata and the env variables (secrets as
    /// handles: the `secret` module).
    pub fn new(input: &Value, run: &Value, env: EnvView) -> Self {
        Scope {
            input: MjValue::from_serialize(input),
            steps: Arc::new(StepOutputs::default()),
            run: MjValue::from_serialize(run),
            error: None,
            env: MjValue::from_object(env),
        }
    }

    /// Record a finished step's output as `steps.<id>.output` (replacing an earlier one for
    /// contexts made from now on; contexts made before keep what they saw).
    pub fn set_output(&mut self, step_id: &str, output: &Value) {
        self.steps.set(step_id, MjValue::from_serialize(output));
    }

    /// Record the trigger's output, which is the input: shares the already converted value.
    pub fn set_output_to_input(&mut self, step_id: &str) {
        self.steps.set(step_id, self.input.clone());
    }

    /// Set `error` (in and after an error handler).
    pub fn set_error(&mut self, error: &Value) {
        self.error = Some(MjValue::from_serialize(error));
    }

    /// Clear `error` (outside error branches).
    pub fn clear_error(&mut self) {
        self.error = None;
    }

    /// The context object to render with: `input`, `steps`, `run`, `env` and, in error
    /// branches, `error`. O(1): `steps` is a snapshot view of the shared outputs.
    pub fn context(&self) -> MjValue {
        let steps = StepsView {
            outputs: self.steps.clone(),
            upto: self.steps.read().seq,
        };
        let mut m: BTreeMap<&str, MjValue> = BTreeMap::new();
        m.insert("input", self.input.clone());
        m.insert("steps", MjValue::from_object(steps));
        m.insert("run", self.run.clone());
        m.insert("env", self.env.clone());
        if let Some(e) = &self.error {
            m.insert("error", e.clone());
        }
        MjValue::from(m)
    }
}

/// The outputs of the steps of one run, append-only: each `set` is a new version with the
/// next sequence number, so a [`StepsView`] taken at sequence `n` sees exactly the versions
/// set before it.
#[derive(Debug, Default)]
struct StepOutputs {
    inner: RwLock<OutputsInner>,
}

#[derive(Debug, Default, Clone)]
struct OutputsInner {
    /// Step id → its versions `(seq, steps.<id> value)`, in increasing `seq`.
    by_id: HashMap<String, Vec<(u64, MjValue)>>,
    /// The next sequence number.
    seq: u64,
}

impl StepOutputs {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, OutputsInner> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    fn set(&self, step_id: &str, output: MjValue) {
        let mut entry = BTreeMap::new();
        entry.insert("output", output);
        let value = MjValue::from(entry);
        let mut inner = self.inner.write().unwrap_or_else(|e| e.into_inner());
        let seq = inner.seq;
        inner.seq += 1;
        match inner.by_id.get_mut(step_id) {
            Some(versions) => versions.push((seq, value)),
            None => {
                inner.by_id.insert(step_id.to_string(), vec![(seq, value)]);
            }
        }
    }
}

/// `steps` as one context sees it: the outputs set before the context was made. A map (ids
/// in sorted order when enumerated, as `{{ steps | tojson }}` or a default publish body do).
#[derive(Debug)]
struct StepsView {
    outputs: Arc<StepOutputs>,
    upto: u64,
}

impl StepsView {
    fn lookup(inner: &OutputsInner, id: &str, upto: u64) -> Option<MjValue> {
        inner
            .by_id
            .get(id)?
            .iter()
            .rev()
            .find(|(seq, _)| *seq < upto)
            .map(|(_, v)| v.clone())
    }
}

impl Object for StepsView {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &MjValue) -> Option<MjValue> {
        Self::lookup(&self.outputs.read(), key.as_str()?, self.upto)
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let inner = self.outputs.read();
        let mut ids: Vec<&String> = inner
            .by_id
            .iter()
            .filter(|(_, versions)| versions.first().is_some_and(|(seq, _)| *seq < self.upto))
            .map(|(id, _)| id)
            .collect();
        ids.sort();
        Enumerator::Values(
            ids.into_iter()
                .map(|id| MjValue::from(id.as_str()))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn render(src: &str, input: Value) -> Result<Value, TemplateError> {
        let mut t = Templates::new();
        t.add(src).unwrap();
        let scope = Scope::new(&input, &json!({}), EnvView::plain(&BTreeMap::new()));
        t.render_str(src, &scope.context(), "f")
    }

    #[test]
    fn path_widening() {
        assert_eq!(
            path_around("{{ input.customer.name }}", 8..17).as_deref(),
            Some("input.customer.name")
        );
        assert_eq!(
            path_around("{{ input.items[3].sku }}", 14..21).as_deref(),
            Some("input.items[3].sku")
        );
    }

    #[test]
    fn unix_s_turns_instants_into_seconds() {
        let at = json!({"t": "2026-01-01T00:10:00Z", "n": 1767226200});
        assert_eq!(
            render("{{ (input.t | unix_s) - 600 }}", at.clone()).unwrap(),
            json!(1_767_225_600)
        );
        assert_eq!(
            render("{{ input.n | unix_s }}", at.clone()).unwrap(),
            json!(1_767_226_200)
        );
        let e = render("{{ input.n | string | unix_s }}x", at).unwrap_err();
        assert!(e.to_string().contains("not an RFC 3339 instant"), "{e}");
    }

    #[test]
    fn whole_value_keeps_type() {
        assert_eq!(render("{{ input.n }}", json!({"n": 5})).unwrap(), json!(5));
        assert_eq!(
            render(" {{ input.o }} ", json!({"o": {"a": [1]}})).unwrap(),
            json!({"a": [1]})
        );
        assert_eq!(
            render("{{ input.z }}", json!({"z": null})).unwrap(),
            Value::Null
        );
        assert_eq!(
            render("n={{ input.n }}", json!({"n": 5})).unwrap(),
            json!("n=5")
        );
    }

    #[test]
    fn a_context_is_a_snapshot_of_the_outputs_set_before_it() {
        let mut t = Templates::new();
        t.add("{{ steps.a.output }}").unwrap();
        t.add("{{ steps | list }}").unwrap();
        let mut scope = Scope::new(&json!({}), &json!({}), EnvView::plain(&BTreeMap::new()));
        let before = scope.context();
        scope.set_output("b", &json!(2));
        scope.set_output("a", &json!(1));
        let first = scope.context();
        scope.set_output("a", &json!("again"));
        let second = scope.context();
        let get = |ctx: &MjValue| t.render_str("{{ steps.a.output }}", ctx, "f");
        assert!(get(&before).is_err(), "a context never sees later outputs");
        assert_eq!(get(&first).unwrap(), json!(1));
        assert_eq!(get(&second).unwrap(), json!("again"));
        // Enumerated in id order, as the BTreeMap it replaces did.
        assert_eq!(
            t.render_str("{{ steps | list }}", &second, "f").unwrap(),
            json!(["a", "b"])
        );
        assert_eq!(
            t.render_str("{{ steps | list }}", &before, "f").unwrap(),
            json!([])
        );
        // A clone is independent.
        let mut copy = scope.clone();
        copy.set_output("c", &json!(3));
        assert!(t
            .render_str("{{ steps.c.output }}", &scope.context(), "f")
            .is_err());
    }

    #[test]
    fn a_runaway_loop_runs_out_of_fuel_and_a_normal_one_does_not() {
        let nested = "{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}{% endfor %}";
        let e = render(nested, json!({})).unwrap_err();
        assert!(e.to_string().contains("template ran out of fuel"), "{e}");
        // One full range and a loop over a 10,000-item payload stay well inside the budget.
        assert!(render("{% for i in range(100000) %}{% endfor %}ok", json!({})).is_ok());
        let items: Vec<Value> = (0..10_000)
            .map(|i| json!({"sku": format!("s{i}")}))
            .collect();
        let out = render(
            "{% for x in input.items %}{{ x.sku }},{% endfor %}",
            json!({"items": items}),
        )
        .unwrap();
        assert!(out.as_str().unwrap().ends_with("s9999,"));
    }

    #[test]
    fn built_values_are_capped_and_plain_paths_are_not() {
        // Doubling a string: 2^21 bytes > 1 MiB of text.
        let doubling = "{% set ns = namespace(s='x') %}{% for i in range(21) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}";
        let e = render(doubling, json!({})).unwrap_err();
        assert!(e.to_string().contains("1048576 bytes"), "{e}");
        assert_eq!(e.field, "f");
        // Just under the cap is fine.
        let ok = "{% set ns = namespace(s='x') %}{% for i in range(19) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}";
        assert_eq!(
            render(ok, json!({})).unwrap().as_str().unwrap().len(),
            1 << 19
        );
        // Whole values built by an expression: a string, an array.
        let e = render("{{ 'x' * 2000000 }}", json!({})).unwrap_err();
        assert!(e.to_string().contains("larger than"), "{e}");
        assert!(
            render("{{ range(100000) | list }}{{ '' }}", json!({})).is_ok(),
            "the text of a 100,000-item list is under 1 MiB"
        );
        let e = render(
            "{{ [input.s, input.s] }}",
            json!({"s": "y".repeat(600_000)}),
        )
        .unwrap_err();
        assert!(e.to_string().contains("larger than"), "{e}");
        // A plain path passes data through unchanged, however large.
        let big = "z".repeat(3 << 20);
        assert_eq!(
            render("{{ input.s }}", json!({"s": big.clone()})).unwrap(),
            json!(big)
        );
        assert_eq!(
            render("{{ input['s'] }}", json!({"s": big.clone()})).unwrap(),
            json!(big)
        );
    }

    #[test]
    fn plain_paths_and_costly_templates() {
        for p in [
            "input",
            "input.a.b",
            "steps.x.output[\"k y\"]",
            "input.items[0].sku",
            " input._a ",
        ] {
            assert!(is_plain_path(p), "{p}");
        }
        for p in [
            "input.a + 1",
            "input.a | default(1)",
            "input[x]",
            "f()",
            "input.",
            "1",
            "input['a]",
        ] {
            assert!(!is_plain_path(p), "{p}");
        }
        let t = Templates::new();
        assert!(!t.is_costly(
            &json!({"a": "plain", "b": "deal-{{ input.id }}", "c": ["{{ steps.s.output }}"]})
        ));
        assert!(t.is_costly(&json!({"a": ["{{ input.n + 1 }}"]})));
        assert!(t.is_costly(&json!("{% if input.a %}x{% endif %}")));
        assert!(t.is_costly(&json!("{{ input.a }}{{ input.b | upper }}")));
    }
    #[test]
    fn amplifying_expressions_fail_on_the_memory_budget_not_the_process() {
        let budget = |src: &str, input: Value| {
            let e = render(src, input).expect_err(src);
            assert!(
                e.message.contains("memory budget") || e.message.contains("1048576 bytes"),
                "{src}: {e}"
            );
        };
        budget("{{ [1] * 100000000000 }}", json!({}));
        budget("x{{ [1] * 1000000000 }}", json!({}));
        budget("{{ [1] * input.n }}", json!({"n": 100_000_000_000u64}));
        budget("{{ 'ab' * 100000000 }}", json!({}));
        budget("{{ input.n * 'ab' }}", json!({"n": 100_000_000}));
        budget(
            "{% set ns = namespace(s='x') %}{% for i in range(31) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
            json!({}),
        );
        budget(
            "{% set ns = namespace(s='x') %}{% for i in range(31) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s | length }}",
            json!({}),
        );
        budget(
            "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l | length }}",
            json!({}),
        );
        budget("{{ 'a' | indent(100000000000) }}", json!({}));
        budget("{{ 'a\nb' | indent(width=100000000) }}", json!({}));
        budget("{{ ('x' * 1000) | replace('x', 'y' * 10000) }}", json!({}));
        budget(
            "{{ ([input.s] * 1000) | join(',') }}",
            json!({"s": "z".repeat(10_000)}),
        );
        budget(
            "{{ ([input.s] * 1000) | tojson }}",
            json!({"s": "z".repeat(10_000)}),
        );
        budget(
            "{{ ([input.s] * 1000) | string | length }}",
            json!({"s": "z".repeat(10_000)}),
        );
        budget("{{ [input.s] * 1000 }}", json!({"s": "z".repeat(10_000)}));
        budget("{{ '%999999999999s' | format('a') }}", json!({}));
        budget("{{ [1] | batch(100000000000, 'x') | list }}", json!({}));
        budget("{{ range(10) | slice(100000000000) | list }}", json!({}));
        budget("{{ ('x' * 1048576) ~ 'y' }}", json!({}));
        budget("{{ input.s | escape }}", json!({"s": "&".repeat(300_000)}));
        // Ordinary use of the same operators and filters is unchanged.
        let same = |src: &str, input: Value, want: Value| {
            assert_eq!(render(src, input).unwrap(), want, "{src}");
        };
        same("{{ input.a + 1 }}", json!({"a": 41}), json!(42));
        same("{{ input.a * 2.5 }}", json!({"a": 2}), json!(5.0));
        same("{{ 'ab' * 3 }}", json!({}), json!("ababab"));
        same("{{ [1, 2] * 2 }}", json!({}), json!([1, 2, 1, 2]));
        same("{{ [1] + [2] }}", json!({}), json!([1, 2]));
        same(
            "{{ input.a ~ '-' ~ input.b }}",
            json!({"a": "x", "b": 7}),
            json!("x-7"),
        );
        same("n={{ (input.a + 1) * 2 }}", json!({"a": 1}), json!("n=4"));
        same(
            "{{ 'a\nb' | indent(2, true) }}",
            json!({}),
            json!("  a\n  b"),
        );
        same(
            "{{ input.l | join(', ') }}",
            json!({"l": [1, "b"]}),
            json!("1, b"),
        );
        same(
            "{{ input | tojson(indent=2) | length > 5 }}",
            json!({"a": 1}),
            json!(true),
        );
        same(
            "{{ '%05.1f' | format(3.14159) }}",
            json!({}),
            json!("003.1"),
        );
        same("{{ 'a-b' | replace('-', '+') }}", json!({}), json!("a+b"));
        same(
            "{{ range(5) | batch(2) | list }}",
            json!({}),
            json!([[0, 1], [2, 3], [4]]),
        );
        // A missing operand is named, as before.
        let e = render("{{ 'x' ~ input.missing }}", json!({})).unwrap_err();
        assert_eq!(e.missing.as_deref(), Some("input.missing"), "{e}");
        let e = render("{{ input.a + input.b.c }}", json!({"a": 1})).unwrap_err();
        assert_eq!(e.missing.as_deref(), Some("input.b.c"), "{e}");
    }

    #[test]
    fn captures_are_refused_at_compile_time() {
        let mut t = Templates::new();
        let e = t
            .add("{% macro twice(s) %}{{ s }}{{ s }}{% endmacro %}{{ twice(input.a) }}")
            .unwrap_err();
        assert!(
            e.message.contains("`{% macro %}` is not supported"),
            "{}",
            e.message
        );
        assert!(t.add("{{ input.a ~ input.b }}").is_ok());
    }
}
