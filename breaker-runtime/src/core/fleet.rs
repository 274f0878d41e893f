//! The hooks a fleet (`breaker::fleet`) drives from its background task: open for the
//! fleet's time, close when its probe succeeded, hold open while another instance probes,
//! and the link through which a member tells its fleet that calls wait or that it is gone.

use std::time::Duration;

use super::*;
use crate::{
    clock::{Clock, Nanos},
    events::Cause,
    sync::lock,
    State,
};

/// What a fleet attaches to a member ([`Handle::fleet_attach`](crate::Handle::fleet_attach)):
/// told once when a call is refused because another instance may probe, and dropped with the
/// breaker (its `Drop` is how the member leaves the fleet). Both run on the caller's thread,
/// `wanted` under the breaker's lock: they must only send, never wait.
#[doc(hidden)]
pub trait FleetLink: Send {
    /// A call was refused by the fleet's gate since the fleet last gated or granted.
    fn wanted(&self);
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

impl Core {
    /// Fleet: open now for `open_for` (another instance opened), from closed or half-open.
    /// Already open: the fleet's time replaces what the fleet set before (it may shorten
    /// it: a resync found the fleet's open key shorter or gone), never below the breaker's
    /// own cool-off. Forced-open and disabled breakers are the operator's: left alone.
    pub(crate) fn fleet_open(&self, open_for: Nanos, clock: &impl Clock) {
        let mut inner = lock(&self.inner);
        let w = self.word();
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
        }
    }

    /// Fleet: closes an open or half-open breaker (the fleet's probe succeeded).
    pub(crate) fn fleet_close(&self, clock: &impl Clock) {
        let mut inner = lock(&self.inner);
        let w = self.word();
        let moved = matches!(w.state(), State::Open | State::HalfOpen);
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
    pub(crate) fn fleet_gate(&self, on: bool) {
        let mut inner = lock(&self.inner);
        inner.gated = on;
        // Gated anew: a grant not yet used is taken back (the fleet's probe lease lapsed),
        // and the next refused call tells the fleet again.
        inner.granted = false;
        inner.wanted = false;
    }

    /// Fleet: the next call after the cool-off may become a probe (this instance holds the
    /// fleet's probe lease). Cleared by the next transition.
    pub(crate) fn fleet_grant_probe(&self) {
        let mut inner = lock(&self.inner);
        inner.granted = true;
        inner.wanted = false;
    }

    /// Fleet: attaches the fleet's link (replacing one attached before).
    pub(crate) fn fleet_attach(&self, link: Box<dyn FleetLink>) {
        let old = lock(&self.inner).fleet.replace(link);
        drop(old); // outside the lock: its `Drop` sends
    }

    /// Fleet: whether the gate holds this breaker open and a call was refused meanwhile.
    pub(crate) fn fleet_wanted(&self) -> bool {
        let inner = lock(&self.inner);
        inner.gated && inner.wanted
    }
}
