//! Secrets are never stored or shown (SPEC §5, "The door and outbound calls"): the one place
//! that decides what is secret, how it is masked, and how files holding secrets are protected.
//!
//! # What is masked
//!
//! * **Secret env variables**: a variable is secret when its name contains one of
//!   [`SECRET_ENV_WORDS`] (`KEY`, `TOKEN`, `SECRET`, `PASSWORD`, `AUTH`, …; case-insensitive,
//!   e.g. `API_KEY`, `GITHUB_TOKEN`, `DB_PASSWORD`) or is listed in the settings'
//!   `secret_env`. Other variables (`CRM_URL`, `REGION`) are configuration and stay visible,
//!   as GitHub Actions masks its *secrets* but not its *variables*. Every occurrence of a
//!   secret value of at least [`MIN_SECRET_CHARS`] characters inside a recorded string is
//!   replaced by its mask, wherever a template put it (a header, a URL, a body, an error).
//! * **Secret fields**: the value of a header, query parameter or JSON field whose name looks
//!   secret ([`is_secret_field`]: `Authorization`, `Proxy-Authorization`, `Cookie`,
//!   `Set-Cookie`, `*-Key`/`*_key`, `*token*`, `*secret*`, `*password*`, `*passwd*`,
//!   `*credential*`, `*apikey*`), at any depth, whatever its source (an env variable, a
//!   literal, a response). `Idempotency-Key` and `dedupe_key` are business data that testers
//!   must see: never masked. An `Authorization` value keeps its scheme (`Bearer ••••3456`).
//! * **URLs**: the password of `scheme://user:password@host` and the value of a query
//!   parameter with a secret name (`?api_key=…`), in any recorded string.
//!
//! # The mask
//!
//! `••••` followed by the last 4 characters when the value has at least [`TAIL_MIN_CHARS`]
//! characters (`••••3456`), else `••••` alone: a short secret would be guessable from its
//! tail. Masking is idempotent: a masked value is never masked again.
//!
//! # Where it applies
//!
//! The executor masks each step record as it makes it ([`Masker::step_record`]: resolved
//! config, output, error, attempts) and the run's final error and warnings
//! ([`Masker::run_outcome`]), so the record is masked before anything reads it: the store,
//! `fluxo runs show`, the API's run detail, previews, the UI and its exports, and every log
//! line that quotes a record. Templates of the same run still see the real values (the
//! destination receives the real header). Not masked: the run's `input` (the delivered body,
//! kept verbatim so a replay sends the same event) and `snapshot` (the definition as written:
//! keep secrets in env, not in workflow files). A resume reuses recorded outputs as stored,
//! so a step that reads a secret from an earlier step's output (a login token) gets the mask
//! on resume: resume from the step that fetched it (`from_step`).
//!
//! The settings API shows secret env values masked ([`mask`]) and keeps the stored value
//! when that mask comes back ([`crate::settings::AppSettings::resolve_masked`]).
//!
//! # Files
//!
//! [`secure_dir`] and [`secure_file`] give the data dir, the store dir and files holding
//! secrets owner-only modes (0700, 0600), set explicitly whatever the umask, tightening what
//! an older version left open (with a log line).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::Value;

use crate::run::{ErrorInfo, RunRecord, StepRecord};

/// The mask's prefix, and the whole mask of a short secret.
pub const MASK: &str = "••••";
/// Env values shorter than this (in characters) are not searched for in records: masking
/// every `1` or `true` would hide everything. They are still masked in secret fields.
pub const MIN_SECRET_CHARS: usize = 6;
/// A masked value keeps its last [`TAIL_CHARS`] characters only when it has at least this
/// many characters.
pub const TAIL_MIN_CHARS: usize = 12;
/// Characters of a long secret kept after the mask.
pub const TAIL_CHARS: usize = 4;

/// An env variable whose name contains one of these (upper-cased) is secret.
pub const SECRET_ENV_WORDS: &[&str] = &[
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "PWD",
    "AUTH",
    "CREDENTIAL",
    "PRIVATE",
    "COOKIE",
    "SESSION",
];

/// Field names (lower-cased, `_` read as `-`) that are secret whole.
const SECRET_FIELDS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
];
/// Field names (same normalisation) that are secret when they contain one of these.
const SECRET_FIELD_PARTS: &[&str] = &[
    "token",
    "secret",
    "password",
    "passwd",
    "credential",
    "apikey",
    "api-key",
    "authorization",
    "cookie",
];
/// Field names that look secret but are business data (`*-key` exceptions).
const PUBLIC_FIELDS: &[&str] = &["idempotency-key", "x-idempotency-key", "dedupe-key"];
/// `Authorization` schemes kept in front of the masked credentials.
const AUTH_SCHEMES: &[&str] = &["bearer", "basic", "token", "bot"];

