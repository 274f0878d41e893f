//! The cells of `docs/guarantees.md` no other test held: a capability crossed with an event
//! of a breaker's life, one module per capability, each test named for its cell. Paused
//! time where nothing real runs; a real loopback server where the capability is a client's.

use std::{
    panic::AssertUnwindSafe,
    sync::{
        atomic::{AtomicU32, Ordering::SeqCst},
        Arc,
    },
    time::Duration,
};

use breaker::{Breaker, CallError, Config, KeyedBreaker, State};

const MS: fn(u64) -> Duration = Duration::from_millis;

/// The keys of keyed breaker `family` in its map, read through the registry (asking the
/// keyed breaker would mark them used, or make them).
fn keys_of(family: &str) -> Vec<String> {
    let mut keys: Vec<String> = breaker::registry()
        .handles()
        .into_iter()
        .filter(|h| h.family() == Some(family))
        .filter_map(|h| {
            let key = h.name().strip_prefix(family)?.strip_prefix('[')?;
            Some(key.strip_suffix(']')?.to_string())
        })
        .collect();
    keys.sort();
    keys
}

/// A call that panics (through `call_sync`: the panic comes back here, caught). Whether it
/// ran (the breaker may refuse it).
fn panicking_call(b: &Breaker) -> bool {
    std::panic::catch_unwind(AssertUnwindSafe(|| {
        b.call_sync(|| -> Result<(), ()> { panic!("guarantees: a planned panic") })
    }))
    .is_err()
}

/// A call admitted, then dropped at its await (cancelled).
async fn cancelled_call(b: &Breaker) {
    let call = b.call(std::future::pending::<Result<(), ()>>());
    // A zero timeout polls the call once (admitted, pending), then drops it.
    assert!(tokio::time::timeout(Duration::ZERO, call).await.is_err());
}

/// Timeout × eviction.
mod timeout {
    use super::*;

    /// A key with a timed call in flight is not evicted at `max_keys` (a fresh key goes
    /// instead), and its call times out on that key, counted there.
    #[tokio::test(start_paused = true)]
    async fn a_key_with_a_timed_call_in_flight_is_not_evicted_and_times_out_on_it() {
        let family = "guarantees::timeout_eviction";
        let config = Config::default().timeout(MS(500)).max_keys(2);
        let keyed = KeyedBreaker::<String>::new(family, config);
        let busy = keyed.breaker("busy");
        let call = tokio::spawn(busy.call_owned(std::future::pending::<Result<(), ()>>()));
        tokio::task::yield_now().await;
        keyed.call_sync("fresh", || Ok::<_, ()>(())).unwrap();
        keyed.call_sync("new", || Ok::<_, ()>(())).unwrap();
        assert_eq!(keys_of(family), ["busy", "new"], "the fresh key went");
        tokio::time::advance(MS(500)).await;
        let r = call.await.unwrap();
        assert!(matches!(r, Err(CallError::Breaker(e)) if e.is_timeout()));
        let stats = keyed.breaker("busy").stats();
        assert_eq!((stats.timeouts, stats.failures), (1, 1));
    }
}

/// Bulkhead × eviction.
mod bulkhead {
    use super::*;

    /// A key whose seat is taken is not evicted; the seat stays taken (a second call is
    /// refused full) until the call ends.
    #[tokio::test(start_paused = true)]
    async fn a_key_holding_a_seat_is_not_evicted_and_keeps_it() {
        let family = "guarantees::bulkhead_eviction";
        let config = Config::default().max_concurrent(1).max_keys(2);
        let keyed = KeyedBreaker::<String>::new(family, config);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let seated = keyed.breaker("seated");
        let call = tokio::spawn(seated.call_owned(async move {
            rx.await.map_err(|_| ())?;
            Ok::<_, ()>(())
        }));
        tokio::task::yield_now().await;
        keyed.call_sync("fresh", || Ok::<_, ()>(())).unwrap();
        keyed.call_sync("new", || Ok::<_, ()>(())).unwrap();
        assert_eq!(keys_of(family), ["new", "seated"]);
        let r = keyed.call_sync("seated", || Ok::<_, ()>(()));
        assert!(matches!(r, Err(CallError::Breaker(e)) if e.is_full()));
        tx.send(()).unwrap();
        call.await.unwrap().unwrap();
        keyed.call_sync("seated", || Ok::<_, ()>(())).unwrap();
    }
}

