//! `action`: runs one operation of a connector ([`crate::connectors`]) as a connection
//! ([`crate::connections`]): `{"connector": "hubspot", "operation": "create_contact",
//! "connection": "hubspot-sales", "params": {"email": "{{ input.email }}"}}`.
//!
//! The request comes from the operation's mapping, the credential from the connection (never
//! from the workflow), the retries, backoff and run deadline from the shared call policy
//! ([`crate::steps::retry`]). How a repeat is kept from duplicating comes from the operation's
//! dedupe strategy:
//!
//! * `native_key`: the step's idempotency key goes in the app's header (its length checked
//!   against the app's limit before anything is sent);
//! * `upsert`: nothing to add; the write matches on its field;
//! * `conflict_is_exists`: the app's conflict answer ends the step as a success with
//!   `existing: true` and the existing record's id, never retried;
//! * `kept_id`: the id the first write answered is kept in Memory (namespace
//!   [`KEPT_NAMESPACE`], key `<workflow>/<step>/<idempotency key>`, for [`KEPT_TTL_MS`]), and a
//!   repeat calls the `update` operation with it. Slack has no idempotency key, so its post
//!   carries the key in the message's metadata and names a `find` operation, which looks for
//!   a message carrying the key (and keeps its id instead of posting again) before every retry
//!   and on a repeat whose first run died between Slack's answer and keeping the id. Before
//!   its first post the step keeps a "pending" mark under the key, so only a repeat that meets
//!   the mark (or a retry) looks: the common post costs one request. The find's reach is the
//!   channel's newest 100 messages;
//! * `find_then_create`: the connector's find operation runs first with the same params; a
//!   hit (`found: true`) ends the step with `existing: true` and what it found;
//! * `none`: the step is not safe to repeat ([`StepKind::repeat_safety`]), and the linter asks
//!   for a Memory claim in front.
//!
//! Requests are paced per connection at the app's documented rate limit
//! ([`crate::connections::pace`]), within the run deadline.
//!
//! An OAuth 2 connection (live runs) sends its current access token, refreshed first when it
//! expires within a minute, and refreshed once more when the app refuses it (a connector
//! rule's `refresh_token` outcome, or a 401 no rule names): the call is then sent once
//! again, and a second refusal fails as `fail` does. Refreshes are single-flight per
//! connection across processes ([`crate::connections::oauth`]).
//!
//! The idempotency key: `idempotency_key` when set (a template, e.g. `{{ input.id }}`), else
//! one per run lineage (`<root_run_id>.<step_id>`), as `publish_output` does.
//!
//! Templates of a mapping read `params`, `connection.values`, `idempotency_key` and (outputs)
//! `response`.
//!
//! Output: the operation's `output` (templates over `response` and `params`), plus `existing`
//! (`true` when the record was there already) and `attempts`. Errors: `connection_not_found`,
//! `connection_mismatch`, `unknown_operation`, `connector_error` (an answer the connector's
//! rules call a failure, with the app's message), the token refresh's (`auth_failed`: the
//! connection must be reconnected; `oauth_refresh_failed`; `connection_unavailable`), and the
//! transport's (`timeout`, `http_status`, …).

use std::collections::BTreeMap;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::http::{HttpAnswer, HttpCall};
use super::retry::{send_with_retries_keeping, CallPolicy};
use super::{
    key_text, parse_config, parse_rendered, schema_of, Category, ConfigProblem, Descriptor,
    RepeatSafety, StepContext, StepError, StepKind, StepOutput,
};
use crate::connections::{Connection, Credential};
use crate::connectors::{self, Connector, Dedupe, Operation, Outcome};
use crate::store::WriteOptions;
use crate::template::Templates;

/// The template environment connector mappings render in: built once (an environment installs
/// Fluxo's filters and guards), its templates compiled on the spot.
static MAPPINGS: std::sync::LazyLock<Templates> = std::sync::LazyLock::new(Templates::new);

/// The Memory namespace of the ids `kept_id` writes keep.
pub const KEPT_NAMESPACE: &str = "fluxo.action.kept";

