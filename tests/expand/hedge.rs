#[circuit_breaker(hedge = 1, hedge_delay = "p99", hedge_budget = 10, fallback = cached)]
async fn quote(symbol: String, at: u64) -> Result<u64, QuoteError> {
    fetch(&symbol, at).await
}
