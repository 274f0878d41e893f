//! The retry budget (Finagle's `RetryBudget`, tower's `TpsBudget`): every first attempt
//! deposits, every retry withdraws, over a window of ten one-second buckets; a reserve
//! gives a floor of retries a second from the start.
//!
//! In units: a first attempt deposits `percent` units, a retry costs [`COST`] (100). Over
//! any [`WINDOW`] a retry is granted while the balance (the window's
//! deposits less its withdrawals, plus the reserve of [`FLOOR_PER_SECOND`]
//! retries a second over the window) holds one retry's cost: at most `percent` % of the
//! first attempts of the last ten seconds, plus 100.
//!
//! A few atomics, no lock: a deposit is one clock read, one load and one `fetch_add`. Under
//! contention the count is approximate by the calls racing a bucket's turn (a deposit or a
//! withdrawal landing in a bucket as it is cleared is lost) and by withdrawals racing one
//! another past the last unit (each may pass the check before either subtracts): at most
//! one retry per concurrent caller beyond the budget.

use crate::stats::ResetCount;
use std::{
    sync::atomic::{AtomicI64, AtomicU64, Ordering::Relaxed},
    time::Duration,
};

/// The window over which the budget counts first attempts and retries.
pub const WINDOW: Duration = Duration::from_secs(10);
/// Retries a second the budget allows whatever the traffic, so a quiet service still retries.
pub const FLOOR_PER_SECOND: u32 = 10;

/// What one retry costs, in units; a first attempt deposits `percent` of them.
pub(crate) const COST: i64 = 100;
/// Buckets in the window, one a second.
const BUCKETS: usize = 10;
const SECOND: u64 = 1_000_000_000;
/// The reserve: the floor of retries a second, over the window, in units.
const RESERVE: i64 = FLOOR_PER_SECOND as i64 * BUCKETS as i64 * COST;

/// One breaker's (one key's) retry budget; the hedge budget is one too, with a floor of its
/// own ([`with_floor`](Budget::with_floor)).
#[derive(Debug)]
pub(crate) struct Budget {
    /// The second (since the breaker's creation) of the newest bucket.
    head: AtomicU64,
    /// Net units per second: deposits less withdrawals, bucket `s % BUCKETS` for second `s`.
    buckets: [AtomicI64; BUCKETS],
    /// Retries granted and denied since creation or the last reset (`Stats`).
    retries: ResetCount,
    denied: ResetCount,
    /// The floor, in units over the window ([`RESERVE`] for retries).
    reserve: i64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            reserve: RESERVE,
            ..Budget::with_floor(0)
        }
    }
}

impl Budget {
    /// A budget whose floor is `per_second` withdrawals a second.
    pub(crate) fn with_floor(per_second: u32) -> Budget {
        Budget {
            head: AtomicU64::new(0),
            buckets: Default::default(),
            retries: ResetCount::new(),
            denied: ResetCount::new(),
            reserve: i64::from(per_second) * BUCKETS as i64 * COST,
        }
    }

    /// A first attempt at `now` (nanoseconds on the breaker's clock) deposits `percent` units.
    pub(crate) fn deposit(&self, now: u64, percent: u32) {
        let bucket = self.turn(now / SECOND);
        bucket.fetch_add(i64::from(percent), Relaxed);
    }

    /// Asks for one retry at `now`: granted (and paid, and counted) while the balance holds
    /// its cost. The retry loop pays with [`take`](Self::take) and counts with
    /// [`spent`](Self::spent) when the attempt runs.
    #[cfg(test)]
    pub(crate) fn withdraw(&self, now: u64) -> bool {
        self.take(now).map(|_| self.spent()).is_some()
    }

    /// Takes one retry's cost at `now` while the balance holds it: the second it was charged
    /// to, for [`refund`](Self::refund); `None` (counted as denied) when it does not.
    /// Not yet a retry: [`spent`](Self::spent) counts it when its attempt runs.
    pub(crate) fn take(&self, now: u64) -> Option<u64> {
        let second = self.pay(now);
        if second.is_none() {
            self.denied.add();
        }
        second
    }

