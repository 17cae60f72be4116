//! The Memory browser (SPEC §3): namespaces, a page of a namespace's live keys, one key, and
//! the delete by hand (the manual compensation after checking the destination). Shared by
//! `GET|DELETE /api/v1/memory…`, the desktop's `memory_*` commands and `fluxo memory`.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::{AppError, AppResult, AppState};
use crate::store::MemoryEntry;

/// A Memory entry as JSON with RFC 3339 instants: `{namespace, key, value, written_at,
/// expires_at?, owner?}` (what `fluxo memory get|list` prints).
pub fn entry_json(e: &MemoryEntry) -> Value {
    let mut m = BTreeMap::new();
    m.insert("namespace", Value::String(e.namespace.clone()));
    m.insert("key", Value::String(e.key.clone()));
    m.insert("value", e.value.clone());
    m.insert(
        "written_at",
        Value::String(crate::clock::rfc3339(e.written_at)),
    );
    if let Some(x) = e.expires_at {
        m.insert("expires_at", Value::String(crate::clock::rfc3339(x)));
    }
    if let Some(o) = &e.owner {
        m.insert("owner", serde_json::to_value(o).unwrap_or(Value::Null));
    }
    serde_json::to_value(m).unwrap_or(Value::Null)
}

/// [`entry_json`] plus `ttl_left_ms` (at `now`) when the key expires.
fn entry_view(e: &MemoryEntry, now: i64) -> Value {
    let mut v = entry_json(e);
    if let (Some(x), Value::Object(m)) = (e.expires_at, &mut v) {
        m.insert("ttl_left_ms".into(), json!((x - now).max(0)));
    }
    v
}

fn key_not_found(ns: &str, key: &str) -> AppError {
    AppError::not_found(
        "key_not_found",
        format!("no key `{key}` in namespace `{ns}` (or it expired)"),
    )
}

/// The namespace and key of a Memory path, by the store's rules
/// ([`crate::store::check_namespace`], [`crate::store::check_memory_key`]): `invalid_namespace`
/// / `key_too_long` before the store is asked (a NUL in a namespace used to reach the store
/// and come back as a retryable `unavailable`).
fn check_memory_path(ns: &str, key: &str) -> AppResult<()> {
    crate::store::check_namespace(ns).map_err(|e| AppError::memory_name("namespace", e))?;
    crate::store::check_memory_key(key).map_err(|e| AppError::memory_name("key", e))
}

/// Every namespace.
pub async fn namespaces(state: &AppState) -> AppResult<Vec<String>> {
    state.store().namespaces().await.map_err(AppError::store)
}

/// The most keys counted per namespace by [`namespace_counts`] (past it, `more: true`).
pub const COUNT_CAP: usize = 10_000;

/// Live keys per namespace: `[{namespace, keys, more}]` in namespace order; `keys` stops at
/// [`COUNT_CAP`] with `more: true` (the Memory browser shows `10,000+`). Counted by paging the
/// store's key order, so a namespace costs at most `COUNT_CAP` keys read.
pub async fn namespace_counts(state: &AppState) -> AppResult<Vec<Value>> {
    let now = state.clock().now_ms();
    let mut out = Vec::new();
    for ns in namespaces(state).await? {
        let (mut keys, mut after): (usize, Option<String>) = (0, None);
        let more = loop {
            let page = state
                .store()
                .list(&ns, "", after.as_deref(), 1000, now)
                .await
                .map_err(AppError::store)?;
            keys += page.len();
            if keys > COUNT_CAP {
                keys = COUNT_CAP;
                break true;
            }
            match page.last() {
                Some(last) if page.len() == 1000 => after = Some(last.key.clone()),
                _ => break false,
            }
        };
        out.push(json!({"namespace": ns, "keys": keys, "more": more}));
    }
    Ok(out)
}

/// Live keys of a namespace: `{namespace, entries: [{namespace, key, value, written_at,
/// expires_at?, ttl_left_ms?}], next_after}` with up to `limit` (1..=1000, default 100) keys
/// after `after` that start with `prefix`.
pub async fn page(
    state: &AppState,
    ns: &str,
    prefix: Option<&str>,
    after: Option<&str>,
    limit: Option<usize>,
) -> AppResult<Value> {
    let limit = limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(AppError::bad_request(
            "invalid_parameter",
            format!("`limit`: {limit} is not between 1 and 1000"),
        ));
    }
    crate::store::check_namespace(ns).map_err(|e| AppError::memory_name("namespace", e))?;
    let now = state.clock().now_ms();
    let entries = state
        .store()
        .list(ns, prefix.unwrap_or(""), after, limit + 1, now)
        .await
        .map_err(AppError::store)?;
    let next = (entries.len() > limit)
        .then(|| entries.get(limit - 1).map(|e| e.key.clone()))
        .flatten();
    let items: Vec<Value> = entries
        .iter()
        .take(limit)
        .map(|e| entry_view(e, now))
        .collect();
    Ok(json!({"namespace": ns, "entries": items, "next_after": next}))
}

/// One live key with its time left, or `key_not_found`.
pub async fn entry(state: &AppState, ns: &str, key: &str) -> AppResult<Value> {
    check_memory_path(ns, key)?;
    let now = state.clock().now_ms();
    let e = state
        .store()
        .read(ns, key, now)
        .await
        .map_err(AppError::store)?
        .ok_or_else(|| key_not_found(ns, key))?;
    Ok(entry_view(&e, now))
}

/// Delete a key by hand, made durable before answering; `key_not_found` if there was no live
/// key.
pub async fn delete(state: &AppState, ns: &str, key: &str) -> AppResult<()> {
    check_memory_path(ns, key)?;
    let now = state.clock().now_ms();
    let deleted = state
        .store()
        .delete(ns, key, now)
        .await
        .map_err(AppError::store)?;
    state.commit().durable().await.map_err(AppError::store)?;
    if !deleted {
        return Err(key_not_found(ns, key));
    }
    tracing::info!(namespace = %ns, "memory key deleted by hand");
    Ok(())
}
