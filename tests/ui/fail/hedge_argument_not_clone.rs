use breaker::{circuit_breaker, BreakerError};

struct Order {
    id: u64,
}

#[circuit_breaker(hedge = 1)]
async fn place(order: Order) -> Result<u64, BreakerError> {
    Ok(order.id)
}

fn main() {
    let _ = place(Order { id: 1 });
}
