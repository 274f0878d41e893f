//! The public breaker: one [`Core`] with its clock, and the call wrappers around it.

use std::{
    future::Future,
    panic::{catch_unwind, resume_unwind, AssertUnwindSafe},
    sync::Arc,
    time::Duration,
};

use crate::{
    clock::TokioClock,
    core::{Core, Engine, LocalTicket, Outcome, Permit, Ticket},
    future::{CallFuture, Host},
    registry::{self, Snapshot},
    verdict::{Classify, Judge},
    BreakerError, CallError, Config, ConfigError, Name, State, Stats, Verdict,
};

/// A circuit breaker. Cheap to clone (clones share one breaker); listed in
/// [`registry()`](crate::registry) from its creation.
///
/// ```
/// use breaker_runtime::{Breaker, CallError, Config, State};
///
/// let payments = Breaker::new("docs::payments", Config::default().threshold(2));
/// for _ in 0..2 {
///     let r = payments.call_sync(|| Err::<(), _>("gateway 502"));
///     assert!(matches!(r, Err(CallError::Inner("gateway 502"))));
/// }
/// assert_eq!(payments.state(), State::Open);
/// // Open: the dependency is not called.
/// let r = payments.call_sync(|| -> Result<(), &str> { unreachable!() });
/// assert!(r.unwrap_err().is_open());
/// ```
#[derive(Clone)]
pub struct Breaker {
    pub(crate) shared: Arc<Shared>,
}

/// A breaker's parts, shared by its clones and handles. Nominally public (its module is
/// private) so the call future can name it.
pub struct Shared {
    pub(crate) core: Core,
    pub(crate) clock: TokioClock,
    pub(crate) config: Config,
    /// Its entry in the registry, removed when the last clone and handle are gone.
    pub(crate) listed: std::sync::atomic::AtomicU64,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.core.fmt(f)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let id = *self.listed.get_mut();
        if id != 0 {
            registry::registry().unlist(id);
        }
    }
}

impl Engine for &Shared {
    type Clock = TokioClock;
    #[inline(always)]
    fn core(&self) -> &Core {
        &self.core
    }
    #[inline(always)]
    fn clock(&self) -> &TokioClock {
        &self.clock
    }
}

impl Host for &Shared {
    #[inline(always)]
    fn shared(&self) -> &Shared {
        self
    }
}

impl Engine for Breaker {
    type Clock = TokioClock;
    #[inline(always)]
    fn core(&self) -> &Core {
        &self.shared.core
    }
    #[inline(always)]
    fn clock(&self) -> &TokioClock {
        &self.shared.clock
    }
}

impl Host for Breaker {
    #[inline(always)]
    fn shared(&self) -> &Shared {
        &self.shared
    }
}

/// A panic caught in user code, on its way back to the caller.
type Panic = Box<dyn std::any::Any + Send + 'static>;

impl Breaker {
    /// Creates a breaker and lists it in the registry.
    ///
    /// # Panics
    ///
    /// If `config` is invalid, with the [`ConfigError`] message naming the field. Use
    /// [`try_new`](Self::try_new) for configuration that comes from outside the program.
    #[track_caller]
    pub fn new(name: impl AsRef<str>, config: Config) -> Breaker {
        match Breaker::try_new(name, config) {
            Ok(b) => b,
            Err(e) => panic!("{e}"),
        }
    }

    /// Creates a breaker and lists it in the registry, or says which field is invalid.
    ///
    /// It stays listed while it lives: when its last clone and [`Handle`] are dropped it
    /// leaves the registry and its memory, name included, is freed.
    pub fn try_new(name: impl AsRef<str>, config: Config) -> Result<Breaker, ConfigError> {
        let breaker = Breaker::unlisted(Name::from(name.as_ref()), config)?;
        registry::registry().list(&breaker);
        Ok(breaker)
    }

    pub(crate) fn unlisted(name: Name, config: Config) -> Result<Breaker, ConfigError> {
        let policy = config.validate()?;
        let core = Core::new(name, policy, config.on_state_change.clone());
        Ok(Breaker {
            shared: Arc::new(Shared {
                core,
                clock: TokioClock::new(),
                config,
                listed: std::sync::atomic::AtomicU64::new(0),
            }),
        })
    }

    /// The breaker's name.
    pub fn name(&self) -> &str {
        &self.shared.core.name
    }

    /// The breaker's name, shared (a reference-count increment, no allocation).
    pub fn shared_name(&self) -> Name {
        self.shared.core.name.clone()
    }

    /// The current state. Reading it after the cool-off moves an open breaker to half-open.
    pub fn state(&self) -> State {
        self.shared.core.state(&self.shared.clock)
    }

