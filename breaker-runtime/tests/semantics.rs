//! One test per rule of DESIGN.md's *Semantics*, driven by paused time: states, counts, and
//! which calls reached the dependency.

mod common;

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering::SeqCst},
        Arc, Mutex,
    },
    time::Duration,
};

use breaker_runtime::{registry, Breaker, BreakerError, CallError, Config, State, Stats};
use common::Dependency;
use tokio::{sync::oneshot, time::advance};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

fn open_error<T: std::fmt::Debug>(r: Result<T, CallError<&'static str>>) -> BreakerError {
    match r {
        Err(CallError::Breaker(e)) => e,
        other => panic!("expected a breaker error, got {other:?}"),
    }
}

/// Trips a breaker with `n` failing calls.
async fn fail_n(b: &Breaker, dep: &Dependency, n: usize) {
    for _ in 0..n {
        let _ = b.call(dep.fail()).await;
    }
}

/// A breaker that opens on one failure, opened by one: where every open and half-open story
/// here starts.
async fn tripped(name: &str, cool_off: Duration) -> (Breaker, Dependency) {
    let b = Breaker::new(name, Config::default().threshold(1).cool_off(cool_off));
    let dep = Dependency::default();
    fail_n(&b, &dep, 1).await;
    (b, dep)
}

#[tokio::test(start_paused = true)]
async fn closed_passes_calls_and_counts_them() {
    let b = Breaker::new("sem::closed", Config::default());
    let dep = Dependency::default();
    assert_eq!(b.call(dep.ok(Duration::ZERO)).await, Ok("ok"));
    assert_eq!(
        b.call(dep.fail()).await,
        Err(CallError::Inner("502 bad gateway"))
    );
    assert_eq!(dep.reached(), 2);
    assert_eq!(b.state(), State::Closed);
    let s = b.stats();
    assert_eq!((s.calls, s.successes, s.failures, s.rejected), (2, 1, 1, 0));
}

#[tokio::test(start_paused = true)]
async fn consecutive_failures_open_and_a_success_resets_the_streak() {
    let b = Breaker::new("sem::threshold", Config::default().threshold(3));
    let dep = Dependency::default();
    fail_n(&b, &dep, 2).await;
    b.call(dep.ok(Duration::ZERO)).await.unwrap();
    fail_n(&b, &dep, 2).await;
    assert_eq!(b.state(), State::Closed, "the success broke the streak");
    fail_n(&b, &dep, 1).await;
    assert_eq!(b.state(), State::Open);
    assert_eq!(dep.reached(), 6);
}

#[tokio::test(start_paused = true)]
async fn open_fails_fast_without_polling_the_body() {
    let (b, _) = tripped("sem::open", 10 * SEC).await;
    advance(4 * SEC).await;
    let polled = AtomicUsize::new(0);
    let e = open_error(
        b.call(async {
            polled.fetch_add(1, SeqCst);
            Ok::<(), &str>(())
        })
        .await,
    );
    assert_eq!(polled.load(SeqCst), 0, "the body was polled while open");
    assert!(e.is_open());
    assert_eq!(e.retry_in(), Some(6 * SEC));
    assert_eq!(b.retry_in(), Some(6 * SEC));
    assert_eq!(
        e.to_string(),
        "circuit breaker `sem::open` is open; retry in 6.0s"
    );
    let s = b.stats();
    assert_eq!((s.calls, s.rejected), (2, 1));
}

