//! The future of an async call through a breaker, written by hand so that the closed path
//! costs what the breaker does and no more: admission on the first poll (a call never
//! polled is never admitted), then the user's future polled in place.
//!
//! It is small: 48 bytes around the user's future (the breaker, the admission packed in 24
//! bytes and a flag byte, the stage, the timer's box), so an annotated `async fn`'s future
//! stays within 64 bytes of the plain one's (DESIGN, *Small futures*). With a `timeout`, the
//! deadline is fixed at admission (one clock read) but its timer is made only if the call has
//! to wait, boxed: a call ready at its first poll never builds a timer nor touches the wheel,
//! and a timed call that waits allocates once (its `Sleep`, about 90 bytes that every call
//! future, timed or not, carried inline before). Measured with callgrind (a call pending
//! once, then ready, on a current-thread runtime): a timed call that waits went from 824 to
//! 989 instructions (the allocation and its free), an untimed one that waits from 183 to
//! 180, a call ready at once did not move. A waiting call registers in tokio's timer wheel and
//! waits for I/O anyway; and `reconfigure` can give any breaker a `timeout` at run time, so
//! the slot cannot depend on the configuration a breaker was built with.
//!
//! A call keeps the `timeout` in force at its admission: a reconfiguration that adds, changes
//! or removes it applies to the calls admitted after it. Read live at each poll instead, a
//! call's fate would hang on when its task happens to be polled (a call untied by a patch
//! would time out after all if woken once the `timeout` came back).
//!
//! Feature `otel` (`crate::gate`, `crate::traced`): whether anyone may watch calls is a bit of
//! each breaker's flags (`Core::watched`), set in every breaker when `tracing`'s interest or
//! the meter changes, and asked in the tests the call path makes anyway (with the `timeout`'s
//! bit after a fast admission, with the dry run's before a refusal). Nobody watching, a call
//! runs as without the feature; a call someone may watch goes whole to `watched` (its first
//! poll admitted or refused on its span there, and watched from its admission) and runs in
//! stages of its own (`run::<_, .., true>`), its span entered around each poll, so the
//! unwatched code has no watch to check at its end or drop (callgrind,
//! `scripts/callgrind_otel.sh`: a closed async call 113 instructions and a refusal 189, with
//! the feature compiled in and unused or without it).
//!
//! Only what must be is generic: `poll` admits on the fast path inline, polls the user's
//! future and settles a fast success; full admission, the timer, judging's report and
//! cancellation are out of line and compiled once for every call future (`admit_slow`,
//! `expired`, `Shared::report`), which keeps each annotated function's code small. The
//! user's future is seen through `crate::body`: `poll_call` and what it calls are generic
//! over the judge and the host, never the result type. An optimised build inlines them with
//! the output carried by value; a debug build runs them behind `dyn Body`, compiled once per
//! judge and host (in a crate whose functions each return their own type, compiler
//! instructions per annotated function 41.3 → 32.5 M, `OWN_TYPES=1 scripts/compile_cost.sh
//! --instructions`; 28.5 M with the glue's part spelled out, the end's judging behind
//! `dyn Verdicts` and a missing output one out-of-line `no_output()`).

use std::{
    future::Future,
    mem::ManuallyDrop,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};

#[cfg(not(debug_assertions))]
use crate::body::Direct;
#[cfg(debug_assertions)]
use crate::body::Kept;
use crate::{
    body::{Body, Verdicts},
    core::{Admission, Held, LocalTicket},
    shared::{report_verdict, Host, Shared, Stop},
    stats::Count,
    verdict::Judge,
    BreakerError, CallError,
};

/// Where a call stands: one byte, so every check of the stage is one compare; what the
/// admission holds is beside it ([`Call`]). Every stage from `Fast` on has something to give
/// back if the call future is dropped, so its drop glue asks one question (`>= Fast`).
///
/// Feature `otel`: a call someone watches (a subscriber wants its span, or the hook its
/// time: `crate::traced`) runs in the `Watched` stages, its span in the call's box beside
/// the timer; a call nobody watches runs in the others, with no watch to check anywhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
enum Stage {
    /// Not polled yet: not admitted.
    Idle,
    /// Finished.
    Done,
    /// Admitted on the fast path: nothing to give back if dropped but a count.
    Fast,
    /// Admitted in full: reports a cancellation if dropped, which gives its slots back.
    Held,
    /// `Fast`, watched.
    #[cfg(feature = "otel")]
    FastWatched,
    /// `Held`, watched.
    #[cfg(feature = "otel")]
    HeldWatched,
    /// Not polled yet, its span made (an attempt of a retried or hedged call).
    #[cfg(feature = "otel")]
    IdleWatched,
    /// A watched call whose user's future panicked: ended, its span (to record the panic
    /// on) still in its box.
    #[cfg(feature = "otel")]
    Unwound,
}

impl Stage {
    /// Admitted on the fast path, watched or not.
    #[inline(always)]
    fn fast(self) -> bool {
        #[cfg(feature = "otel")]
        if self == Stage::FastWatched {
            return true;
        }
        self == Stage::Fast
    }

    /// Admitted and not finished, watched or not.
    #[inline(always)]
    fn running(self) -> bool {
        #[cfg(feature = "otel")]
        if matches!(self, Stage::FastWatched | Stage::HeldWatched) {
            return true;
        }
        matches!(self, Stage::Fast | Stage::Held)
    }
}

