//! Slack's Web API (`/slack/api/{method}`) and incoming webhooks (`/slack/services/…`), from
//! Slack's public API documentation.
//!
//! What matters for dedupe: `chat.postMessage` has no key, so a retried post is a second
//! message; the answer's `ts` is the message's id, and `chat.update` with it changes the
//! message instead of posting again. A message can carry `metadata` (`event_type`,
//! `event_payload`), which `conversations.history` shows with `include_all_metadata=true`:
//! how a post whose answer was lost is found again. Errors are `200 {"ok": false, "error": "…"}` (only a rate
//! limit is an HTTP error: `429` with `Retry-After`). Webhooks answer `200 ok` as plain text
//! and a URL that is not a webhook `404 no_service`.

use axum::extract::{Path, Request, State};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Map, Value};

use super::{
    begin, is_json, object, parse_form, query_pairs, random_alnum, Answer, Auth, AuthFailure, Ctx,
    Fake, Style, VendorData, SLACK_TOKEN_PREFIX,
};
use crate::sandbox::state::SandboxState;

const CT: &str = "application/json; charset=utf-8";

/// The workspace's ids, in answers and webhook URLs.
const TEAM: &str = "T000";
const BOT_ID: &str = "B000";
const BOT_USER: &str = "U000";

/// The secret of the Slack webhook every fresh sandbox has:
/// `POST /slack/services/T000/B000/<this>` posts to `#general`.
pub const DEFAULT_WEBHOOK_SECRET: &str = "XXXXXXXXXXXXXXXXXXXXXXXX";

/// Longest `text` Slack takes.
const MAX_TEXT: usize = 40_000;

#[derive(Debug, Clone)]
struct Channel {
    id: String,
    name: String,
    /// Oldest first.
    messages: Vec<Map<String, Value>>,
}

#[derive(Debug, Clone)]
struct Webhook {
    secret: String,
    channel: String,
    /// Bodies received, oldest first.
    messages: Vec<Value>,
}

/// Slack's memory: channels with their messages, webhooks.
#[derive(Debug)]
pub(crate) struct SlackData {
    channels: Vec<Channel>,
    webhooks: Vec<Webhook>,
    /// Makes every `ts` unique.
    ts_seq: u64,
}

impl SlackData {
    /// `#general`, `#random`, `#alerts` and the default webhook to `#general`.
    pub(crate) fn seeded() -> Self {
        let mut d = SlackData {
            channels: Vec::new(),
            webhooks: Vec::new(),
            ts_seq: 0,
        };
        for name in ["general", "random", "alerts"] {
            d.add_channel(name);
        }
        d.webhooks.push(Webhook {
            secret: DEFAULT_WEBHOOK_SECRET.into(),
            channel: d.channels[0].id.clone(),
            messages: Vec::new(),
        });
        d
    }

    fn add_channel(&mut self, name: &str) -> Channel {
        let c = Channel {
            id: format!("C{:09}", self.channels.len() + 1),
            name: name.to_string(),
            messages: Vec::new(),
        };
        self.channels.push(c.clone());
        c
    }

    /// A channel by id, by name or by `#name`.
    fn channel_mut(&mut self, key: &str) -> Option<&mut Channel> {
        let name = key.strip_prefix('#').unwrap_or(key);
        self.channels
            .iter_mut()
            .find(|c| c.id == key || c.name == name)
    }

    fn next_ts(&mut self, now_ms: i64) -> String {
        self.ts_seq += 1;
        format!("{}.{:06}", now_ms.div_euclid(1000), self.ts_seq % 1_000_000)
    }

    /// Post to a channel; the message as stored.
    fn post(
        &mut self,
        channel: &str,
        fields: Map<String, Value>,
        now_ms: i64,
    ) -> Option<(String, Map<String, Value>)> {
        let ts = self.next_ts(now_ms);
        let c = self.channel_mut(channel)?;
        let mut m = Map::new();
        m.insert("type".into(), json!("message"));
        m.insert("subtype".into(), json!("bot_message"));
        m.insert("user".into(), json!(BOT_USER));
        m.insert("bot_id".into(), json!(BOT_ID));
        m.insert("team".into(), json!(TEAM));
        m.insert("ts".into(), json!(ts));
        m.extend(fields);
        c.messages.push(m.clone());
        Some((c.id.clone(), m))
    }
}

