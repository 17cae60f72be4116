//! The memory budget of one render (SPEC §5 "Templates"; issue 42).
//!
//! Fuel bounds how many instructions a render runs, not how large the values it builds grow:
//! `{{ [1] * 100000000000 }}` is one instruction (a lazy list that serialising turns into a
//! 7 TB allocation), and a loop doubling a string reaches 2 GiB in 31 turns. minijinja has no
//! hook on its operators, so Fluxo meters what can grow, and checks each result's size
//! **before** building it:
//!
//! * **Operators.** `+`, `*` and `~` are rewritten when a template is compiled into calls of
//!   guarded functions (`a ~ b` → `__fluxo_cat(a, b, "a", "b")`): each checks the size of the
//!   result, then computes it as minijinja's operator does: directly for text and integers
//!   (about 0.8 µs less per operation than a call into minijinja), with minijinja's own
//!   operator for everything else, so the values are the same. The
//!   rewrite works on minijinja's parse tree (the spans of each operation and its operands);
//!   a second pass over the rewritten text's tokens proves that no such operator is left
//!   (fail closed: a template with one left is refused at compile time).
//! * **Filters** that build strings or lists are wrapped: those whose output size an argument
//!   chooses (`indent`, `replace`, `join`, `tojson`, `format`, `batch`, `slice`) check it
//!   before building; every building filter checks its input's item count and its result.
//! * **Captures** build text outside the capped output (`{% macro %}`, `{% call %}`,
//!   `{% filter %}`, `{% set x %}…{% endset %}`): a Fluxo template is one config string, and
//!   these are refused at compile time, as are `{% include %}`, `{% import %}`, `{% extends %}`
//!   and `*args`/`**kwargs` splats.
//!
//! The budget of every value a render builds: a string (or a value's text) at most
//! [`MAX_VALUE_BYTES`], a list at most [`MAX_ITEMS`] items. Past it the render fails with a
//! message naming the budget. Values passed through unchanged (the input, step outputs) were
//! bounded where they came in and are not counted.

use std::fmt::Write as _;
use std::sync::LazyLock;

use minijinja::machinery::{self, ast, Token, WhitespaceConfig};
use minijinja::value::{Rest, ValueKind};
use minijinja::{Environment, Error, ErrorKind, Expression, State, UndefinedBehavior, Value};

use super::secret;

/// The largest string (or text of a value) one render may build, in bytes: 1 MiB.
pub const MAX_VALUE_BYTES: usize = super::MAX_RENDERED_BYTES;

/// The longest list one render may build, in items: 1,048,576.
pub const MAX_ITEMS: usize = 1 << 20;

/// The prefix of a metered operator's error for an undefined operand whose path is known.
pub(super) const MISSING_PREFIX: &str = "missing value: ";

/// Why an expression holding `}}` is refused (minijinja's expression lexer would panic on it).
pub(super) const CLOSING_BRACES: &str = "an expression cannot contain `}}`";

/// What [`meter`] made of a template source.
pub(super) enum Metered {
    /// The source to compile (unchanged when it has no operator to meter).
    Source(String),
    /// The source does not parse: compile the original to get minijinja's own message.
    Unparsed,
}

