//! The hooks a fleet (`breaker::fleet`) drives from its background task: open for the
//! fleet's time, close when its probe succeeded, hold open while another instance probes.

use std::time::Duration;

use super::*;
use crate::{
    clock::{Clock, Nanos},
    events::Cause,
    sync::lock,
    State,
};

impl Core {
    /// Fleet: opens now for `open_for` (another instance opened), from closed or half-open.
    /// Forced-open and disabled breakers are the operator's: left alone.
    pub(crate) fn fleet_open(&self, open_for: Nanos, clock: &impl Clock) {
        let mut inner = lock(&self.inner);
        let w = self.word();
        let now = clock.now();
        let moved = match w.state() {
            State::Closed | State::HalfOpen => true,
            // Already open: stay open at least as long as the fleet says.
            State::Open => {
                let until = now.saturating_add(open_for);
                if until > self.open_until.load(Acquire) {
                    self.open_until.store(until, Release);
                }
                false
            }
            State::ForcedOpen | State::Disabled => false,
        };
        if moved {
            self.transition(&mut inner, w, State::Open, Cause::Fleet, now);
            // The fleet's time, not this instance's cool-off.
            self.open_until.store(now.saturating_add(open_for), Release);
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
        // Gated anew: a grant not yet used is taken back (the fleet's probe lease lapsed).
        inner.granted = false;
    }

    /// Fleet: the next call after the cool-off may become a probe (this instance holds the
    /// fleet's probe lease). Cleared by the next transition.
    pub(crate) fn fleet_grant_probe(&self) {
        lock(&self.inner).granted = true;
    }
}
