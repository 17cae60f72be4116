//! The door (SPEC §5 "The door and outbound calls", issue 13) over real HTTP on port 0: what
//! an attacker's page, a careless sender and a slow client get from `fluxo serve`.
//!
//! Each test names the rule it checks; the rules themselves are documented where they live
//! (`src/server/door.rs`, `src/server/hooks.rs`, `src/server/auth.rs`, `src/server/serve.rs`).

mod common;

use std::time::{Duration, Instant};

use common::server::{
    declaring, hook_workflow, slow_api_workflow, Answer, GatedMock, Setup, TestServer, TOKEN,
};
use fluxo::clock::Clock;
use fluxo::server::hooks::sign;
use reqwest::Method;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A new connection to the server with `bytes` sent on it.
async fn connect_and_send(s: &TestServer, bytes: &[u8]) -> TcpStream {
    let mut c = TcpStream::connect(s.running().addr).await.unwrap();
    c.write_all(bytes).await.unwrap();
    c
}

/// Everything the server sends until it closes the connection; panics if it is still open
/// after `within`.
async fn read_until_closed(c: &mut TcpStream, within: Duration) -> String {
    let mut out = Vec::new();
    tokio::time::timeout(within, c.read_to_end(&mut out))
        .await
        .expect("the server closed the connection in time")
        .ok();
    String::from_utf8_lossy(&out).into_owned()
}

// ---------------------------------------------------------------------------------------------
// Signatures: checked arithmetic
// ---------------------------------------------------------------------------------------------

/// `t=` values at and past the ends of `i64` (which once overflowed `now_s - t` and panicked a
/// debug build), signs, spaces and repeats are 401 `invalid_signature`; the server keeps
/// answering and a good signature still passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extreme_signature_timestamps_are_401_not_a_panic() {
    let s = Setup::new()
        .workflow(declaring(
            hook_workflow("signed", json!({"signing_secret": "{{ env.HOOK_SECRET }}"})),
            "HOOK_SECRET",
        ))
        .env("HOOK_SECRET", "s3cret")
        .start()
        .await;
    let body = br#"{"id":"evt_ts_1"}"#;
    for sig in [
        "t=-9223372036854775808,v1=00".to_string(),
        "t=9223372036854775807,v1=00".to_string(),
        "t=99999999999999999999,v1=00".to_string(),
        "t=-1,v1=00".to_string(),
        "t=+1767225600,v1=00".to_string(),
        "t= 1767225600,v1=00".to_string(),
        "t=,v1=00".to_string(),
        format!("{},t=1", sign("s3cret", s.clock.now_ms() / 1000, body)),
    ] {
        let a = s
            .hook_with("signed", &[("x-fluxo-signature", sig.as_bytes())], body)
            .await;
        let doc = a.problem(401, "invalid_signature");
        assert!(
            doc["detail"]
                .as_str()
                .unwrap()
                .contains("X-Fluxo-Signature"),
            "{sig}: {doc}"
        );
    }
    assert!(s.runs_of("signed").await.is_empty());
    let good = sign("s3cret", s.clock.now_ms() / 1000, body);
    let a = s
        .hook_with("signed", &[("x-fluxo-signature", good.as_bytes())], body)
        .await;
    assert_eq!(a.status.as_u16(), 202, "{}", a.text);
}

// ---------------------------------------------------------------------------------------------
// Bearer scheme
// ---------------------------------------------------------------------------------------------

/// The auth scheme is case-insensitive (RFC 9110 §11.1): `BEARER`, `bearer` and `Bearer` with
/// the right token pass; the token itself is exact; another scheme is 401.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_scheme_is_case_insensitive() {
    let s = Setup::new().start().await;
    for scheme in ["BEARER", "bearer", "Bearer", "bEaReR"] {
        let auth = format!("{scheme} {TOKEN}");
        let a = s
            .send(
                Method::GET,
                "/api/v1/workflows",
                &[("authorization", auth.as_bytes())],
                None,
            )
            .await;
        assert_eq!(a.status.as_u16(), 200, "{scheme}: {}", a.text);
    }
    let upper = format!("Bearer {}", TOKEN.to_uppercase());
    let basic = format!("Basic {TOKEN}");
    for auth in [upper, basic] {
        s.send(
            Method::GET,
            "/api/v1/workflows",
            &[("authorization", auth.as_bytes())],
            None,
        )
        .await
        .problem(401, "unauthorized");
    }
}

// ---------------------------------------------------------------------------------------------
// Run history cursor
// ---------------------------------------------------------------------------------------------

