//! What feature `otel` adds to a call (the facade's `breaker::otel`): a `tracing` span per
//! call (`breaker.call`), per attempt of a retried or hedged call and per run of the
//! breaker's own probe (`breaker.attempt`), made only when a subscriber wants them, and each
//! call's duration handed to the hook that `breaker::otel::install` sets ([`time_calls`]).
//!
//! Without the feature none of this is compiled: a call future is what it was, to the
//! instruction. With it, a call that neither a subscriber nor the hook wants pays nothing on
//! a refusal and two instructions on a closed call (`crate::gate`: `tracing` tells a callsite
//! of ours of every change of interest, and each breaker keeps a copy of the answer in the
//! flags byte its calls read anyway, so no level filter or hook is read per call) and nothing
//! after: it runs in the call future's unwatched stages, which have no span to enter, no
//! start to read and nothing to record at its end or its drop. A watched call runs in stages
//! of its own, out of line, its start in the call future (8 bytes) and its span, if a
//! subscriber wants one, in the box its timer lives in. A call whose user's future panics is
//! a failure in the statistics (so in `breaker.calls`) and on its span (`error.type =
//! "panic"`, set as the call future goes); it is not timed.
//! The spans' target is [`TARGET`] at INFO, so a filter can drop them (`breaker::otel=off`)
//! and keep the transitions' log lines (target `breaker`).

use std::{any::type_name, sync::OnceLock, time::Duration};

use tracing::{field::Empty, Level, Span};

use crate::{clock::Clock, shared::Shared, BreakerError, Name, Verdict};

pub use crate::gate::TARGET;

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
    let set = HOOK.set(hook).is_ok();
    crate::gate::timed();
    set
}

/// What a watched call keeps for its timing, in its call future (8 bytes; a call nobody
/// watches never reads it): its span, if a subscriber wants one, is in the call's box
/// (`future.rs`), made only then.
#[derive(Clone, Copy)]
pub(crate) struct Watch {
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
    /// Not timed.
    pub(crate) const NONE: Watch = Watch { started: 0 };

    /// Admitted: the call's span if a subscriber wants it (an attempt's, `span`, was made by
    /// its retried call), and its start, if the span or the hook wants its time. `None`:
    /// nobody watches the call after all.
    #[cold]
    #[inline(never)]
    pub(crate) fn begin(shared: &Shared, span: Option<Span>) -> Option<(Watch, Option<Span>)> {
        let span = span.or_else(|| call_span(shared));
        if span.is_none() && HOOK.get().is_none() {
            return None;
        }
        let started = (shared.clock.now() & AT).max(1);
        Some((Watch { started }, span))
    }

    /// The call's answer began (a stream's headers): its slowness is judged now, as the
    /// breaker judges it (`CallFuture::answer_began`).
    pub(crate) fn answer_began(&mut self, shared: &Shared) {
        if self.started != 0 && self.started & (SLOW | NOT_SLOW) == 0 {
            let elapsed = shared.clock.now().saturating_sub(self.started & AT);
            let slow = shared.core.live.slow_call().is_some_and(|s| elapsed >= s);
            self.started |= if slow { SLOW } else { NOT_SLOW };
        }
    }

