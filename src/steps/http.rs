//! The HTTP transport steps send through: live (reqwest) or simulated (dry runs).
//!
//! The live transport applies the outbound rules of [`super::outbound`]: hosts from run data
//! checked after DNS resolution, redirects within one origin, responses capped.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

use super::outbound::{self, OutboundPolicy, PolicyResolver, Refused, MAX_REDIRECTS};

/// One outbound request, built once per step execution and sent identically on each attempt.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpCall {
    pub method: String,
    pub url: String,
    /// Header names as written; values as sent.
    pub headers: Vec<(String, String)>,
    pub query: Vec<(String, String)>,
    /// JSON body (`None` = no body).
    pub body: Option<Value>,
    /// The URL's host was rendered from run data (the step allows it with `allow_input_host`):
    /// the live transport refuses it (`url_not_allowed`) when it is, or resolves to, a
    /// non-public address not in settings `outbound_allow` ([`super::outbound`]). `false` for
    /// hosts the author wrote or took from `env.*`.
    pub check_host: bool,
    /// The most response body bytes read; a larger answer is `response_too_large`.
    pub max_response_bytes: u64,
}

impl HttpCall {
    /// A call with no headers, query or body, a host the author chose and the default cap
    /// ([`outbound::DEFAULT_MAX_RESPONSE_BYTES`]).
    pub fn new(method: &str, url: impl Into<String>) -> Self {
        HttpCall {
            method: method.to_string(),
            url: url.into(),
            headers: Vec::new(),
            query: Vec::new(),
            body: None,
            check_host: false,
            max_response_bytes: outbound::DEFAULT_MAX_RESPONSE_BYTES,
        }
    }
}

/// An answer, whatever its status.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpAnswer {
    pub status: u16,
    /// Lower-case header names; repeated headers joined with ", ".
    pub headers: BTreeMap<String, String>,
    /// JSON if the body parses as JSON, else the text, else `null` when empty.
    pub body: Value,
}

impl HttpAnswer {
    /// A header by lower-case name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

/// Why no answer came.
#[derive(Debug, Clone, PartialEq)]
pub enum TransportError {
    /// The attempt's timeout passed.
    Timeout,
    /// Connect failure, reset, closed connection, TLS failure.
    Connection(String),
    /// The request cannot be sent as built (bad URL, bad header): not retried.
    Invalid(String),
    /// An outbound rule stopped the call (`url_not_allowed` before any connection,
    /// `redirect_not_followed`, `response_too_large`): not retried. `status` is the answer's
    /// status when one came (the redirect's 3xx, the too-large answer's status).
    Refused {
        code: &'static str,
        message: String,
        status: Option<u16>,
    },
}

impl TransportError {
    fn refused(r: Refused, status: Option<u16>) -> Self {
        TransportError::Refused {
            code: r.code,
            message: r.message,
            status,
        }
    }
}

/// Sends requests.
#[async_trait]
pub trait HttpTransport: Send + Sync {
    /// Send one attempt. `dry_sample` is the step's simulated answer (used by the simulated
    /// transport only).
    async fn send(
        &self,
        call: &HttpCall,
        timeout: Duration,
        dry_sample: Option<&Value>,
    ) -> Result<HttpAnswer, TransportError>;
}

/// The real network, through reqwest clients: one for hosts the author chose (pooled, the
/// system's proxy settings apply) and others for hosts from run data (every address checked
/// by the resolver, never pooled, never through a proxy, which would resolve the name itself).
/// All follow redirects within one origin only.
///
/// The resolver of a client for hosts from run data must know the port the connection goes
/// to, since an `outbound_allow` entry may allow one port only (`127.0.0.1:9000`), and reqwest
/// gives a resolver the name alone (`PolicyResolver`). So there is one such client for every
/// port some entry names, built when first needed, whose resolver checks with that port, and
/// one for every other port, whose resolver counts only the entries without a port (for a port
/// no entry names, those are exactly the entries that allow it). A call picks its client by
/// its URL's port; a same-origin redirect keeps the port.
#[derive(Debug, Clone)]
pub struct LiveHttp {
    open: reqwest::Client,
    /// Hosts from run data, on a port no `outbound_allow` entry names.
    checked: reqwest::Client,
    /// Hosts from run data, on a port some entry names: one client per port (ports no longer
    /// named are dropped when another is picked).
    checked_on: Arc<Mutex<HashMap<u16, reqwest::Client>>>,
    policy: Arc<OutboundPolicy>,
}

impl Default for LiveHttp {
    fn default() -> Self {
        Self::new()
    }
}

impl LiveHttp {
    /// The network with a policy of its own (the system resolver; the allowlist of
    /// [`outbound::ALLOW_ENV`] only).
    pub fn new() -> Self {
        Self::with_policy(Arc::new(OutboundPolicy::default()))
    }

