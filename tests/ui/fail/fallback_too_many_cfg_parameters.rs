use breaker::{circuit_breaker, BreakerError, CallError};

#[circuit_breaker(fallback = zero)]
fn sum(
    #[cfg(all())] a: u8,
    #[cfg(all())] b: u8,
    #[cfg(all())] c: u8,
    #[cfg(all())] d: u8,
    #[cfg(all())] e: u8,
) -> Result<u8, BreakerError> {
    Ok(a + b + c + d + e)
}

fn zero(_a: u8, _b: u8, _c: u8, _d: u8, _e: u8, _err: CallError<BreakerError>) -> Result<u8, BreakerError> {
    Ok(0)
}

fn main() {
    let _ = sum(1, 2, 3, 4, 5);
}
