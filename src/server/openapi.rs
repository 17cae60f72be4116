//! The OpenAPI 3.1 document served at `GET /api/v1/openapi.json`, generated from the code with
//! [utoipa](https://docs.rs/utoipa) and [utoipa-axum](https://docs.rs/utoipa-axum).
//!
//! The router and the document come from one source: every route is registered with
//! `OpenApiRouter::routes(routes!(handler))` ([`super::api_routes`], [`super::public_routes`]),
//! and `routes!` only accepts a handler that carries a `#[utoipa::path(...)]` attribute (its
//! method, path, parameters, bodies, answers). So a route cannot be served without being in
//! the document. To add a route: write the handler, put `#[utoipa::path]` on it next to the
//! others of its module, and add it to that module's `routes()` with `routes!`.
//!
//! What the attributes cannot say is added here, once for all:
//! * every operation under `/api/v1` needs the bearer token: [`openapi`] gives each the
//!   `bearer` security requirement and the `401 unauthorized` answer, as the router puts
//!   [`super::auth::require_token`] in front of each of them;
//! * errors are `application/problem+json` documents of the one [`Problem`] schema (each
//!   attribute says so: `body = Problem, content_type = "application/problem+json"`);
//! * a body that may be left out (`request_body(content = Option<T>)`) is `T`, never `null`.
//!
//! Fields that carry a duration say their unit in their name and doc (`*_ms`: milliseconds,
//! `*_s`: seconds); instants are RFC 3339 strings ([`crate::run::Timestamp`]).
//!
//! Request and response bodies are schemas of the Rust types where the handlers use one
//! ([`crate::run::RunRecord`], [`crate::settings::AppSettings`], [`crate::check::CheckReport`],
//! …); the bodies the handlers build with `json!` are described by the types of this module,
//! which exist for the document only (`tests/openapi.rs` checks real answers against them).
//!
//! The webhook handler ([`super::hooks::webhook`]) is documented here, on a stand-in of the
//! same name, so the webhook module (the hot path) carries no documentation: `webhook` below
//! re-exports the real handler and `__path_webhook` is the stand-in's documentation, which is
//! what `routes!(openapi::webhook)` pairs by name.

use std::sync::OnceLock;

use serde_json::Value;
use utoipa::openapi::path::Operation;
use utoipa::openapi::schema::{Schema, SchemaType, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr, ResponseBuilder};
use utoipa::{Modify, OpenApi as _, ToSchema};

use crate::run::Timestamp;
use crate::settings::AppSettings;
use crate::steps::Descriptor;
use crate::workflow::Problem as ValidationProblem;

pub use super::error::Problem;
pub use super::hooks::webhook;
pub use webhook_doc::__path_webhook;

/// Media type of error answers (RFC 9457).
pub const PROBLEM_JSON: &str = "application/problem+json";

/// Name of the bearer security scheme in `components.securitySchemes`.
pub const BEARER: &str = "bearer";

/// The document (built once).
pub fn document() -> Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| serde_json::to_value(openapi()).unwrap_or(Value::Null))
        .clone()
}

/// The document as utoipa's model: the public routes, then the token-protected API nested
/// under `/api/v1`.
pub fn openapi() -> OpenApi {
    let mut api = super::api_routes().into_openapi();
    require_token(&mut api);
    let mut doc = ApiDoc::openapi();
    doc.merge(super::public_routes().into_openapi());
    let mut doc = doc.nest("/api/v1", api);
    optional_bodies(&mut doc);
    host_checked(&mut doc);
    doc
}

/// Every route is behind the `Host` check ([`super::door`]): each operation may answer `421
/// misdirected_request`.
fn host_checked(api: &mut OpenApi) {
    let misdirected = ResponseBuilder::new()
        .description(
            "`misdirected_request`: the `Host` is not one of this server's names (its bound \
             address, `localhost`, `127.0.0.1` or `[::1]` with its port, or the settings' \
             `allowed_hosts`): a DNS-rebinding defence. (A missing, doubled or malformed \
             `Host` is `400 invalid_host`.)",
        )
        .content(
            PROBLEM_JSON,
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("Problem")))
                .build(),
        )
        .build();
    for op in operations_mut(api) {
        op.responses
            .responses
            .insert("421".into(), misdirected.clone().into());
    }
}

