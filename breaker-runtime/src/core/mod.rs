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
//!
//! | module | what it holds |
//! | --- | --- |
//! | this one | [`Core`] and its packed fields |
//! | `admission` | what admission hands an admitted call: [`Ticket`], [`Admission`] (packed in 24 bytes and a flag byte) |
//! | `closed` | the closed path: fast admission, refusal while open, successes, the failure streak, tripping |
//! | `half_open` | full admission, probe slots and their leases, how a probe's outcome decides |
//! | `transition` | moving the word, what each state needs on entry, reading the state, manual control |
//! | `fleet` | the hooks a fleet drives: open, close, hold open, grant the probe |
//! | `dispatch` | announcing queued transitions outside the lock, in order, one dispatcher at a time; waking who waits for a change |
//! | `permit` | what an admitted call reports to ([`Engine`]), and the engine's tests' `Permit`: an admitted call's duty to report |
//! | `jitter` | the random extra on a cool-off |
//! | `probe` | the breaker's own probe, engine side: what the probe task may do next ([`probe::Turn`]) |
//! | `shed` | overload in the engine: ramp, throttle, adaptive bulkhead and dry run at admission and outcome |
//! | `open_cap` | a keyed breaker's cap on its open keys (`max_open_percent`) |
//! | `tests` | unit tests of the engine |
//!
//! Words, one meaning each: a *ticket* is a fast-path admission; a probe *slot* is one of
//! `probes` places in half-open, held under a *lease* (a `Hold`: the lease's id and its end;
//! named apart from the fleet's probe lease, the fleet-wide right to probe); a *stripe* is a
//! thread's share of the stats counters; a *permit* is an admitted call's duty to report
//! (the adaptive limit's place is a *seat*).

use std::{collections::VecDeque, sync::OnceLock};

use once_cell::race::OnceBox;

use crate::{
    clock::{Clock, Nanos},
    config::Policy,
    events::Transition,
    live::Live,
    state::Word,
    stats::{Counters, Counting, Here},
    sync::{AtomicU32, AtomicU64, AtomicU8, Mutex, Ordering::*},
    window::Ring,
    Name, State, Verdict,
};

mod admission;
mod closed;
mod dispatch;
pub(crate) mod fleet;
mod half_open;
mod jitter;
mod open_cap;
mod permit;
pub(crate) mod probe;
mod shed;
#[cfg(all(test, not(breaker_loom)))]
mod tests;
mod transition;

pub(crate) use open_cap::{OpenBudget, OpenCap};
pub use permit::Engine;
#[cfg(test)]
pub(crate) use permit::Permit;
#[cfg(test)]
pub(crate) use shed::limit_sample;

pub(crate) use admission::LocalTicket;
pub use admission::{Admission, Held, Ticket};
use admission::{BULKHEAD, PROBE, SHADOW, STARTED};
use half_open::Hold;
use shed::Overload;

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

/// What the lock guards: the rarely touched state of transitions and half-open.
struct Inner {
    /// One entry per probe slot; `None` is free, an expired lease may be taken over.
    leases: Vec<Option<Hold>>,
    probe_successes: u32,
    /// Consecutive reopenings from half-open, which double the cool-off.
    reopenings: u32,
    /// The id of the next probe lease.
    next_lease: u64,
    rng: u64,
    /// Transitions not yet announced; bounded (see [`MAX_QUEUED`]).
    events: VecDeque<Transition>,
    dispatching: bool,
    /// While a fleet holds the gate, an open breaker whose cool-off ended stays open until
    /// the fleet grants a probe (see `fleet_gate`).
    gated: bool,
    granted: bool,
    /// A call was refused by the gate since the fleet last gated or granted: told once.
    wanted: bool,
    /// The breaker's own open end in the generation the fleet last touched: a fleet's open
    /// time may shorten what the fleet added, never the breaker's own cool-off.
    fleet_floor: (u64, Nanos),
    /// The fleet's link to this member, dropped with the breaker (the member leaves).
    fleet: Option<Box<dyn fleet::FleetLink>>,
    /// The breaker's own probe task, while one runs (`crate::probe`): at most one. Dropped
    /// with the breaker, which tells the task to stop.
    probe_task: Option<probe::Task>,
    /// `Stats` (successes, failures) when the breaker last closed: without a window, the
    /// failure rate a snapshot shows is the failed share of the calls since then.
    closed_at: (u64, u64),
}

