//! `classify = path`: the classifier given to the runtime through a probe, so that a path of
//! the wrong type is one error on it naming the `fn` pointer it must be (`fn(&Result<T, E>) ->
//! breaker::Verdict`, with the function's `T` and `E`), not rustc's E0308 "expected fn
//! pointer, found fn item". The same pattern as the fallback's shape check (`glue::fallback`).
//!
//! The macro writes, for the function's return type `R`:
//!
//! ```text
//! { use ::breaker::__private::{ClassifyFits as _, ClassifyMisfits as _};
//!   ClassifyProbe::<R, _>::new(path).__classify() }
//! ```
//!
//! Method resolution tries `ClassifyProbe` by value first, where [`ClassifyFits`] is
//! implemented for a classifier of `&Result<T, E>` returning a `Verdict`: the runtime's
//! `Classify` of it, the function item itself (no `fn` pointer, no bytes, a direct call).
//! Any other path falls through to the autoref, where [`ClassifyMisfits`]'s method requires
//! [`ClassifierSignature`], which nothing implements: its message is the error, and its
//! return type (a `Classify` of the right `fn` pointer) is a judge, so nothing else fails.
//! A closure does not come here: it goes through `glue::run::classify`, whose bound gives
//! its parameter its type.

use core::marker::PhantomData;

use breaker_runtime::Classify;

use super::run::Fallible;
use crate::Verdict;

/// The classifier `F` of a function returning `R`.
pub struct ClassifyProbe<R, F> {
    f: F,
    ret: PhantomData<fn() -> R>,
}

impl<R, F> ClassifyProbe<R, F> {
    /// `f`, to be checked against `R`.
    #[inline(always)]
    pub fn new(f: F) -> Self {
        ClassifyProbe {
            f,
            ret: PhantomData,
        }
    }
}

/// What `classify = path` must be; implemented by nothing, so that a classifier of another
/// type is reported with this message.
#[diagnostic::on_unimplemented(
    message = "`classify` must be a `fn(&Result<{T}, {E}>) -> breaker::Verdict`",
    label = "must be `fn(&Result<{T}, {E}>) -> breaker::Verdict`",
    note = "a classifier judges every finished call, `Ok` included, as `Verdict::Success`, `Failure`, `Neutral` or `OpenFor(duration)`; to judge only the errors write `is_failure = f` with a `fn(&{E}) -> bool`"
)]
pub trait ClassifierSignature<T, E> {}

/// A classifier of the right type: the runtime's judge of it.
pub trait ClassifyFits<R: Fallible> {
    /// The classifier.
    type F: FnOnce(&Result<R::Ok, R::Err>) -> Verdict;
    /// The classifier as a judge.
    fn __classify(self) -> Classify<Self::F>;
}

impl<R, F> ClassifyFits<R> for ClassifyProbe<R, F>
where
    R: Fallible,
    F: FnOnce(&Result<R::Ok, R::Err>) -> Verdict,
{
    type F = F;
    #[inline(always)]
    fn __classify(self) -> Classify<F> {
        Classify(self.f)
    }
}

/// The classifier does not fit: never runs, the bound on its method is the error.
pub trait ClassifyMisfits<R: Fallible, F> {
    /// Unreachable: `ClassifierSignature` has no implementations.
    #[allow(clippy::type_complexity)]
    fn __classify(self) -> Classify<fn(&Result<R::Ok, R::Err>) -> Verdict>
    where
        F: ClassifierSignature<R::Ok, R::Err>;
}

impl<R: Fallible, F> ClassifyMisfits<R, F> for &ClassifyProbe<R, F> {
    fn __classify(self) -> Classify<fn(&Result<R::Ok, R::Err>) -> Verdict>
    where
        F: ClassifierSignature<R::Ok, R::Err>,
    {
        unreachable!("`ClassifierSignature` has no implementations")
    }
}
