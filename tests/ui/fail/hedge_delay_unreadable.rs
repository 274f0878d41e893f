use breaker::{circuit_breaker, BreakerError};

#[circuit_breaker(hedge = 1, hedge_delay = "p40")]
async fn low_percentile() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(hedge = 1, hedge_delay = "p99.99")]
async fn high_percentile() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(hedge = 1, hedge_delay = "soon")]
async fn not_a_duration() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(hedge = 1, hedge_delay = "5s")]
async fn past_the_ceiling() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(hedge = 1, hedge_delay = 95)]
async fn not_a_string() -> Result<u32, BreakerError> {
    Ok(1)
}

fn main() {
    let _ = low_percentile();
    let _ = high_percentile();
    let _ = not_a_duration();
    let _ = past_the_ceiling();
    let _ = not_a_string();
}