/// The mask of `secret`: `••••` plus its last 4 characters when it has at least 12, else
/// `••••` alone. A value that is already masked is answered as it is.
pub fn mask(secret: &str) -> String {
    if is_masked(secret) {
        return secret.to_string();
    }
    let n = secret.chars().count();
    if n >= TAIL_MIN_CHARS {
        let tail: String = secret.chars().skip(n - TAIL_CHARS).collect();
        format!("{MASK}{tail}")
    } else {
        MASK.to_string()
    }
}

/// True when `s` is a mask ([`mask`]'s answer), e.g. a placeholder sent back by the UI.
pub fn is_masked(s: &str) -> bool {
    s.starts_with(MASK)
}

/// Whether an env variable is secret: its name contains one of [`SECRET_ENV_WORDS`]
/// (case-insensitive), or it is in `flagged` (the settings' `secret_env`).
pub fn is_secret_env(name: &str, flagged: &BTreeSet<String>) -> bool {
    if flagged.contains(name) {
        return true;
    }
    let up = name.to_ascii_uppercase();
    SECRET_ENV_WORDS.iter().any(|w| up.contains(w))
}

/// Whether a header, query parameter or JSON field name is secret (case-insensitive, `_` and
/// `-` alike): `Authorization`, `Proxy-Authorization`, `Cookie`, `Set-Cookie`, names ending in
/// `-key`, and names containing `token`, `secret`, `password`, `passwd`, `credential`,
/// `apikey`; never `Idempotency-Key` nor `dedupe_key`.
pub fn is_secret_field(name: &str) -> bool {
    // Called for every key of every record: no allocation for names up to 64 bytes.
    let norm = |b: u8| {
        if b == b'_' {
            b'-'
        } else {
            b.to_ascii_lowercase()
        }
    };
    let mut buf = [0u8; 64];
    let owned: Vec<u8>;
    let n: &[u8] = if name.len() <= buf.len() {
        for (i, b) in name.bytes().enumerate() {
            buf[i] = norm(b);
        }
        &buf[..name.len()]
    } else {
        owned = name.bytes().map(norm).collect();
        &owned
    };
    let has = |p: &str| n.windows(p.len()).any(|w| w == p.as_bytes());
    if PUBLIC_FIELDS.iter().any(|p| n == p.as_bytes()) {
        return false;
    }
    SECRET_FIELDS.iter().any(|p| n == p.as_bytes())
        || n.ends_with(b"-key")
        || SECRET_FIELD_PARTS.iter().any(|p| has(p))
}

/// The mask of a secret field's value: an `Authorization`-style `<scheme> <credentials>`
/// keeps its scheme (`Bearer ••••3456`); anything else is masked whole.
pub fn mask_field_value(v: &str) -> String {
    if let Some((scheme, cred)) = v.split_once(' ') {
        if AUTH_SCHEMES.iter().any(|s| s.eq_ignore_ascii_case(scheme)) && !cred.contains(' ') {
            return format!("{scheme} {}", mask(cred));
        }
    }
    mask(v)
}

/// Masks records with the secret env values of one moment (see the module doc), plus the
/// secrets a run reveals as it goes ([`Masker::learn`]). Build one per change of the env
/// ([`crate::runtime::Engine::masker`]); each run takes its own copy.
#[derive(Debug, Clone, Default)]
pub struct Masker {
    /// Secret values of at least [`MIN_SECRET_CHARS`] characters and their masks, longest
    /// first (a secret that contains another is replaced whole).
    values: Vec<(String, String)>,
}

impl Masker {
    /// A masker over the variables `env` (name → value): the secret ones ([`is_secret_env`]
    /// with `flagged`) of at least [`MIN_SECRET_CHARS`] characters are searched for.
    pub fn new(env: &BTreeMap<String, String>, flagged: &BTreeSet<String>) -> Self {
        let mut values: Vec<(String, String)> = env
            .iter()
            .filter(|(k, v)| is_secret_env(k, flagged) && v.chars().count() >= MIN_SECRET_CHARS)
            .map(|(_, v)| (v.clone(), mask(v)))
            .collect();
        values.sort_by(|a, b| b.0.len().cmp(&a.0.len()).then_with(|| a.0.cmp(&b.0)));
        values.dedup_by(|a, b| a.0 == b.0);
        Masker { values }
    }

