//! The OpenAPI document at `GET /api/v1/openapi.json`, over real HTTP on port 0: it lists
//! exactly the routes of SPEC §5 with their methods, every documented operation is served (and
//! no undocumented method on its path), the token requirement matches the auth layer, the
//! query parameters match what the handlers accept, the headers and status codes of the
//! webhook and of a run start are there, errors are problem+json, and real answers conform to
//! the documented schemas.
//!
//! The router and the document are built from the same `OpenApiRouter`s (utoipa-axum), so a
//! route added with `routes!` shows up in the document, and then here as a route SPEC §5 does
//! not list: update [`SPEC_ROUTES`] (and SPEC/README) when adding one on purpose. A route added
//! with a bare `.route(...)` would be served undocumented: `routes_are_registered_with_docs`
//! refuses that.

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::server::{api_workflow, hook_workflow, Answer, Setup, TestServer, TOKEN};
use fluxo::clock::Clock;
use fluxo::store::WriteOptions;
use reqwest::Method;
use serde_json::{json, Value};

/// Every route the server serves (SPEC §5 and the app's extras), with its method.
const SPEC_ROUTES: &[(&str, &str)] = &[
    ("POST", "/hooks/{workflow_id}"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/api/v1/openapi.json"),
    ("GET", "/api/v1/workflows"),
    ("POST", "/api/v1/workflows/validate"),
    ("GET", "/api/v1/workflows/{id}"),
    ("PUT", "/api/v1/workflows/{id}"),
    ("DELETE", "/api/v1/workflows/{id}"),
    ("GET", "/api/v1/workflows/{id}/draft"),
    ("PUT", "/api/v1/workflows/{id}/draft"),
    ("DELETE", "/api/v1/workflows/{id}/draft"),
    ("POST", "/api/v1/workflows/{id}/publish"),
    ("POST", "/api/v1/workflows/{id}/dry-run"),
    ("POST", "/api/v1/workflows/{id}/check"),
    ("POST", "/api/v1/workflows/{id}/runs"),
    ("GET", "/api/v1/runs"),
    ("GET", "/api/v1/runs/stats"),
    ("GET", "/api/v1/runs/export"),
    ("GET", "/api/v1/runs/{id}"),
    ("GET", "/api/v1/runs/{id}/deliveries"),
    ("POST", "/api/v1/runs/{id}/replay"),
    ("POST", "/api/v1/runs/{id}/replay/preview"),
    ("POST", "/api/v1/runs/{id}/resume"),
    ("POST", "/api/v1/runs/{id}/resume/preview"),
    ("POST", "/api/v1/runs/bulk"),
    ("POST", "/api/v1/runs/bulk/preview"),
    ("GET", "/api/v1/schedules"),
    ("GET", "/api/v1/schedules/preview"),
    ("GET", "/api/v1/memory"),
    ("GET", "/api/v1/memory/{namespace}"),
    ("GET", "/api/v1/memory/{namespace}/{key}"),
    ("DELETE", "/api/v1/memory/{namespace}/{key}"),
    ("GET", "/api/v1/step-kinds"),
    ("GET", "/api/v1/templates"),
    ("GET", "/api/v1/sample-payloads"),
    ("GET", "/api/v1/connectors"),
    ("GET", "/api/v1/events"),
    ("POST", "/api/v1/templates/preview"),
    ("GET", "/api/v1/settings"),
    ("PUT", "/api/v1/settings"),
    ("GET", "/api/v1/settings/token"),
    ("POST", "/api/v1/settings/token"),
    ("GET", "/api/v1/connections"),
    ("GET", "/api/v1/connections/{id}"),
    ("PUT", "/api/v1/connections/{id}"),
    ("DELETE", "/api/v1/connections/{id}"),
    ("POST", "/api/v1/connections/{id}/test"),
    ("POST", "/api/v1/connections/oauth/start"),
    ("GET", "/api/v1/connections/oauth/{state}"),
    ("GET", "/api/v1/connections/oauth/callback"),
];

/// Routes served without the bearer token.
const PUBLIC_ROUTES: &[(&str, &str)] = &[
    ("POST", "/hooks/{workflow_id}"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/api/v1/openapi.json"),
    ("GET", "/api/v1/connections/oauth/callback"),
];

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

async fn server() -> TestServer {
    Setup::new()
        .workflow(api_workflow("wf1"))
        .workflow(hook_workflow("hooked", json!({})))
        .start()
        .await
}

/// The document, fetched without a token.
async fn fetch_doc(s: &TestServer) -> Value {
    let a = s.send(Method::GET, "/api/v1/openapi.json", &[], None).await;
    assert_eq!(a.status.as_u16(), 200, "{}", a.text);
    assert_eq!(a.header("content-type"), Some("application/json"));
    let doc = a.json();
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["title"], "Fluxo API");
    doc
}

/// `(METHOD, path) -> operation` of every operation in the document.
fn operations(doc: &Value) -> BTreeMap<(String, String), Value> {
    let mut ops = BTreeMap::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for m in METHODS {
            if let Some(op) = item.get(m) {
                ops.insert((m.to_uppercase(), path.clone()), op.clone());
            }
        }
    }
    ops
}

