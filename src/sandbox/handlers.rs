//! HTTP handlers: collections (with idempotency keys and faults) and the `/_sandbox` controls.

use axum::body::{to_bytes, Body, Bytes};
use axum::extract::rejection::PathRejection;
use axum::extract::{ConnectInfo, Path, Query, Request, State};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE, LOCATION, RETRY_AFTER};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::Router;
use serde_json::{json, Map, Value};

use super::conn::ConnHandle;
use super::fault::{Fault, FaultRuleSpec, FAULT_HEADER};
use super::idempotency::{fingerprint, parse_key, Begin, StoredResponse, REPLAYED_HEADER};
use super::state::{valid_collection, CreateError, LogEntry, Outcome, SandboxState};

/// Response header naming the fault that was applied to an answered request.
pub const FAULT_APPLIED_HEADER: &str = "x-sandbox-fault-applied";

const JSON: &str = "application/json";
const PROBLEM_JSON: &str = "application/problem+json";

/// The sandbox's routes over `state`. Mount it anywhere; only the server started by
/// [`super::Sandbox`] can honour `drop_connection` (elsewhere it answers `502`
/// `drop_connection_unsupported`), because dropping a connection needs its listener.
pub fn router(state: SandboxState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/_sandbox/log", get(get_log))
        .route("/_sandbox/records", get(get_records))
        .route("/_sandbox/reset", post(reset))
        .route(
            "/_sandbox/faults",
            get(list_faults).post(add_fault).delete(clear_faults),
        )
        .route("/_sandbox/faults/{id}", delete(remove_fault))
        .route("/{collection}", get(list_records).post(create_record))
        .route("/{collection}/{id}", get(get_record).delete(delete_record))
        .merge(super::vendors::routes())
        .fallback(not_found)
        .with_state(state)
}

// ---------------------------------------------------------------------------------------------
// Answers

pub(super) fn problem(status: StatusCode, code: &str, detail: impl Into<String>) -> StoredResponse {
    problem_ext(status, code, detail, Map::new())
}

/// RFC 9457 problem details with Fluxo's extra `code` member (SPEC §5), plus `extra` members.
fn problem_ext(
    status: StatusCode,
    code: &str,
    detail: impl Into<String>,
    extra: Map<String, Value>,
) -> StoredResponse {
    let mut m = Map::new();
    m.insert("type".into(), json!("about:blank"));
    m.insert(
        "title".into(),
        json!(status.canonical_reason().unwrap_or("Error")),
    );
    m.insert("status".into(), json!(status.as_u16()));
    m.insert("detail".into(), json!(detail.into()));
    m.insert("code".into(), json!(code));
    m.extend(extra);
    StoredResponse {
        status: status.as_u16(),
        content_type: PROBLEM_JSON.into(),
        location: None,
        body: Bytes::from(Value::Object(m).to_string()),
    }
}

fn json_answer(status: StatusCode, value: &Value, location: Option<String>) -> StoredResponse {
    StoredResponse {
        status: status.as_u16(),
        content_type: JSON.into(),
        location,
        body: Bytes::from(value.to_string()),
    }
}

pub(super) fn to_response(r: &StoredResponse, replayed: bool) -> Response {
    let mut resp = Response::new(Body::from(r.body.clone()));
    *resp.status_mut() =
        StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&r.content_type) {
        h.insert(CONTENT_TYPE, v);
    }
    if let Some(loc) = r
        .location
        .as_deref()
        .and_then(|l| HeaderValue::from_str(l).ok())
    {
        h.insert(LOCATION, loc);
    }
    if replayed {
        h.insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
    }
    resp
}

pub(super) fn control(r: StoredResponse) -> Response {
    to_response(&r, false)
}

fn injected_500(when: &str) -> StoredResponse {
    problem(
        StatusCode::INTERNAL_SERVER_ERROR,
        "injected_error",
        format!("sandbox fault: internal error {when} the write"),
    )
}

/// The `id` member of a stored JSON body, for the log.
pub(super) fn body_id(r: &StoredResponse) -> Option<String> {
    serde_json::from_slice::<Value>(&r.body)
        .ok()?
        .get("id")?
        .as_str()
        .map(str::to_string)
}