pin_project! {
    /// The future of one call through a breaker, from [`Breaker::call`](crate::Breaker::call)
    /// and its siblings. The call is admitted on its first poll; dropping it before it
    /// finishes counts it as cancelled (no success, no failure) and gives its slots back.
    ///
    /// `H` is how it holds the breaker: borrowed by default, owned (`'static`) from
    /// [`Breaker::call_owned`](crate::Breaker::call_owned).
    ///
    /// Like most futures, it panics if polled again after it completed.
    ///
    /// `C` is what its output is made of the call's result: by default the result as it is
    /// (`#[circuit_breaker]` has it convert the breaker's error into the function's own).
    #[must_use = "futures do nothing unless polled"]
    pub struct CallFuture<'a, F, P, H: Host = &'a Shared, C = AsIs> {
        // Fields drop in this order: the user's future goes before `call`, so a slot is
        // given back only once the call it held is really gone.
        #[pin]
        inner: F,
        call: Call<H, P>,
        _borrow: std::marker::PhantomData<(&'a (), fn() -> C)>,
    }
}

/// What a call future makes of the call's result, when it is ready: [`AsIs`] gives it as it
/// is; `#[circuit_breaker]`'s glue converts the breaker's error into the function's own. The
/// conversion is done in the call future's own `poll`, so an annotated function compiles one
/// future type around its body rather than two (a `Map` around the call future: its `poll`,
/// projection and drop glue, for every function). Not part of the API.
#[doc(hidden)]
pub trait Finish<T, E> {
    /// The call future's output.
    type Output;
    /// The output, from the call's result.
    fn finish(result: Result<T, CallError<E>>) -> Self::Output;
}

/// The call's result as it is: [`CallFuture`]'s output by default.
#[doc(hidden)]
#[derive(Debug)]
pub struct AsIs;

impl<T, E> Finish<T, E> for AsIs {
    type Output = Result<T, CallError<E>>;

    #[inline(always)]
    fn finish(result: Result<T, CallError<E>>) -> Self::Output {
        result
    }
}

/// What the call's code makes of how the call ended, where it ends. In an optimised build,
/// the call future's output itself ([`Finished`]: a refusal goes straight into it, with no
/// intermediate `Result` to move the error through; one cost the closed async call 8
/// instructions). In a debug build, only whether the breaker stopped the call ([`Stopped`]:
/// the output is kept in the body).
trait Out<V> {
    /// The call future's output, or what it is made of.
    type Output;
    /// The call ended with this.
    fn ready(value: V) -> Self::Output;
    /// The breaker stopped the call: refused, or timed out.
    fn refused(error: BreakerError) -> Self::Output;
}

/// An optimised build's [`Out`]: the output made by `C`.
#[cfg(not(debug_assertions))]
struct Finished<C>(std::marker::PhantomData<C>);

#[cfg(not(debug_assertions))]
impl<T, E, C: Finish<T, E>> Out<Result<T, E>> for Finished<C> {
    type Output = C::Output;

    #[inline(always)]
    fn ready(value: Result<T, E>) -> C::Output {
        C::finish(value.map_err(CallError::Inner))
    }

    #[inline(always)]
    fn refused(error: BreakerError) -> C::Output {
        C::finish(Err(CallError::Breaker(error)))
    }
}

/// A debug build's [`Out`]: the output is kept in the body ([`Kept`]).
#[cfg(debug_assertions)]
struct Stopped;

#[cfg(debug_assertions)]
impl Out<()> for Stopped {
    type Output = Result<(), BreakerError>;

    fn ready((): ()) -> Self::Output {
        Ok(())
    }

    fn refused(error: BreakerError) -> Self::Output {
        Err(error)
    }
}

pin_project! {
    /// A timed call's timer: the `timeout` in force when the call was admitted, which stays
    /// the call's whatever a reconfiguration does later (a new `timeout`, or none, applies to
    /// the calls admitted after it), and the instant it passes.
    struct Deadline {
        #[pin]
        sleep: Sleep,
        after: Duration,
    }
}

pin_project! {
    /// What a call keeps on the heap, made only when it needs it: the timer of a timed call
    /// once it waited, and with feature `otel` the span of a call a subscriber watches.
    struct Boxed {
        #[pin]
        deadline: Option<Deadline>,
        span: SpanSlot,
    }
}

/// A watched call's span (feature `otel`), nothing without it.
#[cfg(feature = "otel")]
type SpanSlot = Option<tracing::Span>;
#[cfg(not(feature = "otel"))]
type SpanSlot = ();
#[cfg(feature = "otel")]
use crate::traced::Watch;

/// A running call's box, once it waited with a `timeout` or was watched (see
/// [`Call::timer`]).
type Timer = ManuallyDrop<Option<Pin<Box<Boxed>>>>;

/// A call: its breaker and its [`Standing`]. Reports a cancellation when dropped before the
/// call ended.
struct Call<H: Host, P> {
    host: H,
    call: Standing<P>,
}

/// A call's standing: the timer of a timed call that waits, the admission (its data and its
/// flags apart, so the stage and the judge's tag pack beside the flags), the judge until it
/// is used. Apart from the breaker, so the code past admission can hold the breaker's
/// `Shared` and the standing at once.
struct Standing<P> {
    /// Made at the first `Pending` of a timed call, or (feature `otel`) when a watched call
    /// is made or admitted. Boxed: 8 bytes in every call future rather than a `Sleep` (~90)
    /// in each, timed or not (see the module's note). Only a stage from `Fast` on has one:
    /// every way to `Done` releases it (see [`release`]), so the drop glue needs no check of
    /// its own for it.
    timer: Timer,
    held: Held,
    flags: u8,
    stage: Stage,
    judge: Option<P>,
    /// Feature `otel`: a watched call's start (read only in the `Watched` stages).
    #[cfg(feature = "otel")]
    watch: Watch,
}

impl<H: Host, P> Drop for Call<H, P> {
    #[inline(always)]
    fn drop(&mut self) {
        // One compare inline (a call that ended is `Done`, one never polled `Idle`), the
        // rest out of line: the drop glue of a call future stays small.
        let call = &mut self.call;
        if call.stage >= Stage::Fast {
            let timer = release(&mut call.timer);
            cancelled(
                self.host.shared(),
                call.stage,
                call.held,
                call.flags,
                timer,
                #[cfg(feature = "otel")]
                call.watch,
            );
        }
    }
}

/// The box, taken out of its slot (which then holds none).
#[inline(always)]
fn release(timer: &mut Timer) -> Option<Pin<Box<Boxed>>> {
    ManuallyDrop::into_inner(std::mem::replace(timer, ManuallyDrop::new(None)))
}

/// A call future dropped while its call ran: cancelled. On the fast path there is nothing
/// to give back but a count. (Feature `otel`: also a watched call never polled, or whose
/// future panicked, with only its box to drop.)
#[cold]
#[inline(never)]
fn cancelled(
    shared: &Shared,
    stage: Stage,
    held: Held,
    flags: u8,
    #[cfg_attr(not(feature = "otel"), expect(unused_mut))] mut timer: Option<Pin<Box<Boxed>>>,
    #[cfg(feature = "otel")] mut watch: Watch,
) {
    #[cfg(feature = "otel")]
    {
        let span = timer
            .as_mut()
            .and_then(|b| b.as_mut().project().span.take());
        match stage {
            Stage::Unwound => return crate::traced::unwound(span),
            Stage::IdleWatched => return,
            _ => watch.end(shared, span, crate::traced::Ended::Cancelled, None),
        }
    }
    drop(timer);
    if stage.fast() {
        shared.core.counters.add(Count::Cancelled);
    } else {
        let admission = Admission::join(held, flags);
        shared.report(false, admission, crate::core::Outcome::Cancelled);
    }
}

/// The timer of a call that ended or whose answer began, released (out of line: only a
/// timed call that waited has one). A watched call keeps its box, for its watch.
#[cold]
#[inline(never)]
fn release_timer(timer: &mut Timer) {
    #[cfg(feature = "otel")]
    if let Some(boxed) = timer.as_mut()
        && boxed.span.is_some()
    {
        boxed.as_mut().project().deadline.set(None);
        return;
    }
    drop(release(timer));
}

impl<F, P, H: Host, C> std::fmt::Debug for CallFuture<'_, F, P, H, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let stage = match self.call.call.stage {
            s if s.running() => "running",
            Stage::Done => "done",
            _ => "idle",
        };
        f.debug_struct("CallFuture")
            .field("breaker", &self.call.host.shared().core.name)
            .field("stage", &stage)
            .finish_non_exhaustive()
    }
}

