//! Hedged requests, on a budget: when a call is slow, send it again and take whichever
//! answer comes first.
//!
//! [`Breaker::call_hedged`](crate::Breaker::call_hedged) (and
//! [`call_hedged_classified`](crate::Breaker::call_hedged_classified)) runs its first
//! attempt as a plain call through the breaker; if no answer came after the delay
//! ([`Config::hedge_delay`](crate::Config::hedge_delay)), it sends a hedge, an attempt
//! made by the same `make`, raced with the first, and so on up to
//! [`Config::hedge`](crate::Config::hedge) hedges. Each attempt is a call through the
//! breaker, judged and counted as any call (in its window and in [`Stats`](crate::Stats)).
//!
//! - The first success or neutral answer wins; the other attempts are dropped: each counts
//!   as a cancelled call, or as an abandoned one (a slow call) when it ran past
//!   `slow_call`, and gives its slots back.
//! - A failed attempt sends the next hedge at once instead of waiting out the delay; when
//!   every attempt failed, the first attempt's result is returned.
//! - An attempt answered with pushback (a classifier's [`Verdict::OpenFor`],
//!   from `Retry-After` or `grpc-retry-pushback-ms`) stops further hedges.
//! - A refusal of the first attempt (open, half-open full, throttled, bulkhead full) is
//!   returned at once, as [`call`](crate::Breaker::call) returns it.
//!
//! **The delay.** A [`HedgeDelay::Percentile`] is that percentile of this breaker's
//! attempt latencies over the last [`WINDOW`] (three rotating 10-second slots of a
//! lock-free log-linear histogram): successes, neutral answers, timeouts and slow calls,
//! never fast failures (they would pull it down). It is read again at most once a second,
//! clamped to [`MIN_HEDGE_DELAY`] … [`MAX_HEDGE_DELAY`]; no hedge before the window holds
//! [`MIN_SAMPLES`], none once the percentile reaches the ceiling. A
//! [`HedgeDelay::Fixed`] delay hedges from the first call. Only hedged calls record
//! latencies: a breaker without `hedge`, and the plain calls of one with it, record nothing.
//! An attempt is timed from the return of its first poll (before it, no hedge could go). A
//! first attempt that answers within its first poll is recorded as 0, with no clock read for
//! it; once a slot of the window has held 1 000 samples, one such answer in 16 is recorded
//! (and deposits in the budget) for 16: the window and the budget get what they would on
//! average, and a hedged call answered at once costs little more than a plain one.
//!
//! **Slow for everyone.** With [`MIN_SAMPLES`] in the window, no hedge is sent while its
//! 99th percentile is under [`SHORT_TAIL`] times its median, whatever the delay: when every
//! call is slow a second attempt would not answer sooner, it would only double the load.
//! When it has only just turned slow for everyone the window still says fast, so a second
//! rule reads the calls themselves: hedging pauses once [`OVERDUE_IN_A_ROW`] hedged calls in
//! a row were still unanswered at the delay (their hedges denied, counted in
//! `Stats::hedges_denied`), and resumes at the first first attempt that answers before its
//! delay or hedge that wins; while paused, one trial hedge goes [`TRIAL_AFTER`] after the
//! pause began, then twice as long after each one before it (at most [`MAX_TRIAL_AFTER`]
//! apart), and a trial that wins ends the pause. Why calls overdue in a row rather than
//! hedges that lose: a hedge loses only a whole slow latency after it went, by when every
//! call in flight has sent its own; a run of overdue calls shows at the delay. With the p95
//! delay, five in a row come about once in three million calls when slowness strikes calls
//! one by one, and each hedge that wins ends the run.
//!
//! **The budget.** A hedge is sent only while the breaker is closed and not throttling nor
//! ramping, below its bulkhead or adaptive limit (a hedge never waits for a seat), and when
//! the hedge budget allows it: [`Config::hedge_budget`](crate::Config::hedge_budget) percent
//! (default [`DEFAULT_HEDGE_BUDGET_PERCENT`]) of the first attempts of the last ten seconds,
//! plus a floor of [`FLOOR_PER_SECOND`] hedge a second (the retry budget's mechanism,
//! [`crate::retry::WINDOW`]). A breaker with [`retry`](crate::Config::retry) too pays each
//! hedge from its retry budget as well, and its hedged calls' first attempts deposit there.
//! A hedge denied fails nothing: the call waits for the attempts in flight, and the denial
//! is counted in `Stats::hedges_denied`. `Stats::hedges` counts hedges sent (each also a
//! call in `calls`), `Stats::hedges_won` those whose answer was returned.
//!
//! ```
//! use std::time::Duration;
//! use breaker::{Breaker, Config, HedgeDelay};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! let config = Config::default().hedge(1).hedge_delay(HedgeDelay::Fixed(Duration::from_millis(20)));
//! let search = Breaker::new("docs::hedge_module", config);
//! let attempts = std::sync::atomic::AtomicU32::new(0);
//! let answer = search
//!     .call_hedged(|| {
//!         let n = attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
//!         async move {
//!             // The first replica is stuck in a GC pause; the hedge answers in 5 ms.
//!             let took = if n == 0 { 500 } else { 5 };
//!             tokio::time::sleep(Duration::from_millis(took)).await;
//!             Ok::<_, std::io::Error>(n)
//!         }
//!     })
//!     .await;
//! assert_eq!(answer.unwrap(), 1);
//! let stats = search.stats();
//! assert_eq!((stats.hedges, stats.hedges_won, stats.cancelled), (1, 1, 1));
//! # }
//! ```

