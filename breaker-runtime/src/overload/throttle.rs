//! Client-side adaptive throttling (Google SRE book, *Handling Overload*): refuse a call
//! locally with probability `max(0, (requests − K·accepts) / (requests + 1))`, capped at
//! `max_throttle`, over a sliding window.
//!
//! The window is [`BUCKETS`] time buckets of `window / BUCKETS` each (3 s for the default
//! 60 s): it covers between `window − window/BUCKETS` and `window` of history, and a bucket
//! leaves it whole. Each bucket is two atomics: the period it holds (its *epoch*, `now /
//! granularity`) and its counts packed in one word (requests in the high 32 bits, accepts in
//! the low 32), so recording a request or an accept is one `fetch_add`. The first caller to
//! reach a bucket in a new period claims it by a compare-and-swap on its epoch and clears it;
//! a call racing that claim may lose its count (at most one per racing caller, once per bucket
//! period), which a probability estimated over thousands of calls does not notice. A half
//! that reaches 2^31 (a bucket of a very long window, at tens of thousands of calls a
//! second) halves both, keeping their proportion, so neither carries nor wraps.
//!
//! Reading the window (every [`Throttle::should_refuse`]) is `2 × BUCKETS` relaxed loads and
//! no write: only the current bucket's cache line is being written by other threads.

use crate::{
    clock::Nanos,
    sync::{AtomicU64, Ordering::*},
};

use super::random::unit;

/// Buckets in the window (failsafe-go's adaptive throttler uses 20 as well).
pub(crate) const BUCKETS: usize = 20;

/// One request, in a bucket's packed counts.
const REQUEST: u64 = 1 << 32;
/// The accepts' half of a bucket's packed counts.
const ACCEPTS: u64 = u32::MAX as u64;

/// The default `max_throttle`: at most 90 % of calls refused, so some always get through to
/// notice the dependency recovering.
pub(crate) const DEFAULT_MAX_THROTTLE: u8 = 90;
/// The default `throttle_window`: 60 s.
pub(crate) const DEFAULT_WINDOW: Nanos = 60_000_000_000;

/// A breaker's throttle: the window's counts and the formula's parameters.
#[derive(Debug)]
pub(crate) struct Throttle {
    /// `K`: how many requests per accept are tolerated before refusing (≥ 1).
    k: f64,
    /// `max_throttle` as a fraction.
    cap: f64,
    /// Nanoseconds per bucket (≥ 1).
    granularity: Nanos,
    buckets: [Bucket; BUCKETS],
}

#[derive(Debug, Default)]
struct Bucket {
    /// The period (`now / granularity`) whose calls `counts` holds.
    epoch: AtomicU64,
    /// Requests (high 32 bits) and accepts (low 32 bits) in that period.
    counts: AtomicU64,
}

impl Throttle {
    /// A throttle refusing with `(requests − k·accepts) / (requests + 1)`, at most
    /// `max_throttle` percent, over `window`. The configuration validates `k ≥ 1`,
    /// `max_throttle` in 1..=100 and a non-zero window; out-of-range values are clamped here.
    pub(crate) fn new(k: f64, max_throttle: u8, window: Nanos) -> Self {
        Self {
            k: if k.is_finite() { k.max(1.0) } else { 1.0 },
            cap: f64::from(max_throttle.min(100)) / 100.0,
            granularity: (window / BUCKETS as u64).max(1),
            buckets: Default::default(),
        }
    }

    /// Empties the window (`reset()`). A call admitted before and answered after still
    /// counts in its bucket: one call, where the window held thousands.
    pub(crate) fn clear(&self) {
        for bucket in &self.buckets {
            bucket.counts.store(0, Release);
        }
    }

    /// Sets the counts of `now`'s bucket (claiming it), as if that many calls had been
    /// counted: what billions of calls in one bucket look like, without making them.
    #[cfg(test)]
    pub(crate) fn preload(&self, now: Nanos, requests: u64, accepts: u64) {
        if let Some(bucket) = self.bucket(now / self.granularity) {
            bucket.counts.store((requests << 32) | accepts, Release);
        }
    }

    /// The duration one bucket covers: how finely the window slides.
    #[cfg(test)]
    pub(crate) fn granularity(&self) -> Nanos {
        self.granularity
    }

    /// Whether to refuse the call arriving at `now`, for a uniform `draw` (from
    /// [`super::random::draw`]). Reads the window, writes nothing: record the call with
    /// [`Throttle::record_request`] whether it is refused or not.
    #[inline]
    pub(crate) fn should_refuse(&self, now: Nanos, draw: u64) -> bool {
        let p = self.probability(now);
        p > 0.0 && unit(draw) < p
    }

    /// Counts a call that reached the throttle at `now` (admitted or throttled).
    #[inline]
    pub(crate) fn record_request(&self, now: Nanos) {
        if let Some(bucket) = self.bucket(now / self.granularity) {
            bucket.add(REQUEST);
        }
    }

