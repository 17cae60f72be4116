//! URLs built safely (SPEC §5 "The door and outbound calls"; issue 42): a value from run data
//! rendered into a URL's path is one path segment, percent-encoded (RFC 3986 §3.3), and a
//! value rendered into its query or fragment is one encoded component (§3.4).
//!
//! With `{{ env.API_URL }}/echo/{{ input.path }}` and `path = "../../admin?x=1#"`, the
//! destination used to receive `POST /admin?x=1`; it now receives
//! `/echo/..%2F..%2Fadmin%3Fx%3D1%23`. A value that renders to `.` or `..` (a dot segment,
//! which URL parsers resolve, `%2e%2e` included) fails the render: input never climbs above
//! the author's path.
//!
//! Which expressions: those reading run data (anything but `env.*`, `run.*` and the global
//! functions, as for the host rule of [`crate::steps::outbound::host_source`]) that stand after
//! the URL's authority in its literal text (after the first lone `/`, `?` or `#`). The author's
//! own values (`{{ env.API_URL }}`, `{{ run.id }}`) are left as written. An expression whose
//! last filter is `urlencode` is already encoded and kept; one whose last filter is
//! `raw_path` asks for the value unencoded (the linter flags it, `lint_raw_path`).
//!
//! The rewrite is a compile-time one, on minijinja's parse tree, like the memory budget's:
//! `{{ expr }}` → `{{ (expr) | __fluxo_path }}`.

use minijinja::machinery::{self, ast};
use minijinja::{Error, ErrorKind, Value};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use super::budget::extent;

/// What stays as it is in an encoded segment or component: RFC 3986's unreserved characters.
const COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Names whose values the author controls: `env.*` (settings and `FLUXO_ENV_*`), `run.*`
/// (ids the engine makes) and minijinja's global functions. The host rule of
/// [`crate::steps::outbound::host_source`] reads the same list.
pub const AUTHOR_ROOTS: &[&str] = &[
    "env",
    "run",
    "range",
    "dict",
    "namespace",
    "lipsum",
    "cycler",
    "joiner",
    "debug",
];

/// Where in a URL the text so far stands.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Part {
    /// Scheme and authority: the host rule's business (`input_host`), never encoded here.
    Authority,
    Path,
    /// Query or fragment.
    Query,
}

/// `source` (a URL template) with each run-data expression after the authority encoded.
/// Unchanged when nothing needs it, or when it does not parse (validation reports that).
pub(super) fn encode_data(source: &str) -> String {
    let ws = machinery::WhitespaceConfig {
        keep_trailing_newline: true,
        ..Default::default()
    };
    let Ok(tree) = machinery::parse(source, "<url>", Default::default(), ws) else {
        return source.to_string();
    };
    let mut w = Walker {
        src: source,
        part: Part::Authority,
        prev: None,
        inserts: Vec::new(),
    };
    w.stmt(&tree);
    let mut inserts = w.inserts;
    inserts.sort_by_key(|(at, _)| *at);
    let mut out = String::with_capacity(source.len() + inserts.len() * 24);
    let mut pos = 0;
    for (at, text) in inserts {
        out.push_str(&source[pos..at]);
        out.push_str(text);
        pos = at;
    }
    out.push_str(&source[pos..]);
    out
}

struct Walker<'s> {
    src: &'s str,
    part: Part,
    /// The last literal byte seen (a slash after `scheme:` or another slash is not the path).
    prev: Option<u8>,
    inserts: Vec<(usize, &'static str)>,
}

impl Walker<'_> {
    fn stmts(&mut self, v: &[ast::Stmt<'_>]) {
        v.iter().for_each(|s| self.stmt(s));
    }

    fn stmt(&mut self, s: &ast::Stmt<'_>) {
        use ast::Stmt as S;
        match s {
            S::Template(t) => self.stmts(&t.children),
            S::EmitRaw(r) => self.text(r.raw),
            S::EmitExpr(e) => self.emit(&e.expr),
            S::IfCond(c) => {
                let (part, prev) = (self.part, self.prev);
                self.stmts(&c.false_body);
                (self.part, self.prev) = (part, prev);
                self.stmts(&c.true_body);
            }
            S::ForLoop(f) => self.stmts(&f.body),
            S::WithBlock(w) => self.stmts(&w.body),
            S::AutoEscape(a) => self.stmts(&a.body),
            S::Block(b) => self.stmts(&b.body),
            _ => {}
        }
    }

    fn text(&mut self, raw: &str) {
        for &c in raw.as_bytes() {
            match (self.part, c) {
                (_, b'?' | b'#') => self.part = Part::Query,
                (Part::Authority, b'/' | b'\\') => {
                    // `scheme://`: a slash after `:` or beside another slash is not the path.
                    let in_run = matches!(self.prev, Some(b':' | b'/' | b'\\'));
                    if !in_run {
                        self.part = Part::Path;
                    }
                }
                _ => {}
            }
            self.prev = Some(c);
        }
    }

    fn emit(&mut self, e: &ast::Expr<'_>) {
        self.prev = None;
        let filter = match self.part {
            Part::Authority => return,
            Part::Path => " | __fluxo_path",
            Part::Query => " | __fluxo_query",
        };
        if let ast::Expr::Filter(f) = e {
            if matches!(
                f.name,
                "urlencode" | "raw_path" | "__fluxo_path" | "__fluxo_query"
            ) {
                return;
            }
        }
        if !reads_run_data(e) {
            return;
        }
        let (from, to) = extent(e);
        if self.src.get(from..to).is_none() {
            return;
        }
        self.inserts.push((from, "("));
        self.inserts.push((to, ")"));
        self.inserts.push((to, filter));
    }
}

