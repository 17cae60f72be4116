//! Memory keys with TTL (SPEC §3 `memory`) on both backends: handed case C4, the atomic
//! no-overwrite claim under contention, and a model-based property test.
//!
//! Time is passed explicitly (`now_ms`); nothing sleeps.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::Barrier;

use fluxo::store::{
    InMemoryStore, MemoryEntry, MemoryStore, SledConfig, SledStore, Store, WriteOptions,
    WriteResult,
};
use proptest::prelude::*;
use serde_json::{json, Value};
use tempfile::TempDir;

/// 2026-01-01T00:00:00Z.
const T0: i64 = 1_767_225_600_000;

fn sled_store() -> (SledStore, TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = SledConfig::new(dir.path());
    cfg.cache_capacity_bytes = 8 * 1024 * 1024;
    cfg.flush_every_ms = None;
    (SledStore::open(&cfg).unwrap(), dir)
}

fn opts(allow_overwrite: bool, ttl_ms: Option<u64>) -> WriteOptions<'static> {
    WriteOptions {
        allow_overwrite,
        ttl_ms,
        owner: None,
    }
}

// ---------------------------------------------------------------------------------------------
// C4: a claim with a TTL expires by itself and can be claimed again
// ---------------------------------------------------------------------------------------------

async fn case_c4(store: &dyn MemoryStore) {
    let claim = opts(false, Some(2_000));
    let w = store
        .write("inv", "INV-1", &json!("a"), claim, T0)
        .await
        .unwrap();
    assert_eq!(
        w,
        WriteResult::Written {
            expires_at: Some(T0 + 2_000)
        }
    );

    match store
        .write("inv", "INV-1", &json!("b"), claim, T0 + 1_000)
        .await
        .unwrap()
    {
        WriteResult::Exists { existing } => {
            assert_eq!(existing.value, json!("a"));
            assert_eq!(existing.written_at, T0);
            assert_eq!(existing.expires_at, Some(T0 + 2_000));
        }
        other => panic!("expected Exists, got {other:?}"),
    }
    assert_eq!(
        store
            .read("inv", "INV-1", T0 + 1_000)
            .await
            .unwrap()
            .unwrap()
            .value,
        json!("a"),
        "the refused write changed nothing"
    );

    // No sweeper has run: the expired entry is still stored but reads as absent.
    assert_eq!(store.read("inv", "INV-1", T0 + 3_000).await.unwrap(), None);
    assert_eq!(store.namespaces().await.unwrap(), vec!["inv".to_string()]);

    let w = store
        .write("inv", "INV-1", &json!("c"), claim, T0 + 3_000)
        .await
        .unwrap();
    assert_eq!(
        w,
        WriteResult::Written {
            expires_at: Some(T0 + 5_000)
        }
    );
    let e = store
        .read("inv", "INV-1", T0 + 3_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(e.value, json!("c"));
    assert_eq!(e.written_at, T0 + 3_000);
    assert_eq!(
        e.expires_at,
        Some(T0 + 5_000),
        "a fresh expiry, not the old one"
    );

    // The old expiry must not take the new entry with it.
    assert_eq!(store.sweep_expired(T0 + 4_000, 100).await.unwrap(), 0);
    assert!(store
        .read("inv", "INV-1", T0 + 4_000)
        .await
        .unwrap()
        .is_some());
    assert_eq!(store.sweep_expired(T0 + 5_000, 100).await.unwrap(), 1);
    assert_eq!(store.namespaces().await.unwrap(), Vec::<String>::new());
}

#[tokio::test]
async fn c4_claim_expires_and_is_reclaimed_in_memory() {
    case_c4(&InMemoryStore::new()).await;
}

#[tokio::test]
async fn c4_claim_expires_and_is_reclaimed_sled() {
    let (store, _dir) = sled_store();
    case_c4(&store).await;
}

// ---------------------------------------------------------------------------------------------
// Other Memory operations, both backends
// ---------------------------------------------------------------------------------------------

async fn case_list_delete_namespaces(store: &dyn MemoryStore) {
    let keep = opts(true, None);
    for k in ["order:1", "order:2", "order:3", "other"] {
        store.write("shop", k, &json!(k), keep, T0).await.unwrap();
    }
    store
        .write("shop", "order:4", &json!(4), opts(true, Some(10)), T0)
        .await
        .unwrap();
    store.write("a", "x", &json!(1), keep, T0).await.unwrap();
    store
        .write("shop2", "order:1", &json!(1), keep, T0)
        .await
        .unwrap();

    let keys = |v: Vec<MemoryEntry>| v.into_iter().map(|e| e.key).collect::<Vec<_>>();
    assert_eq!(
        keys(store.list("shop", "order:", None, 10, T0).await.unwrap()),
        ["order:1", "order:2", "order:3", "order:4"]
    );
    assert_eq!(
        keys(
            store
                .list("shop", "order:", None, 10, T0 + 10)
                .await
                .unwrap()
        ),
        ["order:1", "order:2", "order:3"],
        "expired entries are not listed"
    );
    assert_eq!(
        keys(
            store
                .list("shop", "order:", Some("order:1"), 1, T0)
                .await
                .unwrap()
        ),
        ["order:2"]
    );
    assert_eq!(
        keys(
            store
                .list("shop", "", Some("order:3"), 10, T0 + 10)
                .await
                .unwrap()
        ),
        ["other"]
    );
    assert_eq!(store.namespaces().await.unwrap(), ["a", "shop", "shop2"]);

    assert!(store.delete("shop", "order:1", T0).await.unwrap());
    assert!(!store.delete("shop", "order:1", T0).await.unwrap());
    assert!(
        !store.delete("shop", "order:4", T0 + 10).await.unwrap(),
        "an expired entry is not a live one"
    );
    assert_eq!(store.read("shop", "order:1", T0).await.unwrap(), None);
    assert!(store.delete("a", "x", T0).await.unwrap());
    assert_eq!(store.namespaces().await.unwrap(), ["shop", "shop2"]);

    // Refused inputs are the caller's, not a store failure: not transient, nothing written.
    for (ns, key) in [
        ("bad\0ns", "k".to_string()),
        ("bad\nns", "k".to_string()),
        ("", "k".to_string()),
        ("shop", "k".repeat(fluxo::store::MAX_MEMORY_KEY_BYTES + 1)),
    ] {
        let e = store
            .write(ns, &key, &json!(1), keep, T0)
            .await
            .expect_err("refused");
        assert!(
            matches!(e, fluxo::store::StoreError::Invalid(_)) && !e.is_transient(),
            "{ns:?}: {e:?}"
        );
    }
    assert!(
        matches!(
            store.read("bad\0ns", "k", T0).await,
            Err(fluxo::store::StoreError::Invalid(_))
        ),
        "a NUL byte in a namespace is refused on reads too"
    );
    let at_limit = "k".repeat(fluxo::store::MAX_MEMORY_KEY_BYTES);
    store
        .write("shop", &at_limit, &json!(1), keep, T0)
        .await
        .unwrap();
    assert!(store.delete("shop", &at_limit, T0).await.unwrap());
    assert_eq!(store.namespaces().await.unwrap(), ["shop", "shop2"]);
}

#[tokio::test]
async fn list_delete_namespaces_in_memory() {
    case_list_delete_namespaces(&InMemoryStore::new()).await;
}

#[tokio::test]
async fn list_delete_namespaces_sled() {
    let (store, _dir) = sled_store();
    case_list_delete_namespaces(&store).await;
}

// ---------------------------------------------------------------------------------------------
// Contention: of 64 concurrent no-overwrite writers exactly one wins
// ---------------------------------------------------------------------------------------------

const WRITERS: usize = 64;
const TRIALS: usize = 50;

async fn contended_claims(store: Arc<dyn Store>) {
    let barrier = Arc::new(Barrier::new(WRITERS));
    let handles: Vec<_> = (0..WRITERS)
        .map(|w| {
            let store = store.clone();
            let barrier = barrier.clone();
            tokio::spawn(async move {
                let mut won = Vec::new();
                for trial in 0..TRIALS {
                    barrier.wait().await;
                    let key = format!("evt-{trial}");
                    let r = store
                        .write("claims", &key, &json!(w), opts(false, Some(60_000)), T0)
                        .await
                        .unwrap();
                    if matches!(r, WriteResult::Written { .. }) {
                        won.push(trial);
                    }
                }
                won
            })
        })
        .collect();
    let mut winners = vec![0usize; TRIALS];
    for h in handles {
        for trial in h.await.unwrap() {
            winners[trial] += 1;
        }
    }
    assert_eq!(winners, vec![1; TRIALS], "exactly one winner per trial");
    for trial in 0..TRIALS {
        assert!(store
            .read("claims", &format!("evt-{trial}"), T0)
            .await
            .unwrap()
            .is_some());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_concurrent_claims_one_winner_sled() {
    let (store, _dir) = sled_store();
    contended_claims(Arc::new(store)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_concurrent_claims_one_winner_in_memory() {
    contended_claims(Arc::new(InMemoryStore::new())).await;
}

/// Expired entries are claimable again, by exactly one of many contenders.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn contended_reclaim_of_expired_entry_sled() {
    let (store, _dir) = sled_store();
    let store: Arc<dyn Store> = Arc::new(store);
    for trial in 0..10 {
        let key = format!("k{trial}");
        store
            .write("ns", &key, &json!("old"), opts(false, Some(5)), T0)
            .await
            .unwrap();
        let barrier = Arc::new(Barrier::new(16));
        let tasks: Vec<_> = (0..16)
            .map(|w| {
                let (store, barrier, key) = (store.clone(), barrier.clone(), key.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    let r = store
                        .write("ns", &key, &json!(w), opts(false, Some(5)), T0 + 5)
                        .await
                        .unwrap();
                    usize::from(matches!(r, WriteResult::Written { .. }))
                })
            })
            .collect();
        let mut wins = 0;
        for t in tasks {
            wins += t.await.unwrap();
        }
        assert_eq!(wins, 1);
        assert_ne!(
            store.read("ns", &key, T0 + 5).await.unwrap().unwrap().value,
            json!("old")
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Model-based property test: both backends answer exactly like a BTreeMap model
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Op {
    Write {
        ns: &'static str,
        key: &'static str,
        value: u8,
        allow_overwrite: bool,
        ttl_ms: Option<u64>,
    },
    Read {
        ns: &'static str,
        key: &'static str,
    },
    Delete {
        ns: &'static str,
        key: &'static str,
    },
    List {
        ns: &'static str,
        prefix: &'static str,
        after: Option<&'static str>,
        limit: usize,
    },
    Namespaces,
    Advance(i64),
    Sweep(usize),
}

const NAMESPACES: [&str; 3] = ["a", "ab", "b"];
const KEYS: [&str; 5] = ["k", "k1", "k2", "kx", "z"];
const PREFIXES: [&str; 4] = ["", "k", "k1", "z"];

fn op() -> impl Strategy<Value = Op> {
    let ns = proptest::sample::select(&NAMESPACES[..]);
    let key = proptest::sample::select(&KEYS[..]);
    prop_oneof![
        4 => (
            ns.clone(),
            key.clone(),
            any::<u8>(),
            any::<bool>(),
            proptest::option::of(0u64..3_000),
        )
            .prop_map(|(ns, key, value, allow_overwrite, ttl_ms)| Op::Write {
                ns,
                key,
                value,
                allow_overwrite,
                ttl_ms
            }),
        3 => (ns.clone(), key.clone()).prop_map(|(ns, key)| Op::Read { ns, key }),
        1 => (ns.clone(), key.clone()).prop_map(|(ns, key)| Op::Delete { ns, key }),
        1 => (
            ns,
            proptest::sample::select(&PREFIXES[..]),
            proptest::option::of(key),
            0usize..4,
        )
            .prop_map(|(ns, prefix, after, limit)| Op::List {
                ns,
                prefix,
                after,
                limit
            }),
        1 => Just(Op::Namespaces),
        2 => (0i64..2_500).prop_map(Op::Advance),
        1 => (0usize..4).prop_map(Op::Sweep),
    ]
}

/// What an operation answered, in a backend-neutral form.
#[derive(Debug, Clone, PartialEq)]
enum Answer {
    Write(WriteResult),
    Read(Option<MemoryEntry>),
    Delete(bool),
    List(Vec<MemoryEntry>),
    Namespaces(Vec<String>),
    Sweep(usize),
    None,
}

/// The reference: `(namespace, key) -> entry`.
#[derive(Default)]
struct Model {
    entries: BTreeMap<(String, String), MemoryEntry>,
}

impl Model {
    fn live(&self, ns: &str, key: &str, now: i64) -> Option<&MemoryEntry> {
        self.entries
            .get(&(ns.to_string(), key.to_string()))
            .filter(|e| e.expires_at.is_none_or(|x| x > now))
    }

    fn apply(&mut self, op: &Op, now: i64) -> Answer {
        match op {
            Op::Write {
                ns,
                key,
                value,
                allow_overwrite,
                ttl_ms,
            } => {
                if !allow_overwrite {
                    if let Some(e) = self.live(ns, key, now) {
                        return Answer::Write(WriteResult::Exists {
                            existing: e.clone(),
                        });
                    }
                }
                let expires_at = ttl_ms.map(|t| now + t as i64);
                self.entries.insert(
                    (ns.to_string(), key.to_string()),
                    MemoryEntry {
                        namespace: ns.to_string(),
                        key: key.to_string(),
                        value: json!(value),
                        written_at: now,
                        expires_at,
                        owner: None,
                    },
                );
                Answer::Write(WriteResult::Written { expires_at })
            }
            Op::Read { ns, key } => Answer::Read(self.live(ns, key, now).cloned()),
            Op::Delete { ns, key } => {
                let live = self.live(ns, key, now).is_some();
                self.entries.remove(&(ns.to_string(), key.to_string()));
                Answer::Delete(live)
            }
            Op::List {
                ns,
                prefix,
                after,
                limit,
            } => Answer::List(
                self.entries
                    .values()
                    .filter(|e| e.namespace == *ns && e.key.starts_with(prefix))
                    .filter(|e| after.is_none_or(|a| e.key.as_str() > a))
                    .filter(|e| e.expires_at.is_none_or(|x| x > now))
                    .take(*limit)
                    .cloned()
                    .collect(),
            ),
            Op::Namespaces => {
                let mut ns: Vec<String> = self.entries.keys().map(|(n, _)| n.clone()).collect();
                ns.dedup();
                Answer::Namespaces(ns)
            }
            Op::Sweep(max) => {
                let mut due: Vec<(i64, String, String)> = self
                    .entries
                    .values()
                    .filter_map(|e| {
                        e.expires_at
                            .filter(|x| *x <= now)
                            .map(|x| (x, e.namespace.clone(), e.key.clone()))
                    })
                    .collect();
                due.sort();
                due.truncate(*max);
                for (_, ns, key) in &due {
                    self.entries.remove(&(ns.clone(), key.clone()));
                }
                Answer::Sweep(due.len())
            }
            Op::Advance(_) => Answer::None,
        }
    }
}

async fn apply(store: &dyn MemoryStore, op: &Op, now: i64) -> Answer {
    match op {
        Op::Write {
            ns,
            key,
            value,
            allow_overwrite,
            ttl_ms,
        } => Answer::Write(
            store
                .write(
                    ns,
                    key,
                    &Value::from(*value),
                    opts(*allow_overwrite, *ttl_ms),
                    now,
                )
                .await
                .unwrap(),
        ),
        Op::Read { ns, key } => Answer::Read(store.read(ns, key, now).await.unwrap()),
        Op::Delete { ns, key } => Answer::Delete(store.delete(ns, key, now).await.unwrap()),
        Op::List {
            ns,
            prefix,
            after,
            limit,
        } => Answer::List(store.list(ns, prefix, *after, *limit, now).await.unwrap()),
        Op::Namespaces => Answer::Namespaces(store.namespaces().await.unwrap()),
        Op::Sweep(max) => Answer::Sweep(store.sweep_expired(now, *max).await.unwrap()),
        Op::Advance(_) => Answer::None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn both_backends_match_the_model(ops in proptest::collection::vec(op(), 1..60)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let mem = InMemoryStore::new();
        let (sled, _dir) = sled_store();
        let mut model = Model::default();
        let mut now = T0;
        for (i, op) in ops.iter().enumerate() {
            if let Op::Advance(d) = op {
                now += d;
                continue;
            }
            let expected = model.apply(op, now);
            prop_assert_eq!(&rt.block_on(apply(&mem, op, now)), &expected, "in-memory, op #{}: {:?}", i, op);
            prop_assert_eq!(&rt.block_on(apply(&sled, op, now)), &expected, "sled, op #{}: {:?}", i, op);
        }
        // Whatever happened, a full sweep leaves exactly the live entries.
        let far = now + 10_000;
        let left = rt.block_on(mem.sweep_expired(far, usize::MAX)).unwrap();
        prop_assert_eq!(rt.block_on(sled.sweep_expired(far, usize::MAX)).unwrap(), left);
        let everything = Op::List { ns: "a", prefix: "", after: None, limit: 100 };
        prop_assert_eq!(rt.block_on(apply(&mem, &everything, far)), rt.block_on(apply(&sled, &everything, far)));
        prop_assert_eq!(rt.block_on(mem.namespaces()).unwrap(), rt.block_on(sled.namespaces()).unwrap());
    }
}

// ---------------------------------------------------------------------------------------------
// Sweeper
// ---------------------------------------------------------------------------------------------

async fn case_sweep_once(store: &dyn Store) {
    for i in 0..2_500 {
        store
            .write(
                "bulk",
                &format!("k{i:05}"),
                &json!(i),
                opts(true, Some(1_000)),
                T0,
            )
            .await
            .unwrap();
    }
    store
        .write("bulk", "forever", &json!(0), opts(true, None), T0)
        .await
        .unwrap();
    let early = fluxo::store::sweep_once(store, T0 + 999).await.unwrap();
    assert_eq!(early, fluxo::store::SweepReport::default());
    let report = fluxo::store::sweep_once(store, T0 + 1_000).await.unwrap();
    assert_eq!(report.memory, 2_500, "several batches in one pass");
    assert_eq!(store.list("bulk", "", None, 10, T0).await.unwrap().len(), 1);
}

#[tokio::test]
async fn sweep_once_removes_every_due_entry_in_memory() {
    case_sweep_once(&InMemoryStore::new()).await;
}

#[tokio::test]
async fn sweep_once_removes_every_due_entry_sled() {
    let (store, _dir) = sled_store();
    case_sweep_once(&store).await;
}

#[tokio::test]
async fn spawned_sweeper_runs_a_first_pass_at_once() {
    let clock = Arc::new(fluxo::clock::ManualClock::new(T0 + 10_000));
    let store: Arc<dyn Store> = Arc::new(InMemoryStore::new());
    store
        .write("ns", "gone", &json!(1), opts(true, Some(5)), T0)
        .await
        .unwrap();
    store
        .write("ns", "kept", &json!(1), opts(true, Some(60_000)), T0)
        .await
        .unwrap();
    let handle =
        fluxo::store::spawn_sweeper(store.clone(), clock, std::time::Duration::from_secs(3_600));
    // The first pass is immediate; wait for it (bounded), then stop the task.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while store.list("ns", "", None, 10, T0).await.unwrap().len() != 1 {
        assert!(std::time::Instant::now() < deadline, "sweeper did not run");
        tokio::task::yield_now().await;
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    handle.abort();
    assert_eq!(
        store.list("ns", "", None, 10, T0).await.unwrap()[0].key,
        "kept"
    );
}
