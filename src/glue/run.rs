//! One call of an annotated function's body through its breaker: the run/call entry points
//! (with or without a fallback, `async` or plain, judged by `is_failure` or `classify`), and
//! the return-type traits they need ([`Fallible`], [`FromBreakerError`]).

use core::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use crate::{Breaker, BreakerError, CallError, Verdict};

/// `is_failure = path` or `classify = path`, coerced to the `fn` pointer `P` it must be
/// (a struct field is a coercion site; an `as` cast would trip a user's `trivial_casts`):
/// a wrong signature is one `E0308` on the path naming both types.
pub struct Judge<P> {
    /// The judge.
    pub f: P,
}

/// The default `is_failure`: every error counts against the dependency.
pub fn every_error<E>(_: &E) -> bool {
    true
}

pin_project_lite::pin_project! {
    /// `fut`'s output passed through `map`, a function item or a closure without
    /// captures: no bytes in the future (a `fn` pointer here cost 8 bytes per layer).
    /// The functions returning it return `impl Future`, so its bounds are checked where
    /// it is made (in `run` and `call`), and a missing `From<BreakerError>` is reported
    /// once, not again at the `.await`.
    pub struct Map<Fut, M> {
        #[pin]
        fut: Fut,
        map: M,
    }
}

impl<Fut: Future, M: Fn(Fut::Output) -> O, O> Future for Map<Fut, M> {
    type Output = O;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<O> {
        let this = self.project();
        this.fut.poll(cx).map(this.map)
    }
}

/// Never called: `if false { return returns::<R>(); }` at the top of an `async fn`'s
/// body gives its `async` block the function's return type `R`, so the body's values
/// coerce to it (`Box<u32>` to `Box<dyn Display>`) and a type error is the plain
/// function's.
#[doc(hidden)]
pub fn returns<R>() -> R {
    unreachable!("`if false` never runs")
}

/// The body of an `async fn`, as the plain `Result` the runtime takes.
pub(crate) fn body<F: Future<Output = R>, R: Fallible>(
    body: F,
) -> Map<F, impl Fn(R) -> Result<R::Ok, R::Err>> {
    Map {
        fut: body,
        map: R::into_result,
    }
}

/// One call of an `async fn` body through its breaker, without a fallback: the
/// dependency's error as it was, the breaker's converted into `E`. `R` is the function's
/// return type, named by the macro so `?` and `return` in the body know their type.
pub fn run<'a, R, T, E, F, P>(
    breaker: &'a Breaker,
    is_failure: P,
    body_: F,
) -> impl Future<Output = R> + use<'a, R, T, E, F, P>
where
    R: Fallible<Ok = T, Err = E>,
    E: FromBreakerError,
    F: Future<Output = R>,
    P: FnOnce(&E) -> bool,
{
    Map {
        fut: breaker.call_with(is_failure, body(body_)),
        map: finish::<R>,
    }
}

/// [`run`] for a plain `fn`.
pub fn run_sync<R, T, E, F, P>(breaker: &Breaker, is_failure: P, body: F) -> R
where
    R: Fallible<Ok = T, Err = E>,
    E: FromBreakerError,
    F: FnOnce() -> R,
    P: FnOnce(&E) -> bool,
{
    finish(breaker.call_sync_with(is_failure, move || body().into_result()))
}

/// One call of an `async fn` body through its breaker, with a fallback: a success in the
/// function's own return type, or the `CallError` the fallback receives.
pub fn call<'a, R, F, P>(
    breaker: &'a Breaker,
    is_failure: P,
    body_: F,
) -> impl Future<Output = Result<R, CallError<R::Err>>> + use<'a, R, F, P>
where
    R: Fallible,
    F: Future<Output = R>,
    P: FnOnce(&R::Err) -> bool,
{
    Map {
        fut: breaker.call_with(is_failure, body(body_)),
        map: ok_into::<R>,
    }
}

/// A success back in the function's return type (public so rustc names it by its
/// `__private` path in messages, as it always did).
pub fn ok_into<R: Fallible>(r: Result<R::Ok, CallError<R::Err>>) -> Result<R, CallError<R::Err>> {
    r.map(|ok| R::from_result(Ok(ok)))
}

