//! The closed path: the fast admission a simple policy takes (one load of the word, one
//! count on the caller's own stripe), the refusal of an open breaker (one load, one clock
//! read: a blocking call outside tokio reads the coarse clock), successes, the failure streak
//! and the window, and tripping.

use std::time::Duration;

use super::*;
use crate::{
    clock::{Clock, Nanos},
    events::Cause,
    stats::{here, owned_here, Count, Counting},
    sync::lock,
    BreakerError, State,
};

impl Core {
    /// The closed fast path, inlined into the call wrappers: a closed breaker with a simple
    /// policy, called from a thread that owns a stats stripe, admits with one load of the
    /// word, one thread-local load, one load of the route and one plain count, and makes no
    /// call (so the caller's frame stays small). `None`: try [`refuse`](Self::refuse).
    #[inline(always)]
    pub(crate) fn enter_closed(&self) -> Option<LocalTicket<'_>> {
        self.ticket(|| self.counters.counting_inline())
    }

    /// The open paths, inlined into the call wrappers: an open breaker refuses with one load
    /// of the word and one clock read; a forced-open one with no clock read. `None`: the
    /// breaker is not refusing outright; try [`enter_claiming`](Self::enter_claiming).
    #[cfg(any(feature = "otel", test))]
    #[inline(always)]
    pub(crate) fn refuse(&self, clock: &impl Clock) -> Option<BreakerError> {
        self.refuse_reading(clock, false, DRY)
    }

    /// [`refuse`](Self::refuse), except when someone may watch the call (feature `otel`,
    /// [`Core::watched`]): then `None`, and the caller refuses it on its span. The same test
    /// as `refuse`'s (of the dry run's bit), so an unwatched refusal pays nothing for it.
    #[inline(always)]
    pub(crate) fn refuse_unwatched(&self, clock: &impl Clock) -> Option<BreakerError> {
        self.refuse_reading(clock, false, DRY | WATCHED)
    }

    /// [`refuse`](Self::refuse) for a blocking call: the clock's coarse reading first, where
    /// it has one ([`Clock::coarse_before`]: on a thread outside tokio, where its time cannot
    /// be paused), and the precise one only near the cool-off's end. Not for the call future:
    /// it is polled inside a runtime, where asking whether the thread is in one costs more
    /// (a handle's `Arc` clone outside a task) than the precise reading saves.
    #[inline(always)]
    pub(crate) fn refuse_blocking(&self, clock: &impl Clock) -> Option<BreakerError> {
        self.refuse_reading(clock, true, DRY)
    }

    /// `unless`: the flags that make an open breaker refuse nothing outright here.
    #[inline(always)]
    fn refuse_reading(&self, clock: &impl Clock, coarse: bool, unless: u8) -> Option<BreakerError> {
        let w = self.word();
        if w.is(State::Open) {
            if coarse {
                return self.refuse_open_blocking(clock);
            }
            // Asked before the clock: a call that will not be refused here (a dry run's, or
            // a watched one: its refusal reads the clock itself) reads it once, not twice.
            if self.flags.load(Relaxed) & unless != 0 {
                return None;
            }
            let now = clock.now();
            let until = self.open_until.load(Acquire);
            if now < until {
                return Some(self.reject(Some(until - now)));
            }
        } else if w.is(State::ForcedOpen) && self.flags.load(Relaxed) & unless == 0 {
            return Some(self.reject(None));
        }
        None
    }

    /// An open breaker's refusal of a blocking call. Out of line: inlined into the call
    /// wrapper, the coarse reading's thread-local reads made the closed path's frame save
    /// more registers (the attribute's closed_sync +2 Ir); the call costs the refusal about a
    /// nanosecond, the coarse reading saves it 15 to 20.
    #[inline(never)]
    fn refuse_open_blocking(&self, clock: &impl Clock) -> Option<BreakerError> {
        let until = self.open_until.load(Acquire);
        let now = match clock.coarse_before(until) {
            Some(now) => now,
            None => clock.now(),
        };
        if now < until && !self.dry_runs() {
            return Some(self.reject(Some(until - now)));
        }
        None
    }

    /// A dry run refuses nothing outright: full admission makes its would-be refusals
    /// shadows. Asked only on a refusal, so the closed path never reads it.
    #[inline(always)]
    fn dry_runs(&self) -> bool {
        self.flags.load(Relaxed) & DRY != 0
    }

    /// The closed fast path for a thread that owns no stripe yet (its first count claims
    /// one) or shares one (counted with `fetch_add`): out of the inlined path, after
    /// [`enter_closed`](Self::enter_closed) and [`refuse`](Self::refuse) said neither. `None`:
    /// not closed with a simple policy; take [`admit`](Self::admit).
    pub(crate) fn enter_claiming(&self) -> Option<LocalTicket<'_>> {
        self.ticket(|| Some(self.counters.counting(here())))
    }

    /// Admission on the fast path: closed with a simple policy, counted on the stripe that
    /// `stripe` finds (looked up only then, so a refused call claims none).
    #[inline(always)]
    pub(super) fn ticket<'a>(
        &'a self,
        stripe: impl FnOnce() -> Option<Counting<'a>>,
    ) -> Option<LocalTicket<'a>> {
        let w = self.word();
        // Both read before one test (`&`, not `&&`): an atomic load is not speculated past a
        // branch, and the second branch cost the closed path an instruction.
        let simple = self.flags.load(Relaxed) & SIMPLE != 0;
        if !(w.is(State::Closed) & simple) {
            return None;
        }
        let counting = stripe()?;
        counting.add(Count::Admitted);
        Some(LocalTicket {
            ticket: Ticket::of_word(w),
            counting,
        })
    }

    /// A success on the fast path, on the thread that admitted the call (a blocking call):
    /// one count on the stripe the ticket names (plain if this thread owns it). `true`: a
    /// streak of failures was running and must be ended ([`end_streak_now`]
    /// (Self::end_streak_now)), which the caller does last, as a tail call, so that the
    /// closed path keeps no value alive across a call.
    #[inline(always)]
    pub(crate) fn succeeded_here(&self, admitted: LocalTicket<'_>) -> bool {
        admitted.counting.add(Count::Success);
        self.streak_running()
    }

    /// Whether a failure was counted in any generation since the streak was last reset.
    #[inline(always)]
    fn streak_running(&self) -> bool {
        self.streak.load(Relaxed) & STREAK_COUNT != 0
    }

    /// Ends the failure streak a success interrupted (out of line: a streak is rare).
    #[inline(never)]
    pub(crate) fn end_streak_now(&self, ticket: Ticket, clock: &impl Clock) {
        self.finish_closed(ticket.generation(), Outcome::Success, clock);
    }

    /// A success on the fast path, on whichever thread the call's future ended up: counted
    /// on this thread's stripe.
    #[inline]
    pub(crate) fn succeed(&self, ticket: Ticket, clock: &impl Clock) {
        // `owned_stripe` first: one load and compare when this thread owns one.
        let at = owned_here().unwrap_or_else(here);
        self.counters.add_here(at, Count::Success);
        self.end_streak(ticket, clock);
    }

    #[inline(always)]
    pub(super) fn end_streak(&self, ticket: Ticket, clock: &impl Clock) {
        // No failure counted in any generation: nothing to reset.
        if self.streak_running() {
            self.end_streak_now(ticket, clock);
        }
    }

    // Always: the refusal is inlined into `refuse`, as it was before the call future's poll
    // grew by the live configuration's reads (out of line, open_async cost 25 Ir more).
    #[inline(always)]
    pub(super) fn reject(&self, retry_in: Option<Nanos>) -> BreakerError {
        let at = here();
        self.counters.add_here(at, Count::Rejected);
        BreakerError::open(self.refusal_name(at), retry_in.map(Duration::from_nanos))
    }

    /// The name a refusal carries: this thread's copy once the breaker has opened (a
    /// reference count on a line other threads rarely touch), else the name itself.
    #[inline(always)]
    fn refusal_name(&self, at: Here) -> &Name {
        match self.inner.made().and_then(|cold| cold.refusal_names.get()) {
            Some(copies) => &copies[at.index() % NAME_COPIES],
            None => &self.name,
        }
    }

    /// Makes the refusals' copies of the name, once (on the first opening: under the lock,
    /// off the call path).
    pub(super) fn make_refusal_names(&self) {
        if self.name.is_static() {
            return; // copied without a count: nothing to spread
        }
        self.inner
            .cold()
            .refusal_names
            .get_or_init(|| Box::new(std::array::from_fn(|_| Name::from(self.name.as_str()))));
    }

    #[inline(never)]
    pub(super) fn finish_closed(&self, generation: u64, outcome: Outcome, clock: &impl Clock) {
        let failed = outcome.is_failure();
        if !failed && outcome != Outcome::Success {
            return; // neutral or cancelled: counts for nothing, resets nothing
        }
        if let Outcome::OpenFor(open_for) = outcome {
            let cause = Cause::Verdict {
                open_for: Duration::from_nanos(open_for),
            };
            self.trip(generation, cause, clock);
            return;
        }
        let tag = streak_tag(generation);
        // One load: this outcome is judged wholly by the rules before or after a
        // `reconfigure`.
        let rules = self.live.rules();
        if let Some(threshold) = rules.threshold {
            if failed {
                // Saturating: while disabled, failures keep counting and nothing trips; a
                // carry out of the count would land in the generation tag.
                let bumped = self.streak.fetch_update(AcqRel, Acquire, |s| {
                    (s & !STREAK_COUNT == tag && s & STREAK_COUNT != STREAK_COUNT).then_some(s + 1)
                });
                if let Ok(prev) = bumped {
                    let failures = (prev & STREAK_COUNT) as u32 + 1;
                    // `>=`: a key held closed by `max_open` asks again at its next failure.
                    if failures >= threshold {
                        // Once tripped, the window below sees the generation moved on.
                        self.trip(generation, Cause::ConsecutiveFailures { failures }, clock);
                    }
                }
            } else if self.streak.load(Relaxed) != tag {
                // A streak is running in this generation (or the word moved on, and the
                // update below finds the tag changed and leaves it alone).
                let _ = self.streak.fetch_update(AcqRel, Relaxed, |s| {
                    (s & !STREAK_COUNT == tag && s != tag).then_some(tag)
                });
            }
        }
        if let (Some(ring), Some(percent)) = (self.ring(), rules.failure_rate) {
            if self.word().generation() != generation {
                return; // a late outcome from an older state changes nothing
            }
            // The generation is checked again under the window's lock: a close between the
            // check above and this record restarted the window for the next generation.
            let Some(tally) = ring.record_at(generation, failed, || clock.now()) else {
                return;
            };
            if tally.trips(rules.min_calls, percent) {
                let cause = Cause::FailureRate {
                    rate: tally.rate(),
                    calls: tally.calls,
                };
                self.trip(generation, cause, clock);
            }
        }
    }

    /// An outlier ejection (`crate::outliers`): opens a closed breaker for the time the
    /// [`Cause::Outlier`] carries. Whether it opened (one no longer closed, or held closed
    /// by `max_open_percent`, does not).
    pub(crate) fn eject(&self, cause: Cause, clock: &impl Clock) -> bool {
        let w = self.word();
        if w.state() != State::Closed {
            return false;
        }
        self.trip(w.generation(), cause, clock);
        self.word() == w.next(State::Open)
    }

    /// Opens a closed breaker, if it is still in the generation that saw the failures.
    pub(super) fn trip(&self, generation: u64, cause: Cause, clock: &impl Clock) {
        if self.word() != Word::new(State::Closed, generation) {
            return;
        }
        // A keyed breaker's cap (`max_open`), asked outside the lock (it may log): no place,
        // and the key stays closed, still counting.
        if !self.may_open() {
            return;
        }
        let mut inner = lock(&self.inner);
        let w = self.word();
        if w != Word::new(State::Closed, generation) {
            drop(inner);
            if !matches!(self.peek(), State::Open | State::HalfOpen) {
                self.left_open(); // moved on meanwhile without opening: give the place back
            }
            return;
        }
        inner.reopenings = 0;
        self.transition(&mut inner, w, State::Open, cause, clock.now());
        drop(inner);
        self.dispatch();
    }
}
