//! Hedged calls (`Breaker::call_hedged`): the outcome rules one by one, the delay (fixed, and
//! a percentile that needs samples and stops for a dependency slow for everyone), the budget
//! and the breaker's refusals. Paused time: every instant below is exact.

use std::sync::{
    atomic::{AtomicU32, Ordering::SeqCst},
    Arc, Mutex,
};
use std::time::Duration;

use breaker::{Breaker, CallError, Config, HedgeDelay, KeyedBreaker, State, Verdict};
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);

fn fixed(ms: u64) -> HedgeDelay {
    HedgeDelay::Fixed(MS * ms as u32)
}

/// A dependency scripted by attempt: attempt `n` (from 0) answers `answers[n]` after
/// `latencies[n]` ms (the last entry repeats), and logs when it started (first polled).
#[derive(Clone)]
struct Script {
    attempts: Arc<AtomicU32>,
    starts: Arc<Mutex<Vec<Duration>>>,
    t0: Instant,
    latencies: Vec<u64>,
    answers: Vec<Result<u32, u32>>,
}

impl Script {
    fn new(latencies: &[u64], answers: &[Result<u32, u32>]) -> Script {
        Script {
            attempts: Arc::default(),
            starts: Arc::default(),
            t0: Instant::now(),
            latencies: latencies.to_vec(),
            answers: answers.to_vec(),
        }
    }

    fn attempt(&self) -> impl std::future::Future<Output = Result<u32, u32>> + use<> {
        let n = self.attempts.fetch_add(1, SeqCst) as usize;
        let took = self.latencies[n.min(self.latencies.len() - 1)];
        let answer = self.answers[n.min(self.answers.len() - 1)];
        let (starts, t0) = (self.starts.clone(), self.t0);
        async move {
            starts.lock().unwrap().push(t0.elapsed());
            tokio::time::sleep(MS * took as u32).await;
            answer
        }
    }

    fn starts_ms(&self) -> Vec<u128> {
        let starts = self.starts.lock().unwrap();
        starts.iter().map(|d| d.as_millis()).collect()
    }
}

/// A slow first attempt is hedged after the fixed delay; the hedge's answer is returned as
/// soon as it comes, and the first attempt, dropped, counts as cancelled.
#[tokio::test(start_paused = true)]
async fn a_slow_first_attempt_is_hedged_and_the_hedge_wins() {
    let b = Breaker::new(
        "hedge::wins",
        Config::default().hedge(1).hedge_delay(fixed(20)),
    );
    let dep = Script::new(&[500, 5], &[Ok(0), Ok(1)]);
    let t0 = Instant::now();
    let r = b.call_hedged(|| dep.attempt()).await;
    assert_eq!(r.unwrap(), 1);
    assert_eq!(t0.elapsed(), 25 * MS, "the hedge at 20 ms answered in 5");
    assert_eq!(dep.starts_ms(), [0, 20]);
    let s = b.stats();
    assert_eq!((s.hedges, s.hedges_won, s.hedges_denied), (1, 1, 0));
    assert_eq!(
        (s.calls, s.successes, s.cancelled, s.abandoned),
        (2, 1, 1, 0)
    );
}

/// The loser follows the abandoned rule: dropped after running `slow_call`, it was a slow
/// call (a failure), not a cancelled one.
#[tokio::test(start_paused = true)]
async fn a_loser_past_slow_call_counts_as_abandoned() {
    let config = Config::default()
        .hedge(1)
        .hedge_delay(fixed(20))
        .slow_call(MS * 10);
    let b = Breaker::new("hedge::abandoned", config);
    let dep = Script::new(&[500, 5], &[Ok(0), Ok(1)]);
    assert_eq!(b.call_hedged(|| dep.attempt()).await.unwrap(), 1);
    let s = b.stats();
    assert_eq!((s.hedges, s.hedges_won), (1, 1));
    assert_eq!(
        (s.successes, s.cancelled, s.abandoned, s.slow_calls),
        (1, 0, 1, 1)
    );
}