/// Rewrite the operators of `source` (a whole template, or with `expr` a bare expression)
/// into guarded calls. Errors: a construct Fluxo refuses (a capture, an include, a splat), as
/// a message for the template's syntax error.
pub(super) fn meter(source: &str, expr: bool) -> Result<Metered, String> {
    let mut w = Walker {
        src: source,
        edits: Vec::new(),
        refused: None,
    };
    if expr {
        // minijinja's expression lexer panics on a `}}` (its state stack runs empty).
        if source.contains("}}") {
            return Err(CLOSING_BRACES.into());
        }
        match machinery::parse_expr(source) {
            Ok(e) => w.expr(&e),
            Err(_) => return Ok(Metered::Unparsed),
        }
    } else {
        match machinery::parse(source, "<template>", Default::default(), ws()) {
            Ok(s) => w.stmt(&s),
            Err(_) => return Ok(Metered::Unparsed),
        }
    }
    if let Some(why) = w.refused {
        return Err(why);
    }
    let out = apply(source, w.edits);
    // The proof: no metered operator is left in the text that will be compiled. An expression
    // is tokenized inside `{{ }}`: the tokenizer's expression mode is not the compiler's.
    let text = if expr {
        format!("{{{{ {out} }}}}")
    } else {
        out.clone()
    };
    for token in machinery::tokenize(&text, false, Default::default(), ws()) {
        match token {
            Ok((Token::Plus | Token::Mul | Token::Tilde, span)) => {
                return Err(format!(
                    "Fluxo cannot meter the operator at line {}, column {}; rewrite it with a \
                     filter",
                    span.start_line, span.start_col
                ))
            }
            Ok(_) => {}
            Err(_) => return Ok(Metered::Unparsed),
        }
    }
    Ok(Metered::Source(out))
}

fn ws() -> WhitespaceConfig {
    WhitespaceConfig {
        keep_trailing_newline: true,
        ..Default::default()
    }
}

/// One text edit: `text` replaces `len` bytes at `at`.
struct Edit {
    at: usize,
    /// Order among edits at one offset: closings (inner first), then the operator, then
    /// openings (outer first).
    order: (u8, i64),
    len: usize,
    text: String,
}

fn apply(source: &str, mut edits: Vec<Edit>) -> String {
    edits.sort_by_key(|e| (e.at, e.order));
    let mut out = String::with_capacity(source.len() + edits.len() * 16);
    let mut pos = 0;
    for e in edits {
        out.push_str(&source[pos..e.at]);
        out.push_str(&e.text);
        pos = e.at + e.len;
    }
    out.push_str(&source[pos..]);
    out
}

struct Walker<'s> {
    src: &'s str,
    edits: Vec<Edit>,
    refused: Option<String>,
}

