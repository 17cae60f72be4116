//! Connectors (issue 35): the apps automations write to, each one declarative file
//! (`connectors/<app>.json`, compiled into the binary) that says how to call the app, how a
//! connection authenticates, and **how each write dedupes**.
//!
//! A [`Connector`] holds its base URL, the credential kinds it accepts ([`AuthSpec`]), a
//! `test` request, the vendor's documented rate limit, error rules ([`ErrorRule`]: status and
//! body predicates → success, exists, retry, rate-limited, fail), and its operations
//! ([`Operation`]: create, update, upsert, find, get, list, send), each with its input as JSON
//! Schema (the inspector's form), its request mapping (templates over `params` and
//! `connection`) and, for every write, its [`Dedupe`] strategy:
//!
//! * `native_key`: the app dedupes on a key Fluxo sends (Stripe's `Idempotency-Key`, ≤ 255);
//! * `upsert`: the write matches an existing record on a field (HubSpot's batch upsert by
//!   `email`): repeating it changes nothing;
//! * `conflict_is_exists`: a second create is answered with a conflict (HubSpot's `409
//!   "Contact already exists. Existing ID: 123"`), which the step reads as success with
//!   `existing: true` and the id, never retried;
//! * `find_then_create`: the app's find operation runs first (Google Sheets: the row that
//!   carries the key); a hit ends the step with `existing: true`;
//! * `kept_id`: Fluxo keeps the id the first write answered (Slack's message `ts`) under the
//!   step's idempotency key, and a repeat calls the `update` operation with it instead;
//! * `none`: repeating it duplicates (Slack incoming webhooks, HubSpot deals); the linter asks
//!   for a Memory claim in front.
//!
//! The linter, `fluxo check`, the resume and replay previews and crash recovery read the
//! strategy through [`crate::steps::StepKind::repeat_safety`] of the `action` step.
//!
//! The vocabulary follows Airbyte's declarative manifests (requester, authenticator, response
//! filters → action), n8n's credential types (`authenticate`, `test`) and Make's connections.
//!
//! Adding an app: one `connectors/<app>.json` listed in [`BUILTIN`], its fake in
//! `fluxo sandbox`, and tests.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The connector files compiled into the binary: `(file name, text)`.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "google_sheets.json",
        include_str!("../../connectors/google_sheets.json"),
    ),
    (
        "hubspot.json",
        include_str!("../../connectors/hubspot.json"),
    ),
    ("slack.json", include_str!("../../connectors/slack.json")),
    ("stripe.json", include_str!("../../connectors/stripe.json")),
];

/// Every built-in connector by app id, parsed once. A file that does not parse is a bug caught
/// by this module's tests; at run time it is left out with a log line.
pub static CONNECTORS: LazyLock<BTreeMap<String, Connector>> = LazyLock::new(|| {
    let mut out = BTreeMap::new();
    for (file, text) in BUILTIN {
        match parse(text) {
            Ok(c) => {
                out.insert(c.app.clone(), c);
            }
            Err(e) => tracing::error!(file, error = %e, "a built-in connector does not parse"),
        }
    }
    out
});

/// The built-in connector `app`.
pub fn get(app: &str) -> Option<&'static Connector> {
    CONNECTORS.get(app)
}

/// Parse and check a connector file: JSON of [`Connector`], unknown fields refused, every
/// write operation with a dedupe strategy, every `find_then`/`update` operation it names
/// present. Errors: the first problem, with its JSON path.
pub fn parse(text: &str) -> Result<Connector, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    let c: Connector =
        serde_path_to_error::deserialize(&mut de).map_err(|e| format!("{}: {}", e.path(), e))?;
    for (name, op) in &c.operations {
        if op.kind.is_write() && op.dedupe.is_none() {
            return Err(format!(
                "operations.{name}: a {} must declare its dedupe strategy",
                op.kind.as_str()
            ));
        }
        let named: Vec<(&str, &String)> = match &op.dedupe {
            Some(Dedupe::KeptId { update, find, .. }) => std::iter::once(("update", update))
                .chain(find.iter().map(|f| ("find", f)))
                .collect(),
            Some(Dedupe::FindThenCreate { find, .. }) => vec![("find", find)],
            _ => Vec::new(),
        };
        for (field, other) in named {
            if !c.operations.contains_key(other) {
                return Err(format!(
                    "operations.{name}.dedupe.{field}: no operation `{other}`"
                ));
            }
        }
    }
    if c.auth.is_empty() {
        return Err("auth: a connector accepts at least one credential kind".into());
    }
    Ok(c)
}

