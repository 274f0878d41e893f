//! The attribute on shapes real code has (DESIGN, *The attribute on real code*): the body
//! keeps the function's return type at run time too, `#[tracing::instrument]` above the
//! attribute leaves the owned arguments to the fallback, and the future an annotated `async
//! fn` returns is the runtime's call future around the body plus a few words, not more.
//! (That these shapes compile is the trybuild package's, tests/ui/pass/.)
// The prelude's `let _ = &_guard;` must not read as a use of an underscored binding.
#![warn(clippy::used_underscore_binding)]

use std::fmt::Display;
use std::mem::size_of_val;
use std::sync::atomic::{AtomicUsize, Ordering};

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

/// Counts its drops: an argument the body never names.
struct Guard<'a>(&'a AtomicUsize);

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[circuit_breaker(name = "real_code::unnamed_argument")]
async fn unnamed_argument(_guard: Guard<'_>, drops: &AtomicUsize) -> Result<usize, Error> {
    tokio::task::yield_now().await;
    Ok(drops.load(Ordering::SeqCst))
}

#[circuit_breaker(name = "real_code::wildcard_argument")]
async fn wildcard_argument(_: Guard<'_>, drops: &AtomicUsize) -> Result<usize, Error> {
    tokio::task::yield_now().await;
    Ok(drops.load(Ordering::SeqCst))
}

#[circuit_breaker(name = "real_code::pattern_argument")]
async fn pattern_argument((_, n): (Guard<'_>, usize), drops: &AtomicUsize) -> Result<usize, Error> {
    tokio::task::yield_now().await;
    Ok(drops.load(Ordering::SeqCst) + n)
}

async fn never(_: Guard<'_>, _: &AtomicUsize, _: CallError<Error>) -> Result<usize, Error> {
    Ok(usize::MAX)
}

#[circuit_breaker(name = "real_code::unnamed_with_fallback", fallback = never)]
async fn unnamed_with_fallback(_guard: Guard<'_>, drops: &AtomicUsize) -> Result<usize, Error> {
    tokio::task::yield_now().await;
    Ok(drops.load(Ordering::SeqCst))
}

/// The function becomes `fn … -> impl Future` (its future keeps each argument once), whose
/// block captures only what it names: each argument is named for it, so one the body never
/// uses (by name, `_`, or in a pattern) lives until the call ends, as in the `async fn`, not
/// only until the future is made.
#[tokio::test]
async fn an_argument_the_body_never_names_lives_until_the_call_ends() {
    let drops = AtomicUsize::new(0);
    let calls = [
        unnamed_argument(Guard(&drops), &drops).await,
        wildcard_argument(Guard(&drops), &drops).await,
        pattern_argument((Guard(&drops), 0), &drops).await,
        unnamed_with_fallback(Guard(&drops), &drops).await,
    ];
    // Each body saw the drops of the calls before it, not its own guard's.
    assert_eq!(calls, [Ok(0), Ok(1), Ok(2), Ok(3)]);
    assert_eq!(drops.load(Ordering::SeqCst), 4);
    // A future never polled drops its arguments with it.
    let unpolled = unnamed_argument(Guard(&drops), &drops);
    assert_eq!(drops.load(Ordering::SeqCst), 4);
    drop(unpolled);
    assert_eq!(drops.load(Ordering::SeqCst), 5);
}

/// Logs its name when dropped.
struct Loud<'a>(&'static str, &'a std::sync::Mutex<Vec<&'static str>>);

impl Drop for Loud<'_> {
    fn drop(&mut self) {
        self.1.lock().unwrap().push(self.0);
    }
}

async fn plain_order(a: Loud<'_>, b: Loud<'_>, c: Loud<'_>) -> Result<(), Error> {
    let _ = (&a.0, &c.0);
    tokio::task::yield_now().await;
    drop(b);
    Ok(())
}