#[tokio::test(start_paused = true)]
async fn after_the_cool_off_one_probe_closes_it() {
    let (b, dep) = tripped("sem::probe", 5 * SEC).await;
    advance(5 * SEC - MS).await;
    assert_eq!(b.state(), State::Open);
    advance(MS).await;
    assert_eq!(
        b.state(),
        State::HalfOpen,
        "reading the state after the cool-off"
    );
    b.call(dep.ok(Duration::ZERO)).await.unwrap();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(dep.reached(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_failed_probe_reopens_and_restarts_the_cool_off() {
    let (b, dep) = tripped("sem::reopen", 5 * SEC).await;
    advance(5 * SEC).await;
    fail_n(&b, &dep, 1).await; // the probe fails
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.retry_in(), Some(5 * SEC));
    advance(4 * SEC).await;
    assert!(open_error(b.call(dep.ok(Duration::ZERO)).await).is_open());
    assert_eq!(dep.reached(), 2);
}

#[tokio::test(start_paused = true)]
async fn half_open_admits_at_most_probes_and_needs_success_threshold() {
    let config = Config::default()
        .threshold(1)
        .cool_off(SEC)
        .probes(2)
        .success_threshold(3);
    let b = Arc::new(Breaker::new("sem::probes", config));
    let dep = Dependency::default();
    fail_n(&b, &dep, 1).await;
    advance(SEC).await;

    // Two probes hang on a signal; a third caller fails fast.
    let mut gates = Vec::new();
    let mut probes = Vec::new();
    for _ in 0..2 {
        let (tx, rx) = oneshot::channel::<()>();
        gates.push(tx);
        let (b, dep) = (b.clone(), dep.clone());
        probes.push(tokio::spawn(async move {
            b.call(async {
                dep.ok(Duration::ZERO).await?;
                rx.await.map_err(|_| "gate dropped")
            })
            .await
        }));
    }
    tokio::task::yield_now().await;
    assert_eq!(dep.reached(), 3);
    let e = open_error(b.call(dep.ok(Duration::ZERO)).await);
    assert!(e.is_open());
    assert_eq!(
        dep.reached(),
        3,
        "the third caller did not reach the dependency"
    );

    for gate in gates {
        gate.send(()).unwrap();
    }
    for p in probes {
        p.await.unwrap().unwrap();
    }
    assert_eq!(b.state(), State::HalfOpen, "two successes, three needed");
    b.call(dep.ok(Duration::ZERO)).await.unwrap();
    assert_eq!(b.state(), State::Closed);
}

#[tokio::test(start_paused = true)]
async fn reopenings_double_the_cool_off_up_to_the_cap() {
    let config = Config::default()
        .threshold(1)
        .cool_off(SEC)
        .max_cool_off(5 * SEC);
    let b = Breaker::new("sem::backoff", config);
    let dep = Dependency::default();
    fail_n(&b, &dep, 1).await;
    let mut seen = vec![b.retry_in().unwrap()];
    for _ in 0..4 {
        advance(b.retry_in().unwrap()).await;
        fail_n(&b, &dep, 1).await; // failed probe
        seen.push(b.retry_in().unwrap());
    }
    assert_eq!(seen, [SEC, 2 * SEC, 4 * SEC, 5 * SEC, 5 * SEC]);
    // Closing resets the doubling.
    advance(5 * SEC).await;
    b.call(dep.ok(Duration::ZERO)).await.unwrap();
    fail_n(&b, &dep, 1).await;
    assert_eq!(b.retry_in(), Some(SEC));
}

#[tokio::test(start_paused = true)]
async fn jitter_adds_at_most_its_amount() {
    let config = Config::default().threshold(1).cool_off(SEC).jitter(SEC);
    let dep = Dependency::default();
    let mut distinct = std::collections::BTreeSet::new();
    for i in 0..20 {
        let b = Breaker::new(format!("sem::jitter{i}"), config.clone());
        fail_n(&b, &dep, 1).await;
        let left = b.retry_in().unwrap();
        assert!((SEC..=2 * SEC).contains(&left), "{left:?}");
        distinct.insert(left);
    }
    assert!(distinct.len() > 1, "jitter spreads the cool-offs");
}

#[tokio::test(start_paused = true)]
async fn failure_rate_over_a_count_window_waits_for_min_calls() {
    let config = Config::default()
        .failure_rate(50)
        .window_calls(10)
        .min_calls(6);
    let b = Breaker::new("sem::rate", config);
    let dep = Dependency::default();
    fail_n(&b, &dep, 5).await;
    assert_eq!(
        b.state(),
        State::Closed,
        "min_calls not reached, and threshold is off"
    );
    b.call(dep.ok(Duration::ZERO)).await.unwrap();
    assert_eq!(b.state(), State::Open, "5 of 6 failed");
    let rate = b.snapshot().failure_rate;
    assert!((rate - 500.0 / 6.0).abs() < 1e-9, "{rate}");
}

#[tokio::test(start_paused = true)]
async fn failure_rate_below_the_rate_stays_closed_and_old_calls_slide_out() {
    let config = Config::default()
        .failure_rate(50)
        .window_calls(4)
        .min_calls(4);
    let b = Breaker::new("sem::rate_slide", config);
    let dep = Dependency::default();
    // F S S F: 50% exactly would trip, so lead with a success: S F S S -> 25%.
    b.call(dep.ok(Duration::ZERO)).await.unwrap();
    fail_n(&b, &dep, 1).await;
    b.call(dep.ok(Duration::ZERO)).await.unwrap();
    b.call(dep.ok(Duration::ZERO)).await.unwrap();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.snapshot().failure_rate, 25.0);
    // F pushes out the first S: F S S F -> 50%.
    fail_n(&b, &dep, 1).await;
    assert_eq!(b.state(), State::Open);
}

#[tokio::test(start_paused = true)]
async fn failure_rate_over_a_time_window_forgets_old_calls() {
    let config = Config::default()
        .failure_rate(50)
        .window_duration(10 * SEC)
        .min_calls(4);
    let b = Breaker::new("sem::rate_time", config);
    let dep = Dependency::default();
    fail_n(&b, &dep, 3).await;
    advance(11 * SEC).await; // those three fall out of the window
    b.call(dep.ok(Duration::ZERO)).await.unwrap();
    b.call(dep.ok(Duration::ZERO)).await.unwrap();
    b.call(dep.ok(Duration::ZERO)).await.unwrap();
    fail_n(&b, &dep, 1).await;
    assert_eq!(b.state(), State::Closed, "1 of 4 in the window");
    fail_n(&b, &dep, 2).await;
    assert_eq!(b.state(), State::Open, "3 of 6 in the window");
}

#[tokio::test(start_paused = true)]
async fn threshold_and_failure_rate_together_either_opens() {
    let config = Config::default()
        .threshold(2)
        .failure_rate(90)
        .window_calls(50);
    let b = Breaker::new("sem::both", config);
    let dep = Dependency::default();
    fail_n(&b, &dep, 2).await;
    assert_eq!(
        b.state(),
        State::Open,
        "the written threshold still applies"
    );
}

#[tokio::test(start_paused = true)]
async fn a_slow_call_counts_as_a_failure_but_its_result_reaches_the_caller() {
    let config = Config::default().threshold(2).slow_call(2 * SEC);
    let b = Breaker::new("sem::slow", config);
    let dep = Dependency::default();
    assert_eq!(b.call(dep.ok(2 * SEC)).await, Ok("ok"));
    assert_eq!(
        b.call(dep.ok(SEC)).await,
        Ok("ok"),
        "fast enough: resets the streak"
    );
    assert_eq!(b.call(dep.ok(3 * SEC)).await, Ok("ok"));
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.call(dep.ok(5 * SEC)).await, Ok("ok"));
    assert_eq!(b.state(), State::Open);
    let s = b.stats();
    assert_eq!((s.successes, s.failures, s.slow_calls), (1, 3, 3));
}

