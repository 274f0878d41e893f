//! One call of an annotated function's body through its breaker: the entry points (`run` and
//! `call`, without and with a fallback, their `_sync` forms for a plain `fn` and `_keyed`
//! forms whose future owns the key's breaker), each taking any [`Judge`] (`is_failure`,
//! `classify`, or [`every_error`]), and the return-type traits they need ([`Fallible`],
//! [`FromBreakerError`]).

use core::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

#[cfg(debug_assertions)]
use breaker_runtime::__internals::{no_output, Judged};
use breaker_runtime::{
    __internals::{Finish, Shared},
    CallFuture, Classify, Judge,
};

use crate::{Breaker, BreakerError, CallError, Verdict};

/// `is_failure = path`, coerced to the `fn` pointer `P` it must be
/// (a struct field is a coercion site; an `as` cast would trip a user's `trivial_casts`):
/// a wrong signature is one `E0308` on the path naming both types.
pub struct AsFn<P> {
    /// The judge.
    pub f: P,
}

/// The `fn` pointer `is_failure = path` must be, for the return type `R`.
pub type IsFailure<R> = fn(&<R as Fallible>::Err) -> bool;

/// The default `is_failure`: every error counts against the dependency.
pub fn every_error<E>(_: &E) -> bool {
    true
}

/// `is_failure = |e| …`: the closure, told the type of its parameter (`&E` of the return
/// type `R`), which a [`Judge`] bound alone would not tell it.
pub fn is_failure<R: Fallible, P: FnOnce(&R::Err) -> bool>(is_failure: P) -> P {
    is_failure
}

/// `classify = |r| …`: the closure as a [`Judge`] (every result judged, `Ok` included),
/// told the type of its parameter (`&Result<T, E>` of the return type `R`). A path goes
/// through `ClassifyProbe` instead (see `glue::classify`).
pub fn classify<R, C>(classify: C) -> Classify<C>
where
    R: Fallible,
    C: FnOnce(&Result<R::Ok, R::Err>) -> Verdict,
{
    Classify(classify)
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

/// The body of an `async fn` with `retry`, as the plain `Result` the runtime takes.
pub(crate) fn body<F: Future<Output = R>, R: Fallible>(
    body: F,
) -> Map<F, impl Fn(R) -> Result<R::Ok, R::Err>> {
    Map {
        fut: body,
        map: R::into_result,
    }
}

/// One call of an `async fn` body through its breaker, without a fallback: the
/// dependency's error as it was, the breaker's converted into `E`. The body is the
/// runtime's call as it is (its block is a future of `Result<T, E>`, see [`returns`]), and
/// only the breaker's error is converted, once, here. `R`, the function's return type, is
/// named by the macro (rustc quotes this line in its notes); `judge` is any [`Judge`] (see
/// [`is_failure`], [`classify`]).
#[inline(always)]
pub fn run<'a, R, T, E, F, P>(
    breaker: &'a Shared,
    judge: P,
    body: F,
) -> impl Future<Output = R::Plain> + use<'a, R, T, E, F, P>
where
    R: Fallible<Ok = T, Err = E, Plain = Result<T, E>>,
    E: FromBreakerError,
    F: Future<Output = R::Plain>,
    P: Judge<T, E>,
{
    breaker.call_judged_as::<Converted, _, _, _, _>(judge, body)
}

/// The breaker's parts, the first argument of [`run`] and [`call`]: found before the body is
/// made (arguments are evaluated in order), so that making the call future calls nothing
/// while the body is alive, which in a debug build is an unwinding path dropping the body in
/// every function.
#[inline(always)]
pub fn host(breaker: &Breaker) -> &Shared {
    breaker.host()
}

/// [`run`] for a keyed function: the future owns the key's breaker (a handle found for this
/// call), so the function's future keeps nothing of the lookup beside it.
#[inline(always)]
pub fn run_keyed<R, T, E, F, P>(
    breaker: Breaker,
    judge: P,
    body: F,
) -> impl Future<Output = R::Plain> + use<R, T, E, F, P>
where
    R: Fallible<Ok = T, Err = E, Plain = Result<T, E>>,
    E: FromBreakerError,
    F: Future<Output = R::Plain>,
    P: Judge<T, E>,
{
    breaker.call_owned_judged_as::<Converted, _, _, _, _>(judge, body)
}

