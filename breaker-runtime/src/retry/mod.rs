//! Retries that know the breaker, and spend a budget.
//!
//! [`Breaker::call_retried`](crate::Breaker::call_retried) (and its siblings) makes up to
//! [`Config::retry`](crate::Config::retry)(crate::Config::retry) attempts, each one a call through the breaker and
//! judged by it:
//!
//! - a success or a neutral outcome (an error the judge calls the caller's fault) is
//!   returned at once: retrying it would not change it;
//! - a refusal by the breaker (open, half-open full, throttled, bulkhead full) is returned at
//!   once, with its `retry_in`: the breaker already decided the dependency needs a rest, and
//!   a retry would only queue behind that decision;
//! - a failure (an error, a timeout, a classifier's `Failure`) is retried after
//!   [`delay`]`(backoff, n)`, or after the answer's own `Retry-After` / pushback (a
//!   classifier's [`Verdict::OpenFor`]) when that is longer;
//! - each retry is paid from the breaker's retry budget (one per breaker, one per key of a
//!   keyed breaker); with the budget spent, the last answer is returned at once.
//!
//! The budget (Finagle's `RetryBudget`, tower's `TpsBudget`): every first attempt that the
//! breaker admits deposits, every retry withdraws; retries are allowed up to `retry_budget`
//! percent (default [`DEFAULT_BUDGET_PERCENT`]) of the first attempts of the last
//! [`WINDOW`], plus a floor of [`FLOOR_PER_SECOND`] retries a second, available from the
//! start. So under a total outage the dependency sees at most 1.2× its offered load (plus
//! the floor), never the 3× of three naive attempts; and the breaker, judging every attempt,
//! opens on the failures as it would without retries.
//!
//! ```
//! use std::time::Duration;
//! use breaker::{Breaker, Config};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! let quotes = Breaker::new("docs::retry", Config::default().retry(3).backoff(Duration::from_millis(50)));
//! let mut tries = 0;
//! let quote = quotes
//!     .call_retried(|| {
//!         tries += 1;
//!         let attempt = tries;
//!         async move { if attempt < 3 { Err("503") } else { Ok(42) } }
//!     })
//!     .await;
//! assert_eq!(quote.unwrap(), 42);
//! assert_eq!(quotes.stats().retries, 2);
//! # }
//! ```

pub(crate) mod budget;
#[cfg(all(test, not(breaker_loom)))]
mod tests;

pub use crate::config::{DEFAULT_BACKOFF, DEFAULT_BUDGET_PERCENT};
pub use budget::{FLOOR_PER_SECOND, WINDOW};

use std::{
    future::Future,
    sync::atomic::{AtomicU64, Ordering::Relaxed},
    time::Duration,
};

use crate::{clock::Clock, future::CallFuture, shared::Host, verdict::Judge, CallError, Verdict};

/// The longest wait between two attempts (before jitter), or the configured backoff when
/// that is longer. An answer that asks for a longer wait (`Retry-After`) is not retried.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The wait before retry `n` (1 for the first retry): `min(initial·2^(n−1), max)` with
/// `max` [`MAX_BACKOFF`] (or `initial` when longer), times a random factor in 0.8..1.2
/// (gRPC A6), so clients that failed together do not retry together.
pub fn delay(initial: Duration, n: u32) -> Duration {
    let base = ceiling(initial, n);
    let factor = 0.8 + 0.4 * crate::overload::random::unit(crate::overload::random::draw());
    base.mul_f64(factor)
}

/// The wait before retry `n` before jitter.
fn ceiling(initial: Duration, n: u32) -> Duration {
    let max = MAX_BACKOFF.max(initial);
    let doubling = 1u32.checked_shl(n.saturating_sub(1)).unwrap_or(u32::MAX);
    initial.saturating_mul(doubling).min(max)
}

/// A judge that also writes down its verdict, for the retry loop to read once the attempt
/// ends (the judge runs once per attempt, inside the call future).
struct Recorder<'s, J> {
    judge: J,
    slot: &'s VerdictSlot,
}

/// A verdict, written by [`Recorder`]: 0 none yet, 1 success, 2 failure, 3 neutral, else
/// `OpenFor` of (value − 4) nanoseconds. Atomic so the retry future stays `Send`.
#[derive(Default)]
struct VerdictSlot(AtomicU64);

impl VerdictSlot {
    fn put(&self, v: Verdict) {
        let code = match v {
            Verdict::Success => 1,
            Verdict::Failure => 2,
            Verdict::Neutral => 3,
            Verdict::OpenFor(d) => crate::clock::to_nanos(d).saturating_add(4),
        };
        self.0.store(code, Relaxed);
    }

    fn take(&self) -> Option<Verdict> {
        match self.0.swap(0, Relaxed) {
            0 => None,
            1 => Some(Verdict::Success),
            2 => Some(Verdict::Failure),
            3 => Some(Verdict::Neutral),
            n => Some(Verdict::OpenFor(Duration::from_nanos(n - 4))),
        }
    }
}

impl<T, E, J: Judge<T, E>> Judge<T, E> for Recorder<'_, J> {
    const OK_IS_SUCCESS: bool = J::OK_IS_SUCCESS;

    #[inline]
    fn judge(self, result: &Result<T, E>) -> Verdict {
        let v = self.judge.judge(result);
        self.slot.put(v);
        v
    }
}

/// What the loop does after an attempt.
enum Next {
    /// Return this attempt's result.
    Done,
    /// Retry after at least this long (an answer's pushback; zero without one).
    Retry(Duration),
}

