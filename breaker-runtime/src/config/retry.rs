//! The retry keys of [`Config`] (`retry`, `retry_budget`, `backoff`): their builder
//! methods, their checks, and what a validated configuration keeps of them
//! ([`RetryPolicy`]). The retry loop and its budget are `crate::retry`'s.

use std::time::Duration;

use crate::{Config, ConfigError};

/// The default share of first attempts that may be retried, in percent.
pub const DEFAULT_BUDGET_PERCENT: u32 = 20;
/// The default wait before the first retry; each next one doubles it, up to [`MAX_BACKOFF`](crate::retry::MAX_BACKOFF).
pub const DEFAULT_BACKOFF: Duration = Duration::from_millis(100);
/// The retry keys of a [`Config`], as given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RetryConfig {
    pub(crate) attempts: Option<u32>,
    pub(crate) percent: Option<u32>,
    pub(crate) backoff: Option<Duration>,
}

impl RetryConfig {
    /// `Default::default()`, as a constant (for `Config::DEFAULT`).
    pub(crate) const DEFAULT: RetryConfig = RetryConfig {
        attempts: None,
        percent: None,
        backoff: None,
    };
}

/// The retry keys, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RetryPolicy {
    /// Attempts in all, the first included (at least 2).
    pub(crate) attempts: u32,
    /// Units a first attempt deposits (`retry_budget`, 1..=100).
    pub(crate) percent: u32,
    /// The wait before the first retry.
    pub(crate) backoff: Duration,
}

impl RetryConfig {
    pub(crate) fn validate(&self) -> Result<Option<RetryPolicy>, ConfigError> {
        let Some(attempts) = self.attempts else {
            for (field, set) in [
                ("retry_budget", self.percent.is_some()),
                ("backoff", self.backoff.is_some()),
            ] {
                if set {
                    return Err(ConfigError::new(field, "has no effect without `retry`"));
                }
            }
            return Ok(None);
        };
        if attempts < 2 {
            return Err(ConfigError::new(
                "retry",
                format!(
                    "counts attempts in all, the first included: it must be at least 2 \
                     (got {attempts}; leave it out for no retries)"
                ),
            ));
        }
        let percent = self.percent.unwrap_or(DEFAULT_BUDGET_PERCENT);
        if !(1..=100).contains(&percent) {
            return Err(ConfigError::new(
                "retry_budget",
                format!("must be a percent from 1 to 100 (got {percent})"),
            ));
        }
        let backoff = self.backoff.unwrap_or(DEFAULT_BACKOFF);
        if backoff.is_zero() {
            return Err(ConfigError::new("backoff", "must not be zero"));
        }
        Ok(Some(RetryPolicy {
            attempts,
            percent,
            backoff,
        }))
    }
}

impl Config {
    /// Retry a failed call: `attempts` in all, the first included (at least 2), each one
    /// through the breaker, paid from a retry budget, after a backoff. Used by
    /// [`Breaker::call_retried`](crate::Breaker::call_retried) and its siblings, and by the
    /// attribute's `retry = N`; see [`breaker::retry`](crate::retry) for what is retried.
    /// More than 65 535 attempts count as 65 535 (a retried call reads its policy from one
    /// word, without a lock).
    pub const fn retry(mut self, attempts: u32) -> Self {
        self.retry.attempts = Some(attempts);
        self
    }
    /// The share of first attempts (1 to 100 percent, default 20) the retry budget lets be
    /// retried over ten seconds, besides its floor of 10 retries a second. Needs
    /// [`retry`](Self::retry).
    pub const fn retry_budget(mut self, percent: u32) -> Self {
        self.retry.percent = Some(percent);
        self
    }
    /// The wait before the first retry (default 100 ms), doubled at each next one up to
    /// 5 s, with ±20 % jitter. Needs [`retry`](Self::retry). A value over about 36 minutes
    /// counts as that (it is kept in 41 bits of nanoseconds).
    pub const fn backoff(mut self, initial: Duration) -> Self {
        self.retry.backoff = Some(initial);
        self
    }
}
