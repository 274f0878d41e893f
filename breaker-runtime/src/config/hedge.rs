//! The hedging keys of [`Config`] (`hedge`, `hedge_delay`, `hedge_budget`): their builder
//! methods, their checks, and what a validated configuration keeps of them
//! ([`HedgePolicy`], and the one word the call path reads it from). The hedged call, its
//! delay and its budget are `crate::hedge`'s.

use std::time::Duration;

use crate::{Config, ConfigError};

/// The default share of first attempts that may be hedged, in percent.
pub const DEFAULT_HEDGE_BUDGET_PERCENT: u32 = 5;
/// The most hedges (attempts after the first) one call may send.
pub const MAX_HEDGES: u32 = 4;
/// The shortest delay before a hedge: a computed percentile below it is raised to it.
pub const MIN_HEDGE_DELAY: Duration = Duration::from_millis(1);
/// The longest delay before a hedge. A computed percentile at it or above means the
/// dependency is slow for everyone: no hedge is sent then.
pub const MAX_HEDGE_DELAY: Duration = Duration::from_secs(2);

/// How long a hedged call waits for its first attempt before it sends a hedge
/// ([`Config::hedge_delay`]).
///
/// ```
/// use std::time::Duration;
/// use breaker::{Config, HedgeDelay};
///
/// let adaptive = Config::default().hedge(1).hedge_delay(HedgeDelay::Percentile(99.0));
/// let fixed = Config::default().hedge(1).hedge_delay(HedgeDelay::Fixed(Duration::from_millis(20)));
/// assert_ne!(adaptive, fixed);
/// assert_eq!(HedgeDelay::default(), HedgeDelay::Percentile(95.0));
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HedgeDelay {
    /// This percentile (50 to 99.9) of the breaker's attempt latencies over the last 30
    /// seconds (successes and slow calls; fast failures excluded), clamped to 1 ms … 2 s. No
    /// hedge until the window holds 100 samples, none when the percentile reaches 2 s.
    Percentile(f64),
    /// A fixed delay, from 1 ms to 2 s.
    Fixed(Duration),
}

impl HedgeDelay {
    /// The default: [`Percentile(95.0)`](HedgeDelay::Percentile).
    pub const DEFAULT: HedgeDelay = HedgeDelay::Percentile(95.0);
}

impl Default for HedgeDelay {
    fn default() -> Self {
        HedgeDelay::DEFAULT
    }
}

/// The hedging keys of a [`Config`], as given.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct HedgeConfig {
    pub(crate) hedges: Option<u32>,
    pub(crate) delay: Option<HedgeDelay>,
    pub(crate) percent: Option<u32>,
}

impl HedgeConfig {
    /// `Default::default()`, as a constant (for `Config::DEFAULT`).
    pub(crate) const DEFAULT: HedgeConfig = HedgeConfig {
        hedges: None,
        delay: None,
        percent: None,
    };
}

/// The delay of a validated policy: a percentile in hundredths (so the policy is `Eq`), or
/// a duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DelayPolicy {
    /// Hundredths of a percent: 9500 is p95, 9990 p99.9.
    Percentile(u32),
    Fixed(Duration),
}

/// The hedging keys, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HedgePolicy {
    /// Hedges a call may send, after its first attempt (1..=4).
    pub(crate) hedges: u32,
    pub(crate) delay: DelayPolicy,
    /// Units a first attempt deposits in the hedge budget (`hedge_budget`, 1..=100).
    pub(crate) percent: u32,
}

impl HedgePolicy {
    /// No hedge: a keyed breaker's hedged call without `hedge` (one attempt, to the first
    /// key that admits it).
    pub(crate) const NONE: HedgePolicy = HedgePolicy {
        hedges: 0,
        delay: DelayPolicy::Percentile(9_500),
        percent: 0,
    };
}

