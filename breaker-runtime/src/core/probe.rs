//! The breaker's own probe (`Config::probe`), engine side: after an opening, what the probe
//! task may do next ([`Turn`]), under the same lease as any probe. The task itself is
//! `crate::probe`'s.

use super::*;
use crate::{clock::Clock, events::Transition, stats::Count, State};

/// Starts the breaker's own probe for the opening of a generation: set once, only on a
/// breaker with a `probe` (one closure over a weak reference; no task until it opens).
pub(crate) type Prober = Box<dyn Fn(u64) + Send + Sync>;

/// What the probe task does next, for the opening it was started for.
#[derive(Debug)]
pub(crate) enum Turn {
    /// Probe now: the admission holds a probe slot (and its lease).
    Go(Admission),
    /// The cool-off (maybe lengthened by the fleet) has this long to run: ask again then.
    Wait(Nanos),
    /// The fleet holds the breaker open while its probe lease is decided (it was told a
    /// call waits): ask again soon.
    Gated,
    /// Nothing to do: the opening is over, or calls hold every probe slot.
    Done,
}

impl Core {
    /// The generation in force.
    pub(crate) fn generation(&self) -> u64 {
        self.word().generation()
    }

    /// Makes this breaker start its own probe at each opening.
    pub(crate) fn set_prober(&self, prober: Prober) {
        let _ = self.inner.cold().prober.set(prober);
    }

    /// An opening was announced: start the probe for it (from the dispatcher, outside the
    /// lock).
    pub(super) fn probe_announce(&self, t: &Transition) {
        if t.to != State::Open {
            return;
        }
        if let Some(prober) = self.inner.made().and_then(|cold| cold.prober.get()) {
            prober(t.generation);
        }
    }

    /// The probe task's next step for the opening of generation `opened`: once the
    /// cool-off ends, it takes a probe slot as a call would (moving the breaker to
    /// half-open, or waiting for the fleet's grant), counted as an admitted call.
    pub(crate) fn probe_turn(&self, opened: u64, clock: &impl Clock) -> Turn {
        let half_open = Word::new(State::Open, opened).next(State::HalfOpen);
        let w = self.word();
        if w != Word::new(State::Open, opened) && w != half_open {
            return Turn::Done;
        }
        let now = clock.now();
        if w.is(State::Open) {
            let until = self.open_until.load(Acquire);
            if now < until {
                return Turn::Wait(until - now);
            }
        }
        match self.admit_half_open(now) {
            Ok((generation, Some(probe))) if generation == half_open.generation() => {
                self.counters.add(Count::Admitted);
                let mut admission = Admission::new(generation);
                admission.hold_probe(Some(probe), now);
                if self.live.slow_call().is_some() {
                    admission.flags |= STARTED; // from `now`, the probe's start
                }
                Turn::Go(admission)
            }
            Ok((generation, Some(probe))) => {
                // Another opening's half-open: not ours to probe.
                self.finish_probe(generation, probe, Outcome::Cancelled, clock);
                Turn::Done
            }
            Err(Some(left)) if self.peek() == State::Open => Turn::Wait(left),
            Err(None) if self.peek() == State::Open => Turn::Gated,
            Ok((_, None)) | Err(_) => Turn::Done,
        }
    }
}
