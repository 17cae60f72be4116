//! Stripe's customers API (`/stripe/v1/customers…`), from Stripe's public API reference.
//!
//! What matters for dedupe: `Idempotency-Key` on `POST`s, with Stripe's rules ("Idempotent
//! requests"): the first result of a request that started executing is saved (a 500 too) and
//! replayed with `Idempotent-Replayed: true`; the same key with other parameters or on another
//! endpoint is `400 idempotency_error`; while the first is still running, `409
//! idempotency_key_in_use`; a request refused before it ran (bad parameters, a 429, a
//! `*_before_write` fault) saves nothing; keys are at most 255 characters and kept 24 hours.
//! Customers have no unique field: without a key, every create is a new customer. The find
//! is the list filtered by `email` (consistent, unlike Stripe's search).

use axum::extract::{Path, Request, State};
use axum::response::Response;
use axum::routing::get;
use axum::Router;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::{
    begin, object, parse_form, query_pairs, Answer, Auth, AuthFailure, Ctx, Fake, Style,
    VendorData, STRIPE_TOKEN_PREFIX,
};
use crate::sandbox::fault::Fault;
use crate::sandbox::handlers::Claim;
use crate::sandbox::idempotency::Begin;
use crate::sandbox::state::SandboxState;

const CT: &str = "application/json";

/// Idempotency keys live in the sandbox's key store under this scope (one account).
const SCOPE: &str = "stripe";

/// Longest idempotency key Stripe accepts.
const MAX_KEY: usize = 255;

/// Stripe's memory: customers in creation order.
#[derive(Debug, Default)]
pub(crate) struct StripeData {
    next: u64,
    customers: Vec<Map<String, Value>>,
}

fn error(
    status: u16,
    kind: &str,
    code: Option<&str>,
    param: Option<&str>,
    message: &str,
) -> Answer {
    let mut e = Map::new();
    if let Some(c) = code {
        e.insert("code".into(), json!(c));
        e.insert(
            "doc_url".into(),
            json!(format!(
                "https://stripe.com/docs/error-codes/{}",
                c.replace('_', "-")
            )),
        );
    }
    e.insert("message".into(), json!(message));
    if let Some(p) = param {
        e.insert("param".into(), json!(p));
    }
    e.insert("type".into(), json!(kind));
    Answer::json(status, CT, &json!({ "error": e }))
}

fn invalid(code: Option<&str>, param: Option<&str>, message: &str) -> Answer {
    error(400, "invalid_request_error", code, param, message)
}

/// A key as Stripe prints it in errors: its `sk_test_`-style prefix, stars, its last 4.
pub(crate) fn mask_key(key: &str) -> String {
    let prefix = [
        "sk_test_", "sk_live_", "rk_test_", "rk_live_", "pk_test_", "pk_live_",
    ]
    .into_iter()
    .find(|p| key.starts_with(p))
    .unwrap_or("");
    let rest: Vec<char> = key[prefix.len()..].chars().collect();
    let shown = if rest.len() > 8 { 4 } else { 0 };
    let stars = "*".repeat(rest.len() - shown);
    let tail: String = rest[rest.len() - shown..].iter().collect();
    format!("{prefix}{stars}{tail}")
}

/// The Stripe fake.
pub(crate) struct Stripe;