/// How long a kept id is kept, in **milliseconds** (30 days): a repeat later than that writes
/// anew (Slack: a new message).
pub const KEPT_TTL_MS: u64 = 30 * 24 * 3600 * 1000;

/// `action` config.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct Config {
    /// The connector's app (`hubspot`, `stripe`, `slack`, `google_sheets`).
    #[schemars(title = "App")]
    pub connector: String,
    /// The operation (`create_contact`).
    #[schemars(title = "Operation")]
    pub operation: String,
    /// The id of the connection to act as (Settings → Connections).
    #[schemars(title = "Connection")]
    pub connection: String,
    /// The operation's input (its fields come from the operation's schema); templates allowed.
    #[serde(default)]
    #[schemars(title = "Fields")]
    pub params: Map<String, Value>,
    /// What a repeat of this write dedupes on (an app's idempotency key, the key a kept id is
    /// stored under), e.g. `{{ input.id }}`; default one per run lineage.
    #[serde(default)]
    #[schemars(title = "Idempotency key")]
    pub idempotency_key: Option<Value>,
    /// Timeouts, retries and backoff: the call policy every step that calls out shares.
    #[serde(flatten)]
    pub call: CallPolicy,
    /// Simulated answer for dry runs: `{"status": 200, "body": {...}}` (default 200 `{}`).
    #[serde(default)]
    #[schemars(title = "Dry-run answer")]
    pub dry_run: Option<Value>,
}