impl Inner {
    fn new() -> Inner {
        Inner {
            leases: Vec::new(), // made at the first probe
            probe_successes: 0,
            reopenings: 0,
            next_lease: 1,
            rng: jitter::seed(""), // a fresh random seed per breaker, name or not
            events: VecDeque::new(),
            dispatching: false,
            gated: false,
            granted: false,
            wanted: false,
            fleet_floor: (u64::MAX, 0),
            fleet: None,
            probe_task: None,
            closed_at: (0, 0),
        }
    }

    /// A fleet gates this breaker and has not granted this instance the probe.
    fn fleet_holds_open(&self) -> bool {
        self.gated && !self.granted
    }
}

/// What a breaker needs only once something happened to it, made at its first use (a
/// transition, a probe, a manual or a fleet command): [`Inner`] behind its lock, the
/// refusals' copies of the name, the counts' base at the last reset. A breaker that only
/// ever stays closed (most keys of a keyed breaker) never makes it, which keeps about 160
/// bytes off each such breaker. `lock(&self.inner)` reaches `Inner` through `Deref`
/// (its `Lock` below).
struct LazyInner(OnceBox<Cold>);

struct Cold {
    inner: Mutex<Inner>,
    /// Copies of the name for refusals to carry, made when the breaker first opens: each
    /// thread takes the one its stripe picks, so threads refused at once do not all count
    /// references on the one cache line of `name`.
    refusal_names: OnceLock<Box<[Name; NAME_COPIES]>>,
    /// The counts at the last `reset()` (`None`: never reset); [`Core::stats`] counts from
    /// there.
    base: Mutex<Option<crate::Stats>>,
    /// Starts the breaker's own probe at each opening (`Config::probe`).
    prober: OnceLock<probe::Prober>,
    /// Told of every change that may make the breaker admit (`dispatch`'s `wake_waiters`):
    /// made by the first who waits for one (`ready_when_closed`).
    changes: OnceLock<std::sync::Arc<tokio::sync::Notify>>,
}

impl std::ops::Deref for LazyInner {
    type Target = Mutex<Inner>;
    fn deref(&self) -> &Mutex<Inner> {
        &self.cold().inner
    }
}

/// `lock(&self.inner)` takes the lock behind the lazy part, as it would a plain mutex.
impl crate::sync::Lock for LazyInner {
    type Guard<'a> = crate::sync::MutexGuard<'a, Inner>;
    #[inline]
    fn lock_ignoring_poison(&self) -> Self::Guard<'_> {
        crate::sync::lock(&**self)
    }
}

impl LazyInner {
    fn cold(&self) -> &Cold {
        self.0.get_or_init(|| {
            Box::new(Cold {
                inner: Mutex::new(Inner::new()),
                refusal_names: OnceLock::new(),
                base: Mutex::new(None),
                prober: OnceLock::new(),
                changes: OnceLock::new(),
            })
        })
    }

    /// The cold part, if made.
    #[inline(always)]
    fn made(&self) -> Option<&Cold> {
        self.0.get()
    }

    /// `Stats` (successes, failures) when the breaker last closed, without making `Inner`
    /// (a breaker that never transitioned closed at zero).
    pub(super) fn closed_at(&self) -> (u64, u64) {
        self.0
            .get()
            .map_or((0, 0), |cold| crate::sync::lock(&cold.inner).closed_at)
    }
}

/// Consecutive failures, tagged with the (low 32 bits of the) generation they belong to, so
/// a late outcome from an older generation never touches the current streak.
const STREAK_COUNT: u64 = u32::MAX as u64;