#[tokio::test(start_paused = true)]
async fn a_timeout_is_a_failure_and_a_breaker_error() {
    let config = Config::default().threshold(1).timeout(600 * MS);
    let b = Breaker::new("sem::timeout", config);
    let dep = Dependency::default();
    let e = open_error(b.call(dep.ok(25 * SEC)).await);
    assert!(e.is_timeout());
    assert_eq!(
        e.to_string(),
        "call through circuit breaker `sem::timeout` timed out after 600ms"
    );
    assert_eq!(b.state(), State::Open);
    let s = b.stats();
    assert_eq!((s.failures, s.timeouts), (1, 1));
}

/// The deadline counts from admission, not from the call's first wait: a dependency that
/// spends 400 ms of its 600 ms before it first yields has 200 ms left.
#[tokio::test(start_paused = true)]
async fn a_timeout_counts_from_admission() {
    let b = Breaker::new(
        "sem::timeout_from_admission",
        Config::default().timeout(600 * MS),
    );
    let started = tokio::time::Instant::now();
    let slow_start = async {
        advance(400 * MS).await; // the clock moves inside the first poll, then it yields
        tokio::time::sleep(25 * SEC).await;
        Ok::<_, &str>(())
    };
    assert!(open_error(b.call(slow_start).await).is_timeout());
    assert_eq!(started.elapsed(), 600 * MS);
}

