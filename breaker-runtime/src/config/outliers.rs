//! The `outliers` key of [`Config`]: [`Outliers`], its builder methods, defaults and
//! checks, the [`OutlierPolicy`] detection runs on, and `Config::outliers`. Detection itself
//! is `crate::outliers`'.

use std::time::Duration;

use super::{Config, ConfigError};
use crate::clock::to_nanos;

/// Outlier ejection: endpoints judged against their peers, for a
/// [`KeyedBreaker`](crate::KeyedBreaker) whose keys are endpoints (given with
/// [`Config::outliers`]).
///
/// A per-key breaker opens on absolute rules (5 failures in a row, 50 % of a window): an
/// endpoint failing 8 % of its calls beside nineteen peers at 0.1 % never trips them, yet it
/// is the one to drain. Every [`interval`](Self::interval):
///
/// - The keys with at least [`request_volume`](Self::request_volume) outcomes (successes
///   and failures) in the interval qualify; with at least
///   [`minimum_hosts`](Self::minimum_hosts) of them, the **success-rate** rule ejects those
///   whose success rate is below the mean − [`stdev_factor`](Self::stdev_factor) × σ of the
///   qualifying keys' rates (σ the population standard deviation, as Envoy and gRPC compute
///   it). The **failure-percentage** rule, off unless
///   [`failure_percentage`](Self::failure_percentage) is set, ejects keys failing at least
///   that percent of at least 50 outcomes (with at least `minimum_hosts` keys at 50).
///   Lowest success rate first.
/// - An ejection opens the key (cause [`Cause::Outlier`](crate::Cause::Outlier)) for
///   [`base_ejection_time`](Self::base_ejection_time) × n, n its ejections so far, at most
///   [`max_ejection_time`](Self::max_ejection_time), plus a random jitter of up to 10 % of
///   that, so the ejected keys of a fleet do not return together. It is an opening like any
///   other: calls are refused, probes follow its end, a fleet shares it, `max_open_percent`
///   may hold it back. n falls by one at each interval in which the key is not ejected,
///   whatever its traffic.
/// - Never a cascade: a key is ejected only if the ejected keys, it included, are at most
///   [`max_ejection_percent`](Self::max_ejection_percent) of the keys in use (checked
///   *after* counting it, with no "eject at least one": at the default 10 %, fewer than ten
///   keys in use never see an ejection). While fewer than half the keys in use admit calls
///   (closed or disabled) nothing new is ejected, nor a key whose ejection would leave
///   fewer than half admitting; the per-key breakers still open on their own rules. Keys
///   *in use* are those called in the interval and those open, half-open or forced open:
///   keys idle in the map do not widen the cap.
/// - In a dry run ([`Config::dry_run`]) detection runs and logs "would eject" (WARN,
///   target `breaker`) without ejecting.
///
/// As in Envoy and gRPC, the success-rate rule knows only the spread of the peers' rates:
/// when they agree closely (most with no failure at all in an interval) σ is small, and a
/// single failure can put a healthy key below the bar. The cap bounds what that costs (at
/// most `max_ejection_percent` out, for `base_ejection_time`); a larger `request_volume`
/// or `stdev_factor` makes it rarer.
///
/// Detection runs on a tokio task, one per keyed breaker, started with the keyed breaker
/// (or at its first new key, if it was made outside a runtime) and stopped when it is
/// dropped. The call path pays nothing: each interval the task reads the counts every key's
/// breaker keeps anyway. Each interval costs O(keys in the map) (one reading of each key's
/// counters) plus O(k log k) for the k keys with traffic: 13 ms for 100 000 keys, each
/// called in the interval (release build, here).
///
/// ```
/// use std::time::Duration;
/// use breaker::{Config, KeyedBreaker, Outliers};
///
/// let outliers = Outliers::default()
///     .interval(Duration::from_secs(5))
///     .base_ejection_time(Duration::from_secs(15))
///     .max_ejection_percent(20);
/// let endpoints = KeyedBreaker::<String>::new(
///     "docs::outliers",
///     Config::default().outliers(outliers),
/// );
/// assert!(endpoints.call_sync("10.0.0.7:8080", || Ok::<_, ()>(())).is_ok());
///
/// let err = KeyedBreaker::<String>::try_new(
///     "docs::outliers_bad",
///     Config::default().outliers(Outliers::default().max_ejection_percent(0)),
/// )
/// .unwrap_err();
/// assert_eq!(err.field(), "max_ejection_percent");
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outliers {
    pub(crate) interval: Duration,
    pub(crate) request_volume: u32,
    pub(crate) minimum_hosts: u32,
    pub(crate) stdev_factor: f64,
    pub(crate) failure_percentage: Option<u32>,
    pub(crate) base_ejection_time: Duration,
    pub(crate) max_ejection_time: Duration,
    pub(crate) max_ejection_percent: u32,
}

