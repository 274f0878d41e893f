use breaker::circuit_breaker;

#[derive(Debug)]
struct Error;

impl From<breaker::BreakerError> for Error {
    fn from(_: breaker::BreakerError) -> Self {
        Error
    }
}

fn is_transient(code: &u16) -> bool {
    *code >= 500
}

#[circuit_breaker(is_failure = is_transient)]
async fn call() -> Result<u32, Error> {
    Ok(1)
}

fn main() {
    let _ = call();
}
