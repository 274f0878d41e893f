use breaker::{circuit_breaker, BreakerError};

#[circuit_breaker(hedge = 1)]
fn blocking() -> Result<u32, BreakerError> {
    Ok(1)
}

fn main() {
    let _ = blocking();
}