impl Walker<'_> {
    fn refuse(&mut self, what: &str) {
        self.refused.get_or_insert_with(|| {
            format!(
                "{what} is not supported in Fluxo templates (a template is one config string; \
                 its text and values stay within the render's memory budget)"
            )
        });
    }

    fn stmts(&mut self, v: &[ast::Stmt<'_>]) {
        v.iter().for_each(|s| self.stmt(s));
    }

    fn stmt(&mut self, s: &ast::Stmt<'_>) {
        use ast::Stmt as S;
        match s {
            S::Template(t) => self.stmts(&t.children),
            S::EmitExpr(e) => self.expr(&e.expr),
            S::EmitRaw(_) | S::Continue(_) | S::Break(_) => {}
            S::ForLoop(f) => {
                self.expr(&f.target);
                self.expr(&f.iter);
                self.plain(&f.iter);
                if let Some(x) = &f.filter_expr {
                    self.expr(x);
                }
                self.stmts(&f.body);
                self.stmts(&f.else_body);
            }
            S::IfCond(c) => {
                self.expr(&c.expr);
                self.stmts(&c.true_body);
                self.stmts(&c.false_body);
            }
            S::WithBlock(w) => {
                for (a, b) in &w.assignments {
                    self.expr(a);
                    self.expr(b);
                }
                self.stmts(&w.body);
            }
            S::Set(x) => {
                self.expr(&x.target);
                self.expr(&x.expr);
            }
            S::AutoEscape(a) => {
                self.expr(&a.enabled);
                self.stmts(&a.body);
            }
            S::Block(b) => self.stmts(&b.body),
            S::Do(d) => {
                self.expr(&d.call.expr);
                self.args(&d.call.args);
            }
            S::SetBlock(_) => self.refuse("`{% set name %}…{% endset %}` (a block set)"),
            S::FilterBlock(_) => self.refuse("`{% filter %}`"),
            S::Macro(_) => self.refuse("`{% macro %}`"),
            S::CallBlock(_) => self.refuse("`{% call %}`"),
            S::Import(_) | S::FromImport(_) => self.refuse("`{% import %}`"),
            S::Extends(_) => self.refuse("`{% extends %}`"),
            S::Include(_) => self.refuse("`{% include %}`"),
        }
    }

    fn args(&mut self, args: &[ast::CallArg<'_>]) {
        for a in args {
            match a {
                ast::CallArg::Pos(e) | ast::CallArg::Kwarg(_, e) => self.expr(e),
                ast::CallArg::PosSplat(_) | ast::CallArg::KwargSplat(_) => {
                    self.refuse("`*args` or `**kwargs` in a call")
                }
            }
        }
    }

    fn expr(&mut self, e: &ast::Expr<'_>) {
        use ast::Expr as E;
        match e {
            E::Var(_) | E::Const(_) => {}
            E::Slice(s) => {
                self.expr(&s.expr);
                self.plain_sliced(&s.expr);
                for x in [&s.start, &s.stop, &s.step].into_iter().flatten() {
                    self.expr(x);
                }
            }
            E::UnaryOp(u) => self.expr(&u.expr),
            E::BinOp(b) => {
                self.expr(&b.left);
                self.expr(&b.right);
                let guarded = match b.op {
                    ast::BinOpKind::Add => Some(("__fluxo_add", '+')),
                    ast::BinOpKind::Mul => Some(("__fluxo_mul", '*')),
                    ast::BinOpKind::Concat => Some(("__fluxo_cat", '~')),
                    _ => None,
                };
                if let Some((func, op)) = guarded {
                    self.guard(b, func, op);
                }
                use ast::BinOpKind as K;
                if matches!(
                    b.op,
                    K::Eq | K::Ne | K::Lt | K::Lte | K::Gt | K::Gte | K::In
                ) {
                    self.plain(&b.left);
                    self.plain(&b.right);
                }
            }
            E::Compare(c) => {
                self.expr(&c.expr);
                c.ops.iter().for_each(|o| self.expr(&o.expr));
                self.plain(&c.expr);
                c.ops.iter().for_each(|o| self.plain(&o.expr));
            }
            E::IfExpr(i) => {
                self.expr(&i.test_expr);
                self.expr(&i.true_expr);
                if let Some(f) = &i.false_expr {
                    self.expr(f);
                }
            }
            E::Filter(f) => {
                if let Some(x) = &f.expr {
                    self.expr(x);
                    if !secret::WHOLE_FILTERS.contains(&f.name) {
                        self.plain(x);
                    }
                }
                self.args(&f.args);
            }
            E::Test(t) => {
                self.expr(&t.expr);
                if !secret::PRESENCE_TESTS.contains(&t.name) {
                    self.plain(&t.expr);
                }
                self.args(&t.args);
            }
            E::GetAttr(g) => self.expr(&g.expr),
            E::GetItem(g) => {
                self.expr(&g.expr);
                self.expr(&g.subscript_expr);
            }
            E::Call(c) => {
                self.expr(&c.expr);
                self.args(&c.args);
            }
            E::List(l) => l.items.iter().for_each(|x| self.expr(x)),
            E::Map(m) => {
                m.keys.iter().for_each(|x| self.expr(x));
                m.values.iter().for_each(|x| self.expr(x));
            }
        }
    }

    /// `x` → `x|__fluxo_plain`: the value `x` gives to a filter, a test or a comparison is
    /// checked not to be a secret (the `secret` module). A filter binds tighter than any
    /// operator, so the guard sees what the consumer after it sees (a compound operand is
    /// already a call, or in parentheses); it is placed after every closing at its offset.
    fn plain(&mut self, x: &ast::Expr<'_>) {
        self.edits.push(Edit {
            at: extent(x).1,
            order: (0, i64::MAX),
            len: 0,
            text: format!("|{}", secret::GUARD),
        });
    }

    /// `x[a:b]` → `(x|__fluxo_plain)[a:b]` (a filter cannot precede a subscript unparenthesized).
    /// Only when `x` holds no metered operator, whose rewrite starts at a span of its own; a
    /// secret inside such an `x` is text that slicing cannot reveal (the `secret` module).
    fn plain_sliced(&mut self, x: &ast::Expr<'_>) {
        let (from, to) = extent(x);
        let Some(text) = self.src.get(from..to) else {
            return;
        };
        if text.contains(['+', '*', '~']) {
            return;
        }
        let width = 2 * (to - from) as i64 + 1;
        self.edits.push(Edit {
            at: from,
            order: (2, -width),
            len: 0,
            text: "(".into(),
        });
        self.edits.push(Edit {
            at: to,
            order: (0, width),
            len: 0,
            text: format!("|{})", secret::GUARD),
        });
    }

    /// `left OP right` → `func(left , right, "left", "right")`, from the operation's span:
    /// it starts at its left operand (a parenthesis included) and ends after its right one.
    fn guard(&mut self, b: &ast::Spanned<ast::BinOp<'_>>, func: &str, op: char) {
        let span = b.span();
        let (start, end) = (span.start_offset as usize, span.end_offset as usize);
        let (left, right) = (extent(&b.left), extent(&b.right));
        let (gap_from, gap_to) = (left.1, right.0);
        let Some(gap) = self.src.get(gap_from..gap_to) else {
            return self.refuse("an operator Fluxo could not locate");
        };
        // Between the operands: only parentheses, white space and the operator itself.
        let at = gap.find(op);
        let clean = gap
            .chars()
            .all(|c| c == op || c == '(' || c == ')' || c.is_whitespace());
        let (Some(at), true) = (at, clean && gap.matches(op).count() == 1) else {
            return self.refuse("an operator Fluxo could not locate");
        };
        let name_of = |(from, to): (usize, usize)| {
            let text = self.src.get(from..to).unwrap_or("");
            // Only a plain path is named (it needs no escaping as a string literal).
            if super::is_plain_path(text) && !text.contains(['"', '\'', '\\']) {
                text.to_string()
            } else {
                String::new()
            }
        };
        let names = format!(", \"{}\", \"{}\")", name_of(left), name_of(right));
        let width = (end - start) as i64;
        self.edits.push(Edit {
            at: start,
            order: (2, -width),
            len: 0,
            text: format!("{func}("),
        });
        self.edits.push(Edit {
            at: gap_from + at,
            order: (1, 0),
            len: op.len_utf8(),
            text: ",".into(),
        });
        self.edits.push(Edit {
            at: end,
            order: (0, width),
            len: 0,
            text: names,
        });
    }
}

/// Where an expression's text starts and ends (byte offsets). A postfix node's own span
/// (a filter, an attribute, a call) starts at its operator, so the expression it applies to
/// is looked at too.
pub(super) fn extent(e: &ast::Expr<'_>) -> (usize, usize) {
    use ast::Expr as E;
    let own = e.span();
    let from_children = !matches!(
        e,
        E::Var(_) | E::Const(_) | E::List(_) | E::Map(_) | E::UnaryOp(_)
    );
    let mut from = if from_children {
        usize::MAX
    } else {
        own.start_offset as usize
    };
    let mut to = own.end_offset as usize;
    let mut widen = |x: &ast::Expr<'_>| {
        let (f, t) = extent(x);
        from = from.min(f);
        to = to.max(t);
    };
    match e {
        E::Var(_) | E::Const(_) | E::List(_) | E::Map(_) => {}
        E::Slice(s) => widen(&s.expr),
        E::UnaryOp(u) => widen(&u.expr),
        E::BinOp(b) => {
            widen(&b.left);
            widen(&b.right);
        }
        E::Compare(c) => {
            widen(&c.expr);
            c.ops.iter().for_each(|o| widen(&o.expr));
        }
        E::IfExpr(i) => {
            widen(&i.true_expr);
            widen(&i.test_expr);
            if let Some(f) = &i.false_expr {
                widen(f);
            }
        }
        E::Filter(f) => {
            if let Some(x) = &f.expr {
                widen(x);
            }
        }
        E::Test(t) => widen(&t.expr),
        E::GetAttr(g) => widen(&g.expr),
        E::GetItem(g) => widen(&g.expr),
        E::Call(c) => widen(&c.expr),
    }
    (from, to)
}

