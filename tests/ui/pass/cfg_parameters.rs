//! A parameter under `#[cfg]` reaches the fallback only where it exists.
use breaker::{circuit_breaker, CallError};

#[derive(Debug)]
struct Down;

#[circuit_breaker(fallback = cached)]
async fn lookup(
    id: u32,
    #[cfg(any())] trace: &str,
    #[cfg(all())] region: &str,
) -> Result<u32, Down> {
    let _ = region;
    Ok(id)
}

async fn cached(
    id: u32,
    #[cfg(any())] trace: &str,
    #[cfg(all())] region: &str,
    _e: CallError<Down>,
) -> Result<u32, Down> {
    let _ = region;
    Ok(id)
}

#[circuit_breaker(fallback = |id, _e| Ok(id))]
fn lookup_sync(id: u32, #[cfg(any())] trace: &str) -> Result<u32, Down> {
    Ok(id)
}

fn main() {
    let _ = lookup(1, "eu");
    let _ = lookup_sync(1);
}
