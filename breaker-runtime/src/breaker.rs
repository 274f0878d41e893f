//! The public breaker: one [`Core`](crate::core::Core) with its clock, and the call wrappers
//! around it.

use std::{future::Future, sync::Arc, time::Duration};

use crate::{
    clock::TokioClock,
    core::{Core, Engine},
    future::CallFuture,
    handle::Handle,
    live::Live,
    registry::index,
    shared::Host,
    shared::Shared,
    snapshot::Snapshot,
    verdict::{Classify, EveryError, Judge},
    CallError, Config, ConfigError, Name, State, Stats, Verdict,
};

/// A circuit breaker. Cheap to clone (clones share one breaker); listed in
/// [`registry()`](crate::registry) from its creation.
///
/// ```
/// use breaker::{Breaker, CallError, Config, State};
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

impl Breaker {
    /// Creates a breaker and lists it in the registry.
    ///
    /// # Panics
    ///
    /// If `config` is invalid, with the [`ConfigError`] message naming the field. Use
    /// [`try_new`](Self::try_new) for configuration that comes from outside the program.
    ///
    /// ```
    /// use std::time::Duration;
    /// use breaker::{Breaker, Config, State};
    ///
    /// let tax = Breaker::new(
    ///     "docs::new",
    ///     Config::default().threshold(5).cool_off(Duration::from_secs(10)),
    /// );
    /// assert_eq!(tax.name(), "docs::new");
    /// assert_eq!(tax.state(), State::Closed);
    /// ```
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
    /// leaves the registry and its memory is freed. Its name is kept for the life of the
    /// process while the names kept so far total under 64 KiB (about a thousand names; the
    /// same text is kept once), so that a refusal copies it without a reference count; past
    /// that, a name is freed with the last breaker, handle and error that carry it.
    ///
    /// ```
    /// use breaker::{Breaker, Config};
    ///
    /// // A configuration read from outside the program: an invalid one names its field.
    /// let err = Breaker::try_new("docs::try_new", Config::default().failure_rate(150)).unwrap_err();
    /// assert_eq!(err.field(), "failure_rate");
    /// assert!(Breaker::try_new("docs::try_new", Config::default().failure_rate(50)).is_ok());
    /// ```
    pub fn try_new(name: impl AsRef<str>, config: Config) -> Result<Breaker, ConfigError> {
        Breaker::try_named(Name::kept(name.as_ref()), config)
    }

    /// [`Breaker::new`] with a [`Name`] already made (the attribute's are static text).
    #[doc(hidden)]
    #[track_caller]
    pub fn new_named(name: Name, config: Config) -> Breaker {
        match Breaker::try_named(name, config) {
            Ok(b) => b,
            Err(e) => panic!("{e}"),
        }
    }

    fn try_named(name: Name, config: Config) -> Result<Breaker, ConfigError> {
        crate::config::refuse_outliers(&config)?;
        let probe = config.probe.is_some();
        let shared = Arc::new(Shared::new(name, config.resolve()?.into(), true, None));
        shared.list(false);
        if probe {
            crate::probe::install(&shared);
        }
        Ok(Breaker { shared })
    }

    /// A keyed breaker's breaker for one key: its policy and configuration are the keyed
    /// breaker's, shared (validated when it was made).
    pub(crate) fn keyed(
        name: Name,
        live: &Arc<Live>,
        family: &Arc<crate::shared::Family>,
        budget: Option<&Arc<crate::core::OpenBudget>>,
    ) -> Breaker {
        let cap = budget.map(|b| crate::core::OpenCap::new(b.clone()));
        let keyed = Some((family.clone(), cap));
        let shared = Arc::new(Shared::new(name, live.clone(), true, keyed));
        shared.list(false);
        Breaker { shared }
    }

