//! A reference model: DESIGN.md's *Semantics* written as plain sequential code, and a
//! property test that drives random sequences of calls, outcomes, cancellations, clock
//! advances and manual controls through it and through the engine, checking after every
//! step that admissions, state, counts and held slots agree.

use std::collections::VecDeque;

use proptest::prelude::*;

use crate::{
    clock::FakeClock,
    core::{Core, Outcome, Permit, Ticket},
    BreakerError, Config, State, Stats,
};

const MS: u64 = 1_000_000;

/// The configuration knobs the model covers (jitter is random, timeouts need a runtime:
/// both have their own tests).
#[derive(Debug, Clone)]
struct Knobs {
    threshold: Option<u32>,
    rate: Option<(u32, u32, u32)>, // percent, window calls, min calls
    cool_off: u64,
    max_cool_off: Option<u64>,
    probes: u32,
    success_threshold: u32,
    max_concurrent: Option<u32>,
    slow_call: Option<u64>,
}

impl Knobs {
    fn config(&self) -> Config {
        let ms = |n: u64| std::time::Duration::from_nanos(n);
        let mut c = Config::default()
            .cool_off(ms(self.cool_off))
            .probes(self.probes)
            .success_threshold(self.success_threshold);
        if let Some(t) = self.threshold {
            c = c.threshold(t);
        }
        if let Some((percent, window, min)) = self.rate {
            c = c.failure_rate(percent).window_calls(window).min_calls(min);
        }
        if let Some(cap) = self.max_cool_off {
            c = c.max_cool_off(ms(cap));
        }
        if let Some(n) = self.max_concurrent {
            c = c.max_concurrent(n);
        }
        if let Some(s) = self.slow_call {
            c = c.slow_call(ms(s));
        }
        c
    }
}

fn knobs() -> impl Strategy<Value = Knobs> {
    (
        prop::option::of(1u32..4),
        prop::option::of((30u32..=80, 2u32..6, 1u32..6)),
        1u64..5,
        prop::option::of(5u64..20),
        1u32..4,
        1u32..4,
        prop::option::of(1u32..4),
        prop::option::of(1u64..4),
    )
        .prop_map(
            |(threshold, rate, cool, cap, probes, st, max, slow)| Knobs {
                // With neither, the default threshold of 5 applies.
                threshold: if rate.is_none() {
                    threshold.or(Some(5))
                } else {
                    threshold
                },
                rate: rate.map(|(p, w, m)| (p, w, m.min(w))),
                cool_off: cool * 1000 * MS,
                max_cool_off: cap.map(|c| c * 1000 * MS),
                probes,
                success_threshold: st,
                max_concurrent: max,
                slow_call: slow.map(|s| s * 1000 * MS),
            },
        )
}

#[derive(Debug, Clone)]
enum Op {
    /// Admit a call; `true`: try the fast path first, as the call wrappers do.
    Admit(bool),
    Finish(usize, Outcome),
    Advance(u64),
    ReadState,
    Manual(State),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => any::<bool>().prop_map(Op::Admit),
        4 => (any::<usize>(), prop_oneof![
            3 => Just(Outcome::Success),
            3 => Just(Outcome::Failure),
            1 => Just(Outcome::Neutral),
            1 => Just(Outcome::Cancelled),
        ]).prop_map(|(i, o)| Op::Finish(i, o)),
        // Quarter-second steps land exactly on cool-off, lease and slow-call boundaries.
        2 => (1u64..12).prop_map(|q| Op::Advance(q * 250 * MS)),
        1 => Just(Op::ReadState),
        1 => prop_oneof![Just(State::ForcedOpen), Just(State::Disabled), Just(State::Closed)]
            .prop_map(Op::Manual),
    ]
}

/// An admitted call in the model.
#[derive(Debug, Clone, Copy)]
struct Call {
    generation: u64,
    probe: Option<(usize, u64, u64)>,
    started: u64,
    bulkhead: bool,
}

/// What the model says of an admission.
#[derive(Debug, Clone, PartialEq)]
enum Admitted {
    Yes,
    Open(Option<u64>),
    Full,
}

struct Model {
    k: Knobs,
    state: State,
    generation: u64,
    open_until: u64,
    streak: u32,
    window: VecDeque<bool>,
    probe_successes: u32,
    reopenings: u32,
    leases: Vec<Option<(u64, u64)>>,
    next_ticket: u64,
    in_flight: u32,
    stats: Stats,
}

