//! `breaker::grpc` against a real tonic server on loopback: each code judged by the table
//! (from the headers of a Trailers-Only answer, and from the trailers after a streamed body),
//! pushback, streams dropped before their end, what the tonic caller gets when the breaker
//! refuses, and the attribute's `classify = breaker::grpc::classify`.
#![cfg(feature = "grpc")]

#[path = "support/grpc.rs"]
mod backend;

use std::time::Duration;

use breaker::{tower::CircuitBreakerLayer, Breaker, Config, KeyedBreaker, State, Stats};
use tonic::Code;
use tower::ServiceBuilder;

/// A breaker that never opens by counts, so each call's verdict shows in its stats.
fn counting(name: &str) -> Breaker {
    Breaker::new(name, Config::default().threshold(1_000))
}

/// What one call added to the stats: (successes, failures, neutral, cancelled).
fn delta(before: &Stats, after: &Stats) -> (u64, u64, u64, u64) {
    (
        after.successes - before.successes,
        after.failures - before.failures,
        after.neutral - before.neutral,
        after.cancelled - before.cancelled,
    )
}

const SUCCESS: (u64, u64, u64, u64) = (1, 0, 0, 0);
const FAILURE: (u64, u64, u64, u64) = (0, 1, 0, 0);
const NEUTRAL: (u64, u64, u64, u64) = (0, 0, 1, 0);
const CANCELLED: (u64, u64, u64, u64) = (0, 0, 0, 1);

#[tokio::test]
async fn every_code_is_judged_by_the_table_not_by_the_http_status() {
    let server = backend::start().await;
    let breaker = counting("grpc::table");
    let channel = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::grpc(breaker.clone()))
        .service(server.channel().await);

    let failures = [4, 8, 10, 13, 14, 15, 2]; // DEADLINE_EXCEEDED .. UNKNOWN
    let neutral = [1, 3, 5, 6, 7, 9, 11, 12, 16]; // CANCELLED, INVALID_ARGUMENT, ..
    let mut cases: Vec<(String, (u64, u64, u64, u64))> = vec![("ok".into(), SUCCESS)];
    cases.extend(failures.iter().map(|c| (format!("code {c}"), FAILURE)));
    cases.extend(neutral.iter().map(|c| (format!("code {c}"), NEUTRAL)));
    for (script, expected) in cases {
        let before = breaker.stats();
        let reply = backend::call(channel.clone(), &script).await;
        if script != "ok" {
            // The caller still gets the server's own status: judging changes no answer.
            let code: i32 = script[5..].parse().unwrap();
            assert_eq!(reply.unwrap_err().code(), Code::from(code), "{script}");
        }
        assert_eq!(delta(&before, &breaker.stats()), expected, "{script}");
    }
    assert_eq!(breaker.state(), State::Closed);
}

#[tokio::test]
async fn a_status_in_the_trailers_after_a_streamed_body_is_judged_at_the_end() {
    let server = backend::start().await;
    let breaker = counting("grpc::trailers");
    let channel = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::grpc(breaker.clone()))
        .service(server.channel().await);

    let before = breaker.stats();
    let (read, end) = backend::call_stream(channel.clone(), "stream 3 code 14", None).await;
    assert_eq!((read, end.unwrap_err().code()), (3, Code::Unavailable));
    assert_eq!(delta(&before, &breaker.stats()), FAILURE);

    let before = breaker.stats();
    let (read, end) = backend::call_stream(channel.clone(), "stream 2 code 0", None).await;
    assert_eq!((read, end.is_ok()), (2, true));
    assert_eq!(delta(&before, &breaker.stats()), SUCCESS);

    let before = breaker.stats();
    let (_, end) = backend::call_stream(channel.clone(), "stream 1 code 5", None).await;
    assert_eq!(end.unwrap_err().code(), Code::NotFound);
    assert_eq!(delta(&before, &breaker.stats()), NEUTRAL);

    // A unary call's OK also comes in the trailers.
    let before = breaker.stats();
    assert_eq!(backend::call(channel.clone(), "ok").await.unwrap(), "fine");
    assert_eq!(delta(&before, &breaker.stats()), SUCCESS);
}

