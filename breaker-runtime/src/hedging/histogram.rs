//! Attempt latencies over the last 30 seconds, in three rotating 10-second slots of a
//! log-linear histogram (HdrHistogram's layout, Finagle's `WindowedPercentileHistogram`'s
//! window), lock-free: recording is a few relaxed atomics, no lock and no allocation.
//!
//! Values are microseconds. Below 16 µs each has its own bin; above, each power of two is
//! cut into 16 bins, so a bin's width is at most 1/16 of its value (a percentile is read
//! as its bin's upper edge: at most 6.25 % above the true one, never below). Values at or
//! above [`CEILING_US`] share one bin, read as the ceiling itself: what a hedge never
//! waits past. 288 bins of 4 bytes a slot, 3.5 KB in all, made with the breaker's first
//! hedged call.
//!
//! A slot holds one period (10 s of the breaker's clock); a recording that finds its slot
//! holding a period three old takes it over and clears it. Approximate under contention as
//! the retry budget is: a sample landing in a slot while another thread clears it may be
//! lost.

use std::sync::atomic::{
    AtomicU32, AtomicU64,
    Ordering::{AcqRel, Acquire, Relaxed},
};

use crate::clock::Nanos;

/// One slot's span.
pub(crate) const PERIOD: Nanos = 10_000_000_000;
/// Slots: the window is the current period and the two before it.
const SLOTS: u64 = 3;
/// The window's span.
pub(crate) const WINDOW: Nanos = PERIOD * SLOTS;
/// The ceiling, in microseconds (2 s): samples at or above it share the last bin.
pub(crate) const CEILING_US: u64 = 2_000_000;
/// Bins below the ceiling: 16 exact ones below 16 µs, then 16 a power of two up to the
/// ceiling (in the 15th of the 2^20 µs power).
const BELOW: usize = 287;
/// The ceiling's bin.
const CEILING_BIN: usize = BELOW;
const BINS: usize = BELOW + 1;

/// The bin of a value in microseconds.
fn bin(us: u64) -> usize {
    if us >= CEILING_US {
        return CEILING_BIN;
    }
    if us < 16 {
        return us as usize;
    }
    let power = 63 - us.leading_zeros(); // at least 4
    ((power - 3) * 16) as usize + ((us >> (power - 4)) & 15) as usize
}

/// The largest value in microseconds that falls in bin `i` (the ceiling for its bin).
fn upper(i: usize) -> u64 {
    if i >= CEILING_BIN {
        return CEILING_US;
    }
    if i < 16 {
        return i as u64;
    }
    let power = (i / 16) as u32 + 3;
    let width = 1u64 << (power - 4);
    ((16 + (i % 16) as u64) * width + width - 1).min(CEILING_US - 1)
}

struct Slot {
    /// The period (`now / PERIOD`, plus 1) this slot counts; 0: none yet.
    period: AtomicU64,
    samples: AtomicU32,
    bins: [AtomicU32; BINS],
}

/// Latencies over the last three periods.
pub(crate) struct Histogram {
    slots: [Slot; SLOTS as usize],
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram").finish_non_exhaustive()
    }
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            slots: std::array::from_fn(|_| Slot {
                period: AtomicU64::new(0),
                samples: AtomicU32::new(0),
                bins: std::array::from_fn(|_| AtomicU32::new(0)),
            }),
        }
    }
}

/// The window's counts, merged: what percentiles are read from.
pub(crate) struct Merged {
    bins: [u32; BINS],
    total: u64,
}

impl Histogram {
    /// Records `weight` latencies of `latency` nanoseconds, at `now`: the samples its slot held
    /// before.
    pub(crate) fn record(&self, now: Nanos, latency: Nanos, weight: u32) -> u32 {
        let period = now / PERIOD + 1;
        let slot = &self.slots[(period % SLOTS) as usize];
        let held = slot.period.load(Acquire);
        if held != period {
            if held > period {
                return 0; // a reading older than another thread's: that period is gone here
            }
            if slot
                .period
                .compare_exchange(held, period, AcqRel, Acquire)
                .is_ok()
            {
                slot.samples.store(0, Relaxed);
                for b in &slot.bins {
                    b.store(0, Relaxed);
                }
            }
        }
        slot.bins[bin(latency / 1_000)].fetch_add(weight, Relaxed);
        slot.samples.fetch_add(weight, Relaxed)
    }

    /// The slots in the window at `now`.
    fn live(&self, now: Nanos) -> impl Iterator<Item = &Slot> {
        let period = now / PERIOD + 1;
        self.slots.iter().filter(move |s| {
            let held = s.period.load(Acquire);
            held != 0 && held <= period && held + SLOTS > period
        })
    }

    /// Samples in the window at `now`: three loads (and three more for the slots' periods).
    pub(crate) fn samples(&self, now: Nanos) -> u64 {
        self.live(now)
            .map(|s| u64::from(s.samples.load(Relaxed)))
            .sum()
    }