/// A first attempt that answers before the delay sends no hedge.
#[tokio::test(start_paused = true)]
async fn an_answer_before_the_delay_sends_no_hedge() {
    let b = Breaker::new(
        "hedge::quick",
        Config::default().hedge(3).hedge_delay(fixed(20)),
    );
    let dep = Script::new(&[19], &[Ok(7)]);
    assert_eq!(b.call_hedged(|| dep.attempt()).await.unwrap(), 7);
    assert_eq!(dep.starts_ms(), [0]);
    assert_eq!((b.stats().hedges, b.stats().calls), (0, 1));
}

/// A failed attempt sends the next hedge at once, not after the delay; the one after it
/// waits a whole delay again (gRPC A6).
#[tokio::test(start_paused = true)]
async fn a_failure_sends_the_next_hedge_at_once() {
    let b = Breaker::new(
        "hedge::failure",
        Config::default().hedge(2).hedge_delay(fixed(100)),
    );
    // Attempt 0 fails at 10 ms; attempt 1 is slow; attempt 2 answers.
    let dep = Script::new(&[10, 300, 5], &[Err(0), Ok(1), Ok(2)]);
    let t0 = Instant::now();
    assert_eq!(b.call_hedged(|| dep.attempt()).await.unwrap(), 2);
    assert_eq!(dep.starts_ms(), [0, 10, 110]);
    assert_eq!(t0.elapsed(), 115 * MS);
    let s = b.stats();
    assert_eq!(
        (s.hedges, s.hedges_won, s.failures, s.cancelled),
        (2, 1, 1, 1)
    );
}

/// When every attempt fails, the first attempt's error is returned (not the last one's).
#[tokio::test(start_paused = true)]
async fn when_every_attempt_fails_the_first_error_is_returned() {
    let b = Breaker::new(
        "hedge::all_fail",
        Config::default()
            .threshold(10)
            .hedge(2)
            .hedge_delay(fixed(50)),
    );
    let dep = Script::new(&[30, 1, 1], &[Err(0), Err(1), Err(2)]);
    let r = b.call_hedged(|| dep.attempt()).await;
    assert!(matches!(r, Err(CallError::Inner(0))), "{r:?}");
    assert_eq!(dep.starts_ms(), [0, 30, 31]);
    let s = b.stats();
    assert_eq!((s.hedges, s.hedges_won, s.failures), (2, 0, 3));
}

/// A hedge that answers neutral (the caller's fault, answered by the dependency) wins as a
/// success would.
#[tokio::test(start_paused = true)]
async fn a_neutral_answer_wins() {
    let b = Breaker::new(
        "hedge::neutral",
        Config::default().hedge(1).hedge_delay(fixed(20)),
    );
    let dep = Script::new(&[500, 5], &[Ok(0), Err(404)]);
    let judge = |r: &Result<u32, u32>| match r {
        Ok(_) => Verdict::Success,
        Err(404) => Verdict::Neutral,
        Err(_) => Verdict::Failure,
    };
    let r = b.call_hedged_classified(judge, || dep.attempt()).await;
    assert!(matches!(r, Err(CallError::Inner(404))), "{r:?}");
    let s = b.stats();
    assert_eq!((s.hedges_won, s.neutral, s.cancelled), (1, 1, 1));
}

/// An answer with pushback (`OpenFor`: a `Retry-After`) sends no further hedge, even when
/// the breaker stays closed (here a keyed breaker's `max_open_percent` keeps the key closed);
/// with every attempt failed, the first attempt's answer is returned as it is.
#[tokio::test(start_paused = true)]
async fn pushback_stops_hedging() {
    let config = Config::default()
        .threshold(1)
        .max_open_percent(50)
        .hedge(3)
        .hedge_delay(fixed(20));
    let hosts = KeyedBreaker::<String>::new("hedge::pushback", config);
    let _ = hosts.call_sync("a", || Err::<(), _>("down"));
    let b = hosts.breaker("b");
    let dep = Script::new(&[100, 1], &[Err(503), Err(429)]);
    let judge = |r: &Result<u32, u32>| match r {
        Err(429) => Verdict::OpenFor(Duration::from_secs(5)),
        Err(_) => Verdict::Failure,
        Ok(_) => Verdict::Success,
    };
    let r = b.call_hedged_classified(judge, || dep.attempt()).await;
    assert!(matches!(r, Err(CallError::Inner(503))), "{r:?}");
    assert_eq!(b.state(), State::Closed, "held closed by the cap");
    assert_eq!(
        dep.starts_ms(),
        [0, 20],
        "no hedge after the 429, nor after the 503"
    );
    assert_eq!(b.stats().hedges, 1);
}

