//! The HTTP transport steps send through: live (reqwest) or simulated (dry runs).

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};

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

/// The real network, through one pooled reqwest client.
#[derive(Debug, Clone)]
pub struct LiveHttp {
    client: reqwest::Client,
}

impl Default for LiveHttp {
    fn default() -> Self {
        Self::new()
    }
}

impl LiveHttp {
    /// A client with Fluxo's user agent and no redirects to other hosts beyond reqwest's default.
    pub fn new() -> Self {
        let client = reqwest::Client::builder()
            .user_agent(concat!("fluxo/", env!("CARGO_PKG_VERSION")))
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        LiveHttp { client }
    }
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
        let mut req = self.client.request(method, url).timeout(timeout);
        if !call.query.is_empty() {
            req = req.query(&call.query);
        }
        let mut has_content_type = false;
        for (k, v) in &call.headers {
            has_content_type |= k.eq_ignore_ascii_case("content-type");
            let name = reqwest::header::HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
                TransportError::Invalid(format!("`{k}` is not a valid header name"))
            })?;
            let value = reqwest::header::HeaderValue::from_str(v).map_err(|_| {
                TransportError::Invalid(format!("header `{k}` has a value that cannot be sent"))
            })?;
            req = req.header(name, value);
        }
        if let Some(body) = &call.body {
            if !has_content_type {
                req = req.header(reqwest::header::CONTENT_TYPE, "application/json");
            }
            req = req.body(serde_json::to_vec(body).unwrap_or_default());
        }
        let resp = req.send().await.map_err(classify)?;
        let status = resp.status().as_u16();
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
        let bytes = resp.bytes().await.map_err(classify)?;
        Ok(HttpAnswer {
            status,
            headers,
            body: parse_body(&bytes),
        })
    }
}

fn classify(e: reqwest::Error) -> TransportError {
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