fn set(list: &[(&str, &str)]) -> BTreeSet<(String, String)> {
    list.iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect()
}

/// A concrete URL path for a templated one.
fn concrete(path: &str) -> String {
    path.replace("{workflow_id}", "no-such-workflow")
        .replace("{id}", "wf1")
        .replace("{namespace}", "ns")
        .replace("{key}", "k")
}

fn method(m: &str) -> Method {
    Method::from_bytes(m.as_bytes()).unwrap()
}

fn is_secured(op: &Value) -> bool {
    op["security"]
        .as_array()
        .is_some_and(|reqs| reqs.iter().any(|r| r.get("bearer").is_some()))
}

/// The document lists exactly the SPEC §5 routes; each is served (the token-protected ones
/// answer 401 without the token, the public ones answer without it); no other method is served
/// on a documented path; unknown API paths are still `404 no_such_route`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_lists_every_route_with_its_methods() {
    let s = server().await;
    let doc = fetch_doc(&s).await;
    let ops = operations(&doc);

    let documented: BTreeSet<(String, String)> = ops.keys().cloned().collect();
    let expected = set(SPEC_ROUTES);
    let undocumented: Vec<_> = expected.difference(&documented).collect();
    let unexpected: Vec<_> = documented.difference(&expected).collect();
    assert!(
        undocumented.is_empty() && unexpected.is_empty(),
        "routes in SPEC §5 missing from the document: {undocumented:?}; routes in the \
         document SPEC_ROUTES does not list: {unexpected:?}"
    );

    // Security in the document = the auth layer of the router.
    let public = set(PUBLIC_ROUTES);
    for ((m, path), op) in &ops {
        let key = (m.clone(), path.clone());
        let url = concrete(path);
        let body = matches!(m.as_str(), "POST" | "PUT").then(|| b"{}".to_vec());
        let a = s.send(method(m), &url, &[], body).await;
        if public.contains(&key) {
            assert!(
                !is_secured(op),
                "{m} {path} is public but documented as secured"
            );
            assert!(
                a.status.as_u16() != 401 && a.status.as_u16() != 405,
                "{m} {url} without a token: {} {}",
                a.status,
                a.text
            );
            if a.status.as_u16() >= 400 {
                let p = a.json();
                assert_ne!(p["code"], "no_such_route", "{m} {url} is not served");
            }
        } else {
            assert!(
                path.starts_with("/api/v1/") || path == "/metrics",
                "{m} {path}: only /api/v1 and /metrics (--metrics-auth token, the default) are \
                 protected"
            );
            assert!(
                is_secured(op),
                "{m} {path} needs the token but is not documented so"
            );
            a.problem(401, "unauthorized");
            assert!(
                op["responses"]["401"].is_object(),
                "{m} {path}: 401 not documented"
            );
        }
    }

    // No undocumented method on a documented path (with the token, so the route answers).
    let auth = format!("Bearer {TOKEN}");
    for (path, item) in doc["paths"].as_object().unwrap() {
        for m in ["get", "put", "post", "delete", "patch"] {
            if item.get(m).is_some() {
                continue;
            }
            let a = s
                .send(
                    method(&m.to_uppercase()),
                    &concrete(path),
                    &[("authorization", auth.as_bytes())],
                    None,
                )
                .await;
            assert_eq!(
                a.status.as_u16(),
                405,
                "{} {path} is served but not documented: {}",
                m.to_uppercase(),
                a.text
            );
        }
    }

    // The /api/v1 fallback is unchanged: a problem, with or without the token.
    s.send(Method::GET, "/api/v1/no-such-route", &[], None)
        .await
        .problem(404, "no_such_route");
    s.api(Method::GET, "/no-such-route", &[], None)
        .await
        .problem(404, "no_such_route");
}

