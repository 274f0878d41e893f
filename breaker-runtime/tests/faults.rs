//! Fault injection on paused time: probes dropped at every point of their life, panics in
//! every piece of user code, a hook that calls back, a stale result two generations late,
//! and durations at the edge of overflow.

mod common;

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering::SeqCst},
        Arc, Mutex,
    },
    time::Duration,
};

use breaker_runtime::{registry, Breaker, Config, State};
use tokio::{sync::oneshot, time::advance};

const SEC: Duration = Duration::from_secs(1);

/// A breaker tripped (threshold 1) and past its one-second cool-off: the next call probes.
async fn half_open(name: &'static str) -> Arc<Breaker> {
    let b = Arc::new(Breaker::new(
        name,
        Config::default().threshold(1).cool_off(SEC),
    ));
    let _ = b.call(async { Err::<(), _>("down") }).await;
    advance(SEC).await;
    b
}

/// The slot came back: the next caller becomes the probe, and its success closes.
async fn assert_slot_free(b: &Breaker) {
    assert_eq!(
        b.state(),
        State::HalfOpen,
        "nothing decided by the dropped probe"
    );
    b.call(async { Ok::<_, &str>(()) }).await.unwrap();
    assert_eq!(b.state(), State::Closed);
}

#[tokio::test(start_paused = true)]
async fn a_probe_dropped_before_its_first_poll() {
    let b = half_open("faults::drop_unpolled").await;
    let reached = AtomicUsize::new(0);
    drop(b.call(async {
        reached.fetch_add(1, SeqCst);
        Ok::<_, &str>(())
    }));
    assert_eq!(reached.load(SeqCst), 0);
    // Never polled, never admitted: no slot was taken in the first place.
    assert_slot_free(&b).await;
}

#[tokio::test(start_paused = true)]
async fn a_probe_dropped_after_one_poll() {
    let b = half_open("faults::drop_polled").await;
    let mut probe = Box::pin(b.call(std::future::pending::<Result<(), &str>>()));
    assert!(common::poll_once(probe.as_mut()).await.is_none());
    // Holding the slot: others are refused.
    assert!(b
        .call(async { Ok::<_, &str>(()) })
        .await
        .unwrap_err()
        .is_open());
    drop(probe);
    assert_slot_free(&b).await;
}

#[tokio::test(start_paused = true)]
async fn a_probe_aborted_through_its_join_handle() {
    let b = half_open("faults::abort").await;
    let task = {
        let b = b.clone();
        tokio::spawn(async move { b.call(std::future::pending::<Result<(), &str>>()).await })
    };
    tokio::task::yield_now().await;
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    assert_slot_free(&b).await;
    assert_eq!(b.stats().failures, 1, "only the failure that tripped it");
}

#[tokio::test(start_paused = true)]
async fn panics_in_body_predicate_and_hook_leak_nothing() {
    let hook_calls = Arc::new(AtomicUsize::new(0));
    let calls = hook_calls.clone();
    let b = Arc::new(Breaker::new(
        "faults::panics",
        Config::default()
            .threshold(2)
            .cool_off(SEC)
            .max_concurrent(1)
            .on_state_change(move |_| {
                calls.fetch_add(1, SeqCst);
                panic!("hook bug");
            }),
    ));
    // A panic in the body and one in is_failure: two failures, the breaker opens, and the
    // panicking hook neither stops it nor leaks the bulkhead slot.
    let body = {
        let b = b.clone();
        tokio::spawn(async move {
            b.call(async { panic!("body bug") as Result<(), &str> })
                .await
        })
    };
    assert!(body.await.unwrap_err().is_panic());
    let predicate = {
        let b = b.clone();
        tokio::spawn(async move {
            b.call_with(|_: &&str| panic!("predicate bug"), async {
                Err::<(), _>("x")
            })
            .await
        })
    };
    assert!(predicate.await.unwrap_err().is_panic());
    assert_eq!(b.state(), State::Open);
    assert_eq!(hook_calls.load(SeqCst), 1);
    advance(SEC).await;
    b.call(async { Ok::<_, &str>(()) }).await.unwrap();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(
        hook_calls.load(SeqCst),
        3,
        "open, half-open, closed: every event delivered"
    );
}

