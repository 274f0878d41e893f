//! What `#[circuit_breaker(hedge = N)]` expands to calls: the body made once per attempt,
//! through `Breaker::call_hedged_classified`, whatever judges it. Not part of the API.

use std::future::Future;

use breaker_runtime::Judge;

use super::run::{body, finish, Fallible, FromBreakerError};
use crate::{Breaker, CallError};

/// A parameter of a function with `hedge`: each attempt gets its own copy.
#[diagnostic::on_unimplemented(
    message = "with `hedge`, each attempt runs the body again with its own copy of every argument, and `{Self}` is not `Clone`",
    label = "this argument is copied for each attempt",
    note = "derive or implement `Clone` for it, take it by reference (`&{Self}`), or call `Breaker::call_hedged` in the body"
)]
pub trait HedgeArg: Sized {
    /// This attempt's copy.
    fn for_attempt(&self) -> Self;
}

impl<T: Clone> HedgeArg for T {
    #[inline(always)]
    fn for_attempt(&self) -> Self {
        self.clone()
    }
}

/// An `async fn` with `hedge`, without a fallback: the winning attempt's success, or the
/// first attempt's error as it was, the breaker's converted into `E` (see `glue::run::run`).
/// `judge` is any [`Judge`] that can be cloned for each attempt.
pub async fn run_hedged<R, T, E, M, F, P>(breaker: &Breaker, judge: P, make: M) -> R
where
    R: Fallible<Ok = T, Err = E>,
    E: FromBreakerError,
    M: Fn() -> F,
    F: Future<Output = R>,
    P: Judge<T, E> + Clone,
{
    R::from_result(finish(hedged::<R, M, F, P>(breaker, judge, make).await))
}

/// An `async fn` with `hedge` and a fallback: the winning attempt's success, or its
/// `CallError`, for the fallback (see `recover`).
pub async fn hedged<R, M, F, P>(
    breaker: &Breaker,
    judge: P,
    make: M,
) -> Result<R::Ok, CallError<R::Err>>
where
    R: Fallible,
    M: Fn() -> F,
    F: Future<Output = R>,
    P: Judge<R::Ok, R::Err> + Clone,
{
    // Every attempt is judged by its own copy of the judge (it is taken by value).
    let classify = move |r: &Result<R::Ok, R::Err>| judge.clone().judge(r);
    breaker
        .call_hedged_classified(classify, move || body(make()))
        .await
}
