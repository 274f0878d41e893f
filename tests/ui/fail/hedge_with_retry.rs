use breaker::{circuit_breaker, BreakerError};

#[circuit_breaker(hedge = 1, retry = 3)]
async fn both() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(retry = 3, hedge = 1)]
async fn both_the_other_way() -> Result<u32, BreakerError> {
    Ok(1)
}

fn main() {
    let _ = both();
    let _ = both_the_other_way();
}