impl<F, P, H: Host> CallFuture<'_, F, P, H> {
    #[inline(always)]
    pub(crate) fn new(host: H, judge: P, inner: F) -> Self {
        Self::finished(host, judge, inner)
    }
}

impl<F, P, H: Host, C> CallFuture<'_, F, P, H, C> {
    /// [`new`](CallFuture::new) with its output made by `C`.
    #[inline(always)]
    pub(crate) fn finished(host: H, judge: P, inner: F) -> Self {
        CallFuture {
            inner,
            call: Call {
                host,
                call: Standing {
                    timer: ManuallyDrop::new(None),
                    held: Held::NONE,
                    flags: 0,
                    stage: Stage::Idle,
                    judge: Some(judge),
                    #[cfg(feature = "otel")]
                    watch: Watch::NONE,
                },
            },
            _borrow: std::marker::PhantomData,
        }
    }
}

impl<F, P, H: Host> CallFuture<'_, F, P, H> {
    /// An attempt of a retried call, in its own span (feature `otel`).
    #[cfg(feature = "otel")]
    pub(crate) fn attempt(mut self, span: Option<tracing::Span>) -> Self {
        if let Some(span) = span {
            let call = &mut self.call.call;
            *call.timer = Some(Box::pin(Boxed {
                deadline: None,
                span: Some(span),
            }));
            call.stage = Stage::IdleWatched;
        }
        self
    }
}

impl<F, P, H: Host, C> CallFuture<'_, F, P, H, C> {
    /// The call's answer has begun (a streamed response's headers arrived) and its outcome
    /// comes later, when this future ends: from here on the call is not timed. Its `timeout`
    /// no longer applies; `slow_call` is judged now (a call not slow yet will not be, however
    /// long the rest takes, and dropped it is only cancelled; one slow already stays slow,
    /// and abandoned if dropped). Nothing for a call not running. Not part of the API: for
    /// the gRPC layer, which holds the call until the trailers.
    #[doc(hidden)]
    pub fn answer_began(self: Pin<&mut Self>) {
        let Call { host, call } = self.project().call;
        if !call.stage.running() {
            return;
        }
        let shared = host.shared();
        #[cfg(feature = "otel")]
        call.watch.answer_began(shared);
        if call.timer.is_some() {
            release_timer(&mut call.timer);
        }
        let admission = Admission::join(call.held, call.flags);
        call.flags = shared.core.answer_began(admission, &shared.clock);
    }
}

