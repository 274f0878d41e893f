use breaker::{circuit_breaker, BreakerError, Verdict};

fn judge(_r: &Result<u32, BreakerError>) -> Verdict {
    Verdict::Success
}

fn counts(_e: &BreakerError) -> bool {
    true
}

#[circuit_breaker(classify = judge, is_failure = counts)]
async fn get() -> Result<u32, BreakerError> {
    Ok(1)
}

fn main() {
    let _ = get();
}