/// Every operation of a document.
fn operations_mut(api: &mut OpenApi) -> impl Iterator<Item = &mut Operation> {
    api.paths.paths.values_mut().flat_map(|item| {
        [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.options,
            &mut item.head,
            &mut item.patch,
            &mut item.trace,
        ]
        .into_iter()
        .flatten()
    })
}

/// `request_body(content = Option<T>)` marks a body that may be left out (an empty body reads
/// as `{}`); utoipa also lets its schema be `null`, which the handlers refuse: keep `T` only.
fn optional_bodies(api: &mut OpenApi) {
    fn is_null(s: &RefOr<Schema>) -> bool {
        matches!(s, RefOr::T(Schema::Object(o)) if o.schema_type == SchemaType::Type(Type::Null))
    }
    for op in operations_mut(api) {
        let Some(body) = &mut op.request_body else {
            continue;
        };
        for content in body.content.values_mut() {
            if let Some(RefOr::T(Schema::OneOf(one))) = &content.schema {
                if let [a, b] = one.items.as_slice() {
                    let inner = match (is_null(a), is_null(b)) {
                        (true, false) => b.clone(),
                        (false, true) => a.clone(),
                        _ => continue,
                    };
                    content.schema = Some(inner);
                }
            }
        }
    }
}

/// Every operation of `api` needs the bearer token, and may answer `401 unauthorized` and
/// `429 too_many_auth_failures` ([`super::auth::AuthFailures`]).
fn require_token(api: &mut OpenApi) {
    let problem = |description: &str| {
        ResponseBuilder::new()
            .description(description)
            .content(
                PROBLEM_JSON,
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("Problem")))
                    .build(),
            )
            .build()
    };
    let unauthorized =
        problem("`unauthorized`: no `Authorization: Bearer <token>` header, or the wrong token.");
    let held_off = problem(
        "`too_many_auth_failures`: 20 wrong tokens in a row came from this client address; \
         its requests are refused until `Retry-After` (10 s, doubling with each further wrong \
         token up to 300 s).",
    );
    for op in operations_mut(api) {
        op.security = Some(vec![SecurityRequirement::new(BEARER, Vec::<String>::new())]);
        op.responses
            .responses
            .insert("401".into(), unauthorized.clone().into());
        op.responses
            .responses
            .insert("429".into(), held_off.clone().into());
    }
}

#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "Fluxo API",
        description = "The HTTP API of `fluxo serve` and of the desktop app's local listener \
            (SPEC §5). Management routes under `/api/v1` need `Authorization: Bearer <token>` \
            (the token is in `<data-dir>/token`); webhook routes may require an HMAC signature \
            per workflow. Errors are RFC 9457 problem details (`application/problem+json`) \
            with an extra `code` member. Bodies over the limit (default 1 MiB) get `413 \
            payload_too_large`. Every route answers only to the server's own names (`Host`: \
            its bound address, `localhost`, `127.0.0.1`, `[::1]` with its port, or the \
            settings' `allowed_hosts`), else `421 misdirected_request`. Times are RFC 3339 UTC strings unless a name says otherwise \
            (`*_ms`: milliseconds, `*_s`: seconds).",
        license(name = "MIT", identifier = "MIT"),
    ),
    components(schemas(Problem, crate::runtime::journal::Reset)),
    modifiers(&BearerScheme),
    tags(
        (name = "webhooks", description = "Deliveries that start runs, deduplicated at the door."),
        (name = "workflows", description = "The workflow files in `--workflows`: CRUD, validate, dry run, re-run safety check."),
        (name = "runs", description = "Start (idempotent with `Idempotency-Key`), list, detail, replay, stats."),
        (name = "memory", description = "The Memory browser: namespaces, keys, manual delete."),
        (name = "catalog", description = "Step kinds, workflow templates, sample payloads."),
        (name = "events", description = "Server-sent events of run progress."),
        (name = "settings", description = "Env variables for templates, retention, listener, API token."),
        (name = "connections", description = "The accounts connector steps act as: credentials kept encrypted, never answered in clear."),
        (name = "meta", description = "Health and this document."),
    ),
)]
struct ApiDoc;

