//! Live configuration (`reconfigure`): validated first, applied at once, keeping what the
//! breaker holds. Paused time throughout.

mod common;

use std::time::Duration;

use breaker_runtime::{registry, BreakerError, CallError, Config, KeyedBreaker, State};
use common::Dependency;
use tokio::{sync::oneshot, time::advance};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

fn fail(b: &breaker_runtime::Breaker) {
    let r = b.call_sync(|| Err::<(), _>("502"));
    assert!(matches!(r, Err(CallError::Inner(_))), "{r:?}");
}

#[test]
fn an_invalid_config_changes_nothing_and_names_the_field() {
    let b = breaker_runtime::Breaker::new("reconfigure::invalid", Config::default().threshold(2));
    let err = b.reconfigure(Config::default().threshold(0)).unwrap_err();
    assert_eq!(err.field(), "threshold");
    let err = b
        .reconfigure(
            Config::default()
                .failure_rate(50)
                .min_calls(20)
                .window_calls(10),
        )
        .unwrap_err();
    assert_eq!(err.field(), "min_calls");
    // What cannot change on a running breaker is refused, naming it.
    let err = b.reconfigure(Config::default().throttle(2.0)).unwrap_err();
    assert_eq!(err.field(), "throttle");
    // Still the old configuration: two failures open it, one does not.
    fail(&b);
    assert_eq!(b.state(), State::Closed);
    fail(&b);
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.handle().config(), Config::default().threshold(2));
}

/// State, generation, stats, the open deadline and the backoff step survive; the next
/// opening uses the new cool-off at the backoff step reached.
#[tokio::test(start_paused = true)]
async fn state_counts_deadline_and_backoff_step_are_kept() {
    let generations = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = generations.clone();
    let config = Config::default()
        .threshold(1)
        .cool_off(10 * SEC)
        .max_cool_off(100 * SEC)
        .on_state_change(move |t| seen.lock().unwrap().push(t.generation));
    let b = breaker_runtime::Breaker::new("reconfigure::kept", config);
    let dep = Dependency::default();
    let _ = b.call(dep.fail()).await; // open, 10 s
    advance(10 * SEC).await;
    let _ = b.call(dep.fail()).await; // the probe fails: reopened for 20 s (one step)
    advance(5 * SEC).await;
    let (state, stats, retry_in) = (b.state(), b.stats(), b.retry_in());
    assert_eq!(state, State::Open);
    assert_eq!(retry_in, Some(15 * SEC));
    let before = generations.lock().unwrap().clone();

    // A config without a hook keeps the hook in force.
    b.reconfigure(
        Config::default()
            .threshold(1)
            .cool_off(SEC)
            .max_cool_off(100 * SEC),
    )
    .unwrap();
    assert_eq!(b.state(), state);
    assert_eq!(b.stats(), stats);
    assert_eq!(b.retry_in(), retry_in, "the open deadline is kept");
    assert_eq!(*generations.lock().unwrap(), before, "no transition");

    advance(15 * SEC).await;
    let _ = b.call(dep.fail()).await; // the second probe fails
                                      // The backoff step reached (two reopenings): the new 1 s cool-off doubled twice.
    assert_eq!(b.retry_in(), Some(4 * SEC));
    let after = generations.lock().unwrap().clone();
    assert_eq!(
        after.len(),
        before.len() + 2,
        "half-open, open: the hook still runs"
    );
    assert_eq!(
        after[after.len() - 1],
        before[before.len() - 1] + 2,
        "generations go on"
    );
    assert_eq!(dep.reached(), 3);
}

/// A count window resized keeps its most recent outcomes: one more failure judges them.
#[test]
fn a_resized_count_window_keeps_its_most_recent_outcomes() {
    let rate = |window| {
        Config::default()
            .failure_rate(50)
            .window_calls(window)
            .min_calls(4)
    };
    let b = breaker_runtime::Breaker::new("reconfigure::window", rate(10));
    for ok in [true, true, true, false, false] {
        let _ = b.call_sync(|| if ok { Ok(()) } else { Err("502") });
    }
    assert_eq!(b.state(), State::Closed, "2 of 5: 40 %");
    b.reconfigure(rate(4)).unwrap();
    assert_eq!(b.snapshot().failure_rate, 50.0, "S S F F kept");
    fail(&b); // S F F F: 75 %
    assert_eq!(b.state(), State::Open);
}

