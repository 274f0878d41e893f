//! The breaker's own probe (`Config::probe`), engine side: its one task's place in the engine
//! ([`Task`]), and what the task may do next ([`Turn`]), under the same lease as any probe.
//! The task itself is `crate::probe`'s.

use super::*;
use crate::{clock::Clock, events::Transition, stats::Count, sync::lock, State};

/// Starts the breaker's own probe task at an opening: set once, only on a breaker with a
/// `probe` (one closure over a weak reference; no task until it opens).
pub(crate) type Prober = Box<dyn Fn() + Send + Sync>;

/// The running probe task's place, in [`Inner`]: the task stops when this is dropped (with
/// the breaker, or when the task stands down), and no second task starts while it is held
/// by a live task.
pub(crate) type Task = tokio::sync::oneshot::Sender<()>;

/// What the probe task is told to stop by: the breaker (its [`Task`]) was dropped.
pub(crate) type Stop = tokio::sync::oneshot::Receiver<()>;

/// What the probe task does next.
#[derive(Debug)]
pub(crate) enum Turn {
    /// Probe now: the admission holds a probe slot (and its lease).
    Go(Admission),
    /// The cool-off (maybe lengthened by the fleet), or the earliest lease of a half-open
    /// breaker whose slots are all held, has this long to run: ask again then.
    Wait(Nanos),
    /// The fleet holds the breaker open while its probe lease is decided (it was told a
    /// call waits): ask again soon.
    Gated,
    /// Nothing to probe (closed, disabled or forced open): the task has stood down.
    Done,
}

impl Core {
    /// Makes this breaker start its own probe at each opening.
    pub(crate) fn set_prober(&self, prober: Prober) {
        let _ = self.inner.cold().prober.set(prober);
    }

    /// An opening was announced: start the probe task, unless one runs (from the
    /// dispatcher, outside the lock).
    pub(super) fn probe_announce(&self, t: &Transition) {
        if t.to != State::Open {
            return;
        }
        if let Some(prober) = self.inner.made().and_then(|cold| cold.prober.get()) {
            prober();
        }
    }

    /// Takes the probe task's place, if no live task holds it: the new task is told to stop
    /// by what this returns. A task whose runtime shut down (its [`Stop`] dropped) does not
    /// hold it.
    pub(crate) fn probe_task(&self) -> Option<Stop> {
        let mut inner = lock(&self.inner);
        if inner.probe_task.as_ref().is_some_and(|t| !t.is_closed()) {
            return None; // the running task sees every opening: it reads the state itself
        }
        let (task, stop) = tokio::sync::oneshot::channel();
        inner.probe_task = Some(task);
        Some(stop)
    }

    /// The probe task's next step: while the breaker is open, wait out the cool-off, then
    /// take a probe slot as a call would (moving the breaker to half-open, or waiting for
    /// the fleet's grant), counted as an admitted call; while half-open, take a free slot,
    /// or wait for the earliest lease to end (a call that came first is the probe; if it
    /// decides nothing, the task probes). Anything else: the task stands down.
    pub(crate) fn probe_turn(&self, clock: &impl Clock) -> Turn {
        let w = self.word();
        let now = clock.now();
        match w.state() {
            State::Open => {
                let until = self.open_until.load(Acquire);
                if now < until {
                    return Turn::Wait(until - now);
                }
            }
            State::HalfOpen => {}
            State::Closed | State::Disabled | State::ForcedOpen => return self.probe_stand_down(),
        }
        match self.admit_half_open(now) {
            Ok((generation, Some(probe))) => {
                self.counters.add(Count::Admitted);
                let mut admission = Admission::new(generation);
                admission.hold_probe(Some(probe), now);
                if self.live.slow_call().is_some() {
                    admission.flags |= STARTED; // from `now`, the probe's start
                }
                Turn::Go(admission)
            }
            Err(Some(left)) => Turn::Wait(left),
            Err(None) if self.peek() == State::Open => Turn::Gated,
            Ok((_, None)) | Err(None) => self.probe_stand_down(),
        }
    }

    /// Ends the probe task's run when there is nothing to probe, under the lock, so an
    /// opening either finds the task gone (and starts one) or is seen by it.
    fn probe_stand_down(&self) -> Turn {
        let mut inner = lock(&self.inner);
        if matches!(self.peek(), State::Open | State::HalfOpen) {
            return Turn::Gated; // moved meanwhile: look again soon
        }
        inner.probe_task = None;
        Turn::Done
    }
}