/// Whether expression `e` reads a variable the author does not control.
fn reads_run_data(e: &ast::Expr<'_>) -> bool {
    use ast::Expr as E;
    let any = |v: &[ast::Expr<'_>]| v.iter().any(reads_run_data);
    let args = |v: &[ast::CallArg<'_>]| {
        v.iter().any(|a| match a {
            ast::CallArg::Pos(x)
            | ast::CallArg::Kwarg(_, x)
            | ast::CallArg::PosSplat(x)
            | ast::CallArg::KwargSplat(x) => reads_run_data(x),
        })
    };
    match e {
        E::Var(v) => !AUTHOR_ROOTS.contains(&v.id),
        E::Const(_) => false,
        E::Slice(s) => {
            reads_run_data(&s.expr)
                || [&s.start, &s.stop, &s.step]
                    .into_iter()
                    .flatten()
                    .any(reads_run_data)
        }
        E::UnaryOp(u) => reads_run_data(&u.expr),
        E::BinOp(b) => reads_run_data(&b.left) || reads_run_data(&b.right),
        E::Compare(c) => reads_run_data(&c.expr) || c.ops.iter().any(|o| reads_run_data(&o.expr)),
        E::IfExpr(i) => {
            reads_run_data(&i.test_expr)
                || reads_run_data(&i.true_expr)
                || i.false_expr.as_ref().is_some_and(reads_run_data)
        }
        E::Filter(f) => f.expr.as_ref().is_some_and(reads_run_data) || args(&f.args),
        E::Test(t) => reads_run_data(&t.expr) || args(&t.args),
        E::GetAttr(g) => reads_run_data(&g.expr),
        E::GetItem(g) => reads_run_data(&g.expr) || reads_run_data(&g.subscript_expr),
        E::Call(c) => reads_run_data(&c.expr) || args(&c.args),
        E::List(l) => any(&l.items),
        E::Map(m) => any(&m.keys) || any(&m.values),
    }
}

fn text_of(v: &Value) -> String {
    if v.is_none() {
        return String::new();
    }
    match v.as_str() {
        Some(s) => s.to_string(),
        None => v.to_string(),
    }
}

/// `__fluxo_path`: one path segment, encoded; a dot segment is refused.
fn path(v: Value) -> Result<String, Error> {
    let s = text_of(&v);
    if s == "." || s == ".." {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            format!(
                "a value from run data rendered the path segment `{s}`, which would climb the \
                 URL's path; it is refused (write the path, or take it from env.*)"
            ),
        ));
    }
    Ok(utf8_percent_encode(&s, COMPONENT).to_string())
}

/// `__fluxo_query`: one query (or fragment) component, encoded.
fn query(v: Value) -> String {
    utf8_percent_encode(&text_of(&v), COMPONENT).to_string()
}

/// `raw_path`: the value as it is (the author asks for it; the linter flags it).
fn raw_path(v: Value) -> Value {
    v
}

/// Install the URL filters in `env`.
pub(super) fn install(env: &mut minijinja::Environment<'static>) {
    env.add_filter("__fluxo_path", path);
    env.add_filter("__fluxo_query", query);
    env.add_filter("raw_path", raw_path);
}

/// Whether a URL template asks for a raw path (`| raw_path`), for the linter.
pub fn uses_raw_path(source: &str) -> bool {
    source.contains("raw_path")
        && machinery::parse(source, "<url>", Default::default(), Default::default()).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_data_after_the_authority_is_encoded_and_the_authors_values_are_not() {
        assert_eq!(
            encode_data("{{ env.API_URL }}/echo/{{ input.path }}"),
            "{{ env.API_URL }}/echo/{{ (input.path) | __fluxo_path }}"
        );
        assert_eq!(
            encode_data("https://api.example.com/u/{{ input.id }}?q={{ input.q }}&r={{ run.id }}"),
            "https://api.example.com/u/{{ (input.id) | __fluxo_path }}?q={{ (input.q) | __fluxo_query }}&r={{ run.id }}"
        );
        // The host part is the host rule's; urlencode and raw_path are kept.
        assert_eq!(
            encode_data("https://{{ input.h }}/x"),
            "https://{{ input.h }}/x"
        );
        assert_eq!(
            encode_data("{{ env.U }}/{{ input.p | raw_path }}/{{ input.q | urlencode }}"),
            "{{ env.U }}/{{ input.p | raw_path }}/{{ input.q | urlencode }}"
        );
        assert_eq!(
            encode_data("{{ env.U }}/a/{{ steps.s.output.id | lower }}"),
            "{{ env.U }}/a/{{ (steps.s.output.id | lower) | __fluxo_path }}"
        );
        assert_eq!(encode_data("no template"), "no template");
        // A conditional's and a comparison's own spans start at the `{{`: their operands tell.
        assert_eq!(
            encode_data("{{ env.U }}/p?since={{ input.a - 600 if input.f else 0 }}&x={{ input.b == 1 }}"),
            "{{ env.U }}/p?since={{ (input.a - 600 if input.f else 0) | __fluxo_query }}&x={{ (input.b == 1) | __fluxo_query }}"
        );
    }

    #[test]
    fn segments_are_encoded_and_dot_segments_refused() {
        assert_eq!(
            path(Value::from("../../admin?x=1#")).unwrap(),
            "..%2F..%2Fadmin%3Fx%3D1%23"
        );
        assert_eq!(path(Value::from("a b/é")).unwrap(), "a%20b%2F%C3%A9");
        assert_eq!(path(Value::from(42)).unwrap(), "42");
        assert!(path(Value::from("..")).is_err());
        assert!(path(Value::from(".")).is_err());
        assert_eq!(query(Value::from("a&b=c d")), "a%26b%3Dc%20d");
    }
}