impl Style for Stripe {
    fn app(&self) -> &'static str {
        "stripe"
    }

    fn unauthorized(&self, why: &AuthFailure) -> Answer {
        match why {
            AuthFailure::Missing => error(
                401,
                "invalid_request_error",
                None,
                None,
                "You did not provide an API key. You need to provide your API key in the \
                 Authorization header, using Bearer auth (e.g. 'Authorization: Bearer \
                 YOUR_SECRET_KEY'). See https://stripe.com/docs/api#authentication for details.",
            ),
            AuthFailure::Invalid { token } => error(
                401,
                "invalid_request_error",
                None,
                None,
                &format!("Invalid API Key provided: {}", mask_key(token)),
            ),
            AuthFailure::Expired { token, .. } => error(
                401,
                "invalid_request_error",
                Some("api_key_expired"),
                None,
                &format!("Expired API Key provided: {}", mask_key(token)),
            ),
        }
    }

    fn rate_limited(&self, _retry_after_s: u64) -> Answer {
        error(
            429,
            "invalid_request_error",
            Some("rate_limit"),
            None,
            "Request rate limit exceeded. Learn more about rate limits here \
             https://stripe.com/docs/rate-limits.",
        )
    }

    fn server_error(&self) -> Answer {
        error(
            500,
            "api_error",
            None,
            None,
            "Sorry, something went wrong on Stripe's end (sandbox fault).",
        )
    }

    fn not_found(&self, method: &str, path: &str) -> Answer {
        error(
            404,
            "invalid_request_error",
            None,
            None,
            &format!(
                "Unrecognized request URL ({method}: {path}). Please see https://stripe.com/docs."
            ),
        )
    }

    fn bad_request(&self, message: &str) -> Answer {
        invalid(None, None, message)
    }
}

impl Fake for Stripe {
    fn token_prefix(&self) -> &'static str {
        STRIPE_TOKEN_PREFIX
    }

    fn routes(&self) -> Router<SandboxState> {
        Router::new()
            .route("/stripe/v1/customers", get(list).post(create))
            .route("/stripe/v1/customers/{id}", get(retrieve).post(update))
    }

    fn snapshot(&self, data: &VendorData, _now_ms: i64) -> Value {
        json!({"customers": data.stripe.customers})
    }

    fn counts(&self, data: &VendorData) -> Vec<(String, usize)> {
        vec![("stripe customers".into(), data.stripe.customers.len())]
    }

    fn control(&self, _data: &mut VendorData, _body: Value) -> Result<Value, String> {
        Err("the Stripe fake has no settings".into())
    }
}

async fn start(state: SandboxState, req: Request) -> Result<Ctx, Response> {
    begin(
        &Stripe,
        STRIPE_TOKEN_PREFIX,
        Auth::BearerOrBasic,
        state,
        req,
    )
    .await
}

fn no_such_customer(id: &str, param: &str) -> Answer {
    error(
        404,
        "invalid_request_error",
        Some("resource_missing"),
        Some(param),
        &format!("No such customer: '{id}'"),
    )
}

fn valid_email(e: &str) -> bool {
    e.split_once('@').is_some_and(|(l, d)| {
        !l.is_empty() && d.contains('.') && !d.starts_with('.') && !d.ends_with('.')
    }) && !e.chars().any(char::is_whitespace)
}

/// The changes a create or update asks for: field → value (`Null`: cleared) and metadata
/// key → value (`Null`: removed). Unknown parameters are Stripe's `parameter_unknown`.
struct Changes {
    fields: Map<String, Value>,
    metadata: Map<String, Value>,
    address: Map<String, Value>,
}

fn customer_changes(pairs: &[(String, String)]) -> Result<Changes, Answer> {
    let mut c = Changes {
        fields: Map::new(),
        metadata: Map::new(),
        address: Map::new(),
    };
    let text = |v: &str| {
        if v.is_empty() {
            Value::Null
        } else {
            json!(v)
        }
    };
    for (k, v) in pairs {
        let bracket = |name: &str| {
            k.strip_prefix(name)
                .and_then(|r| r.strip_prefix('['))
                .and_then(|r| r.strip_suffix(']'))
                .map(str::to_string)
        };
        match k.as_str() {
            "email" => {
                if !v.is_empty() && !valid_email(v) {
                    return Err(invalid(
                        Some("email_invalid"),
                        Some("email"),
                        &format!("Invalid email address: {v}"),
                    ));
                }
                c.fields.insert(k.clone(), text(v));
            }
            "name" | "description" | "phone" => {
                c.fields.insert(k.clone(), text(v));
            }
            _ if k.starts_with("expand[") => {}
            _ => {
                if let Some(key) = bracket("metadata") {
                    if key.is_empty() || key.len() > 40 {
                        return Err(invalid(
                            None,
                            Some(k),
                            "Metadata keys must be 1 to 40 characters long.",
                        ));
                    }
                    if v.len() > 500 {
                        return Err(invalid(
                            None,
                            Some(k),
                            "Metadata values can have up to 500 characters.",
                        ));
                    }
                    c.metadata.insert(key, text(v));
                } else if let Some(f) = bracket("address").filter(|f| {
                    ["line1", "line2", "city", "state", "postal_code", "country"]
                        .contains(&f.as_str())
                }) {
                    c.address.insert(f, text(v));
                } else {
                    return Err(invalid(
                        Some("parameter_unknown"),
                        Some(k),
                        &format!("Received unknown parameter: {k}"),
                    ));
                }
            }
        }
    }
    Ok(c)
}