/// Keyed × panic.
mod keyed {
    use super::*;

    /// A panicking call on a key is a failure of that key only, and opens it at its
    /// threshold as any failure would.
    #[tokio::test(start_paused = true)]
    async fn a_panicking_call_is_a_failure_of_its_key_only() {
        let keyed =
            KeyedBreaker::<String>::new("guarantees::keyed_panic", Config::default().threshold(2));
        keyed.call_sync("calm", || Ok::<_, ()>(())).unwrap();
        for _ in 0..2 {
            assert!(
                panicking_call(&keyed.breaker("sick")),
                "the panic reaches the caller"
            );
        }
        let sick = keyed.breaker("sick");
        assert_eq!((sick.stats().failures, sick.state()), (2, State::Open));
        let calm = keyed.breaker("calm");
        assert_eq!((calm.stats().failures, calm.state()), (0, State::Closed));
    }
}

/// Throttle × panic, cancellation, reconfigure.
mod throttle {
    use super::*;

    fn throttled(name: &str) -> Breaker {
        // No trip: the throttle alone decides.
        Breaker::new(name, Config::default().threshold(1_000).throttle(2.0))
    }

    /// Panics are failures, unaccepted requests: the throttle sheds after them (the first
    /// one always runs; then each is shed with a growing probability).
    #[tokio::test(start_paused = true)]
    async fn panics_are_unaccepted_requests_and_the_throttle_sheds_after_them() {
        let b = throttled("guarantees::throttle_panic");
        let ran = (0..20).filter(|_| panicking_call(&b)).count() as u64;
        let stats = b.stats();
        assert!(ran >= 1 && stats.failures == ran, "{stats:?}");
        assert_eq!(stats.throttled, 20 - ran, "{stats:?}");
        assert!(stats.throttled > 0, "{stats:?}");
    }

    /// A cancelled call is neither a request nor an accept: after twenty, nothing is shed.
    #[tokio::test(start_paused = true)]
    async fn cancelled_calls_are_not_requests_and_nothing_is_shed_after_them() {
        let b = throttled("guarantees::throttle_cancel");
        for _ in 0..20 {
            cancelled_call(&b).await;
        }
        assert_eq!(b.stats().cancelled, 20);
        for _ in 0..50 {
            b.call_sync(|| Ok::<_, ()>(())).unwrap();
        }
        assert_eq!(b.stats().throttled, 0);
    }

    /// A running breaker refuses a change of its throttle, and says which key.
    #[test]
    fn a_running_breaker_refuses_a_throttle_change_naming_it() {
        let b = throttled("guarantees::throttle_reconfigure");
        let e = b
            .reconfigure(Config::default().threshold(1_000).throttle(3.0))
            .expect_err("the overload keys are fixed for a breaker's life");
        assert!(e.to_string().contains("throttle"), "{e}");
        assert_eq!(b.config().values().throttle, Some(2.0));
    }
}

/// Retry × panic.
mod retry {
    use super::*;

