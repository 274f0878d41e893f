use breaker::{circuit_breaker, CallError};

#[derive(Debug)]
struct TaxError;

// The function takes nothing, so the fallback takes only the error.
fn cached_rate(region: &str, err: CallError<TaxError>) -> Result<u32, TaxError> {
    let _ = (region, err);
    Ok(0)
}

#[circuit_breaker(fallback = cached_rate)]
fn base_rate() -> Result<u32, TaxError> {
    Err(TaxError)
}

fn main() {
    let _ = base_rate();
}