/// Open: the first attempt is refused, and returned at once; nothing is hedged.
#[tokio::test(start_paused = true)]
async fn an_open_breaker_hedges_nothing() {
    let b = Breaker::new(
        "hedge::open",
        Config::default().hedge(2).hedge_delay(fixed(1)),
    );
    b.handle().force_open();
    let dep = Script::new(&[5], &[Ok(1)]);
    let r = b.call_hedged(|| dep.attempt()).await;
    assert!(r.unwrap_err().is_open());
    assert!(dep.starts_ms().is_empty());
    let s = b.stats();
    assert_eq!((s.hedges, s.hedges_denied, s.rejected), (0, 0, 1));
}

/// Half-open: the probe is not hedged, even with a second probe slot free; the due hedge is
/// counted denied and the call waits for the probe.
#[tokio::test(start_paused = true)]
async fn a_half_open_probe_is_not_hedged() {
    let config = Config::default()
        .threshold(1)
        .probes(2)
        .cool_off(Duration::from_secs(1))
        .hedge(1)
        .hedge_delay(fixed(10));
    let b = Breaker::new("hedge::half_open", config);
    let _ = b.call(async { Err::<(), _>(()) }).await;
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(b.state(), State::HalfOpen);
    let dep = Script::new(&[100], &[Ok(1)]);
    let t0 = Instant::now();
    assert_eq!(b.call_hedged(|| dep.attempt()).await.unwrap(), 1);
    assert_eq!(t0.elapsed(), 100 * MS);
    assert_eq!(dep.starts_ms(), [0]);
    let s = b.stats();
    assert_eq!((s.hedges, s.hedges_denied), (0, 1));
}

/// A full bulkhead denies the hedge rather than refusing it: nothing is rejected, nothing
/// waits for a seat.
#[tokio::test(start_paused = true)]
async fn a_full_bulkhead_denies_the_hedge() {
    let config = Config::default()
        .max_concurrent(1)
        .hedge(1)
        .hedge_delay(fixed(10));
    let b = Breaker::new("hedge::bulkhead", config);
    let dep = Script::new(&[100], &[Ok(1)]);
    assert_eq!(b.call_hedged(|| dep.attempt()).await.unwrap(), 1);
    let s = b.stats();
    assert_eq!(
        (s.hedges, s.hedges_denied, s.rejected, s.calls),
        (0, 1, 0, 1)
    );
}

/// The hedge budget: a floor of 1 hedge a second over ten seconds (10 from the start), plus
/// 5 % of first attempts. Past it, the hedge is denied and the call waits for its first
/// attempt, which is returned as it is.
#[tokio::test(start_paused = true)]
async fn a_spent_budget_denies_the_hedge_and_the_call_waits() {
    let b = Breaker::new(
        "hedge::budget",
        Config::default().hedge(1).hedge_delay(fixed(1)),
    );
    let mut granted = 0;
    for call in 1..=30 {
        // A call answered at once ends any run of overdue calls (so hedging is never paused
        // here: this is the budget alone), then one whose first attempt takes 50 ms and its
        // hedge 5. Each deposits 5 units.
        b.call_hedged(|| async { Ok::<_, u32>(0) }).await.unwrap();
        let dep = Script::new(&[50, 5], &[Ok(1)]);
        let t0 = Instant::now();
        assert_eq!(b.call_hedged(|| dep.attempt()).await.unwrap(), 1);
        // Granted while 1000 + 10·call − 100·(granted) ≥ 100.
        let grant = 1_000 + 10 * call - 100 * granted >= 100;
        granted += u64::from(grant);
        let took = if grant { 6 * MS } else { 50 * MS };
        assert_eq!(t0.elapsed(), took, "call {call}");
    }
    let s = b.stats();
    assert_eq!(granted, 13, "calls 1 to 11, 20 and 30");
    assert_eq!((s.hedges, s.hedges_denied, s.hedges_won), (13, 17, 13));
    assert_eq!(s.calls, 60 + 13);
    assert_eq!(s.cancelled, 13, "the first attempts lost to their hedges");
}