/// The connector and operation `c` names, or the problem, with its config path.
pub fn resolve(c: &Config) -> Result<(&'static Connector, &'static Operation), ConfigProblem> {
    let connector = connectors::get(&c.connector).ok_or_else(|| ConfigProblem {
        path: "connector".into(),
        message: format!(
            "no connector `{}`; one of: {}",
            c.connector,
            connectors::CONNECTORS
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })?;
    let op = connector
        .operations
        .get(&c.operation)
        .ok_or_else(|| ConfigProblem {
            path: "operation".into(),
            message: format!(
                "{} has no operation `{}`; one of: {}",
                connector.title,
                c.operation,
                connector
                    .operations
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })?;
    Ok((connector, op))
}

/// The dedupe strategy of the write `config` names, if it is one.
pub fn strategy(config: &Value) -> Option<&'static Dedupe> {
    let c: Config = serde_json::from_value(config.clone()).ok()?;
    let (_, op) = resolve(&c).ok()?;
    op.dedupe.as_ref().filter(|_| op.kind.is_write())
}

/// The `action` kind.
pub struct Action;

#[async_trait]
impl StepKind for Action {
    fn descriptor(&self) -> Descriptor {
        Descriptor {
            kind: "action",
            title: "App action",
            category: Category::Network,
            description: "Runs an operation of a connected app (HubSpot, Slack, …) as a \
                          connection from Settings → Connections: no URL or header to type. \
                          Each write declares how a repeat dedupes (a native key, an upsert, \
                          \"409 is exists\", a kept id), shown on the node; one that cannot \
                          dedupe wants a Memory claim in front.",
            trigger: false,
            output: "{…the operation's output, existing, attempts}",
            dynamic_ports: false,
            side_effects: true,
        }
    }
    fn config_schema(&self) -> Value {
        schema_of::<Config>()
    }
    fn repeat_safety(&self, config: &Value) -> RepeatSafety {
        match strategy(config) {
            Some(Dedupe::None) => {
                let c: Option<Config> = serde_json::from_value(config.clone()).ok();
                let title = c
                    .as_ref()
                    .and_then(|c| resolve(c).ok())
                    .map_or("this write".to_string(), |(app, op)| {
                        format!("{} {}", app.title, op.title.to_lowercase())
                    });
                RepeatSafety::Unsafe(format!(
                    "{title} has no dedupe at the app (strategy none): a repeat may duplicate it"
                ))
            }
            _ => RepeatSafety::Safe,
        }
    }
    fn check(&self, config: &Value) -> Vec<ConfigProblem> {
        let c: Config = match parse_config(config) {
            Ok(c) => c,
            Err(p) => return p,
        };
        let mut p = c.call.problems();
        match resolve(&c) {
            Err(e) => p.push(e),
            Ok((_, op)) => {
                let known = op.input.get("properties").and_then(Value::as_object);
                for name in c.params.keys() {
                    if known.is_some_and(|k| !k.contains_key(name)) {
                        let fields: Vec<&str> = known
                            .into_iter()
                            .flatten()
                            .map(|(k, _)| k.as_str())
                            .collect();
                        p.push(ConfigProblem {
                            path: format!("params.{name}"),
                            message: format!(
                                "`{}` has no field `{name}`; its fields: {}",
                                op.title,
                                fields.join(", ")
                            ),
                        });
                    }
                }
                let required = op.input.get("required").and_then(Value::as_array);
                for name in required.into_iter().flatten().filter_map(Value::as_str) {
                    if !c.params.contains_key(name) {
                        p.push(ConfigProblem {
                            path: format!("params.{name}"),
                            message: format!("`{}` needs `{name}`", op.title),
                        });
                    }
                }
            }
        }
        p
    }
    fn unrendered_fields(&self) -> &'static [&'static str] {
        &["dry_run"]
    }
    async fn run(&self, cx: &StepContext<'_>, config: Value) -> Result<StepOutput, StepError> {
        let c: Config = parse_rendered(config)?;
        let (connector, op) = resolve(&c).map_err(|p| StepError::new("config", p.message))?;
        // A required field that rendered empty would write a record without it (a contact with
        // no email, twice): name it instead.
        let required = op.input.get("required").and_then(Value::as_array);
        for name in required.into_iter().flatten().filter_map(Value::as_str) {
            if matches!(c.params.get(name), None | Some(Value::Null))
                || c.params.get(name) == Some(&Value::String(String::new()))
            {
                return Err(StepError::new(
                    "invalid_input",
                    format!(
                        "`{}` needs `{name}`, and params.{name} rendered empty for this event",
                        op.title
                    ),
                ));
            }
        }
        let conn = connection(cx, &c, connector, op)?;
        let key = idempotency_key(cx, &c)?;
        let mut params = c.params.clone();
        let mut op = op;
        let mut kept_at = None;
        // Whether a write of this key may have happened without its id being kept.
        let mut maybe_written = false;
        if let Some(Dedupe::KeptId { update, find, .. }) = &op.dedupe {
            let at = format!("{}/{}/{key}", cx.workflow_id, cx.step_id);
            let memory = cx.effects.memory(super::memory::Scope::Persistent);
            match memory.read(KEPT_NAMESPACE, &at, cx.clock.now_ms()).await? {
                Some(entry) if entry.value != pending() => {
                    // A repeat: update what the first write made.
                    params.insert("kept_id".into(), entry.value);
                    op = &connector.operations[update];
                }
                Some(_) => {
                    maybe_written = true;
                    kept_at = Some(at);
                }
                None => {
                    if find.is_some() {
                        keep_id(cx, &at, &pending()).await?;
                    }
                    kept_at = Some(at);
                }
            }
        }
        let policy = c.call.retry_policy();
        // A kept-id write that can be found again is created like a find-then-create one.
        let finder = match &op.dedupe {
            Some(Dedupe::FindThenCreate { find, .. }) => Some((find, true)),
            Some(Dedupe::KeptId {
                find: Some(find), ..
            }) if kept_at.is_some() => Some((find, maybe_written)),
            _ => None,
        };
        let (mut output, existing, ctx) = match finder {
            Some((find, look_first)) => {
                let find = &connector.operations[find];
                let ops = (find, op, look_first);
                match find_then_create(cx, connector, ops, &conn, &params, &key, &policy, &c)
                    .await?
                {
                    Found::Existing(mut output) => {
                        if let (Some(at), Some(kept)) = (&kept_at, output.get("kept_id")) {
                            keep_id(cx, at, kept).await?;
                        }
                        if let Value::Object(m) = &mut output {
                            m.insert("existing".into(), Value::Bool(true));
                            m.insert("attempts".into(), json!(cx.attempt_count()));
                        }
                        return Ok(StepOutput::out(output));
                    }
                    Found::Created(done) => done,
                }
            }
            _ => call_op(cx, connector, op, &conn, &params, &key, &policy, &c).await?,
        };
        let live = cx.mode == crate::run::Mode::Live;
        if let (Some(at), Some(Dedupe::KeptId { id, .. }), true) = (kept_at, &op.dedupe, live) {
            let kept = render(id, &ctx, "dedupe.id")?;
            keep_id(cx, &at, &kept).await?;
        }
        if let Value::Object(m) = &mut output {
            m.insert("existing".into(), Value::Bool(existing));
            m.insert("attempts".into(), json!(cx.attempt_count()));
        } else {
            output = json!({"value": output, "existing": existing, "attempts": cx.attempt_count()});
        }
        Ok(StepOutput::out(output))
    }
}

