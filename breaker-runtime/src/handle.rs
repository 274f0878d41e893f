//! [`Handle`]: manual control and inspection of a breaker, and the hooks a fleet drives.

use std::{
    sync::{Arc, Weak},
    time::Duration,
};

use crate::{shared::Shared, snapshot::Snapshot, State, Stats};

/// Manual control and inspection of a breaker, from [`Breaker::handle`](crate::Breaker::handle) or
/// [`Registry::get`](crate::Registry::get).
///
/// ```
/// use breaker::{registry, Breaker, Config, State};
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

    /// The current state (see [`Breaker::state`](crate::Breaker::state)).
    pub fn state(&self) -> State {
        self.shared.core.state(&self.shared.clock)
    }

    /// Counts since creation or the last reset.
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// How long until a call may be admitted (see [`BreakerError::retry_in`](crate::BreakerError::retry_in)).
    pub fn retry_in(&self) -> Option<Duration> {
        self.shared.core.retry_in(&self.shared.clock)
    }

    /// Opens the breaker until [`reset`](Self::reset): every call fails fast.
    ///
    /// ```
    /// use breaker::{Breaker, Config, State};
    ///
    /// let b = Breaker::new("docs::force_open", Config::default());
    /// b.handle().force_open(); // an operator takes the dependency out
    /// let refused = b.call_sync(|| Ok::<_, ()>(1)).unwrap_err();
    /// assert!(refused.is_open());
    /// assert_eq!(b.state(), State::ForcedOpen); // until `reset`
    /// ```
    pub fn force_open(&self) {
        self.shared.core.set(State::ForcedOpen, &self.shared.clock);
    }

    /// Admits every call, still counting outcomes; the state no longer changes by itself.
    ///
    /// ```
    /// use breaker::{Breaker, Config, State};
    ///
    /// let b = Breaker::new("docs::disable", Config::default().threshold(1));
    /// b.handle().disable();
    /// for _ in 0..3 {
    ///     let _ = b.call_sync(|| Err::<(), _>("503")); // every call is made
    /// }
    /// assert_eq!(b.state(), State::Disabled);
    /// assert_eq!(b.stats().failures, 3); // and counted
    /// ```
    pub fn disable(&self) {
        self.shared.core.set(State::Disabled, &self.shared.clock);
    }

    /// Closes the breaker and clears its counts and [`Stats`].
    ///
    /// ```
    /// use breaker::{registry, Breaker, Config, State};
    ///
    /// let _b = Breaker::new("docs::handle_reset", Config::default().threshold(1));
    /// let handle = registry().get("docs::handle_reset").unwrap();
    /// handle.force_open();
    /// handle.reset();
    /// assert_eq!(handle.state(), State::Closed);
    /// assert_eq!(handle.stats().calls, 0);
    /// ```
    pub fn reset(&self) {
        self.shared.core.set(State::Closed, &self.shared.clock);
        self.shared.reset_retry_counts();
    }

    /// The breaker as the registry reports it. Reading the state moves an open breaker
    /// whose cool-off ended to half-open, as [`state`](Self::state) does.
    pub fn snapshot(&self) -> Snapshot {
        let core = &self.shared.core;
        let clock = &self.shared.clock;
        Snapshot {
            name: core.name.to_string(),
            state: core.state(clock),
            stats: self.shared.stats(),
            failure_rate: core.failure_rate(clock),
            retry_in: core.retry_in(clock),
            throttle_rate: core.throttle_rate(clock),
            concurrency_limit: core.concurrency_limit(),
            dry_run: core.dry_run(),
        }
    }
}

#[doc(hidden)]
impl Handle {
    // The hooks below name the `member` the fleet knows the breaker as (its link's): a
    // breaker that left that fleet since (joined another) ignores them.

    /// Fleet: open now for `open_for` (cause [`Cause::Fleet`](crate::Cause::Fleet)), at most
    /// [`fleet_cap`](Self::fleet_cap).
    pub fn fleet_open(&self, open_for: Duration, member: u64) {
        let nanos = crate::clock::to_nanos(open_for);
        self.shared
            .core
            .fleet_open(nanos, member, &self.shared.clock);
    }

    /// Fleet: close if open or half-open (the fleet's probe succeeded).
    pub fn fleet_close(&self, member: u64) {
        self.shared.core.fleet_close(member, &self.shared.clock);
    }

    /// Fleet: while on, an open breaker whose cool-off ended waits for
    /// [`fleet_grant_probe`](Self::fleet_grant_probe) before it admits a probe.
    pub fn fleet_gate(&self, on: bool, member: u64) {
        self.shared.core.fleet_gate(on, member);
    }

    /// Fleet: this instance holds the fleet's probe lease; the next call after the cool-off
    /// may probe.
    pub fn fleet_grant_probe(&self, member: u64) {
        self.shared.core.fleet_grant_probe(member);
    }

    /// Fleet: attaches the fleet's link: told when a call waits for the fleet's probe and
    /// of each transition, dropped with the breaker. Replacing a link releases the gate
    /// of the fleet it was.
    pub fn fleet_attach(&self, link: Box<dyn crate::FleetLink>) {
        self.shared.core.fleet_attach(link);
    }

    /// Fleet: whether the gate holds the breaker open and a call was refused meanwhile.
    pub fn fleet_wanted(&self, member: u64) -> bool {
        self.shared.core.fleet_wanted(member)
    }

    /// Fleet: the longest an opening heard from another instance may hold this breaker
    /// open: the longest it would open by itself (its `max_cool_off`, else its cool-off or
    /// the default cap of an `OpenFor`, whichever is longer).
    pub fn fleet_cap(&self) -> Duration {
        Duration::from_nanos(self.shared.core.fleet_cap())
    }

    /// Fleet: a handle that does not keep the breaker alive.
    pub fn downgrade(&self) -> WeakHandle {
        WeakHandle {
            shared: Arc::downgrade(&self.shared),
        }
    }

    /// The state as stored, without moving an open breaker to half-open.
    pub fn peek_state(&self) -> State {
        self.shared.core.peek()
    }

    /// The breaker's identity: unique in the process, never reused (metrics follow a
    /// breaker by it).
    pub fn id(&self) -> u64 {
        self.shared.id
    }

    /// Everything the breaker counted since it was made, across resets ([`stats`]
    /// (Self::stats) start again at a reset): what the metrics and OpenTelemetry exporters
    /// publish, so a reset never moves a counter back nor loses what came before it.
    pub fn counted(&self) -> Stats {
        self.shared.counted()
    }

    /// The keyed breaker this breaker is a key of (its name), if any.
    pub fn family(&self) -> Option<&str> {
        self.shared.family.as_ref().map(|f| f.name.as_str())
    }

    /// Whether both handles reach the same breaker.
    pub fn same_breaker(&self, other: &Handle) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }

    /// How long ago the breaker was made, on its clock (tokio's): what the dashboard's
    /// history bar leaves empty before it.
    #[doc(hidden)]
    pub fn age(&self) -> Duration {
        use crate::clock::Clock as _;
        Duration::from_nanos(self.shared.clock.now())
    }
}

/// A [`Handle`] that does not keep its breaker alive (what a fleet holds of its members).
#[doc(hidden)]
#[derive(Clone)]
pub struct WeakHandle {
    shared: Weak<Shared>,
}

impl WeakHandle {
    /// The handle, if the breaker still lives.
    pub fn upgrade(&self) -> Option<Handle> {
        self.shared.upgrade().map(|shared| Handle { shared })
    }
}

impl std::fmt::Debug for WeakHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WeakHandle").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}
