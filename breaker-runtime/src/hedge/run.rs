//! The hedged call: its attempts raced in one future, without spawning (a loser is a call
//! future dropped, so it counts as the abandoned rule says and gives its slots back).

use std::{
    future::{poll_fn, Future},
    pin::{pin, Pin},
    task::{Context, Poll},
    time::Duration,
};

use tokio::time::{Instant, Sleep};

use crate::{
    clock::{Clock, Nanos},
    config::{HedgePolicy, MAX_HEDGES},
    future::CallFuture,
    hedging::{Hedging, RetryBudget},
    shared::{Host, Shared},
    verdict::{Judge, Recorder, VerdictSlot},
    CallError, State, Verdict,
};

/// Attempts in all, at most.
const ATTEMPTS: usize = MAX_HEDGES as usize + 1;

/// How an attempt ended, for the race.
enum End {
    /// A success or a neutral answer: returned.
    Won,
    /// A failure: the next hedge goes at once; with pushback (`OpenFor`), none goes.
    Failed { pushback: bool, timed_out: bool },
    /// Refused at admission: it never reached the dependency.
    Refused,
}

fn end_of<T, E>(result: &Result<T, CallError<E>>, said: Option<Verdict>) -> End {
    match (result, said) {
        (Err(CallError::Breaker(e)), _) if !e.is_timeout() => End::Refused,
        (Err(CallError::Breaker(_)), _) => End::Failed {
            pushback: false,
            timed_out: true,
        },
        // A success the fast path settled without a judge.
        (Ok(_), None) => End::Won,
        (_, Some(Verdict::Success | Verdict::Neutral)) => End::Won,
        (_, Some(Verdict::OpenFor(_))) => End::Failed {
            pushback: true,
            timed_out: false,
        },
        (_, Some(Verdict::Failure) | None) => End::Failed {
            pushback: false,
            timed_out: false,
        },
    }
}

type Attempt<'s, Fut, J, H> = CallFuture<'s, Fut, Recorder<'s, J>, H>;
/// A hedge in flight, with its start.
type Sent<'s, Fut, J, H> = Option<(Pin<Box<Attempt<'s, Fut, J, H>>>, Nanos)>;

/// Where a hedged call's attempts go: one breaker ([`One`]), or a keyed breaker's keys in
/// turn ([`Keys`]).
pub(crate) trait Targets {
    type Host: Host;
    type Fut;
    /// One breaker: without `hedge`, a plain call.
    const ONE: bool;
    /// The breaker the next attempt goes to, and what to make it with; `None` when there is
    /// none left. For a hedge (`hedge`), only a breaker that would take it without refusing,
    /// shedding it or making it wait for a seat.
    fn pick(&mut self, hedge: bool) -> Option<(Self::Host, usize)>;
    /// The future of the attempt [`pick`](Self::pick) chose.
    fn make(&self, at: usize) -> Self::Fut;
    /// The refusal of a call with no target at all.
    fn nowhere(&self) -> crate::BreakerError;
    /// Whether this call may still send a hedge (the caller's say: `false` for a gRPC call
    /// committed to an answer, or whose request cannot be sent again). Not a denial.
    fn more(&self) -> bool {
        true
    }
}

/// Every attempt to one breaker.
pub(crate) struct One<H, F> {
    pub(crate) host: H,
    pub(crate) make: F,
    /// The first attempt was given.
    pub(crate) picked: bool,
}

impl<H: Host, F: Fn() -> Fut, Fut> Targets for One<H, F> {
    type Host = H;
    type Fut = Fut;
    const ONE: bool = true;
    fn pick(&mut self, hedge: bool) -> Option<(H, usize)> {
        // One first attempt (its refusal is the call's answer); every hedge to the same one.
        let takes = match hedge {
            false => !std::mem::replace(&mut self.picked, true),
            true => takes_a_hedge(self.host.shared()),
        };
        takes.then(|| (self.host.clone(), 0))
    }
    fn make(&self, _: usize) -> Fut {
        (self.make)()
    }
    fn nowhere(&self) -> crate::BreakerError {
        crate::BreakerError::open(&self.host.shared().core.name, None)
    }
}

/// Each attempt to the next key whose breaker admits it, the first key first.
pub(crate) struct Keys<'s, K, F> {
    pub(crate) keyed: &'s crate::KeyedBreaker<K>,
    pub(crate) keys: &'s [K],
    pub(crate) next: usize,
    pub(crate) make: F,
}

