//! Properties of the retry schedule: every backoff stays inside its ceiling, `Retry-After`
//! parses as RFC 9110 says, and the waits of a whole workflow run never go past the run
//! deadline (driven end to end against a real local mock that always answers 503, on the
//! manual clock so no case sleeps).

mod common;

use std::time::{Duration, UNIX_EPOCH};

use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::json;

use common::{compile, dump, step, workflow, Action, Harness, Mock};
use fluxo::clock::Clock;
use fluxo::run::RunStatus;
use fluxo::runtime::retry::{parse_retry_after, RetryPolicy, RetryStrategy};

/// `min(cap, base·2^(n−1))` computed independently of the engine, without overflow.
fn exp_ceiling(base: u64, cap: u64, n: u32) -> u64 {
    let shift = n.saturating_sub(1);
    let raw: u128 = if base == 0 {
        0
    } else if shift >= 64 {
        u128::MAX
    } else {
        (base as u128) << shift
    };
    raw.min(cap as u128) as u64
}

fn policy(strategy: RetryStrategy, base: u64, cap: u64, retries: u32) -> RetryPolicy {
    RetryPolicy {
        retries,
        strategy,
        base_delay_ms: base,
        max_delay_ms: cap,
        timeout_ms: 1000,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn exponential_backoff_is_full_jitter_within_the_ceiling(
        base in 0u64..=10_000_000,
        cap in 0u64..=3_600_000,
        n in 1u32..=100,
        seed in any::<u64>(),
    ) {
        let p = policy(RetryStrategy::Exponential, base, cap, 20);
        let ceiling = exp_ceiling(base, cap, n);
        prop_assert_eq!(p.delay_ceiling_ms(n), ceiling);
        let mut rng = StdRng::seed_from_u64(seed);
        for _ in 0..8 {
            let d = p.backoff_ms(n, &mut rng);
            prop_assert!(d <= ceiling, "backoff {} > ceiling {}", d, ceiling);
        }
    }

    #[test]
    fn fixed_backoff_is_the_base_capped(
        base in 0u64..=10_000_000,
        cap in 0u64..=3_600_000,
        n in 1u32..=100,
        seed in any::<u64>(),
    ) {
        let p = policy(RetryStrategy::Fixed, base, cap, 20);
        let mut rng = StdRng::seed_from_u64(seed);
        prop_assert_eq!(p.backoff_ms(n, &mut rng), base.min(cap));
        let none = policy(RetryStrategy::None, base, cap, 20);
        prop_assert_eq!(none.backoff_ms(n, &mut rng), 0);
        prop_assert_eq!(none.max_attempts(), 1);
    }

    #[test]
    fn worst_case_counts_every_attempt_and_every_ceiling(
        base in 0u64..=100_000,
        cap in 0u64..=60_000,
        retries in 0u32..=20,
        exponential in any::<bool>(),
    ) {
        let strategy = if exponential { RetryStrategy::Exponential } else { RetryStrategy::Fixed };
        let p = policy(strategy, base, cap, retries);
        let waits: u64 = (1..=retries).map(|n| if exponential {
            exp_ceiling(base, cap, n)
        } else {
            base.min(cap)
        }).sum();
        prop_assert_eq!(p.worst_case_ms(), (retries as u64 + 1) * 1000 + waits);
    }

    #[test]
    fn retry_after_seconds_and_dates(secs in 0u64..=10_000_000, offset in -1_000_000i64..=1_000_000) {
        let now = fluxo::clock::ManualClock::at_2026().now_ms();
        prop_assert_eq!(parse_retry_after(&secs.to_string(), now), Some(secs * 1000));
        prop_assert_eq!(parse_retry_after(&format!("  {secs} "), now), Some(secs * 1000));
        let when = UNIX_EPOCH + Duration::from_millis((now + offset * 1000) as u64);
        let date = httpdate::fmt_http_date(when);
        prop_assert_eq!(parse_retry_after(&date, now), Some((offset.max(0) * 1000) as u64));
    }

    #[test]
    fn malformed_retry_after_is_none(s in "[^0-9]{0,3}[0-9]{0,3}[^0-9\\s]{1,4}") {
        // Anything with a non-digit that is not an HTTP-date is ignored, never read as zero.
        prop_assume!(httpdate::parse_http_date(s.trim()).is_err());
        prop_assert_eq!(parse_retry_after(&s, 0), None);
    }
}

#[test]
fn exponential_backoff_actually_jitters() {
    let p = policy(RetryStrategy::Exponential, 1000, 60_000, 5);
    let mut rng = StdRng::seed_from_u64(7);
    let draws: std::collections::BTreeSet<u64> =
        (0..64).map(|_| p.backoff_ms(3, &mut rng)).collect();
    assert!(draws.len() > 10, "{draws:?}");
    assert!(draws.iter().all(|d| *d <= 4000));
}

/// One run of `start → call` against a mock that always answers 503 (optionally with a
/// `Retry-After`), and the checks of the deadline property.
#[allow(clippy::too_many_arguments)]
async fn run_against_503(
    retries: u32,
    exponential: bool,
    base_ms: u64,
    cap_ms: u64,
    run_timeout_s: u64,
    retry_after_s: Option<u64>,
) -> Result<(usize, i64, RunStatus), TestCaseError> {
    let answer = match retry_after_s {
        Some(s) => Action::status(503).header("Retry-After", &s.to_string()),
        None => Action::status(503),
    };
    let mock = Mock::always(answer).await;
    let wf = compile(&workflow(
        "deadline-prop",
        json!({ "run_timeout_s": run_timeout_s }),
        json!([
            { "id": "start", "kind": "manual_trigger", "config": {} },
            { "id": "call", "kind": "http_request", "config": {
                "method": "POST", "url": format!("{}/x", mock.url()),
                "headers": { "Idempotency-Key": "k" },
                "retries": retries,
                "retry_strategy": if exponential { "exponential" } else { "fixed" },
                "retry_base_delay_ms": base_ms,
                "max_retry_delay_s": cap_ms as f64 / 1000.0,
                "timeout_s": 5 } }
        ]),
        json!([{ "from": "start", "to": "call" }]),
    ));
    let h = Harness::new();
    let start = h.now();
    let deadline = start + run_timeout_s as i64 * 1000;
    let run = h.run(&wf, json!({})).await;
    let slept = h.clock.slept();
    let call = step(&run, "call");
    let delays: Vec<u64> = call.attempts.iter().map(|a| a.delay_before_ms).collect();

    prop_assert!(
        start + slept < deadline,
        "slept {} ms with a {} s deadline",
        slept,
        run_timeout_s
    );
    prop_assert_eq!(delays.iter().sum::<u64>() as i64, slept);
    prop_assert_eq!(delays[0], 0);
    // Every attempt starts before the deadline, at the time its waits say.
    let mut t = start;
    for a in &call.attempts {
        t += a.delay_before_ms as i64;
        prop_assert_eq!(a.started_at.0, t);
        prop_assert!(a.started_at.0 < deadline);
    }
    for (i, d) in delays.iter().enumerate().skip(1) {
        let ceiling = match retry_after_s {
            Some(s) => (s * 1000).min(cap_ms),
            None if exponential => exp_ceiling(base_ms, cap_ms, i as u32),
            None => base_ms.min(cap_ms),
        };
        if retry_after_s.is_some() || !exponential {
            prop_assert_eq!(*d, ceiling);
        } else {
            prop_assert!(*d <= ceiling);
        }
    }
    // Every attempt that got an answer reached the mock, and the mock saw no request that was
    // not an attempt. The two can differ by attempts without an HTTP status: under heavy load
    // an attempt can fail at the connection level before the mock has read the request (the
    // engine retries it like any connection error), and the last attempt, started a few ms
    // before the deadline with its timeout clipped to what was left, can reach the mock and
    // be cut before the answer comes back (seen once in CI: mock 3, answered 2).
    let answered = call
        .attempts
        .iter()
        .filter(|a| a.http_status.is_some())
        .count();
    prop_assert!(
        (answered..=call.attempts.len()).contains(&mock.count()),
        "mock saw {} requests; {} attempts, {} answered: {}",
        mock.count(),
        call.attempts.len(),
        answered,
        dump(&run)
    );
    prop_assert!(answered >= 1);
    prop_assert!(call.attempts.len() <= retries as usize + 1);
    let err = run.error.as_ref().expect("the run failed");
    let last = call.attempts.last().expect("at least one attempt");
    if last.http_status.is_none() {
        // The last attempt started a few ms before the deadline, so its timeout was clipped
        // to what was left, and the real request took longer: the deadline ended it.
        let left = deadline - last.started_at.0;
        prop_assert!(
            left < 5_000,
            "an unclipped attempt got no answer: {}",
            dump(&run)
        );
        prop_assert_eq!(err.code.as_str(), "timeout", "{}", dump(&run));
        prop_assert_eq!(run.status, RunStatus::TimedOut);
        return Ok((call.attempts.len(), slept, run.status));
    }
    prop_assert_eq!(err.http_status, Some(503), "{}", dump(&run));
    prop_assert_eq!(err.code.as_str(), "http_status");
    if call.attempts.len() == retries as usize + 1 {
        prop_assert_eq!(run.status, RunStatus::Failed);
    } else {
        // Stopped early: only because the next wait would have passed the deadline.
        prop_assert_eq!(run.status, RunStatus::TimedOut);
        let next_wait_min = match retry_after_s {
            Some(s) => (s * 1000).min(cap_ms),
            None if exponential => 0,
            None => base_ms.min(cap_ms),
        };
        prop_assert!(start + slept + next_wait_min as i64 >= deadline || exponential);
    }
    Ok((call.attempts.len(), slept, run.status))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn waits_never_go_past_the_run_deadline(
        retries in 0u32..=8,
        exponential in any::<bool>(),
        base_ms in 1u64..=3_000,
        cap_ms in 0u64..=5_000,
        run_timeout_s in 1u64..=5,
        retry_after in proptest::option::weighted(0.25, 0u64..=10),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(run_against_503(retries, exponential, base_ms, cap_ms, run_timeout_s, retry_after))?;
    }
}

#[tokio::test]
async fn a_wait_that_would_end_exactly_at_the_deadline_is_not_scheduled() {
    // Fixed 500 ms, 1 s limit: attempt at 0, wait to 500, attempt; a wait to 1000 would end
    // at the deadline itself, where nothing can start any more.
    let r = run_against_503(5, false, 500, 5_000, 1, None)
        .await
        .unwrap();
    assert_eq!(r, (2, 500, RunStatus::TimedOut));
    // And with 499 ms the third attempt fits (at 998 ms); the fourth wait would not.
    let r = run_against_503(5, false, 499, 5_000, 1, None)
        .await
        .unwrap();
    assert_eq!(r, (3, 998, RunStatus::TimedOut));
    // All retries fit: the run failed, it did not time out.
    let r = run_against_503(2, false, 100, 5_000, 1, None)
        .await
        .unwrap();
    assert_eq!(r, (3, 200, RunStatus::Failed));
}