fn ok(v: Value) -> Answer {
    let mut m = Map::new();
    m.insert("ok".into(), json!(true));
    m.extend(object(&v));
    Answer::json(200, CT, &Value::Object(m))
}

/// Slack's error: `200 {"ok": false, "error": code}`.
fn fail(code: &str) -> Answer {
    Answer::json(200, CT, &json!({"ok": false, "error": code}))
}

/// The Slack fake.
pub(crate) struct Slack;

impl Style for Slack {
    fn app(&self) -> &'static str {
        "slack"
    }

    fn unauthorized(&self, why: &AuthFailure) -> Answer {
        fail(match why {
            AuthFailure::Missing => "not_authed",
            AuthFailure::Invalid { .. } => "invalid_auth",
            AuthFailure::Expired { .. } => "token_expired",
        })
    }

    fn rate_limited(&self, _retry_after_s: u64) -> Answer {
        Answer::json(429, CT, &json!({"ok": false, "error": "ratelimited"}))
    }

    fn server_error(&self) -> Answer {
        Answer::json(500, CT, &json!({"ok": false, "error": "internal_error"}))
    }

    fn not_found(&self, _method: &str, path: &str) -> Answer {
        if path.starts_with("/services/") {
            return Answer::text(404, "text/html", "no_service");
        }
        Answer::json(404, CT, &json!({"ok": false, "error": "unknown_method"}))
    }

    fn bad_request(&self, _message: &str) -> Answer {
        fail("invalid_arguments")
    }
}

impl Fake for Slack {
    fn token_prefix(&self) -> &'static str {
        SLACK_TOKEN_PREFIX
    }

    fn routes(&self) -> Router<SandboxState> {
        Router::new()
            .route("/slack/api/chat.postMessage", post(post_message))
            .route("/slack/api/chat.update", post(update))
            .route(
                "/slack/api/conversations.history",
                get(history).post(history),
            )
            .route("/slack/api/auth.test", get(auth_test).post(auth_test))
            .route("/slack/services/{team}/{bot}/{secret}", post(webhook))
    }

    fn counts(&self, data: &VendorData) -> Vec<(String, usize)> {
        let s = &data.slack;
        // A webhook's message is posted to its channel too.
        let posted: usize = s.channels.iter().map(|c| c.messages.len()).sum();
        vec![("slack messages".into(), posted)]
    }

    fn snapshot(&self, data: &VendorData, _now_ms: i64) -> Value {
        let s = &data.slack;
        let name_of = |id: &str| {
            s.channels
                .iter()
                .find(|c| c.id == id)
                .map(|c| c.name.clone())
        };
        json!({
            "channels": s.channels.iter().map(|c| json!({
                "id": c.id,
                "name": c.name,
                "messages": c.messages,
            })).collect::<Vec<_>>(),
            "webhooks": s.webhooks.iter().map(|w| json!({
                "url": webhook_path(&w.secret),
                "channel": w.channel,
                "channel_name": name_of(&w.channel),
                "messages": w.messages,
            })).collect::<Vec<_>>(),
        })
    }

    fn control(&self, data: &mut VendorData, body: Value) -> Result<Value, String> {
        let s = &mut data.slack;
        let m = object(&body);
        if let Some(name) = m.get("channel").and_then(Value::as_str) {
            let name = name.trim_start_matches('#');
            let valid = !name.is_empty()
                && name.len() <= 80
                && name.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_'
                });
            if !valid {
                return Err("channel names are 1 to 80 of a-z 0-9 - _".into());
            }
            let c = match s.channel_mut(name) {
                Some(c) => c.clone(),
                None => s.add_channel(name),
            };
            return Ok(json!({"id": c.id, "name": c.name}));
        }
        if let Some(w) = m.get("webhook") {
            let channel = w
                .get("channel")
                .and_then(Value::as_str)
                .unwrap_or("general");
            let id = s
                .channel_mut(channel)
                .map(|c| c.id.clone())
                .ok_or(format!("no channel {channel:?}"))?;
            let secret = random_alnum(24);
            s.webhooks.push(Webhook {
                secret: secret.clone(),
                channel: id.clone(),
                messages: Vec::new(),
            });
            return Ok(json!({"url": webhook_path(&secret), "channel": id}));
        }
        Err("expected {\"channel\": \"name\"} or {\"webhook\": {\"channel\": \"name\"}}".into())
    }
}