#[tokio::test(start_paused = true)]
async fn a_hook_that_calls_back_sees_events_in_order() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let b = Breaker::new(
        "faults::reentrant",
        Config::default().threshold(1).on_state_change(move |t| {
            log.lock().unwrap().push(t.to);
            let h = registry().get(&t.name).unwrap();
            // Reads and controls from inside the hook: no deadlock, and the events it causes
            // arrive after this one.
            let _ = (h.state(), h.stats(), h.snapshot());
            match t.to {
                State::Open => h.disable(),
                State::Disabled => h.reset(),
                _ => {}
            }
        }),
    );
    let _ = b.call(async { Err::<(), _>("down") }).await;
    assert_eq!(
        *seen.lock().unwrap(),
        [State::Open, State::Disabled, State::Closed]
    );
    assert_eq!(b.state(), State::Closed);
}

#[tokio::test(start_paused = true)]
async fn a_stale_result_two_generations_late_changes_nothing() {
    let b = Arc::new(Breaker::new(
        "faults::stale",
        Config::default().threshold(1).cool_off(SEC).probes(2),
    ));
    let _ = b.call(async { Err::<(), _>("down") }).await; // gen 1: open
    advance(SEC).await;
    // A probe admitted in the half-open generation hangs...
    let (tx, rx) = oneshot::channel::<bool>();
    let stale = {
        let b = b.clone();
        tokio::spawn(async move {
            b.call(async {
                let ok = rx.await.unwrap();
                if ok {
                    Ok(())
                } else {
                    Err("late")
                }
            })
            .await
        })
    };
    tokio::task::yield_now().await;
    // ...while another probe fails (reopen: gen 3) and, after the cool-off, two succeed
    // (half-open gen 4, closed gen 5).
    let _ = b.call(async { Err::<(), _>("down") }).await;
    assert_eq!(b.state(), State::Open);
    advance(SEC).await;
    b.call(async { Ok::<_, &str>(()) }).await.unwrap();
    b.call(async { Ok::<_, &str>(()) }).await.unwrap();
    assert_eq!(b.state(), State::Closed);
    // The first probe's failure arrives generations later: nothing changes.
    tx.send(false).unwrap();
    stale.await.unwrap().unwrap_err();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.stats().failures, 3, "counted, though it changed nothing");
}

#[tokio::test(start_paused = true)]
async fn huge_durations_never_overflow() {
    let max = Duration::MAX;
    let b = Breaker::new(
        "faults::huge",
        Config::default()
            .threshold(1)
            .cool_off(max)
            .max_cool_off(max)
            .jitter(max)
            .timeout(max)
            .slow_call(max)
            .failure_rate(50)
            .window_duration(max),
    );
    b.call(async { Ok::<_, &str>(()) }).await.unwrap();
    let _ = b.call(async { Err::<(), _>("down") }).await;
    assert_eq!(b.state(), State::Open);
    advance(Duration::from_secs(100 * 365 * 24 * 3600)).await;
    assert_eq!(
        b.state(),
        State::Open,
        "a century later, still open (584 years)"
    );
    assert!(b.retry_in().is_some());
    assert!(b
        .call(async { Ok::<_, &str>(()) })
        .await
        .unwrap_err()
        .is_open());
    let snap = b.snapshot();
    assert_eq!(snap.state, State::Open);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_call_frees_its_bulkhead_slot_only_once_its_future_is_gone() {
    let b = Arc::new(Breaker::new(
        "faults::drop_order",
        Config::default().max_concurrent(1),
    ));
    /// Part of the dependency's future: when it is dropped, the slot must still be held.
    struct Probe(Arc<Breaker>, Arc<AtomicUsize>);
    impl Drop for Probe {
        fn drop(&mut self) {
            let second = self.0.call_sync(|| Ok::<_, &str>(()));
            if second.is_err_and(|e| e.breaker_error().is_some_and(|e| e.is_full())) {
                self.1.fetch_add(1, SeqCst);
            }
        }
    }
    let still_held = Arc::new(AtomicUsize::new(0));
    let probe = Probe(b.clone(), still_held.clone());
    let mut call = Box::pin(b.call(async move {
        let _probe = probe;
        std::future::pending::<Result<(), &str>>().await
    }));
    assert!(common::poll_once(call.as_mut()).await.is_none());
    drop(call);
    assert_eq!(
        still_held.load(SeqCst),
        1,
        "the slot was freed before the future was dropped"
    );
    assert_eq!(b.call(async { Ok::<_, &str>(()) }).await, Ok(()));
}
