use breaker::{circuit_breaker, BreakerError};

#[circuit_breaker(throttle = 2, max_throttle = 150)]
async fn call0() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(throttle = 2, max_throttle = 0.9)]
async fn call1() -> Result<u32, BreakerError> {
    Ok(1)
}

fn main() {
    let _ = call0();
    let _ = call1();
}
