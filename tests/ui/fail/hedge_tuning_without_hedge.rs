use breaker::{circuit_breaker, BreakerError};

#[circuit_breaker(hedge_delay = "p99")]
async fn delay_alone() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(threshold = 3, hedge_budget = 10)]
async fn budget_alone() -> Result<u32, BreakerError> {
    Ok(1)
}

fn main() {
    let _ = delay_alone();
    let _ = budget_alone();
}
