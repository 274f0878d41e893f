//! Keyed breakers at the runtime's level: isolation between keys, naming, sharing one
//! policy, the bound on keys and least-recently-used eviction, idle expiry.

mod common;

use std::time::Duration;

use breaker_runtime::{registry, CallError, Config, KeyedBreaker, State};
use tokio::time::advance;

const SEC: Duration = Duration::from_secs(1);

#[tokio::test(start_paused = true)]
async fn one_dead_key_does_not_open_the_others() {
    let hooks = KeyedBreaker::<String>::new("p2::hooks", Config::default().threshold(3));
    for _ in 0..3 {
        let r = hooks
            .call("dead.example", async { Err::<(), _>("refused") })
            .await;
        assert!(matches!(r, Err(CallError::Inner("refused"))));
    }
    let r = hooks
        .call("dead.example", async { Ok::<_, &str>(()) })
        .await;
    let err = r.unwrap_err().into_breaker().unwrap();
    assert!(err.is_open());
    assert_eq!(err.name(), "p2::hooks[dead.example]");
    assert_eq!(
        hooks
            .call("alive.example", async { Ok::<_, ()>(1) })
            .await
            .unwrap(),
        1
    );
    assert_eq!(hooks.breaker("alive.example").state(), State::Closed);
    assert_eq!(hooks.len(), 2);
    let names: Vec<String> = registry()
        .snapshot()
        .into_iter()
        .map(|s| s.name)
        .filter(|n| n.starts_with("p2::hooks["))
        .collect();
    assert_eq!(
        names,
        ["p2::hooks[dead.example]", "p2::hooks[alive.example]"]
    );
}

#[test]
fn keys_of_every_documented_type_work() {
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    let by_int = KeyedBreaker::<u64>::new("p2::tenants", Config::default());
    assert_eq!(by_int.breaker(&42).name(), "p2::tenants[42]");
    let by_ip = KeyedBreaker::<IpAddr>::new("p2::ips", Config::default());
    let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
    assert_eq!(by_ip.breaker(&ip).name(), "p2::ips[127.0.0.1]");
    let by_addr = KeyedBreaker::<SocketAddr>::new("p2::addrs", Config::default());
    let addr = SocketAddr::new(ip, 8080);
    assert_eq!(by_addr.breaker(&addr).name(), "p2::addrs[127.0.0.1:8080]");
    let by_string = KeyedBreaker::<String>::new("p2::strings", Config::default());
    let owned = String::from("a");
    assert!(by_string
        .breaker(&owned)
        .handle()
        .same_breaker(&by_string.breaker("a").handle()));
}

#[test]
fn all_keys_share_the_policy_and_clones_share_the_map() {
    let k = KeyedBreaker::<String>::new("p2::policy", Config::default().threshold(2));
    let clone = k.clone();
    for key in ["a", "b"] {
        let _ = clone.call_sync(key, || Err::<(), _>(()));
        assert_eq!(k.breaker(key).state(), State::Closed);
        let _ = clone.call_sync(key, || Err::<(), _>(()));
        assert_eq!(k.breaker(key).state(), State::Open);
    }
    assert_eq!(k.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn idle_breakers_are_dropped_when_new_keys_arrive_open_ones_too() {
    let config = Config::default()
        .threshold(1)
        .cool_off(600 * SEC)
        .idle(60 * SEC);
    let k = KeyedBreaker::<String>::new("p2::idle", config);
    let _ = k.call_sync("healthy", || Ok::<_, ()>(()));
    let _ = k.call_sync("sick", || Err::<(), _>(()));
    let _ = k.call_sync("called", || Err::<(), _>(()));
    advance(30 * SEC).await;
    // Refused, but called: someone still depends on this key's state.
    let _ = k.call_sync("called", || Ok::<_, ()>(()));
    advance(31 * SEC).await;
    let _ = k.call_sync("newcomer", || Ok::<_, ()>(()));
    // Part four: an open key nobody called for `idle` protects nobody; it goes like a
    // fresh one (and gives back its `max_open` place).
    assert_eq!(k.len(), 2, "the idle ones went, open or not");
    assert!(!k.contains("sick") && !k.contains("healthy"));
    assert_eq!(k.breaker("called").state(), State::Open);
    assert!(
        common::left_registry("p2::idle[healthy]"),
        "it left the registry"
    );
}

#[tokio::test(start_paused = true)]
async fn a_recently_used_breaker_is_not_idle() {
    let k = KeyedBreaker::<String>::new("p2::recent", Config::default().idle(60 * SEC));
    let _ = k.call_sync("a", || Ok::<_, ()>(()));
    advance(20 * SEC).await;
    let _ = k.call_sync("b", || Ok::<_, ()>(())); // a sweep: "a" is stamped unused
    advance(30 * SEC).await;
    let _ = k.call_sync("a", || Ok::<_, ()>(())); // used again
    advance(35 * SEC).await;
    let _ = k.call_sync("c", || Ok::<_, ()>(())); // "a" was used 35 s ago: kept
    assert!(k.len() >= 2);
    assert!(registry().get("p2::recent[a]").is_some());
}

#[test]
fn the_bound_holds_and_open_breakers_outlive_fresh_ones() {
    let k = KeyedBreaker::<u32>::new("p2::bound", Config::default().threshold(1).max_keys(8));
    for i in 0..4 {
        let _ = k.call_sync(&i, || Err::<(), _>(()));
    }
    for i in 100..200 {
        let _ = k.call_sync(&i, || Ok::<_, ()>(()));
        assert!(k.len() <= 8);
    }
    for i in 0..4 {
        assert_eq!(k.breaker(&i).state(), State::Open, "key {i} kept its state");
    }
}

/// Part three: holding a key's breaker says nothing about its state; the fresh least
/// recently used one goes even if held, and the holder's breaker goes on, detached.
#[test]
fn a_breaker_held_outside_the_map_may_be_evicted_and_keeps_working() {
    let k = KeyedBreaker::<u32>::new("p2::held", Config::default().max_keys(2));
    let held = k.breaker(&1);
    let _ = k.call_sync(&2, || Ok::<_, ()>(()));
    let _ = k.call_sync(&3, || Ok::<_, ()>(()));
    assert!(k.len() <= 2);
    assert!(
        !k.contains(&1),
        "held, fresh and least recently used: evicted"
    );
    assert_eq!(held.call_sync(|| Ok::<_, ()>(7)).unwrap(), 7);
}

#[test]
fn many_threads_many_keys_lose_no_call() {
    let k = KeyedBreaker::<u32>::new("p2::threads", Config::default().max_keys(16));
    let pinned = k.breaker(&0);
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let k = k.clone();
            s.spawn(move || {
                for i in 0..5_000u32 {
                    let key = if i % 2 == 0 { 0 } else { t * 10_000 + i };
                    let r = k.call_sync(&key, || Ok::<_, ()>(i));
                    assert_eq!(r.unwrap(), i);
                }
            });
        }
    });
    assert!(k.len() <= 16);
    assert_eq!(
        pinned.stats().calls,
        10_000,
        "every call on the shared key counted"
    );
    assert_eq!(pinned.stats().successes, 10_000);
}