    /// A panicking attempt unwinds out of the retry loop: one attempt, counted once as a
    /// failure, no retry paid.
    #[tokio::test(start_paused = true)]
    async fn a_panicking_attempt_unwinds_out_of_the_retry_loop() {
        let b = Breaker::new(
            "guarantees::retry_panic",
            Config::default().retry(3).backoff(MS(10)),
        );
        let attempts = Arc::new(AtomicU32::new(0));
        let counted = Arc::clone(&attempts);
        let retried = b.clone();
        let r = tokio::spawn(async move {
            let r: Result<(), CallError<()>> = retried
                .call_retried(|| {
                    counted.fetch_add(1, SeqCst);
                    async { panic!("guarantees: a planned panic") }
                })
                .await;
            r
        })
        .await;
        assert!(r.is_err_and(|e| e.is_panic()));
        assert_eq!(attempts.load(SeqCst), 1);
        let stats = b.stats();
        assert_eq!((stats.failures, stats.retries), (1, 0), "{stats:?}");
    }
}

/// Fallback × panic.
mod fallback {
    use breaker::{circuit_breaker, BreakerError};

    #[derive(Debug)]
    struct Down;

    impl From<BreakerError> for Down {
        fn from(_: BreakerError) -> Down {
            Down
        }
    }

    static FALLBACKS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

    async fn served(_: u32, _: breaker::CallError<Down>) -> Result<u32, Down> {
        FALLBACKS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(0)
    }

    #[circuit_breaker(threshold = 1, fallback = served)]
    async fn panicking(id: u32) -> Result<u32, Down> {
        if id > 0 {
            panic!("guarantees: a planned panic");
        }
        Ok(id)
    }

