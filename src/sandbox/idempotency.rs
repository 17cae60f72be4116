//! `Idempotency-Key` handling for `POST /{collection}`.
//!
//! Rules and where they come from:
//!
//! * **Stripe, "Idempotent requests"**: the first result (status code and body, errors
//!   included) is saved under the key and returned for every later request with the same key;
//!   the key is compared with the request's parameters and a mismatch is refused; results are
//!   saved only once the endpoint started executing, so a request refused by the rate limiter or
//!   failing before it ran (here: the `*_before_write` and `rate_limit_429` faults, invalid
//!   bodies) saves nothing and a retry runs afresh; a request that conflicts with one still
//!   executing is refused; keys expire after 24 hours.
//! * **IETF draft-ietf-httpapi-idempotency-key-header**: the header is an RFC 8941 string
//!   (a quoted form is accepted besides a bare token); the key is scoped to the resource it was
//!   sent to (here: the collection path, so `k1` on `/deals` and `k1` on `/contacts` are
//!   unrelated); a request still being processed with the same key gets `409 Conflict`. The
//!   draft suggests `422` for a key reused with another payload; the sandbox answers `409`
//!   `idempotency_conflict`, like Fluxo's own API (SPEC §5).
//! * **Fluxo SPEC §5**: keys are 1–255 characters of visible ASCII; the payload fingerprint is
//!   the canonical JSON body (key order and whitespace don't count); replays carry
//!   `Idempotent-Replayed: true` and the stored body byte for byte.

use std::collections::HashMap;

use axum::body::Bytes;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Response header set on replayed answers.
pub const REPLAYED_HEADER: &str = "idempotent-replayed";

/// Parse an `Idempotency-Key` header value: a bare key of 1–255 visible ASCII characters, or
/// an RFC 8941 quoted string whose content is 1–255 printable ASCII characters.
pub fn parse_key(raw: &[u8]) -> Result<String, String> {
    let s = std::str::from_utf8(raw).map_err(|_| "Idempotency-Key must be ASCII".to_string())?;
    let s = s.trim_matches(|c| c == ' ' || c == '\t');
    let key = if s.len() >= 2 && s.starts_with('"') && s.ends_with('"') {
        let inner = &s[1..s.len() - 1];
        let mut out = String::with_capacity(inner.len());
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some(e @ ('"' | '\\')) => out.push(e),
                    _ => return Err("bad escape in quoted Idempotency-Key".to_string()),
                },
                '"' => return Err("unescaped quote in Idempotency-Key".to_string()),
                c if (' '..='~').contains(&c) => out.push(c),
                _ => return Err("Idempotency-Key must be printable ASCII".to_string()),
            }
        }
        out
    } else {
        if !s.chars().all(|c| ('!'..='~').contains(&c)) {
            return Err("Idempotency-Key must be visible ASCII (quote it to use spaces)".into());
        }
        s.to_string()
    };
    if key.is_empty() || key.len() > 255 {
        return Err("Idempotency-Key must be 1 to 255 characters".to_string());
    }
    Ok(key)
}

/// `value` with every object's keys sorted, serialized compactly: equal for bodies that differ
/// only in key order and whitespace.
pub fn canonical_json(value: &Value) -> String {
    fn sort(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                let mut out = Map::with_capacity(m.len());
                for k in keys {
                    if let Some(x) = m.get(k) {
                        out.insert(k.clone(), sort(x));
                    }
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(sort).collect()),
            other => other.clone(),
        }
    }
    sort(value).to_string()
}

/// SHA-256 (hex) of the canonical JSON of a request body.
pub fn fingerprint(body: &Value) -> String {
    hex::encode(Sha256::digest(canonical_json(body).as_bytes()))
}

/// An answer as stored for replay: status, content type, `Location`, body bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// HTTP status code.
    pub status: u16,
    /// `Content-Type` sent.
    pub content_type: String,
    /// `Location` sent, if any.
    pub location: Option<String>,
    /// Exactly the bytes sent.
    pub body: Bytes,
}

#[derive(Debug, Clone)]
enum Slot {
    InProgress { token: u64 },
    Done(StoredResponse),
}

#[derive(Debug, Clone)]
struct Entry {
    fingerprint: String,
    first_seen_ms: i64,
    slot: Slot,
}

/// What [`IdempotencyStore::begin`] decided.
#[derive(Debug, Clone)]
pub enum Begin {
    /// New key (or an expired one): the caller owns it under `token` until it completes or
    /// releases it.
    Claimed {
        /// Ownership token for [`IdempotencyStore::complete`] / [`IdempotencyStore::release`].
        token: u64,
    },
    /// Same key and payload, already answered: send this again.
    Replay(StoredResponse),
    /// Same key, different payload.
    Conflict,
    /// Same key and payload, the first request has not finished.
    InProgress,
}

