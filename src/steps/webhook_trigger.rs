//! `webhook_trigger`: entry point for `POST /hooks/{workflow_id}` with dedupe at the door
//! (SPEC §5). The HTTP side lives in the server; this file owns the config and the rules for
//! finding and validating a delivery's idempotency key.

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{
    parse_config, schema_of, Category, ConfigProblem, Descriptor, StepContext, StepError, StepKind,
    StepOutput,
};

/// Default dedupe window: 24 h, in seconds.
pub const DEFAULT_DEDUPE_WINDOW_S: u64 = 86_400;

/// The key template of a signed delivery when the trigger sets no `dedupe_key`: the event's
/// own id in the signed body.
pub const SIGNED_DEDUPE_KEY: &str = "{{ input.id }}";

/// Webhook trigger config.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Dedupe window, measured from the first delivery of a key and never extended by
    /// repeats: `24h`, `7d`, or a number of seconds (default 86400 = 24 h).
    #[serde(default = "default_window", deserialize_with = "crate::duration::secs")]
    #[schemars(title = "Dedupe window", with = "crate::duration::Seconds")]
    pub dedupe_window_s: u64,
    /// Template over the body used as the key when no `Idempotency-Key` or `X-Fluxo-Event-Id`
    /// header comes, e.g. `{{ input.id }}`. With a `signing_secret` it is always the key
    /// (default `{{ input.id }}`; key headers are ignored), since only the body is signed.
    #[serde(default)]
    #[schemars(title = "Dedupe key")]
    pub dedupe_key: Option<String>,
    /// HMAC-SHA256 secret for `X-Fluxo-Signature: t=<unix s>,v1=<hex HMAC of "<t>.<body>">`
    /// (5-minute tolerance); an `{{ env.NAME }}` template is allowed. When set, unsigned
    /// deliveries are refused (401) and the dedupe key comes from the signed body (see
    /// `dedupe_key`), never from `Idempotency-Key` or `X-Fluxo-Event-Id`.
    #[serde(default)]
    #[schemars(title = "Signing secret")]
    pub signing_secret: Option<String>,
    /// Web origins whose pages may deliver to this webhook from a browser, e.g.
    /// `https://app.example.com` (scheme, host and port as a browser's `Origin` header writes
    /// them: no path, no trailing slash). A request a browser sends on another site's behalf
    /// is refused with 403 `cross_site_request` unless its origin is listed here: one whose
    /// `Sec-Fetch-Site` (W3C Fetch Metadata) is `cross-site` or `same-site`, or, from a browser
    /// without it, whose `Origin` (RFC 6454) is not this server's own. Servers that send
    /// webhooks (Stripe, GitHub, curl) send neither header and are not affected.
    #[serde(default)]
    #[schemars(title = "Allowed origins")]
    pub allowed_origins: Vec<String>,
    /// Example payload offered in the editor's Dry Run panel.
    #[serde(default)]
    #[schemars(title = "Sample input")]
    pub sample_input: Option<Value>,
}

fn default_window() -> u64 {
    DEFAULT_DEDUPE_WINDOW_S
}

impl Default for Config {
    fn default() -> Self {
        Config {
            dedupe_window_s: DEFAULT_DEDUPE_WINDOW_S,
            dedupe_key: None,
            signing_secret: None,
            allowed_origins: Vec::new(),
            sample_input: None,
        }
    }
}

/// A web origin (RFC 6454 §4): `http` or `https`, a host and a port (the scheme's default
/// when none is written), compared as a browser serialises them in `Origin`: scheme and host
/// case-insensitively, `https://a.example` equal to `https://a.example:443`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebOrigin {
    /// `http` or `https`.
    pub scheme: &'static str,
    /// Host (and port, always set: the scheme's default when none was written).
    pub host: crate::settings::HostPort,
}

impl WebOrigin {
    /// Parse `scheme://host[:port]`. `null` (an opaque origin), `*`, a path, a query or user
    /// info are refused with the reason.
    pub fn parse(s: &str) -> Result<WebOrigin, String> {
        let (scheme, rest) = s
            .split_once("://")
            .ok_or("it has no scheme (`https://…`)")?;
        let (scheme, default_port) = if scheme.eq_ignore_ascii_case("https") {
            ("https", 443)
        } else if scheme.eq_ignore_ascii_case("http") {
            ("http", 80)
        } else {
            return Err(format!("the scheme `{scheme}` is not http or https"));
        };
        if rest.contains(['/', '?', '#']) {
            return Err("an origin has no path, query or fragment (no trailing `/` either)".into());
        }
        let mut host = crate::settings::HostPort::parse(rest)?;
        host.port = Some(host.port.unwrap_or(default_port));
        Ok(WebOrigin { scheme, host })
    }
}

