//! `config = expr` (built once, combined with the non-policy keys) and `crate = "…"` for a
//! facade re-exported under another path.
use breaker::{circuit_breaker, BreakerError, Config, Transition};
use std::time::Duration;

mod facade {
    pub use ::breaker;
}

fn from_env() -> Config {
    let secs = std::env::var("COOL_OFF_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    Config::default().threshold(3).cool_off(Duration::from_secs(secs))
}

fn log(t: &Transition) {
    let _ = t;
}

fn never(_: &BreakerError) -> bool {
    false
}

#[circuit_breaker(config = from_env(), name = "shop::tax", on_state_change = log, is_failure = never)]
async fn with_config() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(config = Config::default().failure_rate(50).window_calls(20))]
fn inline_config() -> Result<u32, BreakerError> {
    Ok(1)
}

#[facade::breaker::circuit_breaker(crate = "facade::breaker", threshold = 2, timeout = "1s")]
async fn renamed() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(
    threshold = 3,
    failure_rate = 50,
    window = "1m",
    min_calls = 5,
    slow_call = "2s",
    cool_off = "30s",
    max_cool_off = "5m",
    jitter = "500ms",
    probes = 3,
    success_threshold = 2,
    timeout = "1m 30s",
    max_concurrent = 16,
    is_failure = never,
    fallback = every_key_fallback,
    name = "every_key",
    on_state_change = log,
    crate = "::breaker",
)]
async fn every_key(x: u32) -> Result<u32, BreakerError> {
    Ok(x)
}

async fn every_key_fallback(x: u32, _e: breaker::CallError<BreakerError>) -> Result<u32, BreakerError> {
    Ok(x)
}

fn main() {
    let _ = with_config();
    let _ = inline_config();
    let _ = renamed();
    let _ = every_key(1);
}
