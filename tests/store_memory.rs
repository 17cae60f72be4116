//! Memory keys with TTL (SPEC §3 `memory`): a model-based property test of the in-memory and
//! sled stores, and the spawned sweeper. The handed cases (C4, listing, contended claims,
//! sweeps) run on every backend, PostgreSQL included, in `tests/store_conformance.rs`.
//!
//! Time is passed explicitly (`now_ms`); nothing sleeps.

use std::collections::BTreeMap;
use std::sync::Arc;

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