/// Admission on the first poll, when neither the closed fast path nor an outright refusal
/// applied (out of line and not generic: one copy for every call future): writes the
/// admission and the stage if admitted.
#[inline(never)]
fn admit_slow(
    shared: &Shared,
    held: &mut Held,
    flags: &mut u8,
    stage: &mut Stage,
) -> Result<(), crate::BreakerError> {
    let (fast, admission) = shared.admit()?;
    (*held, *flags) = admission.split();
    *stage = if fast { Stage::Fast } else { Stage::Held };
    Ok(())
}

// `succeeded` holds the closed path's success, and `Shared::enter_closed` and
// `Shared::refuse` its admission. They are not generic, so a debug build compiles them once,
// in this crate, and every call future's `poll` calls them (its own code then is the user's
// future and the judge); an optimised build inlines them into each `poll`, where the closed
// path's instruction count is what it was.

/// A fast-path call's `Ok`, without a judge: counted on the stripe admission found when it
/// ends in the admitting poll, else where it ends.
#[cfg_attr(not(debug_assertions), inline(always))]
fn succeeded(
    shared: &Shared,
    admitted_here: Option<LocalTicket<'_>>,
    held: &Held,
    timer: &mut Timer,
) {
    match admitted_here {
        Some(local) => {
            // The generation read back from the call (where admission wrote it), not kept
            // in a register across the user's poll: the streak is rare.
            if shared.core.succeeded_here(local) {
                shared.core.end_streak_now(held.ticket(), &shared.clock);
            }
        }
        None => {
            // A later poll than the admitting one: counted where it ends, and the timer it
            // may have made released.
            if timer.is_some() {
                release_timer(timer);
            }
            shared.core.succeed(held.ticket(), &shared.clock);
        }
    }
}

impl<F, T, E, P, H, C> Future for CallFuture<'_, F, P, H, C>
where
    F: Future<Output = Result<T, E>>,
    P: Judge<T, E>,
    H: Host,
    C: Finish<T, E>,
{
    type Output = C::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        // An optimised build carries the output by value through `poll_call`, inlined here.
        // A debug build polls the user's future through `dyn Future` and keeps its output in
        // the body, so what is compiled per future is this `poll` alone, and `poll_call`
        // (behind `dyn Body`) once per judge and host, not once per result type (see
        // `crate::body`). The same code either way: only what it is instantiated with differs.
        #[cfg(not(debug_assertions))]
        return poll_call::<_, P, H, Finished<C>>(&mut Direct(this.inner), this.call, cx);
        #[cfg(debug_assertions)]
        poll_kept::<T, E, P, H, C>(this.inner, this.call, cx)
    }
}

/// A debug build's [`CallFuture::poll`], compiled once per result type, judge, host and
/// output: the user's future behind `dyn Future`, `poll_call` behind `dyn Body`.
#[cfg(debug_assertions)]
fn poll_kept<T, E, P, H, C>(
    inner: Pin<&mut dyn Future<Output = Result<T, E>>>,
    call: &mut Call<H, P>,
    cx: &mut Context<'_>,
) -> Poll<C::Output>
where
    P: Judge<T, E>,
    H: Host,
    C: Finish<T, E>,
{
    let mut body = Kept { inner, out: None };
    let ended = std::task::ready!(poll_call::<dyn Body<P, Value = ()>, P, H, Stopped>(
        &mut body, call, cx
    ));
    // The output taken from where it was kept, spelled out here rather than in a helper: one
    // function fewer for every result type.
    Poll::Ready(C::finish(match ended {
        Err(stopped) => Err(CallError::Breaker(stopped)),
        Ok(()) => match body.out {
            Some(Ok(value)) => Ok(value),
            Some(Err(error)) => Err(CallError::Inner(error)),
            None => crate::erased::no_output(),
        },
    }))
}

