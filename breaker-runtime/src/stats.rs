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

use crate::sync::{lock, AtomicU64, Mutex, Ordering::Relaxed};

/// What a breaker has counted since its creation or its last `reset()`. Transitions do not
/// clear these; outcomes that arrive from an older generation are counted here though they
/// change no state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
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
}

/// One stripe: its own pair of cache lines (128 bytes, as adjacent-line prefetchers pair
/// lines), so two threads on two stripes never share one.
#[derive(Default)]
#[repr(align(128))]
struct Stripe {
    admitted: AtomicU64,
    successes: AtomicU64,
    failures: AtomicU64,
    timeouts: AtomicU64,
    slow_calls: AtomicU64,
    rejected: AtomicU64,
}

/// Stripes a thread can own. While a thread owns stripe `i` it is the only writer of stripe
/// `i` in every breaker, so it counts with a plain load and store: no locked instruction on
/// the hot path. A thread gives its stripe back when it exits.
const OWNED: usize = 28;
/// Stripes for the threads that found none free: counted with `fetch_add`.
const SHARED: usize = 4;
/// All stripes: a power of two, so indexing is a mask. 4 KiB per breaker.
const STRIPES: usize = OWNED + SHARED;
const _: () = assert!(STRIPES.is_power_of_two() && OWNED <= 32);

/// A thread's stripe, from [`stripe`]: an index into every breaker's stripes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Slot(usize);

impl Slot {
    /// Whether this thread is the only writer of the stripe.
    #[inline]
    pub(crate) fn owned(self) -> bool {
        // Under loom every thread gets stripe 0, so it must count with `fetch_add`.
        !cfg!(breaker_loom) && self.0 < OWNED
    }
}

/// The counters behind [`Stats`].
pub(crate) struct Counters {
    stripes: [Stripe; STRIPES],
    /// The raw totals at the last `reset()`, subtracted on every read. Clearing the stripes
    /// instead would race their owners' plain stores and could bring old counts back.
    base: Mutex<Stats>,
}

/// Which counter a finished call bumps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Count {
    Admitted,
    Success,
    Failure,
    Timeout,
    Slow,
    Rejected,
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

impl Counters {
    pub(crate) fn new() -> Self {
        Counters {
            stripes: Default::default(),
            base: Mutex::new(Stats::default()),
        }
    }

    /// Adds to this thread's stripe.
    #[inline]
    pub(crate) fn add(&self, count: Count) {
        self.add_at(stripe(), count);
    }

    /// Adds to stripe `at` (from [`stripe`] or [`owned_stripe`]), when the caller already
    /// knows it. Inlined after `owned_stripe`, the ownership check folds away.
    #[inline]
    pub(crate) fn add_at(&self, at: Slot, count: Count) {
        self.add_to(at, at.owned(), count);
    }

    /// Adds to stripe `at`, with plain stores if `owned` (the caller is its only writer).
    #[inline(always)]
    fn add_to(&self, at: Slot, owned: bool, count: Count) {
        let s = &self.stripes[at.0 % STRIPES];
        match count {
            Count::Admitted => bump(&s.admitted, owned),
            Count::Success => bump(&s.successes, owned),
            Count::Failure => bump(&s.failures, owned),
            Count::Rejected => bump(&s.rejected, owned),
            Count::Timeout => {
                bump(&s.failures, owned);
                bump(&s.timeouts, owned);
            }
            Count::Slow => {
                bump(&s.failures, owned);
                bump(&s.slow_calls, owned);
            }
        }
    }

    /// The totals since creation or the last [`clear`](Self::clear).
    pub(crate) fn read(&self) -> Stats {
        let base = *lock(&self.base);
        let raw = self.raw();
        Stats {
            calls: raw.calls.wrapping_sub(base.calls),
            successes: raw.successes.wrapping_sub(base.successes),
            failures: raw.failures.wrapping_sub(base.failures),
            timeouts: raw.timeouts.wrapping_sub(base.timeouts),
            slow_calls: raw.slow_calls.wrapping_sub(base.slow_calls),
            rejected: raw.rejected.wrapping_sub(base.rejected),
        }
    }

    fn raw(&self) -> Stats {
        let mut t = Stats::default();
        for s in &self.stripes {
            let rejected = s.rejected.load(Relaxed);
            t.calls = t
                .calls
                .wrapping_add(s.admitted.load(Relaxed).wrapping_add(rejected));
            t.rejected = t.rejected.wrapping_add(rejected);
            t.successes = t.successes.wrapping_add(s.successes.load(Relaxed));
            t.failures = t.failures.wrapping_add(s.failures.load(Relaxed));
            t.timeouts = t.timeouts.wrapping_add(s.timeouts.load(Relaxed));
            t.slow_calls = t.slow_calls.wrapping_add(s.slow_calls.load(Relaxed));
        }
        t
    }

    /// (admitted, successes) on one stripe, for tests of who counts where.
    #[cfg(all(test, not(breaker_loom)))]
    pub(crate) fn at(&self, slot: Slot) -> (u64, u64) {
        let s = &self.stripes[slot.0 % STRIPES];
        (s.admitted.load(Relaxed), s.successes.load(Relaxed))
    }

    /// Starts every count again from zero (a call racing the reset may land on either side
    /// of it). The stripes only ever grow, so a later read never falls below this base.
    pub(crate) fn clear(&self) {
        let mut base = lock(&self.base);
        *base = self.raw();
    }
}

/// This thread's stripe if it owns one; `None` before its first count, or when it shares a
/// stripe. The fast path of [`Core::enter_closed`](crate::core::Core::enter_closed): one
/// thread-local load and one compare.
#[cfg(not(breaker_loom))]
#[inline(always)]
pub(crate) fn owned_stripe() -> Option<Slot> {
    let at = STRIPE.with(Cell::get);
    (at < OWNED).then_some(Slot(at))
}

