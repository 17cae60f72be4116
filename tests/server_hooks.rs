//! `POST /hooks/{workflow_id}` over real HTTP on port 0: dedupe at the door (SPEC §5, cases C1
//! and C2), the key sources and their validation, the window with a controlled clock, HMAC
//! signatures and the body limit.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::server::{
    declaring, fixture, hook_workflow, invoice_paid, Setup, StoreKind, TestServer,
};
use fluxo::clock::Clock;
use fluxo::run::{RunStatus, Trigger};
use fluxo::server::hooks::sign;
use serde_json::{json, Value};

const DAY: Duration = Duration::from_secs(24 * 3600);
const SECOND: Duration = Duration::from_secs(1);

async fn server_with(kind: StoreKind, wf: Value) -> TestServer {
    Setup::new().store(kind).workflow(wf).start().await
}

fn accepted(a: &common::server::Answer) -> String {
    assert_eq!(a.status.as_u16(), 202, "expected 202: {}", a.text);
    let v = a.json();
    assert_eq!(v["duplicate"], false, "{}", a.text);
    v["run_id"].as_str().expect("run_id").to_string()
}

fn duplicate_of(a: &common::server::Answer) -> String {
    assert_eq!(a.status.as_u16(), 200, "expected 200 duplicate: {}", a.text);
    let v = a.json();
    assert_eq!(v["duplicate"], true, "{}", a.text);
    v["run_id"].as_str().expect("run_id").to_string()
}

/// C1: 20 concurrent copies of one delivery → exactly one run; every answer 2xx; 19 say
/// `duplicate: true` with the accepted run's id.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn c1_twenty_concurrent_copies_make_one_run() {
    let s = server_with(StoreKind::Sled, hook_workflow("wf1", json!({}))).await;
    let body = invoice_paid();
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(20));
    let s = std::sync::Arc::new(s);
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let (s, body, barrier) = (s.clone(), body.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            barrier.wait().await;
            s.hook("wf1", Some("evt-1"), &body).await
        }));
    }
    let mut accepted_ids = Vec::new();
    let mut duplicates = Vec::new();
    for t in tasks {
        let a = t.await.unwrap();
        assert!(
            a.status.is_success(),
            "every copy is 2xx: {} {}",
            a.status,
            a.text
        );
        let v = a.json();
        let id = v["run_id"].as_str().unwrap().to_string();
        if v["duplicate"] == true {
            assert_eq!(a.status.as_u16(), 200);
            duplicates.push(id);
        } else {
            assert_eq!(a.status.as_u16(), 202);
            accepted_ids.push(id);
        }
    }
    assert_eq!(accepted_ids.len(), 1, "exactly one copy is accepted");
    assert_eq!(duplicates.len(), 19);
    assert!(duplicates.iter().all(|d| *d == accepted_ids[0]));
    assert_eq!(
        s.runs_of("wf1").await,
        accepted_ids,
        "exactly one run exists"
    );
    let run = s.wait_final(&accepted_ids[0]).await;
    assert_eq!(run.status, RunStatus::Succeeded);
    assert_eq!(run.trigger, Trigger::Webhook);
    assert_eq!(run.idempotency_key.as_deref(), Some("evt-1"));
    let sent: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(run.input, sent, "the run's input is the delivered body");
}