/// A `cursor` that is neither a `next_cursor` nor a run id is `400 invalid_cursor` (it used to
/// answer 200 with an empty list); real cursors and run ids still page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unparsable_cursor_is_400() {
    let s = Setup::new()
        .workflow(hook_workflow("wf1", json!({})))
        .start()
        .await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let a = s.hook("wf1", Some(&format!("k{i}")), b"{}").await;
        assert_eq!(a.status.as_u16(), 202, "{}", a.text);
        ids.push(a.json()["run_id"].as_str().unwrap().to_string());
    }
    for bad in [
        "garbage",
        "123:abc",
        "abc:0190f7e4-1c2b-7d3e-8f00-1a2b3c4d5e6f",
        "-5:0190f7e4-1c2b-7d3e-8f00-1a2b3c4d5e6f",
        "99999999999999999999:0190f7e4-1c2b-7d3e-8f00-1a2b3c4d5e6f",
        "0190f7e41c2b7d3e8f001a2b3c4d5e6f",
        "%00",
    ] {
        let a = s
            .api(Method::GET, &format!("/runs?cursor={bad}"), &[], None)
            .await;
        let doc = a.problem(400, "invalid_cursor");
        assert!(
            doc["detail"].as_str().unwrap().contains("`cursor`"),
            "{doc}"
        );
    }
    // A page's own cursor pages on; a run id lists what is older than that run.
    let p1 = s.get_json("/runs?limit=1").await;
    let c = p1["next_cursor"]
        .as_str()
        .expect("a next cursor")
        .to_string();
    let p2 = s.get_json(&format!("/runs?limit=5&cursor={c}")).await;
    assert_eq!(p2["runs"].as_array().unwrap().len(), 2);
    let newest = p1["runs"][0]["id"].as_str().unwrap();
    let by_id = s.get_json(&format!("/runs?limit=5&cursor={newest}")).await;
    assert_eq!(by_id["runs"], p2["runs"]);
    // An empty cursor is no cursor.
    let all = s.get_json("/runs?cursor=").await;
    assert_eq!(all["runs"].as_array().unwrap().len(), 3);
}

// ---------------------------------------------------------------------------------------------
// Memory namespaces and keys
// ---------------------------------------------------------------------------------------------

/// A NUL or another control character in a namespace is `400 invalid_namespace` (it used to
/// reach the store and come back `503` with `Retry-After`, so clients retried forever); a
/// namespace over 128 bytes too; a key over 1024 bytes is `400 key_too_long`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_memory_names_are_400_not_503() {
    let s = Setup::new().start().await;
    let long_ns = "n".repeat(129);
    let long_key = "k".repeat(1025);
    let cases = [
        (
            Method::GET,
            "/memory/a%00b".to_string(),
            "invalid_namespace",
        ),
        (
            Method::GET,
            "/memory/a%00b/k".to_string(),
            "invalid_namespace",
        ),
        (
            Method::DELETE,
            "/memory/a%00b/k".to_string(),
            "invalid_namespace",
        ),
        (
            Method::GET,
            "/memory/a%0Ab/k".to_string(),
            "invalid_namespace",
        ),
        (
            Method::GET,
            "/memory/a%7Fb".to_string(),
            "invalid_namespace",
        ),
        (
            Method::GET,
            format!("/memory/{long_ns}"),
            "invalid_namespace",
        ),
        (
            Method::GET,
            format!("/memory/ns/{long_key}"),
            "key_too_long",
        ),
        (
            Method::DELETE,
            format!("/memory/ns/{long_key}"),
            "key_too_long",
        ),
    ];
    for (method, path, code) in cases {
        let a = s.api(method.clone(), &path, &[], None).await;
        let doc = a.problem(400, code);
        assert!(a.header("retry-after").is_none(), "{method} {path}");
        let detail = doc["detail"].as_str().unwrap();
        assert!(
            detail.starts_with("namespace:") || detail.starts_with("key:"),
            "{detail}"
        );
    }
    // At the limits: fine (404, nothing there).
    let ns = "n".repeat(128);
    let key = "k".repeat(1024);
    s.api(Method::GET, &format!("/memory/{ns}/{key}"), &[], None)
        .await
        .problem(404, "key_not_found");
}

/// A Memory key or namespace rendered from the payload is checked once rendered: a 2,000-byte
/// key fails the step with `key_too_long`, a NUL in a rendered namespace with
/// `invalid_namespace`, and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_names_rendered_from_input_are_capped() {
    let wf = json!({
        "id": "claims", "name": "claims", "version": 1,
        "steps": [
            {"id": "hook", "kind": "webhook_trigger", "config": {}},
            {"id": "seen", "kind": "memory",
             "config": {"operation": "write", "namespace": "t-{{ input.tenant }}",
                        "key": "{{ input.id }}", "allow_overwrite": false}}
        ],
        "edges": [{"from": "hook", "to": "seen"}]
    });
    let s = Setup::new().workflow(wf).start().await;
    let cases = [
        (
            json!({"tenant": "a", "id": "x".repeat(2000)}),
            "key_too_long",
            "2000 bytes",
        ),
        (
            json!({"tenant": "a\u{0}b", "id": "evt_1"}),
            "invalid_namespace",
            "control character",
        ),
        (
            json!({"tenant": "a".repeat(200), "id": "evt_1"}),
            "invalid_namespace",
            "202 bytes",
        ),
    ];
    for (body, code, says) in cases {
        let a = s.hook("claims", None, body.to_string().as_bytes()).await;
        assert_eq!(a.status.as_u16(), 202, "{}", a.text);
        let run = s.wait_final(a.json()["run_id"].as_str().unwrap()).await;
        assert_eq!(run.status, fluxo::run::RunStatus::Failed);
        let err = run.steps[1].error.as_ref().expect("the memory step failed");
        assert_eq!(err.code, code, "{err:?}");
        assert!(err.message.contains(says), "{}", err.message);
        assert!(
            err.message.len() < 300,
            "the message does not echo the value"
        );
    }
    assert!(
        s.store.namespaces().await.unwrap().is_empty(),
        "nothing was written"
    );
}

