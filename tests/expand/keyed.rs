impl TenantDb {
    #[circuit_breaker(key = self.tenant_id, failure_rate = 50, window = 20, max_keys = 1000, idle = "5m")]
    async fn query(&self, sql: &str) -> Result<Rows, DbError> {
        self.pool.query(sql).await
    }
}

#[circuit_breaker(key = url.host_str().unwrap_or(""), fallback = queue_hook, fleet = false)]
async fn deliver_webhook(url: &Url, body: &[u8]) -> Result<(), HookError> {
    client.post(url, body).await
}
