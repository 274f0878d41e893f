//! [`Config`] as a configuration file or a control plane writes it (feature `serde`): one
//! flat map whose keys are the builder methods' (and the attribute's) names, durations as
//! humantime strings (`"10s"`, `"600ms"`, `"1m 30s"`), unknown keys refused (a typo must
//! not silently leave a default in force). Reading checks the configuration as
//! [`Breaker::try_new`](crate::Breaker::try_new) would, so a bad file fails where it is
//! read, naming the field. The `on_state_change` hook is code: it is neither written nor
//! read (a configuration read from a file has none, and
//! [`reconfigure`](crate::Breaker::reconfigure) keeps the hook in force).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Config, ConfigError, HedgeDelay, Window};

/// The file form: every key optional, absent meaning the default.
#[derive(Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct Form {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    threshold: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    failure_rate: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    window_calls: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    window_duration: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    min_calls: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    slow_call: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cool_off: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_cool_off: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    jitter: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    probes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    success_threshold: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    timeout: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_concurrent: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_keys: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    idle: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_open_percent: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    throttle: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_throttle: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    throttle_window: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ramp: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    dry_run: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    adaptive_concurrency: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retry: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retry_budget: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    backoff: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hedge: Option<u32>,
    /// A percentile (`"p95"`, `"p99.9"`) or a duration (`"20ms"`), as the attribute's key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hedge_delay: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    hedge_budget: Option<u32>,
}

fn text(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

fn duration(field: &'static str, s: &str) -> Result<Duration, ConfigError> {
    humantime::parse_duration(s).map_err(|e| {
        ConfigError::new(
            field,
            format!("must be a duration such as \"10s\" or \"600ms\" (got {s:?}: {e})"),
        )
    })
}

fn hedge_delay(s: &str) -> Result<HedgeDelay, ConfigError> {
    match s.strip_prefix('p') {
        Some(p) => p.parse().map(HedgeDelay::Percentile).map_err(|_| {
            ConfigError::new(
                "hedge_delay",
                format!("must be a percentile such as \"p95\" or a duration such as \"20ms\" (got {s:?})"),
            )
        }),
        None => duration("hedge_delay", s).map(HedgeDelay::Fixed),
    }
}

fn hedge_delay_text(d: HedgeDelay) -> String {
    match d {
        HedgeDelay::Percentile(p) => format!("p{p}"),
        HedgeDelay::Fixed(d) => text(d),
    }
}

impl From<Config> for Form {
    fn from(c: Config) -> Form {
        let o = &c.overload;
        let (window_calls, window_duration) = match c.window {
            Some(Window::Calls(n)) => (Some(n), None),
            Some(Window::Duration(d)) => (None, Some(text(d))),
            None => (None, None),
        };
        Form {
            threshold: c.threshold,
            failure_rate: c.failure_rate,
            window_calls,
            window_duration,
            min_calls: c.min_calls,
            slow_call: c.slow_call.map(text),
            cool_off: Some(text(c.cool_off)),
            max_cool_off: c.max_cool_off.map(text),
            jitter: c.jitter.map(text),
            probes: Some(c.probes),
            success_threshold: c.success_threshold,
            timeout: c.timeout.map(text),
            max_concurrent: c.max_concurrent,
            max_keys: Some(c.max_keys),
            idle: Some(text(c.idle)),
            max_open_percent: c.max_open_percent,
            throttle: o.throttle,
            max_throttle: o.max_throttle,
            throttle_window: o.throttle_window.map(text),
            ramp: o.ramp.map(text),
            dry_run: o.dry_run,
            adaptive_concurrency: o.adaptive_concurrency,
            retry: c.retry.attempts,
            retry_budget: c.retry.percent,
            backoff: c.retry.backoff.map(text),
            hedge: c.hedge.hedges,
            hedge_delay: c.hedge.delay.map(hedge_delay_text),
            hedge_budget: c.hedge.percent,
        }
    }
}

impl TryFrom<Form> for Config {
    type Error = ConfigError;

    /// The configuration the form describes, checked as `Breaker::try_new` would.
    fn try_from(f: Form) -> Result<Config, ConfigError> {
        let d = |field, s: Option<String>| s.map(|s| duration(field, &s)).transpose();
        if f.window_calls.is_some() && f.window_duration.is_some() {
            return Err(ConfigError::new(
                "window_duration",
                "cannot be set with `window_calls` (a window counts calls or time)",
            ));
        }
        let window = match (f.window_calls, d("window_duration", f.window_duration)?) {
            (Some(n), _) => Some(Window::Calls(n)),
            (None, Some(span)) => Some(Window::Duration(span)),
            (None, None) => None,
        };
        // Keys without a form field keep their defaults.
        let defaults = Config::default();
        let mut c = Config {
            threshold: f.threshold,
            failure_rate: f.failure_rate,
            window,
            min_calls: f.min_calls,
            slow_call: d("slow_call", f.slow_call)?,
            cool_off: d("cool_off", f.cool_off)?.unwrap_or(defaults.cool_off),
            max_cool_off: d("max_cool_off", f.max_cool_off)?,
            jitter: d("jitter", f.jitter)?,
            probes: f.probes.unwrap_or(defaults.probes),
            success_threshold: f.success_threshold,
            timeout: d("timeout", f.timeout)?,
            max_concurrent: f.max_concurrent,
            on_state_change: None,
            max_keys: f.max_keys.unwrap_or(defaults.max_keys),
            idle: d("idle", f.idle)?.unwrap_or(defaults.idle),
            max_open_percent: f.max_open_percent,
            ..defaults
        };
        let o = &mut c.overload;
        o.throttle = f.throttle;
        o.max_throttle = f.max_throttle;
        o.throttle_window = d("throttle_window", f.throttle_window)?;
        o.ramp = d("ramp", f.ramp)?;
        o.dry_run = f.dry_run;
        o.adaptive_concurrency = f.adaptive_concurrency;
        c.retry.attempts = f.retry;
        c.retry.percent = f.retry_budget;
        c.retry.backoff = d("backoff", f.backoff)?;
        c.hedge.hedges = f.hedge;
        c.hedge.delay = f.hedge_delay.as_deref().map(hedge_delay).transpose()?;
        c.hedge.percent = f.hedge_budget;
        c.validate()?;
        Ok(c)
    }
}
