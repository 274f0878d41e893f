//! The breaker's own probe (`Config::probe`) is bounded: one task per breaker, a probe that
//! hangs is timed out (a failed probe), one that panics is a failed probe, and a breaker whose
//! last handle is dropped takes its task with it. Paused time; tasks counted by the runtime.

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering::SeqCst},
        Arc,
    },
    time::Duration,
};

use breaker::{registry, Breaker, Config, State};

/// Probes started, and probes whose future is still alive (dropped ones count down).
#[derive(Clone, Default)]
struct Probes {
    started: Arc<AtomicUsize>,
    alive: Arc<AtomicUsize>,
}

struct Alive(Arc<AtomicUsize>);

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

impl Probes {
    /// A probe that never answers.
    fn hung(&self) -> Config {
        let p = self.clone();
        Config::default().probe(move || {
            let p = p.clone();
            async move {
                p.started.fetch_add(1, SeqCst);
                p.alive.fetch_add(1, SeqCst);
                let _alive = Alive(p.alive.clone());
                std::future::pending::<Result<(), ()>>().await
            }
        })
    }

    fn started(&self) -> usize {
        self.started.load(SeqCst)
    }

    fn alive(&self) -> usize {
        self.alive.load(SeqCst)
    }
}

/// Tasks alive on this test's runtime (the test's own future is not one).
fn tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

/// Lets spawned tasks run at the current (paused) instant.
async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

/// A probe that never returns, no `timeout`, a failing call every second for 15 minutes:
/// never more than one probe task nor one probe running, and each hung probe is a failed
/// probe after the cool-off (its lease), so the breaker reopens instead of staying
/// half-open with a probe that will never answer.
#[tokio::test(start_paused = true)]
async fn a_hung_probe_is_a_failed_probe_and_one_task_runs() {
    let probes = Probes::default();
    let b = Breaker::new(
        "probe::hung",
        probes.hung().threshold(1).cool_off(Duration::from_secs(10)),
    );
    let _ = b.call(async { Err::<(), _>("down") }).await;
    assert_eq!(b.state(), State::Open);
    settle().await;
    let (mut most_tasks, mut most_alive) = (tasks(), probes.alive());
    for _ in 0..900 {
        tokio::time::advance(Duration::from_secs(1)).await;
        settle().await;
        let _ = b.call(async { Err::<(), _>("down") }).await;
        settle().await;
        most_tasks = most_tasks.max(tasks());
        most_alive = most_alive.max(probes.alive());
    }
    assert_eq!(most_tasks, 1, "one probe task for the breaker");
    assert_eq!(most_alive, 1, "one probe running at a time");
    assert!(
        b.stats().timeouts >= 40,
        "each hung probe timed out: {:?}",
        b.stats()
    );

    drop(b);
    settle().await;
    assert_eq!((tasks(), probes.alive()), (0, 0), "gone with the breaker");

    // No traffic: the hung probe is a failure after its lease, and the breaker reopens.
    let probes = Probes::default();
    let quiet = Breaker::new(
        "probe::hung_quiet",
        probes.hung().threshold(1).cool_off(Duration::from_secs(10)),
    );
    let _ = quiet.call(async { Err::<(), _>("down") }).await;
    tokio::time::advance(Duration::from_secs(10)).await;
    settle().await;
    assert_eq!(probes.started(), 1);
    assert_eq!(quiet.state(), State::HalfOpen, "probing");
    tokio::time::advance(Duration::from_secs(10)).await;
    settle().await;
    assert_eq!(quiet.stats().timeouts, 1, "{:?}", quiet.stats());
    assert_eq!(quiet.state(), State::Open, "the hung probe failed");
    tokio::time::advance(Duration::from_secs(10)).await;
    settle().await;
    assert_eq!(probes.started(), 2, "and it probes again");
}