/// What a kept-id write with a `find` keeps before it writes: "this key may have been
/// written", so a repeat that meets it (the first run died before keeping the id) looks first.
fn pending() -> Value {
    json!({"fluxo_pending": true})
}

/// Keep `kept` (the id a kept-id write answered or its find found, or [`pending`]) under `at`
/// in live runs (a dry run keeps nothing).
async fn keep_id(cx: &StepContext<'_>, at: &str, kept: &Value) -> Result<(), StepError> {
    if cx.mode != crate::run::Mode::Live {
        return Ok(());
    }
    let memory = cx.effects.memory(super::memory::Scope::Persistent);
    let opts = WriteOptions {
        allow_overwrite: true,
        ttl_ms: Some(KEPT_TTL_MS),
        owner: None,
    };
    memory
        .write(KEPT_NAMESPACE, at, kept, opts, cx.clock.now_ms())
        .await?;
    Ok(())
}

enum Found {
    /// The find's output: the record is there.
    Existing(Value),
    /// The create's output, whether it existed, and its template context.
    Created((Value, bool, Value)),
}

/// `find_then_create`: the find (before the first attempt only when `look_first`), then the
/// create with a single attempt; a create that fails transiently (a timeout after the app
/// wrote, a 5xx) is retried by looking again first, so a lost answer is found rather than
/// written twice. Retries and backoff are the step's.
#[allow(clippy::too_many_arguments)]
async fn find_then_create(
    cx: &StepContext<'_>,
    connector: &Connector,
    (find, create, look_first): (&Operation, &Operation, bool),
    conn: &Connection,
    params: &Map<String, Value>,
    key: &str,
    policy: &super::retry::RetryPolicy,
    c: &Config,
) -> Result<Found, StepError> {
    let once = super::retry::RetryPolicy {
        retries: 0,
        ..*policy
    };
    let mut last: Option<StepError> = None;
    let mut past_deadline = false;
    for n in 1..=policy.max_attempts() {
        if n > 1 {
            // The app's `Retry-After` (a 429, a 503) replaces the backoff, capped as in
            // `steps::retry`.
            let wait = match last.as_ref().and_then(|e| e.retry_after_ms) {
                Some(ms) => ms.min(policy.max_delay_ms),
                None => policy.backoff_ms(n - 1, &mut rand::thread_rng()),
            };
            if cx.clock.now_ms() + wait as i64 >= cx.deadline_ms {
                past_deadline = true;
                break;
            }
            cx.effects
                .wait(cx.clock, std::time::Duration::from_millis(wait))
                .await;
        }
        if n > 1 || look_first {
            let (found, _, _) = call_op(cx, connector, find, conn, params, key, policy, c).await?;
            if found.get("found") == Some(&Value::Bool(true)) {
                return Ok(Found::Existing(found));
            }
        }
        match call_op(cx, connector, create, conn, params, key, &once, c).await {
            Ok(done) => return Ok(Found::Created(done)),
            Err(e) if transient(&e) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    let mut e = last.unwrap_or_else(|| {
        StepError::new(
            "deadline_exceeded",
            "the run deadline passed before the step could run",
        )
    });
    e.attempts = cx.attempt_count();
    e.deadline |= past_deadline;
    Err(e)
}

/// A failure another attempt may not meet: a timeout, a lost connection, 408, 429, 5xx.
fn transient(e: &StepError) -> bool {
    matches!(e.code, "timeout" | "connection")
        || e.http_status.is_some_and(super::retry::is_retryable_status)
}

/// Send `op` and read its answer: the output, whether the record existed already, and the
/// template context (`response`, `params`) it was rendered with.
#[allow(clippy::too_many_arguments)]
async fn call_op(
    cx: &StepContext<'_>,
    connector: &Connector,
    op: &Operation,
    conn: &Connection,
    params: &Map<String, Value>,
    key: &str,
    policy: &super::retry::RetryPolicy,
    c: &Config,
) -> Result<(Value, bool, Value), StepError> {
    // Live runs of an engine send an OAuth 2 connection's current token, refreshed when it
    // expires and once more when the app refuses it (`refresh_token` rules).
    let oauth = match (&conn.credential, cx.effects.oauth()) {
        (Credential::Oauth2 { .. }, Some(tokens)) if cx.mode == crate::run::Mode::Live => {
            Some(tokens)
        }
        _ => None,
    };
    let io = crate::connections::oauth::Io {
        memory: cx.effects.memory(super::memory::Scope::Persistent),
        http: cx.effects.http_shared(),
        clock: cx.clock,
        deadline_ms: cx.deadline_ms,
        store_key: cx.effects.connections().state_key(),
    };
    let mut token = match oauth {
        Some(tokens) => Some(tokens.access_token(&io, conn, None).await?),
        None => None,
    };
    let mut refreshed = false;
    // Every answer but a transient one comes back to be read by the rules.
    let keep = |a: &HttpAnswer| a.status < 500 && !matches!(a.status, 408 | 429);
    let (answer, ctx, existing) = loop {
        let call = request(connector, op, conn, params, key, token.as_deref())?;
        pace(cx, connector, conn).await?;
        let answer =
            send_with_retries_keeping(cx, &call, policy, c.dry_run.as_ref(), &keep).await?;
        let response =
            json!({"status": answer.status, "headers": answer.headers, "body": answer.body});
        let ctx = json!({"response": response, "params": params, "idempotency_key": key});
        let message = match verdict(connector, op, &answer) {
            Verdict::Done => break (answer, ctx, false),
            Verdict::Exists => break (answer, ctx, true),
            Verdict::Refresh(message) => match oauth {
                Some(tokens) if !refreshed => {
                    refreshed = true;
                    token = Some(tokens.access_token(&io, conn, token.as_deref()).await?);
                    continue;
                }
                _ => message,
            },
            Verdict::Fail(message) => message,
        };
        let message = message
            .map(|m| render_text(&m, &ctx))
            .unwrap_or_else(|| format!("{} answered {}", connector.title, answer.status));
        let mut e = StepError::new("connector_error", message);
        e.http_status = Some(answer.status);
        e.attempts = cx.attempt_count();
        return Err(e);
    };
    let output = match (&op.dedupe, &op.output) {
        // The conflict names the record that exists; the operation's output describes a
        // created one.
        (
            Some(Dedupe::ConflictIsExists {
                id_pointer: Some(ptr),
                id_after,
                ..
            }),
            _,
        ) if existing => json!({"id": existing_id(&answer.body, ptr, id_after.as_deref())}),
        (_, Some(t)) => match render(t, &ctx, "output") {
            Ok(v) => v,
            // A dry run's simulated answer (`dry_run`, default `{}`) rarely has the app's
            // fields: the output says it was simulated instead of failing the preview.
            Err(_) if cx.mode == crate::run::Mode::Dry => json!({"simulated": true}),
            Err(e) => return Err(e),
        },
        (_, None) => answer.body.clone(),
    };
    Ok((output, existing, ctx))
}

/// Wait for the connection's turn under the app's documented rate limit (live runs), within
/// the run deadline: `deadline_exceeded` when the turn comes after it.
async fn pace(
    cx: &StepContext<'_>,
    connector: &Connector,
    conn: &Connection,
) -> Result<(), StepError> {
    let (Some(pacer), Some(limit)) = (cx.effects.pacer(), &connector.rate_limit) else {
        return Ok(());
    };
    loop {
        let wait = pacer.check(&conn.id, limit);
        if wait.is_zero() {
            return Ok(());
        }
        let remaining = cx.deadline_ms - cx.clock.now_ms();
        if wait.as_millis() as i64 >= remaining {
            let mut e = StepError::new(
                "deadline_exceeded",
                format!(
                    "{}'s rate limit ({} per {} s) gives connection `{}` its next turn \
                     in {} ms, after the run deadline",
                    connector.title,
                    limit.requests,
                    limit.per_s,
                    conn.id,
                    wait.as_millis()
                ),
            );
            e.deadline = true;
            return Err(e);
        }
        cx.effects.wait(cx.clock, wait).await;
    }
}

/// The connection `c` names, checked against the connector.
fn connection(
    cx: &StepContext<'_>,
    c: &Config,
    connector: &Connector,
    op: &Operation,
) -> Result<Connection, StepError> {
    let kind = op.auth.first().map_or("bearer", String::as_str);
    let conn = cx
        .effects
        .connections()
        .get_for(&c.connection, &connector.app, kind)
        .map_err(|e| StepError::new("connection_unavailable", e.to_string()))?
        .ok_or_else(|| {
            StepError::new(
                "connection_not_found",
                format!(
                    "no connection `{}`: add one for {} in Settings → Connections",
                    c.connection, connector.title
                ),
            )
        })?;
    if conn.app != connector.app {
        return Err(StepError::new(
            "connection_mismatch",
            format!(
                "connection `{}` is for {}, not {}",
                conn.id, conn.app, connector.title
            ),
        ));
    }
    Ok(conn)
}

/// The key a repeat dedupes on: `idempotency_key`, else one per run lineage.
fn idempotency_key(cx: &StepContext<'_>, c: &Config) -> Result<String, StepError> {
    match &c.idempotency_key {
        Some(v) if !matches!(v, Value::Null) => key_text(v, "idempotency_key"),
        _ => Ok(format!("{}.{}", cx.root_run_id, cx.step_id)),
    }
}

/// The HTTP call of `op` as `conn`, with `params` and the idempotency `key`; an OAuth 2
/// connection sends `oauth_token` when given (the current token,
/// [`crate::connections::oauth`]), else its credential's access token.
fn request(
    connector: &Connector,
    op: &Operation,
    conn: &Connection,
    params: &Map<String, Value>,
    key: &str,
    oauth_token: Option<&str>,
) -> Result<HttpCall, StepError> {
    if !op.auth.is_empty() && !op.auth.iter().any(|k| k == conn.credential.kind()) {
        return Err(StepError::new(
            "connection_mismatch",
            format!(
                "`{}` needs a connection with {}; `{}` has {}",
                op.title,
                op.auth.join(" or "),
                conn.id,
                conn.credential.kind()
            ),
        ));
    }
    let ctx = json!({
        "params": params,
        "connection": {"values": conn.values},
        "idempotency_key": key,
    });
    let r = &op.request;
    let base = match &conn.credential {
        Credential::WebhookUrl { url } => url.clone(),
        _ => conn
            .base_url
            .clone()
            .unwrap_or_else(|| render_text(&connector.base_url, &ctx)),
    };
    // The path as a URL template: each value from `params` is one percent-encoded segment
    // (`crate::template`'s URL rule), so a sheet named `Q1 / Q2` stays one segment.
    let url = MAPPINGS
        .render_url(
            &format!("{}{}", base.trim_end_matches('/'), r.path),
            &minijinja::Value::from_serialize(&ctx),
            "request.path",
        )
        .map(|v| text_of(&v))
        .map_err(|e| {
            if e.message.contains("path segment `..`") {
                // The url module speaks of run data and of writing the path; here the
                // segment is a field of the operation.
                StepError::new(
                    "invalid_input",
                    format!(
                        "`{}`: a field placed in the request's path rendered `..`, which would \
                         climb the app's URL path; it is refused",
                        op.title
                    ),
                )
            } else {
                StepError::new("template_error", format!("connector mapping: {e}"))
            }
        })?;
    let mut headers: Vec<(String, String)> = r
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), render_text(v, &ctx)))
        .collect();
    if let Some(Dedupe::NativeKey { header, max_len }) = &op.dedupe {
        if key.chars().count() > *max_len {
            return Err(StepError::new(
                "invalid_idempotency_key",
                format!(
                    "the idempotency key has {} characters; {} takes at most {max_len} in {header}",
                    key.chars().count(),
                    connector.title
                ),
            ));
        }
        headers.push((header.clone(), key.to_string()));
    }
    let query = r
        .query
        .iter()
        .map(|(k, v)| {
            let v = render(v, &ctx, &format!("request.query.{k}"))?;
            Ok((k.clone(), text_of(&v)))
        })
        .collect::<Result<Vec<_>, StepError>>()?;
    let body = match &r.body {
        Some(b) => Some(drop_nulls(render(b, &ctx, "request.body")?)),
        None => None,
    };
    let mut call = HttpCall {
        headers,
        query,
        body,
        ..HttpCall::new(&r.method, url)
    };
    authenticate(connector, &conn.credential, oauth_token, &mut call);
    Ok(call)
}