// ---------------------------------------------------------------------------------------------
// One request to a collection

#[derive(Debug, Clone)]
enum Op {
    Create,
    Plain(PlainOp),
}

/// The operations without a body or idempotency layer.
#[derive(Debug, Clone)]
enum PlainOp {
    List,
    Get(String),
    Delete(String),
}

/// A request in flight: what the log needs, the fault chosen and the connection. The vendor
/// fakes ([`super::vendors`]) answer through it too, so they share the log and the faults.
pub(super) struct Call {
    pub(super) state: SandboxState,
    method: String,
    pub(super) path: String,
    target: String,
    pub(super) idempotency_key: Option<String>,
    pub(super) fault: Option<Fault>,
    conn: Option<ConnHandle>,
}

impl Call {
    pub(super) fn new(state: SandboxState, parts: &Parts) -> Self {
        let path = parts.uri.path().to_string();
        Call {
            state,
            method: parts.method.as_str().to_string(),
            target: parts
                .uri
                .path_and_query()
                .map(|p| p.as_str().to_string())
                .unwrap_or_else(|| path.clone()),
            path,
            idempotency_key: parts
                .headers
                .get("idempotency-key")
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned()),
            fault: None,
            conn: parts
                .extensions
                .get::<ConnectInfo<ConnHandle>>()
                .map(|c| c.0.clone()),
        }
    }

    fn log(
        &self,
        status: Option<u16>,
        outcome: Outcome,
        replayed: bool,
        record_id: Option<String>,
    ) {
        self.state.push_log(LogEntry {
            seq: 0,
            at: self.state.now_rfc3339(),
            method: self.method.clone(),
            path: self.target.clone(),
            idempotency_key: self.idempotency_key.clone(),
            fault: self.fault.map(|f| f.to_string()),
            status,
            outcome,
            replayed,
            record_id,
        });
    }

    /// Send `resp`, logging it.
    pub(super) fn answer(
        &self,
        resp: &StoredResponse,
        replayed: bool,
        record_id: Option<String>,
    ) -> Response {
        self.log(Some(resp.status), Outcome::Answered, replayed, record_id);
        let mut r = to_response(resp, replayed);
        if let Some(v) = self
            .fault
            .and_then(|f| HeaderValue::from_str(&f.to_string()).ok())
        {
            r.headers_mut().insert(FAULT_APPLIED_HEADER, v);
        }
        r
    }

    pub(super) fn fail(&self, resp: StoredResponse) -> Response {
        self.answer(&resp, false, None)
    }

    /// Close the connection without an answer.
    pub(super) fn drop_connection(&self, replayed: bool, record_id: Option<String>) -> Response {
        match &self.conn {
            Some(conn) => {
                self.log(None, Outcome::Dropped, replayed, record_id);
                conn.kill();
                // Never reaches the client: every write on the killed connection fails.
                StatusCode::INTERNAL_SERVER_ERROR.into_response()
            }
            None => self.fail(problem(
                StatusCode::BAD_GATEWAY,
                "drop_connection_unsupported",
                "this router is not served by the sandbox's own listener, so it cannot drop \
                 connections",
            )),
        }
    }

    /// The `slow:<ms>` delay, cut short by shutdown.
    pub(super) async fn delay(&self) {
        if let Some(d) = self.fault.and_then(|f| f.delay()) {
            tokio::select! {
                _ = tokio::time::sleep(d) => {}
                _ = self.state.shutdown_signalled() => {}
            }
        }
    }

    /// The last step: an after-write fault, or the answer.
    pub(super) async fn finish(
        self,
        resp: StoredResponse,
        replayed: bool,
        record_id: Option<String>,
    ) -> Response {
        match self.fault {
            Some(Fault::TimeoutAfterWrite) => {
                self.log(None, Outcome::Held, replayed, record_id);
                let hold = self.state.config().hold;
                tokio::select! {
                    _ = tokio::time::sleep(hold) => to_response(&resp, replayed),
                    _ = self.state.shutdown_signalled() => match &self.conn {
                        Some(conn) => {
                            conn.kill();
                            StatusCode::SERVICE_UNAVAILABLE.into_response()
                        }
                        None => StatusCode::SERVICE_UNAVAILABLE.into_response(),
                    },
                }
            }
            Some(Fault::DropConnectionAfterWrite) => self.drop_connection(replayed, record_id),
            _ => self.answer(&resp, replayed, record_id),
        }
    }
}

