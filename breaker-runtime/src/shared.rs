//! The plumbing every call shares: a breaker's parts ([`Shared`]), a blocking call's
//! admission and end, how a finished call is judged and reported ([`conclude`],
//! [`Shared::report`]), and the guard that reports a panic in the user's call
//! ([`Unwinding`]). These are the call paths' parts that are not generic over the user's
//! call, compiled once (see `Breaker::call_sync_judged` and the call future). The
//! breaker, its handles, the call future and the registry all build on this module; it
//! depends on none of them, only on the index under the registry, a leaf (its
//! [`Listing`](crate::registry::index::Listing) is its place there, given when the built
//! breaker is listed and freed when it is dropped).

use std::{
    panic::{catch_unwind, resume_unwind, AssertUnwindSafe},
    sync::Arc,
    time::Duration,
};

use crate::{
    clock::TokioClock,
    core::{Admission, Core, Engine, LocalTicket, Outcome, Ticket},
    registry::index::Listing,
    verdict::{Judge, Verdict},
    BreakerError, CallError,
};

/// A breaker's parts, shared by its clones and handles. Nominally public (its module is
/// private) so the call future can name it.
pub struct Shared {
    pub(crate) core: Core,
    pub(crate) clock: TokioClock,
    /// Its entry in the registry, removed when the last clone and handle are gone (`None`:
    /// never to be listed). Given its slot by [`list`](Self::list), after the breaker is
    /// built; held only for that and to be dropped with the breaker.
    listed: Option<Listing>,
    /// Unique in the process, never reused (metrics follow a breaker by it).
    pub(crate) id: u64,
    /// The keyed breaker this is a key of.
    pub(crate) family: Option<Arc<Family>>,
    /// The retry budget, made by the first retried call (`crate::retry`): a breaker that
    /// never retries pays one word for it.
    retry: once_cell::race::OnceBox<crate::retry::budget::Budget>,
    /// Hedging's latencies, budget and counts, made by the first hedged call of a breaker
    /// with `hedge` (`crate::hedging`): one word for any other.
    hedge: once_cell::race::OnceBox<crate::hedging::Hedging>,
}

/// What the keys of one keyed breaker share (beyond their policy).
#[derive(Debug)]
pub(crate) struct Family {
    pub(crate) name: crate::Name,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if self.listed.as_ref().is_some_and(|l| !l.is_listed()) {
            return; // built to be listed, but another breaker of its name was: never a breaker
        }
        crate::registry::departures::depart(|| crate::registry::departures::Departed {
            id: self.id,
            name: self.core.name.clone(),
            family: self.family.as_ref().map(|f| f.name.clone()),
            stats: self.counted(),
        });
    }
}

