use breaker::{circuit_breaker, BreakerError};

#[circuit_breaker(key = host, fleet = true)]
async fn deliver(host: &str) -> Result<(), BreakerError> {
    let _ = host;
    Ok(())
}

fn main() {
    let _ = deliver("example.com");
}
