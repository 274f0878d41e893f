//! The reqwest middleware's hooks, against real loopback servers: a key function (per
//! authority and path, so a 429 on one path leaves the host's other paths alone), a judge
//! of one's own, and the order with reqwest-retry that makes the breaker see one outcome per
//! logical request (the other order is in tests/reqwest_middleware.rs).
#![cfg(feature = "reqwest")]

#[path = "support/http.rs"]
mod http_server;

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use axum::{http::StatusCode, response::IntoResponse, routing::get, Router};
use breaker::{reqwest::CircuitBreakerMiddleware, Config, KeyedBreaker, State, Verdict};
use reqwest_middleware::{ClientBuilder, Middleware};

/// A host whose `/search` answers `429 Retry-After: 30` and whose `/items` answers 200,
/// counting the `/items` requests that reached it.
async fn quota_per_path() -> (String, Arc<AtomicUsize>) {
    let items = Arc::new(AtomicUsize::new(0));
    let counted = items.clone();
    let app = Router::new()
        .route(
            "/search",
            get(|| async {
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    [("retry-after", "30")],
                    "slow down",
                )
            }),
        )
        .route(
            "/items",
            get(move || {
                let counted = counted.clone();
                async move {
                    counted.fetch_add(1, Ordering::SeqCst);
                    "items".into_response()
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), items)
}

/// Sends a 429 on `/search`, then twelve requests to `/items`; returns how many of those
/// reached the server.
async fn after_a_429_on_search(middleware: impl Middleware) -> usize {
    let (base, items) = quota_per_path().await;
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(middleware)
        .build();
    let answer = client.get(format!("{base}/search")).send().await.unwrap();
    assert_eq!(answer.status(), 429);
    for _ in 0..12 {
        let _ = client.get(format!("{base}/items")).send().await;
    }
    items.load(Ordering::SeqCst)
}

#[tokio::test]
async fn keyed_by_authority_and_path_a_429_on_one_path_leaves_the_others_alone() {
    // One breaker per host: the 429 on /search parks /items too.
    assert_eq!(
        after_a_429_on_search(CircuitBreakerMiddleware::new()).await,
        0
    );

    // One breaker per host and path: /items is untouched.
    let per_path = KeyedBreaker::<String>::new("hooks::paths", Config::default());
    let middleware =
        CircuitBreakerMiddleware::keyed(per_path.clone(), breaker::reqwest::host_and_path);
    assert_eq!(middleware.keyed_breaker().name(), "hooks::paths");
    assert_eq!(after_a_429_on_search(middleware).await, 12);
    assert_eq!(per_path.len(), 2);
}

#[tokio::test]
async fn a_judge_of_ones_own_decides_what_counts() {
    let server = http_server::Server::start().await;
    server.answer(409, None);

    // The preset: a 409 is the caller's doing, it counts for nothing.
    let preset = CircuitBreakerMiddleware::with_config(Config::default().threshold(2));
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(preset.clone())
        .build();
    for _ in 0..4 {
        client.get(server.url("/")).send().await.unwrap();
    }
    assert_eq!(preset.breaker(&server.host_port()).state(), State::Closed);

    // This API answers 409 when it is overloaded: a judge that says so opens the breaker.
    let judged = CircuitBreakerMiddleware::with_config(Config::default().threshold(2)).classify(
        |r: &reqwest_middleware::Result<reqwest::Response>| match r {
            Ok(answer) if answer.status() == 409 => Verdict::Failure,
            Ok(answer) => breaker::http::verdict(answer.status(), answer.headers()),
            Err(_) => Verdict::Failure,
        },
    );
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(judged.clone())
        .build();
    let hits = server.hits();
    for _ in 0..4 {
        let _ = client.get(server.url("/")).send().await;
    }
    assert_eq!(judged.breaker(&server.host_port()).state(), State::Open);
    assert_eq!(server.hits() - hits, 2, "refused once open");
}

#[tokio::test]
async fn outside_the_retry_middleware_it_sees_one_outcome_per_logical_request() {
    let server = http_server::Server::start().await;
    server.answer(500, None);
    let breakers = CircuitBreakerMiddleware::with_config(Config::default().threshold(3));
    let retry = reqwest_retry::policies::ExponentialBackoff::builder()
        .retry_bounds(Duration::from_millis(1), Duration::from_millis(5))
        .build_with_max_retries(2);
    // The breaker added first: it wraps the retry loop.
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(breakers.clone())
        .with(reqwest_retry::RetryTransientMiddleware::new_with_policy(
            retry,
        ))
        .build();

    let answer = client.get(server.url("/")).send().await.unwrap();
    assert_eq!(answer.status(), 500, "the last attempt's answer");
    assert_eq!(server.hits(), 3, "one request, three attempts");
    let breaker = breakers.breaker(&server.host_port());
    assert_eq!(
        breaker.stats().failures,
        1,
        "three failed attempts, one failure counted"
    );
    assert_eq!(breaker.state(), State::Closed);

    // It takes three logical requests (nine attempts) to open it.
    for _ in 0..2 {
        let _ = client.get(server.url("/")).send().await;
    }
    assert_eq!(breaker.state(), State::Open);
    assert_eq!(server.hits(), 9);
}
