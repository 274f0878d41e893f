use breaker::{circuit_breaker, BreakerError};

#[circuit_breaker(fleet = "true")]
async fn get() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(fleet = 1)]
async fn put() -> Result<u32, BreakerError> {
    Ok(1)
}

fn main() {
    let _ = get();
    let _ = put();
}