/// The document's parameter of this name and location.
fn param<'a>(op: &'a Value, name: &str, location: &str) -> &'a Value {
    op["parameters"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["name"] == name && p["in"] == location))
        .unwrap_or_else(|| panic!("no {location} parameter `{name}` in {op}"))
}

fn query_params(op: &Value) -> BTreeSet<String> {
    op["parameters"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .filter(|p| p["in"] == "query")
                .map(|p| p["name"].as_str().unwrap().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// The query fields a handler accepts, from its own answer to an unknown one (serde's
/// `unknown field ..., expected one of `a`, `b`` of a `deny_unknown_fields` struct).
async fn accepted_query_fields(s: &TestServer, path: &str) -> BTreeSet<String> {
    let a = s
        .api(Method::GET, &format!("{path}?no_such_param=1"), &[], None)
        .await;
    let p = a.problem(400, "invalid_parameter");
    let detail = p["detail"].as_str().unwrap();
    let list = detail
        .split("expected one of ")
        .nth(1)
        .unwrap_or_else(|| panic!("no field list in `{detail}`"));
    list.split(", ")
        .map(|f| f.trim().trim_matches('`').to_string())
        .collect()
}

/// Every error answer of every operation is `application/problem+json` of the one `Problem`
/// schema.
fn assert_errors_are_problems(doc: &Value) {
    for ((m, path), op) in operations(doc) {
        for (status, resp) in op["responses"].as_object().unwrap() {
            if status.as_str() < "400" {
                continue;
            }
            let content = resp["content"].as_object().unwrap_or_else(|| {
                panic!("{m} {path} {status}: no content");
            });
            assert_eq!(
                content.keys().collect::<Vec<_>>(),
                vec!["application/problem+json"],
                "{m} {path} {status}"
            );
            assert_eq!(
                content["application/problem+json"]["schema"]["$ref"],
                "#/components/schemas/Problem",
                "{m} {path} {status}"
            );
        }
    }
}

/// Headers, status codes, security, query parameters: the details a client relies on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openapi_documents_headers_statuses_and_security() {
    let s = server().await;
    let doc = fetch_doc(&s).await;
    let ops = operations(&doc);
    let op = |m: &str, p: &str| ops[&(m.to_string(), p.to_string())].clone();

    // Bearer scheme.
    let scheme = &doc["components"]["securitySchemes"]["bearer"];
    assert_eq!(scheme["type"], "http");
    assert_eq!(scheme["scheme"], "bearer");
    assert!(
        doc.get("security").is_none(),
        "no global security: /hooks is public"
    );

    // Problem schema (RFC 9457 + code).
    let problem = &doc["components"]["schemas"]["Problem"];
    for member in ["type", "title", "status", "detail", "code"] {
        assert!(
            problem["properties"][member].is_object(),
            "Problem.{member}"
        );
        assert!(problem["required"]
            .as_array()
            .unwrap()
            .contains(&json!(member)));
    }
    assert_errors_are_problems(&doc);

    // The webhook.
    let hook = op("POST", "/hooks/{workflow_id}");
    assert!(!is_secured(&hook));
    let wf = param(&hook, "workflow_id", "path");
    assert_eq!(wf["required"], true);
    for h in ["Idempotency-Key", "X-Fluxo-Event-Id", "X-Fluxo-Signature"] {
        assert_eq!(param(&hook, h, "header")["required"], false, "{h}");
    }
    let r = &hook["responses"];
    for status in ["200", "202", "400", "401", "404", "409", "413", "503"] {
        assert!(r[status].is_object(), "webhook {status} not documented");
    }
    for status in ["200", "202"] {
        assert_eq!(
            r[status]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/WebhookAnswer"
        );
    }
    assert!(r["400"]["description"]
        .as_str()
        .unwrap()
        .contains("invalid_idempotency_key"));
    assert!(r["409"]["description"]
        .as_str()
        .unwrap()
        .contains("workflow_invalid"));
    assert!(r["503"]["headers"]["Retry-After"].is_object());

    // Starting a run.
    let start = op("POST", "/api/v1/workflows/{id}/runs");
    assert!(is_secured(&start));
    assert_eq!(param(&start, "id", "path")["required"], true);
    param(&start, "Idempotency-Key", "header");
    assert!(param(&start, "Prefer", "header")["description"]
        .as_str()
        .unwrap()
        .contains("respond-async"));
    let r = &start["responses"];
    for status in ["200", "202"] {
        assert_eq!(
            r[status]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/RunRecord"
        );
        assert!(r[status]["headers"]["Idempotent-Replayed"].is_object());
        assert!(r[status]["headers"]["Location"].is_object());
    }
    let conflict = r["409"]["description"].as_str().unwrap();
    assert!(
        conflict.contains("idempotency_conflict") && conflict.contains("idempotency_in_progress")
    );
    for status in ["400", "401", "404", "413", "503"] {
        assert!(r[status].is_object(), "run start {status} not documented");
    }
    assert!(r["503"]["headers"]["Retry-After"].is_object());
    // The body may be left out (it reads as `{}`), but it is never JSON `null`.
    let body = &start["requestBody"];
    assert_ne!(body["required"], true);
    assert_eq!(
        body["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/StartRunRequest"
    );
    let replay = op("POST", "/api/v1/runs/{id}/replay");
    param(&replay, "Idempotency-Key", "header");
    assert!(replay["responses"]["409"].is_object());

    // SSE.
    let events = op("GET", "/api/v1/events");
    assert!(events["responses"]["200"]["content"]["text/event-stream"].is_object());

    // Exports: CSV or JSON Lines, as an attachment.
    let export = op("GET", "/api/v1/runs/export");
    for t in ["text/csv", "application/x-ndjson"] {
        assert!(export["responses"]["200"]["content"][t].is_object(), "{t}");
    }
    assert!(export["responses"]["400"].is_object());

    // Query parameters: exactly what the handlers accept, and each of them accepted.
    for (path, sample) in [
        ("/runs", "workflow=wf1&status=succeeded&mode=live&trigger=api&key=k&since=0&until=2000000000000&q=x&error=e&duplicates=stopped&limit=10&cursor="),
        ("/runs/stats", "bucket=hour&since=1767225600000&until=1767312000000&workflow=wf1&status=failed&mode=live&trigger=api&key=k&q=x&error=HTTP%20500%20at%20create&duplicates=stopped"),
        ("/memory/ns", "prefix=a&after=a&limit=10"),
        ("/runs/export", "format=jsonl&fields=input.a&workflow=wf1&status=failed&mode=live&trigger=api&key=k&since=0&until=2000000000000&q=x&error=e&duplicates=stopped"),
    ] {
        let documented = query_params(&op("GET", &format!("/api/v1{}", path.replace("/ns", "/{namespace}"))));
        let accepted = accepted_query_fields(&s, path).await;
        assert_eq!(documented, accepted, "query parameters of GET /api/v1{path}");
        let given: BTreeSet<String> = sample
            .split('&')
            .map(|kv| kv.split('=').next().unwrap().to_string())
            .collect();
        assert_eq!(given, accepted, "the sample request of {path} sets every parameter");
        let a = s.api(Method::GET, &format!("{path}?{sample}"), &[], None).await;
        assert_eq!(a.status.as_u16(), 200, "GET {path}?{sample}: {}", a.text);
    }
    let list = op("GET", "/api/v1/runs");
    let limit = &param(&list, "limit", "query")["schema"];
    assert_eq!(
        (limit["minimum"].as_u64(), limit["maximum"].as_u64()),
        (Some(1), Some(500))
    );

    // Times carry their unit.
    let attempt = &doc["components"]["schemas"]["Attempt"]["properties"];
    for field in ["duration_ms", "delay_before_ms"] {
        assert!(
            attempt[field]["description"]
                .as_str()
                .unwrap_or_default()
                .contains("milliseconds"),
            "Attempt.{field} says its unit"
        );
    }
    assert_eq!(
        doc["components"]["schemas"]["Timestamp"]["format"],
        "date-time"
    );
}

// ---------------------------------------------------------------------------------------------
// Real answers against the documented schemas
// ---------------------------------------------------------------------------------------------

/// A small JSON Schema check, enough for the schemas utoipa writes: `$ref`, `allOf`, `oneOf`,
/// `type` (one or a list), `enum`, `properties`/`required`, `additionalProperties`, `items`.
/// An object with `properties` and no `additionalProperties` admits no other member: a
/// member the handler writes and the document does not list is drift.
struct Checker<'a> {
    schemas: &'a Value,
}

impl Checker<'_> {
    fn resolve<'s>(&'s self, schema: &'s Value) -> &'s Value {
        match schema["$ref"].as_str() {
            Some(r) => {
                let name = r.trim_start_matches("#/components/schemas/");
                let s = &self.schemas[name];
                assert!(s.is_object(), "dangling $ref {r}");
                self.resolve(s)
            }
            None => schema,
        }
    }

    fn check(&self, schema: &Value, v: &Value, at: &str) -> Result<(), String> {
        let schema = self.resolve(schema);
        if let Some(all) = schema["allOf"].as_array() {
            // Members: the union of the parts' properties.
            let mut props = serde_json::Map::new();
            let mut required = Vec::new();
            for part in all {
                let part = self.resolve(part);
                if let Some(p) = part["properties"].as_object() {
                    props.extend(p.clone());
                }
                if let Some(r) = part["required"].as_array() {
                    required.extend(r.clone());
                }
            }
            let merged = json!({"type": "object", "properties": props, "required": required});
            return self.check(&merged, v, at);
        }
        if let Some(one) = schema["oneOf"].as_array() {
            return if one.iter().any(|s| self.check(s, v, at).is_ok()) {
                Ok(())
            } else {
                Err(format!("{at}: {v} matches none of {schema}"))
            };
        }
        if let Some(values) = schema["enum"].as_array() {
            if !values.contains(v) {
                return Err(format!("{at}: {v} is not one of {values:?}"));
            }
        }
        let types: Vec<&str> = match &schema["type"] {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        if !types.is_empty() {
            let ok = types.iter().any(|t| match *t {
                "null" => v.is_null(),
                "boolean" => v.is_boolean(),
                "integer" => v.is_i64() || v.is_u64(),
                "number" => v.is_number(),
                "string" => v.is_string(),
                "array" => v.is_array(),
                "object" => v.is_object(),
                _ => true,
            });
            if !ok {
                return Err(format!("{at}: {v} is not {types:?}"));
            }
        }
        if let (Some(items), Some(arr)) = (schema.get("items"), v.as_array()) {
            for (i, x) in arr.iter().enumerate() {
                self.check(items, x, &format!("{at}[{i}]"))?;
            }
        }
        if let Some(obj) = v.as_object() {
            let props = schema["properties"].as_object();
            if let Some(required) = schema["required"].as_array() {
                for r in required {
                    let r = r.as_str().unwrap();
                    if !obj.contains_key(r) {
                        return Err(format!("{at}: required member `{r}` missing in {v}"));
                    }
                }
            }
            for (k, x) in obj {
                match (
                    props.and_then(|p| p.get(k)),
                    schema.get("additionalProperties"),
                ) {
                    (Some(s), _) => self.check(s, x, &format!("{at}.{k}"))?,
                    (None, Some(Value::Bool(false))) => {
                        return Err(format!("{at}: member `{k}` is not documented"))
                    }
                    (None, Some(extra)) if extra.is_object() => {
                        self.check(extra, x, &format!("{at}.{k}"))?
                    }
                    (None, Some(_)) => {}
                    (None, None) if props.is_some() => {
                        return Err(format!("{at}: member `{k}` is not documented"))
                    }
                    (None, None) => {}
                }
            }
        }
        Ok(())
    }
}

/// Check a real answer against the document's response of `METHOD path` for its status.
fn conforms(doc: &Value, m: &str, path: &str, a: &Answer) {
    let op = &doc["paths"][path][m.to_lowercase()];
    assert!(op.is_object(), "{m} {path} not documented");
    let status = a.status.as_u16().to_string();
    let resp = &op["responses"][&status];
    assert!(
        resp.is_object(),
        "{m} {path} answered {status}, which is not documented: {}",
        a.text
    );
    let ct = a.header("content-type").unwrap_or_default();
    if status == "204" {
        assert!(resp.get("content").is_none());
        return;
    }
    let schema = &resp["content"][ct]["schema"];
    assert!(
        schema.is_object(),
        "{m} {path} {status}: content type `{ct}` not documented ({resp})"
    );
    if let Some(headers) = resp["headers"].as_object() {
        // Documented headers the first answer must carry.
        for h in ["Location"] {
            if headers.contains_key(h) && a.header("idempotent-replayed").is_none() {
                assert!(a.header(h).is_some(), "{m} {path} {status}: no {h} header");
            }
        }
    }
    for (h, must) in [("retry-after", "Retry-After"), ("location", "Location")] {
        if a.header(h).is_some() {
            assert!(
                resp["headers"][must].is_object(),
                "{m} {path} {status} sends {must}, which is not documented"
            );
        }
    }
    let checker = Checker {
        schemas: &doc["components"]["schemas"],
    };
    if let Err(e) = checker.check(schema, &a.json(), "body") {
        panic!(
            "{m} {path} {status}: the answer does not match the document: {e}\n{}",
            a.text
        );
    }
}

/// Every JSON answer the handlers build matches its documented schema (members, types,
/// required members), errors included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_answers_match_the_documented_schemas() {
    let s = server().await;
    let doc = fetch_doc(&s).await;
    let api = |m: Method, p: &'static str, body: Option<&'static str>| {
        let s = &s;
        async move { s.api(m, p, &[], body).await }
    };

    conforms(
        &doc,
        "GET",
        "/healthz",
        &s.send(Method::GET, "/healthz", &[], None).await,
    );
    let ready = s.send(Method::GET, "/readyz", &[], None).await;
    assert_eq!(ready.status.as_u16(), 200, "{}", ready.text);
    conforms(&doc, "GET", "/readyz", &ready);

    // Webhook: first delivery, repeat, and a refused one.
    let first = s.hook("hooked", Some("evt-1"), br#"{"id":"evt-1"}"#).await;
    assert_eq!(first.status.as_u16(), 202, "{}", first.text);
    conforms(&doc, "POST", "/hooks/{workflow_id}", &first);
    let again = s.hook("hooked", Some("evt-1"), br#"{"id":"evt-1"}"#).await;
    assert_eq!(again.status.as_u16(), 200);
    conforms(&doc, "POST", "/hooks/{workflow_id}", &again);
    let bad_key = s
        .hook_with("hooked", &[("idempotency-key", b"a b")], b"{}")
        .await;
    bad_key.problem(400, "invalid_idempotency_key");
    conforms(&doc, "POST", "/hooks/{workflow_id}", &bad_key);
    let run_id = first.json()["run_id"].as_str().unwrap().to_string();
    s.wait_final(&run_id).await;

    // Runs.
    let started = s
        .api(
            Method::POST,
            "/workflows/wf1/runs",
            &[("idempotency-key", "k-1")],
            Some(r#"{"input":{"invoice_id":"INV-1"}}"#),
        )
        .await;
    assert_eq!(started.status.as_u16(), 200, "{}", started.text);
    conforms(&doc, "POST", "/api/v1/workflows/{id}/runs", &started);
    let replayed = s
        .api(
            Method::POST,
            "/workflows/wf1/runs",
            &[("idempotency-key", "k-1")],
            Some(r#"{"input":{"invoice_id":"INV-1"}}"#),
        )
        .await;
    assert_eq!(replayed.header("idempotent-replayed"), Some("true"));
    conforms(&doc, "POST", "/api/v1/workflows/{id}/runs", &replayed);
    let conflict = s
        .api(
            Method::POST,
            "/workflows/wf1/runs",
            &[("idempotency-key", "k-1")],
            Some(r#"{"input":{"invoice_id":"INV-2"}}"#),
        )
        .await;
    conflict.problem(409, "idempotency_conflict");
    conforms(&doc, "POST", "/api/v1/workflows/{id}/runs", &conflict);
    let queued = s
        .api(
            Method::POST,
            "/workflows/wf1/runs",
            &[("prefer", "respond-async")],
            Some("{}"),
        )
        .await;
    assert_eq!(queued.status.as_u16(), 202, "{}", queued.text);
    conforms(&doc, "POST", "/api/v1/workflows/{id}/runs", &queued);
    s.wait_final(queued.json()["id"].as_str().unwrap()).await;

    let run = started.json()["id"].as_str().unwrap().to_string();
    let detail = s.api(Method::GET, &format!("/runs/{run}"), &[], None).await;
    conforms(&doc, "GET", "/api/v1/runs/{id}", &detail);
    let replay = s
        .api(
            Method::POST,
            &format!("/runs/{run}/replay"),
            &[],
            Some(r#"{"mode":"dry"}"#),
        )
        .await;
    assert_eq!(replay.status.as_u16(), 200, "{}", replay.text);
    conforms(&doc, "POST", "/api/v1/runs/{id}/replay", &replay);
    conforms(
        &doc,
        "GET",
        "/api/v1/runs/{id}",
        &api(Method::GET, "/runs/nope", None).await,
    );
    conforms(
        &doc,
        "GET",
        "/api/v1/runs",
        &api(Method::GET, "/runs", None).await,
    );
    let page = api(Method::GET, "/runs?limit=1", None).await;
    assert!(page.json()["next_cursor"].is_string());
    conforms(&doc, "GET", "/api/v1/runs", &page);
    conforms(
        &doc,
        "GET",
        "/api/v1/runs",
        &api(Method::GET, "/runs?status=nope", None).await,
    );
    conforms(
        &doc,
        "GET",
        "/api/v1/runs/stats",
        &api(Method::GET, "/runs/stats", None).await,
    );

    // Workflows.
    conforms(
        &doc,
        "GET",
        "/api/v1/workflows",
        &api(Method::GET, "/workflows", None).await,
    );
    let file = api(Method::GET, "/workflows/wf1", None).await;
    conforms(&doc, "GET", "/api/v1/workflows/{id}", &file);
    let saved = s
        .api(Method::PUT, "/workflows/wf1", &[], Some(&file.text))
        .await;
    conforms(&doc, "PUT", "/api/v1/workflows/{id}", &saved);
    let checked = s
        .api(Method::POST, "/workflows/validate", &[], Some(&file.text))
        .await;
    conforms(&doc, "POST", "/api/v1/workflows/validate", &checked);
    let invalid = api(
        Method::POST,
        "/workflows/validate",
        Some(r#"{"id":"x","steps":[]}"#),
    )
    .await;
    conforms(&doc, "POST", "/api/v1/workflows/validate", &invalid);
    let dry = api(
        Method::POST,
        "/workflows/wf1/dry-run",
        Some(r#"{"input":{"invoice_id":"D"}}"#),
    )
    .await;
    conforms(&doc, "POST", "/api/v1/workflows/{id}/dry-run", &dry);
    let new = api_workflow("wf2").to_string();
    let created = s.api(Method::PUT, "/workflows/wf2", &[], Some(&new)).await;
    conforms(&doc, "PUT", "/api/v1/workflows/{id}", &created);
    conforms(
        &doc,
        "DELETE",
        "/api/v1/workflows/{id}",
        &api(Method::DELETE, "/workflows/wf2", None).await,
    );
    conforms(
        &doc,
        "DELETE",
        "/api/v1/workflows/{id}",
        &api(Method::DELETE, "/workflows/wf2", None).await,
    );

    // Memory.
    let now = s.clock.now_ms();
    for (key, ttl) in [("a", None), ("b", Some(60_000))] {
        s.store
            .write(
                "ns",
                key,
                &json!({"key": key}),
                WriteOptions {
                    allow_overwrite: true,
                    ttl_ms: ttl,
                    owner: None,
                },
                now,
            )
            .await
            .unwrap();
    }
    conforms(
        &doc,
        "GET",
        "/api/v1/memory",
        &api(Method::GET, "/memory", None).await,
    );
    let list = api(Method::GET, "/memory/ns?limit=1", None).await;
    assert!(list.json()["next_after"].is_string());
    conforms(&doc, "GET", "/api/v1/memory/{namespace}", &list);
    conforms(
        &doc,
        "GET",
        "/api/v1/memory/{namespace}",
        &api(Method::GET, "/memory/ns", None).await,
    );
    let entry = api(Method::GET, "/memory/ns/b", None).await;
    assert!(entry.json()["ttl_left_ms"].is_number());
    conforms(&doc, "GET", "/api/v1/memory/{namespace}/{key}", &entry);
    conforms(
        &doc,
        "DELETE",
        "/api/v1/memory/{namespace}/{key}",
        &api(Method::DELETE, "/memory/ns/a", None).await,
    );
    conforms(
        &doc,
        "GET",
        "/api/v1/memory/{namespace}/{key}",
        &api(Method::GET, "/memory/ns/a", None).await,
    );

    // Catalog.
    conforms(
        &doc,
        "GET",
        "/api/v1/step-kinds",
        &api(Method::GET, "/step-kinds", None).await,
    );
    conforms(
        &doc,
        "GET",
        "/api/v1/templates",
        &api(Method::GET, "/templates", None).await,
    );
    conforms(
        &doc,
        "GET",
        "/api/v1/sample-payloads",
        &api(Method::GET, "/sample-payloads", None).await,
    );
    let connectors = api(Method::GET, "/connectors", None).await;
    conforms(&doc, "GET", "/api/v1/connectors", &connectors);

    // Connections: a put, its view, the list, a refused one, a missing one (secrets masked).
    let conn = json!({
        "app": "hubspot",
        "name": "HubSpot (sales)",
        "credential": {"kind": "bearer", "token": "pat-na1-0123456789abcdef"},
        "values": {"portal_id": "42"},
    })
    .to_string();
    let put = s
        .api(Method::PUT, "/connections/crm", &[], Some(&conn))
        .await;
    assert_eq!(put.status.as_u16(), 200, "{}", put.text);
    assert_eq!(put.json()["credential"]["token"], "••••cdef");
    conforms(&doc, "PUT", "/api/v1/connections/{id}", &put);
    let oauth = json!({"app": "sf", "credential": {"kind": "oauth2",
        "access_token": "access-0123456789", "expires_at_ms": 1_700_000_000_000_i64,
        "token_url": "https://login.example/token", "client_id": "cid"}})
    .to_string();
    let put = s
        .api(Method::PUT, "/connections/sf", &[], Some(&oauth))
        .await;
    conforms(&doc, "PUT", "/api/v1/connections/{id}", &put);
    conforms(
        &doc,
        "GET",
        "/api/v1/connections/{id}",
        &api(Method::GET, "/connections/crm", None).await,
    );
    let listed = api(Method::GET, "/connections", None).await;
    assert!(!listed.text.contains("0123456789abcdef"), "{}", listed.text);
    conforms(&doc, "GET", "/api/v1/connections", &listed);
    let refused = api(
        Method::PUT,
        "/connections/Bad",
        Some(r#"{"app":"x","credential":{"kind":"bearer","token":"t"}}"#),
    )
    .await;
    refused.problem(400, "invalid_connection");
    conforms(&doc, "PUT", "/api/v1/connections/{id}", &refused);
    let missing = api(Method::GET, "/connections/none", None).await;
    missing.problem(404, "connection_not_found");
    conforms(&doc, "GET", "/api/v1/connections/{id}", &missing);
    let removed = api(Method::DELETE, "/connections/crm", None).await;
    assert_eq!(removed.status.as_u16(), 204, "{}", removed.text);
    let again = api(Method::DELETE, "/connections/crm", None).await;
    again.problem(404, "connection_not_found");
    conforms(&doc, "DELETE", "/api/v1/connections/{id}", &again);

    // Settings (the token last: it changes it).
    let settings = api(Method::GET, "/settings", None).await;
    conforms(&doc, "GET", "/api/v1/settings", &settings);
    let body = json!({"env": {"REGION": "eu"}, "retention_runs": 5}).to_string();
    let put = s.api(Method::PUT, "/settings", &[], Some(&body)).await;
    conforms(&doc, "PUT", "/api/v1/settings", &put);
    let refused = api(
        Method::PUT,
        "/settings",
        Some(r#"{"env":{"bad name":"x"}}"#),
    )
    .await;
    refused.problem(400, "invalid_settings");
    conforms(&doc, "PUT", "/api/v1/settings", &refused);
    conforms(
        &doc,
        "GET",
        "/api/v1/settings/token",
        &api(Method::GET, "/settings/token", None).await,
    );
    conforms(
        &doc,
        "POST",
        "/api/v1/settings/token",
        &api(Method::POST, "/settings/token", None).await,
    );
}

/// Routes are registered only through `OpenApiRouter::routes(routes!(handler))`, which needs
/// the handler's `#[utoipa::path]`: a bare `.route(...)` in the server would serve a route the
/// document does not have (the router cannot be listed at run time, so this reads the source).
#[test]
fn routes_are_registered_with_docs() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/server");
    let mut offenders = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            if [".route(", ".route_service(", ".nest_service(", "routing::"]
                .iter()
                .any(|bad| code.contains(bad))
            {
                offenders.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "register routes with `.routes(routes!(handler))` and a `#[utoipa::path]` on the \
         handler, so they are in the OpenAPI document:\n{}",
        offenders.join("\n")
    );
}
