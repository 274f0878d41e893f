//! `RetryLayer::grpc` against a real tonic server on loopback: failures by the gRPC table
//! retried (Trailers-Only answers), pushback waited, a negative pushback not retried, a zero
//! pushback one failure, committed (streamed) answers never retried, refusals as a tonic
//! `Status`.
#![cfg(feature = "grpc")]

#[path = "support/grpc.rs"]
mod backend;

use std::time::{Duration, Instant};

use breaker::{retry::RetryLayer, tower::CircuitBreakerLayer, Breaker, Config, State};
use tonic::Code;
use tower::ServiceBuilder;

fn retrying(name: &str, attempts: u32) -> Breaker {
    let config = Config::default()
        .retry(attempts)
        .backoff(Duration::from_millis(1))
        .threshold(100);
    Breaker::new(name, config)
}

#[tokio::test]
async fn a_failure_by_the_table_is_retried() {
    let server = backend::start().await;
    let b = retrying("retry_grpc::failure", 3);
    let channel = ServiceBuilder::new()
        .layer(RetryLayer::grpc(b.clone()))
        .service(server.channel().await);

    let status = backend::call(channel.clone(), "code 14").await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "the last answer");
    assert_eq!(server.hits(), 3);
    let s = b.stats();
    assert_eq!((s.calls, s.failures, s.retries), (3, 3, 2));

    // A success, and a neutral code (the caller's fault): sent once.
    assert_eq!(backend::call(channel.clone(), "ok").await.unwrap(), "fine");
    assert_eq!(server.hits(), 4);
    let status = backend::call(channel.clone(), "code 5").await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound);
    assert_eq!(server.hits(), 5);
    assert_eq!(b.stats().retries, 2);
}

#[tokio::test]
async fn a_pushback_is_waited_and_a_negative_one_is_not_retried() {
    let server = backend::start().await;
    let b = retrying("retry_grpc::pushback", 2);
    let channel = ServiceBuilder::new()
        .layer(RetryLayer::grpc(b.clone()))
        .service(server.channel().await);

    // RESOURCE_EXHAUSTED with a pushback of 300 ms: the retry waits for it.
    let start = Instant::now();
    let status = backend::call(channel.clone(), "code 8 pushback 300")
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(server.hits(), 2);
    assert!(
        start.elapsed() >= Duration::from_millis(300),
        "{:?}",
        start.elapsed()
    );

    // A negative pushback: "do not retry".
    tokio::time::sleep(Duration::from_millis(350)).await; // the 300 ms opening passes
    let status = backend::call(channel.clone(), "code 14 pushback -1")
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(server.hits(), 3, "sent once");
}

/// Issue 40: `grpc-retry-pushback-ms: 0` ("now is fine") opened the breaker for its
/// cool-off. It is one failure, and a retry follows at once.
#[tokio::test]
async fn a_zero_pushback_is_one_failure() {
    let server = backend::start().await;
    let config = Config::default()
        .threshold(5)
        .cool_off(Duration::from_secs(30));
    let b = Breaker::new("retry_grpc::zero_layer", config.clone());
    let channel = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::grpc(b.clone()))
        .service(server.channel().await);
    let status = backend::call(channel, "code 14 pushback 0")
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(b.state(), State::Closed, "one failure, not an opening");
    assert_eq!(b.stats().failures, 1);

    let b = Breaker::new(
        "retry_grpc::zero_retry",
        config.retry(2).backoff(Duration::from_millis(1)),
    );
    let channel = ServiceBuilder::new()
        .layer(RetryLayer::grpc(b.clone()))
        .service(server.channel().await);
    let status = backend::call(channel, "code 14 pushback 0")
        .await
        .unwrap_err();
    assert_eq!(
        status.code(),
        Code::Unavailable,
        "the server's answer, not a refusal"
    );
    assert_eq!(server.hits(), 3, "the retry followed");
    assert_eq!(b.state(), State::Closed);
}

/// An answer whose headers carry no code is committed: its messages reach the caller, its
/// trailers judge it, and it is never retried.
#[tokio::test]
async fn a_committed_answer_is_judged_at_its_trailers_and_not_retried() {
    let server = backend::start().await;
    let b = retrying("retry_grpc::committed", 3);
    let channel = ServiceBuilder::new()
        .layer(RetryLayer::grpc(b.clone()))
        .service(server.channel().await);
    let (read, end) = backend::call_stream(channel, "stream 2 code 14", None).await;
    assert_eq!(read, 2);
    assert_eq!(end.unwrap_err().code(), Code::Unavailable);
    assert_eq!(server.hits(), 1, "not retried");
    let s = b.stats();
    assert_eq!((s.calls, s.failures, s.retries), (1, 1, 0));
}

#[tokio::test]
async fn a_refusal_reaches_the_caller_as_a_status() {
    let server = backend::start().await;
    let b = retrying("retry_grpc::refused", 3);
    b.handle().force_open();
    let channel = ServiceBuilder::new()
        .layer(RetryLayer::grpc(b.clone()))
        .service(server.channel().await);
    let status = backend::call(channel, "ok").await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert!(
        status.message().contains("retry_grpc::refused"),
        "{status:?}"
    );
    assert_eq!(server.hits(), 0);
}