#[tokio::test(start_paused = true)]
async fn neutral_errors_count_for_nothing() {
    let config = Config::default().threshold(2).cool_off(SEC);
    let b = Breaker::new("sem::neutral", config);
    let dep = Dependency::default();
    let is_failure = |e: &&str| !e.starts_with('4');
    let client_error = || async { Err::<(), _>("404 not found") };

    fail_n(&b, &dep, 1).await;
    b.call_with(is_failure, client_error()).await.unwrap_err();
    assert_eq!(b.state(), State::Closed);
    fail_n(&b, &dep, 1).await;
    assert_eq!(
        b.state(),
        State::Open,
        "the neutral error did not reset the streak"
    );

    // A neutral probe does not close, and gives its slot back.
    advance(SEC).await;
    b.call_with(is_failure, client_error()).await.unwrap_err();
    assert_eq!(b.state(), State::HalfOpen);
    b.call(dep.ok(Duration::ZERO)).await.unwrap();
    assert_eq!(b.state(), State::Closed);
    let s = b.stats();
    assert_eq!((s.calls, s.successes, s.failures), (5, 1, 2));
}

#[tokio::test(start_paused = true)]
async fn a_late_failure_from_an_older_generation_changes_nothing() {
    let config = Config::default().threshold(1).cool_off(SEC);
    let b = Arc::new(Breaker::new("sem::generation", config));
    let dep = Dependency::default();
    // A slow call admitted while closed...
    let (tx, rx) = oneshot::channel::<()>();
    let slow = {
        let b = b.clone();
        tokio::spawn(async move {
            b.call(async {
                rx.await.map_err(|_| "dropped")?;
                Err::<(), _>("late")
            })
            .await
        })
    };
    tokio::task::yield_now().await;
    // ...the breaker opens, goes half-open and closes meanwhile...
    fail_n(&b, &dep, 1).await;
    advance(SEC).await;
    b.call(dep.ok(Duration::ZERO)).await.unwrap();
    assert_eq!(b.state(), State::Closed);
    // ...and its late failure neither reopens it nor counts in the new streak.
    tx.send(()).unwrap();
    slow.await.unwrap().unwrap_err();
    assert_eq!(b.state(), State::Closed);
    let s = b.stats();
    assert_eq!(s.failures, 2, "counted in the stats all the same");
}

#[tokio::test(start_paused = true)]
async fn a_dropped_probe_gives_its_slot_back_and_counts_for_nothing() {
    let (b, dep) = tripped("sem::cancel", SEC).await;
    advance(SEC).await;
    {
        let probe = b.call(std::future::pending::<Result<(), &str>>());
        let r = tokio::time::timeout(MS, probe).await; // polled once, then dropped
        assert!(r.is_err());
    }
    assert_eq!(
        b.state(),
        State::HalfOpen,
        "a dropped probe neither closes nor reopens"
    );
    b.call(dep.ok(Duration::ZERO)).await.unwrap();
    assert_eq!(b.state(), State::Closed, "the next caller got the slot");
    let s = b.stats();
    assert_eq!((s.calls, s.successes, s.failures), (3, 1, 1));
}

#[tokio::test(start_paused = true)]
async fn a_hung_probe_loses_its_slot_after_its_lease() {
    let config = Config::default().threshold(1).cool_off(5 * SEC);
    let b = Arc::new(Breaker::new("sem::hung", config));
    let dep = Dependency::default();
    fail_n(&b, &dep, 1).await;
    advance(5 * SEC).await;
    let (tx, rx) = oneshot::channel::<()>();
    let hung = {
        let b = b.clone();
        tokio::spawn(async move {
            b.call(async {
                rx.await.map_err(|_| "dropped")?;
                Err::<(), _>("late")
            })
            .await
        })
    };
    tokio::task::yield_now().await;
    advance(SEC).await;
    let e = open_error(b.call(dep.ok(Duration::ZERO)).await);
    assert_eq!(
        e.retry_in(),
        Some(4 * SEC),
        "until the hung probe's lease ends"
    );
    advance(4 * SEC).await;
    // The lease (the base cool-off, as there is no timeout) is over: a new probe.
    b.call(dep.ok(Duration::ZERO)).await.unwrap();
    assert_eq!(b.state(), State::Closed);
    tx.send(()).unwrap();
    hung.await.unwrap().unwrap_err();
    assert_eq!(
        b.state(),
        State::Closed,
        "the old probe's late failure changes nothing"
    );
}

