//! `CircuitBreakerLayer::ready_when_closed` wakes a waiting `poll_ready` at once on every
//! change that makes the breaker admit: a reset, a probe's success, a fleet's closing,
//! `disable`, a reconfiguration; not at the old deadline. Paused time, futures polled by hand
//! with a waker that counts its wakes; and tower's own p2c balancer over two endpoints.
#![cfg(feature = "tower")]

use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    sync::{
        atomic::{AtomicUsize, Ordering::SeqCst},
        Arc,
    },
    task::{Context, Poll, Wake, Waker},
    time::Duration,
};

use breaker::{tower::CircuitBreakerLayer, Breaker, Config, State, Transition};
use breaker_runtime::FleetLink;
use tower::{
    balance::p2c::Balance,
    discover::ServiceList,
    load::{CompleteOnResponse, PendingRequests},
    service_fn, Layer, Service, ServiceExt,
};

/// Counts its wakes.
#[derive(Default)]
struct Wakes(AtomicUsize);

impl Wake for Wakes {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// A future polled by hand with a waker that counts.
struct Polled<F> {
    fut: F,
    wakes: Arc<Wakes>,
}

impl<F: Future + Unpin> Polled<F> {
    fn new(fut: F) -> Self {
        Polled {
            fut,
            wakes: Arc::default(),
        }
    }

    fn poll(&mut self) -> Poll<F::Output> {
        let waker = Waker::from(self.wakes.clone());
        Pin::new(&mut self.fut).poll(&mut Context::from_waker(&waker))
    }

    fn woken(&self) -> usize {
        self.wakes.0.load(SeqCst)
    }
}

/// A service of `ready_when_closed` over one that answers `Ok(())` after `takes`.
fn service(
    breaker: &Breaker,
    takes: Duration,
) -> impl Service<(), Response = (), Error = breaker::CallError<Infallible>, Future: Send + 'static>
       + Clone
       + Send
       + 'static
       + use<> {
    CircuitBreakerLayer::new(breaker.clone())
        .ready_when_closed()
        .layer(service_fn(move |()| async move {
            tokio::time::sleep(takes).await;
            Ok::<_, Infallible>(())
        }))
}

fn opened(name: &str, config: Config) -> Breaker {
    let b = Breaker::new(name, config.threshold(1).cool_off(Duration::from_secs(60)));
    let _ = b.call_sync(|| Err::<(), _>("down"));
    assert_eq!(b.state(), State::Open);
    b
}

/// Lets the runtime run what was woken, at the current (paused) instant.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

/// Pending while open; `change` at 1 s wakes it at once, and it is ready.
async fn woken_at_once_by(b: &Breaker, change: impl FnOnce()) {
    let mut svc = service(b, Duration::ZERO);
    let mut ready = Polled::new(svc.ready());
    assert!(
        ready.poll().is_pending(),
        "pending while the breaker refuses"
    );
    tokio::time::advance(Duration::from_secs(1)).await;
    assert_eq!(ready.woken(), 0);
    change();
    assert_eq!(ready.woken(), 1, "woken at once, not at the old deadline");
    assert!(matches!(ready.poll(), Poll::Ready(Ok(_))));
}

#[tokio::test(start_paused = true)]
async fn a_reset_wakes_poll_ready_at_once() {
    let b = opened("ready::reset", Config::default());
    woken_at_once_by(&b, || b.handle().reset()).await;
}

#[tokio::test(start_paused = true)]
async fn disable_wakes_poll_ready_at_once_open_or_forced_open() {
    let b = opened("ready::disable", Config::default());
    woken_at_once_by(&b, || b.handle().disable()).await;
    b.handle().force_open();
    woken_at_once_by(&b, || b.handle().disable()).await;
}

#[tokio::test(start_paused = true)]
async fn a_reconfiguration_to_a_dry_run_wakes_poll_ready_at_once() {
    let b = opened("ready::dry_run", Config::default());
    woken_at_once_by(&b, || {
        b.reconfigure(Config::default().dry_run(true)).unwrap();
    })
    .await;
}

struct Member(u64);

impl FleetLink for Member {
    fn member(&self) -> u64 {
        self.0
    }
    fn wanted(&self) {}
    fn transition(&self, _: &Transition) {}
}

#[tokio::test(start_paused = true)]
async fn a_fleets_closing_wakes_poll_ready_at_once() {
    let b = opened("ready::fleet", Config::default());
    b.handle().fleet_attach(Box::new(Member(7)));
    woken_at_once_by(&b, || b.handle().fleet_close(7)).await;
}

/// One clone's request is the probe (it takes 50 ms); another clone waits, every probe
/// slot being leased: the probe's success wakes it at once, not at the lease's end.
#[tokio::test(start_paused = true)]
async fn a_probes_success_wakes_the_other_clones_at_once() {
    let b = opened("ready::probe", Config::default());
    let svc = service(&b, Duration::from_millis(50));
    tokio::time::advance(Duration::from_secs(60)).await;
    let probe = tokio::spawn(svc.clone().oneshot(()));
    settle().await;
    assert_eq!(b.state(), State::HalfOpen);
    let mut other = svc.clone();
    let mut ready = Polled::new(other.ready());
    assert!(ready.poll().is_pending(), "the one probe slot is leased");
    tokio::time::advance(Duration::from_millis(50)).await;
    probe.await.unwrap().unwrap();
    assert_eq!(b.state(), State::Closed);
    assert_eq!(ready.woken(), 1, "woken by the probe's success");
    assert!(matches!(ready.poll(), Poll::Ready(Ok(_))));
}

/// A service dropped while it waits leaves nothing behind: later changes wake no one and
/// a new waiter still works.
#[tokio::test(start_paused = true)]
async fn a_dropped_waiter_is_forgotten() {
    let b = opened("ready::dropped", Config::default());
    let wakes = {
        let mut svc = service(&b, Duration::ZERO);
        let mut ready = Polled::new(svc.ready());
        assert!(ready.poll().is_pending());
        ready.wakes.clone()
    };
    b.handle().reset();
    assert_eq!(wakes.0.load(SeqCst), 0, "a dropped waiter is not woken");
    let _ = b.call_sync(|| Err::<(), _>("down"));
    woken_at_once_by(&b, || b.handle().reset()).await;
}

/// tower's p2c over two endpoints, both open (60 s): the balancer is pending; a reset of one
/// wakes it at once and it sends there.
#[tokio::test(start_paused = true)]
async fn p2c_takes_a_reset_endpoint_at_once() {
    let a = opened("ready::p2c_a", Config::default());
    let b = opened("ready::p2c_b", Config::default());
    let endpoints = [&a, &b].map(|breaker| {
        PendingRequests::new(
            service(breaker, Duration::ZERO),
            CompleteOnResponse::default(),
        )
    });
    let mut balance = Balance::new(ServiceList::new(endpoints));
    let mut ready = Polled::new(balance.ready());
    assert!(ready.poll().is_pending(), "no endpoint admits");
    tokio::time::advance(Duration::from_secs(1)).await;
    b.handle().reset();
    assert!(ready.woken() >= 1, "the balancer is woken by the reset");
    assert!(matches!(ready.poll(), Poll::Ready(Ok(_))));
    balance.call(()).await.unwrap();
    assert_eq!(b.stats().successes, 1, "sent to the reset endpoint");
    assert_eq!(a.stats().calls, 1, "the open one is spared");
}
