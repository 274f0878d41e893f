//! `breaker::reqwest::CircuitBreakerMiddleware` against real loopback servers: one breaker
//! per `host:port`, refusals as `Error::Middleware(BreakerError)`, `Retry-After` honoured,
//! and the order with `reqwest-retry`.
#![cfg(feature = "reqwest")]

#[path = "support/http.rs"]
mod http_server;

use std::time::{Duration, SystemTime};

use breaker::{
    reqwest::{breaker_error, CircuitBreakerMiddleware},
    BreakerError, Config, State,
};
use http_server::Server;
use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use reqwest_retry::{policies::ExponentialBackoff, RetryTransientMiddleware};

fn client(breakers: &CircuitBreakerMiddleware) -> ClientWithMiddleware {
    ClientBuilder::new(reqwest::Client::new())
        .with(breakers.clone())
        .build()
}

/// The `BreakerError` a refused request carries: `Error::Middleware` downcast.
fn refusal(r: reqwest_middleware::Result<reqwest::Response>) -> BreakerError {
    match r {
        Err(reqwest_middleware::Error::Middleware(e)) => e
            .downcast::<BreakerError>()
            .expect("the middleware error is a BreakerError"),
        Err(other) => panic!("expected a refusal, got {other:?}"),
        Ok(answer) => panic!("expected a refusal, got {}", answer.status()),
    }
}

/// The same behind reqwest-retry, which wraps it: found with `breaker_error`.
fn wrapped_refusal(r: reqwest_middleware::Result<reqwest::Response>) -> BreakerError {
    match r {
        Err(e) => breaker_error(&e)
            .unwrap_or_else(|| panic!("expected a refusal, got {e:?}"))
            .clone(),
        Ok(answer) => panic!("expected a refusal, got {}", answer.status()),
    }
}

#[tokio::test]
async fn one_sick_host_does_not_open_another_hosts_breaker() {
    let sick = Server::start().await;
    let well = Server::start().await;
    assert_ne!(sick.addr.port(), well.addr.port());
    sick.answer(500, None);
    let breakers = CircuitBreakerMiddleware::with_config(Config::default().threshold(3));
    let client = client(&breakers);

    for _ in 0..3 {
        let answer = client.get(sick.url("/a")).send().await.unwrap();
        assert_eq!(answer.status(), 500, "the answer still reaches the caller");
        assert_eq!(
            client.get(well.url("/b")).send().await.unwrap().status(),
            200
        );
    }
    assert_eq!(breakers.breaker(&sick.host_port()).state(), State::Open);
    assert_eq!(breakers.breaker(&well.host_port()).state(), State::Closed);

    let e = refusal(client.get(sick.url("/a")).send().await);
    assert!(e.is_open());
    assert_eq!(e.name(), format!("reqwest[{}]", sick.host_port()));
    assert_eq!(sick.hits(), 3, "the refused request was not sent");
    assert_eq!(
        client.get(well.url("/b")).send().await.unwrap().status(),
        200
    );
    assert_eq!(well.hits(), 4);
    assert_eq!(breakers.keyed_breaker().len(), 2);
}

#[tokio::test]
async fn retry_after_keeps_the_client_away_as_long_as_the_server_asked() {
    let server = Server::start().await;
    let breakers = CircuitBreakerMiddleware::with_config(
        Config::default()
            .threshold(5)
            .cool_off(Duration::from_secs(1)),
    );
    let client = client(&breakers);
    let breaker = breakers.breaker(&server.host_port());

    server.answer(503, Some("120"));
    assert_eq!(
        client.get(server.url("/")).send().await.unwrap().status(),
        503
    );
    assert_eq!(
        breaker.state(),
        State::Open,
        "one 503 with Retry-After opens it"
    );
    // The header, not the 1 s cool-off, decides: at most 120 s, and far more than 1 s.
    let retry_in = breaker.retry_in().unwrap();
    assert!(retry_in <= Duration::from_secs(120), "{retry_in:?}");
    assert!(retry_in > Duration::from_secs(60), "{retry_in:?}");
    let e = refusal(client.get(server.url("/")).send().await);
    assert!(e.retry_in().unwrap() <= retry_in);
    assert!(e.retry_in().unwrap() > Duration::from_secs(60));
    assert_eq!(server.hits(), 1);

    // An HTTP-date works the same: two minutes from now.
    let dated = Server::start().await;
    let date = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
    dated.answer(503, Some(&date));
    client.get(dated.url("/")).send().await.unwrap();
    let retry_in = breakers.breaker(&dated.host_port()).retry_in().unwrap();
    assert!(retry_in <= Duration::from_secs(120), "{retry_in:?}");
    assert!(retry_in > Duration::from_secs(60), "{retry_in:?}");

    // A 429 without Retry-After is one failure toward the trip rules (threshold 5 here),
    // not an opening: a quota on a path is no outage of the host.
    let limited = Server::start().await;
    limited.answer(429, None);
    client.get(limited.url("/")).send().await.unwrap();
    let breaker = breakers.breaker(&limited.host_port());
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.stats().failures, 1);
}