// ---------------------------------------------------------------------------------------------
// Slow clients
// ---------------------------------------------------------------------------------------------

fn short_timeouts(o: &mut fluxo::server::ServerOptions) {
    o.limits.header_read_timeout = Duration::from_millis(300);
    o.limits.body_read_timeout = Duration::from_millis(300);
}

/// Clients that never finish their headers (40 at once, as the probe's 300 did), or send
/// nothing at all, are disconnected after the header read timeout, without an answer; the
/// server keeps answering others meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_headers_are_dropped() {
    let s = Setup::new()
        .workflow(hook_workflow("wf1", json!({})))
        .options(short_timeouts)
        .start()
        .await;
    let host = s.running().addr.to_string();
    let started = Instant::now();
    let mut conns = Vec::new();
    for i in 0..40 {
        let partial = if i % 2 == 0 {
            format!("POST /hooks/wf1 HTTP/1.1\r\nHost: {host}\r\nContent-Ty")
        } else {
            String::new()
        };
        conns.push(connect_and_send(&s, partial.as_bytes()).await);
    }
    let health = s.send(Method::GET, "/healthz", &[], None).await;
    assert_eq!(health.status.as_u16(), 200);
    for c in &mut conns {
        let got = read_until_closed(c, Duration::from_secs(10)).await;
        assert!(
            !got.contains("202"),
            "a half-sent request was served: {got}"
        );
    }
    assert!(
        started.elapsed() >= Duration::from_millis(250),
        "not before the timeout"
    );
    assert!(s.runs_of("wf1").await.is_empty());
}

/// One answer read off a raw connection: its head and its `Content-Length` body.
async fn read_answer(c: &mut TcpStream) -> String {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&buf).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let len: usize = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse().unwrap())
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return text;
            }
        }
        let n = tokio::time::timeout(Duration::from_secs(10), c.read(&mut chunk))
            .await
            .expect("an answer in time")
            .unwrap();
        assert!(n > 0, "the connection closed before a whole answer: {text}");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The header read timeout counts only the time a connection waits for a request head: a
/// request in progress for longer than it (a run the API waits for) is answered, and a
/// kept-alive connection whose requests keep coming outlives it; once the connection is idle,
/// it is closed after the timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_header_timeout_spares_requests_in_progress_and_busy_connections() {
    let mock = GatedMock::start().await;
    let s = Setup::new()
        .workflow(slow_api_workflow("slow", &format!("{}/deals", mock.url)))
        .options(short_timeouts)
        .start()
        .await;
    let host = s.running().addr.to_string();
    let body = r#"{"input":{"invoice_id":"INV-1"}}"#;
    let run = format!(
        "POST /api/v1/workflows/slow/runs HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut c = connect_and_send(&s, run.as_bytes()).await;
    mock.wait_arrival().await;
    // Three header timeouts with the run in progress (the destination holds it).
    tokio::time::sleep(Duration::from_millis(900)).await;
    mock.release(1);
    let answer = read_answer(&mut c).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("\"succeeded\""), "{answer}");

    // Requests 100 ms apart for twice the timeout, on the same connection.
    let health = format!("GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n");
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        c.write_all(health.as_bytes()).await.unwrap();
        let answer = read_answer(&mut c).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }
    // Then idle: closed after the timeout, not before.
    let idle = Instant::now();
    let rest = read_until_closed(&mut c, Duration::from_secs(10)).await;
    assert!(rest.is_empty(), "nothing more was sent: {rest}");
    assert!(
        idle.elapsed() >= Duration::from_millis(250),
        "closed {:?} after the last answer, before the timeout",
        idle.elapsed()
    );
}

/// A body that stops arriving is answered `408 request_timeout` with `Connection: close`, the
/// connection is closed, and no run starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_bodies_are_dropped() {
    let s = Setup::new()
        .workflow(hook_workflow("wf1", json!({})))
        .options(short_timeouts)
        .start()
        .await;
    let host = s.running().addr.to_string();
    let head = format!(
        "POST /hooks/wf1 HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Idempotency-Key: slow-1\r\nContent-Length: 100\r\n\r\n{{\"id\": \"slo"
    );
    let mut c = connect_and_send(&s, head.as_bytes()).await;
    let got = read_until_closed(&mut c, Duration::from_secs(10)).await;
    assert!(got.starts_with("HTTP/1.1 408"), "{got}");
    assert!(
        got.to_ascii_lowercase().contains("connection: close"),
        "{got}"
    );
    assert!(got.contains("request_timeout"), "{got}");
    assert!(s.runs_of("wf1").await.is_empty());
    // The key was not burnt: the whole delivery is accepted.
    let a = s.hook("wf1", Some("slow-1"), b"{}").await;
    assert_eq!(a.status.as_u16(), 202, "{}", a.text);
}

