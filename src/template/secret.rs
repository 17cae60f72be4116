//! Secrets in templates (SPEC §5, "The door and outbound calls"; issue 42): a template never
//! sees a secret's value, so nothing it computes can carry a part of one.
//!
//! # How
//!
//! * `env` is an [`EnvView`]: plain variables (`CRM_URL`, `REGION`) are text as before; a
//!   **secret** variable (a secret name, [`crate::secrets::is_secret_env`], or one the workflow
//!   declares) is a handle whose text is an opaque token, `U+FDD0 <nonce> : NAME U+FDD1`. The
//!   nonce is random per view (each run, preview and delivery draws its own when it starts),
//!   so text in an event cannot forge a token, whatever an earlier run let out.
//! * Whatever a template does to a handle, it does to the token: `{{ env.API_KEY | reverse }}`
//!   reverses the token, never the key. Filters, tests, comparisons and the `+`/`*` operators
//!   applied to a secret (or to text holding one) fail the render at once, naming the secret
//!   (`__fluxo_plain`, inserted by the template compiler; see the `budget` module); a method
//!   call on one fails the same way, and an index or attribute gives a poisoned token.
//! * After a field renders, [`reveal`] puts the values in, only where a secret may go
//!   ([`Sink`]): a header value (`Bearer {{ env.API_KEY }}`), a URL's credentials
//!   (`https://bot:{{ env.PASS }}@host/`, percent-encoded) or its very start (a secret webhook
//!   URL, `{{ env.SLACK_WEBHOOK_URL }}`), a webhook trigger's signing secret. A token anywhere
//!   else, a poisoned or transformed one, or a secret the workflow does not declare fails the
//!   render with a message that names the secret, never its value.
//!
//! # Declared secrets
//!
//! A workflow reads only the secrets it lists in `secrets` (`"secrets": ["API_KEY"]`). Any
//! other secret variable is still a handle, but an undeclared one: every use of it fails with
//! "add it to the workflow's `secrets`". Plain variables need no declaration.
//!
//! Filters that keep a value whole (`default`, `d`, `string`, `safe`) and the tests `defined`,
//! `undefined` and `none` accept a secret; `~` joins it as text (`"Bearer " ~ env.API_KEY`),
//! which stays whole.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use minijinja::value::{Enumerator, Object, ObjectRepr};
use minijinja::{Error, ErrorKind, State, Value as MjValue};
use serde_json::Value;

use super::TemplateError;

/// Starts a token (a Unicode noncharacter, reserved for internal use).
const OPEN: char = '\u{FDD0}';
/// Ends a token.
const CLOSE: char = '\u{FDD1}';
/// The mark of a declared secret's token.
const DECLARED: char = ':';
/// The mark of an undeclared secret's token.
const UNDECLARED: char = '!';
/// The mark of a secret indexed or read as an attribute: never revealed.
const POISONED: char = '?';

/// Where an error message of this module starts (`short_message` shows it without minijinja's
/// kind and line).
pub(super) const MESSAGE_PREFIX: &str = "secret `env.";

/// 20 random decimal digits, drawn for each [`EnvView`] (each run, each preview, each
/// delivery): a token is only recognised by the view that made it, so text in an event (or a
/// nonce another run let out) can never stand in for a secret. Digits survive `upper`, `lower`
/// and `title`, so a transformed token is still recognised.
#[derive(Debug)]
struct Nonce {
    forward: String,
    reversed: String,
}

impl Nonce {
    fn new() -> Self {
        use rand::Rng;
        let mut rng = rand::thread_rng();
        let forward: String = (0..20)
            .map(|_| char::from(b'0' + rng.gen_range(0..10)))
            .collect();
        let reversed = forward.chars().rev().collect();
        Nonce { forward, reversed }
    }

    fn token(&self, name: &str, mark: char) -> String {
        format!("{OPEN}{}{mark}{name}{CLOSE}", self.forward)
    }

    /// Whether `s` holds this nonce, forward or reversed.
    fn in_text(&self, s: &str) -> bool {
        s.contains(self.forward.as_str()) || s.contains(self.reversed.as_str())
    }
}