/// Transitions queued for announcement at most: a hook that keeps a breaker flapping from
/// inside itself must not grow the queue without bound. Past it the oldest is dropped (and
/// said so in the log); the state itself is always right.
const MAX_QUEUED: usize = 1024;

/// Copies of the name an open breaker hands out (see `Core::refusal_name`): threads on
/// stripes `i` and `j` share one only when `i ≡ j (mod 8)`.
const NAME_COPIES: usize = 8;

fn streak_tag(generation: u64) -> u64 {
    (generation & STREAK_COUNT) << 32
}

pub struct Core {
    pub(crate) name: Name,
    /// Its configuration as it runs (the call path's settings as atomics, the validated
    /// configuration in force for transitions and hooks; what `get_or_create` compares),
    /// shared by a keyed breaker's keys; changed by `reconfigure` (`crate::reconfigure`).
    pub(crate) live: std::sync::Arc<Live>,
    word: AtomicU64,
    /// When the cool-off ends; meaningful while the word says `Open`.
    open_until: AtomicU64,
    streak: AtomicU64,
    /// Boxed: most breakers have no window, and a keyed breaker's keys are many. Made when
    /// a window is first configured (at creation or by `reconfigure`), then kept.
    ring: OnceBox<Ring>,
    in_flight: AtomicU32,
    pub(crate) counters: Counters,
    /// Made at its first use (see [`LazyInner`]).
    inner: LazyInner,
    /// A keyed breaker's cap on its open keys (`max_open_percent`).
    cap: Option<OpenCap>,
    /// Throttling, the ramp, the adaptive bulkhead, dry run: empty (one pointer) without;
    /// made when first needed (at creation, or when `reconfigure` turns a dry run on).
    overload: OnceBox<Overload>,
    /// What the call path asks of the policy, beside the word: [`SIMPLE`] (no `slow_call`,
    /// window, bulkhead or overload key: a closed call needs only the word, its stripe and
    /// the streak, and gives nothing back if dropped: the fast path, [`Core::enter_closed`]),
    /// [`TIMED`] (a `timeout`) and [`DRY`] (a dry run: a refusal's test). One byte of the
    /// breaker's own, read with the word, not behind the live pointer; set by
    /// [`Core::adopt`] after what a policy that is not simple needs is in place.
    flags: AtomicU8,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core")
            .field("name", &self.name)
            .field("state", &self.peek())
            .finish_non_exhaustive()
    }
}

impl Core {
    pub(crate) fn new(name: Name, live: std::sync::Arc<Live>) -> Core {
        let settings = live.resolved();
        let policy = &settings.policy;
        let ring = OnceBox::new();
        if let Some(w) = policy.window {
            let _ = ring.set(Box::new(Ring::new(w)));
        }
        let overload = OnceBox::new();
        if let Some(o) = Overload::new(&policy.overload) {
            let _ = overload.set(o);
        }
        Core {
            name,
            word: AtomicU64::new(Word::INITIAL.0),
            open_until: AtomicU64::new(0),
            streak: AtomicU64::new(streak_tag(0)),
            ring,
            in_flight: AtomicU32::new(0),
            counters: Counters::new(),
            inner: LazyInner(OnceBox::new()),
            cap: None,
            overload,
            flags: AtomicU8::new(flags(policy)),
            live,
        }
    }