/// [`CallFuture::poll`]'s body: `B` is the user's future as a [`Body`], `dyn` in a debug
/// build. Ready: the output (or, kept in the body, nothing), or the breaker's error.
#[cfg_attr(not(debug_assertions), inline(always))]
fn poll_call<B, P, H, O>(
    body: &mut B,
    call: &mut Call<H, P>,
    cx: &mut Context<'_>,
) -> Poll<O::Output>
where
    B: Body<P> + ?Sized,
    H: Host,
    O: Out<B::Value>,
{
    // Feature `otel`: a call someone may watch goes on whole (`outer`), its parts unused.
    let outer = call;
    let Call { host, call } = &mut *outer;
    let shared = host.shared();
    // Read at admission only when a `timeout` is set: its deadline counts from here.
    let mut admitted_at = None;
    // Admitted on this thread in this poll: a success in the same poll (a call ready at
    // once, the common case) counts on the stripe admission found.
    let mut admitted_here = None;
    match call.stage {
        Stage::Idle => match shared.enter_closed() {
            Some(ticket) => {
                call.held.set_ticket(ticket.ticket());
                call.stage = Stage::Fast;
                admitted_here = Some(ticket);
                // One test of the breaker's flags for both: a deadline to count from here,
                // and (feature `otel`) someone who may watch the call, which then runs
                // watched.
                if shared.core.timed_or_watched() {
                    #[cfg(feature = "otel")]
                    if shared.core.watched() {
                        // Its stripe not handed over: kept in registers, the ticket costs
                        // the unwatched path nothing; a watched success counts as a call
                        // ending in a later poll does.
                        return watched::<B, P, H, O>(body, outer, cx, Turn::Admitted);
                    }
                    admitted_at = Some(Instant::now());
                }
            }
            None => {
                // Each refusal straight into the output (`O`). Feature `otel`: a call someone
                // may watch is refused (or admitted) on its span (`watched`).
                if let Some(refused) = shared.refuse_unwatched() {
                    call.stage = Stage::Done;
                    return Poll::Ready(O::refused(refused));
                }
                #[cfg(feature = "otel")]
                if shared.core.watched() {
                    return watched::<B, P, H, O>(body, outer, cx, Turn::Unadmitted);
                }
                if let Err(refused) =
                    admit_slow(shared, &mut call.held, &mut call.flags, &mut call.stage)
                {
                    call.stage = Stage::Done;
                    return Poll::Ready(O::refused(refused));
                }
                // Watched or not as asked above: a subscriber set since is seen from the
                // next call.
                if shared.core.timed() {
                    admitted_at = Some(Instant::now());
                }
            }
        },
        Stage::Fast | Stage::Held => {}
        Stage::Done => panic!("a call through a circuit breaker was polled after it finished"),
        #[cfg(feature = "otel")]
        _ => return watched::<B, P, H, O>(body, outer, cx, Turn::Later),
    }
    run::<B, P, O, false>(body, shared, call, cx, admitted_at, admitted_here)
}

/// The user's future polled and the call settled when it ends, once admitted. `WATCHED`
/// (feature `otel`): the call's span entered around the poll.
#[inline(always)]
fn run<B, P, O, const WATCHED: bool>(
    body: &mut B,
    shared: &Shared,
    call: &mut Standing<P>,
    cx: &mut Context<'_>,
    admitted_at: Option<Instant>,
    admitted_here: Option<LocalTicket<'_>>,
) -> Poll<O::Output>
where
    B: Body<P> + ?Sized,
    O: Out<B::Value>,
{
    #[cfg(feature = "otel")]
    if WATCHED {
        // The span lives in the box, which the unwinding guard leaves to the call's drop
        // (the stage `Unwound`): the span stays entered while the panic unwinds out.
        let entered = call
            .timer
            .as_ref()
            .and_then(|b| b.span.as_ref())
            .map(tracing::Span::enter);
        let unwinding = UnwindingWatched {
            shared,
            stage: &mut call.stage,
            held: &call.held,
            flags: call.flags,
        };
        let polled = body.poll(cx);
        std::mem::forget(unwinding);
        drop(entered);
        // The fast success, as unwatched (no judge), and its end on the watch.
        let polled = match polled {
            Poll::Ready((value, true)) if call.stage == Stage::FastWatched => {
                call.stage = Stage::Done;
                let span =
                    release(&mut call.timer).and_then(|mut b| b.as_mut().project().span.take());
                succeeded(shared, admitted_here, &call.held, &mut call.timer);
                call.watch
                    .end(shared, span, crate::traced::Ended::Success, None);
                return Poll::Ready(O::ready(value));
            }
            polled => polled,
        };
        return settle::<B, P, O>(body, polled, shared, call, cx, admitted_at, admitted_here);
    }
    // A panic in the user's future is a failure, reported as it unwinds.
    let unwinding = Unwinding {
        shared,
        call: &mut *call,
    };
    let polled = body.poll(cx);
    std::mem::forget(unwinding);
    settle::<B, P, O>(body, polled, shared, call, cx, admitted_at, admitted_here)
}

/// What the user's future answered, settled: the fast success inline, every other end out
/// of line ([`end`]), a `Pending` checked against the call's deadline.
#[inline(always)]
fn settle<B, P, O>(
    body: &B,
    polled: Poll<(B::Value, bool)>,
    shared: &Shared,
    call: &mut Standing<P>,
    cx: &mut Context<'_>,
    admitted_at: Option<Instant>,
    admitted_here: Option<LocalTicket<'_>>,
) -> Poll<O::Output>
where
    B: Body<P> + ?Sized,
    O: Out<B::Value>,
{
    let result = match polled {
        // The fast success, inline: no judge to run (unless a classifier must see every
        // `Ok`). A watched call's stage is not `Fast`: it ends through `end`.
        Poll::Ready((value, true)) if call.stage == Stage::Fast => {
            call.stage = Stage::Done;
            succeeded(shared, admitted_here, &call.held, &mut call.timer);
            return Poll::Ready(O::ready(value));
        }
        Poll::Ready((value, _)) => Ok(value),
        Poll::Pending => match expired(&mut call.timer, admitted_at, cx, shared) {
            Some(timeout) => Err(timeout),
            None => return Poll::Pending,
        },
    };
    Poll::Ready(match end(body.verdicts(), shared, call, result) {
        Ok(value) => O::ready(value),
        Err(stopped) => O::refused(stopped),
    })
}

