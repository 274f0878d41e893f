//! Cumulative counts, striped across cache lines so that threads calling one breaker do not
//! write to one shared line on the success path.

use crate::sync::{AtomicU64, Ordering::Relaxed};

/// What a breaker has counted since its creation or its last `reset()`. Transitions do not
/// clear these; outcomes that arrive from an older generation are counted here though they
/// change no state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Every call, rejected ones included (a call is counted when it is admitted or refused).
    pub calls: u64,
    /// Calls that returned `Ok` in time.
    pub successes: u64,
    /// Calls that counted against the dependency: errors, timeouts, slow calls and panics.
    pub failures: u64,
    /// Failures that were timeouts.
    pub timeouts: u64,
    /// Failures that were slow calls.
    pub slow_calls: u64,
    /// Calls refused without reaching the dependency: open, half-open full, bulkhead full.
    pub rejected: u64,
}

/// One stripe: its own pair of cache lines (128 bytes, as adjacent-line prefetchers pair
/// lines), so two threads on two stripes never share one.
#[derive(Default)]
#[repr(align(128))]
struct Stripe {
    admitted: AtomicU64,
    successes: AtomicU64,
    failures: AtomicU64,
    timeouts: AtomicU64,
    slow_calls: AtomicU64,
    rejected: AtomicU64,
}

const STRIPES: usize = 8;

/// The counters behind [`Stats`].
pub(crate) struct Counters {
    stripes: [Stripe; STRIPES],
}

/// Which counter a finished call bumps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Count {
    Admitted,
    Success,
    Failure,
    Timeout,
    Slow,
    Rejected,
}

impl Counters {
    pub(crate) fn new() -> Self {
        Counters {
            stripes: Default::default(),
        }
    }

    /// Adds to this thread's stripe.
    #[inline]
    pub(crate) fn add(&self, count: Count) {
        self.add_at(stripe(), count);
    }

    /// Adds to stripe `at` (from [`stripe`]), when the caller already knows it.
    #[inline]
    pub(crate) fn add_at(&self, at: usize, count: Count) {
        let s = &self.stripes[at % STRIPES];
        match count {
            Count::Admitted => s.admitted.fetch_add(1, Relaxed),
            Count::Success => s.successes.fetch_add(1, Relaxed),
            Count::Failure => s.failures.fetch_add(1, Relaxed),
            Count::Rejected => s.rejected.fetch_add(1, Relaxed),
            Count::Timeout => {
                s.failures.fetch_add(1, Relaxed);
                s.timeouts.fetch_add(1, Relaxed)
            }
            Count::Slow => {
                s.failures.fetch_add(1, Relaxed);
                s.slow_calls.fetch_add(1, Relaxed)
            }
        };
    }

    pub(crate) fn read(&self) -> Stats {
        let mut t = Stats::default();
        for s in &self.stripes {
            let rejected = s.rejected.load(Relaxed);
            t.calls += s.admitted.load(Relaxed) + rejected;
            t.rejected += rejected;
            t.successes += s.successes.load(Relaxed);
            t.failures += s.failures.load(Relaxed);
            t.timeouts += s.timeouts.load(Relaxed);
            t.slow_calls += s.slow_calls.load(Relaxed);
        }
        t
    }

    /// Clears every count (a call racing the reset may land on either side of it).
    pub(crate) fn clear(&self) {
        for s in &self.stripes {
            for c in [
                &s.admitted,
                &s.successes,
                &s.failures,
                &s.timeouts,
                &s.slow_calls,
                &s.rejected,
            ] {
                c.store(0, Relaxed);
            }
        }
    }
}

/// This thread's stripe: threads are dealt stripes in turn on their first call, so the first
/// `STRIPES` threads never share one.
#[cfg(not(breaker_loom))]
#[inline]
pub(crate) fn stripe() -> usize {
    use std::cell::Cell;
    use std::sync::atomic::AtomicUsize;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local!(static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) });
    STRIPE
        .try_with(|s| {
            let mine = s.get();
            if mine != usize::MAX {
                return mine;
            }
            let dealt = NEXT.fetch_add(1, Relaxed) % STRIPES;
            s.set(dealt);
            dealt
        })
        .unwrap_or(0)
}

#[cfg(breaker_loom)]
pub(crate) fn stripe() -> usize {
    0
}
