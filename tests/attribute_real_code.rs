//! The attribute on shapes real code has (DESIGN, *The attribute on real code*): the body
//! keeps the function's return type at run time too, `#[tracing::instrument]` above the
//! attribute leaves the owned arguments to the fallback, and the future an annotated `async
//! fn` returns is the runtime's call future around the body plus a few words, not more.
//! (That these shapes compile is the trybuild package's, tests/ui/pass/.)

use std::fmt::Display;
use std::mem::size_of_val;

use breaker::{circuit_breaker, BreakerError, CallError};

#[derive(Debug, PartialEq)]
enum Error {
    Down,
    Breaker,
}

impl From<BreakerError> for Error {
    fn from(_: BreakerError) -> Self {
        Error::Breaker
    }
}

#[circuit_breaker(name = "real_code::unsized_box")]
async fn unsized_box(n: u32) -> Result<Box<dyn Display + Send>, Error> {
    if n == 0 {
        return Ok(Box::new("zero"));
    }
    Ok(Box::new(n))
}

#[tokio::test]
async fn an_async_body_coerces_to_the_return_type_as_the_plain_function_does() {
    assert_eq!(unsized_box(0).await.unwrap().to_string(), "zero");
    assert_eq!(unsized_box(5).await.unwrap().to_string(), "5");
}

async fn length_of(s: String, e: CallError<Error>) -> Result<usize, Error> {
    assert!(matches!(e, CallError::Inner(Error::Down)), "{e:?}");
    Ok(1000 + s.len())
}

#[tracing::instrument(err(Debug))]
#[circuit_breaker(name = "real_code::instrumented", fallback = length_of)]
async fn instrumented(s: String) -> Result<usize, Error> {
    if s.is_empty() {
        return Ok(0);
    }
    Err(Error::Down)
}

#[tokio::test]
async fn instrument_above_with_a_fallback_leaves_it_the_owned_argument() {
    assert_eq!(instrumented(String::new()).await, Ok(0));
    // The body failed, and the fallback received the `String` the body borrowed.
    assert_eq!(instrumented("abc".to_owned()).await, Ok(1003));
}

async fn dependency(x: u64) -> u64 {
    x
}

async fn plain(x: u64, host: &str) -> Result<u64, Error> {
    Ok(dependency(x).await + host.len() as u64)
}

#[circuit_breaker(name = "real_code::annotated")]
async fn annotated(x: u64, host: &str) -> Result<u64, Error> {
    Ok(dependency(x).await + host.len() as u64)
}

#[circuit_breaker(name = "real_code::timed", timeout = "1s")]
async fn timed(x: u64, host: &str) -> Result<u64, Error> {
    Ok(dependency(x).await + host.len() as u64)
}

async fn zero(_: u64, _: &str, _: CallError<Error>) -> Result<u64, Error> {
    Ok(0)
}

#[circuit_breaker(name = "real_code::with_fallback", fallback = zero)]
async fn with_fallback(x: u64, host: &str) -> Result<u64, Error> {
    Ok(dependency(x).await + host.len() as u64)
}

#[circuit_breaker(name = "real_code::keyed", key = host)]
async fn keyed(x: u64, host: &str) -> Result<u64, Error> {
    Ok(dependency(x).await + host.len() as u64)
}

async fn region_of(x: u64) -> String {
    format!("region-{x}")
}

#[circuit_breaker(name = "real_code::awaited_key", key = region_of(x).await)]
async fn awaited_key(x: u64) -> Result<u64, Error> {
    if x == 0 {
        return Err(Error::Down);
    }
    Ok(x)
}

fn host_of(url: &str) -> Option<&str> {
    url.split('/').nth(2)
}

#[circuit_breaker(name = "real_code::tried_key", key = host_of(url).ok_or(Error::Down)?)]
async fn tried_key(url: &str) -> Result<usize, Error> {
    Ok(url.len())
}

/// A key's lookup runs in a closure so that the call's future owns the breaker it found; a
/// key that awaits or has a `?` (the function's, not a closure's) is looked up in place.
#[tokio::test]
async fn a_key_computed_with_await_or_a_question_mark_is_looked_up_in_place() {
    assert_eq!(awaited_key(3).await, Ok(3));
    assert_eq!(awaited_key(0).await, Err(Error::Down));
    assert_eq!(tried_key("https://example.com/a").await, Ok(21));
    // The key's `?` returns from the function, before any call.
    assert_eq!(tried_key("nohost").await, Err(Error::Down));
}

/// DESIGN: an annotated `async fn`'s future is at most 64 bytes larger than the plain
/// function's; `timeout` may add its timer. Measured against the plain function directly:
/// the runtime's call future adds 48 bytes around the body (the breaker, the admission, the
/// timer's box, the stage), the attribute's own layers 16. A fallback and a key miss it by
/// 24 and 16 bytes (see [`FALLBACK`], [`KEYED`]): rustc's layout, not the expansion's.
#[test]
fn an_annotated_future_is_at_most_64_bytes_over_the_plain_one() {
    let plain = size_of_val(&plain(1, "h"));
    for (shape, size, bound) in [
        ("annotated", size_of_val(&annotated(1, "h")), 64),
        ("timeout", size_of_val(&timed(1, "h")), 64),
        // A fallback keeps the arguments it receives and its own future beside the body's.
        ("fallback", size_of_val(&with_fallback(1, "h")), FALLBACK),
        // A key keeps the keyed breaker it found (an owned handle) beside the body's.
        ("keyed", size_of_val(&keyed(1, "h")), KEYED),
    ] {
        println!("{shape}: {size} bytes = plain {plain} + {}", size - plain);
        assert!(
            size <= plain + bound,
            "{shape}: {size} bytes, {} over the plain future's {plain} (at most {bound})",
            size - plain
        );
    }
}
/// With a fallback: the plain future, the runtime's 48 bytes, 16 as without one, and 24
/// more: the body borrows the arguments (the fallback receives them after it), and rustc
/// keeps a borrowed argument of an `async fn` twice in its future (the parameter and the
/// local it is bound to, which a borrow keeps alive across the `.await`), 24 bytes for `(u64,
/// &str)` here. The fallback's own future (72 bytes, with the `CallError` it receives) takes
/// the place of the call's, not a place beside it (`__private::recover` calls the fallback
/// at once; it was an `async fn` holding the closure, the result and that future: 176).
const FALLBACK: usize = 88;
/// Keyed: the plain future, the runtime's 48 bytes (an owned call future: the key's breaker
/// by `Arc`, found by a lookup whose temporaries end before the call), 16 as without a key,
/// and the argument the key borrows (`host`, 16 bytes), kept twice for the same reason as a
/// fallback's (it was 104: the lookup's temporaries lived across the `.await`).
const KEYED: usize = 80;
