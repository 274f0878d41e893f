//! The real thing, driven: one `Breaker` (its calls as tokio tasks waiting for their
//! answers, its own probe, `ready_when_closed` waiters through the tower layer) and one
//! `KeyedBreaker`, beside their models. Each operation acts on both, then lets every task
//! that can run, run (`settle`): paused time never moves by itself here, it moves only in
//! `advance`, where tokio fires each timer at its deadline.

use std::{
    collections::BTreeMap,
    future::pending,
    sync::{
        atomic::{AtomicBool, Ordering::Relaxed},
        Arc, Mutex,
    },
    time::Duration,
};

use breaker::{Breaker, CallError, Config, HedgeDelay, KeyedBreaker, Outliers, State, Verdict};
use tokio::{sync::oneshot, task::JoinHandle, time::Instant};

use super::{
    model::{Admit, Call, Chance, Fresh, Key, Keys, Model, Outcome, Race, RaceEnd, Refusal},
    ops::{Answer, KeyAnswer, KeyedKnobs, Knobs, Manual, Ms, Op, PatchKey, ProbeAnswer},
    outliers::{HostState, Pool, PoolKnobs, COOL_OFF, INTERVAL, MAX_BASES},
};

/// The keyed breaker's `idle`: a few `Advance`s.
const KEY_IDLE: Ms = 3_000;

/// The payload of every panic the test plans (its hook keeps them quiet).
pub const PLANNED: &str = "model: a planned panic";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Fail,
    Neutral,
    /// Judged `Verdict::OpenFor` this many milliseconds.
    OpenFor(Ms),
}

fn classify(r: &Result<(), Kind>) -> Verdict {
    match r {
        Ok(()) => Verdict::Success,
        Err(Kind::Fail) => Verdict::Failure,
        Err(Kind::Neutral) => Verdict::Neutral,
        Err(Kind::OpenFor(ms)) => Verdict::OpenFor(Duration::from_millis(*ms)),
    }
}

type Ended = Result<Result<(), CallError<Kind>>, tokio::task::JoinError>;

/// A call in flight: its task, how to answer it, and the model's record of it.
pub struct Live {
    pub join: JoinHandle<Result<(), CallError<Kind>>>,
    answer: Option<oneshot::Sender<Answer>>,
    pub call: Call,
}

/// A hedged call in flight: its task, the attempts its race made, and the model's race.
pub struct Hedged {
    pub join: JoinHandle<Result<(), CallError<Kind>>>,
    made: Arc<Mutex<Vec<Made>>>,
    pub race: Race,
}

/// An attempt the race made: how to answer it, and whether it ran (reached the dependency;
/// one refused is made and dropped unpolled).
struct Made {
    answer: Option<oneshot::Sender<Answer>>,
    ran: Arc<AtomicBool>,
}

impl Hedged {
    /// The attempts that reached the dependency, in order.
    fn ran(&self) -> usize {
        let made = self.made.lock().unwrap();
        made.iter().filter(|m| m.ran.load(Relaxed)).count()
    }

    fn answer(&self, k: usize, answer: Answer) {
        let mut made = self.made.lock().unwrap();
        let attempt = made.iter_mut().filter(|m| m.ran.load(Relaxed)).nth(k);
        let tx = attempt
            .and_then(|m| m.answer.take())
            .expect("an attempt answered once");
        let _ = tx.send(answer);
    }
}

/// The dependency of a call: it answers what the test tells it, or never.
async fn dependency(rx: oneshot::Receiver<Answer>) -> Result<(), Kind> {
    match rx.await {
        Ok(Answer::Ok) => Ok(()),
        Ok(Answer::Fail) => Err(Kind::Fail),
        Ok(Answer::Neutral) => Err(Kind::Neutral),
        Ok(Answer::OpenFor(ms)) => Err(Kind::OpenFor(ms)),
        Ok(Answer::Panic) => panic!("{PLANNED}"),
        Err(_) => pending().await,
    }
}

/// A failed check: the step's story is added by the caller.
pub type Checked = Result<(), String>;

macro_rules! ensure {
    ($cond:expr_2021, $($arg:tt)+) => {
        if !$cond {
            return Err(format!($($arg)+));
        }
    };
}
pub(crate) use ensure;

pub struct World {
    pub origin: Instant,
    serial: u32,
    pub breaker: Option<Breaker>,
    pub weak: breaker_runtime::WeakHandle,
    pub model: Model,
    pub lives: Vec<Live>,
    probe_answer: Arc<Mutex<ProbeAnswer>>,
    /// `ready()` of a `ready_when_closed` service, waiting (feature `tower`).
    pub waiters: Vec<JoinHandle<()>>,
    pub keyed: KeyedBreaker<String>,
    pub keys: Keys,
    /// The hedged call in flight, if any (one at a time: two races' timers never fire at
    /// one instant, where tokio's order is not the model's to know).
    pub race: Option<Hedged>,
    /// A keyed breaker judging its keys against their peers (`Config::outliers`), and its
    /// model; `None` once dropped at the end.
    pub pool: Option<KeyedBreaker<String>>,
    pub hosts: Pool,
    pub steps: u64,
}

/// Lets every task that can run, run, at this instant (a chain of wakes is a few deep:
/// a call's end opens the breaker, which starts the probe task, which sleeps).
pub async fn settle() {
    for _ in 0..12 {
        tokio::task::yield_now().await;
    }
}