/// Workflows as [`unsigned_webhooks`] reads them: the workflow folder
/// ([`crate::workflow::dir::WorkflowDir`]) is one.
pub trait Triggers {
    /// `(workflow id, trigger kind, trigger config)` of every workflow that validates.
    fn triggers(&self) -> Vec<(String, String, Value)>;
}

/// Ids of the workflows in `dir` that start with a `webhook_trigger` without a
/// `signing_secret`: anyone who can reach the listener can start them (browsers on other
/// sites cannot: see `server::door`). Sorted. What the desktop app's first-run notice and
/// `fluxo serve`'s banner name.
pub fn unsigned_webhooks(dir: &impl Triggers) -> Vec<String> {
    let mut ids: Vec<String> = dir
        .triggers()
        .into_iter()
        .filter(|(_, kind, config)| {
            kind == "webhook_trigger"
                && parse_config::<Config>(config).is_ok_and(|c| c.signing_secret.is_none())
        })
        .map(|(id, ..)| id)
        .collect();
    ids.sort();
    ids
}

/// The plain statement the desktop app makes after seeding the templates (in its log and in
/// `app_info.notices`), and `fluxo serve` when it listens beyond loopback: which webhooks take
/// unsigned deliveries, who can reach them, and how to require a signature. `None` when every
/// webhook is signed.
pub fn unsigned_notice(ids: &[String], listener_url: &str) -> Option<String> {
    if ids.is_empty() {
        return None;
    }
    Some(format!(
        "these webhook workflows have no signing secret: {}. Any program that can reach \
         {listener_url} can start them (web pages on other sites cannot: the listener refuses \
         cross-site and non-JSON requests and Host names that are not its own). To accept \
         signed deliveries only, set the trigger's signing_secret to {{{{ env.NAME }}}} and \
         NAME in Settings; senders then sign each delivery with X-Fluxo-Signature.",
        ids.join(", ")
    ))
}

/// Why a delivery's key was refused (answered `400 invalid_idempotency_key`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("{header} is empty")]
    Empty { header: &'static str },
    #[error("{header} is longer than 255 characters ({len})")]
    TooLong { header: &'static str, len: usize },
    #[error("{header} contains a character outside visible ASCII (0x21-0x7E) at position {pos}")]
    BadChar { header: &'static str, pos: usize },
    #[error("{header} is a malformed RFC 8941 quoted string")]
    BadQuoting { header: &'static str },
}

/// Validate a key header value: 1–255 visible ASCII characters (0x21–0x7E), or an RFC 8941
/// sf-string (`"…"` with `\"` and `\\` escapes, as the IETF idempotency-key draft sends it),
/// whose content must then follow the same rule. Returns the key without quotes.
pub fn validate_key(header: &'static str, raw: &str) -> Result<String, KeyError> {
    let key = if raw.len() >= 2 && raw.starts_with('"') && raw.ends_with('"') {
        let inner = &raw[1..raw.len() - 1];
        let mut out = String::with_capacity(inner.len());
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some(e @ ('"' | '\\')) => out.push(e),
                    _ => return Err(KeyError::BadQuoting { header }),
                },
                '"' => return Err(KeyError::BadQuoting { header }),
                c => out.push(c),
            }
        }
        out
    } else {
        raw.to_string()
    };
    check_key_text(header, &key)?;
    Ok(key)
}

/// The key rule alone: 1–255 characters of visible ASCII.
pub fn check_key_text(header: &'static str, key: &str) -> Result<(), KeyError> {
    if key.is_empty() {
        return Err(KeyError::Empty { header });
    }
    if let Some(pos) = key.chars().position(|c| !('\x21'..='\x7e').contains(&c)) {
        return Err(KeyError::BadChar { header, pos });
    }
    if key.len() > 255 {
        return Err(KeyError::TooLong {
            header,
            len: key.len(),
        });
    }
    Ok(())
}

/// The `webhook_trigger` kind.
pub struct WebhookTrigger;