/// The operators of a plain environment, which the guarded functions call once the size of
/// the result is known to fit: the values are minijinja's own.
static PLAIN: LazyLock<Environment<'static>> = LazyLock::new(|| {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env
});
static OPS: LazyLock<[Expression<'static, 'static>; 2]> = LazyLock::new(|| {
    let compile = |src| PLAIN.compile_expression(src).expect("a fixed expression");
    [compile("a + b"), compile("a * b")]
});

fn over_bytes(what: &str) -> Error {
    Error::new(
        ErrorKind::InvalidOperation,
        format!(
            "{what} would build a string larger than {MAX_VALUE_BYTES} bytes (1 MiB), the \
             memory budget of one value in a template"
        ),
    )
}

fn over_items(what: &str) -> Error {
    Error::new(
        ErrorKind::InvalidOperation,
        format!(
            "{what} would build a list longer than {MAX_ITEMS} items, the memory budget of one \
             list in a template"
        ),
    )
}

fn check_bytes(n: Option<usize>, what: &str) -> Result<(), Error> {
    match n {
        Some(n) if n <= MAX_VALUE_BYTES => Ok(()),
        _ => Err(over_bytes(what)),
    }
}

fn check_items(n: Option<usize>, what: &str) -> Result<(), Error> {
    match n {
        Some(n) if n <= MAX_ITEMS => Ok(()),
        _ => Err(over_items(what)),
    }
}

