//! `retry`, `retry_budget`, `backoff` and `retry_within` on `#[circuit_breaker]`: each attempt runs the body
//! again through the breaker, and the fallback sees the last attempt's error. Paused time.

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::time::Duration;

use breaker::{circuit_breaker, registry, BreakerError, CallError, Verdict};
use tokio::time::Instant;

#[derive(Debug, PartialEq, thiserror::Error)]
enum Error {
    #[error("503")]
    Unavailable,
    #[error("bad request")]
    BadRequest,
    #[error(transparent)]
    Breaker(#[from] BreakerError),
}

static FLAKY_CALLS: AtomicU32 = AtomicU32::new(0);

/// Fails its first two calls. The argument is consumed by every attempt.
#[circuit_breaker(retry = 3, name = "retry::attr::flaky")]
async fn flaky(payload: String) -> Result<usize, Error> {
    let n = FLAKY_CALLS.fetch_add(1, SeqCst);
    drop(payload.clone());
    if n < 2 {
        Err(Error::Unavailable)
    } else {
        Ok(payload.len())
    }
}

#[tokio::test(start_paused = true)]
async fn a_failure_is_retried_and_each_attempt_gets_the_arguments() {
    assert_eq!(flaky("four".to_owned()).await, Ok(4));
    assert_eq!(FLAKY_CALLS.load(SeqCst), 3);
    let stats = registry().get("retry::attr::flaky").unwrap().stats();
    assert_eq!((stats.calls, stats.failures, stats.retries), (3, 2, 2));
}

static DOWN_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(retry = 3, threshold = 100, name = "retry::attr::fallback", fallback = last_error)]
async fn always_down(tag: u32) -> Result<u32, Error> {
    DOWN_CALLS.fetch_add(1, SeqCst);
    let _ = tag;
    Err(Error::Unavailable)
}

async fn last_error(tag: u32, err: CallError<Error>) -> Result<u32, Error> {
    match err {
        CallError::Inner(e) => Err(e),
        CallError::Breaker(_) => Ok(tag),
    }
}

#[tokio::test(start_paused = true)]
async fn the_fallback_sees_the_last_attempts_error() {
    assert_eq!(always_down(7).await, Err(Error::Unavailable));
    assert_eq!(DOWN_CALLS.load(SeqCst), 3);
}

static OPENS_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(retry = 5, threshold = 2, cool_off = "30s", name = "retry::attr::opens", fallback = refused)]
async fn opens() -> Result<(), Error> {
    OPENS_CALLS.fetch_add(1, SeqCst);
    Err(Error::Unavailable)
}

async fn refused(err: CallError<Error>) -> Result<(), Error> {
    match err {
        CallError::Breaker(e) => {
            assert!(e.is_open());
            assert!(e.retry_in().unwrap() > Duration::from_secs(29));
            Ok(())
        }
        CallError::Inner(e) => Err(e),
    }
}

#[tokio::test(start_paused = true)]
async fn a_refusal_ends_the_retries_and_reaches_the_fallback() {
    assert_eq!(opens().await, Ok(()));
    assert_eq!(
        OPENS_CALLS.load(SeqCst),
        2,
        "the breaker opened on the second failure"
    );
}

static SLOW_CALLS: AtomicU32 = AtomicU32::new(0);

#[circuit_breaker(
    retry = 2,
    backoff = "2s",
    retry_budget = 50,
    threshold = 100,
    name = "retry::attr::backoff"
)]
async fn slow_backoff() -> Result<(), Error> {
    SLOW_CALLS.fetch_add(1, SeqCst);
    Err(Error::Unavailable)
}

#[tokio::test(start_paused = true)]
async fn backoff_sets_the_first_wait() {
    let start = Instant::now();
    assert_eq!(slow_backoff().await, Err(Error::Unavailable));
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(1_600) && waited <= Duration::from_millis(2_400),
        "{waited:?}"
    );
    assert_eq!(SLOW_CALLS.load(SeqCst), 2);
}