pub fn config(k: &Knobs, probe: Option<&Arc<Mutex<ProbeAnswer>>>) -> Config {
    let ms = Duration::from_millis;
    let mut c = Config::default()
        .cool_off(ms(k.cool_off))
        .probes(k.probes)
        .dry_run(k.dry_run);
    if let Some(t) = k.threshold {
        c = c.threshold(t);
    }
    if let Some((percent, window, min)) = k.rate {
        c = c.failure_rate(percent).window_calls(window).min_calls(min);
    }
    if let Some(cap) = k.max_cool_off {
        c = c.max_cool_off(ms(cap));
    }
    if let Some(s) = k.success_threshold {
        c = c.success_threshold(s);
    }
    if let Some(n) = k.max_concurrent {
        c = c.max_concurrent(n);
    }
    if let Some(s) = k.slow_call {
        c = c.slow_call(ms(s));
    }
    if let Some(t) = k.timeout {
        c = c.timeout(ms(t));
    }
    if let Some(r) = k.ramp {
        c = c.ramp(ms(r));
    }
    if let Some(max) = k.adaptive {
        c = c.adaptive_concurrency(max);
    }
    if let Some(h) = k.hedge {
        c = c.hedge(h.hedges).hedge_delay(hedge_delay(h.delay));
        if let Some(p) = h.budget {
            c = c.hedge_budget(p);
        }
    }
    if let Some(cell) = probe {
        let cell = Arc::clone(cell);
        c = c.probe(move || {
            let answer = *cell.lock().unwrap();
            async move {
                match answer {
                    ProbeAnswer::Ok => Ok(()),
                    ProbeAnswer::Fail => Err(()),
                    ProbeAnswer::Panic => panic!("{PLANNED}"),
                    ProbeAnswer::Hang => pending().await,
                }
            }
        });
    }
    c
}

pub fn hedge_delay(delay: Option<Ms>) -> HedgeDelay {
    match delay {
        Some(ms) => HedgeDelay::Fixed(Duration::from_millis(ms)),
        None => HedgeDelay::Percentile(95.0),
    }
}

/// What the cases covered (the soak's report): hedges sent, won and denied, ejections,
/// hosts that came back, hedges the budget denied, instants where the race and the probe task
/// were due together (and the probe ran first, by the real race).
pub static COVERED: [std::sync::atomic::AtomicU64; 8] =
    [const { std::sync::atomic::AtomicU64::new(0) }; 8];

/// The pool's hosts.
pub const HOSTS: usize = 8;

pub fn pool_config(k: &PoolKnobs) -> Config {
    let ms = Duration::from_millis;
    let mut o = Outliers::default()
        .interval(ms(INTERVAL))
        .request_volume(k.request_volume)
        .minimum_hosts(k.minimum_hosts)
        .stdev_factor(f64::from(k.stdev_factor) / 10.0)
        .base_ejection_time(ms(k.base))
        .max_ejection_time(ms(k.base * MAX_BASES))
        .max_ejection_percent(k.max_ejection_percent);
    if let Some(p) = k.failure_percentage {
        o = o.failure_percentage(p);
    }
    Config::default()
        .threshold(1_000)
        .cool_off(ms(COOL_OFF))
        .outliers(o)
}

pub fn keyed_config(k: &KeyedKnobs) -> Config {
    let mut c = Config::default()
        .threshold(k.threshold)
        .max_keys(k.max_keys)
        .cool_off(Duration::from_secs(600))
        .idle(Duration::from_millis(KEY_IDLE))
        .retry(2)
        .backoff(Duration::from_millis(10))
        .dry_run(k.dry_run);
    if k.throttle {
        c = c.throttle(2.0);
    }
    c
}

impl World {
    pub fn new(k: Knobs, own_probe: bool, kk: KeyedKnobs, pk: PoolKnobs) -> World {
        let probe_answer = Arc::new(Mutex::new(ProbeAnswer::Ok));
        let (breaker, weak) = Self::make(1, &k, own_probe.then_some(&probe_answer));
        let keys = Keys {
            threshold: kk.threshold,
            throttle: kk.throttle,
            max_keys: kk.max_keys,
            idle: KEY_IDLE,
            sweeps: Vec::new(),
            step: 0,
            dry_run: kk.dry_run,
            keys: Default::default(),
        };
        World {
            origin: Instant::now(),
            serial: 1,
            breaker: Some(breaker),
            weak,
            model: Model::new(k, own_probe.then_some(ProbeAnswer::Ok), 0),
            lives: Vec::new(),
            probe_answer,
            waiters: Vec::new(),
            keyed: KeyedBreaker::new(format!("model::keyed::{}", unique()), keyed_config(&kk)),
            keys,
            race: None,
            pool: Some(KeyedBreaker::new(
                format!("model::pool::{}", unique()),
                pool_config(&pk),
            )),
            hosts: Pool::new(pk, HOSTS),
            steps: 0,
        }
    }

    fn make(
        serial: u32,
        k: &Knobs,
        probe: Option<&Arc<Mutex<ProbeAnswer>>>,
    ) -> (Breaker, breaker_runtime::WeakHandle) {
        let name = format!("model::{}::{serial}", unique());
        let b = Breaker::try_new(name, config(k, probe))
            .expect("the strategies make valid configurations");
        let weak = b.handle().downgrade();
        (b, weak)
    }

    pub fn now(&self) -> Ms {
        Instant::now().duration_since(self.origin).as_millis() as Ms
    }

    pub fn breaker(&self) -> &Breaker {
        self.breaker.as_ref().expect("a breaker between operations")
    }

