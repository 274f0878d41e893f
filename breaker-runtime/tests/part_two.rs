//! Part two of DESIGN.md at the runtime's level: verdicts, owned call futures, the counts
//! part two adds, observers, and keyed breakers (isolation, naming, bounds, idle expiry).

mod common;

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering::SeqCst},
        Arc, Mutex,
    },
    time::Duration,
};

use breaker_runtime::{
    observe, registry, Breaker, CallError, Cause, Config, KeyedBreaker, State, Verdict,
};
use tokio::time::advance;

const SEC: Duration = Duration::from_secs(1);

/// An HTTP-like dependency: `Ok(status)` for every answer.
fn status_verdict(r: &Result<u16, &'static str>) -> Verdict {
    match r {
        Ok(503) => Verdict::Failure,
        Ok(429) => Verdict::OpenFor(Duration::from_secs(30)),
        Ok(404) => Verdict::Neutral,
        Ok(_) => Verdict::Success,
        Err(_) => Verdict::Failure,
    }
}

#[tokio::test(start_paused = true)]
async fn an_ok_judged_a_failure_trips_the_breaker_and_still_reaches_the_caller() {
    let b = Breaker::new("p2::ok_failure", Config::default().threshold(2));
    for _ in 0..2 {
        let r = b.call_classified(status_verdict, async { Ok(503) }).await;
        assert_eq!(r.unwrap(), 503, "the caller gets the answer as it was");
    }
    assert_eq!(b.state(), State::Open);
    assert_eq!((b.stats().failures, b.stats().successes), (2, 0));
    let r = b.call_classified(status_verdict, async { Ok(200) }).await;
    assert!(r.unwrap_err().is_open());
}

#[tokio::test(start_paused = true)]
async fn open_for_opens_at_once_for_that_long_and_retry_in_says_so() {
    let b = Breaker::new("p2::open_for", Config::default().threshold(5));
    let r = b.call_classified(status_verdict, async { Ok(429) }).await;
    assert_eq!(r.unwrap(), 429);
    assert_eq!(
        b.state(),
        State::Open,
        "one 429 opens, whatever the threshold"
    );
    assert_eq!(b.retry_in(), Some(Duration::from_secs(30)));
    let err = b.call(async { Ok::<_, ()>(()) }).await.unwrap_err();
    assert_eq!(err.breaker_error().unwrap().retry_in(), Some(30 * SEC));
    advance(29 * SEC).await;
    assert_eq!(b.state(), State::Open);
    advance(SEC).await;
    assert_eq!(b.state(), State::HalfOpen);
}

#[tokio::test(start_paused = true)]
async fn open_for_shorter_than_the_cool_off_opens_for_exactly_that_long() {
    const MS: Duration = Duration::from_millis(1);
    // The default 10 s cool-off; the server said `Retry-After: 2`.
    let b = Breaker::new("p2::open_for_short", Config::default().threshold(5));
    let two = |_: &Result<(), ()>| Verdict::OpenFor(2 * SEC);
    let _ = b.call_sync_classified(two, || Ok(()));
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.retry_in(), Some(2 * SEC), "not raised to the cool-off");
    advance(2 * SEC - MS).await;
    assert_eq!(b.state(), State::Open, "not before the 2 s");
    let err = b.call_sync(|| Ok::<_, ()>(())).unwrap_err();
    assert_eq!(err.breaker_error().unwrap().retry_in(), Some(MS));
    advance(MS).await;
    assert_eq!(b.state(), State::HalfOpen, "after 2 s, not after 10 s");
    assert_eq!(b.call_sync(|| Ok::<_, ()>(7)).unwrap(), 7);
    assert_eq!(b.state(), State::Closed);
}

#[tokio::test(start_paused = true)]
async fn open_for_zero_opens_for_the_cool_off_with_its_backoff() {
    let config = Config::default()
        .cool_off(10 * SEC)
        .max_cool_off(60 * SEC)
        .threshold(1);
    let b = Breaker::new("p2::open_for_zero", config);
    let zero = |_: &Result<(), ()>| Verdict::OpenFor(Duration::ZERO);
    let _ = b.call_sync_classified(zero, || Ok(()));
    assert_eq!(b.retry_in(), Some(10 * SEC), "the cool-off");
    advance(10 * SEC).await;
    assert_eq!(b.state(), State::HalfOpen);
    // A probe judged so reopens with the backoff, as a failed probe would.
    let _ = b.call_sync_classified(zero, || Ok(()));
    assert_eq!(b.retry_in(), Some(20 * SEC), "the cool-off doubled");
}

#[tokio::test(start_paused = true)]
async fn open_for_is_capped_by_max_cool_off_else_by_five_minutes() {
    let config = Config::default()
        .cool_off(10 * SEC)
        .max_cool_off(60 * SEC)
        .threshold(1);
    let b = Breaker::new("p2::cap", config);
    let long = |_: &Result<(), ()>| Verdict::OpenFor(Duration::from_secs(86_400));
    let _ = b.call_sync_classified(long, || Ok(()));
    assert_eq!(b.retry_in(), Some(60 * SEC), "at most max_cool_off");
    advance(60 * SEC).await;
    assert_eq!(b.state(), State::HalfOpen);

    let no_max = Breaker::new("p2::cap_unset", Config::default());
    let _ = no_max.call_sync_classified(long, || Ok(()));
    assert_eq!(
        no_max.retry_in(),
        Some(300 * SEC),
        "at most 5 minutes without max_cool_off (issue 35)"
    );
    advance(300 * SEC).await;
    assert_eq!(no_max.state(), State::HalfOpen);
}

