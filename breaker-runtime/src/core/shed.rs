//! Overload in the engine: what a breaker with `throttle`, `ramp`, `adaptive_concurrency` or
//! `dry_run` does at admission and at the outcome (the algorithms are `crate::overload`'s).
//!
//! A breaker without any of them has no [`Overload`] (`None`, one pointer) and keeps the
//! closed fast path; with one, every call takes full admission ([`Core::admit`]), which
//! asks [`Overload::shed`] while closed and the adaptive limiter in any state but disabled.

use crate::{
    clock::{Clock, Nanos},
    config::OverloadPolicy,
    overload::{self, combined_rate, Limiter, Ramp, Sample, Throttle},
    stats::ResetCount,
    sync::{AtomicU64, Ordering::Relaxed},
};

use super::{
    admission::{REQUESTED, SEAT},
    Admission, Outcome,
};

/// A breaker's overload mechanisms and their counts.
#[derive(Debug)]
pub(crate) struct Overload {
    throttle: Option<Throttle>,
    ramp: Option<Ramp>,
    limiter: Option<Limiter>,
    /// Calls refused by the throttle or the ramp (also counted in `Stats::rejected`).
    throttled: ResetCount,
    /// Dry run: calls that would have been refused, made anyway.
    shadow_rejected: ResetCount,
    /// Dry run: those still running. Counted here, not on the stripes (whose admitted and
    /// finished counts a shadow would unbalance: its outcome counts nowhere), so a key's
    /// calls in flight return to zero and an idle dry-run key is swept.
    shadows: AtomicU64,
}

impl Admission {
    /// Holds the adaptive bulkhead's `seat`.
    pub(super) fn hold_seat(&mut self, seat: overload::Seat) {
        (self.at, self.in_flight) = seat.parts();
        self.flags |= SEAT;
    }

    fn requested_at(&self) -> Option<Nanos> {
        self.has(REQUESTED).then_some(self.at)
    }

    fn seat(&self) -> Option<overload::Seat> {
        self.has(SEAT)
            .then(|| overload::Seat::from_parts(self.at, self.in_flight))
    }
}

/// What an outcome tells the adaptive limit. Vegas learns from answers, not from errors:
/// a failed call (an error, a timeout, a slow call, an `OpenFor`) is a drop, which may
/// lower the limit, and never a round-trip sample (a burst of fast 503s would look like a
/// dependency with no queue at all, and raise the limit). A success or a neutral answer (the
/// caller's fault, answered by the dependency) is a sample; a cancelled call tells nothing.
pub(crate) fn limit_sample(outcome: Outcome) -> Sample {
    match outcome {
        Outcome::Success | Outcome::Neutral => Sample::Answered,
        Outcome::Failure | Outcome::Timeout | Outcome::Slow | Outcome::OpenFor(_) => {
            Sample::Dropped
        }
        Outcome::Cancelled => Sample::Ignored,
    }
}

impl Overload {
    /// The mechanisms `policy` turns on; `None` when it turns on none.
    pub(crate) fn new(policy: &OverloadPolicy) -> Option<Box<Overload>> {
        policy.any().then(|| Overload::build(policy))
    }

    /// The mechanisms `policy` turns on, made even if none is (a dry run turned on by
    /// `reconfigure` needs the counts). Whether a dry run is on is read from the breaker's
    /// live configuration, not kept here.
    pub(crate) fn build(policy: &OverloadPolicy) -> Box<Overload> {
        Box::new(Overload {
            throttle: policy
                .throttle
                .map(|(k, cap, window)| Throttle::new(f64::from_bits(k), cap, window)),
            ramp: policy.ramp.map(Ramp::new),
            limiter: policy.adaptive_concurrency.map(Limiter::new),
            throttled: ResetCount::new(),
            shadow_rejected: ResetCount::new(),
            shadows: AtomicU64::new(0),
        })
    }

    /// Whether closing needs the time (to start a ramp).
    pub(super) fn ramps(&self) -> bool {
        self.ramp.is_some()
    }

    /// Whether a closed breaker sheds the call arriving at `now` (the ramp first, then the
    /// throttle). A call the throttle sheds is counted as a request now; one it admits is
    /// counted with its answer ([`Throttle::record_answer`]), so `at` keeps its admission
    /// time.
    pub(super) fn shed(&self, now: Nanos, admission: &mut Admission) -> bool {
        if let Some(ramp) = &self.ramp {
            // A ramp's refusals are not the throttle's requests: counted there they would
            // make it shed more on top of the ramp.
            if ramp.active() && ramp.should_refuse(now, overload::draw()) {
                return true;
            }
        }
        if let Some(throttle) = &self.throttle {
            if throttle.should_refuse(now, overload::draw()) {
                throttle.record_request(now);
                return true;
            }
            admission.at = now;
            admission.flags |= REQUESTED;
            return false;
        }
        false
    }