impl<K, F, Fut> Targets for Keys<'_, K, F>
where
    K: crate::BreakerKey + Clone,
    F: Fn(&K) -> Fut,
{
    type Host = crate::Breaker;
    type Fut = Fut;
    const ONE: bool = false;
    fn pick(&mut self, hedge: bool) -> Option<(crate::Breaker, usize)> {
        while let Some(key) = self.keys.get(self.next) {
            let at = self.next;
            self.next += 1;
            let b = self.keyed.breaker(key);
            if !hedge || takes_a_hedge(&b.shared) {
                return Some((b, at));
            }
        }
        None
    }
    fn make(&self, at: usize) -> Fut {
        (self.make)(&self.keys[at])
    }
    fn nowhere(&self) -> crate::BreakerError {
        crate::BreakerError::open(&crate::Name::from(self.keyed.name()), None)
    }
}

/// The first attempt's slot: replaced when a keyed call's first key refuses it.
type First<'s, Tg, J> = Option<Attempt<'s, <Tg as Targets>::Fut, J, <Tg as Targets>::Host>>;

/// The race's state beside its first attempt (pinned in the caller's future).
struct Race<'s, Tg: Targets, J, T, E> {
    targets: Tg,
    judge: &'s J,
    said: &'s [VerdictSlot; ATTEMPTS],
    /// The breaker of the first attempt: its hedging state and budget decide the hedges.
    home: Tg::Host,
    policy: HedgePolicy,
    /// The first attempt's start while it runs; `None` once it ended.
    first: Option<Nanos>,
    /// Its result when it failed: what the call returns if every attempt fails.
    first_failed: Option<Result<T, CallError<E>>>,
    /// The first target's refusal, returned if no target admits the first attempt.
    refused: Option<Result<T, CallError<E>>>,
    /// Whether the first attempt's admission was seen (and deposited in the budgets).
    admitted: bool,
    /// The hedges sent, each with its start, until it ends.
    hedges: [Sent<'s, Tg::Fut, J, Tg::Host>; MAX_HEDGES as usize],
    sent: usize,
    /// No more hedges for this call (denied, pushback, or hedging off for it).
    stop: bool,
    /// An attempt failed: the next hedge goes at once.
    due: bool,
    /// A hedge came due by the delay, counted in the run of overdue calls
    /// ([`Hedging::overdue`]).
    overdue: bool,
    /// The delay, once read: `Some(None)` is no hedging for this call.
    delay: Option<Option<Duration>>,
    timer: Option<Pin<Box<Sleep>>>,
    /// Feature `otel`: the call's span, its attempts its children (`crate::traced`); held by
    /// the caller, made before the attempts so they end their spans first.
    #[cfg(feature = "otel")]
    traced: &'s mut crate::traced::Retried,
}

