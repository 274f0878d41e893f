//! Time, as the engine sees it: nanoseconds since the breaker was created.
//!
//! The engine never reads a clock itself; it asks a [`Clock`] only on the paths whose policy
//! needs the time (open state, half-open leases, slow calls, time windows). The production
//! clock is `tokio::time::Instant`, so `tokio::time::pause()` and `advance()` drive every
//! transition in tests; the model-checking tests use a fake one.

use tokio::time::Instant;

/// Nanoseconds since the breaker's creation. `u64` holds 584 years; every addition on it
/// saturates, so no configured duration can overflow it.
pub(crate) type Nanos = u64;

/// A source of time for the engine.
pub trait Clock {
    /// Now, in nanoseconds since the breaker's creation.
    fn now(&self) -> Nanos;
}

/// `tokio::time::Instant`, measured from the breaker's creation.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    base: Instant,
}

impl TokioClock {
    pub(crate) fn new() -> Self {
        Self {
            base: Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    #[inline]
    fn now(&self) -> Nanos {
        // Saturating: a breaker created under one paused runtime may be read under another
        // whose clock stands earlier; time then reads as zero rather than panicking.
        to_nanos(Instant::now().saturating_duration_since(self.base))
    }
}

/// A duration in nanoseconds, saturating at `u64::MAX` (`Duration::MAX` is accepted).
#[inline]
pub(crate) fn to_nanos(d: std::time::Duration) -> Nanos {
    d.as_secs()
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::from(d.subsec_nanos()))
}

/// A clock the tests set by hand.
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct FakeClock(pub(crate) std::cell::Cell<Nanos>);

#[cfg(test)]
impl Clock for FakeClock {
    fn now(&self) -> Nanos {
        self.0.get()
    }
}
