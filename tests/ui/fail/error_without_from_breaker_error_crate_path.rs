// With `crate = "…"` (a facade re-exported under another path), an error type without
// `From<BreakerError>` is still one error on the return type: with `retry`, with `config`
// (the call in a block of its own) and keyed, where the call is awaited.
mod facade {
    pub use ::breaker;
}

#[derive(Debug)]
pub struct QuoteError;

#[facade::breaker::circuit_breaker(crate = "facade::breaker", retry = 2)]
async fn retried(id: u32) -> Result<u32, QuoteError> {
    Ok(id)
}

#[facade::breaker::circuit_breaker(crate = "facade::breaker", config = facade::breaker::Config::default())]
async fn configured(id: u32) -> Result<u32, QuoteError> {
    Ok(id)
}

#[facade::breaker::circuit_breaker(crate = "facade::breaker", key = id)]
async fn keyed(id: u32) -> Result<u32, QuoteError> {
    Ok(id)
}

fn main() {
    let _ = (retried(1), configured(2), keyed(3));
}
