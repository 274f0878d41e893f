//! The overload keys of [`Config`]: their builder methods, their checks, and what a
//! validated configuration keeps of them ([`OverloadPolicy`]).

use std::time::Duration;

use crate::{clock::to_nanos, Config, ConfigError};

use crate::overload::{DEFAULT_MAX_THROTTLE, DEFAULT_WINDOW};

/// What the builder methods below set; `Default` is "none of it".
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct OverloadConfig {
    pub(crate) throttle: Option<f64>,
    pub(crate) max_throttle: Option<u32>,
    pub(crate) throttle_window: Option<Duration>,
    pub(crate) ramp: Option<Duration>,
    pub(crate) dry_run: bool,
    pub(crate) adaptive_concurrency: Option<u32>,
}

impl OverloadConfig {
    /// `Default::default()`, as a constant (for `Config::DEFAULT`).
    pub(crate) const DEFAULT: OverloadConfig = OverloadConfig {
        throttle: None,
        max_throttle: None,
        throttle_window: None,
        ramp: None,
        dry_run: false,
        adaptive_concurrency: None,
    };
}

/// The overload part of a validated configuration. `K` is kept as its bits so the policy
/// stays `Eq` (a validated `K` is finite, so equal bits are equal numbers).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct OverloadPolicy {
    /// `(K bits, max_throttle percent, window)`.
    pub(crate) throttle: Option<(u64, u8, u64)>,
    pub(crate) ramp: Option<u64>,
    pub(crate) dry_run: bool,
    pub(crate) adaptive_concurrency: Option<u32>,
}

impl OverloadPolicy {
    /// Whether any overload mechanism is on (a breaker without pays nothing for them).
    pub(crate) fn any(&self) -> bool {
        self.throttle.is_some()
            || self.ramp.is_some()
            || self.dry_run
            || self.adaptive_concurrency.is_some()
    }
}

impl Config {
    /// The largest [`adaptive_concurrency`](Self::adaptive_concurrency): the limit grows one
    /// step at a time from 20, so a larger bound would never be reached in practice.
    pub const MAX_ADAPTIVE_CONCURRENCY: u32 = 100_000;

    /// Adaptive throttling (Google SRE, *Handling Overload*): while closed, refuse each call
    /// with probability `max(0, (requests − k·accepts) / (requests + 1))` over the last
    /// [`throttle_window`](Self::throttle_window), at most
    /// [`max_throttle`](Self::max_throttle) percent. `requests` are the calls admitted or
    /// throttled in the window, `accepts` those judged a success or neutral (the dependency
    /// answered). `k = 2` (Google's advice) lets through twice what the dependency accepts:
    /// nothing is shed while it accepts more than half, and past that the client stops
    /// sending what would be refused anyway. A throttled call fails with
    /// [`BreakerError::Throttled`](crate::BreakerError::Throttled) (or goes to the fallback)
    /// and counts in `Stats::rejected` and `Stats::throttled`. The trip rules still open the
    /// breaker as they would; throttling sheds a share before that. At least 1.
    pub const fn throttle(mut self, k: f64) -> Self {
        self.overload.throttle = Some(k);
        self
    }

    /// The most calls adaptive throttling refuses, in percent (default 90), so some always
    /// reach the dependency and see it recover. 1..=100.
    pub const fn max_throttle(mut self, percent: u32) -> Self {
        self.overload.max_throttle = Some(percent);
        self
    }

    /// The window adaptive throttling counts requests and accepts over (default 60 s), in 20
    /// buckets: it reacts within a twentieth of it.
    pub const fn throttle_window(mut self, window: Duration) -> Self {
        self.overload.throttle_window = Some(window);
        self
    }

    /// A recovery ramp: after the breaker closes from half-open (or its fleet's probe closes
    /// it), for `ramp` each call is admitted with probability `t / ramp`, `t` the time since it
    /// closed; the others fail with [`BreakerError::Throttled`](crate::BreakerError::Throttled).
    /// A dependency that just recovered (and a fleet that closes at once) gets its traffic
    /// back over `ramp` instead of all at once. Failures during the ramp count as usual.
    pub const fn ramp(mut self, ramp: Duration) -> Self {
        self.overload.ramp = Some(ramp);
        self
    }

