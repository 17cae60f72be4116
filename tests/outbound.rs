//! Outbound HTTP (SPEC §5, issue 13 item 3) over real sockets: hosts from run data need an
//! opt-in and are checked after DNS resolution, before any connection; redirects stay within
//! one origin; responses are capped; the author's hosts (the local sandbox through
//! `env.CRM_URL`) keep working.
//!
//! Every mock listens on 127.0.0.1, so a "public" host here is a name the test's resolver maps
//! to 127.0.0.1 and the allowlist lets through by name.

mod common;

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use common::server::Setup;
use common::{compile, dump, step, workflow, Action, Harness, Mock};
use fluxo::run::{RunRecord, RunStatus};
use fluxo::runtime::http::LiveHttp;
use fluxo::runtime::outbound::{Lookup, OutboundAllow, OutboundPolicy};
use fluxo::steps::Registry;
use fluxo::store::RunStore;
use fluxo::workflow::{check_value, Severity};
use reqwest::Method;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A resolver answering from a table; a name's answers are taken in order, the last repeats.
#[derive(Default)]
struct FakeDns(Mutex<HashMap<String, VecDeque<Vec<IpAddr>>>>);

impl FakeDns {
    fn with(entries: &[(&str, &[&[&str]])]) -> Arc<Self> {
        let dns = FakeDns::default();
        for (name, answers) in entries {
            let answers = answers
                .iter()
                .map(|a| a.iter().map(|ip| ip.parse().unwrap()).collect())
                .collect();
            dns.0.lock().unwrap().insert(name.to_string(), answers);
        }
        Arc::new(dns)
    }
}

#[async_trait]
impl Lookup for FakeDns {
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
        let mut m = self.0.lock().unwrap();
        let answers = m
            .get_mut(host)
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no such host"))?;
        Ok(if answers.len() > 1 {
            answers.pop_front().unwrap()
        } else {
            answers[0].clone()
        })
    }
}

/// A harness whose live transport resolves through `dns` and allows `allow`.
fn harness_with(dns: Arc<FakeDns>, allow: &[&str]) -> Harness {
    harness_and_policy(dns, allow).0
}

/// [`harness_with`], and the policy of its transport (to change the allowlist later).
fn harness_and_policy(dns: Arc<FakeDns>, allow: &[&str]) -> (Harness, Arc<OutboundPolicy>) {
    let policy = Arc::new(OutboundPolicy::new(dns));
    policy.set_allow(OutboundAllow::parse(allow).unwrap());
    let mut h = Harness::new();
    h.engine = h
        .engine
        .clone()
        .with_http(Arc::new(LiveHttp::with_policy(policy.clone())));
    (h, policy)
}

/// The port of a mock (`http://127.0.0.1:<port>`).
fn port_of(m: &Mock) -> u16 {
    m.url().rsplit(':').next().unwrap().parse().unwrap()
}

/// `manual_trigger → call` where `call` is an `http_request` with `config` (method GET,
/// `retries: 2` unless given).
fn calling(config: Value) -> Value {
    let mut c = json!({"method": "GET", "retries": 2, "retry_base_delay_ms": 1});
    for (k, v) in config.as_object().unwrap() {
        c[k] = v.clone();
    }
    workflow(
        "out",
        Value::Null,
        json!([
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "call", "kind": "http_request", "config": c}
        ]),
        json!([{"from": "start", "to": "call"}]),
    )
}

fn input_url() -> Value {
    calling(json!({"url": "{{ input.url }}", "allow_input_host": true}))
}

/// The run failed at `call` with `code`; answers the message.
fn failed_with(run: &RunRecord, code: &str) -> String {
    assert_eq!(run.status, RunStatus::Failed, "{}", dump(run));
    let e = step(run, "call").error.clone().expect("call failed");
    assert_eq!(e.code, code, "{}", dump(run));
    e.message
}

fn problems(wf: &Value) -> Vec<fluxo::workflow::Problem> {
    check_value(wf, &Registry::builtin()).1
}

// ---------------------------------------------------------------------------------------------
// Validation and lint
// ---------------------------------------------------------------------------------------------

