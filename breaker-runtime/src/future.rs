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
    core::{Permit, Ticket},
    CallError,
};

/// Where a call stands. An explicit tag (rather than a niche in the permit) makes every
/// check of the stage one compare.
#[repr(u8)]
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

/// Admission on the first poll, when neither the closed fast path nor an outright refusal
/// applied (out of line, so the poll of a closed call keeps a small frame): writes the
/// stage if admitted.
#[inline(never)]
fn admit_slow<'a>(shared: &'a Shared, stage: &mut Stage<'a>) -> Result<(), crate::BreakerError> {
    *stage = match shared.core.enter_claiming() {
        Some(ticket) => Stage::Fast(ticket),
        None => Stage::Held(Permit::acquire(&shared.core, &shared.clock)?),
    };
    Ok(())
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
                match shared.core.enter_closed() {
                    Some(ticket) => *this.stage = Stage::Fast(ticket),
                    None => {
                        let refused = match shared.core.refuse(&shared.clock) {
                            Some(refused) => Err(refused),
                            None => admit_slow(shared, this.stage),
                        };
                        if let Err(refused) = refused {
                            *this.stage = Stage::Done;
                            return Poll::Ready(Err(CallError::Breaker(refused)));
                        }
                    }
                }
                if let Some(after) = shared.core.policy.timeout {
                    arm(this.deadline.as_mut(), after);
                }
            }
            Stage::Fast(_) | Stage::Held(_) => {}
            Stage::Done => panic!("a call through a circuit breaker was polled after it finished"),
        }
        let inner = this.inner;
        let result = match catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            // The fast success, inline: no permit to move, no predicate to run.
            Ok(Poll::Ready(Ok(value))) => match *this.stage {
                Stage::Fast(ticket) => {
                    // Before the call below, where the compiler still knows there is
                    // nothing to drop.
                    *this.stage = Stage::Done;
                    shared.core.succeed(ticket, &shared.clock);
                    return Poll::Ready(Ok(value));
                }
                _ => Ok(Ok(value)),
            },
            Ok(Poll::Ready(Err(e))) => Ok(Err(e)),
            Err(panic) => Err(Stop::Panic(panic)),
            Ok(Poll::Pending) => match expired(this.deadline, cx, shared) {
                Some(timeout) => Err(timeout),
                None => return Poll::Pending,
            },
        };
        Poll::Ready(end(shared, this.stage, this.is_failure, result))
    }
}

/// Starts the deadline of a call just admitted (out of line: only with `timeout`).
#[inline(never)]
fn arm(mut deadline: Pin<&mut Option<Sleep>>, after: std::time::Duration) {
    deadline.set(Some(tokio::time::sleep(after)));
}

/// The user's future is pending: has the deadline passed?
#[inline(never)]
fn expired(
    deadline: Pin<&mut Option<Sleep>>,
    cx: &mut Context<'_>,
    shared: &Shared,
) -> Option<Stop> {
    let passed = deadline.as_pin_mut()?.poll(cx).is_ready();
    shared
        .core
        .policy
        .timeout
        .filter(|_| passed)
        .map(Stop::Timeout)
}

/// Every end but the fast success, out of line: takes the stage and the predicate (once;
/// `Idle` became `Fast` or `Held` at the first poll, and `Done` panicked there) and settles.
#[inline(never)]
fn end<'a, T, E, P: FnOnce(&E) -> bool>(
    shared: &'a Shared,
    stage: &mut Stage<'a>,
    is_failure: &mut Option<P>,
    result: Result<Result<T, E>, Stop>,
) -> Result<T, CallError<E>> {
    let (permit, is_failure) = match (std::mem::replace(stage, Stage::Done), is_failure.take()) {
        (Stage::Fast(ticket), Some(p)) => (shared.permit(ticket), p),
        (Stage::Held(permit), Some(p)) => (permit, p),
        _ => unreachable!("a running call has its stage and its predicate"),
    };
    settle(permit, result, is_failure)
}

#[cfg(all(test, not(breaker_loom)))]
mod tests {
    use std::{sync::Barrier, task::Waker};

    use super::*;
    use crate::{stats::stripe, Breaker, Config};

    /// Pending at its first poll, `Ok` at the next.
    #[derive(Default)]
    struct Once(bool);

    impl Future for Once {
        type Output = Result<(), ()>;
        fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
            if std::mem::replace(&mut self.0, true) {
                Poll::Ready(Ok(()))
            } else {
                Poll::Pending
            }
        }
    }

    /// A task may be admitted on one worker and finish on another. Only a stripe's owner
    /// may count on it with plain stores, so the success is counted where the call ends:
    /// counting it on the admitting thread's stripe would race that thread's own counts.
    #[test]
    fn a_call_that_moves_to_another_thread_counts_its_success_there() {
        let b = Breaker::unlisted("future::moves", Config::default()).unwrap();
        let counters = &b.shared.core.counters;
        let mut cx = Context::from_waker(Waker::noop());
        let both_alive = &Barrier::new(2);
        let mut call = Box::pin(b.call(Once::default()));
        assert!(call.as_mut().poll(&mut cx).is_pending());
        let admitted_on = stripe();
        assert!(admitted_on.owned());
        std::thread::scope(|s| {
            let other = s.spawn(move || {
                let mut cx = Context::from_waker(Waker::noop());
                assert!(matches!(call.as_mut().poll(&mut cx), Poll::Ready(Ok(()))));
                let here = stripe();
                both_alive.wait(); // so the two threads own two different stripes
                here
            });
            both_alive.wait();
            let ended_on = other.join().unwrap();
            assert_ne!(admitted_on, ended_on);
            assert_eq!(counters.at(admitted_on), (1, 0));
            assert_eq!(counters.at(ended_on).1, 1);
        });
        assert_eq!((b.stats().calls, b.stats().successes), (1, 1));
    }
}
