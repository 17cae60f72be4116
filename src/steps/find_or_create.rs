//! `find_or_create`: find a record by a stable field; create it once if it is not there.
//!
//! 1. `GET find_url?{match_field}={match_value}`. The answer is a list (a JSON array, or an
//!    object with a `data` array, as Stripe and the sandbox answer). Records are matched again
//!    here (their `match_field`, by its string form, must equal `match_value`), so an endpoint
//!    that ignores the filter cannot make the step pick a wrong record. The first match wins:
//!    output `{found: true, created: false, record}`, leaving by `found` and `out`.
//! 2. None: `POST create_url` (default `find_url`) with `create_body` (when it is an object
//!    without `match_field`, `match_field: match_value` is added, so the next find finds it) and
//!    an `Idempotency-Key`: `idempotency_key`, or by default `<step_id>-<match_value>`, derived
//!    from the business id, so a retry, a redelivery or a replay of a create whose answer was
//!    lost gets the same record back instead of a duplicate. Output
//!    `{found: false, created: true, record}` (the record is the create's answer body), leaving
//!    by `created` and `out`.
//! 3. A `409` on the create (another writer created it between our find and our create, or the
//!    destination's unique field refused a second one) → find again; a match is taken as found.
//!
//! Both calls use the shared retry fields of `http_request` (timeouts, connection errors, 408,
//! 429 and 5xx are retried inside the run deadline; the create is sent identically on every
//! attempt). `headers` go on both calls. Dry runs simulate both calls: `dry_run.find` (default
//! `200 {"data": []}`, i.e. not found) and `dry_run.create` (default `201` with the create body
//! and `"id": "dry_run"`). The linter treats the step as guarded: it always sends an
//! idempotency key. The outbound rules of `http_request` apply to both calls
//! (`allow_input_host`, one-origin redirects, `max_response_bytes`).

use std::collections::BTreeMap;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value};

use super::http_request::{
    check_host, check_max_response_bytes, check_url, default_max_response_bytes, text_pairs,
    url_text,
};
use super::retry::CallPolicy;
use super::{
    key_text, parse_config, parse_rendered, schema_of, Category, ConfigProblem, Descriptor,
    OutboundUrl, StepContext, StepError, StepKind, StepOutput,
};
use crate::run::Mode;
use crate::steps::http::{HttpAnswer, HttpCall};
use crate::steps::retry::{send_with_retries, RetryPolicy};
use crate::steps::{PORT_ERROR, PORT_OUT};

/// Port taken when the record was found.
pub const PORT_FOUND: &str = "found";
/// Port taken when the record was created.
pub const PORT_CREATED: &str = "created";

/// Find-or-create config.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct Config {
    /// Collection URL to search, e.g. `{{ env.CRM_URL }}/contacts`; called as
    /// `GET find_url?<match_field>=<match_value>`.
    #[schemars(title = "Find URL")]
    pub find_url: String,
    /// The stable field records are found by, e.g. `external_id` or `email`.
    #[schemars(title = "Match field")]
    pub match_field: String,
    /// Its value, a template over business data, e.g. `{{ input.data.object.customer }}`.
    /// Rendering to empty is an `empty_key` error.
    #[schemars(with = "String")]
    #[schemars(title = "Match value")]
    pub match_value: Value,
    /// Where to create (POST); default `find_url`.
    #[serde(default)]
    #[schemars(title = "Create URL")]
    pub create_url: Option<String>,
    /// JSON body of the create; templates allowed at any depth. `match_field: match_value` is
    /// added when it is an object without that field. Default `{match_field: match_value}`.
    #[serde(default)]
    #[schemars(title = "Create body")]
    pub create_body: Option<Value>,
    /// Header templates sent on both calls (an `Idempotency-Key` here is ignored: see
    /// `idempotency_key`).
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    #[schemars(title = "Headers")]
    pub headers: BTreeMap<String, Value>,
    /// Idempotency key of the create, from business data; default `<step_id>-<match_value>`.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    #[schemars(title = "Idempotency key")]
    pub idempotency_key: Option<Value>,
    /// Timeouts, retries and backoff: the call policy every step that calls out shares.
    #[serde(flatten)]
    pub call: CallPolicy,
    /// Let the hosts of `find_url` and `create_url` come from run data: the trigger input or a step's output
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
    /// 104857600). A larger answer (to either call) fails the step with `response_too_large`; reading stops at
    /// the cap.
    #[serde(default = "default_max_response_bytes")]
    #[schemars(title = "Largest response (bytes)")]
    pub max_response_bytes: u64,
    /// Simulated answers for dry runs: `{"find": {"status": 200, "body": {"data": [...]}},
    /// "create": {"status": 201, "body": {...}}}`. Default: not found, then created.
    #[serde(default)]
    #[schemars(title = "Dry-run answer")]
    pub dry_run: Option<DrySamples>,
}