/// Idempotency claim; released (so a retry runs afresh) unless completed.
pub(super) struct Claim {
    pub(super) state: SandboxState,
    pub(super) scope: String,
    pub(super) key: String,
    pub(super) token: u64,
    pub(super) done: bool,
}

impl Claim {
    pub(super) fn complete(mut self, resp: StoredResponse) {
        self.state
            .lock()
            .idempotency
            .complete(&self.scope, &self.key, self.token, resp);
        self.done = true;
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if !self.done {
            self.state
                .lock()
                .idempotency
                .release(&self.scope, &self.key, self.token);
        }
    }
}

/// `Ok(None)`: no header; `Ok(Some(None))`: `none`; `Ok(Some(Some(f)))`: a fault.
pub(super) fn header_fault(headers: &HeaderMap) -> Result<Option<Option<Fault>>, String> {
    let Some(v) = headers.get(FAULT_HEADER) else {
        return Ok(None);
    };
    let s = v
        .to_str()
        .map_err(|_| "X-Sandbox-Fault must be ASCII".to_string())?
        .trim();
    if s == "none" {
        return Ok(Some(None));
    }
    s.parse().map(|f| Some(Some(f)))
}

async fn collection_call(
    state: SandboxState,
    collection: String,
    op: Op,
    req: Request,
) -> Response {
    if super::vendors::reserved_prefixes().any(|p| p == collection) {
        // `/hubspot`, `/hubspot/x`: a vendor fake's unknown route, not a collection.
        if let Some(r) = super::vendors::unknown_route(state.clone(), req) {
            return r;
        }
        return control(problem(StatusCode::NOT_FOUND, "not_found", "no such route"));
    }
    let (parts, body) = req.into_parts();
    let mut call = Call::new(state, &parts);
    if !valid_collection(&collection) {
        return call.fail(problem(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no collection {collection:?}: names are 1 to 64 of a-z 0-9 _ -"),
        ));
    }
    call.fault = match header_fault(&parts.headers) {
        Err(msg) => return call.fail(problem(StatusCode::BAD_REQUEST, "invalid_fault", msg)),
        Ok(Some(choice)) => choice,
        Ok(None) => call.state.take_route_fault(&call.method, &call.path),
    };
    let bytes = match op {
        Op::Create => {
            let max = call.state.config().max_body_bytes;
            let declared = parts
                .headers
                .get(CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            let too_large = || {
                problem(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "body_too_large",
                    format!("request bodies are limited to {max} bytes"),
                )
            };
            if declared.is_some_and(|n| n > max as u64) {
                return call.fail(too_large());
            }
            match to_bytes(body, max).await {
                Ok(b) => b,
                Err(_) => return call.fail(too_large()),
            }
        }
        _ => Bytes::new(),
    };
    // Faults that strike before anything runs (Stripe's rate limiter sits in front of the
    // idempotency layer, so a 429 stores nothing under the key).
    match call.fault {
        Some(Fault::RateLimit429 { retry_after_s }) => {
            let mut r = call.fail(problem(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                format!("sandbox fault: too many requests, retry after {retry_after_s} s"),
            ));
            r.headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(retry_after_s));
            return r;
        }
        Some(Fault::DropConnection) => return call.drop_connection(false, None),
        _ => {}
    }
    match op {
        Op::Create => create(call, collection, bytes).await,
        Op::Plain(other) => {
            call.delay().await;
            if call.fault == Some(Fault::Error500BeforeWrite) {
                return call.fail(injected_500("before"));
            }
            let (resp, record_id) = match execute(&call, &parts, &collection, other) {
                Ok(x) => x,
                Err(resp) => return call.fail(resp),
            };
            let resp = if call.fault == Some(Fault::Error500AfterWrite) {
                injected_500("after")
            } else {
                resp
            };
            call.finish(resp, false, record_id).await
        }
    }
}

