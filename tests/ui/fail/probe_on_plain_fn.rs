use breaker::{circuit_breaker, BreakerError};

async fn health() -> Result<(), BreakerError> {
    Ok(())
}

// The probe runs as a tokio task: a plain fn may run where no runtime is.
#[circuit_breaker(threshold = 3, probe = health)]
fn get() -> Result<u32, BreakerError> {
    Ok(1)
}

// Not a keyed function's either: one probe cannot tell which key recovered.
#[circuit_breaker(key = host, probe = health)]
async fn get_from(host: &str) -> Result<u32, BreakerError> {
    Ok(host.len() as u32)
}

fn main() {
    let _ = get();
    let _ = get_from("a");
}
