//! Cumulative counts, striped across cache lines so that threads calling one breaker do not
//! write to one shared line on the success path.
//!
//! A thread claims a stripe on its first count and keeps it until it exits. While it owns
//! stripe `i` it is the only thread that writes stripe `i` of any breaker, so it counts with
//! a plain load and store (`Relaxed`): no `lock`-prefixed instruction, which is most of what
//! an uncontended atomic add costs. Readers sum the stripes with `Relaxed` loads, which is
//! all a statistic needs. Handing a stripe to the next owner is a `Release` (exit) and
//! `Acquire` (claim) on the bitmap of taken stripes, so the next owner continues from the
//! last count stored. Threads beyond the owned stripes share a few more, counted with
//! `fetch_add`. An outcome is always counted on the stripe of the thread where it happens,
//! which for an async call that moved between workers is not the admitting thread's.
//!
//! A breaker keeps one stripe inline, for the first slot that counts on it; the striped
//! set (4 KiB) is made when a second slot first counts there, and from then on every slot,
//! the first included, counts in it. So a breaker that one thread calls (most keys of a
//! keyed breaker) costs 64 bytes of counts, and a hot one still has a stripe per thread
//! (issue 20: the 4 KiB every breaker paid made 100 000 keys cost 600 MB). A breaker that
//! several threads call one after the other (a key whose calls land on different workers of
//! a multi-thread runtime) pays the 4 KiB too: the first count from a second thread is all
//! this can see without a shared write per call.
//!
//! Here [`Stats`], the stripes and the counters over them (`Counters`); in `claim`, which
//! stripe this thread counts on (claimed, shared, given back on exit); in `tests`, the unit
//! tests (the loom model of a stripe's hand-over stays here, beside what it models).

use std::marker::PhantomData;

use std::sync::atomic::AtomicUsize;

use once_cell::race::OnceBox;

use crate::sync::{AtomicU64, Ordering::Relaxed};

mod claim;
mod reset_count;
pub(crate) use reset_count::ResetCount;
#[cfg(all(test, not(breaker_loom)))]
mod tests;

pub(crate) use claim::{here, owned_here};

/// What a breaker has counted since its creation or its last `reset()`. Transitions do not
/// clear these; outcomes that arrive from an older generation are counted here though they
/// change no state.
///
/// `#[non_exhaustive]`: read the fields, start from [`Stats::default()`] to build one; more
/// counts may follow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(default)
)]
pub struct Stats {
    /// Every call, rejected ones included (a call is counted when it is admitted or refused).
    pub calls: u64,
    /// Calls that returned `Ok` in time.
    pub successes: u64,
    /// Calls that counted against the dependency: errors, timeouts, slow calls and panics.
    pub failures: u64,
    /// Failures that were timeouts.
    pub timeouts: u64,
    /// Failures that were slow calls.
    pub slow_calls: u64,
    /// Calls refused without reaching the dependency: open, half-open full, bulkhead full.
    pub rejected: u64,
    /// Calls that ended with an error `is_failure` (or a classifier) judged neutral: the
    /// caller's fault, counted neither as a success nor as a failure.
    pub neutral: u64,
    /// Calls whose future was dropped before they finished, sooner than `slow_call`.
    pub cancelled: u64,
    /// Calls dropped before they finished after running at least `slow_call` (the caller,
    /// or an outer timeout, gave up on them): counted as slow calls, so also in `slow_calls`
    /// and `failures`. Without `slow_call` every dropped call is `cancelled`.
    pub abandoned: u64,
    /// Calls shed while closed by adaptive throttling or a recovery ramp (`throttle`,
    /// `ramp`); also counted in `rejected`.
    pub throttled: u64,
    /// Dry run (`dry_run`): calls the breaker would have refused, made anyway; their
    /// outcomes count nowhere else.
    pub shadow_rejected: u64,
    /// Retries made (`retry`): attempts after the first, each paid from the retry budget;
    /// each is also a call in `calls`.
    pub retries: u64,
    /// Retries the retry budget refused: the last answer was returned instead.
    pub retries_denied: u64,
    /// Hedges sent (`hedge`): attempts after the first of a hedged call; each is also a
    /// call in `calls`.
    pub hedges: u64,
    /// Hedges whose answer was returned (the first attempt lost).
    pub hedges_won: u64,
    /// Hedges due but not sent: the hedge (or retry) budget was spent, or the breaker was
    /// not closed, was throttling, or had no seat free. The call waited for its attempts.
    pub hedges_denied: u64,
}

