//! The `#[circuit_breaker]` attribute of [`breaker`](https://docs.rs/breaker). Use it through
//! the `breaker` crate, which re-exports it with the runtime the generated code calls.
//!
//! | module | what it does |
//! | --- | --- |
//! | `attr` | parses `key = value` arguments, each value with its span, and checks them |
//! | `suggest` | the closest valid key for an unknown one |
//! | `expand` | checks the function and generates the wrapped one |
#![forbid(unsafe_code)]

mod attr;
mod expand;
mod suggest;

#[cfg(test)]
mod never_panics;
#[cfg(test)]
mod snapshots;

use proc_macro::TokenStream;

/// Puts a circuit breaker in front of a function returning a `Result`.
///
/// Every call goes through one breaker, created on the first call and kept in a static inside
/// the function; the signature and the call sites do not change. An `Err` from the body counts
/// as a failure of the dependency (or as nothing, when `is_failure` says so); when the breaker
/// is open, the body is not run and the call fails with a [`BreakerError`] converted into the
/// function's error type, or goes to the `fallback`.
///
/// ```ignore
/// use breaker::{circuit_breaker, CallError};
///
/// #[circuit_breaker(threshold = 2, cool_off = "5s", timeout = "600ms")]
/// async fn charge(card: &Card, cents: u64) -> Result<Receipt, GatewayError> {
///     gateway.charge(card, cents).await // unchanged
/// }
/// ```
///
/// expands to (what `cargo expand` shows; `tests/expand/` holds checked snapshots):
///
/// ```ignore
/// async fn charge(card: &Card, cents: u64) -> Result<Receipt, GatewayError> {
///     // One breaker per function, created on the first call. Its own block keeps the
///     // static out of the body's scope.
///     let __breaker: &'static ::breaker::Breaker = {
///         static __BREAKER: ::breaker::__private::Lazy<::breaker::Breaker> =
///             ::breaker::__private::Lazy::new(|| {
///                 ::breaker::__private::breaker(
///                     ::breaker::__private::concat!(::breaker::__private::module_path!(), "::", "charge"),
///                     false, // a default name is never shared; `name = "…"` gives `true`
///                     ::breaker::Config::default()
///                         .threshold(2)
///                         .cool_off(::breaker::__private::Duration::from_secs(5))
///                         .timeout(::breaker::__private::Duration::from_millis(600)),
///                 )
///             });
///         &__BREAKER
///     };
///     // The return type is named so `?` and `return` in the body know their target; the
///     // bounds on it give the "must return a `Result`" and "`E` cannot hold a
///     // `BreakerError`" errors, on the return type.
///     ::breaker::__private::run::<Result<Receipt, GatewayError>, _, _, _, _>(
///         __breaker,
///         ::breaker::__private::every_error, // or the `is_failure` path, cast to `fn(&E) -> bool`
///         async move { gateway.charge(card, cents).await }, // the body, unchanged
///     )
///     .await
/// }
/// ```
///
/// A plain `fn` gets `run_sync` and a `move ||` closure instead.
/// With `fallback = cached_receipt` the last expression becomes a `match` over
/// `__private::call(..)`: `Ok` is returned, and `Err(call_error)` calls
/// `(cached_receipt as fn(_, _, _) -> _)(card, cents, call_error).await` (the cast makes a
/// wrong arity an error naming the fallback). The body then borrows the arguments instead of
/// moving them (`async { .. }`, not `async move`), since the fallback receives them after it
/// ran.
///
/// # Keys
///
/// Every key is optional; values are literals checked at compile time.
///
/// | key | value | default | meaning |
/// | --- | --- | --- | --- |
/// | `threshold` | integer ≥ 1 | 5 | consecutive failures that open the breaker |
/// | `failure_rate` | integer percent 1..=100 | off | open when this share of the calls in `window` failed (then `threshold` is off unless written too) |
/// | `window` | integer ≥ 1 (calls) or duration string | 100 calls | the sliding window `failure_rate` judges; needs `failure_rate` |
/// | `min_calls` | integer ≥ 1 | 10 (at most the window) | calls the window must hold before the rate is judged; needs `failure_rate` |
/// | `slow_call` | duration | off | a call at least this long counts as a failure (its result still goes to the caller) |
/// | `cool_off` | duration | `"10s"` | how long the breaker stays open before it admits a probe |
/// | `max_cool_off` | duration ≥ `cool_off` | off | each reopening from half-open doubles the cool-off, up to this |
/// | `jitter` | duration | off | a random extra 0..jitter added to each cool-off |
/// | `probes` | integer ≥ 1 | 1 | calls admitted at once while half-open |
/// | `success_threshold` | integer ≥ 1 | `probes` | consecutive successful probes that close the breaker |
/// | `timeout` | duration (`async fn` only) | off | deadline of one call; yields `BreakerError::Timeout` |
/// | `max_concurrent` | integer ≥ 1 | off | bulkhead: at most N calls in flight, more fail with `BreakerError::Full` |
/// | `is_failure` | path to `fn(&E) -> bool`, or closure | every error | which errors count; `false` makes the error neutral |
/// | `fallback` | path or closure | none | called on every failed call with the arguments then a `CallError<E>`; returns the function's type (awaited for an `async fn`); in a method a bare name means `Self::name`, called with `self` first (name a free function by path: `self::name`) |
/// | `name` | string literal | `module_path!()::fn_name` | the breaker's name; functions giving the same `name` share one breaker |
/// | `on_state_change` | path to `fn(&Transition)`, or closure | none | called on every transition |
/// | `config` | expression of type `breaker::Config` | none | built once, on the first call; replaces the policy keys (`threshold` … `max_concurrent`), combines with the others |
/// | `crate` | string literal path | `"::breaker"` | where the facade is, when it is re-exported |
///
/// Durations are humantime strings: `"250ms"`, `"10s"`, `"1m 30s"`; zero is an error.
///
/// # Rules
///
/// - The return type must be a `Result<T, E>` or an alias of one (`io::Result<T>`,
///   `anyhow::Result<T>`). Without a fallback `E` must implement
///   `From<breaker::BreakerError>`.
/// - With a fallback, parameters must be plain names, and the body must not consume an
///   argument the fallback needs (take it by reference).
/// - The static breaker cannot mention the function's generic parameters or `Self`: a
///   `config` or `on_state_change` that does is rejected by the compiler. A generic function
///   has one breaker for all its instantiations.
///
/// [`BreakerError`]: https://docs.rs/breaker/latest/breaker/enum.BreakerError.html
#[proc_macro_attribute]
pub fn circuit_breaker(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::circuit_breaker(args.into(), item.into()).into()
}
