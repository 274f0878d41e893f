//! The sequential specification: one breaker as plain code over milliseconds (DESIGN.md's
//! *Semantics*, the reference model of `breaker-runtime/src/tests/reference.rs` grown to the
//! call futures, timeouts, the dry run, reconfiguration, the breaker's own probe and its
//! task), and the few facts about a keyed breaker's keys that decide what eviction may drop.
//! Read it against the rustdoc of `Config`: each rule is a few lines.

use std::collections::{BTreeMap, VecDeque};

use breaker::{State, Stats};

use super::ops::{Answer, KeyAnswer, Knobs, Manual, Ms, ProbeAnswer};

/// What an admission gives the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    Yes,
    /// Refused, open: `retry_in` in milliseconds (`None` when forced open).
    Open(Option<Ms>),
    Full,
    /// Shed by the recovery ramp.
    Throttled,
    /// A dry run's would-be refusal: the call runs, its outcome counts for nothing.
    Shadow,
}

/// Where the engine draws at random: the model takes what the engine drew, where the draw
/// is allowed (`admit` asks only there).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chance {
    /// The recovery ramp sheds this call.
    Ramp,
    /// The adaptive limit, somewhere in `1..=max`, is reached.
    AdaptiveFull,
    /// A hedge is not taken: the ramp sheds now, or the limit (the calls in flight, which
    /// the model does not count as the engine does, against the bulkhead's) is reached.
    NoHedge,
}

/// How an admitted call ended, as the engine judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    Failure,
    /// A failure that opens for this long (`Verdict::OpenFor`).
    OpenFor(Ms),
    Neutral,
    Timeout,
    Cancelled,
}

/// A half-open probe slot held: its lease's id, when it was taken, until when it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    id: u64,
    since: Ms,
    until: Ms,
}

/// An admitted call, in flight.
#[derive(Debug, Clone, Copy)]
pub struct Call {
    generation: u64,
    probe: Option<Lease>,
    /// Its start, when `slow_call` was set at admission (the engine times only then).
    started: Option<Ms>,
    bulkhead: bool,
    /// Holds a seat of the adaptive bulkhead.
    aseat: bool,
    shadow: bool,
    /// Admitted on the closed fast path (no window, slow call, bulkhead or dry run then):
    /// its success is settled inline, judged only if a failure streak runs.
    fast: bool,
    /// When its `timeout` fires: the `timeout` in force at its admission, whatever a
    /// reconfiguration does later.
    pub deadline: Option<Ms>,
    /// Admitted before the last reset (its outcome is counted in the new stats).
    epoch: u64,
    /// When it was admitted.
    started_at: Ms,
    /// Its place in the order of admissions: timers of one instant fire in the order they
    /// were set (tokio's wheel), so calls timing out together end in this order.
    pub seq: u64,
}

/// The breaker's own probe task (`Config::probe`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Task {
    /// Sleeping until then.
    Wait(Ms),
    /// Its probe is running and will not answer: its lease ends it.
    Hanging(
        Lease,
        u64,        /* generation */
        Option<Ms>, /* started */
        u64,        /* epoch */
    ),
}

/// Cloned to play two orders of one instant's events (see `World::probe_runs_first`).
#[derive(Clone)]
pub struct Model {
    pub k: Knobs,
    /// Whether the breaker has its own probe, and what it answers.
    pub own_probe: Option<ProbeAnswer>,
    pub task: Option<Task>,
    pub state: State,
    generation: u64,
    open_until: Ms,
    streak: u32,
    window: VecDeque<bool>,
    probe_successes: u32,
    reopenings: u32,
    leases: Vec<Option<Lease>>,
    next_lease: u64,
    /// Admissions so far (each call's `seq`).
    admissions: u64,
    /// Bulkhead seats taken (fixed, adaptive).
    pub seats: u32,
    pub aseats: u32,
    /// When the recovery ramp began (a close from half-open).
    ramp_start: Option<Ms>,
    pub stats: Stats,
    /// Resets so far; calls admitted before the last one are `carried`.
    epoch: u64,
    /// Outcomes counted since the last reset of calls admitted before it.
    pub carried_done: u64,
    /// When the breaker was made: its clock's origin (the hedge budget's seconds).
    created: Ms,
    /// The hedge budget: net units (deposits less payments) by second of the breaker's clock.
    hedge_budget: BTreeMap<u64, i64>,
    /// Latencies recorded for the hedge delay, at most (never pruned: a bound).
    pub samples: u64,
    /// Hedged calls in a row whose hedge came due by the delay (`Hedging::overdue`): hedging
    /// is paused past `OVERDUE_IN_A_ROW`.
    overdue: u64,
    /// While paused: when the next trial hedge may go, and the trials so far.
    trial_at: Ms,
    trials: u32,
    /// Hedges the budget denied (the soak's coverage; `Stats` does not tell them apart).
    pub budget_denied: u64,
}

