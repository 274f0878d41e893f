//! The breaker's configuration: a builder that never panics, validated once by
//! [`Breaker::try_new`](crate::Breaker::try_new).

use std::{fmt, sync::Arc, time::Duration};

use crate::{
    clock::to_nanos,
    events::Transition,
    overload::{OverloadConfig, OverloadPolicy},
};

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
/// use breaker::{Breaker, Config};
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
///
/// Counts are `u32`, so a negative one is a compile error, not a surprise at run time:
///
/// ```compile_fail,E0600
/// let config = breaker::Config::default().threshold(-1);
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
    pub(crate) max_keys: usize,
    pub(crate) idle: Duration,
    pub(crate) max_open_percent: Option<u32>,
    /// Throttling, the ramp, dry run and the adaptive bulkhead (`overload::settings`).
    pub(crate) overload: OverloadConfig,
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
            max_keys: Config::DEFAULT_MAX_KEYS,
            idle: Config::DEFAULT_IDLE,
            max_open_percent: None,
            overload: OverloadConfig::default(),
        }
    }
}

impl Config {
    /// The most [`probes`](Self::probes) a breaker accepts. Each probe slot is a lease that
    /// half-open admission scans under the breaker's lock, and the table is allocated up
    /// front, so an unbounded count is an allocation of the user's choosing (`u32::MAX`
    /// would ask for about 100 GB). Half-open exists to let *a few* calls test a recovering
    /// dependency; a thousand at once is already a full load on it, not a probe.
    pub const MAX_PROBES: u32 = 1_000;
    /// The largest count window, [`window_calls`](Self::window_calls). The window keeps one
    /// byte per call, allocated when the breaker is created, so this bounds it at 100 KB
    /// per breaker (4 GB for `4_000_000_000`). A hundred thousand calls is ten seconds of
    /// traffic at 10 000 calls a second; to judge a longer stretch, use
    /// [`window_duration`](Self::window_duration), whose memory does not grow with traffic.
    pub const MAX_WINDOW_CALLS: u32 = 100_000;
    /// The default of [`max_keys`](Self::max_keys).
    pub const DEFAULT_MAX_KEYS: usize = 10_000;
    /// The default of [`idle`](Self::idle): ten minutes.
    pub const DEFAULT_IDLE: Duration = Duration::from_secs(600);