    /// A call that ended, on its span if it has one; `error_type` names its error if it is
    /// one. `Success` becomes `Slow`, `Cancelled` `Abandoned`, past the breaker's
    /// `slow_call`.
    #[inline(never)]
    pub(crate) fn end(
        &mut self,
        shared: &Shared,
        span: Option<Span>,
        outcome: Ended,
        error_type: Option<&'static str>,
    ) {
        if self.started == 0 {
            return;
        }
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
        if let Some(span) = span {
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
}

/// The span of a watched call whose user's future panicked: it says so. (The call is a
/// failure in the statistics; it is not timed.)
#[cold]
#[inline(never)]
pub(crate) fn unwound(span: Option<Span>) {
    if let Some(span) = span {
        record(&span, Ended::Failure, Some(PANIC));
        PANICKED.set(true);
    }
}

/// A call refused (not timed: it did not reach the dependency), in its span: an attempt's
/// (`span`), else one made now if a subscriber wants it.
#[cold]
#[inline(never)]
pub(crate) fn refused(shared: &Shared, span: Option<Span>, refusal: &BreakerError) {
    if let Some(span) = span.or_else(|| call_span(shared)) {
        record(&span, Ended::Rejected, Some(refusal_type(refusal)));
    }
}

/// A call's span, if a subscriber wants it.
fn call_span(shared: &Shared) -> Option<Span> {
    let span = tracing::info_span!(
        target: TARGET,
        "breaker.call",
        otel.kind = "internal",
        breaker.name = %shared.core.name,
        breaker.outcome = Empty,
        otel.status_code = Empty,
        "error.type" = Empty,
    );
    (!span.is_disabled()).then_some(span)
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
    pub(crate) fn attempt(&mut self, shared: &Shared, n: u32) -> Option<Span> {
        self.2 = n;
        let kind = if n == 1 { "first" } else { "retry" };
        self.child(shared, kind, n)
    }

    /// The next attempt's span of a hedged call, a child of the call's, numbered in the
    /// order they are made: `first` unless `hedge` (a keyed call whose first key refused the
    /// first attempt makes another, on the next key), `hedge` for a hedge.
    pub(crate) fn hedge(&mut self, shared: &Shared, hedge: bool) -> Option<Span> {
        self.2 += 1;
        self.child(shared, if hedge { "hedge" } else { "first" }, self.2)
    }

    fn child(&self, shared: &Shared, kind: &'static str, n: u32) -> Option<Span> {
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
        (!span.is_disabled()).then_some(span)
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

#[cfg(all(test, not(breaker_loom)))]
mod tests {
    use std::{
        future::Future,
        sync::{
            atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst},
            Arc,
        },
        task::{Context, Poll, Waker},
    };

    use tracing::{span, subscriber::Interest, Event, Metadata, Subscriber};

    use crate::{Breaker, Config};

    /// Counts the `breaker.call` spans made under it.
    #[derive(Clone, Default)]
    struct Calls(Arc<AtomicUsize>, Arc<AtomicU64>);

    impl Subscriber for Calls {
        fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
            if meta.target() == super::TARGET {
                Interest::always()
            } else {
                Interest::never()
            }
        }
        fn enabled(&self, meta: &Metadata<'_>) -> bool {
            meta.target() == super::TARGET
        }
        fn new_span(&self, span: &span::Attributes<'_>) -> span::Id {
            if span.metadata().name() == "breaker.call" {
                self.0.fetch_add(1, SeqCst);
            }
            span::Id::from_u64(self.1.fetch_add(1, SeqCst) + 1)
        }
        fn record(&self, _: &span::Id, _: &span::Record<'_>) {}
        fn record_follows_from(&self, _: &span::Id, _: &span::Id) {}
        fn event(&self, _: &Event<'_>) {}
        fn enter(&self, _: &span::Id) {}
        fn exit(&self, _: &span::Id) {}
    }

    /// The tests that set a subscriber, one at a time: under `cargo test` they share a
    /// process, and one's subscriber would watch the other's breakers.
    static ONE_SUBSCRIBER: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn ready<F: Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(out) => out,
            Poll::Pending => panic!("not ready at once"),
        }
    }

    /// The gate follows `tracing`: calls made while nobody wanted spans leave it quiet, and
    /// a subscriber set afterwards gets the spans of the calls made under it, admitted and
    /// refused, a keyed breaker's key made before included (each breaker's copy of the gate
    /// was set when `tracing` told the gate's callsite; a copy made once would stay quiet),
    /// and once it is gone (and `tracing` has asked again) the copies are quiet again.
    #[test]
    fn a_subscriber_set_after_calls_gets_their_spans() {
        let _one = ONE_SUBSCRIBER.lock().unwrap_or_else(|e| e.into_inner());
        let b = Breaker::new("traced::gate", Config::default());
        let keyed = crate::KeyedBreaker::<u32>::new("traced::gate_keyed", Config::default());
        assert_eq!(ready(b.call(async { Ok::<_, ()>(1) })), Ok(1));
        assert_eq!(ready(keyed.call(&7, async { Ok::<_, ()>(1) })), Ok(1));
        let key = keyed.breaker(&7);
        assert!(!b.shared.core.watched() && !key.shared.core.watched());
        let calls = Calls::default();
        tracing::subscriber::with_default(calls.clone(), || {
            assert!(b.shared.core.watched() && key.shared.core.watched());
            // A new configuration is the policy's flags, not the gate's: still watched.
            b.reconfigure(Config::default().timeout(std::time::Duration::from_secs(1)))
                .unwrap();
            keyed.reconfigure(Config::default().threshold(3)).unwrap();
            assert!(b.shared.core.watched() && key.shared.core.watched());
            assert_eq!(ready(b.call(async { Ok::<_, ()>(2) })), Ok(2));
            assert_eq!(ready(keyed.call(&7, async { Ok::<_, ()>(2) })), Ok(2));
            b.handle().force_open();
            assert!(ready(b.call(async { Ok::<_, ()>(3) })).is_err());
        });
        assert_eq!(calls.0.load(SeqCst), 3);
        // `tracing` asks its callsites again when told to (a scoped subscriber's end alone
        // does not): nobody wants the spans now, so no breaker is watched.
        tracing::callsite::rebuild_interest_cache();
        assert!(!b.shared.core.watched() && !key.shared.core.watched());
    }

    /// At the size users run: a subscriber set over 100 000 keys tells every key, in one
    /// walk (6 ms here, debug or release; the bound is 80 times that, so only a walk that
    /// grew worse than linear fails it), and its end (once `tracing` asks again) untells
    /// them.
    #[test]
    fn a_subscriber_set_over_100_000_keys_reaches_every_key() {
        const KEYS: u32 = 100_000;
        let _one = ONE_SUBSCRIBER.lock().unwrap_or_else(|e| e.into_inner());
        let keyed = crate::KeyedBreaker::<u32>::new(
            "traced::at_scale",
            Config::default().max_keys(2 * KEYS as usize),
        );
        for k in 0..KEYS {
            assert_eq!(ready(keyed.call(&k, async { Ok::<_, ()>(()) })), Ok(()));
        }
        let breakers: Vec<_> = (0..KEYS).map(|k| keyed.breaker(&k)).collect();
        assert!(breakers.iter().all(|b| !b.shared.core.watched()));
        let set = std::time::Instant::now();
        tracing::subscriber::with_default(Calls::default(), || {
            let walked = set.elapsed();
            assert!(breakers.iter().all(|b| b.shared.core.watched()));
            assert!(walked < std::time::Duration::from_millis(500), "{walked:?}");
        });
        tracing::callsite::rebuild_interest_cache();
        assert!(breakers.iter().all(|b| !b.shared.core.watched()));
    }

    /// Subscribers set and dropped while other threads make, call and drop breakers and
    /// keys: no walk waits on a thread that waits on `tracing` (each walk runs inside it),
    /// nothing is lost (every breaker made ends with its last clone, a walk's hold included),
    /// and once nobody wants the spans every breaker still alive is unwatched.
    #[test]
    fn walks_race_breakers_made_and_dropped_on_other_threads() {
        let _one = ONE_SUBSCRIBER.lock().unwrap_or_else(|e| e.into_inner());
        let stop = std::sync::atomic::AtomicBool::new(false);
        let made = AtomicUsize::new(0);
        let kept: Vec<Breaker> = std::thread::scope(|s| {
            let makers: Vec<_> = (0..2)
                .map(|t| {
                    let (stop, made) = (&stop, &made);
                    s.spawn(move || {
                        let keyed = crate::KeyedBreaker::<u32>::new(
                            format!("traced::race_keyed{t}"),
                            Config::default().max_keys(64),
                        );
                        let mut kept = Vec::new();
                        let mut i = 0u32;
                        while !stop.load(SeqCst) {
                            let b = Breaker::new(format!("traced::race{t}_{i}"), Config::default());
                            assert_eq!(ready(b.call(async { Ok::<_, ()>(i) })), Ok(i));
                            assert_eq!(ready(keyed.call(&i, async { Ok::<_, ()>(i) })), Ok(i));
                            if i.is_multiple_of(64) {
                                kept.push(b); // some live on, the rest are dropped at once
                            }
                            i += 1;
                            made.fetch_add(1, SeqCst);
                        }
                        kept
                    })
                })
                .collect();
            // At least 200 changes, while at least 2 000 breakers are made and dropped.
            let mut changes = 0;
            while changes < 200 || made.load(SeqCst) < 2_000 {
                changes += 1;
                tracing::subscriber::with_default(Calls::default(), || {
                    let b = Breaker::new("traced::race_main", Config::default());
                    assert!(b.shared.core.watched());
                });
                tracing::callsite::rebuild_interest_cache();
            }
            stop.store(true, SeqCst);
            makers.into_iter().flat_map(|m| m.join().unwrap()).collect()
        });
        tracing::callsite::rebuild_interest_cache();
        assert!(!kept.is_empty());
        assert!(kept.iter().all(|b| !b.shared.core.watched()));
    }
}