pub(super) fn webhook_path(secret: &str) -> String {
    format!("/slack/services/{TEAM}/{BOT_ID}/{secret}")
}

async fn start(state: SandboxState, req: Request) -> Result<Ctx, Response> {
    begin(&Slack, SLACK_TOKEN_PREFIX, Auth::Bearer, state, req).await
}

/// A method's arguments: a JSON object body, or form fields (and the query) with `blocks`
/// and `attachments` as JSON strings. `Err`: Slack's error code.
fn arguments(ctx: &Ctx) -> Result<Map<String, Value>, &'static str> {
    let mut args = Map::new();
    for (k, v) in query_pairs(&ctx.parts) {
        args.insert(k, json!(v));
    }
    if ctx.body.is_empty() {
        return Ok(args);
    }
    if is_json(&ctx.parts) {
        match serde_json::from_slice::<Value>(&ctx.body) {
            Ok(Value::Object(m)) => args.extend(m),
            _ => return Err("invalid_json"),
        }
    } else {
        let pairs = parse_form(&ctx.body).map_err(|_| "invalid_form_data")?;
        for (k, v) in pairs {
            let v = match k.as_str() {
                "blocks" | "attachments" => {
                    serde_json::from_str(&v).map_err(|_| "invalid_blocks_format")?
                }
                _ => json!(v),
            };
            args.insert(k, v);
        }
    }
    Ok(args)
}

fn text_arg(args: &Map<String, Value>, name: &str) -> Option<String> {
    match args.get(name)? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The message fields `text`, `blocks`, `attachments`, `thread_ts`, `metadata` of a post or
/// update.
/// `Err`: Slack's error code.
fn message_fields(args: &Map<String, Value>) -> Result<Map<String, Value>, &'static str> {
    let mut m = Map::new();
    let text = text_arg(args, "text");
    let blocks = args.get("blocks").filter(|b| !b.is_null());
    let attachments = args.get("attachments").filter(|a| !a.is_null());
    if let Some(b) = blocks {
        let ok = b.as_array().is_some_and(|a| {
            a.len() <= 50
                && a.iter()
                    .all(|x| x.get("type").and_then(Value::as_str).is_some())
        });
        if !ok {
            return Err("invalid_blocks");
        }
        if !b.as_array().is_some_and(Vec::is_empty) {
            m.insert("blocks".into(), b.clone());
        }
    }
    if let Some(a) = attachments {
        if !a.is_array() {
            return Err("invalid_attachments");
        }
        m.insert("attachments".into(), a.clone());
    }
    match &text {
        Some(t) if t.chars().count() > MAX_TEXT => return Err("msg_too_long"),
        Some(t) => {
            m.insert("text".into(), json!(t));
        }
        None if m.is_empty() => return Err("no_text"),
        None => {
            m.insert("text".into(), json!(""));
        }
    }
    if let Some(t) = text_arg(args, "thread_ts") {
        m.insert("thread_ts".into(), json!(t));
    }
    // Message metadata (Slack's `metadata` argument): `event_type` text and an
    // `event_payload` object; a form-encoded call sends it as JSON text.
    if let Some(md) = args.get("metadata").filter(|v| !v.is_null()) {
        let md = match md {
            Value::String(t) => serde_json::from_str(t).map_err(|_| "invalid_metadata_format")?,
            v => v.clone(),
        };
        let ok = md
            .get("event_type")
            .and_then(Value::as_str)
            .is_some_and(|t| !t.is_empty())
            && md.get("event_payload").is_some_and(Value::is_object);
        if !ok {
            return Err("invalid_metadata_format");
        }
        m.insert("metadata".into(), md);
    }
    Ok(m)
}