    /// Counts an accept (the call was judged `Success` or `Neutral`) for the call whose
    /// request was recorded at `admitted_at`: the accept joins its request's bucket, so the
    /// two leave the window together, and an accept whose request has already left the window
    /// is not counted. Passing the current time instead also works (the accept then lands in
    /// the current bucket), at the price of a clock read at the outcome.
    #[cfg(test)]
    pub(crate) fn record_accept(&self, admitted_at: Nanos) {
        let period = admitted_at / self.granularity;
        let bucket = &self.buckets[bucket_index(period)];
        if bucket.epoch.load(Acquire) == period {
            bucket.add(1);
        }
    }

    /// Counts an admitted call once it has an answer, in the bucket of its admission: its
    /// request, and its accept if `accepted` (judged `Success` or `Neutral`), in one
    /// `fetch_add`. Counting the request only then keeps calls still in flight out of the
    /// formula: counted at admission, every call in flight would be a request without an
    /// accept, and a client starting with a few concurrent calls would see `R / (R + 1)`,
    /// half and more, and shed from its first second on (and with `K` near 1 keep shedding,
    /// since a shed call is itself a request without an accept). A call whose bucket has
    /// left the window is not counted.
    #[inline]
    pub(crate) fn record_answer(&self, admitted_at: Nanos, accepted: bool) {
        if let Some(bucket) = self.bucket(admitted_at / self.granularity) {
            bucket.add(REQUEST + u64::from(accepted));
        }
    }

    /// The percentage of calls being refused now (`Snapshot.throttle_rate`'s throttle part).
    pub(crate) fn rate(&self, now: Nanos) -> f64 {
        self.probability(now) * 100.0
    }

    /// `(requests, accepts)` in the window ending at `now`.
    pub(crate) fn counts(&self, now: Nanos) -> (u64, u64) {
        let current = now / self.granularity;
        let (mut requests, mut accepts) = (0, 0);
        for bucket in &self.buckets {
            let epoch = bucket.epoch.load(Acquire);
            if epoch <= current && current - epoch < BUCKETS as u64 {
                let counts = bucket.counts.load(Relaxed);
                requests += counts >> 32;
                accepts += counts & ACCEPTS;
            }
        }
        (requests, accepts)
    }

    /// The refusal probability now: the formula over the window, capped.
    pub(crate) fn probability(&self, now: Nanos) -> f64 {
        let (requests, accepts) = self.counts(now);
        refusal_probability(requests, accepts, self.k, self.cap)
    }

    /// The bucket for `period`, claimed (epoch moved, counts cleared) if it still holds an
    /// older one; `None` if it already holds a newer one (`now` read a whole window ago).
    #[inline]
    fn bucket(&self, period: u64) -> Option<&Bucket> {
        let bucket = &self.buckets[bucket_index(period)];
        let mut seen = bucket.epoch.load(Acquire);
        while seen < period {
            match bucket
                .epoch
                .compare_exchange_weak(seen, period, AcqRel, Acquire)
            {
                Ok(_) => {
                    bucket.counts.store(0, Release);
                    return Some(bucket);
                }
                Err(actual) => seen = actual,
            }
        }
        (seen == period).then_some(bucket)
    }
}

impl Bucket {
    /// Adds `packed` (a request, an accept, or both) in one `fetch_add`. A half that
    /// reached [`HALVE_AT`] halves both (the refusal probability depends on their
    /// proportion, which halving keeps): a bucket of a very long window may see more than
    /// 2^32 calls, and a full half would carry into the other or wrap to zero. The 2^31
    /// calls of headroom absorb every add racing the halving.
    #[inline]
    fn add(&self, packed: u64) {
        let after = self.counts.fetch_add(packed, Relaxed).wrapping_add(packed);
        if after >> 32 >= HALVE_AT || after & ACCEPTS >= HALVE_AT {
            self.halve();
        }
    }

    #[cold]
    fn halve(&self) {
        let _ = self.counts.fetch_update(Relaxed, Relaxed, |c| {
            let (requests, accepts) = (c >> 32, c & ACCEPTS);
            (requests >= HALVE_AT || accepts >= HALVE_AT)
                .then_some(((requests / 2) << 32) | (accepts / 2))
        });
    }
}

/// A bucket's half at which both halves are halved (see [`Bucket::add`]).
const HALVE_AT: u64 = 1 << 31;

/// `min(cap, max(0, (requests − k·accepts) / (requests + 1)))`.
pub(crate) fn refusal_probability(requests: u64, accepts: u64, k: f64, cap: f64) -> f64 {
    let requests = requests as f64;
    ((requests - k * accepts as f64) / (requests + 1.0)).clamp(0.0, cap)
}

#[inline]
fn bucket_index(period: u64) -> usize {
    (period % BUCKETS as u64) as usize
}
