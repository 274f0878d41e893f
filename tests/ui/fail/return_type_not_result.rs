use breaker::circuit_breaker;

#[derive(Debug)]
struct Error;

impl From<breaker::BreakerError> for Error {
    fn from(_: breaker::BreakerError) -> Self {
        Error
    }
}

#[circuit_breaker(threshold = 2)]
async fn call() -> u32 {
    1
}

fn main() {
    let _ = call();
}
