//! An admitted call's duty to report its outcome exactly once, and what it reports to.

use super::*;
use crate::{clock::Clock, BreakerError};

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
/// dropped future gives back its probe and bulkhead slots and records nothing.
pub struct Permit<H: Engine> {
    host: H,
    admission: Option<Admission>,
}

impl<'a, C: Clock> Permit<(&'a Core, &'a C)> {
    #[cfg(test)]
    pub(crate) fn acquire(core: &'a Core, clock: &'a C) -> Result<Self, BreakerError> {
        Permit::acquire_in((core, clock))
    }

    /// The permit of a call admitted on the fast path, for the outcomes that are no success.
    #[cfg(test)]
    pub(crate) fn from_ticket(core: &'a Core, clock: &'a C, ticket: Ticket) -> Self {
        Permit::from_ticket_in((core, clock), ticket)
    }
}

impl<H: Engine> Permit<H> {
    pub(crate) fn acquire_in(host: H) -> Result<Self, BreakerError> {
        let admission = host.core().admit(host.clock())?;
        Ok(Permit {
            host,
            admission: Some(admission),
        })
    }

    pub(crate) fn from_ticket_in(host: H, ticket: Ticket) -> Self {
        let admission = Admission {
            generation: ticket.generation,
            probe: None,
            started: None,
            bulkhead: false,
            shed: Shed::default(),
        };
        Permit {
            host,
            admission: Some(admission),
        }
    }

    /// The permit of an admission made elsewhere (the breaker's own probe).
    pub(crate) fn admitted_in(host: H, admission: Admission) -> Self {
        Permit {
            host,
            admission: Some(admission),
        }
    }

    /// The breaker's name.
    pub(crate) fn name(&self) -> &Name {
        &self.host.core().name
    }

    pub(crate) fn finish(mut self, outcome: Outcome) {
        if let Some(a) = self.admission.take() {
            self.host.core().finish(a, outcome, self.host.clock());
        }
    }
}

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