/// A probe bounded by the breaker's `timeout` is a failure after it, not after the lease's
/// cool-off.
#[tokio::test(start_paused = true)]
async fn a_probe_is_bounded_by_the_timeout() {
    let probes = Probes::default();
    let b = Breaker::new(
        "probe::timeout",
        probes
            .hung()
            .threshold(1)
            .cool_off(Duration::from_secs(10))
            .timeout(Duration::from_secs(2)),
    );
    let _ = b.call(async { Err::<(), _>("down") }).await;
    tokio::time::advance(Duration::from_secs(10)).await;
    settle().await;
    assert_eq!((b.state(), probes.alive()), (State::HalfOpen, 1));
    tokio::time::advance(Duration::from_secs(2)).await;
    settle().await;
    assert_eq!((b.state(), probes.alive()), (State::Open, 0));
    assert_eq!(b.stats().timeouts, 1);
}

/// The last handle dropped while its probe hangs: the probe is cancelled, the task ends,
/// the breaker is gone (no upgrade, not listed).
#[tokio::test(start_paused = true)]
async fn a_dropped_breaker_takes_its_hung_probe_and_task_with_it() {
    let probes = Probes::default();
    let b = Breaker::new(
        "probe::dropped_probing",
        probes.hung().threshold(1).cool_off(Duration::from_secs(10)),
    );
    let _ = b.call(async { Err::<(), _>("down") }).await;
    tokio::time::advance(Duration::from_secs(10)).await;
    settle().await;
    assert_eq!((probes.alive(), tasks()), (1, 1), "probing");
    let weak = b.handle().downgrade();
    drop(b);
    settle().await;
    assert!(
        weak.upgrade().is_none(),
        "the probe keeps the breaker alive"
    );
    assert!(registry().get("probe::dropped_probing").is_none());
    assert_eq!(
        (probes.alive(), tasks()),
        (0, 0),
        "the probe and its task ended"
    );
}

/// The last handle dropped during the cool-off: no task left once that cool-off is over,
/// and the probe never runs.
#[tokio::test(start_paused = true)]
async fn a_dropped_breaker_stops_its_waiting_task() {
    let probes = Probes::default();
    let b = Breaker::new(
        "probe::dropped_waiting",
        probes.hung().threshold(1).cool_off(Duration::from_secs(10)),
    );
    let _ = b.call(async { Err::<(), _>("down") }).await;
    settle().await;
    assert_eq!(tasks(), 1);
    let weak = b.handle().downgrade();
    drop(b);
    settle().await;
    assert!(weak.upgrade().is_none());
    assert!(registry().get("probe::dropped_waiting").is_none());
    tokio::time::advance(Duration::from_secs(10)).await;
    settle().await;
    assert_eq!((tasks(), probes.started()), (0, 0));
}

/// A probe that panics once is a failed probe: the breaker reopens with its backoff and
/// probes again, and the next probe's success closes it.
#[tokio::test(start_paused = true)]
async fn a_panicking_probe_is_a_failed_probe() {
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let b = Breaker::new(
        "probe::panics",
        Config::default()
            .threshold(1)
            .cool_off(Duration::from_secs(5))
            .max_cool_off(Duration::from_secs(60))
            .probe(move || {
                let first = counted.fetch_add(1, SeqCst) == 0;
                async move {
                    if first {
                        panic!("the probe's own bug");
                    }
                    Ok::<(), ()>(())
                }
            }),
    );
    let _ = b.call(async { Err::<(), _>("down") }).await;
    tokio::time::advance(Duration::from_secs(5)).await;
    settle().await;
    assert_eq!(runs.load(SeqCst), 1);
    assert_eq!(b.state(), State::Open, "the panic reopened it");
    let stats = b.stats();
    assert_eq!((stats.failures, stats.cancelled), (2, 0), "{stats:?}");
    // With its backoff: 10 s this time.
    assert_eq!(b.retry_in(), Some(Duration::from_secs(10)));
    tokio::time::advance(Duration::from_secs(10)).await;
    settle().await;
    assert_eq!(runs.load(SeqCst), 2, "probed again");
    assert_eq!(b.state(), State::Closed);
    assert_eq!(tasks(), 0, "the task ends with the opening");
}