fn apply(customer: &mut Map<String, Value>, c: Changes) {
    for (k, v) in c.fields {
        customer.insert(k, v);
    }
    if let Some(Value::Object(m)) = customer.get_mut("metadata") {
        for (k, v) in c.metadata {
            if v.is_null() {
                m.remove(&k);
            } else {
                m.insert(k, v);
            }
        }
    }
    if !c.address.is_empty() {
        let mut a = customer
            .get("address")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_else(|| {
                ["city", "country", "line1", "line2", "postal_code", "state"]
                    .into_iter()
                    .map(|f| (f.to_string(), Value::Null))
                    .collect()
            });
        a.extend(c.address);
        customer.insert("address".into(), Value::Object(a));
    }
}

fn new_customer(n: u64, now_ms: i64) -> Map<String, Value> {
    let v = json!({
        "id": format!("cus_SBX{n:011}"),
        "object": "customer",
        "address": null,
        "balance": 0,
        "created": now_ms.div_euclid(1000),
        "currency": null,
        "default_source": null,
        "delinquent": false,
        "description": null,
        "discount": null,
        "email": null,
        "invoice_prefix": format!("SBX{:05X}", n % 0x10_0000),
        "invoice_settings": {
            "custom_fields": null,
            "default_payment_method": null,
            "footer": null,
            "rendering_options": null
        },
        "livemode": false,
        "metadata": {},
        "name": null,
        "next_invoice_sequence": 1,
        "phone": null,
        "preferred_locales": [],
        "shipping": null,
        "tax_exempt": "none",
        "test_clock": null
    });
    object(&v)
}

/// What a key's first request is compared by: the endpoint and the parameters, in order of
/// name (Stripe compares parameters, not bytes).
fn fingerprint(method: &str, path: &str, pairs: &[(String, String)]) -> String {
    let mut sorted: Vec<&(String, String)> = pairs.iter().collect();
    sorted.sort();
    let mut h = Sha256::new();
    h.update(method.as_bytes());
    h.update(b" ");
    h.update(path.as_bytes());
    for (k, v) in sorted {
        h.update(b"\n");
        h.update(k.as_bytes());
        h.update(b"=");
        h.update(v.as_bytes());
    }
    hex::encode(h.finalize())
}

