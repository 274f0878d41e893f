//! The engine: admission, outcomes and transitions of one breaker.
//!
//! The state and its generation live in one atomic word ([`Word`]). A call on the closed
//! path is lock-free and, with a simple policy, takes [`Core::enter_closed`]: one load of the
//! word, one count on the stats stripe the calling thread owns (a plain load and store, no
//! locked instruction), and on success one more count and one load of the failure streak
//! (written only while a streak runs); no clock read, no allocation, no write to a line
//! another thread writes. The open path ([`Core::refuse`]) is one load of the word and one
//! clock read.
//!
//! Transitions are rare, and they are serialised by one mutex: whoever changes the word
//! holds it, re-checks the word under it (so of two racing callers exactly one acts), and
//! stores the new word last with `Release`, after the fields the new state needs
//! (`open_until`, a cleared streak). Half-open admission and probe outcomes take the same
//! lock, since they decide transitions. No user code runs under it: events are queued under
//! the lock and announced after it is released, by one dispatcher at a time, in order.

use std::{collections::VecDeque, panic::AssertUnwindSafe, time::Duration};

use crate::{
    clock::{Clock, Nanos},
    config::{Hook, Policy},
    events::{self, Cause, Transition},
    stats::{here, owned_here, Count, Counters, Here},
    sync::{lock, AtomicU32, AtomicU64, Mutex, Ordering::*},
    window::{Ring, Tally},
    BreakerError, Name, State, Verdict,
};

/// How an admitted call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// `Ok` in time.
    Success,
    /// An error that counts against the dependency, or a panic.
    Failure,
    /// The deadline passed.
    Timeout,
    /// Finished, but took at least `slow_call`.
    Slow,
    /// An error `is_failure` judged to be the caller's fault: counts for nothing.
    Neutral,
    /// The call's future was dropped before it finished: counts for nothing.
    Cancelled,
    /// A classifier's [`Verdict::OpenFor`]: a failure that opens the breaker at once for
    /// this long (before clamping).
    OpenFor(Nanos),
}

impl Outcome {
    fn is_failure(self) -> bool {
        matches!(
            self,
            Outcome::Failure | Outcome::Timeout | Outcome::Slow | Outcome::OpenFor(_)
        )
    }
}

impl From<Verdict> for Outcome {
    fn from(v: Verdict) -> Self {
        match v {
            Verdict::Success => Outcome::Success,
            Verdict::Failure => Outcome::Failure,
            Verdict::Neutral => Outcome::Neutral,
            Verdict::OpenFor(d) => Outcome::OpenFor(crate::clock::to_nanos(d)),
        }
    }
}

/// A held half-open slot: which one, the ticket that proves it is still ours, and when its
/// lease ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Probe {
    slot: usize,
    ticket: u64,
    until: Nanos,
}

#[derive(Debug, Clone, Copy)]
struct Lease {
    ticket: u64,
    until: Nanos,
}

/// What the lock guards: the rarely touched state of transitions and half-open.
struct Inner {
    /// One entry per probe slot; `None` is free, an expired lease may be taken over.
    leases: Vec<Option<Lease>>,
    probe_successes: u32,
    /// Consecutive reopenings from half-open, which double the cool-off.
    reopenings: u32,
    next_ticket: u64,
    rng: u64,
    /// Transitions not yet announced; bounded (see [`MAX_QUEUED`]).
    events: VecDeque<Transition>,
    dispatching: bool,
    /// While a fleet holds the gate, an open breaker whose cool-off ended stays open until
    /// the fleet grants a probe (see `fleet_gate`).
    gated: bool,
    granted: bool,
    /// `Stats` (successes, failures) when the breaker last closed: without a window, the
    /// failure rate a snapshot shows is the failed share of the calls since then.
    closed_at: (u64, u64),
}

impl Inner {
    /// A fleet gates this breaker and has not granted this instance the probe.
    fn fleet_holds_open(&self) -> bool {
        self.gated && !self.granted
    }
}

/// Consecutive failures, tagged with the (low 32 bits of the) generation they belong to, so
/// a late outcome from an older generation never touches the current streak.
const STREAK_COUNT: u64 = u32::MAX as u64;

/// Transitions queued for announcement at most: a hook that keeps a breaker flapping from
/// inside itself must not grow the queue without bound. Past it the oldest is dropped (and
/// said so in the log); the state itself is always right.
const MAX_QUEUED: usize = 1024;

fn streak_tag(generation: u64) -> u64 {
    (generation & STREAK_COUNT) << 32
}