    /// Runs one operation on the real thing and on the model, checking what it returns.
    pub async fn step(&mut self, op: &Op) -> Checked {
        self.steps += 1;
        self.keys.step += 1;
        let now = self.now();
        match op {
            Op::Start => self.start(now).await?,
            Op::Finish(i, answer) => self.finish(*i, *answer).await?,
            Op::Cancel(i) if self.race.is_some() && i % (self.lives.len() + 1) == 0 => {
                let mut h = self.race.take().expect("a race");
                h.join.abort();
                settle().await;
                self.model.drop_race(&mut h.race, now);
                ensure!(h.join.is_finished(), "an aborted hedged call's task ended");
            }
            Op::Cancel(i) => {
                if !self.lives.is_empty() {
                    let live = self.lives.remove(i % self.lives.len());
                    live.join.abort();
                    settle().await;
                    self.model.finish(live.call, Outcome::Cancelled, now);
                    ensure!(live.join.is_finished(), "an aborted call's task ended");
                }
            }
            Op::Advance(d) => self.advance(*d).await?,
            Op::ReadState => {
                let real = self.breaker().state();
                let model = self.model.read_state(now);
                ensure!(real == model, "state() {real:?}, the model {model:?}");
                settle().await;
            }
            Op::Manual(m) => {
                let h = self.breaker().handle();
                match m {
                    Manual::Reset => self.breaker().reset(),
                    Manual::ForceOpen => h.force_open(),
                    Manual::Disable => h.disable(),
                }
                self.model.manual(*m, now);
                settle().await;
            }
            Op::Reconfigure(k) => {
                // The overload keys cannot change on a running breaker: kept as they are.
                let mut k = k.clone();
                (k.ramp, k.adaptive) = (self.model.k.ramp, self.model.k.adaptive);
                if k.adaptive.is_some() {
                    k.max_concurrent = None;
                }
                let probe = self.model.own_probe.is_some().then_some(&self.probe_answer);
                let r = self.breaker().reconfigure(config(&k, probe));
                ensure!(r.is_ok(), "a valid configuration refused: {r:?}");
                self.model.reconfigure(k);
                settle().await;
            }
            Op::Patch(keys) => self.patch(keys).await?,
            Op::SetProbe(a) => {
                *self.probe_answer.lock().unwrap() = *a;
                if let Some(p) = &mut self.model.own_probe {
                    *p = *a;
                }
            }
            Op::WaitReady => self.wait_ready().await,
            Op::Replace(k, probe) => self.replace(k.clone(), *probe).await?,
            Op::KeyCall(key, answer) => self.key_call(*key, *answer).await?,
            Op::KeyRetried(key, cancel) => self.key_retried(*key, *cancel).await?,
            Op::KeyManual(key, m) => self.key_manual(*key, *m).await?,
            Op::KeySweep => self.sweep()?,
            Op::StartHedged => self.start_hedged(now).await?,
            Op::HostCalls(h, ok, fail) => self.host_calls(*h as usize, *ok, *fail).await?,
        }
        // Whatever is due at this instant (a probe task just started, say) happens now.
        let waiting = self.waiting();
        self.events_until(self.now(), waiting).await
    }

    async fn start(&mut self, now: Ms) -> Checked {
        let (tx, rx) = oneshot::channel::<Answer>();
        let b = self.breaker().clone();
        let before = b.stats();
        let join = tokio::spawn(b.clone().call_owned_classified(classify, dependency(rx)));
        settle().await;
        // What the engine drew (the ramp's shedding, the adaptive limit), read from what it
        // did: refused so, or (a dry run) a shadow made.
        let shadowed = b.stats().shadow_rejected > before.shadow_rejected;
        let mut join = Some(join);
        let ended = match join.as_ref().is_some_and(|j| j.is_finished()) {
            true => Some(join.take().expect("a task").await),
            false => None,
        };
        let refused = |is: fn(&breaker::BreakerError) -> bool| matches!(&ended, Some(Ok(Err(CallError::Breaker(e)))) if is(e));
        let (throttled, full) = (refused(|e| e.is_throttled()), refused(|e| e.is_full()));
        let (expected, call) = self.model.admit(now, |chance| match chance {
            Chance::Ramp => throttled || shadowed,
            Chance::AdaptiveFull => full || shadowed,
            Chance::NoHedge => unreachable!("a plain call does not hedge"),
        });
        match (call, ended) {
            (Some(call), None) => self.lives.push(Live {
                join: join.expect("a running call's task"),
                answer: Some(tx),
                call,
            }),
            (Some(_), Some(ended)) => {
                return Err(format!(
                    "{expected:?}: the call should run, it ended: {ended:?}"
                ))
            }
            (None, None) => {
                return Err(format!("{expected:?}: the call should be refused, it runs"))
            }
            (None, Some(ended)) => {
                let ok = match (&ended, expected) {
                    (Ok(Err(CallError::Breaker(e))), Admit::Open(left)) => {
                        e.is_open() && e.retry_in() == left.map(Duration::from_millis)
                    }
                    (Ok(Err(CallError::Breaker(e))), Admit::Full) => e.is_full(),
                    (Ok(Err(CallError::Breaker(e))), Admit::Throttled) => e.is_throttled(),
                    _ => false,
                };
                ensure!(ok, "expected {expected:?}, got {ended:?}");
            }
        }
        Ok(())
    }

