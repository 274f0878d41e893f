//! [`ConfigValues`]: a [`Config`]'s keys read back, without serde.

use std::time::Duration;

use super::{Config, Window};

/// A [`Config`]'s values as it holds them, from [`Config::values`]: each key the builder
/// method of the same name set, `None` where it was not set (the default applies, as the
/// method's documentation says). The `on_state_change` hook and the `probe` are code, not
/// values: they are not here.
///
/// Marked `#[non_exhaustive]`: a new key is a new field, not a breaking change.
///
/// ```
/// use std::time::Duration;
/// use breaker::{Config, Window};
///
/// let config = Config::default().threshold(3).window_calls(50).timeout(Duration::from_millis(300));
/// let values = config.values();
/// assert_eq!(values.threshold, Some(3));
/// assert_eq!(values.window, Some(Window::Calls(50)));
/// assert_eq!(values.timeout, Some(Duration::from_millis(300)));
/// assert_eq!(values.cool_off, Duration::from_secs(10), "the default");
/// assert_eq!(values.max_concurrent, None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct ConfigValues {
    /// [`Config::threshold`].
    pub threshold: Option<u32>,
    /// [`Config::failure_rate`].
    pub failure_rate: Option<u32>,
    /// [`Config::window_calls`] or [`Config::window_duration`].
    pub window: Option<Window>,
    /// [`Config::min_calls`].
    pub min_calls: Option<u32>,
    /// [`Config::slow_call`].
    pub slow_call: Option<Duration>,
    /// [`Config::cool_off`].
    pub cool_off: Duration,
    /// [`Config::max_cool_off`].
    pub max_cool_off: Option<Duration>,
    /// [`Config::jitter`].
    pub jitter: Option<Duration>,
    /// [`Config::probes`].
    pub probes: u32,
    /// [`Config::success_threshold`].
    pub success_threshold: Option<u32>,
    /// [`Config::timeout`].
    pub timeout: Option<Duration>,
    /// [`Config::max_concurrent`].
    pub max_concurrent: Option<u32>,
    /// [`Config::max_keys`].
    pub max_keys: usize,
    /// [`Config::idle`].
    pub idle: Duration,
    /// [`Config::max_open_percent`].
    pub max_open_percent: Option<u32>,
    /// [`Config::throttle`].
    pub throttle: Option<f64>,
    /// [`Config::max_throttle`].
    pub max_throttle: Option<u32>,
    /// [`Config::throttle_window`].
    pub throttle_window: Option<Duration>,
    /// [`Config::ramp`].
    pub ramp: Option<Duration>,
    /// [`Config::dry_run`].
    pub dry_run: bool,
    /// [`Config::adaptive_concurrency`].
    pub adaptive_concurrency: Option<u32>,
    /// [`Config::retry`] (attempts in all).
    pub retry: Option<u32>,
    /// [`Config::retry_budget`].
    pub retry_budget: Option<u32>,
    /// [`Config::backoff`].
    pub backoff: Option<Duration>,
    /// [`Config::retry_within`].
    pub retry_within: Option<Duration>,
    /// [`Config::hedge`].
    pub hedge: Option<u32>,
    /// [`Config::hedge_delay`].
    pub hedge_delay: Option<super::HedgeDelay>,
    /// [`Config::hedge_budget`].
    pub hedge_budget: Option<u32>,
    /// [`Config::outliers`].
    pub outliers: Option<super::Outliers>,
}

impl Config {
    /// This configuration's values, to read (the builder methods of the same names set
    /// them). Through serde, the same values are the keys of the file form.
    ///
    /// ```
    /// use std::time::Duration;
    /// use breaker::Config;
    ///
    /// let config = Config::default().threshold(3).timeout(Duration::from_millis(600));
    /// let values = config.values();
    /// assert_eq!(values.threshold, Some(3));
    /// assert_eq!(values.timeout, Some(Duration::from_millis(600)));
    /// assert_eq!(values.cool_off, Duration::from_secs(10)); // the default
    /// ```
    pub fn values(&self) -> ConfigValues {
        let (o, r) = (&self.overload, &self.retry);
        ConfigValues {
            threshold: self.threshold,
            failure_rate: self.failure_rate,
            window: self.window,
            min_calls: self.min_calls,
            slow_call: self.slow_call,
            cool_off: self.cool_off,
            max_cool_off: self.max_cool_off,
            jitter: self.jitter,
            probes: self.probes,
            success_threshold: self.success_threshold,
            timeout: self.timeout,
            max_concurrent: self.max_concurrent,
            max_keys: self.max_keys,
            idle: self.idle,
            max_open_percent: self.max_open_percent,
            throttle: o.throttle,
            max_throttle: o.max_throttle,
            throttle_window: o.throttle_window,
            ramp: o.ramp,
            dry_run: o.dry_run,
            adaptive_concurrency: o.adaptive_concurrency,
            retry: r.attempts,
            retry_budget: r.percent,
            backoff: r.backoff,
            retry_within: r.within,
            hedge: self.hedge.hedges,
            hedge_delay: self.hedge.delay,
            hedge_budget: self.hedge.percent,
            outliers: self.outliers,
        }
    }
}
