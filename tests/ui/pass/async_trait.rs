//! `#[async_trait]` on the impl expands first and hands the attribute
//! `fn … -> Pin<Box<dyn Future<Output = R> + Send + 'async_trait>> { Box::pin(async move { … }) }`:
//! the inner block is wrapped, so `timeout`, fallbacks (`&self` and `&mut self`, owned and
//! `mut` arguments), `key = self.…`, `classify`, `?`, early `return` and pattern parameters
//! work as in an `async fn`.
use async_trait::async_trait;
use breaker::{circuit_breaker, BreakerError, CallError, Verdict};

#[derive(Debug)]
enum StoreError {
    Down,
    Breaker(BreakerError),
}

impl From<BreakerError> for StoreError {
    fn from(e: BreakerError) -> Self {
        StoreError::Breaker(e)
    }
}

#[async_trait]
trait Store {
    async fn get(&self, key: &str) -> Result<String, StoreError>;
    async fn put(&self, key: String, value: Vec<u8>) -> Result<usize, StoreError>;
    async fn bump(&mut self, by: u32) -> Result<u32, StoreError>;
    async fn sum(&self, pair: (u32, u32)) -> Result<u32, StoreError>;
    async fn keyed(&self, n: u32) -> Result<u32, StoreError>;
    async fn traced_inside(&self, n: u32) -> Result<u32, StoreError>;
    async fn traced_outside(&self, n: u32) -> Result<u32, StoreError>;
}

struct Remote {
    hits: u32,
    host: String,
}

#[async_trait]
impl Store for Remote {
    #[circuit_breaker(threshold = 2, timeout = "600ms")]
    async fn get(&self, key: &str) -> Result<String, StoreError> {
        if key.is_empty() {
            return Err(StoreError::Down);
        }
        let n: u32 = key.len().try_into().map_err(|_| StoreError::Down)?;
        Ok(format!("{key}:{}", n + self.hits))
    }

    #[circuit_breaker(fallback = put_later)]
    async fn put(&self, key: String, mut value: Vec<u8>) -> Result<usize, StoreError> {
        value.push(0);
        Ok(key.len() + value.len() + self.hits as usize)
    }

    #[circuit_breaker(fallback = bump_fallback)]
    async fn bump(&mut self, by: u32) -> Result<u32, StoreError> {
        self.hits += by;
        Ok(self.hits)
    }

    #[circuit_breaker(threshold = 3)]
    async fn sum(&self, (a, b): (u32, u32)) -> Result<u32, StoreError> {
        Ok(a + b + self.hits)
    }

    #[circuit_breaker(key = self.host, classify = |r| if r.is_ok() { Verdict::Success } else { Verdict::Failure })]
    async fn keyed(&self, n: u32) -> Result<u32, StoreError> {
        Ok(n + self.hits)
    }

    // `#[tracing::instrument]` rewrites async-trait's body into another
    // `Box::pin(async move { … })`, which the attribute wraps in turn.
    #[tracing::instrument(skip(self))]
    #[circuit_breaker(threshold = 2)]
    async fn traced_inside(&self, n: u32) -> Result<u32, StoreError> {
        Ok(n + self.hits)
    }

    // The other order: the span is made inside the breaker's call; with a fallback this is
    // the order to use (instrument's own `async move` would move the arguments otherwise).
    #[circuit_breaker(threshold = 2, fallback = |_this: &Self, n, _e| async move { Ok(n) })]
    #[tracing::instrument(skip(self))]
    async fn traced_outside(&self, n: u32) -> Result<u32, StoreError> {
        Ok(n + self.hits)
    }
}

impl Remote {
    async fn put_later(&self, key: String, value: Vec<u8>, err: CallError<StoreError>) -> Result<usize, StoreError> {
        let _ = (key, value, self.hits);
        match err {
            CallError::Breaker(_) => Ok(0),
            CallError::Inner(e) => Err(e),
        }
    }

    async fn bump_fallback(&mut self, by: u32, _err: CallError<StoreError>) -> Result<u32, StoreError> {
        self.hits += by;
        Ok(self.hits)
    }
}

fn is_send<T: Send>(t: T) -> T {
    t
}

fn main() {
    let mut r = Remote { hits: 0, host: "db".to_owned() };
    drop(is_send(r.keyed(1)));
    drop(is_send(r.traced_inside(1)));
    drop(is_send(r.traced_outside(1)));
    drop(is_send(r.get("k")));
    drop(is_send(r.put("k".to_owned(), vec![1])));
    drop(is_send(r.bump(1)));
    drop(is_send(r.sum((1, 2))));
}
