//! A count that `reset()` starts again from zero while its total since creation goes on:
//! `Stats` read the first, the exporters the second (`Handle::counted`), so a reset never
//! moves an exported counter back nor loses what came before it.

use crate::sync::{AtomicU64, Ordering::Relaxed};

#[derive(Debug)]
pub(crate) struct ResetCount {
    total: AtomicU64,
    /// The total at the last reset.
    base: AtomicU64,
}

impl ResetCount {
    pub(crate) fn new() -> Self {
        ResetCount {
            total: AtomicU64::new(0),
            base: AtomicU64::new(0),
        }
    }

    /// One more.
    #[inline]
    pub(crate) fn add(&self) {
        self.total.fetch_add(1, Relaxed);
    }

    /// Since creation or the last reset (`Stats`).
    pub(crate) fn since_reset(&self) -> u64 {
        let total = self.total.load(Relaxed);
        total.saturating_sub(self.base.load(Relaxed))
    }

    /// Since creation, resets included (the exporters').
    pub(crate) fn total(&self) -> u64 {
        self.total.load(Relaxed)
    }

    /// From zero again, for [`since_reset`](Self::since_reset) only.
    pub(crate) fn reset(&self) {
        self.base.store(self.total.load(Relaxed), Relaxed);
    }
}

#[cfg(all(test, not(breaker_loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_reset_starts_the_count_again_and_keeps_the_total() {
        let c = ResetCount::new();
        c.add();
        c.add();
        c.reset();
        assert_eq!((c.since_reset(), c.total()), (0, 2));
        c.add();
        assert_eq!((c.since_reset(), c.total()), (1, 3));
    }
}
