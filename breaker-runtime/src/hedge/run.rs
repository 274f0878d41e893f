//! The hedged call: its attempts raced in one future, without spawning (a loser is a call
//! future dropped, so it counts as the abandoned rule says and gives its slots back).

use std::{
    future::{poll_fn, Future},
    pin::{pin, Pin},
    sync::atomic::{AtomicU64, Ordering::Relaxed},
    task::{Context, Poll},
    time::Duration,
};

use tokio::time::{Instant, Sleep};

use super::state::Hedging;
use crate::{
    clock::{Clock, Nanos},
    config::{HedgePolicy, MAX_HEDGES},
    future::CallFuture,
    shared::Host,
    verdict::Judge,
    CallError, Verdict,
};

/// Attempts in all, at most.
const ATTEMPTS: usize = MAX_HEDGES as usize + 1;

/// One attempt's verdict, written by its judge ([`Told`]) when it ends: 0 none, 1 success,
/// 2 failure, 3 neutral, else `OpenFor`. Atomic so the hedged future stays `Send`.
#[derive(Default)]
struct Said(AtomicU64);

impl Said {
    fn put(&self, v: Verdict) {
        let code = match v {
            Verdict::Success => 1,
            Verdict::Failure => 2,
            Verdict::Neutral => 3,
            Verdict::OpenFor(_) => 4,
        };
        self.0.store(code, Relaxed);
    }

    fn take(&self) -> Option<Verdict> {
        match self.0.swap(0, Relaxed) {
            0 => None,
            1 => Some(Verdict::Success),
            2 => Some(Verdict::Failure),
            3 => Some(Verdict::Neutral),
            _ => Some(Verdict::OpenFor(Duration::ZERO)),
        }
    }
}

/// An attempt's judge: the call's, telling the race its verdict.
struct Told<'s, J> {
    judge: J,
    said: &'s Said,
}

impl<T, E, J: Judge<T, E>> Judge<T, E> for Told<'_, J> {
    const OK_IS_SUCCESS: bool = J::OK_IS_SUCCESS;

    #[inline]
    fn judge(self, result: &Result<T, E>) -> Verdict {
        let v = self.judge.judge(result);
        self.said.put(v);
        v
    }
}

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

type Attempt<'s, Fut, J, H> = CallFuture<'s, Fut, Told<'s, J>, H>;
/// A hedge in flight, with its start.
type Sent<'s, Fut, J, H> = Option<(Pin<Box<Attempt<'s, Fut, J, H>>>, Nanos)>;

/// The race's state beside its first attempt (pinned in the caller's future).
struct Race<'s, H: Host, J, F, Fut, T, E> {
    host: &'s H,
    judge: &'s J,
    make: &'s F,
    said: &'s [Said; ATTEMPTS],
    hedging: &'s Hedging,
    policy: HedgePolicy,
    /// The first attempt's start while it runs; `None` once it ended.
    first: Option<Nanos>,
    /// Its result when it failed: what the call returns if every attempt fails.
    first_failed: Option<Result<T, CallError<E>>>,
    /// Whether the first attempt's admission was seen (and deposited in the budgets).
    admitted: bool,
    /// The hedges sent, each with its start, until it ends.
    hedges: [Sent<'s, Fut, J, H>; MAX_HEDGES as usize],
    sent: usize,
    /// No more hedges for this call (denied, pushback, or hedging off for it).
    stop: bool,
    /// An attempt failed: the next hedge goes at once.
    due: bool,
    /// The delay, once read: `Some(None)` is no hedging for this call.
    delay: Option<Option<Duration>>,
    timer: Option<Pin<Box<Sleep>>>,
}

