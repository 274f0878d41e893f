#[circuit_breaker(
    threshold = 3,
    failure_rate = 50,
    window = 20,
    min_calls = 10,
    slow_call = "2s",
    cool_off = "30s",
    max_cool_off = "5m",
    jitter = "250ms",
    probes = 3,
    success_threshold = 2,
    timeout = "1m 30s",
    max_concurrent = 16,
    is_failure = is_transient,
    fallback = cached_score,
    name = "fraud::score",
    on_state_change = page_on_call,
    crate = "::breaker",
)]
async fn score(order: &Order) -> Result<Score, FraudError> {
    let score = vendor.score(order).await?;
    Ok(score)
}