    /// Consecutive failures that open the breaker (default 5; off when only
    /// [`failure_rate`](Self::failure_rate) is set).
    pub fn threshold(mut self, failures: u32) -> Self {
        self.threshold = Some(failures);
        self
    }
    /// Open when this percentage (1..=100) of the calls in the window failed.
    pub fn failure_rate(mut self, percent: u32) -> Self {
        self.failure_rate = Some(percent);
        self
    }
    /// Judge the failure rate over the last `calls` calls (default 100, at most
    /// [`MAX_WINDOW_CALLS`](Self::MAX_WINDOW_CALLS)).
    pub fn window_calls(mut self, calls: u32) -> Self {
        self.window = Some(Window::Calls(calls));
        self
    }
    /// Judge the failure rate over the calls of the last `window`.
    pub fn window_duration(mut self, window: Duration) -> Self {
        self.window = Some(Window::Duration(window));
        self
    }
    /// Calls the window must hold before the rate is judged (default 10, at most the
    /// window's size).
    pub fn min_calls(mut self, calls: u32) -> Self {
        self.min_calls = Some(calls);
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
    /// Calls admitted at once while half-open (default 1, at most
    /// [`MAX_PROBES`](Self::MAX_PROBES)).
    pub fn probes(mut self, probes: u32) -> Self {
        self.probes = probes;
        self
    }
    /// Consecutive successful probes that close the breaker (default: `probes`).
    pub fn success_threshold(mut self, successes: u32) -> Self {
        self.success_threshold = Some(successes);
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
    pub fn max_concurrent(mut self, calls: u32) -> Self {
        self.max_concurrent = Some(calls);
        self
    }
    /// Called on every transition, after the `tracing` event, outside the breaker's lock and
    /// in the order the transitions happened. A panic in it is caught and logged.
    pub fn on_state_change(mut self, hook: impl Fn(&Transition) + Send + Sync + 'static) -> Self {
        self.on_state_change = Some(Arc::new(hook));
        self
    }
    /// A keyed breaker keeps at most this many keys' breakers (default
    /// [`DEFAULT_MAX_KEYS`](Self::DEFAULT_MAX_KEYS)); a plain breaker ignores it.
    pub fn max_keys(mut self, keys: usize) -> Self {
        self.max_keys = keys;
        self
    }
    /// A keyed breaker drops a key's breaker that was idle this long and is as good as a
    /// fresh one (default [`DEFAULT_IDLE`](Self::DEFAULT_IDLE), ten minutes); a plain
    /// breaker ignores it.
    pub fn idle(mut self, idle: Duration) -> Self {
        self.idle = idle;
        self
    }
    /// A keyed breaker keeps at most `percent` (1 to 100) of its live keys open or half-open
    /// at once, and at least one; a key whose failures would open it beyond that stays
    /// closed, still counting (its next failure asks again), with one WARN a minute. When
    /// most hosts look dead at once the fault is usually ours (our network, our DNS), and
    /// opening every key would make it worse (Envoy's `max_ejection_percent`). Keys the
    /// fleet opens are neither counted nor held back. A plain breaker ignores it.
    ///
    /// ```
    /// use breaker::{Config, KeyedBreaker, State};
    ///
    /// let config = Config::default().threshold(1).max_open_percent(50);
    /// let hosts = KeyedBreaker::<String>::new("docs::max_open", config);
    /// for host in ["a", "b", "c", "d"] {
    ///     let _ = hosts.call_sync(host, || Err::<(), _>("connection refused"));
    /// }
    /// let open = ["a", "b", "c", "d"].iter().filter(|h| hosts.breaker(**h).state() == State::Open);
    /// assert_eq!(open.count(), 2, "half of the four keys");
    /// ```
    pub fn max_open_percent(mut self, percent: u32) -> Self {
        self.max_open_percent = Some(percent);
        self
    }

    /// Whether two configurations describe the same policy once defaults are resolved
    /// (`Config::default()` and `Config::default().threshold(5)` do); hooks are not compared
    /// (see `same_hooks`).
    pub fn same_policy(&self, other: &Config) -> bool {
        match (self.validate(), other.validate()) {
            (Ok(a), Ok(b)) => a == b,
            _ => false,
        }
    }

    /// Whether both have no `on_state_change` hook, or the very same one (one `Arc`). Two
    /// closures are never the same hook, even with the same code: a second definition that
    /// shares a breaker through its name has its own hook, which that breaker never calls,
    /// so the registry warns when this is `false`.
    pub(crate) fn same_hooks(&self, other: &Config) -> bool {
        match (&self.on_state_change, &other.on_state_change) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
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
        fn at_most(field: &'static str, value: u32, max: u32) -> Result<(), ConfigError> {
            if value > max {
                return Err(ConfigError::new(
                    field,
                    format!("must be at most {max} (got {value})"),
                ));
            }
            Ok(())
        }
        at_least_one("threshold", self.threshold)?;
        at_least_one("min_calls", self.min_calls)?;
        at_least_one("probes", Some(self.probes))?;
        at_most("probes", self.probes, Config::MAX_PROBES)?;
        at_least_one("success_threshold", self.success_threshold)?;
        at_least_one("max_concurrent", self.max_concurrent)?;
        not_zero("slow_call", self.slow_call)?;
        not_zero("cool_off", Some(self.cool_off))?;
        not_zero("max_cool_off", self.max_cool_off)?;
        not_zero("jitter", self.jitter)?;
        not_zero("timeout", self.timeout)?;
        not_zero("idle", Some(self.idle))?;
        if self.max_keys == 0 {
            return Err(ConfigError::new("max_keys", "must be at least 1 (got 0)"));
        }
        if let Some(p) = self.max_open_percent {
            if !(1..=100).contains(&p) {
                return Err(ConfigError::new(
                    "max_open_percent",
                    format!("must be a percent from 1 to 100 (got {p})"),
                ));
            }
        }
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
            Some(Window::Calls(n)) => at_most("window_calls", n, Config::MAX_WINDOW_CALLS)?,
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
            max_keys: self.max_keys,
            idle: to_nanos(self.idle),
            max_open_percent: self.max_open_percent,
            overload: self.overload.validate(self.max_concurrent)?,
        })
    }
}