/// Feature `otel`: every listed breaker told whether anyone watches calls now
/// (`crate::gate` calls it after each change: a subscriber set or a filter reloaded, the
/// meter installed). O(breakers), keys included, on such a change, and nothing on a call.
/// One walk at a time, each reading the gate under that lock, so the last change wins.
/// Called from inside `tracing` (a callsite's `set_interest`, under its locks): a breaker
/// whose last clone went during the walk is not dropped here, where its end could reach
/// `tracing` again, but kept in [`LEFT`] until the next breaker is made.
#[cfg(feature = "otel")]
fn rewatch_all() {
    static WALKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = crate::sync::lock(&WALKING);
    let on = crate::gate::watching();
    for found in crate::registry::index::index().find(None) {
        let Some(Ok(shared)) = found.listed.upgrade().map(|l| l.downcast::<Shared>()) else {
            continue;
        };
        shared.core.set_watched(on);
        if let Some(last) = Arc::into_inner(shared) {
            crate::sync::lock(&LEFT).push(last);
            ANY_LEFT.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

/// Feature `otel`: breakers whose last clone went while [`rewatch_all`] held them, dropped
/// when the next breaker is made (outside `tracing`).
#[cfg(feature = "otel")]
static LEFT: std::sync::Mutex<Vec<Shared>> = std::sync::Mutex::new(Vec::new());
#[cfg(feature = "otel")]
static ANY_LEFT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Feature `otel`: drops what [`rewatch_all`] left (a lock only when it left something).
#[cfg(feature = "otel")]
fn drop_left() {
    use std::sync::atomic::Ordering::Relaxed;
    if ANY_LEFT.load(Relaxed) {
        ANY_LEFT.store(false, Relaxed);
        let left = std::mem::take(&mut *crate::sync::lock(&LEFT));
        drop(left);
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.core.fmt(f)
    }
}

impl Shared {
    pub(crate) fn new(
        name: crate::Name,
        live: Arc<crate::live::Live>,
        listed: bool,
        keyed: Option<(Arc<Family>, Option<crate::core::OpenCap>)>,
    ) -> Shared {
        let (family, cap) = keyed.map_or((None, None), |(f, c)| (Some(f), c));
        // Feature `otel`: the calls' gate known to `tracing` before the first call (its
        // registration allocates once; a call allocates nothing), and this breaker told
        // whether anyone watches (again once it is listed: see `list`).
        #[cfg(feature = "otel")]
        crate::gate::register(rewatch_all);
        #[cfg(feature = "otel")]
        drop_left();
        let core = Core::new(name, live).with_cap(cap);
        #[cfg(feature = "otel")]
        core.set_watched(crate::gate::watching());
        Shared {
            core,
            clock: TokioClock::new(),
            listed: listed.then(Listing::pending),
            id: crate::registry::departures::next_id(),
            family,
            retry: once_cell::race::OnceBox::new(),
            hedge: once_cell::race::OnceBox::new(),
        }
    }

    /// Lists this breaker (built with `listed`) in the registry, under its name. With
    /// `find`, a live breaker of that name is returned instead, and this one is not listed.
    /// Only the index's bookkeeping runs under the registry's lock: the breaker was
    /// validated and built before.
    pub(crate) fn list(self: &Arc<Self>, find: bool) -> Option<Arc<Shared>> {
        let listing = self.listed.as_ref()?;
        let found = crate::registry::index::index().list(&self.core.name, find, self, listing);
        // Feature `otel`: asked again once listed. A change of the gate walks the listed
        // breakers after it (`rewatch_all`): either that walk found this one, or this
        // reading comes after the change (the index's lock orders the two).
        #[cfg(feature = "otel")]
        self.core.set_watched(crate::gate::watching());
        found
    }

    /// The retry budget, made on first use.
    pub(crate) fn retry_budget(&self) -> &crate::retry::budget::Budget {
        self.retry.get_or_init(Box::default)
    }

    /// Whether the retry budget is as a fresh breaker's (never used, or no more withdrawn
    /// than deposited over its window): eviction keeps a key whose budget is spent.
    pub(crate) fn retry_budget_full(&self) -> bool {
        use crate::clock::Clock as _;
        self.retry.get().is_none_or(|b| b.is_full(self.clock.now()))
    }

    /// Hedging's state, made on first use.
    pub(crate) fn hedging(&self) -> &crate::hedging::Hedging {
        self.hedge.get_or_init(Box::default)
    }

    /// Hedging's state, if made.
    #[cfg(test)]
    pub(crate) fn hedging_made(&self) -> Option<&crate::hedging::Hedging> {
        self.hedge.get()
    }

    /// The counts: the engine's, the retry budget's, hedging's.
    pub(crate) fn stats(&self) -> crate::Stats {
        let mut stats = self.core.stats();
        if let Some(budget) = self.retry.get() {
            (stats.retries, stats.retries_denied) = budget.counts();
        }
        if let Some(hedging) = self.hedge.get() {
            (stats.hedges, stats.hedges_won, stats.hedges_denied) = hedging.counts();
        }
        stats
    }

    /// Everything counted since the breaker was made, across resets: what exporters count
    /// (`Handle::counted`). Each count keeps its total beside its base at the last reset.
    pub(crate) fn counted(&self) -> crate::Stats {
        let mut stats = self.core.counted();
        if let Some(budget) = self.retry.get() {
            (stats.retries, stats.retries_denied) = budget.totals();
        }
        if let Some(hedging) = self.hedge.get() {
            (stats.hedges, stats.hedges_won, stats.hedges_denied) = hedging.totals();
        }
        stats
    }

    /// Clears the retry budget's and hedging's counts (`Handle::reset`).
    pub(crate) fn reset_retry_counts(&self) {
        if let Some(budget) = self.retry.get() {
            budget.reset_counts();
        }
        if let Some(hedging) = self.hedge.get() {
            hedging.reset_counts();
        }
    }
}

impl Engine for &Shared {
    type Clock = TokioClock;
    #[inline(always)]
    fn core(&self) -> &Core {
        &self.core
    }
    #[inline(always)]
    fn clock(&self) -> &TokioClock {
        &self.clock
    }
}

impl Host for &Shared {
    #[inline(always)]
    fn shared(&self) -> &Shared {
        self
    }
}

/// What a call future holds its breaker by: borrowed (`&Shared`, from
/// [`Breaker::call`](crate::Breaker::call): no reference-count traffic per call) or owned
/// (a [`Breaker`](crate::Breaker), from [`Breaker::call_owned`](crate::Breaker::call_owned):
/// a `'static` future to spawn). Implemented by the runtime only.
pub trait Host: Engine<Clock = crate::clock::TokioClock> + Clone {
    /// The breaker's parts.
    fn shared(&self) -> &Shared;
}

impl Shared {
    /// The closed fast path ([`Core::enter_closed`]). This and the two below are the call
    /// paths' steps that are not generic: a debug build compiles them once, here, and every
    /// call (each annotated function's) calls them, so its own code is the user's call and
    /// the judge; an optimised build inlines them, and the closed and open paths' instruction
    /// counts are what they were.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn enter_closed(&self) -> Option<LocalTicket<'_>> {
        self.core.enter_closed()
    }

    /// An outright refusal ([`Core::refuse`]), as [`enter_closed`](Self::enter_closed).
    #[cfg(feature = "otel")]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn refuse(&self) -> Option<BreakerError> {
        self.core.refuse(&self.clock)
    }

    /// An outright refusal of a call nobody watches ([`Core::refuse_unwatched`]), as
    /// [`enter_closed`](Self::enter_closed).
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn refuse_unwatched(&self) -> Option<BreakerError> {
        self.core.refuse_unwatched(&self.clock)
    }

    /// A blocking call's outright refusal ([`Core::refuse_blocking`]: the coarse clock outside
    /// tokio), as [`enter_closed`](Self::enter_closed).
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn refuse_blocking(&self) -> Option<BreakerError> {
        self.core.refuse_blocking(&self.clock)
    }

    /// A fast-path success counted on the admitting stripe: whether a failure streak runs
    /// (then [`ended_streak`](Self::ended_streak)); as [`enter_closed`](Self::enter_closed).
    #[cfg_attr(not(debug_assertions), inline(always))]
    fn succeeded_here(&self, ticket: LocalTicket<'_>) -> bool {
        self.core.succeeded_here(ticket)
    }

    /// A blocking call admitted on the fast path. A success is settled inline; anything
    /// else out of line, so the inlined part stays small.
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn run_fast<T, E, J: Judge<T, E>>(
        &self,
        ticket: LocalTicket<'_>,
        is_failure: J,
        call: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, CallError<E>> {
        let unwinding = Unwinding {
            shared: self,
            fast: true,
            admission: Admission::of_ticket(ticket.ticket()),
        };
        let result = call();
        std::mem::forget(unwinding);
        match result {
            // `is_failure` is never asked about an `Ok`; a classifier is.
            Ok(value) if J::OK_IS_SUCCESS => {
                if self.succeeded_here(ticket) {
                    return self.ended_streak(ticket.ticket(), value);
                }
                Ok(value)
            }
            other => self.settle_fast(ticket.ticket(), Ok(other), is_failure),
        }
    }

    #[cold]
    #[inline(never)]
    fn settle_fast<T, E>(
        &self,
        ticket: Ticket,
        result: Result<Result<T, E>, Stop>,
        is_failure: impl Judge<T, E>,
    ) -> Result<T, CallError<E>> {
        conclude(self, true, Admission::of_ticket(ticket), result, is_failure)
    }

    /// A fast success that interrupted a failure streak: ends it, then returns the value
    /// (the value rides through this call, so the inlined path keeps nothing alive).
    #[cold]
    #[inline(never)]
    fn ended_streak<T, E>(&self, ticket: Ticket, value: T) -> Result<T, CallError<E>> {
        self.core.end_streak_now(ticket, &self.clock);
        Ok(value)
    }

    /// Every blocking call that is not closed on the fast path: out of line, so the closed
    /// path's caller keeps a small frame. Only the call and the judge are generic here;
    /// admission and the report are [`admit`](Self::admit) and [`report`](Self::report),
    /// compiled once.
    #[inline(never)]
    pub(crate) fn call_sync_slow<T, E>(
        &self,
        is_failure: impl Judge<T, E>,
        call: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, CallError<E>> {
        let (fast, admission) = self.admit().map_err(CallError::Breaker)?;
        let unwinding = Unwinding {
            shared: self,
            fast,
            admission,
        };
        let result = call();
        std::mem::forget(unwinding);
        conclude(self, fast, admission, Ok(result), is_failure)
    }

    /// Admission when neither the closed fast path nor an outright refusal applied: the
    /// fast path from a thread that owns no stripe yet (`true`), or full admission.
    #[inline(never)]
    pub(crate) fn admit(&self) -> Result<(bool, Admission), BreakerError> {
        match self.core.enter_claiming() {
            Some(ticket) => Ok((true, Admission::of_ticket(ticket.ticket()))),
            None => Ok((false, self.core.admit(&self.clock)?)),
        }
    }

    /// Reports how an admitted call ended: a fast-path success as the fast path counts one
    /// (on this thread's stripe), anything else through the engine.
    #[inline(never)]
    pub(crate) fn report(&self, fast: bool, admission: Admission, outcome: Outcome) {
        if fast && outcome == Outcome::Success {
            self.core.succeed(admission.ticket(), &self.clock);
        } else {
            self.core.finish(admission, outcome, &self.clock);
        }
    }

    /// A call that stopped without a result of its own: reported, then its error.
    #[cold]
    #[inline(never)]
    pub(crate) fn stopped(&self, fast: bool, admission: Admission, stop: Stop) -> BreakerError {
        let Stop::Timeout(after) = stop;
        self.report(fast, admission, Outcome::Timeout);
        BreakerError::Timeout {
            name: self.core.name.clone(),
            after,
        }
    }
}

/// Why a call stopped without a result of its own.
pub(crate) enum Stop {
    /// Its deadline passed.
    Timeout(Duration),
}

/// A call running the user's code, dropped only if that code panicked (the normal path
/// forgets it): reports the call as a failure while the panic goes on, unchanged. In place
/// of `catch_unwind` and `resume_unwind`, which cost no more on the normal path but compile a
/// closure and its catch for every call (each annotated function's); this is compiled once.
pub(crate) struct Unwinding<'a> {
    pub(crate) shared: &'a Shared,
    pub(crate) fast: bool,
    pub(crate) admission: Admission,
}

impl Drop for Unwinding<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        panicked(self.shared, self.fast, self.admission);
    }
}

