use breaker::{circuit_breaker, BreakerError};

#[circuit_breaker(retry_budget = 20)]
async fn budget_alone() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(threshold = 3, backoff = "100ms")]
async fn backoff_alone() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(retry_within = "2s")]
async fn bound_alone() -> Result<u32, BreakerError> {
    Ok(1)
}

fn main() {
    let _ = budget_alone();
    let _ = backoff_alone();
    let _ = bound_alone();
}
