//! Overload (part three), through the public API on paused time: the throttle's refusal share
//! against Google SRE's formula, its cap and its sliding window; the recovery ramp's admitted
//! share over time; dry run's states and counts; the adaptive bulkhead converging on a
//! dependency's capacity and growing back when it recovers.

use std::{
    sync::{
        atomic::{AtomicU32, AtomicUsize, Ordering::SeqCst},
        Arc,
    },
    time::Duration,
};

use breaker::{Breaker, BreakerError, CallError, Config, State};

mod common;

/// A threshold no test reaches: the trip rules stay out of the throttle's way.
const NEVER: u32 = u32::MAX;

fn refused<'a>(r: &'a Result<(), CallError<&str>>) -> Option<&'a BreakerError> {
    match r {
        Err(CallError::Breaker(e)) => Some(e),
        _ => None,
    }
}

/// `max(0, (requests − K·accepts) / (requests + 1))`, capped: the formula of DESIGN.md.
fn formula(requests: f64, accepts: f64, k: f64, cap: f64) -> f64 {
    ((requests - k * accepts) / (requests + 1.0)).clamp(0.0, cap)
}

#[tokio::test(start_paused = true)]
async fn the_throttle_refuses_the_share_the_formula_says() {
    let b = Breaker::new(
        "overload::formula",
        Config::default().threshold(NEVER).throttle(2.0),
    );
    // 1 000 accepted calls, then a dependency that fails everything: the refusal
    // probability climbs as failures (requests without accepts) pile up.
    let (mut requests, mut accepts) = (0.0, 0.0);
    for _ in 0..1_000 {
        let r = b.call_sync(|| Ok::<(), &str>(()));
        assert!(r.is_ok(), "nothing is shed while every call is accepted");
        requests += 1.0;
        accepts += 1.0;
    }
    // Each call's refusal probability, from the counts before it (paused time: one bucket,
    // so the window holds exactly these calls).
    let (mut expected, mut variance, mut shed) = (0.0, 0.0, 0u32);
    for _ in 0..4_000 {
        let p = formula(requests, accepts, 2.0, 0.9);
        expected += p;
        variance += p * (1.0 - p);
        let r = b.call_sync(|| Err::<(), &str>("503"));
        if let Some(e) = refused(&r) {
            assert!(e.is_throttled(), "{e}");
            shed += 1;
        }
        requests += 1.0;
    }
    // 5 standard deviations of the sum of the calls' Bernoulli draws.
    let tolerance = 5.0 * variance.sqrt();
    assert!(
        (f64::from(shed) - expected).abs() < tolerance,
        "shed {shed}, the formula expects {expected:.0} ± {tolerance:.0}"
    );
    let stats = b.stats();
    assert_eq!(stats.throttled, u64::from(shed));
    assert_eq!(
        stats.rejected,
        u64::from(shed),
        "a throttled call is a rejected one"
    );
    assert_eq!(stats.failures, 4_000 - u64::from(shed));
    assert_eq!(
        b.state(),
        State::Closed,
        "throttling sheds before any trip rule"
    );
    let now = formula(requests, accepts, 2.0, 0.9) * 100.0;
    assert!(
        (b.snapshot().throttle_rate - now).abs() < 0.01,
        "{} vs {now}",
        b.snapshot().throttle_rate
    );
}

/// Fifty calls start at once, none answered yet: none of them is a request without an
/// accept, so nothing is shed (counted at admission, the second call saw `1 / 2`).
#[tokio::test(start_paused = true)]
async fn calls_still_in_flight_do_not_make_the_throttle_shed() {
    let b = Breaker::new("overload::in_flight", Config::default().throttle(2.0));
    let mut calls = tokio::task::JoinSet::new();
    for _ in 0..50 {
        let b = b.clone();
        calls.spawn(async move {
            b.call(async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok::<_, &str>(())
            })
            .await
        });
    }
    while let Some(done) = calls.join_next().await {
        assert!(done.unwrap().is_ok());
    }
    assert_eq!(b.stats().throttled, 0);
    assert_eq!(b.stats().successes, 50);
}

#[tokio::test(start_paused = true)]
async fn the_throttle_is_capped_and_forgets_what_left_its_window() {
    let b = Breaker::new(
        "overload::cap",
        Config::default()
            .threshold(NEVER)
            .throttle(2.0)
            .max_throttle(50)
            .throttle_window(Duration::from_secs(10)),
    );
    let mut shed = 0;
    for _ in 0..5_000 {
        if refused(&b.call_sync(|| Err::<(), &str>("503"))).is_some() {
            shed += 1;
        }
    }
    // Every call fails: the formula tends to 100 %, the cap holds it at 50 %.
    let share = f64::from(shed) / 5_000.0;
    assert!(
        (0.47..0.53).contains(&share),
        "shed {share:.3} of the calls"
    );
    assert!((b.snapshot().throttle_rate - 50.0).abs() < 1e-9);

    // A window later the failures are gone with it: nothing is shed.
    tokio::time::advance(Duration::from_secs(10)).await;
    assert_eq!(b.snapshot().throttle_rate, 0.0);
    for _ in 0..100 {
        assert!(b.call_sync(|| Ok::<(), &str>(())).is_ok());
    }
}