#[cold]
#[inline(never)]
fn panicked(shared: &Shared, fast: bool, admission: Admission) {
    shared.report(fast, admission, Outcome::Failure);
}

/// Judges and reports a finished call (admitted on the fast path if `fast`), and hands its
/// result to the caller; a panic in the judge (`is_failure` or a classifier) is reported as
/// a failure first and then resumed unchanged (one in the call is [`Unwinding`]'s). Generic only in
/// what must be: the result and the judge; the rest is [`Shared::report`]'s.
#[inline(never)]
pub(crate) fn conclude<T, E>(
    shared: &Shared,
    fast: bool,
    admission: Admission,
    result: Result<Result<T, E>, Stop>,
    judge: impl Judge<T, E>,
) -> Result<T, CallError<E>> {
    let result = match result {
        Ok(result) => result,
        Err(stop) => return Err(CallError::Breaker(shared.stopped(fast, admission, stop))),
    };
    report_verdict(shared, fast, admission, || judge.judge(&result));
    result.map_err(CallError::Inner)
}

/// The verdict on a finished call (admitted on the fast path if `fast`), reported; a panic
/// in the judge is reported as a failure first and then resumed unchanged. What
/// [`conclude`] and a call future's end share.
#[inline(always)]
pub(crate) fn report_verdict(
    shared: &Shared,
    fast: bool,
    admission: Admission,
    judge: impl FnOnce() -> Verdict,
) -> Verdict {
    match catch_unwind(AssertUnwindSafe(judge)) {
        Ok(verdict) => {
            shared.report(fast, admission, Outcome::from(verdict));
            verdict
        }
        Err(panic) => {
            shared.report(fast, admission, Outcome::Failure);
            resume_unwind(panic)
        }
    }
}
