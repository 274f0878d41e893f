//! With a fallback the body borrows its arguments (the fallback receives them after it ran),
//! so an argument that is `Send` but not `Sync` (`Cell`) makes the call's future `!Send`.
//! Without a fallback the body owns them and the future is `Send` (see `main`).
use breaker::{circuit_breaker, BreakerError, CallError};
use std::cell::Cell;

#[circuit_breaker(fallback = zero)]
async fn count(seen: Cell<u32>) -> Result<u32, BreakerError> {
    seen.set(seen.get() + 1);
    Ok(seen.get())
}

async fn zero(_seen: Cell<u32>, _e: CallError<BreakerError>) -> Result<u32, BreakerError> {
    Ok(0)
}

#[circuit_breaker(threshold = 3)]
async fn count_without_fallback(seen: Cell<u32>) -> Result<u32, BreakerError> {
    seen.set(seen.get() + 1);
    Ok(seen.get())
}

fn is_send<T: Send>(_: T) {}

fn main() {
    is_send(count_without_fallback(Cell::new(0)));
    is_send(count(Cell::new(0)));
}