pub struct Core {
    pub(crate) name: Name,
    pub(crate) policy: Policy,
    hook: Option<Hook>,
    word: AtomicU64,
    /// When the cool-off ends; meaningful while the word says `Open`.
    open_until: AtomicU64,
    streak: AtomicU64,
    ring: Option<Ring>,
    in_flight: AtomicU32,
    pub(crate) counters: Counters,
    inner: Mutex<Inner>,
    /// No `slow_call`, window or bulkhead: a closed call needs only the word, its stripe and
    /// the streak, and gives nothing back if dropped (the fast path, [`Core::enter`]).
    simple: bool,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core")
            .field("name", &self.name)
            .field("state", &self.peek())
            .finish_non_exhaustive()
    }
}

/// What admission hands an admitted call; its outcome is reported against it.
#[derive(Debug)]
pub struct Admission {
    generation: u64,
    probe: Option<Probe>,
    /// When the call started, if `slow_call` needs it.
    started: Option<Nanos>,
    /// Whether it holds a bulkhead slot.
    bulkhead: bool,
}

use crate::state::Word;

/// A call admitted on the fast path (closed, simple policy): its generation. `Send`, so an
/// async call's future can keep it while it moves between threads.
/// Dropping it unreported is a cancellation, which on this path has nothing to give back.
#[derive(Debug, Clone, Copy)]
pub struct Ticket {
    generation: u64,
}

/// A fast-path admission with the admitting thread's stripe: two words, kept in registers.
/// `!Send` (through [`Here`]): only the admitting thread can count its outcome on that
/// stripe ([`Core::succeed_here`]); a call that may move takes [`LocalTicket::ticket`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct LocalTicket {
    ticket: Ticket,
    here: Here,
}

impl LocalTicket {
    /// The ticket alone, for a call whose outcome may be reported on another thread.
    #[inline(always)]
    pub(crate) fn ticket(self) -> Ticket {
        self.ticket
    }
}

impl Core {
    pub(crate) fn new(name: Name, policy: Policy, hook: Option<Hook>) -> Core {
        let ring = policy.window.map(Ring::new);
        let probes = policy.probes as usize;
        let rng = seed(&name);
        Core {
            name,
            hook,
            word: AtomicU64::new(Word::INITIAL.0),
            open_until: AtomicU64::new(0),
            streak: AtomicU64::new(streak_tag(0)),
            ring,
            in_flight: AtomicU32::new(0),
            counters: Counters::new(),
            inner: Mutex::new(Inner {
                leases: vec![None; probes],
                probe_successes: 0,
                reopenings: 0,
                next_ticket: 1,
                rng,
                events: VecDeque::with_capacity(4),
                dispatching: false,
                gated: false,
                granted: false,
                closed_at: (0, 0),
            }),
            simple: policy.slow_call.is_none()
                && policy.window.is_none()
                && policy.max_concurrent.is_none(),
            policy,
        }
    }

    #[inline]
    fn word(&self) -> Word {
        Word(self.word.load(Acquire))
    }

    /// The closed fast path, inlined into the call wrappers: a closed breaker with a simple
    /// policy, called from a thread that owns a stats stripe, admits with one load of the
    /// word, one thread-local load and one plain count. `None`: try [`refuse`](Self::refuse).
    #[inline(always)]
    pub(crate) fn enter_closed(&self) -> Option<LocalTicket> {
        self.ticket(owned_here)
    }

    /// The open paths, inlined into the call wrappers: an open breaker refuses with one load
    /// of the word and one clock read; a forced-open one with no clock read. `None`: the
    /// breaker is not refusing outright; try [`enter_claiming`](Self::enter_claiming).
    #[inline(always)]
    pub(crate) fn refuse(&self, clock: &impl Clock) -> Option<BreakerError> {
        let w = self.word();
        if w.is(State::Open) {
            let now = clock.now();
            let until = self.open_until.load(Acquire);
            if now < until {
                return Some(self.reject(Some(until - now)));
            }
        } else if w.is(State::ForcedOpen) {
            return Some(self.reject(None));
        }
        None
    }

    /// The closed fast path for a thread that owns no stripe yet (its first count claims
    /// one) or shares one (counted with `fetch_add`): out of the inlined path, after
    /// [`enter_closed`](Self::enter_closed) and [`refuse`](Self::refuse) said neither. `None`:
    /// not closed with a simple policy; take [`admit`](Self::admit).
    pub(crate) fn enter_claiming(&self) -> Option<LocalTicket> {
        self.ticket(|| Some(here()))
    }

