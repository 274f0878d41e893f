//! The sliding windows that `failure_rate` judges: fixed-size rings of atomic cells, so
//! memory stays bounded whatever the traffic and recording takes no lock.

use crate::{
    clock::Nanos,
    config::Window,
    sync::{AtomicU64, AtomicU8, Ordering::Relaxed},
};

/// What the window holds after a call was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Tally {
    pub(crate) calls: u64,
    pub(crate) failures: u64,
}

impl Tally {
    /// The failed share in percent, 0 when empty.
    pub(crate) fn rate(self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            self.failures as f64 * 100.0 / self.calls as f64
        }
    }

    /// Whether the window is full enough to judge and the failed share reaches `percent`.
    pub(crate) fn trips(self, min_calls: u32, percent: u32) -> bool {
        self.calls >= u64::from(min_calls) && self.failures * 100 >= u64::from(percent) * self.calls
    }
}

pub(crate) enum Ring {
    Calls(CallRing),
    Time(TimeRing),
}

impl Ring {
    pub(crate) fn new(window: Window) -> Ring {
        match window {
            Window::Calls(n) => Ring::Calls(CallRing::new(n)),
            Window::Duration(d) => Ring::Time(TimeRing::new(crate::clock::to_nanos(d))),
        }
    }

    /// Whether recording needs the time (only a time window does).
    pub(crate) fn needs_clock(&self) -> bool {
        matches!(self, Ring::Time(_))
    }

    pub(crate) fn record(&self, failed: bool, now: Nanos) -> Tally {
        match self {
            Ring::Calls(r) => r.record(failed),
            Ring::Time(r) => r.record(failed, now),
        }
    }

    pub(crate) fn tally(&self, now: Nanos) -> Tally {
        match self {
            Ring::Calls(r) => r.tally(),
            Ring::Time(r) => r.tally(now),
        }
    }

    pub(crate) fn clear(&self) {
        match self {
            Ring::Calls(r) => r.clear(),
            Ring::Time(r) => r.clear(),
        }
    }
}

const EMPTY: u8 = 0;
const SUCCESS: u8 = 1;
const FAILURE: u8 = 2;

/// The last N calls: one byte per call in a ring, plus the running tally packed in one word
/// (calls in the high half, failures in the low half) so a reader sees a consistent pair.
pub(crate) struct CallRing {
    slots: Box<[AtomicU8]>,
    head: AtomicU64,
    tally: AtomicU64,
}

const HALF: u32 = 32;
const LOW: u64 = (1 << HALF) - 1;

impl CallRing {
    fn new(size: u32) -> Self {
        CallRing {
            slots: (0..size).map(|_| AtomicU8::new(EMPTY)).collect(),
            head: AtomicU64::new(0),
            tally: AtomicU64::new(0),
        }
    }

    fn record(&self, failed: bool) -> Tally {
        let i = (self.head.fetch_add(1, Relaxed) % self.slots.len() as u64) as usize;
        let new = if failed { FAILURE } else { SUCCESS };
        let old = self.slots[i].swap(new, Relaxed);
        let (calls_in, failures_in) = (u64::from(old == EMPTY), u64::from(old == FAILURE));
        let update = |packed: u64| {
            let calls = (packed >> HALF) + calls_in;
            // Saturating: a record racing `clear` may evict a call the tally no longer holds.
            let failures = ((packed & LOW) + u64::from(failed)).saturating_sub(failures_in);
            let calls = calls.min(self.slots.len() as u64);
            Some((calls << HALF) | failures.min(calls))
        };
        let prev = match self.tally.fetch_update(Relaxed, Relaxed, update) {
            Ok(prev) | Err(prev) => prev,
        };
        let next = update(prev).unwrap_or(prev);
        Tally {
            calls: next >> HALF,
            failures: next & LOW,
        }
    }

    fn tally(&self) -> Tally {
        let packed = self.tally.load(Relaxed);
        Tally {
            calls: packed >> HALF,
            failures: packed & LOW,
        }
    }

    fn clear(&self) {
        for s in self.slots.iter() {
            s.store(EMPTY, Relaxed);
        }
        self.head.store(0, Relaxed);
        self.tally.store(0, Relaxed);
    }
}

