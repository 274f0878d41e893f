//! tower's contract, kept by every layer (`CircuitBreakerLayer` plain, keyed and gRPC,
//! `RetryLayer` and `RetryLayer::grpc`, `HedgeLayer` and `HedgeLayer::grpc`), on tower's own mock service (`tower-test`) and its own `ConcurrencyLimit`
//! and `Buffer`, in paused time:
//!
//! - the readied service is the one called (a layer never readies one inner service and
//!   calls another);
//! - what `poll_ready` reserved (a `ConcurrencyLimit` permit, a `Buffer` slot) is used by the
//!   call, or released (the layered service dropped, the call refused): never held;
//! - clones are independent: each readies and calls its own inner service;
//! - an inner service that is never ready makes no call.
//!
//! And `RetryLayer`'s retries: each readies its clone *before* the breaker admits it, so the
//! wait for readiness holds no `timeout` and no bulkhead seat.
#![cfg(all(feature = "tower", feature = "grpc", feature = "http"))]

use std::{
    fmt::Debug,
    sync::{Arc, Mutex},
    task::{Context, Poll},
    time::Duration,
};

use breaker::{
    hedge::HedgeLayer,
    retry::{clone_http_request, RetryLayer},
    tower::{CircuitBreakerLayer, DefaultClassify, Keyed},
    Breaker, Config, HedgeDelay, KeyedBreaker,
};
use tower::{buffer::Buffer, limit::ConcurrencyLimit, Layer, Service};
use tower_test::mock::{self, Handle, Mock, Spawn};

#[path = "tower_contract/random.rs"]
mod random;

type Req = http::Request<String>;
type Res = http::Response<String>;

fn request() -> Req {
    http::Request::get("/contract").body(String::new()).unwrap()
}

/// An answer: `status`, with a `grpc-status` that agrees (so the gRPC layer judges it at
/// its headers).
fn answer(status: u16) -> Res {
    let code = if status == 200 { "0" } else { "14" };
    http::Response::builder()
        .status(status)
        .header("grpc-status", code)
        .body(String::new())
        .unwrap()
}

/// What happened to the inner services: (instance, event).
type Log = Arc<Mutex<Vec<(usize, &'static str)>>>;

/// An inner service that writes down which instance (each clone is one) became ready and
/// which was called, and whether it was ready when called.
struct Tracked<S> {
    id: usize,
    ready: bool,
    log: Log,
    ids: Arc<Mutex<usize>>,
    inner: S,
}

impl<S> Tracked<S> {
    fn new(inner: S, log: Log) -> Self {
        Tracked {
            id: 0,
            ready: false,
            log,
            ids: Arc::new(Mutex::new(0)),
            inner,
        }
    }
}

impl<S: Clone> Clone for Tracked<S> {
    fn clone(&self) -> Self {
        let id = {
            let mut ids = self.ids.lock().unwrap();
            *ids += 1;
            *ids
        };
        Tracked {
            id,
            ready: false,
            log: self.log.clone(),
            ids: self.ids.clone(),
            inner: self.inner.clone(),
        }
    }
}

impl<S: Service<R>, R> Service<R> for Tracked<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        let ready = self.inner.poll_ready(cx);
        if matches!(ready, Poll::Ready(Ok(()))) && !self.ready {
            self.ready = true;
            self.log.lock().unwrap().push((self.id, "ready"));
        }
        ready
    }

    fn call(&mut self, req: R) -> S::Future {
        let event = if self.ready { "call" } else { "call unready" };
        self.ready = false;
        self.log.lock().unwrap().push((self.id, event));
        self.inner.call(req)
    }
}

/// A layer under test and how to force its breaker open.
struct Subject<L, Q = Req> {
    layer: L,
    request: fn() -> Q,
    force_open: Box<dyn Fn()>,
    breaker_calls: Box<dyn Fn() -> u64>,
}

fn config() -> Config {
    Config::default()
        .threshold(100)
        .retry(2)
        .backoff(Duration::from_millis(10))
}