    async fn finish(&mut self, i: usize, answer: Answer) -> Checked {
        let attempts = self.race.as_ref().map_or(0, |h| h.race.running().count());
        if self.lives.len() + attempts == 0 {
            return Ok(());
        }
        let i = i % (self.lives.len() + attempts);
        if i >= self.lives.len() {
            let h = self.race.as_ref().expect("a race");
            let k = (h.race.attempts.iter().enumerate())
                .filter(|(_, a)| a.is_some())
                .nth(i - self.lives.len())
                .map(|(k, _)| k)
                .expect("a running attempt");
            h.answer(k, answer);
            settle().await;
            let now = self.now();
            return self.race_step(&[(k, Some(answer))], now).await;
        }
        let mut live = self.lives.remove(i);
        let now = self.now();
        let _ = live.answer.take().expect("answered once").send(answer);
        settle().await;
        ensure!(
            live.join.is_finished(),
            "a call answered {answer:?} did not end"
        );
        let ended: Ended = live.join.await;
        let (outcome, ok) = match answer {
            Answer::Ok => (Outcome::Success, matches!(ended, Ok(Ok(())))),
            Answer::Fail => (
                Outcome::Failure,
                matches!(ended, Ok(Err(CallError::Inner(Kind::Fail)))),
            ),
            Answer::Neutral => (
                Outcome::Neutral,
                matches!(ended, Ok(Err(CallError::Inner(Kind::Neutral)))),
            ),
            Answer::OpenFor(ms) => (
                Outcome::OpenFor(ms),
                matches!(ended, Ok(Err(CallError::Inner(Kind::OpenFor(m)))) if m == ms),
            ),
            Answer::Panic => (Outcome::Failure, matches!(&ended, Err(e) if e.is_panic())),
        };
        ensure!(ok, "answered {answer:?}, the caller got {ended:?}");
        self.model.finish(live.call, outcome, now);
        Ok(())
    }

    /// A hedged call: its first attempt admitted or refused as a call is; one at a time
    /// (a second one, while one runs, is a plain call).
    async fn start_hedged(&mut self, now: Ms) -> Checked {
        if self.race.is_some() || self.model.samples >= 90 {
            return self.start(now).await;
        }
        let b = self.breaker().clone();
        let before = b.stats();
        let made = Arc::new(Mutex::new(Vec::<Made>::new()));
        let log = Arc::clone(&made);
        let join = tokio::spawn(async move {
            let make = || {
                let (tx, rx) = oneshot::channel();
                let ran = Arc::new(AtomicBool::new(false));
                let flag = Arc::clone(&ran);
                log.lock().unwrap().push(Made {
                    answer: Some(tx),
                    ran,
                });
                async move {
                    flag.store(true, Relaxed);
                    dependency(rx).await
                }
            };
            b.call_hedged_classified(classify, make).await
        });
        settle().await;
        let b = self.breaker();
        let shadowed = b.stats().shadow_rejected > before.shadow_rejected;
        let mut join = Some(join);
        let ended = match join.as_ref().is_some_and(|j| j.is_finished()) {
            true => Some(join.take().expect("a task").await),
            false => None,
        };
        let refused = |is: fn(&breaker::BreakerError) -> bool| matches!(&ended, Some(Ok(Err(CallError::Breaker(e)))) if is(e));
        let (throttled, full) = (refused(|e| e.is_throttled()), refused(|e| e.is_full()));
        let race = self.model.start_race(now, |chance| match chance {
            Chance::Ramp => throttled || shadowed,
            Chance::AdaptiveFull => full || shadowed,
            Chance::NoHedge => unreachable!("no hedge at a start"),
        });
        match (race, ended) {
            (Ok(race), None) => {
                let join = join.expect("a running call's task");
                let h = Hedged { join, made, race };
                ensure!(h.ran() == 1, "a hedged call started {} attempts", h.ran());
                self.race = Some(h);
                Ok(())
            }
            (Ok(_), Some(ended)) => Err(format!("a hedged call should run, it ended: {ended:?}")),
            (Err(expected), None) => Err(format!(
                "{expected:?}: the hedged call should be refused, it runs"
            )),
            (Err(expected), Some(ended)) => {
                let ok = match (&ended, expected) {
                    (Ok(Err(CallError::Breaker(e))), Admit::Open(left)) => {
                        e.is_open() && e.retry_in() == left.map(Duration::from_millis)
                    }
                    (Ok(Err(CallError::Breaker(e))), Admit::Full) => e.is_full(),
                    (Ok(Err(CallError::Breaker(e))), Admit::Throttled) => e.is_throttled(),
                    _ => false,
                };
                ensure!(ok, "a hedged call: expected {expected:?}, got {ended:?}");
                Ok(())
            }
        }
    }

    /// The race's events at `now` (its attempts that ended: answered, or timed out with a
    /// `None`; its timer), in the model and checked on the real race: the attempts that
    /// reached the dependency, and the answer when it ends.
    async fn race_step(&mut self, ended: &[(usize, Option<Answer>)], now: Ms) -> Checked {
        let mut h = self.race.take().expect("a race");
        let (sent, real) = (h.race.attempts.len(), h.ran());
        let (stats, budget_denied) = (self.model.stats, self.model.budget_denied);
        let end = self
            .model
            .race_step(&mut h.race, ended, now, |_| real <= sent);
        let after = self.model.stats;
        for (i, (a, b)) in [
            (after.hedges, stats.hedges),
            (after.hedges_won, stats.hedges_won),
            (after.hedges_denied, stats.hedges_denied),
        ]
        .into_iter()
        .enumerate()
        {
            COVERED[i].fetch_add(a.saturating_sub(b), Relaxed);
        }
        COVERED[5].fetch_add(self.model.budget_denied - budget_denied, Relaxed);
        ensure!(
            h.ran() == h.race.attempts.len(),
            "the race ran {} attempts, the model {} ({end:?})",
            h.ran(),
            h.race.attempts.len()
        );
        if end == RaceEnd::Running {
            ensure!(
                !h.join.is_finished(),
                "a hedged call ended while attempts run"
            );
            self.race = Some(h);
            return Ok(());
        }
        ensure!(h.join.is_finished(), "a hedged call did not end: {end:?}");
        let got = h.join.await;
        let ok = match end {
            RaceEnd::Won(_, Outcome::Success) => matches!(got, Ok(Ok(()))),
            RaceEnd::Won(_, _) => matches!(got, Ok(Err(CallError::Inner(Kind::Neutral)))),
            RaceEnd::AllFailed(Outcome::Timeout) => {
                matches!(&got, Ok(Err(CallError::Breaker(e))) if e.is_timeout())
            }
            RaceEnd::AllFailed(Outcome::OpenFor(ms)) => {
                matches!(got, Ok(Err(CallError::Inner(Kind::OpenFor(m)))) if m == ms)
            }
            RaceEnd::AllFailed(_) => matches!(got, Ok(Err(CallError::Inner(Kind::Fail)))),
            RaceEnd::Panicked => matches!(&got, Err(e) if e.is_panic()),
            RaceEnd::Running => unreachable!(),
        };
        ensure!(
            ok,
            "a hedged call: the model says {end:?}, the caller got {got:?}"
        );
        Ok(())
    }