/// `POST /api/chat.postMessage`: `channel` (id, name or `#name`), `text` and/or `blocks`.
async fn post_message(State(state): State<SandboxState>, req: Request) -> Response {
    let ctx = match start(state, req).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let args = match arguments(&ctx) {
        Ok(a) => a,
        Err(code) => return ctx.refuse(fail(code)),
    };
    let Some(channel) = text_arg(&args, "channel") else {
        return ctx.refuse(fail("channel_not_found"));
    };
    let fields = match message_fields(&args) {
        Ok(f) => f,
        Err(code) => return ctx.refuse(fail(code)),
    };
    ctx.run(|_, data, now| {
        Ok(match data.slack.post(&channel, fields, now) {
            Some((id, m)) => {
                let ts = m.get("ts").cloned().unwrap_or_default();
                (
                    ok(json!({"channel": id, "ts": ts, "message": m})),
                    ts.as_str().map(str::to_string),
                )
            }
            None => (fail("channel_not_found"), None),
        })
    })
    .await
}

/// `POST /api/chat.update`: `channel`, `ts`, new `text` and/or `blocks`.
async fn update(State(state): State<SandboxState>, req: Request) -> Response {
    let ctx = match start(state, req).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let args = match arguments(&ctx) {
        Ok(a) => a,
        Err(code) => return ctx.refuse(fail(code)),
    };
    let Some(channel) = text_arg(&args, "channel") else {
        return ctx.refuse(fail("channel_not_found"));
    };
    let Some(ts) = text_arg(&args, "ts") else {
        return ctx.refuse(fail("message_not_found"));
    };
    let fields = match message_fields(&args) {
        Ok(f) => f,
        Err(code) => return ctx.refuse(fail(code)),
    };
    ctx.run(|_, data, now| {
        let edit_ts = data.slack.next_ts(now);
        let Some(c) = data.slack.channel_mut(&channel) else {
            return Ok((fail("channel_not_found"), None));
        };
        let Some(m) = c
            .messages
            .iter_mut()
            .find(|m| m.get("ts").and_then(Value::as_str) == Some(ts.as_str()))
        else {
            return Ok((fail("message_not_found"), None));
        };
        if !fields.contains_key("blocks") {
            m.remove("blocks");
        }
        m.extend(fields);
        m.insert("edited".into(), json!({"user": BOT_USER, "ts": edit_ts}));
        let text = m.get("text").cloned().unwrap_or_default();
        Ok((
            ok(json!({
                "channel": c.id,
                "ts": ts,
                "text": text,
                "message": m.clone(),
            })),
            Some(ts.clone()),
        ))
    })
    .await
}

/// `GET|POST /api/conversations.history?channel=&limit=&oldest=&latest=&inclusive=
/// &include_all_metadata=`: newest first; a message's `metadata` only with
/// `include_all_metadata=true`.
async fn history(State(state): State<SandboxState>, req: Request) -> Response {
    let ctx = match start(state, req).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let args = match arguments(&ctx) {
        Ok(a) => a,
        Err(code) => return ctx.refuse(fail(code)),
    };
    let Some(channel) = text_arg(&args, "channel") else {
        return ctx.refuse(fail("channel_not_found"));
    };
    let limit = match text_arg(&args, "limit").map(|l| l.parse::<usize>()) {
        None => 100,
        Some(Ok(n)) if n >= 1 => n.min(999),
        Some(_) => return ctx.refuse(fail("invalid_limit")),
    };
    let ts_num = |name: &str| text_arg(&args, name).and_then(|t| t.parse::<f64>().ok());
    let (oldest, latest) = (ts_num("oldest"), ts_num("latest"));
    let inclusive = matches!(text_arg(&args, "inclusive").as_deref(), Some("true" | "1"));
    let metadata = args
        .get("include_all_metadata")
        .is_some_and(|v| v == &Value::Bool(true) || matches!(v.as_str(), Some("true" | "1")));
    ctx.run(|_, data, _| {
        let Some(c) = data.slack.channel_mut(&channel) else {
            return Ok((fail("channel_not_found"), None));
        };
        let within = |m: &&Map<String, Value>| {
            let t = m
                .get("ts")
                .and_then(Value::as_str)
                .and_then(|t| t.parse::<f64>().ok())
                .unwrap_or(0.0);
            let after = oldest.is_none_or(|o| if inclusive { t >= o } else { t > o });
            let before = latest.is_none_or(|l| if inclusive { t <= l } else { t < l });
            after && before
        };
        let all: Vec<&Map<String, Value>> = c.messages.iter().rev().filter(within).collect();
        let messages: Vec<Value> = all
            .iter()
            .take(limit)
            .map(|m| {
                let mut m = (*m).clone();
                if !metadata {
                    m.remove("metadata");
                }
                Value::Object(m)
            })
            .collect();
        Ok((
            ok(json!({
                "messages": messages,
                "has_more": all.len() > limit,
                "pin_count": 0,
                "response_metadata": {"next_cursor": ""},
            })),
            None,
        ))
    })
    .await
}

