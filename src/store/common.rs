//! Rules shared by every backend, so that they answer identically: identifier checks, expiry
//! arithmetic, run-query matching and cursors, stats buckets, retention order and the API
//! idempotency decision.

use std::cmp::Ordering;

use super::{
    ApiBegin, ApiRecord, ApiRecordState, RunPage, RunQuery, RunSummary, StoreError, StoreResult,
};
use crate::run::{RunRecord, RunStatus};

/// Rejects identifiers that cannot be part of a `name 0x00 rest` composite key.
///
/// Namespaces, workflow ids and API scopes are the leading part of composite keys; a NUL
/// byte inside them would make two different pairs share one key.
pub(crate) fn check_ident(what: &str, s: &str) -> StoreResult<()> {
    if s.as_bytes().contains(&0) {
        return Err(StoreError::Invalid(format!(
            "invalid {what}: contains a NUL byte"
        )));
    }
    Ok(())
}

/// What every backend checks before a Memory write: the namespace and key rules
/// ([`super::check_namespace`], [`super::check_memory_key`]). Reads and deletes only refuse a
/// NUL in the namespace ([`check_ident`]), so entries written before a rule existed stay
/// reachable.
pub(crate) fn check_memory_write(namespace: &str, key: &str) -> StoreResult<()> {
    super::check_namespace(namespace)
        .and_then(|_| super::check_memory_key(key))
        .map_err(|e| StoreError::Invalid(e.to_string()))
}

/// Checks the identifiers of a run that become composite-key prefixes.
pub(crate) fn check_run(run: &RunRecord) -> StoreResult<()> {
    check_ident("workflow id", &run.workflow_id)?;
    if let Some(k) = &run.idempotency_key {
        check_ident("idempotency key", k)?;
    }
    Ok(())
}

/// `now_ms + ttl_ms`, saturating; `None` when there is no TTL.
pub(crate) fn expiry(now_ms: i64, ttl_ms: Option<u64>) -> Option<i64> {
    ttl_ms.map(|ttl| now_ms.saturating_add(i64::try_from(ttl).unwrap_or(i64::MAX)))
}

/// Position of a run in listings: `(created_at ms, id)`. Listings go newest first, i.e. in
/// descending position order.
pub(crate) type Position = (i64, String);

/// The position of a summary.
pub(crate) fn position(s: &RunSummary) -> Position {
    (s.created_at.0, s.id.clone())
}

/// The opaque cursor that resumes a listing after `s`: `<created_at ms>:<id>`.
pub(crate) fn encode_cursor(s: &RunSummary) -> String {
    format!("{}:{}", s.created_at.0, s.id)
}

/// A decoded cursor.
pub(crate) enum Cursor {
    /// A cursor this store produced.
    Position(Position),
    /// Anything else is taken as a bare run id; the backend looks up its position.
    RunId(String),
}

/// Decodes a cursor made by [`encode_cursor`]; anything else is treated as a run id.
pub(crate) fn decode_cursor(c: &str) -> Cursor {
    if let Some((ms, id)) = c.split_once(':') {
        if let Ok(ms) = ms.parse::<i64>() {
            return Cursor::Position((ms, id.to_string()));
        }
    }
    Cursor::RunId(c.to_string())
}

/// True if `q` (a free search) matches the run: id prefix, idempotency-key prefix, or a prefix
/// of one of its indexed values ([`search_values`]).
fn q_matches(s: &RunSummary, values: &[String], q: &str) -> bool {
    s.id.starts_with(q)
        || s.idempotency_key
            .as_deref()
            .is_some_and(|k| k.starts_with(q))
        || values.iter().any(|v| v.starts_with(q))
}

/// True if the summary satisfies every filter of `query` (cursor and limit aside); `values`
/// are the run's indexed values ([`search_values`]), which the free search `q` also matches.
pub(crate) fn summary_matches(s: &RunSummary, values: &[String], query: &RunQuery) -> bool {
    if query
        .workflow
        .as_deref()
        .is_some_and(|w| w != s.workflow_id)
    {
        return false;
    }
    if query.status.is_some_and(|st| st != s.status) {
        return false;
    }
    if query.mode.is_some_and(|m| m != s.mode) {
        return false;
    }
    if query.trigger.is_some_and(|t| t != s.trigger) {
        return false;
    }
    if let Some(k) = query.key.as_deref() {
        if s.idempotency_key.as_deref() != Some(k) {
            return false;
        }
    }
    if query.since.is_some_and(|since| s.created_at.0 < since) {
        return false;
    }
    if query.until.is_some_and(|until| s.created_at.0 >= until) {
        return false;
    }
    if let Some(q) = query.q.as_deref().filter(|q| !q.is_empty()) {
        if !q_matches(s, values, q) {
            return false;
        }
    }
    if let Some(e) = query.error.as_deref() {
        if s.failure_reason().as_deref() != Some(e) {
            return false;
        }
    }
    true
}

