//! `fallback = path`: what the body's `CallError` becomes ([`recover`], [`fall_back`]), and
//! the fallback called through a probe, so that a fallback of the wrong
//! shape (arity, parameter types, return type, not async for an `async fn`) is one error on
//! its name that shows the signature it must have, not rustc's "non-primitive cast".
//!
//! The macro writes, for a fallback receiving `n` arguments (the function's, then the
//! `CallError`):
//!
//! ```text
//! { use ::breaker::__private::{FitsN as _, Misfits as _};
//!   FallbackProbe::<_, _, Ret>::new(path, (arg, …, error)).__fallback() }
//! ```
//!
//! Method resolution tries `FallbackProbe` by value first: `FitsN` is implemented there when
//! the fallback is a `FnOnce` of exactly those arguments returning `Ret`, and calls it. Any
//! other fallback falls through to the autoref, `&FallbackProbe`, where `Misfits` applies to
//! every probe and its method requires [`FallbackSignature`], which nothing implements: the
//! error is that trait's message, with the argument and return types filled in. (A bound on
//! the method, not on the impl: a bound on the impl would make rustc say "method exists but
//! its trait bounds were not satisfied" instead.) `(A,)` prints with a trailing comma, so a
//! fallback of one argument has its own `Misfits1` and message. `async fn`s use the `Async…`
//! traits, whose fallback returns a future of `Ret`.

use core::{
    future::Future,
    marker::PhantomData,
    pin::Pin,
    task::{Context, Poll},
};

use crate::CallError;

/// The fallback `F`, the arguments it receives and the type it must return (for an `async
/// fn`, the output of the future it returns).
pub struct FallbackProbe<F, Args, R> {
    f: F,
    args: Args,
    ret: PhantomData<fn() -> R>,
}

impl<F, Args, R> FallbackProbe<F, Args, R> {
    /// `f`, to be applied to `args`.
    #[inline]
    pub fn new(f: F, args: Args) -> Self {
        FallbackProbe {
            f,
            args,
            ret: PhantomData,
        }
    }
}

/// What a plain function's fallback must be; implemented by nothing, so that a fallback of
/// another shape is reported with this message.
#[diagnostic::on_unimplemented(
    message = "this fallback must be a `fn{Args} -> {R}`",
    label = "must be `fn{Args} -> {R}`",
    note = "a fallback receives the function's arguments (`self` first, in a method), then the call's `CallError`, and returns the function's return type"
)]
pub trait FallbackSignature<Args, R> {}

/// [`FallbackSignature`] for a fallback of one argument (the error).
#[diagnostic::on_unimplemented(
    message = "this fallback must be a `fn({A}) -> {R}`",
    label = "must be `fn({A}) -> {R}`",
    note = "a fallback receives the function's arguments (none here), then the call's `CallError`, and returns the function's return type"
)]
pub trait FallbackSignature1<A, R> {}

/// What an `async fn`'s fallback must be; implemented by nothing (see [`FallbackSignature`]).
#[diagnostic::on_unimplemented(
    message = "this fallback must be an `async fn{Args} -> {R}`",
    label = "must be `async fn{Args} -> {R}`",
    note = "a fallback receives the function's arguments (`self` first, in a method), then the call's `CallError`, and returns what the function returns; for an `async fn` it is async too (or a closure returning `async move {{ … }}`)"
)]
pub trait AsyncFallbackSignature<Args, R> {}

/// [`AsyncFallbackSignature`] for a fallback of one argument (the error).
#[diagnostic::on_unimplemented(
    message = "this fallback must be an `async fn({A}) -> {R}`",
    label = "must be `async fn({A}) -> {R}`",
    note = "a fallback receives the function's arguments (none here), then the call's `CallError`, and returns what the function returns; for an `async fn` it is async too (or a closure returning `async move {{ … }}`)"
)]
pub trait AsyncFallbackSignature1<A, R> {}

/// The fallback does not fit: never runs, the bound on its method is the error.
pub trait Misfits<F, Args, R> {
    /// Unreachable: `FallbackSignature` has no implementations.
    fn __fallback(self) -> R
    where
        F: FallbackSignature<Args, R>;
}

impl<F, Args, R> Misfits<F, Args, R> for &FallbackProbe<F, Args, R> {
    fn __fallback(self) -> R
    where
        F: FallbackSignature<Args, R>,
    {
        unreachable!("`FallbackSignature` has no implementations")
    }
}