#[tokio::test(start_paused = true)]
async fn after_a_probe_closes_it_the_ramp_admits_a_growing_share() {
    let ramp = Duration::from_secs(8);
    let b = Breaker::new(
        "overload::ramp",
        Config::default()
            .threshold(1)
            .cool_off(Duration::from_secs(1))
            .ramp(ramp),
    );
    let _ = b.call_sync(|| Err::<(), &str>("down"));
    assert_eq!(b.state(), State::Open);
    tokio::time::advance(Duration::from_secs(1)).await;
    b.call_sync(|| Ok::<(), &str>(())).unwrap(); // the probe closes it: the ramp starts
    assert_eq!(b.state(), State::Closed);

    let mut throttled = 0;
    for quarter in 1..=3 {
        tokio::time::advance(ramp / 4).await;
        let want = f64::from(quarter) / 4.0;
        assert!(
            (b.snapshot().throttle_rate - (1.0 - want) * 100.0).abs() < 1e-6,
            "at {quarter}/4 of the ramp: {}",
            b.snapshot().throttle_rate
        );
        let calls = 4_000;
        let mut admitted = 0;
        for _ in 0..calls {
            match b.call_sync(|| Ok::<(), &str>(())) {
                Ok(()) => admitted += 1,
                Err(CallError::Breaker(e)) => {
                    assert!(e.is_throttled(), "{e}");
                    throttled += 1;
                }
                Err(CallError::Inner(_)) => unreachable!(),
            }
        }
        let share = f64::from(admitted) / f64::from(calls);
        assert!(
            (share - want).abs() < 0.03,
            "at {quarter}/4 of the ramp {share:.3} admitted, want {want}"
        );
    }
    assert_eq!(b.stats().throttled, throttled);
    // The ramp is over: every call passes.
    tokio::time::advance(ramp / 4).await;
    for _ in 0..1_000 {
        b.call_sync(|| Ok::<(), &str>(())).unwrap();
    }
    assert_eq!(b.snapshot().throttle_rate, 0.0);
}

#[tokio::test(start_paused = true)]
async fn a_reset_or_a_reopening_ends_the_ramp() {
    let b = Breaker::new(
        "overload::ramp_ends",
        Config::default()
            .threshold(1)
            .cool_off(Duration::from_secs(1))
            .ramp(Duration::from_secs(60)),
    );
    let _ = b.call_sync(|| Err::<(), &str>("down"));
    tokio::time::advance(Duration::from_secs(1)).await;
    b.call_sync(|| Ok::<(), &str>(())).unwrap();
    assert!(b.snapshot().throttle_rate > 99.0, "the ramp just started");
    b.handle().reset();
    assert_eq!(
        b.snapshot().throttle_rate,
        0.0,
        "a reset is no recovery to ramp"
    );
    for _ in 0..100 {
        b.call_sync(|| Ok::<(), &str>(())).unwrap();
    }
}

#[tokio::test(start_paused = true)]
async fn a_dry_run_moves_its_states_but_makes_every_call() {
    let dep = common::Dependency::default();
    let b = Breaker::new(
        "overload::dry_run",
        Config::default()
            .threshold(2)
            .cool_off(Duration::from_secs(5))
            .dry_run(true),
    );
    for _ in 0..2 {
        assert!(b.call(dep.fail()).await.is_err());
    }
    assert_eq!(b.state(), State::Open, "it opens as it would");
    assert!(b.snapshot().dry_run);
    // Open: each call runs anyway and returns the dependency's own answer; its outcome
    // counts for nothing, so even failures do not reopen or extend anything.
    for i in 0..10 {
        let r = if i % 2 == 0 {
            b.call(dep.ok(Duration::ZERO)).await
        } else {
            b.call(dep.fail()).await
        };
        match (i % 2, r) {
            (0, Ok("ok")) | (1, Err(CallError::Inner("502 bad gateway"))) => {}
            (_, other) => panic!("call {i}: {other:?}"),
        }
    }
    assert_eq!(dep.reached(), 12, "every call reached the dependency");
    let stats = b.stats();
    assert_eq!(stats.shadow_rejected, 10);
    assert_eq!(stats.rejected, 0);
    assert_eq!(
        (stats.successes, stats.failures),
        (0, 2),
        "shadows count nowhere else"
    );
    assert_eq!(stats.calls, 12);
    assert!(b.retry_in().is_some_and(|d| d == Duration::from_secs(5)));

    // The cool-off ends: a real probe decides, and its success closes the breaker.
    tokio::time::advance(Duration::from_secs(5)).await;
    b.call(dep.ok(Duration::ZERO)).await.unwrap();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.stats().successes, 1);
}

