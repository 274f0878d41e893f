// A `classify` path of the wrong type: one error on it naming the `fn` pointer it must be,
// with the function's `T` and `E`, in every form of the call (async, plain, keyed, retried).
use breaker::{circuit_breaker, BreakerError, Verdict};

fn by_error(_e: &BreakerError) -> Verdict {
    Verdict::Failure
}

fn as_bool(_r: &Result<u32, BreakerError>) -> bool {
    true
}

fn of_other_ok(_r: &Result<String, BreakerError>) -> Verdict {
    Verdict::Success
}

#[circuit_breaker(classify = by_error)]
async fn get() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(classify = as_bool)]
fn put() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(classify = of_other_ok, key = host)]
async fn keyed(host: &str) -> Result<u32, BreakerError> {
    let _ = host;
    Ok(1)
}

#[circuit_breaker(classify = by_error, retry = 2)]
async fn retried(id: u32) -> Result<u32, BreakerError> {
    Ok(id)
}

fn main() {
    let _ = get();
    let _ = put();
    let _ = keyed("a");
    let _ = retried(1);
}