/// The retry loop: attempts through the breaker `host`, judged by `judge`.
pub(crate) async fn run<H, J, F, Fut, T, E>(
    host: H,
    judge: J,
    mut make: F,
) -> Result<T, CallError<E>>
where
    H: Host,
    J: Judge<T, E> + Clone,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let shared = host.shared();
    // Read once per retried call (the policy in force: `reconfigure` may change it).
    let Some(policy) = shared.core.live.retry() else {
        return CallFuture::new(host.clone(), judge, make()).await;
    };
    let slot = VerdictSlot::default();
    let mut attempt = 1;
    // Feature `otel`: the call's span, its attempts its children (`crate::traced`).
    #[cfg(feature = "otel")]
    let mut traced = crate::traced::Retried::begin(shared);
    loop {
        let recorder = Recorder {
            judge: judge.clone(),
            slot: &slot,
        };
        let call = CallFuture::new(host.clone(), recorder, make());
        #[cfg(feature = "otel")]
        let call = call.attempt(traced.attempt(shared, attempt));
        let result = call.await;
        let verdict = slot.take();
        #[cfg(feature = "otel")]
        traced.record(&result, verdict, attempt);
        let next = match (&result, verdict) {
            // The breaker's own refusal ends the retries, with its `retry_in`.
            (Err(CallError::Breaker(e)), _) if !e.is_timeout() => return result,
            // The breaker's timeout: a failure of the dependency.
            (Err(CallError::Breaker(_)), _) => Next::Retry(Duration::ZERO),
            // Judged inline as a success on the fast path (no verdict written).
            (Ok(_), None) => Next::Done,
            (Err(CallError::Inner(_)), None) => Next::Retry(Duration::ZERO),
            (_, Some(Verdict::Success | Verdict::Neutral)) => Next::Done,
            (_, Some(Verdict::Failure)) => Next::Retry(Duration::ZERO),
            (_, Some(Verdict::OpenFor(d))) => Next::Retry(d),
        };
        let budget = shared.retry_budget();
        if attempt == 1 {
            budget.deposit(shared.clock.now(), policy.percent);
        }
        let Next::Retry(pushback) = next else {
            return result;
        };
        if attempt >= policy.attempts {
            return result;
        }
        let wait = delay(policy.backoff, attempt);
        // An answer that asks for more than the longest backoff is not retried: holding the
        // caller that long is the caller's decision, not a retry's.
        if pushback > MAX_BACKOFF.max(policy.backoff) {
            return result;
        }
        if !budget.withdraw(shared.clock.now()) {
            return result;
        }
        tokio::time::sleep(wait.max(pushback)).await;
        attempt += 1;
    }
}

impl crate::Breaker {
    /// The attempts [`call_retried`](Self::call_retried) makes at most
    /// ([`Config::retry`](crate::Config::retry)), or `None` without `retry`: one attempt.
    pub fn retry_attempts(&self) -> Option<u32> {
        self.shared.core.live.retry().map(|p| p.attempts)
    }

    /// Runs an async call through the breaker, retried per [`Config::retry`](crate::Config::retry) (see
    /// [`breaker::retry`](crate::retry)); every `Err` counts as a failure. `make` makes each
    /// attempt's future. Without `retry` in the configuration, it makes one attempt.
    pub async fn call_retried<F, Fut, T, E>(&self, make: F) -> Result<T, CallError<E>>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        run(&*self.shared, crate::EveryError, make).await
    }

    /// Like [`call_retried`](Self::call_retried), with `is_failure` deciding which errors
    /// count against the dependency; one it returns `false` for is neutral, and not retried.
    pub async fn call_retried_with<F, Fut, T, E, P>(
        &self,
        is_failure: P,
        make: F,
    ) -> Result<T, CallError<E>>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        P: Fn(&E) -> bool + Clone,
    {
        run(&*self.shared, is_failure, make).await
    }

    /// Like [`call_retried`](Self::call_retried), with `classify` judging every attempt: a
    /// `Failure` is retried, an `OpenFor(d)` is retried after at least `d`, a `Success` or
    /// `Neutral` is returned.
    pub async fn call_retried_classified<F, Fut, T, E, C>(
        &self,
        classify: C,
        make: F,
    ) -> Result<T, CallError<E>>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        C: Fn(&Result<T, E>) -> Verdict + Clone,
    {
        run(&*self.shared, crate::Classify(classify), make).await
    }

    /// [`call_retried_classified`](Self::call_retried_classified) owning the breaker, so the
    /// future is `'static` when `make` is (for `tokio::spawn`, tower services).
    pub fn call_retried_owned<F, Fut, T, E, J>(
        self,
        judge: J,
        make: F,
    ) -> impl Future<Output = Result<T, CallError<E>>>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        J: Judge<T, E> + Clone,
    {
        run(self, judge, make)
    }
}

impl<K: crate::BreakerKey> crate::KeyedBreaker<K> {
    /// Like [`Breaker::call_retried`](crate::Breaker::call_retried) on `key`'s breaker, with
    /// `key`'s own retry budget.
    pub fn call_retried<Q, F, Fut, T, E>(
        &self,
        key: &Q,
        make: F,
    ) -> impl Future<Output = Result<T, CallError<E>>>
    where
        K: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ToOwned<Owned = K> + ?Sized,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        run(self.breaker(key), crate::EveryError, make)
    }
}