mod run;
#[cfg(all(test, not(breaker_loom)))]
mod tests;

pub use crate::config::{
    HedgeDelay, DEFAULT_HEDGE_BUDGET_PERCENT, MAX_HEDGES, MAX_HEDGE_DELAY, MIN_HEDGE_DELAY,
};
pub use crate::hedging::{
    FLOOR_PER_SECOND, MAX_TRIAL_AFTER, MIN_SAMPLES, OVERDUE_IN_A_ROW, SHORT_TAIL, TRIAL_AFTER,
};

use std::{future::Future, time::Duration};

use crate::{CallError, Verdict};

/// The window of latencies a percentile delay is read from.
pub const WINDOW: Duration = Duration::from_secs(30);

impl crate::Breaker {
    /// Runs an async call through the breaker, hedged per [`Config::hedge`](crate::Config::hedge)
    /// (see [`breaker::hedge`](crate::hedge) for the rules); every `Err` counts as a failure.
    /// `make` makes each attempt's future; the attempts run concurrently in the returned
    /// future (nothing is spawned), and those that lose are dropped. Without `hedge` in the
    /// configuration, it makes one attempt, a plain [`call`](Self::call).
    ///
    /// ```
    /// use breaker::{Breaker, Config};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let prices = Breaker::new("docs::call_hedged", Config::default().hedge(2));
    /// // No hedge before 100 samples with the default p95 delay: one attempt here.
    /// let price = prices.call_hedged(|| async { Ok::<_, std::io::Error>(42) }).await;
    /// assert_eq!(price.unwrap(), 42);
    /// assert_eq!(prices.stats().hedges, 0);
    /// # }
    /// ```
    pub async fn call_hedged<F, Fut, T, E>(&self, make: F) -> Result<T, CallError<E>>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let targets = run::One {
            host: &*self.shared,
            make,
            picked: false,
        };
        run::run(targets, crate::EveryError).await
    }

    /// Like [`call_hedged`](Self::call_hedged), with `classify` judging every attempt: a
    /// `Success` or `Neutral` attempt wins, a `Failure` sends the next hedge at once, an
    /// `OpenFor` (pushback) sends no more hedges. An `Ok` judged a failure loses like an
    /// error; if every attempt fails, the first attempt's result is returned as it is.
    pub async fn call_hedged_classified<F, Fut, T, E, C>(
        &self,
        classify: C,
        make: F,
    ) -> Result<T, CallError<E>>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        C: Fn(&Result<T, E>) -> Verdict + Clone,
    {
        let targets = run::One {
            host: &*self.shared,
            make,
            picked: false,
        };
        run::run(targets, crate::Classify(classify)).await
    }
}