impl HedgeConfig {
    pub(crate) fn validate(&self) -> Result<Option<HedgePolicy>, ConfigError> {
        let Some(hedges) = self.hedges else {
            // As the attribute: a key that would change nothing is a mistake, said so.
            for (field, set) in [
                ("hedge_delay", self.delay.is_some()),
                ("hedge_budget", self.percent.is_some()),
            ] {
                if set {
                    return Err(ConfigError::new(field, "has no effect without `hedge`"));
                }
            }
            return Ok(None);
        };
        if !(1..=MAX_HEDGES).contains(&hedges) {
            return Err(ConfigError::new(
                "hedge",
                format!(
                    "counts the attempts after the first: it must be from 1 to {MAX_HEDGES} \
                     (got {hedges}; leave it out for no hedging)"
                ),
            ));
        }
        let percent = self.percent.unwrap_or(DEFAULT_HEDGE_BUDGET_PERCENT);
        if !(1..=100).contains(&percent) {
            return Err(ConfigError::new(
                "hedge_budget",
                format!(
                    "must be a percent from 1 to 100 (got {percent}; to hedge nothing, leave \
                     `hedge` out)"
                ),
            ));
        }
        let delay = match self.delay.unwrap_or_default() {
            HedgeDelay::Percentile(p) if (50.0..=99.9).contains(&p) => {
                DelayPolicy::Percentile((p * 100.0).round() as u32)
            }
            HedgeDelay::Percentile(p) => {
                return Err(ConfigError::new(
                    "hedge_delay",
                    format!("must be a percentile from 50 to 99.9 (got {p})"),
                ))
            }
            HedgeDelay::Fixed(d) if (MIN_HEDGE_DELAY..=MAX_HEDGE_DELAY).contains(&d) => {
                DelayPolicy::Fixed(d)
            }
            HedgeDelay::Fixed(d) => {
                return Err(ConfigError::new(
                    "hedge_delay",
                    format!("must be a duration from 1ms to 2s (got {d:?})"),
                ))
            }
        };
        Ok(Some(HedgePolicy {
            hedges,
            delay,
            percent,
        }))
    }
}

/// The hedge word (`Live`): hedges in its low 3 bits (0: no hedging), `hedge_budget`'s
/// percent in the next 7, a flag for a fixed delay, then the delay: hundredths of a percent,
/// or nanoseconds (at most 2 s: 31 bits). One word, so a hedged call reads one policy whole
/// without a lock.
const PERCENT_SHIFT: u32 = 3;
const FIXED: u64 = 1 << 10;
const DELAY_SHIFT: u32 = 11;

impl HedgePolicy {
    /// This policy as one word, never 0.
    pub(crate) fn word(&self) -> u64 {
        let (fixed, delay) = match self.delay {
            DelayPolicy::Percentile(p) => (0, u64::from(p)),
            DelayPolicy::Fixed(d) => (FIXED, crate::clock::to_nanos(d)),
        };
        u64::from(self.hedges & 7)
            | u64::from(self.percent & 0x7f) << PERCENT_SHIFT
            | fixed
            | delay << DELAY_SHIFT
    }

    /// The policy of a word from [`word`](Self::word); `None` for 0.
    pub(crate) fn from_word(w: u64) -> Option<HedgePolicy> {
        let hedges = (w & 7) as u32;
        (hedges != 0).then(|| {
            let value = w >> DELAY_SHIFT;
            HedgePolicy {
                hedges,
                percent: ((w >> PERCENT_SHIFT) & 0x7f) as u32,
                delay: if w & FIXED != 0 {
                    DelayPolicy::Fixed(Duration::from_nanos(value))
                } else {
                    DelayPolicy::Percentile(value as u32)
                },
            }
        })
    }
}