/// A `POST` with Stripe's idempotency layer around `write` (which runs under the state's
/// lock and returns the answer and the record id).
async fn keyed_write(
    ctx: Ctx,
    pairs: Vec<(String, String)>,
    write: impl FnOnce(&mut VendorData, i64) -> (Answer, Option<String>),
) -> Response {
    let mut claim = None;
    if let Some(key) = ctx.call.idempotency_key.clone() {
        if key.is_empty() || key.len() > MAX_KEY {
            return ctx.refuse(invalid(
                None,
                None,
                &format!(
                    "Invalid Idempotency-Key: keys must be 1 to {MAX_KEY} characters long, \
                     got {}.",
                    key.len()
                ),
            ));
        }
        let fp = fingerprint(ctx.parts.method.as_str(), &ctx.call.path, &pairs);
        let state = ctx.call.state.clone();
        let ttl = i64::try_from(state.config().idempotency_ttl.as_millis()).unwrap_or(i64::MAX);
        let now = state.now_ms();
        let begun = state.lock().idempotency.begin(SCOPE, &key, &fp, now, ttl);
        match begun {
            Begin::Conflict => {
                return ctx.refuse(error(
                    400,
                    "idempotency_error",
                    None,
                    None,
                    &format!(
                        "Keys for idempotent requests can only be used with the same \
                         parameters they were first used with. Try using a key other than \
                         '{key}' if you meant to execute a different request."
                    ),
                ))
            }
            Begin::InProgress => {
                return ctx.refuse(error(
                    409,
                    "idempotency_error",
                    Some("idempotency_key_in_use"),
                    None,
                    &format!(
                        "There is currently another in-progress request using this \
                         Idempotent Key (that probably means you submitted twice, and the \
                         other request is still going through): {key}. Please try again \
                         later."
                    ),
                ))
            }
            Begin::Replay(stored) => {
                if let Err(r) = ctx.before_write().await {
                    return r;
                }
                let after_500 = ctx.call.fault == Some(Fault::Error500AfterWrite);
                let a = ctx.ran(Answer::stored(stored));
                let id = super::super::handlers::body_id(&a.resp);
                return ctx.finish(a, !after_500, id).await;
            }
            Begin::Claimed { token } => {
                claim = Some(Claim {
                    state,
                    scope: SCOPE.to_string(),
                    key,
                    token,
                    done: false,
                })
            }
        }
    }
    if let Err(r) = ctx.before_write().await {
        drop(claim); // nothing ran: the key is free for a retry
        return r;
    }
    let now = ctx.call.state.now_ms();
    let (a, id) = write(&mut ctx.call.state.lock().vendors, now);
    let a = ctx.ran(a);
    if let Some(c) = claim {
        c.complete(a.resp.clone());
    }
    ctx.finish(a, false, id).await
}

/// `POST /v1/customers` (form-encoded: `email`, `name`, `description`, `phone`,
/// `metadata[key]`, `address[field]`) → `200` customer.
async fn create(State(state): State<SandboxState>, req: Request) -> Response {
    let ctx = match start(state, req).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let pairs = match parse_form(&ctx.body) {
        Ok(p) => p,
        Err(e) => return ctx.refuse(invalid(None, None, &e)),
    };
    let changes = match customer_changes(&pairs) {
        Ok(c) => c,
        Err(a) => return ctx.refuse(a),
    };
    keyed_write(ctx, pairs, |data, now| {
        let s = &mut data.stripe;
        s.next += 1;
        let mut c = new_customer(s.next, now);
        apply(&mut c, changes);
        let id = c.get("id").and_then(Value::as_str).map(str::to_string);
        s.customers.push(c.clone());
        (Answer::json(200, CT, &Value::Object(c)), id)
    })
    .await
}

/// `POST /v1/customers/{id}`: update (an empty value clears a field or a metadata key).
async fn update(
    State(state): State<SandboxState>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let ctx = match start(state, req).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let pairs = match parse_form(&ctx.body) {
        Ok(p) => p,
        Err(e) => return ctx.refuse(invalid(None, None, &e)),
    };
    let changes = match customer_changes(&pairs) {
        Ok(c) => c,
        Err(a) => return ctx.refuse(a),
    };
    keyed_write(ctx, pairs, |data, _| {
        let found = data
            .stripe
            .customers
            .iter_mut()
            .find(|c| c.get("id").and_then(Value::as_str) == Some(id.as_str()));
        match found {
            Some(c) => {
                apply(c, changes);
                (
                    Answer::json(200, CT, &Value::Object(c.clone())),
                    Some(id.clone()),
                )
            }
            None => (no_such_customer(&id, "id"), None),
        }
    })
    .await
}