/// One app.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Connector {
    /// The app id a connection and a step name: `[a-z0-9_]+` (`hubspot`).
    pub app: String,
    /// Shown in the palette (`HubSpot`).
    pub title: String,
    #[serde(default)]
    pub description: String,
    /// The vendor's API documentation.
    #[serde(default)]
    pub docs: Option<String>,
    /// Where requests go, without a trailing slash (`https://api.hubapi.com`); a connection's
    /// `base_url` replaces it (a sandbox fake).
    pub base_url: String,
    /// The credential kinds a connection may use, first preferred.
    pub auth: Vec<AuthSpec>,
    /// A cheap read that proves a connection works ("Test connection").
    #[serde(default)]
    pub test: Option<Request>,
    /// The vendor's documented limit, honoured per connection.
    #[serde(default)]
    pub rate_limit: Option<RateLimit>,
    /// Rules for every operation's answers, after the operation's own.
    #[serde(default)]
    pub errors: Vec<ErrorRule>,
    /// The operations by name (`create_contact`).
    pub operations: BTreeMap<String, Operation>,
}

/// A credential kind a connector accepts and where its secret goes.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AuthSpec {
    /// `bearer`, `basic`, `webhook_url` or `oauth2` ([`crate::connections::Credential`]).
    pub kind: String,
    /// Shown when connecting (`Private app access token`).
    pub title: String,
    /// Where to find or make one.
    #[serde(default)]
    pub help: Option<String>,
    /// OAuth 2: the authorization endpoint.
    #[serde(default)]
    pub authorize_url: Option<String>,
    /// OAuth 2: the token endpoint.
    #[serde(default)]
    pub token_url: Option<String>,
    /// OAuth 2: scopes asked for.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Where the secret goes in a request; default the `Authorization` header (`Bearer
    /// <token>`, `Basic …`).
    #[serde(default)]
    pub inject: Option<Inject>,
}

/// Where a credential's secret goes in a request, for apps that do not read `Authorization`
/// (an `X-API-Key` header, an `api_key` query parameter, a `token` body member).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Inject {
    /// `header`, `query` or `body` (a member of the JSON or form body).
    #[serde(rename = "in")]
    pub place: InjectPlace,
    /// The header, parameter or member name (`X-API-Key`, `api_key`, `token`).
    pub name: String,
    /// Text before the secret (`Token `); default none.
    #[serde(default)]
    pub prefix: String,
}

/// The part of a request an [`Inject`] puts the secret in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum InjectPlace {
    Header,
    Query,
    Body,
}

/// A documented rate limit: at most `requests` per `per_s` seconds.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    pub requests: u32,
    pub per_s: u32,
    /// Where the figure comes from.
    #[serde(default)]
    pub source: Option<String>,
}

/// What an operation does (a write is create, update, upsert or send).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    Create,
    Update,
    Upsert,
    Send,
    Find,
    Get,
    List,
}

impl OpKind {
    /// Whether it changes something at the app.
    pub fn is_write(self) -> bool {
        matches!(
            self,
            OpKind::Create | OpKind::Update | OpKind::Upsert | OpKind::Send
        )
    }
    /// `create`, `update`, …
    pub fn as_str(self) -> &'static str {
        match self {
            OpKind::Create => "create",
            OpKind::Update => "update",
            OpKind::Upsert => "upsert",
            OpKind::Send => "send",
            OpKind::Find => "find",
            OpKind::Get => "get",
            OpKind::List => "list",
        }
    }
}