/// `auth.test`: who the token is (a connection's test request).
async fn auth_test(State(state): State<SandboxState>, req: Request) -> Response {
    let ctx = match start(state, req).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    ctx.run(|_, _, _| {
        Ok((
            ok(json!({
                "url": "https://fluxo-sandbox.slack.com/",
                "team": "Fluxo Sandbox",
                "user": "fluxo",
                "team_id": TEAM,
                "user_id": BOT_USER,
                "bot_id": BOT_ID,
                "is_enterprise_install": false,
            })),
            None,
        ))
    })
    .await
}

fn webhook_error(status: u16, body: &str) -> Answer {
    Answer::text(status, "text/html", body)
}

/// `POST /services/T000/B000/<secret>`: a JSON body (or form `payload=<json>`) with `text`
/// and/or `blocks` → `200 ok`.
async fn webhook(
    State(state): State<SandboxState>,
    Path((team, bot, secret)): Path<(String, String, String)>,
    req: Request,
) -> Response {
    let ctx = match begin(&Slack, SLACK_TOKEN_PREFIX, Auth::Open, state, req).await {
        Ok(c) => c,
        Err(r) => return r,
    };
    let known = team == TEAM
        && bot == BOT_ID
        && ctx
            .call
            .state
            .lock()
            .vendors
            .slack
            .webhooks
            .iter()
            .any(|w| w.secret == secret);
    if !known {
        return ctx.refuse(webhook_error(404, "no_service"));
    }
    let payload: Option<Value> = if is_json(&ctx.parts) {
        serde_json::from_slice(&ctx.body).ok()
    } else {
        parse_form(&ctx.body)
            .ok()
            .and_then(|p| p.into_iter().find(|(k, _)| k == "payload"))
            .and_then(|(_, v)| serde_json::from_str(&v).ok())
            .or_else(|| serde_json::from_slice(&ctx.body).ok())
    };
    let Some(Value::Object(args)) = payload else {
        return ctx.refuse(webhook_error(400, "invalid_payload"));
    };
    let fields = match message_fields(&args) {
        Ok(f) => f,
        Err("no_text") => return ctx.refuse(webhook_error(400, "no_text")),
        Err(_) => return ctx.refuse(webhook_error(400, "invalid_payload")),
    };
    ctx.run(|_, data, now| {
        let s = &mut data.slack;
        let Some(w) = s.webhooks.iter().position(|w| w.secret == secret) else {
            return Ok((webhook_error(404, "no_service"), None));
        };
        let channel = s.webhooks[w].channel.clone();
        s.webhooks[w].messages.push(Value::Object(args.clone()));
        let posted = s.post(&channel, fields, now);
        let ts = posted.and_then(|(_, m)| m.get("ts").and_then(Value::as_str).map(str::to_string));
        Ok((webhook_error(200, "ok"), ts))
    })
    .await
}