fn plain(name: &str) -> Subject<CircuitBreakerLayer> {
    let b = Breaker::new(name, config());
    let (open, count) = (b.clone(), b.clone());
    Subject {
        layer: CircuitBreakerLayer::new(b),
        request,
        force_open: Box::new(move || open.handle().force_open()),
        breaker_calls: Box::new(move || count.stats().calls),
    }
}

type ByPath = fn(&Req) -> String;

fn path(req: &Req) -> String {
    req.uri().path().to_owned()
}

fn keyed(name: &str) -> Subject<CircuitBreakerLayer<Keyed<String, ByPath>>> {
    let keyed = KeyedBreaker::<String>::new(name, config());
    let (open, count) = (keyed.clone(), keyed.clone());
    Subject {
        layer: CircuitBreakerLayer::keyed(keyed, path as ByPath),
        request,
        force_open: Box::new(move || open.breaker("/contract").handle().force_open()),
        breaker_calls: Box::new(move || count.breaker("/contract").stats().calls),
    }
}

fn grpc(name: &str) -> Subject<breaker::grpc::GrpcLayer> {
    let b = Breaker::new(name, config());
    let (open, count) = (b.clone(), b.clone());
    Subject {
        layer: CircuitBreakerLayer::grpc(b),
        request,
        force_open: Box::new(move || open.handle().force_open()),
        breaker_calls: Box::new(move || count.stats().calls),
    }
}

type Copy = fn(&Req) -> Req;

fn retry(name: &str) -> Subject<RetryLayer<DefaultClassify, Copy>> {
    let b = Breaker::new(name, config());
    let (open, count) = (b.clone(), b.clone());
    Subject {
        layer: RetryLayer::new(b).clone_request(clone_http_request as Copy),
        request,
        force_open: Box::new(move || open.handle().force_open()),
        breaker_calls: Box::new(move || count.stats().calls),
    }
}

/// A hedging breaker whose delay (1 s) no answer here waits for: the contract is the first
/// attempt's.
fn hedging(name: &str) -> Breaker {
    let config = Config::default()
        .threshold(100)
        .hedge(1)
        .hedge_delay(HedgeDelay::Fixed(Duration::from_secs(1)));
    Breaker::new(name, config)
}

fn hedge(name: &str) -> Subject<HedgeLayer<DefaultClassify, Copy>> {
    let b = hedging(name);
    let (open, count) = (b.clone(), b.clone());
    Subject {
        layer: HedgeLayer::new(b).clone_request(clone_http_request as Copy),
        request,
        force_open: Box::new(move || open.handle().force_open()),
        breaker_calls: Box::new(move || count.stats().calls),
    }
}

/// The next request the mock receives, answered `status`; `None` if none came within 5 s.
async fn answer_next<Q>(handle: &mut Handle<Q, Res>, status: u16) -> Option<()> {
    let (_, reply) = tokio::time::timeout(Duration::from_secs(5), handle.next_request())
        .await
        .ok()??;
    reply.send_response(answer(status));
    Some(())
}

/// The readied service is the one called: the instance `poll_ready` readied makes the call,
/// no other is readied or called, and the answer comes back.
async fn the_readied_service_is_the_one_called<Q: Send + 'static, L, S>(subject: Subject<L, Q>)
where
    L: Layer<Tracked<Mock<Q, Res>>, Service = S>,
    S: Service<Q> + Send + 'static,
    S::Future: Send + 'static,
    S::Response: Send,
    S::Error: Debug + Send,
{
    let (mock, mut handle) = mock::pair::<Q, Res>();
    let log = Log::default();
    let mut svc = Spawn::new(subject.layer.layer(Tracked::new(mock, log.clone())));
    assert!(matches!(svc.poll_ready(), Poll::Ready(Ok(()))));
    let readied: Vec<_> = log.lock().unwrap().clone();
    assert_eq!(readied, vec![(0, "ready")]);
    let call = tokio::spawn(svc.call((subject.request)()));
    answer_next(&mut handle, 200)
        .await
        .expect("the request reached the inner service");
    assert!(call.await.unwrap().is_ok());
    assert_eq!(
        *log.lock().unwrap(),
        vec![(0, "ready"), (0, "call")],
        "the instance readied by poll_ready makes the call"
    );
}