/// The workflow and its trigger are checked from the head alone: a delivery to a workflow
/// that does not exist is `404 workflow_not_found` while its body has not been sent (the
/// probe's `Content-Length: 1000000`), and a `Content-Length` over the body limit is `413`
/// before any byte of it; both close the connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_workflows_and_oversized_bodies_are_answered_from_the_head() {
    let s = Setup::new()
        .workflow(hook_workflow("wf1", json!({})))
        .start()
        .await;
    let host = s.running().addr.to_string();
    for (path, length, status, code) in [
        ("/hooks/nope", 1_000_000, "404", "workflow_not_found"),
        ("/hooks/wf1", 2 * 1024 * 1024, "413", "payload_too_large"),
    ] {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
             Content-Length: {length}\r\n\r\n"
        );
        let mut c = connect_and_send(&s, head.as_bytes()).await;
        let started = Instant::now();
        let got = read_until_closed(&mut c, Duration::from_secs(5)).await;
        assert!(got.starts_with(&format!("HTTP/1.1 {status}")), "{got}");
        assert!(got.contains(code), "{got}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{path}: answered after {:?}",
            started.elapsed()
        );
    }
    assert!(got_no_runs(&s).await);
}

async fn got_no_runs(s: &TestServer) -> bool {
    s.runs_of("wf1").await.is_empty()
}