    /// The network under `policy` (its allowlist and resolver; the engine shares its own).
    pub fn with_policy(policy: Arc<OutboundPolicy>) -> Self {
        LiveHttp {
            open: build_client(&policy, false, None).unwrap_or_else(|_| reqwest::Client::new()),
            checked: build_client(&policy, true, None).unwrap_or_else(|_| reqwest::Client::new()),
            checked_on: Arc::default(),
            policy,
        }
    }

    /// The client for a host from run data on `port`: the one whose resolver checks with that
    /// port when an `outbound_allow` entry names it, else the one that counts only entries
    /// without a port. (Should the entries change before the resolver runs, it checks against
    /// the new ones; with the port it knows, or with none, which allows no more than any port.)
    fn checked_client(&self, port: Option<u16>) -> reqwest::Client {
        let allow = self.policy.allow();
        let Some(port) = port.filter(|&p| allow.names_port(p)) else {
            return self.checked.clone();
        };
        let mut on = self.checked_on.lock().unwrap_or_else(|e| e.into_inner());
        on.retain(|&p, _| allow.names_port(p));
        if let Some(c) = on.get(&port) {
            return c.clone();
        }
        match build_client(&self.policy, true, Some(port)) {
            Ok(c) => on.entry(port).or_insert(c).clone(),
            // Never seen (the TLS setup failed): the client for unnamed ports allows less.
            Err(_) => self.checked.clone(),
        }
    }

    /// The policy (allowlist, resolver) this transport applies.
    pub fn policy(&self) -> &Arc<OutboundPolicy> {
        &self.policy
    }
}

/// A client whose resolver checks (`checked`, for requests to `port` when that is known) or
/// not (`PolicyResolver`).
fn build_client(
    policy: &Arc<OutboundPolicy>,
    checked: bool,
    port: Option<u16>,
) -> reqwest::Result<reqwest::Client> {
    let mut b = reqwest::Client::builder()
        .user_agent(concat!("fluxo/", env!("CARGO_PKG_VERSION")))
        .dns_resolver(Arc::new(PolicyResolver {
            policy: policy.clone(),
            checked,
            port,
        }))
        .redirect(redirect_policy(checked.then(|| policy.clone())));
    if checked {
        b = b.no_proxy().pool_max_idle_per_host(0);
    }
    b.build()
}

/// Follow a redirect only within the origin of the URL that answered it (RFC 6454: scheme,
/// host, port), at most [`MAX_REDIRECTS`]; otherwise hand the 3xx back (the transport turns
/// it into `redirect_not_followed`). For a host from run data, an IP-literal hop is checked
/// too, on its own port (a name is checked by the resolver when connecting). The origin
/// includes the port, so a followed hop goes to the port the client was picked for.
fn redirect_policy(checked: Option<Arc<OutboundPolicy>>) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        let same_origin = attempt
            .previous()
            .last()
            .is_some_and(|prev| outbound::origin(prev) == outbound::origin(attempt.url()));
        if !same_origin || attempt.previous().len() > MAX_REDIRECTS {
            return attempt.stop();
        }
        if let Some(policy) = &checked {
            let what = attempt.url().to_string();
            if let Err(r) = policy.check_url(attempt.url(), &what) {
                return attempt.error(r);
            }
        }
        attempt.follow()
    })
}