/// The values of a run that the free search finds ([`super::SEARCH_VALUES_MAX`] and the rule
/// there): those of its input ([`crate::run::RunInput::search_values`]), then the strings of
/// each step's output in step order, walked depth first in document order; distinct; at most
/// [`super::SEARCH_VALUES_MAX`].
pub(crate) fn search_values(run: &RunRecord) -> Vec<String> {
    let mut out = run.input.search_values();
    let mut seen: std::collections::HashSet<String> = out.iter().cloned().collect();
    for step in &run.steps {
        if let Some(o) = &step.output {
            crate::run::input::search_values(o, &mut out, &mut seen);
        }
    }
    out
}

/// Start of the stats bucket holding `created_ms`: buckets are aligned on multiples of
/// `bucket_ms` since the unix epoch (so hourly buckets start on the hour, UTC). A
/// `bucket_ms <= 0` means one bucket for the whole range, starting at `since_ms`.
pub(crate) fn bucket_start(created_ms: i64, since_ms: i64, bucket_ms: i64) -> i64 {
    if bucket_ms <= 0 {
        since_ms
    } else {
        created_ms - created_ms.rem_euclid(bucket_ms)
    }
}

/// The instant retention orders a finished run by: its `finished_at`, or its `created_at`
/// when a final run carries no finish time. `None` for queued and running runs, which
/// retention never touches.
pub(crate) fn retention_instant(
    status: RunStatus,
    created_ms: i64,
    finished_ms: Option<i64>,
) -> Option<i64> {
    status.is_final().then(|| finished_ms.unwrap_or(created_ms))
}

/// [`retention_instant`] of a record.
pub(crate) fn record_retention_instant(r: &RunRecord) -> Option<i64> {
    retention_instant(r.status, r.created_at.0, r.finished_at.map(|t| t.0))
}

/// Whether a finished run is kept: `rank` is its 0-based place among its workflow's finished
/// runs, newest finish first (ties: higher id first).
pub(crate) fn retention_keeps(
    policy: &super::Retention,
    rank: usize,
    finished_ms: i64,
    now_ms: i64,
) -> bool {
    if policy.max_runs_per_workflow.is_some_and(|n| rank >= n) {
        return false;
    }
    if let Some(age) = policy.max_age_ms {
        if finished_ms < now_ms.saturating_sub(age) {
            return false;
        }
    }
    true
}

/// Newest-first order of `(finish ms, id)` pairs.
pub(crate) fn newest_first(a: &(i64, String), b: &(i64, String)) -> Ordering {
    b.cmp(a)
}

/// What `api_begin` does given the stored record (if any).
pub(crate) enum ApiDecision {
    /// Answer without writing.
    Answer(ApiBegin),
    /// Store the new record (fresh, replacing an expired one, or taking over a dead lease)
    /// and answer [`ApiBegin::Started`].
    Start,
}

/// The API idempotency rule (SPEC §5): an expired record counts as absent; a different
/// fingerprint is a conflict; a finished request replays; a live lease is in progress; a
/// dead lease is taken over.
pub(crate) fn api_decide(
    existing: Option<&ApiRecord>,
    new: &ApiRecord,
    now_ms: i64,
) -> ApiDecision {
    let Some(cur) = existing.filter(|r| r.expires_at > now_ms) else {
        return ApiDecision::Start;
    };
    if cur.fingerprint != new.fingerprint {
        return ApiDecision::Answer(ApiBegin::Conflict);
    }
    match &cur.state {
        ApiRecordState::Done { status, body } => ApiDecision::Answer(ApiBegin::Replay {
            status: *status,
            body: body.clone(),
        }),
        ApiRecordState::InProgress { lease_until, .. } if *lease_until > now_ms => {
            ApiDecision::Answer(ApiBegin::InProgress)
        }
        ApiRecordState::InProgress { .. } => ApiDecision::Start,
    }
}

/// Checks that a claim and the run it enqueues belong together.
pub(crate) fn check_claim_run(claim: &super::WebhookClaim, run: &RunRecord) -> StoreResult<()> {
    check_run(run)?;
    if claim.run_id != run.id || claim.workflow_id != run.workflow_id {
        return Err(StoreError::Backend(format!(
            "claim for run `{}` of workflow `{}` does not match run `{}` of workflow `{}`",
            claim.run_id, claim.workflow_id, run.id, run.workflow_id
        )));
    }
    Ok(())
}

/// Cuts a newest-first list fetched with one extra row into a page.
pub(crate) fn page(mut runs: Vec<RunSummary>, limit: usize) -> RunPage {
    let next_cursor = if runs.len() > limit {
        runs.truncate(limit);
        runs.last().map(encode_cursor)
    } else {
        None
    };
    RunPage { runs, next_cursor }
}