impl<'s, H, J, F, Fut, T, E> Race<'s, H, J, F, Fut, T, E>
where
    H: Host,
    J: Judge<T, E> + Clone,
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    fn now(&self) -> Nanos {
        self.host.shared().clock.now()
    }

    fn poll(
        &mut self,
        cx: &mut Context<'_>,
        mut first: Pin<&mut Attempt<'s, Fut, J, H>>,
    ) -> Poll<Result<T, CallError<E>>> {
        loop {
            if let Some(started) = self.first {
                let polled = first.as_mut().poll(cx);
                if !self.admitted {
                    self.admitted = true;
                    let refused = matches!(&polled, Poll::Ready(Err(CallError::Breaker(e))) if !e.is_timeout());
                    if !refused {
                        let (shared, now) = (self.host.shared(), self.now());
                        self.hedging.deposit(shared, &self.policy, now);
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
                let delay = match self.delay {
                    Some(d) => d,
                    None => {
                        let d = self.hedging.delay(&self.policy, now);
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
            if !running {
                if let Some(out) = self.first_failed.take() {
                    return Poll::Ready(out);
                }
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

    /// Sends the next hedge, if the breaker and the budgets let it; polls it once.
    fn launch(
        &mut self,
        cx: &mut Context<'_>,
        now: Nanos,
        delay: Duration,
    ) -> Option<Result<T, CallError<E>>> {
        self.due = false;
        let shared = self.host.shared();
        if !self.hedging.grant(shared, now) {
            // A denied hedge fails nothing: the call waits for the attempts in flight.
            self.stop = true;
            return None;
        }
        // The next one waits a whole delay from this one.
        if let Some(timer) = &mut self.timer {
            timer.as_mut().reset(Instant::now() + delay);
        } else {
            self.timer = Some(Box::pin(tokio::time::sleep(delay)));
        }
        let k = self.sent;
        self.sent += 1;
        let said = &self.said[k + 1];
        let judge = Told {
            judge: self.judge.clone(),
            said,
        };
        let mut attempt = Box::pin(CallFuture::new(self.host.clone(), judge, (self.make)()));
        match attempt.as_mut().poll(cx) {
            Poll::Ready(Err(CallError::Breaker(e))) if !e.is_timeout() => {
                // Refused after all (the breaker changed since `grant`): nothing was sent.
                self.hedging.refused(shared, now);
                self.stop = true;
                None
            }
            Poll::Ready(r) => {
                self.hedging.sent();
                self.settle(k + 1, now, r)
            }
            Poll::Pending => {
                self.hedging.sent();
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
        let now = self.now();
        let took = now.saturating_sub(started);
        match end_of(&r, self.said[k].take()) {
            End::Refused if k == 0 => Some(r),
            End::Refused => None,
            End::Won => {
                self.hedging.record(now, took);
                if k > 0 {
                    self.hedging.won();
                }
                Some(r)
            }
            End::Failed {
                pushback,
                timed_out,
            } => {
                // A slow failure is a latency worth knowing; a fast one would pull the
                // percentile down.
                if timed_out || self.slow(took) {
                    self.hedging.record(now, took);
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
        self.host
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
        let now = self.now();
        let running = self.first.into_iter();
        let hedges = self.hedges.iter().flatten().map(|(_, at)| *at);
        for started in running.chain(hedges) {
            let took = now.saturating_sub(started);
            if self.slow(took) {
                self.hedging.record(now, took);
            }
        }
        out
    }
}

/// A hedged call through the breaker `host`, judged by `judge`; `make` makes each attempt.
/// Without `hedge` in the breaker's configuration, one plain call.
pub(crate) async fn run<H, J, F, Fut, T, E>(host: H, judge: J, make: F) -> Result<T, CallError<E>>
where
    H: Host,
    J: Judge<T, E> + Clone,
    F: Fn() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let shared = host.shared();
    // Read once per hedged call (the policy in force: `reconfigure` may change it).
    let Some(policy) = shared.core.live.hedge() else {
        return CallFuture::new(host.clone(), judge, make()).await;
    };
    let hedging = shared.hedging();
    let said: [Said; ATTEMPTS] = Default::default();
    let started = shared.clock.now();
    let told = Told {
        judge: judge.clone(),
        said: &said[0],
    };
    let mut first = pin!(CallFuture::new(host.clone(), told, make()));
    let mut race = Race {
        host: &host,
        judge: &judge,
        make: &make,
        said: &said,
        hedging,
        policy,
        first: Some(started),
        first_failed: None,
        admitted: false,
        hedges: Default::default(),
        sent: 0,
        stop: false,
        due: false,
        delay: None,
        timer: None,
    };
    poll_fn(|cx| race.poll(cx, first.as_mut())).await
}
