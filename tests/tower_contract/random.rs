//! The contract under random readiness and cancellation: for every layer (and
//! `HedgeLayer::new`, whose hedges ready clones of their own), random sequences
//! of an inner service going ready and not (`tower-test`'s mock, its allowance), two clones
//! readied and calling, answers, errors, response futures polled or dropped at any point
//! (before their first poll, waiting on the inner service, in a retry's backoff), clones
//! dropped, time passing. After every step: no inner service is called unless the clone
//! that calls it was readied (`Tracked`'s "call unready" never written), and the breaker's
//! `Stats` never count more ends than calls. At rest (everything dropped, time past every
//! backoff): each call ended exactly once (`calls` = its ends and refusals), every permit of
//! the inner `ConcurrencyLimit` and every seat of the breaker's bulkhead is free.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll, Waker},
};

use proptest::{prelude::*, test_runner::TestRunner};
use tower_test::mock::SendResponse;

use super::*;

/// Permits of the inner `ConcurrencyLimit`, seats of the breaker's bulkhead.
const PERMITS: usize = 2;
const SEATS: u32 = 2;

#[derive(Debug, Clone)]
enum Step {
    /// The inner service takes this many more requests (0: it stays not ready).
    Allow(usize),
    /// `poll_ready` of clone `i`.
    Ready(usize),
    /// Clone `i` calls, if its last `poll_ready` said ready.
    Call(usize),
    /// Every response future polled once.
    PollAll,
    /// The `k`th request waiting at the inner service answered with this status.
    Answer(usize, u16),
    /// The `k`th request waiting at the inner service answered with an error.
    Fail(usize),
    /// The `k`th response future dropped, wherever it stands.
    DropCall(usize),
    /// Clone `i` dropped, a fresh clone in its place.
    DropClone(usize),
    Advance(u64),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        2 => (0usize..3).prop_map(Step::Allow),
        4 => (0usize..2).prop_map(Step::Ready),
        4 => (0usize..2).prop_map(Step::Call),
        4 => Just(Step::PollAll),
        3 => (any::<usize>(), prop_oneof![Just(200u16), Just(503)]).prop_map(|(k, s)| Step::Answer(k, s)),
        1 => any::<usize>().prop_map(Step::Fail),
        2 => any::<usize>().prop_map(Step::DropCall),
        1 => (0usize..2).prop_map(Step::DropClone),
        2 => (1u64..30).prop_map(Step::Advance),
    ]
}

/// A layer under test and its breaker (the keyed layer's: the key every request goes to).
struct Layered<L, Q> {
    layer: L,
    request: fn() -> Q,
    breaker: Breaker,
}

fn random_config() -> Config {
    config().max_concurrent(SEATS)
}

fn plain_layer(name: &str) -> Layered<CircuitBreakerLayer, Req> {
    let b = Breaker::new(name, random_config());
    Layered {
        layer: CircuitBreakerLayer::new(b.clone()),
        request,
        breaker: b,
    }
}

fn keyed_layer(name: &str) -> Layered<CircuitBreakerLayer<Keyed<String, ByPath>>, Req> {
    let keyed = KeyedBreaker::<String>::new(name, random_config());
    Layered {
        breaker: keyed.breaker("/contract"),
        layer: CircuitBreakerLayer::keyed(keyed, path as ByPath),
        request,
    }
}

fn grpc_layer(name: &str) -> Layered<breaker::grpc::GrpcLayer, Req> {
    let b = Breaker::new(name, random_config());
    Layered {
        layer: CircuitBreakerLayer::grpc(b.clone()),
        request,
        breaker: b,
    }
}

fn retry_layer(name: &str) -> Layered<RetryLayer<DefaultClassify, Copy>, Req> {
    let b = Breaker::new(name, random_config());
    Layered {
        layer: RetryLayer::new(b.clone()).clone_request(clone_http_request as Copy),
        request,
        breaker: b,
    }
}

fn grpc_retry_layer(name: &str) -> Layered<breaker::retry::GrpcRetryLayer, GrpcReq> {
    let b = Breaker::new(name, random_config());
    Layered {
        layer: RetryLayer::grpc(b.clone()),
        request: grpc_request,
        breaker: b,
    }
}

/// `HedgeLayer::new` (its requests must be `Clone`: a number here), one hedge 1 ms after
/// the first attempt.
fn hedge_layer(name: &str) -> Layered<breaker::hedge::HedgeLayer, u32> {
    let delay = breaker::HedgeDelay::Fixed(Duration::from_millis(1));
    let config = Config::default()
        .threshold(100)
        .max_concurrent(SEATS)
        .hedge(1)
        .hedge_delay(delay);
    let b = Breaker::new(name, config);
    Layered {
        layer: breaker::hedge::HedgeLayer::new(b.clone()),
        request: || 7,
        breaker: b,
    }
}

type Inner<Q> = Tracked<ConcurrencyLimit<Mock<Q, Res>>>;

