//! Retries that know the breaker, and spend a budget.
//!
//! [`Breaker::call_retried`](crate::Breaker::call_retried) (and its siblings) makes up to
//! [`Config::retry`](crate::Config::retry) attempts, each one a call through the breaker and
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
//! - the attempts and waits of one retried call end within
//!   [`Config::retry_within`](crate::Config::retry_within) (default
//!   [`DEFAULT_RETRY_WITHIN`], 5 s) of its start: a wait that would end at or past it is not
//!   waited, and the last answer is returned at once (so `Retry-After: 5` and `6` behave
//!   alike; an attempt already running is not cut: its time is `timeout`'s); a tower
//!   service not ready for the retry by then gives the last answer too;
//! - each retry is paid from the breaker's retry budget (one per breaker, one per key of a
//!   keyed breaker); with the budget spent, the last answer is returned at once. A retry
//!   counts (`Stats::retries`, the budget's withdrawal) only when its attempt runs: a call
//!   cancelled during its backoff, or whose retry the breaker refuses, gives the withdrawal
//!   back.
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

pub use crate::config::{DEFAULT_BACKOFF, DEFAULT_BUDGET_PERCENT, DEFAULT_RETRY_WITHIN};
pub use budget::{FLOOR_PER_SECOND, WINDOW};

use std::{future::Future, time::Duration};

use crate::{
    clock::Clock,
    future::CallFuture,
    shared::Host,
    verdict::{Judge, Recorder, VerdictSlot},
    CallError, Verdict,
};

/// The longest wait between two attempts (before jitter), or the configured backoff when
/// that is longer.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The wait before retry `n` (1 for the first retry): `min(initial·2^(n−1), max)` with
/// `max` [`MAX_BACKOFF`] (or `initial` when longer), times a random factor in 0.8..1.2
/// (gRPC A6), so clients that failed together do not retry together. Saturates: any
/// `initial` and `n` give a duration (at most [`Duration::MAX`]), never a panic.
pub fn delay(initial: Duration, n: u32) -> Duration {
    let base = ceiling(initial, n);
    let factor = 0.8 + 0.4 * crate::overload::random::unit(crate::overload::random::draw());
    // `mul_f64` panics past `Duration::MAX` (an `initial` near it, times 1.2).
    Duration::try_from_secs_f64(base.as_secs_f64() * factor).unwrap_or(Duration::MAX)
}

/// The wait before retry `n` before jitter.
fn ceiling(initial: Duration, n: u32) -> Duration {
    let max = MAX_BACKOFF.max(initial);
    let doubling = 1u32.checked_shl(n.saturating_sub(1)).unwrap_or(u32::MAX);
    initial.saturating_mul(doubling).min(max)
}

/// What the loop does after an attempt.
enum Next {
    /// Return this attempt's result.
    Done,
    /// Retry after at least this long (an answer's pushback; zero without one).
    Retry(Duration),
}

/// A retry paid for from the budget and not yet made: its cost goes back if it is dropped
/// before its attempt runs (the call was cancelled while it waited or readied, the breaker
/// refused it); counted as a retry when it runs ([`Ran`]).
struct Paid<'b> {
    budget: &'b budget::Budget,
    second: Option<u64>,
}

impl Paid<'_> {
    /// The attempt runs: the retry is made.
    fn spend(&mut self) {
        if self.second.take().is_some() {
            self.budget.spent();
        }
    }
}

impl Drop for Paid<'_> {
    fn drop(&mut self) {
        if let Some(second) = self.second.take() {
            self.budget.refund(second);
        }
    }
}

pin_project_lite::pin_project! {
    /// An attempt's future, which spends its retry's payment when first polled: the breaker
    /// polls it only once it admitted the attempt.
    struct Ran<'b, F> {
        #[pin]
        attempt: F,
        paid: Option<Paid<'b>>,
    }
}

impl<F: Future> Future for Ran<'_, F> {
    type Output = F::Output;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let this = self.project();
        if let Some(mut paid) = this.paid.take() {
            paid.spend();
        }
        this.attempt.poll(cx)
    }
}

/// The retry loop: attempts through the breaker `host`, judged by `judge`, each made by
/// `make` (see [`run_prepared`]).
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
    let prepare = move || std::future::ready(Ok::<_, E>(make()));
    run_prepared(host, judge, prepare, |_: &Result<T, CallError<E>>| false).await
}