    /// Calls to a host of the pool: `ok` successes, then `fail` failures.
    async fn host_calls(&mut self, h: usize, ok: u8, fail: u8) -> Checked {
        let now = self.now();
        let name = format!("h{h}");
        let pool = self.pool.as_ref().expect("the pool until the end");
        let answers =
            std::iter::repeat_n(true, ok.into()).chain(std::iter::repeat_n(false, fail.into()));
        for answer in answers {
            let r = pool.call_sync(&name, || if answer { Ok(()) } else { Err(Kind::Fail) });
            let admitted = match &r {
                Err(CallError::Breaker(e)) if e.is_open() => false,
                Err(CallError::Breaker(e)) => return Err(format!("host {name}: {e}")),
                _ => true,
            };
            self.hosts.call(h, answer, now, admitted)?;
        }
        Ok(())
    }

    /// The pool's walk at `now`: the real hosts' states are checked after every step; here,
    /// the rules no exact model is needed for.
    fn walked(&mut self, now: Ms) -> Checked {
        let real = self.hosts_in_map();
        let took = |h: usize| real.get(&format!("h{h}")) == Some(&State::Open);
        let walk = self.hosts.walk(now, took);
        COVERED[3].fetch_add(walk.ejected.len() as u64, Relaxed);
        let cap = self.hosts.k.max_ejection_percent as usize;
        ensure!(
            walk.ejected.is_empty() || walk.out * 100 <= cap * walk.in_use,
            "ejected {:?}: {} out of {} in use, past {cap} %",
            walk.ejected,
            walk.out,
            walk.in_use
        );
        ensure!(
            walk.ejected.len() < walk.in_use.max(1),
            "ejected every host in use: {walk:?}"
        );
        Ok(())
    }

    /// The pool's hosts, as stored (read through the registry, which moves nothing).
    pub fn hosts_in_map(&self) -> BTreeMap<String, State> {
        let Some(pool) = &self.pool else {
            return BTreeMap::new();
        };
        family(pool.name())
    }

    /// Time passes: each timer the model knows of (a timeout, the probe task) fires at its
    /// deadline, the model follows, then the rest of the way.
    pub async fn advance(&mut self, d: Ms) -> Checked {
        let target = self.now() + d;
        loop {
            // Whether waiters wait is read before they may wake.
            let waiting = self.waiting();
            match self.next_event(waiting) {
                Some(at) if at <= target => {
                    tokio::time::sleep_until(self.origin + Duration::from_millis(at)).await;
                    settle().await;
                    self.events_until(at, waiting).await?;
                }
                _ => break,
            }
        }
        let waiting = self.waiting();
        tokio::time::sleep_until(self.origin + Duration::from_millis(target)).await;
        settle().await;
        self.events_until(target, waiting).await
    }

    /// The model's events due by `now`, in time order: timeouts (checked on the real calls),
    /// the probe task's turns.
    async fn events_until(&mut self, now: Ms, waiting: bool) -> Checked {
        loop {
            let Some(at) = self.next_event(waiting).filter(|at| *at <= now) else {
                return Ok(());
            };
            // Of the calls timing out now, the first admitted ends first (its task is woken
            // first); the race's attempts end together (in one poll of its task).
            let plain = self.lives.iter().position(|l| l.call.deadline == Some(at));
            let race = self.race.as_ref().and_then(|h| {
                let attempt = h.race.running().filter(|c| c.deadline == Some(at));
                let first = attempt.map(|c| c.seq).min();
                first.or((h.race.timer() == Some(at)).then_some(u64::MAX))
            });
            let race_due = match (plain, race) {
                (Some(i), Some(seq)) => seq < self.lives[i].call.seq,
                (_, race) => race.is_some(),
            };
            if let Some(i) = plain.filter(|_| !race_due) {
                let live = self.lives.remove(i);
                ensure!(
                    live.join.is_finished(),
                    "a call past its timeout still runs"
                );
                let ended = live.join.await;
                ensure!(
                    matches!(&ended, Ok(Err(CallError::Breaker(e))) if e.is_timeout()),
                    "a call past its timeout returned {ended:?}"
                );
                self.model.finish(live.call, Outcome::Timeout, at);
            } else if race_due {
                let h = self.race.as_mut().expect("a race");
                let ended: Vec<_> = (h.race.attempts.iter().enumerate())
                    .filter(|(_, a)| a.is_some_and(|c| c.deadline == Some(at)))
                    .map(|(k, _)| (k, None))
                    .collect();
                if !ended.is_empty() || h.race.timer() == Some(at) {
                    if self.model.task_due(at) {
                        COVERED[6].fetch_add(1, Relaxed);
                        if self.probe_runs_first(&ended, at) {
                            COVERED[7].fetch_add(1, Relaxed);
                            self.model.probe_turn(at);
                        }
                    }
                    self.race_step(&ended, at).await?;
                }
            } else if self.model.task_due(at) {
                self.model.probe_turn(at);
            } else if self.pool.is_some() && self.hosts.next_walk == at {
                self.walked(at)?;
            } else {
                self.model.read_state(at); // a waiter polls at the end of the open period
            }
        }
    }

