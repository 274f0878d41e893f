//! The sliding windows that `failure_rate` judges: fixed-size rings allocated once, so
//! memory stays bounded whatever the traffic, each behind a small lock of its own so the
//! tally is always exactly the calls the window holds.

use crate::{
    clock::Nanos,
    config::Window,
    sync::{lock, Mutex},
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

/// A failure-rate window of either kind, behind one small lock.
///
/// Recording is not on the fast path (a policy with a window never takes it), and an exact
/// tally is what `failure_rate` judges, so one uncontended lock per call buys exactness: the
/// ring and its tally change in one step, and nothing a racing record, read or `clear` does
/// can leave them disagreeing. (A lock-free ring that swaps its slot and then updates a
/// packed tally as a second step drifts for good: `tests::loom` shows a phantom failure.)
/// No user code and no other lock is taken under it; the engine's lock may be held around
/// it (a transition clears the window), never the other way round.
pub(crate) struct Ring {
    state: Mutex<Slide>,
}

/// What the lock guards.
struct Slide {
    /// The generation the window counts for: set when the engine restarts the window at a
    /// transition, so a late outcome of an older generation is refused in the same step
    /// that would record it ([`Ring::record_in`]).
    generation: u64,
    calls: Calls,
}

// One per breaker, inside the breaker's own allocation: boxing the larger variant would
// only add a pointer to follow on every record.
#[allow(clippy::large_enum_variant)]
enum Calls {
    Last(CallRing),
    Span(TimeRing),
}

impl Ring {
    /// An empty window for generation 0, the generation of a new breaker's first state.
    pub(crate) fn new(window: Window) -> Ring {
        let calls = match window {
            Window::Calls(n) => Calls::Last(CallRing::new(n)),
            Window::Duration(d) => Calls::Span(TimeRing::new(crate::clock::to_nanos(d))),
        };
        Ring {
            state: Mutex::new(Slide {
                generation: 0,
                calls,
            }),
        }
    }

    /// Whether recording needs the time (only a time window does).
    #[cfg(all(test, not(breaker_loom)))]
    pub(crate) fn needs_clock(&self) -> bool {
        matches!(lock(&self.state).calls, Calls::Span(_))
    }

    /// [`record_in`](Self::record_in) with the time read only if the window is a time
    /// window when recorded (under the lock: `reconfigure` may change its kind).
    pub(crate) fn record_at(
        &self,
        generation: u64,
        failed: bool,
        now: impl FnOnce() -> Nanos,
    ) -> Option<Tally> {
        let mut slide = lock(&self.state);
        if slide.generation != generation {
            return None;
        }
        let now = match slide.calls {
            Calls::Span(_) => now(),
            Calls::Last(_) => 0,
        };
        Some(slide.calls.record(failed, now))
    }

    /// [`tally`](Self::tally) with the time read only for a time window.
    pub(crate) fn tally_at(&self, now: impl FnOnce() -> Nanos) -> Tally {
        let slide = lock(&self.state);
        let now = match slide.calls {
            Calls::Span(_) => now(),
            Calls::Last(_) => 0,
        };
        slide.calls.tally(now)
    }

    /// Gives the window a new shape (`reconfigure`), for the same generation: a count window
    /// resized keeps its most recent outcomes (as many as fit); a time window whose span
    /// changed, or a window of the other kind, starts empty (a bucket's calls cannot be
    /// split between buckets of another width).
    pub(crate) fn reshape(&self, window: Window) {
        let mut slide = lock(&self.state);
        let calls = match (&mut slide.calls, window) {
            (Calls::Last(r), Window::Calls(n)) => {
                r.resize(n);
                None
            }
            (Calls::Span(r), Window::Duration(d)) if r.span() == crate::clock::to_nanos(d) => None,
            (_, Window::Calls(n)) => Some(Calls::Last(CallRing::new(n))),
            (_, Window::Duration(d)) => Some(Calls::Span(TimeRing::new(crate::clock::to_nanos(d)))),
        };
        if let Some(calls) = calls {
            slide.calls = calls;
        }
    }

    /// Records a call whatever generation it belongs to, and returns the tally after it.
    #[cfg(test)]
    pub(crate) fn record(&self, failed: bool, now: Nanos) -> Tally {
        lock(&self.state).calls.record(failed, now)
    }

    /// Records a call admitted in `generation`, and returns the tally after it; `None`,
    /// recording nothing, when the window was restarted for another generation since. The
    /// check and the record are one step under the lock, so a late outcome never lands in
    /// the window of the generation that follows its own.
    #[cfg(test)]
    pub(crate) fn record_in(&self, generation: u64, failed: bool, now: Nanos) -> Option<Tally> {
        let mut slide = lock(&self.state);
        (slide.generation == generation).then(|| slide.calls.record(failed, now))
    }

    #[cfg(test)]
    pub(crate) fn tally(&self, now: Nanos) -> Tally {
        lock(&self.state).calls.tally(now)
    }

    /// Empties the window (for the same generation).
    #[cfg(test)]
    pub(crate) fn clear(&self) {
        lock(&self.state).calls.clear();
    }

    /// Empties the window and makes it count for `generation` only.
    pub(crate) fn restart(&self, generation: u64) {
        let mut slide = lock(&self.state);
        slide.generation = generation;
        slide.calls.clear();
    }
}

impl Calls {
    fn record(&mut self, failed: bool, now: Nanos) -> Tally {
        match self {
            Calls::Last(r) => r.record(failed),
            Calls::Span(r) => r.record(failed, now),
        }
    }

    fn tally(&self, now: Nanos) -> Tally {
        match self {
            Calls::Last(r) => r.tally(),
            Calls::Span(r) => r.tally(now),
        }
    }

    fn clear(&mut self) {
        match self {
            Calls::Last(r) => r.clear(),
            Calls::Span(r) => r.clear(),
        }
    }
}

/// The last N calls: whether each failed, in a ring filled from the start after every
/// clear, with the failures among them counted as they come and go.
struct CallRing {
    failed: Box<[bool]>,
    /// Where the next call goes.
    next: usize,
    /// Calls held: grows to the ring's size, then stays.
    len: usize,
    failures: u64,
}

impl CallRing {
    fn new(size: u32) -> Self {
        CallRing {
            // `Config::MAX_WINDOW_CALLS` bounds this; validation refuses 0.
            failed: vec![false; size.max(1) as usize].into_boxed_slice(),
            next: 0,
            len: 0,
            failures: 0,
        }
    }

    fn record(&mut self, failed: bool) -> Tally {
        if self.len == self.failed.len() {
            // Full: the call at `next` is the oldest, and leaves.
            self.failures -= u64::from(self.failed[self.next]);
        } else {
            self.len += 1;
        }
        self.failed[self.next] = failed;
        self.failures += u64::from(failed);
        self.next = (self.next + 1) % self.failed.len();
        self.tally()
    }

    fn tally(&self) -> Tally {
        Tally {
            calls: self.len as u64,
            failures: self.failures,
        }
    }

    /// A ring of `size` holding the most recent of the calls this one holds, oldest first.
    fn resize(&mut self, size: u32) {
        let cap = self.failed.len();
        let size = size.max(1) as usize;
        if size == cap {
            return;
        }
        let kept = self.len.min(size);
        let oldest = (self.next + cap - self.len) % cap;
        let skip = self.len - kept;
        let mut failed = vec![false; size].into_boxed_slice();
        for (i, slot) in failed.iter_mut().take(kept).enumerate() {
            *slot = self.failed[(oldest + skip + i) % cap];
        }
        self.failures = failed.iter().take(kept).filter(|f| **f).count() as u64;
        self.failed = failed;
        self.len = kept;
        self.next = kept % size;
    }

    fn clear(&mut self) {
        // The flags past `len` are never read before they are written again.
        self.next = 0;
        self.len = 0;
        self.failures = 0;
    }
}

const BUCKETS: u64 = 20;

/// One slice of a time window: the calls of one bucket-wide stretch of time.
#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    /// Which stretch: the time divided by the bucket's width.
    epoch: u64,
    calls: u64,
    failures: u64,
}

