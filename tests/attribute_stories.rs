//! The seeds' stories, told through `#[circuit_breaker]` instead of the runtime API. Time is
//! tokio's paused clock: `advance` moves it, nothing sleeps for real, nothing is timed.

use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::time::Duration;

use breaker::{circuit_breaker, registry, BreakerError, State};
use tokio::time::{advance, Instant};

#[derive(Debug, thiserror::Error)]
enum GatewayError {
    #[error("gateway answered 502")]
    BadGateway,
    #[error(transparent)]
    Breaker(#[from] BreakerError),
}

impl GatewayError {
    fn is_open(&self) -> bool {
        matches!(self, GatewayError::Breaker(e) if e.is_open())
    }
}

fn state(name: &str) -> State {
    registry()
        .get(name)
        .expect("the breaker exists after the first call")
        .state()
}

// The payment gateway (seed 000): threshold 2, cool-off 5 s; a broken deploy from t=1s to t=2s.
mod payments {
    use super::*;

    pub static CALLS: AtomicU32 = AtomicU32::new(0);
    pub static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();

    #[circuit_breaker(threshold = 2, cool_off = "5s")]
    pub async fn charge(cents: u64) -> Result<u64, GatewayError> {
        CALLS.fetch_add(1, SeqCst);
        let t = START.get().expect("set by the test").elapsed();
        if t >= Duration::from_secs(1) && t < Duration::from_secs(2) {
            return Err(GatewayError::BadGateway);
        }
        Ok(cents)
    }
}

#[tokio::test(start_paused = true)]
async fn payment_gateway_opens_after_two_failures_and_closes_after_a_probe() {
    use payments::{charge, CALLS, START};
    START.set(Instant::now()).unwrap();
    let name = "attribute_stories::payments::charge";

    assert_eq!(charge(100).await.unwrap(), 100);
    assert_eq!(state(name), State::Closed);

    advance(Duration::from_secs(1)).await; // t = 1s: the broken deploy
    assert!(matches!(charge(100).await, Err(GatewayError::BadGateway)));
    assert_eq!(state(name), State::Closed);
    assert!(matches!(charge(100).await, Err(GatewayError::BadGateway)));
    assert_eq!(state(name), State::Open);

    // The third caller fails at once, without touching the gateway.
    let calls = CALLS.load(SeqCst);
    let err = charge(100).await.unwrap_err();
    assert!(err.is_open(), "{err}");
    assert_eq!(CALLS.load(SeqCst), calls);

    advance(Duration::from_secs(1)).await; // t = 2s: fixed, but the breaker is still open
    assert!(charge(100).await.unwrap_err().is_open());
    assert_eq!(CALLS.load(SeqCst), calls);

    advance(Duration::from_secs(4)).await; // t = 6s: the cool-off is over
    assert_eq!(state(name), State::HalfOpen);
    assert_eq!(charge(100).await.unwrap(), 100); // the probe
    assert_eq!(CALLS.load(SeqCst), calls + 1);
    assert_eq!(state(name), State::Closed);
}

// The tax service (seed 001) did not go down, it got slow: 25 s per answer.
mod tax {
    use super::*;

    pub static CALLS: AtomicU32 = AtomicU32::new(0);
    pub static LATENCY_MS: AtomicU32 = AtomicU32::new(25_000);

    #[circuit_breaker(threshold = 3, cool_off = "10s", timeout = "600ms")]
    pub async fn get_tax(cents: u64) -> Result<u64, GatewayError> {
        CALLS.fetch_add(1, SeqCst);
        let latency = LATENCY_MS.load(SeqCst);
        tokio::time::sleep(Duration::from_millis(latency.into())).await;
        Ok(cents / 5)
    }
}

#[tokio::test(start_paused = true)]
async fn slow_tax_service_times_out_trips_and_admits_one_probe_among_a_hundred_callers() {
    use tax::{get_tax, CALLS, LATENCY_MS};
    let name = "attribute_stories::tax::get_tax";

    for i in 0..3 {
        let started = Instant::now();
        let err = get_tax(100).await.unwrap_err();
        assert!(
            matches!(&err, GatewayError::Breaker(e) if e.is_timeout()),
            "call {i}: {err}"
        );
        // The caller waited the timeout, not the 25 s (paused time auto-advances).
        assert_eq!(started.elapsed(), Duration::from_millis(600));
    }
    assert_eq!(state(name), State::Open);
    assert_eq!(CALLS.load(SeqCst), 3);

    // Open: rejected at once, the service is left alone.
    for _ in 0..10 {
        assert!(get_tax(100).await.unwrap_err().is_open());
    }
    assert_eq!(CALLS.load(SeqCst), 3);

    // The service recovers (40 ms) while the breaker is open; after the cool-off a hundred
    // callers arrive together and exactly one of them probes.
    LATENCY_MS.store(40, SeqCst);
    advance(Duration::from_secs(10)).await;
    let callers: Vec<_> = (0..100).map(|_| tokio::spawn(get_tax(100))).collect();
    let mut served = 0;
    let mut rejected = 0;
    for caller in callers {
        match caller.await.unwrap() {
            Ok(tax) => {
                assert_eq!(tax, 20);
                served += 1;
            }
            Err(e) if e.is_open() => rejected += 1,
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert_eq!((served, rejected), (1, 99));
    assert_eq!(CALLS.load(SeqCst), 4);
    assert_eq!(state(name), State::Closed);
}

// The fraud vendor (seed 002): half of a 20-call window failing or slower than 2 s opens the
// breaker for 30 s, then 3 probes decide.
mod fraud {
    use super::*;

    pub static CALLS: AtomicU32 = AtomicU32::new(0);

    #[circuit_breaker(
        failure_rate = 50,
        window = 20,
        slow_call = "2s",
        cool_off = "30s",
        probes = 3
    )]
    pub async fn score(fail: bool, latency_ms: u64) -> Result<u32, GatewayError> {
        CALLS.fetch_add(1, SeqCst);
        tokio::time::sleep(Duration::from_millis(latency_ms)).await;
        if fail {
            Err(GatewayError::BadGateway)
        } else {
            Ok(7)
        }
    }
}

#[tokio::test(start_paused = true)]
async fn fraud_vendor_opens_at_half_the_window_and_closes_after_three_probes() {
    use fraud::{score, CALLS};
    let name = "attribute_stories::fraud::score";

    for _ in 0..10 {
        score(false, 10).await.unwrap();
    }
    // Five slow answers (still returned to the caller) and four errors: 9 of 19 failed.
    for _ in 0..5 {
        assert_eq!(score(false, 2_500).await.unwrap(), 7);
    }
    for _ in 0..4 {
        score(true, 10).await.unwrap_err();
    }
    // Nine failures in a row did not trip a consecutive threshold: only the rate judges.
    assert_eq!(state(name), State::Closed);
    score(true, 10).await.unwrap_err(); // 10 of 20
    assert_eq!(state(name), State::Open);

    advance(Duration::from_secs(29)).await;
    assert!(score(false, 10).await.unwrap_err().is_open());
    advance(Duration::from_secs(1)).await;
    assert_eq!(state(name), State::HalfOpen);

    let before = CALLS.load(SeqCst);
    let callers: Vec<_> = (0..5).map(|_| tokio::spawn(score(false, 100))).collect();
    let mut results = Vec::new();
    for caller in callers {
        results.push(caller.await.unwrap());
    }
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 3);
    assert!(results
        .iter()
        .filter_map(|r| r.as_ref().err())
        .all(GatewayError::is_open));
    assert_eq!(CALLS.load(SeqCst), before + 3);
    assert_eq!(state(name), State::Closed);
}

