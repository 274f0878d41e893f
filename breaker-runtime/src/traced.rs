//! What feature `otel` adds to a call (the facade's `breaker::otel`): a `tracing` span per
//! call (`breaker.call`), per attempt of a retried or hedged call and per run of the
//! breaker's own probe (`breaker.attempt`), made only when a subscriber wants them, and each
//! call's duration handed to the hook that `breaker::otel::install` sets ([`time_calls`]).
//!
//! Without the feature none of this is compiled: a call future is what it was, to the
//! instruction. With it, a call that neither a subscriber nor the hook wants pays, once
//! admitted, a load and compare of tracing's cached level filter and of the hook, and one
//! compare at its end and at its drop; the span, the clock readings and the hook's work are
//! out of line. A call whose user's future panics is a failure in the statistics (so in
//! `breaker.calls`) and on its span (`error.type = "panic"`, set as the call future goes);
//! it is not timed.
//! The spans' target is [`TARGET`] at INFO, so a filter can drop them (`breaker::otel=off`)
//! and keep the transitions' log lines (target `breaker`).

use std::{any::type_name, mem::ManuallyDrop, sync::OnceLock, time::Duration};

use tracing::{field::Empty, Level, Span};

use crate::{clock::Clock, shared::Shared, BreakerError, Name, Verdict};

/// The target of the spans.
pub const TARGET: &str = "breaker::otel";

/// How a call ended, as the schema of `breaker::otel` names it (`breaker.outcome`).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ended {
    /// `Ok` in time.
    Success,
    /// An error (or a classifier's failure) that counts against the dependency, or a panic.
    Failure,
    /// Finished, after `slow_call`.
    Slow,
    /// Its `timeout` passed.
    Timeout,
    /// Refused by the breaker: open, bulkhead full, throttled.
    Rejected,
    /// Dropped before it finished, sooner than `slow_call`.
    Cancelled,
    /// Dropped before it finished, after `slow_call`.
    Abandoned,
    /// An error judged the caller's fault.
    Neutral,
}

impl Ended {
    /// Its name in the schema.
    pub fn as_str(self) -> &'static str {
        match self {
            Ended::Success => "success",
            Ended::Failure => "failure",
            Ended::Slow => "slow",
            Ended::Timeout => "timeout",
            Ended::Rejected => "rejected",
            Ended::Cancelled => "cancelled",
            Ended::Abandoned => "abandoned",
            Ended::Neutral => "neutral",
        }
    }

    /// Whether the schema marks it as an error (`error.type`, `otel.status_code = "ERROR"`).
    pub fn is_error(self) -> bool {
        matches!(
            self,
            Ended::Failure | Ended::Slow | Ended::Timeout | Ended::Rejected | Ended::Abandoned
        )
    }
}

/// One timed call's end, as the hook of [`time_calls`] receives it (a refusal is not timed).
#[doc(hidden)]
#[derive(Debug)]
pub struct CallEnd<'a> {
    /// The breaker's identity ([`Handle::id`](crate::Handle::id)).
    pub id: u64,
    /// Its name (`{family}[{key}]` for a key).
    pub name: &'a Name,
    /// The keyed breaker it is a key of.
    pub family: Option<&'a str>,
    /// How the call ended.
    pub outcome: Ended,
    /// The error's kind when `outcome` is an error: the error's type, or the outcome's name.
    pub error_type: Option<&'static str>,
    /// From admission to the end.
    pub duration: Duration,
}

