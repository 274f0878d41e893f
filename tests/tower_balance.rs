//! `CircuitBreakerLayer::ready_when_closed` under tower's own p2c balancer, over three real
//! loopback HTTP endpoints, one of them failing: once its breaker opens it gets no request
//! until its probe time; without the option the balancer keeps sending to it and its callers
//! collect refusals. And the wake-up itself, in paused time: `poll_ready` is pending while the
//! breaker is open and ready when its cool-off ends.
#![cfg(feature = "tower")]

#[path = "support/http.rs"]
mod http_server;

use std::time::Duration;

use breaker::{tower::CircuitBreakerLayer, Breaker, CallError, Config, State};
use http_body_util::Empty;
use hyper_util::{client::legacy::Client, rt::TokioExecutor};
use tower::{
    balance::p2c::Balance,
    discover::ServiceList,
    load::{CompleteOnResponse, PendingRequests},
    service_fn, BoxError, Service, ServiceBuilder, ServiceExt,
};

type Body = Empty<axum::body::Bytes>;

/// Three endpoints behind p2c, each with its own breaker (threshold 3); the last one answers
/// 503. Returns the servers, the breakers and the balancer.
async fn three_endpoints(
    name: &str,
    ready_when_closed: bool,
    cool_off: Duration,
) -> (
    Vec<http_server::Server>,
    Vec<Breaker>,
    impl Service<http::Request<Body>, Error = BoxError> + use<>,
) {
    let client = Client::builder(TokioExecutor::new()).build_http::<Body>();
    let mut servers = Vec::new();
    let mut breakers = Vec::new();
    let mut endpoints = Vec::new();
    for i in 0..3 {
        let server = http_server::Server::start().await;
        let breaker = Breaker::new(
            format!("{name}::endpoint{i}"),
            Config::default().threshold(3).cool_off(cool_off),
        );
        let layer = CircuitBreakerLayer::new(breaker.clone());
        let layer = if ready_when_closed {
            layer.ready_when_closed()
        } else {
            layer
        };
        let base = server.url("");
        let endpoint = ServiceBuilder::new()
            .map_request(move |mut req: http::Request<Body>| {
                *req.uri_mut() = format!("{base}{}", req.uri().path()).parse().unwrap();
                req
            })
            .layer(layer)
            .service(client.clone());
        endpoints.push(PendingRequests::new(
            endpoint,
            CompleteOnResponse::default(),
        ));
        servers.push(server);
        breakers.push(breaker);
    }
    servers[2].answer(503, None);
    (servers, breakers, Balance::new(ServiceList::new(endpoints)))
}

fn get() -> http::Request<Body> {
    http::Request::get("/items").body(Empty::new()).unwrap()
}

/// Sends `n` requests one after another; returns how many the breakers refused.
async fn send<S>(balance: &mut S, n: usize) -> usize
where
    S: Service<http::Request<Body>, Error = BoxError>,
{
    let mut refused = 0;
    for _ in 0..n {
        let svc = balance.ready().await.expect("the balancer is ready");
        match svc.call(get()).await {
            Ok(_) => {}
            Err(e)
                if e.downcast_ref::<CallError<hyper_util::client::legacy::Error>>()
                    .is_some_and(|e| e.is_open()) =>
            {
                refused += 1
            }
            Err(e) => panic!("unexpected error: {e}"),
        }
    }
    refused
}

#[tokio::test]
async fn p2c_routes_around_an_open_endpoint_until_its_probe_time() {
    let (servers, breakers, mut balance) =
        three_endpoints("balance::ready", true, Duration::from_secs(2)).await;

    // Until it opens, the failing endpoint gets its share; then none. (2 s of cool-off is
    // far longer than these requests take, even on a loaded machine.)
    assert_eq!(send(&mut balance, 60).await, 0, "no caller got a refusal");
    assert_eq!(breakers[2].state(), State::Open);
    assert_eq!(servers[2].hits(), 3, "after its third 503 it got nothing");
    assert_eq!(servers[0].hits() + servers[1].hits() + 3, 60);

    // At its probe time it is ready again and gets one request: the probe, which fails and
    // reopens it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while breakers[2].retry_in().is_some_and(|d| !d.is_zero()) {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(send(&mut balance, 40).await, 0);
    assert_eq!(servers[2].hits(), 4, "one probe, then routed around again");
    assert_eq!(breakers[2].state(), State::Open);

    // Healed: the probe succeeds, it closes and takes traffic again.
    servers[2].answer(200, None);
    while breakers[2].state() == State::Open {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    send(&mut balance, 60).await;
    assert_eq!(breakers[2].state(), State::Closed);
    assert!(servers[2].hits() > 5, "{}", servers[2].hits());
}

#[tokio::test]
async fn without_it_p2c_keeps_sending_to_the_open_endpoint_and_callers_get_refusals() {
    let (servers, breakers, mut balance) =
        three_endpoints("balance::plain", false, Duration::from_secs(30)).await;
    let refused = send(&mut balance, 60).await;
    assert_eq!(breakers[2].state(), State::Open);
    assert_eq!(
        servers[2].hits(),
        3,
        "the breaker still spares the endpoint"
    );
    assert!(
        refused > 0,
        "p2c picked the open endpoint and its callers got refusals"
    );
}

#[tokio::test(start_paused = true)]
async fn poll_ready_waits_out_the_cool_off_and_no_longer() {
    let breaker = Breaker::new(
        "balance::wake",
        Config::default()
            .threshold(1)
            .cool_off(Duration::from_secs(10)),
    );
    let mut svc = ServiceBuilder::new()
        .layer(CircuitBreakerLayer::new(breaker.clone()).ready_when_closed())
        .service(service_fn(|fail: bool| async move {
            if fail {
                Err(std::io::Error::other("down"))
            } else {
                Ok::<_, std::io::Error>(())
            }
        }));
    let _ = svc.ready().await.unwrap().call(true).await;
    assert_eq!(breaker.state(), State::Open);

    let opened = tokio::time::Instant::now();
    let early = tokio::time::timeout(Duration::from_millis(9_990), svc.ready()).await;
    assert!(early.is_err(), "pending while open");
    svc.ready().await.unwrap();
    let waited = opened.elapsed();
    assert!(
        waited >= Duration::from_secs(10) && waited < Duration::from_millis(10_100),
        "{waited:?}"
    );
    assert_eq!(breaker.state(), State::HalfOpen);
    // The probe goes through and closes it.
    svc.ready().await.unwrap().call(false).await.unwrap();
    assert_eq!(breaker.state(), State::Closed);

    // Forced open: pending, looked at again until released.
    breaker.handle().force_open();
    let forced = tokio::time::timeout(Duration::from_secs(5), svc.ready()).await;
    assert!(forced.is_err(), "pending while forced open");
    breaker.handle().reset();
    svc.ready().await.unwrap();
}
