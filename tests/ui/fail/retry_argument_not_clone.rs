use breaker::{circuit_breaker, BreakerError};

struct Order {
    id: u64,
}

#[circuit_breaker(retry = 3)]
async fn place(order: Order) -> Result<u64, BreakerError> {
    Ok(order.id)
}

fn main() {
    let _ = place(Order { id: 1 });
}