/// Sends `head`, then `chunk` every `every` until the server answers and closes (at most 10
/// s); answers what it sent back.
async fn trickle_body(s: &TestServer, head: &str, chunk: &[u8], every: Duration) -> String {
    let mut c = connect_and_send(s, head.as_bytes()).await;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        tokio::select! {
            r = c.read(&mut buf) => match r {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            },
            () = tokio::time::sleep(every) => {
                if c.write_all(chunk).await.is_err() {
                    let _ = tokio::time::timeout(Duration::from_secs(2), c.read_to_end(&mut out)).await;
                    break;
                }
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn slow_head(host: &str, key: &str) -> String {
    format!(
        "POST /hooks/wf1 HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Idempotency-Key: {key}\r\nContent-Length: 100000\r\n\r\n{{\"pad\": \""
    )
}

/// A body that never stalls (a byte every 50 ms) but does not arrive whole within the
/// whole-body deadline is `408 request_timeout` naming `--body-deadline-s`, closed, no run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_must_arrive_whole_within_its_deadline() {
    let s = Setup::new()
        .workflow(hook_workflow("wf1", json!({})))
        .options(|o| {
            o.limits.body_deadline = Duration::from_millis(600);
            o.limits.body_min_rate = 0;
        })
        .start()
        .await;
    let host = s.running().addr.to_string();
    let started = Instant::now();
    let got = trickle_body(
        &s,
        &slow_head(&host, "dl-1"),
        b" ",
        Duration::from_millis(50),
    )
    .await;
    assert!(got.starts_with("HTTP/1.1 408"), "{got}");
    assert!(
        got.contains("request_timeout") && got.contains("--body-deadline-s"),
        "{got}"
    );
    assert!(
        got.to_ascii_lowercase().contains("connection: close"),
        "{got}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(550),
        "{:?}",
        started.elapsed()
    );
    assert!(got_no_runs(&s).await);
}

/// After the grace, a body slower than the minimum rate on average (10 bytes every 50 ms is
/// 200 bytes/s, under 1,000) is `408 request_timeout` naming `--body-min-rate`; a whole
/// body is still accepted with the same key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_slower_than_the_minimum_rate_is_408() {
    let s = Setup::new()
        .workflow(hook_workflow("wf1", json!({})))
        .options(|o| {
            o.limits.body_min_rate = 1_000;
            o.limits.body_rate_grace = Duration::from_millis(400);
        })
        .start()
        .await;
    let host = s.running().addr.to_string();
    let started = Instant::now();
    let got = trickle_body(
        &s,
        &slow_head(&host, "rate-1"),
        b"          ",
        Duration::from_millis(50),
    )
    .await;
    assert!(got.starts_with("HTTP/1.1 408"), "{got}");
    assert!(
        got.contains("request_timeout") && got.contains("--body-min-rate"),
        "{got}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(350),
        "{:?}",
        started.elapsed()
    );
    assert!(got_no_runs(&s).await);
    let a = s.hook("wf1", Some("rate-1"), b"{}").await;
    assert_eq!(a.status.as_u16(), 202, "{}", a.text);
}

/// A slow upload from the loopback address `source` (the client socket is bound to it).
async fn slow_from(addr: std::net::SocketAddr, source: [u8; 4], head: &str) -> TcpStream {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind((std::net::Ipv4Addr::from(source), 0).into())
        .unwrap();
    let mut c = sock.connect(addr).await.unwrap();
    c.write_all(head.as_bytes()).await.unwrap();
    c
}

/// Bodies in progress are bounded per client address: past `max_slow_bodies_per_ip` (2) the
/// address's oldest is shed, `503 server_busy` with `Retry-After`, naming the flag; another
/// address's body in progress is not touched and is accepted once whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_are_bounded_per_address() {
    let s = Setup::new()
        .workflow(hook_workflow("wf1", json!({})))
        .options(|o| o.limits.max_slow_bodies_per_ip = 2)
        .start()
        .await;
    let addr = s.running().addr;
    let host = addr.to_string();
    let head = |key: &str| {
        format!(
            "POST /hooks/wf1 HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
             Idempotency-Key: {key}\r\nContent-Length: 20\r\n\r\n{{\"id\": "
        )
    };
    let mut other = slow_from(addr, [127, 0, 0, 3], &head("other-1")).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut first = slow_from(addr, [127, 0, 0, 2], &head("a-1")).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let _second = slow_from(addr, [127, 0, 0, 2], &head("a-2")).await;
    let _third = slow_from(addr, [127, 0, 0, 2], &head("a-3")).await;
    let got = read_until_closed(&mut first, Duration::from_secs(5)).await;
    assert!(got.starts_with("HTTP/1.1 503"), "{got}");
    assert!(
        got.contains("server_busy") && got.contains("--max-slow-bodies-per-ip"),
        "{got}"
    );
    assert!(got.to_ascii_lowercase().contains("retry-after: 1"), "{got}");
    // 127.0.0.3's body is still being read: it ends and is accepted.
    other.write_all(b"\"evt-other\"} ").await.unwrap();
    let answer = read_answer(&mut other).await;
    assert!(answer.starts_with("HTTP/1.1 202"), "{answer}");
}

/// Connections are bounded: with `max_connections = 1` and one slow client connected, the
/// next request waits to be accepted (it is not served), and is served once the slow client
/// goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_bounded() {
    let s = Setup::new()
        .options(|o| o.limits.max_connections = 1)
        .start()
        .await;
    let host = s.running().addr.to_string();
    let slow = connect_and_send(
        &s,
        format!("GET /healthz HTTP/1.1\r\nHost: {host}\r\n").as_bytes(),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    let url = format!("{}/healthz", s.url);
    let client = s.client.clone();
    let waiting = tokio::spawn(async move { client.get(url).send().await.map(|r| r.status()) });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "a second connection was served while the bound was reached"
    );
    drop(slow);
    let status = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("served once the slot is free")
        .unwrap()
        .expect("answered");
    assert_eq!(status.as_u16(), 200);
}

// ---------------------------------------------------------------------------------------------
// Host allowlist (DNS rebinding)
// ---------------------------------------------------------------------------------------------

/// Every route (API, webhooks, the UI, unknown paths) refuses a `Host` that is not one of the
/// server's names with `421 misdirected_request`; the bound address, `localhost`, `127.0.0.1`
/// and `[::1]` with the bound port pass; a missing or doubled `Host` is `400 invalid_host`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosts_that_are_not_ours_are_421_on_every_route() {
    let ui = tempfile::tempdir().unwrap();
    std::fs::write(
        ui.path().join("index.html"),
        "<!doctype html><title>Fluxo</title>",
    )
    .unwrap();
    let ui_dir = ui.path().to_path_buf();
    let s = Setup::new()
        .workflow(hook_workflow("wf1", json!({})))
        .options(move |o| o.ui_dir = Some(ui_dir))
        .start()
        .await;
    let port = s.running().addr.port();
    let auth = format!("Bearer {TOKEN}");
    let get = |path: &'static str, host: String| {
        let auth = auth.clone();
        let s = &s;
        async move {
            s.send(
                Method::GET,
                path,
                &[
                    ("host", host.as_bytes()),
                    ("authorization", auth.as_bytes()),
                ],
                None,
            )
            .await
        }
    };
    for host in [
        format!("evil.example:{port}"),
        "evil.example".to_string(),
        "localhost".to_string(),
        format!("localhost:{}", port.wrapping_add(1)),
        format!("127.0.0.2:{port}"),
        format!("10.0.0.1:{port}"),
        format!("localhost.evil.example:{port}"),
    ] {
        for path in [
            "/api/v1/workflows",
            "/healthz",
            "/",
            "/index.html",
            "/nope/nothing",
        ] {
            let a = get(path, host.clone()).await;
            let doc = a.problem(421, "misdirected_request");
            assert!(
                doc["detail"].as_str().unwrap().contains("allowed_hosts"),
                "{doc}"
            );
        }
        let a = s
            .hook_with(
                "wf1",
                &[("host", host.as_bytes()), ("idempotency-key", b"h1")],
                b"{}",
            )
            .await;
        a.problem(421, "misdirected_request");
    }
    assert!(
        s.runs_of("wf1").await.is_empty(),
        "a refused delivery starts nothing"
    );
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("LOCALHOST.:{port}"),
        format!("[::1]:{port}"),
    ] {
        assert_eq!(
            get("/api/v1/workflows", host.clone()).await.status.as_u16(),
            200,
            "{host}"
        );
        assert_eq!(get("/", host.clone()).await.status.as_u16(), 200, "{host}");
    }
    // RFC 9112 §3.2: no Host, two Hosts or a malformed one → 400.
    let bad_requests = [
        "GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n".to_string(),
        format!("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"),
        "GET /healthz HTTP/1.1\r\nHost: user@127.0.0.1\r\nConnection: close\r\n\r\n".to_string(),
    ];
    for req in bad_requests {
        let mut c = connect_and_send(&s, req.as_bytes()).await;
        let got = read_until_closed(&mut c, Duration::from_secs(10)).await;
        assert!(got.starts_with("HTTP/1.1 400"), "{req:?}: {got}");
        assert!(got.contains("invalid_host"), "{got}");
    }
    // The request-target's authority wins over Host (RFC 9112 §3.2.2).
    let req = format!(
        "GET http://evil.example:{port}/healthz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    );
    let mut c = connect_and_send(&s, req.as_bytes()).await;
    let got = read_until_closed(&mut c, Duration::from_secs(10)).await;
    assert!(got.starts_with("HTTP/1.1 421"), "{got}");
}