#[test]
fn a_host_from_run_data_is_refused_at_validation_without_the_opt_in() {
    for url in [
        "{{ input.url }}",
        "https://{{ input.domain }}/x",
        "{{ steps.start.output.url }}",
        "{{ env.CRM_URL }}{{ input.path }}",
    ] {
        let p = problems(&calling(json!({ "url": url })));
        let e = p
            .iter()
            .find(|p| p.code == "input_host")
            .unwrap_or_else(|| panic!("{url}: {p:?}"));
        assert_eq!(e.severity, Severity::Error);
        assert_eq!(e.step.as_deref(), Some("call"));
        assert_eq!(e.path, "steps[1].config.url");
        assert!(e.message.contains("allow_input_host"), "{}", e.message);

        // With the opt-in it validates, and the linter still says so.
        let p = problems(&calling(json!({ "url": url, "allow_input_host": true })));
        assert!(p.iter().all(|p| p.severity == Severity::Warning), "{p:?}");
        let w = p
            .iter()
            .find(|p| p.code == "lint_input_host")
            .expect("lint");
        assert_eq!(w.path, "steps[1].config.url");
    }
    // The author's hosts: no problem at all, whatever the path reads.
    for url in [
        "{{ env.CRM_URL }}/deals/{{ input.id }}",
        "https://api.example.com/u/{{ input.id }}?q={{ input.q }}",
    ] {
        let p = problems(&calling(json!({ "url": url })));
        assert!(p.is_empty(), "{url}: {p:?}");
    }
}

#[test]
fn publish_output_and_find_or_create_follow_the_same_rule() {
    let wf = |step: Value| {
        workflow(
            "k",
            Value::Null,
            json!([{"id": "start", "kind": "manual_trigger", "config": {}}, step]),
            json!([{"from": "start", "to": "s"}]),
        )
    };
    let cases = [
        (
            json!({"id": "s", "kind": "publish_output", "config": {"url": "{{ input.hook }}"}}),
            "steps[1].config.url",
        ),
        (
            json!({"id": "s", "kind": "find_or_create",
                   "config": {"find_url": "{{ input.crm }}/contacts", "match_field": "email",
                              "match_value": "{{ input.email }}"}}),
            "steps[1].config.find_url",
        ),
        (
            json!({"id": "s", "kind": "find_or_create",
                   "config": {"find_url": "{{ env.CRM_URL }}/contacts", "match_field": "email",
                              "match_value": "{{ input.email }}",
                              "create_url": "https://{{ input.host }}/contacts"}}),
            "steps[1].config.create_url",
        ),
    ];
    for (step, path) in cases {
        let p = problems(&wf(step.clone()));
        assert!(
            p.iter().any(|p| p.code == "input_host" && p.path == path),
            "{path}: {p:?}"
        );
        let mut allowed = step.clone();
        allowed["config"]["allow_input_host"] = json!(true);
        let p = problems(&wf(allowed));
        assert!(!p.iter().any(|p| p.severity == Severity::Error), "{p:?}");
        assert!(p
            .iter()
            .any(|p| p.code == "lint_input_host" && p.path == path));
    }
}

#[test]
fn every_shipped_template_still_validates_without_input_hosts() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("workflows");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let (compiled, problems) = fluxo::workflow::check_text(&text, &Registry::builtin());
        assert!(compiled.is_some(), "{}: {problems:?}", path.display());
        assert!(
            !problems.iter().any(|p| p.code.contains("input_host")),
            "{}: {problems:?}",
            path.display()
        );
        n += 1;
    }
    assert!(n >= 5);
}