    /// The window's counts at `now`.
    pub(crate) fn merged(&self, now: Nanos) -> Merged {
        let mut m = Merged {
            bins: [0; BINS],
            total: 0,
        };
        for slot in self.live(now) {
            for (sum, b) in m.bins.iter_mut().zip(&slot.bins) {
                *sum = sum.saturating_add(b.load(Relaxed));
            }
        }
        m.total = m.bins.iter().map(|&n| u64::from(n)).sum();
        m
    }
}

impl Merged {
    /// Samples merged.
    #[cfg(test)]
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// The latency at percentile `hundredths` / 100 (9500: p95), in nanoseconds: the upper
    /// edge of the bin that holds it (the ceiling for the last bin); `None` without samples.
    pub(crate) fn percentile(&self, hundredths: u32) -> Option<Nanos> {
        if self.total == 0 {
            return None;
        }
        // The rank of the sample at the percentile, from 1: ⌈total × p⌉.
        let rank = (self.total * u64::from(hundredths)).div_ceil(10_000).max(1);
        let mut seen = 0;
        for (i, &n) in self.bins.iter().enumerate() {
            seen += u64::from(n);
            if seen >= rank {
                return Some(upper(i).saturating_mul(1_000));
            }
        }
        Some(CEILING_US * 1_000)
    }
}

#[cfg(all(test, not(breaker_loom)))]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    #[test]
    fn bins_are_contiguous_and_within_a_sixteenth() {
        assert_eq!(bin(0), 0);
        assert_eq!(bin(15), 15);
        assert_eq!(bin(16), 16);
        assert_eq!(bin(CEILING_US - 1), BELOW - 1);
        assert_eq!(bin(CEILING_US), CEILING_BIN);
        assert_eq!(bin(u64::MAX), CEILING_BIN);
        let mut last = 0;
        for us in 0..CEILING_US {
            let b = bin(us);
            assert!(b == last || b == last + 1, "{us} µs: bin {b} after {last}");
            assert!(upper(b) >= us, "{us} µs: bin {b} ends at {}", upper(b));
            assert!(
                upper(b) - us <= us / 16,
                "{us} µs in bin {b} up to {}",
                upper(b)
            );
            last = b;
        }
        for i in 0..BELOW - 1 {
            assert_eq!(bin(upper(i)), i);
            assert_eq!(bin(upper(i) + 1), i + 1);
        }
    }

    #[test]
    fn percentiles_of_a_long_tail() {
        let h = Histogram::default();
        for i in 0..1_000u64 {
            let latency = if i % 50 == 0 { 500 * MS } else { 5 * MS };
            h.record(i * MS, latency, 1);
        }
        let m = h.merged(1_000 * MS);
        assert_eq!((m.total(), h.samples(1_000 * MS)), (1_000, 1_000));
        let p50 = m.percentile(5_000).unwrap();
        assert!((5 * MS..=5 * MS + 5 * MS / 16).contains(&p50), "{p50}");
        assert_eq!(m.percentile(9_500), Some(p50));
        let p99 = m.percentile(9_900).unwrap();
        assert!(
            (500 * MS..=500 * MS + 500 * MS / 16).contains(&p99),
            "{p99}"
        );
        assert_eq!(Histogram::default().merged(0).percentile(9_500), None);
    }

    #[test]
    fn samples_at_the_ceiling_read_as_the_ceiling() {
        let h = Histogram::default();
        for _ in 0..10 {
            h.record(0, 3_000 * MS, 1);
        }
        assert_eq!(h.merged(0).percentile(5_000), Some(CEILING_US * 1_000));
    }

    /// The window is the current period and the two before: 20 to 30 seconds.
    #[test]
    fn samples_leave_the_window_after_three_periods() {
        let h = Histogram::default();
        h.record(0, MS, 1);
        h.record(PERIOD, MS, 1);
        h.record(2 * PERIOD + 1, MS, 1);
        assert_eq!(h.samples(2 * PERIOD + 1), 3);
        assert_eq!(h.samples(3 * PERIOD), 2, "period 0 left");
        assert_eq!(h.samples(5 * PERIOD), 0);
        // Period 3 takes period 0's slot over, cleared.
        h.record(3 * PERIOD, 7 * MS, 1);
        assert_eq!(h.samples(3 * PERIOD), 3);
        assert_eq!(h.merged(3 * PERIOD).total(), 3);
        // A reading from period 0, late, no longer counts there.
        h.record(1, MS, 1);
        assert_eq!(h.samples(3 * PERIOD), 3);
        // An hour on, nothing.
        assert_eq!(h.merged(360 * PERIOD).total(), 0);
    }

    #[test]
    fn threads_record_without_losing_counts() {
        let h = Histogram::default();
        // The period's slot taken first: a sample racing the clearing of a slot taken over
        // may be lost (the module's doc), and 4 threads starting at once race exactly that
        // (a run of the suite under load lost some). Within a period no count is lost.
        h.record(0, 0, 1);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let h = &h;
                s.spawn(move || {
                    for i in 0..10_000u64 {
                        h.record(0, (t * 10_000 + i) * 1_000, 1);
                    }
                });
            }
        });
        assert_eq!(h.samples(0), 40_001);
        assert_eq!(h.merged(0).total(), 40_001);
    }
}