/// Feature `otel`: a call admitted now, watched if anyone still wants it (`span`: its
/// attempt's span, or none): its start kept, its span (if any) in its box, its stage the
/// watched one. `false`: nobody does, and nothing changed.
#[cfg(feature = "otel")]
#[cold]
#[inline(never)]
fn start_watch<P>(call: &mut Standing<P>, shared: &Shared, span: Option<tracing::Span>) -> bool {
    let Some((watch, span)) = Watch::begin(shared, span) else {
        return false;
    };
    call.watch = watch;
    if span.is_some() {
        *call.timer = Some(Box::pin(Boxed {
            deadline: None,
            span,
        }));
    }
    call.stage = if call.stage == Stage::Fast {
        Stage::FastWatched
    } else {
        Stage::HeldWatched
    };
    true
}

/// Feature `otel`: how far a watched call's poll got before it was handed over.
#[cfg(feature = "otel")]
#[derive(Clone, Copy, PartialEq)]
enum Turn {
    /// A first poll, the closed fast path tried and not taken.
    Unadmitted,
    /// A first poll, admitted on the closed fast path (its stripe not handed over).
    Admitted,
    /// A later poll, or an attempt's first (its span made by its retried or hedged call).
    Later,
}

/// Feature `otel`: a call someone may watch, from `poll_call` (out of line: only such a call
/// comes here). It takes the call whole, not its parts: `poll_call` then keeps no pointer to
/// the parts for this call alone, which cost its closed path a register (2 instructions; 3 a
/// refusal). A later poll runs on; a first one is admitted as `poll_call` admits (unless
/// `poll_call` did, or tried the fast path: `turn`), refused on its span, and watched from its
/// admission if anyone still wants it: its deadline counted from there, its span (an
/// attempt's, made before, or one made now) entered around its polls.
#[cfg(feature = "otel")]
#[cold]
#[inline(never)]
fn watched<B, P, H, O>(
    body: &mut B,
    call: &mut Call<H, P>,
    cx: &mut Context<'_>,
    turn: Turn,
) -> Poll<O::Output>
where
    B: Body<P> + ?Sized,
    H: Host,
    O: Out<B::Value>,
{
    let Call { host, call } = call;
    let shared = host.shared();
    // Only an attempt has a box (its span) before its first poll.
    let span = match (turn, call.stage) {
        (Turn::Later, Stage::FastWatched | Stage::HeldWatched) => {
            return run::<B, P, O, true>(body, shared, call, cx, None, None);
        }
        (Turn::Later, Stage::IdleWatched) => {
            call.stage = Stage::Idle;
            release(&mut call.timer).and_then(|mut b| b.as_mut().project().span.take())
        }
        (Turn::Later, _) => panic!("a call through a circuit breaker was polled after it finished"),
        (Turn::Unadmitted | Turn::Admitted, _) => None,
    };
    let mut admitted_here = None;
    if turn != Turn::Admitted {
        let fast = match turn {
            Turn::Later => shared.enter_closed(),
            _ => None,
        };
        match fast {
            Some(ticket) => {
                call.held.set_ticket(ticket.ticket());
                call.stage = Stage::Fast;
                admitted_here = Some(ticket);
            }
            None => {
                if let Some(refused) = shared.refuse() {
                    return refused_watched::<P, B::Value, O>(shared, call, span, refused);
                }
                if let Err(refused) =
                    admit_slow(shared, &mut call.held, &mut call.flags, &mut call.stage)
                {
                    return refused_watched::<P, B::Value, O>(shared, call, span, refused);
                }
            }
        }
    }
    let admitted_at = shared.core.timed().then(Instant::now);
    if start_watch(call, shared, span) {
        run::<B, P, O, true>(body, shared, call, cx, admitted_at, admitted_here)
    } else {
        run::<B, P, O, false>(body, shared, call, cx, admitted_at, admitted_here)
    }
}

/// Feature `otel`: a refusal of a call someone may watch, on its span (its attempt's, or one
/// made now if a subscriber wants it: a refusal is not timed).
#[cfg(feature = "otel")]
#[inline(always)]
fn refused_watched<P, V, O: Out<V>>(
    shared: &Shared,
    call: &mut Standing<P>,
    span: Option<tracing::Span>,
    refused: BreakerError,
) -> Poll<O::Output> {
    call.stage = Stage::Done;
    if span.is_some() || crate::gate::spans_wanted() {
        crate::traced::refused(shared, span, &refused);
    }
    Poll::Ready(O::refused(refused))
}

/// A call whose user's future is being polled, dropped only if that poll panicked (`poll`
/// forgets it otherwise): the call is reported as a failure and ends while the panic goes on
/// (see `Unwinding` in `shared`). It holds the call whole, not pointers to its parts: given
/// the parts, `poll_call` kept a pointer to the stage in a register of its own on every path,
/// which with feature `otel` compiled in cost an open async call's refusal 2 instructions.
/// Generic over the judge only; what it does is `panicked`, compiled once.
struct Unwinding<'c, P> {
    shared: &'c Shared,
    call: &'c mut Standing<P>,
}

impl<P> Drop for Unwinding<'_, P> {
    #[inline(always)]
    fn drop(&mut self) {
        let call = &mut *self.call;
        panicked(
            self.shared,
            &mut call.stage,
            &call.held,
            call.flags,
            Some(&mut call.timer),
        );
    }
}