/// One random sequence on a fresh layer; `Err` says which invariant broke.
async fn sequence<Q, L, S>(made: Layered<L, Q>, steps: &[Step]) -> Result<(), String>
where
    Q: Send + 'static,
    L: Layer<Inner<Q>, Service = S>,
    S: Service<Q> + Clone,
    S::Future: 'static,
    S::Error: Debug,
{
    let (mock, mut handle) = mock::pair::<Q, Res>();
    handle.allow(0);
    let log = Log::default();
    let inner = Tracked::new(ConcurrencyLimit::new(mock, PERMITS), log.clone());
    let service = made.layer.layer(inner);
    let mut clones = [service.clone(), service.clone()];
    let mut readied = [false, false];
    let mut calls: Vec<Pin<Box<S::Future>>> = Vec::new();
    let mut waiting: Vec<SendResponse<Res>> = Vec::new();
    let mut cx = Context::from_waker(Waker::noop());
    let b = &made.breaker;

    for (n, step) in steps.iter().enumerate() {
        match step {
            Step::Allow(more) => handle.allow(*more as u64),
            Step::Ready(i) => {
                readied[*i] |= matches!(clones[*i].poll_ready(&mut cx), Poll::Ready(Ok(())));
            }
            Step::Call(i) if readied[*i] => {
                readied[*i] = false;
                calls.push(Box::pin(clones[*i].call((made.request)())));
            }
            Step::Call(_) => {}
            Step::PollAll => calls.retain_mut(|c| c.as_mut().poll(&mut cx).is_pending()),
            Step::Answer(k, status) if !waiting.is_empty() => {
                let k = k % waiting.len();
                waiting.remove(k).send_response(answer(*status));
            }
            Step::Fail(k) if !waiting.is_empty() => {
                let k = k % waiting.len();
                waiting.remove(k).send_error("the inner service failed");
            }
            Step::Answer(..) | Step::Fail(_) => {}
            Step::DropCall(k) if !calls.is_empty() => {
                let k = k % calls.len();
                drop(calls.remove(k));
            }
            Step::DropCall(_) => {}
            Step::DropClone(i) => {
                clones[*i] = service.clone();
                readied[*i] = false;
            }
            Step::Advance(ms) => tokio::time::advance(Duration::from_millis(*ms)).await,
        }
        tokio::task::yield_now().await;
        while let Poll::Ready(Some((_, reply))) = handle.poll_request() {
            waiting.push(reply);
        }
        let unready = log
            .lock()
            .unwrap()
            .iter()
            .any(|(_, e)| *e == "call unready");
        if unready {
            return Err(format!(
                "step {n} ({step:?}): an inner service called unready"
            ));
        }
        let s = b.stats();
        let ended = s.successes + s.failures + s.neutral + s.cancelled + s.rejected;
        if ended > s.calls {
            return Err(format!("step {n} ({step:?}): more ends than calls: {s:?}"));
        }
    }

    // At rest: every call dropped or answered, every clone gone, time past every backoff.
    drop(calls);
    drop(waiting);
    drop(clones);
    tokio::time::advance(Duration::from_secs(60)).await;
    tokio::task::yield_now().await;
    let s = b.stats();
    let ended = s.successes + s.failures + s.neutral + s.cancelled + s.rejected;
    if ended != s.calls {
        return Err(format!("at rest, calls and their ends differ: {s:?}"));
    }
    // Every permit free: two fresh clones are both ready.
    handle.allow(PERMITS as u64);
    let mut fresh = [service.clone(), service.clone()];
    for (i, c) in fresh.iter_mut().enumerate() {
        if !matches!(c.poll_ready(&mut cx), Poll::Ready(Ok(()))) {
            return Err(format!(
                "at rest, clone {i} of {PERMITS} not ready: a permit held"
            ));
        }
    }
    // Every seat free: the breaker admits `SEATS` calls at once.
    let mut held = Vec::new();
    for seat in 0..SEATS {
        let mut call = Box::pin(b.call(std::future::pending::<Result<(), ()>>()));
        if let Poll::Ready(r) = call.as_mut().poll(&mut cx) {
            return Err(format!("at rest, seat {seat} of {SEATS}: {r:?}"));
        }
        held.push(call);
    }
    Ok(())
}

/// Runs `cases` random sequences on fresh layers made by `make`, each on a paused runtime.
fn check<Q, L, S>(layer: &str, make: fn(&str) -> Layered<L, Q>)
where
    Q: Send + 'static,
    L: Layer<Inner<Q>, Service = S>,
    S: Service<Q> + Clone,
    S::Future: 'static,
    S::Error: Debug,
{
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(128);
    let config = ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner = TestRunner::new(config);
    let serial = std::sync::atomic::AtomicU32::new(0);
    let result = runner.run(&prop::collection::vec(step(), 1..40), |steps| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        let n = serial.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("tower_contract::random::{layer}::{n}");
        rt.block_on(sequence(make(&name), &steps))
            .map_err(proptest::test_runner::TestCaseError::fail)
    });
    if let Err(e) = result {
        panic!("{layer}: {e}");
    }
}

#[test]
fn plain() {
    check("plain", plain_layer);
}

#[test]
fn keyed() {
    check("keyed", keyed_layer);
}

#[test]
fn grpc() {
    check("grpc", grpc_layer);
}

#[test]
fn retry() {
    check("retry", retry_layer);
}

#[test]
fn grpc_retry() {
    check("grpc_retry", grpc_retry_layer);
}

#[test]
fn hedge() {
    check("hedge", hedge_layer);
}
