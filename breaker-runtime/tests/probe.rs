//! Recovery without traffic (`Config::probe`): the breaker's own probe after a cool-off, on
//! paused time.

use std::{
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst},
        Arc,
    },
    time::Duration,
};

use breaker_runtime::{Breaker, CallError, Config, KeyedBreaker, State, Verdict};
use tokio::time::{sleep, Instant};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

/// A dependency's health check: counts its runs, takes `latency`, answers `healthy`.
#[derive(Clone)]
struct Health {
    runs: Arc<AtomicUsize>,
    healthy: Arc<AtomicBool>,
    latency: Duration,
}

impl Health {
    fn new(healthy: bool, latency: Duration) -> Health {
        Health {
            runs: Arc::new(AtomicUsize::new(0)),
            healthy: Arc::new(AtomicBool::new(healthy)),
            latency,
        }
    }

    fn runs(&self) -> usize {
        self.runs.load(SeqCst)
    }

    fn probe(
        &self,
    ) -> impl Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = Verdict> + Send>>
           + Send
           + Sync
           + 'static
           + use<> {
        let h = self.clone();
        move || {
            let h = h.clone();
            Box::pin(async move {
                h.runs.fetch_add(1, SeqCst);
                sleep(h.latency).await;
                if h.healthy.load(SeqCst) {
                    Verdict::Success
                } else {
                    Verdict::Failure
                }
            })
        }
    }
}

async fn trip(b: &Breaker) {
    let r = b.call(async { Err::<(), _>("503") }).await;
    assert!(matches!(r, Err(CallError::Inner(_))));
    assert_eq!(b.state(), State::Open);
}

/// Lets the probe task run at the current instant.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

/// A recovered dependency with no traffic is closed within one cool-off plus the probe's
/// own time, by one probe, counted as a call.
#[tokio::test(start_paused = true)]
async fn a_quiet_dependency_is_closed_within_one_cool_off_plus_the_probe() {
    let health = Health::new(true, 200 * MS);
    let config = Config::default()
        .threshold(1)
        .cool_off(10 * SEC)
        .probe(health.probe());
    let b = Breaker::new("probe::quiet", config);
    let start = Instant::now();
    trip(&b).await;
    sleep(10 * SEC - MS).await;
    settle().await;
    assert_eq!(
        (b.state(), health.runs()),
        (State::Open, 0),
        "not before the cool-off"
    );
    sleep(MS).await;
    settle().await;
    assert_eq!(health.runs(), 1, "probed when the cool-off ended");
    assert_eq!(b.state(), State::HalfOpen, "while the probe runs");
    sleep(200 * MS).await;
    settle().await;
    assert_eq!(b.state(), State::Closed);
    assert_eq!(start.elapsed(), 10 * SEC + 200 * MS);
    let stats = b.stats();
    assert_eq!((stats.calls, stats.successes, stats.failures), (2, 1, 1));
    sleep(60 * SEC).await;
    assert_eq!(health.runs(), 1, "closed: no more probes");
}

/// A failing probe reopens the breaker with its backoff; each opening probes again once.
#[tokio::test(start_paused = true)]
async fn a_failing_probe_reopens_with_backoff() {
    let health = Health::new(false, Duration::ZERO);
    let config = Config::default()
        .threshold(1)
        .cool_off(10 * SEC)
        .max_cool_off(40 * SEC)
        .probe(health.probe());
    let b = Breaker::new("probe::backoff", config);
    trip(&b).await;
    sleep(10 * SEC).await;
    settle().await;
    assert_eq!((b.state(), health.runs()), (State::Open, 1));
    assert_eq!(b.retry_in(), Some(20 * SEC), "doubled");
    sleep(20 * SEC).await;
    settle().await;
    assert_eq!((b.state(), health.runs()), (State::Open, 2));
    assert_eq!(b.retry_in(), Some(40 * SEC));
    health.healthy.store(true, SeqCst);
    sleep(40 * SEC).await;
    settle().await;
    assert_eq!((b.state(), health.runs()), (State::Closed, 3));
}