/// The connector's `test` request (a cheap read) as `conn`, for "Test connection": built as
/// an operation's request is (`request`: the same mapping, URL and credential rules), or
/// `None` when the connector has none.
pub fn test_call(
    connector: &Connector,
    conn: &Connection,
    oauth_token: Option<&str>,
) -> Result<Option<HttpCall>, StepError> {
    let Some(req) = &connector.test else {
        return Ok(None);
    };
    let op = Operation {
        title: "Test connection".into(),
        description: String::new(),
        kind: crate::connectors::OpKind::Get,
        input: json!({"type": "object"}),
        request: req.clone(),
        output: None,
        dedupe: None,
        errors: Vec::new(),
        auth: Vec::new(),
    };
    request(connector, &op, conn, &Map::new(), "", oauth_token).map(Some)
}

/// Put `credential` in `call` as `connector` reads it: where its auth spec for the
/// credential's kind says ([`crate::connectors::Inject`]: a header, a query parameter or a
/// body member, the secret after its `prefix`), else the `Authorization` header
/// ([`Credential::authorization`]). An OAuth 2 credential sends `oauth_token` (its current
/// token) when given. A webhook URL is its own credential: nothing is added. Steps and "Test
/// connection" authenticate through this one rule.
pub fn authenticate(
    connector: &Connector,
    credential: &Credential,
    oauth_token: Option<&str>,
    call: &mut HttpCall,
) {
    use crate::connectors::InjectPlace;
    let inject = connector
        .auth
        .iter()
        .find(|a| a.kind == credential.kind())
        .and_then(|a| a.inject.as_ref());
    let secret = match credential {
        Credential::Bearer { token } => Some(token.as_str()),
        Credential::Oauth2 { access_token, .. } => Some(oauth_token.unwrap_or(access_token)),
        Credential::Basic { .. } | Credential::WebhookUrl { .. } => None,
    };
    match (inject, secret) {
        (Some(i), Some(secret)) => {
            let value = format!("{}{secret}", i.prefix);
            match i.place {
                InjectPlace::Header => call.headers.push((i.name.clone(), value)),
                InjectPlace::Query => call.query.push((i.name.clone(), value)),
                InjectPlace::Body => match &mut call.body {
                    Some(Value::Object(m)) => {
                        m.insert(i.name.clone(), Value::String(value));
                    }
                    _ => call.body = Some(json!({ i.name.clone(): value })),
                },
            }
        }
        _ => {
            if let Some(a) = credential.authorization(oauth_token) {
                call.headers.push(("Authorization".into(), a));
            }
        }
    }
}

