//! The breaker's configuration: a builder that never panics, validated once by
//! [`Breaker::try_new`](crate::Breaker::try_new).

use std::{fmt, sync::Arc, time::Duration};

use crate::{clock::to_nanos, events::Transition};

/// A hook called on every transition (see [`Config::on_state_change`]).
pub(crate) type Hook = Arc<dyn Fn(&Transition) + Send + Sync>;

/// The sliding window that [`Config::failure_rate`] judges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// The last N calls.
    Calls(u32),
    /// The calls of the last D (kept in twenty buckets of D/20 each).
    Duration(Duration),
}

/// How a breaker behaves: one builder method per key of the `#[circuit_breaker]` attribute,
/// with the same names and defaults.
///
/// Builder methods only store; [`Breaker::try_new`](crate::Breaker::try_new) validates and
/// names the offending field in a [`ConfigError`].
///
/// ```
/// use std::time::Duration;
/// use breaker_runtime::{Breaker, Config};
///
/// let config = Config::default()
///     .failure_rate(50)
///     .window_calls(20)
///     .cool_off(Duration::from_secs(30))
///     .probes(3);
/// let fraud = Breaker::try_new("docs::fraud", config).unwrap();
/// assert_eq!(fraud.name(), "docs::fraud");
///
/// let err = Breaker::try_new("docs::bad", Config::default().threshold(0)).unwrap_err();
/// assert_eq!(err.field(), "threshold");
/// ```
#[derive(Clone)]
pub struct Config {
    pub(crate) threshold: Option<u32>,
    pub(crate) failure_rate: Option<u32>,
    pub(crate) window: Option<Window>,
    pub(crate) min_calls: Option<u32>,
    pub(crate) slow_call: Option<Duration>,
    pub(crate) cool_off: Duration,
    pub(crate) max_cool_off: Option<Duration>,
    pub(crate) jitter: Option<Duration>,
    pub(crate) probes: u32,
    pub(crate) success_threshold: Option<u32>,
    pub(crate) timeout: Option<Duration>,
    pub(crate) max_concurrent: Option<u32>,
    pub(crate) on_state_change: Option<Hook>,
    /// Bounds of a keyed breaker (see [`KeyedBreaker`](crate::KeyedBreaker)).
    pub(crate) max_keys: Option<usize>,
    pub(crate) idle: Option<Duration>,
    /// The first count given that does not fit a `u32` (negative, or too large).
    not_a_count: Option<&'static str>,
}

impl Default for Config {
    /// Five consecutive failures open the breaker for ten seconds; one probe closes it.
    fn default() -> Self {
        Config {
            threshold: None,
            failure_rate: None,
            window: None,
            min_calls: None,
            slow_call: None,
            cool_off: Duration::from_secs(10),
            max_cool_off: None,
            jitter: None,
            probes: 1,
            success_threshold: None,
            timeout: None,
            max_concurrent: None,
            on_state_change: None,
            max_keys: None,
            idle: None,
            not_a_count: None,
        }
    }
}

impl Config {
    /// A count from any integer type; one that does not fit a `u32` is remembered and
    /// reported by validation, so the builder never panics.
    fn count(&mut self, field: &'static str, n: impl TryInto<u32>) -> u32 {
        n.try_into().unwrap_or_else(|_| {
            self.not_a_count.get_or_insert(field);
            0
        })
    }

    /// A keyed breaker holds at most this many breakers (default 10 000); see
    /// [`KeyedBreaker`](crate::KeyedBreaker) for which one goes when a new key arrives.
    pub fn max_keys(mut self, keys: usize) -> Self {
        self.max_keys = Some(keys);
        self
    }

    /// A keyed breaker drops a key's breaker that is indistinguishable from a fresh one and
    /// has not been called for this long (default 10 minutes).
    pub fn idle(mut self, idle: Duration) -> Self {
        self.idle = Some(idle);
        self
    }