/// [`Misfits`] for a fallback of one argument.
pub trait Misfits1<F, A, R> {
    /// Unreachable: `FallbackSignature1` has no implementations.
    fn __fallback(self) -> R
    where
        F: FallbackSignature1<A, R>;
}

impl<F, A, R> Misfits1<F, A, R> for &FallbackProbe<F, (A,), R> {
    fn __fallback(self) -> R
    where
        F: FallbackSignature1<A, R>,
    {
        unreachable!("`FallbackSignature1` has no implementations")
    }
}

/// [`Misfits`] for an `async fn`'s fallback.
pub trait AsyncMisfits<F, Args, R> {
    /// Unreachable: `AsyncFallbackSignature` has no implementations.
    fn __fallback(self) -> core::future::Pending<R>
    where
        F: AsyncFallbackSignature<Args, R>;
}

impl<F, Args, R> AsyncMisfits<F, Args, R> for &FallbackProbe<F, Args, R> {
    fn __fallback(self) -> core::future::Pending<R>
    where
        F: AsyncFallbackSignature<Args, R>,
    {
        unreachable!("`AsyncFallbackSignature` has no implementations")
    }
}

/// [`AsyncMisfits`] for a fallback of one argument.
pub trait AsyncMisfits1<F, A, R> {
    /// Unreachable: `AsyncFallbackSignature1` has no implementations.
    fn __fallback(self) -> core::future::Pending<R>
    where
        F: AsyncFallbackSignature1<A, R>;
}

impl<F, A, R> AsyncMisfits1<F, A, R> for &FallbackProbe<F, (A,), R> {
    fn __fallback(self) -> core::future::Pending<R>
    where
        F: AsyncFallbackSignature1<A, R>,
    {
        unreachable!("`AsyncFallbackSignature1` has no implementations")
    }
}

/// The fitting fallbacks of each arity, plain and async.
macro_rules! fits {
    ($($fits:ident $async_fits:ident ($($a:ident $v:ident),+);)+) => {$(
        /// A fallback of this arity returning `R`: called.
        pub trait $fits<R> {
            /// The fallback applied to the arguments.
            fn __fallback(self) -> R;
        }

        impl<F, $($a,)+ R> $fits<R> for FallbackProbe<F, ($($a,)+), R>
        where
            F: FnOnce($($a),+) -> R,
        {
            #[inline]
            fn __fallback(self) -> R {
                let ($($v,)+) = self.args;
                (self.f)($($v),+)
            }
        }

        /// An `async fn`'s fallback of this arity, returning a future of `R`: called.
        pub trait $async_fits<R> {
            /// The future the fallback returns.
            type Future: Future<Output = R>;
            /// The fallback applied to the arguments.
            fn __fallback(self) -> Self::Future;
        }

        impl<F, $($a,)+ Fut, R> $async_fits<R> for FallbackProbe<F, ($($a,)+), R>
        where
            F: FnOnce($($a),+) -> Fut,
            Fut: Future<Output = R>,
        {
            type Future = Fut;
            #[inline]
            fn __fallback(self) -> Fut {
                let ($($v,)+) = self.args;
                (self.f)($($v),+)
            }
        }
    )+};
}

// Up to twelve arguments (`PROBED_ARITY` in the macro); with more the macro calls the
// fallback directly, and a wrong one gets rustc's own error.
fits! {
    Fits1 AsyncFits1 (A a);
    Fits2 AsyncFits2 (A a, B b);
    Fits3 AsyncFits3 (A a, B b, C c);
    Fits4 AsyncFits4 (A a, B b, C c, D d);
    Fits5 AsyncFits5 (A a, B b, C c, D d, E e);
    Fits6 AsyncFits6 (A a, B b, C c, D d, E e, G g);
    Fits7 AsyncFits7 (A a, B b, C c, D d, E e, G g, H h);
    Fits8 AsyncFits8 (A a, B b, C c, D d, E e, G g, H h, I i);
    Fits9 AsyncFits9 (A a, B b, C c, D d, E e, G g, H h, I i, J j);
    Fits10 AsyncFits10 (A a, B b, C c, D d, E e, G g, H h, I i, J j, K k);
    Fits11 AsyncFits11 (A a, B b, C c, D d, E e, G g, H h, I i, J j, K k, L l);
    Fits12 AsyncFits12 (A a, B b, C c, D d, E e, G g, H h, I i, J j, K k, L l, M m);
}

