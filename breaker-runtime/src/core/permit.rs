//! An admitted call's duty to report its outcome exactly once, and what it reports to.

use super::*;
use crate::clock::Clock;
#[cfg(test)]
use crate::BreakerError;

/// What a `Permit` reports to: a core and its clock, borrowed or owned (an owned call
/// future holds its breaker). Nominally public so the call future can name it in its bounds;
/// its module is private.
pub trait Engine {
    /// The clock.
    type Clock: Clock;
    /// The engine.
    fn core(&self) -> &Core;
    /// Its clock.
    fn clock(&self) -> &Self::Clock;
}

impl<C: Clock> Engine for (&Core, &C) {
    type Clock = C;
    #[inline(always)]
    fn core(&self) -> &Core {
        self.0
    }
    #[inline(always)]
    fn clock(&self) -> &C {
        self.1
    }
}

/// An admitted call's right to report: reports `Cancelled` if dropped unreported, so a
/// dropped future gives back its probe and bulkhead slots and records nothing. The engine's
/// tests' (the call paths keep their admission in their own frame or future, the probe task
/// by a weak reference).
#[cfg(test)]
pub struct Permit<H: Engine> {
    host: H,
    admission: Option<Admission>,
}

/// Admission with a permit, for the engine's tests (the call paths keep their admission in
/// their own frame or future, with the breaker they already hold: `Shared::admit`).
#[cfg(test)]
impl<'a, C: Clock> Permit<(&'a Core, &'a C)> {
    pub(crate) fn acquire(core: &'a Core, clock: &'a C) -> Result<Self, BreakerError> {
        let admission = core.admit(clock)?;
        Ok(Permit::admitted_in((core, clock), admission))
    }

    /// The permit of a call admitted on the fast path, for the outcomes that are no success.
    pub(crate) fn from_ticket(core: &'a Core, clock: &'a C, ticket: Ticket) -> Self {
        Permit::admitted_in((core, clock), Admission::of_ticket(ticket))
    }
}

#[cfg(test)]
impl<H: Engine> Permit<H> {
    /// The permit of an admission made elsewhere.
    pub(crate) fn admitted_in(host: H, admission: Admission) -> Self {
        Permit {
            host,
            admission: Some(admission),
        }
    }

    pub(crate) fn finish(mut self, outcome: Outcome) {
        if let Some(a) = self.admission.take() {
            self.host.core().finish(a, outcome, self.host.clock());
        }
    }
}

#[cfg(test)]
impl<H: Engine> Drop for Permit<H> {
    // Out of line: keeps the drop glue of a call future (which holds a permit) small
    // enough to inline where the call was on the fast path.
    #[inline(never)]
    fn drop(&mut self) {
        if let Some(a) = self.admission.take() {
            self.host
                .core()
                .finish(a, Outcome::Cancelled, self.host.clock());
        }
    }
}