    /// A panic in the body is not an error: it unwinds past the fallback to the caller, and
    /// counts as the breaker's failure (which opens it at threshold 1; then the fallback
    /// serves the refusal).
    #[tokio::test(start_paused = true)]
    async fn a_panic_in_the_body_unwinds_past_the_fallback() {
        let r = tokio::spawn(panicking(1)).await;
        assert!(r.is_err_and(|e| e.is_panic()));
        assert_eq!(FALLBACKS.load(std::sync::atomic::Ordering::SeqCst), 0);
        assert_eq!(panicking(0).await.unwrap(), 0, "open: the fallback serves");
        assert_eq!(FALLBACKS.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}

/// Tower × panic.
#[cfg(feature = "tower")]
mod tower_layer {
    use super::*;
    use breaker::tower::CircuitBreakerLayer;
    use tower::{service_fn, Layer, ServiceExt};

    /// A panicking inner service under the layer: the panic reaches the caller, the breaker
    /// counts a failure and opens at its threshold.
    #[tokio::test(start_paused = true)]
    async fn a_panicking_inner_service_is_a_failure_that_unwinds_to_the_caller() {
        let b = Breaker::new("guarantees::tower_panic", Config::default().threshold(1));
        let inner = service_fn(|(): ()| async {
            if true {
                panic!("guarantees: a planned panic");
            }
            Ok::<(), std::convert::Infallible>(())
        });
        let svc = CircuitBreakerLayer::new(b.clone()).layer(inner);
        let r = tokio::spawn(svc.clone().oneshot(())).await;
        assert!(r.is_err_and(|e| e.is_panic()));
        assert_eq!((b.stats().failures, b.state()), (1, State::Open));
        let r = svc.oneshot(()).await;
        assert!(matches!(r, Err(CallError::Breaker(e)) if e.is_open()));
    }
}

#[cfg(feature = "reqwest")]
#[path = "support/http.rs"]
mod http_server;

/// reqwest × reset, reconfigure, cancellation, against a real loopback server.
#[cfg(feature = "reqwest")]
mod reqwest_client {
    use super::*;
    use breaker::reqwest::CircuitBreakerMiddleware;
    use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};

    use super::http_server::Server;

    fn client(breakers: &CircuitBreakerMiddleware) -> ClientWithMiddleware {
        ClientBuilder::new(reqwest::Client::new())
            .with(breakers.clone())
            .build()
    }

    /// A host's breaker opened by 500s, reset by its handle: the next request is sent.
    #[tokio::test]
    async fn a_reset_host_is_sent_the_next_request() {
        let server = Server::start().await;
        server.answer(500, None);
        let breakers = CircuitBreakerMiddleware::with_config(Config::default().threshold(2));
        let client = client(&breakers);
        for _ in 0..2 {
            let answer = client.get(server.url("/")).send().await.unwrap();
            assert_eq!(answer.status(), 500);
        }
        let host = breakers.breaker(&server.host_port());
        assert_eq!(host.state(), State::Open);
        assert!(client.get(server.url("/")).send().await.is_err());
        assert_eq!(server.hits(), 2, "refused without a request");
        host.reset();
        server.answer(200, None);
        let answer = client.get(server.url("/")).send().await.unwrap();
        assert_eq!((answer.status().as_u16(), server.hits()), (200, 3));
        assert_eq!(host.stats().successes, 1, "counted from the reset");
    }

    /// The middleware's keyed breaker reconfigured: every host follows, the ones made before
    /// as the ones made after.
    #[tokio::test]
    async fn a_reconfigured_middleware_judges_every_host_by_the_new_rules() {
        let server = Server::start().await;
        let breakers = CircuitBreakerMiddleware::with_config(Config::default().threshold(5));
        let client = client(&breakers);
        client.get(server.url("/")).send().await.unwrap();
        breakers
            .keyed_breaker()
            .reconfigure(Config::default().threshold(1))
            .unwrap();
        server.answer(503, None);
        client.get(server.url("/")).send().await.unwrap();
        let host = breakers.breaker(&server.host_port());
        assert_eq!(host.state(), State::Open, "one failure opens it now");
        assert_eq!(host.config().values().threshold, Some(1));
    }

    /// A request future dropped after its admission is a cancelled call of its host, which
    /// holds nothing after it: the next request is sent.
    #[tokio::test]
    async fn a_dropped_request_is_cancelled_and_holds_nothing() {
        let server = Server::start().await;
        let config = Config::default().max_concurrent(1).probes(1);
        let breakers = CircuitBreakerMiddleware::with_config(config);
        let client = client(&breakers);
        let send = client.get(server.url("/")).send();
        // Polled once (admitted, waiting on the connection), then dropped.
        assert!(tokio::time::timeout(Duration::ZERO, send).await.is_err());
        let host = breakers.breaker(&server.host_port());
        assert_eq!((host.stats().calls, host.stats().cancelled), (1, 1));
        let answer = client.get(server.url("/")).send().await.unwrap();
        assert_eq!(answer.status(), 200, "the seat was given back");
        assert_eq!(host.stats().successes, 1);
    }

    /// A user's `classify` that panics on an answer: the panic reaches the caller, the
    /// request (sent, answered) is a failure of its host, and its seat comes back.
    #[tokio::test]
    async fn a_panicking_classify_is_a_failure_that_reaches_the_caller() {
        let server = Server::start().await;
        let config = Config::default().max_concurrent(1).threshold(2);
        let breakers = CircuitBreakerMiddleware::with_config(config).classify(
            |r: &reqwest_middleware::Result<reqwest::Response>| match r {
                Ok(answer) if answer.status() == 418 => panic!("guarantees: a planned panic"),
                _ => breaker::Verdict::Success,
            },
        );
        let client = ClientBuilder::new(reqwest::Client::new())
            .with(breakers.clone())
            .build();
        server.answer(418, None);
        let send = client.get(server.url("/")).send();
        let unwound = tokio::spawn(async move { send.await.map(|_| ()) }).await;
        assert!(
            unwound.unwrap_err().is_panic(),
            "the panic reaches the caller"
        );
        assert_eq!(server.hits(), 1, "judged after its answer");
        let host = breakers.breaker(&server.host_port());
        let stats = host.stats();
        assert_eq!((stats.calls, stats.failures, stats.successes), (1, 1, 0));
        server.answer(200, None);
        let answer = client.get(server.url("/")).send().await.unwrap();
        assert_eq!(answer.status(), 200, "the seat was given back");
        assert_eq!((host.stats().successes, server.hits()), (1, 2));
    }

    /// A user's key function that panics: the panic reaches the caller before any breaker
    /// is picked, so nothing is sent or counted, and the other requests go on.
    #[tokio::test]
    async fn a_panicking_key_function_sends_and_counts_nothing() {
        let server = Server::start().await;
        let family = "guarantees::reqwest_key_panic";
        let keyed = KeyedBreaker::<String>::new(family, Config::default().max_concurrent(1));
        let breakers = CircuitBreakerMiddleware::keyed(keyed, |req: &reqwest::Request| {
            let path = req.url().path().to_string();
            assert_ne!(path, "/panic", "guarantees: a planned panic");
            path
        });
        let client = ClientBuilder::new(reqwest::Client::new())
            .with(breakers.clone())
            .build();
        let send = client.get(server.url("/panic")).send();
        let unwound = tokio::spawn(async move { send.await.map(|_| ()) }).await;
        assert!(
            unwound.unwrap_err().is_panic(),
            "the panic reaches the caller"
        );
        assert_eq!(server.hits(), 0, "nothing was sent");
        assert!(keys_of(family).is_empty(), "no key was made");
        let answer = client.get(server.url("/items")).send().await.unwrap();
        assert_eq!(answer.status(), 200);
        assert_eq!(keys_of(family), ["/items"]);
        let stats = breakers.keyed_breaker().breaker("/items").stats();
        assert_eq!((stats.calls, stats.successes), (1, 1));
    }
}

#[cfg(feature = "grpc")]
#[path = "support/grpc.rs"]
mod backend;

/// gRPC × reset and reconfigure, and reconfigure × stream: a stream admitted before the
/// event is judged at its end by the rules then in force, and counted in the stats then
/// kept, through a real tonic server.
#[cfg(feature = "grpc")]
mod grpc {
    use super::*;
    use breaker::tower::CircuitBreakerLayer;
    use http::uri::PathAndQuery;
    use tower::ServiceBuilder;