    /// Consecutive failures that open the breaker (default 5; off when only
    /// [`failure_rate`](Self::failure_rate) is set).
    pub fn threshold(mut self, failures: impl TryInto<u32>) -> Self {
        self.threshold = Some(self.count("threshold", failures));
        self
    }
    /// Open when this percentage (1..=100) of the calls in the window failed.
    pub fn failure_rate(mut self, percent: impl TryInto<u32>) -> Self {
        self.failure_rate = Some(self.count("failure_rate", percent));
        self
    }
    /// Judge the failure rate over the last `calls` calls (default 100).
    pub fn window_calls(mut self, calls: impl TryInto<u32>) -> Self {
        self.window = Some(Window::Calls(self.count("window_calls", calls)));
        self
    }
    /// Judge the failure rate over the calls of the last `window`.
    pub fn window_duration(mut self, window: Duration) -> Self {
        self.window = Some(Window::Duration(window));
        self
    }
    /// Calls the window must hold before the rate is judged (default 10, at most the
    /// window's size).
    pub fn min_calls(mut self, calls: impl TryInto<u32>) -> Self {
        self.min_calls = Some(self.count("min_calls", calls));
        self
    }
    /// A call that takes at least this long counts as a failure; its result still goes to
    /// the caller.
    pub fn slow_call(mut self, at_least: Duration) -> Self {
        self.slow_call = Some(at_least);
        self
    }
    /// How long the breaker stays open before it admits a probe (default 10 s).
    pub fn cool_off(mut self, cool_off: Duration) -> Self {
        self.cool_off = cool_off;
        self
    }
    /// Double the cool-off at each reopening from half-open, up to this.
    pub fn max_cool_off(mut self, cap: Duration) -> Self {
        self.max_cool_off = Some(cap);
        self
    }
    /// Add a random 0..`jitter` to each cool-off, so a fleet does not probe on one tick.
    pub fn jitter(mut self, jitter: Duration) -> Self {
        self.jitter = Some(jitter);
        self
    }
    /// Calls admitted at once while half-open (default 1).
    pub fn probes(mut self, probes: impl TryInto<u32>) -> Self {
        self.probes = self.count("probes", probes);
        self
    }
    /// Consecutive successful probes that close the breaker (default: `probes`).
    pub fn success_threshold(mut self, successes: impl TryInto<u32>) -> Self {
        self.success_threshold = Some(self.count("success_threshold", successes));
        self
    }
    /// Deadline of one call; a timeout is a failure and yields
    /// [`BreakerError::Timeout`](crate::BreakerError::Timeout). Needs a tokio runtime with
    /// its time driver, as `tokio::time::timeout` does.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
    /// Bulkhead: at most this many calls in flight; more fail fast with
    /// [`BreakerError::Full`](crate::BreakerError::Full).
    pub fn max_concurrent(mut self, calls: impl TryInto<u32>) -> Self {
        self.max_concurrent = Some(self.count("max_concurrent", calls));
        self
    }
    /// Called on every transition, after the `tracing` event, outside the breaker's lock and
    /// in the order the transitions happened. A panic in it is caught and logged.
    pub fn on_state_change(mut self, hook: impl Fn(&Transition) + Send + Sync + 'static) -> Self {
        self.on_state_change = Some(Arc::new(hook));
        self
    }

