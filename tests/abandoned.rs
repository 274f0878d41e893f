//! Calls abandoned by whoever waits for them (an outer timeout, a caller that gives up): a
//! call dropped after running `slow_call` counts as a slow call, a failure, in `Stats.abandoned`;
//! dropped sooner it is cancelled, as before. Through the runtime, the attribute, the tower
//! layer under an outer `tower::timeout`, and a half-open probe. Paused time. A streamed
//! response is abandoned only until its headers (a stream dropped later is cancelled):
//! tests/grpc.rs and tests/tower_layer.rs.

use std::{future::pending, time::Duration};

use breaker::{circuit_breaker, Breaker, Config, State};

const SLOW: Duration = Duration::from_millis(100);

fn breaker(name: &str) -> Breaker {
    Breaker::new(
        name,
        Config::default()
            .threshold(3)
            .slow_call(SLOW)
            .cool_off(Duration::from_secs(10)),
    )
}

/// A call through `b` that never finishes, given up on after `after`.
async fn given_up(b: &Breaker, after: Duration) {
    let hung = b.call(pending::<Result<(), std::io::Error>>());
    assert!(tokio::time::timeout(after, hung).await.is_err());
}

#[tokio::test(start_paused = true)]
async fn an_outer_timeout_past_slow_call_opens_the_breaker() {
    let b = breaker("abandoned::runtime");
    for _ in 0..3 {
        given_up(&b, Duration::from_millis(200)).await;
    }
    let stats = b.stats();
    assert_eq!(
        (
            stats.abandoned,
            stats.slow_calls,
            stats.failures,
            stats.cancelled
        ),
        (3, 3, 3, 0)
    );
    assert_eq!(b.state(), State::Open, "a hung dependency opens it");
}

#[tokio::test(start_paused = true)]
async fn dropped_sooner_than_slow_call_is_cancelled_as_before() {
    let b = breaker("abandoned::sooner");
    for _ in 0..5 {
        given_up(&b, Duration::from_millis(50)).await;
    }
    let stats = b.stats();
    assert_eq!(
        (stats.cancelled, stats.abandoned, stats.failures),
        (5, 0, 0)
    );
    assert_eq!(b.state(), State::Closed);
}

#[tokio::test(start_paused = true)]
async fn without_slow_call_a_dropped_call_is_only_cancelled() {
    let b = Breaker::new("abandoned::no_slow_call", Config::default().threshold(1));
    given_up(&b, Duration::from_secs(60)).await;
    assert_eq!((b.stats().cancelled, b.stats().abandoned), (1, 0));
    assert_eq!(b.state(), State::Closed);
}

#[tokio::test(start_paused = true)]
async fn a_probe_abandoned_after_slow_call_reopens() {
    let b = breaker("abandoned::probe");
    for _ in 0..3 {
        given_up(&b, Duration::from_millis(200)).await;
    }
    assert_eq!(b.state(), State::Open);
    tokio::time::advance(Duration::from_secs(10)).await;
    assert_eq!(b.state(), State::HalfOpen);
    given_up(&b, Duration::from_millis(200)).await;
    assert_eq!(b.state(), State::Open, "the hung probe reopened it");
    assert_eq!(b.stats().abandoned, 4);

    // A probe dropped sooner gives its slot back: the breaker stays half-open.
    tokio::time::advance(Duration::from_secs(30)).await;
    assert_eq!(b.state(), State::HalfOpen);
    given_up(&b, Duration::from_millis(10)).await;
    assert_eq!(b.state(), State::HalfOpen);
    b.call(async { Ok::<_, std::io::Error>(()) }).await.unwrap();
    assert_eq!(b.state(), State::Closed);
}

#[circuit_breaker(threshold = 3, slow_call = "100ms", cool_off = "10s")]
async fn hangs() -> Result<(), std::io::Error> {
    pending().await
}

#[tokio::test(start_paused = true)]
async fn the_attribute_under_an_outer_timeout() {
    for _ in 0..3 {
        assert!(tokio::time::timeout(Duration::from_millis(200), hangs())
            .await
            .is_err());
    }
    let handle = breaker::registry()
        .get("abandoned::hangs")
        .expect("registered");
    assert_eq!(handle.state(), State::Open);
    assert_eq!(handle.stats().abandoned, 3);
    // `io::Result`: the refusal arrives as an `io::Error` of kind `Other`, at once.
    let refused = hangs().await.unwrap_err();
    assert!(refused.to_string().contains("is open"), "{refused}");
}

#[cfg(feature = "tower")]
#[tokio::test(start_paused = true)]
async fn the_tower_layer_under_an_outer_tower_timeout() {
    use breaker::tower::CircuitBreakerLayer;
    use tower::{service_fn, ServiceBuilder, ServiceExt};

    let b = breaker("abandoned::tower");
    // The deadline outside the breaker: the stack that used to hide a hung dependency.
    let svc = ServiceBuilder::new()
        .timeout(Duration::from_millis(200))
        .layer(CircuitBreakerLayer::new(b.clone()))
        .service(service_fn(|()| pending::<Result<(), std::io::Error>>()));
    for _ in 0..3 {
        let err = svc.clone().oneshot(()).await.unwrap_err();
        assert!(err.is::<tower::timeout::error::Elapsed>(), "{err}");
    }
    assert_eq!(b.stats().abandoned, 3);
    assert_eq!(b.state(), State::Open);
}