/// The calls of the last D: twenty buckets of D/20 each, so a call leaves the window between
/// D − D/20 and D after it was made.
struct TimeRing {
    span: Nanos,
    width: Nanos,
    /// The newest epoch recorded: time in the window never runs backwards, whatever `now`
    /// a late recorder brings.
    latest: u64,
    buckets: [Bucket; BUCKETS as usize],
}

impl TimeRing {
    fn new(span: Nanos) -> Self {
        TimeRing {
            span,
            width: (span / BUCKETS).max(1),
            latest: 0,
            buckets: [Bucket::default(); BUCKETS as usize],
        }
    }

    /// The span this ring was made for (to the nanosecond, as twenty buckets).
    fn span(&self) -> Nanos {
        self.span
    }

    fn epoch(&self, now: Nanos) -> u64 {
        now / self.width
    }

    fn record(&mut self, failed: bool, now: Nanos) -> Tally {
        let epoch = self.epoch(now);
        let bucket = &mut self.buckets[(epoch % BUCKETS) as usize];
        if bucket.epoch < epoch {
            // A bucket from an older turn of the ring: start it afresh.
            *bucket = Bucket {
                epoch,
                ..Bucket::default()
            };
        }
        // A bucket only ever moves to a newer epoch. One that holds a newer epoch than this
        // call's (a recorder that read the time, then waited a whole turn for the lock) is
        // at least a full span ahead, so this call is already outside the window: dropped,
        // never overwriting the newer calls.
        if bucket.epoch == epoch {
            bucket.calls += 1;
            bucket.failures += u64::from(failed);
        }
        self.latest = self.latest.max(epoch);
        self.tally(now)
    }