#[test]
fn max_response_bytes_is_checked() {
    for bad in [json!(0), json!(200 * 1024 * 1024)] {
        let p = problems(&calling(
            json!({"url": "https://x.example/", "max_response_bytes": bad}),
        ));
        assert!(
            p.iter()
                .any(|p| p.path == "steps[1].config.max_response_bytes"),
            "{p:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Hosts from run data, checked after resolution
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn ssrf_through_every_address_form_is_refused_before_any_connection() {
    let target = Mock::always(Action::status(200)).await;
    let port = target.url().rsplit(':').next().unwrap().to_string();
    let h = harness_with(
        FakeDns::with(&[
            ("internal.test", &[&["127.0.0.1"]]),
            ("mixed.test", &[&["10.0.0.7", "::1"]]),
        ]),
        &[],
    );
    let wf = compile(&input_url());
    for url in [
        format!("http://127.0.0.1:{port}/x"),
        format!("http://2130706433:{port}/x"),
        format!("http://0x7f.1:{port}/x"),
        format!("http://0177.0.0.1:{port}/x"),
        format!("http://127.1:{port}/x"),
        format!("http://[::ffff:127.0.0.1]:{port}/x"),
        format!("http://[::1]:{port}/x"),
        format!("http://0.0.0.0:{port}/x"),
        format!("http://localhost:{port}/x"),
        format!("http://localhost.:{port}/x"),
        format!("http://LocalHost.:{port}/x"),
        format!("http://api.localhost:{port}/x"),
        format!("http://internal.test:{port}/x"),
        format!("http://internal.test.:{port}/x"),
        format!("http://mixed.test:{port}/x"),
        format!("http://user:pw@127.0.0.1:{port}/x"),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "http://[fd00:ec2::254]/latest/meta-data/".to_string(),
        "http://10.1.2.3/".to_string(),
        "http://192.168.0.1/".to_string(),
        "http://100.64.0.1/".to_string(),
        "http://[fe80::1]/".to_string(),
        "http://224.0.0.1/".to_string(),
    ] {
        let run = h.run(&wf, json!({ "url": url })).await;
        let message = failed_with(&run, "url_not_allowed");
        assert!(message.contains("outbound_allow"), "{url}: {message}");
        let rec = step(&run, "call");
        assert_eq!(rec.attempts.len(), 1, "refusals are not retried: {url}");
        assert_eq!(target.count(), 0, "{url} reached the target");
    }
}

#[tokio::test]
async fn an_allowlisted_local_sandbox_still_works() {
    let sandbox = Mock::always(Action::json(200, json!({"ok": true}))).await;
    let port = sandbox.url().rsplit(':').next().unwrap().to_string();

    // By address, through the engine's own setting.
    let h = Harness::new();
    h.engine
        .set_outbound_allow(&["127.0.0.1".to_string()])
        .unwrap();
    let wf = compile(&input_url());
    let run = h
        .run(&wf, json!({"url": format!("{}/x", sandbox.url())}))
        .await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    assert_eq!(sandbox.count(), 1);
    // The entry is an address, not the whole of loopback.
    let run = h
        .run(&wf, json!({"url": format!("http://127.0.0.2:{port}/x")}))
        .await;
    failed_with(&run, "url_not_allowed");

    // By host name: whatever it resolves to.
    let h = harness_with(
        FakeDns::with(&[("crm.internal", &[&["127.0.0.1"]])]),
        &["crm.internal"],
    );
    let run = h
        .run(&wf, json!({"url": format!("http://crm.internal:{port}/x")}))
        .await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    assert_eq!(sandbox.count(), 2);

    // A host the author chose (env.*) is never checked, allowlist or not.
    let h = Harness::new().env(&[("CRM_URL", &sandbox.url())]);
    let wf = compile(&calling(
        json!({"url": "{{ env.CRM_URL }}/deals/{{ input.id }}"}),
    ));
    let run = h.run(&wf, json!({"id": "d1"})).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    assert_eq!(sandbox.requests().last().unwrap().target, "/deals/d1");
}

/// Issue 42 (low items): `outbound_allow: ["127.0.0.1"]` opened every local port (Fluxo's own
/// `/metrics` among them). An entry with `:port` opens that port only: for IP literals
/// (checked before sending) and for names (checked by the resolver with the port).
#[tokio::test]
async fn an_entry_with_a_port_allows_that_port_only() {
    let allowed = Mock::always(Action::json(200, json!({"ok": true}))).await;
    let other = Mock::always(Action::json(200, json!({"admin": "secret"}))).await;
    let (a, b) = (port_of(&allowed), port_of(&other));
    let (h, policy) = harness_and_policy(
        FakeDns::with(&[("svc.test", &[&["127.0.0.1"]])]),
        &[&format!("127.0.0.1:{a}")],
    );
    let wf = compile(&input_url());

    // An IP literal on the listed port goes through; the same address on another port is
    // refused before any connection, and the message names the port and the entry to add.
    let run = h
        .run(&wf, json!({"url": format!("http://127.0.0.1:{a}/x")}))
        .await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    assert_eq!(allowed.count(), 1);
    let run = h
        .run(&wf, json!({"url": format!("http://127.0.0.1:{b}/x")}))
        .await;
    let message = failed_with(&run, "url_not_allowed");
    assert!(message.contains(&format!("on port {b}")), "{message}");
    assert!(message.contains(&format!("`127.0.0.1:{b}`")), "{message}");
    assert_eq!(step(&run, "call").attempts.len(), 1);
    // Port 80 (the scheme's) is not the listed port either.
    let run = h.run(&wf, json!({"url": "http://127.0.0.1/x"})).await;
    failed_with(&run, "url_not_allowed");

    // A name resolving to the address: the resolver checks it with the request's port.
    let run = h
        .run(&wf, json!({"url": format!("http://svc.test:{a}/x")}))
        .await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    assert_eq!(allowed.count(), 2);
    let run = h
        .run(&wf, json!({"url": format!("http://svc.test:{b}/x")}))
        .await;
    let message = failed_with(&run, "url_not_allowed");
    assert!(message.contains("127.0.0.1 is loopback"), "{message}");
    assert_eq!(other.count(), 0, "the other port got a request");

    // The allowlist changes while running: the port named before is closed at once, the new
    // one opens, for literals and names alike.
    policy.set_allow(OutboundAllow::parse(&[format!("127.0.0.1:{b}")]).unwrap());
    for host in ["127.0.0.1", "svc.test"] {
        let run = h
            .run(&wf, json!({"url": format!("http://{host}:{a}/x")}))
            .await;
        failed_with(&run, "url_not_allowed");
        let run = h
            .run(&wf, json!({"url": format!("http://{host}:{b}/x")}))
            .await;
        assert_eq!(run.status, RunStatus::Succeeded, "{host}: {}", dump(&run));
    }
    assert_eq!((allowed.count(), other.count()), (2, 2));

    // A host name with a port: that name on that port, not its address by other names.
    let h = harness_with(
        FakeDns::with(&[
            ("svc.test", &[&["127.0.0.1"]]),
            ("alias.test", &[&["127.0.0.1"]]),
        ]),
        &[&format!("svc.test:{a}")],
    );
    let run = h
        .run(&wf, json!({"url": format!("http://svc.test:{a}/x")}))
        .await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    for url in [
        format!("http://svc.test:{b}/x"),
        format!("http://alias.test:{a}/x"),
        format!("http://127.0.0.1:{a}/x"),
    ] {
        failed_with(&h.run(&wf, json!({ "url": url })).await, "url_not_allowed");
    }

    // A block with a port, and an entry for every port next to it.
    let h = harness_with(
        FakeDns::with(&[("svc.test", &[&["127.0.0.1"]])]),
        &[&format!("127.0.0.0/8:{a}"), "crm.internal"],
    );
    let run = h
        .run(&wf, json!({"url": format!("http://svc.test:{a}/x")}))
        .await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    failed_with(
        &h.run(&wf, json!({"url": format!("http://127.0.0.1:{b}/x")}))
            .await,
        "url_not_allowed",
    );
    assert_eq!((allowed.count(), other.count()), (4, 2));
}

#[tokio::test]
async fn redirect_hops_are_checked_with_their_port() {
    // A same-origin redirect on the listed port is followed, its hop resolved and checked
    // again (with the port: it is the same origin's).
    let m = Mock::start(
        [Action::status(302).header("location", "/next")],
        Action::json(200, json!({"ok": true})),
    )
    .await;
    let port = port_of(&m);
    let h = harness_with(
        FakeDns::with(&[("svc.test", &[&["127.0.0.1"]])]),
        &[&format!("127.0.0.1:{port}")],
    );
    let wf = compile(&input_url());
    let run = h
        .run(&wf, json!({"url": format!("http://svc.test:{port}/start")}))
        .await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    let sent = m.requests();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[1].target, "/next");

    // DNS rebinding under a port entry: the second hop's address is not the listed one.
    let r = Mock::always(Action::status(302).header("location", "/next")).await;
    let port = port_of(&r);
    let h = harness_with(
        FakeDns::with(&[("rebind.test", &[&["127.0.0.1"], &["127.0.0.2"]])]),
        &[&format!("127.0.0.1:{port}")],
    );
    let run = h
        .run(
            &wf,
            json!({"url": format!("http://rebind.test:{port}/start")}),
        )
        .await;
    let message = failed_with(&run, "url_not_allowed");
    assert!(message.contains("127.0.0.2"), "{message}");
    assert_eq!(r.count(), 1, "only the first hop connected");

    // A redirect to the other port of the same host is another origin: not followed.
    let target = Mock::always(Action::status(200)).await;
    let jump =
        Mock::always(Action::status(302).header("location", &format!("{}/x", target.url()))).await;
    let h = harness_with(
        FakeDns::default().into(),
        &[
            &format!("127.0.0.1:{}", port_of(&jump)),
            &format!("127.0.0.1:{}", port_of(&target)),
        ],
    );
    let run = h
        .run(&wf, json!({"url": format!("{}/go", jump.url())}))
        .await;
    failed_with(&run, "redirect_not_followed");
    assert_eq!(target.count(), 0);
}

// ---------------------------------------------------------------------------------------------
// Redirects
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_302_to_another_origin_is_not_followed() {
    let target = Mock::always(Action::json(200, json!({"secret": "s3"}))).await;
    let redirector = Mock::always(
        Action::status(302).header("location", &format!("{}/latest/meta-data", target.url())),
    )
    .await;
    // An author's host that redirects elsewhere.
    let h = Harness::new();
    let wf = compile(&calling(json!({"url": format!("{}/go", redirector.url())})));
    let run = h.run(&wf, json!({})).await;
    let message = failed_with(&run, "redirect_not_followed");
    assert!(message.contains(&target.url()), "{message}");
    assert_eq!(
        step(&run, "call").error.as_ref().unwrap().http_status,
        Some(302)
    );
    assert_eq!(step(&run, "call").attempts.len(), 1);
    assert_eq!(target.count(), 0);
    assert!(!dump(&run).contains("s3"));

    // A host from run data (allowed by name) that redirects to loopback.
    let port = redirector.url().rsplit(':').next().unwrap().to_string();
    let h = harness_with(
        FakeDns::with(&[("redirector.test", &[&["127.0.0.1"]])]),
        &["redirector.test"],
    );
    let run = h
        .run(
            &compile(&input_url()),
            json!({"url": format!("http://redirector.test:{port}/go")}),
        )
        .await;
    failed_with(&run, "redirect_not_followed");
    assert_eq!(redirector.count(), 2);
    assert_eq!(target.count(), 0);
}

#[tokio::test]
async fn a_307_to_another_port_resends_neither_the_body_nor_the_api_key() {
    let other = Mock::always(Action::status(200)).await;
    let first =
        Mock::always(Action::status(307).header("location", &format!("{}/steal", other.url())))
            .await;
    let h = Harness::new();
    let wf = compile(&calling(json!({
        "method": "PUT", "url": format!("{}/charge", first.url()),
        "headers": {"X-Api-Key": "key-123", "Authorization": "Bearer tok"},
        "body": {"amount": 4200}
    })));
    let run = h.run(&wf, json!({})).await;
    failed_with(&run, "redirect_not_followed");
    assert_eq!(other.count(), 0, "the redirect target got a request");
    let sent = first.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].header("x-api-key"), Some("key-123"));
    assert_eq!(sent[0].json(), json!({"amount": 4200}));
}

