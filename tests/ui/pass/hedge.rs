//! `hedge`, `hedge_delay`, `hedge_budget`: with and without a fallback, a classifier, a
//! `config`, owned, borrowed and `mut` arguments the body consumes, `&self` methods.
use breaker::{circuit_breaker, BreakerError, CallError, Config, Verdict};

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("unavailable")]
    Unavailable,
    #[error(transparent)]
    Breaker(#[from] BreakerError),
}

#[circuit_breaker(hedge = 1)]
async fn minimal() -> Result<u32, Error> {
    Err(Error::Unavailable)
}

#[circuit_breaker(hedge = 4, hedge_delay = "p99.9", hedge_budget = 100, timeout = "1s")]
async fn consumes(body: String, mut tries: Vec<u8>, seen: &str) -> Result<usize, Error> {
    tries.push(1);
    let owned: String = body;
    Ok(owned.len() + tries.len() + seen.len())
}

#[circuit_breaker(hedge = 2, hedge_delay = "20ms", hedge_budget = 5)]
async fn fixed_delay(id: u64) -> Result<u64, Error> {
    Ok(id)
}

#[circuit_breaker(hedge = 1, hedge_delay = "p50")]
async fn median() -> Result<u64, Error> {
    Ok(1)
}

async fn cached(_id: u64, _e: CallError<Error>) -> Result<u32, Error> {
    Ok(0)
}

#[circuit_breaker(hedge = 1, fallback = cached)]
async fn with_fallback(id: u64) -> Result<u32, Error> {
    Ok(id as u32)
}

fn judge(r: &Result<u32, Error>) -> Verdict {
    match r {
        Ok(_) => Verdict::Success,
        Err(_) => Verdict::Failure,
    }
}

#[circuit_breaker(hedge = 1, classify = judge, fallback = |_e| async { Ok(0) })]
async fn classified() -> Result<u32, Error> {
    Ok(1)
}

fn is_transient(e: &Error) -> bool {
    matches!(e, Error::Unavailable)
}

#[circuit_breaker(hedge = 1, is_failure = is_transient)]
async fn judged() -> Result<u32, Error> {
    Ok(1)
}

fn config() -> Config {
    Config::default().threshold(3)
}

#[circuit_breaker(config = config(), hedge = 1, hedge_delay = "10ms")]
async fn configured() -> Result<u32, Error> {
    Ok(1)
}

struct Client {
    base: String,
}

impl Client {
    #[circuit_breaker(hedge = 1)]
    async fn get(&self, path: &str) -> Result<String, Error> {
        Ok(format!("{}{path}", self.base))
    }
}

fn main() {
    let _ = minimal();
    let _ = consumes(String::new(), Vec::new(), "x");
    let _ = fixed_delay(1);
    let _ = median();
    let _ = with_fallback(1);
    let _ = classified();
    let _ = judged();
    let _ = configured();
    let c = Client { base: String::new() };
    let _ = c.get("/");
}