#[async_trait]
impl HttpTransport for LiveHttp {
    async fn send(
        &self,
        call: &HttpCall,
        timeout: Duration,
        _dry_sample: Option<&Value>,
    ) -> Result<HttpAnswer, TransportError> {
        let method = reqwest::Method::from_bytes(call.method.as_bytes()).map_err(|_| {
            TransportError::Invalid(format!("`{}` is not an HTTP method", call.method))
        })?;
        let url = reqwest::Url::parse(&call.url).map_err(|e| {
            TransportError::Invalid(format!("`{}` is not a valid URL: {e}", call.url))
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(TransportError::Invalid(format!(
                "`{}`: only http and https URLs are supported",
                call.url
            )));
        }
        let client = if call.check_host {
            // An IP literal never reaches the resolver: check it here, before any connection.
            self.policy
                .check_url(&url, &format!("{} {}", call.method, call.url))
                .map_err(|r| TransportError::refused(r, None))?;
            self.checked_client(url.port_or_known_default())
        } else {
            self.open.clone()
        };
        let mut req = client.request(method, url).timeout(timeout);
        if !call.query.is_empty() {
            req = req.query(&call.query);
        }
        let mut has_content_type = false;
        let mut form = false;
        for (k, v) in &call.headers {
            has_content_type |= k.eq_ignore_ascii_case("content-type");
            form |= k.eq_ignore_ascii_case("content-type")
                && v.trim().starts_with("application/x-www-form-urlencoded");
            let name = reqwest::header::HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
                TransportError::Invalid(format!("`{k}` is not a valid header name"))
            })?;
            let value = reqwest::header::HeaderValue::from_str(v).map_err(|_| {
                TransportError::Invalid(format!("header `{k}` has a value that cannot be sent"))
            })?;
            req = req.header(name, value);
        }
        // W3C Trace Context on the wire when traces are on, unless the step sets its own.
        if !call
            .headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("traceparent"))
        {
            if let Some(tp) = crate::traces::current_traceparent() {
                req = req.header("traceparent", tp);
            }
        }
        if let Some(body) = &call.body {
            if !has_content_type {
                req = req.header(reqwest::header::CONTENT_TYPE, "application/json");
            }
            req = if form {
                req.body(form_encode(body))
            } else {
                req.body(serde_json::to_vec(body).unwrap_or_default())
            };
        }
        let mut resp = req.send().await.map_err(|e| classify(e, call))?;
        let status = resp.status().as_u16();
        if let Some(refused) = cross_origin_redirect(call, &resp) {
            return Err(TransportError::refused(refused, Some(status)));
        }
        let mut headers: BTreeMap<String, String> = BTreeMap::new();
        for (k, v) in resp.headers() {
            let v = String::from_utf8_lossy(v.as_bytes()).into_owned();
            headers
                .entry(k.as_str().to_string())
                .and_modify(|e| {
                    e.push_str(", ");
                    e.push_str(&v)
                })
                .or_insert(v);
        }
        let cap = call.max_response_bytes;
        let too_large = || {
            TransportError::refused(
                Refused {
                    code: "response_too_large",
                    message: format!(
                        "{} {} answered {status} with a body of more than {cap} bytes \
                         (max_response_bytes); reading stopped there",
                        call.method, call.url
                    ),
                },
                Some(status),
            )
        };
        // (A HEAD answer's length describes a body that never comes.)
        if call.method != "HEAD" && resp.content_length().is_some_and(|n| n > cap) {
            return Err(too_large());
        }
        // Stream the body: never more than the cap in memory.
        let mut bytes: Vec<u8> = Vec::new();
        while let Some(chunk) = resp.chunk().await.map_err(|e| classify(e, call))? {
            if (bytes.len() + chunk.len()) as u64 > cap {
                return Err(too_large());
            }
            bytes.extend_from_slice(&chunk);
        }
        Ok(HttpAnswer {
            status,
            headers,
            body: parse_body(&bytes),
        })
    }
}

