//! `publish_output`: posts the run's result to a webhook/HTTP endpoint with an outbound
//! `Idempotency-Key` that is identical on every attempt.
//!
//! `idempotency_key` empty → one key per run lineage (`<root_run_id>.<step_id>`, stable across
//! that run's retries and its resumes: a resumed call sends the first attempt's key); templated → from business data (stable across re-runs and replays, so the
//! receiver dedupes them too). Same retry fields and defaults as `http_request`.
//! Output: `{status, idempotency_key, attempts}`. The outbound rules of `http_request` apply
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
use crate::steps::http::HttpCall;
use crate::steps::retry::send_with_retries;

/// Publish output config.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct Config {
    /// Endpoint URL template.
    #[schemars(title = "URL")]
    pub url: String,
    /// Extra header templates (the `Idempotency-Key` header is set from `idempotency_key`).
    #[serde(default)]
    #[schemars(with = "BTreeMap<String, String>")]
    #[schemars(title = "Headers")]
    pub headers: BTreeMap<String, Value>,
    /// JSON body; default `{run_id, workflow_id, outputs}` with every step's output so far.
    #[serde(default)]
    #[schemars(title = "Body")]
    pub body: Option<Value>,
    /// Outbound idempotency key template; empty = one key per run.
    #[serde(default)]
    #[schemars(with = "Option<String>")]
    #[schemars(title = "Idempotency key")]
    pub idempotency_key: Option<Value>,
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
    /// the cap (the body is read, not kept: the output has the status only).
    #[serde(default = "default_max_response_bytes")]
    #[schemars(title = "Largest response (bytes)")]
    pub max_response_bytes: u64,
    /// Simulated answer for dry runs (default 200 `{}`).
    #[serde(default)]
    #[schemars(title = "Dry-run answer")]
    pub dry_run: Option<Value>,
}

/// The `publish_output` kind.
pub struct PublishOutput;

#[async_trait]
impl StepKind for PublishOutput {
    fn descriptor(&self) -> Descriptor {
        Descriptor {
            kind: "publish_output",
            title: "Publish output",
            category: Category::Network,
            description: "Posts the run's result to an endpoint with an Idempotency-Key that is \
                          identical on every attempt (templated: stable across re-runs).",
            trigger: false,
            output: "{status, idempotency_key, attempts}",
            dynamic_ports: false,
            side_effects: true,
        }
    }
    fn config_schema(&self) -> Value {
        schema_of::<Config>()
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
        // Per run only when the key is *configured* empty; a template that renders empty is an
        // `empty_key` error (SPEC §2), never a silent switch to a per-run key.
        let configured_empty = |v: Option<&Value>| match v {
            None | Some(Value::Null) => true,
            Some(Value::String(s)) => s.trim().is_empty(),
            Some(_) => false,
        };
        let per_run = match cx.raw_config() {
            Some(raw) => configured_empty(raw.get("idempotency_key")),
            None => {
                matches!(&c.idempotency_key, None | Some(Value::Null))
                    || matches!(&c.idempotency_key, Some(Value::String(s)) if s.is_empty())
            }
        };
        let key = if per_run {
            format!("{}.{}", cx.root_run_id, cx.step_id)
        } else {
            key_text(
                c.idempotency_key.as_ref().unwrap_or(&Value::Null),
                "idempotency_key",
            )?
        };
        let mut headers: Vec<(String, String)> = text_pairs(&c.headers, "headers")?
            .into_iter()
            .filter(|(k, _)| !k.eq_ignore_ascii_case("idempotency-key"))
            .collect();
        headers.push(("Idempotency-Key".into(), key.clone()));
        let body = match c.body {
            Some(b) => b,
            None => json!({
                "run_id": cx.run_id,
                "workflow_id": cx.workflow_id,
                "outputs": outputs_so_far(cx),
            }),
        };
        let call = HttpCall {
            headers,
            body: Some(body),
            check_host: check_host(cx, "url", c.allow_input_host),
            max_response_bytes: c.max_response_bytes,
            ..HttpCall::new("POST", url_text(&c.url)?)
        };
        let policy = c.call.retry_policy();
        let answer = send_with_retries(cx, &call, &policy, c.dry_run.as_ref()).await?;
        Ok(StepOutput::out(json!({
            "status": answer.status,
            "idempotency_key": key,
            "attempts": cx.attempt_count(),
        })))
    }
}

/// `{step_id: output}` of the steps that ran before this one.
fn outputs_so_far(cx: &StepContext<'_>) -> Value {
    let steps = cx.scope.get_attr("steps").ok();
    let Some(steps) = steps else {
        return json!({});
    };
    let mut out = serde_json::Map::new();
    if let Ok(iter) = steps.try_iter() {
        for k in iter {
            let Some(name) = k.as_str() else { continue };
            if let Ok(o) = steps.get_item(&k).and_then(|s| s.get_attr("output")) {
                out.insert(
                    name.to_string(),
                    serde_json::to_value(&o).unwrap_or(Value::Null),
                );
            }
        }
    }
    Value::Object(out)
}
