//! Announcing transitions: queued under the lock in the order they happen, delivered
//! outside it by one dispatcher at a time (the `tracing` event, the hook, the observers),
//! each under `catch_unwind`; and waking whoever waits for the breaker to admit
//! (`ready_when_closed`), at every transition and every other change that may admit.

use std::panic::AssertUnwindSafe;

use super::*;
use crate::{
    events::{self, Transition},
    sync::lock,
};

impl Core {
    /// Announces queued transitions: one dispatcher at a time, in queue order, outside the
    /// lock. A hook that calls back into the breaker only queues; the loop delivers it.
    pub(super) fn dispatch(&self) {
        let mut inner = lock(&self.inner);
        if inner.dispatching {
            return;
        }
        inner.dispatching = true;
        drop(inner);
        // Whatever happens below (a subscriber that panics while logging the panic of a
        // hook), the next transition finds a dispatcher again.
        let _guard = Dispatching::new(self);
        loop {
            let Some(t) = lock(&self.inner).events.pop_front() else {
                return;
            };
            self.announce(&t);
        }
    }

    pub(super) fn announce(&self, t: &Transition) {
        let delivered = std::panic::catch_unwind(AssertUnwindSafe(|| {
            events::log(t);
            if let Some(hook) = &self.live.resolved().config.on_state_change {
                hook(t);
            }
        }));
        if let Err(panic) = delivered {
            // Logged under `catch_unwind` too: the subscriber may be what panicked.
            let _ = std::panic::catch_unwind(AssertUnwindSafe(|| {
                let what = panic
                    .downcast_ref::<&str>()
                    .copied()
                    .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
                    .unwrap_or("a non-string panic");
                tracing::error!(
                    target: "breaker",
                    breaker = self.name.as_str(),
                    "on_state_change hook panicked: {what}; the breaker goes on"
                );
            }));
        }
        events::notify_observers(t);
        self.fleet_announce(t);
        self.probe_announce(t);
        self.wake_waiters();
    }

    /// What tells of every change that may make the breaker admit: made by the first who
    /// waits. Each waiter holds one registration, removed when it is dropped.
    pub(crate) fn changes(&self) -> std::sync::Arc<tokio::sync::Notify> {
        self.inner
            .cold()
            .changes
            .get_or_init(Default::default)
            .clone()
    }

    /// Wakes whoever waits for a change (outside the lock): a transition, a probe slot
    /// given back, a reconfiguration, the fleet's gate. Nothing when no one ever waited;
    /// never on the closed call path.
    pub(crate) fn wake_waiters(&self) {
        if let Some(changes) = self.inner.made().and_then(|cold| cold.changes.get()) {
            changes.notify_waiters();
        }
    }
}

/// Clears `dispatching` when the dispatcher stops, by return or by unwinding.
pub(super) struct Dispatching<'a> {
    core: &'a Core,
    /// Whether the thread was already unwinding when this dispatcher began: a call that
    /// panicked reports its failure (and may trip the breaker) while it unwinds.
    began_unwinding: bool,
}

impl<'a> Dispatching<'a> {
    pub(super) fn new(core: &'a Core) -> Self {
        Dispatching {
            core,
            began_unwinding: std::thread::panicking(),
        }
    }
}

impl Drop for Dispatching<'_> {
    fn drop(&mut self) {
        let mut inner = lock(&self.core.inner);
        inner.dispatching = false;
        let more = !inner.events.is_empty();
        drop(inner);
        // Queued between our last pop and the flag's reset: deliver them now, unless this
        // dispatcher itself is unwinding (a panic inside it, not the one it began under).
        if more && std::thread::panicking() == self.began_unwinding {
            self.core.dispatch();
        }
    }
}
