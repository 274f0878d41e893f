//! A multi-threaded soak, bounded to about two seconds: a thousand tasks, random outcomes,
//! random cancellations, a breaker cycling through all its states. Checked from outside:
//! the bulkhead never holds more than its limit, every call is accounted for exactly once,
//! and once everything has finished every slot is free again.

use std::{
    future::Future,
    pin::pin,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst},
        Arc,
    },
    task::{Context, Poll, Waker},
    time::{Duration, Instant},
};

use breaker_runtime::{Breaker, CallError, Config, State};

const LIMIT: usize = 8;

#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    failed: AtomicU64,
    neutral: AtomicU64,
    rejected: AtomicU64,
    cancelled: AtomicU64,
}

/// A small xorshift per task: outcomes need variety, not quality.
fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn soak_keeps_every_invariant() {
    let b = Arc::new(Breaker::new(
        "soak",
        Config::default()
            .threshold(3)
            .cool_off(Duration::from_millis(2))
            .probes(2)
            .max_concurrent(LIMIT as u32),
    ));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let max_in_flight = Arc::new(AtomicUsize::new(0));
    let tally = Arc::new(Tally::default());
    let deadline = Instant::now() + Duration::from_secs(2);

    let tasks: Vec<_> = (0..1000u64)
        .map(|i| {
            let (b, in_flight, max, tally) = (
                b.clone(),
                in_flight.clone(),
                max_in_flight.clone(),
                tally.clone(),
            );
            tokio::spawn(async move {
                let mut seed = i * 0x9E37_79B9 + 1;
                while Instant::now() < deadline {
                    let roll = next(&mut seed) % 10;
                    let cancel = next(&mut seed).is_multiple_of(10);
                    let dependency = async {
                        let _gauge = Gauge::enter(&in_flight, &max);
                        tokio::task::yield_now().await;
                        match roll {
                            0..=7 => Ok(()),
                            8 => Err("500"),
                            _ => Err("400"),
                        }
                    };
                    let call = b.call_with(|e: &&str| *e == "500", dependency);
                    if cancel {
                        // Cancel: poll once (admitted or refused), then drop it.
                        let mut call = pin!(call);
                        match call.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
                            Poll::Ready(r) => count(&tally, r),
                            Poll::Pending => {
                                tally.cancelled.fetch_add(1, SeqCst);
                            }
                        }
                    } else {
                        count(&tally, call.await);
                    }
                    // Rejections are instant: yield, or the spinning tasks starve the calls
                    // in flight.
                    tokio::task::yield_now().await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }

    let max = max_in_flight.load(SeqCst);
    assert!(
        max <= LIMIT,
        "{max} calls in flight under a bulkhead of {LIMIT}"
    );
    let s = b.stats();
    let t = |c: &AtomicU64| c.load(SeqCst);
    assert_eq!(s.successes, t(&tally.ok));
    assert_eq!(s.rejected, t(&tally.rejected));
    assert_eq!(s.failures, t(&tally.failed));
    assert_eq!(
        s.calls,
        t(&tally.ok)
            + t(&tally.failed)
            + t(&tally.neutral)
            + t(&tally.rejected)
            + t(&tally.cancelled),
        "every call accounted for exactly once"
    );
    assert!(s.rejected > 0 && s.successes > 0 && s.failures > 0, "{s:?}");
    assert!(t(&tally.cancelled) > 0 && t(&tally.neutral) > 0, "{s:?}");
    assert_eq!(in_flight.load(SeqCst), 0);

    // Conservation: reset, then LIMIT calls at once are all admitted.
    b.handle().reset();
    assert_eq!(b.state(), State::Closed);
    let mut held = Vec::new();
    for _ in 0..LIMIT {
        let mut call = Box::pin(b.call(std::future::pending::<Result<(), &str>>()));
        let polled = call.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        assert!(polled.is_pending(), "admitted and waiting");
        held.push(call);
    }
    let over = b.call(async { Ok::<_, &str>(()) }).await.unwrap_err();
    assert!(over.breaker_error().unwrap().is_full());
}

fn count(tally: &Tally, r: Result<(), CallError<&str>>) {
    let c = match r {
        Ok(()) => &tally.ok,
        Err(CallError::Inner("500")) => &tally.failed,
        Err(CallError::Inner(_)) => &tally.neutral,
        Err(CallError::Breaker(_)) => &tally.rejected,
    };
    c.fetch_add(1, SeqCst);
}

/// Counts a call as in flight at the dependency for as long as it lives (dropped included).
struct Gauge<'a>(&'a AtomicUsize);

impl<'a> Gauge<'a> {
    fn enter(in_flight: &'a AtomicUsize, max: &AtomicUsize) -> Self {
        let now = in_flight.fetch_add(1, SeqCst) + 1;
        max.fetch_max(now, SeqCst);
        Gauge(in_flight)
    }
}

impl Drop for Gauge<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}
