use breaker::{circuit_breaker, CallError};

#[derive(Debug)]
struct TaxError;

async fn cached_tax(err: CallError<TaxError>) -> Result<u32, TaxError> {
    let _ = err;
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
