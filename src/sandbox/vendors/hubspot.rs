//! HubSpot's CRM v3 objects API (`/hubspot/crm/v3/objects/{contacts|deals}…`), from HubSpot's
//! public developer documentation.
//!
//! What matters for dedupe: a contact's `email` is unique, so a second create with an email
//! that exists is `409 CONFLICT` `"Contact already exists. Existing ID: <id>"` (the existing id
//! is only in the message); `batch/upsert` with `idProperty: "email"` creates or updates; deals
//! have no unique property HubSpot defines, so every create is a new deal; the fake portal has
//! one custom deal property with unique values, `external_id`, which `batch/upsert` matches on
//! (as a portal whose admin ticked "Has unique value" on such a property); search can lag behind writes
//! (`search_lag_ms`, 0 unless set), as HubSpot's search index does.

use std::collections::BTreeMap;

use axum::extract::{Path, Request, State};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Map, Value};

use super::{
    begin, iso_ms, object, query_pairs, uuid, Answer, Auth, AuthFailure, Ctx, Fake, Style,
    VendorData, HUBSPOT_TOKEN_PREFIX,
};
use crate::sandbox::state::SandboxState;

const CT: &str = "application/json;charset=utf-8";

/// Most inputs in one batch request, and most results on a search page.
const MAX_BATCH: usize = 100;
const MAX_SEARCH_LIMIT: usize = 200;

/// An object type the fake serves.
struct Kind {
    name: &'static str,
    /// The property that is unique per record (HubSpot: a contact's `email`).
    unique: Option<&'static str>,
    /// What HubSpot calls the object in a conflict message.
    singular: &'static str,
    /// The last-modified property's name.
    modified: &'static str,
    /// Properties returned when a read names none.
    defaults: &'static [&'static str],
    /// Ids are this plus a per-type counter.
    id_base: u64,
    /// Custom properties with unique values the fake portal has ("Has unique value" set in
    /// HubSpot's property settings): `batch/upsert` may match on them as `idProperty`.
    custom_unique: &'static [&'static str],
}

const KINDS: [Kind; 2] = [
    Kind {
        name: "contacts",
        unique: Some("email"),
        singular: "Contact",
        modified: "lastmodifieddate",
        defaults: &[
            "createdate",
            "email",
            "firstname",
            "hs_object_id",
            "lastmodifieddate",
            "lastname",
        ],
        id_base: 1000,
        custom_unique: &[],
    },
    Kind {
        name: "deals",
        unique: None,
        singular: "Deal",
        modified: "hs_lastmodifieddate",
        defaults: &[
            "amount",
            "closedate",
            "createdate",
            "dealname",
            "dealstage",
            "hs_lastmodifieddate",
            "hs_object_id",
            "pipeline",
        ],
        id_base: 5000,
        custom_unique: &["external_id"],
    },
];

fn kind(name: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.name == name)
}

#[derive(Debug, Clone)]
struct Obj {
    id: String,
    /// Values are strings or null, as HubSpot stores them.
    props: BTreeMap<String, Value>,
    created_ms: i64,
    updated_ms: i64,
}

impl Obj {
    fn prop(&self, name: &str) -> Option<&str> {
        self.props.get(name).and_then(Value::as_str)
    }
}

/// HubSpot's memory: records per object type.
#[derive(Debug, Default)]
pub(crate) struct HubSpotData {
    objects: BTreeMap<&'static str, Vec<Obj>>,
    next: BTreeMap<&'static str, u64>,
    /// Records younger than this are not found by search yet.
    search_lag_ms: i64,
}

impl HubSpotData {
    fn find_unique(&self, k: &Kind, value: &str) -> Option<&Obj> {
        self.find_by(k, k.unique?, value)
    }

    /// The record whose `prop` is `value` (case-insensitive, as HubSpot compares emails).
    fn find_by(&self, k: &Kind, prop: &str, value: &str) -> Option<&Obj> {
        self.objects
            .get(k.name)?
            .iter()
            .find(|o| o.prop(prop).is_some_and(|v| v.eq_ignore_ascii_case(value)))
    }

