use breaker::{circuit_breaker, BreakerError};

#[circuit_breaker(max_keys = 100, idle = "5m")]
async fn deliver(host: &str) -> Result<(), BreakerError> {
    let _ = host;
    Ok(())
}

fn main() {
    let _ = deliver("example.com");
}