/// A breaker that retries too pays each hedge from its retry budget as well: with that one
/// spent, the hedge is denied though the hedge budget has room.
#[tokio::test(start_paused = true)]
async fn a_spent_retry_budget_denies_the_hedge() {
    let config = Config::default()
        .threshold(1_000_000)
        .retry(2)
        .retry_budget(1)
        .backoff(MS)
        .hedge(1)
        .hedge_delay(fixed(10));
    let b = Breaker::new("hedge::retry_budget", config);
    while b.stats().retries_denied == 0 {
        let _ = b.call_retried(|| async { Err::<(), _>("503") }).await;
    }
    let dep = Script::new(&[100], &[Ok(1)]);
    assert_eq!(b.call_hedged(|| dep.attempt()).await.unwrap(), 1);
    let s = b.stats();
    assert_eq!((s.hedges, s.hedges_denied), (0, 1));
}

/// The default delay, p95 of the breaker's latencies: nothing is hedged before the window
/// holds 100 samples, however long its tail; then a slow call is hedged a little after the
/// 95th percentile (5 ms here).
#[tokio::test(start_paused = true)]
async fn a_percentile_delay_waits_for_100_samples() {
    let b = Breaker::new("hedge::p95", Config::default().hedge(1));
    // Attempts 0, 1, 99 and 101 take 500 ms, the others 5.
    let attempts = AtomicU32::new(0);
    let make = || {
        let n = attempts.fetch_add(1, SeqCst);
        async move {
            let took = if [0, 1, 99, 101].contains(&n) { 500 } else { 5 };
            tokio::time::sleep(MS * took).await;
            Ok::<_, ()>(n)
        }
    };
    for _ in 0..99 {
        b.call_hedged(make).await.unwrap();
    }
    // The delay is read at most once a second: a fresh reading for each call below.
    tokio::time::advance(Duration::from_millis(1_100)).await;
    let t0 = Instant::now();
    assert_eq!(b.call_hedged(make).await.unwrap(), 99);
    assert_eq!(t0.elapsed(), 500 * MS, "99 samples: not hedged");
    assert_eq!(b.stats().hedges, 0);
    b.call_hedged(make).await.unwrap();
    tokio::time::advance(Duration::from_millis(1_100)).await;
    let t0 = Instant::now();
    assert_eq!(
        b.call_hedged(make).await.unwrap(),
        102,
        "the hedge answered"
    );
    // Hedged at 5.119 ms (p95's bin's upper edge; tokio's timer rounds it up to 6) and
    // answered 5 ms later.
    assert!(t0.elapsed() < 12 * MS, "{:?}", t0.elapsed());
    let s = b.stats();
    assert_eq!((s.hedges, s.hedges_won), (1, 1));
}

