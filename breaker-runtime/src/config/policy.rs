//! Checking a [`Config`] once, and the [`Policy`] the engine runs on: every field valid, the
//! defaults that depend on other fields resolved, durations in nanoseconds.

use std::time::Duration;

use super::{Config, ConfigError, Window};
use super::{HedgePolicy, OverloadPolicy, RetryPolicy};
use crate::clock::to_nanos;

/// Consecutive failures that open a breaker configured with neither `threshold` nor
/// `failure_rate` (the builder's documented default).
const DEFAULT_THRESHOLD: u32 = 5;
/// The count window `failure_rate` judges when no window is given.
const DEFAULT_WINDOW_CALLS: u32 = 100;
/// Calls a window must hold before it is judged, when `min_calls` is not given (capped at a
/// smaller count window's size).
const DEFAULT_MIN_CALLS: u32 = 10;

impl Config {
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
        if let Some(p) = self.max_open_percent
            && !(1..=100).contains(&p)
        {
            return Err(ConfigError::new(
                "max_open_percent",
                format!("must be a percent from 1 to 100 (got {p})"),
            ));
        }
        if let Some(rate) = self.failure_rate
            && !(1..=100).contains(&rate)
        {
            return Err(ConfigError::new(
                "failure_rate",
                format!("must be a percentage from 1 to 100 (got {rate})"),
            ));
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
        if let Some(cap) = self.max_cool_off
            && cap < self.cool_off
        {
            return Err(ConfigError::new(
                "max_cool_off",
                format!(
                    "must be at least `cool_off` ({:?} < {:?})",
                    cap, self.cool_off
                ),
            ));
        }
        let window = self
            .failure_rate
            .map(|_| self.window.unwrap_or(Window::Calls(DEFAULT_WINDOW_CALLS)));
        let min_calls = match (window, self.min_calls) {
            (Some(Window::Calls(size)), Some(min)) if min > size => {
                return Err(ConfigError::new(
                    "min_calls",
                    format!("must be at most the window's size ({min} > {size} calls)"),
                ))
            }
            (_, Some(min)) => min,
            (Some(Window::Calls(size)), None) => size.min(DEFAULT_MIN_CALLS),
            _ => DEFAULT_MIN_CALLS,
        };
        let threshold = match (self.threshold, self.failure_rate) {
            (Some(n), _) => Some(n),
            (None, Some(_)) => None,
            (None, None) => Some(DEFAULT_THRESHOLD),
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
            retry: self.retry.validate()?,
            outliers: self.outliers.map(|o| o.validate()).transpose()?,
            hedge: self.hedge.validate()?,
        })
    }
}

/// A breaker's configuration as given (its `on_state_change` hook, what `get_or_create`
/// compares) and as validated, in one allocation: a plain breaker makes one, a keyed
/// breaker's keys share theirs.
#[derive(Debug)]
pub(crate) struct Resolved {
    pub(crate) policy: Policy,
    pub(crate) config: Config,
}

impl Config {
    /// Validates this configuration and keeps it beside its [`Policy`].
    pub(crate) fn resolve(self) -> Result<Resolved, ConfigError> {
        Ok(Resolved {
            policy: self.validate()?,
            config: self,
        })
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
    /// `None`: no retries.
    pub(crate) retry: Option<RetryPolicy>,
    /// Outlier ejection (a keyed breaker's; `None`: off).
    pub(crate) outliers: Option<super::OutlierPolicy>,
    /// `None`: no hedging.
    pub(crate) hedge: Option<HedgePolicy>,
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
