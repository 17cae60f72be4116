//! `http_request`: calls an HTTP endpoint with safe retries inside the run deadline.
//!
//! Retries only timeouts, connection errors, 408, 429 and 5xx (see [`crate::steps::retry`]).
//! The request, including an `Idempotency-Key` header, is rendered once and sent identically on
//! every attempt, so the receiver can dedupe our retries (Stripe idempotent requests; IETF
//! `draft-ietf-httpapi-idempotency-key-header`). A POST/PATCH without one is flagged by the
//! linter. Output: `{status, headers, body, attempts}`; a non-2xx after retries fails the step
//! with `http_status`.
//!
//! The outbound rules ([`crate::steps::outbound`], shared with `publish_output` and
//! `find_or_create`): a host from run data needs `allow_input_host` and is then checked after
//! DNS resolution (`url_not_allowed`); redirects stay within one origin
//! (`redirect_not_followed`); the body is capped at `max_response_bytes`
//! (`response_too_large`). None of these is retried.

use std::collections::BTreeMap;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{
    key_text, parse_config, parse_rendered, schema_of, Category, ConfigProblem, Descriptor,
    OutboundUrl, RepeatSafety, StepContext, StepError, StepKind, StepOutput,
};
use crate::steps::http::HttpCall;
use crate::steps::outbound;
use crate::steps::retry::send_with_retries;

pub use crate::steps::retry::{
    CallPolicy, DEFAULT_BASE_DELAY_MS, DEFAULT_MAX_RETRY_DELAY_S, DEFAULT_RETRIES,
    DEFAULT_TIMEOUT_S,
};

/// HTTP methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
pub enum Method {
    GET,
    POST,
    PUT,
    PATCH,
    DELETE,
    HEAD,
}

impl Method {
    /// The method name.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::GET => "GET",
            Method::POST => "POST",
            Method::PUT => "PUT",
            Method::PATCH => "PATCH",
            Method::DELETE => "DELETE",
            Method::HEAD => "HEAD",
        }
    }
}

/// HTTP request config.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct Config {
    /// `GET`, `POST`, `PUT`, `PATCH`, `DELETE` or `HEAD`.
    #[schemars(title = "Method")]
    pub method: Method,
    /// URL template, e.g. `{{ env.CRM_URL }}/deals`. http or https.
    #[schemars(title = "URL")]
    pub url: String,
    /// Header templates. Put the outbound `Idempotency-Key` here for POST/PATCH.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    #[schemars(title = "Headers")]
    pub headers: BTreeMap<String, Value>,
    /// Query parameter templates.
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    #[schemars(title = "Query parameters")]
    pub query: BTreeMap<String, Value>,
    /// JSON body; templates allowed at any depth.
    #[serde(default)]
    #[schemars(title = "Body")]
    pub body: Option<Value>,
    /// Timeouts, retries and backoff: the call policy every step that calls out shares.
    #[serde(flatten)]
    pub call: CallPolicy,
    /// Let the URL's host come from run data: the trigger input or a step's output
    /// (`{{ input.url }}`, `https://{{ input.domain }}/x`). Off by default, and such a URL is
    /// refused at validation: whoever can send this workflow an event would choose where
    /// Fluxo connects, including services only this machine can reach (SSRF: admin ports,
    /// databases, the cloud metadata service). With it on, the host is checked after DNS
    /// resolution, at every redirect: loopback, private (RFC 1918, RFC 4193), link-local,
    /// CGNAT, unspecified, multicast and cloud-metadata addresses are refused
    /// (`url_not_allowed`) unless listed in settings `outbound_allow`. Hosts written here or
    /// taken from `env.*` are the author's choice and are never checked.
    #[serde(default)]
    #[schemars(title = "Let run data choose the host")]
    pub allow_input_host: bool,
    /// The largest response body read, in **bytes** (default 10485760 = 10 MiB, at most
    /// 104857600). A larger answer fails the step with `response_too_large`; reading stops at
    /// the cap.
    #[serde(default = "default_max_response_bytes")]
    #[schemars(title = "Largest response (bytes)")]
    pub max_response_bytes: u64,
    /// Simulated answer for dry runs: `{"status": 200, "body": {...}}` (default 200 `{}`).
    #[serde(default)]
    #[schemars(title = "Dry-run answer")]
    pub dry_run: Option<Value>,
}

impl Config {
    /// True when the request carries an `Idempotency-Key` header (any case).
    pub fn has_idempotency_key(&self) -> bool {
        self.headers
            .keys()
            .any(|k| k.eq_ignore_ascii_case("idempotency-key"))
    }

    /// Whether sending this request again may duplicate an effect: a POST or PATCH without
    /// an `Idempotency-Key` header (GET, HEAD, PUT and DELETE are idempotent by RFC 9110
    /// §9.2.2). Read by crash recovery, the resume and replay previews and the linter.
    pub fn repeat_safety(&self) -> RepeatSafety {
        if matches!(self.method, Method::POST | Method::PATCH) && !self.has_idempotency_key() {
            RepeatSafety::Unsafe(format!(
                "{} without an Idempotency-Key may have reached the destination",
                self.method.as_str()
            ))
        } else {
            RepeatSafety::Safe
        }
    }
}

pub(crate) fn default_max_response_bytes() -> u64 {
    outbound::DEFAULT_MAX_RESPONSE_BYTES
}