#[tokio::test]
async fn a_stream_dropped_before_its_end_is_cancelled_and_gives_back_its_probe() {
    let server = backend::start().await;
    let breaker = Breaker::new(
        "grpc::dropped",
        Config::default()
            .threshold(1)
            .cool_off(Duration::from_millis(50)),
    );
    let channel = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::grpc(breaker.clone()))
        .service(server.channel().await);

    let before = breaker.stats();
    let (read, _) = backend::call_stream(channel.clone(), "stream 5 code 14", Some(1)).await;
    assert_eq!(read, 1);
    assert_eq!(delta(&before, &breaker.stats()), CANCELLED);
    assert_eq!(
        breaker.state(),
        State::Closed,
        "a dropped stream is no failure"
    );

    // Open it, let the cool-off pass, and drop the probe's stream: the probe slot comes
    // back, so the next call may probe.
    let _ = backend::call(channel.clone(), "code 14").await;
    assert_eq!(breaker.state(), State::Open);
    wait_until(|| breaker.state() == State::HalfOpen || breaker.retry_in().is_none()).await;
    let (read, _) = backend::call_stream(channel.clone(), "stream 5 code 0", Some(1)).await;
    assert_eq!(read, 1);
    assert_eq!(backend::call(channel.clone(), "ok").await.unwrap(), "fine");
    assert_eq!(breaker.state(), State::Closed);
}

#[tokio::test]
async fn a_pushback_opens_for_exactly_that_long_and_a_bad_one_is_ignored() {
    let server = backend::start().await;
    let breaker = counting("grpc::pushback");
    let channel = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::grpc(breaker.clone()))
        .service(server.channel().await);

    // Malformed and negative values say nothing: RESOURCE_EXHAUSTED is then one failure.
    for bad in ["-1", "soon", "1.5"] {
        let before = breaker.stats();
        let _ = backend::call(channel.clone(), &format!("code 8 pushback {bad}")).await;
        assert_eq!(delta(&before, &breaker.stats()), FAILURE, "{bad}");
        assert_eq!(breaker.state(), State::Closed, "{bad}");
    }

    // Any code but OK with a pushback opens for that long, whatever the threshold.
    let _ = backend::call(channel.clone(), "code 8 pushback 1500").await;
    assert_eq!(breaker.state(), State::Open);
    let retry_in = breaker.retry_in().expect("open for a known time");
    assert!(
        retry_in <= Duration::from_millis(1500) && retry_in > Duration::from_millis(1000),
        "{retry_in:?}"
    );
}

#[tokio::test]
async fn the_tonic_caller_gets_unavailable_with_pushback_and_the_server_is_not_called() {
    let server = backend::start().await;
    let breaker = Breaker::new(
        "grpc::refused",
        Config::default()
            .threshold(2)
            .cool_off(Duration::from_secs(30)),
    );
    let channel = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::grpc(breaker.clone()))
        .service(server.channel().await);

    for _ in 0..2 {
        let status = backend::call(channel.clone(), "code 14").await.unwrap_err();
        assert_eq!(status.code(), Code::Unavailable);
    }
    assert_eq!(breaker.state(), State::Open);
    let hits = server.hits();

    let refused = backend::call(channel.clone(), "ok").await.unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable, "{refused:?}");
    assert!(refused.message().contains("grpc::refused"), "{refused:?}");
    let pushback: u64 = refused
        .metadata()
        .get("grpc-retry-pushback-ms")
        .expect("the breaker knows when it admits again")
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(pushback > 29_000 && pushback <= 30_000, "{pushback}");
    assert_eq!(
        server.hits(),
        hits,
        "an open breaker does not call the server"
    );
}

