#[circuit_breaker]
async fn get_rate(region: &str) -> Result<f64, TaxError> {
    tax_api.rate(region).await
}