/// A 3xx with a `Location` the client handed back: a redirect to another origin (or past
/// [`MAX_REDIRECTS`]), which is not followed.
fn cross_origin_redirect(call: &HttpCall, resp: &reqwest::Response) -> Option<Refused> {
    if !resp.status().is_redirection() {
        return None;
    }
    let location = resp
        .headers()
        .get(reqwest::header::LOCATION)?
        .to_str()
        .ok()?;
    let target = resp.url().join(location).ok()?;
    let status = resp.status().as_u16();
    let message = if outbound::origin(&target) == outbound::origin(resp.url()) {
        format!(
            "{} {} was redirected more than {MAX_REDIRECTS} times",
            call.method, call.url
        )
    } else {
        format!(
            "{} {} answered {status} with a redirect to another origin ({}); Fluxo follows \
             redirects within one origin (scheme, host and port) only, so the request and its \
             headers never reach a host nobody configured: call that URL directly",
            call.method,
            call.url,
            outbound::origin(&target)
        )
    };
    Some(Refused {
        code: "redirect_not_followed",
        message,
    })
}

fn classify(e: reqwest::Error, call: &HttpCall) -> TransportError {
    if let Some(mut r) = outbound::refused_in(&e) {
        // The resolver or the redirect policy refused it: name the call.
        if !r.message.starts_with(&call.method) {
            r.message = format!("{} {}: {}", call.method, call.url, r.message);
        }
        return TransportError::refused(r, None);
    }
    if e.is_timeout() {
        TransportError::Timeout
    } else if e.is_builder() {
        TransportError::Invalid(e.to_string())
    } else {
        // Keep the root cause (reset, refused) without the URL noise.
        let mut msg = e.to_string();
        let mut src: Option<&dyn std::error::Error> = std::error::Error::source(&e);
        while let Some(s) = src {
            msg = s.to_string();
            src = s.source();
        }
        TransportError::Connection(msg)
    }
}

/// JSON if it parses, else text, else `null` for an empty body.
pub fn parse_body(bytes: &[u8]) -> Value {
    if bytes.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

/// The dry-run transport: no byte leaves the machine. Answers the step's `dry_run` sample
/// (`{"status": 200, "body": {...}, "headers": {...}}`) or a default `200 {}`.
#[derive(Debug, Clone, Default)]
pub struct SimulatedHttp;

#[async_trait]
impl HttpTransport for SimulatedHttp {
    async fn send(
        &self,
        _call: &HttpCall,
        _timeout: Duration,
        dry_sample: Option<&Value>,
    ) -> Result<HttpAnswer, TransportError> {
        let sample = dry_sample.cloned().unwrap_or(Value::Null);
        let status = sample
            .get("status")
            .and_then(Value::as_u64)
            .and_then(|s| u16::try_from(s).ok())
            .unwrap_or(200);
        let body = sample.get("body").cloned().unwrap_or_else(|| json!({}));
        let headers = sample
            .get("headers")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| {
                        let v = v
                            .as_str()
                            .map(String::from)
                            .unwrap_or_else(|| v.to_string());
                        (k.to_ascii_lowercase(), v)
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok(HttpAnswer {
            status,
            headers,
            body,
        })
    }
}

/// A JSON object as `application/x-www-form-urlencoded`, nested the way Stripe and Rails read
/// it: `{"metadata": {"k": "v"}, "items": ["a"]}` → `metadata[k]=v&items[0]=a`. Strings as is,
/// other scalars as JSON text, `null` left out.
pub fn form_encode(body: &Value) -> String {
    fn walk(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
        match v {
            Value::Object(m) => m.iter().for_each(|(k, x)| {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}[{k}]")
                };
                walk(&key, x, out)
            }),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .for_each(|(i, x)| walk(&format!("{prefix}[{i}]"), x, out)),
            Value::Null => {}
            Value::String(s) => out.push((prefix.to_string(), s.clone())),
            other => out.push((prefix.to_string(), other.to_string())),
        }
    }
    let mut pairs = Vec::new();
    walk("", body, &mut pairs);
    let enc = |s: &str| {
        percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod form_tests {
    use super::form_encode;
    use serde_json::json;

    #[test]
    fn nested_objects_and_lists_encode_as_stripe_reads_them() {
        let body =
            json!({"email": "a+b@x.io", "metadata": {"order": 7}, "tags": ["x y"], "n": null});
        assert_eq!(
            form_encode(&body),
            "email=a%2Bb%40x%2Eio&metadata%5Border%5D=7&tags%5B0%5D=x%20y"
        );
    }
}