/// Names in the settings' `allowed_hosts` are answered (a bare name on any port, `name:port`
/// on that port only), from the moment the settings are saved; a bad entry is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_hosts_from_the_settings() {
    let s = Setup::new().start().await;
    let health = |host: &'static str| {
        let s = &s;
        async move {
            s.send(Method::GET, "/healthz", &[("host", host.as_bytes())], None)
                .await
                .status
                .as_u16()
        }
    };
    assert_eq!(health("fluxo.example.com").await, 421);
    let put = s
        .api(
            Method::PUT,
            "/settings",
            &[],
            Some(r#"{"env": {}, "allowed_hosts": ["Fluxo.Example.com", "tunnel.example:443"]}"#),
        )
        .await;
    assert_eq!(put.status.as_u16(), 200, "{}", put.text);
    assert_eq!(
        put.json()["settings"]["allowed_hosts"],
        json!(["Fluxo.Example.com", "tunnel.example:443"])
    );
    assert_eq!(health("fluxo.example.com").await, 200);
    assert_eq!(health("fluxo.example.com:8443").await, 200);
    assert_eq!(health("tunnel.example:443").await, 200);
    assert_eq!(health("tunnel.example").await, 421);
    assert_eq!(health("evil.example").await, 421);
    let bad = s
        .api(
            Method::PUT,
            "/settings",
            &[],
            Some(r#"{"env": {}, "allowed_hosts": ["ok.example", "https://fluxo.example.com/"]}"#),
        )
        .await;
    let doc = bad.problem(400, "invalid_settings");
    assert!(
        doc["detail"].as_str().unwrap().contains("allowed_hosts[1]"),
        "{doc}"
    );
    assert_eq!(
        health("fluxo.example.com").await,
        200,
        "the refused save changed nothing"
    );
}

/// The OpenAPI document says so: every operation may answer 421.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_documents_421() {
    let s = Setup::new().start().await;
    let doc: serde_json::Value = s
        .send(Method::GET, "/api/v1/openapi.json", &[], None)
        .await
        .json();
    let mut n = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            assert!(
                op["responses"]["421"]["description"]
                    .as_str()
                    .is_some_and(|d| d.contains("misdirected_request")),
                "{method} {path}"
            );
            n += 1;
        }
    }
    assert!(n > 20);
}

// ---------------------------------------------------------------------------------------------
// The webhook door: cross-site requests and JSON only
// ---------------------------------------------------------------------------------------------

/// `POST /hooks/{wf}` with exactly these headers (no Content-Type added) and body.
async fn post_hook(s: &TestServer, wf: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
    let mut req = s
        .client
        .post(format!("{}/hooks/{wf}", s.url))
        .body(body.to_vec());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.expect("the server answers");
    let status = resp.status();
    let headers = resp.headers().clone();
    let text = resp.text().await.unwrap_or_default();
    Answer {
        status,
        headers,
        text,
    }
}

/// What Chromium sends for `fetch("http://127.0.0.1:8787/hooks/…", {mode: "no-cors", method:
/// "POST", body})` from a page on another site (and, but for `Sec-Fetch-Mode: navigate`, for a
/// cross-site form with `enctype=text/plain`).
const BROWSER_CROSS_SITE: &[(&str, &str)] = &[
    ("origin", "https://evil.example"),
    ("referer", "https://evil.example/"),
    ("sec-fetch-site", "cross-site"),
    ("sec-fetch-mode", "no-cors"),
    ("sec-fetch-dest", "empty"),
    ("content-type", "text/plain;charset=UTF-8"),
    ("idempotency-key", "evt_future_1"),
];

/// The probe of issue 13: another site's page posts to a seeded webhook through the user's
/// browser. It is refused with `403 cross_site_request`, starts no run and claims no key (the
/// real event is accepted later); the same holds with a JSON type, without Fetch Metadata
/// (older browsers: Origin alone), and for `same-site` pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_cross_site_post_is_refused_and_starts_no_run() {
    let s = Setup::new()
        .workflow(hook_workflow(
            "invoice-paid-once",
            json!({"dedupe_key": "{{ input.id }}"}),
        ))
        .start()
        .await;
    let body = br#"{"id": "evt_future_1", "type": "invoice.paid"}"#;
    let a = post_hook(&s, "invoice-paid-once", BROWSER_CROSS_SITE, body).await;
    let doc = a.problem(403, "cross_site_request");
    let detail = doc["detail"].as_str().unwrap();
    assert!(
        detail.contains("Sec-Fetch-Site") && detail.contains("allowed_origins"),
        "{detail}"
    );
    assert!(a.header("access-control-allow-origin").is_none());

    let variants: Vec<Vec<(&str, &str)>> = vec![
        // The same with a JSON type (a CORS request: the preflight is never granted, and
        // the door refuses it anyway).
        BROWSER_CROSS_SITE
            .iter()
            .map(|&(k, v)| {
                if k == "content-type" {
                    (k, "application/json")
                } else {
                    (k, v)
                }
            })
            .collect(),
        // An older browser: Origin only.
        vec![
            ("origin", "https://evil.example"),
            ("content-type", "application/json"),
        ],
        // A sibling site.
        vec![
            ("origin", "https://other.localhost"),
            ("sec-fetch-site", "same-site"),
            ("content-type", "application/json"),
        ],
        // Sandboxed iframes and data: URLs send `Origin: null`.
        vec![("origin", "null"), ("content-type", "application/json")],
        // No Origin, but Fetch Metadata says cross-site.
        vec![
            ("sec-fetch-site", "cross-site"),
            ("content-type", "application/json"),
        ],
    ];
    for h in &variants {
        post_hook(&s, "invoice-paid-once", h, body)
            .await
            .problem(403, "cross_site_request");
    }
    assert!(
        s.runs_of("invoice-paid-once").await.is_empty(),
        "no run started"
    );
    assert!(
        s.store
            .get_claim("invoice-paid-once", "evt_future_1", s.clock.now_ms())
            .await
            .unwrap()
            .is_none(),
        "no key claimed"
    );
    // The real delivery (a server: no Origin, no Sec-Fetch-*) is accepted as new.
    let real = post_hook(
        &s,
        "invoice-paid-once",
        &[("content-type", "application/json")],
        body,
    )
    .await;
    assert_eq!(real.status.as_u16(), 202, "{}", real.text);
    assert_eq!(s.runs_of("invoice-paid-once").await.len(), 1);

    // A CORS preflight gets no CORS grant: the browser never sends the real request.
    let pre = s
        .client
        .request(
            Method::OPTIONS,
            format!("{}/hooks/invoice-paid-once", s.url),
        )
        .header("origin", "https://evil.example")
        .header("access-control-request-method", "POST")
        .header("access-control-request-headers", "content-type")
        .send()
        .await
        .unwrap();
    assert!(!pre.status().is_success(), "{}", pre.status());
    assert!(pre
        .headers()
        .keys()
        .all(|k| !k.as_str().starts_with("access-control-")));
}

