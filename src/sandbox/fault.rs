//! Fault injection: what can go wrong, and for which requests.
//!
//! A fault is chosen per request with the `X-Sandbox-Fault` header, or per route with a
//! [`FaultRule`] (`POST /_sandbox/faults`). The header wins over a rule; the header value `none`
//! turns injection off for that one request (and does not use up a rule).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Request header that picks a fault for one request.
pub const FAULT_HEADER: &str = "x-sandbox-fault";

/// Longest `slow:<ms>` delay accepted (10 minutes); longer values are a 400.
pub const MAX_SLOW_MS: u64 = 600_000;

/// Longest `rate_limit_429:<secs>` accepted (one day).
pub const MAX_RETRY_AFTER_S: u64 = 86_400;

/// One injected failure. Written and parsed as the strings shown on each variant.
///
/// "Before the write" faults leave no record and store no idempotent result, so a retry with
/// the same `Idempotency-Key` runs afresh. "After the write" faults leave the record in place and
/// store the result under the key (Stripe saves the result of any request that started
/// executing), so a retry with the same key replays it instead of creating a duplicate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// `timeout_after_write`: the record is written and the result stored, then the answer is
    /// withheld for [`SandboxConfig::hold`](super::SandboxConfig::hold) (or until shutdown, when
    /// the connection is dropped), so the client times out. The classic duplicate maker: a
    /// client that retries without an idempotency key creates the record twice.
    TimeoutAfterWrite,
    /// `error_500_before_write`: `500` without touching anything.
    Error500BeforeWrite,
    /// `error_500_after_write`: the record is written, then `500` is answered (and, for a keyed
    /// request, stored as the key's result, as Stripe does with a 500 of a request that ran).
    Error500AfterWrite,
    /// `rate_limit_429` or `rate_limit_429:<secs>`: `429` with `Retry-After: <secs>` (default 1),
    /// before anything else happens.
    RateLimit429 {
        /// Seconds sent in `Retry-After`.
        retry_after_s: u64,
    },
    /// `slow:<ms>`: wait `ms` milliseconds, then carry on normally.
    Slow {
        /// Delay in milliseconds.
        ms: u64,
    },
    /// `drop_connection`: close the connection without an answer, before the write.
    DropConnection,
    /// `drop_connection_after_write`: write the record (and store a keyed result), then close
    /// the connection without an answer.
    DropConnectionAfterWrite,
}

impl Fault {
    /// The `slow:<ms>` delay, if this is one.
    pub fn delay(&self) -> Option<Duration> {
        match self {
            Fault::Slow { ms } => Some(Duration::from_millis(*ms)),
            _ => None,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::TimeoutAfterWrite => f.write_str("timeout_after_write"),
            Fault::Error500BeforeWrite => f.write_str("error_500_before_write"),
            Fault::Error500AfterWrite => f.write_str("error_500_after_write"),
            Fault::RateLimit429 { retry_after_s: 1 } => f.write_str("rate_limit_429"),
            Fault::RateLimit429 { retry_after_s } => write!(f, "rate_limit_429:{retry_after_s}"),
            Fault::Slow { ms } => write!(f, "slow:{ms}"),
            Fault::DropConnection => f.write_str("drop_connection"),
            Fault::DropConnectionAfterWrite => f.write_str("drop_connection_after_write"),
        }
    }
}

impl FromStr for Fault {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let (name, arg) = match s.split_once(':') {
            Some((name, arg)) => (name, Some(arg.trim())),
            None => (s, None),
        };
        let fault = match (name, arg) {
            ("timeout_after_write", None) => Fault::TimeoutAfterWrite,
            ("error_500_before_write", None) => Fault::Error500BeforeWrite,
            ("error_500_after_write", None) => Fault::Error500AfterWrite,
            ("drop_connection", None) => Fault::DropConnection,
            ("drop_connection_after_write", None) => Fault::DropConnectionAfterWrite,
            ("rate_limit_429", None) => Fault::RateLimit429 { retry_after_s: 1 },
            ("rate_limit_429", Some(secs)) => match secs.parse::<u64>() {
                Ok(n) if n <= MAX_RETRY_AFTER_S => Fault::RateLimit429 { retry_after_s: n },
                _ => {
                    return Err(format!(
                        "rate_limit_429 takes whole seconds from 0 to {MAX_RETRY_AFTER_S}, got {secs:?}"
                    ))
                }
            },
            ("slow", Some(ms)) => match ms.parse::<u64>() {
                Ok(n) if n <= MAX_SLOW_MS => Fault::Slow { ms: n },
                _ => {
                    return Err(format!(
                        "slow takes milliseconds from 0 to {MAX_SLOW_MS}, got {ms:?}"
                    ))
                }
            },
            _ => {
                return Err(format!(
                    "unknown fault {s:?}; expected one of timeout_after_write, \
                     error_500_before_write, error_500_after_write, rate_limit_429[:<secs>], \
                     slow:<ms>, drop_connection, drop_connection_after_write"
                ))
            }
        };
        Ok(fault)
    }
}

