use breaker::{circuit_breaker, BreakerError};

#[circuit_breaker(retry = 3, backoff = "0s")]
async fn no_wait() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(retry = 3, backoff = 100)]
async fn no_unit() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(retry = 3, retry_within = "0ms")]
async fn no_time() -> Result<u32, BreakerError> {
    Ok(1)
}

fn main() {
    let _ = no_wait();
    let _ = no_unit();
    let _ = no_time();
}
