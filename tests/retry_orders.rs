//! The three orders of retry and breaker a user can build, and what the breaker counts in
//! each (the README's *Retries and the breaker: who sees what*). Paused time.

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::time::Duration;

use breaker::{Breaker, CallError, Config, State};

async fn down(hits: &AtomicU32) -> Result<(), &'static str> {
    hits.fetch_add(1, SeqCst);
    Err("503")
}

/// `breaker::retry`: around the breaker, with it. Every attempt is a call; the refusal that
/// follows the opening ends the retries.
#[tokio::test(start_paused = true)]
async fn retry_with_the_breaker_counts_every_attempt_and_stops_at_the_refusal() {
    let hits = AtomicU32::new(0);
    let b = Breaker::new("orders::with", Config::default().retry(3).threshold(100));
    assert!(b.call_retried(|| down(&hits)).await.is_err());
    let s = b.stats();
    assert_eq!(
        (hits.load(SeqCst), s.calls, s.failures, s.retries),
        (3, 3, 3, 2)
    );

    let hits = AtomicU32::new(0);
    let b = Breaker::new(
        "orders::with_opening",
        Config::default().retry(3).threshold(2),
    );
    let r = b.call_retried(|| down(&hits)).await;
    assert!(matches!(r, Err(CallError::Breaker(e)) if e.is_open()));
    assert_eq!(hits.load(SeqCst), 2, "the third attempt was refused");
}

/// A hand-made retry outside the breaker: every attempt is a call too, but nothing stops it
/// at a refusal (it retries the refusals, at no cost to the dependency) and no budget bounds
/// it.
#[tokio::test(start_paused = true)]
async fn a_naive_retry_outside_counts_every_attempt_and_retries_refusals() {
    let hits = AtomicU32::new(0);
    let b = Breaker::new("orders::outside", Config::default().threshold(2));
    for n in 1..=3 {
        if b.call(down(&hits)).await.is_ok() {
            break;
        }
        tokio::time::sleep(breaker::retry::delay(Duration::from_millis(100), n)).await;
    }
    let s = b.stats();
    assert_eq!(
        (hits.load(SeqCst), s.calls, s.failures, s.rejected),
        (2, 3, 2, 1)
    );
    assert_eq!(s.retries, 0, "not a retry the breaker knows of");
}

/// A retry inside the breaker: the breaker sees one outcome per request, however many
/// attempts failed, so it trips three times later.
#[tokio::test(start_paused = true)]
async fn a_retry_inside_the_breaker_counts_one_outcome_per_request() {
    let hits = AtomicU32::new(0);
    let b = Breaker::new("orders::inside", Config::default().threshold(2));
    let request = || async {
        let mut last = Ok(());
        for _ in 0..3 {
            last = down(&hits).await;
            if last.is_ok() {
                break;
            }
        }
        last
    };
    let _ = b.call(request()).await;
    let s = b.stats();
    assert_eq!((hits.load(SeqCst), s.calls, s.failures), (3, 1, 1));
    assert_eq!(
        b.state(),
        State::Closed,
        "six failed attempts would have opened it"
    );
    let _ = b.call(request()).await;
    assert_eq!(b.state(), State::Open);
    assert_eq!(hits.load(SeqCst), 6);
}