    /// Whether two configurations describe the same policy once defaults are resolved
    /// (`Config::default()` and `Config::default().threshold(5)` do); hooks are not compared.
    pub fn same_policy(&self, other: &Config) -> bool {
        match (self.validate(), other.validate()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }

    /// Checks every field and resolves the defaults that depend on other fields.
    pub(crate) fn validate(&self) -> Result<Policy, ConfigError> {
        fn at_least_one(field: &'static str, value: Option<u32>) -> Result<(), ConfigError> {
            match value {
                Some(0) => Err(ConfigError::new(field, "must be at least 1 (got 0)")),
                _ => Ok(()),
            }
        }
        fn not_zero(field: &'static str, value: Option<Duration>) -> Result<(), ConfigError> {
            match value {
                Some(d) if d.is_zero() => Err(ConfigError::new(field, "must not be zero")),
                _ => Ok(()),
            }
        }
        if let Some(field) = self.not_a_count {
            return Err(ConfigError::new(
                field,
                "must be a whole number from 1 to 4294967295",
            ));
        }
        at_least_one("threshold", self.threshold)?;
        at_least_one("min_calls", self.min_calls)?;
        at_least_one("probes", Some(self.probes))?;
        at_least_one("success_threshold", self.success_threshold)?;
        at_least_one("max_concurrent", self.max_concurrent)?;
        not_zero("slow_call", self.slow_call)?;
        not_zero("cool_off", Some(self.cool_off))?;
        not_zero("max_cool_off", self.max_cool_off)?;
        not_zero("jitter", self.jitter)?;
        not_zero("timeout", self.timeout)?;
        if let Some(rate) = self.failure_rate {
            if !(1..=100).contains(&rate) {
                return Err(ConfigError::new(
                    "failure_rate",
                    format!("must be a percentage from 1 to 100 (got {rate})"),
                ));
            }
        }
        match self.window {
            Some(Window::Calls(0)) => {
                return Err(ConfigError::new(
                    "window_calls",
                    "must be at least 1 (got 0)",
                ))
            }
            Some(Window::Duration(d)) if d.is_zero() => {
                return Err(ConfigError::new("window_duration", "must not be zero"))
            }
            _ => {}
        }
        if self.failure_rate.is_none() {
            if self.window.is_some() {
                let field = match self.window {
                    Some(Window::Duration(_)) => "window_duration",
                    _ => "window_calls",
                };
                return Err(ConfigError::new(
                    field,
                    "has no effect without `failure_rate`",
                ));
            }
            if self.min_calls.is_some() {
                return Err(ConfigError::new(
                    "min_calls",
                    "has no effect without `failure_rate`",
                ));
            }
        }
        if let Some(cap) = self.max_cool_off {
            if cap < self.cool_off {
                return Err(ConfigError::new(
                    "max_cool_off",
                    format!(
                        "must be at least `cool_off` ({:?} < {:?})",
                        cap, self.cool_off
                    ),
                ));
            }
        }
        let window = self
            .failure_rate
            .map(|_| self.window.unwrap_or(Window::Calls(100)));
        let min_calls = match (window, self.min_calls) {
            (Some(Window::Calls(size)), Some(min)) if min > size => {
                return Err(ConfigError::new(
                    "min_calls",
                    format!("must be at most the window's size ({min} > {size} calls)"),
                ))
            }
            (_, Some(min)) => min,
            (Some(Window::Calls(size)), None) => size.min(10),
            _ => 10,
        };
        let threshold = match (self.threshold, self.failure_rate) {
            (Some(n), _) => Some(n),
            (None, Some(_)) => None,
            (None, None) => Some(5),
        };
        Ok(Policy {
            threshold,
            failure_rate: self.failure_rate,
            window,
            min_calls,
            slow_call: self.slow_call.map(to_nanos),
            cool_off: to_nanos(self.cool_off),
            max_cool_off: self.max_cool_off.map(to_nanos),
            jitter: self.jitter.map(to_nanos).unwrap_or(0),
            probes: self.probes,
            success_threshold: self.success_threshold.unwrap_or(self.probes),
            timeout: self.timeout,
            max_concurrent: self.max_concurrent,
        })
    }
}

/// Equal when every setting is, and both have the same hook (or none).
impl PartialEq for Config {
    fn eq(&self, other: &Config) -> bool {
        let hooks = match (&self.on_state_change, &other.on_state_change) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        hooks
            && self.threshold == other.threshold
            && self.failure_rate == other.failure_rate
            && self.window == other.window
            && self.min_calls == other.min_calls
            && self.slow_call == other.slow_call
            && self.cool_off == other.cool_off
            && self.max_cool_off == other.max_cool_off
            && self.jitter == other.jitter
            && self.probes == other.probes
            && self.success_threshold == other.success_threshold
            && self.timeout == other.timeout
            && self.max_concurrent == other.max_concurrent
            && self.not_a_count == other.not_a_count
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("threshold", &self.threshold)
            .field("failure_rate", &self.failure_rate)
            .field("window", &self.window)
            .field("min_calls", &self.min_calls)
            .field("slow_call", &self.slow_call)
            .field("cool_off", &self.cool_off)
            .field("max_cool_off", &self.max_cool_off)
            .field("jitter", &self.jitter)
            .field("probes", &self.probes)
            .field("success_threshold", &self.success_threshold)
            .field("timeout", &self.timeout)
            .field("max_concurrent", &self.max_concurrent)
            .field("on_state_change", &self.on_state_change.is_some())
            .finish()
    }
}

/// A validated [`Config`], with the defaults that depend on other fields resolved and
/// durations in nanoseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Policy {
    pub(crate) threshold: Option<u32>,
    pub(crate) failure_rate: Option<u32>,
    pub(crate) window: Option<Window>,
    pub(crate) min_calls: u32,
    pub(crate) slow_call: Option<u64>,
    pub(crate) cool_off: u64,
    pub(crate) max_cool_off: Option<u64>,
    pub(crate) jitter: u64,
    pub(crate) probes: u32,
    pub(crate) success_threshold: u32,
    pub(crate) timeout: Option<Duration>,
    pub(crate) max_concurrent: Option<u32>,
}

impl Policy {
    /// How long a probe may hold its half-open slot: the call's timeout when set, else the
    /// base cool-off.
    pub(crate) fn lease(&self) -> u64 {
        self.timeout.map(to_nanos).unwrap_or(self.cool_off)
    }

    /// The cool-off after `reopenings` consecutive reopenings from half-open, before jitter.
    pub(crate) fn cool_off_after(&self, reopenings: u32) -> u64 {
        match self.max_cool_off {
            None => self.cool_off,
            Some(cap) => self
                .cool_off
                .saturating_mul(1u64.checked_shl(reopenings).unwrap_or(u64::MAX))
                .min(cap),
        }
    }
}

/// An invalid [`Config`]: which field, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    field: &'static str,
    reason: String,
}

