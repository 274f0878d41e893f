//! `hedge`, `hedge_delay` and `hedge_budget` on `#[circuit_breaker]`: a slow attempt is
//! raced by another running the body again, and the first answer wins. Paused time.

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::time::Duration;

use breaker::{circuit_breaker, registry, BreakerError, CallError};
use tokio::time::Instant;

#[derive(Debug, PartialEq, thiserror::Error)]
enum Error {
    #[error("503")]
    Unavailable,
    #[error("attempt {0} failed")]
    Attempt(u32),
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

static NUMBERED_CALLS: AtomicU32 = AtomicU32::new(0);

/// Each attempt fails with its own number; the fallback receives the arguments and the
/// first attempt's error.
#[circuit_breaker(hedge = 2, hedge_delay = "1s", threshold = 100, fallback = first_error)]
async fn numbered(tag: u32) -> Result<u32, Error> {
    let _ = tag;
    Err(Error::Attempt(NUMBERED_CALLS.fetch_add(1, SeqCst)))
}

async fn first_error(tag: u32, err: CallError<Error>) -> Result<u32, Error> {
    match err {
        CallError::Inner(Error::Attempt(n)) => Ok(tag * 10 + n),
        CallError::Inner(e) => Err(e),
        CallError::Breaker(b) => Err(b.into()),
    }
}

#[tokio::test(start_paused = true)]
async fn the_fallback_sees_the_first_attempts_error() {
    assert_eq!(numbered(7).await, Ok(70));
    assert_eq!(NUMBERED_CALLS.load(SeqCst), 3);
}

/// The attribute's caps are the runtime's: at each end of every range the attribute accepts,
/// the runtime builds the breaker (it would refuse a `Config` out of range).
#[circuit_breaker(
    hedge = 4,
    hedge_delay = "2s",
    hedge_budget = 100,
    name = "hedge::attr::high"
)]
async fn at_the_high_caps() -> Result<u32, Error> {
    Ok(1)
}

#[circuit_breaker(
    hedge = 1,
    hedge_delay = "1ms",
    hedge_budget = 1,
    name = "hedge::attr::low"
)]
async fn at_the_low_caps() -> Result<u32, Error> {
    Ok(1)
}

#[circuit_breaker(hedge = 1, hedge_delay = "p99.9", name = "hedge::attr::p999")]
async fn at_the_highest_percentile() -> Result<u32, Error> {
    Ok(1)
}

#[circuit_breaker(hedge = 1, hedge_delay = "p50", name = "hedge::attr::p50")]
async fn at_the_lowest_percentile() -> Result<u32, Error> {
    Ok(1)
}

#[tokio::test(start_paused = true)]
async fn the_attributes_caps_are_the_runtimes() {
    assert_eq!(at_the_high_caps().await, Ok(1));
    assert_eq!(at_the_low_caps().await, Ok(1));
    assert_eq!(at_the_highest_percentile().await, Ok(1));
    assert_eq!(at_the_lowest_percentile().await, Ok(1));
    for name in ["high", "low", "p999", "p50"] {
        let name = format!("hedge::attr::{name}");
        assert_eq!(registry().get(&name).unwrap().stats().calls, 1, "{name}");
    }
}