/// One stripe's counts. Inline in a breaker (its `home`) it shares cache lines with the
/// breaker's other fields, which is fine while one thread counts there; the stripes made
/// for several threads are on lines of their own (see [`Padded`]).
#[derive(Default)]
struct Stripe {
    admitted: AtomicU64,
    successes: AtomicU64,
    failures: AtomicU64,
    timeouts: AtomicU64,
    slow_calls: AtomicU64,
    rejected: AtomicU64,
    neutral: AtomicU64,
    cancelled: AtomicU64,
    abandoned: AtomicU64,
}

/// Stripes a thread can own. While a thread owns stripe `i` it is the only writer of stripe
/// `i` in every breaker, so it counts with a plain load and store: no locked instruction on
/// the hot path. A thread gives its stripe back when it exits.
const OWNED: usize = 28;
/// Stripes for the threads that found none free: counted with `fetch_add`.
const SHARED: usize = 4;
/// All stripes: a power of two, so indexing is a mask. 4 KiB, made only for a breaker that
/// a second thread counts on (see [`Counters`]).
const STRIPES: usize = OWNED + SHARED;
const _: () = assert!(STRIPES.is_power_of_two() && OWNED <= 32);

/// Which stripe: an index into every breaker's stripes. Only names a stripe; counting
/// through one with plain stores is safe only on the thread that owns it, which is what
/// [`Here`] guarantees by type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StripeIndex(usize);

impl StripeIndex {
    /// Whether the stripe is one a thread owns (counted with plain stores by its owner), not
    /// a shared one.
    #[inline]
    pub(crate) fn owned(self) -> bool {
        // Under loom every thread gets stripe 0, so it must count with `fetch_add`.
        !cfg!(breaker_loom) && self.0 < OWNED
    }
}

/// This thread's stripe, from [`here`] or [`owned_here`], as a handle that cannot leave the
/// thread: `!Send` and `!Sync`. An owned stripe is counted with a plain load and store,
/// which is sound only on its owner thread; a `Here` can only be used on the thread that
/// looked it up, so "only the admitting thread counts on a call's stripe" is checked by the
/// compiler rather than kept by convention. A call that may finish on another thread (an
/// async call) keeps no `Here`; its outcome is counted on the stripe of the thread where it
/// finishes ([`Counters::add`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Here {
    slot: StripeIndex,
    /// A raw pointer is neither `Send` nor `Sync`, and costs nothing: no `unsafe` needed.
    _this_thread: PhantomData<*const ()>,
}

impl Here {
    #[inline(always)]
    fn new(slot: StripeIndex) -> Self {
        Here {
            slot,
            _this_thread: PhantomData,
        }
    }

    /// Which stripe (a plain index, free to send anywhere, but no right to count).
    #[cfg(all(test, not(breaker_loom)))]
    pub(crate) fn stripe(self) -> StripeIndex {
        self.slot
    }

    /// The stripe's index, to spread other per-thread things the same way (a refusal's
    /// copy of the name).
    #[inline(always)]
    pub(crate) fn index(self) -> usize {
        self.slot.0
    }
}

/// This thread's stripe of one breaker, found once for a call that is admitted and ends on
/// this thread (a blocking call): its success is counted through it without asking the
/// route again. The stripe stays valid whatever the route says meanwhile: `home` is written
/// only by its slot, and stays in the sums once the others are made. `!Send`, as [`Here`].
#[derive(Clone, Copy)]
pub(crate) struct Counting<'a> {
    stripe: &'a Stripe,
    owned: bool,
    _this_thread: PhantomData<*const ()>,
}

impl Counting<'_> {
    #[inline(always)]
    pub(crate) fn add(self, count: Count) {
        add_to_stripe(self.stripe, self.owned, count);
    }
}

/// `Here` is neither `Send` nor `Sync`: these two traits have an impl each for every type
/// and one more for `Send` (`Sync`) types, so naming the method is ambiguous, and fails to
/// compile, exactly when `Here` is `Send` (`Sync`). (`StripeIndex`, for one, fails it.)
const _: () = {
    trait AmbiguousIfSend<A> {
        fn check() {}
    }
    impl<T: ?Sized> AmbiguousIfSend<()> for T {}
    impl<T: ?Sized + Send> AmbiguousIfSend<u8> for T {}
    trait AmbiguousIfSync<A> {
        fn check() {}
    }
    impl<T: ?Sized> AmbiguousIfSync<()> for T {}
    impl<T: ?Sized + Sync> AmbiguousIfSync<u8> for T {}
    let _ = <Here as AmbiguousIfSend<_>>::check;
    let _ = <Here as AmbiguousIfSync<_>>::check;
};

