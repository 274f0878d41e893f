//! The adaptive bulkhead: a concurrency limit between 1 and `max` that [`super::vegas`] moves.
//!
//! The fast path is two atomics: `try_acquire` takes a seat with one compare-and-swap on the
//! in-flight count against the published limit (never overshooting, as the fixed bulkhead
//! does), `release` gives it back with one `fetch_sub`. Feeding the sample to the algorithm
//! happens under a `try_lock`: a caller that finds it held skips its sample (the window is a
//! sample of calls; a drop it skips is left in a flag the next holder folds in, so overload
//! signals are never lost), so no caller ever waits. The holder publishes the new limit with
//! one store; a limit lowered below the calls in flight refuses new ones until enough end.

use std::sync::TryLockError;

use crate::{
    clock::Nanos,
    sync::{AtomicU32, Mutex, Ordering::*},
};

use super::vegas::Estimator;

/// A call's seat under the adaptive limit: when it was taken and how many calls were in
/// flight with it (named apart from the engine's `Permit`, which a seat rides in). The engine
/// keeps it with the call and hands it back to [`Limiter::release`] exactly once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seat {
    started: Nanos,
    in_flight: u32,
}

impl Seat {
    /// When it was taken and the calls in flight with it, for a holder that keeps them in
    /// fields of its own (the engine packs them with its other per-call state).
    pub(crate) fn parts(self) -> (Nanos, u32) {
        (self.started, self.in_flight)
    }

    /// The seat [`parts`](Self::parts) came from.
    pub(crate) fn from_parts(started: Nanos, in_flight: u32) -> Self {
        Seat { started, in_flight }
    }
}

/// What a finished call tells the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sample {
    /// The dependency answered (a success, or the caller's fault): its round-trip time is
    /// a sample.
    Answered,
    /// A drop: the call failed (an error, a timeout, a slow call, an overload answer).
    /// Lowers the limit; never a round-trip sample.
    Dropped,
    /// No evidence (the call was cancelled, or never reached the dependency): only the seat
    /// is returned.
    Ignored,
}

/// An adaptive concurrency limit.
#[derive(Debug)]
pub(crate) struct Limiter {
    /// The current limit, published for `try_acquire` (Vegas' `⌊L⌋`).
    limit: AtomicU32,
    in_flight: AtomicU32,
    /// 1 when a drop was skipped because the lock was held.
    skipped_drop: AtomicU32,
    estimator: Mutex<Estimator>,
    /// The limit it starts at.
    start: u32,
}

impl Limiter {
    /// A limiter with limits in `1..=max`, starting at `min(20, max)`.
    pub(crate) fn new(max: u32) -> Self {
        Self::with_seed(max, super::random::draw())
    }

    /// As [`Limiter::new`], with the probe jitter's generator seeded by `seed`.
    pub(crate) fn with_seed(max: u32, seed: u64) -> Self {
        let estimator = Estimator::new(max, seed);
        Self {
            limit: AtomicU32::new(estimator.limit()),
            in_flight: AtomicU32::new(0),
            skipped_drop: AtomicU32::new(0),
            start: estimator.limit(),
            estimator: Mutex::new(estimator),
        }
    }

    /// Puts the limit back at its start and forgets what it learned (`reset()`); calls in
    /// flight keep their seats and give them back as usual.
    pub(crate) fn restart(&self) {
        let mut estimator = crate::sync::lock(&self.estimator);
        estimator.restart();
        self.skipped_drop.store(0, Relaxed);
        self.limit.store(estimator.limit(), Relaxed);
    }

    /// Whether the limit is where it started (it may have moved and come back: what it
    /// learned is small then).
    pub(crate) fn at_start(&self) -> bool {
        self.limit.load(Relaxed) == self.start
    }

    /// The current limit (`Snapshot.concurrency_limit`).
    pub(crate) fn limit(&self) -> u32 {
        self.limit.load(Relaxed)
    }

    /// The calls holding a seat now.
    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> u32 {
        self.in_flight.load(Acquire)
    }

    /// Takes a seat for a call starting at `now`, or says the limit it is at
    /// (`BreakerError::Full`'s).
    #[inline]
    pub(crate) fn try_acquire(&self, now: Nanos) -> Result<Seat, u32> {
        let limit = self.limit.load(Relaxed);
        match self
            .in_flight
            .fetch_update(Acquire, Relaxed, |n| (n < limit).then_some(n + 1))
        {
            Ok(before) => Ok(Seat {
                started: now,
                in_flight: before + 1,
            }),
            Err(_) => Err(limit),
        }
    }

    /// Gives `seat` back; the call ended at `now` and tells the limit `sample`.
    #[inline]
    pub(crate) fn release(&self, seat: Seat, now: Nanos, sample: Sample) {
        self.in_flight.fetch_sub(1, Release);
        let rtt = match sample {
            Sample::Answered => Some(now.saturating_sub(seat.started)),
            Sample::Dropped => None,
            Sample::Ignored => return,
        };
        let mut estimator = match self.estimator.try_lock() {
            Ok(guard) => guard,
            // Only a bug of ours can poison it, and the estimator is consistent between
            // statements anyway.
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => {
                if rtt.is_none() {
                    self.skipped_drop.store(1, Relaxed);
                }
                return;
            }
        };
        if self.skipped_drop.load(Relaxed) != 0 && self.skipped_drop.swap(0, Relaxed) != 0 {
            estimator.sample(now, None, seat.in_flight);
        }
        estimator.sample(now, rtt, seat.in_flight);
        let limit = estimator.limit();
        if self.limit.load(Relaxed) != limit {
            self.limit.store(limit, Relaxed);
        }
    }
}
