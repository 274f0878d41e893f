//! Admission beyond the fast path (the bulkhead, slow-call timing, half-open), probe slots
//! and their leases, and how an admitted call's outcome is reported.

use std::time::Duration;

use super::*;
use crate::{
    clock::{Clock, Nanos},
    events::Cause,
    stats::Count,
    sync::lock,
    BreakerError, State,
};

/// A held half-open slot, as the admission keeps it: the low 32 bits of the lease's id and
/// when it was claimed, which together find its slot (the id alone could, after 2^32 claims,
/// name another probe's). A probe whose slot is gone lost it (a transition emptied the table,
/// or its lease ended and another call took the slot over): its late result changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Probe {
    pub(super) lease: u32,
    pub(super) since: Nanos,
}

/// A probe's hold on a half-open slot: which probe holds it, and until when (named apart
/// from the fleet's probe lease).
#[derive(Debug, Clone, Copy)]
pub(super) struct Hold {
    pub(super) id: u64,
    pub(super) since: Nanos,
    pub(super) until: Nanos,
}

impl Core {
    /// Admits a call or refuses it. The caller must report the outcome with
    /// [`finish`](Self::finish) exactly once (a [`Permit`] does). Under a dry run every
    /// refusal below admits the call instead, as a shadow whose outcome counts for nothing.
    pub(crate) fn admit(&self, clock: &impl Clock) -> Result<Admission, BreakerError> {
        let w = self.word();
        let mut now = None;
        let (generation, probe) = match w.state() {
            State::Closed | State::Disabled => (w.generation(), None),
            State::ForcedOpen => return self.refused(w.generation(), None),
            State::Open => {
                let t = clock.now();
                let until = self.open_until.load(Acquire);
                if t < until {
                    return self.refused(w.generation(), Some(until - t));
                }
                now = Some(t);
                match self.admit_half_open(t) {
                    Ok(admitted) => admitted,
                    Err(retry_in) => return self.refused(w.generation(), retry_in),
                }
            }
            State::HalfOpen => {
                let t = clock.now();
                now = Some(t);
                match self.admit_half_open(t) {
                    Ok(admitted) => admitted,
                    Err(retry_in) => return self.refused(w.generation(), retry_in),
                }
            }
        };
        let mut admission = Admission::new(generation);
        if let Some(t) = now {
            admission.hold_probe(probe, t);
        }
        if let Some(o) = self.overload() {
            let t = match now {
                Some(t) => t,
                None if o.needs_clock() => *now.insert(clock.now()),
                None => 0,
            };
            // Shedding while closed only: a probe decides recovery, a disabled breaker admits
            // everything.
            if probe.is_none() && w.is(State::Closed) && o.shed(t, &mut admission) {
                return match self.shadow(generation) {
                    Some(shadow) => Ok(shadow),
                    None => {
                        o.count_throttled();
                        self.counters.add(Count::Rejected);
                        Err(BreakerError::Throttled {
                            name: self.name.clone(),
                        })
                    }
                };
            }
            if !w.is(State::Disabled) {
                match o.acquire(t) {
                    Ok(Some(seat)) => admission.hold_seat(seat),
                    Ok(None) => {}
                    Err(limit) => return self.full(generation, probe, limit, clock),
                }
            }
        }
        // A disabled breaker admits every call, past the bulkhead too.
        let bulkhead = self
            .live
            .max_concurrent()
            .filter(|_| !w.is(State::Disabled));
        if let Some(max) = bulkhead {
            // A compare-and-swap that never overshoots: `fetch_add` then undo would let two
            // racing calls at the limit both see it exceeded and both be refused.
            let taken = self
                .in_flight
                .fetch_update(Acquire, Relaxed, |n| (n < max).then_some(n + 1));
            if taken.is_err() {
                return self.full(generation, probe, max, clock);
            }
        }
        self.counters.add(Count::Admitted);
        if bulkhead.is_some() {
            admission.flags |= BULKHEAD;
        }
        if self.live.slow_call().is_some() {
            // The one reading admission took, if it took one: the throttle's, the seat's and
            // the probe's `at` are that reading too.
            admission.at = now.unwrap_or_else(|| clock.now());
            admission.flags |= STARTED;
        }
        Ok(admission)
    }

    /// A bulkhead (fixed or adaptive) at its `limit`: gives back the probe slot, then
    /// refuses (or, in a dry run, admits a shadow).
    #[cold]
    fn full(
        &self,
        generation: u64,
        probe: Option<Probe>,
        limit: u32,
        clock: &impl Clock,
    ) -> Result<Admission, BreakerError> {
        if let Some(p) = probe {
            self.finish_probe(generation, p, Outcome::Cancelled, clock);
        }
        if let Some(shadow) = self.shadow(generation) {
            return Ok(shadow);
        }
        self.counters.add(Count::Rejected);
        Err(BreakerError::Full {
            name: self.name.clone(),
            max_concurrent: limit,
        })
    }

