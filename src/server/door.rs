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
//!
//! **Webhook routes** (`POST /hooks/{workflow_id}`, see [`super::hooks`]) also check, once the
//! workflow is known:
//!
//! * [`check_cross_site`]: a request a browser sends on another site's behalf is `403
//!   cross_site_request`, unless its `Origin` is on the trigger's `allowed_origins`. A page
//!   can make a browser `POST` anywhere (a form, `fetch(url, {mode: "no-cors"})`) without
//!   reading the answer; that is enough to start a run. Browsers say where a request comes
//!   from: `Sec-Fetch-Site` (W3C Fetch Metadata Request Headers: `cross-site`, `same-site`,
//!   `same-origin`, `none` = typed by the user) and `Origin` (RFC 6454 §7; the Fetch Standard
//!   sends it on every `POST`). Servers that send webhooks send neither, and are let through.
//! * [`check_media_type`]: the body is JSON (`Content-Type: application/json`, or a `+json`
//!   type such as `application/cloudevents+json`; parameters allowed), else `415
//!   unsupported_media_type`. Browsers send other sites' forms and `no-cors` requests only as
//!   `text/plain`, `multipart/form-data` or `application/x-www-form-urlencoded` (the Fetch
//!   Standard's CORS-safelisted types); a JSON type from another site needs a CORS preflight,
//!   which this server never grants (it sends no CORS headers at all).

use std::task::{Context, Poll};

use axum::http::{header, HeaderMap, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::future::{Either, Ready};

use super::error::ApiError;
use super::AppState;
use crate::app::hosts::HostRules;
use crate::settings::HostPort;

/// Check a request's host against `rules`: `Ok` or the problem to answer.
pub fn check_host<B>(rules: &HostRules, req: &Request<B>) -> Result<(), ApiError> {
    let invalid = |why: &str| ApiError::bad_request("invalid_host", why.to_string());
    // The request-target's authority wins over Host (RFC 9112 §3.2.2).
    let raw = match req.uri().authority() {
        Some(a) => a.as_str(),
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
        }
    };
    let host = HostPort::parse(raw)
        .map_err(|why| invalid(&format!("Host `{}` is not a host: {why}", clip(raw))))?;
    if rules.allows(&host) {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::MISDIRECTED_REQUEST,
        "misdirected_request",
        format!(
            "Host `{}` is not a name of this server ({}); add it to the settings' \
             allowed_hosts if it is (a DNS-rebinding defence)",
            clip(raw),
            rules.describe()
        ),
    ))
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
        match self.state.with_host_rules(|rules| check_host(rules, &req)) {
            Ok(()) => Either::Right(self.inner.call(req)),
            Err(problem) => {
                tracing::debug!(error = %problem, "request refused at the door");
                Either::Left(futures_util::future::ready(Ok(problem.into_response())))
            }
        }
    }
}

/// The JSON-only rule of webhook routes: exactly one `Content-Type`, whose media type (RFC 9110
/// §8.3.1: `type "/" subtype *( OWS ";" OWS parameter )`, case-insensitive) is
/// `application/json` or has the `+json` structured syntax suffix (RFC 6839 §3.1), parameters
/// (e.g. `charset=utf-8`) ignored. Else `415 unsupported_media_type` (RFC 9110 §15.5.16).
pub fn check_media_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let refuse = |why: String| {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!(
                "webhooks take a JSON body: send `Content-Type: application/json` (or a +json \
                 type); {why}"
            ),
        )
    };
    let mut values = headers.get_all(header::CONTENT_TYPE).iter();
    let Some(v) = values.next() else {
        return Err(refuse("this request has no Content-Type".into()));
    };
    if values.next().is_some() {
        return Err(refuse("this request has more than one Content-Type".into()));
    }
    let text = v
        .to_str()
        .map_err(|_| refuse("its Content-Type is not visible ASCII".into()))?;
    let essence = text.split(';').next().unwrap_or("").trim();
    let is_token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
    };
    let json = match essence.split_once('/') {
        Some((t, sub)) if is_token(t) && is_token(sub) => {
            let plus_json = sub.len() > "+json".len()
                && sub.as_bytes()[sub.len() - "+json".len()..].eq_ignore_ascii_case(b"+json");
            (t.eq_ignore_ascii_case("application") && sub.eq_ignore_ascii_case("json")) || plus_json
        }
        _ => false,
    };
    if json {
        Ok(())
    } else {
        Err(refuse(format!("this one is `{}`", clip(text))))
    }
}