impl Model {
    fn new(k: Knobs) -> Model {
        Model {
            leases: vec![None; k.probes as usize],
            k,
            state: State::Closed,
            generation: 0,
            open_until: 0,
            streak: 0,
            window: VecDeque::new(),
            probe_successes: 0,
            reopenings: 0,
            next_ticket: 1,
            in_flight: 0,
            stats: Stats::default(),
        }
    }

    fn cool_off(&self) -> u64 {
        match self.k.max_cool_off {
            None => self.k.cool_off,
            Some(cap) => (self.k.cool_off << self.reopenings.min(40)).min(cap),
        }
    }

    fn to(&mut self, to: State, now: u64) {
        self.generation += 1;
        self.leases.iter_mut().for_each(|l| *l = None);
        self.probe_successes = 0;
        match to {
            State::Open => self.open_until = now + self.cool_off(),
            State::Closed | State::Disabled => {
                self.reopenings = 0;
                self.streak = 0;
                self.window.clear();
            }
            _ => {}
        }
        self.state = to;
    }

    fn read_state(&mut self, now: u64) -> State {
        if self.state == State::Open && now >= self.open_until {
            self.to(State::HalfOpen, now);
        }
        self.state
    }

    fn admit(&mut self, now: u64) -> (Admitted, Option<Call>) {
        let mut probe = None;
        match self.read_state(now) {
            State::Closed | State::Disabled => {}
            State::ForcedOpen => {
                self.stats.rejected += 1;
                self.stats.calls += 1;
                return (Admitted::Open(None), None);
            }
            State::Open => {
                self.stats.rejected += 1;
                self.stats.calls += 1;
                return (Admitted::Open(Some(self.open_until - now)), None);
            }
            State::HalfOpen => {
                let free = self
                    .leases
                    .iter()
                    .position(|l| l.is_none_or(|(_, until)| until <= now));
                match free {
                    Some(slot) => {
                        let ticket = self.next_ticket;
                        self.next_ticket += 1;
                        let until = now + self.k.cool_off;
                        self.leases[slot] = Some((ticket, until));
                        probe = Some((slot, ticket, until));
                    }
                    None => {
                        self.stats.rejected += 1;
                        self.stats.calls += 1;
                        let earliest = self.leases.iter().flatten().map(|l| l.1).min();
                        return (Admitted::Open(earliest.map(|u| u - now)), None);
                    }
                }
            }
        }
        let bulkhead = self
            .k
            .max_concurrent
            .filter(|_| self.state != State::Disabled);
        if let Some(max) = bulkhead {
            if self.in_flight >= max {
                if let Some((slot, _, _)) = probe {
                    self.leases[slot] = None;
                }
                self.stats.rejected += 1;
                self.stats.calls += 1;
                return (Admitted::Full, None);
            }
            self.in_flight += 1;
        }
        self.stats.calls += 1;
        let call = Call {
            generation: self.generation,
            probe,
            started: now,
            bulkhead: bulkhead.is_some(),
        };
        (Admitted::Yes, Some(call))
    }

    fn finish(&mut self, call: Call, outcome: Outcome, now: u64) {
        let outcome = match self.k.slow_call {
            Some(slow) if now - call.started >= slow => {
                if outcome == Outcome::Cancelled {
                    self.stats.abandoned += 1;
                }
                Outcome::Slow
            }
            _ => outcome,
        };
        match outcome {
            Outcome::Success => self.stats.successes += 1,
            Outcome::Failure => self.stats.failures += 1,
            Outcome::Slow => {
                self.stats.failures += 1;
                self.stats.slow_calls += 1;
            }
            Outcome::Neutral => self.stats.neutral += 1,
            Outcome::Cancelled => self.stats.cancelled += 1,
            _ => {}
        }
        if call.bulkhead {
            self.in_flight -= 1;
        }
        let failed = matches!(outcome, Outcome::Failure | Outcome::Slow);
        if let Some((slot, ticket, _until)) = call.probe {
            if self.leases[slot].map(|l| l.0) == Some(ticket) {
                self.leases[slot] = None;
            } else if outcome != Outcome::Timeout {
                return; // late, after its slot was taken over
            }
            if self.state != State::HalfOpen || self.generation != call.generation {
                return;
            }
            if outcome == Outcome::Success {
                self.probe_successes += 1;
                if self.probe_successes >= self.k.success_threshold {
                    self.to(State::Closed, now);
                }
            } else if failed {
                self.reopenings += 1;
                self.to(State::Open, now);
            }
            return;
        }
        if !failed && outcome != Outcome::Success {
            return;
        }
        if call.generation != self.generation {
            return;
        }
        if let Some(threshold) = self.k.threshold {
            if failed {
                self.streak += 1;
                if self.streak == threshold && self.state == State::Closed {
                    self.reopenings = 0;
                    self.to(State::Open, now);
                    return;
                }
            } else {
                self.streak = 0;
            }
        }
        if let Some((percent, size, min)) = self.k.rate {
            self.window.push_back(failed);
            if self.window.len() > size as usize {
                self.window.pop_front();
            }
            let calls = self.window.len() as u64;
            let failures = self.window.iter().filter(|f| **f).count() as u64;
            if self.state == State::Closed
                && calls >= u64::from(min)
                && failures * 100 >= u64::from(percent) * calls
            {
                self.reopenings = 0;
                self.to(State::Open, now);
            }
        }
    }