#[tokio::test]
async fn the_breakers_own_timeout_reaches_the_caller_as_deadline_exceeded() {
    let server = backend::start().await;
    let breaker = Breaker::new(
        "grpc::timeout",
        Config::default()
            .threshold(1_000)
            .timeout(Duration::from_millis(100)),
    );
    let channel = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::grpc(breaker.clone()))
        .service(server.channel().await);

    let status = backend::call(channel.clone(), "hang").await.unwrap_err();
    assert_eq!(status.code(), Code::DeadlineExceeded, "{status:?}");
    assert_eq!(breaker.stats().timeouts, 1);
    // A call that answers in time is unaffected.
    assert_eq!(
        backend::call(channel.clone(), "wait 1").await.unwrap(),
        "late"
    );
}

#[tokio::test]
async fn keyed_by_method_each_method_has_its_breaker() {
    let server = backend::start().await;
    let per_method = KeyedBreaker::<String>::new("grpc::methods", Config::default().threshold(1));
    // As the README writes it: the key function needs no annotation over a `Channel`.
    let channel = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::grpc_keyed(
            per_method.clone(),
            breaker::grpc::method,
        ))
        .service(server.channel().await);

    let (_, end) = backend::call_stream(channel.clone(), "stream 0 code 14", None).await;
    assert_eq!(end.unwrap_err().code(), Code::Unavailable);
    assert_eq!(per_method.len(), 1, "one key per method called");
    assert_eq!(per_method.breaker(backend::STREAM).state(), State::Open);
    // The unary method is another breaker: still closed, still called.
    assert_eq!(backend::call(channel.clone(), "ok").await.unwrap(), "fine");
    assert_eq!(per_method.len(), 2);
    assert_eq!(per_method.breaker(backend::UNARY).state(), State::Closed);
    assert_eq!(per_method.breaker(backend::UNARY).stats().successes, 1);
}

// ------------------------------------------------ the plain layer over a tonic `Channel`

/// The plain layer (`CircuitBreakerLayer::new`, made for HTTP) over a tonic `Channel`: an
/// answer whose `content-type` is `application/grpc` is judged by the gRPC table, read from
/// its headers (the code of a Trailers-Only answer), not by its HTTP `200`.
#[tokio::test]
async fn the_plain_layer_over_a_channel_judges_by_the_grpc_table() {
    let server = backend::start().await;
    let breaker = counting("grpc::plain");
    let channel = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::new(breaker.clone()))
        .service(server.channel().await);

    for (script, expected) in [
        ("ok", SUCCESS),
        ("code 14", FAILURE),
        ("code 13", FAILURE),
        ("code 5", NEUTRAL),
        ("code 3", NEUTRAL),
    ] {
        let before = breaker.stats();
        let _ = backend::call(channel.clone(), script).await;
        assert_eq!(delta(&before, &breaker.stats()), expected, "{script}");
    }
    // A pushback opens for that long, as through the gRPC layer.
    let _ = backend::call(channel.clone(), "code 8 pushback 1500").await;
    assert_eq!(breaker.state(), State::Open);
    let retry_in = breaker.retry_in().expect("open for a known time");
    assert!(retry_in <= Duration::from_millis(1500), "{retry_in:?}");
}

/// The plain keyed layer, keyed per method by `breaker::grpc::method`: the same table.
#[tokio::test]
async fn the_plain_keyed_layer_over_a_channel_judges_by_the_grpc_table() {
    let server = backend::start().await;
    let per_method =
        KeyedBreaker::<String>::new("grpc::plain_keyed", Config::default().threshold(2));
    let channel = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::keyed(
            per_method.clone(),
            breaker::grpc::method,
        ))
        .service(server.channel().await);

    for _ in 0..2 {
        let _ = backend::call(channel.clone(), "code 14").await;
    }
    assert_eq!(per_method.breaker(backend::UNARY).state(), State::Open);
    assert_eq!(per_method.breaker(backend::UNARY).stats().failures, 2);
    assert_eq!(per_method.len(), 1);
}

// ------------------------------------------ streams: judged by the trailers, timed by the headers

/// `slow_call = 200ms` and a threshold of three: what the user ran.
fn slow_call(name: &str) -> Breaker {
    Breaker::new(
        name,
        Config::default()
            .threshold(3)
            .slow_call(Duration::from_millis(200))
            .cool_off(Duration::from_secs(30)),
    )
}