/// Paging of `GET /{collection}` (Stripe-style parameters; every other parameter is an
/// equality filter): `created[gte]` (records created at or after it: unix **seconds**, or
/// RFC 3339), `limit` (1–100; without it, every matching record) and `starting_after` (a record id: the page after
/// it). Records come oldest first (creation order; Stripe lists newest first); `has_more`
/// says another page follows.
#[derive(Debug, Default, PartialEq)]
pub struct ListPaging {
    /// Created at or after, UTC unix ms.
    pub created_gte: Option<i64>,
    pub limit: Option<usize>,
    pub starting_after: Option<String>,
}

impl ListPaging {
    /// Most records on a page.
    pub const MAX_LIMIT: usize = 100;

    /// Take the paging parameters out of a query; the rest are filters. `Err`: which
    /// parameter is bad and why.
    pub fn split(
        query: Vec<(String, String)>,
    ) -> Result<(ListPaging, Vec<(String, String)>), String> {
        let mut p = ListPaging::default();
        let mut filters = Vec::new();
        for (k, v) in query {
            match k.as_str() {
                "created[gte]" => {
                    let ms = match v.parse::<i64>() {
                        Ok(s) => s.checked_mul(1000),
                        Err(_) => crate::clock::parse_rfc3339(&v),
                    };
                    p.created_gte = Some(ms.ok_or_else(|| {
                        format!("created[gte]: `{v}` is neither unix seconds nor RFC 3339")
                    })?);
                }
                "limit" => match v.parse::<usize>() {
                    Ok(n) if (1..=Self::MAX_LIMIT).contains(&n) => p.limit = Some(n),
                    _ => return Err(format!("limit: `{v}` is not a number from 1 to 100")),
                },
                "starting_after" => p.starting_after = Some(v),
                _ => filters.push((k, v)),
            }
        }
        Ok((p, filters))
    }

    /// This page of `records` (in creation order) and whether more follow.
    pub fn page(&self, records: Vec<Value>) -> (Vec<Value>, bool) {
        let created = |r: &Value| {
            r.get("created_at")
                .and_then(Value::as_str)
                .and_then(crate::clock::parse_rfc3339)
        };
        let mut rest: Vec<Value> = records
            .into_iter()
            .filter(|r| {
                self.created_gte
                    .is_none_or(|gte| created(r).is_some_and(|c| c >= gte))
            })
            .collect();
        if let Some(after) = &self.starting_after {
            match rest
                .iter()
                .position(|r| r.get("id").and_then(Value::as_str) == Some(after))
            {
                Some(i) => {
                    rest.drain(..=i);
                }
                None => rest.clear(),
            }
        }
        let limit = self.limit.unwrap_or(usize::MAX);
        let has_more = rest.len() > limit;
        rest.truncate(limit);
        (rest, has_more)
    }
}

/// List, get or delete. `Err`: an answer that needs no fault handling (bad query).
fn execute(
    call: &Call,
    parts: &Parts,
    collection: &str,
    op: PlainOp,
) -> Result<(StoredResponse, Option<String>), StoredResponse> {
    let state = &call.state;
    Ok(match op {
        PlainOp::List => {
            let Query(filters) = Query::<Vec<(String, String)>>::try_from_uri(&parts.uri)
                .map_err(|e| problem(StatusCode::BAD_REQUEST, "invalid_query", e.body_text()))?;
            let (paging, filters) = ListPaging::split(filters)
                .map_err(|e| problem(StatusCode::BAD_REQUEST, "invalid_query", e))?;
            let (data, has_more) = paging.page(state.find(collection, &filters));
            (
                json_answer(
                    StatusCode::OK,
                    &json!({"object": "list", "data": data, "has_more": has_more}),
                    None,
                ),
                None,
            )
        }
        PlainOp::Get(id) => match state.record(collection, &id) {
            Some(r) => (json_answer(StatusCode::OK, &r, None), Some(id)),
            None => (record_not_found(collection, &id), None),
        },
        PlainOp::Delete(id) => match state.delete(collection, &id) {
            Some(_) => (
                json_answer(StatusCode::OK, &json!({"id": id, "deleted": true}), None),
                Some(id),
            ),
            None => (record_not_found(collection, &id), None),
        },
    })
}