fn is_list(v: &Value) -> bool {
    matches!(v.kind(), ValueKind::Seq | ValueKind::Iterable)
}

/// The number of items of a list, counted up to [`MAX_ITEMS`] + 1 when it has no length.
fn items(v: &Value) -> Option<usize> {
    if let Some(n) = v.len() {
        return Some(n);
    }
    v.try_iter().ok().map(|it| it.take(MAX_ITEMS + 1).count())
}

/// The length of `v`'s text (as `~`, `string` and output print it), counted up to `limit` + 1:
/// formatting stops as soon as the limit is passed.
pub(super) fn text_len(v: &Value, limit: usize) -> usize {
    if let Some(s) = v.as_str() {
        return s.len();
    }
    struct Count(usize, usize);
    impl std::fmt::Write for Count {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.0 += s.len();
            if self.0 > self.1 {
                Err(std::fmt::Error)
            } else {
                Ok(())
            }
        }
    }
    let mut c = Count(0, limit);
    let _ = write!(c, "{v}");
    c.0
}

/// The size of `v` as JSON (compact, or indented by `indent` spaces), counted up to `limit` + 1.
pub(super) fn json_len(v: &Value, indent: Option<usize>, limit: usize) -> usize {
    struct Count(usize, usize);
    impl std::io::Write for Count {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0 += b.len();
            if self.0 > self.1 {
                Err(std::io::Error::other("over"))
            } else {
                Ok(b.len())
            }
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0, limit);
    let _ = match indent {
        None => serde_json::to_writer(&mut c, v),
        Some(n) if n > limit => return n,
        Some(n) => {
            let pad = " ".repeat(n);
            let f = serde_json::ser::PrettyFormatter::with_indent(pad.as_bytes());
            let mut s = serde_json::Serializer::with_formatter(&mut c, f);
            serde::Serialize::serialize(v, &mut s)
        }
    };
    c.0
}

fn missing(a: &Value, name: &str, op: char) -> Result<(), Error> {
    if !a.is_undefined() {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::UndefinedError,
        if name.is_empty() {
            format!("an operand of `{op}` is undefined")
        } else {
            format!("{MISSING_PREFIX}{name}")
        },
    ))
}

fn eval(op: usize, a: Value, b: Value) -> Result<Value, Error> {
    OPS[op].eval(minijinja::context! { a => a, b => b })
}

