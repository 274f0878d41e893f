use breaker::{circuit_breaker, BreakerError};

#[circuit_breaker(retry = 3)]
fn blocking() -> Result<u32, BreakerError> {
    Ok(1)
}

fn main() {
    let _ = blocking();
}