    /// Open, forced open, or half-open with every slot taken: refuses (or, in a dry run,
    /// admits a shadow).
    #[cold]
    fn refused(&self, generation: u64, retry_in: Option<Nanos>) -> Result<Admission, BreakerError> {
        match self.shadow(generation) {
            Some(shadow) => Ok(shadow),
            None => Err(self.reject(retry_in)),
        }
    }

    /// In a dry run, the admission of a call the breaker would have refused: counted in
    /// `calls` and `shadow_rejected` (by the overload part, not on the stripes), holding
    /// nothing, its outcome counting for nothing. `None` otherwise.
    pub(super) fn shadow(&self, generation: u64) -> Option<Admission> {
        if !self.live.dry_run() {
            return None;
        }
        // Made by `reconfigure` before it turned the dry run on; made here if a racing call
        // got here first.
        let o = self
            .overload
            .get_or_init(|| Overload::build(&self.live.resolved().policy.overload));
        o.count_shadow();
        Some(Admission {
            flags: SHADOW,
            ..Admission::new(generation)
        })
    }

    /// Admission when the word said open (cool-off over) or half-open: under the lock,
    /// because it may start the half-open period and it hands out probe slots.
    #[inline(never)]
    pub(super) fn admit_half_open(
        &self,
        now: Nanos,
    ) -> Result<(u64, Option<Probe>), Option<Nanos>> {
        let mut inner = lock(&self.inner);
        let mut w = self.word();
        let mut moved = false;
        let verdict = loop {
            match w.state() {
                State::Closed | State::Disabled => break Ok((w.generation(), None)),
                State::ForcedOpen => break Err(None),
                State::Open => {
                    let until = self.open_until.load(Acquire);
                    if now < until {
                        break Err(Some(until - now));
                    }
                    if inner.fleet_holds_open() {
                        inner.fleet_wanted(); // a call waits: the fleet may ask for the lease
                        break Err(None); // another instance of the fleet probes
                    }
                    w = self.transition(&mut inner, w, State::HalfOpen, Cause::CoolOffElapsed, now);
                    moved = true;
                }
                State::HalfOpen => {
                    break self
                        .claim_slot(&mut inner, now)
                        .map(|p| (w.generation(), Some(p)))
                }
            }
        };
        drop(inner);
        if moved {
            self.dispatch();
        }
        verdict
    }

    /// Takes a free probe slot, or one whose lease ended (its holder hung: it loses the
    /// slot, and its late outcome will change nothing). Refused: the time until the
    /// earliest lease ends.
    pub(super) fn claim_slot(&self, inner: &mut Inner, now: Nanos) -> Result<Probe, Option<Nanos>> {
        let settings = self.live.resolved();
        if inner.leases.is_empty() {
            inner.leases.resize(settings.policy.probes as usize, None);
        }
        let free = inner
            .leases
            .iter()
            .position(|l| l.is_none_or(|l| l.until <= now));
        let Some(slot) = free else {
            let earliest = inner.leases.iter().flatten().map(|l| l.until).min();
            return Err(earliest.map(|until| until.saturating_sub(now)));
        };
        let lease = inner.next_lease;
        inner.next_lease += 1;
        let until = now.saturating_add(settings.policy.lease());
        inner.leases[slot] = Some(Hold {
            id: lease,
            since: now,
            until,
        });
        Ok(Probe {
            lease: lease as u32, // an admission keeps the low bits (see `Probe`)
            since: now,
        })
    }

    /// The flags of an admitted call whose answer began (a streamed response's headers
    /// arrived), its outcome still to come: `slow_call` is judged now. A call not slow by now
    /// loses its start ([`STARTED`]), so its end is not timed and a drop is only a
    /// cancellation; one slow already keeps it, and ends slow (or abandoned).
    pub(crate) fn answer_began(&self, admission: Admission, clock: &impl Clock) -> u8 {
        let slow = match self.live.slow_call() {
            Some(slow) if admission.has(STARTED) => {
                clock.now().saturating_sub(admission.at) >= slow
            }
            _ => false,
        };
        if slow {
            admission.flags
        } else {
            admission.flags & !STARTED
        }
    }