/// [`run`] for a plain `fn`.
pub fn run_sync<R, T, E, F, P>(breaker: &Breaker, judge: P, body: F) -> R
where
    R: Fallible<Ok = T, Err = E>,
    E: FromBreakerError,
    F: FnOnce() -> R,
    P: Judge<T, E>,
{
    // A debug build gives the runtime's blocking path the body behind `&mut dyn JudgedBody`,
    // judged where it runs, so that path is compiled once, in the runtime, and not once per
    // result type and judge (`breaker_runtime`'s `erased`); an optimised build gives the
    // body as it is, to be inlined in place.
    #[cfg(debug_assertions)]
    {
        let mut body = Judged::new(move || body().into_result(), judge);
        let ended = breaker.call_sync_erased(&mut body);
        finish_erased::<R>(ended, body.out)
    }
    #[cfg(not(debug_assertions))]
    finish_sync(breaker.call_sync_with(judge, move || body().into_result()))
}

/// [`run_sync`]'s end in a debug build: the body's result, or the refusal in `E`, in the
/// function's return type. Generic over the return type only, not the body.
#[cfg(debug_assertions)]
fn finish_erased<R: Fallible>(
    ended: Result<(), BreakerError>,
    out: Option<Result<R::Ok, R::Err>>,
) -> R
where
    R::Err: FromBreakerError,
{
    // Each step spelled out, not a generic helper's call: this is compiled once per return
    // type, and each helper would be one more function for every type.
    R::from_result(match ended {
        Err(refused) => Err(R::Err::from_breaker_error(refused)),
        Ok(()) => match out {
            Some(result) => result,
            None => no_output(),
        },
    })
}

/// [`call_sync`]'s end in a debug build: the body's success in the function's return type,
/// or the `CallError` its fallback receives.
#[cfg(debug_assertions)]
fn recover_erased<R: Fallible>(
    ended: Result<(), BreakerError>,
    out: Option<Result<R::Ok, R::Err>>,
) -> Result<R, CallError<R::Err>> {
    match ended {
        Err(refused) => Err(CallError::Breaker(refused)),
        Ok(()) => match out {
            Some(Ok(value)) => Ok(R::from_ok(value)),
            Some(Err(error)) => Err(CallError::Inner(error)),
            None => no_output(),
        },
    }
}

/// One call of an `async fn` body through its breaker, with a fallback: the runtime's call
/// itself, a success or the `CallError` the fallback receives (see `recover`). `R` as in
/// [`run`].
#[inline(always)]
pub fn call<'a, R, T, E, F, P>(breaker: &'a Shared, judge: P, body: F) -> CallFuture<'a, F, P>
where
    R: Fallible<Ok = T, Err = E, Plain = Result<T, E>>,
    F: Future<Output = R::Plain>,
    P: Judge<T, E>,
{
    breaker.call_judged(judge, body)
}

/// [`call`] for a keyed function (see [`run_keyed`]).
#[inline(always)]
pub fn call_keyed<R, T, E, F, P>(
    breaker: Breaker,
    judge: P,
    body: F,
) -> CallFuture<'static, F, P, Breaker>
where
    R: Fallible<Ok = T, Err = E, Plain = Result<T, E>>,
    F: Future<Output = R::Plain>,
    P: Judge<T, E>,
{
    breaker.call_owned_judged(judge, body)
}

/// [`call`] for a plain `fn`.
pub fn call_sync<R, F, P>(breaker: &Breaker, judge: P, body: F) -> Result<R, CallError<R::Err>>
where
    R: Fallible,
    F: FnOnce() -> R,
    P: Judge<R::Ok, R::Err>,
{
    #[cfg(debug_assertions)]
    {
        let mut body = Judged::new(move || body().into_result(), judge);
        let ended = breaker.call_sync_erased(&mut body);
        recover_erased::<R>(ended, body.out)
    }
    #[cfg(not(debug_assertions))]
    breaker
        .call_sync_with(judge, move || body().into_result())
        .map(R::from_ok)
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
    /// `Result<T, E>`: the function's return type as the plain `Result` it is, which the
    /// entry points state the body's output as (a projection, so a return type that is not
    /// a `Result` is one error, that this trait is not implemented).
    type Plain;
    /// As a plain `Result`.
    fn into_result(self) -> Result<Self::Ok, Self::Err>;
    /// Back into the function's own return type.
    fn from_result(r: Result<Self::Ok, Self::Err>) -> Self;
    /// A success, in the function's own return type.
    fn from_ok(ok: Self::Ok) -> Self
    where
        Self: Sized,
    {
        Self::from_result(Ok(ok))
    }
}

