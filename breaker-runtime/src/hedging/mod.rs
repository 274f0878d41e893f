//! What a breaker keeps for hedging, made by its first hedged call ([`Hedging`]): the
//! latencies its delay is read from, the hedge budget, the counts. A leaf the breaker's
//! shared state holds (as it holds the retry budget); the race of the attempts, which reads
//! the breaker, is `crate::hedge`'s.

mod histogram;

use std::{
    sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed},
    time::Duration,
};

use crate::stats::ResetCount;
use crate::{
    clock::{Clock, Nanos},
    config::{DelayPolicy, HedgePolicy, MAX_HEDGE_DELAY, MIN_HEDGE_DELAY},
    retry::budget::Budget,
};
use histogram::Histogram;

/// Samples the window must hold before a percentile delay (or the short-tail rule) is read.
pub const MIN_SAMPLES: u64 = 100;
/// No hedge while the window's 99th percentile is under this many times its median.
pub const SHORT_TAIL: u64 = 4;
/// Hedges a second the hedge budget allows whatever the traffic.
pub const FLOOR_PER_SECOND: u32 = 1;
/// Samples a slot of the window holds before answers within the first poll are sampled
/// (see [`Hedging::answered_at_once`]).
pub(crate) const SAMPLE_AFTER: u32 = 1_000;
/// One answer within the first poll in this many is recorded (and deposits), for all of
/// them, once the window is full enough.
pub(crate) const SAMPLE_ONE_IN: u32 = 16;
/// Hedging pauses once this many hedged calls in a row were still unanswered at the delay
/// (a dependency turned slow for everyone), until a first attempt answers before its delay
/// or a hedge wins; see [`breaker::hedge`](crate::hedge).
pub const OVERDUE_IN_A_ROW: u64 = 5;
/// While paused, the first trial hedge waits this long; each one after it twice as long as
/// the one before, up to [`MAX_TRIAL_AFTER`].
pub const TRIAL_AFTER: Duration = Duration::from_secs(1);
/// The longest wait between two trial hedges while paused.
pub const MAX_TRIAL_AFTER: Duration = Duration::from_secs(32);

/// The retry budget a hedge pays too, with its percent: `Some` when the breaker retries.
pub(crate) type RetryBudget<'a> = Option<(&'a Budget, u32)>;

/// How often the delay is read again from the window: reading merges the window's bins
/// (about 900 loads), once a second rather than once a call.
const REFRESH: Nanos = 1_000_000_000;

/// One breaker's (one key's) hedging state.
#[derive(Debug)]
pub(crate) struct Hedging {
    latencies: Histogram,
    budget: Budget,
    hedges: ResetCount,
    won: ResetCount,
    denied: ResetCount,
    /// Hedged calls in a row whose first attempt was unanswered at the delay: hedging is
    /// paused past [`OVERDUE_IN_A_ROW`].
    overdue: AtomicU64,
    /// While paused: when the next trial hedge may go, and the trials so far.
    trial_at: AtomicU64,
    trials: AtomicU32,
    /// Answers within the first poll are sampled ([`Hedging::answered_at_once`]).
    sampling: AtomicBool,
    /// Answers within the first poll while sampling: one in [`SAMPLE_ONE_IN`] is recorded.
    answers: AtomicU32,
    /// What the window said when last read (see [`Reading`]), and when (plus 1; 0: never).
    reading: AtomicU64,
    read_at: AtomicU64,
    /// When a hedge last won (plus 1; 0: never): the short-tail rule waits a window after it.
    won_at: AtomicU64,
}

impl Default for Hedging {
    fn default() -> Self {
        Hedging {
            latencies: Histogram::default(),
            budget: Budget::with_floor(FLOOR_PER_SECOND),
            hedges: ResetCount::new(),
            won: ResetCount::new(),
            denied: ResetCount::new(),
            overdue: AtomicU64::new(0),
            trial_at: AtomicU64::new(0),
            trials: AtomicU32::new(0),
            sampling: AtomicBool::new(false),
            answers: AtomicU32::new(0),
            reading: AtomicU64::new(0),
            read_at: AtomicU64::new(0),
            won_at: AtomicU64::new(0),
        }
    }
}

/// What the window said, in one word: a short tail (bit 0), the percentile asked for (in
/// hundredths, bits 1..15) and its latency in microseconds (from bit 15; at most the ceiling,
/// 2 000 000).
struct Reading {
    short_tail: bool,
    hundredths: u32,
    micros: u64,
}

impl Reading {
    fn word(&self) -> u64 {
        u64::from(self.short_tail) | u64::from(self.hundredths & 0x3fff) << 1 | self.micros << 15
    }

    fn of(w: u64) -> Reading {
        Reading {
            short_tail: w & 1 != 0,
            hundredths: ((w >> 1) & 0x3fff) as u32,
            micros: w >> 15,
        }
    }
}

impl Hedging {
    /// Records an attempt's latency.
    pub(crate) fn record(&self, now: Nanos, latency: Nanos) {
        self.latencies.record(now, latency, 1);
    }