    /// Reports how an admitted call ended.
    pub(crate) fn finish(&self, admission: Admission, outcome: Outcome, clock: &impl Clock) {
        if admission.has(SHADOW) {
            // A dry run's would-be refusal: its outcome counts for nothing; it ended.
            if let Some(o) = self.overload() {
                o.end_shadow();
            }
            return;
        }
        let slow = match self.live.slow_call() {
            Some(slow) if admission.has(STARTED) && outcome != Outcome::Timeout => {
                clock.now().saturating_sub(admission.at) >= slow
            }
            _ => false,
        };
        // A call dropped after running `slow_call` was slower than that, whoever gave up on
        // it (an outer timeout, a caller): abandoned, a slow call. Dropped sooner: cancelled.
        let abandoned = slow && outcome == Outcome::Cancelled;
        let outcome = if slow { Outcome::Slow } else { outcome };
        let count = match outcome {
            _ if abandoned => Some(Count::Abandoned),
            Outcome::Success => Some(Count::Success),
            Outcome::Failure => Some(Count::Failure),
            Outcome::Timeout => Some(Count::Timeout),
            Outcome::Slow => Some(Count::Slow),
            Outcome::OpenFor(_) => Some(Count::Failure),
            Outcome::Neutral => Some(Count::Neutral),
            Outcome::Cancelled => Some(Count::Cancelled),
        };
        if let Some(count) = count {
            // This thread's stripe: an async call may end on another thread than the one
            // that admitted it, and only a stripe's owner may count on it with plain stores.
            self.counters.add(count);
        }
        if admission.has(BULKHEAD) {
            self.in_flight.fetch_sub(1, Release);
        }
        if let Some(o) = self.overload() {
            o.finish(&admission, outcome, clock);
        }
        if admission.has(PROBE) {
            self.finish_probe(admission.generation, admission.probe(), outcome, clock);
        } else {
            self.finish_closed(admission.generation, outcome, clock);
        }
    }

    pub(super) fn finish_probe(
        &self,
        generation: u64,
        probe: Probe,
        outcome: Outcome,
        clock: &impl Clock,
    ) {
        let mut inner = lock(&self.inner);
        // The slot may be gone: a transition empties the table, and the next half-open
        // period may have fewer slots (`reconfigure` changed `probes`). At most
        // `Config::MAX_PROBES` slots, searched only at a probe's outcome.
        let ours = inner
            .leases
            .iter_mut()
            .find(|l| l.is_some_and(|l| l.id as u32 == probe.lease && l.since == probe.since));
        let freed = ours.is_some();
        if let Some(lease) = ours {
            *lease = None;
        } else if outcome != Outcome::Timeout {
            // Its lease ended and another call took the slot (or a transition emptied the
            // table): a late result changes nothing. Judged by the slot alone, not by the
            // lease's end recomputed now: `reconfigure` may have lengthened the lease since.
            return;
        }
        // Else the result is a timeout. A probe whose timeout is its lease reports when
        // tokio's timer fires, which is at the next millisecond or later; a call arriving in
        // between takes the slot over. Dropping the timeout then would leave a hanging dependency half-open
        // forever under steady traffic, with the backoff never growing (review M3), so a
        // timed-out probe always reopens the breaker of its generation.
        let w = self.word();
        if w != Word::new(State::HalfOpen, generation) {
            drop(inner);
            if freed {
                self.wake_waiters(); // a free slot admits the next call
            }
            return;
        }
        let moved = match outcome {
            Outcome::Success => {
                inner.probe_successes += 1;
                let successes = inner.probe_successes;
                if successes >= self.live.resolved().policy.success_threshold {
                    let cause = Cause::ProbesSucceeded { successes };
                    // The time only to start a recovery ramp.
                    let ramps = self.overload().is_some_and(Overload::ramps);
                    let now = if ramps { clock.now() } else { 0 };
                    self.transition(&mut inner, w, State::Closed, cause, now);
                    true
                } else {
                    false
                }
            }
            Outcome::Failure | Outcome::Timeout | Outcome::Slow => {
                inner.reopenings = inner.reopenings.saturating_add(1);
                self.transition(&mut inner, w, State::Open, Cause::ProbeFailed, clock.now());
                true
            }
            Outcome::OpenFor(open_for) => {
                inner.reopenings = inner.reopenings.saturating_add(1);
                let cause = Cause::Verdict {
                    open_for: Duration::from_nanos(open_for),
                };
                let now = clock.now();
                self.transition(&mut inner, w, State::Open, cause, now);
                true
            }
            Outcome::Neutral | Outcome::Cancelled => false,
        };
        drop(inner);
        if moved {
            self.dispatch();
        } else if freed {
            self.wake_waiters(); // a free slot admits the next call
        }
    }
}