    /// How many secret values are searched for.
    pub fn secret_count(&self) -> usize {
        self.values.len()
    }

    /// Search for `secret` too (from now on), if it has at least [`MIN_SECRET_CHARS`]
    /// characters and is not a mask.
    pub fn add(&mut self, secret: &str) {
        if secret.chars().count() < MIN_SECRET_CHARS || is_masked(secret) {
            return;
        }
        let pos = self.values.binary_search_by(|(v, _)| {
            secret
                .len()
                .cmp(&v.len())
                .then_with(|| v.as_str().cmp(secret))
        });
        if let Err(i) = pos {
            self.values.insert(i, (secret.to_string(), mask(secret)));
        }
    }

    /// Learn the secrets a record reveals, as GitHub Actions' `add-mask` does: every string
    /// under a secret field name in `v` (an `Authorization` header's credentials, a
    /// `Set-Cookie`'s value, a login answer's `access_token`) is masked wherever a later
    /// record repeats it under any name (a transform that copies the cookie).
    pub fn learn(&mut self, v: &Value) {
        self.learn_walk(v, false)
    }

    fn learn_walk(&mut self, v: &Value, secret: bool) {
        match v {
            Value::String(s) if secret => {
                self.add(s);
                // The credentials of `Bearer <credentials>`; the value of `name=value; …`.
                if let Some((scheme, cred)) = s.split_once(' ') {
                    if AUTH_SCHEMES.iter().any(|a| a.eq_ignore_ascii_case(scheme)) {
                        self.add(cred);
                    }
                }
                if let Some((_, rest)) = s.split_once('=') {
                    self.add(rest.split(';').next().unwrap_or(rest).trim());
                }
            }
            Value::Array(a) => a.iter().for_each(|x| self.learn_walk(x, secret)),
            Value::Object(m) => {
                for (k, x) in m {
                    self.learn_walk(x, secret || is_secret_field(k));
                }
            }
            _ => {}
        }
    }

    /// `s` with every secret env value, URL password and secret query parameter masked;
    /// borrowed when nothing changed.
    pub fn text<'a>(&self, s: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(s);
        for (secret, masked) in &self.values {
            if out.contains(secret.as_str()) {
                out = Cow::Owned(out.replace(secret.as_str(), masked));
            }
        }
        if out.contains("://") {
            if let Some(m) = mask_urls(&out) {
                out = Cow::Owned(m);
            }
        }
        out
    }

    /// Mask a JSON value in place: strings through [`Masker::text`], and every string under a
    /// secret field name ([`is_secret_field`]) whole.
    pub fn value(&self, v: &mut Value) {
        self.walk(v, false)
    }

    fn walk(&self, v: &mut Value, secret: bool) {
        match v {
            Value::String(s) => {
                let masked = if secret {
                    Some(mask_field_value(s))
                } else {
                    match self.text(s) {
                        Cow::Borrowed(_) => None,
                        Cow::Owned(m) => Some(m),
                    }
                };
                if let Some(m) = masked {
                    *s = m;
                }
            }
            Value::Array(a) => a.iter_mut().for_each(|x| self.walk(x, secret)),
            Value::Object(m) => {
                for (k, x) in m.iter_mut() {
                    self.walk(x, secret || is_secret_field(k));
                }
            }
            _ => {}
        }
    }

    /// Mask an error's message in place.
    pub fn error(&self, e: &mut ErrorInfo) {
        if let Cow::Owned(m) = self.text(&e.message) {
            e.message = m;
        }
    }

    /// Learn from a step record ([`Masker::learn`]), then mask it in place: its resolved
    /// config, its output (unless `keep_output`: the trigger's output is the run input, kept
    /// verbatim and not learned from), its error and its attempts' errors.
    pub fn step_record(&mut self, rec: &mut StepRecord, keep_output: bool) {
        self.learn(&rec.resolved_config);
        if !keep_output {
            if let Some(o) = rec.output.as_ref() {
                self.learn(o);
            }
        }
        self.value(&mut rec.resolved_config);
        if !keep_output {
            if let Some(o) = rec.output.as_mut() {
                self.value(o);
            }
        }
        if let Some(e) = rec.error.as_mut() {
            self.error(e);
        }
        for a in &mut rec.attempts {
            if let Some(Cow::Owned(m)) = a.error.as_deref().map(|m| self.text(m)) {
                a.error = Some(m);
            }
        }
    }

    /// Mask a run's final error and warnings in place.
    pub fn run_outcome(&self, run: &mut RunRecord) {
        if let Some(e) = run.error.as_mut() {
            self.error(e);
        }
        for w in &mut run.warnings {
            if let Cow::Owned(m) = self.text(w) {
                *w = m;
            }
        }
    }
}