impl crate::Breaker {
    /// [`call_hedged_classified`](Self::call_hedged_classified) for the gRPC hedge layer:
    /// `judge` is any [`Judge`](crate::Judge), and no hedge is sent once `more()` says
    /// `false` (the call committed to an answer, or its request cannot be sent again): the
    /// call then waits for the attempts in flight, and nothing is counted as denied. Not part
    /// of the API.
    #[doc(hidden)]
    pub async fn call_hedged_while<F, Fut, T, E, J, M>(
        self,
        judge: J,
        make: F,
        more: M,
    ) -> Result<T, CallError<E>>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        J: crate::Judge<T, E> + Clone,
        M: Fn() -> bool,
    {
        let targets = While {
            targets: run::One {
                host: &*self.shared,
                make,
                picked: false,
            },
            more,
        };
        run::run(targets, judge).await
    }

    /// The hedges a call may send ([`Config::hedge`](crate::Config::hedge)), or `None`
    /// without `hedge`: one attempt. One load. Not part of the API (the reqwest middleware's
    /// test of whether to hedge).
    #[doc(hidden)]
    pub fn hedges(&self) -> Option<u32> {
        self.shared.core.live.hedge().map(|p| p.hedges)
    }
}

/// Targets whose caller may stop the hedges ([`Breaker::call_hedged_while`](crate::Breaker::call_hedged_while)).
struct While<Tg, M> {
    targets: Tg,
    more: M,
}

impl<Tg: run::Targets, M: Fn() -> bool> run::Targets for While<Tg, M> {
    type Host = Tg::Host;
    type Fut = Tg::Fut;
    const ONE: bool = Tg::ONE;
    fn pick(&mut self, hedge: bool) -> Option<(Self::Host, usize)> {
        self.targets.pick(hedge)
    }
    fn make(&self, at: usize) -> Self::Fut {
        self.targets.make(at)
    }
    fn nowhere(&self) -> crate::BreakerError {
        self.targets.nowhere()
    }
    fn more(&self) -> bool {
        (self.more)()
    }
}

impl<K: crate::BreakerKey + Clone> crate::KeyedBreaker<K> {
    /// A hedged call over replicas: each attempt goes to the next key of `keys` whose
    /// breaker admits it, the first key first, so a hedge goes to another replica and never
    /// to an open one. `make` makes the attempt for a key.
    ///
    /// The first attempt goes to the first key whose breaker admits it (a key that refuses
    /// counts the refusal, as any call would); if none does, the first key's refusal is
    /// returned (with no keys, a refusal as open under the keyed breaker's name). The hedges
    /// follow the rules of [`breaker::hedge`](crate::hedge), decided by the breaker of the
    /// key the first attempt went to (its latencies, its hedge budget, where `Stats::hedges`
    /// are counted); a hedge goes to the next key whose breaker is closed, not throttling and
    /// below its limit, and is denied when there is none. Without `hedge` in the
    /// configuration, one attempt, to the first key that admits it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use breaker::{Config, HedgeDelay, KeyedBreaker};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let config = Config::default().threshold(1).hedge(1).hedge_delay(HedgeDelay::Fixed(Duration::from_millis(10)));
    /// let replicas = KeyedBreaker::<String>::new("docs::replicas", config);
    /// let _ = replicas.call_sync("a", || Err::<(), _>("down")); // replica a is open
    /// let keys = ["a".to_owned(), "b".to_owned(), "c".to_owned()];
    /// let answer = replicas
    ///     .call_hedged(&keys, |replica: &String| {
    ///         let replica = replica.clone();
    ///         async move {
    ///             let took = if replica == "b" { 500 } else { 5 };
    ///             tokio::time::sleep(Duration::from_millis(took)).await;
    ///             Ok::<_, std::io::Error>(replica)
    ///         }
    ///     })
    ///     .await;
    /// assert_eq!(answer.unwrap(), "c", "a is open: b first, then the hedge to c");
    /// # }
    /// ```
    pub async fn call_hedged<F, Fut, T, E>(&self, keys: &[K], make: F) -> Result<T, CallError<E>>
    where
        F: Fn(&K) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let targets = run::Keys {
            keyed: self,
            keys,
            next: 0,
            make,
        };
        run::run(targets, crate::EveryError).await
    }
}