    /// Opens a server stream of `script` on `channel` and reads its first message.
    async fn stream_begun<S>(channel: S, script: &str) -> tonic::Streaming<Vec<u8>>
    where
        S: tonic::client::GrpcService<tonic::body::Body>,
        S::ResponseBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
        <S::ResponseBody as http_body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let mut client = tonic::client::Grpc::new(channel);
        assert!(client.ready().await.is_ok(), "the channel is ready");
        let path = PathAndQuery::from_static(backend::STREAM);
        let request = tonic::Request::new(script.as_bytes().to_vec());
        let response = client.server_streaming(request, path, backend::Raw).await;
        let mut stream = response.unwrap().into_inner();
        assert!(stream.message().await.unwrap().is_some());
        stream
    }

    /// Reads the rest of a stream: the status it ended with.
    async fn ended(mut stream: tonic::Streaming<Vec<u8>>) -> tonic::Code {
        loop {
            match stream.message().await {
                Ok(Some(_)) => {}
                Ok(None) => return tonic::Code::Ok,
                Err(status) => return status.code(),
            }
        }
    }

    /// A reset while a stream runs: the stream's failing end counts in the new stats (as a
    /// call in flight across a reset does), and the breaker admits after it.
    #[tokio::test]
    async fn a_stream_across_a_reset_counts_in_the_new_stats() {
        let server = backend::start().await;
        let breaker = Breaker::new("guarantees::grpc_reset", Config::default().threshold(3));
        let channel = ServiceBuilder::new()
            .layer(CircuitBreakerLayer::grpc(breaker.clone()))
            .service(server.channel().await);
        let _ = backend::call(channel.clone(), "code 14").await;
        assert_eq!(breaker.stats().failures, 1);
        let stream = stream_begun(channel.clone(), "stream 3 code 14").await;
        breaker.reset();
        assert_eq!(breaker.stats().failures, 0);
        assert_eq!(ended(stream).await, tonic::Code::Unavailable);
        let stats = breaker.stats();
        assert_eq!((stats.failures, stats.calls), (1, 0), "{stats:?}");
        assert_eq!(breaker.state(), State::Closed);
        assert_eq!(backend::call(channel, "ok").await.unwrap(), "fine");
    }