/// The cross-site rule of webhook routes (see the module doc), in order:
///
/// 1. an `Origin` on `allowed` (the trigger's `allowed_origins`, compared as origins) passes;
/// 2. `Sec-Fetch-Site: same-origin` passes (the browser attests that the page is this
///    server's own, e.g. its UI, also behind an HTTPS proxy); any other value but `none`
///    (`cross-site`, `same-site`, or unknown) is refused;
/// 3. an `Origin` that is neither listed nor this server's own (`http://<Host>`) is refused,
///    `null` included (browsers without Fetch Metadata send `Origin` alone);
/// 4. anything else passes: no `Origin` and no `Sec-Fetch-Site` is a server-to-server sender.
///
/// Refusals are `403 cross_site_request` naming the header and the way to allow it.
pub fn check_cross_site(
    headers: &HeaderMap,
    allowed: &[crate::steps::webhook_trigger::WebOrigin],
) -> Result<(), ApiError> {
    use crate::steps::webhook_trigger::WebOrigin;
    let refuse = |why: String| {
        ApiError::new(
            StatusCode::FORBIDDEN,
            "cross_site_request",
            format!(
                "{why}: a browser sent this on behalf of another site's page. If that page \
                 may start this workflow, list its origin in the webhook trigger's \
                 allowed_origins"
            ),
        )
    };
    let one = |name: header::HeaderName| -> Result<Option<&str>, ApiError> {
        let mut values = headers.get_all(&name).iter();
        let Some(v) = values.next() else {
            return Ok(None);
        };
        if values.next().is_some() {
            return Err(refuse(format!(
                "the request has more than one {name} header"
            )));
        }
        v.to_str()
            .map(Some)
            .map_err(|_| refuse(format!("its {name} header is not visible ASCII")))
    };
    let origin = one(header::ORIGIN)?;
    let site = one(header::HeaderName::from_static("sec-fetch-site"))?;
    let parsed = origin.map(WebOrigin::parse);
    if let Some(Ok(o)) = &parsed {
        if allowed.contains(o) {
            return Ok(());
        }
    }
    if let Some(site) = site {
        if site.eq_ignore_ascii_case("same-origin") {
            return Ok(());
        }
        if !site.eq_ignore_ascii_case("none") {
            return Err(refuse(format!(
                "Sec-Fetch-Site is `{}`{}",
                clip(site),
                origin
                    .map(|o| format!(" and Origin `{}` is not allowed", clip(o)))
                    .unwrap_or_default()
            )));
        }
    }
    if let Some(origin) = origin {
        let own = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .and_then(|h| WebOrigin::parse(&format!("http://{h}")).ok());
        let is_own = matches!((&parsed, &own), (Some(Ok(o)), Some(own)) if o == own);
        if !is_own {
            return Err(refuse(format!("Origin `{}` is not allowed", clip(origin))));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steps::webhook_trigger::WebOrigin;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn media_types() {
        for ok in [
            "application/json",
            "APPLICATION/JSON",
            "application/json; charset=utf-8",
            "application/json;charset=UTF-8",
            "application/cloudevents+json",
            "application/vnd.github+json ; x=1",
            "application/problem+JSON",
        ] {
            assert!(
                check_media_type(&headers(&[("content-type", ok)])).is_ok(),
                "{ok}"
            );
        }
        for bad in [
            "text/plain",
            "text/plain;charset=UTF-8",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/jsonp",
            "application/+json",
            "json",
            "application/json/x",
            "",
        ] {
            let e = check_media_type(&headers(&[("content-type", bad)])).unwrap_err();
            assert_eq!(e.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{bad}");
        }
        assert!(check_media_type(&HeaderMap::new()).is_err());
        let two = headers(&[
            ("content-type", "application/json"),
            ("content-type", "text/plain"),
        ]);
        assert!(check_media_type(&two).is_err());
    }

    #[test]
    fn cross_site() {
        let allowed = [WebOrigin::parse("https://app.example.com").unwrap()];
        let host = ("host", "127.0.0.1:8787");
        let pass: &[&[(&'static str, &str)]] = &[
            &[],
            &[host],
            &[
                ("sec-fetch-site", "same-origin"),
                ("origin", "http://127.0.0.1:8787"),
                host,
            ],
            &[("sec-fetch-site", "none")],
            &[("origin", "http://127.0.0.1:8787"), host],
            &[
                ("origin", "https://app.example.com"),
                ("sec-fetch-site", "cross-site"),
            ],
            &[
                ("origin", "https://APP.example.com:443"),
                ("sec-fetch-site", "cross-site"),
            ],
            &[
                ("sec-fetch-site", "same-origin"),
                ("origin", "https://fluxo.example.com"),
                ("host", "fluxo.example.com"),
            ],
        ];
        for h in pass {
            assert!(check_cross_site(&headers(h), &allowed).is_ok(), "{h:?}");
        }
        let refuse: &[&[(&'static str, &str)]] = &[
            &[("sec-fetch-site", "cross-site")],
            &[
                ("sec-fetch-site", "same-site"),
                ("origin", "https://www.example.com"),
            ],
            &[
                ("sec-fetch-site", "cross-site"),
                ("origin", "https://evil.example"),
            ],
            &[("sec-fetch-site", "whatever")],
            &[("origin", "https://evil.example"), host],
            &[("origin", "null"), host],
            &[("origin", "http://127.0.0.1:8787")],
            &[
                ("sec-fetch-site", "none"),
                ("origin", "https://evil.example"),
                host,
            ],
            &[("origin", "http://app.example.com")],
            &[
                ("origin", "https://app.example.com"),
                ("origin", "https://evil.example"),
            ],
        ];
        for h in refuse {
            let e = check_cross_site(&headers(h), &allowed).unwrap_err();
            assert_eq!(e.status, StatusCode::FORBIDDEN, "{h:?}");
            assert_eq!(e.code, "cross_site_request");
        }
    }
}
