//! Free `async fn`s: every return-type spelling, `?`, early `return`, the default `E`
//! conversions (`io::Error`, `anyhow`, thiserror `#[from]`, `Box<dyn Error>`).
use breaker::circuit_breaker;
use std::io;

#[derive(Debug, thiserror::Error)]
enum TaxError {
    #[error("tax api: {0}")]
    Api(String),
    #[error(transparent)]
    Breaker(#[from] breaker::BreakerError),
}

struct Cart {
    total: u64,
}

#[circuit_breaker]
async fn minimal() -> Result<u32, TaxError> {
    Ok(1)
}

#[circuit_breaker(threshold = 3, cool_off = "5s", timeout = "600ms")]
async fn get_tax(cart: &Cart) -> Result<u64, TaxError> {
    if cart.total == 0 {
        return Ok(0);
    }
    let rate: u64 = "20".parse().map_err(|_| TaxError::Api("parse".into()))?;
    Ok(cart.total * rate / 100)
}

#[circuit_breaker(timeout = "1s")]
async fn read(path: String) -> io::Result<Vec<u8>> {
    let _ = path;
    Err(io::Error::other("no file system in this test"))
}

#[circuit_breaker]
async fn any(x: u32) -> anyhow::Result<u32> {
    anyhow::ensure!(x > 0, "zero");
    Ok(x)
}

#[circuit_breaker]
async fn boxed() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    Ok(())
}

type MyResult<T> = Result<T, TaxError>;

#[circuit_breaker]
async fn alias() -> MyResult<String> {
    Ok(String::new())
}

#[circuit_breaker]
async fn impl_trait_arg(items: impl IntoIterator<Item = u32>) -> anyhow::Result<u32> {
    Ok(items.into_iter().sum())
}

#[circuit_breaker]
async fn impl_trait_return() -> anyhow::Result<impl std::fmt::Display> {
    Ok(5)
}

#[circuit_breaker]
async fn consumes(v: Vec<u8>) -> anyhow::Result<Vec<u8>> {
    let owned = v;
    Ok(owned)
}

#[circuit_breaker]
async fn returns_borrow(s: &str) -> anyhow::Result<&str> {
    Ok(s.trim())
}

#[circuit_breaker]
async fn pattern_args((a, b): (u32, u32)) -> anyhow::Result<u32> {
    Ok(a + b)
}

fn assert_send<T: Send>(_: T) {}

fn main() {
    assert_send(get_tax(&Cart { total: 1 }));
    assert_send(minimal());
    let _ = read(String::new());
    let _ = any(1);
    let _ = boxed();
    let _ = alias();
    let _ = impl_trait_arg(vec![1]);
    let _ = impl_trait_return();
    let _ = consumes(vec![]);
    let _ = returns_borrow("x");
    let _ = pattern_args((1, 2));
}