/// A `ConcurrencyLimit` permit taken in `poll_ready` is used by the call and released after
/// it, when the layered service is dropped unused, and when the breaker refuses the call.
async fn a_limit_permit_is_used_or_released<Q: Send + 'static, L, S>(subject: Subject<L, Q>)
where
    L: Layer<ConcurrencyLimit<Mock<Q, Res>>, Service = S>,
    S: Service<Q> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Response: Send,
    S::Error: Debug + Send,
{
    let (mock, mut handle) = mock::pair::<Q, Res>();
    let svc = Spawn::new(subject.layer.layer(ConcurrencyLimit::new(mock, 1)));
    for n in 0..2 {
        let mut a = svc.clone();
        assert!(matches!(a.poll_ready(), Poll::Ready(Ok(()))), "call {n}");
        let call = tokio::spawn(a.call((subject.request)()));
        answer_next(&mut handle, 200)
            .await
            .unwrap_or_else(|| panic!("call {n}: the permit readied was used by the call"));
        assert!(call.await.unwrap().is_ok());
    }
    // Readied and dropped: the permit goes with it.
    let mut a = svc.clone();
    let mut b = svc.clone();
    assert!(a.poll_ready().is_ready());
    assert!(b.poll_ready().is_pending(), "one permit");
    drop(a);
    assert!(
        b.poll_ready().is_ready(),
        "the dropped service's permit came back"
    );
    // Readied and refused by the breaker: the permit goes with the refused call.
    (subject.force_open)();
    let refused = b.call((subject.request)()).await;
    assert!(refused.is_err());
    let mut c = svc.clone();
    assert!(
        c.poll_ready().is_ready(),
        "the refused call's permit came back"
    );
    assert!(
        handle.poll_request().is_pending(),
        "the refused call sent nothing"
    );
}

/// The same with tower's `Buffer`, whose slot is reserved in `poll_ready`.
async fn a_buffer_slot_is_used_or_released<Q: Send + 'static, L, S>(subject: Subject<L, Q>)
where
    L: Layer<Buffer<Q, <Mock<Q, Res> as Service<Q>>::Future>, Service = S>,
    S: Service<Q> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Response: Send,
    S::Error: Debug + Send,
{
    let (mock, mut handle) = mock::pair::<Q, Res>();
    let svc = Spawn::new(subject.layer.layer(Buffer::new(mock, 1)));
    for n in 0..3 {
        let mut a = svc.clone();
        assert!(matches!(a.poll_ready(), Poll::Ready(Ok(()))), "call {n}");
        let call = tokio::spawn(a.call((subject.request)()));
        answer_next(&mut handle, 200)
            .await
            .unwrap_or_else(|| panic!("call {n}: the slot readied was used by the call"));
        assert!(call.await.unwrap().is_ok());
    }
    let mut a = svc.clone();
    let mut b = svc.clone();
    assert!(a.poll_ready().is_ready());
    assert!(b.poll_ready().is_pending(), "one slot");
    drop(a);
    assert!(
        b.poll_ready().is_ready(),
        "the dropped service's slot came back"
    );
    (subject.force_open)();
    assert!(b.call((subject.request)()).await.is_err());
    let mut c = svc.clone();
    assert!(
        c.poll_ready().is_ready(),
        "the refused call's slot came back"
    );
}