/// One operation of an app.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Operation {
    /// Shown in the palette (`Create a contact`).
    pub title: String,
    #[serde(default)]
    pub description: String,
    pub kind: OpKind,
    /// The step's `params` as JSON Schema (an object): the inspector's form.
    pub input: Value,
    pub request: Request,
    /// The step's output: templates over `response` (`{status, headers, body}`) and `params`;
    /// default the response body.
    #[serde(default)]
    pub output: Option<Value>,
    /// How a repeat of this write is kept from duplicating (required for writes).
    #[serde(default)]
    pub dedupe: Option<Dedupe>,
    /// Rules for this operation's answers, before the connector's.
    #[serde(default)]
    pub errors: Vec<ErrorRule>,
    /// The credential kinds it works with (`["webhook_url"]`); empty: any the connector takes.
    #[serde(default)]
    pub auth: Vec<String>,
}

/// An HTTP request of a connector: every string may be a template over `params` and
/// `connection` (`connection.values.<name>`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// `GET`, `POST`, `PUT`, `PATCH` or `DELETE`.
    pub method: String,
    /// Appended to the base URL (`/crm/v3/objects/contacts`); empty for a webhook URL
    /// credential, which is the whole URL.
    #[serde(default)]
    pub path: String,
    #[serde(default)]
    pub query: BTreeMap<String, Value>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The JSON body; members that render `null` are left out.
    #[serde(default)]
    pub body: Option<Value>,
}

/// How a write dedupes (the module doc).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "strategy", rename_all = "snake_case", deny_unknown_fields)]
pub enum Dedupe {
    /// The app dedupes on a key Fluxo sends in `header`, at most `max_len` characters.
    NativeKey { header: String, max_len: usize },
    /// The write matches an existing record on `matches_on`.
    Upsert { matches_on: String },
    /// A conflict answer means "exists": `status`, and the existing id after `id_after` in the
    /// text at JSON pointer `id_pointer` of the body (HubSpot: `/message`, `Existing ID: `).
    ConflictIsExists {
        status: u16,
        #[serde(default)]
        id_pointer: Option<String>,
        #[serde(default)]
        id_after: Option<String>,
    },
    /// Fluxo keeps the id `id` (templates over `response`, e.g. `{"channel": …, "ts": …}`)
    /// under the step's idempotency key; a repeat calls operation `update` with `params` plus
    /// `kept_id`. With `find`: the write also carries the idempotency key (Slack: in the
    /// message's metadata) and operation `find` (same `params`; its output `found` and
    /// `kept_id`) runs first whenever no id is kept, and before every retry, so a write whose
    /// answer was lost (a timeout, a crash) is found and kept instead of written again.
    KeptId {
        id: Value,
        update: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        find: Option<String>,
    },
    /// Operation `find` (same `params`) runs first; its output's `found` true ends the step
    /// with `existing: true` and the found record. `eventually_consistent`: the app's search
    /// may miss a record written moments ago (a repeat right after a write can duplicate).
    FindThenCreate {
        find: String,
        #[serde(default)]
        eventually_consistent: bool,
    },
    /// Repeating it duplicates: guard it with a Memory claim.
    None,
}

impl Dedupe {
    /// `native_key`, `upsert`, `conflict_is_exists`, `kept_id`, `none`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Dedupe::NativeKey { .. } => "native_key",
            Dedupe::Upsert { .. } => "upsert",
            Dedupe::ConflictIsExists { .. } => "conflict_is_exists",
            Dedupe::KeptId { .. } => "kept_id",
            Dedupe::FindThenCreate { .. } => "find_then_create",
            Dedupe::None => "none",
        }
    }

    /// The canvas badge: `keyed`, `upsert on email`, `409 is exists`, `updates its message`,
    /// `not safe to repeat`.
    pub fn badge(&self) -> String {
        match self {
            Dedupe::NativeKey { .. } => "keyed".into(),
            Dedupe::Upsert { matches_on } => format!("upsert on {matches_on}"),
            Dedupe::ConflictIsExists { status, .. } => format!("{status} is exists"),
            Dedupe::KeptId { .. } => "repeat updates".into(),
            Dedupe::FindThenCreate { .. } => "find then create".into(),
            Dedupe::None => "not safe to repeat".into(),
        }
    }
}