/// Problems of `max_response_bytes`: 1 byte to [`outbound::MAX_MAX_RESPONSE_BYTES`].
pub(crate) fn check_max_response_bytes(v: u64) -> Vec<ConfigProblem> {
    if (1..=outbound::MAX_MAX_RESPONSE_BYTES).contains(&v) {
        return Vec::new();
    }
    vec![ConfigProblem {
        path: "max_response_bytes".into(),
        message: format!(
            "must be between 1 and {} bytes (100 MiB)",
            outbound::MAX_MAX_RESPONSE_BYTES
        ),
    }]
}

/// Whether the live transport must check the host of the URL in config field `field`: the
/// step allows hosts from run data and this URL's host, as written, is one (when the template
/// as written is unknown, it is checked).
pub(crate) fn check_host(cx: &StepContext<'_>, field: &str, allow_input_host: bool) -> bool {
    allow_input_host
        && cx
            .raw_config()
            .and_then(|raw| raw.get(field))
            .and_then(Value::as_str)
            .is_none_or(|t| outbound::host_source(t).is_data())
}

/// Check a URL template that has no template syntax: it must parse as http(s).
pub(crate) fn check_url(url: &str) -> Vec<ConfigProblem> {
    if crate::template::is_template(url) {
        return Vec::new();
    }
    match reqwest::Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") => Vec::new(),
        _ => vec![ConfigProblem {
            path: "url".into(),
            message: format!("`{url}` is not an http(s) URL"),
        }],
    }
}

/// Render header or query values to text pairs; idempotency-key headers must not be empty.
pub(crate) fn text_pairs(
    map: &BTreeMap<String, Value>,
    field: &str,
) -> Result<Vec<(String, String)>, StepError> {
    map.iter()
        .map(|(k, v)| {
            let path = format!("{field}.{k}");
            let text = if k.eq_ignore_ascii_case("idempotency-key") {
                key_text(v, &path)?
            } else {
                match v {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    Value::Number(_) | Value::Bool(_) => v.to_string(),
                    _ => key_text(v, &path)?,
                }
            };
            Ok((k.clone(), text))
        })
        .collect()
}

/// The URL after rendering: must be text.
pub(crate) fn url_text(v: &str) -> Result<String, StepError> {
    if v.trim().is_empty() {
        return Err(StepError::new(
            "config",
            "config.url rendered to an empty URL",
        ));
    }
    Ok(v.to_string())
}

/// The `http_request` kind.
pub struct HttpRequest;

#[async_trait]
impl StepKind for HttpRequest {
    fn descriptor(&self) -> Descriptor {
        Descriptor {
            kind: "http_request",
            title: "HTTP request",
            category: Category::Network,
            description: "Calls an HTTP endpoint. Retries only timeouts, connection errors, 408, \
                          429 and 5xx, with backoff and jitter, inside the run deadline; never \
                          another 4xx: 409 Conflict and 423 Locked are answers, not transient \
                          faults, so they are not retried (nor repeated by a resume without a \
                          person). Send an Idempotency-Key header on POST/PATCH: it also lets \
                          crash recovery repeat the call safely.",
            trigger: false,
            output: "{status, headers, body, attempts}",
            dynamic_ports: false,
            side_effects: true,
        }
    }
    fn config_schema(&self) -> Value {
        schema_of::<Config>()
    }
    fn repeat_safety(&self, config: &Value) -> RepeatSafety {
        match serde_json::from_value::<Config>(config.clone()) {
            Ok(c) => c.repeat_safety(),
            // A config that does not parse never ran: repeating it cannot duplicate anything.
            Err(_) => RepeatSafety::Safe,
        }
    }
    fn check(&self, config: &Value) -> Vec<ConfigProblem> {
        match parse_config::<Config>(config) {
            Err(p) => p,
            Ok(c) => {
                let mut p = c.call.problems();
                p.extend(check_url(&c.url));
                p.extend(check_max_response_bytes(c.max_response_bytes));
                p
            }
        }
    }
    fn outbound_urls(&self, config: &Value) -> Vec<OutboundUrl> {
        match serde_json::from_value::<Config>(config.clone()) {
            Ok(c) => vec![OutboundUrl {
                field: "url",
                template: c.url,
                allow_input_host: c.allow_input_host,
            }],
            Err(_) => Vec::new(),
        }
    }
    fn secret_fields(&self) -> &'static [&'static str] {
        &["headers"]
    }
    fn unrendered_fields(&self) -> &'static [&'static str] {
        &["dry_run"]
    }
    async fn run(&self, cx: &StepContext<'_>, config: Value) -> Result<StepOutput, StepError> {
        let c: Config = parse_rendered(config)?;
        let call = HttpCall {
            headers: text_pairs(&c.headers, "headers")?,
            query: text_pairs(&c.query, "query")?,
            body: c.body,
            check_host: check_host(cx, "url", c.allow_input_host),
            max_response_bytes: c.max_response_bytes,
            ..HttpCall::new(c.method.as_str(), url_text(&c.url)?)
        };
        let policy = c.call.retry_policy();
        let answer = send_with_retries(cx, &call, &policy, c.dry_run.as_ref()).await?;
        let attempts = cx.attempt_count();
        Ok(StepOutput::out(json!({
            "status": answer.status,
            "headers": answer.headers,
            "body": answer.body,
            "attempts": attempts,
        })))
    }
}