/// A newcomer's case (issue 22): `CircuitBreakerMiddleware::new()` (the default 10 s
/// cool-off) and a server that answers 503 with `Retry-After: 2`, then recovers. The client
/// calls it again after 2 s, not after 10. The server runs on a runtime of its own on real
/// time; the client runs on paused time, so the 2 s are the test's `advance`, not a sleep.
#[test]
fn a_retry_after_shorter_than_the_default_cool_off_is_honoured() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            tx.send(Server::start().await).unwrap();
            std::future::pending::<()>().await
        })
    });
    let server = rx.recv().unwrap();
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    client_rt.block_on(async move {
        let breakers = CircuitBreakerMiddleware::new();
        // No idle pool: its timer would let paused time jump while a request is in flight.
        let reqwest = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap();
        let client = ClientBuilder::new(reqwest).with(breakers.clone()).build();
        let breaker = breakers.breaker(&server.host_port());

        server.answer(503, Some("2"));
        let answer = client.get(server.url("/")).send().await.unwrap();
        assert_eq!(answer.status(), 503);
        assert_eq!(breaker.state(), State::Open);
        assert_eq!(
            breaker.retry_in(),
            Some(Duration::from_secs(2)),
            "the server's 2 s, not the 10 s cool-off"
        );
        server.answer(200, None);

        tokio::time::advance(Duration::from_millis(1999)).await;
        let e = refusal(client.get(server.url("/")).send().await);
        assert_eq!(e.retry_in(), Some(Duration::from_millis(1)));
        assert_eq!(server.hits(), 1, "not called before the 2 s");

        tokio::time::advance(Duration::from_millis(1)).await;
        let answer = client.get(server.url("/")).send().await.unwrap();
        assert_eq!(answer.status(), 200);
        assert_eq!(server.hits(), 2, "called again at 2 s");
        assert_eq!(breaker.state(), State::Closed);
    });
}

#[tokio::test]
async fn retry_after_is_capped_by_the_config() {
    let server = Server::start().await;
    let breakers = CircuitBreakerMiddleware::with_config(
        Config::default()
            .cool_off(Duration::from_secs(1))
            .max_cool_off(Duration::from_secs(600)),
    );
    server.answer(503, Some("86400"));
    client(&breakers).get(server.url("/")).send().await.unwrap();
    let retry_in = breakers.breaker(&server.host_port()).retry_in().unwrap();
    assert!(retry_in <= Duration::from_secs(600), "{retry_in:?}");
    assert!(retry_in > Duration::from_secs(300), "{retry_in:?}");
}

/// Issue 35: one answer could park a host, every path of it, for an hour. Without
/// `max_cool_off` an opening the server asks for lasts at most 5 minutes (Envoy's default
/// maximum ejection time), however long it asked: an hour, a number past `u64`, a date in
/// the year 9999.
#[tokio::test]
async fn one_answer_parks_a_host_for_at_most_five_minutes() {
    const FIVE_MINUTES: Duration = Duration::from_secs(300);
    for (status, asked) in [
        (503, "3600"),
        (429, "3600"),
        (503, "99999999999999999999999"),
        (429, "Fri, 31 Dec 9999 23:59:59 GMT"),
    ] {
        let server = Server::start().await;
        server.answer(status, Some(asked));
        let breakers = CircuitBreakerMiddleware::new();
        client(&breakers).get(server.url("/")).send().await.unwrap();
        let breaker = breakers.breaker(&server.host_port());
        assert_eq!(breaker.state(), State::Open, "{status} {asked}");
        let retry_in = breaker.retry_in().unwrap();
        assert!(
            retry_in <= FIVE_MINUTES && retry_in > FIVE_MINUTES - Duration::from_secs(5),
            "{status} with Retry-After: {asked} opened for {retry_in:?}"
        );
    }
}

#[tokio::test]
async fn client_errors_are_neutral_and_dead_hosts_are_failures() {
    let server = Server::start().await;
    let breakers = CircuitBreakerMiddleware::with_config(Config::default().threshold(1));
    let client = client(&breakers);
    server.answer(404, None);
    for _ in 0..3 {
        assert_eq!(
            client.get(server.url("/")).send().await.unwrap().status(),
            404
        );
    }
    let breaker = breakers.breaker(&server.host_port());
    assert_eq!(breaker.state(), State::Closed);
    assert_eq!(breaker.stats().neutral, 3);

    // Nobody listens on this port: the connection is refused, an `Err`, a failure.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}/");
    assert!(matches!(
        client.get(&url).send().await,
        Err(reqwest_middleware::Error::Reqwest(_))
    ));
    assert_eq!(
        breakers.breaker(&format!("127.0.0.1:{port}")).state(),
        State::Open
    );
    assert!(refusal(client.get(&url).send().await).is_open());
}

/// The README's order: retries outside, the breaker inside. The breaker counts every
/// attempt, opens during the retry loop, and its refusal ends the loop.
#[tokio::test]
async fn inside_the_retry_middleware_it_sees_every_attempt() {
    let server = Server::start().await;
    server.answer(500, None);
    let breakers = CircuitBreakerMiddleware::with_config(Config::default().threshold(3));
    let retry = ExponentialBackoff::builder()
        .retry_bounds(Duration::from_millis(1), Duration::from_millis(5))
        .build_with_max_retries(10);
    let client = ClientBuilder::new(reqwest::Client::new())
        .with(RetryTransientMiddleware::new_with_policy(retry))
        .with(breakers.clone())
        .build();

    let e = wrapped_refusal(client.get(server.url("/")).send().await);
    assert!(e.is_open());
    assert_eq!(
        server.hits(),
        3,
        "three attempts failed, the fourth was refused, no more"
    );
    // Already open: the first attempt is refused, and reqwest-retry does not retry it.
    let e = wrapped_refusal(client.get(server.url("/")).send().await);
    assert!(e.is_open());
    assert_eq!(server.hits(), 3);
    let breaker = breakers.breaker(&server.host_port());
    assert_eq!(breaker.stats().failures, 3);
    assert_eq!(breaker.stats().rejected, 2);
}