    fn create(&mut self, k: &'static Kind, props: Map<String, Value>, now: i64) -> Obj {
        let n = self.next.entry(k.name).or_insert(0);
        *n += 1;
        let id = (k.id_base + *n).to_string();
        let mut o = Obj {
            id: id.clone(),
            props: BTreeMap::new(),
            created_ms: now,
            updated_ms: now,
        };
        o.props.extend(props);
        o.props.insert("createdate".into(), json!(iso_ms(now)));
        o.props.insert(k.modified.into(), json!(iso_ms(now)));
        o.props.insert("hs_object_id".into(), json!(id));
        self.objects.entry(k.name).or_default().push(o.clone());
        o
    }

    fn update(&mut self, k: &Kind, id: &str, props: Map<String, Value>, now: i64) -> Option<Obj> {
        let o = self
            .objects
            .get_mut(k.name)?
            .iter_mut()
            .find(|o| o.id == id)?;
        for (key, v) in props {
            if !matches!(key.as_str(), "hs_object_id" | "createdate") {
                o.props.insert(key, v);
            }
        }
        o.updated_ms = now;
        o.props.insert(k.modified.into(), json!(iso_ms(now)));
        Some(o.clone())
    }
}

/// Which properties an answer shows.
enum Select<'a> {
    /// Every property set (create, update and upsert answers).
    All,
    /// The type's defaults, or the named ones plus HubSpot's always-returned three.
    Read(&'a [String]),
}

fn render(k: &Kind, o: &Obj, select: &Select) -> Value {
    let props: Map<String, Value> = match select {
        Select::All => o
            .props
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        Select::Read(named) => {
            let names: Vec<&str> = if named.is_empty() {
                k.defaults.to_vec()
            } else {
                let mut n: Vec<&str> = named.iter().map(String::as_str).collect();
                n.extend(["createdate", "hs_object_id", k.modified]);
                n.sort_unstable();
                n.dedup();
                n
            };
            names
                .into_iter()
                .map(|n| {
                    (
                        n.to_string(),
                        o.props.get(n).cloned().unwrap_or(Value::Null),
                    )
                })
                .collect()
        }
    };
    json!({
        "id": o.id,
        "properties": props,
        "createdAt": iso_ms(o.created_ms),
        "updatedAt": iso_ms(o.updated_ms),
        "archived": false,
    })
}

// ---------------------------------------------------------------------------------------------
// Errors

fn error(status: u16, category: &str, message: &str) -> Answer {
    Answer::json(
        status,
        CT,
        &json!({
            "status": "error",
            "message": message,
            "correlationId": uuid(),
            "category": category,
        }),
    )
}

fn validation(message: &str) -> Answer {
    error(400, "VALIDATION_ERROR", message)
}

/// HubSpot's "Property values were not valid" with one entry per bad property.
fn invalid_properties(entries: &[Value]) -> Answer {
    validation(&format!(
        "Property values were not valid: {}",
        Value::Array(entries.to_vec())
    ))
}

fn not_found_object() -> Answer {
    error(404, "OBJECT_NOT_FOUND", "resource not found")
}

fn ago(s: u64) -> String {
    match s {
        0..=59 => format!("{s} second(s)"),
        60..=3599 => format!("{} minute(s)", s / 60),
        3600..=86_399 => format!("{} hour(s)", s / 3600),
        _ => format!("{} day(s)", s / 86_400),
    }
}

/// The HubSpot fake.
pub(crate) struct HubSpot;