/// Slow for everyone: every call takes 500 ms. With the window full of them (p99 = p50, a
/// short tail), a second attempt would only double the load: none is sent.
#[tokio::test(start_paused = true)]
async fn a_dependency_slow_for_everyone_is_not_hedged() {
    for (name, delay) in [
        ("hedge::slow_p95", None),
        ("hedge::slow_fixed", Some(fixed(20))),
    ] {
        let mut config = Config::default().hedge(1);
        if let Some(delay) = delay {
            config = config.hedge_delay(delay);
        }
        let b = Breaker::new(name, config);
        // 120 samples first (concurrent calls, so the window holds them all).
        let slow = || async {
            tokio::time::sleep(MS * 500).await;
            Ok::<_, ()>(())
        };
        let calls: Vec<_> = (0..120)
            .map(|_| {
                let b = b.clone();
                tokio::spawn(async move { b.call_hedged(slow).await })
            })
            .collect();
        for c in calls {
            c.await.unwrap().unwrap();
        }
        // A fixed delay hedges before the window has its samples (within the budget); a
        // percentile does not.
        assert_eq!(b.stats().hedges > 0, delay.is_some(), "{name}");
        let before = b.stats();
        let calls: Vec<_> = (0..100)
            .map(|_| {
                let b = b.clone();
                tokio::spawn(async move { b.call_hedged(slow).await })
            })
            .collect();
        for c in calls {
            c.await.unwrap().unwrap();
        }
        let s = b.stats();
        assert_eq!(
            s.hedges, before.hedges,
            "{name}: no hedge with a short tail"
        );
        assert_eq!(
            s.hedges_denied, before.hedges_denied,
            "{name}: none was due"
        );
        assert_eq!(s.calls - before.calls, 100, "{name}");
    }
}

/// At the ceiling: when the percentile reaches 2 s, no hedge is sent (a long tail, so not
/// the short-tail rule).
#[tokio::test(start_paused = true)]
async fn no_hedge_at_the_ceiling() {
    let b = Breaker::new("hedge::ceiling", Config::default().hedge(1));
    // 90 % at 100 ms, 10 % at 3 s: p50 100 ms, p95 and p99 at the ceiling.
    let attempts = Arc::new(AtomicU32::new(0));
    for _ in 0..2 {
        let calls: Vec<_> = (0..200)
            .map(|_| {
                let (b, attempts) = (b.clone(), attempts.clone());
                tokio::spawn(async move {
                    b.call_hedged(|| {
                        let n = attempts.fetch_add(1, SeqCst);
                        async move {
                            let took = if n % 10 == 9 { 3_000 } else { 100 };
                            tokio::time::sleep(MS * took).await;
                            Ok::<_, ()>(())
                        }
                    })
                    .await
                })
            })
            .collect();
        for c in calls {
            c.await.unwrap().unwrap();
        }
    }
    assert_eq!(attempts.load(SeqCst), 400);
    assert_eq!((b.stats().hedges, b.stats().hedges_denied), (0, 0));
}

/// The hedging keys in a configuration file: named as the attribute's, the delay a
/// percentile (`"p95"`) or a duration (`"20ms"`), a bad one named.
#[cfg(feature = "serde")]
#[test]
fn the_hedging_keys_in_a_file() {
    use serde_json::json;
    let config = Config::default()
        .hedge(2)
        .hedge_delay(HedgeDelay::Percentile(99.9))
        .hedge_budget(10);
    let v = serde_json::to_value(&config).unwrap();
    assert_eq!(
        (&v["hedge"], &v["hedge_delay"], &v["hedge_budget"]),
        (&json!(2), &json!("p99.9"), &json!(10))
    );
    assert_eq!(serde_json::from_value::<Config>(v).unwrap(), config);
    let read: Config = serde_json::from_value(json!({"hedge": 1, "hedge_delay": "20ms"})).unwrap();
    assert_eq!(read, Config::default().hedge(1).hedge_delay(fixed(20)));
    let error = |v| serde_json::from_value::<Config>(v).unwrap_err().to_string();
    for bad in [
        json!({"hedge": 1, "hedge_delay": "p100"}),
        json!({"hedge": 1, "hedge_delay": "soon"}),
    ] {
        let e = error(bad);
        assert!(e.contains("`hedge_delay`"), "{e}");
    }
    let e = error(json!({"hedge_budget": 5}));
    assert!(
        e.contains("`hedge_budget` has no effect without `hedge`"),
        "{e}"
    );
    let e = error(json!({"hedge": 5}));
    assert!(
        e.contains("`hedge` counts the attempts after the first"),
        "{e}"
    );
}

/// Replicas a, b, c of a keyed breaker; `open` ones opened by one failure each. Each
/// attempt answers its key after `ms(key)` milliseconds, and logs the key.
fn replicas(name: &str, open: &[&str]) -> KeyedBreaker<String> {
    let config = Config::default()
        .threshold(1)
        .hedge(1)
        .hedge_delay(fixed(10));
    let keyed = KeyedBreaker::<String>::new(name, config);
    for key in open {
        let _ = keyed.call_sync(*key, || Err::<(), _>("down"));
        assert_eq!(keyed.breaker(*key).state(), State::Open);
    }
    keyed
}