    /// Counts since creation or the last reset.
    pub fn stats(&self) -> Stats {
        self.shared.core.counters.read()
    }

    /// A handle for manual control and inspection.
    pub fn handle(&self) -> Handle {
        Handle {
            shared: self.shared.clone(),
        }
    }

    /// How long until a call may be admitted (see [`BreakerError::retry_in`]).
    pub fn retry_in(&self) -> Option<Duration> {
        self.shared.core.retry_in(&self.shared.clock)
    }

    /// Runs one async call through the breaker; every `Err` counts as a failure.
    ///
    /// The future is polled only if the call is admitted, which happens on the first poll. If
    /// it is dropped before it finishes, the call counts for nothing and gives its slots back.
    /// A panic in it counts as a failure and unwinds to the caller unchanged.
    pub fn call<F, T, E>(&self, call: F) -> CallFuture<'_, F, fn(&E) -> bool>
    where
        F: Future<Output = Result<T, E>>,
    {
        CallFuture::new(&*self.shared, every_error::<E>, call)
    }

    /// Like [`call`](Self::call), but the future owns the breaker, so it is `'static` when
    /// `call` is: for `tokio::spawn` and tower services. The caller clones explicitly, as
    /// with tokio's `acquire_owned`: `tokio::spawn(breaker.clone().call_owned(fut))`.
    /// [`call`](Self::call) keeps borrowing, with no reference-count traffic per call.
    pub fn call_owned<F, T, E>(self, call: F) -> CallFuture<'static, F, fn(&E) -> bool, Breaker>
    where
        F: Future<Output = Result<T, E>>,
    {
        CallFuture::new(self, every_error::<E>, call)
    }

    /// Like [`call`](Self::call), with `classify` judging every finished call, `Ok` values
    /// included (see [`Verdict`]). What the caller receives does not change: an `Ok` judged
    /// a failure is still returned as it is. A panic in `classify` counts as a failure and
    /// unwinds into the caller, as one in `is_failure` does.
    pub fn call_classified<F, T, E, C>(
        &self,
        classify: C,
        call: F,
    ) -> CallFuture<'_, F, Classify<C>>
    where
        F: Future<Output = Result<T, E>>,
        C: FnOnce(&Result<T, E>) -> Verdict,
    {
        CallFuture::new(&*self.shared, Classify(classify), call)
    }

    /// [`call_owned`](Self::call_owned) with a classifier (see
    /// [`call_classified`](Self::call_classified)).
    pub fn call_owned_classified<F, T, E, C>(
        self,
        classify: C,
        call: F,
    ) -> CallFuture<'static, F, Classify<C>, Breaker>
    where
        F: Future<Output = Result<T, E>>,
        C: FnOnce(&Result<T, E>) -> Verdict,
    {
        CallFuture::new(self, Classify(classify), call)
    }

