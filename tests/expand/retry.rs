#[circuit_breaker(retry = 3, backoff = "50ms", fallback = cached)]
async fn quote(symbol: String, at: u64) -> Result<u64, QuoteError> {
    fetch(&symbol, at).await
}