    /// One cost taken at `now` without counting it (a hedge paid here too is counted as a
    /// hedge, not a retry): the second it was charged to, for [`refund`](Self::refund).
    pub(crate) fn pay(&self, now: u64) -> Option<u64> {
        let bucket = self.turn(now / SECOND);
        // The second `turn` charged (a reading older than the head counts in the head's).
        let second = (now / SECOND).max(self.head.load(Relaxed));
        if self.balance() >= COST {
            bucket.fetch_sub(COST, Relaxed);
            Some(second)
        } else {
            None
        }
    }

    /// A retry paid for by [`take`](Self::take) runs: counted.
    pub(crate) fn spent(&self) {
        self.retries.add();
    }

    /// A retry paid for by [`take`](Self::take) at `second` that did not run (its call was
    /// cancelled while it waited, or the breaker refused it): its cost goes back to the
    /// bucket it came from, unless that bucket already left the window (the cost went with
    /// it). Lock-free; racing a turn of the window it is approximate, as a deposit is.
    pub(crate) fn refund(&self, second: u64) {
        if second + BUCKETS as u64 > self.head.load(Relaxed) {
            self.buckets[(second % BUCKETS as u64) as usize].fetch_add(COST, Relaxed);
        }
    }

    /// [`refund`](Self::refund) of what [`pay`](Self::pay) took at `now` (a hedge the other
    /// budget refused, or the breaker refused after all).
    pub(crate) fn refund_at(&self, now: u64) {
        self.refund(now / SECOND);
    }

    /// Whether the budget at `now` grants, from now on, at least what a new one would: no
    /// more withdrawn than deposited over the window, nor over any of its newest seconds
    /// (the older ones leave the window first: a spent budget is not made full by deposits
    /// about to leave). One below full holds state a fresh breaker has not (a keyed breaker
    /// evicting it would refill it). Reads only: the buckets of seconds that left the
    /// window count nothing, whether or not a turn cleared them yet.
    pub(crate) fn is_full(&self, now: u64) -> bool {
        let second = now / SECOND;
        let head = self.head.load(Relaxed);
        let oldest = head.saturating_sub(BUCKETS as u64 - 1);
        let mut net = 0i64;
        for s in (oldest..=head)
            .rev()
            .filter(|s| second < s + BUCKETS as u64)
        {
            net += self.buckets[(s % BUCKETS as u64) as usize].load(Relaxed);
            if net < 0 {
                return false;
            }
        }
        true
    }

    /// The balance in units, reserve included.
    fn balance(&self) -> i64 {
        let sum = self.buckets.iter().map(|b| b.load(Relaxed)).sum::<i64>();
        sum.saturating_add(self.reserve)
    }

    /// The bucket of second `second`, clearing the buckets of the seconds that left the
    /// window since the head last moved. A reading older than the head (a thread that read
    /// the clock before another moved it) counts in the head's bucket.
    fn turn(&self, second: u64) -> &AtomicI64 {
        self.turn_from(self.head.load(Relaxed), second)
    }

    /// [`turn`](Self::turn) by a thread that read `head` as the head. A compare-and-swap lost
    /// to a thread that moved the head to an older second than this one is tried again from
    /// that head: the seconds after it are this thread's to clear, or its bucket would still
    /// hold a second ten seconds old (issue 40). One lost to a newer head leaves the
    /// clearing to its winner: a reading in the few stores until then may count in a bucket
    /// about to be cleared (the approximation the module's docs state).
    fn turn_from(&self, mut head: u64, second: u64) -> &AtomicI64 {
        while second > head {
            match self
                .head
                .compare_exchange_weak(head, second, Relaxed, Relaxed)
            {
                Ok(_) => {
                    // Seconds head+1..=second are new: their buckets held seconds now out
                    // of the window.
                    let stale = (second - head).min(BUCKETS as u64);
                    for s in (second + 1 - stale)..=second {
                        self.buckets[(s % BUCKETS as u64) as usize].store(0, Relaxed);
                    }
                    break;
                }
                Err(moved) => head = moved,
            }
        }
        let newest = second.max(self.head.load(Relaxed));
        &self.buckets[(newest % BUCKETS as u64) as usize]
    }

