//! `breaker::tower::CircuitBreakerLayer`: verdicts through the layer (paused time), where
//! rejections surface, slots of dropped futures, spawned futures, keyed breakers, a hyper
//! client against a real loopback axum server, and a service that is not HTTP.
#![cfg(feature = "tower")]

#[path = "support/http.rs"]
mod http_server;

use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    task::{Context, Poll, Waker},
    time::Duration,
};

use breaker::{
    tower::{errors_only, CircuitBreakerLayer},
    Breaker, BreakerError, CallError, Config, KeyedBreaker, State, Verdict,
};
use tower::{service_fn, Layer, Service, ServiceBuilder, ServiceExt};

/// What the scripted service answers: a status, maybe a `Retry-After`; `None` hangs forever.
type Ask = Option<(u16, Option<&'static str>)>;

type Answer = http::Response<&'static str>;

/// A service (no I/O) that answers each request as the request asks, counting calls.
#[derive(Clone)]
struct Scripted {
    calls: Arc<AtomicUsize>,
}

impl Scripted {
    fn new() -> Scripted {
        Scripted {
            calls: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Service<Ask> for Scripted {
    type Response = Answer;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Answer, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, ask: Ask) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            let Some((status, retry_after)) = ask else {
                return std::future::pending().await;
            };
            let mut answer = http::Response::builder().status(status);
            if let Some(value) = retry_after {
                answer = answer.header(http::header::RETRY_AFTER, value);
            }
            Ok(answer.body("answer").unwrap())
        })
    }
}

fn ok() -> Ask {
    Some((200, None))
}

fn status(code: u16) -> Ask {
    Some((code, None))
}

fn with_retry_after(code: u16, secs: &'static str) -> Ask {
    Some((code, Some(secs)))
}

const HANG: Ask = None;

fn layered(
    breaker: &Breaker,
) -> (
    impl Service<Ask, Response = Answer, Error = CallError<Infallible>, Future: Send + 'static>
        + Clone
        + use<>,
    Scripted,
) {
    let inner = Scripted::new();
    let svc = CircuitBreakerLayer::new(breaker.clone()).layer(inner.clone());
    (svc, inner)
}

async fn send<S: Service<R> + Clone, R>(svc: &S, req: R) -> Result<S::Response, S::Error> {
    svc.clone().oneshot(req).await
}

fn refused<T: std::fmt::Debug, E: std::fmt::Debug>(r: Result<T, CallError<E>>) -> BreakerError {
    match r {
        Err(CallError::Breaker(e)) => e,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Polls `fut` once by hand.
fn poll_once<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    Pin::new(fut).poll(&mut Context::from_waker(Waker::noop()))
}

// ---------------------------------------------------------------- verdicts, paused time

#[tokio::test(start_paused = true)]
async fn success_is_counted_as_one() {
    let b = Breaker::new("tower::success", Config::default().threshold(1));
    let (svc, inner) = layered(&b);
    let answer = send(&svc, ok()).await.unwrap();
    assert_eq!(answer.status(), 200);
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.stats().successes, 1);
    assert_eq!(inner.calls(), 1);
}

#[tokio::test(start_paused = true)]
async fn an_ok_503_is_a_failure_that_trips_and_still_reaches_the_caller() {
    let b = Breaker::new("tower::ok_503", Config::default().threshold(2));
    let (svc, inner) = layered(&b);
    for _ in 0..2 {
        let answer = send(&svc, status(503))
            .await
            .expect("the 503 reaches the caller");
        assert_eq!(answer.status(), 503);
        assert_eq!(answer.body(), &"answer");
    }
    assert_eq!(b.state(), State::Open);
    assert_eq!(b.stats().failures, 2);
    assert!(refused(send(&svc, ok()).await).is_open());
    assert_eq!(
        inner.calls(),
        2,
        "the open breaker did not call the service"
    );
}

