//! The retry keys of [`Config`] (`retry`, `retry_budget`, `backoff`, `retry_within`): their builder
//! methods, their checks, and what a validated configuration keeps of them
//! ([`RetryPolicy`]). The retry loop and its budget are `crate::retry`'s.

use std::time::Duration;

use crate::{Config, ConfigError};

/// The default share of first attempts that may be retried, in percent.
pub const DEFAULT_BUDGET_PERCENT: u32 = 20;
/// The default wait before the first retry; each next one doubles it, up to [`MAX_BACKOFF`](crate::retry::MAX_BACKOFF).
pub const DEFAULT_BACKOFF: Duration = Duration::from_millis(100);
/// The default bound on one retried call's attempts and waits ([`Config::retry_within`]).
pub const DEFAULT_RETRY_WITHIN: Duration = Duration::from_secs(5);
/// The retry keys of a [`Config`], as given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RetryConfig {
    pub(crate) attempts: Option<u32>,
    pub(crate) percent: Option<u32>,
    pub(crate) backoff: Option<Duration>,
    pub(crate) within: Option<Duration>,
}

impl RetryConfig {
    /// `Default::default()`, as a constant (for `Config::DEFAULT`).
    pub(crate) const DEFAULT: RetryConfig = RetryConfig {
        attempts: None,
        percent: None,
        backoff: None,
        within: None,
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
    /// The bound on one retried call's attempts and waits (`retry_within`).
    pub(crate) within: Duration,
}

impl RetryConfig {
    pub(crate) fn validate(&self) -> Result<Option<RetryPolicy>, ConfigError> {
        let Some(attempts) = self.attempts else {
            for (field, set) in [
                ("retry_budget", self.percent.is_some()),
                ("backoff", self.backoff.is_some()),
                ("retry_within", self.within.is_some()),
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
        let within = self.within.unwrap_or(DEFAULT_RETRY_WITHIN);
        if within.is_zero() {
            return Err(ConfigError::new(
                "retry_within",
                "must not be zero (it bounds the retries of a call: with no time, leave out \
                 `retry`)",
            ));
        }
        Ok(Some(RetryPolicy {
            attempts,
            percent,
            backoff,
            within,
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
    /// The bound on one retried call (default 5 s): its attempts and the waits between them
    /// end within `bound` of its start. A wait that would end at or past it (the
    /// [`backoff`](Self::backoff), an answer's `Retry-After` or gRPC pushback) is not waited:
    /// the last answer is returned at once. So a `Retry-After: 5` and a `Retry-After: 6`
    /// behave alike under the default bound (neither is waited), and a caller is never held
    /// longer than the bound by waits. An attempt already running is not cut (its time is
    /// [`timeout`](Self::timeout)'s). Needs [`retry`](Self::retry); must not be zero.
    ///
    /// ```
    /// use std::time::Duration;
    /// use breaker::{Breaker, Config, Verdict};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let config = Config::default().retry(3).retry_within(Duration::from_secs(2));
    /// let b = Breaker::new("docs::retry_within", config.threshold(100));
    /// let start = tokio::time::Instant::now();
    /// // Every answer asks for 3 s (a `Retry-After: 3`): past the bound, not waited.
    /// let asks_for_3s = |_: &Result<(), &str>| Verdict::OpenFor(Duration::from_secs(3));
    /// let r = b.call_retried_classified(asks_for_3s, || async { Err("503") }).await;
    /// assert!(r.is_err());
    /// assert_eq!(start.elapsed(), Duration::ZERO);
    /// # }
    /// ```
    pub const fn retry_within(mut self, bound: Duration) -> Self {
        self.retry.within = Some(bound);
        self
    }
}
