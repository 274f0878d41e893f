//! The user's future as a call future's code sees it ([`Body`]): polled, its output judged,
//! without the code that admits, times, reports and watches the call knowing the output's
//! type. That code (`future::poll_call` and what it calls) is then generic over the judge's
//! type and how the breaker is held, never over the result type.
//!
//! An optimised build carries the output through that code by value ([`Direct`]), inlined
//! into the call future's `poll` as before: the same instructions. A debug build keeps it in
//! the body ([`Kept`]) and runs that code behind `&mut dyn Body<P, Value = ()>`, so it is
//! compiled once per judge and host (in this crate for the common ones), not once per
//! result type: in a crate whose functions each return their own type, once per function
//! (about 1 000 lines of IR each, `poll_call`, `end` and the judging). The blocking path's
//! counterpart is `crate::erased`.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use crate::{verdict::Judge, Verdict};

/// The user's future, polled and judged for the call's code.
pub(crate) trait Body<P> {
    /// What the call's code carries of the output: the output itself, or nothing (kept in
    /// the body).
    type Value;

    /// Polls the user's future. Ready: its output, and whether it is a success without
    /// asking the judge (an `Ok`, when the judge counts every `Ok` a success).
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<(Self::Value, bool)>;

    /// How the call's end (out of line) judges the output: behind `dyn`, so that end is
    /// compiled once per judge and output, not once per future, in either build.
    fn verdicts(&self) -> &dyn Verdicts<P, Self::Value>;
}

/// The judging of a finished call's output ([`Body::verdicts`]).
pub(crate) trait Verdicts<P, V> {
    /// The judge's verdict on the output.
    fn verdict(&self, value: &V, judge: P) -> Verdict;

    /// Feature `otel`: how the call ended, for its span and its timing (see
    /// `traced::judged`: the error's type names a failure).
    #[cfg(feature = "otel")]
    fn ended(&self, value: &V, verdict: Verdict) -> (crate::traced::Ended, Option<&'static str>);
}

/// An optimised build's body: the user's future, its output carried by value.
#[cfg(not(debug_assertions))]
pub(crate) struct Direct<'f, F: ?Sized>(pub(crate) Pin<&'f mut F>);

#[cfg(not(debug_assertions))]
impl<F, T, E, P> Body<P> for Direct<'_, F>
where
    F: Future<Output = Result<T, E>> + ?Sized,
    P: Judge<T, E>,
{
    type Value = Result<T, E>;

    #[inline(always)]
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<(Result<T, E>, bool)> {
        match self.0.as_mut().poll(cx) {
            Poll::Ready(result) => {
                let success = P::OK_IS_SUCCESS && result.is_ok();
                Poll::Ready((result, success))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    #[inline(always)]
    fn verdicts(&self) -> &dyn Verdicts<P, Result<T, E>> {
        &ByValue(std::marker::PhantomData)
    }
}

/// An optimised build's [`Verdicts`]: the output is at hand, judged as it is.
#[cfg(not(debug_assertions))]
struct ByValue<T, E>(std::marker::PhantomData<fn() -> (T, E)>);

#[cfg(not(debug_assertions))]
impl<T, E, P: Judge<T, E>> Verdicts<P, Result<T, E>> for ByValue<T, E> {
    fn verdict(&self, value: &Result<T, E>, judge: P) -> Verdict {
        judge.judge(value)
    }

    #[cfg(feature = "otel")]
    fn ended(
        &self,
        value: &Result<T, E>,
        verdict: Verdict,
    ) -> (crate::traced::Ended, Option<&'static str>) {
        crate::traced::judged::<E>(value.is_err(), Some(verdict))
    }
}

/// A debug build's body: the user's future, then its output, kept here (taken by
/// `future::poll_kept` once the call's code says the call ended with it). Written for a debug
/// build's code size: it is compiled once per result type (and judge), so each step is
/// spelled out where a call of a generic helper would be one more function per type.
#[cfg(debug_assertions)]
pub(crate) struct Kept<'f, F: ?Sized, T, E> {
    pub(crate) inner: Pin<&'f mut F>,
    pub(crate) out: Option<Result<T, E>>,
}

#[cfg(debug_assertions)]
impl<F, T, E, P> Body<P> for Kept<'_, F, T, E>
where
    F: Future<Output = Result<T, E>> + ?Sized,
    P: Judge<T, E>,
{
    type Value = ();

    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<((), bool)> {
        let Poll::Ready(result) = self.inner.as_mut().poll(cx) else {
            return Poll::Pending;
        };
        #[expect(
            clippy::redundant_pattern_matching,
            reason = "`is_ok` would be one more function for every result type"
        )]
        let success = P::OK_IS_SUCCESS && matches!(result, Ok(_));
        self.out = Some(result);
        Poll::Ready(((), success))
    }

    fn verdicts(&self) -> &dyn Verdicts<P, ()> {
        self
    }
}