#[tokio::test(start_paused = true)]
async fn a_dry_run_bulkhead_and_throttle_pretend_too() {
    let b = Breaker::new(
        "overload::dry_run_full",
        Config::default().max_concurrent(1).dry_run(true),
    );
    // Two calls at once: the second would be refused by the bulkhead; it runs anyway.
    let (a, c) = tokio::join!(
        b.call(async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            Ok::<_, &str>(1)
        }),
        b.call(async { Ok::<_, &str>(2) }),
    );
    assert_eq!((a.unwrap(), c.unwrap()), (1, 2));
    assert_eq!(b.stats().shadow_rejected, 1);
    assert_eq!(b.stats().successes, 1);
}

/// A dependency with a capacity: answers take `base` while at most `capacity` calls are in
/// flight, and grow in proportion beyond (a queue forms).
struct Saturating {
    in_flight: AtomicU32,
    capacity: AtomicU32,
    reached: AtomicUsize,
}

impl Saturating {
    async fn call(&self) -> Result<(), &'static str> {
        self.reached.fetch_add(1, SeqCst);
        let n = self.in_flight.fetch_add(1, SeqCst) + 1;
        let capacity = self.capacity.load(SeqCst);
        let base = Duration::from_millis(10);
        let latency = base.mul_f64((f64::from(n) / f64::from(capacity)).max(1.0));
        tokio::time::sleep(latency).await;
        self.in_flight.fetch_sub(1, SeqCst);
        Ok(())
    }
}

/// 160 clients (far more than the dependency's capacity, so the limit, not their number,
/// bounds what is in flight) calling as fast as they can for `run`; a refused one waits
/// 1 ms. Returns the median of the limit sampled every 50 ms over the second half.
async fn load(b: &Breaker, dep: &Arc<Saturating>, run: Duration) -> u32 {
    let end = tokio::time::Instant::now() + run;
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..160 {
        let (b, dep) = (b.clone(), dep.clone());
        clients.spawn(async move {
            while tokio::time::Instant::now() < end {
                if let Err(CallError::Breaker(e)) = b.call(dep.call()).await {
                    assert!(e.is_full(), "{e}");
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
        });
    }
    tokio::time::sleep(run / 2).await;
    let mut samples = Vec::new();
    while tokio::time::Instant::now() < end {
        samples.push(b.snapshot().concurrency_limit.unwrap());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    while clients.join_next().await.is_some() {}
    samples.sort_unstable();
    samples[samples.len() / 2]
}

#[tokio::test(start_paused = true)]
async fn the_adaptive_limit_settles_near_capacity_and_grows_back() {
    let dep = Arc::new(Saturating {
        in_flight: AtomicU32::new(0),
        capacity: AtomicU32::new(8),
        reached: AtomicUsize::new(0),
    });
    let b = Breaker::new(
        "overload::adaptive",
        Config::default().threshold(NEVER).adaptive_concurrency(200),
    );
    assert_eq!(
        b.snapshot().concurrency_limit,
        Some(20),
        "starts at min(20, max)"
    );

    let limit = load(&b, &dep, Duration::from_secs(10)).await;
    // Vegas keeps a small queue on top of the capacity (α..β = 3..6 calls at this size).
    assert!(
        (8..=16).contains(&limit),
        "capacity 8, 160 eager clients: limit {limit}"
    );

    // The dependency scales out: the limit follows it up.
    dep.capacity.store(40, SeqCst);
    let grown = load(&b, &dep, Duration::from_secs(10)).await;
    assert!(
        (40..=56).contains(&grown),
        "capacity 40: limit {grown} (was {limit})"
    );
    assert!(
        b.stats().rejected > 0,
        "the clients beyond the limit were refused"
    );
    assert!(dep.reached.load(SeqCst) > 0);
}

#[test]
fn invalid_overload_settings_name_their_field() {
    let field = |c: Config| {
        Breaker::try_new("overload::invalid", c)
            .unwrap_err()
            .field()
    };
    let c = Config::default;
    assert_eq!(field(c().throttle(0.5)), "throttle");
    assert_eq!(field(c().throttle(f64::NAN)), "throttle");
    assert_eq!(field(c().throttle(2.0).max_throttle(0)), "max_throttle");
    assert_eq!(field(c().throttle(2.0).max_throttle(101)), "max_throttle");
    assert_eq!(field(c().max_throttle(50)), "max_throttle");
    assert_eq!(
        field(c().throttle_window(Duration::from_secs(1))),
        "throttle_window"
    );
    assert_eq!(
        field(c().throttle(2.0).throttle_window(Duration::ZERO)),
        "throttle_window"
    );
    assert_eq!(field(c().ramp(Duration::ZERO)), "ramp");
    assert_eq!(field(c().adaptive_concurrency(0)), "adaptive_concurrency");
    assert_eq!(
        field(c().adaptive_concurrency(10).max_concurrent(10)),
        "adaptive_concurrency"
    );
}
