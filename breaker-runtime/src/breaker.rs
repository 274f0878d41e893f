//! The public breaker: one [`Core`] with its clock, and the call wrappers around it.

use std::{
    future::Future,
    panic::{catch_unwind, resume_unwind, AssertUnwindSafe},
    sync::Arc,
    time::Duration,
};

use crate::{
    clock::TokioClock,
    core::{Core, Outcome, Permit, Ticket},
    future::CallFuture,
    registry::{self, Snapshot},
    BreakerError, CallError, Config, ConfigError, State, Stats,
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

pub(crate) struct Shared {
    pub(crate) core: Core,
    pub(crate) clock: TokioClock,
    pub(crate) config: Config,
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
    /// A breaker is meant to live as long as the program: it stays listed, and its name is
    /// kept for the life of the process (interned once per distinct name), so that every
    /// error it produces can carry it without allocating.
    pub fn try_new(name: impl AsRef<str>, config: Config) -> Result<Breaker, ConfigError> {
        let breaker = Breaker::unlisted(registry::intern(name.as_ref()), config)?;
        registry::registry().list(&breaker);
        Ok(breaker)
    }

    pub(crate) fn unlisted(name: &'static str, config: Config) -> Result<Breaker, ConfigError> {
        let policy = config.validate()?;
        let core = Core::new(name, policy, config.on_state_change.clone());
        Ok(Breaker {
            shared: Arc::new(Shared {
                core,
                clock: TokioClock::new(),
                config,
            }),
        })
    }

    /// The breaker's name.
    pub fn name(&self) -> &'static str {
        self.shared.core.name
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
        CallFuture::new(&self.shared, every_error::<E>, call)
    }

    /// Like [`call`](Self::call), with `is_failure` deciding which errors count against the
    /// dependency; an error it returns `false` for is neutral (counts for nothing).
    pub fn call_with<F, T, E, P>(&self, is_failure: P, call: F) -> CallFuture<'_, F, P>
    where
        F: Future<Output = Result<T, E>>,
        P: FnOnce(&E) -> bool,
    {
        CallFuture::new(&self.shared, is_failure, call)
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
        is_failure: impl FnOnce(&E) -> bool,
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
    pub(crate) fn permit(&self, ticket: Ticket) -> Permit<'_, TokioClock> {
        Permit::from_ticket(&self.core, &self.clock, ticket)
    }

    /// A blocking call admitted on the fast path. A success is settled inline; anything
    /// else out of line, so the inlined part stays small.
    #[inline(always)]
    fn run_fast<T, E>(
        &self,
        ticket: Ticket,
        is_failure: impl FnOnce(&E) -> bool,
        call: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, CallError<E>> {
        match catch_unwind(AssertUnwindSafe(call)) {
            Ok(Ok(value)) => {
                self.core.succeed_here(ticket, &self.clock);
                Ok(value)
            }
            other => self.settle_fast(ticket, other.map_err(Stop::Panic), is_failure),
        }
    }

    #[cold]
    #[inline(never)]
    fn settle_fast<T, E>(
        &self,
        ticket: Ticket,
        result: Result<Result<T, E>, Stop>,
        is_failure: impl FnOnce(&E) -> bool,
    ) -> Result<T, CallError<E>> {
        settle(self.permit(ticket), result, is_failure)
    }

    /// Every blocking call that is not closed on the fast path: out of line, so the closed
    /// path's caller keeps a small frame.
    #[inline(never)]
    fn call_sync_slow<T, E>(
        &self,
        is_failure: impl FnOnce(&E) -> bool,
        call: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, CallError<E>> {
        if let Some(ticket) = self.core.enter_claiming() {
            return self.run_fast(ticket, is_failure, call);
        }
        let permit = Permit::acquire(&self.core, &self.clock).map_err(CallError::Breaker)?;
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
/// `is_failure`, is reported as a failure first and then resumed unchanged.
pub(crate) fn settle<T, E>(
    permit: Permit<'_, TokioClock>,
    result: Result<Result<T, E>, Stop>,
    is_failure: impl FnOnce(&E) -> bool,
) -> Result<T, CallError<E>> {
    match result {
        Ok(Ok(value)) => {
            permit.finish(Outcome::Success);
            Ok(value)
        }
        Ok(Err(e)) => settle_error(permit, e, is_failure),
        Err(Stop::Timeout(after)) => {
            let name = permit.name();
            permit.finish(Outcome::Timeout);
            Err(CallError::Breaker(BreakerError::Timeout { name, after }))
        }
        Err(Stop::Panic(panic)) => {
            permit.finish(Outcome::Failure);
            resume_unwind(panic)
        }
    }
}

/// An `Err` from the dependency: `is_failure` decides whether it counts.
#[inline(never)]
fn settle_error<T, E>(
    permit: Permit<'_, TokioClock>,
    e: E,
    is_failure: impl FnOnce(&E) -> bool,
) -> Result<T, CallError<E>> {
    match catch_unwind(AssertUnwindSafe(|| is_failure(&e))) {
        Ok(counts) => {
            permit.finish(if counts {
                Outcome::Failure
            } else {
                Outcome::Neutral
            });
            Err(CallError::Inner(e))
        }
        Err(panic) => {
            permit.finish(Outcome::Failure);
            resume_unwind(panic)
        }
    }
}

impl std::fmt::Debug for Breaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Breaker")
            .field("name", &self.name())
            .field("state", &self.state())
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
    pub fn name(&self) -> &'static str {
        self.shared.core.name
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

    /// The breaker as the registry reports it.
    pub fn snapshot(&self) -> Snapshot {
        let core = &self.shared.core;
        let clock = &self.shared.clock;
        Snapshot {
            name: core.name.to_owned(),
            state: core.state(clock),
            stats: core.counters.read(),
            failure_rate: core.failure_rate(clock),
            retry_in: core.retry_in(clock),
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