impl Style for HubSpot {
    fn app(&self) -> &'static str {
        "hubspot"
    }

    fn unauthorized(&self, why: &AuthFailure) -> Answer {
        match why {
            AuthFailure::Expired { ago_s, .. } => error(
                401,
                "EXPIRED_AUTHENTICATION",
                &format!(
                    "The OAuth token used to make this call expired {} ago.",
                    ago(*ago_s)
                ),
            ),
            _ => error(
                401,
                "INVALID_AUTHENTICATION",
                "Authentication credentials not found. This API supports OAuth 2.0 \
                 authentication and you can find more details at \
                 https://developers.hubspot.com/docs/methods/auth/oauth-overview",
            ),
        }
    }

    fn rate_limited(&self, _retry_after_s: u64) -> Answer {
        Answer::json(
            429,
            CT,
            &json!({
                "status": "error",
                "message": "You have reached your ten_secondly_rolling limit.",
                "errorType": "RATE_LIMIT",
                "correlationId": uuid(),
                "policyName": "TEN_SECONDLY_ROLLING",
                "groupName": "publicapi:sandbox",
            }),
        )
        .header("x-hubspot-ratelimit-interval-milliseconds", 10_000)
        .header("x-hubspot-ratelimit-max", 100)
        .header("x-hubspot-ratelimit-remaining", 0)
    }

    fn server_error(&self) -> Answer {
        error(500, "INTERNAL_ERROR", "internal error (sandbox fault)")
    }

    fn not_found(&self, _method: &str, _path: &str) -> Answer {
        error(404, "OBJECT_NOT_FOUND", "Not Found")
    }

    fn bad_request(&self, message: &str) -> Answer {
        validation(message)
    }
}

impl Fake for HubSpot {
    fn token_prefix(&self) -> &'static str {
        HUBSPOT_TOKEN_PREFIX
    }

    fn routes(&self) -> Router<SandboxState> {
        Router::new()
            .route("/hubspot/crm/v3/objects/{object}", get(list).post(create))
            .route(
                "/hubspot/crm/v3/objects/{object}/{id}",
                get(read).patch(update),
            )
            .route("/hubspot/crm/v3/objects/{object}/search", post(search))
            .route(
                "/hubspot/crm/v3/objects/{object}/batch/upsert",
                post(batch_upsert),
            )
    }

    fn snapshot(&self, data: &VendorData, _now_ms: i64) -> Value {
        let h = &data.hubspot;
        let mut v = json!({"search_lag_ms": h.search_lag_ms});
        for k in &KINDS {
            let list: Vec<Value> = h
                .objects
                .get(k.name)
                .into_iter()
                .flatten()
                .map(|o| render(k, o, &Select::All))
                .collect();
            v[k.name] = Value::Array(list);
        }
        v
    }

    fn counts(&self, data: &VendorData) -> Vec<(String, usize)> {
        KINDS
            .iter()
            .map(|k| {
                let n = data.hubspot.objects.get(k.name).map_or(0, Vec::len);
                (format!("hubspot {}", k.name), n)
            })
            .collect()
    }

    fn control(&self, data: &mut VendorData, body: Value) -> Result<Value, String> {
        let m = object(&body);
        for (k, v) in &m {
            match k.as_str() {
                "search_lag_ms" => {
                    let ms = v
                        .as_u64()
                        .filter(|ms| *ms <= 600_000)
                        .ok_or("search_lag_ms is milliseconds from 0 to 600000")?;
                    data.hubspot.search_lag_ms = ms as i64;
                }
                other => return Err(format!("unknown setting {other:?} (search_lag_ms)")),
            }
        }
        if m.is_empty() {
            return Err("expected {\"search_lag_ms\": n}".into());
        }
        Ok(json!({"search_lag_ms": data.hubspot.search_lag_ms}))
    }
}

// ---------------------------------------------------------------------------------------------
// Endpoints

async fn start(state: SandboxState, req: Request) -> Result<Ctx, Response> {
    begin(&HubSpot, HUBSPOT_TOKEN_PREFIX, Auth::Bearer, state, req).await
}

/// [`start`], then the object type of the path: HubSpot's 404 for one the fake does not serve.
async fn start_kind(
    state: SandboxState,
    object_type: &str,
    req: Request,
) -> Result<(Ctx, &'static Kind), Response> {
    let ctx = start(state, req).await?;
    match kind(object_type) {
        Some(k) => Ok((ctx, k)),
        None => Err(ctx.refuse(unknown_kind(object_type))),
    }
}

fn unknown_kind(name: &str) -> Answer {
    validation(&format!(
        "Unable to infer object type from: {name} (the sandbox has contacts and deals)"
    ))
}

/// The JSON body, or HubSpot's 400.
fn json_body(ctx: &Ctx) -> Result<Value, Answer> {
    if ctx.body.is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_slice(&ctx.body).map_err(|e| {
        validation(&format!(
            "Invalid input JSON on line {}, column {}: {e}",
            e.line(),
            e.column()
        ))
    })
}

