//! Hundreds of tasks on a multi-threaded runtime against a dependency that is down: after
//! the first wave, no more than `probes` calls are ever in flight at the dependency, and no
//! bulkhead lets more than `max_concurrent` through.

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering::SeqCst},
        Arc,
    },
    time::Duration,
};

use breaker_runtime::{Breaker, Config, State};

/// A dependency that is down, and watches how many calls it holds at once.
#[derive(Default)]
struct Down {
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    reached: AtomicUsize,
}

impl Down {
    async fn call(&self) -> Result<(), &'static str> {
        let now = self.in_flight.fetch_add(1, SeqCst) + 1;
        self.max_in_flight.fetch_max(now, SeqCst);
        self.reached.fetch_add(1, SeqCst);
        for _ in 0..3 {
            tokio::task::yield_now().await;
        }
        self.in_flight.fetch_sub(1, SeqCst);
        Err("connection refused")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn after_the_first_wave_at_most_probes_calls_are_in_flight() {
    const PROBES: usize = 3;
    let b = Arc::new(Breaker::new(
        "concurrency::probes",
        // A short cool-off, so the tasks below see many half-open periods; it is also the
        // probes' lease, and far longer than a call here takes, so no lease runs out.
        Config::default()
            .threshold(5)
            // 200 ms: on a loaded machine (CI beside other builds) a task's loop can take
            // tens of milliseconds, and the ratio below needs many refusals per period.
            .cool_off(Duration::from_millis(200))
            .probes(PROBES as u32),
    ));
    let down = Arc::new(Down::default());

    // The first wave: everyone calls at once while the breaker is still closed.
    let wave: Vec<_> = (0..300)
        .map(|_| {
            let (b, down) = (b.clone(), down.clone());
            tokio::spawn(async move { b.call(down.call()).await })
        })
        .collect();
    for t in wave {
        let _ = t.await.unwrap();
    }
    assert_ne!(b.state(), State::Closed);
    let first_wave = down.reached.load(SeqCst);
    down.max_in_flight.store(0, SeqCst);

    let hammer: Vec<_> = (0..300)
        .map(|_| {
            let (b, down) = (b.clone(), down.clone());
            tokio::spawn(async move {
                // Until ten half-open periods have come and gone.
                let mut calls = 0;
                while down.reached.load(SeqCst) < first_wave + 10 * PROBES {
                    let _ = b.call(down.call()).await;
                    calls += 1;
                    tokio::task::yield_now().await;
                }
                calls
            })
        })
        .collect();
    let mut calls = 0;
    for t in hammer {
        calls += t.await.unwrap();
    }
    let probes = down.reached.load(SeqCst) - first_wave;
    assert!(probes >= 10 * PROBES, "half-open admitted probes");
    assert!(
        probes * 10 < calls,
        "{probes} of {calls} calls reached a dead dependency"
    );
    let max = down.max_in_flight.load(SeqCst);
    assert!(max <= PROBES, "{max} probes in flight at once");
    assert_eq!(down.in_flight.load(SeqCst), 0);
    let s = b.stats();
    assert_eq!(s.calls as usize, 300 + calls);
    assert_eq!(s.successes, 0);
    assert_eq!(
        s.failures + s.rejected,
        s.calls,
        "every call finished or was refused"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_bulkhead_never_lets_more_than_max_concurrent_through() {
    let b = Arc::new(Breaker::new(
        "concurrency::bulkhead",
        Config::default().threshold(u32::MAX).max_concurrent(7),
    ));
    let down = Arc::new(Down::default());
    let tasks: Vec<_> = (0..200)
        .map(|_| {
            let (b, down) = (b.clone(), down.clone());
            tokio::spawn(async move {
                let mut full = 0;
                for _ in 0..50 {
                    if let Err(e) = b.call(down.call()).await {
                        full += usize::from(e.breaker_error().is_some_and(|e| e.is_full()));
                    }
                }
                full
            })
        })
        .collect();
    let mut full = 0;
    for t in tasks {
        full += t.await.unwrap();
    }
    let max = down.max_in_flight.load(SeqCst);
    assert!(max <= 7, "{max} calls in flight under a bulkhead of 7");
    assert_eq!(down.reached.load(SeqCst) + full, 200 * 50);
    assert_eq!(b.stats().rejected as usize, full);
}

/// More threads than a breaker has stripes of its own: the first threads count on stripes
/// they own (plain stores), the rest on shared ones (`fetch_add`), and not a call is lost.
#[test]
fn more_threads_than_stripes_count_every_call_exactly_once() {
    const THREADS: usize = 48;
    const CALLS: u64 = 20_000;
    let b = Breaker::new(
        "concurrency::stripes",
        Config::default().threshold(1_000_000),
    );
    let start = std::sync::Barrier::new(THREADS);
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (b, start) = (&b, &start);
            s.spawn(move || {
                start.wait(); // all alive at once, so some must share a stripe
                for i in 0..CALLS {
                    let fail = (i + t as u64).is_multiple_of(10);
                    let _ = b.call_sync(|| if fail { Err("down") } else { Ok(i) });
                }
            });
        }
    });
    let stats = b.stats();
    let total = THREADS as u64 * CALLS;
    assert_eq!(stats.calls, total);
    assert_eq!(stats.failures, total / 10);
    assert_eq!(stats.successes, total - total / 10);
    assert_eq!(stats.rejected, 0);
}