    /// A first attempt answered (won) within its first poll: it deposits, and its latency is
    /// recorded as 0, without a clock read for its timing: whatever that poll took, no hedge
    /// could have gone before it returned, so for the delay it is as fast as an answer gets
    /// (and the delay is at least [`MIN_HEDGE_DELAY`] anyway). Once a slot of the window has
    /// held [`SAMPLE_AFTER`] samples, only one such answer in [`SAMPLE_ONE_IN`] reads the
    /// clock, deposits and is recorded, each [`SAMPLE_ONE_IN`] times: the budget and the
    /// window get what they would on average, and the others cost three loads and a store
    /// (issue 43's +30 ns over a plain call).
    ///
    /// The one in [`SAMPLE_ONE_IN`] is counted by a load and a store, not an atomic add: two
    /// threads that read the same count both sample or both skip, which keeps the average
    /// (a count shared is as likely a sampled one as any), and no `lock` prefix is paid.
    #[inline]
    pub(crate) fn answered_at_once<'a>(
        &self,
        percent: impl FnOnce() -> u32,
        retry: impl FnOnce() -> RetryBudget<'a>,
        clock: &impl Clock,
    ) {
        self.on_time();
        let weight = match self.sampling.load(Relaxed) {
            false => 1,
            true => {
                let n = self.answers.load(Relaxed);
                self.answers.store(n.wrapping_add(1), Relaxed);
                if !n.is_multiple_of(SAMPLE_ONE_IN) {
                    return;
                }
                SAMPLE_ONE_IN
            }
        };
        self.sampled(percent(), retry(), clock.now(), weight);
    }

    /// [`answered_at_once`](Self::answered_at_once)'s deposit and record, for `weight`
    /// answers.
    #[inline(never)]
    fn sampled(&self, percent: u32, retry: RetryBudget<'_>, now: Nanos, weight: u32) {
        self.budget.deposit(now, percent * weight);
        if let Some((budget, percent)) = retry {
            budget.deposit(now, percent * weight);
        }
        if self.latencies.record(now, 0, weight) >= SAMPLE_AFTER && weight == 1 {
            self.sampling.store(true, Relaxed);
        }
    }

    /// Samples in the window (tests).
    #[cfg(test)]
    pub(crate) fn samples(&self, now: Nanos) -> u64 {
        self.latencies.samples(now)
    }

    /// The delay before a hedge under `policy` at `now`, or `None`: no hedge for this call
    /// (too few samples for a percentile, the percentile at the ceiling, a short tail).
    pub(crate) fn delay(&self, policy: &HedgePolicy, now: Nanos) -> Option<Duration> {
        let hundredths = match policy.delay {
            DelayPolicy::Percentile(p) => p,
            DelayPolicy::Fixed(_) => 9_500, // read only for the tail
        };
        let reading = if self.latencies.samples(now) < MIN_SAMPLES {
            None
        } else {
            Some(self.read(hundredths, now))
        };
        match (policy.delay, reading) {
            (_, Some(r)) if r.short_tail && !self.won_lately(now) => None,
            (DelayPolicy::Fixed(d), _) => Some(d),
            (DelayPolicy::Percentile(_), None) => None,
            (DelayPolicy::Percentile(_), Some(r)) => {
                let at = Duration::from_micros(r.micros);
                (at < MAX_HEDGE_DELAY).then(|| at.max(MIN_HEDGE_DELAY))
            }
        }
    }

    /// The window's reading for `hundredths`, at most [`REFRESH`] old.
    fn read(&self, hundredths: u32, now: Nanos) -> Reading {
        let at = self.read_at.load(Relaxed);
        if at != 0 && now < (at - 1).saturating_add(REFRESH) {
            let r = Reading::of(self.reading.load(Relaxed));
            if r.hundredths == hundredths {
                return r;
            }
        }
        let merged = self.latencies.merged(now);
        let micros = |h| merged.percentile(h).unwrap_or(0) / 1_000;
        let r = Reading {
            short_tail: micros(9_900) < SHORT_TAIL * micros(5_000),
            hundredths,
            micros: micros(hundredths),
        };
        self.reading.store(r.word(), Relaxed);
        self.read_at.store(now.saturating_add(1), Relaxed);
        r
    }

    /// A first attempt the breaker admitted: it pays into the hedge budget, and into the retry
    /// budget when the breaker retries too.
    pub(crate) fn deposit(&self, retry: RetryBudget<'_>, policy: &HedgePolicy, now: Nanos) {
        self.budget.deposit(now, policy.percent);
        if let Some((budget, percent)) = retry {
            budget.deposit(now, percent);
        }
    }

    /// Pays for a hedge from the hedge budget, and from the retry budget when the breaker
    /// retries too: `false` when either is spent (nothing is paid then).
    pub(crate) fn pay(&self, retry: RetryBudget<'_>, now: Nanos) -> bool {
        if self.budget.pay(now).is_none() {
            return false;
        }
        if retry.is_some_and(|(budget, _)| budget.pay(now).is_none()) {
            self.budget.refund_at(now);
            return false;
        }
        true
    }

    /// A hedge due but not sent: no target took it, or a budget was spent.
    pub(crate) fn deny(&self) {
        self.denied.add();
    }

    /// A granted hedge the breaker refused after all (it opened, or its last seat went,
    /// meanwhile): its payment back, and counted denied.
    pub(crate) fn refused(&self, retry: RetryBudget<'_>, now: Nanos) {
        self.budget.refund_at(now);
        if let Some((budget, _)) = retry {
            budget.refund_at(now);
        }
        self.denied.add();
    }

    /// A hedge sent.
    pub(crate) fn sent(&self) {
        self.hedges.add();
    }

    /// Whether a hedge won within the window's span: the tail is then long whatever the
    /// window says. Hedges that win hide the tail they cut (the slow first attempts are
    /// dropped, unrecorded), so the short-tail rule alone switched hedging off for the
    /// dependency it suits, until the tail showed again: half the slow calls unhedged.
    /// [`OVERDUE_IN_A_ROW`] still stops hedging a dependency turned slow for everyone.
    fn won_lately(&self, now: Nanos) -> bool {
        let at = self.won_at.load(Relaxed);
        at != 0 && now < (at - 1).saturating_add(histogram::WINDOW)
    }

    /// A hedge whose answer was returned at `now`: hedges help, whatever ran before it.
    pub(crate) fn won(&self, now: Nanos) {
        self.won.add();
        self.won_at.store(now.saturating_add(1), Relaxed);
        self.on_time();
    }

    /// A hedged call whose hedge came due by the delay (its first attempt still unanswered
    /// then), once a call: whether its hedge may go on to the budget.
    ///
    /// Slow for everyone, but not for long enough to show in the window (the dependency
    /// turned slow a moment ago: the window's 30 s still say fast, the delay is short and the
    /// budget saved up), every call is overdue at once. Hedges that lose to their first
    /// attempts would say so too, but only a whole slow latency later, by when every call in
    /// flight would have sent its hedge; calls overdue in a row say it at the delay. So
    /// hedging pauses past [`OVERDUE_IN_A_ROW`] overdue calls in a row, and resumes at the
    /// first first attempt that answers before the delay, or hedge that wins
    /// ([`on_time`](Self::on_time)). While paused, one trial hedge goes [`TRIAL_AFTER`] after
    /// the pause, then after twice as long each time (up to [`MAX_TRIAL_AFTER`]): a trial
    /// that wins ends the pause (one replica stuck, the others answering).
    ///
    /// A dependency slow for a few calls is not paused: with the p95 delay about 5 % of
    /// calls are overdue, five in a row about once in 3·10⁶, and each hedge that wins ends
    /// the run. A paused hedge is a denied one. Relaxed atomics, approximate under
    /// contention as the budget is.
    pub(crate) fn overdue(&self, now: Nanos) -> bool {
        let before = self.overdue.fetch_add(1, Relaxed);
        if before < OVERDUE_IN_A_ROW {
            return true;
        }
        let after = |trials: u32| {
            let wait = TRIAL_AFTER
                .saturating_mul(1 << trials.min(5))
                .min(MAX_TRIAL_AFTER);
            now.saturating_add(wait.as_nanos() as Nanos)
        };
        if before == OVERDUE_IN_A_ROW {
            // The pause begins.
            self.trials.store(0, Relaxed);
            self.trial_at.store(after(0), Relaxed);
            return false;
        }
        let at = self.trial_at.load(Relaxed);
        if now < at {
            return false;
        }
        let trials = self.trials.fetch_add(1, Relaxed) + 1;
        self.trial_at
            .compare_exchange(at, after(trials), Relaxed, Relaxed)
            .is_ok()
    }

    /// Whether hedging is paused: for the hedges after a call's first (a failure's, or the
    /// second of `hedge = 2`), which go only while it is not.
    pub(crate) fn paused(&self) -> bool {
        self.overdue.load(Relaxed) > OVERDUE_IN_A_ROW
    }

    /// A hedged call's first attempt answered before its hedge came due: the run of overdue
    /// calls ends (a load, and a store only when there was a run).
    #[inline]
    pub(crate) fn on_time(&self) {
        if self.overdue.load(Relaxed) != 0 {
            self.overdue.store(0, Relaxed);
        }
    }

    /// `(hedges, hedges_won, hedges_denied)`.
    pub(crate) fn counts(&self) -> (u64, u64, u64) {
        (
            self.hedges.since_reset(),
            self.won.since_reset(),
            self.denied.since_reset(),
        )
    }

    /// `(hedges, won, denied)` since creation, resets included (`Handle::counted`).
    pub(crate) fn totals(&self) -> (u64, u64, u64) {
        (self.hedges.total(), self.won.total(), self.denied.total())
    }

    /// Clears the counts (`Handle::reset`); the budget and the latencies are kept.
    pub(crate) fn reset_counts(&self) {
        self.hedges.reset();
        self.won.reset();
        self.denied.reset();
    }
}