fn keys(names: &[&str]) -> Vec<String> {
    names.iter().map(|k| k.to_string()).collect()
}

type Attempt = std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, ()>>>>;

fn attempt(log: &Mutex<Vec<String>>, ms: fn(&str) -> u64) -> impl Fn(&String) -> Attempt + '_ {
    move |key: &String| {
        log.lock().unwrap().push(key.clone());
        let (key, took) = (key.clone(), ms(key));
        Box::pin(async move {
            tokio::time::sleep(MS * took as u32).await;
            Ok(key)
        })
    }
}

/// The first attempt goes to the first key that admits it (an open key refuses it, counted
/// there); the hedge to the next one.
#[tokio::test(start_paused = true)]
async fn a_keyed_hedge_goes_to_the_next_replica() {
    let keyed = replicas("hedge::keyed_next", &["a"]);
    let log = Mutex::new(Vec::new());
    let slow_b = |k: &str| if k == "b" { 500 } else { 5 };
    let r = keyed
        .call_hedged(&keys(&["a", "b", "c"]), attempt(&log, slow_b))
        .await;
    assert_eq!(r.unwrap(), "c");
    assert_eq!(*log.lock().unwrap(), ["a", "b", "c"]);
    let (a, b, c) = (
        keyed.breaker("a").stats(),
        keyed.breaker("b").stats(),
        keyed.breaker("c").stats(),
    );
    assert_eq!(a.rejected, 1, "a refused the first attempt");
    assert_eq!(
        (b.hedges, b.hedges_won, b.cancelled),
        (1, 1, 1),
        "decided at b"
    );
    assert_eq!((c.calls, c.successes), (1, 1));
}

/// A hedge never goes to an open key: it skips it (without a refusal counted there), and
/// with no key left that would take it, it is denied and the call waits.
#[tokio::test(start_paused = true)]
async fn a_keyed_hedge_skips_an_open_replica() {
    let keyed = replicas("hedge::keyed_skip", &["a"]);
    let log = Mutex::new(Vec::new());
    let slow_b = |k: &str| if k == "b" { 500 } else { 5 };
    let r = keyed
        .call_hedged(&keys(&["b", "a", "c"]), attempt(&log, slow_b))
        .await;
    assert_eq!(r.unwrap(), "c");
    assert_eq!(*log.lock().unwrap(), ["b", "c"]);
    assert_eq!(keyed.breaker("a").stats().rejected, 0);

    let log = Mutex::new(Vec::new());
    let t0 = Instant::now();
    let r = keyed
        .call_hedged(&keys(&["b", "a"]), attempt(&log, slow_b))
        .await;
    assert_eq!(r.unwrap(), "b");
    assert_eq!(t0.elapsed(), 500 * MS, "waited for b");
    assert_eq!(*log.lock().unwrap(), ["b"]);
    assert_eq!(keyed.breaker("b").stats().hedges_denied, 1);
}

/// No key admits the first attempt: the first key's refusal; no key at all: a refusal as
/// open under the keyed breaker's name.
#[tokio::test(start_paused = true)]
async fn a_keyed_hedged_call_with_no_replica_up_is_refused() {
    let keyed = replicas("hedge::keyed_none", &["a", "b"]);
    let log = Mutex::new(Vec::new());
    let r = keyed
        .call_hedged(&keys(&["a", "b"]), attempt(&log, |_| 5))
        .await;
    let Err(CallError::Breaker(e)) = r else {
        panic!("{r:?}")
    };
    assert!(e.is_open());
    assert_eq!(e.name(), "hedge::keyed_none[a]");
    let r = keyed.call_hedged(&[], attempt(&log, |_| 5)).await;
    let Err(CallError::Breaker(e)) = r else {
        panic!("{r:?}")
    };
    assert!(e.is_open());
    assert_eq!(e.name(), "hedge::keyed_none");
    assert_eq!(log.lock().unwrap().len(), 2, "made, never run");
}