static NEUTRAL_CALLS: AtomicU32 = AtomicU32::new(0);

fn judge(r: &Result<(), Error>) -> Verdict {
    match r {
        Err(Error::BadRequest) => Verdict::Neutral,
        Err(_) => Verdict::Failure,
        Ok(()) => Verdict::Success,
    }
}

#[circuit_breaker(retry = 3, classify = judge, name = "retry::attr::neutral")]
async fn bad_request() -> Result<(), Error> {
    NEUTRAL_CALLS.fetch_add(1, SeqCst);
    Err(Error::BadRequest)
}

#[tokio::test(start_paused = true)]
async fn a_neutral_outcome_is_not_retried() {
    assert_eq!(bad_request().await, Err(Error::BadRequest));
    assert_eq!(NEUTRAL_CALLS.load(SeqCst), 1);
}

struct Client {
    calls: AtomicU32,
}

impl Client {
    #[circuit_breaker(retry = 2, key = host, threshold = 100)]
    async fn get(&self, host: &str) -> Result<u32, Error> {
        let _ = host;
        Err(Error::Unavailable)
            .or(Ok(self.calls.fetch_add(1, SeqCst)))
            .and_then(|n| {
                if n % 2 == 0 {
                    Err(Error::Unavailable)
                } else {
                    Ok(n)
                }
            })
    }
}

#[tokio::test(start_paused = true)]
async fn a_keyed_method_retries_per_key() {
    let client = Client {
        calls: AtomicU32::new(0),
    };
    assert_eq!(client.get("a").await, Ok(1));
    assert_eq!(client.get("b").await, Ok(3));
    assert_eq!(client.calls.load(SeqCst), 4);
}

#[async_trait::async_trait]
trait Quotes {
    async fn quote(&self, symbol: String) -> Result<u32, Error>;
}

struct Flaky {
    calls: AtomicU32,
}

#[async_trait::async_trait]
impl Quotes for Flaky {
    #[circuit_breaker(retry = 3, threshold = 100, name = "retry::attr::async_trait")]
    async fn quote(&self, symbol: String) -> Result<u32, Error> {
        let n = self.calls.fetch_add(1, SeqCst);
        let owned: String = symbol;
        if n < 2 {
            Err(Error::Unavailable)
        } else {
            Ok(owned.len() as u32)
        }
    }
}

#[tokio::test(start_paused = true)]
async fn an_async_trait_method_retries() {
    let flaky = Flaky {
        calls: AtomicU32::new(0),
    };
    assert_eq!(flaky.quote("abc".to_owned()).await, Ok(3));
    assert_eq!(flaky.calls.load(SeqCst), 3);
}

static BOUNDED_CALLS: AtomicU32 = AtomicU32::new(0);

/// Every failure asks for a 2 s wait (a `Retry-After: 2`).
fn asks_two_seconds(r: &Result<(), Error>) -> Verdict {
    match r {
        Ok(()) => Verdict::Success,
        Err(_) => Verdict::OpenFor(Duration::from_secs(2)),
    }
}

#[circuit_breaker(
    retry = 4,
    retry_within = "3s",
    classify = asks_two_seconds,
    threshold = 100,
    name = "retry::attr::within"
)]
async fn bounded() -> Result<(), Error> {
    BOUNDED_CALLS.fetch_add(1, SeqCst);
    Err(Error::Unavailable)
}

/// `retry_within = "3s"`: a second 2 s wait would end past 3 s, so the call ends after two
/// attempts (not four, 6 s later).
#[tokio::test(start_paused = true)]
async fn retry_within_bounds_the_attempts_and_waits() {
    let start = Instant::now();
    assert_eq!(bounded().await, Err(Error::Unavailable));
    assert_eq!(BOUNDED_CALLS.load(SeqCst), 2);
    let took = start.elapsed();
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_secs(3),
        "{took:?}"
    );
    let stats = registry().get("retry::attr::within").unwrap().stats();
    assert_eq!((stats.calls, stats.retries), (2, 1));
}