    /// Admission on the fast path: closed with a simple policy, counted on the stripe that
    /// `stripe` finds (looked up only then, so a refused call claims none).
    #[inline(always)]
    fn ticket(&self, stripe: impl FnOnce() -> Option<Here>) -> Option<LocalTicket> {
        let w = self.word();
        if !(w.is(State::Closed) && self.simple) {
            return None;
        }
        let here = stripe()?;
        self.counters.add_here(here, Count::Admitted);
        Some(LocalTicket {
            ticket: Ticket {
                generation: w.generation(),
            },
            here,
        })
    }

    /// A success on the fast path, on the thread that admitted the call (a blocking call):
    /// one count on the stripe the ticket names (plain if this thread owns it), and a load
    /// of the streak, written only when a streak of failures was running.
    #[inline]
    pub(crate) fn succeed_here(&self, admitted: LocalTicket, clock: &impl Clock) {
        self.counters.add_here(admitted.here, Count::Success);
        self.end_streak(admitted.ticket, clock);
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
    fn end_streak(&self, ticket: Ticket, clock: &impl Clock) {
        // No failure counted in any generation: nothing to reset.
        if self.streak.load(Relaxed) & STREAK_COUNT != 0 {
            self.finish_closed(ticket.generation, Outcome::Success, clock);
        }
    }

    #[inline]
    fn reject(&self, retry_in: Option<Nanos>) -> BreakerError {
        self.counters.add(Count::Rejected);
        BreakerError::open(&self.name, retry_in.map(Duration::from_nanos))
    }

    /// Admits a call or refuses it. The caller must report the outcome with
    /// [`finish`](Self::finish) exactly once (a [`Permit`] does).
    pub(crate) fn admit(&self, clock: &impl Clock) -> Result<Admission, BreakerError> {
        let w = self.word();
        let mut now = None;
        let (generation, probe) = match w.state() {
            State::Closed | State::Disabled => (w.generation(), None),
            State::ForcedOpen => return Err(self.reject(None)),
            State::Open => {
                let t = clock.now();
                let until = self.open_until.load(Acquire);
                if t < until {
                    return Err(self.reject(Some(until - t)));
                }
                now = Some(t);
                self.admit_half_open(t)?
            }
            State::HalfOpen => {
                let t = clock.now();
                now = Some(t);
                self.admit_half_open(t)?
            }
        };
        // A disabled breaker admits every call, past the bulkhead too.
        let bulkhead = self
            .policy
            .max_concurrent
            .filter(|_| !w.is(State::Disabled));
        if let Some(max) = bulkhead {
            // A compare-and-swap that never overshoots: `fetch_add` then undo would let two
            // racing calls at the limit both see it exceeded and both be refused.
            let taken = self
                .in_flight
                .fetch_update(Acquire, Relaxed, |n| (n < max).then_some(n + 1));
            if taken.is_err() {
                if let Some(p) = probe {
                    self.finish_probe(generation, p, Outcome::Cancelled, clock);
                }
                self.counters.add(Count::Rejected);
                return Err(BreakerError::Full {
                    name: self.name.clone(),
                    max_concurrent: max,
                });
            }
        }
        self.counters.add(Count::Admitted);
        let started = self
            .policy
            .slow_call
            .map(|_| now.unwrap_or_else(|| clock.now()));
        Ok(Admission {
            generation,
            probe,
            started,
            bulkhead: bulkhead.is_some(),
        })
    }

    /// Admission when the word said open (cool-off over) or half-open: under the lock,
    /// because it may start the half-open period and it hands out probe slots.
    #[inline(never)]
    fn admit_half_open(&self, now: Nanos) -> Result<(u64, Option<Probe>), BreakerError> {
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
        verdict.map_err(|retry_in| self.reject(retry_in))
    }

    /// Takes a free probe slot, or one whose lease ended (its holder hung: it loses the
    /// slot, and its late outcome will change nothing). Refused: the time until the
    /// earliest lease ends.
    fn claim_slot(&self, inner: &mut Inner, now: Nanos) -> Result<Probe, Option<Nanos>> {
        let free = inner
            .leases
            .iter()
            .position(|l| l.is_none_or(|l| l.until <= now));
        let Some(slot) = free else {
            let earliest = inner.leases.iter().flatten().map(|l| l.until).min();
            return Err(earliest.map(|until| until.saturating_sub(now)));
        };
        let ticket = inner.next_ticket;
        inner.next_ticket += 1;
        let until = now.saturating_add(self.policy.lease());
        inner.leases[slot] = Some(Lease { ticket, until });
        Ok(Probe {
            slot,
            ticket,
            until,
        })
    }

    /// Reports how an admitted call ended.
    pub(crate) fn finish(&self, admission: Admission, outcome: Outcome, clock: &impl Clock) {
        let outcome = match (admission.started, self.policy.slow_call) {
            (Some(started), Some(slow))
                if outcome != Outcome::Cancelled
                    && outcome != Outcome::Timeout
                    && clock.now().saturating_sub(started) >= slow =>
            {
                Outcome::Slow
            }
            _ => outcome,
        };
        let count = match outcome {
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
        if admission.bulkhead {
            self.in_flight.fetch_sub(1, Release);
        }
        match admission.probe {
            Some(p) => self.finish_probe(admission.generation, p, outcome, clock),
            None => self.finish_closed(admission.generation, outcome, clock),
        }
    }

    #[inline(never)]
    fn finish_closed(&self, generation: u64, outcome: Outcome, clock: &impl Clock) {
        let failed = outcome.is_failure();
        if !failed && outcome != Outcome::Success {
            return; // neutral or cancelled: counts for nothing, resets nothing
        }
        if let Outcome::OpenFor(open_for) = outcome {
            let cause = Cause::Verdict {
                open_for: Duration::from_nanos(open_for),
            };
            self.trip_for(generation, cause, Some(open_for), clock);
            return;
        }
        let tag = streak_tag(generation);
        if let Some(threshold) = self.policy.threshold {
            if failed {
                // Saturating: while disabled, failures keep counting and nothing trips; a
                // carry out of the count would land in the generation tag.
                let bumped = self.streak.fetch_update(AcqRel, Acquire, |s| {
                    (s & !STREAK_COUNT == tag && s & STREAK_COUNT != STREAK_COUNT).then_some(s + 1)
                });
                if let Ok(prev) = bumped {
                    let failures = (prev & STREAK_COUNT) as u32 + 1;
                    if failures == threshold {
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
        if let (Some(ring), Some(percent)) = (&self.ring, self.policy.failure_rate) {
            if self.word().generation() != generation {
                return; // a late outcome from an older state changes nothing
            }
            let now = if ring.needs_clock() { clock.now() } else { 0 };
            // The generation is checked again under the window's lock: a close between the
            // check above and this record restarted the window for the next generation.
            let Some(tally) = ring.record_in(generation, failed, now) else {
                return;
            };
            if tally.trips(self.policy.min_calls, percent) {
                let cause = Cause::FailureRate {
                    rate: tally.rate(),
                    calls: tally.calls,
                };
                self.trip(generation, cause, clock);
            }
        }
    }

    /// Opens a closed breaker, if it is still in the generation that saw the failures.
    fn trip(&self, generation: u64, cause: Cause, clock: &impl Clock) {
        self.trip_for(generation, cause, None, clock)
    }

    /// [`trip`](Self::trip), for `open_for` (clamped) instead of the cool-off when given.
    fn trip_for(&self, generation: u64, cause: Cause, open_for: Option<Nanos>, clock: &impl Clock) {
        let mut inner = lock(&self.inner);
        let w = self.word();
        if w != Word::new(State::Closed, generation) {
            return;
        }
        inner.reopenings = 0;
        self.transition_for(&mut inner, w, State::Open, cause, clock.now(), open_for);
        drop(inner);
        self.dispatch();
    }

    fn finish_probe(&self, generation: u64, probe: Probe, outcome: Outcome, clock: &impl Clock) {
        let mut inner = lock(&self.inner);
        let lease = &mut inner.leases[probe.slot];
        if lease.map(|l| l.ticket) == Some(probe.ticket) {
            *lease = None;
        } else if outcome != Outcome::Timeout
            && (outcome == Outcome::Cancelled || clock.now() > probe.until)
        {
            // Its lease ended and another call took the slot: a late result changes nothing.
            return;
        }
        // Else the slot was taken over at the very instant the lease ended, or the result is
        // a timeout. A probe whose timeout is its lease reports when tokio's timer fires,
        // which is at the next millisecond or later; a call arriving in between takes the
        // slot over. Dropping the timeout then would leave a hanging dependency half-open
        // forever under steady traffic, with the backoff never growing (review M3), so a
        // timed-out probe always reopens the breaker of its generation.
        let w = self.word();
        if w != Word::new(State::HalfOpen, generation) {
            return;
        }
        let moved = match outcome {
            Outcome::Success => {
                inner.probe_successes += 1;
                let successes = inner.probe_successes;
                if successes >= self.policy.success_threshold {
                    let cause = Cause::ProbesSucceeded { successes };
                    self.transition(&mut inner, w, State::Closed, cause, 0);
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
                self.transition_for(&mut inner, w, State::Open, cause, now, Some(open_for));
                true
            }
            Outcome::Neutral | Outcome::Cancelled => false,
        };
        drop(inner);
        if moved {
            self.dispatch();
        }
    }

    /// Moves the word from `from` to `to` and prepares what `to` needs; queues the event.
    /// Must hold the lock, with `from` the word read under it.
    fn transition(
        &self,
        inner: &mut Inner,
        from: Word,
        to: State,
        cause: Cause,
        now: Nanos,
    ) -> Word {
        self.transition_for(inner, from, to, cause, now, None)
    }

    /// [`transition`](Self::transition); an opening lasts `open_for` (clamped to at least the
    /// cool-off, at most `max_cool_off` or one hour) when given, without jitter: the
    /// dependency named the time.
    fn transition_for(
        &self,
        inner: &mut Inner,
        from: Word,
        to: State,
        cause: Cause,
        now: Nanos,
        open_for: Option<Nanos>,
    ) -> Word {
        let next = from.next(to);
        let mut cool_off = None;
        for lease in inner.leases.iter_mut() {
            *lease = None;
        }
        inner.probe_successes = 0;
        inner.granted = false;
        match to {
            State::Open => {
                let total = match open_for {
                    Some(asked) => self.clamp_open_for(asked),
                    None => {
                        let base = self.policy.cool_off_after(inner.reopenings);
                        let jitter = match self.policy.jitter {
                            0 => 0,
                            j => next_random(&mut inner.rng) % j.saturating_add(1),
                        };
                        base.saturating_add(jitter)
                    }
                };
                cool_off = Some(Duration::from_nanos(total));
                self.open_until.store(now.saturating_add(total), Release);
            }
            State::Closed | State::Disabled => {
                inner.reopenings = 0;
                self.streak.store(streak_tag(next.generation()), Release);
                match &self.ring {
                    Some(ring) => ring.restart(next.generation()),
                    None => {
                        let stats = self.counters.read();
                        inner.closed_at = (stats.successes, stats.failures);
                    }
                }
            }
            State::HalfOpen | State::ForcedOpen => {}
        }
        self.word.store(next.0, Release);
        if from.state() != to || open_for.is_some() {
            if inner.events.len() >= MAX_QUEUED {
                inner.events.pop_front();
            }
            inner.events.push_back(Transition {
                name: self.name.clone(),
                from: from.state(),
                to,
                generation: next.generation(),
                cause,
                cool_off,
            });
        }
        next
    }

    /// Announces queued transitions: one dispatcher at a time, in queue order, outside the
    /// lock. A hook that calls back into the breaker only queues; the loop delivers it.
    fn dispatch(&self) {
        let mut inner = lock(&self.inner);
        if inner.dispatching {
            return;
        }
        inner.dispatching = true;
        drop(inner);
        // Whatever happens below (a subscriber that panics while logging the panic of a
        // hook), the next transition finds a dispatcher again.
        let _guard = Dispatching(self);
        loop {
            let Some(t) = lock(&self.inner).events.pop_front() else {
                return;
            };
            self.announce(&t);
        }
    }

    fn announce(&self, t: &Transition) {
        let delivered = std::panic::catch_unwind(AssertUnwindSafe(|| {
            events::log(t);
            if let Some(hook) = &self.hook {
                hook(t);
            }
        }));
        if let Err(panic) = delivered {
            // Logged under `catch_unwind` too: the subscriber may be what panicked.
            let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
                let what = panic
                    .downcast_ref::<&str>()
                    .copied()
                    .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                    .unwrap_or("a non-string panic");
                tracing::error!(
                    target: "breaker",
                    breaker = self.name.as_str(),
                    "on_state_change hook panicked: {what}; the breaker goes on"
                );
            }));
        }
        events::notify_observers(t);
    }

    /// The state, moving an open breaker whose cool-off ended to half-open (one event).
    pub(crate) fn state(&self, clock: &impl Clock) -> State {
        let w = self.word();
        if w.state() != State::Open {
            return w.state();
        }
        let now = clock.now();
        if now < self.open_until.load(Acquire) {
            return State::Open;
        }
        let mut inner = lock(&self.inner);
        let w = self.word();
        // A fleet's gate holds it open, as in `admit_half_open`.
        let moved = w.state() == State::Open
            && now >= self.open_until.load(Acquire)
            && !inner.fleet_holds_open();
        let state = if moved {
            self.transition(&mut inner, w, State::HalfOpen, Cause::CoolOffElapsed, now)
                .state()
        } else {
            w.state()
        };
        drop(inner);
        if moved {
            self.dispatch();
        }
        state
    }

    /// How long until a call is admitted: the cool-off left when open; the earliest lease's
    /// end when half-open with every slot taken; `None` otherwise (and when forced open).
    pub(crate) fn retry_in(&self, clock: &impl Clock) -> Option<Duration> {
        let now = clock.now();
        let left = match self.state(clock) {
            State::Open => Some(self.open_until.load(Acquire).saturating_sub(now)),
            State::HalfOpen => {
                let inner = lock(&self.inner);
                let mut leases = inner.leases.iter();
                if leases.all(|l| l.is_some_and(|l| l.until > now)) {
                    inner.leases.iter().flatten().map(|l| l.until - now).min()
                } else {
                    None
                }
            }
            State::Closed | State::Disabled | State::ForcedOpen => None,
        };
        left.map(Duration::from_nanos)
    }

    /// The failed share of the current window in percent, 0 when empty. Without a window
    /// (`failure_rate` not set), the calls since the breaker last closed serve as the window:
    /// the counts it keeps anyway, so the closed path pays nothing for it.
    pub(crate) fn failure_rate(&self, clock: &impl Clock) -> f64 {
        let tally = match &self.ring {
            Some(ring) => ring.tally(if ring.needs_clock() { clock.now() } else { 0 }),
            None => {
                let (successes, failures) = lock(&self.inner).closed_at;
                let now = self.counters.read();
                let failures = now.failures.saturating_sub(failures);
                Tally {
                    calls: now.successes.saturating_sub(successes) + failures,
                    failures,
                }
            }
        };
        tally.rate()
    }

    /// Manual control: `force_open`, `disable` or `reset` (to `Closed`, counts cleared).
    pub(crate) fn set(&self, to: State, clock: &impl Clock) {
        let mut inner = lock(&self.inner);
        let w = self.word();
        if to == State::Closed {
            self.counters.clear();
        } else if w.state() == to {
            return;
        }
        self.transition(&mut inner, w, to, Cause::Manual, clock.now());
        drop(inner);
        self.dispatch();
    }

    /// How long an [`Outcome::OpenFor`] opens: at least the cool-off; at most `max_cool_off`
    /// when set, else one hour (a `Retry-After` of a year must not park a breaker for good).
    fn clamp_open_for(&self, asked: Nanos) -> Nanos {
        const HOUR: Nanos = 3_600_000_000_000;
        asked
            .min(self.policy.max_cool_off.unwrap_or(HOUR))
            .max(self.policy.cool_off)
    }

    /// Fleet: opens now for `open_for` (another instance opened), from closed or half-open.
    /// Forced-open and disabled breakers are the operator's: left alone.
    pub(crate) fn fleet_open(&self, open_for: Nanos, clock: &impl Clock) {
        let mut inner = lock(&self.inner);
        let w = self.word();
        let now = clock.now();
        let moved = match w.state() {
            State::Closed | State::HalfOpen => true,
            // Already open: stay open at least as long as the fleet says.
            State::Open => {
                let until = now.saturating_add(open_for);
                if until > self.open_until.load(Acquire) {
                    self.open_until.store(until, Release);
                }
                false
            }
            State::ForcedOpen | State::Disabled => false,
        };
        if moved {
            self.transition(&mut inner, w, State::Open, Cause::Fleet, now);
            // The fleet's time, not this instance's cool-off.
            self.open_until.store(now.saturating_add(open_for), Release);
            if let Some(last) = inner.events.back_mut() {
                last.cool_off = Some(Duration::from_nanos(open_for));
            }
        }
        drop(inner);
        if moved {
            self.dispatch();
        }
    }

    /// Fleet: closes an open or half-open breaker (the fleet's probe succeeded).
    pub(crate) fn fleet_close(&self, clock: &impl Clock) {
        let mut inner = lock(&self.inner);
        let w = self.word();
        let moved = matches!(w.state(), State::Open | State::HalfOpen);
        if moved {
            self.transition(&mut inner, w, State::Closed, Cause::Fleet, clock.now());
        }
        drop(inner);
        if moved {
            self.dispatch();
        }
    }

    /// Fleet: while `on`, an open breaker whose cool-off ended stays open until
    /// [`fleet_grant_probe`](Self::fleet_grant_probe): one instance of the fleet probes.
    pub(crate) fn fleet_gate(&self, on: bool) {
        let mut inner = lock(&self.inner);
        inner.gated = on;
        // Gated anew: a grant not yet used is taken back (the fleet's probe lease lapsed).
        inner.granted = false;
    }

    /// Fleet: the next call after the cool-off may become a probe (this instance holds the
    /// fleet's probe lease). Cleared by the next transition.
    pub(crate) fn fleet_grant_probe(&self) {
        lock(&self.inner).granted = true;
    }

    /// The state as stored, without moving an open breaker to half-open.
    pub(crate) fn peek(&self) -> State {
        self.word().state()
    }

    /// Calls in flight under the bulkhead (0 without one).
    #[cfg(test)]
    pub(crate) fn in_flight(&self) -> u32 {
        self.in_flight.load(Acquire)
    }

    /// Probe slots currently held.
    #[cfg(test)]
    pub(crate) fn probes_held(&self) -> usize {
        lock(&self.inner).leases.iter().flatten().count()
    }

    /// Indistinguishable from a fresh breaker: closed, no failure streak, no failure in its
    /// window, nothing in flight under the bulkhead or as a probe. A keyed breaker evicts
    /// these first (governor's rule: only drop state a new breaker would have anyway).
    pub(crate) fn is_fresh(&self, clock: &impl Clock) -> bool {
        let w = self.word();
        if !w.is(State::Closed) {
            return false;
        }
        if self.streak.load(Acquire) & STREAK_COUNT != 0 || self.in_flight.load(Acquire) != 0 {
            return false;
        }
        match &self.ring {
            Some(ring) => {
                let now = if ring.needs_clock() { clock.now() } else { 0 };
                ring.tally(now).failures == 0
            }
            None => true,
        }
    }
}

/// Clears `dispatching` when the dispatcher stops, by return or by unwinding.
struct Dispatching<'a>(&'a Core);

impl Drop for Dispatching<'_> {
    fn drop(&mut self) {
        let mut inner = lock(&self.0.inner);
        inner.dispatching = false;
        let more = !inner.events.is_empty();
        drop(inner);
        if more && !std::thread::panicking() {
            // Queued between our last pop and the flag's reset: deliver them now.
            self.0.dispatch();
        }
    }
}

/// What a [`Permit`] reports to: a core and its clock, borrowed or owned (an owned call
/// future holds its breaker). Nominally public so the call future can name it in its bounds;
/// its module is private.
pub trait Engine {
    /// The clock.
    type Clock: Clock;
    /// The engine.
    fn core(&self) -> &Core;
    /// Its clock.
    fn clock(&self) -> &Self::Clock;
}

impl<C: Clock> Engine for (&Core, &C) {
    type Clock = C;
    #[inline(always)]
    fn core(&self) -> &Core {
        self.0
    }
    #[inline(always)]
    fn clock(&self) -> &C {
        self.1
    }
}

/// An admitted call's right to report: reports `Cancelled` if dropped unreported, so a
/// dropped future gives back its probe and bulkhead slots and records nothing.
pub struct Permit<H: Engine> {
    host: H,
    admission: Option<Admission>,
}

impl<'a, C: Clock> Permit<(&'a Core, &'a C)> {
    #[cfg(test)]
    pub(crate) fn acquire(core: &'a Core, clock: &'a C) -> Result<Self, BreakerError> {
        Permit::acquire_in((core, clock))
    }

    /// The permit of a call admitted on the fast path, for the outcomes that are no success.
    #[cfg(test)]
    pub(crate) fn from_ticket(core: &'a Core, clock: &'a C, ticket: Ticket) -> Self {
        Permit::from_ticket_in((core, clock), ticket)
    }
}

impl<H: Engine> Permit<H> {
    pub(crate) fn acquire_in(host: H) -> Result<Self, BreakerError> {
        let admission = host.core().admit(host.clock())?;
        Ok(Permit {
            host,
            admission: Some(admission),
        })
    }

