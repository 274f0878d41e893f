//! A keyed call for a key that has its breaker, against an unkeyed call and against the bare
//! lookup in the maps a keyed breaker could be built on; one thread, then two threads on
//! distinct keys and on one shared key:
//!
//! ```text
//! cd benches && cargo bench --bench keyed
//! ```
//!
//! Rows (one blocking call each, always a success):
//! - `unkeyed`: `Breaker::call_sync`.
//! - `keyed_str`: `KeyedBreaker<String>::call_sync("customer-17.example", …)`, one of 1 000
//!   keys.
//! - `keyed_u64`: `KeyedBreaker<u64>` with an integer key.
//! - `lookup_std_rwlock_hashmap`: the lookup alone in a `RwLock<HashMap<String, Breaker>>`
//!   (one lock for every key; the same read-lock and `Arc` clone as ours).
//! - `lookup_std_hashmap`: the lookup alone in a plain `HashMap<String, Breaker>` (no lock at
//!   all: the floor of any map).
//! - `one_thread` / `two_threads_distinct` / `two_threads_shared`: per-thread time per call
//!   (the slower thread's time for its calls), with one thread, then with two threads calling
//!   at once on two different keys or on one key, all through the same spawn-and-barrier
//!   harness: `two_threads_* ÷ one_thread` is the per-thread slowdown (`report` prints it).

use std::{
    collections::HashMap,
    hint::black_box,
    sync::{Barrier, RwLock},
    time::{Duration, Instant},
};

use breaker::{Breaker, Config, KeyedBreaker};
use criterion::{criterion_group, criterion_main, Criterion};

const KEYS: usize = 1000;

fn hosts() -> Vec<String> {
    (0..KEYS).map(|i| format!("customer-{i}.example")).collect()
}

fn keyed(c: &mut Criterion) {
    let mut g = c.benchmark_group("keyed");
    let unkeyed = Breaker::new("bench::unkeyed", Config::default());
    g.bench_function("unkeyed", |b| {
        b.iter(|| unkeyed.call_sync(|| Ok::<_, ()>(black_box(1))))
    });

    let hosts = hosts();
    let by_host = KeyedBreaker::<String>::new("bench::keyed", Config::default());
    for h in &hosts {
        let _ = by_host.call_sync(h.as_str(), || Ok::<_, ()>(()));
    }
    let key = hosts[17].as_str();
    g.bench_function("keyed_str", |b| {
        b.iter(|| by_host.call_sync(black_box(key), || Ok::<_, ()>(black_box(1))))
    });

    let by_id = KeyedBreaker::<u64>::new("bench::keyed_u64", Config::default());
    for i in 0..KEYS as u64 {
        let _ = by_id.call_sync(&i, || Ok::<_, ()>(()));
    }
    g.bench_function("keyed_u64", |b| {
        b.iter(|| by_id.call_sync(black_box(&17), || Ok::<_, ()>(black_box(1))))
    });

    let plain: HashMap<String, Breaker> = hosts
        .iter()
        .map(|h| (h.clone(), Breaker::new("bench::std", Config::default())))
        .collect();
    let locked = RwLock::new(plain.clone());
    g.bench_function("lookup_std_rwlock_hashmap", |b| {
        b.iter(|| black_box(locked.read().unwrap().get(black_box(key)).cloned()))
    });
    g.bench_function("lookup_std_hashmap", |b| {
        b.iter(|| black_box(plain.get(black_box(key)).cloned()))
    });

    let rows: [(&str, &[&str]); 3] = [
        ("one_thread", &[key]),
        (
            "two_threads_distinct",
            &[hosts[1].as_str(), hosts[2].as_str()],
        ),
        ("two_threads_shared", &[key, key]),
    ];
    for (row, keys) in rows {
        g.bench_function(row, |b| {
            b.iter_custom(|iters| {
                let start = Barrier::new(keys.len());
                let times: Vec<Duration> = std::thread::scope(|s| {
                    let handles: Vec<_> = keys
                        .iter()
                        .map(|k| {
                            let (by_host, start) = (&by_host, &start);
                            s.spawn(move || {
                                start.wait();
                                let t = Instant::now();
                                for _ in 0..iters {
                                    let r = by_host.call_sync(black_box(*k), || Ok::<_, ()>(1));
                                    black_box(r.is_ok());
                                }
                                t.elapsed()
                            })
                        })
                        .collect();
                    handles.into_iter().map(|h| h.join().unwrap()).collect()
                });
                // Per-thread cost: the slower thread's time for its `iters` calls.
                times.into_iter().max().unwrap()
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = keyed
}
criterion_main!(benches);