mod eviction_model {
    //! Random key streams and outcomes against the eviction rule: the bound always holds,
    //! and no open breaker is evicted while an evictable one exists.

    use std::collections::BTreeMap;

    use breaker_runtime::{registry, Config, KeyedBreaker};
    use proptest::prelude::*;

    const MAX: usize = 4;

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Known {
        Fresh,
        Open,
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn the_bound_holds_and_open_breakers_outlive_fresh_ones(
            ops in proptest::collection::vec((0u32..12, any::<bool>()), 1..80),
            run in any::<u64>(),
        ) {
            let name = format!("p2::model{run}");
            // threshold 1 and a long cool-off: a failure opens a key's breaker for the run.
            let config = Config::default().threshold(1).max_keys(MAX);
            let k = KeyedBreaker::<u32>::new(&name, config);
            let live = |key: u32| registry().get(format!("{name}[{key}]")).is_some();
            let mut known: BTreeMap<u32, Known> = BTreeMap::new();
            for (key, ok) in ops {
                known.retain(|k, _| live(*k));
                let new = !known.contains_key(&key);
                let full = known.len() >= MAX;
                let fresh_existed = known.iter().any(|(k, s)| *k != key && *s == Known::Fresh);
                let open_before: Vec<u32> = known
                    .iter()
                    .filter(|(k, s)| **k != key && **s == Known::Open)
                    .map(|(k, _)| *k)
                    .collect();
                let _ = k.call_sync(&key, || if ok { Ok(()) } else { Err(()) });
                prop_assert!(k.len() <= MAX, "len {} > {MAX}", k.len());
                if new && full && fresh_existed {
                    for o in open_before {
                        prop_assert!(live(o), "open key {o} evicted while a fresh one existed");
                    }
                }
                let state = known.get(&key).copied();
                let next = match (state, ok) {
                    (Some(Known::Open), _) => Known::Open, // open: refused, stays open
                    (_, true) => Known::Fresh,
                    (_, false) => Known::Open,
                };
                known.insert(key, next);
            }
        }
    }
}

#[test]
fn at_the_bound_exactly_the_least_recently_used_fresh_breaker_goes() {
    let k = KeyedBreaker::<String>::new("p2::lru", Config::default().max_keys(3));
    for key in ["a", "b", "c"] {
        let _ = k.call_sync(key, || Ok::<_, ()>(()));
    }
    let _ = k.call_sync("a", || Ok::<_, ()>(())); // a is used again: b is the oldest now
    let _ = k.call_sync("d", || Ok::<_, ()>(()));
    assert_eq!(k.len(), 3, "one out, one in");
    assert!(common::left_registry("p2::lru[b]"));
    for key in ["a", "c", "d"] {
        assert!(
            registry().get(format!("p2::lru[{key}]")).is_some(),
            "{key} kept"
        );
    }
    for i in 0..50 {
        let _ = k.call_sync(&format!("new-{i}"), || Ok::<_, ()>(()));
        assert_eq!(k.len(), 3);
    }
}
