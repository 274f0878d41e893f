use async_trait::async_trait;
use breaker::{circuit_breaker, CallError};

#[derive(Debug)]
struct Down;

#[async_trait]
trait Job {
    async fn run(self) -> Result<u32, Down>;
}

struct Once;

#[async_trait]
impl Job for Once {
    #[circuit_breaker(fallback = later)]
    async fn run(self) -> Result<u32, Down> {
        Ok(1)
    }
}

impl Once {
    async fn later(self, _e: CallError<Down>) -> Result<u32, Down> {
        Ok(0)
    }
}

fn main() {
    let _ = Once.run();
}
