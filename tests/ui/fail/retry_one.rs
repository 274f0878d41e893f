use breaker::{circuit_breaker, BreakerError};

#[circuit_breaker(retry = 1)]
async fn once() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(retry = 0)]
async fn never() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(retry = "3")]
async fn quoted() -> Result<u32, BreakerError> {
    Ok(1)
}

fn main() {
    let _ = once();
    let _ = never();
    let _ = quoted();
}