#[tokio::test(start_paused = true)]
async fn other_5xx_and_408_are_failures() {
    for code in [500, 502, 504, 408] {
        let b = Breaker::new("tower::5xx", Config::default().threshold(1));
        let (svc, _) = layered(&b);
        assert_eq!(send(&svc, status(code)).await.unwrap().status(), code);
        assert_eq!(b.state(), State::Open, "{code}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_4xx_is_neutral_and_a_neutral_probe_gives_its_slot_back() {
    let b = Breaker::new(
        "tower::neutral",
        Config::default()
            .threshold(1)
            .cool_off(Duration::from_secs(1)),
    );
    let (svc, inner) = layered(&b);
    for _ in 0..3 {
        assert_eq!(send(&svc, status(404)).await.unwrap().status(), 404);
    }
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.stats().neutral, 3);
    assert_eq!(b.stats().failures, 0);

    send(&svc, status(500)).await.unwrap();
    assert_eq!(b.state(), State::Open);
    tokio::time::advance(Duration::from_secs(1)).await;
    // A probe judged neutral closes nothing and opens nothing, and frees its slot: the next
    // call is admitted as a probe and closes the breaker.
    assert_eq!(send(&svc, status(404)).await.unwrap().status(), 404);
    assert_eq!(b.state(), State::HalfOpen);
    send(&svc, ok()).await.unwrap();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(inner.calls(), 6);
}

#[tokio::test(start_paused = true)]
async fn a_503_with_retry_after_opens_for_exactly_that_long() {
    let b = Breaker::new(
        "tower::retry_after",
        Config::default()
            .threshold(5)
            .cool_off(Duration::from_secs(5)),
    );
    let (svc, inner) = layered(&b);
    let answer = send(&svc, with_retry_after(503, "30")).await.unwrap();
    assert_eq!(answer.status(), 503);
    assert_eq!(
        b.state(),
        State::Open,
        "one OpenFor opens, whatever the threshold"
    );
    assert_eq!(b.retry_in(), Some(Duration::from_secs(30)));

    tokio::time::advance(Duration::from_secs(29)).await;
    let e = refused(send(&svc, ok()).await);
    assert_eq!(e.retry_in(), Some(Duration::from_secs(1)));
    tokio::time::advance(Duration::from_secs(1)).await;
    send(&svc, ok()).await.unwrap();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(inner.calls(), 2);
}

/// The default 10 s cool-off and a server that says `Retry-After: 2`: it is called again
/// after 2 s, not after 10.
#[tokio::test(start_paused = true)]
async fn a_retry_after_shorter_than_the_cool_off_is_honoured() {
    let b = Breaker::new("tower::short_retry_after", Config::default());
    let (svc, inner) = layered(&b);
    assert_eq!(
        send(&svc, with_retry_after(503, "2"))
            .await
            .unwrap()
            .status(),
        503
    );
    assert_eq!(b.retry_in(), Some(Duration::from_secs(2)));
    tokio::time::advance(Duration::from_millis(1999)).await;
    let e = refused(send(&svc, ok()).await);
    assert_eq!(e.retry_in(), Some(Duration::from_millis(1)));
    assert_eq!(inner.calls(), 1, "not called before the 2 s");
    tokio::time::advance(Duration::from_millis(1)).await;
    assert_eq!(send(&svc, ok()).await.unwrap().status(), 200);
    assert_eq!(inner.calls(), 2, "called again at 2 s");
    assert_eq!(b.state(), State::Closed);
}

#[tokio::test(start_paused = true)]
async fn a_429_opens_for_its_retry_after_and_without_one_is_a_failure() {
    let b = Breaker::new(
        "tower::429",
        Config::default().cool_off(Duration::from_secs(10)),
    );
    let (svc, _) = layered(&b);
    send(&svc, with_retry_after(429, "20")).await.unwrap();
    assert_eq!(b.retry_in(), Some(Duration::from_secs(20)));

    let b = Breaker::new(
        "tower::429_bare",
        Config::default().cool_off(Duration::from_secs(10)),
    );
    let (svc, _) = layered(&b);
    assert_eq!(send(&svc, status(429)).await.unwrap().status(), 429);
    assert_eq!(
        b.state(),
        State::Closed,
        "a bare 429 is a quota, not an outage"
    );
    assert_eq!(b.stats().failures, 1);
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_capped_by_max_cool_off_or_five_minutes_never_raised() {
    let clamp = |name, config: Config, secs: &'static str| async move {
        let b = Breaker::new(name, config);
        let (svc, _) = layered(&b);
        send(&svc, with_retry_after(503, secs)).await.unwrap();
        assert_eq!(b.state(), State::Open);
        b.retry_in()
    };
    let five = Config::default().cool_off(Duration::from_secs(5));
    assert_eq!(
        clamp("tower::clamp_low", five.clone(), "1").await,
        Some(Duration::from_secs(1)),
        "shorter than the cool-off: exactly what the server asked"
    );
    assert_eq!(
        clamp("tower::clamp_unset", five.clone(), "7200").await,
        Some(Duration::from_secs(300))
    );
    assert_eq!(
        clamp(
            "tower::clamp_max",
            five.max_cool_off(Duration::from_secs(600)),
            "7200"
        )
        .await,
        Some(Duration::from_secs(600))
    );
}

// ---------------------------------------------------------------- tower semantics

#[tokio::test(start_paused = true)]
async fn rejection_comes_from_call_and_poll_ready_stays_ready() {
    let b = Breaker::new("tower::poll_ready", Config::default());
    b.handle().force_open();
    let (mut svc, inner) = layered(&b);
    let ready = std::future::poll_fn(|cx| svc.poll_ready(cx));
    assert!(matches!(
        poll_once(&mut Box::pin(ready)),
        Poll::Ready(Ok(()))
    ));
    let e = refused(svc.call(ok()).await);
    assert!(e.is_open());
    assert_eq!(e.name(), "tower::poll_ready");
    assert_eq!(inner.calls(), 0, "the dependency is not touched while open");
    assert_eq!(b.stats().rejected, 1);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_probe_gives_back_its_slot() {
    let b = Breaker::new(
        "tower::dropped_probe",
        Config::default()
            .threshold(1)
            .cool_off(Duration::from_secs(1)),
    );
    let (mut svc, _) = layered(&b);
    send(&svc, status(500)).await.unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;

    let mut probe = Box::pin(svc.ready().await.unwrap().call(HANG));
    assert!(
        poll_once(&mut probe).is_pending(),
        "admitted as the probe, and hanging"
    );
    assert_eq!(b.state(), State::HalfOpen);
    assert!(
        refused(send(&svc, ok()).await).is_open(),
        "the only slot is taken"
    );

    drop(probe);
    send(&svc, ok()).await.expect("the slot came back");
    assert_eq!(b.state(), State::Closed);
    assert_eq!(b.stats().cancelled, 1);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_call_gives_back_its_bulkhead_slot() {
    let b = Breaker::new("tower::bulkhead", Config::default().max_concurrent(1));
    let (mut svc, _) = layered(&b);
    let mut hanging = Box::pin(svc.ready().await.unwrap().call(HANG));
    assert!(poll_once(&mut hanging).is_pending());
    assert!(refused(send(&svc, ok()).await).is_full());
    drop(hanging);
    send(&svc, ok()).await.expect("the bulkhead slot came back");
}

#[tokio::test(start_paused = true)]
async fn a_spawned_response_future_works() {
    let b = Breaker::new("tower::spawned", Config::default().threshold(1));
    let (mut svc, _) = layered(&b);
    let fut = svc.ready().await.unwrap().call(status(503));
    let answer = tokio::spawn(fut).await.unwrap().unwrap();
    assert_eq!(answer.status(), 503);
    assert_eq!(b.state(), State::Open);
    let fut = svc.ready().await.unwrap().call(ok());
    assert!(refused(tokio::spawn(fut).await.unwrap()).is_open());
}

#[tokio::test(start_paused = true)]
async fn clones_of_the_layer_and_service_share_one_breaker() {
    let b = Breaker::new("tower::clones", Config::default().threshold(1));
    let layer = CircuitBreakerLayer::new(b.clone());
    let one = layer.clone().layer(Scripted::new());
    let two = layer.layer(Scripted::new());
    send(&one.clone(), status(500)).await.unwrap();
    assert!(refused(send(&two, ok()).await).is_open());
    assert!(refused(send(&one, ok()).await).is_open());
}

#[tokio::test(start_paused = true)]
async fn keyed_one_breaker_per_key() {
    let hosts = KeyedBreaker::<String>::new("tower::keyed", Config::default().threshold(1));
    let svc = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::keyed(
            hosts.clone(),
            |req: &(&'static str, Ask)| req.0.to_owned(),
        ))
        .service(service_fn(|(_, ask): (&'static str, Ask)| {
            Scripted::new().oneshot(ask)
        }));
    assert_eq!(
        send(&svc, ("sick", status(502))).await.unwrap().status(),
        502
    );
    assert!(refused(send(&svc, ("sick", ok())).await).is_open());
    assert_eq!(send(&svc, ("well", ok())).await.unwrap().status(), 200);
    assert_eq!(hosts.len(), 2);
    assert_eq!(hosts.breaker("sick").state(), State::Open);
    assert_eq!(hosts.breaker("well").state(), State::Closed);
    let e = refused(send(&svc, ("sick", ok())).await);
    assert_eq!(e.name(), "tower::keyed[sick]");
}

#[tokio::test(start_paused = true)]
async fn a_classifier_replaces_the_preset() {
    // Judge only by the status class: a 429 is a plain failure here, never an OpenFor.
    let b = Breaker::new("tower::classify", Config::default().threshold(2));
    let svc = CircuitBreakerLayer::new(b.clone())
        .classify(|r: &Result<Answer, Infallible>| match r {
            Ok(a) if a.status().is_server_error() || a.status() == 429 => Verdict::Failure,
            _ => Verdict::Success,
        })
        .layer(Scripted::new());
    send(&svc, with_retry_after(429, "600")).await.unwrap();
    assert_eq!(b.state(), State::Closed);
    send(&svc, status(429)).await.unwrap();
    assert_eq!(b.state(), State::Open);
    assert_eq!(
        b.retry_in(),
        Some(Duration::from_secs(10)),
        "the cool-off, not 600 s"
    );
}

// ---------------------------------------------------------------- not HTTP

#[derive(Debug, Clone, PartialEq)]
struct Status(&'static str);

/// A tonic-style service that is not HTTP: requests and replies are plain types, errors a
/// status of its own.
fn grpc_ish() -> impl Service<&'static str, Response = String, Error = Status, Future: Send> + Clone
{
    service_fn(|method: &'static str| async move {
        match method {
            "unavailable" => Err(Status("unavailable")),
            "degraded" => Ok(String::from("degraded")),
            m => Ok(format!("reply to {m}")),
        }
    })
}

#[tokio::test(start_paused = true)]
async fn a_service_that_is_not_http_ok_is_success_err_is_failure() {
    let b = Breaker::new("tower::grpc", Config::default().threshold(2));
    let svc = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::new(b.clone()))
        .service(grpc_ish());
    assert_eq!(svc.clone().oneshot("get").await.unwrap(), "reply to get");
    for _ in 0..2 {
        let r = svc.clone().oneshot("unavailable").await;
        assert_eq!(r, Err(CallError::Inner(Status("unavailable"))));
    }
    assert_eq!(b.state(), State::Open);
    assert!(refused(svc.clone().oneshot("get").await).is_open());

    // The same service judged by hand, and with `errors_only` spelled out.
    let b = Breaker::new("tower::grpc_judged", Config::default().threshold(1));
    let judged = CircuitBreakerLayer::new(b.clone())
        .classify(|r: &Result<String, Status>| match r {
            Ok(reply) if reply == "degraded" => Verdict::Failure,
            Ok(_) => Verdict::Success,
            Err(_) => Verdict::Neutral,
        })
        .layer(grpc_ish());
    assert!(judged.clone().oneshot("unavailable").await.is_err());
    assert_eq!(b.state(), State::Closed, "judged neutral");
    assert_eq!(
        judged.clone().oneshot("degraded").await.unwrap(),
        "degraded"
    );
    assert_eq!(b.state(), State::Open);

    let b = Breaker::new("tower::grpc_errors_only", Config::default().threshold(1));
    let plain = CircuitBreakerLayer::new(b.clone())
        .classify(errors_only)
        .layer(grpc_ish());
    plain.oneshot("degraded").await.unwrap();
    assert_eq!(b.state(), State::Closed);
}

// ---------------------------------------------------------------- hyper against axum

#[tokio::test]
async fn service_builder_around_a_hyper_client_against_a_loopback_server() {
    use http_body_util::Empty;
    use hyper_util::{client::legacy::Client, rt::TokioExecutor};

    let server = http_server::Server::start().await;
    let b = Breaker::new(
        "tower::hyper",
        Config::default()
            .threshold(2)
            .cool_off(Duration::from_secs(1)),
    );
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<axum::body::Bytes>>();
    let svc = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::new(b.clone()))
        .service(client);
    let get = || {
        http::Request::get(server.url("/items"))
            .body(Empty::new())
            .unwrap()
    };

    assert_eq!(svc.clone().oneshot(get()).await.unwrap().status(), 200);
    server.answer(503, None);
    for _ in 0..2 {
        let answer = svc
            .clone()
            .oneshot(get())
            .await
            .expect("a 503 is an answer");
        assert_eq!(answer.status(), 503);
    }
    assert_eq!(b.state(), State::Open);
    assert!(refused(svc.clone().oneshot(get()).await).is_open());
    assert_eq!(server.hits(), 3, "the open breaker sent nothing");

    // A 503 that says how long: the breaker stays open that long, not the 1 s cool-off.
    b.handle().reset();
    server.answer(503, Some("120"));
    svc.clone().oneshot(get()).await.unwrap();
    let retry_in = b.retry_in().unwrap();
    assert!(retry_in <= Duration::from_secs(120) && retry_in > Duration::from_secs(60));

    // A connection refused is an `Err` of the client: a failure.
    let dead = Breaker::new("tower::hyper_dead", Config::default().threshold(1));
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let svc = CircuitBreakerLayer::new(dead.clone())
        .layer(Client::builder(TokioExecutor::new()).build_http::<Empty<axum::body::Bytes>>());
    let req = http::Request::get(format!("http://127.0.0.1:{port}/"))
        .body(Empty::new())
        .unwrap();
    assert!(matches!(svc.oneshot(req).await, Err(CallError::Inner(_))));
    assert_eq!(dead.state(), State::Open);
}

#[tokio::test]
async fn keyed_by_authority_around_a_hyper_client_one_breaker_per_host() {
    use http::uri::Authority;
    use http_body_util::Empty;
    use hyper_util::{client::legacy::Client, rt::TokioExecutor};

    let (sick, well) = (
        http_server::Server::start().await,
        http_server::Server::start().await,
    );
    sick.answer(502, None);
    let hosts = KeyedBreaker::<Authority>::new("tower::authority", Config::default().threshold(1));
    let svc = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::keyed(
            hosts.clone(),
            |req: &http::Request<Empty<axum::body::Bytes>>| {
                req.uri()
                    .authority()
                    .cloned()
                    .unwrap_or_else(|| Authority::from_static("unknown"))
            },
        ))
        .service(Client::builder(TokioExecutor::new()).build_http());
    let get = |server: &http_server::Server| {
        http::Request::get(server.url("/"))
            .body(Empty::new())
            .unwrap()
    };

    assert_eq!(svc.clone().oneshot(get(&sick)).await.unwrap().status(), 502);
    assert!(refused(svc.clone().oneshot(get(&sick)).await).is_open());
    for _ in 0..3 {
        assert_eq!(svc.clone().oneshot(get(&well)).await.unwrap().status(), 200);
    }
    assert_eq!((sick.hits(), well.hits()), (1, 3));
    assert_eq!(hosts.len(), 2);
    let sick_key: Authority = sick.host_port().parse().unwrap();
    assert_eq!(hosts.breaker(&sick_key).state(), State::Open);
}