/// One rule over an answer: when `status` (any of) and `body` (every pointer equals its
/// value) hold, `then`. An empty `status` matches any.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ErrorRule {
    #[serde(default)]
    pub status: Vec<u16>,
    /// JSON pointer → the value it must equal (`{"/ok": false}`).
    #[serde(default)]
    pub body: BTreeMap<String, Value>,
    pub then: Outcome,
    /// The step's error message: a template over `response` (`Slack answered
    /// {{ response.body.error }}`).
    #[serde(default)]
    pub message: Option<String>,
}

impl ErrorRule {
    /// Whether the rule holds for `status` and `body`.
    pub fn matches(&self, status: u16, body: &Value) -> bool {
        (self.status.is_empty() || self.status.contains(&status))
            && self
                .body
                .iter()
                .all(|(ptr, want)| body.pointer(ptr) == Some(want))
    }
}

/// What an answer means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Done.
    Success,
    /// The record exists already: success with `existing: true`.
    Exists,
    /// Transient: retried within the step's retries and the run deadline.
    Retry,
    /// Transient, paced by `Retry-After`.
    RateLimited,
    /// The step fails with the rule's message; never retried.
    Fail,
    /// The access token was refused (expired, revoked): on an OAuth 2 connection the tokens
    /// are refreshed once ([`crate::connections::oauth`]) and the call is sent once more;
    /// otherwise, or when the retried call is refused too, the step fails with the rule's
    /// message as `fail` does.
    RefreshToken,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_connector_parses_and_declares_its_writes() {
        for (file, text) in BUILTIN {
            let c = parse(text).unwrap_or_else(|e| panic!("{file}: {e}"));
            assert_eq!(format!("{}.json", c.app), *file);
            for (name, op) in &c.operations {
                assert!(
                    op.input.get("type") == Some(&Value::from("object")),
                    "{file}: operations.{name}.input is an object schema"
                );
            }
        }
        assert_eq!(CONNECTORS.len(), BUILTIN.len());
    }

    #[test]
    fn every_connector_file_is_compiled_in() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("connectors");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|f| f.ends_with(".json"))
            .collect();
        files.sort();
        let builtin: Vec<&str> = BUILTIN.iter().map(|(f, _)| *f).collect();
        assert_eq!(files, builtin, "connectors/ and BUILTIN (sorted) differ");
    }

    /// `connectors/schema/connector.schema.json` is the JSON Schema of a connector file as
    /// [`parse`] reads it (for an editor's completion and a reviewer); regenerate with
    /// `FLUXO_BLESS=1 cargo test --lib connectors`.
    #[test]
    fn the_connector_json_schema_file_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("connectors/schema/connector.schema.json");
        let want = serde_json::to_string_pretty(&schemars::schema_for!(Connector)).unwrap() + "\n";
        if std::env::var_os("FLUXO_BLESS").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &want).unwrap();
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "{} is stale: FLUXO_BLESS=1 cargo test --lib connectors",
            path.display()
        );
    }

    #[test]
    fn a_write_without_a_strategy_is_refused() {
        let text = r#"{"app": "x", "title": "X", "base_url": "http://x",
            "auth": [{"kind": "bearer", "title": "Token"}],
            "operations": {"make": {"title": "Make", "kind": "create",
              "input": {"type": "object"}, "request": {"method": "POST", "path": "/m"}}}}"#;
        let e = parse(text).unwrap_err();
        assert!(e.contains("operations.make") && e.contains("dedupe"), "{e}");
        let e = parse(&text.replace("\"title\": \"Make\"", "\"titel\": \"Make\"")).unwrap_err();
        assert!(e.contains("titel"), "{e}");
    }
}
