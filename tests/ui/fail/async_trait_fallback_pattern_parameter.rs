use async_trait::async_trait;
use breaker::{circuit_breaker, CallError};

#[derive(Debug)]
struct Down;

#[async_trait]
trait Adder {
    async fn add(&self, pair: (u32, u32)) -> Result<u32, Down>;
}

struct Local;

#[async_trait]
impl Adder for Local {
    #[circuit_breaker(fallback = zero)]
    async fn add(&self, (a, b): (u32, u32)) -> Result<u32, Down> {
        Ok(a + b)
    }
}

impl Local {
    async fn zero(&self, _pair: (u32, u32), _e: CallError<Down>) -> Result<u32, Down> {
        Ok(0)
    }
}

fn main() {
    let _ = Local.add((1, 2));
}