/// Mask URL passwords (`scheme://user:password@host`) and the values of secret query
/// parameters (`?api_key=…`) in `s`; `None` when there is nothing to mask.
fn mask_urls(s: &str) -> Option<String> {
    let ends_url = |c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`');
    let mut out = String::with_capacity(s.len());
    let mut changed = false;
    let mut rest = s;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        let end = tail.find(ends_url).unwrap_or(tail.len());
        let (url, after) = tail.split_at(end);
        let masked = mask_url(url);
        changed |= masked != url;
        out.push_str(&masked);
        rest = after;
    }
    out.push_str(rest);
    changed.then_some(out)
}

/// One URL after its `://`: authority password and secret query values masked.
fn mask_url(url: &str) -> String {
    let auth_end = url.find(['/', '?', '#']).unwrap_or(url.len());
    let (authority, path) = url.split_at(auth_end);
    let mut out = String::with_capacity(url.len());
    match authority.rfind('@') {
        Some(at) => {
            let (userinfo, host) = authority.split_at(at);
            match userinfo.split_once(':') {
                Some((user, pass)) if !pass.is_empty() => {
                    out.push_str(user);
                    out.push(':');
                    out.push_str(&mask(pass));
                }
                _ => out.push_str(userinfo),
            }
            out.push_str(host);
        }
        None => out.push_str(authority),
    }
    let Some(q) = path.find('?') else {
        out.push_str(path);
        return out;
    };
    out.push_str(&path[..=q]);
    let query = &path[q + 1..];
    let (query, fragment) = match query.find('#') {
        Some(h) => query.split_at(h),
        None => (query, ""),
    };
    for (i, pair) in query.split('&').enumerate() {
        if i > 0 {
            out.push('&');
        }
        match pair.split_once('=') {
            Some((k, v)) if !v.is_empty() && is_secret_field(k) => {
                out.push_str(k);
                out.push('=');
                out.push_str(&mask(v));
            }
            _ => out.push_str(pair),
        }
    }
    out.push_str(fragment);
    out
}

/// Create `dir` (and missing parents) with mode 0700, or tighten an existing one to 0700
/// when group or others have any access (logged). Answers the mode it had when it was
/// tightened (`Some(0o755)`), `None` when nothing changed. The mode is set explicitly, so
/// the umask does not matter. No-op on non-Unix systems.
pub fn secure_dir(dir: &Path) -> std::io::Result<Option<u32>> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        if !dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
            // `mkdir` applies the umask: make 0700 exact.
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
            return Ok(None);
        }
        tighten(dir, 0o700)
    }
    #[cfg(not(unix))]
    {
        std::fs::create_dir_all(dir)?;
        Ok(None)
    }
}

/// Tighten an existing file holding secrets to 0600 when group or others have any access
/// (logged); answers the old mode when it changed. A missing file is `Ok(None)`.
pub fn secure_file(path: &Path) -> std::io::Result<Option<u32>> {
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
        Ok(_) => tighten(path, 0o600),
    }
}

/// Every file under `dir` to 0600 and every directory to 0700 (those that are more open),
/// `dir` included (created 0700 if missing); answers how many paths were tightened, without
/// logging (the caller knows whether that is news). For sled's files, which sled creates with
/// the umask's modes.
pub fn secure_tree(dir: &Path) -> std::io::Result<usize> {
    let mut changed = if dir.exists() {
        usize::from(tighten_quiet(dir, 0o700)?.is_some())
    } else {
        secure_dir(dir)?;
        0
    };
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let ty = e.file_type()?;
            if ty.is_dir() {
                changed += usize::from(tighten_quiet(&e.path(), 0o700)?.is_some());
                stack.push(e.path());
            } else if ty.is_file() {
                changed += usize::from(tighten_quiet(&e.path(), 0o600)?.is_some());
            }
        }
    }
    Ok(changed)
}