impl<'s, Tg, J, T, E> Race<'s, Tg, J, T, E>
where
    Tg: Targets,
    Tg::Fut: Future<Output = Result<T, E>>,
    J: Judge<T, E> + Clone,
{
    fn now(&self) -> Nanos {
        self.home.shared().clock.now()
    }

    /// The home breaker's hedging state; `None` without hedges to send (a keyed call
    /// without `hedge`: one attempt, to the first key that admits it).
    fn hedging(&self) -> Option<&Hedging> {
        (self.policy.hedges > 0).then(|| self.home.shared().hedging())
    }

    /// A first attempt on the target `pick` chose.
    fn first_attempt(&mut self, host: Tg::Host, at: usize) -> Attempt<'s, Tg::Fut, J, Tg::Host> {
        let fut = self.targets.make(at);
        first_attempt(
            host,
            self.judge,
            &self.said[0],
            fut,
            #[cfg(feature = "otel")]
            self.traced,
        )
    }

    fn poll(
        &mut self,
        cx: &mut Context<'_>,
        mut first: Pin<&mut First<'s, Tg, J>>,
    ) -> Poll<Result<T, CallError<E>>> {
        loop {
            if let (Some(started), Some(attempt)) = (self.first, first.as_mut().as_pin_mut()) {
                let mut polled = attempt.poll(cx);
                if !self.admitted {
                    polled = match polled {
                        Poll::Ready(Err(CallError::Breaker(e))) if !e.is_timeout() => {
                            // Refused: the next target takes the first attempt, if any; the
                            // first target's refusal is returned if none does.
                            first.set(None);
                            self.said[0].take();
                            let r = Err(CallError::Breaker(e));
                            // One breaker: it would refuse again (picking it looped).
                            let next = (!Tg::ONE).then(|| self.targets.pick(false)).flatten();
                            let Some((host, at)) = next else {
                                self.first = None;
                                let r = self.refused.take().unwrap_or(r);
                                #[cfg(feature = "otel")]
                                self.traced.record(&r, None, 0);
                                return Poll::Ready(r);
                            };
                            self.refused.get_or_insert(r);
                            self.home = host.clone();
                            first.set(Some(self.first_attempt(host, at)));
                            self.first = Some(self.now());
                            continue;
                        }
                        other => other,
                    };
                    self.admitted = true;
                    // At the attempt's start, not a clock read of its own: the budgets count
                    // over seconds.
                    if let Some(hedging) = self.hedging() {
                        hedging.deposit(retry_budget(self.home.shared()), &self.policy, started);
                    }
                }
                if let Poll::Ready(r) = polled {
                    self.first = None;
                    if let Some(out) = self.settle(0, started, r) {
                        return Poll::Ready(self.finish(out));
                    }
                }
            }
            for i in 0..self.sent {
                let Some((attempt, started)) = &mut self.hedges[i] else {
                    continue;
                };
                if let Poll::Ready(r) = attempt.as_mut().poll(cx) {
                    let started = *started;
                    self.hedges[i] = None;
                    if let Some(out) = self.settle(i + 1, started, r) {
                        return Poll::Ready(self.finish(out));
                    }
                }
            }
            if !self.stop && self.sent < self.policy.hedges as usize {
                let now = self.now();
                let delay = match (self.delay, self.hedging()) {
                    (Some(d), _) => d,
                    (None, hedging) => {
                        let d = hedging.and_then(|h| h.delay(&self.policy, now));
                        self.delay = Some(d);
                        d
                    }
                };
                match delay {
                    None => self.stop = true,
                    Some(delay) => {
                        if self.due || self.timer_fired(cx, delay) {
                            if let Some(out) = self.launch(cx, now, delay) {
                                return Poll::Ready(self.finish(out));
                            }
                            continue;
                        }
                    }
                }
            }
            let running = self.first.is_some() || self.hedges.iter().any(Option::is_some);
            if !running && let Some(out) = self.first_failed.take() {
                return Poll::Ready(out);
            }
            return Poll::Pending;
        }
    }

    /// Whether the delay passed since the first attempt (or the last hedge): its timer,
    /// made at the first wait, is polled.
    fn timer_fired(&mut self, cx: &mut Context<'_>, delay: Duration) -> bool {
        let timer = match &mut self.timer {
            Some(timer) => timer,
            None => {
                let waited = self.first.map_or(0, |at| self.now().saturating_sub(at));
                let due = Instant::now() + delay.saturating_sub(Duration::from_nanos(waited));
                self.timer.insert(Box::pin(tokio::time::sleep_until(due)))
            }
        };
        timer.as_mut().poll(cx).is_ready()
    }

    /// Sends the next hedge, if a target takes it and the budgets pay for it; polls it once.
    fn launch(
        &mut self,
        cx: &mut Context<'_>,
        now: Nanos,
        delay: Duration,
    ) -> Option<Result<T, CallError<E>>> {
        let by_delay = !std::mem::replace(&mut self.due, false);
        if !self.targets.more() {
            self.stop = true;
            return None;
        }
        // The home breaker by value (a copy of a reference, or an `Arc`'s), so its hedging
        // state is not a borrow of the race.
        let home = self.home.clone();
        let home = home.shared();
        let hedging = home.hedging();
        // Slow for everyone of late: paused (a denial, as a spent budget's).
        let goes = match by_delay && !self.overdue {
            true => {
                self.overdue = true;
                hedging.overdue(now)
            }
            false => !hedging.paused(),
        };
        if !goes {
            hedging.deny();
            self.stop = true;
            return None;
        }
        let target = self.targets.pick(true);
        if target.is_none() || !hedging.pay(retry_budget(home), now) {
            // A denied hedge fails nothing: the call waits for the attempts in flight.
            hedging.deny();
            self.stop = true;
            return None;
        }
        let (host, at) = target?;
        // The next one waits a whole delay from this one.
        if let Some(timer) = &mut self.timer {
            timer.as_mut().reset(Instant::now() + delay);
        } else {
            self.timer = Some(Box::pin(tokio::time::sleep(delay)));
        }
        let k = self.sent;
        self.sent += 1;
        let judge = Recorder {
            judge: self.judge.clone(),
            slot: &self.said[k + 1],
        };
        #[cfg(feature = "otel")]
        let span = self.traced.hedge(host.shared(), true);
        let attempt = CallFuture::new(host, judge, self.targets.make(at));
        #[cfg(feature = "otel")]
        let attempt = attempt.attempt(span);
        let mut attempt = Box::pin(attempt);
        match attempt.as_mut().poll(cx) {
            Poll::Ready(Err(CallError::Breaker(e))) if !e.is_timeout() => {
                // Refused after all (the breaker changed since `pick`): nothing was sent.
                hedging.refused(retry_budget(home), now);
                self.stop = true;
                None
            }
            Poll::Ready(r) => {
                hedging.sent();
                self.settle(k + 1, now, r)
            }
            Poll::Pending => {
                hedging.sent();
                self.hedges[k] = Some((attempt, now));
                None
            }
        }
    }

    /// Attempt `k` (0 the first) ended with `r`: the call's answer, or `None` to go on.
    fn settle(
        &mut self,
        k: usize,
        started: Nanos,
        r: Result<T, CallError<E>>,
    ) -> Option<Result<T, CallError<E>>> {
        let verdict = self.said[k].take();
        self.settled(k, started, r, verdict)
    }

    /// [`settle`](Self::settle) with attempt `k`'s verdict taken from its slot already.
    fn settled(
        &mut self,
        k: usize,
        started: Nanos,
        r: Result<T, CallError<E>>,
        verdict: Option<Verdict>,
    ) -> Option<Result<T, CallError<E>>> {
        let now = self.now();
        let took = now.saturating_sub(started);
        let end = end_of(&r, verdict);
        // Feature `otel`: the call's outcome so far, the first attempt's or the winner's.
        #[cfg(feature = "otel")]
        if k == 0 || matches!(end, End::Won) {
            self.traced.record(&r, verdict, 0);
        }
        match end {
            End::Refused if k == 0 => Some(r),
            End::Refused => None,
            End::Won => {
                if let Some(hedging) = self.hedging() {
                    hedging.record(now, took);
                    if k > 0 {
                        hedging.won(now);
                    } else if !self.overdue && matches!(self.delay, Some(Some(_))) {
                        // Before a delay it had (a call not hedged at all says nothing).
                        hedging.on_time();
                    }
                }
                Some(r)
            }
            End::Failed {
                pushback,
                timed_out,
            } => {
                // A slow failure is a latency worth knowing; a fast one would pull the
                // percentile down.
                if (timed_out || self.slow(took))
                    && let Some(hedging) = self.hedging()
                {
                    hedging.record(now, took);
                }
                if k == 0 {
                    self.first_failed = Some(r);
                }
                self.due = true;
                self.stop |= pushback;
                None
            }
        }
    }

    /// Whether `took` is a slow call (`slow_call`).
    fn slow(&self, took: Nanos) -> bool {
        self.home
            .shared()
            .core
            .live
            .slow_call()
            .is_some_and(|slow| took >= slow)
    }

    /// The answer goes back: the attempts still running are dropped with the race (each a
    /// cancelled call, or an abandoned one past `slow_call`, whose latency is recorded as a
    /// slow call's).
    fn finish(&mut self, out: Result<T, CallError<E>>) -> Result<T, CallError<E>> {
        if self.first.is_none() && self.sent == 0 {
            // Nothing else ran (the first attempt answered before the delay): no clock read.
            return out;
        }
        let now = self.now();
        let running = self.first.into_iter();
        let hedges = self.hedges.iter().flatten().map(|(_, at)| *at);
        for started in running.chain(hedges) {
            let took = now.saturating_sub(started);
            if let (true, Some(hedging)) = (self.slow(took), self.hedging()) {
                hedging.record(now, took);
            }
        }
        out
    }
}

