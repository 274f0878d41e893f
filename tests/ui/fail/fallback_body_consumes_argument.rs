use breaker::{circuit_breaker, CallError};

#[derive(Debug)]
struct TaxError;

fn cached(_cart: Vec<u32>, _err: CallError<TaxError>) -> Result<u32, TaxError> {
    Ok(0)
}

#[circuit_breaker(fallback = cached)]
fn total(cart: Vec<u32>) -> Result<u32, TaxError> {
    let owned: Vec<u32> = cart;
    Ok(owned.iter().sum())
}

fn main() {
    let _ = total(vec![1]);
}