#[tokio::test(start_paused = true)]
async fn a_probe_judged_open_for_reopens_for_that_long() {
    let b = Breaker::new(
        "p2::probe_open_for",
        Config::default().threshold(1).cool_off(SEC),
    );
    let _ = b.call_sync(|| Err::<u16, _>("down"));
    advance(SEC).await;
    let r = b.call_classified(status_verdict, async { Ok(429) }).await;
    assert_eq!(r.unwrap(), 429);
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.retry_in(), Some(30 * SEC));
}

#[tokio::test(start_paused = true)]
async fn a_neutral_probe_gives_its_slot_back() {
    let b = Breaker::new(
        "p2::neutral_probe",
        Config::default().threshold(1).cool_off(SEC),
    );
    let _ = b.call_sync(|| Err::<u16, _>("down"));
    advance(SEC).await;
    let r = b.call_classified(status_verdict, async { Ok(404) }).await;
    assert_eq!(r.unwrap(), 404);
    assert_eq!(
        b.state(),
        State::HalfOpen,
        "neutral: neither closes nor reopens"
    );
    // The slot is free again: the next call is admitted as a probe and closes it.
    let r = b.call_classified(status_verdict, async { Ok(200) }).await;
    assert_eq!(r.unwrap(), 200);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.stats().neutral, 1);
}

#[test]
fn a_panic_in_classify_counts_as_a_failure_and_reaches_the_caller() {
    let b = Breaker::new("p2::classify_panics", Config::default().threshold(1));
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        b.call_sync_classified(|_: &Result<(), ()>| panic!("bad classifier"), || Ok(()))
    }));
    assert!(caught.is_err());
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.stats().failures, 1);
}

#[tokio::test(start_paused = true)]
async fn a_cancelled_call_is_counted_as_cancelled_and_nothing_else() {
    let b = Breaker::new("p2::cancelled", Config::default());
    let mut call = Box::pin(b.call(async {
        tokio::time::sleep(SEC).await;
        Ok::<_, ()>(())
    }));
    assert!(futures_poll_once(call.as_mut()).await.is_none());
    drop(call);
    let s = b.stats();
    assert_eq!(
        (s.calls, s.cancelled, s.successes, s.failures),
        (1, 1, 0, 0)
    );
}

/// Polls once; `Some` if it finished.
async fn futures_poll_once<F: std::future::Future + Unpin>(f: F) -> Option<F::Output> {
    let mut f = f;
    std::future::poll_fn(|cx| {
        std::task::Poll::Ready(match std::pin::Pin::new(&mut f).poll(cx) {
            std::task::Poll::Ready(v) => Some(v),
            std::task::Poll::Pending => None,
        })
    })
    .await
}

#[tokio::test]
async fn an_owned_call_future_can_be_spawned() {
    let b = Breaker::new("p2::owned", Config::default());
    let task = tokio::spawn(b.clone().call_owned(async { Ok::<_, ()>(7) }));
    assert_eq!(task.await.unwrap().unwrap(), 7);
    let judged = tokio::spawn(
        b.clone()
            .call_owned_classified(|_: &Result<u8, ()>| Verdict::Failure, async { Ok(1) }),
    );
    assert_eq!(judged.await.unwrap().unwrap(), 1);
    assert_eq!((b.stats().successes, b.stats().failures), (1, 1));
}

#[test]
fn observers_see_every_transition_in_order_until_dropped() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let watch = observe(move |t| {
        if t.name == "p2::observed" {
            log.lock().unwrap().push((t.from, t.to));
        }
    });
    let b = Breaker::new("p2::observed", Config::default().threshold(1));
    let _ = b.call_sync(|| Err::<(), _>(()));
    b.handle().reset();
    drop(watch);
    b.handle().force_open();
    assert_eq!(
        *seen.lock().unwrap(),
        [(State::Closed, State::Open), (State::Open, State::Closed)]
    );
}

#[test]
fn a_panicking_observer_does_not_stop_the_others() {
    let _bad = observe(|t| {
        if t.name == "p2::bad_observer" {
            panic!("observer bug")
        }
    });
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    let _good = observe(move |t| {
        if t.name == "p2::bad_observer" {
            c.fetch_add(1, SeqCst);
        }
    });
    let b = Breaker::new("p2::bad_observer", Config::default());
    b.handle().force_open();
    b.handle().reset();
    assert_eq!(count.load(SeqCst), 2);
}

#[test]
fn a_verdict_opening_names_its_cause() {
    let causes = Arc::new(Mutex::new(Vec::new()));
    let log = causes.clone();
    let b = Breaker::new(
        "p2::verdict_cause",
        Config::default().on_state_change(move |t| log.lock().unwrap().push(t.cause)),
    );
    let _ = b.call_sync_classified(|_: &Result<(), ()>| Verdict::OpenFor(SEC), || Ok(()));
    assert_eq!(*causes.lock().unwrap(), [Cause::Verdict { open_for: SEC }]);
}

// --- keyed breakers ---

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

/// What users move across threads is `Send + Sync`, checked at compile time (issue 10).
#[test]
fn the_public_types_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Breaker>();
    send_sync::<breaker_runtime::Handle>();
    send_sync::<breaker_runtime::BreakerError>();
    send_sync::<CallError<std::io::Error>>();
    send_sync::<KeyedBreaker<String>>();
    send_sync::<breaker_runtime::Name>();
    send_sync::<breaker_runtime::Registry>();
    type Fut = std::future::Ready<Result<u8, std::io::Error>>;
    send_sync::<breaker_runtime::CallFuture<'static, Fut, fn(&std::io::Error) -> bool>>();
    send::<breaker_runtime::CallFuture<'static, Fut, fn(&std::io::Error) -> bool, Breaker>>();
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
