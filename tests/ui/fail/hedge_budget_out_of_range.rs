use breaker::{circuit_breaker, BreakerError};

#[circuit_breaker(hedge = 1, hedge_budget = 0)]
async fn nothing() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(hedge = 1, hedge_budget = 150)]
async fn over() -> Result<u32, BreakerError> {
    Ok(1)
}

fn main() {
    let _ = nothing();
    let _ = over();
}
