//! `breaker::hedge::HedgeLayer`: a tower service's slow request hedged through the breaker,
//! the loser dropped, pushback (`Retry-After`) stopping further hedges. Paused time: every
//! instant below is exact.
#![cfg(feature = "tower")]

use std::sync::{
    atomic::{AtomicBool, AtomicU32, Ordering::SeqCst},
    Arc,
};
use std::time::Duration;

use breaker::{hedge::HedgeLayer, Breaker, CallError, Config, HedgeDelay};
use tokio::time::Instant;
use tower::{service_fn, Service, ServiceBuilder, ServiceExt};

const MS: Duration = Duration::from_millis(1);

fn hedged(name: &str, hedges: u32) -> Breaker {
    let config = Config::default()
        .hedge(hedges)
        .hedge_delay(HedgeDelay::Fixed(MS * 20));
    Breaker::new(name, config)
}

/// Sets its flag when dropped: the call it lives in was dropped (or finished).
struct Dropped(Arc<AtomicBool>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.store(true, SeqCst);
    }
}

#[tokio::test(start_paused = true)]
async fn the_hedge_answers_first_and_the_slow_call_is_dropped() {
    let breaker = hedged("hedge_layer::wins", 1);
    let calls = Arc::new(AtomicU32::new(0));
    let slow_dropped = Arc::new(AtomicBool::new(false));
    let (counted, flag) = (calls.clone(), slow_dropped.clone());
    let svc = ServiceBuilder::new()
        .layer(HedgeLayer::new(breaker.clone()))
        .service(service_fn(move |n: u32| {
            let call = counted.fetch_add(1, SeqCst);
            let guard = Dropped(flag.clone());
            async move {
                if call == 0 {
                    tokio::time::sleep(MS * 10_000).await;
                    drop(guard);
                    Ok::<_, std::io::Error>(0)
                } else {
                    std::mem::forget(guard);
                    tokio::time::sleep(MS * 5).await;
                    Ok(n)
                }
            }
        }));
    let t0 = Instant::now();
    // Spawned: the response future is `Send` and `'static`.
    let answer = tokio::spawn(svc.oneshot(7)).await.unwrap();
    assert_eq!(answer.unwrap(), 7, "the hedge's answer");
    assert_eq!(
        t0.elapsed(),
        MS * 25,
        "hedge sent at 20 ms, answered 5 ms later"
    );
    assert_eq!(calls.load(SeqCst), 2);
    assert!(slow_dropped.load(SeqCst), "the slow first call was dropped");
    let stats = breaker.stats();
    assert_eq!((stats.hedges, stats.hedges_won), (1, 1));
    assert_eq!(stats.cancelled, 1, "the loser counts as a cancelled call");
}

#[tokio::test(start_paused = true)]
async fn an_answer_before_the_delay_sends_no_hedge() {
    let breaker = hedged("hedge_layer::fast", 1);
    let svc = ServiceBuilder::new()
        .layer(HedgeLayer::new(breaker.clone()))
        .service(service_fn(|n: u32| async move {
            tokio::time::sleep(MS * 5).await;
            Ok::<_, std::io::Error>(n)
        }));
    assert_eq!(svc.oneshot(3).await.unwrap(), 3);
    assert_eq!(breaker.stats().hedges, 0);
}

/// Every attempt after the first is a fast 503, with or without `Retry-After`.
fn replicas(
    breaker: &Breaker,
    retry_after: bool,
    calls: Arc<AtomicU32>,
) -> impl Service<
    (),
    Response = http::Response<()>,
    Error = CallError<std::io::Error>,
    Future = impl Send + use<>,
> + Clone
       + use<> {
    ServiceBuilder::new()
        .layer(HedgeLayer::new(breaker.clone()))
        .service(service_fn(move |()| {
            let call = calls.fetch_add(1, SeqCst);
            async move {
                if call == 0 {
                    tokio::time::sleep(MS * 500).await;
                    return Ok::<_, std::io::Error>(http::Response::new(()));
                }
                let mut busy = http::Response::builder().status(503);
                if retry_after {
                    busy = busy.header(http::header::RETRY_AFTER, "1");
                }
                Ok(busy.body(()).unwrap())
            }
        }))
}

#[tokio::test(start_paused = true)]
async fn a_failed_hedge_sends_the_next_one_at_once() {
    let breaker = hedged("hedge_layer::503", 2);
    let calls = Arc::new(AtomicU32::new(0));
    let svc = replicas(&breaker, false, calls.clone());
    let answer = svc.oneshot(()).await.unwrap();
    assert_eq!(
        answer.status(),
        200,
        "the first attempt's answer, the hedges failed"
    );
    assert_eq!(calls.load(SeqCst), 3);
    assert_eq!(breaker.stats().hedges, 2);
}

#[tokio::test(start_paused = true)]
async fn a_hedge_answered_with_retry_after_stops_the_hedges() {
    let breaker = hedged("hedge_layer::retry_after", 2);
    let calls = Arc::new(AtomicU32::new(0));
    let svc = replicas(&breaker, true, calls.clone());
    let answer = svc.oneshot(()).await.unwrap();
    assert_eq!(answer.status(), 200, "the first attempt's answer");
    assert_eq!(calls.load(SeqCst), 2, "no hedge after the pushback");
    assert_eq!(breaker.stats().hedges, 1);
}

#[tokio::test(start_paused = true)]
async fn an_open_breaker_calls_nothing() {
    let breaker = hedged("hedge_layer::open", 1);
    breaker.handle().force_open();
    let calls = Arc::new(AtomicU32::new(0));
    let counted = calls.clone();
    let svc = ServiceBuilder::new()
        .layer(HedgeLayer::new(breaker.clone()))
        .service(service_fn(move |n: u32| {
            counted.fetch_add(1, SeqCst);
            async move { Ok::<_, std::io::Error>(n) }
        }));
    let refused = svc.oneshot(1).await;
    assert!(matches!(refused, Err(CallError::Breaker(_))));
    assert_eq!(calls.load(SeqCst), 0);
}

/// tower's own `ConcurrencyLimit` under the layer: the first attempt uses the permit its
/// `poll_ready` reserved, the hedge readies its own, and the loser's is freed when dropped.
#[tokio::test(start_paused = true)]
async fn permits_are_used_and_given_back() {
    let breaker = hedged("hedge_layer::permits", 1);
    let calls = Arc::new(AtomicU32::new(0));
    let counted = calls.clone();
    let mut svc = ServiceBuilder::new()
        .layer(HedgeLayer::new(breaker.clone()))
        .concurrency_limit(2)
        .service(service_fn(move |n: u32| {
            let call = counted.fetch_add(1, SeqCst);
            async move {
                let took = if call == 0 { 10_000 } else { 5 };
                tokio::time::sleep(MS * took).await;
                Ok::<_, std::io::Error>(n)
            }
        }));
    for n in 0..3 {
        let answer = svc.ready().await.unwrap().call(n).await;
        assert_eq!(answer.unwrap(), n);
    }
    // Only the first request's first attempt was slow: one hedge; every permit came back.
    assert_eq!(breaker.stats().hedges, 1);
    assert_eq!(calls.load(SeqCst), 4);
    let t0 = Instant::now();
    tokio::time::timeout(MS, svc.ready())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(t0.elapsed(), Duration::ZERO);
}