// ------------------------------------------------ a streamed body: the caller's to time

/// A loopback HTTP/1.1 server written on the socket: to every request, the headers at once,
/// then a chunked body of `chunks` chunks `every` apart (the first at once). Returns its
/// address.
async fn dribbling_server(chunks: usize, every: Duration) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.ends_with(b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let head = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                for i in 0..chunks {
                    if i > 0 {
                        tokio::time::sleep(every).await;
                    }
                    if socket.write_all(b"5\r\nchunk\r\n").await.is_err() {
                        return; // the client dropped the body
                    }
                }
                let _ = socket.write_all(b"0\r\n\r\n").await;
            });
        }
    });
    addr
}

/// The plain layer's call is its response future, which ends at the headers: a body read for
/// 300 ms under `slow_call = 200ms` and `timeout = 150ms` is a success (not slow, not cut),
/// and one dropped mid-way changes nothing (no cancellation, no abandoned call). Real time
/// (a real socket); the headers come in a few milliseconds, far under both limits.
#[tokio::test]
async fn a_streamed_body_is_the_callers_to_time() {
    use http_body_util::{BodyExt, Empty};
    use hyper_util::{client::legacy::Client, rt::TokioExecutor};

    let addr = dribbling_server(4, Duration::from_millis(100)).await;
    let b = Breaker::new(
        "tower::streamed_body",
        Config::default()
            .threshold(1)
            .slow_call(Duration::from_millis(200))
            .timeout(Duration::from_millis(150)),
    );
    let svc = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::new(b.clone()))
        .service(Client::builder(TokioExecutor::new()).build_http::<Empty<axum::body::Bytes>>());
    let get = || {
        http::Request::get(format!("http://{addr}/stream"))
            .body(Empty::new())
            .unwrap()
    };

    // Read to its end.
    let started = std::time::Instant::now();
    let answer = svc.clone().oneshot(get()).await.unwrap();
    let body = answer.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"chunkchunkchunkchunk");
    assert!(started.elapsed() >= Duration::from_millis(300));

    // Read for 200 ms, then dropped.
    let started = std::time::Instant::now();
    let mut body = svc.clone().oneshot(get()).await.unwrap().into_body();
    for _ in 0..3 {
        body.frame().await.unwrap().unwrap();
    }
    assert!(started.elapsed() >= Duration::from_millis(200));
    drop(body);

    let stats = b.stats();
    assert_eq!(
        (
            stats.successes,
            stats.slow_calls,
            stats.timeouts,
            stats.cancelled,
            stats.abandoned
        ),
        (2, 0, 0, 0, 0),
        "{stats:?}"
    );
    assert_eq!(b.state(), State::Closed);
}