/// Clones are independent: each readies its own inner service and calls it, in any order.
async fn clones_are_independent<Q: Send + 'static, L, S>(subject: Subject<L, Q>)
where
    L: Layer<Tracked<Mock<Q, Res>>, Service = S>,
    S: Service<Q> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Response: Send,
    S::Error: Debug + Send,
{
    let (mock, mut handle) = mock::pair::<Q, Res>();
    let log = Log::default();
    let svc = Spawn::new(subject.layer.layer(Tracked::new(mock, log.clone())));
    let mut a = svc.clone();
    let mut b = svc.clone();
    assert!(a.poll_ready().is_ready());
    assert!(b.poll_ready().is_ready());
    let readied: Vec<usize> = log.lock().unwrap().iter().map(|(id, _)| *id).collect();
    assert_eq!(readied.len(), 2);
    assert_ne!(readied[0], readied[1], "each clone readied its own");
    // `b` first: `a`'s readiness is `a`'s.
    let second = tokio::spawn(b.call((subject.request)()));
    let first = tokio::spawn(a.call((subject.request)()));
    answer_next(&mut handle, 200).await.expect("b's request");
    answer_next(&mut handle, 200).await.expect("a's request");
    assert!(second.await.unwrap().is_ok() && first.await.unwrap().is_ok());
    let calls: Vec<_> = log.lock().unwrap()[2..].to_vec();
    assert_eq!(calls, vec![(readied[1], "call"), (readied[0], "call")]);
}

/// An inner service that is never ready makes no call, and the breaker counts none.
async fn never_ready_makes_no_call<Q: Send + 'static, L, S>(subject: Subject<L, Q>)
where
    L: Layer<Tracked<Mock<Q, Res>>, Service = S>,
    S: Service<Q> + Send + 'static,
    S::Error: Debug,
{
    let (mock, mut handle) = mock::pair::<Q, Res>();
    handle.allow(0);
    let log = Log::default();
    let mut svc = Spawn::new(subject.layer.layer(Tracked::new(mock, log.clone())));
    for _ in 0..3 {
        assert!(svc.poll_ready().is_pending());
        tokio::time::advance(Duration::from_secs(10)).await;
    }
    assert!(handle.poll_request().is_pending());
    assert!(log.lock().unwrap().is_empty());
    assert_eq!((subject.breaker_calls)(), 0);
}

/// A gRPC request, as a tonic client sends it.
fn grpc_request() -> GrpcReq {
    http::Request::post("/contract")
        .body(tonic::body::Body::empty())
        .unwrap()
}

type GrpcReq = http::Request<tonic::body::Body>;

fn grpc_retry(name: &str) -> Subject<breaker::retry::GrpcRetryLayer, GrpcReq> {
    let b = Breaker::new(name, config());
    let (open, count) = (b.clone(), b.clone());
    Subject {
        layer: RetryLayer::grpc(b),
        request: grpc_request,
        force_open: Box::new(move || open.handle().force_open()),
        breaker_calls: Box::new(move || count.stats().calls),
    }
}

fn grpc_hedge(name: &str) -> Subject<breaker::hedge::GrpcHedgeLayer, GrpcReq> {
    let b = hedging(name);
    let (open, count) = (b.clone(), b.clone());
    Subject {
        layer: HedgeLayer::grpc(b),
        request: grpc_request,
        force_open: Box::new(move || open.handle().force_open()),
        breaker_calls: Box::new(move || count.stats().calls),
    }
}

macro_rules! contract {
    ($layer:ident) => {
        mod $layer {
            fn name(test: &str) -> String {
                format!("tower_contract::{}::{test}", stringify!($layer))
            }

            #[tokio::test(start_paused = true)]
            async fn the_readied_service_is_the_one_called() {
                super::the_readied_service_is_the_one_called(super::$layer(&name("readied"))).await;
            }

            #[tokio::test(start_paused = true)]
            async fn a_limit_permit_is_used_or_released() {
                super::a_limit_permit_is_used_or_released(super::$layer(&name("limit"))).await;
            }

            #[tokio::test(start_paused = true)]
            async fn a_buffer_slot_is_used_or_released() {
                super::a_buffer_slot_is_used_or_released(super::$layer(&name("buffer"))).await;
            }

            #[tokio::test(start_paused = true)]
            async fn clones_are_independent() {
                super::clones_are_independent(super::$layer(&name("clones"))).await;
            }

            #[tokio::test(start_paused = true)]
            async fn never_ready_makes_no_call() {
                super::never_ready_makes_no_call(super::$layer(&name("never_ready"))).await;
            }
        }
    };
}