/// Real time (hyper and tonic over loopback under paused time would jump the clock while
/// the sockets wait): the streams last 300 ms and more, their headers come in a few
/// milliseconds, so `slow_call = 200ms` tells them apart with wide margins.
#[tokio::test]
async fn healthy_streams_longer_than_slow_call_are_successes() {
    let server = backend::start().await;
    let breaker = slow_call("grpc::healthy_streams");
    let channel = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::grpc(breaker.clone()))
        .service(server.channel().await);

    for _ in 0..3 {
        let started = std::time::Instant::now();
        let (read, end) =
            backend::call_stream(channel.clone(), "stream 4 code 0 every 100", None).await;
        assert_eq!((read, end.is_ok()), (4, true));
        assert!(started.elapsed() >= Duration::from_millis(300));
    }
    let stats = breaker.stats();
    assert_eq!(
        (stats.successes, stats.slow_calls, stats.failures),
        (3, 0, 0),
        "{stats:?}"
    );
    assert_eq!(breaker.state(), State::Closed);
    let (read, end) = backend::call_stream(channel.clone(), "stream 1 code 0", None).await;
    assert_eq!(
        (read, end.is_ok()),
        (1, true),
        "the next stream is admitted"
    );
}

#[tokio::test]
async fn a_stream_read_past_slow_call_then_dropped_is_cancelled_not_abandoned() {
    let server = backend::start().await;
    let breaker = Breaker::new(
        "grpc::dropped_late",
        Config::default()
            .threshold(1)
            .slow_call(Duration::from_millis(200)),
    );
    let channel = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::grpc(breaker.clone()))
        .service(server.channel().await);

    let started = std::time::Instant::now();
    let (read, _) =
        backend::call_stream(channel.clone(), "stream 10 code 0 every 100", Some(4)).await;
    assert_eq!(read, 4);
    assert!(started.elapsed() >= Duration::from_millis(300));
    let stats = breaker.stats();
    assert_eq!(
        (stats.cancelled, stats.abandoned, stats.slow_calls),
        (1, 0, 0),
        "{stats:?}"
    );
    assert_eq!(breaker.state(), State::Closed);
}

#[tokio::test]
async fn a_failing_status_after_a_long_stream_is_a_failure_not_a_slow_call() {
    let server = backend::start().await;
    let breaker = Breaker::new(
        "grpc::long_failure",
        Config::default()
            .threshold(1_000)
            .slow_call(Duration::from_millis(200)),
    );
    let channel = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::grpc(breaker.clone()))
        .service(server.channel().await);

    let (read, end) =
        backend::call_stream(channel.clone(), "stream 4 code 14 every 100", None).await;
    assert_eq!((read, end.unwrap_err().code()), (4, Code::Unavailable));
    let (read, end) =
        backend::call_stream(channel.clone(), "stream 4 code 5 every 100", None).await;
    assert_eq!((read, end.unwrap_err().code()), (4, Code::NotFound));
    let stats = breaker.stats();
    assert_eq!(
        (stats.failures, stats.neutral, stats.slow_calls),
        (1, 1, 0),
        "{stats:?}"
    );
}

