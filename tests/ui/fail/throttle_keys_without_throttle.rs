use breaker::{circuit_breaker, BreakerError};

#[circuit_breaker(max_throttle = 80)]
async fn call0() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(throttle_window = "30s")]
async fn call1() -> Result<u32, BreakerError> {
    Ok(1)
}

fn main() {
    let _ = call0();
    let _ = call1();
}