/// Filters that keep their input whole: a secret may go through them.
pub(super) const WHOLE_FILTERS: &[&str] = &["default", "d", "string", "safe"];
/// Tests that read nothing of a value but whether it is there.
pub(super) const PRESENCE_TESTS: &[&str] = &["defined", "undefined", "none"];
/// The guard the template compiler inserts before filters, tests and comparisons.
pub(super) const GUARD: &str = "__fluxo_plain";

/// Where secrets may render whole ([`reveal`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sink {
    /// Nowhere: a secret in this field fails the render.
    Nowhere,
    /// Anywhere in the text: a header value, a signing secret.
    Whole,
    /// A URL: in its credentials (`user:password@`, percent-encoded) or at its very start.
    Url,
    /// A preview: the mask of the value ([`crate::secrets::mask`]), wherever it is.
    Masked,
}

/// One secret variable as templates see it: its token, never its value.
struct Handle {
    name: String,
    mark: char,
    nonce: Arc<Nonce>,
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<secret env.{}>", self.name)
    }
}

impl Handle {
    fn error(&self) -> Error {
        misuse(&self.name, self.mark)
    }
}

fn misuse(name: &str, mark: char) -> Error {
    Error::new(ErrorKind::InvalidOperation, misuse_message(name, mark))
}

fn misuse_message(name: &str, mark: char) -> String {
    if mark == UNDECLARED {
        undeclared_message(name)
    } else {
        format!(
            "{MESSAGE_PREFIX}{name}` cannot be transformed, compared, sliced or tested: a secret \
             renders only whole, as `{{{{ env.{name} }}}}`, in a header value, a URL's \
             credentials or a signing secret"
        )
    }
}

fn undeclared_message(name: &str) -> String {
    format!(
        "{MESSAGE_PREFIX}{name}` is not declared by this workflow: add \"{name}\" to the \
         workflow's `secrets` to use it"
    )
}

impl Object for Handle {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }
    fn get_value(self: &Arc<Self>, _key: &MjValue) -> Option<MjValue> {
        let mark = if self.mark == UNDECLARED {
            UNDECLARED
        } else {
            POISONED
        };
        Some(MjValue::from_object(Handle {
            name: self.name.clone(),
            mark,
            nonce: self.nonce.clone(),
        }))
    }
    fn call_method(
        self: &Arc<Self>,
        _state: &State<'_, '_>,
        _method: &str,
        _args: &[MjValue],
    ) -> Result<MjValue, Error> {
        Err(self.error())
    }
    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.nonce.token(&self.name, self.mark))
    }
}

/// The `env` of a render: plain variables as text, secrets as handles. Its `Debug` names the
/// secrets, never their values.
#[derive(Clone)]
pub struct EnvView {
    nonce: Arc<Nonce>,
    plain: BTreeMap<String, String>,
    /// Declared secrets and their values.
    secrets: BTreeMap<String, String>,
    /// Secret variables the workflow does not declare.
    undeclared: BTreeSet<String>,
}

impl fmt::Debug for EnvView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EnvView")
            .field("plain", &self.plain)
            .field("secrets", &self.secrets.keys().collect::<Vec<_>>())
            .field("undeclared", &self.undeclared)
            .finish()
    }
}

impl EnvView {
    /// `vars` split by `is_secret` (the name rule and the settings' `secret_env`) and
    /// `declared` (the workflow's `secrets`, secret whatever their names).
    pub fn new(
        vars: &BTreeMap<String, String>,
        is_secret: impl Fn(&str) -> bool,
        declared: &BTreeSet<String>,
    ) -> Self {
        let mut view = EnvView {
            nonce: Arc::new(Nonce::new()),
            plain: BTreeMap::new(),
            secrets: BTreeMap::new(),
            undeclared: BTreeSet::new(),
        };
        for (k, v) in vars {
            if declared.contains(k) {
                view.secrets.insert(k.clone(), v.clone());
            } else if is_secret(k) {
                view.undeclared.insert(k.clone());
            } else {
                view.plain.insert(k.clone(), v.clone());
            }
        }
        view
    }

