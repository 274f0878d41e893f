//! The hooks a fleet (`breaker::fleet`) drives from its background task: open for the
//! fleet's time, close when its probe succeeded, hold open while another instance probes,
//! and the link through which a member tells its fleet that calls wait or that it is gone.

use std::time::Duration;

use super::*;
use crate::{
    clock::{Clock, Nanos},
    events::{Cause, Transition},
    sync::lock,
    State,
};

/// What a fleet attaches to a member ([`Handle::fleet_attach`](crate::Handle::fleet_attach)):
/// told once when a call is refused because another instance may probe, told each of the
/// breaker's transitions, and dropped with the breaker or when it joins another fleet (its
/// `Drop` is how the member leaves the fleet). They run on the caller's thread, under the
/// breaker's lock: they must only send, never wait.
#[doc(hidden)]
pub trait FleetLink: Send {
    /// The member this link is: unique in the process. The fleet's hooks name it, and do
    /// nothing to a breaker whose link is another's (it left that fleet).
    fn member(&self) -> u64;
    /// A call was refused by the fleet's gate since the fleet last gated or granted.
    fn wanted(&self);
    /// The breaker made a transition (each told once, in order, after the hook).
    fn transition(&self, t: &Transition);
}

impl Inner {
    /// A call was refused by the gate: tell the fleet once per gating.
    pub(super) fn fleet_wanted(&mut self) {
        if !self.wanted {
            self.wanted = true;
            if let Some(link) = &self.fleet {
                link.wanted();
            }
        }
    }
}

impl Inner {
    /// Whether `member` is this breaker's fleet link now (a fleet it left has no say).
    fn member_is(&self, member: u64) -> bool {
        self.fleet.as_ref().is_some_and(|l| l.member() == member)
    }
}

impl Core {
    /// Tells the fleet link, if any, of a transition (from the dispatcher, in order).
    pub(super) fn fleet_announce(&self, t: &Transition) {
        // A dry run never publishes to its fleet (a fleet does not take a dry-run breaker in;
        // this one was switched to a dry run by `reconfigure` after it joined).
        if t.dry_run {
            return;
        }
        let inner = lock(&self.inner);
        if let Some(link) = &inner.fleet {
            link.transition(t);
        }
    }

    /// The longest the fleet may hold this breaker open for an opening it heard: the
    /// longest it would open by itself, its longest cool-off (`max_cool_off`, else its
    /// cool-off, with jitter) or what caps an `OpenFor` of its own (`max_cool_off`, else
    /// the engine's default cap), whichever is longer.
    pub(crate) fn fleet_cap(&self) -> Nanos {
        let settings = self.live.resolved();
        let policy = &settings.policy;
        let own = policy
            .cool_off_after(u32::MAX)
            .saturating_add(policy.jitter);
        own.max(self.cap_open_for(Nanos::MAX))
    }

    /// Fleet: open for `open_for` (another instance opened), from closed or half-open.
    /// Already open: the fleet's time replaces what the fleet set before (it may shorten
    /// it: a resync found the fleet's open key shorter or gone), never below the breaker's
    /// own cool-off. Forced-open and disabled breakers are the operator's: left alone. The
    /// time is capped ([`fleet_cap`](Self::fleet_cap)): an opening heard from another
    /// instance cannot park this one longer than it would park itself. A closed key of
    /// a keyed breaker opens only with a place under its `max_open_percent`, as for an
    /// opening of its own: without one it stays closed, still counting.
    pub(crate) fn fleet_open(&self, open_for: Nanos, member: u64, clock: &impl Clock) {
        let open_for = open_for.min(self.fleet_cap());
        // Asked outside the lock (it may log), as `trip` does.
        let placed = self.peek() != State::Closed || self.may_open();
        let mut inner = lock(&self.inner);
        let w = self.word();
        if !inner.member_is(member) || !placed {
            drop(inner);
            if placed && !matches!(self.peek(), State::Open | State::HalfOpen) {
                self.left_open(); // a place taken for nothing: given back
            }
            return;
        }
        let now = clock.now();
        let until = now.saturating_add(open_for);
        let moved = match w.state() {
            State::Closed | State::HalfOpen => true,
            State::Open => {
                let generation = w.generation();
                if inner.fleet_floor.0 != generation {
                    // First touch of an opening of its own: that end is the floor.
                    inner.fleet_floor = (generation, self.open_until.load(Acquire));
                }
                self.open_until
                    .store(until.max(inner.fleet_floor.1), Release);
                false
            }
            State::ForcedOpen | State::Disabled => false,
        };
        if moved {
            let next = self.transition(&mut inner, w, State::Open, Cause::Fleet, now);
            // The fleet's time, not this instance's cool-off; all of it the fleet's.
            self.open_until.store(until, Release);
            inner.fleet_floor = (next.generation(), 0);
            if let Some(last) = inner.events.back_mut() {
                last.cool_off = Some(Duration::from_nanos(open_for));
            }
        }
        drop(inner);
        if moved {
            self.dispatch();
        } else {
            self.wake_waiters(); // the open end moved
        }
    }

    /// Fleet: closes an open or half-open breaker (the fleet's probe succeeded).
    pub(crate) fn fleet_close(&self, member: u64, clock: &impl Clock) {
        let mut inner = lock(&self.inner);
        let w = self.word();
        let moved = inner.member_is(member) && matches!(w.state(), State::Open | State::HalfOpen);
        if moved {
            self.transition(&mut inner, w, State::Closed, Cause::Fleet, clock.now());
        }
        drop(inner);
        if moved {
            self.dispatch();
        }
    }

    /// Fleet: while `on`, an open breaker whose cool-off ended stays open until
    /// [`fleet_grant_probe`](Self::fleet_grant_probe): one instance of the fleet probes.
    pub(crate) fn fleet_gate(&self, on: bool, member: u64) {
        let mut inner = lock(&self.inner);
        if !inner.member_is(member) {
            return;
        }
        inner.gated = on;
        // Gated anew: a grant not yet used is taken back (the fleet's probe lease lapsed),
        // and the next refused call tells the fleet again.
        inner.granted = false;
        inner.wanted = false;
        drop(inner);
        self.wake_waiters(); // released: the breaker may admit
    }

    /// Fleet: the next call after the cool-off may become a probe (this instance holds the
    /// fleet's probe lease). Cleared by the next transition.
    pub(crate) fn fleet_grant_probe(&self, member: u64) {
        let mut inner = lock(&self.inner);
        if !inner.member_is(member) {
            return;
        }
        inner.granted = true;
        inner.wanted = false;
        drop(inner);
        self.wake_waiters(); // granted: the breaker admits a probe
    }

    /// Fleet: attaches the fleet's link, replacing one attached before: leaving that fleet
    /// releases its gate (a breaker follows only the fleet it joined last).
    pub(crate) fn fleet_attach(&self, link: Box<dyn FleetLink>) {
        let mut inner = lock(&self.inner);
        let old = inner.fleet.replace(link);
        inner.gated = false;
        inner.granted = false;
        inner.wanted = false;
        drop(inner);
        drop(old); // outside the lock: its `Drop` sends
        self.wake_waiters(); // an old fleet's gate released
    }

    /// Fleet: whether the gate holds this breaker open and a call was refused meanwhile.
    pub(crate) fn fleet_wanted(&self, member: u64) -> bool {
        let inner = lock(&self.inner);
        inner.member_is(member) && inner.gated && inner.wanted
    }
}