/// Feature `otel`: a watched call's [`Unwinding`], holding the call's parts (the entered
/// span borrows its box) and no timer: the box, with the span entered, is freed by the
/// call's drop. Its fields go to `panicked` by value, so the guard itself never needs a
/// place in memory on the normal path.
#[cfg(feature = "otel")]
struct UnwindingWatched<'c> {
    shared: &'c Shared,
    stage: &'c mut Stage,
    held: &'c Held,
    flags: u8,
}

#[cfg(feature = "otel")]
impl Drop for UnwindingWatched<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        panicked(self.shared, self.stage, self.held, self.flags, None);
    }
}

#[cold]
#[inline(never)]
fn panicked(shared: &Shared, stage: &mut Stage, held: &Held, flags: u8, timer: Option<&mut Timer>) {
    let fast = stage.fast();
    *stage = Stage::Done;
    match timer {
        Some(timer) => drop(release(timer)),
        // Feature `otel`: a watched call, whose box the call's drop frees.
        #[cfg(feature = "otel")]
        None => *stage = Stage::Unwound,
        #[cfg(not(feature = "otel"))]
        None => {}
    }
    shared.report(
        fast,
        Admission::join(*held, flags),
        crate::core::Outcome::Failure,
    );
}

/// The user's future is pending: has the deadline passed? At the first `Pending` of a timed
/// call (the poll that admitted it), makes its timer from the `timeout` in force then, due
/// that long after admission; later polls only poll that timer (out of line: only with
/// `timeout`).
#[inline(never)]
fn expired(
    timer: &mut Timer,
    admitted_at: Option<Instant>,
    cx: &mut Context<'_>,
    shared: &Shared,
) -> Option<Stop> {
    if let Some(at) = admitted_at {
        let after = shared.core.live.timeout()?;
        // A deadline past what `Instant` holds never comes: no timer then.
        let due = at.checked_add(after)?;
        let deadline = Deadline {
            sleep: tokio::time::sleep_until(due),
            after,
        };
        match timer.as_mut() {
            // Feature `otel`: a watched call's box holds its span already.
            Some(boxed) => boxed.as_mut().project().deadline.set(Some(deadline)),
            None => {
                **timer = Some(Box::pin(Boxed {
                    deadline: Some(deadline),
                    span: Default::default(),
                }));
            }
        }
    }
    let deadline = timer.as_mut()?.as_mut().project().deadline.as_pin_mut()?;
    let deadline = deadline.project();
    let passed = deadline.sleep.poll(cx).is_ready();
    passed.then_some(Stop::Timeout(*deadline.after))
}

/// Every end but the fast success, out of line: takes the stage and the judge (once;
/// `Idle` became `Fast` or `Held` at the first poll, and `Done` panicked there), judges the
/// output where the body holds it, and reports.
#[inline(never)]
fn end<P, V>(
    verdicts: &dyn Verdicts<P, V>,
    shared: &Shared,
    call: &mut Standing<P>,
    result: Result<V, Stop>,
) -> Result<V, BreakerError> {
    let fast = call.stage.fast();
    call.stage = Stage::Done;
    let boxed = release(&mut call.timer);
    #[cfg(not(feature = "otel"))]
    drop(boxed);
    let Some(judge) = call.judge.take() else {
        unreachable!("a running call has its judge")
    };
    let admission = Admission::join(call.held, call.flags);
    let value = match result {
        Ok(value) => value,
        Err(stop) => {
            let stopped = shared.stopped(fast, admission, stop);
            #[cfg(feature = "otel")]
            watch_ended(call, shared, boxed, (crate::traced::Ended::Timeout, None));
            return Err(stopped);
        }
    };
    #[cfg_attr(not(feature = "otel"), expect(unused_variables))]
    let verdict = report_verdict(shared, fast, admission, || verdicts.verdict(&value, judge));
    #[cfg(feature = "otel")]
    watch_ended(call, shared, boxed, verdicts.ended(&value, verdict));
    Ok(value)
}

