use breaker::circuit_breaker;
use std::{future::Future, pin::Pin};

#[derive(Debug)]
struct Down;

impl From<breaker::BreakerError> for Down {
    fn from(_: breaker::BreakerError) -> Self {
        Down
    }
}

#[circuit_breaker(threshold = 3)]
fn fetch(id: u32) -> Pin<Box<dyn Future<Output = Result<u32, Down>> + Send>> {
    let fut = async move { Ok(id) };
    Box::pin(fut)
}

fn main() {
    let _ = fetch(1);
}
