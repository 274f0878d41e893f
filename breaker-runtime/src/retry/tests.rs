//! The retry loop, in paused time.

use std::{
    sync::{
        atomic::{AtomicU32, Ordering::Relaxed},
        Arc,
    },
    time::Duration,
};

use tokio::time::Instant;

use super::{ceiling, delay, DEFAULT_BACKOFF, MAX_BACKOFF};
use crate::{Breaker, BreakerError, CallError, Config, KeyedBreaker, State, Verdict};

fn breaker(name: &str, config: Config) -> Breaker {
    Breaker::unlisted(name.into(), config).unwrap()
}

/// A dependency that fails its first `fail` calls, counting every call that reaches it.
type Answer<'a> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<u32, &'static str>> + Send + 'a>>;
fn flaky<'a>(fail: u32, calls: &'a AtomicU32) -> impl FnMut() -> Answer<'a> + 'a {
    move || {
        Box::pin(async move {
            let n = calls.fetch_add(1, Relaxed) + 1;
            if n <= fail {
                Err("503")
            } else {
                Ok(n)
            }
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_failure_is_retried_until_it_succeeds() {
    let b = breaker("retry::succeeds", Config::default().retry(3));
    let calls = AtomicU32::new(0);
    assert_eq!(b.call_retried(flaky(2, &calls)).await.unwrap(), 3);
    assert_eq!(calls.load(Relaxed), 3);
    let s = b.stats();
    assert_eq!((s.calls, s.failures, s.successes, s.retries), (3, 2, 1, 2));
}

#[tokio::test(start_paused = true)]
async fn the_attempts_are_counted_with_the_first() {
    let b = breaker("retry::attempts", Config::default().retry(3).threshold(100));
    let calls = AtomicU32::new(0);
    let r = b.call_retried(flaky(10, &calls)).await;
    assert!(matches!(r, Err(CallError::Inner("503"))), "the last answer");
    assert_eq!(calls.load(Relaxed), 3);
}

#[tokio::test(start_paused = true)]
async fn without_retry_one_attempt() {
    let b = breaker("retry::off", Config::default());
    let calls = AtomicU32::new(0);
    assert!(b.call_retried(flaky(1, &calls)).await.is_err());
    assert_eq!(calls.load(Relaxed), 1);
    assert_eq!(b.stats().retries, 0);
}

#[tokio::test(start_paused = true)]
async fn a_neutral_outcome_is_not_retried() {
    let b = breaker("retry::neutral", Config::default().retry(3));
    let calls = AtomicU32::new(0);
    let r = b
        .call_retried_with(|e: &&str| *e == "503", flaky(5, &calls))
        .await;
    assert!(r.is_err());
    assert_eq!(calls.load(Relaxed), 3, "503 counts and is retried");

    let calls = AtomicU32::new(0);
    let r = b
        .call_retried_with(|_: &&str| false, flaky(5, &calls))
        .await;
    assert!(r.is_err());
    assert_eq!(calls.load(Relaxed), 1, "the caller's fault: not retried");
}

#[tokio::test(start_paused = true)]
async fn the_waits_double_with_jitter() {
    let b = breaker("retry::waits", Config::default().retry(4).threshold(100));
    let times = std::sync::Mutex::new(Vec::new());
    let start = Instant::now();
    let _ = b
        .call_retried(|| {
            times.lock().unwrap().push(start.elapsed());
            async { Err::<(), _>("503") }
        })
        .await;
    let times = times.into_inner().unwrap();
    assert_eq!(times.len(), 4);
    let mut waited = Duration::ZERO;
    for (n, pair) in times.windows(2).enumerate() {
        let wait = pair[1] - pair[0];
        let base = DEFAULT_BACKOFF * 2u32.pow(n as u32);
        assert!(
            wait >= base.mul_f64(0.8) && wait <= base.mul_f64(1.2),
            "wait {n}: {wait:?}"
        );
        waited += wait;
    }
    assert!(
        waited >= Duration::from_millis(560),
        "100 + 200 + 400, less 20 %"
    );
}

#[test]
fn the_backoff_stops_growing_at_its_max() {
    let initial = Duration::from_millis(100);
    assert_eq!(ceiling(initial, 1), initial);
    assert_eq!(ceiling(initial, 3), Duration::from_millis(400));
    assert_eq!(ceiling(initial, 7), MAX_BACKOFF);
    assert_eq!(ceiling(initial, 200), MAX_BACKOFF, "no overflow");
    assert_eq!(ceiling(Duration::from_secs(8), 3), Duration::from_secs(8));
    for _ in 0..1_000 {
        let d = delay(initial, 1);
        assert!(d >= Duration::from_millis(80) && d <= Duration::from_millis(120));
    }
}

#[tokio::test(start_paused = true)]
async fn an_answers_pushback_is_waited_when_longer() {
    let b = breaker("retry::pushback", Config::default().retry(2).threshold(100));
    let start = Instant::now();
    let times = std::sync::Mutex::new(Vec::new());
    let judge = |r: &Result<u32, &str>| match r {
        Err(_) => Verdict::OpenFor(Duration::from_secs(2)),
        Ok(_) => Verdict::Success,
    };
    let calls = AtomicU32::new(0);
    let mut inner = flaky(1, &calls);
    let r = b
        .call_retried_classified(judge, || {
            times.lock().unwrap().push(start.elapsed());
            inner()
        })
        .await;
    assert_eq!(r.unwrap(), 2, "the retry is the probe after the pushback");
    let times = times.into_inner().unwrap();
    assert!(times[1] - times[0] >= Duration::from_secs(2), "{times:?}");
    assert_eq!(b.state(), State::Closed);
}

#[tokio::test(start_paused = true)]
async fn a_pushback_beyond_the_longest_backoff_is_not_retried() {
    let b = breaker("retry::long_pushback", Config::default().retry(3));
    let judge = |_: &Result<u32, &str>| Verdict::OpenFor(Duration::from_secs(30));
    let calls = AtomicU32::new(0);
    let start = Instant::now();
    let r = b.call_retried_classified(judge, flaky(5, &calls)).await;
    assert!(matches!(r, Err(CallError::Inner("503"))));
    assert_eq!(calls.load(Relaxed), 1);
    assert_eq!(start.elapsed(), Duration::ZERO, "returned at once");
}

#[tokio::test(start_paused = true)]
async fn a_refusal_ends_the_retries_with_its_retry_in() {
    // The second failure opens the breaker: the retry after it is refused, and that
    // refusal is what the caller gets.
    let config = Config::default()
        .retry(5)
        .threshold(2)
        .cool_off(Duration::from_secs(10));
    let b = breaker("retry::refused", config);
    let calls = AtomicU32::new(0);
    let r = b.call_retried(flaky(10, &calls)).await;
    assert_eq!(
        calls.load(Relaxed),
        2,
        "the third attempt never reached the dependency"
    );
    match r {
        Err(CallError::Breaker(e @ BreakerError::Open { .. })) => {
            let left = e.retry_in().unwrap();
            assert!(
                left > Duration::from_secs(9) && left < Duration::from_secs(10),
                "{left:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    // A first attempt refused is not retried either.
    let calls = AtomicU32::new(0);
    assert!(b
        .call_retried(flaky(0, &calls))
        .await
        .unwrap_err()
        .is_open());
    assert_eq!(calls.load(Relaxed), 0);
    assert_eq!(
        b.stats().retries,
        1,
        "one before the opening; the refused one not made"
    );
}

#[tokio::test(start_paused = true)]
async fn a_timeout_is_a_failure_and_is_retried() {
    let config = Config::default()
        .retry(2)
        .timeout(Duration::from_millis(50))
        .threshold(10);
    let b = breaker("retry::timeout", config);
    let calls = AtomicU32::new(0);
    let r = b
        .call_retried(|| {
            let n = calls.fetch_add(1, Relaxed);
            async move {
                if n == 0 {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Ok::<_, ()>(n)
            }
        })
        .await;
    assert_eq!(r.unwrap(), 1);
    assert_eq!(b.stats().timeouts, 1);
}

#[tokio::test(start_paused = true)]
async fn a_spent_budget_returns_the_last_answer_at_once() {
    let config = Config::default().retry(2).threshold(u32::MAX);
    // Waits of a nanosecond: every call within the budget's first second.
    let b = breaker("retry::spent", config.backoff(Duration::from_nanos(1)));
    let calls = AtomicU32::new(0);
    // Every call fails: the floor (100 retries over 10 s) and 20 % of the first attempts.
    for _ in 0..1_000 {
        let _ = b.call_retried(flaky(u32::MAX, &calls)).await;
    }
    let s = b.stats();
    assert_eq!(s.retries + s.retries_denied, 1_000);
    // 1 000 first attempts in at most a few seconds: 200 + 100 retries.
    assert_eq!(s.retries, 300, "{s:?}");
    assert_eq!(calls.load(Relaxed), 1_300);
    let start = Instant::now();
    let _ = b.call_retried(flaky(u32::MAX, &calls)).await;
    assert_eq!(start.elapsed(), Duration::ZERO, "denied: no wait");
}

#[tokio::test(start_paused = true)]
async fn each_key_has_its_own_budget() {
    let hosts = KeyedBreaker::<String>::new(
        "retry::keyed",
        Config::default()
            .retry(2)
            .threshold(u32::MAX)
            .backoff(Duration::from_nanos(1)),
    );
    let calls = Arc::new(AtomicU32::new(0));
    for _ in 0..200 {
        let r = hosts.call_retried("a", flaky(u32::MAX, &calls)).await;
        assert!(r.is_err());
    }
    assert_eq!(hosts.breaker("a").stats().retries, 100 + 40);
    let _ = hosts.call_retried("b", flaky(u32::MAX, &calls)).await;
    assert_eq!(hosts.breaker("b").stats().retries, 1, "b's budget is whole");
}

#[tokio::test(start_paused = true)]
async fn reset_clears_the_retry_counts() {
    let b = breaker("retry::reset", Config::default().retry(2));
    let calls = AtomicU32::new(0);
    let _ = b.call_retried(flaky(1, &calls)).await;
    assert_eq!(b.stats().retries, 1);
    b.handle().reset();
    assert_eq!(b.stats().retries, 0);
}

#[test]
fn the_retry_keys_are_validated() {
    let field = |c: Config| {
        Breaker::unlisted("retry::invalid".into(), c)
            .unwrap_err()
            .field()
    };
    assert_eq!(field(Config::default().retry(1)), "retry");
    assert_eq!(field(Config::default().retry(0)), "retry");
    assert_eq!(
        field(Config::default().retry(3).retry_budget(0)),
        "retry_budget"
    );
    assert_eq!(
        field(Config::default().retry(3).retry_budget(101)),
        "retry_budget"
    );
    assert_eq!(
        field(Config::default().retry(3).backoff(Duration::ZERO)),
        "backoff"
    );
    assert_eq!(field(Config::default().retry_budget(20)), "retry_budget");
    assert_eq!(
        field(Config::default().backoff(Duration::from_millis(1))),
        "backoff"
    );
    let ok = Config::default()
        .retry(2)
        .retry_budget(100)
        .backoff(Duration::from_nanos(1));
    assert!(Breaker::unlisted("retry::valid".into(), ok).is_ok());
}

#[test]
fn the_retry_future_is_send() {
    fn send<T: Send>(_: T) {}
    let b = breaker("retry::send", Config::default().retry(2));
    send(b.call_retried(|| async { Ok::<u32, String>(1) }));
}

/// Issue 40: a call cancelled during its backoff made one attempt, and its retry was never
/// made: it is not counted, and the budget gets its withdrawal back.
#[tokio::test(start_paused = true)]
async fn a_retry_cancelled_during_its_backoff_is_not_counted() {
    let b = breaker(
        "retry::cancelled_in_backoff",
        Config::default().retry(3).threshold(100),
    );
    let calls = AtomicU32::new(0);
    let r = tokio::time::timeout(
        Duration::from_millis(50),
        b.call_retried(flaky(u32::MAX, &calls)),
    )
    .await;
    assert!(
        r.is_err(),
        "cancelled during the first backoff (80 ms at least)"
    );
    assert_eq!(calls.load(Relaxed), 1);
    let s = b.stats();
    assert_eq!((s.calls, s.retries, s.retries_denied), (1, 0, 0), "{s:?}");
    // The withdrawal came back: the floor's 100 retries are all there.
    let budget = b.shared.retry_budget();
    let granted = (0..200).filter(|_| budget.take(0).is_some()).count();
    assert_eq!(granted, 100);
}

/// Issue 40: a retry the breaker refuses is not made: not counted, its withdrawal returned.
#[tokio::test(start_paused = true)]
async fn a_refused_retry_is_not_counted() {
    let config = Config::default()
        .retry(3)
        .threshold(1)
        .cool_off(Duration::from_secs(10));
    let b = breaker("retry::refused_not_counted", config);
    let calls = AtomicU32::new(0);
    let r = b.call_retried(flaky(u32::MAX, &calls)).await;
    assert!(
        r.unwrap_err().is_open(),
        "the retry after the opening is refused"
    );
    assert_eq!(calls.load(Relaxed), 1);
    assert_eq!(b.stats().retries, 0);
    let budget = b.shared.retry_budget();
    assert_eq!((0..200).filter(|_| budget.take(0).is_some()).count(), 100);
}

/// A retry that runs is counted when it runs, not when it is paid for.
#[tokio::test(start_paused = true)]
async fn a_retry_is_counted_when_its_attempt_runs() {
    let b = breaker(
        "retry::counted_when_run",
        Config::default().retry(2).threshold(100),
    );
    let calls = AtomicU32::new(0);
    let call = b.call_retried(flaky(1, &calls));
    tokio::pin!(call);
    assert!(futures_poll(call.as_mut()).is_none(), "waits its backoff");
    assert_eq!(b.stats().retries, 0, "paid, not yet made");
    tokio::time::advance(Duration::from_millis(200)).await;
    assert_eq!(call.await.unwrap(), 2);
    assert_eq!(b.stats().retries, 1);
}

/// One poll of a future, by hand.
fn futures_poll<F: std::future::Future>(f: std::pin::Pin<&mut F>) -> Option<F::Output> {
    let waker = std::task::Waker::noop();
    match f.poll(&mut std::task::Context::from_waker(waker)) {
        std::task::Poll::Ready(v) => Some(v),
        std::task::Poll::Pending => None,
    }
}

#[test]
fn delay_saturates_on_any_input() {
    assert!(delay(Duration::MAX, 1) >= Duration::MAX.mul_f64(0.79));
    assert!(delay(Duration::MAX, u32::MAX) >= Duration::MAX.mul_f64(0.79));
    assert!(delay(Duration::from_secs(u64::MAX / 2), 3) >= Duration::from_secs(u64::MAX / 4));
    assert!(delay(Duration::ZERO, 0).is_zero());
}

proptest::proptest! {
    #[test]
    fn delay_never_panics(secs in proptest::num::u64::ANY, nanos in 0u32..1_000_000_000, n in proptest::num::u32::ANY) {
        let initial = Duration::new(secs, nanos);
        let d = delay(initial, n);
        let base = ceiling(initial, n);
        proptest::prop_assert!(d >= base.mul_f64(0.79));
    }
}

/// A wait of `secs` asked by every failed answer (a `Retry-After`), under the default
/// bound: the times of the attempts.
async fn attempts_under_pushback(name: &str, secs: u64, config: Config) -> Vec<Duration> {
    let b = breaker(name, config.threshold(100));
    let judge = move |r: &Result<u32, &str>| match r {
        Err(_) if secs == 0 => Verdict::Failure,
        Err(_) => Verdict::OpenFor(Duration::from_secs(secs)),
        Ok(_) => Verdict::Success,
    };
    let start = Instant::now();
    let times = std::sync::Mutex::new(Vec::new());
    let _ = b
        .call_retried_classified(judge, || {
            times.lock().unwrap().push(start.elapsed());
            async { Err::<u32, _>("503") }
        })
        .await;
    times.into_inner().unwrap()
}

/// Issue 40: `Retry-After: 5` held the caller 10 s over 3 attempts, `Retry-After: 6`
/// returned at once. Under the default bound of 5 s neither wait is waited.
#[tokio::test(start_paused = true)]
async fn no_cliff_between_five_and_six_seconds() {
    let c = || Config::default().retry(3);
    let five = attempts_under_pushback("retry::ra5", 5, c()).await;
    let six = attempts_under_pushback("retry::ra6", 6, c()).await;
    assert_eq!(
        five,
        vec![Duration::ZERO],
        "a wait ending at 5 s leaves no time: not waited"
    );
    assert_eq!(six, vec![Duration::ZERO]);
    // 2 s twice fits in 5 s: three attempts.
    let two = attempts_under_pushback("retry::ra2", 2, c()).await;
    assert_eq!(two.len(), 3, "{two:?}");
}

#[tokio::test(start_paused = true)]
async fn the_attempts_and_waits_end_within_the_bound() {
    let within = Duration::from_millis(500);
    let config = Config::default()
        .retry(10)
        .backoff(Duration::from_millis(100))
        .retry_within(within);
    let times = attempts_under_pushback("retry::within", 0, config).await;
    // Waits of 100, 200 (±20 %): a third of 400 would end past 500 ms.
    assert_eq!(times.len(), 3, "{times:?}");
    assert!(*times.last().unwrap() <= within);
    // A longer bound lets a long `Retry-After` be waited.
    let config = Config::default()
        .retry(2)
        .retry_within(Duration::from_secs(60));
    let times = attempts_under_pushback("retry::within_long", 30, config).await;
    assert_eq!(times, vec![Duration::ZERO, Duration::from_secs(30)]);
}

#[test]
fn retry_within_is_validated() {
    let field = |c: Config| {
        Breaker::unlisted("retry::within_invalid".into(), c)
            .unwrap_err()
            .field()
    };
    assert_eq!(
        field(Config::default().retry(2).retry_within(Duration::ZERO)),
        "retry_within"
    );
    assert_eq!(
        field(Config::default().retry_within(Duration::from_secs(1))),
        "retry_within"
    );
    let b = breaker("retry::within_default", Config::default().retry(2));
    assert_eq!(
        b.shared.core.live.retry().unwrap().within,
        crate::retry::DEFAULT_RETRY_WITHIN
    );
}