    /// A dry run: the breaker judges, opens, probes, throttles, emits its events and metrics
    /// exactly as it would, but makes every call. A call it would have refused runs anyway;
    /// its outcome counts for nothing (as a refused call's would), the fallback is not called
    /// for the refusal, and it counts in `Stats::shadow_rejected`. Its states and figures
    /// show what enforcing would have done: tune thresholds on production traffic, then
    /// switch it off. A dry-run breaker never publishes to a fleet.
    pub const fn dry_run(mut self, on: bool) -> Self {
        self.overload.dry_run = on;
        self
    }

    /// An adaptive bulkhead: at most `limit` calls in flight, where the limit moves between
    /// 1 and `max` (starting at `min(20, max)`) by Netflix concurrency-limits' *Vegas*
    /// algorithm, from the latency the dependency answers with: it grows while answers come
    /// as fast as with no queue, and shrinks when they slow down (a queue is forming) or time
    /// out. Calls beyond the current limit fail with
    /// [`BreakerError::Full`](crate::BreakerError::Full) carrying it. Not with
    /// [`max_concurrent`](Self::max_concurrent) (one bulkhead is fixed or adaptive).
    pub const fn adaptive_concurrency(mut self, max: u32) -> Self {
        self.overload.adaptive_concurrency = Some(max);
        self
    }
}

impl OverloadConfig {
    /// Checks the overload keys (against `max_concurrent` too) and resolves their defaults.
    pub(crate) fn validate(
        &self,
        max_concurrent: Option<u32>,
    ) -> Result<OverloadPolicy, ConfigError> {
        let throttle = match self.throttle {
            Some(k) if !(1.0..=f64::MAX).contains(&k) => {
                return Err(ConfigError::new(
                    "throttle",
                    format!("must be a finite number of at least 1 (got {k})"),
                ))
            }
            Some(k) => {
                let percent = self.max_throttle.unwrap_or(u32::from(DEFAULT_MAX_THROTTLE));
                if !(1..=100).contains(&percent) {
                    return Err(ConfigError::new(
                        "max_throttle",
                        format!("must be a percentage from 1 to 100 (got {percent})"),
                    ));
                }
                let window = self.throttle_window.map_or(DEFAULT_WINDOW, to_nanos);
                if window == 0 {
                    return Err(ConfigError::new("throttle_window", "must not be zero"));
                }
                Some((k.to_bits(), percent as u8, window))
            }
            None => {
                for (field, set) in [
                    ("max_throttle", self.max_throttle.is_some()),
                    ("throttle_window", self.throttle_window.is_some()),
                ] {
                    if set {
                        return Err(ConfigError::new(field, "has no effect without `throttle`"));
                    }
                }
                None
            }
        };
        let ramp = match self.ramp {
            Some(d) if d.is_zero() => return Err(ConfigError::new("ramp", "must not be zero")),
            r => r.map(to_nanos),
        };
        if let Some(max) = self.adaptive_concurrency {
            if max == 0 || max > Config::MAX_ADAPTIVE_CONCURRENCY {
                return Err(ConfigError::new(
                    "adaptive_concurrency",
                    format!(
                        "must be from 1 to {} (got {max})",
                        Config::MAX_ADAPTIVE_CONCURRENCY
                    ),
                ));
            }
            if max_concurrent.is_some() {
                return Err(ConfigError::new(
                    "adaptive_concurrency",
                    "cannot be combined with `max_concurrent`: one bulkhead is fixed or adaptive",
                ));
            }
        }
        Ok(OverloadPolicy {
            throttle,
            ramp,
            dry_run: self.dry_run,
            adaptive_concurrency: self.adaptive_concurrency,
        })
    }
}