/// The result of an `async fn` with a fallback: the body's success, or what the fallback
/// makes of the `CallError`. `fallback` is made after the body ran, so it may take the
/// arguments the body borrowed, and is called here, at once: the future holds the success or
/// the fallback's own future, never the closure and its arguments beside it (an `async fn`
/// here kept the result, the closure and the fallback's future side by side, 128 bytes over
/// the call's in the tests' shape).
#[inline]
pub fn recover<T, E, F, Fut>(
    result: Result<T, CallError<E>>,
    fallback: F,
) -> Recover<Result<T, E>, Fut>
where
    F: FnOnce(CallError<E>) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    match result {
        Ok(ok) => Recover::Ready {
            ok: core::future::ready(Ok(ok)),
        },
        Err(e) => Recover::Fallback { fut: fallback(e) },
    }
}

pub use recover_future::Recover;
use recover_future::RecoverProj;

/// In a module of its own: the projection `pin_project!` writes has no docs.
mod recover_future {
    #![allow(missing_docs)]

    pin_project_lite::pin_project! {
        /// The future [`recover`](super::recover) returns: the body's success, or the
        /// fallback's future.
        #[project = RecoverProj]
        pub enum Recover<T, Fut> {
            /// The body succeeded.
            Ready { ok: core::future::Ready<T> },
            /// The fallback runs.
            Fallback { #[pin] fut: Fut },
        }
    }
}

impl<T, Fut: Future<Output = T>> Future for Recover<T, Fut> {
    type Output = T;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        match self.project() {
            RecoverProj::Ready { ok } => Pin::new(ok).poll(cx),
            RecoverProj::Fallback { fut } => fut.poll(cx),
        }
    }
}

/// The future of an `async fn` with a fallback whose arguments are all copies (shared
/// references, numbers: see the macro's `Frame::Returned`), returned by the function itself:
/// the call's future, then, if it ends in a `CallError`, the fallback's. The body and the
/// fallback's closure each hold their own copy of the arguments, so no `async` block has to
/// own them for the body to borrow: each such function compiles this small state machine
/// instead of an `async` block of its own around the call and [`recover`] (about half the
/// code, in a debug build).
#[inline]
pub fn fall_back<C, F, Fut, T, E>(call: C, fallback: F) -> Fallback<C, F, Fut>
where
    C: Future<Output = Result<T, CallError<E>>>,
    F: FnOnce(CallError<E>) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    Fallback::Calling {
        call,
        fallback: Some(fallback),
    }
}

pub use fallback_future::Fallback;
use fallback_future::FallbackProj;

/// In a module of its own: the projection `pin_project!` writes has no docs.
mod fallback_future {
    #![allow(missing_docs)]

    pin_project_lite::pin_project! {
        /// The future [`fall_back`](super::fall_back) returns. Dropped while calling, it
        /// drops the call's future (the call is cancelled); the fallback is made only from a
        /// `CallError`, when the call's future has ended.
        #[project = FallbackProj]
        #[must_use = "futures do nothing unless polled"]
        pub enum Fallback<C, F, Fut> {
            /// The call runs; the fallback waits for its error.
            Calling { #[pin] call: C, fallback: Option<F> },
            /// The call failed: the fallback runs.
            Recovering { #[pin] fut: Fut },
        }
    }
}

impl<C, F, Fut, T, E> Future for Fallback<C, F, Fut>
where
    C: Future<Output = Result<T, CallError<E>>>,
    F: FnOnce(CallError<E>) -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    type Output = Result<T, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T, E>> {
        let (call, fallback) = match self.as_mut().project() {
            FallbackProj::Calling { call, fallback } => (call, fallback),
            FallbackProj::Recovering { fut } => return fut.poll(cx),
        };
        let err = match call.poll(cx) {
            Poll::Ready(Ok(ok)) => return Poll::Ready(Ok(ok)),
            Poll::Ready(Err(err)) => err,
            Poll::Pending => return Poll::Pending,
        };
        // Always there: taken once, and the state is `Recovering` from here on. (Were it
        // not, the poll below would poll the ended call again, which panics.)
        if let Some(fallback) = fallback.take() {
            // The ended call's future dropped in place, the fallback's pinned there instead.
            let fut = fallback(err);
            self.set(Fallback::Recovering { fut });
        }
        // The fallback's future, polled at once (the second arm above).
        self.poll(cx)
    }
}

/// The fallback of an `async fn`: what it returned, as a future to await.
pub fn async_fallback<F: AsyncFallback>(returned: F) -> F::Future {
    AsyncFallback::into_future(returned)
}

/// What the fallback of an `async fn` returns: a future.
#[diagnostic::on_unimplemented(
    message = "the fallback of an `async fn` must be async, but it returns `{Self}`",
    label = "make this fallback an `async fn`, or a closure returning `async move {{ … }}`",
    note = "the fallback runs in place of the body, so it returns the same future output"
)]
pub trait AsyncFallback {
    /// The future.
    type Future: Future;
    /// Into it.
    fn into_future(self) -> Self::Future;
}