/// The retry loop. `prepare` makes each attempt's future, after waiting for what the
/// attempt needs that is not the dependency's time (a tower service's readiness): it runs
/// before the breaker admits the attempt, so no `timeout`, bulkhead seat or probe slot is
/// held while it waits; its error ends the call, uncounted. A result `is_final` says so is
/// returned whatever its verdict (an answer already handed to the caller).
pub(crate) async fn run_prepared<H, J, F, P, Fut, T, E, D>(
    host: H,
    judge: J,
    mut prepare: F,
    is_final: D,
) -> Result<T, CallError<E>>
where
    H: Host,
    J: Judge<T, E> + Clone,
    F: FnMut() -> P,
    P: Future<Output = Result<Fut, E>>,
    Fut: Future<Output = Result<T, E>>,
    D: Fn(&Result<T, CallError<E>>) -> bool,
{
    let shared = host.shared();
    // Read once per retried call (the policy in force: `reconfigure` may change it).
    let Some(policy) = shared.core.live.retry() else {
        let attempt = prepare().await.map_err(CallError::Inner)?;
        return CallFuture::new(host.clone(), judge, attempt).await;
    };
    // The bound on the attempts and waits: from the first attempt's start.
    let start = tokio::time::Instant::now();
    let budget = shared.retry_budget();
    let slot = VerdictSlot::default();
    let deadline = start.checked_add(policy.within);
    let mut paid = None;
    let mut attempt = 1;
    let mut made = prepare().await.map_err(CallError::Inner)?;
    // Feature `otel`: the call's span, its attempts its children (`crate::traced`).
    #[cfg(feature = "otel")]
    let mut traced = crate::traced::Retried::begin(shared);
    loop {
        let recorder = Recorder {
            judge: judge.clone(),
            slot: &slot,
        };
        let ran = Ran {
            attempt: made,
            paid: paid.take(),
        };
        let call = CallFuture::new(host.clone(), recorder, ran);
        #[cfg(feature = "otel")]
        let call = call.attempt(traced.attempt(shared, attempt));
        let result = call.await;
        let verdict = slot.take();
        #[cfg(feature = "otel")]
        traced.record(&result, verdict, attempt);
        let next = match (&result, verdict) {
            // The breaker's own refusal ends the retries, with its `retry_in` (a refused
            // retry's payment went back with its unpolled attempt).
            (Err(CallError::Breaker(e)), _) if !e.is_timeout() => return result,
            _ if is_final(&result) => Next::Done,
            // The breaker's timeout: a failure of the dependency.
            (Err(CallError::Breaker(_)), _) => Next::Retry(Duration::ZERO),
            // Judged inline as a success on the fast path (no verdict written).
            (Ok(_), None) => Next::Done,
            (Err(CallError::Inner(_)), None) => Next::Retry(Duration::ZERO),
            (_, Some(Verdict::Success | Verdict::Neutral)) => Next::Done,
            (_, Some(Verdict::Failure)) => Next::Retry(Duration::ZERO),
            (_, Some(Verdict::OpenFor(d))) => Next::Retry(d),
        };
        if attempt == 1 {
            budget.deposit(shared.clock.now(), policy.percent);
        }
        let Next::Retry(pushback) = next else {
            return result;
        };
        if attempt >= policy.attempts {
            return result;
        }
        let wait = delay(policy.backoff, attempt).max(pushback);
        // A wait that would end at or past `retry_within` is not waited (it leaves no time
        // for the retry): the caller gets the last answer now, not after the wait.
        let ends = tokio::time::Instant::now().checked_add(wait);
        if ends.is_none_or(|ends| ends.duration_since(start) >= policy.within) {
            return result;
        }
        let Some(second) = budget.take(shared.clock.now()) else {
            return result;
        };
        paid = Some(Paid {
            budget,
            second: Some(second),
        });
        tokio::time::sleep(wait).await;
        // The retry's readiness is a wait too: not ready within the bound, the caller gets
        // the last answer (and the retry's payment goes back).
        let ready = match deadline {
            Some(deadline) => tokio::time::timeout_at(deadline, prepare()).await,
            None => Ok(prepare().await),
        };
        made = match ready {
            Ok(ready) => ready.map_err(CallError::Inner)?,
            Err(_) => return result,
        };
        attempt += 1;
    }
}

impl crate::Breaker {
    /// [`call_retried_owned`](Self::call_retried_owned) for tower's retry layers: `prepare`
    /// readies each attempt before the breaker admits it (its error ends the call, uncounted),
    /// and a result `is_final` calls final is returned without a retry. Not part of the API.
    #[doc(hidden)]
    pub fn call_retried_prepared<F, P, Fut, T, E, J, D>(
        self,
        judge: J,
        prepare: F,
        is_final: D,
    ) -> impl Future<Output = Result<T, CallError<E>>>
    where
        F: FnMut() -> P,
        P: Future<Output = Result<Fut, E>>,
        Fut: Future<Output = Result<T, E>>,
        J: Judge<T, E> + Clone,
        D: Fn(&Result<T, CallError<E>>) -> bool,
    {
        run_prepared(self, judge, prepare, is_final)
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
    ) -> impl Future<Output = Result<T, CallError<E>>> + use<Q, F, Fut, T, E, K>
    where
        K: std::borrow::Borrow<Q>,
        Q: std::hash::Hash + Eq + ToOwned<Owned = K> + ?Sized,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        run(self.breaker(key), crate::EveryError, make)
    }
}