#[tokio::test]
async fn same_origin_redirects_are_followed() {
    let m = Mock::start(
        [Action::status(307).header("location", "/v2/charge")],
        Action::json(200, json!({"ok": true})),
    )
    .await;
    let h = Harness::new();
    let wf = compile(&calling(json!({
        "method": "POST", "url": format!("{}/charge", m.url()),
        "headers": {"Idempotency-Key": "k1"}, "body": {"amount": 1}
    })));
    let run = h.run(&wf, json!({})).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    let sent = m.requests();
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[1].target, "/v2/charge");
    assert_eq!(
        sent[1].json(),
        json!({"amount": 1}),
        "307 keeps the body (RFC 9110)"
    );
}

#[tokio::test]
async fn every_redirect_hop_is_resolved_and_checked_again() {
    // DNS rebinding: the name answers an allowed address, then a loopback one.
    let m = Mock::always(Action::status(302).header("location", "/next")).await;
    let port = m.url().rsplit(':').next().unwrap().to_string();
    let h = harness_with(
        FakeDns::with(&[("rebind.test", &[&["127.0.0.1"], &["127.0.0.2"]])]),
        &["127.0.0.1"],
    );
    let run = h
        .run(
            &compile(&input_url()),
            json!({"url": format!("http://rebind.test:{port}/start")}),
        )
        .await;
    let message = failed_with(&run, "url_not_allowed");
    assert!(message.contains("127.0.0.2"), "{message}");
    assert_eq!(m.count(), 1, "only the first hop connected");
}