/// `GET /v1/customers/{id}`.
async fn retrieve(
    State(state): State<SandboxState>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    let ctx = match start(state, req).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    ctx.run(|_, data, _| {
        Ok(
            match data
                .stripe
                .customers
                .iter()
                .find(|c| c.get("id").and_then(Value::as_str) == Some(id.as_str()))
            {
                Some(c) => (
                    Answer::json(200, CT, &Value::Object(c.clone())),
                    Some(id.clone()),
                ),
                None => (no_such_customer(&id, "id"), None),
            },
        )
    })
    .await
}

/// `GET /v1/customers?email=&limit=&starting_after=&ending_before=`: newest first, `email`
/// an exact (case-sensitive) match, as Stripe documents it.
async fn list(State(state): State<SandboxState>, req: Request) -> Response {
    let ctx = match start(state, req).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let (mut email, mut limit, mut after, mut before) = (None, 10usize, None, None);
    for (k, v) in query_pairs(&ctx.parts) {
        match k.as_str() {
            "email" => email = Some(v),
            "limit" => match v.parse::<usize>() {
                Ok(n) if (1..=100).contains(&n) => limit = n,
                _ => {
                    return ctx.refuse(invalid(
                        Some("parameter_invalid_integer"),
                        Some("limit"),
                        "This value must be greater than or equal to 1 and less than or \
                         equal to 100.",
                    ))
                }
            },
            "starting_after" => after = Some(v),
            "ending_before" => before = Some(v),
            _ if k.starts_with("expand[") => {}
            _ => {
                return ctx.refuse(invalid(
                    Some("parameter_unknown"),
                    Some(&k),
                    &format!("Received unknown parameter: {k}"),
                ))
            }
        }
    }
    ctx.run(|_, data, _| {
        let newest_first: Vec<&Map<String, Value>> = data
            .stripe
            .customers
            .iter()
            .rev()
            .filter(|c| {
                email
                    .as_deref()
                    .is_none_or(|e| c.get("email").and_then(Value::as_str) == Some(e))
            })
            .collect();
        let pos = |id: &str, param: &str| {
            newest_first
                .iter()
                .position(|c| c.get("id").and_then(Value::as_str) == Some(id))
                .ok_or_else(|| no_such_customer(id, param))
        };
        let (data_page, has_more): (Vec<Value>, bool) = if let Some(b) = &before {
            let end = pos(b, "ending_before")?;
            let start = end.saturating_sub(limit);
            (
                newest_first[start..end]
                    .iter()
                    .map(|c| Value::Object((*c).clone()))
                    .collect(),
                start > 0,
            )
        } else {
            let start = match &after {
                Some(a) => pos(a, "starting_after")? + 1,
                None => 0,
            };
            let rest = &newest_first[start.min(newest_first.len())..];
            (
                rest.iter()
                    .take(limit)
                    .map(|c| Value::Object((*c).clone()))
                    .collect(),
                rest.len() > limit,
            )
        };
        Ok((
            Answer::json(
                200,
                CT,
                &json!({
                    "object": "list",
                    "data": data_page,
                    "has_more": has_more,
                    "url": "/v1/customers",
                }),
            ),
            None,
        ))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_keys_like_stripe() {
        assert_eq!(
            mask_key("sk_test_abcdefghijklmnop1234"),
            "sk_test_****************1234"
        );
        assert_eq!(mask_key("short"), "*****");
        assert_eq!(mask_key("sk_live_"), "sk_live_");
    }

    #[test]
    fn fingerprints_ignore_parameter_order() {
        let a = vec![("a".to_string(), "1".to_string()), ("b".into(), "2".into())];
        let b = vec![("b".to_string(), "2".to_string()), ("a".into(), "1".into())];
        assert_eq!(fingerprint("POST", "/x", &a), fingerprint("POST", "/x", &b));
        assert_ne!(fingerprint("POST", "/x", &a), fingerprint("POST", "/y", &a));
    }
}
