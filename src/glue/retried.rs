//! What `#[circuit_breaker(retry = N)]` expands to calls: the body made once per attempt,
//! through `Breaker::call_retried_judged`, whatever judges it. Not part of the API.

use std::future::Future;

/// A parameter of a function with `retry`: each attempt gets its own copy.
#[diagnostic::on_unimplemented(
    message = "with `retry`, each attempt gets its own copy of every argument, and `{Self}` is not `Clone`",
    label = "this argument is copied for each attempt",
    note = "derive or implement `Clone` for it, take it by reference (`&{Self}`), or call `Breaker::call_retried` in the body"
)]
pub trait RetryArg: Sized {
    /// This attempt's copy.
    fn for_attempt(&self) -> Self;
}

impl<T: Clone> RetryArg for T {
    #[inline(always)]
    fn for_attempt(&self) -> Self {
        self.clone()
    }
}

use breaker_runtime::Judge;

use super::run::{body, finish, Fallible, FromBreakerError};
use crate::{Breaker, CallError};

/// An `async fn` with `retry`, without a fallback: the last attempt's error as it was, the
/// breaker's converted into `E` (see `glue::run::run`). `judge` is any [`Judge`] that can be
/// cloned for each attempt.
pub fn run_retried<'a, R, T, E, M, F, P>(
    breaker: &'a Breaker,
    judge: P,
    mut make: M,
) -> impl Future<Output = R> + use<'a, R, T, E, M, F, P>
where
    R: Fallible<Ok = T, Err = E>,
    E: FromBreakerError,
    M: FnMut() -> F,
    F: Future<Output = R>,
    P: Judge<T, E> + Clone,
{
    let attempts = breaker.call_retried_judged(judge, move || body(make()));
    async move { R::from_result(finish(attempts.await)) }
}

/// An `async fn` with `retry` and a fallback: the last attempt's success, or its
/// `CallError`, for the fallback (see `recover`).
pub fn retried<'a, R, M, F, P>(
    breaker: &'a Breaker,
    judge: P,
    mut make: M,
) -> impl Future<Output = Result<R::Ok, CallError<R::Err>>> + use<'a, R, M, F, P>
where
    R: Fallible,
    M: FnMut() -> F,
    F: Future<Output = R>,
    P: Judge<R::Ok, R::Err> + Clone,
{
    breaker.call_retried_judged(judge, move || body(make()))
}
