// With `retry` and without a fallback, an error type without `From<BreakerError>` is one
// error on the return type, as without `retry`: not on the `retry` value.
use breaker::circuit_breaker;

#[derive(Debug)]
pub struct QuoteError;

#[circuit_breaker(retry = 3, backoff = "50ms")]
async fn quote(id: u32) -> Result<u32, QuoteError> {
    Ok(id)
}

fn main() {
    let _ = quote(7);
}
