//! Built by `ui.rs` as a crate whose manifest says `brk = { package = "breaker", … }`.
use brk::{circuit_breaker, BreakerError};

#[circuit_breaker(threshold = 3)]
async fn fetch(id: u32) -> Result<u32, BreakerError> {
    Ok(id)
}

#[circuit_breaker(crate = "::brk", threshold = 3)]
fn given(id: u32) -> Result<u32, BreakerError> {
    Ok(id)
}

fn main() {
    let _ = (fetch(1), given(2));
}