impl Serialize for Fault {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Fault {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// What a rule's `route` matches: an optional method and a path, exact or (ending in `*`) a
/// prefix. `"POST /deals"`, `"* /deals/*"`, `"/deals"` (any method).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteMatcher {
    method: Option<String>,
    path: String,
    prefix: bool,
}

impl RouteMatcher {
    /// Parse `"[METHOD ]PATH"`.
    pub fn parse(route: &str) -> Result<Self, String> {
        let route = route.trim();
        let (method, path) = match route.split_once(char::is_whitespace) {
            Some((m, p)) => (Some(m.trim()), p.trim()),
            None => (None, route),
        };
        let method = match method {
            None | Some("*") => None,
            Some(m) if !m.is_empty() && m.chars().all(|c| c.is_ascii_alphabetic()) => {
                Some(m.to_ascii_uppercase())
            }
            Some(m) => return Err(format!("bad method {m:?} in route {route:?}")),
        };
        if !path.starts_with('/') || path.chars().any(char::is_whitespace) {
            return Err(format!(
                "route must look like \"POST /deals\" (method optional, path starting with /), got {route:?}"
            ));
        }
        let (path, prefix) = match path.strip_suffix('*') {
            Some(p) => (p.to_string(), true),
            None => (path.to_string(), false),
        };
        Ok(RouteMatcher {
            method,
            path,
            prefix,
        })
    }

    /// Does a request with this method and path (no query) match?
    pub fn matches(&self, method: &str, path: &str) -> bool {
        if let Some(m) = &self.method {
            if !m.eq_ignore_ascii_case(method) {
                return false;
            }
        }
        if self.prefix {
            path.starts_with(&self.path)
        } else {
            path == self.path
        }
    }
}

/// A per-route fault: applies to the next `times` matching requests (all of them while
/// `times` is `None`), until cleared.
#[derive(Debug, Clone, Serialize)]
pub struct FaultRule {
    /// `fault_1`, `fault_2`, …
    pub id: String,
    /// As given: `"POST /deals"`.
    pub route: String,
    /// The fault to inject.
    pub fault: Fault,
    /// How many requests it was set for (`None`: until cleared).
    pub times: Option<u32>,
    /// How many are left (`None`: until cleared). A rule is removed when this reaches 0.
    pub remaining: Option<u32>,
    #[serde(skip)]
    pub(crate) matcher: RouteMatcher,
}

/// Body of `POST /_sandbox/faults`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRuleSpec {
    /// `"POST /deals"`; see [`RouteMatcher`].
    pub route: String,
    /// A fault string, e.g. `"timeout_after_write"`.
    pub fault: Fault,
    /// How many upcoming matching requests it applies to (at least 1); omitted: until cleared.
    #[serde(default)]
    pub times: Option<u32>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_round_trip() {
        for s in [
            "timeout_after_write",
            "error_500_before_write",
            "error_500_after_write",
            "rate_limit_429",
            "rate_limit_429:7",
            "slow:250",
            "drop_connection",
            "drop_connection_after_write",
        ] {
            let f: Fault = s.parse().unwrap();
            assert_eq!(f.to_string(), s);
        }
        assert!("slow".parse::<Fault>().is_err());
        assert!("slow:-1".parse::<Fault>().is_err());
        assert!("slow:99999999999999999999".parse::<Fault>().is_err());
        assert!("explode".parse::<Fault>().is_err());
    }

    #[test]
    fn routes_match() {
        let r = RouteMatcher::parse("POST /deals").unwrap();
        assert!(r.matches("POST", "/deals"));
        assert!(!r.matches("GET", "/deals"));
        assert!(!r.matches("POST", "/deals/deal_0001"));
        let r = RouteMatcher::parse("/deals*").unwrap();
        assert!(r.matches("DELETE", "/deals/deal_0001"));
        assert!(RouteMatcher::parse("POST deals").is_err());
    }
}
