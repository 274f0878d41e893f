impl Gateway {
    #[circuit_breaker(threshold = 2, cool_off = "5s", fallback = queue_payment)]
    async fn charge(&self, card: &Card, cents: u64) -> Result<Receipt, GatewayError> {
        self.client.charge(card, cents).await
    }
}