    pub(crate) fn from_ticket_in(host: H, ticket: Ticket) -> Self {
        let admission = Admission {
            generation: ticket.generation,
            probe: None,
            started: None,
            bulkhead: false,
        };
        Permit {
            host,
            admission: Some(admission),
        }
    }

    /// The breaker's name.
    pub(crate) fn name(&self) -> &Name {
        &self.host.core().name
    }

    pub(crate) fn finish(mut self, outcome: Outcome) {
        if let Some(a) = self.admission.take() {
            self.host.core().finish(a, outcome, self.host.clock());
        }
    }
}

impl<H: Engine> Drop for Permit<H> {
    // Out of line: keeps the drop glue of a call future (which holds a permit) small
    // enough to inline where the call was on the fast path.
    #[inline(never)]
    fn drop(&mut self) {
        if let Some(a) = self.admission.take() {
            self.host
                .core()
                .finish(a, Outcome::Cancelled, self.host.clock());
        }
    }
}

/// A per-breaker seed for jitter: std's `RandomState` is keyed from the OS once per thread,
/// which is all the randomness jitter needs (no crate for ten lines).
fn seed(name: &str) -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(name) | 1
}

/// splitmix64: fast, well distributed, good enough to spread a fleet's probes.
fn next_random(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(all(test, not(breaker_loom)))]
mod tests {
    use super::*;
    use crate::{clock::FakeClock, Config};

