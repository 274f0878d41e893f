//! Fallbacks the probe must accept: a borrowed return tied to `self`, the most arguments it
//! probes (12) and one more (called directly), and a trait's default method (`Self: ?Sized`).
use breaker::{circuit_breaker, BreakerError, CallError};

struct Cache {
    last: String,
}

impl Cache {
    #[circuit_breaker(fallback = stale)]
    fn current<'a>(&'a self, key: &str) -> Result<&'a str, BreakerError> {
        let _ = key;
        Ok(&self.last)
    }

    fn stale<'a>(&'a self, _key: &str, _e: CallError<BreakerError>) -> Result<&'a str, BreakerError> {
        Ok(&self.last)
    }
}

type R = Result<u8, BreakerError>;
type E = CallError<BreakerError>;

#[circuit_breaker(fallback = eleven_fallback)]
fn eleven(a: u8, b: u8, c: u8, d: u8, e: u8, f: u8, g: u8, h: u8, i: u8, j: u8, k: u8) -> R {
    Ok(a + b + c + d + e + f + g + h + i + j + k)
}

#[allow(clippy::too_many_arguments)]
fn eleven_fallback(_: u8, _: u8, _: u8, _: u8, _: u8, _: u8, _: u8, _: u8, _: u8, _: u8, _: u8, _: E) -> R {
    Ok(0)
}

#[allow(clippy::too_many_arguments)]
#[circuit_breaker(fallback = twelve_fallback)]
async fn twelve(a: u8, b: u8, c: u8, d: u8, e: u8, f: u8, g: u8, h: u8, i: u8, j: u8, k: u8, l: u8) -> R {
    Ok(a + b + c + d + e + f + g + h + i + j + k + l)
}

#[allow(clippy::too_many_arguments)]
async fn twelve_fallback(_: u8, _: u8, _: u8, _: u8, _: u8, _: u8, _: u8, _: u8, _: u8, _: u8, _: u8, _: u8, _: E) -> R {
    Ok(0)
}

trait Source {
    fn id(&self) -> u8;

    #[circuit_breaker(fallback = Self::offline)]
    fn load(&self) -> Result<u8, BreakerError> {
        Ok(self.id())
    }

    fn offline(&self, _e: CallError<BreakerError>) -> Result<u8, BreakerError> {
        Ok(0)
    }
}

struct One;

impl Source for One {
    fn id(&self) -> u8 {
        1
    }
}

fn main() {
    let cache = Cache { last: "v".to_owned() };
    let _ = cache.current("k");
    let _ = eleven(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1);
    let _ = twelve(1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1);
    let _ = One.load();
}