impl<T, E> Fallible for Result<T, E> {
    type Ok = T;
    type Err = E;
    type Plain = Result<T, E>;
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
    note = "write `impl From<breaker::BreakerError> for {Self}` (thiserror: a variant with `#[from] breaker::BreakerError`), or add a `fallback = …` to the attribute, which receives a `breaker::CallError<{Self}>`"
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

/// The output of [`run`]'s call future: the dependency's error as it was, the breaker's
/// converted into `E` (by the call future itself, so the function's future is the call
/// future around its body, not a `Map` around that too).
pub struct Converted;

impl<T, E: FromBreakerError> Finish<T, E> for Converted {
    type Output = Result<T, E>;

    fn finish(result: Result<T, CallError<E>>) -> Result<T, E> {
        // A match, not `map_err` and a closure: two functions fewer for every return type in
        // a debug build.
        match result {
            Ok(value) => Ok(value),
            Err(CallError::Breaker(b)) => Err(E::from_breaker_error(b)),
            Err(CallError::Inner(e)) => Err(e),
        }
    }
}

/// The function's result without a fallback: the dependency's error as it was, the
/// breaker's converted into `E`.
pub fn finish<T, E: FromBreakerError>(r: Result<T, CallError<E>>) -> Result<T, E> {
    <Converted as Finish<T, E>>::finish(r)
}

/// [`finish`] for a plain `fn` in an optimised build, back in its return type (written as it was before the async
/// calls had their own, which keeps the closed call's instruction count).
#[cfg(not(debug_assertions))]
fn finish_sync<R>(r: Result<R::Ok, CallError<R::Err>>) -> R
where
    R: Fallible,
    R::Err: FromBreakerError,
{
    R::from_result(r.map_err(|e| match e {
        CallError::Breaker(b) => R::Err::from_breaker_error(b),
        CallError::Inner(e) => e,
    }))
}

#[cfg(test)]
mod tests {
    use core::task::Waker;

    use super::*;
    use crate::{Config, State};

    #[derive(Debug, PartialEq)]
    enum Down {
        Dependency,
        Breaker,
    }

    impl From<BreakerError> for Down {
        fn from(_: BreakerError) -> Self {
            Down::Breaker
        }
    }

    /// An annotated `async fn` without a fallback is one future around its body, the
    /// runtime's call future, which converts the breaker's error itself: a `Map` around it
    /// was a second type in every such function (its `poll`, projection and drop glue to
    /// compile), for a conversion the call future does in its own `poll`.
    #[test]
    fn run_is_the_call_future_converting_the_breakers_error() {
        let b = Breaker::new("glue::run::one_future", Config::default().threshold(1));
        let mut cx = Context::from_waker(Waker::noop());
        let fut = run::<Result<u8, Down>, _, _, _, _>(host(&b), every_error, async {
            Err(Down::Dependency)
        });
        let name = core::any::type_name_of_val(&fut);
        assert!(
            name.starts_with("breaker_runtime::future::CallFuture<"),
            "{name}"
        );
        assert!(!name.contains("Map<"), "{name}");
        // The dependency's error as it was; the breaker, open now, refuses in `E`.
        assert_eq!(
            core::pin::pin!(fut).poll(&mut cx),
            Poll::Ready(Err(Down::Dependency))
        );
        assert_eq!(b.state(), State::Open);
        let refused = run::<Result<u8, Down>, _, _, _, _>(host(&b), every_error, async { Ok(1) });
        assert_eq!(
            core::pin::pin!(refused).poll(&mut cx),
            Poll::Ready(Err(Down::Breaker))
        );
    }

    /// A plain fn's body through `run_sync` (behind one `&mut dyn JudgedBody` in a debug build):
    /// run once, its value back, its error counted, and a panic in it counted as a failure
    /// while it unwinds.
    #[test]
    fn run_sync_runs_the_body_once_and_counts_a_panic_as_a_failure() {
        let b = Breaker::new("glue::run::sync", Config::default().threshold(100));
        let mut runs = 0;
        let ok = run_sync::<Result<u8, Down>, _, _, _, _>(&b, every_error, || {
            runs += 1;
            Ok(7)
        });
        assert_eq!((ok, runs), (Ok(7), 1));
        let err =
            run_sync::<Result<u8, Down>, _, _, _, _>(&b, every_error, || Err(Down::Dependency));
        assert_eq!(err, Err(Down::Dependency));
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            run_sync::<Result<u8, Down>, _, _, _, _>(&b, every_error, || panic!("the body"))
        }));
        assert!(caught.is_err());
        let stats = b.stats();
        assert_eq!((stats.calls, stats.successes, stats.failures), (3, 1, 2));
    }
}
