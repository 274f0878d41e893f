//! A parameter the body never uses is reported, as in the plain function, when dropping it
//! does nothing (a reference, a number): the attribute names only the others, which must live
//! until the call ends.
#![deny(unused_variables)]
use breaker::{circuit_breaker, BreakerError};

#[circuit_breaker]
async fn rate(region: &str, attempt: u32) -> Result<f64, BreakerError> {
    Ok(1.0)
}

fn main() {
    let _ = rate("eu", 1);
}
