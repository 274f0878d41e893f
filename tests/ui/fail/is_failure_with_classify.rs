use breaker::{circuit_breaker, BreakerError, Verdict};

fn judge(_r: &Result<u32, BreakerError>) -> Verdict {
    Verdict::Success
}

fn counts(_e: &BreakerError) -> bool {
    true
}

// `is_failure` written first: the error is on `classify`, the second key.
#[circuit_breaker(is_failure = counts, classify = judge)]
async fn get() -> Result<u32, BreakerError> {
    Ok(1)
}

fn main() {
    let _ = get();
}