/// The counters behind [`Stats`].
pub(crate) struct Counters {
    /// Where counts go, in one word so that the common case (one thread counting on a
    /// breaker) costs one load and one compare: the slot that owns [`home`](Self::home)
    /// ([`home_word`]: a shared slot's with the `SHARED_HOME` bit; `NO_OWNER` until the
    /// first count), with the `STRIPED` bit set once the others are made (every slot then
    /// counts there, and no slot equals the word). So the word equals a thread's slot only
    /// when that slot is owned, and the fast path's one compare also says "plain stores".
    route: AtomicUsize,
    /// The stripe of the first slot to count here, inline: a breaker that only one thread
    /// calls (most keys of a keyed breaker) never makes the others. Written only until the
    /// others are made; its counts stay in the sums.
    home: Stripe,
    /// Every slot's stripe, made when a second slot first counts here: a breaker that
    /// several threads call pays its 4 KiB then, and keeps their scaling.
    others: OnceBox<[Padded; STRIPES]>,
}

/// A stripe made on contention: its own pair of cache lines (128 bytes, as adjacent-line
/// prefetchers pair lines), so two threads on two stripes never share one.
#[derive(Default)]
#[repr(align(128))]
struct Padded(Stripe);

/// The bit of `route` saying the striped set is made: no slot has it, so a count then
/// misses the one-compare path and goes to the others.
const STRIPED: usize = 1 << (usize::BITS - 1);
/// The bit of `route` saying `home` belongs to a shared slot (counted with `fetch_add`): no
/// slot has it, so such a slot's threads miss the one-compare path, which counts with plain
/// stores.
const SHARED_HOME: usize = 1 << (usize::BITS - 2);
/// No slot owns `home` yet (a value no slot has, without the `STRIPED` bit).
const NO_OWNER: usize = STRIPED - 1;

