//! The adaptive limit's algorithm, sequential: Netflix concurrency-limits' `VegasLimit`
//! (`concurrency-limits-core/src/main/java/com/netflix/concurrency/limits/limit/VegasLimit.java`)
//! fed by its `WindowedLimit` (same directory), with their defaults. [`super::limit`] runs it
//! behind a lock that a contended caller skips.
//!
//! Vegas, per window of samples:
//! - every `jitter · 30 · L` windows (`jitter` uniform in [0.5, 1)) a no-load probe starts
//!   (so a dependency that got permanently slower does not pin the limit low); a window
//!   faster than the no-load RTT lowers it; neither moves the limit;
//! - otherwise `queue = ⌈L · (1 − rtt_noload / rtt)⌉`, and with `l = max(1, ⌊log10 L⌋)`:
//!   a drop or `queue > 6l` → `L − l` (and at most `(L + in_flight) / 2` when `in_flight · 2
//!   < L`); else if `in_flight · 2 < L` → unchanged (not using the limit, so no evidence for
//!   growing it); `queue ≤ l` → `L + 6l`; `queue < 3l` → `L + l`; otherwise unchanged. `L`
//!   stays in `1..=max` (smoothing 1.0).
//!
//! The window (Netflix's `WindowedLimit`): samples accumulate (sum and minimum of RTTs, the
//! largest in-flight count, whether any call dropped); once more than 10 have arrived and one
//! ends after the window's end, Vegas gets the window's average RTT, largest in-flight count
//! and drop flag, and the next window ends `clamp(2 · min RTT, 1 ms, 1 s)` later.
//!
//! Where we differ from Netflix, and why:
//! - **the probe drains**: Netflix's probe takes the next window's RTT as the new no-load RTT.
//!   Under sustained overload (the case a client's bulkhead exists for) that RTT is a loaded
//!   one, and the limit then settles wherever it was, above capacity, until the next probe
//!   (our simulated dependency showed it: 45 against a capacity of 20). Ours does what BBR's
//!   `PROBE_RTT` and Envoy's adaptive concurrency (`gradient_controller.cc`,
//!   `min_concurrency` 3) do: hold the limit at [`PROBE_LIMIT`] until [`PROBE_SAMPLES`] calls
//!   admitted with at most that many in flight have answered, and take their average RTT.
//!   The probe costs a few round trips of reduced concurrency every `15..30 · L` windows;
//! - window bounds 1 ms..1 s instead of 1 s..1 s (Netflix's floor is 100 ms): a client's
//!   dependency answering in 10 ms gets an update every 20 ms, so a limit reaches its
//!   level in a second rather than a minute;
//! - no 100 µs floor on samples: an in-process call is a legitimate sample here;
//! - a drop counts towards the window's 10 samples, and a window of drops only (every call
//!   timed out) lowers the limit; in Netflix such a window never closes and the limit never
//!   moves while everything times out;
//! - **a queue lowers the limit even when it is not used**: Netflix checks `in_flight · 2 <
//!   L` before the queue, so a limit above twice the callers' concurrency never comes down
//!   (issue 28: 124 against a capacity of 16, seven seconds after the burst that raised it,
//!   with 60 callers). The check guards growth only; a queue still shrinks the limit, and
//!   the part above twice what is used halves at each such window (RFC 7661's decay of an
//!   application-limited congestion window): stepping down through it one ⌊log10 L⌋ a
//!   window took over ten seconds from 129 with 60 callers;
//! - the engine feeds failed calls as drops, never as RTT samples (`core::shed`): a burst
//!   of fast errors looks like a dependency with no queue;
//! - `⌊log10 L⌋` for every `L` (Netflix switches to a square root at 1000, an accident of
//!   its lookup table; `Log10RootIntFunction` keeps log10).

use crate::clock::Nanos;

use super::random::{splitmix64, unit};

/// The limit a limiter starts at (Netflix's `initialLimit`), or `max` if lower.
pub(crate) const INITIAL_LIMIT: u32 = 20;
/// Probe for a new no-load RTT every `jitter · PROBE_MULTIPLIER · L` windows.
const PROBE_MULTIPLIER: f64 = 30.0;
/// The limit during a no-load probe (Envoy's adaptive concurrency `min_concurrency`).
pub(crate) const PROBE_LIMIT: u32 = 3;
/// Answers that end a no-load probe.
pub(crate) const PROBE_SAMPLES: u32 = 10;
/// A window closes only with more than this many samples (Netflix's `windowSize`).
pub(crate) const WINDOW_SAMPLES: u32 = 10;
/// The shortest window (ours; Netflix: 1 s, at least 100 ms).
pub(crate) const MIN_WINDOW: Nanos = 1_000_000;
/// The longest window (Netflix's default).
pub(crate) const MAX_WINDOW: Nanos = 1_000_000_000;

