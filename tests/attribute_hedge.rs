//! `hedge`, `hedge_delay` and `hedge_budget` on `#[circuit_breaker]`: a slow attempt is
//! raced by another running the body again, and the first answer wins. Paused time.

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::time::Duration;

use breaker::{circuit_breaker, registry, BreakerError};
use tokio::time::Instant;

#[derive(Debug, PartialEq, thiserror::Error)]
enum Error {
    #[error("503")]
    Unavailable,
    #[error(transparent)]
    Breaker(#[from] BreakerError),
}

static SLOW_FIRST_CALLS: AtomicU32 = AtomicU32::new(0);

/// Its first attempt takes a second, every later one 5 ms. The argument is consumed by every
/// attempt, so each needs its own copy.
#[circuit_breaker(hedge = 1, hedge_delay = "20ms", name = "hedge::attr::slow_first")]
async fn slow_first(payload: String) -> Result<usize, Error> {
    let n = SLOW_FIRST_CALLS.fetch_add(1, SeqCst);
    let wait = if n == 0 { 1_000 } else { 5 };
    tokio::time::sleep(Duration::from_millis(wait)).await;
    Ok(payload.into_bytes().len())
}

#[tokio::test(start_paused = true)]
async fn a_slow_first_attempt_is_hedged_after_the_fixed_delay() {
    let start = Instant::now();
    assert_eq!(slow_first("four".to_owned()).await, Ok(4));
    // The hedge went out at 20 ms and answered 5 ms later; the first attempt was dropped.
    assert_eq!(start.elapsed(), Duration::from_millis(25));
    assert_eq!(SLOW_FIRST_CALLS.load(SeqCst), 2);
    let stats = registry().get("hedge::attr::slow_first").unwrap().stats();
    assert_eq!((stats.hedges, stats.hedges_won), (1, 1));
}

static FAST_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(
    hedge = 2,
    hedge_delay = "20ms",
    hedge_budget = 50,
    name = "hedge::attr::fast"
)]
async fn fast(n: &u32) -> Result<u32, Error> {
    FAST_CALLS.fetch_add(1, SeqCst);
    tokio::time::sleep(Duration::from_millis(5)).await;
    Ok(*n)
}

#[tokio::test(start_paused = true)]
async fn an_answer_before_the_delay_sends_no_hedge() {
    assert_eq!(fast(&7).await, Ok(7));
    assert_eq!(FAST_CALLS.load(SeqCst), 1);
    let stats = registry().get("hedge::attr::fast").unwrap().stats();
    assert_eq!(stats.hedges, 0);
}

static DOWN_CALLS: AtomicU32 = AtomicU32::new(0);

/// Every attempt fails at once: the failure sends the hedge without waiting for the delay,
/// and the first attempt's error is the call's.
#[circuit_breaker(
    hedge = 1,
    hedge_delay = "1s",
    threshold = 100,
    name = "hedge::attr::down"
)]
async fn down() -> Result<u32, Error> {
    DOWN_CALLS.fetch_add(1, SeqCst);
    Err(Error::Unavailable)
}

#[tokio::test(start_paused = true)]
async fn a_failure_hedges_at_once_and_every_failure_returns_the_error() {
    let start = Instant::now();
    assert_eq!(down().await, Err(Error::Unavailable));
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(DOWN_CALLS.load(SeqCst), 2);
}
