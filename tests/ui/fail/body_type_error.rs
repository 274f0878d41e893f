//! A type error in the body is the plain function's: E0308 on `x`, with rustc's `.into()`
//! suggestion, the same with or without the attribute and with a fallback (never an E0271
//! about an `async` block, nor a note inside `breaker`).
use breaker::{circuit_breaker, BreakerError, CallError};

#[derive(Debug)]
struct MyErr;

impl From<BreakerError> for MyErr {
    fn from(_: BreakerError) -> Self {
        MyErr
    }
}

async fn plain(x: u8) -> Result<u32, MyErr> {
    Ok(x)
}

#[circuit_breaker]
async fn annotated(x: u8) -> Result<u32, MyErr> {
    Ok(x)
}

async fn zero(_: u8, _: CallError<MyErr>) -> Result<u32, MyErr> {
    Ok(0)
}

#[circuit_breaker(fallback = zero)]
async fn with_fallback(x: u8) -> Result<u32, MyErr> {
    if x == 0 {
        return Ok(x);
    }
    Ok(1)
}

fn main() {}