    /// Every variable plain: for renders that hold no secret (tests, the CLI's previews).
    pub fn plain(vars: &BTreeMap<String, String>) -> Self {
        Self::new(vars, |_| false, &BTreeSet::new())
    }

    fn is_secret_name(&self, name: &str) -> bool {
        self.secrets.contains_key(name) || self.undeclared.contains(name)
    }
}

impl Object for EnvView {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }
    fn get_value(self: &Arc<Self>, key: &MjValue) -> Option<MjValue> {
        let name = key.as_str()?;
        if let Some(v) = self.plain.get(name) {
            return Some(MjValue::from(v.as_str()));
        }
        let mark = if self.secrets.contains_key(name) {
            DECLARED
        } else if self.undeclared.contains(name) {
            UNDECLARED
        } else {
            return None;
        };
        Some(MjValue::from_object(Handle {
            name: name.to_string(),
            mark,
            nonce: self.nonce.clone(),
        }))
    }
    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let mut keys: Vec<&String> = self
            .plain
            .keys()
            .chain(self.secrets.keys())
            .chain(self.undeclared.iter())
            .collect();
        keys.sort();
        Enumerator::Values(
            keys.into_iter()
                .map(|k| MjValue::from(k.as_str()))
                .collect(),
        )
    }
}

/// The nonce of the render's `env` (none outside a [`Scope`](super::Scope)).
fn nonce_of(state: &State<'_, '_>) -> Option<Arc<Nonce>> {
    let env = state.lookup("env")?;
    env.downcast_object_ref::<EnvView>()
        .map(|v| v.nonce.clone())
}

/// `__fluxo_plain(v)`: `v` unchanged, or an error naming the secret when `v` is one, or text
/// holding one (the template compiler puts it before filters, tests and comparisons).
fn plain(state: &State<'_, '_>, v: MjValue) -> Result<MjValue, Error> {
    if let Some(h) = v.downcast_object_ref::<Handle>() {
        return Err(h.error());
    }
    if let (Some(s), Some(nonce)) = (v.as_str(), nonce_of(state)) {
        if let Some((name, mark)) = first_token_name(s, &nonce) {
            return Err(misuse(&name, mark));
        }
    }
    Ok(v)
}

/// Whether `v` is a secret or text holding one: the metered `+` and `*` refuse it, and the
/// building filters (`op` = `|`) when reached through `map` and the like.
pub(super) fn check_operand(state: &State<'_, '_>, v: &MjValue, op: char) -> Result<(), Error> {
    match plain(state, v.clone()) {
        Ok(_) => Ok(()),
        Err(e) => Err(Error::new(
            ErrorKind::InvalidOperation,
            match op {
                '|' => e.detail().unwrap_or_default().to_string(),
                _ => format!(
                    "{} (`{op}` was applied to it)",
                    e.detail().unwrap_or_default()
                ),
            },
        )),
    }
}

/// The name and mark of the first token of `nonce` in `s`, if any.
fn first_token_name(s: &str, nonce: &Nonce) -> Option<(String, char)> {
    let start = s.find(nonce.forward.as_str())? + nonce.forward.len();
    let rest = &s[start..];
    let mut chars = rest.chars();
    let mark = chars.next()?;
    let name: String = chars
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    Some((name, mark))
}

pub(super) fn install(env: &mut minijinja::Environment<'static>) {
    env.add_filter(GUARD, plain);
}

/// The field's value with each secret's token replaced by its value where `sink` allows it,
/// or an error naming the secret: a token where no secret may go, one of a secret the workflow
/// does not declare, or what is left of a transformed one. `ctx` is the render's context (its
/// `env`); `field` names where `v` sits (`headers.Authorization`) for the error.
pub fn reveal(ctx: &MjValue, v: Value, field: &str, sink: Sink) -> Result<Value, TemplateError> {
    let Ok(env) = ctx.get_attr("env") else {
        return Ok(v);
    };
    let Some(view) = env.downcast_object_ref::<EnvView>() else {
        return Ok(v);
    };
    // Most fields hold no token: one scan of their text, no copy, no paths built.
    if !holds_nonce(&v, &view.nonce) {
        return Ok(v);
    }
    reveal_in(view, v, field, sink)
}