/// Dry-run samples of the two calls.
#[derive(Debug, Clone, Deserialize, JsonSchema, Default)]
#[serde(deny_unknown_fields)]
pub struct DrySamples {
    /// Answer of the find (default `200 {"data": []}`).
    #[serde(default)]
    pub find: Option<Value>,
    /// Answer of the create (default `201` with the create body and `"id": "dry_run"`).
    #[serde(default)]
    pub create: Option<Value>,
}

/// The `find_or_create` kind.
pub struct FindOrCreate;

#[async_trait]
impl StepKind for FindOrCreate {
    fn descriptor(&self) -> Descriptor {
        Descriptor {
            kind: "find_or_create",
            title: "Find or create",
            category: Category::Network,
            description: "Finds a record by a stable field (GET ?field=value); if none, creates \
                          it with an Idempotency-Key derived from the business id. Leaves by \
                          `found` or `created`, and always by `out`.",
            trigger: false,
            output: "{found, created, record}",
            dynamic_ports: false,
            side_effects: true,
        }
    }
    fn config_schema(&self) -> Value {
        schema_of::<Config>()
    }
    fn check(&self, config: &Value) -> Vec<ConfigProblem> {
        let c = match parse_config::<Config>(config) {
            Ok(c) => c,
            Err(p) => return p,
        };
        let mut p = c.call.problems();
        let at = |field: &'static str, problems: Vec<ConfigProblem>| {
            problems.into_iter().map(move |mut q| {
                q.path = field.to_string();
                q
            })
        };
        p.extend(at("find_url", check_url(&c.find_url)));
        if let Some(u) = &c.create_url {
            p.extend(at("create_url", check_url(u)));
        }
        p.extend(check_max_response_bytes(c.max_response_bytes));
        if c.match_field.trim().is_empty() {
            p.push(ConfigProblem {
                path: "match_field".into(),
                message: "is empty: name the stable field to find by, e.g. external_id".into(),
            });
        }
        if matches!(&c.match_value, Value::String(s) if s.trim().is_empty())
            || c.match_value.is_null()
        {
            p.push(ConfigProblem {
                path: "match_value".into(),
                message: "is empty: give a template such as {{ input.customer.id }}".into(),
            });
        }
        if let Some(body) = &c.create_body {
            if !body.is_object() {
                p.push(ConfigProblem {
                    path: "create_body".into(),
                    message: "must be a JSON object".into(),
                });
            }
        }
        if matches!(&c.idempotency_key, Some(Value::String(s)) if s.trim().is_empty()) {
            p.push(ConfigProblem {
                path: "idempotency_key".into(),
                message: "is empty: omit it for the default `<step_id>-<match_value>`".into(),
            });
        }
        p
    }
    fn ports(&self, _config: &Value) -> Vec<String> {
        vec![
            PORT_OUT.to_string(),
            PORT_ERROR.to_string(),
            PORT_FOUND.to_string(),
            PORT_CREATED.to_string(),
        ]
    }
    fn outbound_urls(&self, config: &Value) -> Vec<OutboundUrl> {
        let Ok(c) = serde_json::from_value::<Config>(config.clone()) else {
            return Vec::new();
        };
        let mut urls = vec![OutboundUrl {
            field: "find_url",
            template: c.find_url,
            allow_input_host: c.allow_input_host,
        }];
        if let Some(u) = c.create_url {
            urls.push(OutboundUrl {
                field: "create_url",
                template: u,
                allow_input_host: c.allow_input_host,
            });
        }
        urls
    }
    fn secret_fields(&self) -> &'static [&'static str] {
        &["headers"]
    }
    fn unrendered_fields(&self) -> &'static [&'static str] {
        &["dry_run"]
    }
    async fn run(&self, cx: &StepContext<'_>, config: Value) -> Result<StepOutput, StepError> {
        let c: Config = parse_rendered(config)?;
        let value = key_text(&c.match_value, "match_value")?;
        let check_find = check_host(cx, "find_url", c.allow_input_host);
        let check_create = if c.create_url.is_some() {
            check_host(cx, "create_url", c.allow_input_host)
        } else {
            check_find
        };
        let headers: Vec<(String, String)> = text_pairs(&c.headers, "headers")?
            .into_iter()
            .filter(|(k, _)| !k.eq_ignore_ascii_case("idempotency-key"))
            .collect();
        let policy = c.call.retry_policy();
        let dry = c.dry_run.clone().unwrap_or_default();
        let find_sample = dry
            .find
            .clone()
            .unwrap_or_else(|| json!({"status": 200, "body": {"data": []}}));
        let find = HttpCall {
            headers: headers.clone(),
            query: vec![(c.match_field.clone(), value.clone())],
            check_host: check_find,
            max_response_bytes: c.max_response_bytes,
            ..HttpCall::new("GET", url_text(&c.find_url)?)
        };
        let filter = cx.mode == Mode::Live;
        let finder = Finder {
            call: &find,
            policy: &policy,
            sample: &find_sample,
            field: &c.match_field,
            value: &value,
            filter,
        };
        if let Some(record) = finder.find(cx).await? {
            return Ok(found(record));
        }

        let key = match &c.idempotency_key {
            None | Some(Value::Null) => format!("{}-{value}", cx.step_id),
            Some(k) => key_text(k, "idempotency_key")?,
        };
        let mut body = c
            .create_body
            .clone()
            .unwrap_or_else(|| Value::Object(Default::default()));
        if let Value::Object(m) = &mut body {
            if !m.contains_key(&c.match_field) {
                m.insert(c.match_field.clone(), c.match_value.clone());
            }
        }
        let mut create_headers = headers;
        create_headers.push(("Idempotency-Key".into(), key));
        let create = HttpCall {
            headers: create_headers,
            body: Some(body.clone()),
            check_host: check_create,
            max_response_bytes: c.max_response_bytes,
            ..HttpCall::new(
                "POST",
                url_text(c.create_url.as_deref().unwrap_or(&c.find_url))?,
            )
        };
        let create_sample = dry.create.unwrap_or_else(|| {
            let mut b = body.clone();
            if let Value::Object(m) = &mut b {
                m.insert("id".into(), json!("dry_run"));
            }
            json!({"status": 201, "body": b})
        });
        match send_with_retries(cx, &create, &policy, Some(&create_sample)).await {
            Ok(answer) => Ok(StepOutput {
                output: json!({"found": false, "created": true, "record": answer.body}),
                ports: vec![PORT_CREATED.to_string(), PORT_OUT.to_string()],
            }),
            Err(e) if e.http_status == Some(409) && !e.deadline => {
                // Someone else created it meanwhile (or the destination's unique field says it
                // exists): take theirs.
                match finder.find(cx).await? {
                    Some(record) => Ok(found(record)),
                    None => Err(e),
                }
            }
            Err(e) => Err(e),
        }
    }
}

