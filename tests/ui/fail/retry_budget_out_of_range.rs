use breaker::{circuit_breaker, BreakerError};

#[circuit_breaker(retry = 3, retry_budget = 0)]
async fn nothing() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(retry = 3, retry_budget = 101)]
async fn more_than_all() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(retry = 3, retry_budget = 0.2)]
async fn a_fraction() -> Result<u32, BreakerError> {
    Ok(1)
}

fn main() {
    let _ = nothing();
    let _ = more_than_all();
    let _ = a_fraction();
}
