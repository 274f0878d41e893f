use breaker::{circuit_breaker, BreakerError};

struct Tenant {
    id: u64,
}

#[circuit_breaker(key = tenant)]
async fn query(tenant: &Tenant) -> Result<u64, BreakerError> {
    Ok(tenant.id)
}

#[circuit_breaker(key = ratio)]
fn scaled(ratio: f64) -> Result<f64, BreakerError> {
    Ok(ratio)
}

fn main() {
    let _ = query(&Tenant { id: 1 });
    let _ = scaled(0.5);
}