    const MS: u64 = 1_000_000;

    fn core(config: Config) -> Core {
        Core::new("core::tests".into(), config.validate().unwrap(), None)
    }

    /// Review M3: tokio fires a timeout at the next millisecond or later, after the probe's
    /// lease (admission + timeout) ended; a call in that gap takes the slot over. The
    /// probe's timeout must still reopen the breaker, or a hanging dependency under steady
    /// traffic keeps it half-open for good and the backoff never grows.
    #[test]
    fn a_timed_out_probe_reopens_even_when_its_slot_was_taken_over() {
        let c = core(
            Config::default()
                .threshold(1)
                .cool_off(Duration::from_millis(10))
                .max_cool_off(Duration::from_secs(1))
                .timeout(Duration::from_millis(5)),
        );
        let clock = FakeClock::default();
        Permit::acquire(&c, &clock)
            .unwrap()
            .finish(Outcome::Failure);
        assert_eq!(c.peek(), State::Open);
        clock.0.set(10 * MS);
        let hung = Permit::acquire(&c, &clock).expect("the probe");
        assert_eq!(c.peek(), State::HalfOpen);
        clock.0.set(15 * MS + 1); // the lease ended; the timer has not fired yet
        let next = Permit::acquire(&c, &clock).expect("takes the expired slot over");
        hung.finish(Outcome::Timeout); // the timer fires
        assert_eq!(c.peek(), State::Open, "the timed-out probe reopened it");
        // And the cool-off doubled (10 ms, then 20 ms).
        assert_eq!(c.open_until.load(Acquire), 15 * MS + 1 + 20 * MS);
        next.finish(Outcome::Success); // from the old generation: changes nothing
        assert_eq!(c.peek(), State::Open);
    }