/// A dependency for the runs below: 5 ms, but 500 ms for every 50th attempt (2 %), or for
/// every attempt while `everyone_slow`; it counts its attempts.
#[derive(Clone, Default)]
struct Turning {
    attempts: Arc<AtomicU32>,
    everyone_slow: Arc<std::sync::atomic::AtomicBool>,
}

impl Turning {
    fn attempt(&self) -> impl std::future::Future<Output = Result<(), ()>> + use<> {
        let n = self.attempts.fetch_add(1, SeqCst);
        let slow = self.everyone_slow.load(SeqCst) || n % 50 == 49;
        async move {
            tokio::time::sleep(MS * if slow { 500 } else { 5 }).await;
            Ok(())
        }
    }

    fn turn(&self, everyone_slow: bool) {
        self.everyone_slow.store(everyone_slow, SeqCst);
    }

    /// `calls` hedged calls through `b` from `workers` concurrent callers; the attempts
    /// they made.
    async fn calls(&self, b: &Breaker, calls: u32, workers: u32) -> u32 {
        let before = self.attempts.load(SeqCst);
        let next = Arc::new(AtomicU32::new(0));
        let tasks: Vec<_> = (0..workers)
            .map(|_| {
                let (b, dep, next) = (b.clone(), self.clone(), next.clone());
                tokio::spawn(async move {
                    while next.fetch_add(1, SeqCst) < calls {
                        b.call_hedged(|| dep.attempt()).await.unwrap();
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
        self.attempts.load(SeqCst) - before
    }
}

/// The p95 breaker after 3 s of a 2 %-slow dependency (20 callers, ~12 000 calls: the window
/// holds a fast median and a long tail, the hedge budget is full).
async fn warmed(name: &str) -> (Breaker, Turning) {
    let b = Breaker::new(name, Config::default().hedge(1));
    let dep = Turning::default();
    dep.calls(&b, 12_000, 20).await;
    let s = b.stats();
    assert!(s.hedges > 100 && s.hedges_won == s.hedges, "{s:?}");
    (b, dep)
}

/// A dependency that turns slow for every call right after a fast warm-up: the window is
/// still full of fast samples (the delay stays at 5 ms, the tail long) and the budget saved
/// up, yet every call is overdue together. Hedging pauses after `OVERDUE_IN_A_ROW` of them:
/// at most that many hedges go, then one trial hedge a backed-off while, so the extra load
/// over the slow phase stays under 1 % where an unpaused hedge would spend the whole
/// budget (before this rule: 600 hedges, 30 %).
#[tokio::test(start_paused = true)]
async fn a_dependency_that_turns_slow_for_everyone_stops_being_hedged() {
    let (b, dep) = warmed("hedge::turns_slow").await;
    let before = b.stats();
    dep.turn(true);
    let t0 = Instant::now();
    let attempts = dep.calls(&b, 2_000, 100).await;
    let slow_for = t0.elapsed();
    let s = b.stats();
    let hedges = s.hedges - before.hedges;
    assert_eq!(u64::from(attempts), 2_000 + hedges);
    // `OVERDUE_IN_A_ROW` (5) before the pause, then a trial after 1 s, 2 s, 4 s (10 s ran).
    assert!(slow_for >= Duration::from_secs(10), "{slow_for:?}");
    assert!(
        hedges <= breaker::hedge::OVERDUE_IN_A_ROW + 4,
        "{hedges} hedges over the slow phase"
    );
    assert!(
        attempts <= 2_020,
        "extra load over 1 %: {attempts} attempts"
    );
    // The first 100 calls were all overdue at once: 5 hedged, the others paused.
    assert!(s.hedges_denied - before.hedges_denied >= 95, "{s:?}");
}

/// The 2 %-slow dependency keeps its hedges all along: each slow call is overdue alone, and
/// its hedge wins; nothing is paused or denied.
#[tokio::test(start_paused = true)]
async fn a_dependency_slow_for_a_few_calls_stays_hedged() {
    let (b, dep) = warmed("hedge::stays_hedged").await;
    let before = b.stats();
    dep.calls(&b, 12_000, 20).await;
    let s = b.stats();
    let hedges = s.hedges - before.hedges;
    // 2 % of the attempts are slow, 240 of these calls: each is hedged. (Before the
    // short-tail rule waited for the hedges that won: 127, the others coming
    // while the window, its slow calls hedged and dropped, showed a short tail.)
    assert!(hedges >= 200, "{hedges} hedges");
    assert_eq!(s.hedges_won - before.hedges_won, hedges);
    assert_eq!(s.hedges_denied, 0);
}

/// Paused, hedging resumes as soon as the dependency is fast again: a first attempt that
/// answers before the delay ends the run of overdue calls.
#[tokio::test(start_paused = true)]
async fn hedging_resumes_when_the_dependency_is_fast_again() {
    let (b, dep) = warmed("hedge::resumes").await;
    dep.turn(true);
    let before = b.stats();
    dep.calls(&b, 50, 50).await; // 0.5 s: the window keeps its fast median
    let paused = b.stats();
    assert_eq!(
        paused.hedges - before.hedges,
        breaker::hedge::OVERDUE_IN_A_ROW
    );
    assert_eq!(paused.hedges_denied, 45, "{paused:?}");
    dep.turn(false);
    dep.calls(&b, 8_000, 20).await;
    let s = b.stats();
    assert!(s.hedges - paused.hedges >= 50, "{s:?}");
    assert_eq!(s.hedges_won - paused.hedges_won, s.hedges - paused.hedges);
    assert_eq!(s.hedges_denied, paused.hedges_denied, "none denied since");
}

/// Paused, one trial hedge goes `TRIAL_AFTER` (1 s) after the pause began, then after 2 s,
/// 4 s…; a trial that wins ends the pause (here: the first replica stays stuck at 50 ms, but
/// the hedges, slow at first, turn fast).
#[tokio::test(start_paused = true)]
async fn a_trial_hedge_that_wins_ends_the_pause() {
    let b = Breaker::new(
        "hedge::trial",
        Config::default().hedge(1).hedge_delay(fixed(10)),
    );
    let hedge_ms = AtomicU32::new(100);
    let call = || {
        let attempt = AtomicU32::new(0);
        let b = b.clone();
        let hedge_ms = &hedge_ms;
        async move {
            b.call_hedged(|| {
                let ms = match attempt.fetch_add(1, SeqCst) {
                    0 => 50,
                    _ => hedge_ms.load(SeqCst),
                };
                async move {
                    tokio::time::sleep(MS * ms).await;
                    Ok::<_, ()>(ms)
                }
            })
            .await
            .unwrap()
        }
    };
    // Every call overdue, every hedge losing: five hedges, then paused.
    for _ in 0..10 {
        assert_eq!(call().await, 50);
    }
    let t_pause = Instant::now() - 5 * 50 * MS; // the sixth call's start
    let s = b.stats();
    assert_eq!((s.hedges, s.hedges_won, s.hedges_denied), (5, 0, 5));
    // Paused until 1 s after the pause began: then one trial, which loses.
    while Instant::now() < t_pause + Duration::from_millis(990) {
        call().await;
    }
    assert_eq!(b.stats().hedges, 5);
    call().await;
    assert_eq!(b.stats().hedges, 6, "the first trial, 1 s in");
    // The next trial 2 s later; the hedges are fast by then, so it wins and ends the pause.
    hedge_ms.store(5, SeqCst);
    let t_trial = Instant::now();
    while Instant::now() < t_trial + Duration::from_millis(1_950) {
        assert_eq!(call().await, 50);
    }
    assert_eq!(b.stats().hedges, 6, "no trial before 2 s");
    while b.stats().hedges == 6 {
        assert!(Instant::now() < t_trial + Duration::from_millis(2_100));
        call().await;
    }
    for _ in 0..5 {
        assert_eq!(call().await, 5, "hedged again, the hedge wins");
    }
    assert_eq!(b.stats().hedges_won, 6);
}