#[cfg(debug_assertions)]
impl<F: ?Sized, T, E, P: Judge<T, E>> Verdicts<P, ()> for Kept<'_, F, T, E> {
    fn verdict(&self, (): &(), judge: P) -> Verdict {
        match &self.out {
            Some(out) => judge.judge(out),
            None => crate::erased::no_output(),
        }
    }

    #[cfg(feature = "otel")]
    fn ended(&self, (): &(), verdict: Verdict) -> (crate::traced::Ended, Option<&'static str>) {
        crate::traced::judged::<E>(matches!(self.out, Some(Err(_))), Some(verdict))
    }
}

#[cfg(all(test, not(breaker_loom)))]
mod tests {
    use std::time::Duration;

    use crate::{Breaker, BreakerError, CallError, Config, State, Verdict};

    /// Every way an async call ends, through this build's body (a debug build's `Kept`
    /// behind `dyn`, an optimised build's `Direct`: `.ci/run` runs both): the output itself
    /// back, judged as its judge says (an error the judge lets pass, an `Ok` a classifier
    /// fails), a timeout not judged, a panicking judge counted as a failure and resumed, a
    /// refusal without polling the user's future.
    #[tokio::test(start_paused = true)]
    async fn an_async_call_is_judged_where_its_output_is_and_given_back_whole() {
        let config = Config::default()
            .threshold(4)
            .timeout(Duration::from_millis(100));
        let b = Breaker::new("body::judged", config);
        assert_eq!(
            b.call(async { Ok::<_, ()>(String::from("whole")) })
                .await
                .as_deref(),
            Ok("whole")
        );
        let passed = b
            .call_with(|_: &&str| false, async { Err::<u8, _>("404") })
            .await;
        assert!(matches!(passed, Err(CallError::Inner("404"))));
        let classified = b
            .call_classified(
                |r: &Result<u8, ()>| match r {
                    Ok(_) => Verdict::Failure,
                    Err(_) => Verdict::Success,
                },
                async { Ok(3) },
            )
            .await;
        assert_eq!(classified, Ok(3));
        let late = b
            .call(async {
                tokio::time::sleep(Duration::from_secs(1)).await;
                Ok::<u8, ()>(1)
            })
            .await;
        assert!(
            matches!(&late, Err(CallError::Breaker(e)) if e.is_timeout()),
            "{late:?}"
        );
        // The timeout is a failure too.
        let stats = b.stats();
        assert_eq!((stats.successes, stats.failures, stats.timeouts), (1, 2, 1));

        let judge = b.call_with(|_: &()| -> bool { panic!("the judge") }, async {
            Err::<(), ()>(())
        });
        let caught = caught(judge).await;
        assert!(caught.is_err(), "the judge's panic goes on");
        assert_eq!(b.stats().failures, 3);
        assert_eq!(b.state(), State::Closed);
        b.call(async { Err::<(), ()>(()) }).await.unwrap_err();
        assert_eq!(b.state(), State::Open);
        let mut polled = false;
        let refused = b
            .call(async {
                polled = true;
                Ok::<(), ()>(())
            })
            .await;
        assert!(matches!(
            refused,
            Err(CallError::Breaker(BreakerError::Open { .. }))
        ));
        assert!(!polled);
    }

    /// A future run to its end, a panic in it caught.
    async fn caught<F: std::future::Future>(f: F) -> std::thread::Result<F::Output> {
        let mut f = std::pin::pin!(f);
        std::future::poll_fn(|cx| {
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.as_mut().poll(cx))) {
                Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
                Ok(std::task::Poll::Ready(out)) => std::task::Poll::Ready(Ok(out)),
                Err(panic) => std::task::Poll::Ready(Err(panic)),
            }
        })
        .await
    }
}
