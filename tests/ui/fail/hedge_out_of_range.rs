use breaker::{circuit_breaker, BreakerError};

#[circuit_breaker(hedge = 0)]
async fn none() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(hedge = 5)]
async fn too_many() -> Result<u32, BreakerError> {
    Ok(1)
}

fn main() {
    let _ = none();
    let _ = too_many();
}
