//! Judging a finished call: [`Verdict`], and the two ways a call is judged (by an
//! `is_failure` predicate over errors, or by a classifier over the whole result).

use std::time::Duration;

/// What a finished call means for the dependency, as a classifier judges it
/// ([`Breaker::call_classified`](crate::Breaker::call_classified), the attribute's
/// `classify = …`). Classification changes what the breaker counts, never what the caller
/// receives: an `Ok` judged [`Failure`](Verdict::Failure) still reaches the caller as it is.
///
/// ```
/// use std::time::Duration;
/// use breaker::{Breaker, Config, State, Verdict};
///
/// // An HTTP-ish client that returns Ok(status) for every answer.
/// let b = Breaker::new("docs::verdict", Config::default().threshold(1));
/// let judge = |r: &Result<u16, ()>| match r {
///     Ok(503) => Verdict::Failure,
///     Ok(429) => Verdict::OpenFor(Duration::from_secs(30)),
///     Ok(s) if *s >= 400 => Verdict::Neutral,
///     Ok(_) => Verdict::Success,
///     Err(()) => Verdict::Failure,
/// };
/// assert_eq!(b.call_sync_classified(judge, || Ok(503)).unwrap(), 503); // still returned
/// assert_eq!(b.state(), State::Open);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// A success.
    Success,
    /// A failure (an `Ok(response)` with status 503, say).
    Failure,
    /// Counts for nothing, as an error `is_failure` rejects: no failure, no success, no
    /// streak reset; a probe judged so gives its slot back.
    Neutral,
    /// A failure that opens the breaker at once, whatever its threshold or rate, for exactly
    /// this long, whatever `cool_off` is (a server that says `Retry-After: 2` is called
    /// again after 2 s); at most `max_cool_off` when set, else at most 5 minutes
    /// (Envoy's default maximum ejection time: one answer never parks a dependency longer).
    /// `OpenFor(Duration::ZERO)` opens for the cool-off, as a failure would (with its
    /// backoff and jitter). A half-open probe judged so reopens it for that long.
    /// `retry_in` reports it.
    OpenFor(Duration),
}

/// How a finished call is judged: by an `is_failure` predicate (any `FnOnce(&E) -> bool`;
/// an `Ok` is a success without asking it) or by a classifier ([`Classify`]).
///
/// Implemented by the runtime only; it appears in the bounds of the call futures.
pub trait Judge<T, E> {
    /// `true` when every `Ok` is a success without asking: the closed fast path then settles
    /// a success inline.
    const OK_IS_SUCCESS: bool;

    /// The verdict on a finished call.
    fn judge(self, result: &Result<T, E>) -> Verdict;
}

impl<T, E, P: FnOnce(&E) -> bool> Judge<T, E> for P {
    const OK_IS_SUCCESS: bool = true;

    #[inline]
    fn judge(self, result: &Result<T, E>) -> Verdict {
        match result {
            Ok(_) => Verdict::Success,
            Err(e) if self(e) => Verdict::Failure,
            Err(_) => Verdict::Neutral,
        }
    }
}

/// The judge of [`Breaker::call`](crate::Breaker::call) and
/// [`call_owned`](crate::Breaker::call_owned): every `Err` is a failure. A type of its own
/// rather than a `fn` pointer, so the call future carries no pointer for it and a failure
/// is judged without an indirect call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EveryError;

impl<T, E> Judge<T, E> for EveryError {
    const OK_IS_SUCCESS: bool = true;

    #[inline]
    fn judge(self, result: &Result<T, E>) -> Verdict {
        match result {
            Ok(_) => Verdict::Success,
            Err(_) => Verdict::Failure,
        }
    }
}

/// A classifier over the whole result, `FnOnce(&Result<T, E>) -> Verdict`, as a [`Judge`].
#[derive(Debug, Clone, Copy)]
pub struct Classify<C>(pub C);

impl<T, E, C: FnOnce(&Result<T, E>) -> Verdict> Judge<T, E> for Classify<C> {
    const OK_IS_SUCCESS: bool = false;

    #[inline]
    fn judge(self, result: &Result<T, E>) -> Verdict {
        (self.0)(result)
    }
}

/// A judge that also writes down its verdict in a [`VerdictSlot`], for a loop that reads it
/// once the attempt ends (the retry loop, the hedge race: the judge runs inside the call
/// future, once per attempt).
pub(crate) struct Recorder<'s, J> {
    pub(crate) judge: J,
    pub(crate) slot: &'s VerdictSlot,
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

/// A verdict, written by [`Recorder`]: 0 none yet, 1 success, 2 failure, 3 neutral, else
/// `OpenFor` of (value − 4) nanoseconds. Atomic so the futures that hold one stay `Send`.
#[derive(Default)]
pub(crate) struct VerdictSlot(std::sync::atomic::AtomicU64);

impl VerdictSlot {
    fn put(&self, v: Verdict) {
        let code = match v {
            Verdict::Success => 1,
            Verdict::Failure => 2,
            Verdict::Neutral => 3,
            Verdict::OpenFor(d) => crate::clock::to_nanos(d).saturating_add(4),
        };
        self.0.store(code, std::sync::atomic::Ordering::Relaxed);
    }

    /// The verdict written since the last `take`, if any.
    pub(crate) fn take(&self) -> Option<Verdict> {
        match self.0.swap(0, std::sync::atomic::Ordering::Relaxed) {
            0 => None,
            1 => Some(Verdict::Success),
            2 => Some(Verdict::Failure),
            3 => Some(Verdict::Neutral),
            n => Some(Verdict::OpenFor(Duration::from_nanos(n - 4))),
        }
    }
}
