use breaker::circuit_breaker;
use std::future::Future;

#[derive(Debug)]
struct Down;

impl From<breaker::BreakerError> for Down {
    fn from(_: breaker::BreakerError) -> Self {
        Down
    }
}

#[circuit_breaker(threshold = 3)]
fn fetch(id: u32) -> impl Future<Output = Result<u32, Down>> + Send {
    async move { Ok(id) }
}

fn main() {
    let _ = fetch(1);
}