/// Feature `otel`: a watched call's end, on its span (if any, in its box) and its timing.
#[cfg(feature = "otel")]
fn watch_ended<P>(
    call: &mut Standing<P>,
    shared: &Shared,
    mut boxed: Option<Pin<Box<Boxed>>>,
    (outcome, error_type): (crate::traced::Ended, Option<&'static str>),
) {
    let span = boxed
        .as_mut()
        .and_then(|b| b.as_mut().project().span.take());
    call.watch.end(shared, span, outcome, error_type);
}

#[cfg(all(test, not(breaker_loom)))]
mod tests {
    use std::{sync::Barrier, task::Waker};

    use super::*;
    use crate::{stats::here, Breaker, Config};

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

    /// The call future is the user's future plus 224 bytes (96 of them the timeout's
    /// `Sleep`, 16 the overload state of part three), borrowed or owned alike: an owned
    /// future costs what a borrowed one does.
    #[test]
    fn an_owned_call_future_is_the_size_of_a_borrowed_one() {
        let b = Breaker::unlisted("future::small".into(), Config::default()).unwrap();
        let inner = std::future::ready(Ok::<u64, ()>(1));
        let overhead = |size: usize| size - std::mem::size_of_val(&inner);
        // Feature `otel`: 8 more, a watched call's start (its span, if any, is in its box).
        let expected = if cfg!(feature = "otel") { 56 } else { 48 };
        assert_eq!(
            overhead(std::mem::size_of_val(&b.call(inner.clone()))),
            expected
        );
        let owned = b.clone().call_owned(inner.clone());
        assert_eq!(overhead(std::mem::size_of_val(&owned)), expected);
    }

    /// A call whose answer began (a stream's headers) is timed no longer: its `timeout` does
    /// not cut it, `slow_call` was judged at that moment, and a drop is only a cancellation.
    #[tokio::test(start_paused = true)]
    async fn a_call_whose_answer_began_is_timed_no_longer() {
        use std::time::Duration;
        let ms = Duration::from_millis;
        let config = Config::default()
            .threshold(100)
            .slow_call(ms(200))
            .timeout(ms(300));
        let b = Breaker::unlisted("future::answer_began".into(), config).unwrap();
        let stream = |answer: Duration, end: Duration| async move {
            tokio::time::sleep(answer).await;
            tokio::time::sleep(end).await;
            Ok::<(), ()>(())
        };

        // Headers at 10 ms, the end at 1 s: a success, not slow, not timed out.
        let mut call = std::pin::pin!(b.call(stream(ms(10), ms(990))));
        assert!(futures_poll(call.as_mut()).is_pending());
        tokio::time::advance(ms(10)).await;
        assert!(futures_poll(call.as_mut()).is_pending());
        call.as_mut().answer_began();
        assert_eq!(call.await, Ok(()));
        let stats = b.stats();
        assert_eq!(
            (stats.successes, stats.slow_calls, stats.timeouts),
            (1, 0, 0)
        );

        // Dropped at 500 ms, its answer begun at 10 ms: cancelled, not abandoned.
        let mut call = Box::pin(b.call(stream(ms(10), ms(990))));
        assert!(futures_poll(call.as_mut()).is_pending());
        tokio::time::advance(ms(10)).await;
        call.as_mut().answer_began();
        tokio::time::advance(ms(490)).await;
        drop(call);
        assert_eq!((b.stats().cancelled, b.stats().abandoned), (1, 0));

        // Begun at 250 ms, past `slow_call`: slow at its end, abandoned if dropped.
        let mut call = Box::pin(b.call(stream(ms(250), ms(500))));
        assert!(futures_poll(call.as_mut()).is_pending());
        tokio::time::advance(ms(250)).await;
        assert!(futures_poll(call.as_mut()).is_pending());
        call.as_mut().answer_began();
        drop(call);
        assert_eq!((b.stats().abandoned, b.stats().slow_calls), (1, 1));
    }

    /// A call keeps the `timeout` in force at its admission: one admitted timed still times
    /// out once a reconfiguration took `timeout` away, one admitted untimed is not cut by a
    /// `timeout` a reconfiguration brought (both apply to the calls admitted after them).
    #[tokio::test(start_paused = true)]
    async fn a_call_keeps_the_timeout_of_its_admission() {
        use std::time::Duration;
        let ms = Duration::from_millis;
        let timed = Config::default().threshold(100).timeout(ms(300));
        let b = Breaker::unlisted("future::kept_timeout".into(), timed.clone()).unwrap();
        let answer = |after| async move {
            tokio::time::sleep(after).await;
            Ok::<(), ()>(())
        };

        let mut call = Box::pin(b.call(answer(ms(1000))));
        assert!(futures_poll(call.as_mut()).is_pending());
        b.reconfigure(Config::default().threshold(100)).unwrap();
        let err = call.await.unwrap_err();
        assert!(
            matches!(&err, CallError::Breaker(e) if e.is_timeout()),
            "{err:?}"
        );

        let start = tokio::time::Instant::now();
        let mut call = Box::pin(b.call(answer(ms(1000))));
        assert!(futures_poll(call.as_mut()).is_pending());
        b.reconfigure(timed).unwrap();
        assert_eq!(call.await, Ok(()));
        assert_eq!(start.elapsed(), ms(1000));
        assert_eq!(b.stats().timeouts, 1);
    }

    /// Polls a future once with a waker that does nothing.
    fn futures_poll<F: Future>(fut: Pin<&mut F>) -> Poll<F::Output> {
        fut.poll(&mut Context::from_waker(Waker::noop()))
    }

    /// A task may be admitted on one worker and finish on another. Only a stripe's owner
    /// may count on it with plain stores, so the success is counted where the call ends:
    /// counting it on the admitting thread's stripe would race that thread's own counts.
    #[test]
    fn a_call_that_moves_to_another_thread_counts_its_success_there() {
        let b = Breaker::unlisted("future::moves".into(), Config::default()).unwrap();
        let counters = &b.shared.core.counters;
        let mut cx = Context::from_waker(Waker::noop());
        let both_alive = &Barrier::new(2);
        let mut call = Box::pin(b.call(Once::default()));
        assert!(call.as_mut().poll(&mut cx).is_pending());
        let admitted_on = here().stripe();
        assert!(admitted_on.owned());
        std::thread::scope(|s| {
            let other = s.spawn(move || {
                let mut cx = Context::from_waker(Waker::noop());
                assert!(matches!(call.as_mut().poll(&mut cx), Poll::Ready(Ok(()))));
                let here = here().stripe();
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
