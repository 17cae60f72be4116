//! The door (SPEC §5, "The door and outbound calls"): which requests the server is willing to
//! look at, before any handler runs.
//!
//! **Host allowlist, every route** (API, webhooks, the UI; a DNS-rebinding defence): a web
//! page on `evil.example` whose name is made to resolve to 127.0.0.1 reaches the server with
//! `Host: evil.example:8787`, and its browser treats the answers as same-origin to the page.
//! So the `Host` (RFC 9110 §7.2; the request-target's authority when it has one, RFC 9112
//! §3.2.2) must be one the server knows itself by:
//!
//! * the bound address with the bound port (`127.0.0.1:8787`); when bound to every interface
//!   (`0.0.0.0`, `[::]`) any IP literal with the bound port, since a name is what rebinding
//!   needs and an IP literal cannot be rebound;
//! * `localhost`, `127.0.0.1` or `[::1]` with the bound port;
//! * a name in the settings' `allowed_hosts` (`name` = any port, `name:port` = that port), e.g.
//!   the public name behind a reverse proxy or a tunnel.
//!
//! A request without a `Host`, with two, or with one that is not a host is `400
//! invalid_host` (RFC 9112 §3.2: "A server MUST respond with a 400 (Bad Request)"); a well-
//! formed one that is none of the above is `421 misdirected_request` (RFC 9110 §15.5.20: this
//! server will not produce an authoritative answer for that host). A `Host` without a port
//! means port 80 (RFC 9110 §4.2.1, `http`'s default).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::task::{Context, Poll};

use axum::http::{header, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::future::{Either, Ready};

use super::error::ApiError;
use super::AppState;
use crate::settings::{Host, HostPort};

/// Default port of `http` URIs (RFC 9110 §4.2.1): a `Host` without a port means this one.
const HTTP_DEFAULT_PORT: u16 = 80;

/// The hosts a server answers to: its bound address and the settings' `allowed_hosts`.
#[derive(Debug, Clone)]
pub struct HostRules {
    bound: SocketAddr,
    extra: Vec<HostPort>,
}

impl HostRules {
    /// The rules of a server bound to `bound`, with `allowed_hosts` from the settings (entries
    /// that do not parse are skipped: the settings are validated before they are applied).
    pub fn new(bound: SocketAddr, allowed_hosts: &[String]) -> HostRules {
        HostRules {
            bound,
            extra: allowed_hosts
                .iter()
                .filter_map(|h| HostPort::parse(h).ok())
                .collect(),
        }
    }

    /// Whether `host` (as parsed from the request) is one of this server's names.
    pub fn allows(&self, host: &HostPort) -> bool {
        let port = host.port.unwrap_or(HTTP_DEFAULT_PORT);
        if port == self.bound.port() {
            let own = match &host.host {
                Host::Name(n) => n == "localhost",
                Host::Ip(ip) => {
                    *ip == IpAddr::V4(Ipv4Addr::LOCALHOST)
                        || *ip == IpAddr::V6(Ipv6Addr::LOCALHOST)
                        || *ip == self.bound.ip()
                        || self.bound.ip().is_unspecified()
                }
            };
            if own {
                return true;
            }
        }
        self.extra
            .iter()
            .any(|e| e.host == host.host && e.port.is_none_or(|p| p == port))
    }

    /// The names this server answers to, for a problem's `detail`.
    fn describe(&self) -> String {
        let p = self.bound.port();
        let mut names = vec![
            format!("localhost:{p}"),
            format!("127.0.0.1:{p}"),
            format!("[::1]:{p}"),
        ];
        if self.bound.ip().is_unspecified() {
            names.push(format!("any IP address:{p}"));
        } else if !self.bound.ip().is_loopback() {
            names.push(self.bound.to_string());
        }
        names.extend(self.extra.iter().map(|h| match h.port {
            Some(_) => h.to_string(),
            None => format!("{h}:<any port>"),
        }));
        names.join(", ")
    }

    /// Check a request's host: `Ok` or the problem to answer.
    pub fn check<B>(&self, req: &Request<B>) -> Result<(), ApiError> {
        let invalid = |why: &str| ApiError::bad_request("invalid_host", why.to_string());
        // The request-target's authority wins over Host (RFC 9112 §3.2.2).
        let raw = match req.uri().authority() {
            Some(a) => a.as_str().to_string(),
            None => {
                let mut hosts = req.headers().get_all(header::HOST).iter();
                let Some(h) = hosts.next() else {
                    return Err(invalid(
                        "the request has no Host header (RFC 9112 §3.2 requires one)",
                    ));
                };
                if hosts.next().is_some() {
                    return Err(invalid("the request has more than one Host header"));
                }
                h.to_str()
                    .map_err(|_| invalid("the Host header is not visible ASCII"))?
                    .to_string()
            }
        };
        let host = HostPort::parse(&raw)
            .map_err(|why| invalid(&format!("Host `{}` is not a host: {why}", clip(&raw))))?;
        if self.allows(&host) {
            return Ok(());
        }
        Err(ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "misdirected_request",
            format!(
                "Host `{}` is not a name of this server ({}); add it to the settings' \
                 allowed_hosts if it is (a DNS-rebinding defence)",
                clip(&raw),
                self.describe()
            ),
        ))
    }
}

/// At most 100 characters of client input, for a problem's `detail`.
fn clip(s: &str) -> String {
    match s.char_indices().nth(100) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// [`HostCheck`] around every route ([`super::router`]).
#[derive(Clone)]
pub struct HostCheckLayer {
    state: AppState,
}

impl HostCheckLayer {
    /// The check, with the host rules in force in `state` (they follow settings changes).
    pub fn new(state: AppState) -> Self {
        HostCheckLayer { state }
    }
}

impl<S> tower_layer::Layer<S> for HostCheckLayer {
    type Service = HostCheck<S>;
    fn layer(&self, inner: S) -> HostCheck<S> {
        HostCheck {
            inner,
            state: self.state.clone(),
        }
    }
}

/// Answers `400 invalid_host` / `421 misdirected_request` itself, or passes the request on. A
/// plain service (no boxed future per request, unlike a `from_fn` middleware), since it is on
/// the webhook hot path.
#[derive(Clone)]
pub struct HostCheck<S> {
    inner: S,
    state: AppState,
}

impl<S, B> tower_service::Service<Request<B>> for HostCheck<S>
where
    S: tower_service::Service<Request<B>, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = Either<Ready<Result<Response, S::Error>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        match self.state.check_host(&req) {
            Ok(()) => Either::Right(self.inner.call(req)),
            Err(problem) => {
                tracing::debug!(error = %problem, "request refused at the door");
                Either::Left(futures_util::future::ready(Ok(problem.into_response())))
            }
        }
    }
}