/// Whether any text in `v` holds `nonce`, forward or reversed.
fn holds_nonce(v: &Value, nonce: &Nonce) -> bool {
    match v {
        Value::String(s) => nonce.in_text(s),
        Value::Array(a) => a.iter().any(|x| holds_nonce(x, nonce)),
        Value::Object(m) => m.values().any(|x| holds_nonce(x, nonce)),
        _ => false,
    }
}

fn reveal_in(view: &EnvView, v: Value, path: &str, sink: Sink) -> Result<Value, TemplateError> {
    Ok(match v {
        Value::String(s) => Value::String(reveal_text(view, s, path, sink)?),
        Value::Array(a) => Value::Array(
            a.into_iter()
                .enumerate()
                .map(|(i, x)| reveal_in(view, x, &format!("{path}[{i}]"), sink))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(m) => {
            let mut out = serde_json::Map::with_capacity(m.len());
            for (k, x) in m {
                let p = format!("{path}.{k}");
                out.insert(k, reveal_in(view, x, &p, sink)?);
            }
            Value::Object(out)
        }
        other => other,
    })
}

fn reveal_text(
    view: &EnvView,
    s: String,
    field: &str,
    sink: Sink,
) -> Result<String, TemplateError> {
    let fail = |message: String| TemplateError {
        missing: None,
        field: field.to_string(),
        message,
    };
    if !view.nonce.in_text(&s) {
        return Ok(s);
    }
    let prefix = format!("{OPEN}{}", view.nonce.forward);
    let mut out = String::with_capacity(s.len());
    let mut pos = 0;
    while let Some(found) = s[pos..].find(&prefix) {
        let at = pos + found;
        let after = at + prefix.len();
        let Some((name, mark, end)) = parse_token(&s[after..]).map(|(n, m, e)| (n, m, after + e))
        else {
            break;
        };
        if !view.is_secret_name(name) || mark == POISONED {
            return Err(fail(misuse_message(name, DECLARED)));
        }
        if mark == UNDECLARED {
            return Err(fail(undeclared_message(name)));
        }
        let value = view.secrets.get(name).map(String::as_str).unwrap_or("");
        out.push_str(&s[pos..at]);
        match sink {
            Sink::Whole => out.push_str(value),
            Sink::Masked => out.push_str(&crate::secrets::mask(value)),
            Sink::Url if at == 0 => out.push_str(value),
            Sink::Url if in_userinfo(&s, at, end) => {
                out.push_str(&percent_encoding::utf8_percent_encode(value, USERINFO).to_string())
            }
            Sink::Url | Sink::Nowhere => {
                let where_ = if sink == Sink::Url {
                    "in a URL only its credentials (`https://user:{{ env.PASS }}@host`) or its \
                     very start may be a secret"
                } else {
                    "a secret renders only whole in a header value, a URL's credentials or a \
                     signing secret"
                };
                return Err(fail(format!(
                    "{MESSAGE_PREFIX}{name}` cannot be used in config.{field}: {where_}"
                )));
            }
        }
        pos = end;
    }
    out.push_str(&s[pos..]);
    // What is left holds no whole token: any trace of one is a transformed secret.
    if view.nonce.in_text(&out) {
        let name = view
            .secrets
            .keys()
            .chain(view.undeclared.iter())
            .find(|n| {
                let up = out.to_uppercase();
                let rev: String = n.chars().rev().collect();
                up.contains(&n.to_uppercase()) || up.contains(&rev.to_uppercase())
            })
            .cloned()
            .unwrap_or_else(|| "…".into());
        return Err(fail(misuse_message(&name, DECLARED)));
    }
    Ok(out)
}

/// `MARK NAME CLOSE` at the start of `s`: the name, the mark and the byte offset after CLOSE.
fn parse_token(s: &str) -> Option<(&str, char, usize)> {
    let mut chars = s.char_indices();
    let (_, mark) = chars.next()?;
    if ![DECLARED, UNDECLARED, POISONED].contains(&mark) {
        return None;
    }
    let from = mark.len_utf8();
    let close = s.find(CLOSE)?;
    let name = s.get(from..close)?;
    let valid = !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    valid.then_some((name, mark, close + CLOSE.len_utf8()))
}

/// Whether `at..end` of URL `s` lies in its credentials: after `scheme://`, before the last `@`
/// of the authority.
fn in_userinfo(s: &str, at: usize, end: usize) -> bool {
    let Some(scheme_end) = s.find("://") else {
        return false;
    };
    let auth_start = scheme_end + 3;
    let auth_end = s[auth_start..]
        .find(['/', '?', '#'])
        .map_or(s.len(), |i| auth_start + i);
    match s[auth_start..auth_end].rfind('@') {
        Some(i) => at >= auth_start && end <= auth_start + i,
        None => false,
    }
}

/// RFC 3986 userinfo: everything but unreserved characters is percent-encoded.
const USERINFO: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

#[cfg(test)]
mod tests {
    use super::*;

    fn view() -> EnvView {
        let vars: BTreeMap<String, String> = [
            ("API_KEY", "sk_live_abcdef123456"),
            ("OTHER_TOKEN", "tok_zzzzzzzzzzzz"),
            ("CRM_URL", "http://crm.local"),
            ("PASS", "p@ss:w/rd"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let declared = ["API_KEY".to_string(), "PASS".to_string()].into();
        EnvView::new(
            &vars,
            |n| crate::secrets::is_secret_env(n, &BTreeSet::new()),
            &declared,
        )
    }

    #[test]
    fn tokens_reveal_only_in_their_sinks() {
        let v = view();
        let t = v.nonce.token("API_KEY", DECLARED);
        let header = reveal_text(
            &v,
            format!("Bearer {t}"),
            "headers.Authorization",
            Sink::Whole,
        );
        assert_eq!(header.unwrap(), "Bearer sk_live_abcdef123456");
        let body = reveal_text(&v, format!("key {t}"), "body.note", Sink::Nowhere).unwrap_err();
        assert!(body.message.contains("env.API_KEY"), "{}", body.message);
        assert!(!body.message.contains("sk_live"), "{}", body.message);
        let masked = reveal_text(&v, t.clone(), "preview", Sink::Masked).unwrap();
        assert_eq!(masked, "••••3456");
        let p = v.nonce.token("PASS", DECLARED);
        let url = reveal_text(&v, format!("https://bot:{p}@h.example/x"), "url", Sink::Url);
        assert_eq!(url.unwrap(), "https://bot:p%40ss%3Aw%2Frd@h.example/x");
        assert!(reveal_text(&v, format!("https://h.example/x?k={t}"), "url", Sink::Url).is_err());
        assert_eq!(
            reveal_text(&v, format!("{t}/more"), "url", Sink::Url).unwrap(),
            "sk_live_abcdef123456/more"
        );
    }

    #[test]
    fn transformed_undeclared_and_poisoned_tokens_are_errors_naming_the_secret() {
        let v = view();
        let t = v.nonce.token("API_KEY", DECLARED);
        let reversed: String = t.chars().rev().collect();
        let e = reveal_text(&v, reversed, "headers.X", Sink::Whole).unwrap_err();
        assert!(e.message.contains("env.API_KEY"), "{}", e.message);
        let e = reveal_text(
            &v,
            t.to_uppercase()[..t.len() - 4].to_string(),
            "headers.X",
            Sink::Whole,
        )
        .unwrap_err();
        assert!(e.message.contains("transformed"), "{}", e.message);
        let u = v.nonce.token("OTHER_TOKEN", UNDECLARED);
        let e = reveal_text(&v, u, "headers.X", Sink::Whole).unwrap_err();
        assert!(e.message.contains("not declared"), "{}", e.message);
        let p = v.nonce.token("API_KEY", POISONED);
        assert!(reveal_text(&v, p, "headers.X", Sink::Whole).is_err());
    }

    #[test]
    fn text_that_only_looks_like_a_token_is_left_alone() {
        let v = view();
        let forged = format!("{OPEN}12345:API_KEY{CLOSE}");
        assert_eq!(
            reveal_text(&v, forged.clone(), "headers.X", Sink::Whole).unwrap(),
            forged
        );
    }
}