/// This thread's stripe, claimed on its first call: a free owned one if there is one, else
/// one of the shared stripes, dealt in turn.
#[cfg(not(breaker_loom))]
#[inline]
pub(crate) fn stripe() -> Slot {
    match STRIPE.with(Cell::get) {
        UNCLAIMED => claim(),
        at => Slot(at),
    }
}

#[cfg(not(breaker_loom))]
use std::cell::Cell;

#[cfg(not(breaker_loom))]
thread_local! {
    /// The stripe index, or [`UNCLAIMED`]. No destructor, so it stays readable while other
    /// thread-locals are destroyed.
    static STRIPE: Cell<usize> = const { Cell::new(UNCLAIMED) };
    /// Gives an owned stripe back when the thread exits.
    static OWNER: Owner = const { Owner(Cell::new(UNCLAIMED)) };
}

#[cfg(not(breaker_loom))]
const UNCLAIMED: usize = usize::MAX;

/// Which owned stripes are taken, one bit each.
#[cfg(not(breaker_loom))]
static TAKEN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

#[cfg(not(breaker_loom))]
struct Owner(Cell<usize>);

#[cfg(not(breaker_loom))]
impl Drop for Owner {
    fn drop(&mut self) {
        let at = self.0.get();
        if at < OWNED {
            // Any count this thread still makes (from another thread-local's destructor)
            // goes to a shared stripe. `Release`: the next owner's `Acquire` claim sees
            // every count this thread stored.
            let _ = STRIPE.try_with(|s| s.set(OWNED));
            TAKEN.fetch_and(!(1 << at), std::sync::atomic::Ordering::Release);
        }
    }
}

#[cfg(not(breaker_loom))]
#[cold]
#[inline(never)]
fn claim() -> Slot {
    use std::sync::atomic::{AtomicUsize, Ordering::*};
    let full = u32::MAX >> (32 - OWNED);
    let owned = TAKEN
        .fetch_update(Acquire, Acquire, |taken| {
            (taken != full).then(|| taken | (1 << (!taken).trailing_zeros()))
        })
        .ok()
        .map(|before| (!before).trailing_zeros() as usize);
    // Registering the destructor can fail while the thread exits: keep no owned stripe then.
    let at = match owned {
        Some(at) if OWNER.try_with(|o| o.0.set(at)).is_ok() => at,
        Some(at) => {
            TAKEN.fetch_and(!(1 << at), Release);
            shared()
        }
        None => shared(),
    };
    fn shared() -> usize {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        OWNED + NEXT.fetch_add(1, Relaxed) % SHARED
    }
    let _ = STRIPE.try_with(|s| s.set(at));
    Slot(at)
}

#[cfg(breaker_loom)]
pub(crate) fn owned_stripe() -> Option<Slot> {
    Some(Slot(0))
}

#[cfg(breaker_loom)]
pub(crate) fn stripe() -> Slot {
    Slot(0)
}

#[cfg(all(test, not(breaker_loom)))]
mod tests {
    use super::*;

    /// One test, not two: both count the free stripes of this process.
    #[test]
    fn a_stripe_has_one_owner_at_a_time_and_is_given_back_on_exit() {
        use std::sync::{mpsc, Arc, Barrier};
        // Threads that stay alive: each owns a different stripe, until none is left and
        // the next one shares (other tests may hold a few meanwhile, hence "at most").
        let done = Arc::new(Barrier::new(OWNED + 2));
        let (tx, rx) = mpsc::channel();
        let holders: Vec<_> = (0..=OWNED)
            .map(|_| {
                let (done, tx) = (done.clone(), tx.clone());
                std::thread::spawn(move || {
                    tx.send(stripe()).unwrap();
                    done.wait();
                })
            })
            .collect();
        let slots: Vec<Slot> = (0..=OWNED).map(|_| rx.recv().unwrap()).collect();
        let mut owned: Vec<usize> = slots.iter().filter(|s| s.owned()).map(|s| s.0).collect();
        assert!(
            owned.len() < slots.len(),
            "{} threads, all owners",
            slots.len()
        );
        owned.sort();
        owned.dedup();
        assert_eq!(
            owned.len(),
            slots.iter().filter(|s| s.owned()).count(),
            "{slots:?}"
        );
        done.wait();
        holders.into_iter().for_each(|h| h.join().unwrap());

        // A blocking pool starts and ends threads all day: each gives its stripe back on
        // exit, so far more threads than there are stripes each own one in turn.
        for _ in 0..3 * OWNED {
            let slot = std::thread::spawn(stripe).join().unwrap();
            assert!(slot.owned(), "{slot:?} is shared");
        }
    }

    #[test]
    fn a_reset_is_a_new_base_and_counting_goes_on_from_it() {
        let c = Counters::new();
        let me = stripe();
        for _ in 0..5 {
            c.add_at(me, Count::Admitted);
            c.add_at(me, Count::Success);
        }
        c.add_at(Slot(OWNED), Count::Rejected); // a shared stripe
        c.clear();
        assert_eq!(c.read(), Stats::default());
        c.add_at(me, Count::Admitted);
        c.add_at(me, Count::Timeout);
        c.add_at(Slot(OWNED + 1), Count::Rejected);
        let s = c.read();
        assert_eq!((s.calls, s.failures, s.timeouts, s.rejected), (2, 1, 1, 1));
        assert_eq!(s.successes, 0);
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
        builder.check(|| {
            let counters = Arc::new(Counters::new());
            let taken = Arc::new(AtomicU32::new(1)); // the first owner holds stripe 0
            let slot = Slot(0);
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