fn record_not_found(collection: &str, id: &str) -> StoredResponse {
    problem(
        StatusCode::NOT_FOUND,
        "not_found",
        format!("no record {id:?} in {collection}"),
    )
}

/// `POST /{collection}`: validation, the idempotency layer, the write, faults around it.
async fn create(call: Call, collection: String, bytes: Bytes) -> Response {
    let value: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            return call.fail(problem(
                StatusCode::BAD_REQUEST,
                "invalid_json",
                format!("body is not JSON: {e}"),
            ))
        }
    };
    let fp = fingerprint(&value);
    let Value::Object(body) = value else {
        return call.fail(problem(
            StatusCode::BAD_REQUEST,
            "invalid_body",
            "body must be a JSON object",
        ));
    };
    match body.get("external_id") {
        None | Some(Value::Null) | Some(Value::Number(_)) => {}
        Some(Value::String(s)) if !s.is_empty() => {}
        Some(_) => {
            return call.fail(problem(
                StatusCode::BAD_REQUEST,
                "invalid_external_id",
                "external_id must be a non-empty string or a number",
            ))
        }
    }

    // Idempotency layer (see the idempotency module for the rules and their sources).
    let mut claim = None;
    if let Some(raw) = call.idempotency_key.as_deref() {
        let key = match parse_key(raw.as_bytes()) {
            Ok(k) => k,
            Err(msg) => {
                return call.fail(problem(
                    StatusCode::BAD_REQUEST,
                    "invalid_idempotency_key",
                    msg,
                ))
            }
        };
        let scope = call.path.clone();
        let (now, ttl) = (
            call.state.now_ms(),
            i64::try_from(call.state.config().idempotency_ttl.as_millis()).unwrap_or(i64::MAX),
        );
        let begun = call
            .state
            .lock()
            .idempotency
            .begin(&scope, &key, &fp, now, ttl);
        match begun {
            Begin::Conflict => {
                return call.fail(problem(
                    StatusCode::CONFLICT,
                    "idempotency_conflict",
                    "this Idempotency-Key was used with a different request body",
                ))
            }
            Begin::InProgress => {
                return call.fail(problem(
                    StatusCode::CONFLICT,
                    "idempotency_in_progress",
                    "a request with this Idempotency-Key is still being processed",
                ))
            }
            Begin::Replay(stored) => {
                call.delay().await;
                let resp = match call.fault {
                    Some(Fault::Error500BeforeWrite) => return call.fail(injected_500("before")),
                    Some(Fault::Error500AfterWrite) => injected_500("after"),
                    _ => stored,
                };
                let id = body_id(&resp);
                let replayed = call.fault != Some(Fault::Error500AfterWrite);
                return call.finish(resp, replayed, id).await;
            }
            Begin::Claimed { token } => {
                claim = Some(Claim {
                    state: call.state.clone(),
                    scope,
                    key,
                    token,
                    done: false,
                })
            }
        }
    }

    call.delay().await;
    if call.fault == Some(Fault::Error500BeforeWrite) {
        drop(claim); // nothing ran: the key is free for a retry
        return call.fail(injected_500("before"));
    }
    let (resp, record_id) = match call.state.create(&collection, body) {
        Ok(record) => {
            let id = record
                .get("id")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            (
                json_answer(
                    StatusCode::CREATED,
                    &Value::Object(record),
                    Some(format!("/{collection}/{id}")),
                ),
                Some(id),
            )
        }
        Err(CreateError::DuplicateExternalId { existing_id }) => {
            let mut extra = Map::new();
            extra.insert("existing_id".into(), json!(existing_id));
            (
                problem_ext(
                    StatusCode::CONFLICT,
                    "duplicate_external_id",
                    format!("{collection} already has a record with this external_id"),
                    extra,
                ),
                None,
            )
        }
    };
    // The endpoint ran, so its result is the key's result (Stripe stores 500s of requests that
    // ran, too); the record stays written whatever the client gets to see.
    let resp = if call.fault == Some(Fault::Error500AfterWrite) {
        injected_500("after")
    } else {
        resp
    };
    if let Some(c) = claim {
        c.complete(resp.clone());
    }
    call.finish(resp, false, record_id).await
}