// The fleet tests' redis-server; this story uses only `start` and `url`.
#[cfg(feature = "redis")]
#[path = "support/redis.rs"]
#[allow(dead_code)]
mod redis_server;

// Two instances of the inventory service share what they learn through Redis: this process
// guards its calls with `fleet = true`, the other instance is a plain `Breaker` joined to a
// fleet of its own. When the other opens, this one opens too, without having failed once.
// Real time (the fleet's task talks to a real `redis-server`), awaited with a deadline.
#[cfg(feature = "redis")]
mod inventory_fleet {
    use super::*;
    use breaker::{fleet::Fleet, Breaker, Config};
    use redis_server::RedisServer;

    pub static CALLS: AtomicU32 = AtomicU32::new(0);

    #[circuit_breaker(
        threshold = 1,
        cool_off = "30s",
        name = "stories::inventory",
        fleet = true
    )]
    pub async fn reserve(sku: &str) -> Result<u32, GatewayError> {
        CALLS.fetch_add(1, SeqCst);
        Ok(sku.len() as u32)
    }

    async fn fleet(server: &RedisServer, instance: &str) -> Fleet {
        Fleet::builder(server.url())
            .instance(instance)
            .prefix("stories")
            .connect()
            .await
            .expect("connect to the test's redis-server")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fleet_true_opens_this_instance_when_another_opens() {
        let server = RedisServer::start();
        breaker::fleet::install(fleet(&server, "stories#this").await);
        // The first call creates the breaker, which joins the installed fleet.
        assert_eq!(reserve("apple").await.unwrap(), 5);

        let other = fleet(&server, "stories#other").await;
        let theirs = Breaker::new(
            "stories::inventory",
            Config::default()
                .threshold(1)
                .cool_off(Duration::from_secs(30)),
        );
        other.join(&theirs);
        // Joining is asynchronous: let both tasks read the fleet's (absent) open state.
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(theirs.call_sync(|| Err::<(), _>("down")).is_err()); // the other instance opens

        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            match reserve("apple").await {
                Err(e) if e.is_open() => break,
                _ => assert!(
                    std::time::Instant::now() < deadline,
                    "this instance did not open within 5 s"
                ),
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let calls = CALLS.load(SeqCst);
        assert!(reserve("apple").await.unwrap_err().is_open());
        assert_eq!(
            CALLS.load(SeqCst),
            calls,
            "open: the dependency is not called"
        );

        // Keyed: each key's breaker joins the fleet as it is made, under its own name.
        assert_eq!(reserve_at("pear").await.unwrap(), 4);
        let their_pear = Breaker::new(
            "stories::stock[pear]",
            Config::default()
                .threshold(1)
                .cool_off(Duration::from_secs(30)),
        );
        other.join(&their_pear);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(their_pear.call_sync(|| Err::<(), _>("down")).is_err());
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            match reserve_at("pear").await {
                Err(e) if e.is_open() => break,
                _ => assert!(
                    std::time::Instant::now() < deadline,
                    "this instance's `pear` breaker did not open within 5 s"
                ),
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(
            reserve_at("plum").await.unwrap(),
            4,
            "another key stays closed"
        );
    }

    #[circuit_breaker(
        key = sku,
        threshold = 1,
        cool_off = "30s",
        name = "stories::stock",
        fleet = true
    )]
    pub async fn reserve_at(sku: &str) -> Result<u32, GatewayError> {
        Ok(sku.len() as u32)
    }
}