/// Until the headers, the rules hold: headers later than `slow_call` make a slow call (and
/// a stream dropped after such headers is abandoned), headers later than `timeout` a timeout.
#[tokio::test]
async fn slow_call_and_timeout_time_a_stream_until_its_headers() {
    let server = backend::start().await;
    let breaker = Breaker::new(
        "grpc::slow_headers",
        Config::default()
            .threshold(1_000)
            .slow_call(Duration::from_millis(200))
            .timeout(Duration::from_millis(1_000)),
    );
    let channel = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::grpc(breaker.clone()))
        .service(server.channel().await);

    let (read, end) =
        backend::call_stream(channel.clone(), "stream 2 code 0 after 300", None).await;
    assert_eq!((read, end.is_ok()), (2, true));
    assert_eq!(breaker.stats().slow_calls, 1);

    let (read, _) =
        backend::call_stream(channel.clone(), "stream 2 code 0 after 300", Some(0)).await;
    assert_eq!(read, 0);
    assert_eq!(
        (breaker.stats().abandoned, breaker.stats().slow_calls),
        (1, 2)
    );

    let (_, end) = backend::call_stream(channel.clone(), "stream 1 code 0 after 3000", None).await;
    assert_eq!(end.unwrap_err().code(), Code::DeadlineExceeded);
    assert_eq!(breaker.stats().timeouts, 1);

    // A stream longer than `timeout` whose headers came in time: the caller's to time.
    let (read, end) =
        backend::call_stream(channel.clone(), "stream 12 code 0 every 100", None).await;
    assert_eq!((read, end.is_ok()), (12, true));
    assert_eq!(
        (breaker.stats().timeouts, breaker.stats().successes),
        (1, 1)
    );
}

#[breaker::circuit_breaker(threshold = 2, cool_off = "30s", classify = breaker::grpc::classify)]
async fn lookup(
    client: backend_client::Client,
    script: &'static str,
) -> Result<String, tonic::Status> {
    backend::call(client.0, script).await
}

/// The plain channel an attribute user calls through.
mod backend_client {
    #[derive(Clone)]
    pub struct Client(pub tonic::transport::Channel);
}

#[tokio::test]
async fn the_attribute_judges_a_status_by_the_same_table() {
    let server = backend::start().await;
    let client = backend_client::Client(server.channel().await);
    assert!(
        breaker::registry().get("grpc::lookup").is_none(),
        "made at the first call"
    );

    // NOT_FOUND, ten times: the caller's doing, the breaker stays closed.
    for _ in 0..10 {
        let err = lookup(client.clone(), "code 5").await.unwrap_err();
        assert_eq!(err.code(), Code::NotFound);
    }
    let handle = breaker::registry().get("grpc::lookup").expect("registered");
    assert_eq!(handle.snapshot().state, State::Closed);
    assert_eq!(handle.snapshot().stats.neutral, 10);

    // UNAVAILABLE twice opens it; the function's signature is unchanged, so a refusal
    // comes back as the `Status` that `From<BreakerError>` makes: UNAVAILABLE, pushback set.
    for _ in 0..2 {
        let _ = lookup(client.clone(), "code 14").await;
    }
    let hits = server.hits();
    let refused = lookup(client.clone(), "ok").await.unwrap_err();
    assert_eq!(refused.code(), Code::Unavailable);
    assert!(refused.metadata().get("grpc-retry-pushback-ms").is_some());
    assert_eq!(server.hits(), hits);
}

/// Polls `cond` every millisecond for up to five seconds (real time: the server is real).
async fn wait_until(mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not met in 5 s"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

// ------------------------------------------- the same rules, exact, over paused time

/// A gRPC answer made by hand (no sockets, so the clock can be paused): the headers after
/// `head`, then `messages` messages `every` apart (the first at once), then the trailers
/// with `grpc-status: code`.
mod made {
    use std::{
        convert::Infallible,
        pin::Pin,
        task::{ready, Context, Poll},
        time::Duration,
    };

    use bytes::Bytes;
    use http_body::{Body, Frame};
    use tokio::time::{Instant, Sleep};

    pub struct Answer {
        left: usize,
        every: Duration,
        code: &'static str,
        next: Pin<Box<Sleep>>,
        ended: bool,
    }

    impl Body for Answer {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            if self.ended {
                return Poll::Ready(None);
            }
            ready!(self.next.as_mut().poll(cx));
            if self.left == 0 {
                self.ended = true;
                let mut trailers = http::HeaderMap::new();
                trailers.insert("grpc-status", self.code.parse().unwrap());
                return Poll::Ready(Some(Ok(Frame::trailers(trailers))));
            }
            self.left -= 1;
            let due = Instant::now() + self.every;
            if self.left > 0 {
                self.next.as_mut().reset(due);
            }
            Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"message")))))
        }
    }

    use std::future::Future;

    /// A service that answers every request so.
    pub fn service(
        head: Duration,
        messages: usize,
        every: Duration,
        code: &'static str,
    ) -> impl tower::Service<
        http::Request<()>,
        Response = http::Response<Answer>,
        Error = Infallible,
        Future: Send,
    > + Clone
           + Send
           + 'static {
        tower::service_fn(move |_: http::Request<()>| async move {
            tokio::time::sleep(head).await;
            let body = Answer {
                left: messages,
                every,
                code,
                next: Box::pin(tokio::time::sleep(Duration::ZERO)),
                ended: false,
            };
            Ok(http::Response::builder()
                .header("content-type", "application/grpc")
                .body(body)
                .unwrap())
        })
    }
}

