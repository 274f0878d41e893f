//! Transitions: moving the word and preparing what the new state needs, reading the state
//! (which moves an open breaker whose cool-off ended), `retry_in`, the failure rate, and
//! manual control.

use std::time::Duration;

use super::*;
use crate::{
    clock::{Clock, Nanos},
    events::{Cause, Transition},
    sync::lock,
    window::Tally,
    State,
};

/// The longest an `OpenFor` opens without `max_cool_off`: 5 minutes, Envoy's default
/// maximum ejection time. One answer (a `Retry-After: 3600`, a date in the year 9999) is
/// what any server, or anyone in the path, can send; it must not park a dependency, every
/// path of its host, for an hour (issue 35, where part three had one hour).
const UNSET_OPEN_FOR_CAP: Nanos = 300_000_000_000;

impl Core {
    /// Moves the word from `from` to `to` and prepares what `to` needs; queues the event.
    /// Must hold the lock, with `from` the word read under it. An opening caused by a
    /// [`Cause::Verdict`] lasts exactly what the dependency asked for (at most `max_cool_off`
    /// or 5 minutes), without jitter; one that asked for zero opens as a failure would (the
    /// cool-off with its backoff and jitter).
    pub(super) fn transition(
        &self,
        inner: &mut Inner,
        from: Word,
        to: State,
        cause: Cause,
        now: Nanos,
    ) -> Word {
        let open_for = match cause {
            Cause::Verdict { open_for } | Cause::Outlier { open_for, .. } => {
                Some(crate::clock::to_nanos(open_for))
            }
            _ => None,
        };
        let next = from.next(to);
        let mut cool_off = None;
        // Emptied: the next half-open period makes `probes` slots, as configured then.
        inner.leases.clear();
        inner.probe_successes = 0;
        inner.granted = false;
        if !matches!(to, State::Open | State::HalfOpen) {
            self.left_open(); // keyed `max_open`: its place among the open keys is free
        }
        match to {
            State::Open => {
                let total = match open_for {
                    // An ejection's time is its own (`max_ejection_time`, jitter included).
                    Some(ejected) if matches!(cause, Cause::Outlier { .. }) => ejected,
                    Some(asked) if asked > 0 => self.cap_open_for(asked),
                    _ => {
                        let settings = self.live.resolved();
                        let base = settings.policy.cool_off_after(inner.reopenings);
                        let jitter = match settings.policy.jitter {
                            0 => 0,
                            j => jitter::next_random(&mut inner.rng) % j.saturating_add(1),
                        };
                        base.saturating_add(jitter)
                    }
                };
                cool_off = Some(Duration::from_nanos(total));
                self.open_until.store(now.saturating_add(total), Release);
                self.make_refusal_names();
            }
            State::Closed | State::Disabled => {
                inner.reopenings = 0;
                self.streak.store(streak_tag(next.generation()), Release);
                // Both: a window `reconfigure` turns off leaves the rate to the counts.
                if let Some(ring) = self.ring() {
                    ring.restart(next.generation());
                }
                let stats = self.counters.read();
                inner.closed_at = (stats.successes, stats.failures);
            }
            State::ForcedOpen => self.make_refusal_names(),
            State::HalfOpen => {}
        }
        if let Some(o) = self.overload() {
            // A recovery ramp follows a probe's success (this instance's or the fleet's).
            let ramp = to == State::Closed
                && matches!(cause, Cause::ProbesSucceeded { .. } | Cause::Fleet);
            o.on_transition(ramp, now);
        }
        self.word.store(next.0, Release);
        if from.state() != to || open_for.is_some() {
            if inner.events.len() >= MAX_QUEUED {
                inner.events.pop_front();
            }
            inner.events.push_back(Transition {
                name: self.name.clone(),
                from: from.state(),
                to,
                generation: next.generation(),
                cause,
                cool_off,
                dry_run: self.dry_run(),
            });
        }
        next
    }

    /// The state, moving an open breaker whose cool-off ended to half-open (one event).
    pub(crate) fn state(&self, clock: &impl Clock) -> State {
        let w = self.word();
        if w.state() != State::Open {
            return w.state();
        }
        let now = clock.now();
        if now < self.open_until.load(Acquire) {
            return State::Open;
        }
        let mut inner = lock(&self.inner);
        let w = self.word();
        // A fleet's gate holds it open, as in `admit_half_open`.
        let moved = w.state() == State::Open
            && now >= self.open_until.load(Acquire)
            && !inner.fleet_holds_open();
        let state = if moved {
            self.transition(&mut inner, w, State::HalfOpen, Cause::CoolOffElapsed, now)
                .state()
        } else {
            w.state()
        };
        drop(inner);
        if moved {
            self.dispatch();
        }
        state
    }

    /// How long until a call is admitted: the cool-off left when open; the earliest lease's
    /// end when half-open with every slot taken; `None` otherwise (and when forced open).
    pub(crate) fn retry_in(&self, clock: &impl Clock) -> Option<Duration> {
        let now = clock.now();
        let left = match self.state(clock) {
            State::Open => Some(self.open_until.load(Acquire).saturating_sub(now)),
            State::HalfOpen => {
                let inner = lock(&self.inner);
                let mut leases = inner.leases.iter();
                if leases.all(|l| l.is_some_and(|l| l.until > now)) {
                    inner.leases.iter().flatten().map(|l| l.until - now).min()
                } else {
                    None
                }
            }
            State::Closed | State::Disabled | State::ForcedOpen => None,
        };
        left.map(Duration::from_nanos)
    }

    /// The failed share of the current window in percent, 0 when empty. Without a window
    /// (`failure_rate` not set), the calls since the breaker last closed serve as the window:
    /// the counts it keeps anyway, so the closed path pays nothing for it.
    pub(crate) fn failure_rate(&self, clock: &impl Clock) -> f64 {
        let tally = match (self.ring(), self.live.window()) {
            (Some(ring), Some(_)) => ring.tally_at(|| clock.now()),
            _ => {
                let (successes, failures) = self.inner.closed_at();
                let now = self.counters.read();
                let failures = now.failures.saturating_sub(failures);
                Tally {
                    calls: now.successes.saturating_sub(successes) + failures,
                    failures,
                }
            }
        };
        tally.rate()
    }

    /// Manual control: `force_open`, `disable` or `reset` (to `Closed`, counts cleared).
    pub(crate) fn set(&self, to: State, clock: &impl Clock) {
        let mut inner = lock(&self.inner);
        let w = self.word();
        if to == State::Closed {
            *lock(&self.inner.cold().base) = Some(self.counters.read());
            if let Some(o) = self.overload() {
                o.clear();
            }
        } else if w.state() == to {
            return;
        }
        self.transition(&mut inner, w, to, Cause::Manual, clock.now());
        drop(inner);
        self.dispatch();
    }

    /// How long an [`Outcome::OpenFor`] of more than zero opens: what it asked, at most
    /// `max_cool_off` when set, else [`UNSET_OPEN_FOR_CAP`]. Not raised to the cool-off: a
    /// server that says `Retry-After: 2` is back in 2 s, and waiting the default 10 s would
    /// keep a recovered server idle.
    pub(super) fn cap_open_for(&self, asked: Nanos) -> Nanos {
        asked.min(
            self.live
                .resolved()
                .policy
                .max_cool_off
                .unwrap_or(UNSET_OPEN_FOR_CAP),
        )
    }
}