/// Both operands as integers, when they are (minijinja computes integers in i128 and answers
/// an i64 when the result fits).
fn ints(a: &Value, b: &Value) -> Option<(i128, i128)> {
    let int = |v: &Value| {
        v.is_integer()
            .then(|| i128::try_from(v.clone()).ok())
            .flatten()
    };
    Some((int(a)?, int(b)?))
}

fn int_value(n: i128) -> Value {
    i64::try_from(n).map_or_else(|_| Value::from(n), Value::from)
}

/// `a + b`: numbers add; two strings or two lists concatenate within the budget.
fn add(state: &State, a: Value, b: Value, left: &str, right: &str) -> Result<Value, Error> {
    missing(&a, left, '+')?;
    missing(&b, right, '+')?;
    secret::check_operand(state, &a, '+')?;
    secret::check_operand(state, &b, '+')?;
    if is_list(&a) && is_list(&b) {
        check_items(items(&a).zip(items(&b)).map(|(x, y)| x + y), "`+`")?;
    } else if let (Some(x), Some(y)) = (a.as_str(), b.as_str()) {
        check_bytes(Some(x.len() + y.len()), "`+`")?;
        return Ok(Value::from([x, y].concat()));
    } else if let Some(n) = ints(&a, &b).and_then(|(x, y)| x.checked_add(y)) {
        return Ok(int_value(n));
    }
    // Floats, mixed kinds and overflows: minijinja's own operator (and its message).
    eval(0, a, b)
}

/// `a * b`: numbers multiply; a string or a list repeated within the budget.
fn mul(state: &State, a: Value, b: Value, left: &str, right: &str) -> Result<Value, Error> {
    missing(&a, left, '*')?;
    missing(&b, right, '*')?;
    secret::check_operand(state, &a, '*')?;
    secret::check_operand(state, &b, '*')?;
    for (x, n) in [(&a, &b), (&b, &a)] {
        if let (Some(s), Some(n)) = (x.as_str(), n.as_usize()) {
            check_bytes(s.len().checked_mul(n), "repeating a string with `*`")?;
        } else if is_list(x) && n.as_usize().is_some() {
            let n = n.as_usize().unwrap_or(0);
            check_items(
                items(x).and_then(|len| len.checked_mul(n)),
                "repeating a list with `*`",
            )?;
        }
    }
    if let Some(n) = ints(&a, &b).and_then(|(x, y)| x.checked_mul(y)) {
        return Ok(int_value(n));
    }
    eval(1, a, b)
}

/// `a ~ b`: the two texts joined within the budget.
fn cat(a: Value, b: Value, left: &str, right: &str) -> Result<Value, Error> {
    missing(&a, left, '~')?;
    missing(&b, right, '~')?;
    let la = text_len(&a, MAX_VALUE_BYTES);
    let lb = text_len(&b, MAX_VALUE_BYTES - la.min(MAX_VALUE_BYTES));
    check_bytes(Some(la + lb), "`~`")?;
    // minijinja's `~` is exactly this (`ops::string_concat`).
    Ok(Value::from(format!("{a}{b}")))
}

/// The builtin filters that build a string or a list, wrapped by [`install`].
fn builtin(name: &str) -> Option<Value> {
    use minijinja::filters as f;
    Some(match name {
        "lower" => Value::from_function(f::lower),
        "upper" => Value::from_function(f::upper),
        "title" => Value::from_function(f::title),
        "capitalize" => Value::from_function(f::capitalize),
        "replace" => Value::from_function(f::replace),
        "dictsort" => Value::from_function(f::dictsort),
        "items" => Value::from_function(f::items),
        "reverse" => Value::from_function(f::reverse),
        "trim" => Value::from_function(f::trim),
        "join" => Value::from_function(f::join),
        "split" => Value::from_function(f::split),
        "lines" => Value::from_function(f::lines),
        "sort" => Value::from_function(f::sort),
        "list" => Value::from_function(f::list),
        "string" => Value::from_function(f::string),
        "batch" => Value::from_function(f::batch),
        "slice" => Value::from_function(f::slice),
        "indent" => Value::from_function(f::indent),
        "select" => Value::from_function(f::select),
        "reject" => Value::from_function(f::reject),
        "selectattr" => Value::from_function(f::selectattr),
        "rejectattr" => Value::from_function(f::rejectattr),
        "map" => Value::from_function(f::map),
        "groupby" => Value::from_function(f::groupby),
        "unique" => Value::from_function(f::unique),
        "chain" => Value::from_function(f::chain),
        "zip" => Value::from_function(f::zip),
        "pprint" => Value::from_function(f::pprint),
        "format" => Value::from_function(f::format),
        "tojson" => Value::from_function(f::tojson),
        "escape" | "e" => Value::from_function(f::escape),
        _ => return None,
    })
}