    fn tally(&self, now: Nanos) -> Tally {
        let epoch = self.epoch(now).max(self.latest);
        let mut t = Tally::default();
        for b in &self.buckets {
            // `b.epoch <= latest <= epoch`: no bucket is from the future.
            if epoch - b.epoch < BUCKETS {
                t.calls += b.calls;
                t.failures += b.failures;
            }
        }
        t
    }

    fn clear(&mut self) {
        self.latest = 0;
        self.buckets = [Bucket::default(); BUCKETS as usize];
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

    /// The tally against a plain model of the last N calls, through wrap-arounds and clears.
    #[test]
    fn call_ring_tally_is_always_the_calls_it_holds() {
        let size = 7;
        let r = Ring::new(Window::Calls(size));
        let mut model = std::collections::VecDeque::new();
        let mut x: u32 = 12345;
        for i in 0..2_000 {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            if i % 333 == 0 {
                r.clear();
                model.clear();
            }
            let failed = x >> 16 & 3 == 0;
            model.push_back(failed);
            if model.len() > size as usize {
                model.pop_front();
            }
            let expected = Tally {
                calls: model.len() as u64,
                failures: model.iter().filter(|f| **f).count() as u64,
            };
            assert_eq!(r.record(failed, 0), expected, "after call {i}");
        }
    }

    /// A recorder that read the time, then was delayed a whole turn of the ring, finds its
    /// bucket already reused by newer calls: it must not replace them with its older epoch
    /// (its own call is older than the window anyway).
    #[test]
    fn a_stale_recorder_never_overwrites_a_newer_bucket() {
        let sec = 1_000_000_000;
        // Buckets of one second; second 25 and second 5 share bucket 5.
        let r = Ring::new(Window::Duration(Duration::from_secs(20)));
        r.record(false, 25 * sec);
        let stale = r.record(true, 5 * sec);
        let current = Tally {
            calls: 1,
            failures: 0,
        };
        assert_eq!(r.tally(25 * sec), current, "the newer success was lost");
        assert_eq!(
            stale, current,
            "the stale recorder judges the current window"
        );
        // Still in the window and in its own bucket: a slightly stale call counts.
        let t = r.record(true, 24 * sec);
        assert_eq!(
            t,
            Tally {
                calls: 2,
                failures: 1
            }
        );
    }

    #[test]
    fn a_restarted_window_refuses_older_generations() {
        let r = Ring::new(Window::Calls(4));
        assert_eq!(
            crate::state::Word::INITIAL.generation(),
            0,
            "a new ring counts for the first generation"
        );
        assert!(r.record_in(0, true, 0).is_some());
        r.restart(3);
        assert_eq!(r.tally(0), Tally::default());
        assert_eq!(
            r.record_in(0, true, 0),
            None,
            "a late failure of generation 0"
        );
        let t = r.record_in(3, false, 0);
        assert_eq!(
            t,
            Some(Tally {
                calls: 1,
                failures: 0
            })
        );
    }

    /// `reconfigure` resizing a count window keeps its most recent outcomes, in order.
    #[test]
    fn a_resized_call_ring_keeps_the_most_recent_calls() {
        let r = Ring::new(Window::Calls(5));
        // Seven calls through a ring of five: it holds F S F F S (oldest first).
        for failed in [true, true, true, false, true, true, false] {
            r.record(failed, 0);
        }
        r.reshape(Window::Calls(3));
        assert_eq!(
            r.tally(0),
            Tally {
                calls: 3,
                failures: 2
            },
            "F F S kept"
        );
        // The next call pushes out the oldest kept one (an F).
        assert_eq!(
            r.record(false, 0),
            Tally {
                calls: 3,
                failures: 1
            }
        );
        r.reshape(Window::Calls(6));
        assert_eq!(
            r.tally(0),
            Tally {
                calls: 3,
                failures: 1
            },
            "growing keeps all"
        );
        for _ in 0..3 {
            r.record(true, 0);
        }
        assert_eq!(
            r.tally(0),
            Tally {
                calls: 6,
                failures: 4
            }
        );
        assert_eq!(
            r.record(false, 0),
            Tally {
                calls: 6,
                failures: 3
            },
            "the oldest F left"
        );
        r.reshape(Window::Duration(Duration::from_secs(1)));
        assert!(r.needs_clock());
        assert_eq!(r.tally(0), Tally::default(), "another kind starts empty");
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