    /// Like [`call_sync`](Self::call_sync), with `classify` judging every finished call.
    #[inline]
    pub fn call_sync_classified<T, E>(
        &self,
        classify: impl FnOnce(&Result<T, E>) -> Verdict,
        call: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, CallError<E>> {
        self.call_sync_judged(Classify(classify), call)
    }

    /// Like [`call`](Self::call), with `is_failure` deciding which errors count against the
    /// dependency; an error it returns `false` for is neutral (counts for nothing).
    pub fn call_with<F, T, E, P>(&self, is_failure: P, call: F) -> CallFuture<'_, F, P>
    where
        F: Future<Output = Result<T, E>>,
        P: FnOnce(&E) -> bool,
    {
        CallFuture::new(&*self.shared, is_failure, call)
    }

    /// Runs one blocking call through the breaker; every `Err` counts as a failure. Works
    /// outside any async runtime. A configured `timeout` is not enforced here (a blocking
    /// call cannot be cut short); `slow_call` still measures it.
    #[inline]
    pub fn call_sync<T, E>(&self, call: impl FnOnce() -> Result<T, E>) -> Result<T, CallError<E>> {
        self.call_sync_with(every_error::<E>, call)
    }

    /// Like [`call_sync`](Self::call_sync), with `is_failure` deciding which errors count.
    #[inline]
    pub fn call_sync_with<T, E>(
        &self,
        is_failure: impl Judge<T, E>,
        call: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, CallError<E>> {
        self.call_sync_judged(is_failure, call)
    }

    #[inline(always)]
    fn call_sync_judged<T, E>(
        &self,
        is_failure: impl Judge<T, E>,
        call: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, CallError<E>> {
        let shared = &*self.shared;
        if let Some(ticket) = shared.core.enter_closed() {
            return shared.run_fast(ticket, is_failure, call);
        }
        if let Some(refused) = shared.core.refuse(&shared.clock) {
            return Err(CallError::Breaker(refused));
        }
        shared.call_sync_slow(is_failure, call)
    }

    /// This breaker as the registry reports it.
    pub fn snapshot(&self) -> Snapshot {
        self.handle().snapshot()
    }
}

impl Shared {
    /// The permit of a fast-path call whose outcome is no success.
    #[cold]
    pub(crate) fn permit(&self, ticket: Ticket) -> Permit<&Shared> {
        Permit::from_ticket_in(self, ticket)
    }

    /// A blocking call admitted on the fast path. A success is settled inline; anything
    /// else out of line, so the inlined part stays small.
    #[inline(always)]
    fn run_fast<T, E, J: Judge<T, E>>(
        &self,
        ticket: LocalTicket,
        is_failure: J,
        call: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, CallError<E>> {
        match catch_unwind(AssertUnwindSafe(call)) {
            // `is_failure` is never asked about an `Ok`; a classifier is.
            Ok(Ok(value)) if J::OK_IS_SUCCESS => {
                self.core.succeed_here(ticket, &self.clock);
                Ok(value)
            }
            other => self.settle_fast(ticket.ticket(), other.map_err(Stop::Panic), is_failure),
        }
    }

    #[cold]
    #[inline(never)]
    fn settle_fast<T, E>(
        &self,
        ticket: Ticket,
        result: Result<Result<T, E>, Stop>,
        is_failure: impl Judge<T, E>,
    ) -> Result<T, CallError<E>> {
        settle_ticket(self, ticket, result, is_failure, || self.permit(ticket))
    }

    /// Every blocking call that is not closed on the fast path: out of line, so the closed
    /// path's caller keeps a small frame.
    #[inline(never)]
    fn call_sync_slow<T, E>(
        &self,
        is_failure: impl Judge<T, E>,
        call: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, CallError<E>> {
        if let Some(ticket) = self.core.enter_claiming() {
            return self.run_fast(ticket, is_failure, call);
        }
        let permit = Permit::acquire_in(self).map_err(CallError::Breaker)?;
        let result = catch_unwind(AssertUnwindSafe(call)).map_err(Stop::Panic);
        settle(permit, result, is_failure)
    }
}

/// Why a call stopped without a result of its own.
pub(crate) enum Stop {
    /// It panicked (the payload, to resume unchanged).
    Panic(Panic),
    /// Its deadline passed.
    Timeout(Duration),
}

/// The default `is_failure`: every error counts against the dependency.
fn every_error<E>(_: &E) -> bool {
    true
}

/// Reports a finished call and hands its result to the caller; a panic, in the call or in
/// the judge (`is_failure` or a classifier), is reported as a failure first and then resumed
/// unchanged.
pub(crate) fn settle<T, E, H: Engine>(
    permit: Permit<H>,
    result: Result<Result<T, E>, Stop>,
    judge: impl Judge<T, E>,
) -> Result<T, CallError<E>> {
    match result {
        Ok(result) => settle_result(permit, result, judge),
        Err(Stop::Timeout(after)) => {
            let name = permit.name().clone();
            permit.finish(Outcome::Timeout);
            Err(CallError::Breaker(BreakerError::Timeout { name, after }))
        }
        Err(Stop::Panic(panic)) => {
            permit.finish(Outcome::Failure);
            resume_unwind(panic)
        }
    }
}

/// A result from the dependency: the judge decides what it counts as.
#[inline(never)]
fn settle_result<T, E, H: Engine>(
    permit: Permit<H>,
    result: Result<T, E>,
    judge: impl Judge<T, E>,
) -> Result<T, CallError<E>> {
    judged(result, judge, |outcome| permit.finish(outcome))
}

/// Runs the judge (a panic in it is a failure, then resumed) and reports its verdict.
#[inline(always)]
fn judged<T, E>(
    result: Result<T, E>,
    judge: impl Judge<T, E>,
    report: impl FnOnce(Outcome),
) -> Result<T, CallError<E>> {
    match catch_unwind(AssertUnwindSafe(|| judge.judge(&result))) {
        Ok(verdict) => {
            report(Outcome::from(verdict));
            result.map_err(CallError::Inner)
        }
        Err(panic) => {
            report(Outcome::Failure);
            resume_unwind(panic)
        }
    }
}

/// A call admitted on the fast path that did not end in an `Ok` settled inline (an error,
/// a timeout, a panic, or any result a classifier must judge). A success settles as the
/// fast path's does, without a permit (for an owned future, a permit costs a
/// reference-count round trip); anything else takes one from `permit`.
pub(crate) fn settle_ticket<T, E, H: Engine>(
    shared: &Shared,
    ticket: Ticket,
    result: Result<Result<T, E>, Stop>,
    judge: impl Judge<T, E>,
    permit: impl FnOnce() -> Permit<H>,
) -> Result<T, CallError<E>> {
    match result {
        Ok(result) => judged(result, judge, |outcome| match outcome {
            Outcome::Success => shared.core.succeed(ticket, &shared.clock),
            other => permit().finish(other),
        }),
        Err(stop) => settle(permit(), Err(stop), judge),
    }
}

impl std::fmt::Debug for Breaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The state as stored: formatting must not move an open breaker to half-open (which
        // would emit an event and run hooks from a log line).
        f.debug_struct("Breaker")
            .field("name", &self.name())
            .field("state", &self.shared.core.peek())
            .finish_non_exhaustive()
    }
}

/// Manual control and inspection of a breaker, from [`Breaker::handle`] or
/// [`Registry::get`](crate::Registry::get).
///
/// ```
/// use breaker_runtime::{registry, Breaker, Config, State};
///
/// let _b = Breaker::new("docs::handle", Config::default());
/// let h = registry().get("docs::handle").unwrap();
/// h.force_open();
/// assert_eq!(h.state(), State::ForcedOpen);
/// h.disable();
/// assert_eq!(h.state(), State::Disabled);
/// h.reset();
/// assert_eq!(h.state(), State::Closed);
/// ```
#[derive(Clone)]
pub struct Handle {
    pub(crate) shared: Arc<Shared>,
}

impl Handle {
    /// The breaker's name.
    pub fn name(&self) -> &str {
        &self.shared.core.name
    }

    /// The current state (see [`Breaker::state`]).
    pub fn state(&self) -> State {
        self.shared.core.state(&self.shared.clock)
    }

    /// Counts since creation or the last reset.
    pub fn stats(&self) -> Stats {
        self.shared.core.counters.read()
    }

    /// How long until a call may be admitted (see [`BreakerError::retry_in`]).
    pub fn retry_in(&self) -> Option<Duration> {
        self.shared.core.retry_in(&self.shared.clock)
    }

    /// Opens the breaker until [`reset`](Self::reset): every call fails fast.
    pub fn force_open(&self) {
        self.shared.core.set(State::ForcedOpen, &self.shared.clock);
    }

    /// Admits every call, still counting outcomes; the state no longer changes by itself.
    pub fn disable(&self) {
        self.shared.core.set(State::Disabled, &self.shared.clock);
    }

    /// Closes the breaker and clears its counts and [`Stats`].
    pub fn reset(&self) {
        self.shared.core.set(State::Closed, &self.shared.clock);
    }

    /// The breaker as the registry reports it. Reading the state moves an open breaker
    /// whose cool-off ended to half-open, as [`state`](Self::state) does.
    pub fn snapshot(&self) -> Snapshot {
        let core = &self.shared.core;
        let clock = &self.shared.clock;
        Snapshot {
            name: core.name.to_string(),
            state: core.state(clock),
            stats: core.counters.read(),
            failure_rate: core.failure_rate(clock),
            retry_in: core.retry_in(clock),
        }
    }
}

#[doc(hidden)]
impl Handle {
    /// Fleet: open now for `open_for` (cause [`Cause::Fleet`](crate::Cause::Fleet)).
    pub fn fleet_open(&self, open_for: Duration) {
        let nanos = crate::clock::to_nanos(open_for);
        self.shared.core.fleet_open(nanos, &self.shared.clock);
    }

    /// Fleet: close if open or half-open (the fleet's probe succeeded).
    pub fn fleet_close(&self) {
        self.shared.core.fleet_close(&self.shared.clock);
    }

    /// Fleet: while on, an open breaker whose cool-off ended waits for
    /// [`fleet_grant_probe`](Self::fleet_grant_probe) before it admits a probe.
    pub fn fleet_gate(&self, on: bool) {
        self.shared.core.fleet_gate(on);
    }

    /// Fleet: this instance holds the fleet's probe lease; the next call after the cool-off
    /// may probe.
    pub fn fleet_grant_probe(&self) {
        self.shared.core.fleet_grant_probe();
    }

    /// The state as stored, without moving an open breaker to half-open.
    pub fn peek_state(&self) -> State {
        self.shared.core.peek()
    }

    /// Whether both handles reach the same breaker.
    pub fn same_breaker(&self, other: &Handle) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// The breaker behind this handle.
    pub fn breaker(&self) -> Breaker {
        Breaker {
            shared: self.shared.clone(),
        }
    }
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}
