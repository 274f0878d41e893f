//! The attribute keeps the body as its tokens: a syntax error in it is rustc's own, once.
use breaker::{circuit_breaker, BreakerError};

#[circuit_breaker]
async fn rate(region: &str) -> Result<f64, BreakerError> {
    let scale = ;
    Ok(region.len() as f64 * scale)
}

fn main() {
    let _ = rate("eu");
}