/// Property values as HubSpot keeps them: strings (numbers and booleans converted) or null.
fn properties(k: &Kind, v: Option<&Value>) -> Result<Map<String, Value>, Answer> {
    let Some(v) = v else {
        return Ok(Map::new());
    };
    let Value::Object(m) = v else {
        return Err(validation(
            "Invalid input JSON: properties must be an object of property names to values",
        ));
    };
    let mut out = Map::new();
    let mut bad = Vec::new();
    for (name, value) in m {
        let value = match value {
            Value::String(s) => json!(s),
            Value::Number(n) => json!(n.to_string()),
            Value::Bool(b) => json!(b.to_string()),
            Value::Null => Value::Null,
            _ => {
                bad.push(json!({
                    "isValid": false,
                    "message": format!("{value} is not a valid value for {name}"),
                    "error": "INVALID_PROPERTY_VALUE",
                    "name": name,
                }));
                continue;
            }
        };
        if Some(name.as_str()) == k.unique {
            if let Some(email) = value.as_str().filter(|e| !e.is_empty()) {
                if !valid_email(email) {
                    bad.push(json!({
                        "isValid": false,
                        "message": format!("Email address {email} is invalid"),
                        "error": "INVALID_EMAIL",
                        "name": name,
                    }));
                    continue;
                }
            }
        }
        out.insert(name.clone(), value);
    }
    if bad.is_empty() {
        Ok(out)
    } else {
        Err(invalid_properties(&bad))
    }
}

fn valid_email(e: &str) -> bool {
    let Some((local, domain)) = e.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && !e.chars().any(char::is_whitespace)
}

fn conflict(k: &Kind, existing: &str) -> Answer {
    error(
        409,
        "CONFLICT",
        &format!("{} already exists. Existing ID: {existing}", k.singular),
    )
}

/// The value of a unique property in `props`, if set.
fn unique_value<'a>(k: &Kind, props: &'a Map<String, Value>) -> Option<&'a str> {
    props
        .get(k.unique?)
        .and_then(Value::as_str)
        .filter(|v| !v.is_empty())
}