/// `components.securitySchemes.bearer`: the API token.
struct BearerScheme;

impl Modify for BearerScheme {
    fn modify(&self, openapi: &mut OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            BEARER,
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "The API token: `--token`/`FLUXO_TOKEN`, else `<data-dir>/token` \
                         (generated on first start). Regenerate with `POST /api/v1/settings/token`.",
                    ))
                    .build(),
            ),
        );
    }
}

mod webhook_doc {
    use super::Problem;
    use crate::server::hooks::WebhookAnswer;

    /// Stand-in carrying the documentation of [`super::webhook`] (see the module doc).
    #[utoipa::path(
        post,
        path = "/hooks/{workflow_id}",
        tag = "webhooks",
        operation_id = "deliver_webhook",
        summary = "Deliver a webhook: queue a run, deduplicated by key",
        description = "Starts a run of a workflow whose trigger is a `webhook_trigger`, with \
            the JSON body as `input`. The dedupe key is the `Idempotency-Key` header, else \
            `X-Fluxo-Event-Id`, else the trigger's `dedupe_key` template over the body, else \
            there is no dedupe. Keys are 1–255 chars of visible ASCII (an RFC 8941 quoted \
            string is also accepted). The first delivery of a key writes the claim and the \
            queued run in one transaction, made durable before the `202`. A repeat within the \
            window (`dedupe_window_s`, default 24 h, measured from the first claim and never \
            extended) answers `200` with the original run id and starts nothing. If queuing \
            fails nothing stays claimed: `503` with `Retry-After`, so a retry is accepted. \
            No bearer token: the trigger may require an HMAC signature instead. The door: \
            the body must be JSON (`Content-Type: application/json` or a `+json` type, else \
            `415`), and a request a browser sends on another site's behalf (`Sec-Fetch-Site` \
            other than `none`/`same-origin`, or an `Origin` that is not the trigger's \
            `allowed_origins` nor this server's own) is refused with `403`. No CORS headers \
            are ever sent.",
        params(
            ("workflow_id" = String, Path, description = "The workflow to start."),
            ("Idempotency-Key" = Option<String>, Header,
                description = "The delivery's dedupe key: 1–255 chars of visible ASCII, bare \
                    or as an RFC 8941 quoted string (`\"abc\"`). Given twice or malformed: \
                    `400 invalid_idempotency_key`. Ignored when the trigger has a \
                    `signing_secret`: the key is then the `dedupe_key` (default \
                    `{{ input.id }}`) over the signed body."),
            ("X-Fluxo-Event-Id" = Option<String>, Header,
                description = "The sender's event id, the dedupe key when there is no \
                    `Idempotency-Key` (same rules; ignored on signed deliveries too)."),
            ("X-Fluxo-Signature" = Option<String>, Header,
                description = "Required when the trigger has a `signing_secret`: \
                    `t=<unix seconds>,v1=<hex HMAC-SHA256 of \"<t>.<body>\">`, within 5 \
                    minutes (300 s) of the server's clock; several `v1=` are accepted \
                    (secret rotation)."),
        ),
        request_body(content = Value, content_type = "application/json",
            description = "Any JSON document: the run's `input`."),
        responses(
            (status = 202, description = "First delivery of this key (or no key): the run is \
                queued and durable; `duplicate` is false.", body = WebhookAnswer,
                example = json!({"run_id": "0190f7e4-1c2b-7d3e-8f00-1a2b3c4d5e6f", "duplicate": false})),
            (status = 200, description = "A repeat of a key within the dedupe window: the \
                original run's id and `duplicate: true`; no second run.", body = WebhookAnswer,
                example = json!({"run_id": "0190f7e4-1c2b-7d3e-8f00-1a2b3c4d5e6f", "duplicate": true})),
            (status = 400, description = "`invalid_idempotency_key` (a malformed or repeated \
                key header, or a `dedupe_key` template that renders no valid key from this \
                body: never a silent run without dedupe), `invalid_json`, `bad_body`.",
                body = Problem, content_type = "application/problem+json"),
            (status = 401, description = "`invalid_signature`: the trigger requires \
                `X-Fluxo-Signature` and it is missing, stale (over 5 minutes) or wrong.",
                body = Problem, content_type = "application/problem+json"),
            (status = 403, description = "`cross_site_request`: a browser sent this on \
                behalf of another site's page (`Sec-Fetch-Site: cross-site` or `same-site`, \
                or an `Origin` not on the trigger's `allowed_origins`).",
                body = Problem, content_type = "application/problem+json"),
            (status = 404, description = "`workflow_not_found`, or `no_webhook_trigger` (the \
                workflow starts with another trigger).",
                body = Problem, content_type = "application/problem+json"),
            (status = 409, description = "`workflow_invalid`: the workflow has validation \
                errors (or a bad trigger config / `dedupe_key` template); fix it first.",
                body = Problem, content_type = "application/problem+json"),
            (status = 413, description = "`payload_too_large`: the body is over the limit \
                (default 1 MiB).", body = Problem, content_type = "application/problem+json"),
            (status = 408, description = "`request_timeout`: the body stalled longer than \
                the body read timeout (default 30 s) between two chunks; the connection is \
                closed.", body = Problem, content_type = "application/problem+json"),
            (status = 415, description = "`unsupported_media_type`: the `Content-Type` is \
                missing or not JSON (`application/json` or a `+json` type).",
                body = Problem, content_type = "application/problem+json"),
            (status = 500, description = "`signing_secret_unavailable`: the trigger's \
                `signing_secret` template cannot be resolved.",
                body = Problem, content_type = "application/problem+json"),
            (status = 503, description = "`unavailable`: the delivery could not be queued or \
                made durable; nothing stays claimed, send it again after `Retry-After`.",
                body = Problem, content_type = "application/problem+json",
                headers(("Retry-After" = u64, description = "Seconds to wait before retrying."))),
        ),
    )]
    #[allow(dead_code)]
    pub async fn webhook() {}
}