/// Every filter [`builtin`] wraps.
const BUILDING_FILTERS: &[&str] = &[
    "lower",
    "upper",
    "title",
    "capitalize",
    "replace",
    "dictsort",
    "items",
    "reverse",
    "trim",
    "join",
    "split",
    "lines",
    "sort",
    "list",
    "string",
    "batch",
    "slice",
    "indent",
    "select",
    "reject",
    "selectattr",
    "rejectattr",
    "map",
    "groupby",
    "unique",
    "chain",
    "zip",
    "pprint",
    "format",
    "tojson",
    "escape",
    "e",
];

/// The positional arguments and the keyword arguments of a filter call.
fn split_args(args: &[Value]) -> (&[Value], Option<&Value>) {
    match args.split_last() {
        Some((last, rest)) if minijinja::value::Kwargs::try_from(last.clone()).is_ok() => {
            (rest, Some(last))
        }
        _ => (args, None),
    }
}

/// Argument `pos`, or keyword `kw`.
fn arg<'a>(pos: &'a [Value], kwargs: Option<&'a Value>, i: usize, kw: &str) -> Option<Value> {
    pos.get(i).cloned().or_else(|| {
        kwargs
            .and_then(|k| k.get_attr(kw).ok())
            .filter(|v| !v.is_undefined())
    })
}

/// Checks a building filter's arguments before it runs: the size its arguments choose.
fn before(name: &str, args: &[Value]) -> Result<(), Error> {
    let (pos, kwargs) = split_args(args);
    let Some(input) = pos.first() else {
        return Ok(());
    };
    let what = format!("the `{name}` filter");
    let text = |v: &Value| text_len(v, MAX_VALUE_BYTES);
    if is_list(input) || matches!(input.kind(), ValueKind::Map) {
        check_items(items(input), &what)?;
    }
    match name {
        "indent" => {
            let s = input.as_str().unwrap_or("");
            let lines = s.matches('\n').count() + 1;
            let width = match arg(pos, kwargs, 1, "width") {
                Some(w) if w.as_str().is_some() => w.as_str().map(str::len),
                Some(w) => w.as_usize(),
                None => Some(4),
            };
            check_bytes(
                width
                    .and_then(|w| w.checked_mul(lines))
                    .map(|n| n + s.len()),
                &what,
            )
        }
        "replace" => {
            let (Some(s), Some(from), Some(to)) = (
                input.as_str(),
                arg(pos, kwargs, 1, "old"),
                arg(pos, kwargs, 2, "new"),
            ) else {
                return Ok(());
            };
            let from = from.to_string();
            let hits = if from.is_empty() {
                s.chars().count() + 1
            } else {
                s.matches(from.as_str()).count()
            };
            let to = text(&to);
            check_bytes(hits.checked_mul(to).map(|n| n + s.len()), &what)
        }
        "join" => {
            let sep = arg(pos, kwargs, 1, "d").map(|d| text(&d)).unwrap_or(0);
            let mut total = items(input).unwrap_or(0).saturating_mul(sep);
            if let Ok(it) = input.try_iter() {
                for x in it {
                    if total > MAX_VALUE_BYTES {
                        break;
                    }
                    total += text_len(&x, MAX_VALUE_BYTES);
                }
            }
            check_bytes(Some(total), &what)
        }
        "tojson" => {
            let indent = arg(pos, kwargs, 1, "indent").and_then(|i| i.as_usize());
            check_bytes(Some(json_len(input, indent, MAX_VALUE_BYTES)), &what)
        }
        "format" => {
            // Widths and precisions (`%20s`, `%.3f`) pad: every number in the format counts.
            let f = input.as_str().unwrap_or("");
            let mut total = f.len();
            for n in f
                .split(|c: char| !c.is_ascii_digit())
                .filter(|n| !n.is_empty())
            {
                total = total.saturating_add(n.parse::<usize>().unwrap_or(usize::MAX));
            }
            for a in &pos[1..] {
                total = total.saturating_add(text(a));
            }
            check_bytes(Some(total), &what)
        }
        "batch" | "slice" => {
            let n = arg(pos, kwargs, 1, "count").and_then(|n| n.as_usize());
            check_items(n.or(Some(0)), &what)
        }
        "string" | "pprint" | "escape" | "e" => check_bytes(Some(text(input)), &what),
        _ => Ok(()),
    }
}