impl<F: Future> AsyncFallback for F {
    type Future = F;
    fn into_future(self) -> F {
        self
    }
}

#[cfg(test)]
mod tests {
    use core::task::Waker;
    use std::cell::Cell;

    use super::*;
    use crate::{
        glue::run::{call, every_error, host},
        Breaker, Config, State,
    };

    #[derive(Debug, PartialEq)]
    struct Down;

    /// `fall_back`, what an `async fn` with a fallback and copied arguments returns: the
    /// call's success as it is, the fallback never made; the call's error to the fallback,
    /// whose future is polled in the same poll; a refusal to the fallback too.
    #[test]
    fn fall_back_gives_the_call_error_to_the_fallback_and_passes_a_success() {
        let b = Breaker::new("glue::fallback::fall_back", Config::default().threshold(1));
        let mut cx = Context::from_waker(Waker::noop());
        let made = Cell::new(0);
        let fallback = |err: CallError<Down>| {
            made.set(made.get() + 1);
            let refused = matches!(err, CallError::Breaker(_));
            async move {
                if refused {
                    Ok(2)
                } else {
                    Err(Down)
                }
            }
        };
        let ok = fall_back(
            call::<Result<u8, Down>, _, _, _, _>(host(&b), every_error, async { Ok(1) }),
            fallback,
        );
        assert_eq!(core::pin::pin!(ok).poll(&mut cx), Poll::Ready(Ok(1)));
        assert_eq!(made.get(), 0);
        let failed = fall_back(
            call::<Result<u8, Down>, _, _, _, _>(host(&b), every_error, async { Err(Down) }),
            fallback,
        );
        assert_eq!(
            core::pin::pin!(failed).poll(&mut cx),
            Poll::Ready(Err(Down))
        );
        assert_eq!((made.get(), b.state()), (1, State::Open));
        let refused = fall_back(
            call::<Result<u8, Down>, _, _, _, _>(host(&b), every_error, async { Ok(1) }),
            fallback,
        );
        assert_eq!(core::pin::pin!(refused).poll(&mut cx), Poll::Ready(Ok(2)));
        assert_eq!(made.get(), 2);
    }

    /// Dropped while the call waits, the call is cancelled (counted so) and the fallback
    /// never made; a panic in the body is the breaker's failure and goes on to the caller,
    /// without the fallback.
    #[test]
    fn fall_back_dropped_cancels_the_call_and_a_panic_is_no_fallback() {
        let b = Breaker::new(
            "glue::fallback::cancelled",
            Config::default().threshold(100),
        );
        let mut cx = Context::from_waker(Waker::noop());
        let made = Cell::new(0);
        let fallback = |_: CallError<Down>| {
            made.set(made.get() + 1);
            core::future::ready(Ok(0))
        };
        {
            let waiting = fall_back(
                call::<Result<u8, Down>, _, _, _, _>(
                    host(&b),
                    every_error,
                    core::future::pending(),
                ),
                fallback,
            );
            let mut waiting = core::pin::pin!(waiting);
            assert_eq!(waiting.as_mut().poll(&mut cx), Poll::Pending);
        }
        assert_eq!(b.stats().cancelled, 1);
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let panics = fall_back(
                call::<Result<u8, Down>, _, _, _, _>(host(&b), every_error, async {
                    panic!("the body")
                }),
                fallback,
            );
            core::pin::pin!(panics).poll(&mut cx)
        }));
        assert!(caught.is_err());
        let stats = b.stats();
        assert_eq!((stats.calls, stats.failures, made.get()), (2, 1, 0));
    }
}
