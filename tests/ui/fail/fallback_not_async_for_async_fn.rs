use breaker::{circuit_breaker, CallError};

#[derive(Debug)]
struct TaxError;

fn cached_tax(region: &str, err: CallError<TaxError>) -> Result<u32, TaxError> {
    let _ = (region, err);
    Ok(0)
}

#[circuit_breaker(fallback = cached_tax)]
async fn get_tax(region: &str) -> Result<u32, TaxError> {
    let _ = region;
    Err(TaxError)
}

fn main() {
    let _ = get_tax("eu");
}