// ---------------------------------------------------------------------------------------------
// Response size
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn a_20_mb_answer_fails_with_response_too_large_and_the_record_stays_small() {
    let big = Mock::always(Action::Respond {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: format!("\"{}\"", "x".repeat(20 * 1024 * 1024)),
    })
    .await;
    let h = Harness::new();
    let wf = compile(&calling(json!({"url": big.url()})));
    let run = h.run(&wf, json!({})).await;
    let message = failed_with(&run, "response_too_large");
    assert!(message.contains("10485760 bytes"), "{message}");
    assert_eq!(step(&run, "call").attempts.len(), 1);
    let stored = h.store.get_run(&run.id).await.unwrap().unwrap();
    assert!(serde_json::to_vec(&stored).unwrap().len() < 64 * 1024);

    // The cap is the step's: 1 000 bytes.
    let small = Mock::always(Action::json(200, json!("y".repeat(2000)))).await;
    let wf = compile(&calling(
        json!({"url": small.url(), "max_response_bytes": 1000}),
    ));
    failed_with(&h.run(&wf, json!({})).await, "response_too_large");
    let wf = compile(&calling(
        json!({"url": small.url(), "max_response_bytes": 3000}),
    ));
    assert_eq!(h.run(&wf, json!({})).await.status, RunStatus::Succeeded);
    // A HEAD answer's Content-Length describes a body that never comes.
    let wf = compile(&calling(
        json!({"method": "HEAD", "url": small.url(), "max_response_bytes": 1000}),
    ));
    let run = h.run(&wf, json!({})).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
}