/// A bulkhead's new limit applies to new admissions; calls in flight keep their slots, and
/// a breaker that had none gets one without a restart.
#[tokio::test(start_paused = true)]
async fn a_bulkhead_limit_applies_to_new_admissions() {
    let b = breaker_runtime::Breaker::new("reconfigure::bulkhead", Config::default());
    let held = |b: &breaker_runtime::Breaker| {
        let (tx, rx) = oneshot::channel::<()>();
        let call = b
            .clone()
            .call_owned(async move { rx.await.map_err(|_| "dropped") });
        (tx, tokio::spawn(call))
    };
    // Two calls in flight on the fast path (no bulkhead yet): they hold no slot.
    let (a, ca) = held(&b);
    let (c, cc) = held(&b);
    tokio::task::yield_now().await;
    b.reconfigure(Config::default().max_concurrent(1)).unwrap();
    let (d, cd) = held(&b);
    tokio::task::yield_now().await;
    let full = b.call(async { Ok::<_, ()>(()) }).await.unwrap_err();
    assert!(
        matches!(
            full,
            CallError::Breaker(BreakerError::Full {
                max_concurrent: 1,
                ..
            })
        ),
        "{full:?}"
    );
    // Raised: the new limit counts the one slot held.
    b.reconfigure(Config::default().max_concurrent(2)).unwrap();
    assert_eq!(b.call(async { Ok::<_, ()>(7) }).await, Ok(7));
    for (tx, call) in [(a, ca), (c, cc), (d, cd)] {
        tx.send(()).unwrap();
        assert_eq!(call.await.unwrap(), Ok(()));
    }
    // Every slot came back: two at once are admitted again.
    let (e, ce) = held(&b);
    let (f, cf) = held(&b);
    tokio::task::yield_now().await;
    assert!(
        b.call(async { Ok::<_, ()>(()) }).await.is_err(),
        "full at 2"
    );
    for (tx, call) in [(e, ce), (f, cf)] {
        tx.send(()).unwrap();
        assert_eq!(call.await.unwrap(), Ok(()));
    }
    let stats = b.stats();
    assert_eq!(stats.calls, stats.successes + stats.rejected, "{stats:?}");
    assert_eq!(stats.successes, 6);
}

/// The story: a dry run in production, switched to enforcing without a restart, then back.
#[tokio::test(start_paused = true)]
async fn a_dry_run_switched_to_enforcing() {
    let search = breaker_runtime::Breaker::new(
        "reconfigure::dry_run_story",
        Config::default()
            .threshold(2)
            .cool_off(10 * SEC)
            .dry_run(true),
    );
    let dep = Dependency::default();
    // The dependency fails; in a dry run the breaker opens but only pretends to refuse.
    for _ in 0..2 {
        assert_eq!(
            search.call(dep.fail()).await,
            Err(CallError::Inner("502 bad gateway"))
        );
    }
    assert_eq!(search.state(), State::Open);
    for _ in 0..3 {
        assert!(search.call(dep.fail()).await.is_err());
    }
    assert_eq!(dep.reached(), 5, "every call reached the dependency");
    let stats = search.stats();
    assert_eq!(
        (stats.failures, stats.shadow_rejected, stats.rejected),
        (2, 3, 0)
    );
    assert!(search.snapshot().dry_run);

    // Switched to enforcing: the open state, its deadline and the counts are kept.
    advance(SEC).await;
    search
        .reconfigure(Config::default().threshold(2).cool_off(10 * SEC))
        .unwrap();
    assert!(!search.snapshot().dry_run);
    assert_eq!(search.state(), State::Open);
    let Err(CallError::Breaker(refused)) = search.call(dep.fail()).await else {
        panic!("not refused");
    };
    assert!(refused.is_open());
    assert_eq!(
        refused.retry_in(),
        Some(9 * SEC),
        "the open deadline is kept"
    );
    assert_eq!(dep.reached(), 5, "refused: the dependency was not called");
    let stats = search.stats();
    assert_eq!(
        (stats.failures, stats.shadow_rejected, stats.rejected),
        (2, 3, 1)
    );

    // The dependency recovers; the probe closes it.
    advance(9 * SEC).await;
    assert_eq!(search.call(dep.ok(MS)).await, Ok("ok"));
    assert_eq!(search.state(), State::Closed);
    assert_eq!(dep.reached(), 6);

    // And back to a dry run, again without a restart.
    search
        .reconfigure(Config::default().threshold(1).dry_run(true))
        .unwrap();
    let _ = search.call(dep.fail()).await;
    assert_eq!(search.state(), State::Open);
    assert!(
        search.call(dep.ok(MS)).await.is_ok(),
        "a shadow reaches the dependency"
    );
    assert_eq!(dep.reached(), 8);
    assert_eq!(search.stats().shadow_rejected, 4);
}

