use breaker::{circuit_breaker, BreakerError};

#[circuit_breaker(dry_run = "true")]
async fn call0() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(dry_run = 1)]
async fn call1() -> Result<u32, BreakerError> {
    Ok(1)
}

fn main() {
    let _ = call0();
    let _ = call1();
}