/// C2: queuing the first delivery fails (a store fault) → 503 with `Retry-After`, no run and
/// no claim; the sender's retry → 202 and exactly one run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c2_queuing_fails_then_the_retry_is_accepted() {
    let s = server_with(StoreKind::Fault, hook_workflow("wf1", json!({}))).await;
    let fault = s.fault.clone().unwrap();
    fault.fail_claims.store(1, Ordering::SeqCst);
    let body = invoice_paid();

    let first = s.hook("wf1", Some("evt-4"), &body).await;
    first.problem(503, "unavailable");
    let retry_after: u64 = first
        .header("retry-after")
        .expect("Retry-After on 503")
        .parse()
        .expect("Retry-After in seconds");
    assert!(retry_after >= 1);
    assert!(
        s.runs_of("wf1").await.is_empty(),
        "no run after the failure"
    );
    let now = s.clock.now_ms();
    assert!(
        s.store
            .get_claim("wf1", "evt-4", now)
            .await
            .unwrap()
            .is_none(),
        "no key stays claimed"
    );

    let second = s.hook("wf1", Some("evt-4"), &body).await;
    let id = accepted(&second);
    assert_eq!(s.runs_with_key("wf1", "evt-4").await, vec![id.clone()]);
    assert_eq!(s.wait_final(&id).await.status, RunStatus::Succeeded);
    // And it is now a duplicate.
    assert_eq!(duplicate_of(&s.hook("wf1", Some("evt-4"), &body).await), id);
    assert_eq!(s.runs_of("wf1").await.len(), 1);
    // The failed try and the retry; the repeat took the read-only duplicate path.
    assert_eq!(fault.claim_calls.load(Ordering::SeqCst), 2);
}

/// C2, the durability half: the claim was written but could not be made durable (the flush
/// failed) → 503 with `Retry-After`, and the claim and its queued run are undone, so the
/// retry is accepted rather than answered as a duplicate of a run that may not survive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c2_flush_failure_after_the_claim_releases_it() {
    let s = server_with(StoreKind::Fault, hook_workflow("wf1", json!({}))).await;
    let fault = s.fault.clone().unwrap();
    fault.fail_flushes.store(1, Ordering::SeqCst);
    let body = invoice_paid();

    let first = s.hook("wf1", Some("evt-5"), &body).await;
    first.problem(503, "unavailable");
    assert!(first.header("retry-after").is_some());
    let now = s.clock.now_ms();
    assert!(s
        .store
        .get_claim("wf1", "evt-5", now)
        .await
        .unwrap()
        .is_none());
    assert!(s.runs_of("wf1").await.is_empty());

    let id = accepted(&s.hook("wf1", Some("evt-5"), &body).await);
    assert_eq!(s.runs_with_key("wf1", "evt-5").await, vec![id.clone()]);
    assert_eq!(s.wait_final(&id).await.status, RunStatus::Succeeded);
}

/// A sender that gives up (its timeout) after its delivery was claimed but before it was made
/// durable does not leave a claimed key pointing at a run that never executes: the delivery
/// completes on its own, the run executes, and the sender's retry is a duplicate of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_that_disconnects_mid_claim_still_gets_its_run() {
    let s = server_with(StoreKind::Fault, hook_workflow("wf1", json!({}))).await;
    let fault = s.fault.clone().unwrap();
    fault.hold_flushes.store(true, Ordering::SeqCst);
    let impatient = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let request = impatient
        .post(format!("{}/hooks/wf1", s.url))
        .header("idempotency-key", "evt-d1")
        .header("content-type", "application/json")
        .body(invoice_paid())
        .send();
    let sender = tokio::spawn(request);
    for _ in 0..5000 {
        if fault.held.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert!(
        fault.held.load(Ordering::SeqCst) >= 1,
        "the claim's flush is held"
    );
    let gave_up = sender.await.unwrap();
    assert!(
        gave_up.is_err(),
        "the sender timed out while the flush was held"
    );
    fault.hold_flushes.store(false, Ordering::SeqCst);
    let runs = {
        let mut runs = Vec::new();
        for _ in 0..500 {
            runs = s.runs_with_key("wf1", "evt-d1").await;
            if runs.len() == 1
                && s.store
                    .get_run(&runs[0])
                    .await
                    .unwrap()
                    .unwrap()
                    .status
                    .is_final()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        runs
    };
    assert_eq!(runs.len(), 1, "the claimed delivery has its run");
    assert_eq!(
        s.wait_final(&runs[0]).await.status,
        RunStatus::Succeeded,
        "and it executed without a restart"
    );
    assert_eq!(
        duplicate_of(&s.hook("wf1", Some("evt-d1"), &invoice_paid()).await),
        runs[0]
    );
}

/// A duplicate is only answered once the claim it reports is durable: while the first
/// delivery's flush is held, its concurrent copy waits too (a crash then could otherwise leave
/// the sender with a "duplicate" of a run that was never kept).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_waits_for_the_claim_to_be_durable() {
    let s =
        std::sync::Arc::new(server_with(StoreKind::Fault, hook_workflow("wf1", json!({}))).await);
    let fault = s.fault.clone().unwrap();
    fault.hold_flushes.store(true, Ordering::SeqCst);
    let send = || {
        let s = s.clone();
        tokio::spawn(async move { s.hook("wf1", Some("evt-dd"), &invoice_paid()).await })
    };
    let first = send();
    for _ in 0..1000 {
        if fault.held.load(Ordering::SeqCst) > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    assert!(
        fault.held.load(Ordering::SeqCst) > 0,
        "the first flush is held"
    );
    let reads_before = fault.get_claim_calls.load(Ordering::SeqCst);
    let second = send();
    // Give the copy every chance to answer early (it must not): a miss of the recent claims
    // cache is claimed, and its claim waits in the claims lane behind the held batch.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !second.is_finished(),
        "the duplicate did not answer before the claim was durable"
    );
    assert!(!first.is_finished());
    fault.hold_flushes.store(false, Ordering::SeqCst);
    let id = accepted(&first.await.unwrap());
    assert_eq!(duplicate_of(&second.await.unwrap()), id);
    assert!(
        fault.get_claim_calls.load(Ordering::SeqCst) > reads_before,
        "the copy's claim lost to the first, and the duplicate answer was confirmed by a read \
         after a flush"
    );
    // Now durable and seen: a third copy is answered from memory, without a store read.
    let reads = fault.get_claim_calls.load(Ordering::SeqCst);
    assert_eq!(
        duplicate_of(&s.hook("wf1", Some("evt-dd"), &invoice_paid()).await),
        id
    );
    assert_eq!(fault.get_claim_calls.load(Ordering::SeqCst), reads);
}