// ---------------------------------------------------------------------------------------------
// Shapes of the bodies the handlers build with `json!` (documentation only)
// ---------------------------------------------------------------------------------------------

/// `GET /healthz` and `GET /readyz`.
#[derive(ToSchema)]
pub struct Health {
    /// `ok` (`/healthz`: the server answers) or `ready` (`/readyz`: its store answers too).
    pub status: String,
    /// The server's version.
    pub version: String,
}

/// One row of the workflow list.
#[derive(ToSchema)]
pub struct WorkflowSummary {
    /// The file name without `.json`.
    pub id: String,
    /// The workflow's `name`, else its id.
    pub name: String,
    /// The file's `version` (0 when it has none).
    pub version: u64,
    /// No validation errors: the workflow can run.
    pub valid: bool,
    /// Number of validation errors.
    pub errors: u64,
    /// Number of linter warnings.
    pub warnings: u64,
    /// The trigger's step kind (`webhook_trigger`, `manual_trigger`, …); null when invalid.
    #[schema(required = true)]
    pub trigger: Option<String>,
    /// The editor keeps a draft of it (unpublished changes).
    pub has_draft: bool,
    /// Only a draft, never published: no live file, no webhook (version 0; `valid`,
    /// `errors`, `warnings` and `trigger` are the draft's).
    pub draft_only: bool,
}

/// `GET /api/v1/workflows`.
#[derive(ToSchema)]
pub struct WorkflowList {
    pub workflows: Vec<WorkflowSummary>,
}

/// The answer to saving a workflow file.
#[derive(ToSchema)]
pub struct WorkflowSaved {
    /// The definition as saved (its `version` bumped).
    #[schema(required = true)]
    pub workflow: Option<Value>,
    /// The saved file's version.
    pub version: u64,
    /// No validation errors.
    pub valid: bool,
    /// Every error and warning (a structurally valid workflow is saved even with errors).
    pub problems: Vec<ValidationProblem>,
}

