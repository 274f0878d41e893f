use breaker::{circuit_breaker, BreakerError, Verdict};

fn by_error(_e: &BreakerError) -> Verdict {
    Verdict::Failure
}

fn as_bool(_r: &Result<u32, BreakerError>) -> bool {
    true
}

#[circuit_breaker(classify = by_error)]
async fn get() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(classify = as_bool)]
fn put() -> Result<u32, BreakerError> {
    Ok(1)
}

fn main() {
    let _ = get();
    let _ = put();
}
