use breaker::{circuit_breaker, CallError};

#[derive(Debug)]
struct TaxError;

// Forgets the error parameter.
fn cached_tax(region: &str) -> Result<u32, TaxError> {
    let _ = region;
    Ok(0)
}

#[circuit_breaker(fallback = cached_tax)]
fn get_tax(region: &str, year: u16) -> Result<u32, TaxError> {
    let _ = (region, year);
    Err(TaxError)
}

fn main() {
    let _ = get_tax("eu", 2026);
    let _ = CallError::<TaxError>::Inner(TaxError);
}