fn path_problem(e: PathRejection) -> Response {
    control(problem(
        StatusCode::BAD_REQUEST,
        "invalid_path",
        e.body_text(),
    ))
}

async fn create_record(
    State(state): State<SandboxState>,
    path: Result<Path<String>, PathRejection>,
    req: Request,
) -> Response {
    match path {
        Ok(Path(collection)) => collection_call(state, collection, Op::Create, req).await,
        Err(e) => path_problem(e),
    }
}

async fn list_records(
    State(state): State<SandboxState>,
    path: Result<Path<String>, PathRejection>,
    req: Request,
) -> Response {
    match path {
        Ok(Path(collection)) => {
            collection_call(state, collection, Op::Plain(PlainOp::List), req).await
        }
        Err(e) => path_problem(e),
    }
}

async fn get_record(
    State(state): State<SandboxState>,
    path: Result<Path<(String, String)>, PathRejection>,
    req: Request,
) -> Response {
    match path {
        Ok(Path((collection, id))) => {
            collection_call(state, collection, Op::Plain(PlainOp::Get(id)), req).await
        }
        Err(e) => path_problem(e),
    }
}

async fn delete_record(
    State(state): State<SandboxState>,
    path: Result<Path<(String, String)>, PathRejection>,
    req: Request,
) -> Response {
    match path {
        Ok(Path((collection, id))) => {
            collection_call(state, collection, Op::Plain(PlainOp::Delete(id)), req).await
        }
        Err(e) => path_problem(e),
    }
}

// ---------------------------------------------------------------------------------------------
// Controls (not logged, no faults)

async fn healthz() -> Response {
    control(json_answer(StatusCode::OK, &json!({"status": "ok"}), None))
}

async fn get_log(State(state): State<SandboxState>) -> Response {
    let data = serde_json::to_value(state.log()).unwrap_or_default();
    control(json_answer(
        StatusCode::OK,
        &json!({"object": "list", "data": data}),
        None,
    ))
}

async fn get_records(State(state): State<SandboxState>) -> Response {
    let all = serde_json::to_value(state.all_records()).unwrap_or_default();
    control(json_answer(StatusCode::OK, &all, None))
}

async fn reset(State(state): State<SandboxState>) -> Response {
    state.reset();
    control(json_answer(StatusCode::OK, &json!({"reset": true}), None))
}

async fn list_faults(State(state): State<SandboxState>) -> Response {
    let data = serde_json::to_value(state.faults()).unwrap_or_default();
    control(json_answer(
        StatusCode::OK,
        &json!({"object": "list", "data": data}),
        None,
    ))
}

async fn add_fault(State(state): State<SandboxState>, body: Bytes) -> Response {
    let spec: FaultRuleSpec = match serde_json::from_slice(&body) {
        Ok(s) => s,
        Err(e) => {
            return control(problem(
                StatusCode::BAD_REQUEST,
                "invalid_fault_rule",
                format!(
                    "expected {{\"route\": \"POST /deals\", \"fault\": \"...\", \"times\": N}}: {e}"
                ),
            ))
        }
    };
    match state.add_fault(spec) {
        Ok(rule) => control(json_answer(
            StatusCode::CREATED,
            &serde_json::to_value(rule).unwrap_or_default(),
            None,
        )),
        Err(msg) => control(problem(StatusCode::BAD_REQUEST, "invalid_fault_rule", msg)),
    }
}

async fn clear_faults(State(state): State<SandboxState>) -> Response {
    let n = state.faults().len();
    state.clear_faults();
    control(json_answer(StatusCode::OK, &json!({"cleared": n}), None))
}

async fn remove_fault(State(state): State<SandboxState>, Path(id): Path<String>) -> Response {
    if state.remove_fault(&id) {
        control(json_answer(
            StatusCode::OK,
            &json!({"id": id, "deleted": true}),
            None,
        ))
    } else {
        control(problem(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no fault rule {id:?}"),
        ))
    }
}

async fn not_found(State(state): State<SandboxState>, req: Request) -> Response {
    match super::vendors::unknown_route(state, req) {
        Some(r) => r,
        None => control(problem(StatusCode::NOT_FOUND, "not_found", "no such route")),
    }
}