fn found(record: Value) -> StepOutput {
    StepOutput {
        output: json!({"found": true, "created": false, "record": record}),
        ports: vec![PORT_FOUND.to_string(), PORT_OUT.to_string()],
    }
}

struct Finder<'a> {
    call: &'a HttpCall,
    policy: &'a RetryPolicy,
    sample: &'a Value,
    field: &'a str,
    value: &'a str,
    /// Match records again here (live runs; a dry run's sample is taken as given).
    filter: bool,
}

impl Finder<'_> {
    async fn find(&self, cx: &StepContext<'_>) -> Result<Option<Value>, StepError> {
        let answer = send_with_retries(cx, self.call, self.policy, Some(self.sample)).await?;
        let records = records_of(&answer).ok_or_else(|| {
            StepError::new(
                "config",
                format!(
                    "GET {} answered a body that is neither a list nor {{\"data\": [...]}}",
                    self.call.url
                ),
            )
        })?;
        Ok(records
            .iter()
            .find(|r| {
                !self.filter
                    || r.get(self.field)
                        .is_some_and(|v| !v.is_null() && string_form(v) == self.value)
            })
            .cloned())
    }
}

/// A field's string form, as compared with `match_value`: strings as they are, anything else
/// as compact JSON (`42`, `true`).
fn string_form(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The records of a find answer: a JSON array, or an object's `data` array.
fn records_of(answer: &HttpAnswer) -> Option<&Vec<Value>> {
    match &answer.body {
        Value::Array(a) => Some(a),
        Value::Object(m) => m.get("data").and_then(Value::as_array),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_problems_have_paths() {
        let p = FindOrCreate.check(&json!({
            "find_url": "ftp://x", "match_field": "", "match_value": "", "create_body": [1],
            "idempotency_key": " ", "retries": 99
        }));
        let paths: Vec<&str> = p.iter().map(|x| x.path.as_str()).collect();
        for want in [
            "find_url",
            "match_field",
            "match_value",
            "create_body",
            "idempotency_key",
            "retries",
        ] {
            assert!(paths.contains(&want), "{want} in {paths:?}");
        }
        assert!(FindOrCreate
            .check(
                &json!({"find_url": "{{ env.CRM_URL }}/contacts", "match_field": "email",
                           "match_value": "{{ input.email }}"})
            )
            .is_empty());
        assert!(!FindOrCreate
            .check(&json!({"find_url": "x", "typo": 1}))
            .is_empty());
    }

    #[test]
    fn records_from_list_shapes() {
        let a = |body: Value| HttpAnswer {
            status: 200,
            headers: Default::default(),
            body,
        };
        assert_eq!(records_of(&a(json!([{"id": 1}]))).unwrap().len(), 1);
        assert_eq!(
            records_of(&a(json!({"object": "list", "data": []})))
                .unwrap()
                .len(),
            0
        );
        assert!(records_of(&a(json!({"id": 1}))).is_none());
        assert!(records_of(&a(json!("text"))).is_none());
    }
}
