//! [`Handle`]: manual control and inspection of a breaker, and the hooks a fleet drives.

use std::{sync::Arc, time::Duration};

use crate::{call::Shared, snapshot::Snapshot, State, Stats};

/// Manual control and inspection of a breaker, from [`Breaker::handle`](crate::Breaker::handle) or
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

    /// The current state (see [`Breaker::state`](crate::Breaker::state)).
    pub fn state(&self) -> State {
        self.shared.core.state(&self.shared.clock)
    }

    /// Counts since creation or the last reset.
    pub fn stats(&self) -> Stats {
        self.shared.core.counters.read()
    }

    /// How long until a call may be admitted (see [`BreakerError::retry_in`](crate::BreakerError::retry_in)).
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

    /// The breaker's identity: unique in the process, never reused (metrics follow a
    /// breaker by it).
    pub fn id(&self) -> u64 {
        self.shared.id
    }

    /// The keyed breaker this breaker is a key of (its name), if any.
    pub fn family(&self) -> Option<&str> {
        self.shared.family.as_ref().map(|f| f.name.as_str())
    }

    /// Whether both handles reach the same breaker.
    pub fn same_breaker(&self, other: &Handle) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("name", &self.name())
            .finish_non_exhaustive()
    }
}