    /// A breaker that is not in the registry (tests of the call future).
    #[cfg(all(test, not(breaker_loom)))]
    pub(crate) fn unlisted(name: Name, config: Config) -> Result<Breaker, ConfigError> {
        let settings = config.resolve()?;
        Ok(Breaker {
            shared: Arc::new(Shared::new(name, settings.into(), false, None)),
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
    ///
    /// ```
    /// use std::time::Duration;
    /// use breaker::{Breaker, Config, State};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let b = Breaker::new("docs::state", Config::default().threshold(1).cool_off(Duration::from_secs(5)));
    /// let _ = b.call(async { Err::<(), _>("down") }).await;
    /// assert_eq!(b.state(), State::Open);
    /// tokio::time::advance(Duration::from_secs(5)).await;
    /// assert_eq!(b.state(), State::HalfOpen); // the cool-off is over: the next call probes
    /// # }
    /// ```
    pub fn state(&self) -> State {
        self.shared.core.state(&self.shared.clock)
    }

    /// Counts since creation or the last reset.
    ///
    /// ```
    /// use breaker::{Breaker, Config};
    ///
    /// let b = Breaker::new("docs::stats", Config::default().threshold(2));
    /// let _ = b.call_sync(|| Ok::<_, ()>(1));
    /// let _ = b.call_sync(|| Err::<u32, _>("503"));
    /// let stats = b.stats();
    /// assert_eq!((stats.calls, stats.successes, stats.failures), (2, 1, 1));
    /// ```
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// A handle for manual control and inspection.
    ///
    /// ```
    /// use breaker::{Breaker, Config, State};
    ///
    /// let b = Breaker::new("docs::handle", Config::default());
    /// let handle = b.handle(); // what `registry().get(name)` returns too
    /// handle.force_open();
    /// assert_eq!(b.state(), State::ForcedOpen);
    /// handle.reset();
    /// assert_eq!(b.state(), State::Closed);
    /// ```
    pub fn handle(&self) -> Handle {
        Handle {
            shared: self.shared.clone(),
        }
    }

    /// How long until a call may be admitted (see [`BreakerError::retry_in`](crate::BreakerError::retry_in)).
    ///
    /// ```
    /// use std::time::Duration;
    /// use breaker::{Breaker, Config};
    ///
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
    /// let b = Breaker::new("docs::retry_in", Config::default().threshold(1).cool_off(Duration::from_secs(10)));
    /// assert_eq!(b.retry_in(), None); // closed
    /// let _ = b.call(async { Err::<(), _>("down") }).await;
    /// assert_eq!(b.retry_in(), Some(Duration::from_secs(10)));
    /// # }
    /// ```
    pub fn retry_in(&self) -> Option<Duration> {
        self.shared.core.retry_in(&self.shared.clock)
    }

    /// Runs one async call through the breaker; every `Err` counts as a failure.
    ///
    /// The future is polled only if the call is admitted, which happens on the first poll. If
    /// it is dropped before it finishes, the call counts for nothing and gives its slots back.
    /// A panic in it counts as a failure and unwinds to the caller unchanged.
    ///
    /// ```
    /// use breaker::{Breaker, CallError, Config};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let fraud = Breaker::new("docs::call", Config::default().threshold(1));
    /// let score = fraud.call(async { Ok::<u32, std::io::Error>(7) }).await;
    /// assert_eq!(score.unwrap(), 7);
    ///
    /// let failed = fraud.call(async { Err::<u32, _>(std::io::Error::other("timeout")) }).await;
    /// assert!(matches!(failed, Err(CallError::Inner(_)))); // the dependency's own error
    /// // Open now: the future below is never polled.
    /// let refused = fraud.call(async { Ok::<u32, std::io::Error>(7) }).await;
    /// assert!(matches!(refused, Err(CallError::Breaker(e)) if e.is_open()));
    /// # }
    /// ```
    pub fn call<F, T, E>(&self, call: F) -> CallFuture<'_, F, EveryError>
    where
        F: Future<Output = Result<T, E>>,
    {
        CallFuture::new(&*self.shared, EveryError, call)
    }

    /// Like [`call`](Self::call), but the future owns the breaker, so it is `'static` when
    /// `call` is: for `tokio::spawn` and tower services. The caller clones explicitly, as
    /// with tokio's `acquire_owned`: `tokio::spawn(breaker.clone().call_owned(fut))`.
    /// [`call`](Self::call) keeps borrowing, with no reference-count traffic per call.
    ///
    /// ```
    /// use breaker::{Breaker, Config};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let b = Breaker::new("docs::call_owned", Config::default());
    /// let task = tokio::spawn(b.clone().call_owned(async { Ok::<_, std::io::Error>(42) }));
    /// assert_eq!(task.await.unwrap().unwrap(), 42);
    /// assert_eq!(b.stats().successes, 1);
    /// # }
    /// ```
    pub fn call_owned<F, T, E>(self, call: F) -> CallFuture<'static, F, EveryError, Breaker>
    where
        F: Future<Output = Result<T, E>>,
    {
        CallFuture::new(self, EveryError, call)
    }

    /// Like [`call`](Self::call), with `classify` judging every finished call, `Ok` values
    /// included (see [`Verdict`]). What the caller receives does not change: an `Ok` judged
    /// a failure is still returned as it is. A panic in `classify` counts as a failure and
    /// unwinds into the caller, as one in `is_failure` does.
    ///
    /// ```
    /// use breaker::{Breaker, Config, Verdict};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let b = Breaker::new("docs::call_classified", Config::default().threshold(1));
    /// // An `Ok(503)` judged a failure: the caller still gets it, and it trips the breaker.
    /// let status = b
    ///     .call_classified(
    ///         |r: &Result<u16, ()>| match r {
    ///             Ok(s) if *s >= 500 => Verdict::Failure,
    ///             Ok(_) => Verdict::Success,
    ///             Err(_) => Verdict::Failure,
    ///         },
    ///         async { Ok(503) },
    ///     )
    ///     .await;
    /// assert_eq!(status.unwrap(), 503);
    /// assert_eq!(b.stats().failures, 1);
    /// # }
    /// ```
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
    ///
    /// ```
    /// use breaker::{Breaker, Config, State};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let b = Breaker::new("docs::call_with", Config::default().threshold(1));
    /// // A 404 is the caller's question, not the dependency's health: neutral.
    /// let r = b.call_with(|status: &u16| *status >= 500, async { Err::<(), u16>(404) }).await;
    /// assert!(r.is_err());
    /// assert_eq!(b.state(), State::Closed);
    /// assert_eq!(b.stats().neutral, 1);
    /// # }
    /// ```
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
    ///
    /// ```
    /// use breaker::{Breaker, Config};
    ///
    /// let disk = Breaker::new("docs::call_sync", Config::default().threshold(3));
    /// let text = disk.call_sync(|| std::fs::read_to_string("/no/such/file"));
    /// assert!(text.unwrap_err().into_dependency_error().is_some()); // io::Error, counted
    /// assert_eq!(disk.stats().failures, 1);
    /// ```
    #[inline]
    pub fn call_sync<T, E>(&self, call: impl FnOnce() -> Result<T, E>) -> Result<T, CallError<E>> {
        self.call_sync_with(EveryError, call)
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

    /// An optimised build runs `call` in place (inlined into the caller). A debug build runs
    /// it behind `&mut dyn JudgedBody`, judged where it runs, and gives
    /// [`call_sync_in`](Self::call_sync_in) only the verdict (`crate::erased`): everything
    /// past this frame is compiled once, in this crate, rather than once per result type and
    /// judge, which in a crate whose functions each return their own type was once per
    /// function (1 900 lines of IR each). The same code either way: only what it is
    /// instantiated with differs.
    #[inline(always)]
    fn call_sync_judged<T, E>(
        &self,
        is_failure: impl Judge<T, E>,
        call: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, CallError<E>> {
        #[cfg(debug_assertions)]
        {
            let mut judged = crate::erased::Judged::new(call, is_failure);
            // Spelled out, as in `future::poll_kept` and the glue's `recover_erased`: a shared
            // generic helper would be one more function for every result type.
            match self.call_sync_erased(&mut judged) {
                Err(refused) => Err(CallError::Breaker(refused)),
                Ok(()) => match judged.out {
                    Some(Ok(value)) => Ok(value),
                    Some(Err(error)) => Err(CallError::Inner(error)),
                    None => crate::erased::no_output(),
                },
            }
        }
        #[cfg(not(debug_assertions))]
        self.call_sync_in(is_failure, call)
    }

    /// A debug build's blocking call of `body`, whatever its result type and judge
    /// (`crate::erased`): `Err` if the breaker refused it, `Ok` if the body ran (its result
    /// is the body's to give). A panic in the body counts as a failure and unwinds on.
    #[doc(hidden)]
    pub fn call_sync_erased(
        &self,
        body: &mut dyn crate::erased::JudgedBody,
    ) -> Result<(), crate::BreakerError> {
        match self.call_sync_in(crate::erased::Given, || body.run()) {
            Err(CallError::Breaker(refused)) => Err(refused),
            Ok(_) | Err(CallError::Inner(_)) => Ok(()),
        }
    }

    #[cfg_attr(not(debug_assertions), inline(always))]
    pub(crate) fn call_sync_in<T, E>(
        &self,
        is_failure: impl Judge<T, E>,
        call: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, CallError<E>> {
        let shared = &*self.shared;
        if let Some(ticket) = shared.enter_closed() {
            return shared.run_fast(ticket, is_failure, call);
        }
        if let Some(refused) = shared.refuse_blocking() {
            return Err(CallError::Breaker(refused));
        }
        shared.call_sync_slow(is_failure, call)
    }

    /// Whether this breaker only pretends to refuse (`Config::dry_run`); a fleet does not
    /// take such a breaker in.
    #[doc(hidden)]
    pub fn is_dry_run(&self) -> bool {
        self.shared.core.dry_run()
    }

    /// This breaker as the registry reports it.
    ///
    /// ```
    /// use breaker::{Breaker, Config, State};
    ///
    /// let b = Breaker::new("docs::snapshot", Config::default().threshold(1));
    /// let _ = b.call_sync(|| Err::<(), _>("503"));
    /// let s = b.snapshot();
    /// assert_eq!(s.state, State::Open);
    /// assert_eq!(s.stats.failures, 1);
    /// assert!(s.retry_in.is_some());
    /// ```
    pub fn snapshot(&self) -> Snapshot {
        self.handle().snapshot()
    }
}

impl Breaker {
    /// The breaker named `name`, created with `config` if there is no live one yet: how the
    /// attribute's functions with an explicit `name` share one. A breaker that exists with
    /// another policy, or another `on_state_change` hook, is kept, with one WARN naming it
    /// (logged after the registry's lock is released).
    ///
    /// # Panics
    ///
    /// If it has to create the breaker and `config` is invalid, as [`Breaker::new`] does.
    #[doc(hidden)]
    #[track_caller]
    pub fn get_or_create(name: impl Into<Name>, config: Config) -> Breaker {
        let name = name.into();
        // Found, or validated and built outside the registry's lock, then listed unless
        // another caller listed one of that name meanwhile (then ours is dropped, unseen).
        let (shared, existed) = match index::index().newest::<Shared>(&name) {
            Some(found) => (found, true),
            None => {
                let settings = match crate::config::refuse_outliers(&config)
                    .and_then(|()| config.clone().resolve())
                {
                    Ok(settings) => settings,
                    Err(e) => panic!("{e}"),
                };
                let made = Arc::new(Shared::new(name.clone(), settings.into(), true, None));
                match made.list(true) {
                    Some(found) => (found, true),
                    None => (made, false),
                }
            }
        };
        if !existed && config.probe.is_some() {
            crate::probe::install(&shared);
        }
        let differs = if !existed {
            None
        } else if !shared.core.live.resolved().config.same_policy(&config) {
            Some("configuration")
        } else if !shared.core.live.resolved().config.same_hooks(&config) {
            Some("`on_state_change` hook")
        } else {
            None
        };
        if let Some(what) = differs {
            tracing::warn!(
                target: "breaker",
                breaker = name.as_str(),
                "circuit breaker `{name}` already exists; this function's {what} is not used, \
                 the existing breaker is kept (give the functions different `name`s to \
                 separate them)"
            );
        }
        Breaker { shared }
    }
}

#[doc(hidden)]
impl Handle {
    /// The breaker behind this handle.
    pub fn breaker(&self) -> Breaker {
        Breaker {
            shared: self.shared.clone(),
        }
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
