//! Budgeted retries over real loopback servers: `breaker::retry::RetryLayer` around a hyper
//! client, and `CircuitBreakerMiddleware` with `Config::retry`. Each attempt reaches the
//! server through the breaker; refusals and neutral answers are not retried; a
//! `Retry-After` is waited. Real time, so the backoff is a millisecond.
#![cfg(all(feature = "tower", feature = "reqwest"))]

#[path = "support/http.rs"]
mod http_server;

use std::time::{Duration, Instant};

use breaker::{
    reqwest::CircuitBreakerMiddleware,
    retry::{clone_http_request, RetryLayer},
    Breaker, CallError, Config, State,
};
use http_body_util::Empty;
use http_server::Server;
use hyper_util::{client::legacy::Client, rt::TokioExecutor};
use reqwest_middleware::ClientBuilder;
use tower::{Layer, ServiceBuilder, ServiceExt};

fn retrying(attempts: u32) -> Config {
    Config::default()
        .retry(attempts)
        .backoff(Duration::from_millis(1))
}

#[tokio::test]
async fn the_tower_layer_retries_each_attempt_through_the_breaker() {
    let server = Server::start().await;
    let b = Breaker::new("retry_http::tower", retrying(3).threshold(100));
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<axum::body::Bytes>>();
    let svc = ServiceBuilder::new()
        .layer(RetryLayer::new(b.clone()).clone_request(clone_http_request))
        .service(client);
    let get = || {
        http::Request::get(server.url("/items"))
            .body(Empty::new())
            .unwrap()
    };

    // A 503 is an answer judged a failure: retried, and the last answer returned.
    server.answer(503, None);
    let answer = svc.clone().oneshot(get()).await.unwrap();
    assert_eq!(answer.status(), 503);
    assert_eq!(server.hits(), 3);
    assert_eq!(b.stats().retries, 2);

    // A 404 is neutral (the caller's fault): not retried.
    server.answer(404, None);
    assert_eq!(svc.clone().oneshot(get()).await.unwrap().status(), 404);
    assert_eq!(server.hits(), 4);

    // A 503 with `Retry-After: 1` opens the breaker for a second: each retry waits that
    // second (not the millisecond of backoff) and goes as the probe.
    server.answer(503, Some("1"));
    let start = Instant::now();
    let answer = svc.clone().oneshot(get()).await.unwrap();
    assert_eq!(answer.status(), 503);
    assert!(
        start.elapsed() >= Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(server.hits(), 4 + 3, "every attempt reached the server");
}

#[tokio::test]
async fn the_tower_layer_stops_at_a_refusal() {
    let server = Server::start().await;
    let b = Breaker::new("retry_http::tower_refused", retrying(5).threshold(2));
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<axum::body::Bytes>>();
    let svc = RetryLayer::new(b.clone())
        .clone_request(clone_http_request)
        .layer(client);
    server.answer(500, None);
    let req = http::Request::get(server.url("/"))
        .body(Empty::new())
        .unwrap();
    match svc.oneshot(req).await {
        Err(CallError::Breaker(e)) => assert!(e.is_open() && e.retry_in().is_some()),
        other => panic!("expected the refusal, got {:?}", other.map(|a| a.status())),
    }
    assert_eq!(server.hits(), 2, "the third attempt was refused, not sent");
    assert_eq!(b.state(), State::Open);
}

#[tokio::test]
async fn the_reqwest_middleware_retries_with_config_retry() {
    let server = Server::start().await;
    let breakers = CircuitBreakerMiddleware::with_config(retrying(3).threshold(100));
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(breakers.clone())
        .build();

    server.answer(502, None);
    let answer = client.get(server.url("/a")).send().await.unwrap();
    assert_eq!(answer.status(), 502, "the last answer");
    assert_eq!(server.hits(), 3);
    let b = breakers.breaker(&server.host_port());
    assert_eq!((b.stats().calls, b.stats().retries), (3, 2));

    server.answer(400, None);
    client.get(server.url("/a")).send().await.unwrap();
    assert_eq!(server.hits(), 4, "a 400 is neutral: sent once");

    // A body sent again on each attempt.
    server.answer(503, None);
    client
        .post(server.url("/b"))
        .body("payload")
        .send()
        .await
        .unwrap();
    assert_eq!(server.hits(), 7);
}

#[tokio::test]
async fn the_reqwest_middleware_without_retry_sends_once() {
    let server = Server::start().await;
    let breakers = CircuitBreakerMiddleware::with_config(Config::default().threshold(100));
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(breakers.clone())
        .build();
    server.answer(503, None);
    client.get(server.url("/")).send().await.unwrap();
    assert_eq!(server.hits(), 1);
}

/// One GET through a hyper client behind `RetryLayer` on `b`: the last answer's status.
async fn get_retried(b: &Breaker, url: String) -> u16 {
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<axum::body::Bytes>>();
    let svc = RetryLayer::new(b.clone())
        .clone_request(clone_http_request)
        .layer(client);
    let get = http::Request::get(url).body(Empty::new()).unwrap();
    match svc.oneshot(get).await {
        Ok(answer) => answer.status().as_u16(),
        Err(e) => panic!("expected an answer, got {e:?}"),
    }
}

/// Issue 40: `Retry-After: 0` ("now is fine") opened the breaker for its whole cool-off and
/// the retry was refused. It is one failure, and the retry follows.
#[tokio::test]
async fn retry_after_zero_is_one_failure_and_the_retry_follows() {
    let server = Server::start().await;
    let config = retrying(2).threshold(5).cool_off(Duration::from_secs(30));
    let b = Breaker::new("retry_http::retry_after_zero", config);
    server.answer(503, Some("0"));
    assert_eq!(get_retried(&b, server.url("/")).await, 503);
    assert_eq!(server.hits(), 2, "the retry followed");
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.stats().failures, 2);
}