    fn layered(
        breaker: &Breaker,
        channel: tonic::transport::Channel,
    ) -> impl tonic::client::GrpcService<
        tonic::body::Body,
        ResponseBody: http_body::Body<
            Data = bytes::Bytes,
            Error: Into<Box<dyn std::error::Error + Send + Sync>>,
        > + Send
                          + 'static,
    > + Clone
           + use<> {
        ServiceBuilder::new()
            .layer(CircuitBreakerLayer::grpc(breaker.clone()))
            .service(channel)
    }

    /// Bulkhead and adaptive limit × stream: a stream holds its seat until its end (a unary
    /// call meanwhile is refused full, without a request), then gives it back.
    #[tokio::test]
    async fn a_stream_holds_its_seat_until_its_end() {
        for (name, config) in [
            ("bulkhead", Config::default().max_concurrent(1)),
            ("adaptive", Config::default().adaptive_concurrency(1)),
        ] {
            let server = backend::start().await;
            let breaker = Breaker::new(format!("guarantees::grpc_seat_{name}"), config);
            let channel = layered(&breaker, server.channel().await);
            let stream = stream_begun(channel.clone(), "stream 3 code 0").await;
            assert!(
                backend::call(channel.clone(), "ok").await.is_err(),
                "{name}"
            );
            assert_eq!((breaker.stats().rejected, server.hits()), (1, 1), "{name}");
            assert_eq!(ended(stream).await, tonic::Code::Ok);
            assert_eq!(
                backend::call(channel, "ok").await.unwrap(),
                "fine",
                "{name}"
            );
        }
    }

    /// Throttle × stream: a stream's failing trailers are an unaccepted request; after
    /// enough of them the throttle sheds (without a request).
    #[tokio::test]
    async fn failing_streams_are_unaccepted_and_the_throttle_sheds() {
        let server = backend::start().await;
        let config = Config::default().threshold(1_000).throttle(2.0);
        let breaker = Breaker::new("guarantees::grpc_throttle", config);
        let channel = layered(&breaker, server.channel().await);
        for _ in 0..20 {
            let _ = backend::call_stream(channel.clone(), "stream 1 code 14", None).await;
        }
        let stats = breaker.stats();
        assert!(stats.throttled > 0, "{stats:?}");
        assert_eq!(stats.calls - stats.throttled, server.hits() as u64);
    }

    /// Dry run × stream: a stream a forced-open dry run lets through is a shadow, judged for
    /// nothing at its end.
    #[tokio::test]
    async fn a_shadowed_stream_is_judged_for_nothing() {
        let server = backend::start().await;
        let breaker = Breaker::new("guarantees::grpc_dry_run", Config::default().dry_run(true));
        breaker.handle().force_open();
        let channel = layered(&breaker, server.channel().await);
        let stream = stream_begun(channel, "stream 3 code 14").await;
        assert_eq!(ended(stream).await, tonic::Code::Unavailable, "it ran");
        let stats = breaker.stats();
        assert_eq!((stats.shadow_rejected, stats.failures), (1, 0), "{stats:?}");
    }

    /// A reconfiguration while a stream runs: the stream's failing end is judged by the
    /// threshold in force at its end (one failure opens now).
    #[tokio::test]
    async fn a_stream_across_a_reconfiguration_is_judged_by_the_new_rules() {
        let server = backend::start().await;
        let breaker = Breaker::new("guarantees::grpc_reconfigure", Config::default());
        let channel = ServiceBuilder::new()
            .layer(CircuitBreakerLayer::grpc(breaker.clone()))
            .service(server.channel().await);
        let stream = stream_begun(channel.clone(), "stream 3 code 14").await;
        breaker.reconfigure(Config::default().threshold(1)).unwrap();
        assert_eq!(ended(stream).await, tonic::Code::Unavailable);
        assert_eq!(breaker.state(), State::Open);
        let refused = backend::call(channel, "ok").await.unwrap_err();
        assert_eq!(refused.code(), tonic::Code::Unavailable);
        assert_eq!(server.hits(), 1, "refused without a request");
    }
}