impl Model {
    pub fn new(k: Knobs, own_probe: Option<ProbeAnswer>, created: Ms) -> Model {
        Model {
            created,
            hedge_budget: BTreeMap::new(),
            samples: 0,
            overdue: 0,
            trial_at: 0,
            trials: 0,
            budget_denied: 0,
            leases: Vec::new(),
            k,
            own_probe,
            task: None,
            state: State::Closed,
            generation: 0,
            open_until: 0,
            streak: 0,
            window: VecDeque::new(),
            probe_successes: 0,
            reopenings: 0,
            next_lease: 1,
            admissions: 1,
            seats: 0,
            aseats: 0,
            ramp_start: None,
            stats: Stats::default(),
            epoch: 0,
            carried_done: 0,
        }
    }

    fn cool_off(&self) -> Ms {
        match self.k.max_cool_off {
            None => self.k.cool_off,
            Some(cap) => (self.k.cool_off << self.reopenings.min(40)).min(cap),
        }
    }

    fn to(&mut self, to: State, now: Ms) {
        self.move_to(to, now, None);
    }

    /// A transition; an opening for `open_for` (a verdict's) instead of the cool-off.
    fn move_to(&mut self, to: State, now: Ms, open_for: Option<Ms>) {
        self.generation += 1;
        self.ramp_start = None; // a ramp ends with its closed period
                                // A new period: the table empties (made again at its first claim).
        self.leases.clear();
        self.probe_successes = 0;
        match to {
            State::Open => {
                // A verdict's time, capped by `max_cool_off` (else 5 minutes), never raised.
                let cap = self.k.max_cool_off.unwrap_or(300_000);
                self.open_until = now + open_for.map_or_else(|| self.cool_off(), |d| d.min(cap));
                // The probe task starts at an opening, unless one runs (it probes this one).
                if self.own_probe.is_some() && self.task.is_none() {
                    self.task = Some(Task::Wait(now));
                }
            }
            State::Closed | State::Disabled => {
                self.reopenings = 0;
                self.streak = 0;
                self.window.clear();
            }
            _ => {}
        }
        self.state = to;
    }

    /// The state, an open breaker whose cool-off ended moved to half-open (`state()`).
    pub fn read_state(&mut self, now: Ms) -> State {
        if self.state == State::Open && now >= self.open_until {
            self.to(State::HalfOpen, now);
        }
        self.state
    }

    /// `retry_in()` (which reads the state as `state()` does): the time left of an open
    /// period, or of the earliest lease when every probe slot is taken.
    pub fn retry_in(&mut self, now: Ms) -> Option<Ms> {
        match self.read_state(now) {
            State::Open => Some(self.open_until - now),
            State::HalfOpen if self.free_slot(now).is_none() => {
                self.leases.iter().flatten().map(|l| l.until - now).min()
            }
            _ => None,
        }
    }

    /// Whether a call now would be let through (what `ready_when_closed` waits for): closed
    /// or disabled, a dry run, an open period over, or half-open with a probe slot free.
    pub fn admits(&self, now: Ms) -> bool {
        self.k.dry_run
            || match self.state {
                State::Closed | State::Disabled => true,
                State::ForcedOpen => false,
                State::Open => now >= self.open_until,
                State::HalfOpen => self.free_slot(now).is_some(),
            }
    }

    /// No window, slow call, bulkhead nor dry run: a closed call takes the fast path.
    fn simple(&self) -> bool {
        let k = &self.k;
        k.rate.is_none()
            && k.slow_call.is_none()
            && k.max_concurrent.is_none()
            && !k.dry_run
            && k.ramp.is_none()
            && k.adaptive.is_none()
    }

    /// The table of a half-open period is made at its first claim, sized by `probes` then.
    fn free_slot(&self, now: Ms) -> Option<usize> {
        if self.leases.is_empty() {
            return Some(0);
        }
        self.leases
            .iter()
            .position(|l| l.is_none_or(|l| l.until <= now))
    }

    fn take_slot(&mut self, now: Ms) -> Result<Lease, Option<Ms>> {
        if self.leases.is_empty() {
            self.leases = vec![None; self.k.probes as usize];
        }
        match self.free_slot(now) {
            Some(slot) => {
                let lease = Lease {
                    id: self.next_lease,
                    since: now,
                    until: now + self.k.lease(),
                };
                self.next_lease += 1;
                self.leases[slot] = Some(lease);
                Ok(lease)
            }
            None => Err(self.leases.iter().flatten().map(|l| l.until - now).min()),
        }
    }

    fn give_back(&mut self, lease: Lease) -> bool {
        match self.leases.iter_mut().find(|l| **l == Some(lease)) {
            Some(l) => {
                *l = None;
                true
            }
            None => false,
        }
    }

