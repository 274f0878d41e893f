//! `HedgeLayer::grpc` against a real tonic server on loopback: a slow unary call hedged and
//! the fast answer returned; a stream (server or client) never hedged; a failure sends the
//! next hedge at once, a pushback stops them.
#![cfg(feature = "grpc")]

#[path = "support/grpc.rs"]
mod backend;

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering::SeqCst},
        Arc,
    },
    time::{Duration, Instant},
};

use breaker::{hedge::HedgeLayer, Breaker, Config, HedgeDelay};
use tonic::{
    codegen::{http::uri::PathAndQuery, tokio_stream},
    transport::Channel,
    Code,
};
use tower::{Service, ServiceBuilder, ServiceExt};

/// How long the slow replica holds its answer: the hedge (after 20 ms) answers long before.
const SLOW: Duration = Duration::from_millis(600);

fn hedging(name: &str, hedges: u32) -> Breaker {
    let config = Config::default()
        .hedge(hedges)
        .hedge_delay(HedgeDelay::Fixed(Duration::from_millis(20)))
        .threshold(100);
    Breaker::new(name, config)
}

type GrpcRequest = http::Request<tonic::body::Body>;

/// The channel, with its first call's answer held back for [`SLOW`] (a replica in a GC
/// pause: the request reached the server, the answer is late); the others pass at once.
fn first_slow(
    channel: Channel,
) -> impl Service<
    GrpcRequest,
    Response = http::Response<tonic::body::Body>,
    Error = tonic::transport::Error,
    Future = impl Send,
> + Clone
       + Send
       + 'static {
    let calls = Arc::new(AtomicUsize::new(0));
    tower::service_fn(move |req: GrpcRequest| {
        let (channel, n) = (channel.clone(), calls.fetch_add(1, SeqCst));
        async move {
            let answer = channel.oneshot(req).await;
            if n == 0 {
                tokio::time::sleep(SLOW).await;
            }
            answer
        }
    })
}

#[tokio::test]
async fn a_slow_unary_call_is_hedged_and_the_fast_answer_wins() {
    let server = backend::start().await;
    let b = hedging("hedge_grpc::wins", 1);
    let channel = ServiceBuilder::new()
        .layer(HedgeLayer::grpc(b.clone()))
        .service(first_slow(server.channel().await));

    let started = Instant::now();
    assert_eq!(backend::call(channel.clone(), "ok").await.unwrap(), "fine");
    assert!(started.elapsed() < SLOW, "{:?}", started.elapsed());
    assert_eq!(server.hits(), 2, "the first attempt and its hedge");
    let s = b.stats();
    assert_eq!((s.hedges, s.hedges_won), (1, 1));
    assert_eq!(
        (s.successes, s.cancelled),
        (1, 1),
        "the loser dropped: {s:?}"
    );

    // Fast now: answered before the delay, never hedged.
    assert_eq!(backend::call(channel, "ok").await.unwrap(), "fine");
    assert_eq!(server.hits(), 3);
    assert_eq!(b.stats().hedges, 1);
}

#[tokio::test]
async fn a_server_stream_is_never_hedged() {
    let server = backend::start().await;
    let b = hedging("hedge_grpc::server_stream", 1);
    let channel = ServiceBuilder::new()
        .layer(HedgeLayer::grpc(b.clone()))
        .service(server.channel().await);
    // Its headers at once, then three messages over 120 ms: six delays long.
    let started = Instant::now();
    let (read, end) = backend::call_stream(channel.clone(), "stream 3 code 0 every 60", None).await;
    assert_eq!((read, end.map_err(|s| s.code())), (3, Ok(())));
    assert!(started.elapsed() >= Duration::from_millis(120));
    assert_eq!(server.hits(), 1, "not hedged");
    let s = b.stats();
    assert_eq!((s.hedges, s.hedges_denied, s.successes), (0, 0, 1));

    // Committed, then failed in its trailers: a failure, and still no hedge after it.
    let (read, end) = backend::call_stream(channel, "stream 2 code 14 every 60", None).await;
    assert_eq!(
        (read, end.map_err(|s| s.code())),
        (2, Err(Code::Unavailable))
    );
    assert_eq!(server.hits(), 2, "not hedged");
    let s = b.stats();
    assert_eq!((s.hedges, s.failures), (0, 1));
}

#[tokio::test]
async fn a_client_stream_is_never_hedged() {
    let server = backend::start().await;
    let b = hedging("hedge_grpc::client_stream", 1);
    let channel = ServiceBuilder::new()
        .layer(HedgeLayer::grpc(b.clone()))
        .service(server.channel().await);
    // One message, and the request stays open for 100 ms: still sending when the hedge is
    // due, so it cannot be sent again (the server answers once the request ends).
    let (send, messages) = tokio::sync::mpsc::channel(1);
    send.send(b"ok".to_vec()).await.unwrap();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(send);
    });
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await.unwrap();
    let started = Instant::now();
    let reply = client
        .client_streaming(
            tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(messages)),
            PathAndQuery::from_static(backend::UNARY),
            backend::Raw,
        )
        .await
        .unwrap();
    assert_eq!(reply.into_inner(), b"fine");
    assert!(started.elapsed() >= Duration::from_millis(100));
    assert_eq!(server.hits(), 1, "not hedged");
    assert_eq!((b.stats().hedges, b.stats().hedges_denied), (0, 0));
}

#[tokio::test]
async fn a_failure_sends_the_next_hedge_at_once_and_a_pushback_stops_them() {
    // UNAVAILABLE, Trailers-Only: the hedge fails at once, and the second hedge follows it
    // without waiting out a delay; every attempt failed: the first one's answer.
    let server = backend::start().await;
    let b = hedging("hedge_grpc::failures", 2);
    let channel = ServiceBuilder::new()
        .layer(HedgeLayer::grpc(b.clone()))
        .service(first_slow(server.channel().await));
    let status = backend::call(channel, "code 14").await.unwrap_err();
    assert_eq!(status.code(), Code::Unavailable);
    assert_eq!(server.hits(), 3, "the first attempt and both hedges");
    let s = b.stats();
    assert_eq!((s.hedges, s.hedges_won, s.failures), (2, 0, 3), "{s:?}");

    // RESOURCE_EXHAUSTED with `grpc-retry-pushback-ms: 50`: the server asked for less load,
    // so the first hedge's answer stops the hedges (the second is not even denied).
    let server = backend::start().await;
    let b = hedging("hedge_grpc::pushback", 2);
    let channel = ServiceBuilder::new()
        .layer(HedgeLayer::grpc(b.clone()))
        .service(first_slow(server.channel().await));
    let status = backend::call(channel, "code 8 pushback 50")
        .await
        .unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted);
    assert_eq!(server.hits(), 2, "the first attempt and one hedge");
    let s = b.stats();
    assert_eq!((s.hedges, s.hedges_denied), (1, 0), "{s:?}");
}