/// `route`'s word for `home` owned by `at`: the slot itself if owned, tagged if shared.
#[inline(always)]
fn home_word(at: StripeIndex) -> usize {
    if at.0 < OWNED {
        at.0
    } else {
        at.0 | SHARED_HOME
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Count {
    Admitted,
    Success,
    Failure,
    Timeout,
    Slow,
    Rejected,
    Neutral,
    Cancelled,
    /// Dropped after `slow_call`: a slow call (a failure) that nobody waited for.
    Abandoned,
}

/// Adds one: a plain load and store when this thread owns the stripe, else `fetch_add`.
#[inline(always)]
fn bump(counter: &AtomicU64, owned: bool) {
    if owned {
        counter.store(counter.load(Relaxed).wrapping_add(1), Relaxed);
    } else {
        counter.fetch_add(1, Relaxed);
    }
}

/// One count on `s`, with plain stores if `owned` (the caller is its only writer).
#[inline(always)]
fn add_to_stripe(s: &Stripe, owned: bool, count: Count) {
    match count {
        Count::Admitted => bump(&s.admitted, owned),
        Count::Success => bump(&s.successes, owned),
        Count::Failure => bump(&s.failures, owned),
        Count::Rejected => bump(&s.rejected, owned),
        Count::Neutral => bump(&s.neutral, owned),
        Count::Cancelled => bump(&s.cancelled, owned),
        Count::Timeout => {
            bump(&s.failures, owned);
            bump(&s.timeouts, owned);
        }
        Count::Slow => {
            bump(&s.failures, owned);
            bump(&s.slow_calls, owned);
        }
        Count::Abandoned => {
            bump(&s.failures, owned);
            bump(&s.slow_calls, owned);
            bump(&s.abandoned, owned);
        }
    }
}

impl Counters {
    pub(crate) fn new() -> Self {
        Counters {
            route: AtomicUsize::new(NO_OWNER),
            home: Stripe::default(),
            others: OnceBox::new(),
        }
    }

    /// The stripe of `at`: `home` if `at` owns it (or is the first to count), else its own
    /// among the others (made on the first such count). Only threads of slot `at` write
    /// the stripe this returns, as before: `home` has exactly one slot.
    #[inline(always)]
    fn stripe(&self, at: StripeIndex) -> &Stripe {
        // One load and one compare for the breaker one owner thread counts on: the word is
        // that slot exactly until the others are made (then it has the `STRIPED` bit). A
        // shared slot's home is tagged, and found in `stripe_slow`.
        if self.route.load(Relaxed) == at.0 {
            return &self.home;
        }
        self.stripe_slow(at)
    }

    #[cold]
    #[inline(never)]
    fn stripe_slow(&self, at: StripeIndex) -> &Stripe {
        // Once the others are made, every slot counts there, the first one too: `home` is
        // then never written again, so it needs no cache line of its own.
        if let Some(others) = self.others.get() {
            return &others[at.0 % STRIPES].0;
        }
        let mine = home_word(at);
        match self
            .route
            .compare_exchange(NO_OWNER, mine, Relaxed, Relaxed)
        {
            Ok(_) => return &self.home,
            // A shared slot's home (its word tagged, so it is found here), or two threads of
            // one shared slot raced: the winner's slot is ours too.
            Err(now) if now == mine => return &self.home,
            Err(_) => {}
        }
        let others = self.others.get_or_init(Box::default);
        // From here the home owner misses its one-compare path and counts in the others;
        // a count that read the word before this still lands on `home`, which only that
        // slot writes and which stays in the sums.
        self.route.fetch_or(STRIPED, Relaxed);
        &others[at.0 % STRIPES].0
    }

    /// Every stripe made so far.
    fn stripes(&self) -> impl Iterator<Item = &Stripe> {
        let others = self
            .others
            .get()
            .into_iter()
            .flat_map(|o| o.iter().map(|p| &p.0));
        std::iter::once(&self.home).chain(others)
    }

    #[inline]
    pub(crate) fn add(&self, count: Count) {
        self.add_here(here(), count);
    }

    /// Adds to this thread's stripe, when the caller already looked it up ([`here`],
    /// [`owned_here`]): with plain stores if this thread owns it. Inlined after
    /// `owned_here`, the ownership check folds away.
    #[inline]
    pub(crate) fn add_here(&self, at: Here, count: Count) {
        self.add_to(at.slot, at.slot.owned(), count);
    }

    /// Adds to stripe `at`, with plain stores if `owned` (the caller is its only writer).
    #[inline(always)]
    fn add_to(&self, at: StripeIndex, owned: bool, count: Count) {
        add_to_stripe(self.stripe(at), owned, count);
    }

    /// This thread's stripe, when it owns one and it is found without a call: the home
    /// stripe of its owner, or the striped set once made. `None` on a slot's first count
    /// here (the route is claimed or the set made out of line, by
    /// [`counting`](Self::counting)), or for a thread that owns no stripe (it has not
    /// counted yet, or shares one).
    ///
    /// The route is compared with the thread's slot as stored, before asking whether the
    /// slot is owned: the route names owned slots alone ([`home_word`]), so equal means
    /// owned, and the common case makes one compare where it made two.
    #[inline(always)]
    pub(crate) fn counting_inline(&self) -> Option<Counting<'_>> {
        let at = claim::slot_here();
        let route = self.route.load(Relaxed);
        let stripe = if route == at {
            debug_assert!(
                cfg!(breaker_loom) || at < OWNED,
                "route {route:#x} names a shared slot"
            );
            &self.home
        } else if route & STRIPED != 0 && StripeIndex(at).owned() {
            &self.others.get()?[at % STRIPES].0
        } else {
            return None;
        };
        Some(Counting {
            stripe,
            // Owned in both branches above (under loom every thread has slot 0, counted with
            // `fetch_add`).
            owned: !cfg!(breaker_loom),
            _this_thread: PhantomData,
        })
    }

    /// This thread's stripe, found (or made) whatever the route says.
    #[inline]
    pub(crate) fn counting(&self, at: Here) -> Counting<'_> {
        Counting {
            stripe: self.stripe(at.slot),
            owned: at.slot.owned(),
            _this_thread: PhantomData,
        }
    }

    /// The totals since `base` (the totals at the last reset; `None`: never reset). The
    /// stripes only ever grow, so a read never falls below a base taken earlier.
    pub(crate) fn since(&self, base: Option<&Stats>) -> Stats {
        let raw = self.read();
        let Some(base) = base else {
            return raw;
        };
        Stats {
            calls: raw.calls.wrapping_sub(base.calls),
            successes: raw.successes.wrapping_sub(base.successes),
            failures: raw.failures.wrapping_sub(base.failures),
            timeouts: raw.timeouts.wrapping_sub(base.timeouts),
            slow_calls: raw.slow_calls.wrapping_sub(base.slow_calls),
            rejected: raw.rejected.wrapping_sub(base.rejected),
            neutral: raw.neutral.wrapping_sub(base.neutral),
            cancelled: raw.cancelled.wrapping_sub(base.cancelled),
            abandoned: raw.abandoned.wrapping_sub(base.abandoned),
            // Counted by the engine's overload part, not on the stripes (`Core::stats`).
            throttled: 0,
            shadow_rejected: 0,
            retries: 0,
            retries_denied: 0,
            hedges: 0,
            hedges_won: 0,
            hedges_denied: 0,
        }
    }

    /// The totals since creation (a reset is a base kept by the engine: [`since`]
    /// (Self::since)).
    pub(crate) fn read(&self) -> Stats {
        let mut t = Stats::default();
        for s in self.stripes() {
            let rejected = s.rejected.load(Relaxed);
            t.calls = t
                .calls
                .wrapping_add(s.admitted.load(Relaxed).wrapping_add(rejected));
            t.rejected = t.rejected.wrapping_add(rejected);
            t.successes = t.successes.wrapping_add(s.successes.load(Relaxed));
            t.failures = t.failures.wrapping_add(s.failures.load(Relaxed));
            t.timeouts = t.timeouts.wrapping_add(s.timeouts.load(Relaxed));
            t.slow_calls = t.slow_calls.wrapping_add(s.slow_calls.load(Relaxed));
            t.neutral = t.neutral.wrapping_add(s.neutral.load(Relaxed));
            t.cancelled = t.cancelled.wrapping_add(s.cancelled.load(Relaxed));
            t.abandoned = t.abandoned.wrapping_add(s.abandoned.load(Relaxed));
        }
        t
    }

    /// Calls admitted and not yet finished: admitted less successes, failures, neutral and
    /// cancelled ones (every admitted call ends as exactly one of those). The finished
    /// counts are read before the admitted ones, and both only grow, so a call that
    /// finishes during the read is never seen finished but not admitted. Read, not kept: the
    /// call path pays nothing for it (a keyed breaker asks it only when picking a victim).
    pub(crate) fn in_flight(&self) -> u64 {
        let mut finished = 0u64;
        for s in self.stripes() {
            finished = finished
                .wrapping_add(s.successes.load(Relaxed))
                .wrapping_add(s.failures.load(Relaxed))
                .wrapping_add(s.neutral.load(Relaxed))
                .wrapping_add(s.cancelled.load(Relaxed));
        }
        let admitted = self
            .stripes()
            .fold(0u64, |n, s| n.wrapping_add(s.admitted.load(Relaxed)));
        admitted.saturating_sub(finished)
    }

    /// (admitted, successes) counted by one slot (on `home` while it owned it, then on its
    /// stripe), for tests of who counts where.
    #[cfg(all(test, not(breaker_loom)))]
    pub(crate) fn at(&self, slot: StripeIndex) -> (u64, u64) {
        let home = (self.route.load(Relaxed) & !STRIPED == home_word(slot)).then_some(&self.home);
        let other = self.others.get().map(|o| &o[slot.0 % STRIPES].0);
        home.into_iter().chain(other).fold((0, 0), |(a, s), st| {
            (
                a + st.admitted.load(Relaxed),
                s + st.successes.load(Relaxed),
            )
        })
    }
}

