//! `probe = path` on an `async fn`: a probe answering a `Verdict`, one answering a `Result`,
//! a closure, and with `config = …`.
use breaker::{circuit_breaker, BreakerError, Config, Verdict};

async fn health() -> Verdict {
    Verdict::Success
}

mod checks {
    pub async fn ping() -> Result<(), std::io::Error> {
        Ok(())
    }
}

#[circuit_breaker(threshold = 3, cool_off = "30s", probe = health)]
async fn get() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(probe = checks::ping, timeout = "1s")]
async fn put() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(probe = || async { Ok::<_, ()>(()) })]
async fn head() -> Result<u32, BreakerError> {
    Ok(1)
}

#[circuit_breaker(config = Config::default().threshold(2), probe = health)]
async fn delete() -> Result<u32, BreakerError> {
    Ok(1)
}

fn main() {
    let _ = (get(), put(), head(), delete());
}
