//! The future of an async call through a breaker, written by hand so that the closed path
//! costs what the breaker does and no more: admission on the first poll (a call never
//! polled is never admitted), then the user's future polled in place, with the breaker's
//! deadline beside it.

use std::{
    future::Future,
    panic::{catch_unwind, AssertUnwindSafe},
    pin::Pin,
    task::{Context, Poll},
};

use pin_project_lite::pin_project;
use tokio::time::Sleep;

use crate::{
    breaker::{settle, Shared, Stop},
    clock::TokioClock,
    core::{Entry, Permit, Ticket},
    CallError,
};

/// Where a call stands.
enum Stage<'a> {
    /// Not polled yet: not admitted.
    Idle,
    /// Admitted on the fast path: nothing to give back if dropped.
    Fast(Ticket),
    /// Admitted with a permit, which reports a cancellation if dropped.
    Held(Permit<'a, TokioClock>),
    /// Finished.
    Done,
}

pin_project! {
    /// The future of one call through a breaker, from [`Breaker::call`](crate::Breaker::call)
    /// and [`Breaker::call_with`](crate::Breaker::call_with). The call is admitted on its first
    /// poll; dropping it before it finishes counts for nothing and gives its slots back.
    ///
    /// Like most futures, it panics if polled again after it completed.
    #[must_use = "futures do nothing unless polled"]
    pub struct CallFuture<'a, F, P> {
        // Fields drop in this order: the user's future goes before the permit in `stage`,
        // so a slot is given back only once the call it held is really gone.
        #[pin]
        inner: F,
        #[pin]
        deadline: Option<Sleep>,
        stage: Stage<'a>,
        // Taken once, when the call ends with an error.
        is_failure: Option<P>,
        shared: &'a Shared,
    }
}

impl<'a, F, P> CallFuture<'a, F, P> {
    pub(crate) fn new(shared: &'a Shared, is_failure: P, inner: F) -> Self {
        CallFuture {
            inner,
            deadline: None,
            stage: Stage::Idle,
            is_failure: Some(is_failure),
            shared,
        }
    }
}

/// Admission, on the first poll.
#[inline(always)]
fn admit(shared: &Shared) -> Result<Stage<'_>, crate::BreakerError> {
    match shared.core.enter(&shared.clock) {
        Entry::Fast(ticket) => Ok(Stage::Fast(ticket)),
        Entry::Refused(e) => Err(e),
        Entry::Slow => Permit::acquire(&shared.core, &shared.clock).map(Stage::Held),
    }
}

impl<F, T, E, P> Future for CallFuture<'_, F, P>
where
    F: Future<Output = Result<T, E>>,
    P: FnOnce(&E) -> bool,
{
    type Output = Result<T, CallError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let shared = *this.shared;
        match this.stage {
            Stage::Idle => {
                match admit(shared) {
                    Ok(stage) => *this.stage = stage,
                    Err(refused) => {
                        *this.stage = Stage::Done;
                        return Poll::Ready(Err(CallError::Breaker(refused)));
                    }
                }
                if let Some(after) = shared.core.policy.timeout {
                    this.deadline.set(Some(tokio::time::sleep(after)));
                }
            }
            Stage::Fast(_) | Stage::Held(_) => {}
            Stage::Done => panic!("a call through a circuit breaker was polled after it finished"),
        }
        let inner = this.inner;
        let result = match catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Ready(result)) => Ok(result),
            Err(panic) => Err(Stop::Panic(panic)),
            Ok(Poll::Pending) => {
                let expired = this.deadline.as_pin_mut().map(|d| d.poll(cx).is_ready());
                match (expired, shared.core.policy.timeout) {
                    (Some(true), Some(after)) => Err(Stop::Timeout(after)),
                    _ => return Poll::Pending,
                }
            }
        };
        // The fast success: no permit to move, no predicate to run.
        let result = match (result, &*this.stage) {
            (Ok(Ok(value)), Stage::Fast(ticket)) => {
                shared.core.succeed(*ticket, &shared.clock);
                *this.stage = Stage::Done;
                return Poll::Ready(Ok(value));
            }
            (result, _) => result,
        };
        // Polled after `Done` panics above, and `Idle` became `Fast` or `Held` there; the
        // predicate is taken only here, once.
        let (permit, is_failure) = match (
            std::mem::replace(this.stage, Stage::Done),
            this.is_failure.take(),
        ) {
            (Stage::Fast(ticket), Some(p)) => (shared.permit(ticket), p),
            (Stage::Held(permit), Some(p)) => (permit, p),
            _ => unreachable!("a running call has its stage and its predicate"),
        };
        Poll::Ready(settle(permit, result, is_failure))
    }
}
