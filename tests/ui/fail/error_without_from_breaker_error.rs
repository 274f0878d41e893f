use breaker::circuit_breaker;

#[derive(Debug)]
struct TaxError;

#[circuit_breaker(threshold = 2)]
async fn get_tax() -> Result<u32, TaxError> {
    Err(TaxError)
}

fn main() {
    let _ = get_tax();
}