/// `GET /api/v1/workflows/{id}/draft`.
#[derive(ToSchema)]
pub struct Draft {
    /// The definition exactly as it was saved (it may not validate).
    pub workflow: Value,
    /// The live version the draft was saved over (null: never published).
    #[schema(required = true)]
    pub based_on_version: Option<u64>,
    /// When the draft was saved (unix ms).
    pub saved_at: i64,
    /// The live file's version now (null: no live file).
    #[schema(required = true)]
    pub live_version: Option<u64>,
}

/// The answer to saving a draft.
#[derive(ToSchema)]
pub struct DraftSaved {
    /// No validation errors: the draft can be published.
    pub valid: bool,
    /// Every error and warning, as `POST /workflows/validate` answers them.
    pub problems: Vec<ValidationProblem>,
    /// The live version the draft was saved over (null: never published).
    #[schema(required = true)]
    pub based_on_version: Option<u64>,
    /// When the draft was saved (unix ms).
    pub saved_at: i64,
}

/// The answer to validating a definition.
#[derive(ToSchema)]
pub struct Validation {
    /// No errors (warnings allowed).
    pub valid: bool,
    /// Every error and linter warning at once.
    pub problems: Vec<ValidationProblem>,
    /// The secrets the workflow declares (`secrets`), each with the steps that read it.
    pub secrets: Vec<SecretRead>,
}

/// One declared secret and the steps that read it (`Validation::secrets`).
#[derive(ToSchema)]
pub struct SecretRead {
    /// The env variable's name (`API_KEY`).
    pub name: String,
    /// Ids of the steps whose config reads `env.<name>`.
    pub steps: Vec<String>,
}

/// `GET /api/v1/runs/stats`.
#[derive(ToSchema)]
pub struct RunStats {
    /// Bucket width in milliseconds (`auto`: 1, 5 or 15 minutes, 1, 3, 6 or 12 hours, 1, 7
    /// or 30 days, the smallest that draws the range in at most 60 bars).
    pub bucket_ms: i64,
    /// Start of the range (inclusive): `since`, else the oldest matching run.
    pub since: Timestamp,
    /// End of the range (exclusive).
    pub until: Timestamp,
    /// Buckets that have runs, oldest first.
    pub buckets: Vec<crate::store::StatsBucket>,
    /// Runs matching the filters in the range.
    pub total: u64,
    /// `status -> count` over the matching runs.
    pub counts: std::collections::BTreeMap<String, u64>,
    /// `false` when more than 200,000 runs match: the figures cover the newest 200,000.
    pub complete: bool,
    /// Durations of the finished matching runs.
    pub duration: DurationPercentiles,
    /// The same per workflow, most runs first.
    pub durations: Vec<DurationPercentiles>,
    /// The same per step of the workflow named by `workflow` (each step's `duration_ms` in the
    /// finished runs that executed it; steps a resume reused are not counted again), in the
    /// order of the workflow file, then steps it no longer has by id. Empty without a
    /// `workflow` filter.
    pub steps: Vec<DurationPercentiles>,
    /// Failed runs grouped by reason, most first (at most 20).
    pub failures: Vec<FailureGroup>,
    /// Duplicate deliveries stopped in the range, in the same bars (the `workflow` filter
    /// applies; the run filters do not).
    pub duplicates: DuplicatesStopped,
}

/// Duplicates stopped over time (`RunStats::duplicates`).
#[derive(ToSchema)]
pub struct DuplicatesStopped {
    /// Stopped in the range.
    pub total: u64,
    /// Bars that have some, oldest first.
    pub buckets: Vec<DuplicatesBucket>,
    /// `false` when more than 100,000 records were read: the figures cover the oldest.
    pub complete: bool,
}

/// Duplicates stopped in one bar.
#[derive(ToSchema)]
pub struct DuplicatesBucket {
    /// Bar start.
    pub start: Timestamp,
    pub count: u64,
}

