//! The hooks a fleet (the facade's `breaker::fleet`, on Redis) drives a breaker with: open it
//! for the fleet's remaining cool-off, close it when the fleet's probe succeeded, hold it open
//! after its own cool-off until the fleet grants it the probe, and hear its transitions.
//!
//! A child module of `core`, so the hooks reach the engine's private parts without widening
//! them. None of this is on the call path but two loads in the half-open slow path: the gate
//! is read only when an open breaker's cool-off has ended.
//!
//! Not part of the API (every item is `#[doc(hidden)]`): the fleet module is the one user.

use std::{
    sync::{Arc, Weak},
    time::Duration,
};

use super::{Core, Word};
use crate::{
    breaker::{Handle, Shared},
    clock::Clock,
    config::Hook,
    events::{Cause, Transition},
    sync::{lock, AtomicU8, Mutex, Ordering::*},
    State,
};

/// Set while the fleet holds the breaker open past its own cool-off.
const GATE: u8 = 1;
/// Set when the fleet granted this breaker the probe of the fleet's open period.
const GRANT: u8 = 2;

/// A breaker's fleet membership: the gate and the watcher. Held by [`Core`].
#[derive(Default)]
pub(crate) struct Fleet {
    flags: AtomicU8,
    watcher: Mutex<Option<Hook>>,
}

impl Fleet {
    /// Whether an open breaker whose cool-off ended must stay open.
    #[inline]
    pub(crate) fn holds(&self) -> bool {
        self.flags.load(Acquire) & (GATE | GRANT) == GATE
    }

    /// A grant is used by one move to half-open, and lost with any other transition.
    pub(crate) fn spend_grant(&self) {
        self.flags.fetch_and(!GRANT, AcqRel);
    }

    /// Tells the watcher, if any, of a transition (after the tracing event and the hook).
    pub(crate) fn notify(&self, t: &Transition) {
        let watcher = lock(&self.watcher).clone();
        if let Some(watcher) = watcher {
            watcher(t);
        }
    }
}

impl Core {
    fn fleet_open(&self, for_: Duration, clock: &impl Clock) {
        let mut inner = lock(&self.inner);
        let w = self.word();
        if matches!(w.state(), State::ForcedOpen | State::Disabled) {
            return;
        }
        let now = clock.now();
        let next = self.transition(&mut inner, w, State::Open, Cause::Fleet, now);
        let until = now.saturating_add(u64::try_from(for_.as_nanos()).unwrap_or(u64::MAX));
        self.open_until.store(until, Release);
        if let Some(t) = inner.events.back_mut() {
            if t.generation == next.generation() {
                t.cool_off = Some(for_);
            }
        }
        drop(inner);
        self.dispatch();
    }

    fn fleet_close(&self) {
        let mut inner = lock(&self.inner);
        let w: Word = self.word();
        if !matches!(w.state(), State::Open | State::HalfOpen) {
            return;
        }
        self.transition(&mut inner, w, State::Closed, Cause::Fleet, 0);
        drop(inner);
        self.dispatch();
    }
}

/// A breaker that a fleet remembers without keeping it alive.
#[doc(hidden)]
#[derive(Clone)]
pub struct WeakHandle(Weak<Shared>);

impl WeakHandle {
    /// The breaker, while it lives.
    pub fn upgrade(&self) -> Option<Handle> {
        self.0.upgrade().map(|shared| Handle { shared })
    }
}

impl std::fmt::Debug for WeakHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WeakHandle")
    }
}

impl Handle {
    /// Opens the breaker now (cause `Fleet`) for `for_`, from any state but forced-open and
    /// disabled.
    #[doc(hidden)]
    pub fn fleet_open(&self, for_: Duration) {
        self.shared.core.fleet_open(for_, &self.shared.clock);
    }

    /// Closes the breaker (cause `Fleet`) if it is open or half-open.
    #[doc(hidden)]
    pub fn fleet_close(&self) {
        self.shared.core.fleet_close();
    }

