use breaker::{circuit_breaker, BreakerError};

#[circuit_breaker(key = host, max_keys = 0, idle = "0s")]
async fn deliver(host: &str) -> Result<(), BreakerError> {
    let _ = host;
    Ok(())
}

fn main() {
    let _ = deliver("example.com");
}