/// Nearest-rank percentiles of run (or step) durations in milliseconds: exact under 128 ms,
/// within 0.4% above (absent when `count` is 0).
#[derive(ToSchema)]
pub struct DurationPercentiles {
    /// The workflow (in `durations`).
    #[schema(nullable = false)]
    pub workflow_id: Option<String>,
    /// The step (in `steps`).
    #[schema(nullable = false)]
    pub step_id: Option<String>,
    /// Finished runs (in `steps`: step executions) measured.
    pub count: u64,
    #[schema(nullable = false)]
    pub p50_ms: Option<u64>,
    #[schema(nullable = false)]
    pub p95_ms: Option<u64>,
    #[schema(nullable = false)]
    pub p99_ms: Option<u64>,
}

/// Failed runs sharing a reason.
#[derive(ToSchema)]
pub struct FailureGroup {
    /// `HTTP 500 at create`, or `<error code> at <step>`: pass as `error=` to list them.
    pub reason: String,
    pub count: u64,
}

/// `GET /api/v1/memory`.
#[derive(ToSchema)]
pub struct Namespaces {
    pub namespaces: Vec<String>,
    /// Live keys per namespace, in the same order.
    pub counts: Vec<NamespaceCount>,
}

/// Live keys of one namespace.
#[derive(ToSchema)]
pub struct NamespaceCount {
    pub namespace: String,
    /// Live keys, at most 10,000 counted.
    pub keys: u64,
    /// More keys than `keys` (the count stopped at 10,000).
    pub more: bool,
}

/// One live Memory key.
#[derive(ToSchema)]
pub struct MemoryEntry {
    pub namespace: String,
    pub key: String,
    /// The stored JSON value.
    pub value: Value,
    /// When it was written.
    pub written_at: Timestamp,
    /// When it expires; absent: never.
    #[schema(nullable = false)]
    pub expires_at: Option<Timestamp>,
    /// Time left before it expires, in milliseconds; absent: never expires.
    #[schema(nullable = false)]
    pub ttl_left_ms: Option<i64>,
    /// The run lineage (root run id) and step that wrote it; absent for keys written outside
    /// a run.
    #[schema(nullable = false)]
    pub owner: Option<crate::store::ClaimOwner>,
}

/// A page of a namespace's live keys, in key order.
#[derive(ToSchema)]
pub struct MemoryPage {
    pub namespace: String,
    pub entries: Vec<MemoryEntry>,
    /// Pass as `after` for the next page; null on the last page.
    #[schema(required = true)]
    pub next_after: Option<String>,
}

/// The answer to a manual delete.
#[derive(ToSchema)]
pub struct Deleted {
    /// Always true (a missing key is a 404).
    pub deleted: bool,
}

/// One step kind of the catalog.
#[derive(ToSchema, serde::Serialize)]
pub struct StepKind {
    #[serde(flatten)]
    pub descriptor: Descriptor,
    /// Output ports of an empty config (a router adds its routes).
    pub ports: Vec<String>,
    /// JSON Schema of the kind's config.
    pub config_schema: Value,
    /// Ready-made steps of this kind the palette offers beside it (Memory's "Claim the
    /// event").
    pub presets: Vec<crate::steps::Preset>,
}

/// A built-in workflow template.
#[derive(ToSchema)]
pub struct Template {
    pub id: String,
    /// The workflow's `name`.
    #[schema(required = true)]
    pub name: Option<String>,
    /// The workflow definition.
    pub workflow: Value,
}

/// `GET /api/v1/templates`.
#[derive(ToSchema)]
pub struct TemplateList {
    pub templates: Vec<Template>,
}

/// The answer to a template preview (`POST /api/v1/templates/preview`): the rendered value, or
/// why it does not render.
#[derive(ToSchema)]
pub struct TemplatePreviewAnswer {
    /// The rendered JSON value (`true`/`false` for an `expression`); absent on an error.
    pub value: Option<Value>,
    /// Why it does not render (syntax, a missing value, a template over 16 KiB); absent when
    /// it rendered.
    #[schema(nullable = false)]
    pub error: Option<String>,
    /// The `env` variables that were unset and rendered as their dry-run placeholder; absent
    /// when the template was too long to read.
    #[schema(nullable = false)]
    pub env_unset: Option<Vec<String>>,
}