    /// Puts a new policy's parts in place (`reconfigure`, after [`Live`] holds it): the
    /// window reshaped (or made, for the current generation), the overload part made if a
    /// dry run needs it, then the fast path's flag. State, counts and deadlines are kept.
    pub(crate) fn adopt(&self, policy: &Policy) {
        match (policy.window, self.ring.get()) {
            // Off: emptied, so turned on again it does not judge outcomes from before.
            // Under the lock, as below: a transition restarting it meanwhile would be undone.
            (None, Some(ring)) => {
                let _inner = crate::sync::lock(&self.inner);
                ring.restart(self.word().generation());
            }
            (None, None) => {}
            (Some(w), ring) => match ring {
                Some(ring) => ring.reshape(w),
                None => {
                    // Under the lock: no transition restarts the window meanwhile, so it
                    // counts for the generation in force.
                    let _inner = crate::sync::lock(&self.inner);
                    let ring = Ring::new(w);
                    ring.restart(self.word().generation());
                    let _ = self.ring.set(Box::new(ring));
                }
            },
        }
        if policy.overload.any() {
            self.overload
                .get_or_init(|| Overload::build(&policy.overload));
        }
        // `WATCHED` is the gate's, not the policy's: kept as it is.
        let _ = self
            .flags
            .fetch_update(Release, Relaxed, |f| Some((f & WATCHED) | flags(policy)));
        self.wake_waiters(); // a dry run admits: whoever waits looks again
    }

    /// The window, if one was ever configured (it may be off now: see `Live::window`).
    #[inline(always)]
    fn ring(&self) -> Option<&Ring> {
        self.ring.get()
    }

    /// The overload part, if made.
    #[inline(always)]
    fn overload(&self) -> Option<&Overload> {
        self.overload.get()
    }

    /// Caps this key's opening by its keyed breaker's budget.
    pub(crate) fn with_cap(mut self, cap: Option<OpenCap>) -> Core {
        self.cap = cap;
        self
    }

    /// Whether this breaker may open now (`max_open_percent`); always without a cap.
    fn may_open(&self) -> bool {
        self.cap.as_ref().is_none_or(|c| c.take(&self.name))
    }

    /// This key left its keyed breaker's map: it no longer counts for the cap, open or not.
    pub(crate) fn detach(&self) {
        if let Some(cap) = &self.cap {
            cap.detach();
        }
    }

    /// Under manual control (forced open or disabled): a keyed breaker never evicts it.
    pub(crate) fn is_manual(&self) -> bool {
        matches!(self.peek(), State::ForcedOpen | State::Disabled)
    }

    /// This breaker no longer counts as open for its keyed breaker's cap.
    fn left_open(&self) {
        if let Some(cap) = &self.cap {
            cap.give();
        }
    }

    #[inline]
    fn word(&self) -> Word {
        Word(self.word.load(Acquire))
    }

    /// Its counts: the stripes', with what overload counts on its own.
    pub(crate) fn stats(&self) -> crate::Stats {
        let base = self
            .inner
            .made()
            .and_then(|cold| *crate::sync::lock(&cold.base));
        let mut stats = self.counters.since(base.as_ref());
        if let Some(o) = self.overload() {
            (stats.throttled, stats.shadow_rejected) = o.counts();
            // A shadow is a call, counted by the overload part only.
            stats.calls = stats.calls.wrapping_add(stats.shadow_rejected);
        }
        stats
    }

    /// Its counts since creation, resets included (`Handle::counted`): the stripes' without
    /// the reset's base, the overload part's totals.
    pub(crate) fn counted(&self) -> crate::Stats {
        let mut stats = self.counters.since(None);
        if let Some(o) = self.overload() {
            (stats.throttled, stats.shadow_rejected) = o.totals();
            stats.calls = stats.calls.wrapping_add(stats.shadow_rejected);
        }
        stats
    }

    /// Calls admitted and not yet finished, shadows of a dry run included: what a keyed
    /// breaker reads to judge a key evictable.
    pub(crate) fn calls_in_flight(&self) -> u64 {
        let shadows = self.overload().map_or(0, Overload::shadows);
        self.counters.in_flight().saturating_add(shadows)
    }

    /// The percentage of calls being shed now by throttling or a ramp (0 without either, or
    /// when not closed).
    pub(crate) fn throttle_rate(&self, clock: &impl Clock) -> f64 {
        match self.overload() {
            Some(o) if o.needs_clock() && self.peek() == State::Closed => o.rate(clock.now()),
            _ => 0.0,
        }
    }