impl Default for Outliers {
    /// [`Outliers::DEFAULT`].
    fn default() -> Self {
        Outliers::DEFAULT
    }
}

impl Outliers {
    /// Envoy's and gRPC A50's defaults: interval 10 s, request volume 100, minimum hosts 5,
    /// stdev factor 1.9, failure percentage off, base ejection time 30 s, max ejection time
    /// 300 s, max ejection percent 10.
    pub const DEFAULT: Outliers = Outliers {
        interval: Duration::from_secs(10),
        request_volume: 100,
        minimum_hosts: 5,
        stdev_factor: 1.9,
        failure_percentage: None,
        base_ejection_time: Duration::from_secs(30),
        max_ejection_time: Duration::from_secs(300),
        max_ejection_percent: 10,
    };

    /// How often keys are judged (default 10 s); the counts judged are those of the last
    /// interval.
    pub const fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// Outcomes a key needs in an interval to be judged by the success-rate rule (default
    /// 100).
    pub const fn request_volume(mut self, calls: u32) -> Self {
        self.request_volume = calls;
        self
    }

    /// Keys that must qualify (enough outcomes in the interval) before either rule judges
    /// any (default 5): fewer peers say nothing about what is normal.
    pub const fn minimum_hosts(mut self, keys: u32) -> Self {
        self.minimum_hosts = keys;
        self
    }

    /// How many standard deviations below the mean success rate a key must fall to be
    /// ejected (default 1.9; Envoy's `success_rate_stdev_factor` of 1900 is 1.9 here).
    pub const fn stdev_factor(mut self, factor: f64) -> Self {
        self.stdev_factor = factor;
        self
    }

    /// Turns the failure-percentage rule on: eject a key failing at least `percent` of at
    /// least 50 outcomes in the interval, whatever its peers do (off by default, as in
    /// Envoy; its suggested threshold is 85).
    pub const fn failure_percentage(mut self, percent: u32) -> Self {
        self.failure_percentage = Some(percent);
        self
    }

    /// The first ejection's length (default 30 s); the n-th lasts n times this.
    pub const fn base_ejection_time(mut self, time: Duration) -> Self {
        self.base_ejection_time = time;
        self
    }

    /// The longest an ejection lasts before its jitter (default 300 s; at least the base).
    pub const fn max_ejection_time(mut self, time: Duration) -> Self {
        self.max_ejection_time = time;
        self
    }

    /// The most keys ejected at once, in percent of the keys in use (default 10), checked
    /// with the new ejection counted.
    pub const fn max_ejection_percent(mut self, percent: u32) -> Self {
        self.max_ejection_percent = percent;
        self
    }

    /// Checks every field; the error names it.
    pub(crate) fn validate(&self) -> Result<OutlierPolicy, ConfigError> {
        if self.interval.is_zero() {
            return Err(ConfigError::new("interval", "must not be zero"));
        }
        if self.request_volume == 0 {
            return Err(ConfigError::new(
                "request_volume",
                "must be at least 1 (got 0)",
            ));
        }
        if self.minimum_hosts == 0 {
            return Err(ConfigError::new(
                "minimum_hosts",
                "must be at least 1 (got 0)",
            ));
        }
        if !(self.stdev_factor.is_finite() && self.stdev_factor >= 0.0) {
            return Err(ConfigError::new(
                "stdev_factor",
                format!(
                    "must be a finite number, 0 or more (got {})",
                    self.stdev_factor
                ),
            ));
        }
        if let Some(p) = self.failure_percentage
            && !(1..=100).contains(&p)
        {
            return Err(ConfigError::new(
                "failure_percentage",
                format!("must be a percent from 1 to 100 (got {p})"),
            ));
        }
        if self.base_ejection_time.is_zero() {
            return Err(ConfigError::new("base_ejection_time", "must not be zero"));
        }
        if self.max_ejection_time < self.base_ejection_time {
            return Err(ConfigError::new(
                "max_ejection_time",
                format!(
                    "must be at least `base_ejection_time` ({:?} < {:?})",
                    self.max_ejection_time, self.base_ejection_time
                ),
            ));
        }
        if !(1..=100).contains(&self.max_ejection_percent) {
            return Err(ConfigError::new(
                "max_ejection_percent",
                format!(
                    "must be a percent from 1 to 100 (got {})",
                    self.max_ejection_percent
                ),
            ));
        }
        Ok(OutlierPolicy {
            interval: to_nanos(self.interval),
            request_volume: u64::from(self.request_volume),
            minimum_hosts: self.minimum_hosts as usize,
            // Thousandths, as Envoy writes it: the policy stays `Eq`.
            stdev_factor_milli: (self.stdev_factor * 1000.0).round() as u64,
            failure_percentage: self.failure_percentage,
            base_ejection_time: to_nanos(self.base_ejection_time),
            max_ejection_time: to_nanos(self.max_ejection_time),
            max_ejection_percent: self.max_ejection_percent,
        })
    }
}