/// Outliers × reset, force/disable, cancellation.
mod outliers {
    use super::*;
    use breaker::Outliers;

    /// Five hosts judged every second (from now: its detector task is let run); one of
    /// five may go.
    async fn pool(name: &str) -> KeyedBreaker<String> {
        let outliers = Outliers::default()
            .interval(Duration::from_secs(1))
            .request_volume(10)
            .minimum_hosts(3)
            .max_ejection_percent(50);
        let config = Config::default().threshold(1_000).outliers(outliers);
        let pool = KeyedBreaker::new(name, config);
        tokio::task::yield_now().await;
        pool
    }

    /// One interval: `h0` gets `first` (its calls), the four others ten successes each.
    async fn interval(pool: &KeyedBreaker<String>, first: impl Fn(&Breaker)) {
        first(&pool.breaker("h0"));
        for h in 1..5 {
            for _ in 0..10 {
                pool.call_sync(&format!("h{h}"), || Ok::<_, ()>(()))
                    .unwrap();
            }
        }
        tokio::time::advance(Duration::from_secs(1)).await;
        for _ in 0..8 {
            tokio::task::yield_now().await;
        }
    }

    fn half_failing(b: &Breaker) {
        for i in 0..10 {
            let _ = b.call_sync(|| if i % 2 == 0 { Ok(()) } else { Err(()) });
        }
    }

    /// An ejected host reset by hand is closed and admits at once; healthy in the next
    /// interval, it is not ejected again.
    #[tokio::test(start_paused = true)]
    async fn a_reset_ejected_host_admits_at_once() {
        let pool = pool("guarantees::outliers_reset").await;
        interval(&pool, half_failing).await;
        let h0 = pool.breaker("h0");
        assert_eq!(h0.state(), State::Open, "ejected");
        h0.reset();
        assert_eq!(h0.state(), State::Closed);
        interval(&pool, |b| {
            for _ in 0..10 {
                b.call_sync(|| Ok::<_, ()>(())).unwrap();
            }
        })
        .await;
        assert_eq!(h0.state(), State::Closed);
        assert_eq!(h0.stats().successes, 10);
    }

    /// A host under the operator's hand is never ejected: disabled (it admits, but is not
    /// closed) or forced open (already out).
    #[tokio::test(start_paused = true)]
    async fn a_host_under_manual_control_is_not_ejected() {
        let pool = pool("guarantees::outliers_manual").await;
        pool.breaker("h0").handle().disable();
        interval(&pool, half_failing).await;
        assert_eq!(pool.breaker("h0").state(), State::Disabled);
        pool.breaker("h0").handle().force_open();
        interval(&pool, half_failing).await;
        assert_eq!(pool.breaker("h0").state(), State::ForcedOpen);
        for h in 1..5 {
            assert_eq!(pool.breaker(&format!("h{h}")).state(), State::Closed);
        }
    }

    /// Cancelled calls are no outcomes: a host whose calls are all cancelled is not judged.
    #[tokio::test(start_paused = true)]
    async fn cancelled_calls_say_nothing_of_a_host() {
        let pool = pool("guarantees::outliers_cancel").await;
        for _ in 0..2 {
            let h0 = pool.breaker("h0");
            for _ in 0..10 {
                cancelled_call(&h0).await;
            }
            interval(&pool, |_| {}).await;
        }
        let h0 = pool.breaker("h0");
        assert_eq!((h0.stats().cancelled, h0.state()), (20, State::Closed));
    }
}
