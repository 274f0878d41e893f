//! A debug build's blocking path, whatever the call's result type and judge: the body is
//! run and judged behind `&mut dyn` ([`JudgedBody`]), its result kept where it ran, and the
//! breaker's path (`Breaker::call_sync_erased`, judging by the verdict given: [`Given`])
//! sees only the verdict. Compiled once, in this crate, where the typed path was compiled
//! once per result type and judge: in a crate whose functions each return their own type,
//! once per function (1 900 lines of IR each). An optimised build keeps the typed path,
//! inlined into the caller.

use crate::{Judge, Verdict};

/// A body run once and judged where it runs: `Ok(verdict)` for an `Ok`, `Err(verdict)`
/// for an `Err`, the result itself kept by the implementor.
#[doc(hidden)]
pub trait JudgedBody {
    /// Runs the body and judges its result.
    fn run(&mut self) -> Result<Verdict, Verdict>;
}

/// What [`Judged`]'s `run` does once it has the body's result: judges it, keeps it in
/// `out`, and returns the verdict. Generic over the result type and judge only, so each
/// body's own `run` is only the call of the body around it.
fn keep_judged<T, E>(
    out: &mut Option<Result<T, E>>,
    result: Result<T, E>,
    judge: impl Judge<T, E>,
) -> Result<Verdict, Verdict> {
    let verdict = judge.judge(&result);
    let ended = match result {
        Ok(_) => Ok(verdict),
        Err(_) => Err(verdict),
    };
    *out = Some(result);
    ended
}

/// A call that ended without the output it must have: unreachable. Out of line and not
/// generic, so the code that takes a kept output (compiled once per result type in a debug
/// build) calls it rather than building a panic's message of its own.
#[doc(hidden)]
#[cold]
#[inline(never)]
pub fn no_output() -> ! {
    unreachable!("a call that ended has its output")
}

/// A [`JudgedBody`]: a call and its judge, then the call's result (`out`, once it ran).
/// The runtime's blocking calls and the attribute's plain `fn`s both use it.
#[doc(hidden)]
pub struct Judged<F, J, T, E> {
    call: Option<(F, J)>,
    /// The call's result, once it ran.
    pub out: Option<Result<T, E>>,
}

impl<F, J, T, E> std::fmt::Debug for Judged<F, J, T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Judged")
            .field("ran", &self.call.is_none())
            .finish_non_exhaustive()
    }
}

impl<F: FnOnce() -> Result<T, E>, J: Judge<T, E>, T, E> Judged<F, J, T, E> {
    /// `call`, to be judged by `judge`.
    pub fn new(call: F, judge: J) -> Self {
        Judged {
            call: Some((call, judge)),
            out: None,
        }
    }
}

impl<F: FnOnce() -> Result<T, E>, J: Judge<T, E>, T, E> JudgedBody for Judged<F, J, T, E> {
    fn run(&mut self) -> Result<Verdict, Verdict> {
        let Some((call, judge)) = self.call.take() else {
            unreachable!("`call_sync_in` calls its call once")
        };
        keep_judged(&mut self.out, call(), judge)
    }
}

/// The judge of a [`JudgedBody`]: the verdict it gave.
#[derive(Clone, Copy)]
pub(crate) struct Given;

impl Judge<Verdict, Verdict> for Given {
    const OK_IS_SUCCESS: bool = false;

    fn judge(self, result: &Result<Verdict, Verdict>) -> Verdict {
        match *result {
            Ok(verdict) | Err(verdict) => verdict,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Breaker, BreakerError, CallError, Config, State, Verdict};

    /// A debug build's blocking calls go through `call_sync_erased`: the body's own result
    /// back, judged as its judge says (an error the judge lets pass, an `Ok` a classifier
    /// fails), a refusal without running it, a panic counted as a failure.
    #[test]
    fn a_blocking_call_is_judged_where_it_runs_and_its_result_kept() {
        let b = Breaker::new("erased::judged", Config::default().threshold(2));
        assert_eq!(b.call_sync(|| Ok::<_, ()>(7)), Ok(7));
        let passed = b.call_sync_with(|_: &&str| false, || Err::<u8, _>("404"));
        assert!(matches!(passed, Err(CallError::Inner("404"))));
        let failed = b.call_sync_classified(
            |r: &Result<u8, ()>| match r {
                Ok(_) => Verdict::Failure,
                Err(_) => Verdict::Success,
            },
            || Ok(3),
        );
        assert_eq!(failed, Ok(3));
        let stats = b.stats();
        assert_eq!((stats.successes, stats.failures), (1, 1));
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            b.call_sync(|| -> Result<(), ()> { panic!("the body") })
        }));
        assert!(caught.is_err());
        assert_eq!(b.state(), State::Open);
        let mut ran = false;
        let refused = b.call_sync(|| {
            ran = true;
            Ok::<_, ()>(())
        });
        assert!(matches!(
            refused,
            Err(CallError::Breaker(BreakerError::Open { .. }))
        ));
        assert!(!ran);
    }
}
