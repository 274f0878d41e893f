//! A call judged by any [`Judge`]: the entry points `#[circuit_breaker]`'s glue takes
//! whatever judges the call (`is_failure`, `classify`, or every error), where the public
//! methods name the judge's kind (`call_with`, `call_classified`, …). Not part of the API.

use std::future::Future;

use crate::{
    future::{CallFuture, Finish},
    shared::Shared,
    verdict::Judge,
    Breaker, CallError,
};

impl Breaker {
    /// [`call_with`](Self::call_with) or [`call_classified`](Self::call_classified), by the
    /// judge's type.
    #[doc(hidden)]
    #[inline(always)]
    pub fn call_judged<F, T, E, J>(&self, judge: J, call: F) -> CallFuture<'_, F, J>
    where
        F: Future<Output = Result<T, E>>,
        J: Judge<T, E>,
    {
        CallFuture::new(&*self.shared, judge, call)
    }

    /// [`call_judged`](Self::call_judged) whose future owns the breaker (see
    /// [`call_owned`](Self::call_owned)): a keyed function's call, which keeps the key's
    /// breaker it found in its own future rather than beside it.
    #[doc(hidden)]
    #[inline(always)]
    pub fn call_owned_judged<F, T, E, J>(
        self,
        judge: J,
        call: F,
    ) -> CallFuture<'static, F, J, Breaker>
    where
        F: Future<Output = Result<T, E>>,
        J: Judge<T, E>,
    {
        CallFuture::new(self, judge, call)
    }

    /// The breaker's shared parts, for the attribute's glue: found before the function's body
    /// is made, so that making its call future calls nothing while the body is alive (in a
    /// debug build, a call there is an unwinding path that drops the body, in every
    /// annotated function).
    #[doc(hidden)]
    #[inline(always)]
    pub fn host(&self) -> &Shared {
        &self.shared
    }

    /// [`call_owned_judged`](Self::call_owned_judged) whose output `C` makes of the call's
    /// result.
    #[doc(hidden)]
    #[inline(always)]
    pub fn call_owned_judged_as<C, F, T, E, J>(
        self,
        judge: J,
        call: F,
    ) -> CallFuture<'static, F, J, Breaker, C>
    where
        F: Future<Output = Result<T, E>>,
        J: Judge<T, E>,
        C: Finish<T, E>,
    {
        CallFuture::finished(self, judge, call)
    }

    /// [`call_retried_with`](Self::call_retried_with) or
    /// [`call_retried_classified`](Self::call_retried_classified), by the judge's type.
    #[doc(hidden)]
    pub fn call_retried_judged<'a, F, Fut, T, E, J>(
        &'a self,
        judge: J,
        make: F,
    ) -> impl Future<Output = Result<T, CallError<E>>> + use<'a, F, Fut, T, E, J>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        J: Judge<T, E> + Clone,
    {
        crate::retry::run(&*self.shared, judge, make)
    }
}

impl Shared {
    /// [`Breaker::call_judged`] on the breaker's parts ([`Breaker::host`]).
    #[doc(hidden)]
    #[inline(always)]
    pub fn call_judged<F, T, E, J>(&self, judge: J, call: F) -> CallFuture<'_, F, J>
    where
        F: Future<Output = Result<T, E>>,
        J: Judge<T, E>,
    {
        CallFuture::new(self, judge, call)
    }

    /// [`call_judged`](Self::call_judged) whose output `C` makes of the call's result (the
    /// attribute's conversion of the breaker's error, done by the call future itself).
    #[doc(hidden)]
    #[inline(always)]
    pub fn call_judged_as<C, F, T, E, J>(
        &self,
        judge: J,
        call: F,
    ) -> CallFuture<'_, F, J, &Shared, C>
    where
        F: Future<Output = Result<T, E>>,
        J: Judge<T, E>,
        C: Finish<T, E>,
    {
        CallFuture::finished(self, judge, call)
    }
}