/// `max(1, ⌊log10 n⌋)`: Vegas' step, and the unit of its thresholds.
pub(crate) fn log10_step(n: u32) -> u32 {
    n.checked_ilog10().unwrap_or(0).max(1)
}

/// What a closed window hands to Vegas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Aggregate {
    /// The average RTT of the window's non-dropped calls; `None` if every call dropped.
    pub(crate) rtt: Option<Nanos>,
    /// The largest in-flight count a sample reported.
    pub(crate) in_flight: u32,
    /// Whether any call in the window dropped.
    pub(crate) dropped: bool,
}

/// The samples of the current window.
#[derive(Debug, Clone)]
pub(crate) struct SampleWindow {
    sum: u64,
    rtts: u32,
    drops: u32,
    min: Nanos,
    in_flight: u32,
    /// When the window may close: a sample ending after it closes it (if it has enough).
    ends: Nanos,
}

impl Default for SampleWindow {
    fn default() -> Self {
        Self::after(0)
    }
}

impl SampleWindow {
    fn after(ends: Nanos) -> Self {
        Self {
            sum: 0,
            rtts: 0,
            drops: 0,
            min: Nanos::MAX,
            in_flight: 0,
            ends,
        }
    }

    /// Adds the sample of a call that ended at `end` (its RTT, or `None` for a drop) and that
    /// saw `in_flight` calls (itself included) when admitted; returns the window's aggregate
    /// if this sample closed it.
    pub(crate) fn add(
        &mut self,
        end: Nanos,
        rtt: Option<Nanos>,
        in_flight: u32,
    ) -> Option<Aggregate> {
        match rtt {
            Some(rtt) => {
                self.sum = self.sum.saturating_add(rtt);
                self.rtts += 1;
                self.min = self.min.min(rtt);
            }
            None => self.drops += 1,
        }
        self.in_flight = self.in_flight.max(in_flight);
        if end <= self.ends || self.rtts + self.drops <= WINDOW_SAMPLES {
            return None;
        }
        let aggregate = Aggregate {
            rtt: (self.rtts > 0).then(|| self.sum / u64::from(self.rtts)),
            in_flight: self.in_flight,
            dropped: self.drops > 0,
        };
        let length = if self.rtts > 0 {
            self.min.saturating_mul(2).clamp(MIN_WINDOW, MAX_WINDOW)
        } else {
            MIN_WINDOW
        };
        *self = Self::after(end.saturating_add(length));
        Some(aggregate)
    }
}

/// Vegas' state.
#[derive(Debug, Clone)]
pub(crate) struct Vegas {
    /// `L`, in `1.0..=max` (fractional only through nothing today: smoothing is 1.0 and the
    /// steps are whole, but Netflix keeps it a double and so do we).
    estimate: f64,
    max: f64,
    /// The no-load RTT; 0 until the first window.
    rtt_noload: Nanos,
    probe_count: u64,
    probe_jitter: f64,
    /// The probe jitter's generator: owned, so a seeded limiter is reproducible.
    rng: u64,
    /// A no-load probe in progress.
    probe: Option<RttProbe>,
}

/// A no-load RTT probe (Vegas's word; not a half-open probe call): the limit held at
/// [`PROBE_LIMIT`] until [`PROBE_SAMPLES`] calls admitted with at most that many in flight
/// have answered.
#[derive(Debug, Clone, Copy, Default)]
struct RttProbe {
    sum: u64,
    samples: u32,
}

impl Vegas {
    /// Vegas with limits in `1..=max`, starting at `min(20, max)`, its probe jitter drawn
    /// from a generator seeded with `seed`.
    pub(crate) fn new(max: u32, seed: u64) -> Self {
        let max = max.max(1);
        let mut vegas = Self {
            estimate: f64::from(INITIAL_LIMIT.min(max)),
            max: f64::from(max),
            rtt_noload: 0,
            probe_count: 0,
            probe_jitter: 0.0,
            rng: seed,
            probe: None,
        };
        vegas.reset_probe_jitter();
        vegas
    }

    /// The current limit: `⌊L⌋`, at most [`PROBE_LIMIT`] during a probe.
    pub(crate) fn limit(&self) -> u32 {
        let limit = self.estimate as u32;
        match self.probe {
            Some(_) => limit.min(PROBE_LIMIT),
            None => limit,
        }
    }