fn tighten(path: &Path, mode: u32) -> std::io::Result<Option<u32>> {
    let old = tighten_quiet(path, mode)?;
    if let Some(old) = old {
        tracing::warn!(
            path = %path.display(),
            from = %format!("{old:04o}"),
            to = %format!("{mode:04o}"),
            "tightened permissions: it holds secrets, owner-only access"
        );
    }
    Ok(old)
}

/// Set `mode` when group or others have any access. A file system that refuses (not the
/// owner, no Unix permissions) is logged, not fatal: the data stays usable.
#[cfg(unix)]
fn tighten_quiet(path: &Path, mode: u32) -> std::io::Result<Option<u32>> {
    use std::os::unix::fs::PermissionsExt;
    let old = std::fs::symlink_metadata(path)?.permissions().mode() & 0o7777;
    if old & 0o077 == 0 {
        return Ok(None);
    }
    match std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)) {
        Ok(()) => Ok(Some(old)),
        Err(e) => {
            tracing::warn!(
                path = %path.display(),
                mode = %format!("{old:04o}"),
                error = %e,
                "cannot make this owner-only: other users may read it"
            );
            Ok(None)
        }
    }
}

#[cfg(not(unix))]
fn tighten_quiet(_path: &Path, _mode: u32) -> std::io::Result<Option<u32>> {
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn masker(vars: &[(&str, &str)]) -> Masker {
        let env = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Masker::new(&env, &BTreeSet::new())
    }

    #[test]
    fn masks_keep_a_tail_only_on_long_values() {
        assert_eq!(mask("sk_live_0123456789"), "••••6789");
        assert_eq!(mask("abcdefghijkl"), "••••ijkl");
        assert_eq!(mask("abcdefghijk"), "••••");
        assert_eq!(mask(""), "••••");
        assert_eq!(mask("••••6789"), "••••6789", "idempotent");
        assert_eq!(mask("ünïcødé-sëcrét"), "••••crét");
    }

    #[test]
    fn field_names() {
        for n in [
            "Authorization",
            "proxy-authorization",
            "Cookie",
            "Set-Cookie",
            "X-Api-Key",
            "api_key",
            "x-access-token",
            "client_secret",
            "password",
            "DB_PASSWD",
            "apikey",
            "credentials",
            "private_key",
        ] {
            assert!(is_secret_field(n), "{n}");
        }
        for n in [
            "Idempotency-Key",
            "idempotency_key",
            "dedupe_key",
            "key",
            "X-Fluxo-Event-Id",
            "Content-Type",
            "namespace",
            "url",
            "keyboard",
        ] {
            assert!(!is_secret_field(n), "{n}");
        }
    }

    #[test]
    fn env_names() {
        let none = BTreeSet::new();
        for n in [
            "API_KEY",
            "GITHUB_TOKEN",
            "DB_PASSWORD",
            "HOOK_SECRET",
            "OAUTH_CLIENT",
        ] {
            assert!(is_secret_env(n, &none), "{n}");
        }
        for n in ["CRM_URL", "REGION", "BASE_URL"] {
            assert!(!is_secret_env(n, &none), "{n}");
        }
        let flagged: BTreeSet<String> = ["SLACK_WEBHOOK_URL".to_string()].into();
        assert!(is_secret_env("SLACK_WEBHOOK_URL", &flagged));
    }

    #[test]
    fn authorization_keeps_its_scheme() {
        assert_eq!(
            mask_field_value("Bearer sk_live_0123456789"),
            "Bearer ••••6789"
        );
        assert_eq!(mask_field_value("Basic dXNlcjpw"), "Basic ••••");
        assert_eq!(mask_field_value("correct horse battery"), "••••tery");
        assert_eq!(mask_field_value("Bearer ••••6789"), "Bearer ••••6789");
    }

    #[test]
    fn env_values_are_masked_anywhere_in_strings() {
        let m = masker(&[
            ("API_KEY", "sk_live_0123456789"),
            ("CRM_URL", "http://127.0.0.1:8788"),
            ("SHORT_TOKEN", "abc"),
        ]);
        assert_eq!(
            m.secret_count(),
            1,
            "not CRM_URL (not secret), not abc (short)"
        );
        let mut v = json!({
            "url": "http://127.0.0.1:8788/deals?k=sk_live_0123456789",
            "body": {"note": ["x sk_live_0123456789 y"], "n": 3},
            "headers": {"Idempotency-Key": "evt_1", "X-Custom": "abc"},
        });
        m.value(&mut v);
        assert_eq!(
            v,
            json!({
                "url": "http://127.0.0.1:8788/deals?k=••••6789",
                "body": {"note": ["x ••••6789 y"], "n": 3},
                "headers": {"Idempotency-Key": "evt_1", "X-Custom": "abc"},
            })
        );
    }

    #[test]
    fn secret_fields_are_masked_at_any_depth() {
        let m = Masker::default();
        let mut v = json!({
            "headers": {
                "Authorization": "Bearer sk_live_0123456789",
                "set-cookie": ["session=abcdefghijklmnop; Path=/", "b=1"],
                "Idempotency-Key": "evt_1Pgc76B7WZ01zgkWwyRHS12y",
            },
            "body": {"user": {"password": "hunter2", "name": "ann"}, "max_tokens": 256},
        });
        m.value(&mut v);
        assert_eq!(v["headers"]["Authorization"], "Bearer ••••6789");
        assert_eq!(v["headers"]["set-cookie"], json!(["••••th=/", "••••"]));
        assert_eq!(
            v["headers"]["Idempotency-Key"],
            "evt_1Pgc76B7WZ01zgkWwyRHS12y"
        );
        assert_eq!(
            v["body"]["user"],
            json!({"password": "••••", "name": "ann"})
        );
        assert_eq!(v["body"]["max_tokens"], 256, "numbers are not masked");
        let again = v.clone();
        m.value(&mut v);
        assert_eq!(v, again, "idempotent");
    }

    #[test]
    fn urls() {
        let m = Masker::default();
        assert_eq!(
            m.text("see postgres://app:s3cr3t-pass@db:5432/x now"),
            "see postgres://app:••••@db:5432/x now"
        );
        assert_eq!(
            m.text("GET https://h/p?a=1&api_key=0123456789abcdef&token=x#frag"),
            "GET https://h/p?a=1&api_key=••••cdef&token=••••#frag"
        );
        assert!(matches!(m.text("https://h/p?a=1"), Cow::Borrowed(_)));
        assert!(matches!(m.text("no url at all"), Cow::Borrowed(_)));
        assert_eq!(m.text("https://user@h/"), "https://user@h/");
    }

    #[test]
    fn secrets_a_record_reveals_are_masked_in_later_records() {
        let mut m = Masker::default();
        let mut first = StepRecord {
            step_id: "login".into(),
            kind: "http_request".into(),
            status: crate::run::StepStatus::Succeeded,
            started_at: Default::default(),
            finished_at: None,
            duration_ms: 0,
            resolved_config: json!({"headers": {"Authorization": "Bearer literal-credential-1"}}),
            output: Some(json!({
                "headers": {"set-cookie": "sid=cookie-value-123456; Path=/"},
                "body": {"access_token": "tok-abcdefghijkl", "user": "ann"}
            })),
            error: None,
            attempts: Vec::new(),
            ports: Vec::new(),
            reused_from: None,
        };
        m.step_record(&mut first, false);
        assert_eq!(first.output.as_ref().unwrap()["body"]["user"], "ann");
        let mut later = json!({"copy": [
            "tok-abcdefghijkl", "cookie-value-123456", "x literal-credential-1", "Bearer"
        ]});
        m.value(&mut later);
        assert_eq!(
            later,
            json!({"copy": ["••••ijkl", "••••3456", "x ••••al-1", "Bearer"]})
        );
    }

    #[test]
    fn longest_secret_first() {
        let m = masker(&[("A_KEY", "abcdef"), ("B_KEY", "abcdefghijklmnop")]);
        assert_eq!(m.text("abcdefghijklmnop abcdef"), "••••mnop ••••");
    }

    #[cfg(unix)]
    #[test]
    fn dirs_and_files_become_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let t = tempfile::tempdir().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let d = t.path().join("a/b");
        assert_eq!(secure_dir(&d).unwrap(), None);
        assert_eq!(mode(&d), 0o700);
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(secure_dir(&d).unwrap(), Some(0o755));
        assert_eq!(mode(&d), 0o700);
        let f = d.join("f");
        std::fs::write(&f, "x").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(secure_file(&f).unwrap(), Some(0o644));
        assert_eq!(mode(&f), 0o600);
        assert_eq!(secure_file(&d.join("missing")).unwrap(), None);
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(secure_tree(&d).unwrap(), 2);
        assert_eq!((mode(&d), mode(&f)), (0o700, 0o600));
    }
}