impl ConfigError {
    pub(crate) fn new(field: &'static str, reason: impl Into<String>) -> Self {
        Self {
            field,
            reason: reason.into(),
        }
    }

    /// The builder method (and attribute key) at fault, e.g. `"threshold"`.
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// What is wrong with it.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid breaker config: `{}` {}",
            self.field, self.reason
        )
    }
}

impl std::error::Error for ConfigError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(config: Config) -> &'static str {
        config.validate().unwrap_err().field()
    }

    #[test]
    fn every_invalid_value_names_its_field() {
        let d0 = Duration::ZERO;
        let c = Config::default;
        assert_eq!(field_of(c().threshold(0)), "threshold");
        assert_eq!(field_of(c().failure_rate(0)), "failure_rate");
        assert_eq!(field_of(c().failure_rate(101)), "failure_rate");
        assert_eq!(
            field_of(c().failure_rate(50).window_calls(0)),
            "window_calls"
        );
        assert_eq!(
            field_of(c().failure_rate(50).window_duration(d0)),
            "window_duration"
        );
        assert_eq!(field_of(c().failure_rate(50).min_calls(0)), "min_calls");
        assert_eq!(
            field_of(c().failure_rate(50).window_calls(5).min_calls(6)),
            "min_calls"
        );
        assert_eq!(field_of(c().window_calls(5)), "window_calls");
        assert_eq!(field_of(c().min_calls(5)), "min_calls");
        assert_eq!(field_of(c().slow_call(d0)), "slow_call");
        assert_eq!(field_of(c().cool_off(d0)), "cool_off");
        assert_eq!(
            field_of(c().max_cool_off(Duration::from_secs(1))),
            "max_cool_off"
        );
        assert_eq!(field_of(c().jitter(d0)), "jitter");
        assert_eq!(field_of(c().probes(0)), "probes");
        assert_eq!(field_of(c().success_threshold(0)), "success_threshold");
        assert_eq!(field_of(c().timeout(d0)), "timeout");
        assert_eq!(field_of(c().max_concurrent(0)), "max_concurrent");
        assert_eq!(field_of(c().threshold(-1)), "threshold");
        assert_eq!(field_of(c().probes(5_000_000_000u64)), "probes");
    }

    #[test]
    fn counts_take_any_integer_type() {
        let n: usize = 3;
        let p = Config::default()
            .threshold(n)
            .probes(2u8)
            .validate()
            .unwrap();
        assert_eq!((p.threshold, p.probes), (Some(3), 2));
        assert_eq!(
            Config::default().threshold(n),
            Config::default().threshold(3)
        );
    }

    #[test]
    fn defaults_resolve_as_documented() {
        let p = Config::default().validate().unwrap();
        assert_eq!(p.threshold, Some(5));
        assert_eq!(p.failure_rate, None);
        assert_eq!(p.cool_off, 10_000_000_000);
        assert_eq!((p.probes, p.success_threshold), (1, 1));

        let rate = Config::default().failure_rate(50).validate().unwrap();
        assert_eq!(
            rate.threshold, None,
            "threshold is off with only failure_rate"
        );
        assert_eq!(rate.window, Some(Window::Calls(100)));
        assert_eq!(rate.min_calls, 10);
        let small = Config::default()
            .failure_rate(50)
            .window_calls(4)
            .validate();
        assert_eq!(
            small.unwrap().min_calls,
            4,
            "min_calls is at most the window"
        );
        let probes = Config::default().probes(3).validate().unwrap();
        assert_eq!(probes.success_threshold, 3);
    }

    #[test]
    fn huge_durations_saturate_instead_of_overflowing() {
        let p = Config::default()
            .cool_off(Duration::MAX)
            .max_cool_off(Duration::MAX)
            .validate()
            .unwrap();
        assert_eq!(p.cool_off, u64::MAX);
        assert_eq!(p.cool_off_after(200), u64::MAX);
    }

    #[test]
    fn cool_off_doubles_up_to_the_cap() {
        let p = Config::default()
            .cool_off(Duration::from_secs(1))
            .max_cool_off(Duration::from_secs(5))
            .validate()
            .unwrap();
        let secs: Vec<u64> = (0..5)
            .map(|n| p.cool_off_after(n) / 1_000_000_000)
            .collect();
        assert_eq!(secs, [1, 2, 4, 5, 5]);
    }

    #[test]
    fn same_policy_ignores_hooks() {
        let a = Config::default().threshold(3);
        let b = Config::default().threshold(3).on_state_change(|_| {});
        assert!(a.same_policy(&b));
        assert!(!a.same_policy(&Config::default()));
        assert!(Config::default().same_policy(&Config::default().threshold(5)));
    }
}
