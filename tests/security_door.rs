//! The door (SPEC §5 "The door and outbound calls", issue 13) over real HTTP on port 0: what
//! an attacker's page, a careless sender and a slow client get from `fluxo serve`.
//!
//! Each test names the rule it checks; the rules themselves are documented where they live
//! (`src/server/door.rs`, `src/server/hooks.rs`, `src/server/auth.rs`, `src/server/serve.rs`).

mod common;

use common::server::{hook_workflow, Setup, TOKEN};
use fluxo::clock::Clock;
use fluxo::server::hooks::sign;
use reqwest::Method;
use serde_json::json;

// ---------------------------------------------------------------------------------------------
// Signatures: checked arithmetic
// ---------------------------------------------------------------------------------------------

/// `t=` values at and past the ends of `i64` (which once overflowed `now_s - t` and panicked a
/// debug build), signs, spaces and repeats are 401 `invalid_signature`; the server keeps
/// answering and a good signature still passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extreme_signature_timestamps_are_401_not_a_panic() {
    let s = Setup::new()
        .workflow(hook_workflow(
            "signed",
            json!({"signing_secret": "{{ env.HOOK_SECRET }}"}),
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
    assert!(s.runs_of("signed").is_empty());
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
