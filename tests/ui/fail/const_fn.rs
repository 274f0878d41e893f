use breaker::circuit_breaker;

#[derive(Debug)]
struct Error;

impl From<breaker::BreakerError> for Error {
    fn from(_: breaker::BreakerError) -> Self {
        Error
    }
}

#[circuit_breaker(threshold = 2)]
const fn call() -> Result<u32, Error> {
    Ok(1)
}

fn main() {
    let _ = call();
}
