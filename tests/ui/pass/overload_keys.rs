//! Every overload key of part three, alone and together, with a fallback and with `key`.
use breaker::{circuit_breaker, BreakerError, CallError};

#[circuit_breaker(throttle = 2)]
async fn throttled() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(throttle = 1.5, max_throttle = 80, throttle_window = "2m", ramp = "30s")]
fn throttled_sync() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(adaptive_concurrency = 100, timeout = "600ms", dry_run = true)]
async fn adaptive() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(
    threshold = 3,
    throttle = 2,
    ramp = "10s",
    dry_run = false,
    adaptive_concurrency = 50,
    key = host,
    fallback = shed_fallback,
)]
async fn per_host(host: &str) -> Result<u32, std::io::Error> {
    Ok(host.len() as u32)
}

async fn shed_fallback(_host: &str, err: CallError<std::io::Error>) -> Result<u32, std::io::Error> {
    match err {
        CallError::Breaker(e) if e.is_throttled() => Ok(0),
        CallError::Breaker(e) => Err(e.into()),
        CallError::Inner(e) => Err(e),
    }
}

fn main() {
    let _ = throttled();
    let _ = throttled_sync();
    let _ = adaptive();
    let _ = per_host("example.com");
}