/// `POST /crm/v3/objects/{object}`: `{"properties": {...}}` → `201`, or `409` for a contact
/// whose email exists.
async fn create(
    State(state): State<SandboxState>,
    Path(object_type): Path<String>,
    req: Request,
) -> Response {
    let (ctx, k) = match start_kind(state, &object_type, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let props = match json_body(&ctx).and_then(|b| properties(k, b.get("properties"))) {
        Ok(p) => p,
        Err(a) => return ctx.refuse(a),
    };
    ctx.run(|_, data, now| {
        let h = &mut data.hubspot;
        if let Some(existing) = unique_value(k, &props).and_then(|v| h.find_unique(k, v)) {
            return Ok((conflict(k, &existing.id), None));
        }
        let o = h.create(k, props, now);
        Ok((
            Answer::json(201, CT, &render(k, &o, &Select::All)),
            Some(o.id),
        ))
    })
    .await
}

/// `?properties=a,b&properties=c` → the names.
fn named_properties(q: &[(String, String)]) -> Vec<String> {
    q.iter()
        .filter(|(k, _)| k == "properties")
        .flat_map(|(_, v)| v.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Find a record by id, or by a unique property with `?idProperty=email`.
fn lookup<'a>(
    h: &'a HubSpotData,
    k: &Kind,
    id: &str,
    id_property: Option<&str>,
) -> Result<Option<&'a Obj>, Answer> {
    match id_property {
        None | Some("hs_object_id") => Ok(h
            .objects
            .get(k.name)
            .and_then(|l| l.iter().find(|o| o.id == id))),
        Some(p) if Some(p) == k.unique => Ok(h.find_unique(k, id)),
        Some(p) => Err(validation(&format!(
            "{p} is not a unique property of {}",
            k.name
        ))),
    }
}

/// `GET /crm/v3/objects/{object}/{id}[?properties=…&idProperty=email]`.
async fn read(
    State(state): State<SandboxState>,
    Path((object_type, id)): Path<(String, String)>,
    req: Request,
) -> Response {
    let (ctx, k) = match start_kind(state, &object_type, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let q = query_pairs(&ctx.parts);
    let named = named_properties(&q);
    let id_property = q
        .iter()
        .find(|(k, _)| k == "idProperty")
        .map(|(_, v)| v.clone());
    ctx.run(
        |_, data, _| match lookup(&data.hubspot, k, &id, id_property.as_deref())? {
            Some(o) => Ok((
                Answer::json(200, CT, &render(k, o, &Select::Read(&named))),
                Some(o.id.clone()),
            )),
            None => Ok((not_found_object(), None)),
        },
    )
    .await
}

/// `PATCH /crm/v3/objects/{object}/{id}`: `{"properties": {...}}` → the record.
async fn update(
    State(state): State<SandboxState>,
    Path((object_type, id)): Path<(String, String)>,
    req: Request,
) -> Response {
    let (ctx, k) = match start_kind(state, &object_type, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let props = match json_body(&ctx).and_then(|b| properties(k, b.get("properties"))) {
        Ok(p) => p,
        Err(a) => return ctx.refuse(a),
    };
    let q = query_pairs(&ctx.parts);
    let id_property = q
        .iter()
        .find(|(k, _)| k == "idProperty")
        .map(|(_, v)| v.clone());
    ctx.run(|_, data, now| {
        let h = &mut data.hubspot;
        let Some(target) = lookup(h, k, &id, id_property.as_deref())?.map(|o| o.id.clone()) else {
            return Ok((not_found_object(), None));
        };
        if let Some(other) = unique_value(k, &props)
            .and_then(|v| h.find_unique(k, v))
            .filter(|o| o.id != target)
        {
            return Ok((conflict(k, &other.id), None));
        }
        let o = h.update(k, &target, props, now);
        Ok(match o {
            Some(o) => (
                Answer::json(200, CT, &render(k, &o, &Select::All)),
                Some(o.id),
            ),
            None => (not_found_object(), None),
        })
    })
    .await
}

/// `GET /crm/v3/objects/{object}?limit=&after=&properties=`: a page, oldest first.
async fn list(
    State(state): State<SandboxState>,
    Path(object_type): Path<String>,
    req: Request,
) -> Response {
    let (ctx, k) = match start_kind(state, &object_type, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let q = query_pairs(&ctx.parts);
    let named = named_properties(&q);
    let param = |name: &str| q.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    let limit = match param("limit").map(|l| l.parse::<usize>()) {
        None => 10,
        Some(Ok(n)) if (1..=MAX_BATCH).contains(&n) => n,
        Some(_) => return ctx.refuse(validation("limit must be a number from 1 to 100")),
    };
    let after = match param("after").map(|a| a.parse::<usize>()) {
        None => 0,
        Some(Ok(n)) => n,
        Some(Err(_)) => return ctx.refuse(validation("after must be a paging cursor")),
    };
    ctx.run(|_, data, _| {
        let all = data
            .hubspot
            .objects
            .get(k.name)
            .cloned()
            .unwrap_or_default();
        Ok((page(k, &all, after, limit, &named, None), None))
    })
    .await
}

/// A page of `all` from offset `after`, with `total` when it is a search answer.
fn page(
    k: &Kind,
    all: &[Obj],
    after: usize,
    limit: usize,
    named: &[String],
    total: Option<usize>,
) -> Answer {
    let results: Vec<Value> = all
        .iter()
        .skip(after)
        .take(limit)
        .map(|o| render(k, o, &Select::Read(named)))
        .collect();
    let mut v = json!({});
    if let Some(t) = total {
        v["total"] = json!(t);
    }
    v["results"] = Value::Array(results);
    if after + limit < all.len() {
        let next = (after + limit).to_string();
        v["paging"] = json!({"next": {"after": next, "link": format!("?after={next}")}});
    }
    Answer::json(200, CT, &v)
}

/// One search filter, checked against a record.
fn filter_matches(o: &Obj, f: &Value) -> Result<bool, String> {
    let name = f
        .get("propertyName")
        .and_then(Value::as_str)
        .ok_or("each filter needs a propertyName")?;
    let op = f
        .get("operator")
        .and_then(Value::as_str)
        .ok_or("each filter needs an operator")?;
    let text = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    };
    let value = f.get("value").and_then(text);
    let have = o.prop(name).filter(|v| !v.is_empty());
    let need_value = || value.clone().ok_or(format!("operator {op} needs a value"));
    let eq = |a: &str, b: &str| match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => x == y,
        _ => a.eq_ignore_ascii_case(b),
    };
    let cmp = |a: &str, b: &str| match (a.parse::<f64>(), b.parse::<f64>()) {
        (Ok(x), Ok(y)) => x.partial_cmp(&y),
        _ => Some(a.cmp(b)),
    };
    use std::cmp::Ordering::*;
    Ok(match op {
        "EQ" => {
            let v = need_value()?;
            have.is_some_and(|h| eq(h, &v))
        }
        "NEQ" => {
            let v = need_value()?;
            !have.is_some_and(|h| eq(h, &v))
        }
        "LT" | "LTE" | "GT" | "GTE" => {
            let v = need_value()?;
            have.and_then(|h| cmp(h, &v)).is_some_and(|o| match op {
                "LT" => o == Less,
                "LTE" => o != Greater,
                "GT" => o == Greater,
                _ => o != Less,
            })
        }
        "BETWEEN" => {
            let lo = need_value()?;
            let hi = f
                .get("highValue")
                .and_then(text)
                .ok_or("operator BETWEEN needs a highValue")?;
            have.is_some_and(|h| {
                cmp(h, &lo).is_some_and(|o| o != Less) && cmp(h, &hi).is_some_and(|o| o != Greater)
            })
        }
        "HAS_PROPERTY" => have.is_some(),
        "NOT_HAS_PROPERTY" => have.is_none(),
        "IN" | "NOT_IN" => {
            let values: Vec<String> = f
                .get("values")
                .and_then(Value::as_array)
                .ok_or(format!("operator {op} needs values"))?
                .iter()
                .filter_map(text)
                .collect();
            let found = have.is_some_and(|h| values.iter().any(|v| eq(h, v)));
            found == (op == "IN")
        }
        "CONTAINS_TOKEN" | "NOT_CONTAINS_TOKEN" => {
            let v = need_value()?.trim_matches('*').to_ascii_lowercase();
            let found = have.is_some_and(|h| h.to_ascii_lowercase().contains(&v));
            found == (op == "CONTAINS_TOKEN")
        }
        other => return Err(format!("Unknown operator {other}")),
    })
}

/// `POST /crm/v3/objects/{object}/search`: `filterGroups` (OR of ANDs), `properties`,
/// `limit`, `after` → `{"total", "results", "paging"}`.
async fn search(
    State(state): State<SandboxState>,
    Path(object_type): Path<String>,
    req: Request,
) -> Response {
    let (ctx, k) = match start_kind(state, &object_type, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let body = match json_body(&ctx) {
        Ok(b) => b,
        Err(a) => return ctx.refuse(a),
    };
    let groups: Vec<Vec<Value>> = match body.get("filterGroups") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(gs)) => gs
            .iter()
            .map(|g| {
                g.get("filters")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default()
            })
            .collect(),
        Some(_) => return ctx.refuse(validation("filterGroups must be an array")),
    };
    let named: Vec<String> = body
        .get("properties")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let limit = match body.get("limit") {
        None | Some(Value::Null) => 10,
        Some(v) => match v.as_u64().map(|n| n as usize) {
            Some(n) if (1..=MAX_SEARCH_LIMIT).contains(&n) => n,
            _ => return ctx.refuse(validation("limit must be a number from 1 to 200")),
        },
    };
    let after = match body.get("after") {
        None | Some(Value::Null) => 0,
        Some(Value::String(s)) if s.parse::<usize>().is_ok() => s.parse().unwrap_or(0),
        Some(Value::Number(n)) if n.as_u64().is_some() => n.as_u64().unwrap_or(0) as usize,
        Some(_) => return ctx.refuse(validation("after must be a paging cursor")),
    };
    ctx.run(|_, data, now| {
        let h = &data.hubspot;
        let visible = now - h.search_lag_ms;
        let mut hits = Vec::new();
        for o in h.objects.get(k.name).into_iter().flatten() {
            if o.created_ms > visible {
                continue;
            }
            let mut any = groups.is_empty();
            for g in &groups {
                let mut all = true;
                for f in g {
                    if !filter_matches(o, f).map_err(|e| validation(&e))? {
                        all = false;
                        break;
                    }
                }
                if all {
                    any = true;
                    break;
                }
            }
            if any {
                hits.push(o.clone());
            }
        }
        Ok((page(k, &hits, after, limit, &named, Some(hits.len())), None))
    })
    .await
}

/// `POST /crm/v3/objects/{object}/batch/upsert`: `{"inputs": [{"idProperty": "email", "id",
/// "properties"}]}` → `200 {"status": "COMPLETE", "results": [... "new": bool]}`.
async fn batch_upsert(
    State(state): State<SandboxState>,
    Path(object_type): Path<String>,
    req: Request,
) -> Response {
    let (ctx, k) = match start_kind(state, &object_type, req).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let body = match json_body(&ctx) {
        Ok(b) => b,
        Err(a) => return ctx.refuse(a),
    };
    if k.unique.is_none() && k.custom_unique.is_empty() {
        return ctx.refuse(validation(&format!(
            "{} have no unique property to upsert on in the sandbox",
            k.name
        )));
    }
    let Some(inputs) = body.get("inputs").and_then(Value::as_array) else {
        return ctx.refuse(validation("Invalid input JSON: inputs must be an array"));
    };
    if inputs.is_empty() || inputs.len() > MAX_BATCH {
        return ctx.refuse(validation("inputs must hold 1 to 100 objects"));
    }
    let mut parsed: Vec<(&'static str, String, Map<String, Value>)> = Vec::new();
    for input in inputs {
        let id_property = input.get("idProperty").and_then(Value::as_str);
        let Some(unique) = k
            .unique
            .iter()
            .chain(k.custom_unique)
            .copied()
            .find(|u| Some(*u) == id_property)
        else {
            let names: Vec<&str> = k.unique.iter().chain(k.custom_unique).copied().collect();
            return ctx.refuse(validation(&format!(
                "idProperty must be a property of {} with unique values ({})",
                k.name,
                names.join(", ")
            )));
        };
        let Some(id) = input
            .get("id")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
        else {
            return ctx.refuse(validation(&format!(
                "each input needs an id (its {unique})"
            )));
        };
        let mut props = match properties(k, input.get("properties")) {
            Ok(p) => p,
            Err(a) => return ctx.refuse(a),
        };
        if unique == "email" && !valid_email(id) {
            return ctx.refuse(invalid_properties(&[json!({
                "isValid": false,
                "message": format!("Email address {id} is invalid"),
                "error": "INVALID_EMAIL",
                "name": unique,
            })]));
        }
        if parsed.iter().any(|(_, p, _)| p.eq_ignore_ascii_case(id)) {
            return ctx.refuse(validation(&format!(
                "Duplicate IDs found in batch input: [{id}]. IDs must be unique"
            )));
        }
        props.insert(unique.to_string(), json!(id));
        parsed.push((unique, id.to_string(), props));
    }
    ctx.run(|_, data, now| {
        let h = &mut data.hubspot;
        let mut results = Vec::new();
        let mut ids = Vec::new();
        for (unique, id, props) in parsed {
            let (o, new) = match h.find_by(k, unique, &id).map(|o| o.id.clone()) {
                Some(existing) => match h.update(k, &existing, props, now) {
                    Some(o) => (o, false),
                    None => continue,
                },
                None => (h.create(k, props, now), true),
            };
            let mut v = render(k, &o, &Select::All);
            v["new"] = json!(new);
            ids.push(o.id);
            results.push(v);
        }
        let at = iso_ms(now);
        Ok((
            Answer::json(
                200,
                CT,
                &json!({
                    "status": "COMPLETE",
                    "results": results,
                    "startedAt": at,
                    "completedAt": at,
                }),
            ),
            Some(ids.join(",")),
        ))
    })
    .await
}