    /// A call arrives. `drawn` tells what the engine drew where it draws.
    pub fn admit(&mut self, now: Ms, drawn: impl Fn(Chance) -> bool) -> (Admit, Option<Call>) {
        let mut probe = None;
        let mut refused = match self.read_state(now) {
            State::Closed | State::Disabled => None,
            State::ForcedOpen => Some(Admit::Open(None)),
            State::Open => Some(Admit::Open(Some(self.open_until - now))),
            State::HalfOpen => match self.take_slot(now) {
                Ok(lease) => {
                    probe = Some(lease);
                    None
                }
                Err(left) => Some(Admit::Open(left)),
            },
        };
        // The ramp sheds while closed only, with a probability growing over `ramp`.
        let ramping = self
            .ramp_start
            .zip(self.k.ramp)
            .is_some_and(|(at, r)| now < at + r);
        if refused.is_none() && self.state == State::Closed && ramping && drawn(Chance::Ramp) {
            refused = Some(Admit::Throttled);
        }
        // The adaptive limit is at least 1 and at most `max`: between, the engine decides.
        let adaptive = self
            .k
            .adaptive
            .filter(|_| self.state != State::Disabled && refused.is_none());
        if let Some(max) = adaptive
            && (self.aseats >= max || (self.aseats > 0 && drawn(Chance::AdaptiveFull)))
        {
            if let Some(lease) = probe.take() {
                self.give_back(lease);
            }
            refused = Some(Admit::Full);
        }
        let bulkhead = self
            .k
            .max_concurrent
            .filter(|_| self.state != State::Disabled && refused.is_none());
        if let Some(max) = bulkhead
            && self.seats >= max
        {
            if let Some(lease) = probe.take() {
                self.give_back(lease);
            }
            refused = Some(Admit::Full);
        }
        self.stats.calls += 1;
        let mut call = Call {
            generation: self.generation,
            probe,
            started: self.k.slow_call.map(|_| now),
            bulkhead: false,
            aseat: false,
            shadow: false,
            fast: self.state == State::Closed && self.simple(),
            deadline: self.k.timeout.map(|t| now + t),
            epoch: self.epoch,
            started_at: now,
            seq: self.admissions,
        };
        self.admissions += 1;
        if let Some(refusal) = refused {
            if !self.k.dry_run {
                self.stats.rejected += 1;
                if refusal == Admit::Throttled {
                    self.stats.throttled += 1;
                }
                return (refusal, None);
            }
            self.stats.shadow_rejected += 1;
            call.shadow = true;
            return (Admit::Shadow, Some(call));
        }
        if bulkhead.is_some() {
            self.seats += 1;
            call.bulkhead = true;
        }
        if adaptive.is_some() {
            self.aseats += 1;
            call.aseat = true;
        }
        (Admit::Yes, Some(call))
    }

    /// An admitted call ends.
    pub fn finish(&mut self, call: Call, outcome: Outcome, now: Ms) {
        if call.shadow {
            return; // a dry run's would-be refusal counts for nothing
        }
        if call.epoch != self.epoch {
            self.carried_done += 1;
        }
        let slow = match (self.k.slow_call, call.started) {
            (Some(slow), Some(started)) => outcome != Outcome::Timeout && now - started >= slow,
            _ => false,
        };
        let s = &mut self.stats;
        match outcome {
            Outcome::Cancelled if slow => {
                s.abandoned += 1;
                s.slow_calls += 1;
                s.failures += 1;
            }
            _ if slow => {
                s.slow_calls += 1;
                s.failures += 1;
            }
            Outcome::Success => s.successes += 1,
            Outcome::Failure | Outcome::OpenFor(_) => s.failures += 1,
            Outcome::Timeout => {
                s.timeouts += 1;
                s.failures += 1;
            }
            Outcome::Neutral => s.neutral += 1,
            Outcome::Cancelled => s.cancelled += 1,
        }
        if call.bulkhead {
            self.seats -= 1;
        }
        if call.aseat {
            self.aseats -= 1;
        }
        // A slow call is slow, whatever its verdict.
        let outcome = match outcome {
            Outcome::OpenFor(_) if slow => Outcome::Failure,
            o => o,
        };
        let failed = slow
            || matches!(
                outcome,
                Outcome::Failure | Outcome::Timeout | Outcome::OpenFor(_)
            );
        if call.fast && outcome == Outcome::Success && self.streak == 0 {
            return; // settled inline: no streak to end
        }
        match call.probe {
            Some(lease) => self.finish_probe(call.generation, lease, outcome, failed, now),
            None => self.finish_closed(call.generation, outcome, failed, now),
        }
    }

    fn finish_probe(
        &mut self,
        generation: u64,
        lease: Lease,
        outcome: Outcome,
        failed: bool,
        now: Ms,
    ) {
        // A late answer (its slot taken over or emptied) changes nothing, but a timeout
        // reopens its own generation.
        if !self.give_back(lease) && outcome != Outcome::Timeout {
            return;
        }
        if self.state != State::HalfOpen || self.generation != generation {
            return;
        }
        if failed {
            self.reopenings += 1;
            let open_for = match outcome {
                Outcome::OpenFor(d) => Some(d),
                _ => None,
            };
            self.move_to(State::Open, now, open_for);
        } else if outcome == Outcome::Success {
            self.probe_successes += 1;
            if self.probe_successes >= self.k.success_threshold() {
                self.to(State::Closed, now);
                self.ramp_start = self.k.ramp.map(|_| now); // recovery: the ramp begins
            }
        }
    }

