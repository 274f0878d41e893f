use breaker::{circuit_breaker, BreakerError};

#[circuit_breaker(ramp = "0s")]
async fn call0() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(ramp = 30)]
async fn call1() -> Result<u32, BreakerError> {
    Ok(1)
}

fn main() {
    let _ = call0();
    let _ = call1();
}