/// A first attempt on `host`, made of `fut`, its verdict written in `slot`.
fn first_attempt<'s, Fut, J: Clone, H: Host>(
    host: H,
    judge: &J,
    slot: &'s VerdictSlot,
    fut: Fut,
    #[cfg(feature = "otel")] traced: &mut crate::traced::Retried,
) -> Attempt<'s, Fut, J, H> {
    let told = Recorder {
        judge: judge.clone(),
        slot,
    };
    #[cfg(feature = "otel")]
    let span = traced.hedge(host.shared(), false);
    let attempt = CallFuture::new(host, told, fut);
    #[cfg(feature = "otel")]
    let attempt = attempt.attempt(span);
    attempt
}

/// A hedged call to `targets`, judged by `judge`. A target without `hedge` in its
/// configuration gets one attempt.
pub(crate) async fn run<Tg, J, T, E>(mut targets: Tg, judge: J) -> Result<T, CallError<E>>
where
    Tg: Targets,
    Tg::Fut: Future<Output = Result<T, E>>,
    J: Judge<T, E> + Clone,
{
    let Some((home, at)) = targets.pick(false) else {
        return Err(CallError::Breaker(targets.nowhere()));
    };
    // Whether the breaker hedges; the policy itself is read (decoded) only when the race is
    // set up: a first attempt that answers at once needs none of it.
    if Tg::ONE && home.shared().core.live.hedge().is_none() {
        return CallFuture::new(home, judge, targets.make(at)).await;
    }
    let said: [VerdictSlot; ATTEMPTS] = Default::default();
    // Feature `otel`: the call's span, made before the attempts so they end theirs first.
    #[cfg(feature = "otel")]
    let mut traced = crate::traced::Retried::begin(home.shared());
    let fut = targets.make(at);
    let mut first = pin!(Some(first_attempt(
        home.clone(),
        &judge,
        &said[0],
        fut,
        #[cfg(feature = "otel")]
        &mut traced,
    )));
    // One breaker: the first attempt is polled once before the race is set up or the clock
    // read, so one that answers at once costs its call and a sampled record
    // (`Hedging::answered_at_once`: issue 43's +30 ns), not the race. Keys: the race itself
    // tries the next on a refusal.
    let mut failed = None;
    if Tg::ONE {
        let polled =
            poll_fn(|cx| Poll::Ready(first.as_mut().as_pin_mut().map(|a| a.poll(cx)))).await;
        match polled {
            Some(Poll::Ready(Err(CallError::Breaker(e)))) if !e.is_timeout() => {
                let r = Err(CallError::Breaker(e));
                #[cfg(feature = "otel")]
                traced.record(&r, None, 0);
                return r;
            }
            Some(Poll::Ready(r)) => {
                first.set(None);
                let verdict = said[0].take();
                if matches!(end_of(&r, verdict), End::Won) {
                    let shared = home.shared();
                    // The policy in force now: a `reconfigure` that took `hedge` away since
                    // has it deposit nothing.
                    let percent = || shared.core.live.hedge().map_or(0, |p| p.percent);
                    let retry = || retry_budget(shared);
                    let hedging = shared.hedging();
                    hedging.answered_at_once(percent, retry, &shared.clock);
                    #[cfg(feature = "otel")]
                    traced.record(&r, verdict, 0);
                    return r;
                }
                failed = Some((r, verdict));
            }
            // Admitted, running: the race goes on from here.
            _ => {}
        }
    }
    // The first attempt's clock starts once its first poll returned (before that no hedge
    // could go; a plain call reads no clock for it either).
    let started = home.shared().clock.now();
    // Read once for the race (the policy in force: `reconfigure` may change it; taken away
    // since the call began, no hedge).
    let policy = home.shared().core.live.hedge();
    let policy = policy.unwrap_or(HedgePolicy::NONE);
    if Tg::ONE && policy.hedges > 0 {
        let shared = home.shared();
        shared
            .hedging()
            .deposit(retry_budget(shared), &policy, started);
    }
    // Made after the first attempt, so dropped before it: its hedges end their spans first.
    let mut race = Race {
        targets,
        judge: &judge,
        said: &said,
        #[cfg(feature = "otel")]
        traced: &mut traced,
        home,
        policy,
        first: first.is_some().then_some(started),
        first_failed: None,
        refused: None,
        admitted: Tg::ONE,
        hedges: Default::default(),
        sent: 0,
        stop: false,
        due: false,
        overdue: false,
        delay: None,
        timer: None,
    };
    if let Some((r, verdict)) = failed {
        // A failure: the next hedge goes at once (`settle` cannot end the call here).
        let _ = race.settled(0, started, r, verdict);
    }
    poll_fn(|cx| race.poll(cx, first.as_mut())).await
}

/// The breaker would admit a hedge without refusing it, shedding it or making it wait:
/// closed, not throttling nor ramping, below its concurrency limit.
fn takes_a_hedge(shared: &Shared) -> bool {
    let core = &shared.core;
    core.peek() == State::Closed
        && core.throttle_rate(&shared.clock) == 0.0
        && core
            .concurrency_limit()
            .is_none_or(|limit| core.calls_in_flight() < u64::from(limit))
}

/// The retry budget a hedge of `shared` pays too: the breaker's, when it retries.
fn retry_budget(shared: &Shared) -> RetryBudget<'_> {
    shared
        .core
        .live
        .retry()
        .map(|policy| (shared.retry_budget(), policy.percent))
}