    /// Whether a no-load probe is in progress.
    pub(crate) fn probing(&self) -> bool {
        self.probe.is_some()
    }

    /// A sample during a probe: only calls admitted with at most [`PROBE_LIMIT`] in flight
    /// measure the no-load RTT (the others were admitted before the probe, under load).
    /// Returns whether the probe ended.
    pub(crate) fn probe_sample(&mut self, rtt: Nanos, in_flight: u32) -> bool {
        let Some(probe) = &mut self.probe else {
            return false;
        };
        if in_flight > PROBE_LIMIT {
            return false;
        }
        probe.sum = probe.sum.saturating_add(rtt);
        probe.samples += 1;
        if probe.samples < PROBE_SAMPLES {
            return false;
        }
        self.rtt_noload = (probe.sum / u64::from(probe.samples)).max(1);
        self.probe = None;
        self.probe_count = 0;
        self.reset_probe_jitter();
        true
    }

    /// A drop during a probe lowers `L` as usual (the probe's cap stays).
    pub(crate) fn probe_drop(&mut self) {
        self.set(self.estimate - f64::from(log10_step(self.estimate as u32)));
    }

    fn reset_probe_jitter(&mut self) {
        self.probe_jitter = 0.5 + 0.5 * unit(splitmix64(&mut self.rng));
    }

    /// One closed window.
    pub(crate) fn update(&mut self, window: Aggregate) {
        let Some(rtt) = window.rtt else {
            // Every call in the window dropped: no RTT to judge, only the drops.
            self.set(self.estimate - f64::from(log10_step(self.estimate as u32)));
            return;
        };
        let rtt = rtt.max(1);
        self.probe_count += 1;
        if self.probe_jitter * PROBE_MULTIPLIER * self.estimate <= self.probe_count as f64 {
            self.probe = Some(RttProbe::default());
            return;
        }
        if self.rtt_noload == 0 || rtt < self.rtt_noload {
            self.rtt_noload = rtt;
            return;
        }
        let queue = (self.estimate * (1.0 - self.rtt_noload as f64 / rtt as f64)).ceil() as i64;
        let step = log10_step(self.estimate as u32);
        let (threshold, alpha, beta) = (i64::from(step), 3 * i64::from(step), 6 * i64::from(step));
        let used = f64::from(window.in_flight);
        let next = if window.dropped || queue > beta {
            let lower = self.estimate - f64::from(step);
            if used * 2.0 < self.estimate {
                // A queue, or drops, with more than half the limit unused: the unused part
                // was never validated; halve it (RFC 7661's decay of an application-limited
                // window) rather than step down through it one ⌊log10 L⌋ a window.
                lower.min((self.estimate + used) / 2.0)
            } else {
                lower
            }
        } else if used * 2.0 < self.estimate {
            // Not using the limit: no evidence for growing it (a queue lowers it above).
            return;
        } else if queue <= threshold {
            self.estimate + beta as f64
        } else if queue < alpha {
            self.estimate + f64::from(step)
        } else {
            return;
        };
        self.set(next);
    }

    fn set(&mut self, next: f64) {
        self.estimate = next.clamp(1.0, self.max);
    }
}

/// Vegas fed by its window, one sample at a time: what [`super::limit`] runs under its lock.
#[derive(Debug, Clone)]
pub(crate) struct Estimator {
    window: SampleWindow,
    vegas: Vegas,
}

impl Estimator {
    pub(crate) fn new(max: u32, seed: u64) -> Self {
        Self {
            window: SampleWindow::default(),
            vegas: Vegas::new(max, seed),
        }
    }

    pub(crate) fn limit(&self) -> u32 {
        self.vegas.limit()
    }

    /// Back to the start: the initial limit, no no-load RTT, an empty window (the probe
    /// jitter's generator goes on).
    pub(crate) fn restart(&mut self) {
        let max = self.vegas.max as u32;
        let seed = self.vegas.rng;
        *self = Self::new(max, seed);
    }

    /// The sample of a call that ended at `end` (its RTT, `None` for a drop), admitted with
    /// `in_flight` calls in flight (itself included).
    pub(crate) fn sample(&mut self, end: Nanos, rtt: Option<Nanos>, in_flight: u32) {
        if self.vegas.probing() {
            let ended = match rtt {
                Some(rtt) => self.vegas.probe_sample(rtt, in_flight),
                None => {
                    self.vegas.probe_drop();
                    false
                }
            };
            if ended {
                // The window restarts with the calls admitted after the probe.
                self.window = SampleWindow::after(end);
            }
        } else if let Some(aggregate) = self.window.add(end, rtt, in_flight) {
            self.vegas.update(aggregate);
        }
    }
}
