//! The recovery ramp: after the breaker closes from half-open at `closed_at`, for `ramp` each
//! call is admitted with probability `t / ramp` (`t = now − closed_at`), so a fleet that
//! closes at once brings its traffic back over the ramp instead of in one step.
//!
//! One `AtomicU64` holds `closed_at` ([`NONE`] when no ramp is in progress), so a breaker
//! outside a ramp pays one relaxed load and no clock read ([`Ramp::active`]). The first call
//! to find the ramp over clears it.

use crate::{
    clock::Nanos,
    sync::{AtomicU64, Ordering::*},
};

use super::random::unit;

/// `closed_at` when no ramp is in progress (0 is a valid time: the breaker's creation).
const NONE: Nanos = Nanos::MAX;

/// The share of calls a ramp of `length` admits `elapsed` after it started: `elapsed /
/// length`, 1 once it is over (and for a zero length).
pub(crate) fn admitted_share(elapsed: Nanos, length: Nanos) -> f64 {
    if elapsed >= length {
        1.0
    } else {
        elapsed as f64 / length as f64
    }
}

/// A breaker's ramp: its length and when the current one started.
#[derive(Debug)]
pub(crate) struct Ramp {
    length: Nanos,
    closed_at: AtomicU64,
}

impl Ramp {
    /// A ramp of `length` (the configuration rejects zero), not in progress.
    pub(crate) fn new(length: Nanos) -> Self {
        Self {
            length,
            closed_at: AtomicU64::new(NONE),
        }
    }

    /// Starts a ramp: the breaker closed from half-open (or the fleet's probe closed it) at
    /// `now`. A ramp in progress starts over.
    pub(crate) fn start(&self, now: Nanos) {
        // `NONE` is reserved; a close at the very end of time ramps from one tick earlier.
        self.closed_at.store(now.min(NONE - 1), Release);
    }

    /// Ends any ramp in progress (the breaker opened, was reset or forced).
    pub(crate) fn stop(&self) {
        self.closed_at.store(NONE, Release);
    }

    /// Whether a ramp may be in progress: one load, no clock. `false` means every call is
    /// admitted, so the caller need not read the clock or draw.
    #[inline]
    pub(crate) fn active(&self) -> bool {
        self.closed_at.load(Relaxed) != NONE
    }

    /// Whether to refuse the call arriving at `now`, for a uniform `draw`: refused with
    /// probability `1 − t / ramp`. The first call past the ramp's end clears it.
    #[inline]
    pub(crate) fn should_refuse(&self, now: Nanos, draw: u64) -> bool {
        let closed_at = self.closed_at.load(Acquire);
        if closed_at == NONE {
            return false;
        }
        let elapsed = now.saturating_sub(closed_at);
        if elapsed >= self.length {
            // Only this ramp: a newer one started meanwhile stays.
            let _ = self
                .closed_at
                .compare_exchange(closed_at, NONE, AcqRel, Relaxed);
            return false;
        }
        unit(draw) >= admitted_share(elapsed, self.length)
    }

    /// The percentage of calls the ramp refuses now (`Snapshot.throttle_rate`'s ramp part).
    pub(crate) fn ramp_rate(&self, now: Nanos) -> f64 {
        let closed_at = self.closed_at.load(Acquire);
        if closed_at == NONE {
            return 0.0;
        }
        (1.0 - admitted_share(now.saturating_sub(closed_at), self.length)) * 100.0
    }
}
