#[circuit_breaker(fallback = cached)]
async fn lookup(id: u32, #[cfg(feature = "trace")] trace: &Trace) -> Result<Row, DbError> {
    db.get(id).await
}
