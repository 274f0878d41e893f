//! `config = expr` (built once, combined with the non-policy keys, `key` and `classify`),
//! `crate = "…"` for a facade re-exported under another path (keyed too), `fleet`, and every
//! key at once.
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

#[facade::breaker::circuit_breaker(crate = "facade::breaker", key = host, classify = judge, fleet = false)]
fn renamed_keyed(host: &str) -> Result<u32, BreakerError> {
    Ok(host.len() as u32)
}

fn judge(r: &Result<u32, BreakerError>) -> breaker::Verdict {
    if r.is_ok() { breaker::Verdict::Success } else { breaker::Verdict::Failure }
}

#[circuit_breaker(config = from_env(), key = (host, port), name = "keyed_config", on_state_change = log, classify = judge)]
async fn keyed_config(host: &str, port: u16) -> Result<u32, BreakerError> {
    Ok(u32::from(port) + host.len() as u32)
}

#[circuit_breaker(threshold = 2, fleet = true)]
async fn in_the_fleet() -> Result<u32, BreakerError> {
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
    let _ = every_key_keyed(1);
    let _ = renamed_keyed("h");
    let _ = keyed_config("h", 1);
    let _ = in_the_fleet();
}

/// Every part-two key at once (`fleet = true` cannot go with `key` yet).
#[circuit_breaker(
    threshold = 3,
    cool_off = "30s",
    fallback = every_key_fallback,
    name = "every_key_keyed",
    on_state_change = log,
    crate = "::breaker",
    key = x,
    max_keys = 100,
    idle = "1m",
    classify = judge,
    fleet = false,
)]
async fn every_key_keyed(x: u32) -> Result<u32, BreakerError> {
    Ok(x)
}