#[tokio::test(start_paused = true)]
async fn a_panic_in_the_body_is_a_failure_and_reaches_the_caller() {
    let config = Config::default().threshold(1).cool_off(SEC);
    let b = Arc::new(Breaker::new("sem::panic", config));
    fail_and_panic(&b).await;
    assert_eq!(b.state(), State::Open);
    advance(SEC).await;
    fail_and_panic(&b).await; // a panicking probe reopens, and gives its slot back
    assert_eq!(b.state(), State::Open);
    advance(SEC).await;
    b.call(async { Ok::<_, &str>(()) }).await.unwrap();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.stats().failures, 2);
}

async fn fail_and_panic(b: &Arc<Breaker>) {
    let b = b.clone();
    let joined = tokio::spawn(async move {
        b.call(async { panic!("dependency client bug") as Result<(), &str> })
            .await
    })
    .await;
    let panic = joined.unwrap_err().into_panic();
    assert_eq!(panic.downcast_ref::<&str>(), Some(&"dependency client bug"));
}

/// A panic in a blocking call, admitted on the fast path or in full (a bulkhead), is one
/// failure, reaches the caller unchanged, and gives the slot back.
#[test]
fn a_panic_in_a_blocking_call_is_a_failure_and_reaches_the_caller() {
    for (name, config) in [
        ("sem::sync_panic_fast", Config::default().threshold(3)),
        (
            "sem::sync_panic_held",
            Config::default().threshold(3).max_concurrent(1),
        ),
    ] {
        let b = Breaker::new(name, config);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            b.call_sync(|| -> Result<(), &str> { panic!("blocking client bug") })
        }));
        let panic = r.unwrap_err();
        assert_eq!(
            panic.downcast_ref::<&str>(),
            Some(&"blocking client bug"),
            "{name}"
        );
        let s = b.stats();
        assert_eq!((s.failures, s.cancelled), (1, 0), "{name}");
        assert_eq!(
            b.call_sync(|| Ok::<_, &str>(1)),
            Ok(1),
            "{name}: the slot is back"
        );
    }
}

#[test]
fn a_panic_in_is_failure_is_a_failure_and_leaks_nothing() {
    let config = Config::default().threshold(2).max_concurrent(1);
    let b = Breaker::new("sem::panic_predicate", config);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        b.call_sync_with(|_: &&str| panic!("bad predicate"), || Err::<(), _>("x"))
    }));
    assert!(r.is_err());
    assert_eq!(b.stats().failures, 1);
    // The bulkhead slot came back: another call is admitted.
    assert_eq!(b.call_sync(|| Ok::<_, &str>(1)), Ok(1));
}

#[tokio::test(start_paused = true)]
async fn the_bulkhead_refuses_the_call_over_the_limit() {
    let b = Arc::new(Breaker::new(
        "sem::bulkhead",
        Config::default().max_concurrent(2),
    ));
    let dep = Dependency::default();
    let mut held = Vec::new();
    for _ in 0..2 {
        let (b, dep) = (b.clone(), dep.clone());
        held.push(tokio::spawn(async move { b.call(dep.ok(10 * SEC)).await }));
    }
    tokio::task::yield_now().await;
    let e = open_error(b.call(dep.ok(Duration::ZERO)).await);
    assert!(e.is_full());
    assert_eq!(dep.reached(), 2);
    // A dropped call gives its slot back too.
    held.pop().unwrap().abort();
    tokio::task::yield_now().await;
    assert_eq!(b.call(dep.ok(Duration::ZERO)).await, Ok("ok"));
    assert_eq!(b.state(), State::Closed, "a full bulkhead is no failure");
    assert_eq!(b.stats().rejected, 1);
}