    /// The adaptive bulkhead's seat for a call at `now`, or its current limit when full.
    /// `Ok(None)` without an adaptive bulkhead.
    pub(super) fn acquire(&self, now: Nanos) -> Result<Option<overload::Seat>, u32> {
        match &self.limiter {
            Some(limiter) => limiter.try_acquire(now).map(Some),
            None => Ok(None),
        }
    }

    /// Whether admission needs the time for this breaker (throttle, ramp or limiter).
    pub(super) fn needs_clock(&self) -> bool {
        self.throttle.is_some() || self.ramp.is_some() || self.limiter.is_some()
    }

    pub(super) fn count_throttled(&self) {
        self.throttled.add();
    }

    /// A shadow starts: counted in `shadow_rejected`, and running until [`end_shadow`]
    /// (Self::end_shadow).
    pub(super) fn count_shadow(&self) {
        self.shadow_rejected.add();
        self.shadows.fetch_add(1, Relaxed);
    }

    /// A shadow ended, however (its outcome counts for nothing).
    pub(super) fn end_shadow(&self) {
        self.shadows.fetch_sub(1, Relaxed);
    }

    /// Shadows running now.
    pub(super) fn shadows(&self) -> u64 {
        self.shadows.load(Relaxed)
    }

    /// What an outcome tells the throttle (an answer is an accept) and the limiter (its
    /// round-trip time, or a drop).
    pub(super) fn finish(&self, admission: &Admission, outcome: Outcome, clock: &impl Clock) {
        if let (Some(throttle), Some(at)) = (&self.throttle, admission.requested_at()) {
            // A cancelled call got no answer: it counts for nothing, here too.
            if outcome != Outcome::Cancelled {
                let accepted = matches!(outcome, Outcome::Success | Outcome::Neutral);
                throttle.record_answer(at, accepted);
            }
        }
        if let (Some(limiter), Some(seat)) = (&self.limiter, admission.seat()) {
            let sample = limit_sample(outcome);
            // A drop's time too: it may close the window (a window of drops only lowers the
            // limit), which a drop stamped 0 never did.
            let now = if sample == Sample::Ignored {
                0
            } else {
                clock.now()
            };
            limiter.release(seat, now, sample);
        }
    }

    /// Closing: a ramp starts when a probe (or the fleet's) closed the breaker; any other
    /// transition ends a ramp in progress.
    pub(super) fn on_transition(&self, ramp_starts: bool, now: Nanos) {
        if let Some(ramp) = &self.ramp {
            if ramp_starts {
                ramp.start(now);
            } else {
                ramp.stop();
            }
        }
    }

    /// The percentage of calls being shed now (`Snapshot::throttle_rate`).
    pub(super) fn rate(&self, now: Nanos) -> f64 {
        let ramp = self.ramp.as_ref().map_or(0.0, |r| r.ramp_rate(now));
        let throttle = self.throttle.as_ref().map_or(0.0, |t| t.rate(now));
        combined_rate(ramp, throttle)
    }

    /// Holds nothing a new breaker would not: no unanswered request in the throttle's
    /// window, no ramp in progress, the adaptive limit at its start. A keyed breaker evicts
    /// only such keys as fresh: one shedding, ramping or with a learned limit would come back
    /// from eviction at 0 % shed and at the start limit.
    pub(super) fn is_fresh(&self, now: Nanos) -> bool {
        if let Some(throttle) = &self.throttle {
            let (requests, accepts) = throttle.counts(now);
            if requests != accepts {
                return false;
            }
        }
        if self.ramp.as_ref().is_some_and(|r| r.ramp_rate(now) > 0.0) {
            return false;
        }
        self.limiter.as_ref().is_none_or(Limiter::at_start)
    }

    /// The adaptive bulkhead's current limit.
    pub(super) fn limit(&self) -> Option<u32> {
        self.limiter.as_ref().map(Limiter::limit)
    }

    /// `(throttled, shadow_rejected)` since creation or the last reset.
    pub(super) fn counts(&self) -> (u64, u64) {
        (
            self.throttled.since_reset(),
            self.shadow_rejected.since_reset(),
        )
    }

    /// `(throttled, shadow_rejected)` since creation, resets included (`Handle::counted`).
    pub(super) fn totals(&self) -> (u64, u64) {
        (self.throttled.total(), self.shadow_rejected.total())
    }

    /// Starts over as a new breaker would (`reset()`): both counts from zero, the
    /// throttle's window empty, the adaptive limit back at its start (the ramp is stopped by
    /// the transition to closed). A reset says "the dependency is fine now": shedding on what
    /// was seen before it would refuse a recovered dependency for a whole window.
    pub(super) fn clear(&self) {
        self.throttled.reset();
        self.shadow_rejected.reset();
        if let Some(throttle) = &self.throttle {
            throttle.clear();
        }
        if let Some(limiter) = &self.limiter {
            limiter.restart();
        }
    }
}