/// The times one call takes over a server answering 503 with `Retry-After: secs`, under
/// `retry = 3` and the default bound of 5 s (paused time): (hits, elapsed).
async fn under_retry_after(name: &str, secs: &str) -> (usize, Duration) {
    let server = Server::start().await;
    let b = Breaker::new(name, Config::default().retry(3).threshold(100));
    server.answer(503, Some(secs));
    let start = tokio::time::Instant::now();
    assert_eq!(get_retried(&b, server.url("/")).await, 503);
    (server.hits(), start.elapsed())
}

/// Issue 40: `Retry-After: 5` held the caller 10 s over 3 hits, `Retry-After: 6` returned at
/// once. Under `retry_within` (default 5 s) they behave alike; a `Retry-After: 2` still fits.
#[tokio::test(start_paused = true)]
async fn retry_after_five_and_six_behave_alike_under_the_bound() {
    let (hits, took) = under_retry_after("retry_http::ra5", "5").await;
    assert_eq!(hits, 1, "a wait to 5 s leaves no time for the retry");
    assert!(took < Duration::from_secs(1), "{took:?}");
    let (hits, took) = under_retry_after("retry_http::ra6", "6").await;
    assert_eq!(hits, 1);
    assert!(took < Duration::from_secs(1), "{took:?}");
    let (hits, took) = under_retry_after("retry_http::ra2", "2").await;
    assert_eq!(hits, 3, "2 s and 2 s fit in 5 s");
    assert!(
        took >= Duration::from_secs(4) && took < Duration::from_secs(5),
        "{took:?}"
    );
}

/// `retry_within` set shorter: a 2 s `Retry-After` no longer fits a bound of 1 s.
#[tokio::test(start_paused = true)]
async fn a_shorter_bound_returns_the_last_answer() {
    let server = Server::start().await;
    let config = Config::default()
        .retry(3)
        .threshold(100)
        .retry_within(Duration::from_secs(1));
    let b = Breaker::new("retry_http::within_1s", config);
    server.answer(429, Some("2"));
    let start = tokio::time::Instant::now();
    assert_eq!(get_retried(&b, server.url("/")).await, 429);
    assert_eq!(server.hits(), 1);
    assert!(start.elapsed() < Duration::from_secs(1));
}