/// Every key, now and later; a key alone is reconfigured through its keyed breaker.
#[test]
fn a_keyed_breaker_reconfigures_every_key_now_and_later() {
    let hosts = KeyedBreaker::<String>::new("reconfigure::keyed", Config::default().threshold(5));
    let _ = hosts.call_sync("a", || Err::<(), _>("refused"));
    let err = hosts
        .breaker("a")
        .reconfigure(Config::default())
        .unwrap_err();
    assert_eq!(err.field(), "config");
    let err = hosts.reconfigure(Config::default().probes(0)).unwrap_err();
    assert_eq!(err.field(), "probes");

    hosts.reconfigure(Config::default().threshold(2)).unwrap();
    // Key `a` keeps its streak of one: one more failure opens it.
    let _ = hosts.call_sync("a", || Err::<(), _>("refused"));
    assert_eq!(hosts.breaker("a").state(), State::Open);
    // A key made later gets the new configuration.
    let _ = hosts.call_sync("b", || Err::<(), _>("refused"));
    assert_eq!(hosts.breaker("b").state(), State::Closed);
    let _ = hosts.call_sync("b", || Err::<(), _>("refused"));
    assert_eq!(hosts.breaker("b").state(), State::Open);
    // A key on the fast path gets a policy that leaves it.
    let _ = hosts.call_sync("c", || Ok::<_, ()>(()));
    hosts
        .reconfigure(
            Config::default()
                .failure_rate(50)
                .window_calls(2)
                .min_calls(2),
        )
        .unwrap();
    let _ = hosts.call_sync("c", || Ok::<_, ()>(()));
    let _ = hosts.call_sync("c", || Err::<(), _>("refused"));
    assert_eq!(
        hosts.breaker("c").state(),
        State::Open,
        "judged by its new window"
    );
}

/// An attribute's breaker is reconfigured through its handle from the registry; a breaker
/// on the fast path takes a `slow_call` and a `timeout` at once.
#[tokio::test(start_paused = true)]
async fn a_handle_from_the_registry_reconfigures_and_the_fast_path_follows() {
    let b = breaker_runtime::Breaker::new("reconfigure::handle", Config::default().threshold(1));
    assert_eq!(b.call(async { Ok::<_, ()>(()) }).await, Ok(()));
    let h = registry().get("reconfigure::handle").unwrap();
    h.reconfigure(Config::default().threshold(1).timeout(100 * MS))
        .unwrap();
    let slow = b.call(async {
        tokio::time::sleep(SEC).await;
        Ok::<_, ()>(())
    });
    let r = slow.await.unwrap_err();
    assert!(
        matches!(r, CallError::Breaker(BreakerError::Timeout { .. })),
        "{r:?}"
    );
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.stats().timeouts, 1);
}

/// DESIGN, *Hung probes*: "the old probe's late result changes nothing", even when
/// `reconfigure` lengthened the lease after the probe lost its slot (a probe's lease end must
/// not be recomputed with the new length at its outcome).
#[tokio::test(start_paused = true)]
async fn a_hung_probe_stays_late_after_reconfigure_lengthens_the_lease() {
    let config = Config::default().threshold(1).cool_off(SEC);
    let b = std::sync::Arc::new(breaker_runtime::Breaker::new(
        "reconfigure::hung_probe",
        config,
    ));
    fail(&b);
    advance(SEC).await;
    // Probe A: admitted, then hangs.
    let (release_a, a_waits) = oneshot::channel::<()>();
    let a = {
        let b = b.clone();
        tokio::spawn(async move {
            b.call(async {
                a_waits.await.map_err(|_| "dropped")?;
                Ok::<_, &str>(())
            })
            .await
        })
    };
    tokio::task::yield_now().await;
    assert_eq!(b.state(), State::HalfOpen);
    // A's lease (the cool-off, 1 s) ends; probe B takes the slot over and hangs too.
    advance(SEC + SEC / 2).await;
    let (_release_b, b_waits) = oneshot::channel::<()>();
    let probe_b = {
        let b = b.clone();
        tokio::spawn(async move {
            b.call(async {
                b_waits.await.map_err(|_| "dropped")?;
                Ok::<_, &str>(())
            })
            .await
        })
    };
    tokio::task::yield_now().await;
    b.reconfigure(Config::default().threshold(1).cool_off(60 * SEC))
        .unwrap();
    advance(SEC / 2).await;
    // A comes back with a success: it lost its slot, so it changes nothing.
    release_a.send(()).unwrap();
    a.await.unwrap().unwrap();
    assert_eq!(
        b.state(),
        State::HalfOpen,
        "a probe that lost its slot must not close the breaker while the real probe is out"
    );
    probe_b.abort();
}