    /// Whether the probe task took its turn at `at` before the race's task, both due then.
    /// Their timers fire at one instant and tokio runs the two tasks in its own order (its
    /// timer wheel's), which is no part of the contract: either is right, and they differ
    /// (a probe that closes the breaker first lets the race hedge; the race first finds it
    /// open and is denied). So the model does not guess: it plays both orders and takes the
    /// one the real race agrees with, by the attempts it ran, then by the breaker's state;
    /// where both agree, the race first. Everything else is then checked as always.
    fn probe_runs_first(&self, ended: &[(usize, Option<Answer>)], at: Ms) -> bool {
        let h = self.race.as_ref().expect("a race");
        let (sent, ran) = (h.race.attempts.len(), h.ran());
        let real = self.breaker().handle().peek_state();
        let play = |probe_first: bool| {
            let (mut model, mut race) = (self.model.clone(), h.race.clone());
            if probe_first {
                model.probe_turn(at);
            }
            model.race_step(&mut race, ended, at, |_| ran <= sent);
            if !probe_first {
                model.probe_turn(at);
            }
            (race.attempts.len() == ran, model.state == real)
        };
        let (race_first, probe_first) = (play(false), play(true));
        match (race_first.0, probe_first.0) {
            (true, false) => false,
            (false, true) => true,
            _ => !race_first.1 && probe_first.1,
        }
    }

    fn next_event(&self, waiting: bool) -> Option<Ms> {
        let race = self.race.as_ref().map(|h| &h.race);
        let timer = race.and_then(Race::timer);
        let walk = self.pool.as_ref().map(|_| self.hosts.next_walk);
        let calls = self.calls();
        let next = self.model.next_event(&calls, waiting);
        next.into_iter().chain(timer).chain(walk).min()
    }

    /// The calls in flight: the plain ones, the race's attempts.
    pub fn calls(&self) -> Vec<Call> {
        let race = self.race.iter().flat_map(|h| h.race.running());
        self.lives
            .iter()
            .map(|l| l.call)
            .chain(race.copied())
            .collect()
    }

    fn waiting(&self) -> bool {
        self.waiters.iter().any(|j| !j.is_finished())
    }

    #[cfg(not(feature = "serde"))]
    async fn patch(&mut self, _: &[PatchKey]) -> Checked {
        Ok(())
    }

    #[cfg(feature = "serde")]
    async fn patch(&mut self, keys: &[PatchKey]) -> Checked {
        let mut k = self.model.k.clone();
        let mut json = serde_json::Map::new();
        let dur = |ms: Option<Ms>| match ms {
            Some(ms) => serde_json::Value::from(format!("{ms}ms")),
            None => serde_json::Value::Null,
        };
        for key in keys {
            let (name, value) = match key {
                PatchKey::Threshold(t) => {
                    k.threshold = Some(*t);
                    ("threshold", serde_json::Value::from(*t))
                }
                PatchKey::CoolOff(c) => {
                    k.cool_off = *c;
                    ("cool_off", dur(Some(*c)))
                }
                PatchKey::SlowCall(s) => {
                    k.slow_call = *s;
                    ("slow_call", dur(*s))
                }
                PatchKey::Timeout(t) => {
                    k.timeout = *t;
                    ("timeout", dur(*t))
                }
                // One bulkhead: with an adaptive one, a fixed one is not asked for.
                PatchKey::MaxConcurrent(Some(_)) if k.adaptive.is_some() => continue,
                PatchKey::MaxConcurrent(m) => {
                    k.max_concurrent = *m;
                    (
                        "max_concurrent",
                        m.map_or(serde_json::Value::Null, serde_json::Value::from),
                    )
                }
                PatchKey::DryRun(on) => {
                    k.dry_run = *on;
                    ("dry_run", serde_json::Value::from(*on))
                }
            };
            json.insert(name.into(), value);
        }
        let patch: breaker::ConfigPatch = serde_json::from_value(json.into())
            .map_err(|e| format!("a patch of {keys:?} did not parse: {e}"))?;
        let r = self.breaker().apply(&patch);
        ensure!(r.is_ok(), "a valid patch refused: {r:?}");
        self.model.reconfigure(k);
        settle().await;
        Ok(())
    }

    #[cfg(feature = "tower")]
    async fn wait_ready(&mut self) {
        use tower::{Layer, ServiceExt};
        let layer =
            breaker::tower::CircuitBreakerLayer::new(self.breaker().clone()).ready_when_closed();
        let mut svc = layer.layer(tower::service_fn(|()| async {
            Ok::<_, std::convert::Infallible>(())
        }));
        self.waiters.push(tokio::spawn(async move {
            let _ = svc.ready().await;
        }));
        settle().await;
    }

    #[cfg(not(feature = "tower"))]
    async fn wait_ready(&mut self) {}