    /// A cancelled probe whose slot was taken over is late, and changes nothing.
    #[test]
    fn a_late_cancellation_changes_nothing() {
        let c = core(
            Config::default()
                .threshold(1)
                .cool_off(Duration::from_millis(10)),
        );
        let clock = FakeClock::default();
        Permit::acquire(&c, &clock)
            .unwrap()
            .finish(Outcome::Failure);
        clock.0.set(10 * MS);
        let hung = Permit::acquire(&c, &clock).unwrap();
        clock.0.set(21 * MS); // lease = cool-off when there is no timeout
        let next = Permit::acquire(&c, &clock).unwrap();
        drop(hung);
        assert_eq!(c.peek(), State::HalfOpen);
        next.finish(Outcome::Success);
        assert_eq!(c.peek(), State::Closed);
    }

    /// Review: while disabled, failures keep counting and nothing trips; the streak must
    /// saturate rather than carry into the generation tag.
    #[test]
    fn the_failure_streak_saturates() {
        let c = core(Config::default().threshold(3));
        let clock = FakeClock::default();
        c.set(State::Disabled, &clock);
        let generation = c.word().generation();
        c.streak
            .store(streak_tag(generation) | (STREAK_COUNT - 1), Relaxed);
        for _ in 0..3 {
            c.finish_closed(generation, Outcome::Failure, &clock);
        }
        assert_eq!(
            c.streak.load(Relaxed),
            streak_tag(generation) | STREAK_COUNT
        );
        assert_eq!(c.peek(), State::Disabled);
    }

    /// Review: a subscriber that panics while the dispatcher logs a hook's panic left
    /// `dispatching` set, so hooks fell silent for good. The flag is reset on unwind.
    #[test]
    fn the_dispatcher_recovers_from_a_panic_outside_catch_unwind() {
        use std::sync::{
            atomic::{AtomicUsize, Ordering::SeqCst},
            Arc,
        };
        let calls = Arc::new(AtomicUsize::new(0));
        let seen = calls.clone();
        let config = Config::default().on_state_change(move |_| {
            seen.fetch_add(1, SeqCst);
        });
        let c = core(config.clone());
        let c = Core {
            hook: config.on_state_change.clone(),
            ..c
        };
        let clock = FakeClock::default();
        // Simulate a dispatcher that unwound: the guard must clear the flag.
        {
            let _guard = Dispatching(&c);
            lock(&c.inner).dispatching = true;
        }
        assert!(!lock(&c.inner).dispatching);
        c.set(State::ForcedOpen, &clock);
        assert_eq!(calls.load(SeqCst), 1, "hooks still run");
    }
}