/// Origins on the trigger's `allowed_origins` may post from a browser (compared as origins:
/// case and default ports do not matter); this server's own pages (same origin) may too;
/// others may not. A bad entry is a validation problem naming it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowed_origins_let_a_listed_site_post() {
    let s = Setup::new()
        .workflow(hook_workflow(
            "form",
            json!({"allowed_origins": ["https://app.example.com", "http://localhost:5173"]}),
        ))
        .start()
        .await;
    let own = format!("http://{}", s.running().addr);
    let ok: Vec<Vec<(&str, &str)>> = vec![
        vec![
            ("origin", "https://app.example.com"),
            ("sec-fetch-site", "cross-site"),
        ],
        vec![
            ("origin", "https://APP.example.com:443"),
            ("sec-fetch-site", "cross-site"),
        ],
        vec![
            ("origin", "http://localhost:5173"),
            ("sec-fetch-site", "same-site"),
        ],
        vec![("origin", own.as_str()), ("sec-fetch-site", "same-origin")],
        vec![("sec-fetch-site", "none")],
    ];
    for h in &ok {
        let mut h = h.clone();
        h.push(("content-type", "application/json"));
        let a = post_hook(&s, "form", &h, b"{}").await;
        assert_eq!(a.status.as_u16(), 202, "{h:?}: {}", a.text);
    }
    for origin in [
        "https://app.example.com:8443",
        "http://app.example.com",
        "https://evil.example",
    ] {
        post_hook(
            &s,
            "form",
            &[
                ("origin", origin),
                ("sec-fetch-site", "cross-site"),
                ("content-type", "application/json"),
            ],
            b"{}",
        )
        .await
        .problem(403, "cross_site_request");
    }
    assert_eq!(s.runs_of("form").await.len(), ok.len());

    let bad = hook_workflow(
        "bad",
        json!({"allowed_origins": ["https://app.example.com/"]}),
    );
    let v = s
        .api(
            Method::POST,
            "/workflows/validate",
            &[],
            Some(&bad.to_string()),
        )
        .await;
    let text = v.text.clone();
    assert!(
        text.contains("allowed_origins[0]") && text.contains("no path"),
        "{text}"
    );
}

/// Webhooks take JSON only: no `Content-Type`, `text/plain`, a form type or a lookalike is
/// `415 unsupported_media_type` and starts nothing; `application/json` in any case, with
/// parameters, and `+json` types pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_take_json_only() {
    let s = Setup::new()
        .workflow(hook_workflow("wf1", json!({})))
        .start()
        .await;
    for ct in [
        None,
        Some("text/plain"),
        Some("text/plain;charset=UTF-8"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        Some("application/jsonp"),
        Some("application/octet-stream"),
    ] {
        let h: Vec<(&str, &str)> = ct.map(|c| vec![("content-type", c)]).unwrap_or_default();
        let a = post_hook(&s, "wf1", &h, b"{}").await;
        let doc = a.problem(415, "unsupported_media_type");
        assert!(
            doc["detail"].as_str().unwrap().contains("application/json"),
            "{doc}"
        );
    }
    assert!(s.runs_of("wf1").await.is_empty());
    for ct in [
        "application/json",
        "Application/JSON; charset=utf-8",
        "application/cloudevents+json",
        "application/vnd.github+json",
    ] {
        let a = post_hook(&s, "wf1", &[("content-type", ct)], b"{}").await;
        assert_eq!(a.status.as_u16(), 202, "{ct}: {}", a.text);
    }
}

// ---------------------------------------------------------------------------------------------
// Signed deliveries take their key from the signed body
// ---------------------------------------------------------------------------------------------