#[test]
fn manual_control_forces_disables_and_resets() {
    let b = Breaker::new("sem::manual", Config::default().threshold(1));
    let dep = Dependency::default();
    let h = b.handle();
    h.force_open();
    let e = b.call_sync(|| dep.sync(true)).unwrap_err();
    assert_eq!(e.breaker_error().unwrap().retry_in(), None);
    assert_eq!(dep.reached(), 0);

    h.disable();
    for _ in 0..5 {
        let _ = b.call_sync(|| dep.sync(false));
    }
    assert_eq!(h.state(), State::Disabled, "disabled never trips");
    assert_eq!(h.stats().failures, 5, "but still counts");

    h.reset();
    assert_eq!(h.state(), State::Closed);
    assert_eq!(h.stats(), Stats::default(), "reset clears the counts");
    let _ = b.call_sync(|| dep.sync(false));
    assert_eq!(h.state(), State::Open);
}

#[test]
fn call_sync_works_outside_any_runtime() {
    let b = Breaker::new("sem::sync", Config::default().threshold(1));
    assert_eq!(b.call_sync(|| Ok::<_, &str>(7)), Ok(7));
    assert!(b.call_sync(|| Err::<(), _>("down")).is_err());
    assert_eq!(b.state(), State::Open);
    assert!(b.retry_in().unwrap() > Duration::from_secs(9));
}

#[test]
fn the_registry_lists_breakers_from_their_creation() {
    let b = Breaker::new("sem::listed", Config::default());
    let listed = registry().snapshot();
    let mine = listed.iter().find(|s| s.name == "sem::listed").unwrap();
    assert_eq!(mine.state, State::Closed);
    assert_eq!(mine.retry_in, None);
    let h = registry().get("sem::listed").unwrap();
    h.force_open();
    assert_eq!(
        b.state(),
        State::ForcedOpen,
        "the handle controls the same breaker"
    );
    assert!(registry().get("sem::nobody").is_none());
}

#[test]
fn try_new_names_the_invalid_field_and_new_panics_with_it() {
    let e = Breaker::try_new("sem::invalid", Config::default().failure_rate(101)).unwrap_err();
    assert_eq!(e.field(), "failure_rate");
    let panic =
        std::panic::catch_unwind(|| Breaker::new("sem::invalid", Config::default().probes(0)))
            .unwrap_err();
    let msg = panic.downcast_ref::<String>().unwrap();
    assert!(msg.contains("`probes`"), "{msg}");
}

#[test]
fn hooks_see_every_transition_in_order_and_may_call_back() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let b = Breaker::new(
        "sem::hooks",
        Config::default().threshold(1).on_state_change(move |t| {
            log.lock().unwrap().push((t.from, t.to));
            if t.to == State::Open {
                // Calling back into the breaker from the hook: no deadlock.
                registry().get(&t.name).unwrap().force_open();
            }
        }),
    );
    let _ = b.call_sync(|| Err::<(), _>("down"));
    assert_eq!(
        *seen.lock().unwrap(),
        [
            (State::Closed, State::Open),
            (State::Open, State::ForcedOpen)
        ]
    );
}

#[test]
fn a_panicking_hook_breaks_nothing() {
    let b = Breaker::new(
        "sem::hook_panic",
        Config::default()
            .threshold(1)
            .on_state_change(|_| panic!("hook bug")),
    );
    assert!(b.call_sync(|| Err::<(), _>("down")).is_err());
    assert_eq!(b.state(), State::Open);
    b.handle().reset();
    assert_eq!(b.call_sync(|| Ok::<_, &str>(1)), Ok(1));
}

#[tokio::test(start_paused = true)]
async fn with_a_timeout_the_probe_lease_is_the_timeout() {
    let config = Config::default()
        .threshold(1)
        .cool_off(10 * SEC)
        .timeout(SEC);
    let b = Breaker::new("sem::lease_timeout", config);
    let dep = Dependency::default();
    fail_n(&b, &dep, 1).await;
    advance(10 * SEC).await;
    // A probe whose caller stopped polling it: its own timeout cannot fire.
    let mut held = Box::pin(b.call(std::future::pending::<Result<&str, &str>>()));
    assert!(common::poll_once(held.as_mut()).await.is_none());
    let e = open_error(b.call(dep.ok(Duration::ZERO)).await);
    assert_eq!(
        e.retry_in(),
        Some(SEC),
        "until the lease, which is the timeout, ends"
    );
    advance(SEC).await;
    assert_eq!(
        b.call(dep.ok(Duration::ZERO)).await,
        Ok("ok"),
        "a new probe"
    );
    assert_eq!(b.state(), State::Closed);
    drop(held);
    assert_eq!(b.state(), State::Closed);
}

