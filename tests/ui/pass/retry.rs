//! `retry`, `retry_budget`, `backoff`, `retry_within`: with and without a fallback, a classifier, a key, a
//! `config`, owned and `mut` arguments the body consumes, `&self` methods.
use breaker::{circuit_breaker, BreakerError, CallError, Config, Verdict};

#[derive(Debug, thiserror::Error)]
enum Error {
    #[error("unavailable")]
    Unavailable,
    #[error(transparent)]
    Breaker(#[from] BreakerError),
}

#[circuit_breaker(retry = 3)]
async fn minimal() -> Result<u32, Error> {
    Err(Error::Unavailable)
}

#[circuit_breaker(retry = 2, retry_budget = 10, backoff = "250ms", retry_within = "2s", timeout = "1s")]
async fn consumes(body: String, mut tries: Vec<u8>) -> Result<usize, Error> {
    tries.push(1);
    let owned: String = body;
    Ok(owned.len() + tries.len())
}

async fn cached(_id: u64, _e: CallError<Error>) -> Result<u32, Error> {
    Ok(0)
}

#[circuit_breaker(retry = 4, fallback = cached)]
async fn with_fallback(id: u64) -> Result<u32, Error> {
    Ok(id as u32)
}

fn judge(r: &Result<u32, Error>) -> Verdict {
    match r {
        Ok(_) => Verdict::Success,
        Err(_) => Verdict::Failure,
    }
}

#[circuit_breaker(retry = 3, classify = judge, fallback = |_e| async { Ok(0) })]
async fn classified() -> Result<u32, Error> {
    Ok(1)
}

fn config() -> Config {
    Config::default().threshold(3)
}

#[circuit_breaker(config = config(), retry = 3)]
async fn configured() -> Result<u32, Error> {
    Ok(1)
}

struct Client {
    base: String,
}

impl Client {
    #[circuit_breaker(retry = 3, key = host)]
    async fn get(&self, host: &str, path: String) -> Result<String, Error> {
        Ok(format!("{}{host}{path}", self.base))
    }
}

#[async_trait::async_trait]
trait Store {
    async fn put(&self, key: String, value: Vec<u8>) -> Result<usize, Error>;
    async fn get(&self, key: &str) -> Result<usize, Error>;
}

impl Client {
    async fn put_later(&self, _k: String, _v: Vec<u8>, _e: CallError<Error>) -> Result<usize, Error> {
        Ok(0)
    }
}

#[async_trait::async_trait]
impl Store for Client {
    #[circuit_breaker(retry = 3, fallback = put_later)]
    async fn put(&self, key: String, value: Vec<u8>) -> Result<usize, Error> {
        Ok(self.base.len() + key.len() + value.len())
    }

    #[circuit_breaker(retry = 2, backoff = "10ms")]
    async fn get(&self, key: &str) -> Result<usize, Error> {
        Ok(key.len())
    }
}

fn main() {
    fn send<T: Send>(_: T) {}
    send(minimal());
    send(consumes(String::new(), Vec::new()));
    send(with_fallback(1));
    send(classified());
    send(configured());
    let c = Client { base: String::new() };
    send(c.get("a", String::new()));
}