contract!(plain);
contract!(keyed);
contract!(grpc);
contract!(retry);
contract!(grpc_retry);
contract!(hedge);
contract!(grpc_hedge);

/// `RetryLayer`'s retry readies its clone before the breaker admits it: while the inner
/// service is backpressured, the retry holds no `timeout`, no bulkhead seat and makes no
/// call; once it is ready, the retry goes and its answer is returned.
#[tokio::test(start_paused = true)]
async fn a_retry_waits_for_readiness_outside_the_breaker() {
    let config = Config::default()
        .threshold(100)
        .retry(2)
        .backoff(Duration::from_millis(10))
        .timeout(Duration::from_millis(100))
        .max_concurrent(1);
    let b = Breaker::new("tower_contract::retry_readiness", config);
    let layer = RetryLayer::new(b.clone()).clone_request(clone_http_request);
    let (mock, mut handle) = mock::pair::<Req, Res>();
    handle.allow(1);
    let mut svc = Spawn::new(layer.layer(mock));
    assert!(svc.poll_ready().is_ready());
    let call = tokio::spawn(svc.call(request()));
    answer_next(&mut handle, 503)
        .await
        .expect("the first attempt");
    // The mock allows no more calls: the retry waits for readiness, past the timeout.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        handle.poll_request().is_pending(),
        "no call while not ready"
    );
    let s = b.stats();
    assert_eq!((s.calls, s.timeouts, s.retries), (1, 0, 0), "{s:?}");
    // The bulkhead of one is free: the waiting retry holds no seat.
    assert_eq!(b.call(async { Ok::<_, ()>(7) }).await.unwrap(), 7);
    handle.allow(1);
    answer_next(&mut handle, 200)
        .await
        .expect("the retry, once ready");
    let answer = call.await.unwrap().expect("the retry's answer");
    assert_eq!(answer.status(), 200);
    let s = b.stats();
    assert_eq!((s.timeouts, s.retries, s.successes), (0, 1, 2), "{s:?}");
}

/// A retry whose clone is not ready within `retry_within` is not made: the caller gets the
/// last answer when the bound ends, and the retry's withdrawal goes back.
#[tokio::test(start_paused = true)]
async fn a_retry_not_ready_within_the_bound_returns_the_last_answer() {
    let config = Config::default()
        .threshold(100)
        .retry(3)
        .backoff(Duration::from_millis(10))
        .retry_within(Duration::from_secs(2));
    let b = Breaker::new("tower_contract::retry_not_ready", config);
    let layer = RetryLayer::new(b.clone()).clone_request(clone_http_request);
    let (mock, mut handle) = mock::pair::<Req, Res>();
    handle.allow(1);
    let mut svc = Spawn::new(layer.layer(mock));
    assert!(svc.poll_ready().is_ready());
    let start = tokio::time::Instant::now();
    let call = tokio::spawn(svc.call(request()));
    answer_next(&mut handle, 503)
        .await
        .expect("the first attempt");
    let answer = tokio::time::timeout(Duration::from_secs(60), call)
        .await
        .expect("the call ends at the bound, not waiting for readiness forever")
        .unwrap()
        .expect("the last answer");
    assert_eq!(answer.status(), 503);
    assert_eq!(start.elapsed(), Duration::from_secs(2), "at the bound");
    assert!(handle.poll_request().is_pending(), "no retry was sent");
    let s = b.stats();
    assert_eq!((s.calls, s.retries), (1, 0), "{s:?}");
}