static HOOK: OnceLock<fn(&CallEnd<'_>)> = OnceLock::new();

/// From now on every call's end goes to `hook` (the first hook set stays; `false` if one
/// was already). Not part of the API: for `breaker::otel::install`.
#[doc(hidden)]
pub fn time_calls(hook: fn(&CallEnd<'_>)) -> bool {
    HOOK.set(hook).is_ok()
}

/// What a call future keeps for its span and its timing: 16 bytes, nothing allocated unless
/// a subscriber wants the span.
pub(crate) struct Watch {
    /// Released by hand ([`release`](Self::release), from the call's `Drop`): the drop glue
    /// of a `Box<Span>` would be a call in every call future's drop, where one compare does.
    span: ManuallyDrop<Option<Box<Span>>>,
    /// The breaker's clock at admission, at least 1 ([`AT`]); 0: the call is not timed. Its
    /// top bits say whether its slowness was judged when its answer began ([`SLOW`],
    /// [`NOT_SLOW`]), as the breaker judged it.
    started: u64,
}

/// [`Watch::started`]: judged slow when its answer began.
const SLOW: u64 = 1 << 63;
/// [`Watch::started`]: judged not slow when its answer began.
const NOT_SLOW: u64 = 1 << 62;
/// [`Watch::started`]: the admission's time.
const AT: u64 = NOT_SLOW - 1;

impl Watch {
    pub(crate) const NONE: Watch = Watch {
        span: ManuallyDrop::new(None),
        started: 0,
    };

    /// An attempt of a retried call, in its own span (already made, a child of the call's).
    pub(crate) fn attempt(span: Option<Box<Span>>) -> Watch {
        Watch {
            span: ManuallyDrop::new(span),
            started: 0,
        }
    }

    /// Admitted: the call's span if a subscriber wants it (an attempt's was made by its
    /// retried call), and its start if the span or the hook wants its time. One check of
    /// each when neither does; the rest out of line.
    #[inline(always)]
    pub(crate) fn admitted(&mut self, shared: &Shared) {
        if self.span.is_some() || tracing::level_enabled!(Level::INFO) || HOOK.get().is_some() {
            self.begin(shared);
        }
    }

    #[cold]
    #[inline(never)]
    fn begin(&mut self, shared: &Shared) {
        if self.span.is_none() {
            *self.span = call_span(shared);
        }
        if self.span.is_some() || HOOK.get().is_some() {
            self.started = (shared.clock.now() & AT).max(1);
        }
    }

    /// The call's answer began (a stream's headers): its slowness is judged now, as the
    /// breaker judges it (`CallFuture::answer_began`).
    #[inline(always)]
    pub(crate) fn answer_began(&mut self, shared: &Shared) {
        if self.started != 0 && self.started & (SLOW | NOT_SLOW) == 0 {
            self.judge_slow_now(shared);
        }
    }

    #[cold]
    #[inline(never)]
    fn judge_slow_now(&mut self, shared: &Shared) {
        let elapsed = shared.clock.now().saturating_sub(self.started & AT);
        let slow = shared.core.live.slow_call().is_some_and(|s| elapsed >= s);
        self.started |= if slow { SLOW } else { NOT_SLOW };
    }

    /// The span entered while the user's future is polled (its spans are children).
    #[inline(always)]
    pub(crate) fn enter(&self) -> Option<tracing::span::Entered<'_>> {
        self.span.as_deref().map(Span::enter)
    }

    /// A call that ended, `error_type` naming its error if it is one. `Success` becomes
    /// `Slow`, `Cancelled` `Abandoned`, past the breaker's `slow_call`.
    #[inline(always)]
    pub(crate) fn end(
        &mut self,
        shared: &Shared,
        outcome: Ended,
        error_type: Option<&'static str>,
    ) {
        if self.started != 0 {
            self.end_slow(shared, outcome, error_type);
        }
    }

    #[cold]
    #[inline(never)]
    fn end_slow(&mut self, shared: &Shared, outcome: Ended, error_type: Option<&'static str>) {
        let elapsed = shared.clock.now().saturating_sub(self.started & AT);
        let slow = match self.started & (SLOW | NOT_SLOW) {
            SLOW => true,
            NOT_SLOW => false,
            _ => shared.core.live.slow_call().is_some_and(|s| elapsed >= s),
        };
        self.started = 0;
        let (outcome, error_type) = match outcome {
            Ended::Success if slow => (Ended::Slow, Some(Ended::Slow.as_str())),
            Ended::Cancelled if slow => (Ended::Abandoned, Some(Ended::Abandoned.as_str())),
            other => (other, error_type),
        };
        let error_type = outcome
            .is_error()
            .then(|| error_type.unwrap_or(outcome.as_str()));
        if let Some(span) = self.take_span() {
            record(&span, outcome, error_type);
        }
        if let Some(hook) = HOOK.get() {
            hook(&CallEnd {
                id: shared.id,
                name: &shared.core.name,
                family: shared.family.as_ref().map(|f| f.name.as_str()),
                outcome,
                error_type,
                duration: Duration::from_nanos(elapsed),
            });
        }
    }

    /// The span, ended.
    fn take_span(&mut self) -> Option<Box<Span>> {
        self.span.take()
    }

    /// As the call future goes: a span no end took (a call never polled, or whose future
    /// panicked: then it records the failure) is closed. Called by the call's own `Drop`, whose one compare of the stage
    /// this joins, so the call future's drop glue stays inlined.
    #[inline(always)]
    pub(crate) fn release(&mut self) {
        if self.span.is_some() {
            drop_span(&mut self.span, self.started);
        }
    }

    /// A call the breaker refused (not timed: it did not reach the dependency), in its span
    /// if a subscriber wants it.
    #[inline(always)]
    pub(crate) fn refused(&mut self, shared: &Shared, refusal: &BreakerError) {
        if self.span.is_some() || tracing::level_enabled!(Level::INFO) {
            self.refused_span(shared, refusal);
        }
    }

    #[cold]
    #[inline(never)]
    fn refused_span(&mut self, shared: &Shared, refusal: &BreakerError) {
        if let Some(span) = self.take_span().or_else(|| call_span(shared)) {
            record(&span, Ended::Rejected, Some(refusal_type(refusal)));
        }
    }
}

/// A call's span, if a subscriber wants it.
fn call_span(shared: &Shared) -> Option<Box<Span>> {
    let span = tracing::info_span!(
        target: TARGET,
        "breaker.call",
        otel.kind = "internal",
        breaker.name = %shared.core.name,
        breaker.outcome = Empty,
        otel.status_code = Empty,
        "error.type" = Empty,
    );
    (!span.is_disabled()).then(|| Box::new(span))
}

/// The span, closed; a call admitted and never ended (still timed: `started`) is one whose
/// user's future panicked (every other end records its outcome), so it says so.
#[cold]
#[inline(never)]
fn drop_span(span: &mut Option<Box<Span>>, started: u64) {
    if let Some(span) = span.take()
        && started != 0
    {
        record(&span, Ended::Failure, Some(PANIC));
        PANICKED.set(true);
    }
}

/// The `error.type` of a call whose future panicked.
const PANIC: &str = "panic";

thread_local! {
    /// A call's span just recorded a panic: the retried or hedged call it is an attempt of,
    /// dropped next on this thread as the panic is dealt with (its attempt future goes
    /// first), ends as a panic too. Cleared by each such call as it begins, so a plain
    /// call's panic before it says nothing of it.
    static PANICKED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The outcome on a span, and an error's status and type.
fn record(span: &Span, outcome: Ended, error_type: Option<&'static str>) {
    span.record("breaker.outcome", outcome.as_str());
    if outcome.is_error() {
        span.record("otel.status_code", "ERROR");
        span.record("error.type", error_type.unwrap_or(outcome.as_str()));
    }
}

/// A refusal's `error.type`.
pub(crate) fn refusal_type(refusal: &BreakerError) -> &'static str {
    match refusal {
        BreakerError::Open { .. } => "breaker.open",
        BreakerError::Timeout { .. } => "timeout",
        BreakerError::Full { .. } => "breaker.full",
        BreakerError::Throttled { .. } => "breaker.throttled",
    }
}

/// How a judged call ended, by its verdict (`None`: judged inline, every `Err` a failure);
/// `E`'s type names an error that failed, `_OTHER` an `Ok` a classifier failed.
pub(crate) fn judged<E>(is_err: bool, verdict: Option<Verdict>) -> (Ended, Option<&'static str>) {
    match (verdict, is_err) {
        (Some(Verdict::Neutral), _) => (Ended::Neutral, None),
        (Some(Verdict::Failure | Verdict::OpenFor(_)), true) | (None, true) => {
            (Ended::Failure, Some(type_name::<E>()))
        }
        (Some(Verdict::Failure | Verdict::OpenFor(_)), false) => (Ended::Failure, Some("_OTHER")),
        (Some(Verdict::Success), _) | (None, false) => (Ended::Success, None),
    }
}

/// A judge that also writes down its verdict, for the span and the timing of the call.
pub(crate) struct Witness<'s, J> {
    pub(crate) judge: J,
    pub(crate) seen: &'s std::cell::Cell<Option<Verdict>>,
}