    /// The breaker dropped (its calls cancelled, its waiters gone): nothing of it may stay
    /// alive, no task, no handle; a new one takes its place.
    async fn replace(&mut self, k: Knobs, own_probe: bool) -> Checked {
        self.drop_breaker().await?;
        self.serial += 1;
        let (b, weak) = Self::make(self.serial, &k, own_probe.then_some(&self.probe_answer));
        let answer = *self.probe_answer.lock().unwrap();
        self.breaker = Some(b);
        self.weak = weak;
        self.model = Model::new(k, own_probe.then_some(answer), self.now());
        Ok(())
    }

    pub async fn drop_breaker(&mut self) -> Checked {
        for live in self.lives.drain(..) {
            live.join.abort();
        }
        for waiter in self.waiters.drain(..) {
            waiter.abort();
        }
        if let Some(h) = self.race.take() {
            h.join.abort();
        }
        self.breaker = None;
        settle().await;
        ensure!(
            self.weak.upgrade().is_none(),
            "a dropped breaker is still alive (held by {:?})",
            self.model.task
        );
        let alive = tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks();
        ensure!(
            alive == self.pool_tasks(),
            "{alive} tasks alive for a dropped breaker"
        );
        Ok(())
    }

    /// The pool's detector task, while the pool lives.
    pub fn pool_tasks(&self) -> usize {
        usize::from(self.pool.is_some())
    }

    /// The end: every host admits (the ejected came back), then the pool dropped leaves no
    /// task behind.
    pub async fn drop_pool(&mut self) -> Checked {
        let now = self.now();
        for h in 0..HOSTS {
            if self.hosts.hosts[h].is_some() {
                let before = self.hosts.hosts[h].clone();
                self.host_calls(h, 1, 0).await?;
                let host = self.hosts.hosts[h].as_ref().expect("a host");
                ensure!(
                    host.state == HostState::Closed,
                    "host h{h} did not come back by {now} ms: {before:?}"
                );
            }
        }
        self.pool = None;
        settle().await;
        let alive = tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks();
        ensure!(alive == 0, "{alive} tasks alive for a dropped pool");
        Ok(())
    }

    /// `name` used: if it is new, it comes into the map (evicting one at `max_keys`), unless
    /// every key there is under manual control (then its breaker is not kept). Whether it
    /// is in the map.
    fn enter(&mut self, name: &str, before: Vec<(String, Fresh)>) -> Result<bool, String> {
        if self.keys.keys.contains_key(name) {
            return Ok(true);
        }
        let full = before.len() >= self.keys.max_keys;
        let manual = before
            .iter()
            .all(|(n, _)| self.keys.keys[n].manual.is_some());
        if full && manual {
            // Not kept (checked after the step, once the caller let go of its breaker).
            return Ok(false);
        }
        let key = Key {
            used: self.now(),
            created: self.now(),
            used_step: self.keys.step,
            ..Key::default()
        };
        self.keys.keys.insert(name.to_string(), key);
        self.evicted(name, before)?;
        Ok(true)
    }

    async fn key_manual(&mut self, key: u8, m: Manual) -> Checked {
        let name = key_name(key);
        let before = self.evictable(self.now());
        let h = self.keyed.breaker(&name).handle();
        if !self.enter(&name, before)? {
            return Ok(());
        }
        match m {
            Manual::Reset => h.reset(),
            Manual::ForceOpen => h.force_open(),
            Manual::Disable => h.disable(),
        }
        self.keys.manual(&name, m, self.now());
        Ok(())
    }

    async fn key_call(&mut self, key: u8, answer: KeyAnswer) -> Checked {
        let name = key_name(key);
        let now = self.now();
        let before = self.evictable(now);
        let r = self
            .keyed
            .call(&name, async move {
                match answer {
                    KeyAnswer::Ok => Ok(()),
                    KeyAnswer::Fail => Err(Kind::Fail),
                }
            })
            .await;
        if !self.enter(&name, before)? {
            return Ok(());
        }
        let refusal = match &r {
            Err(CallError::Breaker(e)) if e.is_throttled() => Some(Refusal::Throttled),
            Err(CallError::Breaker(e)) if e.is_open() => Some(Refusal::Open),
            Err(CallError::Breaker(e)) => return Err(format!("{name}: unexpected {e}")),
            _ => None,
        };
        self.keys.called(&name, answer, refusal, now)
    }