/// Checks a building filter's result.
fn after(name: &str, out: &Value) -> Result<(), Error> {
    let what = format!("the `{name}` filter");
    match out.as_str() {
        Some(s) => check_bytes(Some(s.len()), &what),
        None if is_list(out) => check_items(items(out), &what),
        None => Ok(()),
    }
}

/// Install the guarded operators and filters in `env`.
pub(super) fn install(env: &mut Environment<'static>) {
    env.add_function("__fluxo_add", add);
    env.add_function("__fluxo_mul", mul);
    env.add_function("__fluxo_cat", cat);
    for name in BUILDING_FILTERS {
        let Some(inner) = builtin(name) else { continue };
        env.add_filter(*name, move |state: &State, args: Rest<Value>| {
            // Also reached through `map`, `select`, … whose input was never guarded.
            if let Some(input) = args.first() {
                secret::check_operand(state, input, '|')?;
            }
            before(name, &args)?;
            let out = inner.call(state, &args)?;
            after(name, &out)?;
            Ok(out)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(s: &str) -> String {
        match meter(s, false) {
            Ok(Metered::Source(s)) => s,
            Ok(Metered::Unparsed) => panic!("unparsed: {s}"),
            Err(e) => panic!("refused: {e}"),
        }
    }

    #[test]
    fn operators_become_guarded_calls_with_their_structure() {
        assert_eq!(src("x{{ a }}y"), "x{{ a }}y");
        assert_eq!(src("{{ a ~ b }}"), "{{ __fluxo_cat(a , b, \"a\", \"b\") }}");
        assert_eq!(
            src("{{ (a + 1) * (b) ~ c }}"),
            "{{ __fluxo_cat(__fluxo_mul((__fluxo_add(a , 1, \"a\", \"\")) , (b), \"\", \"b\") , c, \"\", \"c\") }}"
        );
        assert_eq!(
            src("{{ a + b * c }}"),
            "{{ __fluxo_add(a , __fluxo_mul(b , c, \"b\", \"c\"), \"a\", \"\") }}"
        );
        assert_eq!(
            src("{% for x in y %}{{ x*2 }}{% endfor %}"),
            "{% for x in y|__fluxo_plain %}{{ __fluxo_mul(x,2, \"x\", \"\") }}{% endfor %}"
        );
        // `**` is not `*`, and a `*` inside a string is text.
        assert_eq!(src("{{ 2 ** 3 }}{{ '*' }}*"), "{{ 2 ** 3 }}{{ '*' }}*");
    }

    #[test]
    fn captures_includes_and_splats_are_refused() {
        for s in [
            "{% macro m() %}x{% endmacro %}",
            "{% set x %}a{% endset %}",
            "{% filter upper %}a{% endfilter %}",
            "{% include 'x' %}",
            "{{ f(*a) }}",
        ] {
            assert!(meter(s, false).is_err(), "{s}");
        }
        // minijinja's expression lexer panics on `}}`: refused before it is reached.
        assert!(meter("input }}{{ ", true).is_err());
    }
}