/// A real payload for the Dry Run input editor.
#[derive(ToSchema)]
pub struct SamplePayload {
    pub name: String,
    pub payload: Value,
}

/// `GET /api/v1/sample-payloads`.
#[derive(ToSchema)]
pub struct SamplePayloadList {
    pub payloads: Vec<SamplePayload>,
}

/// `GET /api/v1/connectors`.
#[derive(ToSchema)]
pub struct ConnectorList {
    pub connectors: Vec<ConnectorEntry>,
}

/// One app ([`crate::connectors::Connector`]).
#[derive(ToSchema)]
pub struct ConnectorEntry {
    /// The app id a connection and an `action` step name (`hubspot`).
    pub app: String,
    pub title: String,
    pub description: String,
    /// The vendor's API documentation.
    pub docs: Option<String>,
    /// The credential kinds a connection may use, first preferred.
    pub auth: Vec<ConnectorAuth>,
    /// The vendor's documented rate limit: `{requests, per_s, source}`.
    #[schema(value_type = Object)]
    pub rate_limit: Option<serde_json::Value>,
    pub operations: Vec<ConnectorOperation>,
}

/// A credential kind a connector accepts.
#[derive(ToSchema)]
pub struct ConnectorAuth {
    /// `bearer`, `basic`, `webhook_url` or `oauth2`.
    pub kind: String,
    pub title: String,
    /// Where to find or make one.
    pub help: Option<String>,
    /// `oauth2`: the app's authorization endpoint.
    pub authorize_url: Option<String>,
    /// `oauth2`: the app's token endpoint.
    pub token_url: Option<String>,
    /// `oauth2`: the scopes asked for.
    pub scopes: Option<Vec<String>>,
}

/// One operation of a connector.
#[derive(ToSchema)]
pub struct ConnectorOperation {
    /// What an `action` step's `operation` names (`create_contact`).
    pub name: String,
    pub title: String,
    pub description: String,
    /// `create`, `update`, `upsert`, `send`, `find`, `get` or `list`.
    pub kind: String,
    /// The step's `params` as JSON Schema.
    #[schema(value_type = Object)]
    pub input: serde_json::Value,
    /// For a write: how a repeat dedupes.
    pub dedupe: Option<ConnectorDedupe>,
}

/// How a write dedupes.
#[derive(ToSchema)]
pub struct ConnectorDedupe {
    /// `native_key`, `upsert`, `conflict_is_exists`, `find_then_create`, `kept_id` or `none`.
    pub strategy: String,
    /// The canvas badge (`upsert on email`, `not safe to repeat`).
    pub badge: String,
}

/// The retention policy in force (settings over the command-line defaults).
#[derive(ToSchema)]
pub struct EffectiveRetention {
    /// Newest finished runs kept per workflow; null: no count limit.
    #[schema(required = true)]
    pub retention_runs: Option<u64>,
    /// Days finished runs are kept; null: no age limit.
    #[schema(required = true)]
    pub retention_days: Option<i64>,
}

/// The settings and read-only facts.
#[derive(ToSchema)]
pub struct SettingsView {
    /// The settings, each secret env value masked (`••••1234`).
    pub settings: AppSettings,
    /// The env variables whose values are masked (secret by name or by `secret_env`).
    pub secret_names: Vec<String>,
    pub effective: EffectiveRetention,
    /// Where `settings.json` and `token` live; null: settings are kept in memory only.
    #[schema(required = true)]
    pub data_dir: Option<String>,
    /// The workflow folder.
    pub workflows_dir: String,
}