#[circuit_breaker(name = "real_code::annotated_order")]
async fn annotated_order(a: Loud<'_>, b: Loud<'_>, c: Loud<'_>) -> Result<(), Error> {
    let _ = (&a.0, &c.0);
    tokio::task::yield_now().await;
    drop(b);
    Ok(())
}

#[circuit_breaker(name = "real_code::keyed_order", key = a.0)]
async fn keyed_order(a: Loud<'_>, b: Loud<'_>, c: Loud<'_>) -> Result<(), Error> {
    let _ = (&a.0, &c.0);
    tokio::task::yield_now().await;
    drop(b);
    Ok(())
}

/// The arguments are dropped in the order the plain `async fn` drops them (the body's own
/// moves first, then the rest in reverse), with a key as without one.
#[tokio::test]
async fn arguments_are_dropped_in_the_plain_functions_order() {
    let log = std::sync::Mutex::new(Vec::new());
    let order =
        |log: &std::sync::Mutex<Vec<&'static str>>| std::mem::take(&mut *log.lock().unwrap());
    plain_order(Loud("a", &log), Loud("b", &log), Loud("c", &log))
        .await
        .unwrap();
    let plain = order(&log);
    annotated_order(Loud("a", &log), Loud("b", &log), Loud("c", &log))
        .await
        .unwrap();
    assert_eq!(order(&log), plain);
    keyed_order(Loud("a", &log), Loud("b", &log), Loud("c", &log))
        .await
        .unwrap();
    assert_eq!(order(&log), plain);
    assert_eq!(plain, ["b", "c", "a"]);
}

fn panicking_config() -> breaker::Config {
    panic!("the configuration could not be read")
}

#[circuit_breaker(config = panicking_config())]
async fn misconfigured() -> Result<u32, Error> {
    Ok(1)
}

/// `config = …` is evaluated where the `async fn` evaluated it, when the future first runs:
/// a panic there is the task's, not the caller's that made the future.
#[tokio::test]
async fn a_config_expression_runs_when_the_future_first_runs() {
    let future = misconfigured();
    let joined = tokio::spawn(future).await;
    assert!(joined.unwrap_err().is_panic());
}

/// DESIGN: an annotated `async fn`'s future is at most 64 bytes larger than the plain
/// function's; `timeout` may add its timer. Measured against the plain function directly.
/// The attribute makes the function `fn … -> impl Future` (rustc keeps an `async fn`'s
/// argument twice when it lives across an `.await`: rust-lang/rust#62958; a returned block
/// keeps it once): without a fallback the function's future is the runtime's call future
/// (48 bytes around the body's; with a key it owns the key's breaker), and the body's block
/// owns the arguments. A fallback (which receives the arguments after the body) needs a
/// block of the function's own around the call, which owns the arguments the body borrows,
/// unless every argument is a copy (a shared reference, a number: as here); then the body
/// and the fallback's closure take a copy each, and the function's future is the call's,
/// then the fallback's (`__private::fall_back`).
///
/// Feature `otel` adds 16 bytes to every call future (its span and start: the cost of the
/// feature when on, none when off), so the bound is 80 there.
#[test]
fn an_annotated_future_is_at_most_64_bytes_over_the_plain_one() {
    let bound = if cfg!(feature = "otel") { 64 + 16 } else { 64 };
    let plain = size_of_val(&plain(1, "h"));
    for (shape, size) in [
        ("annotated", size_of_val(&annotated(1, "h"))),
        ("timeout", size_of_val(&timed(1, "h"))),
        ("fallback", size_of_val(&with_fallback(1, "h"))),
        ("keyed", size_of_val(&keyed(1, "h"))),
    ] {
        println!("{shape}: {size} bytes = plain {plain} + {}", size - plain);
        assert!(
            size <= plain + bound,
            "{shape}: {size} bytes, {} over the plain future's {plain} (at most {bound})",
            size - plain
        );
    }
}