/// Equal when every setting is, and both have the same hook (or none).
impl PartialEq for Config {
    fn eq(&self, other: &Config) -> bool {
        self.same_hooks(other)
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
            && self.max_keys == other.max_keys
            && self.idle == other.idle
            && self.max_open_percent == other.max_open_percent
            && self.overload == other.overload
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
            .field("max_keys", &self.max_keys)
            .field("idle", &self.idle)
            .field("max_open_percent", &self.max_open_percent)
            .field("overload", &self.overload)
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
    /// Bounds of a keyed breaker (unused by a plain one).
    pub(crate) max_keys: usize,
    pub(crate) idle: u64,
    pub(crate) max_open_percent: Option<u32>,
    pub(crate) overload: OverloadPolicy,
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
        assert_eq!(field_of(c().max_keys(0)), "max_keys");
        assert_eq!(field_of(c().idle(d0)), "idle");
    }

    /// The caps: the limit itself is accepted, one more is refused with a reason that
    /// names the limit; `u32::MAX` (which would have allocated ~100 GB) is refused before
    /// anything is allocated.
    #[test]
    fn probes_and_the_count_window_are_capped() {
        let c = Config::default;
        assert!(c().probes(Config::MAX_PROBES).validate().is_ok());
        let err = c().probes(Config::MAX_PROBES + 1).validate().unwrap_err();
        assert_eq!(err.field(), "probes");
        assert_eq!(err.reason(), "must be at most 1000 (got 1001)");
        assert_eq!(field_of(c().probes(u32::MAX)), "probes");

        let rate = || c().failure_rate(50);
        let max = Config::MAX_WINDOW_CALLS;
        assert!(rate().window_calls(max).validate().is_ok());
        let err = rate().window_calls(max + 1).validate().unwrap_err();
        assert_eq!(err.field(), "window_calls");
        assert_eq!(err.reason(), "must be at most 100000 (got 100001)");
        assert_eq!(field_of(rate().window_calls(4_000_000_000)), "window_calls");
        // A breaker is never built from a refused config: no allocation happened.
        let refused = crate::Breaker::try_new("config::huge_probes", c().probes(u32::MAX));
        assert_eq!(refused.unwrap_err().field(), "probes");
    }

    #[test]
    fn keyed_bounds_default_and_are_kept() {
        let p = Config::default().validate().unwrap();
        assert_eq!(p.max_keys, 10_000);
        assert_eq!(p.idle, 600_000_000_000, "ten minutes");
        let p = Config::default()
            .max_keys(3)
            .idle(Duration::from_secs(1))
            .validate()
            .unwrap();
        assert_eq!((p.max_keys, p.idle), (3, 1_000_000_000));
        assert!(!Config::default()
            .max_keys(3)
            .same_policy(&Config::default()));
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

    /// What the registry needs to warn that a second definition's hook is dropped: the
    /// policies agree, the hooks do not.
    #[test]
    fn same_hooks_tells_a_second_hook_apart() {
        let first = Config::default().on_state_change(|_| {});
        let second = Config::default().on_state_change(|_| {});
        assert!(first.same_policy(&second));
        assert!(!first.same_hooks(&second), "two closures, two hooks");
        assert!(!first.same_hooks(&Config::default()), "a hook and none");
        assert!(!Config::default().same_hooks(&first), "none and a hook");
        assert!(Config::default().same_hooks(&Config::default().threshold(3)));
        let clone = first.clone();
        assert!(first.same_hooks(&clone), "a clone shares its hook");
    }
}
