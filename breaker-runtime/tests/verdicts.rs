//! How a finished call is judged and what comes of it, at the runtime's level: verdicts
//! (`OpenFor`, neutral, a panicking classifier), owned and cancelled call futures,
//! observers, and the public types being `Send + Sync`. Keyed breakers are `keyed.rs`'s.

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering::SeqCst},
        Arc, Mutex,
    },
    time::Duration,
};

use breaker_runtime::{observe, Breaker, CallError, Cause, Config, KeyedBreaker, State, Verdict};
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