enum Verdict {
    Done,
    Exists,
    /// The token was refused: refresh and retry once (OAuth 2), else fail with the message.
    Refresh(Option<String>),
    Fail(Option<String>),
}

/// What `answer` means for `op` of `connector`: its dedupe conflict, then its rules, then the
/// connector's, then the status class.
fn verdict(connector: &Connector, op: &Operation, answer: &HttpAnswer) -> Verdict {
    if let Some(Dedupe::ConflictIsExists { status, .. }) = &op.dedupe {
        if answer.status == *status {
            return Verdict::Exists;
        }
    }
    let rule = op
        .errors
        .iter()
        .chain(&connector.errors)
        .find(|r| r.matches(answer.status, &answer.body));
    match rule.map(|r| (r.then, r.message.clone())) {
        Some((Outcome::Success, _)) => Verdict::Done,
        Some((Outcome::Exists, _)) => Verdict::Exists,
        Some((Outcome::RefreshToken, message)) => Verdict::Refresh(message),
        Some((_, message)) => Verdict::Fail(message),
        None if (200..300).contains(&answer.status) => Verdict::Done,
        None if answer.status == 401 => Verdict::Refresh(None),
        None => Verdict::Fail(None),
    }
}

/// The id after `after` in the text at `pointer` of `body` (letters, digits, `_`, `-`).
fn existing_id(body: &Value, pointer: &str, after: Option<&str>) -> Value {
    let Some(at) = body.pointer(pointer) else {
        return Value::Null;
    };
    match (at.as_str(), after) {
        (Some(text), Some(after)) => text
            .find(after)
            .map(|i| {
                let rest = &text[i + after.len()..];
                let id: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
                    .collect();
                Value::String(id)
            })
            .unwrap_or(Value::Null),
        _ => at.clone(),
    }
}