#[tokio::test(start_paused = true)]
async fn a_probe_timing_out_as_its_slot_is_taken_over_still_reopens() {
    let config = Config::default()
        .threshold(1)
        .cool_off(10 * SEC)
        .timeout(SEC);
    let b = Arc::new(Breaker::new("sem::lease_tie", config));
    let dep = Dependency::default();
    fail_n(&b, &dep, 1).await;
    advance(10 * SEC).await;
    let probe = {
        let b = b.clone();
        tokio::spawn(async move { b.call(std::future::pending::<Result<(), &str>>()).await })
    };
    tokio::task::yield_now().await; // the probe is in flight
    advance(SEC).await; // its timeout fires, and its lease ends, at this very instant...
    let mut newcomer = Box::pin(b.call(std::future::pending::<Result<(), &str>>()));
    assert!(
        common::poll_once(newcomer.as_mut()).await.is_none(),
        "...where a newcomer takes the slot before the probe's task runs"
    );
    let timed_out = probe.await.unwrap().unwrap_err();
    assert!(timed_out.breaker_error().unwrap().is_timeout());
    assert_eq!(
        b.state(),
        State::Open,
        "the on-time timeout was not lost to the newcomer"
    );
}

#[tokio::test(start_paused = true)]
async fn disabled_admits_every_call_past_the_bulkhead() {
    let b = Breaker::new(
        "sem::disabled_bulkhead",
        Config::default().max_concurrent(1),
    );
    b.handle().disable();
    let mut held = Box::pin(b.call(std::future::pending::<Result<(), &str>>()));
    assert!(common::poll_once(held.as_mut()).await.is_none());
    assert_eq!(b.call(async { Ok::<_, &str>(2) }).await, Ok(2));
    drop(held);
    b.handle().reset();
    let mut held = Box::pin(b.call(std::future::pending::<Result<(), &str>>()));
    assert!(common::poll_once(held.as_mut()).await.is_none());
    let e = open_error(b.call(async { Ok::<_, &str>("x") }).await);
    assert!(e.is_full(), "the bulkhead is back once enabled");
}

#[test]
fn without_a_window_the_snapshot_rate_covers_the_calls_since_the_breaker_closed() {
    let b = Breaker::new("sem::rate_since_closed", Config::default().threshold(3));
    for ok in [true, false, false, true] {
        let _ = b.call_sync(|| if ok { Ok(()) } else { Err("x") });
    }
    assert_eq!(b.snapshot().failure_rate, 50.0);
    b.handle().reset();
    assert_eq!(b.snapshot().failure_rate, 0.0, "empty after a reset");
    let _ = b.call_sync(|| Err::<(), _>("x"));
    assert_eq!(b.snapshot().failure_rate, 100.0);
}

#[test]
fn a_dropped_breaker_leaves_the_registry_and_a_handle_keeps_it_alive() {
    let b = Breaker::new("sem::dropped", Config::default());
    let h = registry()
        .get("sem::dropped")
        .expect("listed from its creation");
    drop(b);
    // The handle still holds it: still live, still listed, still controllable.
    h.force_open();
    assert_eq!(
        registry().get("sem::dropped").unwrap().state(),
        State::ForcedOpen
    );
    drop(h);
    assert!(
        common::left_registry("sem::dropped"),
        "gone with its last handle"
    );
    assert!(!registry()
        .snapshot()
        .iter()
        .any(|s| s.name == "sem::dropped"));
}

#[test]
fn the_newest_live_breaker_of_a_name_is_the_one_get_returns() {
    let old = Breaker::new("sem::same_name", Config::default());
    let new = Breaker::new("sem::same_name", Config::default());
    new.handle().force_open();
    let listed = registry().snapshot();
    assert_eq!(
        listed.iter().filter(|s| s.name == "sem::same_name").count(),
        2
    );
    assert_eq!(
        registry().get("sem::same_name").unwrap().state(),
        State::ForcedOpen
    );
    drop(new);
    assert!(common::once_released(|| {
        registry().get("sem::same_name").unwrap().state() == State::Closed
    }));
    drop(old);
}