/// [`call`] for a plain `fn`.
pub fn call_sync<R, F, P>(breaker: &Breaker, is_failure: P, body: F) -> Result<R, CallError<R::Err>>
where
    R: Fallible,
    F: FnOnce() -> R,
    P: FnOnce(&R::Err) -> bool,
{
    breaker
        .call_sync_with(is_failure, move || body().into_result())
        .map(|ok| R::from_result(Ok(ok)))
}

/// [`run`] judged by `classify = …` instead of `is_failure`.
pub fn run_classified<'a, R, T, E, F, C>(
    breaker: &'a Breaker,
    classify: C,
    body_: F,
) -> impl Future<Output = R> + use<'a, R, T, E, F, C>
where
    R: Fallible<Ok = T, Err = E>,
    E: FromBreakerError,
    F: Future<Output = R>,
    C: FnOnce(&Result<T, E>) -> Verdict,
{
    Map {
        fut: breaker.call_classified(classify, body(body_)),
        map: finish::<R>,
    }
}

/// [`run_sync`] judged by `classify = …`.
pub fn run_sync_classified<R, T, E, F, C>(breaker: &Breaker, classify: C, body: F) -> R
where
    R: Fallible<Ok = T, Err = E>,
    E: FromBreakerError,
    F: FnOnce() -> R,
    C: FnOnce(&Result<T, E>) -> Verdict,
{
    finish(breaker.call_sync_classified(classify, move || body().into_result()))
}

/// [`call`] judged by `classify = …`.
pub fn call_classified<'a, R, F, C>(
    breaker: &'a Breaker,
    classify: C,
    body_: F,
) -> impl Future<Output = Result<R, CallError<R::Err>>> + use<'a, R, F, C>
where
    R: Fallible,
    F: Future<Output = R>,
    C: FnOnce(&Result<R::Ok, R::Err>) -> Verdict,
{
    Map {
        fut: breaker.call_classified(classify, body(body_)),
        map: ok_into::<R>,
    }
}

/// [`call_sync`] judged by `classify = …`.
pub fn call_sync_classified<R, F, C>(
    breaker: &Breaker,
    classify: C,
    body: F,
) -> Result<R, CallError<R::Err>>
where
    R: Fallible,
    F: FnOnce() -> R,
    C: FnOnce(&Result<R::Ok, R::Err>) -> Verdict,
{
    breaker
        .call_sync_classified(classify, move || body().into_result())
        .map(|ok| R::from_result(Ok(ok)))
}

/// The return type of an annotated function: a `Result` under any alias.
#[diagnostic::on_unimplemented(
    message = "`#[circuit_breaker]` functions must return a `Result<T, E>`, not `{Self}`",
    label = "this must be a `Result<T, E>` (or an alias of one, like `io::Result<T>`)",
    note = "a circuit breaker counts `Err` as a failure of the dependency"
)]
pub trait Fallible {
    /// `T`.
    type Ok;
    /// `E`.
    type Err;
    /// As a plain `Result`.
    fn into_result(self) -> Result<Self::Ok, Self::Err>;
    /// Back into the function's own return type.
    fn from_result(r: Result<Self::Ok, Self::Err>) -> Self;
}

impl<T, E> Fallible for Result<T, E> {
    type Ok = T;
    type Err = E;
    fn into_result(self) -> Result<T, E> {
        self
    }
    fn from_result(r: Result<T, E>) -> Self {
        r
    }
}

/// An error type that can hold a `BreakerError`, needed when there is no fallback.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot hold a `breaker::BreakerError`",
    label = "the breaker's own errors (open, timeout, full) must go somewhere",
    note = "implement `From<breaker::BreakerError>` for `{Self}`, or add a `fallback = …` to the attribute"
)]
pub trait FromBreakerError {
    /// Converts the breaker's error.
    fn from_breaker_error(e: BreakerError) -> Self;
}

impl<E: From<BreakerError>> FromBreakerError for E {
    fn from_breaker_error(e: BreakerError) -> Self {
        E::from(e)
    }
}

/// The function's result without a fallback: the dependency's error as it was, the
/// breaker's converted into `E`.
pub fn finish<R>(r: Result<R::Ok, CallError<R::Err>>) -> R
where
    R: Fallible,
    R::Err: FromBreakerError,
{
    R::from_result(r.map_err(|e| match e {
        CallError::Breaker(b) => R::Err::from_breaker_error(b),
        CallError::Inner(e) => e,
    }))
}