    async fn key_retried(&mut self, key: u8, cancel: bool) -> Checked {
        let name = key_name(key);
        let now = self.now();
        let before = self.evictable(now);
        let tries = Arc::new(Mutex::new(0u32));
        let counted = Arc::clone(&tries);
        let retried = self.keyed.call_retried(&name, move || {
            let counted = Arc::clone(&counted);
            // Counted when it runs (the future may be made and refused unpolled). The first
            // attempt fails, the retry succeeds: only the budget holds state.
            async move {
                let attempt = {
                    let mut t = counted.lock().unwrap();
                    *t += 1;
                    *t
                };
                if attempt == 1 {
                    Err(Kind::Fail)
                } else {
                    Ok(())
                }
            }
        });
        let before_stats = self.keyed.breaker(&name).stats();
        if !self.enter(&name, before)? {
            drop(retried);
            return Ok(());
        }
        let join = tokio::spawn(retried);
        settle().await;
        if *tries.lock().unwrap() == 0 {
            // The first attempt refused (open, forced, throttled): nothing paid.
            ensure!(join.is_finished(), "a refused retried call ended");
            let r = join.await.map_err(|e| format!("{e}"))?;
            let refusal = match &r {
                Err(CallError::Breaker(e)) if e.is_throttled() => Some(Refusal::Throttled),
                Err(CallError::Breaker(e)) if e.is_open() => Some(Refusal::Open),
                other => {
                    return Err(format!(
                        "{name}: a retried call that never ran returned {other:?}"
                    ))
                }
            };
            return self.keys.called(&name, KeyAnswer::Fail, refusal, now);
        }
        // The first attempt failed: it deposited, and the retry was paid for.
        self.keys.called(&name, KeyAnswer::Fail, None, now)?;
        self.keys.keys.get_mut(&name).unwrap().retry_paid(now);
        if cancel {
            join.abort();
            settle().await;
            let stats = self.keyed.breaker(&name).stats();
            ensure!(
                stats.retries == before_stats.retries,
                "a retry cancelled in its backoff was counted: {before_stats:?} -> {stats:?}"
            );
            self.keys.keys.get_mut(&name).unwrap().refund(now);
            return Ok(());
        }
        self.advance(20).await?;
        ensure!(
            join.is_finished(),
            "a retried call is still waiting after its backoff"
        );
        let r = join.await.map_err(|e| format!("{e}"))?;
        let stats = self.keyed.breaker(&name).stats();
        let later = self.now();
        if *tries.lock().unwrap() == 2 {
            ensure!(
                stats.retries == before_stats.retries + 1,
                "one retry made, counted {before_stats:?} -> {stats:?}"
            );
            self.keys.called(&name, KeyAnswer::Ok, None, later)
        } else {
            // The breaker refused the retry: its cost went back, it is not counted.
            ensure!(
                stats.retries == before_stats.retries,
                "a refused retry was counted: {before_stats:?} -> {stats:?} ({r:?})"
            );
            self.keys.keys.get_mut(&name).unwrap().refund(now);
            let refusal = match &r {
                Err(CallError::Breaker(e)) if e.is_throttled() => Refusal::Throttled,
                Err(CallError::Breaker(e)) if e.is_open() => Refusal::Open,
                other => {
                    return Err(format!(
                        "{name}: a retry that did not run returned {other:?}"
                    ))
                }
            };
            self.keys.called(&name, KeyAnswer::Ok, Some(refusal), later)
        }
    }

    /// Keys eviction may drop, as the model sees them just before a new key comes.
    fn evictable(&self, now: Ms) -> Vec<(String, Fresh)> {
        self.keys
            .keys
            .iter()
            .map(|(name, key)| (name.clone(), self.keys.fresh(key, now)))
            .collect()
    }

    /// A new key came in: the keys that went were idle and held nothing (swept, or evicted
    /// first), or one was evicted to make room at `max_keys`, and never one holding state
    /// while a fresh one was there.
    fn evicted(&mut self, new: &str, before: Vec<(String, Fresh)>) -> Checked {
        let map = self.in_map();
        ensure!(map.contains_key(new), "the new key {new} is in the map");
        let now = self.now();
        let gone: Vec<(String, Fresh)> = before
            .iter()
            .filter(|(name, _)| !map.contains_key(name))
            .cloned()
            .collect();
        let fresh_there = before.iter().any(|(_, f)| *f == Fresh::Yes);
        let mut evicted = 0;
        for (name, fresh) in &gone {
            let key = &self.keys.keys[name];
            ensure!(key.manual.is_none(), "evicted {name}, under manual control");
            if !self.keys.may_go(key, now) {
                evicted += 1;
                ensure!(
                    !(fresh_there && *fresh == Fresh::No),
                    "evicted {name} ({fresh:?}) while a fresh key was there: {before:?}"
                );
            }
        }
        let full = before.len() >= self.keys.max_keys;
        ensure!(
            evicted <= 1 && (!full || !gone.is_empty()),
            "a new key at {} of max_keys {} took out {gone:?}",
            before.len(),
            self.keys.max_keys
        );
        for (name, _) in gone {
            self.keys.keys.remove(&name);
        }
        Ok(())
    }

    /// `retain_active()`: what went was idle and held nothing; what had to go went.
    pub fn sweep(&mut self) -> Checked {
        let now = self.now();
        let must: Vec<String> = self
            .keys
            .keys
            .iter()
            .filter(|(_, k)| self.keys.must_go(k, now))
            .map(|(n, _)| n.clone())
            .collect();
        self.keyed.retain_active();
        let map = self.in_map();
        let gone: Vec<String> = self
            .keys
            .keys
            .keys()
            .filter(|name| !map.contains_key(*name))
            .cloned()
            .collect();
        for name in &gone {
            let key = &self.keys.keys[name];
            ensure!(
                self.keys.may_go(key, now),
                "swept {name}, which was not idle and fresh: {key:?}"
            );
        }
        for name in &must {
            ensure!(
                gone.contains(name),
                "{name} unused since a sweep {} ms ago, holding nothing, is still there: {:?}",
                self.keys.idle,
                self.keys.keys[name]
            );
        }
        for name in gone {
            self.keys.keys.remove(&name);
        }
        self.keys.sweeps.push((self.keys.step, now));
        Ok(())
    }

    /// The keys in the keyed breaker's map, read from the registry (`contains` would mark
    /// them used), with their states as stored.
    pub fn in_map(&self) -> BTreeMap<String, State> {
        family(self.keyed.name())
    }
}

/// The keys of a keyed breaker named `family`, with their states as stored.
fn family(family: &str) -> BTreeMap<String, State> {
    breaker::registry()
        .handles()
        .into_iter()
        .filter(|h| h.family() == Some(family))
        .filter_map(|h| {
            let key = h
                .name()
                .strip_prefix(family)?
                .strip_prefix('[')?
                .strip_suffix(']')?;
            Some((key.to_string(), h.peek_state()))
        })
        .collect()
}

pub fn key_name(key: u8) -> String {
    format!("k{key}")
}

/// A name no other breaker of this process has (breakers of one name share a registry
/// entry).
fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Relaxed)
}