/// Calls `svc` and reads `read` frames of the body (all of it when `None`), then drops it.
async fn read_made<S, B>(svc: &S, read: Option<usize>) -> Result<usize, breaker::grpc::BoxError>
where
    S: tower::Service<
            http::Request<()>,
            Response = http::Response<B>,
            Error = breaker::grpc::BoxError,
        > + Clone,
    B: http_body::Body + Unpin,
{
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    let mut body = svc
        .clone()
        .oneshot(http::Request::new(()))
        .await?
        .into_body();
    let mut frames = 0;
    while read != Some(frames) {
        match body.frame().await {
            Some(Ok(_)) => frames += 1,
            Some(Err(_)) => return Err("the body failed".into()),
            None => break,
        }
    }
    Ok(frames)
}

const MS: Duration = Duration::from_millis(1);

#[tokio::test(start_paused = true)]
async fn paused_a_stream_is_timed_by_its_headers_and_judged_by_its_trailers() {
    let b = Breaker::new(
        "grpc::paused_streams",
        Config::default()
            .threshold(3)
            .slow_call(200 * MS)
            .timeout(300 * MS),
    );
    let layer = CircuitBreakerLayer::grpc(b.clone());
    let healthy = tower::Layer::layer(&layer, made::service(5 * MS, 4, 100 * MS, "0"));
    // Three healthy streams of 400 ms (headers in 5 ms): three successes, closed.
    for _ in 0..3 {
        let started = tokio::time::Instant::now();
        assert_eq!(read_made(&healthy, None).await.unwrap(), 5); // 4 messages, the trailers
        assert_eq!(started.elapsed(), 305 * MS);
    }
    let stats = b.stats();
    assert_eq!(
        (
            stats.successes,
            stats.slow_calls,
            stats.failures,
            stats.timeouts
        ),
        (3, 0, 0, 0),
        "{stats:?}"
    );
    assert_eq!(b.state(), State::Closed);

    // Read for 300 ms, then dropped: cancelled, not abandoned.
    assert_eq!(read_made(&healthy, Some(4)).await.unwrap(), 4);
    assert_eq!((b.stats().cancelled, b.stats().abandoned), (1, 0));

    // A failing status after a long stream: a failure, not a slow call.
    let failing = tower::Layer::layer(&layer, made::service(5 * MS, 4, 100 * MS, "14"));
    read_made(&failing, None).await.unwrap();
    assert_eq!((b.stats().failures, b.stats().slow_calls), (1, 0));

    // Headers at 250 ms: a slow call; dropped after such headers, abandoned.
    let late = tower::Layer::layer(&layer, made::service(250 * MS, 1, 100 * MS, "0"));
    read_made(&late, None).await.unwrap();
    assert_eq!(b.stats().slow_calls, 1);
    read_made(&late, Some(0)).await.unwrap();
    assert_eq!((b.stats().slow_calls, b.stats().abandoned), (2, 1));

    // Headers later than `timeout`: a timeout, as `DEADLINE_EXCEEDED`.
    b.handle().reset();
    let hung = tower::Layer::layer(&layer, made::service(400 * MS, 1, 100 * MS, "0"));
    let err = read_made(&hung, None).await.unwrap_err();
    let status = tonic::Status::from_error(err);
    assert_eq!(status.code(), Code::DeadlineExceeded);
    assert_eq!(b.stats().timeouts, 1);
}