    /// The bulkhead's limit now: the fixed one, or the adaptive one; `None` without either.
    pub(crate) fn concurrency_limit(&self) -> Option<u32> {
        self.live
            .max_concurrent()
            .or_else(|| self.overload().and_then(Overload::limit))
    }

    /// Whether this breaker only pretends to refuse (`dry_run`).
    pub(crate) fn dry_run(&self) -> bool {
        self.live.dry_run()
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
        crate::sync::lock(&self.inner)
            .leases
            .iter()
            .flatten()
            .count()
    }

    /// Indistinguishable from a fresh breaker: closed, no failure streak, no failure in its
    /// window, nothing in flight under the bulkhead or as a probe, no overload state (not
    /// throttling nor ramping, the adaptive limit at its start). A keyed breaker evicts
    /// these first (governor's rule: only drop state a new breaker would have anyway), if
    /// their retry budget (the breaker's, not the engine's) is full too.
    pub(crate) fn is_fresh(&self, clock: &impl Clock) -> bool {
        let w = self.word();
        if !w.is(State::Closed) {
            return false;
        }
        if self.streak.load(Acquire) & STREAK_COUNT != 0 || self.in_flight.load(Acquire) != 0 {
            return false;
        }
        if let Some(o) = self.overload() {
            let now = if o.needs_clock() { clock.now() } else { 0 };
            if !o.is_fresh(now) {
                return false;
            }
        }
        match (self.ring(), self.live.window()) {
            (Some(ring), Some(_)) => ring.tally_at(|| clock.now()).failures == 0,
            _ => true,
        }
    }
}

/// [`Core::flags`]: the policy lets a closed call take the fast path (no `slow_call`,
/// window, bulkhead or overload key).
const SIMPLE: u8 = 1;
/// [`Core::flags`]: calls have a deadline (`timeout`).
const TIMED: u8 = 2;
/// [`Core::flags`]: a dry run (refusals become shadows).
const DRY: u8 = 4;
/// [`Core::flags`], feature `otel`: someone may watch calls (a subscriber may want their
/// spans, or the meter times them: `crate::gate`), set in every breaker when that changes.
/// The async call path asks it where it asks [`TIMED`] and [`DRY`], in the same test, so a
/// breaker nobody watches pays nothing for it. Without the feature, no bit.
const WATCHED: u8 = if cfg!(feature = "otel") { 8 } else { 0 };

fn flags(policy: &Policy) -> u8 {
    let simple = policy.slow_call.is_none()
        && policy.window.is_none()
        && policy.max_concurrent.is_none()
        && !policy.overload.any();
    (u8::from(simple) * SIMPLE)
        | (u8::from(policy.timeout.is_some()) * TIMED)
        | (u8::from(policy.overload.dry_run) * DRY)
}

impl Core {
    /// Whether calls have a deadline: the async call path asks it at admission, from the
    /// breaker's own flags (one load beside the word), not behind the live pointer.
    #[inline(always)]
    pub(crate) fn timed(&self) -> bool {
        self.flags.load(Relaxed) & TIMED != 0
    }

    /// [`timed`](Self::timed), or [`watched`](Self::watched): one test at admission for
    /// both, so a call that is neither pays for the second nothing.
    #[inline(always)]
    pub(crate) fn timed_or_watched(&self) -> bool {
        self.flags.load(Relaxed) & (TIMED | WATCHED) != 0
    }

    /// Feature `otel`: someone may watch this breaker's calls ([`WATCHED`]).
    #[cfg(feature = "otel")]
    #[inline(always)]
    pub(crate) fn watched(&self) -> bool {
        self.flags.load(Relaxed) & WATCHED != 0
    }

    /// Feature `otel`: sets [`WATCHED`] as the gate says (`crate::gate::watching`).
    #[cfg(feature = "otel")]
    pub(crate) fn set_watched(&self, on: bool) {
        if on {
            self.flags.fetch_or(WATCHED, Relaxed);
        } else {
            self.flags.fetch_and(!WATCHED, Relaxed);
        }
    }
}