    /// While on, an open breaker whose cool-off ended stays open until
    /// [`fleet_grant_probe`](Self::fleet_grant_probe). Either way, a grant not yet used is
    /// dropped.
    #[doc(hidden)]
    pub fn fleet_gate(&self, on: bool) {
        let flags = &self.shared.core.fleet.flags;
        flags.store(if on { GATE } else { 0 }, Release);
    }

    /// Lets the next call after the cool-off become a probe, once.
    #[doc(hidden)]
    pub fn fleet_grant_probe(&self) {
        self.shared.core.fleet.flags.fetch_or(GRANT, AcqRel);
    }

    /// `f` hears every transition of this breaker (after the tracing event and the
    /// breaker's own hook, outside any lock); replaces the previous watcher.
    #[doc(hidden)]
    pub fn fleet_watch(&self, f: impl Fn(&Transition) + Send + Sync + 'static) {
        *lock(&self.shared.core.fleet.watcher) = Some(Arc::new(f));
    }

    /// The breaker without keeping it alive.
    #[doc(hidden)]
    pub fn fleet_downgrade(&self) -> WeakHandle {
        WeakHandle(Arc::downgrade(&self.shared))
    }

    /// Whether two handles are of one breaker.
    #[doc(hidden)]
    pub fn fleet_same(&self, other: &Handle) -> bool {
        Arc::ptr_eq(&self.shared, &other.shared)
    }
}

#[cfg(all(test, not(breaker_loom)))]
mod tests {
    use std::sync::Mutex as StdMutex;

    use crate::{Breaker, Config};

    use super::*;

    fn fails(b: &Breaker) -> bool {
        b.call_sync(|| Err::<(), _>(())).is_err()
    }

    #[tokio::test(start_paused = true)]
    async fn gate_holds_an_open_breaker_until_the_grant_and_a_grant_serves_once() {
        let b = Breaker::new("fleet_hooks::gate", Config::default().threshold(1));
        let h = b.handle();
        let seen = Arc::new(StdMutex::new(Vec::new()));
        let log = seen.clone();
        h.fleet_watch(move |t| log.lock().unwrap().push((t.to, t.cause)));
        h.fleet_open(Duration::from_secs(2));
        assert_eq!(h.state(), State::Open);
        assert_eq!(seen.lock().unwrap()[0], (State::Open, Cause::Fleet));
        h.fleet_gate(true);
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(h.state(), State::Open, "gated past the cool-off");
        let r = b.call_sync(|| -> Result<(), ()> { unreachable!() });
        assert!(r.unwrap_err().is_open());
        h.fleet_grant_probe();
        assert!(fails(&b), "the granted probe runs and fails");
        assert_eq!(h.state(), State::Open);
        tokio::time::advance(Duration::from_secs(60)).await;
        assert_eq!(h.state(), State::Open, "the grant served once");
        h.fleet_grant_probe();
        assert!(b.call_sync(|| Ok::<_, ()>(())).is_ok());
        assert_eq!(h.state(), State::Closed);
        h.fleet_open(Duration::from_secs(1));
        h.fleet_close();
        assert_eq!(h.state(), State::Closed);
        h.fleet_gate(false);
        let last = *seen.lock().unwrap().last().unwrap();
        assert_eq!(last, (State::Closed, Cause::Fleet));
    }

    #[tokio::test(start_paused = true)]
    async fn ungated_breakers_and_dead_ones() {
        // Unlisted: the registry keeps listed breakers alive.
        let b = Breaker::unlisted("fleet_hooks::weak", Config::default().threshold(1)).unwrap();
        let weak = b.handle().fleet_downgrade();
        assert!(fails(&b));
        b.handle().fleet_open(Duration::from_millis(10));
        tokio::time::advance(Duration::from_millis(20)).await;
        assert_eq!(b.state(), State::HalfOpen, "no gate: local behaviour");
        b.handle().force_open();
        b.handle().fleet_open(Duration::from_millis(10));
        assert_eq!(b.state(), State::ForcedOpen);
        assert!(weak.upgrade().unwrap().fleet_same(&b.handle()));
        drop(b);
        assert!(weak.upgrade().is_none());
    }
}