    fn manual(&mut self, to: State, now: u64) {
        if to == State::Closed {
            self.stats = Stats::default();
        } else if self.state == to {
            return;
        }
        self.to(to, now);
    }
}

/// A call held by the test: admitted on the fast path, or with a permit.
enum Held<'a> {
    Fast(Ticket),
    Permit(Permit<(&'a Core, &'a FakeClock)>),
}

fn admitted_as(r: &Result<Held<'_>, BreakerError>) -> Admitted {
    match r {
        Ok(_) => Admitted::Yes,
        Err(BreakerError::Open { retry_in, .. }) => {
            Admitted::Open(retry_in.map(|d| d.as_nanos() as u64))
        }
        Err(BreakerError::Full { .. }) => Admitted::Full,
        Err(e) => panic!("unexpected {e}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2048, ..ProptestConfig::default() })]

    #[test]
    fn the_engine_agrees_with_the_reference_model(k in knobs(), ops in prop::collection::vec(op(), 1..80)) {
        let config = k.config();
        let core = Core::new("reference".into(), config.clone().resolve().unwrap().into());
        let clock = FakeClock::default();
        let mut model = Model::new(k);
        let mut held: Vec<(Held<'_>, Call)> = Vec::new();

        for (step, op) in ops.into_iter().enumerate() {
            let now = clock.0.get();
            match op {
                Op::Admit(fast) => {
                    let (expected, call) = model.admit(now);
                    // The wrappers' order: closed fast path, refusal, claiming, permit.
                    let real = if !fast {
                        Permit::acquire(&core, &clock).map(Held::Permit)
                    } else if let Some(ticket) = core.enter_closed() {
                        Ok(Held::Fast(ticket.ticket()))
                    } else if let Some(refused) = core.refuse(&clock) {
                        Err(refused)
                    } else if let Some(ticket) = core.enter_claiming() {
                        Ok(Held::Fast(ticket.ticket()))
                    } else {
                        Permit::acquire(&core, &clock).map(Held::Permit)
                    };
                    prop_assert_eq!(admitted_as(&real), expected, "step {}", step);
                    if let (Ok(h), Some(c)) = (real, call) {
                        held.push((h, c));
                    }
                }
                Op::Finish(i, outcome) if !held.is_empty() => {
                    let (h, call) = held.swap_remove(i % held.len());
                    match (h, outcome) {
                        (Held::Permit(p), Outcome::Cancelled) => drop(p),
                        (Held::Permit(p), outcome) => p.finish(outcome),
                        // Nothing to give back; the call future counts the cancellation.
                        (Held::Fast(_), Outcome::Cancelled) => {
                            core.counters.add(crate::stats::Count::Cancelled)
                        }
                        (Held::Fast(t), Outcome::Success) => core.succeed(t, &clock),
                        (Held::Fast(t), outcome) => {
                            Permit::from_ticket(&core, &clock, t).finish(outcome)
                        }
                    }
                    model.finish(call, outcome, now);
                }
                Op::Finish(..) => {}
                Op::Advance(d) => clock.0.set(now + d),
                Op::ReadState => {
                    prop_assert_eq!(core.state(&clock), model.read_state(now));
                }
                Op::Manual(to) => {
                    core.set(to, &clock);
                    model.manual(to, now);
                }
            }
            prop_assert_eq!(core.peek(), model.state, "step {}", step);
            prop_assert_eq!(core.stats(), model.stats, "step {}", step);
            prop_assert_eq!(core.probes_held(), model.leases.iter().flatten().count());
            prop_assert_eq!(core.in_flight(), model.in_flight);
        }
        // Conservation: once every call has finished or been dropped, every slot is free.
        let now = clock.0.get();
        for (permit, call) in held.drain(..) {
            drop(permit);
            model.finish(call, Outcome::Cancelled, now);
        }
        prop_assert_eq!(core.probes_held(), 0);
        prop_assert_eq!(core.in_flight(), 0);
    }
}