#[cfg(all(test, breaker_loom))]
mod loom_model {
    use ::loom::sync::{
        atomic::{AtomicU32, Ordering::*},
        Arc,
    };

    use super::*;

    /// The hand-over of an owned stripe, as [`Owner`]'s drop and [`claim`] do it outside
    /// loom: the first owner counts with plain stores and gives the stripe back (`Release`);
    /// the next owner claims it (`Acquire`) and counts on from there. No count is lost, and a
    /// reader meanwhile never sees more than was counted.
    #[test]
    fn loom_an_owned_stripe_changes_hands_without_losing_a_count() {
        let mut builder = ::loom::model::Builder::new();
        builder.preemption_bound = Some(3);
        // A read loads every counter of all 32 stripes, each a loom branch.
        builder.max_branches = 10_000;
        builder.check(|| {
            let counters = Arc::new(Counters::new());
            let taken = Arc::new(AtomicU32::new(1)); // the first owner holds stripe 0
            let slot = StripeIndex(0);
            let first = {
                let (c, t) = (counters.clone(), taken.clone());
                ::loom::thread::spawn(move || {
                    c.add_to(slot, true, Count::Admitted);
                    c.add_to(slot, true, Count::Success);
                    t.fetch_and(!1, Release);
                })
            };
            let next = {
                let (c, t) = (counters.clone(), taken.clone());
                ::loom::thread::spawn(move || {
                    while t.compare_exchange(0, 1, Acquire, Relaxed).is_err() {
                        ::loom::thread::yield_now();
                    }
                    c.add_to(slot, true, Count::Admitted);
                    c.add_to(slot, true, Count::Failure);
                })
            };
            let seen = counters.read();
            assert!(seen.calls <= 2 && seen.successes <= 1 && seen.failures <= 1);
            first.join().unwrap();
            next.join().unwrap();
            let s = counters.read();
            assert_eq!((s.calls, s.successes, s.failures), (2, 1, 1));
        });
    }
}