impl<T, E, J: crate::verdict::Judge<T, E>> crate::verdict::Judge<T, E> for Witness<'_, J> {
    const OK_IS_SUCCESS: bool = J::OK_IS_SUCCESS;

    #[inline]
    fn judge(self, result: &Result<T, E>) -> Verdict {
        let v = self.judge.judge(result);
        self.seen.set(Some(v));
        v
    }
}

/// The span of a call made of attempts (retried or hedged), whose attempts are its
/// children (`None`: no subscriber wants it); the outcome of the call so far (its last
/// attempt's, or the answer a race returned) and the attempts made, recorded on it when the
/// call ends (this is dropped). Dropped as one of its attempts panicked, it ends as a panic;
/// dropped without an outcome otherwise, it was cancelled.
pub(crate) struct Retried(Option<Span>, Option<(Ended, Option<&'static str>)>, u32);

impl Drop for Retried {
    fn drop(&mut self) {
        let Some(span) = &self.0 else {
            return;
        };
        let (outcome, error_type) = match self.1 {
            _ if PANICKED.replace(false) => (Ended::Failure, Some(PANIC)),
            Some(ended) => ended,
            None => (Ended::Cancelled, None),
        };
        span.record("breaker.attempts", self.2);
        record(span, outcome, error_type);
    }
}

impl Retried {
    #[inline(always)]
    pub(crate) fn begin(shared: &Shared) -> Retried {
        if !tracing::level_enabled!(Level::INFO) {
            return Retried(None, None, 0);
        }
        let span = tracing::info_span!(
            target: TARGET,
            "breaker.call",
            otel.kind = "internal",
            breaker.name = %shared.core.name,
            breaker.outcome = Empty,
            breaker.attempts = Empty,
            otel.status_code = Empty,
            "error.type" = Empty,
        );
        if span.is_disabled() {
            return Retried(None, None, 0);
        }
        PANICKED.set(false);
        Retried(Some(span), None, 0)
    }

    /// Attempt `n`'s span (1 the first) of a retried call, a child of the call's.
    pub(crate) fn attempt(&mut self, shared: &Shared, n: u32) -> Option<Box<Span>> {
        self.2 = n;
        let kind = if n == 1 { "first" } else { "retry" };
        self.child(shared, kind, n)
    }

    /// The next attempt's span of a hedged call, a child of the call's, numbered in the
    /// order they are made: `first` unless `hedge` (a keyed call whose first key refused the
    /// first attempt makes another, on the next key), `hedge` for a hedge.
    pub(crate) fn hedge(&mut self, shared: &Shared, hedge: bool) -> Option<Box<Span>> {
        self.2 += 1;
        self.child(shared, if hedge { "hedge" } else { "first" }, self.2)
    }

    fn child(&self, shared: &Shared, kind: &'static str, n: u32) -> Option<Box<Span>> {
        let parent = self.0.as_ref()?;
        let span = tracing::info_span!(
            target: TARGET,
            parent: parent,
            "breaker.attempt",
            otel.kind = "internal",
            breaker.name = %shared.core.name,
            breaker.attempt.kind = kind,
            breaker.attempt.number = n,
            breaker.outcome = Empty,
            otel.status_code = Empty,
            "error.type" = Empty,
        );
        (!span.is_disabled()).then(|| Box::new(span))
    }

    /// The call's outcome so far (its last attempt's), after `n` attempts.
    pub(crate) fn record<T, E>(
        &mut self,
        result: &Result<T, crate::CallError<E>>,
        verdict: Option<Verdict>,
        n: u32,
    ) {
        if self.0.is_none() {
            return;
        }
        let (outcome, error_type) = match result {
            Err(crate::CallError::Breaker(e)) if e.is_timeout() => (Ended::Timeout, None),
            Err(crate::CallError::Breaker(e)) => (Ended::Rejected, Some(refusal_type(e))),
            Ok(_) => judged::<E>(false, verdict),
            Err(crate::CallError::Inner(_)) => judged::<E>(true, verdict),
        };
        self.1 = Some((outcome, error_type));
        self.2 = self.2.max(n);
    }
}

/// The span of one run of the breaker's own probe (`Config::probe`): a root
/// `breaker.attempt` of kind `probe`, since no caller's call holds it (the probe runs in a
/// task of its own, whatever span was current at the opening that started it). It records
/// the probe's outcome as it goes: `cancelled` unless [`ended`](Self::ended) said otherwise
/// (the task stopped mid-probe). A probe's failure is its verdict, not an error of a type:
/// `error.type` `_OTHER`, or `panic`.
pub(crate) struct Probed {
    pub(crate) span: Span,
    outcome: crate::core::Outcome,
    panicked: bool,
}

impl Probed {
    /// The span, if a subscriber wants it (`None`: the breaker is gone).
    pub(crate) fn begin(shared: Option<&Shared>) -> Probed {
        let span = match shared {
            Some(shared) => tracing::info_span!(
                target: TARGET,
                parent: None,
                "breaker.attempt",
                otel.kind = "internal",
                breaker.name = %shared.core.name,
                breaker.attempt.kind = "probe",
                breaker.outcome = Empty,
                otel.status_code = Empty,
                "error.type" = Empty,
            ),
            None => Span::none(),
        };
        Probed {
            span,
            outcome: crate::core::Outcome::Cancelled,
            panicked: false,
        }
    }

    /// The probe ended with `outcome`; `panicked`: a failure that was a panic.
    pub(crate) fn ended(&mut self, outcome: crate::core::Outcome, panicked: bool) {
        (self.outcome, self.panicked) = (outcome, panicked);
    }
}

impl Drop for Probed {
    fn drop(&mut self) {
        use crate::core::Outcome;
        let (ended, error_type) = match self.outcome {
            Outcome::Success => (Ended::Success, None),
            Outcome::Neutral => (Ended::Neutral, None),
            Outcome::Timeout => (Ended::Timeout, None),
            Outcome::Slow => (Ended::Slow, None),
            Outcome::Cancelled => (Ended::Cancelled, None),
            Outcome::Failure if self.panicked => (Ended::Failure, Some(PANIC)),
            Outcome::Failure | Outcome::OpenFor(_) => (Ended::Failure, Some("_OTHER")),
        };
        record(&self.span, ended, error_type);
    }
}