/// Render the connector's template value `t` over `ctx` (`params`, `connection`, `response`).
fn render(t: &Value, ctx: &Value, field: &str) -> Result<Value, StepError> {
    MAPPINGS
        .render_value(t, &minijinja::Value::from_serialize(ctx), field)
        .map_err(|e| StepError::new("template_error", format!("connector mapping: {e}")))
}

fn render_text(t: &str, ctx: &Value) -> String {
    match render(&Value::String(t.to_string()), ctx, "text") {
        Ok(v) => text_of(&v),
        Err(e) => e.message,
    }
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `v` without object members that are `null` (an optional field the step left out).
fn drop_nulls(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(_, x)| !x.is_null())
                .map(|(k, x)| (k, drop_nulls(x)))
                .collect::<BTreeMap<_, _>>()
                .into_iter()
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(drop_nulls).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connector(inject: Value) -> Connector {
        let mut auth = json!({"kind": "bearer", "title": "API key"});
        if !inject.is_null() {
            auth["inject"] = inject;
        }
        crate::connectors::parse(
            &json!({
                "app": "acme", "title": "Acme", "base_url": "https://api.acme.example",
                "auth": [auth, {"kind": "basic", "title": "Login"}],
                "operations": {}
            })
            .to_string(),
        )
        .unwrap()
    }

    fn call() -> HttpCall {
        HttpCall {
            body: Some(json!({"name": "Ada"})),
            ..HttpCall::new("POST", "https://api.acme.example/things")
        }
    }

    /// A connector's `inject` puts the secret where the app reads it; without one, and for a
    /// kind it does not name, the `Authorization` header carries it.
    #[test]
    fn the_secret_goes_where_the_connector_says() {
        let key = Credential::Bearer {
            token: "k-123".into(),
        };
        let mut c = call();
        authenticate(&connector(Value::Null), &key, None, &mut c);
        assert_eq!(c.headers, [("Authorization".into(), "Bearer k-123".into())]);

        let mut c = call();
        let header = json!({"in": "header", "name": "X-API-Key"});
        authenticate(&connector(header), &key, None, &mut c);
        assert_eq!(c.headers, [("X-API-Key".into(), "k-123".into())]);

        let mut c = call();
        let query = json!({"in": "query", "name": "api_key"});
        authenticate(&connector(query), &key, None, &mut c);
        assert_eq!(c.query, [("api_key".into(), "k-123".into())]);
        assert!(c.headers.is_empty());

        let mut c = call();
        let body = json!({"in": "body", "name": "token", "prefix": "Token "});
        authenticate(&connector(body.clone()), &key, None, &mut c);
        assert_eq!(c.body, Some(json!({"name": "Ada", "token": "Token k-123"})));

        // Basic is not the bearer spec's kind: its header, whatever the bearer's inject says.
        let login = Credential::Basic {
            username: "u".into(),
            password: "p".into(),
        };
        let mut c = call();
        authenticate(&connector(body), &login, None, &mut c);
        assert_eq!(c.headers, [("Authorization".into(), "Basic dTpw".into())]);
    }
}
