//! What admission hands an admitted call, and what its outcome is reported against: a
//! [`Ticket`] on the fast path (its generation), an [`Admission`] otherwise, packed because
//! every call future carries one (24 bytes of data and a byte of flags, kept apart in the
//! future as [`Held`] and the flags).

use super::{half_open::Probe, Counting, Nanos};
use crate::state::{State, Word};

/// What admission hands an admitted call; its outcome is reported against it. Packed (24
/// bytes of data and a byte of [flags](Admission::flags)), since every call future carries
/// one: the admission time is one field for whichever of `slow_call`, the throttle, the
/// adaptive bulkhead and a probe's lease needs it (admission reads the clock once, so they
/// share one reading).
#[derive(Debug, Clone, Copy, Default)]
pub struct Admission {
    pub(super) generation: u64,
    /// When the call was admitted, if anything needs it at the outcome ([`STARTED`],
    /// [`REQUESTED`], [`SEAT`], [`PROBE`]).
    pub(super) at: Nanos,
    /// [`PROBE`]: the low 32 bits of its lease's id (ids are unique within a half-open period
    /// for 2³² leases; the slot is found by it).
    pub(super) lease: u32,
    /// [`SEAT`]: the adaptive bulkhead's calls in flight with this one, at admission.
    pub(super) in_flight: u32,
    pub(super) flags: u8,
}

/// [`Admission`]: it holds a probe slot (its lease is `lease`, taken at `at`).
pub(super) const PROBE: u8 = 1;
/// [`Admission`]: `slow_call` times it from `at`.
pub(super) const STARTED: u8 = 2;
/// [`Admission`]: it holds a (fixed) bulkhead slot.
pub(super) const BULKHEAD: u8 = 4;
/// [`Admission`]: the throttle admitted it at `at`: its request and accept join that bucket.
pub(super) const REQUESTED: u8 = 8;
/// [`Admission`]: it holds an adaptive bulkhead seat (taken at `at`, `in_flight` with it).
pub(super) const SEAT: u8 = 16;
/// [`Admission`]: a dry run's would-be refusal, made anyway: its outcome counts for nothing.
pub(super) const SHADOW: u8 = 32;

impl Admission {
    /// The admission of a call on the fast path (nothing held, nothing timed).
    #[inline(always)]
    pub(crate) fn of_ticket(ticket: Ticket) -> Admission {
        // Every field by hand, not `..default()`: no call in a debug build's call path.
        Admission {
            generation: ticket.generation(),
            at: 0,
            lease: 0,
            in_flight: 0,
            flags: 0,
        }
    }

    /// The ticket of a fast-path admission.
    #[inline(always)]
    pub(crate) fn ticket(&self) -> Ticket {
        Ticket::of_generation(self.generation)
    }

    /// Admitted in `generation`, holding nothing yet.
    pub(super) fn new(generation: u64) -> Admission {
        Admission {
            generation,
            ..Admission::default()
        }
    }

    /// The data without the flags, and the flags: a call future keeps them apart, so its
    /// own one-byte fields pack beside the flags instead of after the struct's padding.
    #[inline(always)]
    pub(crate) fn split(self) -> (Held, u8) {
        let Admission {
            generation,
            at,
            lease,
            in_flight,
            flags,
        } = self;
        (
            Held {
                generation,
                at,
                lease,
                in_flight,
            },
            flags,
        )
    }

    /// [`split`](Self::split)'s parts, joined again.
    #[inline(always)]
    pub(crate) fn join(held: Held, flags: u8) -> Admission {
        let Held {
            generation,
            at,
            lease,
            in_flight,
        } = held;
        Admission {
            generation,
            at,
            lease,
            in_flight,
            flags,
        }
    }

    pub(super) fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// The probe slot's lease it holds (with [`PROBE`]): its id's low bits and its start
    /// (see [`Probe`]).
    pub(super) fn probe(&self) -> Probe {
        Probe {
            lease: self.lease,
            since: self.at,
        }
    }

    /// Holds `probe`, claimed at `now`.
    pub(super) fn hold_probe(&mut self, probe: Option<Probe>, now: Nanos) {
        if let Some(p) = probe {
            self.lease = p.lease;
            self.at = now;
            self.flags |= PROBE;
        }
    }
}

/// An [`Admission`] without its flags (see [`Admission::split`]): 24 bytes, no padding.
/// Nominally public, as the call future's field (its module is private).
#[derive(Debug, Clone, Copy, Default)]
pub struct Held {
    pub(super) generation: u64,
    pub(super) at: Nanos,
    pub(super) lease: u32,
    pub(super) in_flight: u32,
}

impl Held {
    /// Not admitted yet. A constant rather than `default()`: a call future's constructor
    /// then makes no call that could unwind (fewer lines of code per future in a debug build).
    pub(crate) const NONE: Held = Held {
        generation: 0,
        at: 0,
        lease: 0,
        in_flight: 0,
    };

    /// A fast-path admission's: its generation (one store; the rest stays as made).
    #[inline(always)]
    pub(crate) fn set_ticket(&mut self, ticket: Ticket) {
        self.generation = ticket.generation();
    }

    /// The ticket of a fast-path admission kept here.
    #[inline(always)]
    pub(crate) fn ticket(&self) -> Ticket {
        Ticket::of_generation(self.generation)
    }
}

/// A call admitted on the fast path (closed, simple policy): its generation, kept as the
/// word admission read (the generation shifted out only where it is used: a blocking call's
/// closed path then has no shift to make, and keeps the word it had). `Send`, so an async
/// call's future can keep it while it moves between threads.
/// Dropping it unreported is a cancellation, which on this path has nothing to give back.
#[derive(Debug, Clone, Copy)]
pub struct Ticket {
    word: Word,
}

impl Ticket {
    #[inline(always)]
    pub(super) fn of_word(word: Word) -> Ticket {
        Ticket { word }
    }

    #[inline(always)]
    fn of_generation(generation: u64) -> Ticket {
        Ticket {
            word: Word::new(State::Closed, generation),
        }
    }

    /// The generation the call was admitted in.
    #[inline(always)]
    pub(crate) fn generation(self) -> u64 {
        self.word.generation()
    }
}

/// A fast-path admission with the admitting thread's stripe, found once: three words, kept
/// in registers. `!Send` (through [`Counting`]): only the admitting thread can count its
/// outcome on that stripe ([`Core::succeeded_here`]); a call that may move takes
/// [`LocalTicket::ticket`].
#[derive(Clone, Copy)]
pub(crate) struct LocalTicket<'a> {
    pub(super) ticket: Ticket,
    pub(super) counting: Counting<'a>,
}

impl LocalTicket<'_> {
    /// The ticket alone, for a call whose outcome may be reported on another thread.
    #[inline(always)]
    pub(crate) fn ticket(self) -> Ticket {
        self.ticket
    }
}
