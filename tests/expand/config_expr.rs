#[circuit_breaker(config = config_from_env("TAX"), name = "shop::tax", on_state_change = log_transition)]
async fn get_tax(cart: &Cart) -> Result<Tax, TaxError> {
    tax_api.post(cart).await
}