/// Outliers on a plain [`Breaker`](crate::Breaker) would have no peers to be judged against.
pub(crate) fn refuse_plain(config: &Config) -> Result<(), ConfigError> {
    match config.outliers {
        Some(_) => Err(ConfigError::new(
            "outliers",
            "is for a keyed breaker: a breaker alone has no peers to be judged against",
        )),
        None => Ok(()),
    }
}

/// A validated [`Outliers`], durations in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OutlierPolicy {
    pub(crate) interval: u64,
    pub(crate) request_volume: u64,
    pub(crate) minimum_hosts: usize,
    pub(crate) stdev_factor_milli: u64,
    pub(crate) failure_percentage: Option<u32>,
    pub(crate) base_ejection_time: u64,
    pub(crate) max_ejection_time: u64,
    pub(crate) max_ejection_percent: u32,
}

impl OutlierPolicy {
    pub(crate) fn stdev_factor(&self) -> f64 {
        self.stdev_factor_milli as f64 / 1000.0
    }
}

impl Config {
    /// Outlier ejection for a [`KeyedBreaker`](crate::KeyedBreaker) whose keys are
    /// endpoints: every [`interval`](Outliers::interval) each key's success rate is judged
    /// against its peers', and the outliers are opened (cause
    /// [`Cause::Outlier`](crate::Cause::Outlier)) for a time that grows with each ejection,
    /// never more than [`max_ejection_percent`](Outliers::max_ejection_percent) of the keys
    /// at once and nothing new while fewer than half admit. See [`Outliers`] for the rules.
    ///
    /// Detection runs on a tokio task (one per keyed breaker, started with it when a tokio
    /// runtime is current, else at its first new key in one; stopped when it is dropped),
    /// from the counts each key's breaker keeps anyway: the call path pays nothing for it.
    /// In a [`dry_run`](Self::dry_run) it logs "would eject" instead of ejecting. Not for a
    /// plain [`Breaker`](crate::Breaker) (a [`ConfigError`](crate::ConfigError) naming
    /// `outliers`: it has no peers); not written by `serde` yet.
    ///
    /// ```
    /// use std::time::Duration;
    /// use breaker::{Breaker, Config, KeyedBreaker, Outliers, State};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let config = Config::default().outliers(Outliers::default()); // 10 s, 30 s, 10 %
    /// let endpoints = KeyedBreaker::<String>::new("docs::config_outliers", config.clone());
    /// for second in 0..20u64 {
    ///     for e in 0..20 {
    ///         for call in 0..50u64 {
    ///             // Endpoint 7 fails 8 % of its calls, the others 0.1 %.
    ///             let n = second * 50 + call;
    ///             let fails = if e == 7 { n % 25 < 2 } else { n % 1000 == 999 };
    ///             let _ = endpoints
    ///                 .call(&format!("10.0.0.{e}:80"), async move {
    ///                     if fails { Err("502") } else { Ok(()) }
    ///                 })
    ///                 .await;
    ///         }
    ///     }
    ///     tokio::time::sleep(Duration::from_secs(1)).await;
    /// }
    /// assert_eq!(endpoints.breaker("10.0.0.7:80").state(), State::Open); // ejected
    /// assert_eq!(endpoints.breaker("10.0.0.8:80").state(), State::Closed);
    ///
    /// let err = Breaker::try_new("docs::plain_outliers", config).unwrap_err();
    /// assert_eq!(err.field(), "outliers");
    /// # }
    /// ```
    pub const fn outliers(mut self, outliers: Outliers) -> Self {
        self.outliers = Some(outliers);
        self
    }
}