/// Keys per scope (the collection path), with their first result.
#[derive(Debug, Default)]
pub struct IdempotencyStore {
    entries: HashMap<(String, String), Entry>,
    next_token: u64,
}

impl IdempotencyStore {
    /// Look the key up and claim it if it's new. `ttl_ms`: entries older than this (from the
    /// first request) are forgotten.
    pub fn begin(
        &mut self,
        scope: &str,
        key: &str,
        fingerprint: &str,
        now_ms: i64,
        ttl_ms: i64,
    ) -> Begin {
        self.entries.retain(|_, e| {
            matches!(e.slot, Slot::InProgress { .. })
                || now_ms.saturating_sub(e.first_seen_ms) < ttl_ms
        });
        let id = (scope.to_string(), key.to_string());
        if let Some(e) = self.entries.get(&id) {
            if e.fingerprint != fingerprint {
                return Begin::Conflict;
            }
            return match &e.slot {
                Slot::InProgress { .. } => Begin::InProgress,
                Slot::Done(r) => Begin::Replay(r.clone()),
            };
        }
        self.next_token += 1;
        let token = self.next_token;
        self.entries.insert(
            id,
            Entry {
                fingerprint: fingerprint.to_string(),
                first_seen_ms: now_ms,
                slot: Slot::InProgress { token },
            },
        );
        Begin::Claimed { token }
    }

    /// Store the first result under a key claimed with `token`. Does nothing if the claim is
    /// gone (released, or wiped by a reset).
    pub fn complete(&mut self, scope: &str, key: &str, token: u64, response: StoredResponse) {
        if let Some(e) = self.entries.get_mut(&(scope.to_string(), key.to_string())) {
            if matches!(e.slot, Slot::InProgress { token: t } if t == token) {
                e.slot = Slot::Done(response);
            }
        }
    }

    /// Forget a claim that produced no result to keep, so a retry runs afresh.
    pub fn release(&mut self, scope: &str, key: &str, token: u64) {
        let id = (scope.to_string(), key.to_string());
        if matches!(
            self.entries.get(&id),
            Some(Entry { slot: Slot::InProgress { token: t }, .. }) if *t == token
        ) {
            self.entries.remove(&id);
        }
    }

    /// Forget every key (the token counter keeps counting).
    pub fn clear(&mut self) {
        self.entries.clear();
    }

    /// Number of keys held (claimed or answered).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No keys held?
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys() {
        assert_eq!(parse_key(b"abc-123").unwrap(), "abc-123");
        assert_eq!(parse_key(b"\"a b\\\"c\"").unwrap(), "a b\"c");
        assert!(parse_key(b"").is_err());
        assert!(parse_key(b"\"\"").is_err());
        assert!(parse_key(b"a b").is_err());
        assert!(parse_key("é".as_bytes()).is_err());
        assert!(parse_key("x".repeat(256).as_bytes()).is_err());
    }

    #[test]
    fn canonical() {
        let a: Value =
            serde_json::from_str(r#"{"b": 1, "a": {"y": [1, {"d":1,"c":2}], "x": null}}"#).unwrap();
        let b = json!({"a": {"x": null, "y": [1, {"c": 2, "d": 1}]}, "b": 1});
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_ne!(fingerprint(&a), fingerprint(&json!({"b": 2})));
    }

    #[test]
    fn store_lifecycle() {
        let mut s = IdempotencyStore::default();
        let Begin::Claimed { token } = s.begin("/deals", "k", "f1", 0, 1000) else {
            panic!("expected claim")
        };
        assert!(matches!(
            s.begin("/deals", "k", "f1", 1, 1000),
            Begin::InProgress
        ));
        assert!(matches!(
            s.begin("/deals", "k", "f2", 1, 1000),
            Begin::Conflict
        ));
        assert!(matches!(
            s.begin("/contacts", "k", "f2", 1, 1000),
            Begin::Claimed { .. }
        ));
        let r = StoredResponse {
            status: 201,
            content_type: "application/json".into(),
            location: None,
            body: Bytes::from_static(b"{}"),
        };
        s.complete("/deals", "k", token, r.clone());
        assert!(matches!(s.begin("/deals", "k", "f1", 2, 1000), Begin::Replay(x) if x == r));
        // Expired after the TTL: claimed afresh.
        assert!(matches!(
            s.begin("/deals", "k", "f2", 1000, 1000),
            Begin::Claimed { .. }
        ));
        let Begin::Claimed { token } = s.begin("/x", "k", "f", 0, 1000) else {
            panic!("expected claim")
        };
        s.release("/x", "k", token);
        assert!(matches!(
            s.begin("/x", "k", "other", 0, 1000),
            Begin::Claimed { .. }
        ));
    }
}