#[async_trait]
impl StepKind for WebhookTrigger {
    fn descriptor(&self) -> Descriptor {
        Descriptor {
            kind: "webhook_trigger",
            title: "Webhook trigger",
            category: Category::Trigger,
            description: "Entry point for POST /hooks/{workflow_id} (JSON bodies; browsers \
                          only from allowed_origins). Dedupes deliveries by Idempotency-Key, \
                          X-Fluxo-Event-Id or the dedupe_key template within the dedupe \
                          window; signed deliveries by the dedupe_key over the signed body only.",
            trigger: true,
            output: "the request body",
            dynamic_ports: false,
            side_effects: false,
        }
    }
    fn config_schema(&self) -> Value {
        schema_of::<Config>()
    }
    fn check(&self, config: &Value) -> Vec<ConfigProblem> {
        let mut problems = Vec::new();
        match parse_config::<Config>(config) {
            Err(p) => problems.extend(p),
            Ok(c) => {
                if c.dedupe_window_s == 0 {
                    problems.push(ConfigProblem {
                        path: "dedupe_window_s".into(),
                        message: "must be at least 1 second".into(),
                    });
                }
                for (i, o) in c.allowed_origins.iter().enumerate() {
                    if let Err(why) = WebOrigin::parse(o) {
                        problems.push(ConfigProblem {
                            path: format!("allowed_origins[{i}]"),
                            message: format!(
                                "`{o}` is not a web origin: {why} (write it as the browser's \
                                 Origin header does, e.g. https://app.example.com)"
                            ),
                        });
                    }
                }
                if c.dedupe_key.as_deref().is_some_and(|k| k.trim().is_empty()) {
                    problems.push(ConfigProblem {
                        path: "dedupe_key".into(),
                        message: "is empty; remove it or give a template such as {{ input.id }}"
                            .into(),
                    });
                }
            }
        }
        problems
    }
    /// The trigger's templates are rendered by the server against the request, not per run.
    fn secret_fields(&self) -> &'static [&'static str] {
        &["signing_secret"]
    }
    fn unrendered_fields(&self) -> &'static [&'static str] {
        &[
            "dedupe_key",
            "signing_secret",
            "allowed_origins",
            "sample_input",
        ]
    }
    async fn run(&self, cx: &StepContext<'_>, _config: Value) -> Result<StepOutput, StepError> {
        Ok(StepOutput::out(cx.input.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_notice_names_the_workflows_and_the_remedy() {
        assert_eq!(unsigned_notice(&[], "http://127.0.0.1:8787"), None);
        let n = unsigned_notice(
            &["a-hook".to_string(), "b-hook".to_string()],
            "http://127.0.0.1:8787",
        )
        .unwrap();
        assert!(n.contains("a-hook, b-hook"), "{n}");
        assert!(n.contains("http://127.0.0.1:8787"), "{n}");
        assert!(n.contains("signing_secret to {{ env.NAME }}"), "{n}");
    }

    #[test]
    fn origins() {
        let o = |s: &str| WebOrigin::parse(s);
        assert_eq!(
            o("https://App.Example.com"),
            o("https://app.example.com:443")
        );
        assert_eq!(o("http://127.0.0.1:8787").unwrap().host.port, Some(8787));
        assert_ne!(o("http://a.example"), o("https://a.example"));
        assert!(o("http://[::1]:3000").is_ok());
        for bad in [
            "null",
            "*",
            "app.example.com",
            "ftp://a.example",
            "https://a.example/",
            "https://a.example/x",
            "https://user@a.example",
            "https://",
        ] {
            assert!(o(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn allowed_origins_are_checked() {
        let p = WebhookTrigger.check(&serde_json::json!({
            "allowed_origins": ["https://ok.example", "https://bad.example/"]
        }));
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].path, "allowed_origins[1]");
    }

    #[test]
    fn key_forms() {
        assert_eq!(validate_key("Idempotency-Key", "evt_1").unwrap(), "evt_1");
        assert_eq!(
            validate_key("Idempotency-Key", "\"evt_1\"").unwrap(),
            "evt_1"
        );
        assert_eq!(
            validate_key("Idempotency-Key", r#""a\"b""#).unwrap(),
            "a\"b"
        );
        assert!(matches!(
            validate_key("Idempotency-Key", ""),
            Err(KeyError::Empty { .. })
        ));
        assert!(matches!(
            validate_key("Idempotency-Key", "\"\""),
            Err(KeyError::Empty { .. })
        ));
        assert!(matches!(
            validate_key("Idempotency-Key", "a b"),
            Err(KeyError::BadChar { pos: 1, .. })
        ));
        assert!(matches!(
            validate_key("Idempotency-Key", "é"),
            Err(KeyError::BadChar { .. })
        ));
        assert!(matches!(
            validate_key("Idempotency-Key", &"x".repeat(256)),
            Err(KeyError::TooLong { .. })
        ));
        assert!(validate_key("Idempotency-Key", &"x".repeat(255)).is_ok());
        assert!(matches!(
            validate_key("Idempotency-Key", r#""a"b""#),
            Err(KeyError::BadQuoting { .. })
        ));
    }
}