const BUCKETS: u64 = 20;
/// Bucket layout: epoch (24 bits) | calls (20 bits) | failures (20 bits). The epoch is the
/// bucket's index in time, modulo 2^24; counts saturate at 2^20 - 1 per bucket, which keeps
/// the rate right at any throughput a bucket can see before it saturates.
const EPOCH_SHIFT: u32 = 40;
const CALLS_SHIFT: u32 = 20;
const COUNT_MAX: u64 = (1 << 20) - 1;
const EPOCH_MASK: u64 = (1 << 24) - 1;

/// The calls of the last D: twenty buckets of D/20 each, so a call leaves the window between
/// D − D/20 and D after it was made.
pub(crate) struct TimeRing {
    width: Nanos,
    buckets: [AtomicU64; BUCKETS as usize],
}

impl TimeRing {
    fn new(span: Nanos) -> Self {
        TimeRing {
            width: (span / BUCKETS).max(1),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    fn epoch(&self, now: Nanos) -> u64 {
        now / self.width
    }

    fn record(&self, failed: bool, now: Nanos) -> Tally {
        let epoch = self.epoch(now);
        let bucket = &self.buckets[(epoch % BUCKETS) as usize];
        let tag = epoch & EPOCH_MASK;
        let _ = bucket.fetch_update(Relaxed, Relaxed, |packed| {
            let (mut calls, mut failures) = if packed >> EPOCH_SHIFT == tag {
                ((packed >> CALLS_SHIFT) & COUNT_MAX, packed & COUNT_MAX)
            } else {
                (0, 0) // a bucket from an older turn of the ring: start it afresh
            };
            if calls < COUNT_MAX {
                calls += 1;
                failures += u64::from(failed);
            }
            Some((tag << EPOCH_SHIFT) | (calls << CALLS_SHIFT) | failures)
        });
        self.tally(now)
    }

    fn tally(&self, now: Nanos) -> Tally {
        let epoch = self.epoch(now);
        let mut t = Tally::default();
        for b in &self.buckets {
            let packed = b.load(Relaxed);
            let age = epoch.wrapping_sub(packed >> EPOCH_SHIFT) & EPOCH_MASK;
            if age < BUCKETS {
                t.calls += (packed >> CALLS_SHIFT) & COUNT_MAX;
                t.failures += packed & COUNT_MAX;
            }
        }
        t
    }

    fn clear(&self) {
        for b in &self.buckets {
            b.store(0, Relaxed);
        }
    }
}

#[cfg(all(test, not(breaker_loom)))]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn call_ring_keeps_exactly_the_last_n_calls() {
        let r = Ring::new(Window::Calls(4));
        for failed in [true, true, false, false] {
            r.record(failed, 0);
        }
        assert_eq!(
            r.tally(0),
            Tally {
                calls: 4,
                failures: 2
            }
        );
        // Two successes push the two failures out.
        r.record(false, 0);
        let t = r.record(false, 0);
        assert_eq!(
            t,
            Tally {
                calls: 4,
                failures: 0
            }
        );
        r.clear();
        assert_eq!(r.tally(0), Tally::default());
    }

    #[test]
    fn time_ring_forgets_calls_older_than_the_span() {
        let sec = 1_000_000_000;
        let r = Ring::new(Window::Duration(Duration::from_secs(10)));
        r.record(true, 0);
        r.record(false, 5 * sec);
        assert_eq!(
            r.tally(5 * sec),
            Tally {
                calls: 2,
                failures: 1
            }
        );
        assert_eq!(
            r.tally(10 * sec + 1),
            Tally {
                calls: 1,
                failures: 0
            }
        );
        assert_eq!(r.tally(16 * sec), Tally::default());
        // A bucket reused a turn later starts afresh.
        let t = r.record(true, 20 * sec);
        assert_eq!(
            t,
            Tally {
                calls: 1,
                failures: 1
            }
        );
    }

    #[test]
    fn trips_needs_min_calls_and_the_rate() {
        let t = Tally {
            calls: 9,
            failures: 9,
        };
        assert!(!t.trips(10, 50));
        let t = Tally {
            calls: 20,
            failures: 10,
        };
        assert!(t.trips(10, 50));
        assert!(!t.trips(10, 51));
        assert_eq!(t.rate(), 50.0);
    }
}