/// A connection as answered: everything but its secrets, each secret field of `credential`
/// masked (`••••` plus the last 4 characters of a value of 12 or more, else `••••`).
#[derive(ToSchema)]
pub struct ConnectionView {
    /// `[a-z0-9][a-z0-9_-]{0,63}`: what a step's `connection` names.
    pub id: String,
    /// The connector's app id (`hubspot`).
    pub app: String,
    /// A person's label (`HubSpot (sales)`); may be empty.
    pub name: String,
    /// The credential: `kind` and its fields, secret ones masked (`token`, `password`, `url`
    /// of a `webhook_url`, `access_token`, `refresh_token`, `client_secret`).
    pub credential: crate::connections::Credential,
    /// Replaces the connector's base URL; null: the connector's own.
    #[schema(required = true)]
    pub base_url: Option<String>,
    /// Values the connector reads as `connection.<name>` (`instance_url`, `realm_id`).
    pub values: std::collections::BTreeMap<String, String>,
}

/// `GET /api/v1/connections`.
#[derive(ToSchema)]
pub struct ConnectionList {
    /// By id.
    pub connections: Vec<ConnectionView>,
}

/// The answer of `POST /api/v1/connections/{id}/test`.
#[derive(ToSchema)]
pub struct ConnectionTest {
    /// The app accepted the credential.
    pub ok: bool,
    /// The test request's HTTP status; null when no answer came.
    #[schema(required = true)]
    pub status: Option<u16>,
    /// What happened, in plain words (`HubSpot refused the credentials (401 …)`, `could not
    /// reach HubSpot at …`); never a secret.
    pub message: String,
}

/// The body of `POST /api/v1/connections/oauth/start`.
#[derive(ToSchema)]
pub struct OAuthStartInput {
    /// The connector's app (`hubspot`); it must offer `oauth2`.
    pub app: String,
    /// The connection id to store: `[a-z0-9][a-z0-9_-]{0,63}` (an existing one is replaced).
    pub id: String,
    /// A person's label.
    pub name: Option<String>,
    /// The OAuth app's client id.
    pub client_id: String,
    /// The OAuth app's client secret, if it has one (kept encrypted with the connection).
    pub client_secret: Option<String>,
    /// Replaces the connector's base URL (a sandbox fake).
    pub base_url: Option<String>,
    /// Replaces the connector's authorization endpoint.
    pub authorize_url: Option<String>,
    /// Replaces the connector's token endpoint.
    pub token_url: Option<String>,
    /// Replaces the connector's scopes.
    pub scopes: Option<Vec<String>>,
}

/// The answer of `POST /api/v1/connections/oauth/start`.
#[derive(ToSchema)]
pub struct OAuthStarted {
    /// Open it in a browser: the app's authorization page.
    pub authorize_url: String,
    /// The flow's state: poll `GET /api/v1/connections/oauth/{state}`.
    pub state: String,
    /// Where the browser comes back (this server's callback).
    pub redirect_uri: String,
    /// When the flow stops waiting (UTC unix ms).
    pub expires_at_ms: i64,
}

/// The answer of `GET /api/v1/connections/oauth/{state}`.
#[derive(ToSchema)]
pub struct OAuthFlow {
    /// `pending`, `exchanging`, `connected` or `failed`.
    pub state: String,
    /// The connector's app.
    pub app: String,
    /// The connection id it stores.
    pub id: String,
    /// Why it failed (`failed` only).
    pub message: Option<String>,
    /// The connection, masked (`connected` only).
    pub connection: Option<ConnectionView>,
}

/// The body of `PUT /api/v1/connections/{id}`: the whole connection.
#[derive(ToSchema)]
pub struct ConnectionInput {
    /// Leave out, or the path's id.
    pub id: Option<String>,
    /// The connector's app id: `[a-z0-9_]+`.
    pub app: String,
    /// A person's label (at most 200 characters).
    pub name: Option<String>,
    /// The credential: `kind` (`bearer`, `basic`, `webhook_url`, `oauth2`) and its fields, each
    /// non-empty. A secret field given as the mask `GET` showed keeps the stored value.
    pub credential: crate::connections::Credential,
    /// An http(s) URL replacing the connector's base URL.
    pub base_url: Option<String>,
    /// Values the connector reads as `connection.<name>`; names `[A-Za-z_][A-Za-z0-9_]*`.
    pub values: Option<std::collections::BTreeMap<String, String>>,
}

/// The API token.
#[derive(ToSchema)]
pub struct Token {
    pub token: String,
}
