//! `fallback = path`: the fallback called through a probe, so that a fallback of the wrong
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

use core::{future::Future, marker::PhantomData};

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
