use breaker::{circuit_breaker, BreakerError};

#[circuit_breaker(max_concurrent = 10, adaptive_concurrency = 100)]
async fn call0() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(adaptive_concurrency = 0)]
async fn call1() -> Result<u32, BreakerError> {
    Ok(1)
}

fn main() {
    let _ = call0();
    let _ = call1();
}