/// C2 variant: the first delivery is over the body limit (413, nothing claimed), the second is
/// normal: one run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c2_variant_over_limit_then_normal() {
    let s = server_with(StoreKind::Sled, hook_workflow("wf1", json!({}))).await;
    let mut big = json!({"id": "evt-6", "pad": "x".repeat(1024 * 1024)});
    big["more"] = json!(1);
    let big = serde_json::to_vec(&big).unwrap();
    assert!(big.len() > fluxo::server::DEFAULT_BODY_LIMIT);
    let a = s.hook("wf1", Some("evt-6"), &big).await;
    let doc = a.problem(413, "payload_too_large");
    assert!(doc["detail"].as_str().unwrap().contains("1048576"));
    assert!(s.runs_of("wf1").await.is_empty());
    assert!(s
        .store
        .get_claim("wf1", "evt-6", s.clock.now_ms())
        .await
        .unwrap()
        .is_none());

    let id = accepted(&s.hook("wf1", Some("evt-6"), &invoice_paid()).await);
    assert_eq!(s.runs_of("wf1").await, vec![id]);
}

/// The window is measured from the first claim: a repeat at 24 h − 1 s is a duplicate, one at
/// 24 h + 1 s starts a new run; repeats inside the window never extend it; failed runs still
/// count (checked with the controlled clock, no sleeping).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dedupe_window_is_24h_from_the_first_claim() {
    let s = server_with(StoreKind::Sled, hook_workflow("wf1", json!({}))).await;
    let body = invoice_paid();
    let first = accepted(&s.hook("wf1", Some("evt-w"), &body).await);
    s.wait_final(&first).await;

    s.advance(DAY / 2);
    assert_eq!(
        duplicate_of(&s.hook("wf1", Some("evt-w"), &body).await),
        first
    );
    s.advance(DAY / 2 - SECOND);
    assert_eq!(
        duplicate_of(&s.hook("wf1", Some("evt-w"), &body).await),
        first,
        "24 h - 1 s after the first claim is still a duplicate"
    );
    s.advance(2 * SECOND);
    let second = accepted(&s.hook("wf1", Some("evt-w"), &body).await);
    assert_ne!(
        second, first,
        "24 h + 1 s starts a new run (the repeat at 12 h did not extend the window)"
    );
    assert_eq!(
        duplicate_of(&s.hook("wf1", Some("evt-w"), &body).await),
        second
    );
    let mut runs = s.runs_with_key("wf1", "evt-w").await;
    runs.sort();
    let mut expected = vec![first, second];
    expected.sort();
    assert_eq!(runs, expected);
}