/// A server that answers 200 without a length and streams `total` bytes until the client
/// stops reading; answers how many bytes it managed to write.
async fn streaming_server(total: usize) -> (String, tokio::task::JoinHandle<usize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 4096];
        let _ = sock.read(&mut buf).await;
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n";
        sock.write_all(head.as_bytes()).await.unwrap();
        let chunk = vec![b'z'; 64 * 1024];
        let mut written = 0;
        while written < total {
            if sock.write_all(&chunk).await.is_err() {
                break;
            }
            written += chunk.len();
        }
        written
    });
    (url, task)
}

#[tokio::test]
async fn a_body_without_a_length_is_read_only_up_to_the_cap() {
    let total = 64 * 1024 * 1024;
    let (url, server) = streaming_server(total).await;
    let h = Harness::new();
    let wf = compile(&calling(json!({"url": url, "retries": 0})));
    let run = h.run(&wf, json!({})).await;
    failed_with(&run, "response_too_large");
    let written = server.await.unwrap();
    assert!(written < total, "the client read all {written} bytes");
}

#[tokio::test]
async fn publish_output_and_find_or_create_apply_the_same_rules() {
    let target = Mock::always(Action::json(200, json!({"data": []}))).await;
    let h = Harness::new();
    let wf = compile(&workflow(
        "pub",
        Value::Null,
        json!([
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "call", "kind": "publish_output",
             "config": {"url": "{{ input.hook }}", "allow_input_host": true, "retries": 0}}
        ]),
        json!([{"from": "start", "to": "call"}]),
    ));
    let run = h
        .run(&wf, json!({"hook": format!("{}/hook", target.url())}))
        .await;
    failed_with(&run, "url_not_allowed");

    let wf = compile(&workflow(
        "foc",
        Value::Null,
        json!([
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "call", "kind": "find_or_create",
             "config": {"find_url": "{{ input.crm }}/contacts", "match_field": "email",
                        "match_value": "{{ input.email }}", "allow_input_host": true,
                        "retries": 0}}
        ]),
        json!([{"from": "start", "to": "call"}]),
    ));
    let run = h
        .run(&wf, json!({"crm": target.url(), "email": "a@example.com"}))
        .await;
    failed_with(&run, "url_not_allowed");
    assert_eq!(target.count(), 0);

    let wf = compile(&workflow(
        "foc2",
        Value::Null,
        json!([
            {"id": "start", "kind": "manual_trigger", "config": {}},
            {"id": "call", "kind": "find_or_create",
             "config": {"find_url": format!("{}/contacts", target.url()), "match_field": "email",
                        "match_value": "{{ input.email }}", "max_response_bytes": 5,
                        "retries": 0}}
        ]),
        json!([{"from": "start", "to": "call"}]),
    ));
    failed_with(
        &h.run(&wf, json!({"email": "a@example.com"})).await,
        "response_too_large",
    );
}