/// The probe of issue 13: a captured signed delivery, replayed within the 5-minute tolerance
/// with `Idempotency-Key: evt_victim_9` (or `X-Fluxo-Event-Id`), does not take that key: its
/// key is its own body's `id`, so the replay is a duplicate of the captured event, and the
/// real `evt_victim_9` is later accepted as new (202). A signed body without an `id` (the
/// default `dedupe_key`) is `400 invalid_idempotency_key`, whatever key header it carries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_signature_cannot_claim_another_events_key() {
    let s = Setup::new()
        .workflow(declaring(
            hook_workflow("signed", json!({"signing_secret": "{{ env.HOOK_SECRET }}"})),
            "HOOK_SECRET",
        ))
        .env("HOOK_SECRET", "s3cret")
        .start()
        .await;
    let now = s.clock.now_ms() / 1000;
    let captured = br#"{"id":"evt_captured_1","type":"invoice.paid"}"#;
    let sig = sign("s3cret", now, captured);
    let first = s
        .hook_with("signed", &[("x-fluxo-signature", sig.as_bytes())], captured)
        .await;
    assert_eq!(first.status.as_u16(), 202, "{}", first.text);
    let first_run = first.json()["run_id"].as_str().unwrap().to_string();

    // The attacker replays it 4 minutes later with the victim's key in a header.
    s.advance(Duration::from_secs(240));
    for header in ["idempotency-key", "x-fluxo-event-id"] {
        let replay = s
            .hook_with(
                "signed",
                &[
                    ("x-fluxo-signature", sig.as_bytes()),
                    (header, b"evt_victim_9"),
                ],
                captured,
            )
            .await;
        assert_eq!(replay.status.as_u16(), 200, "{header}: {}", replay.text);
        assert_eq!(replay.json()["duplicate"], true);
        assert_eq!(replay.json()["run_id"], first_run.as_str());
    }
    // A malformed key header is ignored too (it is not signed, so it is not read).
    let replay = s
        .hook_with(
            "signed",
            &[
                ("x-fluxo-signature", sig.as_bytes()),
                ("idempotency-key", b"\"bad"),
            ],
            captured,
        )
        .await;
    assert_eq!(replay.status.as_u16(), 200, "{}", replay.text);
    assert!(
        s.store
            .get_claim("signed", "evt_victim_9", s.clock.now_ms())
            .await
            .unwrap()
            .is_none(),
        "the victim's key was not claimed"
    );
    assert_eq!(s.runs_of("signed").await, vec![first_run.clone()]);

    // The real evt_victim_9 arrives: new, 202.
    let victim = br#"{"id":"evt_victim_9","type":"invoice.paid"}"#;
    let now = s.clock.now_ms() / 1000;
    let real = s
        .hook_with(
            "signed",
            &[("x-fluxo-signature", sign("s3cret", now, victim).as_bytes())],
            victim,
        )
        .await;
    assert_eq!(real.status.as_u16(), 202, "{}", real.text);
    assert_eq!(real.json()["duplicate"], false);
    let run = s.wait_final(real.json()["run_id"].as_str().unwrap()).await;
    assert_eq!(run.idempotency_key.as_deref(), Some("evt_victim_9"));

    // No id in the signed body: refused, naming the rule; a key header does not stand in.
    let no_id = br#"{"type":"ping"}"#;
    let a = s
        .hook_with(
            "signed",
            &[
                ("x-fluxo-signature", sign("s3cret", now, no_id).as_bytes()),
                ("idempotency-key", b"evt_x"),
            ],
            no_id,
        )
        .await;
    let doc = a.problem(400, "invalid_idempotency_key");
    let detail = doc["detail"].as_str().unwrap();
    assert!(
        detail.contains("signed body") && detail.contains("input.id"),
        "{detail}"
    );
}

/// Issue 42, low items: wrong API tokens are limited per client address. Twenty wrong tokens in
/// a row from 127.0.0.2 are each 401; then that address gets 429 `too_many_auth_failures` with
/// `Retry-After`, even with the right token (its guesses are no longer compared), while
/// 127.0.0.3 with the right token is served; a request without a token counts nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_tokens_are_limited_per_client_address() {
    let s = Setup::new().start().await;
    let client_from = |ip: &str| {
        reqwest::Client::builder()
            .no_proxy()
            .local_address(ip.parse::<std::net::IpAddr>().unwrap())
            .build()
            .unwrap()
    };
    let (guesser, other) = (client_from("127.0.0.2"), client_from("127.0.0.3"));
    let url = format!("{}/api/v1/workflows", s.running().url());
    let get = |c: &reqwest::Client, token: Option<&str>| {
        let mut r = c.get(&url);
        if let Some(t) = token {
            r = r.header("authorization", format!("Bearer {t}"));
        }
        r.send()
    };
    for _ in 0..20 {
        assert_eq!(get(&guesser, None).await.unwrap().status(), 401);
    }
    for i in 0..fluxo::server::auth::FAILURES_ALLOWED {
        let a = get(&guesser, Some(&format!("guess-{i}"))).await.unwrap();
        assert_eq!(a.status(), 401, "wrong token {i}");
    }
    let held = get(&guesser, Some(common::server::TOKEN)).await.unwrap();
    assert_eq!(held.status(), 429);
    let retry: u64 = held.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=10).contains(&retry), "Retry-After {retry}");
    let p: serde_json::Value = held.json().await.unwrap();
    assert_eq!(p["code"], "too_many_auth_failures");
    let served = get(&other, Some(common::server::TOKEN)).await.unwrap();
    assert_eq!(served.status(), 200);
}