    fn finish_closed(&mut self, generation: u64, outcome: Outcome, failed: bool, now: Ms) {
        if !failed && outcome != Outcome::Success {
            return; // neutral, cancelled: no success, no streak reset
        }
        if generation != self.generation {
            return; // from an older period: counted, no effect
        }
        if let Outcome::OpenFor(d) = outcome {
            // Opens at once, whatever the threshold or rate (not while disabled).
            if self.state == State::Closed {
                self.reopenings = 0;
                self.move_to(State::Open, now, Some(d));
            }
            return;
        }
        // The streak is kept only under a threshold.
        if let Some(threshold) = self.k.threshold() {
            if failed {
                self.streak += 1;
                if self.streak >= threshold && self.state == State::Closed {
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
            while self.window.len() > size as usize {
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

    pub fn manual(&mut self, m: Manual, now: Ms) {
        let to = match m {
            Manual::Reset => {
                self.stats = Stats::default();
                self.epoch += 1;
                self.carried_done = 0;
                State::Closed
            }
            Manual::ForceOpen if self.state == State::ForcedOpen => return,
            Manual::Disable if self.state == State::Disabled => return,
            Manual::ForceOpen => State::ForcedOpen,
            Manual::Disable => State::Disabled,
        };
        self.to(to, now);
    }

    /// `reconfigure`: the state, generation, stats, open deadline and backoff step stay; a
    /// resized window keeps its most recent outcomes; `probes` applies from the next period.
    pub fn reconfigure(&mut self, k: Knobs) {
        match k.rate {
            Some((_, size, _)) => {
                while self.window.len() > size as usize {
                    self.window.pop_front();
                }
            }
            None => self.window.clear(),
        }
        self.k = k;
    }

    /// The next instant something happens by itself: a call's timeout, the probe task, the
    /// end of an open period when a `ready_when_closed` waiter waits for it (it reads the
    /// state then, moving the breaker to half-open).
    pub fn next_event(&self, calls: &[Call], waiters: bool) -> Option<Ms> {
        let task = self.task.map(|t| match t {
            Task::Wait(at) => at,
            Task::Hanging(lease, ..) => lease.until,
        });
        let waiter = (waiters && self.state == State::Open).then_some(self.open_until);
        calls
            .iter()
            .filter_map(|c| c.deadline)
            .chain(task)
            .chain(waiter)
            .min()
    }

    /// The probe task's turn, if it is due at `at`.
    pub fn task_due(&self, at: Ms) -> bool {
        matches!(self.task, Some(Task::Wait(t)) if t <= at)
            || matches!(self.task, Some(Task::Hanging(lease, ..)) if lease.until <= at)
    }

    /// The probe task's turn at `now` (probe_turn, looped as the task does).
    pub fn probe_turn(&mut self, now: Ms) {
        if let Some(Task::Hanging(lease, generation, started, epoch)) = self.task {
            if lease.until > now {
                return;
            }
            let call = Call {
                generation,
                probe: Some(lease),
                started,
                bulkhead: false,
                aseat: false,
                shadow: false,
                fast: false,
                deadline: None,
                epoch,
                started_at: lease.since,
                seq: 0,
            };
            self.task = Some(Task::Wait(now)); // before `finish`: an opening finds it running
            self.finish(call, Outcome::Timeout, now);
        }
        loop {
            match self.task {
                Some(Task::Wait(at)) if at <= now => {}
                _ => return,
            }
            match self.state {
                State::Open if now < self.open_until => {
                    self.task = Some(Task::Wait(self.open_until));
                    return;
                }
                State::Open => self.to(State::HalfOpen, now),
                State::HalfOpen => {}
                _ => {
                    self.task = None; // nothing to probe: the task ends
                    return;
                }
            }
            let lease = match self.take_slot(now) {
                Ok(lease) => lease,
                Err(Some(left)) => {
                    self.task = Some(Task::Wait(now + left));
                    return;
                }
                Err(None) => unreachable!("a half-open table has a slot"),
            };
            self.stats.calls += 1;
            let started = self.k.slow_call.map(|_| now);
            let call = Call {
                generation: self.generation,
                probe: Some(lease),
                started,
                bulkhead: false,
                aseat: false,
                shadow: false,
                fast: false,
                deadline: None,
                epoch: self.epoch,
                started_at: now,
                seq: 0,
            };
            match self
                .own_probe
                .expect("a task only for a breaker with a probe")
            {
                ProbeAnswer::Ok => self.finish(call, Outcome::Success, now),
                ProbeAnswer::Fail | ProbeAnswer::Panic => self.finish(call, Outcome::Failure, now),
                ProbeAnswer::Hang => {
                    self.task = Some(Task::Hanging(lease, self.generation, started, self.epoch));
                    return;
                }
            }
        }
    }

    /// Tasks the breaker itself keeps alive: its probe task, while it runs.
    pub fn tasks(&self) -> usize {
        usize::from(self.task.is_some())
    }

    /// Admitted calls since the last reset, not ended yet (shadows hold nothing).
    pub fn in_flight_since_reset(&self, calls: &[Call]) -> u64 {
        let hanging = matches!(self.task, Some(Task::Hanging(.., epoch)) if epoch == self.epoch);
        let calls = calls
            .iter()
            .filter(|c| !c.shadow && c.epoch == self.epoch)
            .count();
        calls as u64 + u64::from(hanging)
    }
}

/// A hedged call (`breaker::hedge`): its attempts raced, each a call through the breaker.
#[derive(Debug, Clone)]
pub struct Race {
    hedges: u32,
    /// The delay before a hedge; `None`: no hedge for this call (a percentile delay
    /// before 100 samples).
    delay: Option<Ms>,
    /// Its attempts, the first then each hedge, `None` once ended.
    pub attempts: Vec<Option<Call>>,
    /// When the next hedge is due by the delay.
    timer: Ms,
    /// An attempt failed: the next hedge goes at once.
    due: bool,
    /// No more hedges for this call (denied, or pushback).
    stop: bool,
    /// The first attempt's failure: returned if every attempt fails.
    first_failed: Option<Outcome>,
    /// A hedge came due by the delay: counted in the breaker's run of overdue calls.
    overdue: bool,
}

/// How a hedged call's race stands after an event.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RaceEnd {
    Running,
    /// Attempt `k`'s answer is returned (a success or a neutral answer).
    Won(usize, Outcome),
    /// Every attempt failed: the first one's failure is returned.
    AllFailed(Outcome),
    /// An attempt panicked: the race with it.
    Panicked,
}

/// The hedge budget: a hedge costs 100 units, a first attempt deposits `hedge_budget`; the
/// floor, one hedge a second over the ten-second window, is a reserve of 1 000 units.
const HEDGE_RESERVE: i64 = 1_000;

impl Race {
    /// The next hedge's deadline, if one may still go by the timer.
    pub fn timer(&self) -> Option<Ms> {
        let more = !self.stop && (self.attempts.len() as u32) <= self.hedges;
        self.delay.filter(|_| more).map(|_| self.timer)
    }

    pub fn running(&self) -> impl Iterator<Item = &Call> {
        self.attempts.iter().flatten()
    }
}

impl Model {
    /// The hedge budget's balance at `now`: the window's ten seconds, and the reserve.
    fn hedge_balance(&self, now: Ms) -> i64 {
        let second = (now - self.created) / 1_000;
        let window = second.saturating_sub(9)..=second;
        HEDGE_RESERVE + self.hedge_budget.range(window).map(|(_, u)| u).sum::<i64>()
    }

    fn hedge_pay(&mut self, units: i64, now: Ms) {
        let second = (now - self.created) / 1_000;
        *self.hedge_budget.entry(second).or_default() += units;
    }

    /// A hedged call arrives: its first attempt admitted (else the refusal, as `call`'s).
    /// The hedge policy is read now: a reconfiguration later changes the next calls only.
    pub fn start_race(&mut self, now: Ms, drawn: impl Fn(Chance) -> bool) -> Result<Race, Admit> {
        let (admit, call) = self.admit(now, drawn);
        let call = call.ok_or(admit)?;
        let mut race = Race {
            hedges: 0,
            delay: None,
            attempts: vec![Some(call)],
            timer: now,
            due: false,
            stop: true,
            first_failed: None,
            overdue: false,
        };
        if let Some(h) = self.k.hedge {
            // The first attempt deposits; with fewer than 100 samples only a fixed delay hedges.
            self.hedge_pay(i64::from(h.budget.unwrap_or(5)), now);
            assert!(
                self.samples < 100,
                "the model counts on fewer than 100 samples"
            );
            race.hedges = h.hedges;
            race.delay = h.delay;
            race.timer = now + h.delay.unwrap_or(0);
            race.stop = h.delay.is_none();
        }
        Ok(race)
    }

    /// Events of the race at `now`: attempts that ended (in their order; a `None` answer is
    /// a timeout), then the next hedge if it is due. `drawn`: what the engine drew.
    pub fn race_step(
        &mut self,
        race: &mut Race,
        ended: &[(usize, Option<Answer>)],
        now: Ms,
        drawn: impl Fn(Chance) -> bool,
    ) -> RaceEnd {
        // The race polls its attempts in order: those answered or timing out now end.
        let ends: Vec<(usize, Option<Answer>)> = (race.attempts.iter().enumerate())
            .filter_map(|(k, _)| ended.iter().find(|(j, _)| *j == k).copied())
            .collect();
        for (k, answer) in ends {
            let call = race.attempts[k].take().expect("an attempt ends once");
            let hedged = race.hedges > 0;
            let took = now - call.started_at;
            let slow = self.k.slow_call.is_some_and(|s| took >= s);
            let outcome = match answer {
                None => Outcome::Timeout,
                Some(Answer::Panic) => {
                    self.finish(call, Outcome::Failure, now);
                    self.drop_race(race, now);
                    return RaceEnd::Panicked;
                }
                Some(a) => outcome_of(a),
            };
            self.finish(call, outcome, now);
            match outcome {
                Outcome::Success | Outcome::Neutral => {
                    self.samples += u64::from(hedged);
                    if k > 0 {
                        self.stats.hedges_won += 1;
                    }
                    // A hedge that wins, or a first attempt answered before a hedge came due
                    // by the delay (the call had one), ends the run of overdue calls.
                    if k > 0 || (!race.overdue && race.delay.is_some()) {
                        self.overdue = 0;
                    }
                    self.drop_race(race, now);
                    return RaceEnd::Won(k, outcome);
                }
                _ => {
                    // A slow or timed-out failure is a latency worth recording.
                    self.samples += u64::from(hedged && (slow || outcome == Outcome::Timeout));
                    if k == 0 {
                        race.first_failed = Some(outcome);
                    }
                    race.due = true;
                    race.stop |= matches!(outcome, Outcome::OpenFor(_));
                }
            }
        }
        if race.timer().is_some() && (race.due || now >= race.timer) {
            self.hedge(race, now, drawn);
        }
        match race.running().next() {
            Some(_) => RaceEnd::Running,
            None => RaceEnd::AllFailed(race.first_failed.expect("the first attempt failed")),
        }
    }

    /// The next hedge: sent only while closed, not shedding, below the limit, and paid for.
    fn hedge(&mut self, race: &mut Race, now: Ms, drawn: impl Fn(Chance) -> bool) {
        let by_delay = !std::mem::replace(&mut race.due, false);
        // Paused after `OVERDUE_IN_A_ROW` (5) overdue calls in a row, before anything else is
        // asked (nothing drawn, nothing paid): a denial. The call's first hedge due by the
        // delay counts it; while paused, one trial 1 s after the pause began, then 2, 4, 8,
        // 16, 32, 32 s… after the one before.
        const OVERDUE_IN_A_ROW: u64 = 5;
        let goes = if by_delay && !race.overdue {
            race.overdue = true;
            let before = self.overdue;
            self.overdue += 1;
            let after = |trials: u32| now + (1_000u64 << trials.min(5)).min(32_000);
            if before < OVERDUE_IN_A_ROW {
                true
            } else if before == OVERDUE_IN_A_ROW {
                self.trials = 0;
                self.trial_at = after(0);
                false
            } else if now < self.trial_at {
                false
            } else {
                self.trials += 1;
                self.trial_at = after(self.trials);
                true
            }
        } else {
            self.overdue <= OVERDUE_IN_A_ROW
        };
        if !goes {
            self.stats.hedges_denied += 1;
            race.stop = true;
            return;
        }
        let ramping = self
            .ramp_start
            .zip(self.k.ramp)
            .is_some_and(|(at, r)| now < at + r);
        let limited = self.k.max_concurrent.is_some_and(|m| self.seats >= m)
            || self.k.adaptive.is_some_and(|m| self.aseats >= m);
        let limit = self.k.max_concurrent.is_some() || self.k.adaptive.is_some();
        let taken = self.state == State::Closed
            && !limited
            && !((ramping || limit) && drawn(Chance::NoHedge));
        self.budget_denied += u64::from(taken && self.hedge_balance(now) < 100);
        if !taken || self.hedge_balance(now) < 100 {
            self.stats.hedges_denied += 1; // a denied hedge fails nothing
            race.stop = true;
            return;
        }
        self.hedge_pay(-100, now);
        race.timer = now + race.delay.expect("a hedge has a delay");
        // Taken, so admitted: closed, nothing shed, a seat free.
        let (admit, call) = self.admit(now, |_| false);
        assert_eq!(admit, Admit::Yes, "a hedge the breaker takes is admitted");
        self.stats.hedges += 1;
        race.attempts.push(call);
    }

    /// The race is dropped (answered, cancelled, panicked): its attempts still running are
    /// cancelled calls (abandoned ones past `slow_call`, their latencies recorded).
    pub fn drop_race(&mut self, race: &mut Race, now: Ms) {
        let hedged = race.hedges > 0;
        for call in race.attempts.iter_mut().filter_map(Option::take) {
            let slow = self.k.slow_call.is_some_and(|s| now - call.started_at >= s);
            self.samples += u64::from(hedged && slow);
            self.finish(call, Outcome::Cancelled, now);
        }
    }
}

/// What the engine makes of an answer.
pub fn outcome_of(answer: Answer) -> Outcome {
    match answer {
        Answer::Ok => Outcome::Success,
        Answer::Fail | Answer::Panic => Outcome::Failure,
        Answer::Neutral => Outcome::Neutral,
        Answer::OpenFor(ms) => Outcome::OpenFor(ms),
    }
}

/// Whether a key's breaker holds state a fresh one would not. `Unknown` where the model
/// cannot say without modelling what it does not (a budget or a throttle window draining
/// bucket by bucket).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fresh {
    Yes,
    No,
    Unknown,
}

/// Until when a part of a key's breaker surely holds state, and until when it may.
#[derive(Debug, Clone, Copy, Default)]
pub struct Held {
    pub surely: Ms,
    pub maybe: Ms,
}

impl Held {
    fn hold(&mut self, surely: Ms, maybe: Ms) {
        self.surely = self.surely.max(surely);
        self.maybe = self.maybe.max(maybe);
    }
}

/// What the model knows of a key in the keyed breaker's map.
#[derive(Debug, Clone, Default)]
pub struct Key {
    pub streak: u32,
    pub open: bool,
    pub manual: Option<State>,
    /// The retry budget's buckets: net units (deposits less withdrawals) by second of the
    /// key's clock (from its creation).
    pub budget: BTreeMap<u64, i64>,
    /// When its breaker was made (its clock's origin).
    pub created: Ms,
    /// The throttle's window holding requests not accepted (failures, refusals).
    pub throttle: Held,
    /// The throttle's requests: when, and whether accepted (a success or neutral answer).
    pub requests: Vec<(Ms, bool)>,
    /// Until then the window may hold requests the model did not see (a dry run's shadows).
    pub unseen_until: Ms,
    /// Its streak and state are not known any more: in a dry run under a throttle that may
    /// shed, a call may have been a shadow (its outcome counted for nothing) or not.
    pub unsure: bool,
    /// When it was last used (created, called, set by hand), and in which step.
    pub used: Ms,
    pub used_step: u64,
}

/// The keyed breaker's keys, as far as eviction and throttling are concerned (its
/// cool-off is ten minutes: an open key stays open for the whole case).
pub struct Keys {
    pub threshold: u32,
    pub throttle: bool,
    pub dry_run: bool,
    pub max_keys: usize,
    /// `idle`: a key unused this long may be swept (or evicted first) if it holds nothing.
    pub idle: Ms,
    /// When `retain_active` ran: (step, time).
    pub sweeps: Vec<(u64, Ms)>,
    /// The step under way (orders uses and sweeps of one instant).
    pub step: u64,
    pub keys: BTreeMap<String, Key>,
}

/// The retry budget (`breaker::retry`): ten one-second buckets; a retried call's first
/// attempt deposits `retry_budget` (20) units, a retry costs 100, given back if it does not
/// run. A budget is full (a fresh breaker's) while no suffix of its window, newest second
/// first, is in debt.
const BUDGET_BUCKETS: u64 = 10;
const DEPOSIT: i64 = 20;
const COST: i64 = 100;

impl Key {
    fn second(&self, now: Ms) -> u64 {
        (now - self.created) / 1_000
    }

    pub fn budget_full(&self, now: Ms) -> bool {
        let second = self.second(now);
        let mut net = 0;
        for (_, units) in self
            .budget
            .iter()
            .rev()
            .filter(|(s, _)| second < *s + BUDGET_BUCKETS)
        {
            net += units;
            if net < 0 {
                return false;
            }
        }
        true
    }

    /// `units` into the bucket of `now`.
    pub fn pay(&mut self, units: i64, now: Ms) {
        let second = self.second(now);
        *self.budget.entry(second).or_default() += units;
    }

    /// A retry's cost back into the bucket it came from.
    pub fn refund(&mut self, now: Ms) {
        self.pay(COST, now);
    }

    /// A retried call's first attempt ended (deposit), and a retry was paid for.
    pub fn retry_paid(&mut self, now: Ms) {
        self.pay(DEPOSIT, now);
        self.pay(-COST, now);
    }
}

/// The throttle's window (its default, 60 s in 20 buckets of 3 s).
pub const THROTTLE_WINDOW: Ms = 60_000;
const THROTTLE_BUCKET: Ms = 3_000;

impl Keys {
    pub fn fresh(&self, key: &Key, now: Ms) -> Fresh {
        if key.manual.is_some() {
            return Fresh::No;
        }
        if key.unsure {
            return Fresh::Unknown;
        }
        if key.open || key.streak > 0 {
            return Fresh::No;
        }
        if !key.budget_full(now) || now < key.throttle.surely {
            Fresh::No
        } else if now < key.throttle.maybe {
            Fresh::Unknown
        } else {
            Fresh::Yes
        }
    }

    /// Whether a sweep (or an eviction, first) may drop the key now: unused for `idle`, not
    /// under manual control, and holding nothing the model knows of, or open with its retry
    /// budget full.
    pub fn may_go(&self, key: &Key, now: Ms) -> bool {
        key.manual.is_none()
            && now >= key.used + self.idle
            && ((key.open && key.budget_full(now)) || self.fresh(key, now) != Fresh::No)
    }

    /// Whether `retain_active` now must drop the key: it holds nothing (or is open, its
    /// budget full), and a sweep since its last use is `idle` old (that sweep stamped it
    /// unused, at the latest).
    pub fn must_go(&self, key: &Key, now: Ms) -> bool {
        key.manual.is_none()
            && !key.unsure
            && ((key.open && key.budget_full(now)) || self.fresh(key, now) == Fresh::Yes)
            && self
                .sweeps
                .iter()
                .any(|(step, at)| key.used_step < *step && at + self.idle <= now)
    }

    /// Whether the throttle may refuse this key now: only while its window may hold more
    /// than twice as many requests as accepts (`(requests − 2·accepts) / (requests + 1)`
    /// is above zero then). The window's edge moves by buckets: requests are counted over
    /// its longest reach, accepts over its shortest.
    pub fn may_throttle(&self, key: &Key, now: Ms) -> bool {
        let within = |at: Ms, reach: Ms| now < at + reach;
        let requests = key
            .requests
            .iter()
            .filter(|(at, _)| within(*at, THROTTLE_WINDOW + THROTTLE_BUCKET))
            .count();
        let accepts = key
            .requests
            .iter()
            .filter(|(at, ok)| *ok && within(*at, THROTTLE_WINDOW - THROTTLE_BUCKET))
            .count();
        self.throttle && (now < key.unseen_until || requests > 2 * accepts)
    }

    /// A request the throttle's window counts unaccepted, at `now`.
    fn unaccepted(&mut self, name: &str, now: Ms) {
        let key = self.keys.get_mut(name).expect("a key in the map");
        key.requests.push((now, false));
        key.throttle.hold(
            now + THROTTLE_WINDOW - THROTTLE_BUCKET,
            now + THROTTLE_WINDOW + THROTTLE_BUCKET,
        );
    }

    /// A call to `name` got `r`: a refusal (`refusal`: open or throttled) or `answer`.
    pub fn called(
        &mut self,
        name: &str,
        answer: KeyAnswer,
        refusal: Option<Refusal>,
        now: Ms,
    ) -> Result<(), String> {
        let (throttle, dry_run) = (self.throttle, self.dry_run);
        self.touch(name, now);
        let key = self.keys.get(name).expect("a key in the map").clone();
        let forced = key.manual == Some(State::ForcedOpen);
        match refusal {
            Some(Refusal::Throttled) => {
                if !self.may_throttle(&key, now) || key.open || forced || key.manual.is_some() {
                    return Err(format!(
                        "{name} throttled though every request in its window was accepted: {key:?}"
                    ));
                }
                self.unaccepted(name, now);
                return Ok(());
            }
            Some(Refusal::Open) => {
                if dry_run || !(key.open || forced) {
                    return Err(format!("{name} refused open: {key:?}"));
                }
                return Ok(());
            }
            None if (key.open || forced) && !dry_run => {
                return Err(format!("{name} let a call through while open: {key:?}"));
            }
            None => {}
        }
        if dry_run && self.may_throttle(&key, now) && key.manual.is_none() && !key.open {
            // A throttled shadow looks like any call here: its outcome may have counted for
            // nothing, and the window may hold it as unaccepted.
            let key = self.keys.get_mut(name).unwrap();
            key.throttle
                .hold(0, now + THROTTLE_WINDOW + THROTTLE_BUCKET);
            key.unseen_until = now + THROTTLE_WINDOW + THROTTLE_BUCKET;
            key.unsure = true;
        }
        if key.open || forced {
            return Ok(()); // a dry run's shadow: its outcome counts for nothing
        }
        if throttle {
            match answer {
                KeyAnswer::Fail => self.unaccepted(name, now),
                KeyAnswer::Ok => self.keys.get_mut(name).unwrap().requests.push((now, true)),
            }
        }
        let threshold = self.threshold;
        let key = self.keys.get_mut(name).unwrap();
        match answer {
            KeyAnswer::Ok => key.streak = 0,
            KeyAnswer::Fail if key.manual.is_none() => {
                key.streak += 1;
                if key.streak >= threshold {
                    key.open = true;
                    key.streak = 0;
                }
            }
            KeyAnswer::Fail => {}
        }
        Ok(())
    }

    /// `name` used now.
    pub fn touch(&mut self, name: &str, now: Ms) {
        let step = self.step;
        let key = self.keys.get_mut(name).expect("a key in the map");
        key.used = now;
        key.used_step = step;
    }

    pub fn manual(&mut self, name: &str, m: Manual, now: Ms) {
        self.touch(name, now);
        let key = self.keys.get_mut(name).expect("a key in the map");
        match m {
            // The operator's hand replaces the state (a reset closes it).
            Manual::ForceOpen => {
                key.manual = Some(State::ForcedOpen);
                key.open = false;
            }
            Manual::Disable => {
                key.manual = Some(State::Disabled);
                key.open = false;
            }
            Manual::Reset => {
                // Closed, counts cleared, the throttle's window started over.
                key.manual = None;
                key.open = false;
                key.unsure = false;
                key.streak = 0;
                key.throttle = Held::default(); // the retry budget stays
                key.requests.clear();
                key.unseen_until = 0;
            }
        }
    }
}

/// How the keyed breaker refused a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Open,
    Throttled,
}