// ---------------------------------------------------------------------------------------------
// Through `fluxo serve`: an unauthenticated sender, then the allowlist in settings
// ---------------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_a_webhook_cannot_make_the_server_fetch_loopback_until_it_is_allowlisted() {
    let internal = Mock::always(Action::json(200, json!({"admin": "secret-config"}))).await;
    let wf = workflow(
        "fetch",
        Value::Null,
        json!([
            {"id": "hook", "kind": "webhook_trigger", "config": {}},
            {"id": "call", "kind": "http_request",
             "config": {"method": "GET", "url": "{{ input.url }}", "allow_input_host": true,
                        "retries": 0}}
        ]),
        json!([{"from": "hook", "to": "call"}]),
    );
    let s = Setup::new().workflow(wf).start().await;
    let body = json!({"url": format!("{}/admin", internal.url())}).to_string();
    let a = s.hook("fetch", Some("evt-1"), body.as_bytes()).await;
    assert_eq!(a.status.as_u16(), 202, "{}", a.text);
    let run = s.wait_final(a.json()["run_id"].as_str().unwrap()).await;
    failed_with(&run, "url_not_allowed");
    assert_eq!(internal.count(), 0);
    assert!(!dump(&run).contains("secret-config"));

    // The operator allowlists the address in settings: the same delivery now goes through.
    let mut settings = s.get_json("/settings").await["settings"].clone();
    settings["outbound_allow"] = json!(["127.0.0.1"]);
    let put = s
        .api(Method::PUT, "/settings", &[], Some(&settings.to_string()))
        .await;
    assert_eq!(put.status.as_u16(), 200, "{}", put.text);
    let a = s.hook("fetch", Some("evt-2"), body.as_bytes()).await;
    let run = s.wait_final(a.json()["run_id"].as_str().unwrap()).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    assert_eq!(internal.count(), 1);

    // A bad entry is refused with a message naming it.
    settings["outbound_allow"] = json!(["10.0.0.0/99"]);
    let put = s
        .api(Method::PUT, "/settings", &[], Some(&settings.to_string()))
        .await;
    assert_eq!(put.status.as_u16(), 400, "{}", put.text);
    assert!(put.text.contains("10.0.0.0/99"), "{}", put.text);
}

/// Issue 42 (low items), through `fluxo serve` and its settings: with
/// `outbound_allow: ["127.0.0.1:<port>"]` a webhook's URL reaches that port only, not another
/// local listener nor the server itself (its `/metrics`); bad port forms are refused at
/// `PUT /settings`, naming the entry and what is wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_an_allowlisted_port_is_the_only_local_port_a_webhook_reaches() {
    let sandbox = Mock::always(Action::json(200, json!({"ok": true}))).await;
    let internal = Mock::always(Action::json(200, json!({"admin": "secret-config"}))).await;
    let wf = workflow(
        "fetch",
        Value::Null,
        json!([
            {"id": "hook", "kind": "webhook_trigger", "config": {}},
            {"id": "call", "kind": "http_request",
             "config": {"method": "GET", "url": "{{ input.url }}", "allow_input_host": true,
                        "retries": 0}}
        ]),
        json!([{"from": "hook", "to": "call"}]),
    );
    let s = Setup::new().workflow(wf).start().await;
    let mut settings = s.get_json("/settings").await["settings"].clone();
    let entry = format!("127.0.0.1:{}", port_of(&sandbox));
    settings["outbound_allow"] = json!([entry]);
    let put = s
        .api(Method::PUT, "/settings", &[], Some(&settings.to_string()))
        .await;
    assert_eq!(put.status.as_u16(), 200, "{}", put.text);
    assert_eq!(
        s.get_json("/settings").await["settings"]["outbound_allow"],
        json!([entry])
    );

    let deliver = |key: &'static str, url: String| {
        let s = &s;
        async move {
            let body = json!({ "url": url }).to_string();
            let a = s.hook("fetch", Some(key), body.as_bytes()).await;
            assert_eq!(a.status.as_u16(), 202, "{}", a.text);
            s.wait_final(a.json()["run_id"].as_str().unwrap()).await
        }
    };
    let run = deliver("evt-1", format!("{}/x", sandbox.url())).await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    assert_eq!(sandbox.count(), 1);

    let run = deliver("evt-2", format!("{}/admin", internal.url())).await;
    failed_with(&run, "url_not_allowed");
    assert_eq!(internal.count(), 0);
    assert!(!dump(&run).contains("secret-config"));
    let run = deliver("evt-3", format!("{}/metrics", s.url)).await;
    failed_with(&run, "url_not_allowed");

    // Bad forms: 400 naming the entry and the reason; the stored list is unchanged.
    for (bad, why) in [
        ("127.0.0.1:0", "port 0"),
        ("127.0.0.1:65536", "over 65535"),
        ("crm.internal:", "the port after `:` is missing"),
        ("fd00::/8:8080", "`[fd00::]/8:8080`"),
    ] {
        settings["outbound_allow"] = json!(["crm.internal:8443", bad]);
        let put = s
            .api(Method::PUT, "/settings", &[], Some(&settings.to_string()))
            .await;
        assert_eq!(put.status.as_u16(), 400, "{bad}: {}", put.text);
        assert!(put.text.contains("invalid_settings"), "{}", put.text);
        assert!(
            put.text.contains("outbound_allow[1]"),
            "{bad}: {}",
            put.text
        );
        assert!(put.text.contains(why), "{bad}: {}", put.text);
    }
    assert_eq!(
        s.get_json("/settings").await["settings"]["outbound_allow"],
        json!([entry])
    );
}

