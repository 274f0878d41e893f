use breaker::{circuit_breaker, BreakerError};

#[circuit_breaker(key = host, max_open = 150)]
async fn deliver(host: &str) -> Result<(), BreakerError> {
    let _ = host;
    Ok(())
}

#[circuit_breaker(max_open = 50)]
async fn unkeyed() -> Result<(), BreakerError> {
    Ok(())
}

fn main() {
    let _ = deliver("example.com");
    let _ = unkeyed();
}