/// A run that failed still holds its key for the window (a failed run is not a free retry).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_still_counts_as_delivered() {
    let wf = json!({
        "id": "fails", "name": "fails", "version": 1,
        "steps": [
            {"id": "hook", "kind": "webhook_trigger", "config": {}},
            {"id": "boom", "kind": "transform", "config": {"fields": {"x": "{{ input.missing.path }}"}}}
        ],
        "edges": [{"from": "hook", "to": "boom"}]
    });
    let s = server_with(StoreKind::Memory, wf).await;
    let id = accepted(&s.hook("fails", Some("evt-f"), b"{}").await);
    assert_eq!(s.wait_final(&id).await.status, RunStatus::Failed);
    assert_eq!(
        duplicate_of(&s.hook("fails", Some("evt-f"), b"{}").await),
        id
    );
}

/// Every invalid key form → 400 `invalid_idempotency_key`, nothing claimed, no run; the
/// quoted RFC 8941 form is accepted and is the same key as the bare form.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_keys_are_refused_and_quoted_keys_accepted() {
    let s = server_with(StoreKind::Memory, hook_workflow("wf1", json!({}))).await;
    let body = invoice_paid();
    let long = "k".repeat(256);
    let cases: Vec<BadKeyCase> = vec![
        ("empty", vec![("idempotency-key", b"")]),
        ("256 chars", vec![("idempotency-key", long.as_bytes())]),
        ("non-ASCII", vec![("idempotency-key", "évt-1".as_bytes())]),
        ("space", vec![("idempotency-key", b"evt 1")]),
        ("tab (control)", vec![("idempotency-key", b"evt\t1")]),
        (
            "quote inside quotes",
            vec![("idempotency-key", br#""a"b""#)],
        ),
        ("bad escape", vec![("idempotency-key", br#""a\qb""#)]),
        ("unterminated quote", vec![("idempotency-key", br#""abc"#)]),
        ("empty quoted", vec![("idempotency-key", br#""""#)]),
        (
            "duplicated header",
            vec![("idempotency-key", b"evt-a"), ("idempotency-key", b"evt-b")],
        ),
        (
            "duplicated event id",
            vec![
                ("x-fluxo-event-id", b"evt-a"),
                ("x-fluxo-event-id", b"evt-a"),
            ],
        ),
        ("bad event id", vec![("x-fluxo-event-id", b"evt 1")]),
    ];
    for (what, headers) in &cases {
        let a = s.hook_with("wf1", headers, &body).await;
        assert_eq!(a.status.as_u16(), 400, "{what}: {}", a.text);
        a.problem(400, "invalid_idempotency_key");
    }
    assert!(
        s.runs_of("wf1").await.is_empty(),
        "no invalid key started a run"
    );

    // 255 characters is the longest key.
    let max = "k".repeat(255);
    accepted(&s.hook("wf1", Some(&max), &body).await);
    // The quoted form is accepted and names the same key as the bare form.
    let id = accepted(&s.hook("wf1", Some(r#""evt-q1""#), &body).await);
    assert_eq!(
        duplicate_of(&s.hook("wf1", Some("evt-q1"), &body).await),
        id
    );
    let r = s.wait_final(&id).await;
    assert_eq!(r.idempotency_key.as_deref(), Some("evt-q1"));
    // An escaped quote inside a quoted key is part of the key.
    let id2 = accepted(&s.hook("wf1", Some(r#""a\"b""#), &body).await);
    assert_eq!(
        duplicate_of(&s.hook("wf1", Some(r#"a"b"#), &body).await),
        id2
    );
}

/// `X-Fluxo-Event-Id` is the key when no `Idempotency-Key` comes; `Idempotency-Key` wins when
/// both do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_id_header_is_a_key() {
    let s = server_with(StoreKind::Memory, hook_workflow("wf1", json!({}))).await;
    let body = invoice_paid();
    let id = accepted(
        &s.hook_with("wf1", &[("x-fluxo-event-id", b"evt-e1")], &body)
            .await,
    );
    assert_eq!(
        duplicate_of(
            &s.hook_with("wf1", &[("x-fluxo-event-id", b"evt-e1")], &body)
                .await
        ),
        id
    );
    // Idempotency-Key takes precedence: same event id, new key → new run.
    let other = accepted(
        &s.hook_with(
            "wf1",
            &[
                ("idempotency-key", b"idem-1"),
                ("x-fluxo-event-id", b"evt-e1"),
            ],
            &body,
        )
        .await,
    );
    assert_ne!(other, id);
    assert_eq!(s.runs_with_key("wf1", "evt-e1").await, vec![id]);
    assert_eq!(s.runs_with_key("wf1", "idem-1").await, vec![other]);
}

/// The trigger's `dedupe_key` template over the body is the key when no header comes; a body
/// missing the field is refused (400), never run without dedupe.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dedupe_key_template_is_a_key_and_a_missing_field_is_400() {
    let s = server_with(
        StoreKind::Memory,
        hook_workflow("stripe", json!({"dedupe_key": "{{ input.id }}"})),
    )
    .await;
    let first = invoice_paid();
    let second = std::fs::read(fixture("stripe/invoice.paid.second.json")).unwrap();
    let event_id = serde_json::from_slice::<Value>(&first).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let id = accepted(&s.hook("stripe", None, &first).await);
    // Re-indented copy of the same event: same `id`, a duplicate.
    let pretty =
        serde_json::to_vec_pretty(&serde_json::from_slice::<Value>(&first).unwrap()).unwrap();
    assert_eq!(duplicate_of(&s.hook("stripe", None, &pretty).await), id);
    let other = accepted(&s.hook("stripe", None, &second).await);
    assert_ne!(other, id);
    assert_eq!(s.runs_with_key("stripe", &event_id).await, vec![id]);

    // No `id` in the body: 400, and no run.
    let before = s.runs_of("stripe").await.len();
    let a = s.hook("stripe", None, br#"{"type":"invoice.paid"}"#).await;
    let doc = a.problem(400, "invalid_idempotency_key");
    assert!(
        doc["detail"].as_str().unwrap().contains("input.id"),
        "the problem names the missing path: {doc}"
    );
    // A field that renders empty is no key either.
    s.hook("stripe", None, br#"{"id":""}"#)
        .await
        .problem(400, "invalid_idempotency_key");
    s.hook("stripe", None, br#"{"id":null}"#)
        .await
        .problem(400, "invalid_idempotency_key");
    assert_eq!(s.runs_of("stripe").await.len(), before);
    // A header still wins over the template.
    accepted(&s.hook("stripe", Some("hdr-1"), br#"{"type":"x"}"#).await);
}

/// Without any key source every delivery is a new run (no dedupe configured).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_key_no_dedupe() {
    let s = server_with(StoreKind::Memory, hook_workflow("wf1", json!({}))).await;
    let a = accepted(&s.hook("wf1", None, b"{\"a\":1}").await);
    let b = accepted(&s.hook("wf1", None, b"{\"a\":1}").await);
    assert_ne!(a, b);
    assert_eq!(s.wait_final(&a).await.idempotency_key, None);
}

/// HMAC signatures (SPEC §5): good → 202; bad, stale, from the future, malformed or missing →
/// 401 problem+json, and a refused delivery claims nothing. A signed delivery's key is its
/// body's `id` (key headers are ignored: `tests/security_door.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hmac_signatures() {
    let s = Setup::new()
        .workflow(declaring(
            hook_workflow("signed", json!({"signing_secret": "{{ env.HOOK_SECRET }}"})),
            "HOOK_SECRET",
        ))
        .env("HOOK_SECRET", "s3cret")
        .start()
        .await;
    let body_of =
        |id: &str| serde_json::to_vec(&json!({"id": id, "type": "invoice.paid"})).unwrap();
    let body = body_of("evt-s1");
    let now = s.clock.now_ms() / 1000;
    let send = |sig: Option<String>, body: Vec<u8>| {
        let s = &s;
        async move {
            let mut h: Vec<(&str, Vec<u8>)> = Vec::new();
            if let Some(sig) = sig {
                h.push(("x-fluxo-signature", sig.into_bytes()));
            }
            let h: Vec<(&str, &[u8])> = h.iter().map(|(k, v)| (*k, v.as_slice())).collect();
            s.hook_with("signed", &h, &body).await
        }
    };
    let bad_cases = vec![
        ("missing", None),
        ("wrong secret", Some(sign("other", now, &body))),
        ("another body", Some(sign("s3cret", now, b"{}"))),
        ("stale (301 s old)", Some(sign("s3cret", now - 301, &body))),
        ("from the future", Some(sign("s3cret", now + 301, &body))),
        ("no timestamp", Some("v1=00ff".to_string())),
        ("not hex", Some(format!("t={now},v1=zz"))),
    ];
    for (what, sig) in bad_cases {
        let a = send(sig, body.clone()).await;
        assert_eq!(a.status.as_u16(), 401, "{what}: {}", a.text);
        a.problem(401, "invalid_signature");
    }
    assert!(s.runs_of("signed").await.is_empty());
    assert!(s
        .store
        .get_claim("signed", "evt-s1", s.clock.now_ms())
        .await
        .unwrap()
        .is_none());
    // Good, including at the edge of the tolerance and with a rotated secret listed second.
    let id = accepted(&send(Some(sign("s3cret", now, &body)), body.clone()).await);
    let body2 = body_of("evt-s2");
    accepted(&send(Some(sign("s3cret", now - 300, &body2)), body2).await);
    let body3 = body_of("evt-s3");
    let old = sign("old", now, &body3);
    let new = sign("s3cret", now, &body3);
    let rotated = format!("{old},{}", new.split(',').nth(1).unwrap());
    accepted(&send(Some(rotated), body3).await);
    // A signed repeat is a duplicate; an unsigned repeat is refused, not answered.
    assert_eq!(
        duplicate_of(&send(Some(sign("s3cret", now, &body)), body.clone()).await),
        id
    );
    send(None, body).await.problem(401, "invalid_signature");
    assert_eq!(s.runs_with_key("signed", "evt-s1").await, vec![id]);
}

/// Unknown workflow → 404; a body that is not JSON → 400; both problem+json, no run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_workflow_and_bad_json() {
    let s = server_with(StoreKind::Memory, hook_workflow("wf1", json!({}))).await;
    s.hook("nope", Some("k1"), b"{}")
        .await
        .problem(404, "workflow_not_found");
    s.hook("wf1", Some("k1"), b"{not json")
        .await
        .problem(400, "invalid_json");
    assert!(s.runs_of("wf1").await.is_empty());
    // The key was not burnt by the bad body.
    accepted(&s.hook("wf1", Some("k1"), b"{}").await);
}

/// A smaller configured body limit is honoured (413 above, 202 at the limit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_body_limit() {
    let s = Setup::new()
        .workflow(hook_workflow("wf1", json!({})))
        .options(|o| o.body_limit_bytes = 4096)
        .start()
        .await;
    let pad = |n: usize| {
        let mut v = serde_json::to_vec(&json!({"p": ""})).unwrap();
        let fill = n - v.len();
        v.splice(6..6, std::iter::repeat_n(b'x', fill));
        v
    };
    let at = pad(4096);
    assert_eq!(at.len(), 4096);
    accepted(&s.hook("wf1", Some("at-limit"), &at).await);
    s.hook("wf1", Some("over"), &pad(4097))
        .await
        .problem(413, "payload_too_large");
}

/// A named set of request headers (name, raw value bytes).
type BadKeyCase<'a> = (&'a str, Vec<(&'a str, &'a [u8])>);