/// Issue 42, hole 6: input in a URL path. With `{{ env.API_URL }}/echo/{{ input.path }}` and
/// `path = "../../admin?x=1#"`, the destination used to receive `POST /admin?x=1` with the
/// step's headers. Over HTTP, a webhook's value is one percent-encoded segment under the
/// author's path; a query value one encoded component; a dot segment fails the step; the
/// author's own env value and `| raw_path` (flagged by the linter) are left as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_in_a_url_path_stays_one_segment_under_the_authors_path() {
    let dest = Mock::always(Action::json(200, json!({"ok": true}))).await;
    let call = |url: &str| {
        json!({"id": "call", "kind": "http_request",
               "config": {"method": "POST", "url": url, "retries": 0,
                          "headers": {"X-Api-Key": "k-123", "Idempotency-Key": "{{ input.id }}"}}})
    };
    let wf = |id: &str, url: &str| {
        workflow(
            id,
            Value::Null,
            json!([{"id": "hook", "kind": "webhook_trigger", "config": {}}, call(url)]),
            json!([{"from": "hook", "to": "call"}]),
        )
    };
    let s = Setup::new()
        .env("API_URL", &format!("{}/api/v1", dest.url()))
        .workflow(wf(
            "echo",
            "{{ env.API_URL }}/echo/{{ input.path }}?q={{ input.q }}",
        ))
        .workflow(wf(
            "raw",
            "{{ env.API_URL }}/files/{{ input.path | raw_path }}",
        ))
        .start()
        .await;
    let send = |wf: &'static str, id: &'static str, path: &'static str| {
        let s = &s;
        async move {
            let body = json!({"id": id, "path": path, "q": "a&b=c #d"}).to_string();
            let a = s.hook(wf, Some(id), body.as_bytes()).await;
            assert_eq!(a.status.as_u16(), 202, "{}", a.text);
            s.wait_final(a.json()["run_id"].as_str().unwrap()).await
        }
    };

    let run = send("echo", "evt-1", "../../admin?x=1#").await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    let got = dest.requests();
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0].target,
        "/api/v1/echo/..%2F..%2Fadmin%3Fx%3D1%23?q=a%26b%3Dc%20%23d"
    );
    assert_eq!(got[0].header("x-api-key"), Some("k-123"));

    // A value that is a dot segment would climb: the step fails, nothing is sent.
    let run = send("echo", "evt-2", "..").await;
    assert_eq!(run.status, RunStatus::Failed, "{}", dump(&run));
    let e = step(&run, "call").error.clone().unwrap();
    assert_eq!(e.code, "template_error");
    assert!(e.message.contains("climb"), "{}", e.message);
    assert_eq!(dest.count(), 1);

    // The author asked for a raw path: as written, and the linter says so.
    let run = send("raw", "evt-3", "a/b").await;
    assert_eq!(run.status, RunStatus::Succeeded, "{}", dump(&run));
    assert_eq!(dest.requests()[1].target, "/api/v1/files/a/b");
    let (_, problems) = check_value(
        &wf("raw", "{{ env.API_URL }}/files/{{ input.path | raw_path }}"),
        &Registry::builtin(),
    );
    assert!(
        problems.iter().any(|p| p.code == "lint_raw_path"),
        "{problems:?}"
    );
}