/// The probe holds the lease as any probe: a call during it is refused; a call that comes
/// first probes instead, and the breaker's own probe stands down.
#[tokio::test(start_paused = true)]
async fn the_probe_holds_the_lease_like_any_probe() {
    let health = Health::new(true, SEC);
    let config = Config::default()
        .threshold(1)
        .cool_off(10 * SEC)
        .probe(health.probe());
    let b = Breaker::new("probe::lease", config);
    trip(&b).await;
    sleep(10 * SEC + 100 * MS).await;
    settle().await;
    assert_eq!(health.runs(), 1);
    let refused = b.call(async { Ok::<_, ()>(()) }).await.unwrap_err();
    assert!(refused.is_open(), "the probe slot is taken: {refused:?}");
    sleep(SEC).await;
    settle().await;
    assert_eq!(b.state(), State::Closed);

    // A call that comes when the cool-off ends is the probe.
    trip(&b).await;
    sleep(10 * SEC).await;
    let called = b.call(async { Ok::<_, ()>("user") });
    assert_eq!(called.await, Ok("user"));
    settle().await;
    assert_eq!(b.state(), State::Closed);
    assert_eq!(health.runs(), 1, "the breaker's own probe stood down");
}

/// `success_threshold`: the probe goes on probing while half-open.
#[tokio::test(start_paused = true)]
async fn success_threshold_takes_as_many_probes() {
    let health = Health::new(true, 10 * MS);
    let config = Config::default()
        .threshold(1)
        .cool_off(SEC)
        .success_threshold(3)
        .probe(health.probe());
    let b = Breaker::new("probe::success_threshold", config);
    trip(&b).await;
    sleep(SEC + 25 * MS).await;
    settle().await;
    assert_eq!((b.state(), health.runs()), (State::HalfOpen, 3));
    sleep(10 * MS).await;
    settle().await;
    assert_eq!(b.state(), State::Closed);
}

/// Opt-in: a breaker without a probe runs no task; one with a probe runs one per opening,
/// gone once the opening is decided.
#[tokio::test(start_paused = true)]
async fn only_a_breaker_with_a_probe_runs_a_task() {
    let tasks = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    let plain = Breaker::new("probe::none", Config::default().threshold(1));
    trip(&plain).await;
    assert_eq!(tasks(), 0);
    let health = Health::new(true, MS);
    let probed = Breaker::new(
        "probe::one_task",
        Config::default()
            .threshold(1)
            .cool_off(SEC)
            .probe(health.probe()),
    );
    assert_eq!(tasks(), 0, "none until it opens");
    trip(&probed).await;
    assert_eq!(tasks(), 1);
    sleep(2 * SEC).await;
    settle().await;
    assert_eq!((probed.state(), tasks()), (State::Closed, 0));
}

/// A probe given by `reconfigure` to a breaker already open probes that opening; a keyed
/// breaker refuses a probe (it would not know its key).
#[tokio::test(start_paused = true)]
async fn reconfigure_gives_a_probe_and_keyed_breakers_refuse_one() {
    let b = Breaker::new(
        "probe::reconfigured",
        Config::default().threshold(1).cool_off(SEC),
    );
    trip(&b).await;
    let health = Health::new(true, MS);
    b.reconfigure(
        Config::default()
            .threshold(1)
            .cool_off(SEC)
            .probe(health.probe()),
    )
    .unwrap();
    sleep(2 * SEC).await;
    settle().await;
    assert_eq!((b.state(), health.runs()), (State::Closed, 1));

    let probe = || async { Ok::<_, ()>(()) };
    let err = KeyedBreaker::<String>::try_new("probe::keyed", Config::default().probe(probe))
        .unwrap_err();
    assert_eq!(err.field(), "probe");
    let keyed = KeyedBreaker::<String>::new("probe::keyed2", Config::default());
    assert_eq!(
        keyed
            .reconfigure(Config::default().probe(probe))
            .unwrap_err()
            .field(),
        "probe"
    );
}

/// A probe that panics is a failed probe: its slot is given back by the reopening (the
/// lease does not have to run out), and the next cool-off probes again.
#[tokio::test(start_paused = true)]
async fn a_panicking_probe_gives_its_slot_back() {
    let runs = Arc::new(AtomicUsize::new(0));
    let seen = runs.clone();
    let config = Config::default().threshold(1).cool_off(SEC).probe(move || {
        let seen = seen.clone();
        async move {
            let run = seen.fetch_add(1, SeqCst) + 1;
            tokio::task::yield_now().await;
            if run == 1 {
                panic!("the health check panicked");
            }
            Verdict::Success
        }
    });
    let b = Breaker::new("probe::panics", config);
    trip(&b).await;
    sleep(SEC).await;
    settle().await;
    assert_eq!(runs.load(SeqCst), 1);
    assert_eq!(b.state(), State::Open, "the panic is a failure: reopened");
    assert_eq!(b.stats().cancelled, 0, "not a cancellation");
    sleep(b.handle().retry_in().unwrap_or(SEC) + SEC).await;
    settle().await;
    assert_eq!(runs.load(SeqCst), 2, "the next cool-off probes again");
    assert_eq!(b.state(), State::Closed);
}
