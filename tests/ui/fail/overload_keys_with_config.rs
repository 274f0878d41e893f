use breaker::{circuit_breaker, BreakerError};

#[circuit_breaker(config = breaker::Config::default(), throttle = 2, ramp = "30s")]
async fn call0() -> Result<u32, BreakerError> {
    Ok(1)
}

fn main() {
    let _ = call0();
}