impl Config {
    /// Hedge a slow call: after a delay ([`hedge_delay`](Self::hedge_delay)), send the same
    /// call again, up to `hedges` more attempts (1 to 4), and take the first answer. Used by
    /// [`Breaker::call_hedged`](crate::Breaker::call_hedged) and
    /// [`call_hedged_classified`](crate::Breaker::call_hedged_classified); see
    /// [`breaker::hedge`](crate::hedge) for the rules (the budget, and when no hedge is
    /// sent).
    ///
    /// A `Config` may have both `hedge` and [`retry`](Self::retry) (a breaker shared by
    /// methods that hedge and methods that retry); the hedges then draw on the retry budget
    /// too. The attribute refuses both on one function, as gRPC does on one method.
    ///
    /// ```
    /// use breaker::{Breaker, Config};
    ///
    /// let search = Breaker::try_new("docs::hedge", Config::default().hedge(1)).unwrap();
    /// let err = Breaker::try_new("docs::hedge_bad", Config::default().hedge(5)).unwrap_err();
    /// assert_eq!(err.field(), "hedge");
    /// # drop(search);
    /// ```
    pub const fn hedge(mut self, hedges: u32) -> Self {
        self.hedge.hedges = Some(hedges);
        self
    }
    /// The delay before each hedge (default [`HedgeDelay::Percentile(95.0)`](HedgeDelay)):
    /// a percentile of the breaker's attempt latencies (50 to 99.9), or a fixed duration
    /// (1 ms to 2 s). Needs [`hedge`](Self::hedge).
    pub const fn hedge_delay(mut self, delay: HedgeDelay) -> Self {
        self.hedge.delay = Some(delay);
        self
    }
    /// The share of first attempts (1 to 100 percent, default 5) that may be hedged over ten
    /// seconds, besides a floor of 1 hedge a second. Needs [`hedge`](Self::hedge).
    ///
    /// ```
    /// use breaker::{Breaker, Config};
    ///
    /// let err = Breaker::try_new("docs::hedge_budget", Config::default().hedge_budget(10))
    ///     .unwrap_err();
    /// assert_eq!(err.field(), "hedge_budget"); // without `hedge`
    /// ```
    pub const fn hedge_budget(mut self, percent: u32) -> Self {
        self.hedge.percent = Some(percent);
        self
    }
}

#[cfg(all(test, not(breaker_loom)))]
mod tests {
    use super::*;

    fn field(config: Config) -> &'static str {
        config.validate().unwrap_err().field()
    }

    #[test]
    fn each_bad_key_is_named() {
        let ms = Duration::from_millis;
        assert_eq!(field(Config::default().hedge(0)), "hedge");
        assert_eq!(field(Config::default().hedge(5)), "hedge");
        assert_eq!(
            field(Config::default().hedge(1).hedge_budget(0)),
            "hedge_budget"
        );
        assert_eq!(
            field(Config::default().hedge(1).hedge_budget(101)),
            "hedge_budget"
        );
        for p in [49.9, 99.95, 100.0, f64::NAN, -1.0] {
            let c = Config::default()
                .hedge(1)
                .hedge_delay(HedgeDelay::Percentile(p));
            assert_eq!(field(c), "hedge_delay", "p{p}");
        }
        for d in [Duration::ZERO, Duration::from_micros(999), ms(2001)] {
            let c = Config::default().hedge(2).hedge_delay(HedgeDelay::Fixed(d));
            assert_eq!(field(c), "hedge_delay", "{d:?}");
        }
        let alone = Config::default().hedge_delay(HedgeDelay::Fixed(ms(5)));
        assert_eq!(field(alone), "hedge_delay");
        assert_eq!(field(Config::default().hedge_budget(5)), "hedge_budget");
    }

    #[test]
    fn defaults_and_the_word() {
        let p = Config::default()
            .hedge(1)
            .validate()
            .unwrap()
            .hedge
            .unwrap();
        assert_eq!(
            p,
            HedgePolicy {
                hedges: 1,
                delay: DelayPolicy::Percentile(9500),
                percent: 5
            }
        );
        assert_eq!(HedgePolicy::from_word(p.word()), Some(p));
        let fixed = Config::default()
            .hedge(4)
            .hedge_budget(100)
            .hedge_delay(HedgeDelay::Fixed(MAX_HEDGE_DELAY));
        let p = fixed.validate().unwrap().hedge.unwrap();
        assert_eq!(HedgePolicy::from_word(p.word()), Some(p));
        let p999 = Config::default()
            .hedge(3)
            .hedge_delay(HedgeDelay::Percentile(99.9));
        let p = p999.validate().unwrap().hedge.unwrap();
        assert_eq!(p.delay, DelayPolicy::Percentile(9990));
        assert_eq!(HedgePolicy::from_word(p.word()), Some(p));
        assert_eq!(HedgePolicy::from_word(0), None);
        assert_eq!(Config::default().validate().unwrap().hedge, None);
    }
}