    /// Retries granted and denied.
    pub(crate) fn counts(&self) -> (u64, u64) {
        (self.retries.since_reset(), self.denied.since_reset())
    }

    /// `(retries, denied)` since creation, resets included (`Handle::counted`).
    pub(crate) fn totals(&self) -> (u64, u64) {
        (self.retries.total(), self.denied.total())
    }

    /// Clears the counts (`Handle::reset`); the balance is kept: a reset says the
    /// dependency is fine, not that it can take more retries.
    pub(crate) fn reset_counts(&self) {
        self.retries.reset();
        self.denied.reset();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn the_floor_is_there_from_the_start() {
        let b = Budget::default();
        let granted = (0..1_000).filter(|_| b.withdraw(0)).count();
        assert_eq!(granted, 100, "10 a second over 10 s");
        assert_eq!(b.counts(), (100, 900));
    }

    #[test]
    fn a_fifth_of_first_attempts_at_twenty_percent() {
        let b = Budget::default();
        for _ in 0..1_000 {
            b.deposit(0, 20);
        }
        let granted = (0..1_000).filter(|_| b.withdraw(0)).count();
        assert_eq!(granted, 200 + 100);
    }

    #[test]
    fn withdrawals_come_back_when_they_leave_the_window() {
        let b = Budget::default();
        assert_eq!((0..200).filter(|_| b.withdraw(0)).count(), 100);
        // Nine seconds on, the spent reserve is still spent.
        assert!(!b.withdraw(9 * SECOND + 999 * MS));
        // Ten seconds on, second 0 left the window.
        assert!(b.withdraw(10 * SECOND));
        assert_eq!((0..200).filter(|_| b.withdraw(10 * SECOND)).count(), 99);
    }

    #[test]
    fn a_long_quiet_time_clears_everything() {
        let b = Budget::default();
        for _ in 0..1_000 {
            b.deposit(0, 100);
        }
        // An hour on: the deposits are gone, the reserve is whole.
        let granted = (0..2_000).filter(|_| b.withdraw(3_600 * SECOND)).count();
        assert_eq!(granted, 100);
    }

    /// Callers racing past the last unit may each pass the check before any subtracts: at
    /// most one retry per concurrent caller beyond the budget, never more.
    #[test]
    fn racing_withdrawals_overdraw_by_at_most_one_each() {
        const THREADS: usize = 8;
        let b = Budget::default();
        let granted: usize = std::thread::scope(|s| {
            let racers: Vec<_> = (0..THREADS)
                .map(|_| s.spawn(|| (0..1_000).filter(|_| b.withdraw(0)).count()))
                .collect();
            racers.into_iter().map(|r| r.join().unwrap()).sum()
        });
        assert!((100..=100 + THREADS).contains(&granted), "{granted}");
        assert_eq!(b.counts().0 as usize, granted);
    }

    #[test]
    fn a_refund_gives_the_cost_back_to_its_bucket() {
        let b = Budget::default();
        let taken: Vec<_> = (0..100).map(|_| b.take(0).unwrap()).collect();
        assert_eq!(b.take(0), None, "the floor is spent");
        b.refund(taken[0]);
        assert_eq!(b.take(SECOND), Some(1), "one retry's cost came back");
        assert_eq!(
            b.counts(),
            (0, 1),
            "neither taken nor refunded counts as a retry"
        );
        // A refund for a bucket that left the window adds nothing.
        let late = Budget::default();
        let second = late.take(0).unwrap();
        late.deposit(10 * SECOND, 1);
        late.refund(second);
        assert_eq!(late.balance(), RESERVE + 1);
    }

    /// Full: what a new budget would grant from now on, at least (eviction keeps a key
    /// whose budget is not).
    #[test]
    fn full_is_what_a_new_budget_grants_from_now_on() {
        let b = Budget::default();
        assert!(b.is_full(0), "new");
        b.deposit(0, 20);
        assert!(b.is_full(0), "deposits only");
        assert!(b.withdraw(SECOND));
        assert!(
            !b.is_full(SECOND),
            "a retry more than the deposits paid for"
        );
        for _ in 0..10 {
            b.deposit(SECOND, 20);
        }
        assert!(b.is_full(SECOND), "paid back in the same second");
        // Deposits of second 1, withdrawals of second 5: full until second 1 leaves the
        // window, and not before, since the deposits leave first.
        for _ in 0..3 {
            assert!(b.withdraw(5 * SECOND));
        }
        assert!(!b.is_full(5 * SECOND));
        // Out of the window, as nobody turned the buckets since: full again.
        assert!(b.is_full(15 * SECOND));
        assert!(b.is_full(3_600 * SECOND));
    }

    /// Issue 40 (suspected, confirmed): a thread that read the head before another moved
    /// it to an older second than this thread's lost its compare-and-swap and went on
    /// without clearing: its bucket still held a second ten seconds old, counted in the
    /// balance (a spent second 0 denied retries at second 10, until a later turn cleared
    /// it, with this thread's deposits).
    #[test]
    fn a_turn_that_loses_its_race_still_clears_its_bucket() {
        let b = Budget::default();
        assert_eq!(
            (0..200).filter(|_| b.withdraw(0)).count(),
            100,
            "second 0 spent"
        );
        // A thread reads the head (second 0); meanwhile another moves it to second 5.
        let seen = b.head.load(Relaxed);
        b.deposit(5 * SECOND, 1);
        // The first thread, at second 10, turns from what it read.
        let bucket = b.turn_from(seen, 10);
        assert_eq!(
            b.balance(),
            RESERVE + 1,
            "second 5's deposit and the reserve"
        );
        assert_eq!(bucket.load(Relaxed), 0, "second 0 left the window");
        assert_eq!(b.head.load(Relaxed), 10);
        assert!(b.withdraw(10 * SECOND));
    }

    /// The reference: every deposit and withdrawal with its second, summed over the window.
    #[derive(Default)]
    struct Model {
        log: Vec<(u64, i64)>,
    }

    impl Model {
        fn balance(&self, second: u64) -> i64 {
            let live = self.log.iter().filter(|(s, _)| second < s + BUCKETS as u64);
            live.map(|(_, u)| u).sum::<i64>() + RESERVE
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Deposit(u32),
        Withdraw,
        Wait(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (1u32..=100).prop_map(Op::Deposit),
            4 => Just(Op::Withdraw),
            1 => (0u64..15_000).prop_map(|ms| Op::Wait(ms * MS)),
        ]
    }

    proptest! {
        /// Never more retries than the budget allows, never a denial within it.
        #[test]
        fn the_budget_matches_its_model(ops in proptest::collection::vec(op(), 1..400)) {
            let b = Budget::default();
            let mut model = Model::default();
            let mut now = 0;
            for (step, op) in ops.into_iter().enumerate() {
                let second = now / SECOND;
                match op {
                    Op::Deposit(p) => {
                        b.deposit(now, p);
                        model.log.push((second, i64::from(p)));
                    }
                    Op::Withdraw => {
                        let allowed = model.balance(second) >= COST;
                        prop_assert_eq!(b.withdraw(now), allowed, "step {}", step);
                        if allowed {
                            model.log.push((second, -COST));
                        }
                    }
                    Op::Wait(d) => now += d,
                }
            }
        }
    }
}
