//! Keyed breakers at churn (issue 20), at the sizes they exist for:
//!
//! ```text
//! cd benches && cargo bench --bench keyed_churn
//! ```
//!
//! Rows:
//! - `drop_20000_breakers`: dropping 20 000 idle `Breaker`s, each leaving the registry
//!   (target < 5 ms).
//! - `sweep_20000_idle_keys`: `KeyedBreaker::retain_active` dropping 20 000 idle keys
//!   (target < 5 ms).
//! - `new_key_sweeping_20000_idle_keys`: the new key that finds that sweep due: the caller's
//!   share of it (at most 1 024 entries looked at).
//! - `new_key_at_bound_fresh_100000`: a new key at `max_keys = 100 000` when fresh ones can
//!   go (the steady state of a stream of new keys).
//! - `new_key_at_bound_nothing_evictable_100000`: a new key at `max_keys = 100 000` when
//!   every key carries a failure streak (target < 50 µs).
//!
//! Memory and time per new key: `cargo run --release --bin keyed_memory`.

use std::{
    hint::black_box,
    time::{Duration, Instant},
};

use breaker::{Breaker, Config, KeyedBreaker};
use criterion::{criterion_group, criterion_main, Criterion};

const SWEPT: usize = 20_000;
const BOUND: usize = 100_000;

fn churn(c: &mut Criterion) {
    let mut g = c.benchmark_group("keyed_churn");
    g.sample_size(10);

    g.bench_function("drop_20000_breakers", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let all: Vec<Breaker> = (0..SWEPT)
                    .map(|i| Breaker::new(format!("bench::drop[{i}]"), Config::default()))
                    .collect();
                let t = Instant::now();
                drop(black_box(all));
                total += t.elapsed();
            }
            total
        })
    });

    g.bench_function("sweep_20000_idle_keys", |b| {
        let idle = Duration::from_millis(300);
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                // `max_keys` above the default 10 000: all 20 000 are in the map to sweep.
                let config = Config::default().idle(idle).max_keys(SWEPT);
                let k = KeyedBreaker::<u64>::new("bench::sweep", config);
                for i in 0..SWEPT as u64 {
                    let _ = k.call_sync(&i, || Ok::<_, ()>(()));
                }
                assert_eq!(k.len(), SWEPT);
                std::thread::sleep(idle + Duration::from_millis(10));
                let t = Instant::now();
                k.retain_active();
                total += t.elapsed();
                assert_eq!(k.len(), 0, "every key was idle");
            }
            total
        })
    });

    g.bench_function("new_key_sweeping_20000_idle_keys", |b| {
        let idle = Duration::from_millis(300);
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let config = Config::default().idle(idle).max_keys(SWEPT + 1);
                let k = KeyedBreaker::<u64>::new("bench::sweep_share", config);
                for i in 0..SWEPT as u64 {
                    let _ = k.call_sync(&i, || Ok::<_, ()>(()));
                }
                std::thread::sleep(idle + Duration::from_millis(10));
                let t = Instant::now();
                let _ = black_box(k.call_sync(&u64::MAX, || Ok::<_, ()>(())));
                total += t.elapsed();
                assert!(k.len() < SWEPT, "the new key swept its share");
            }
            total
        })
    });

    // Set up inside the closures: criterion runs only the ones a filter names.
    g.bench_function("new_key_at_bound_fresh_100000", |b| {
        let fresh = KeyedBreaker::<u64>::new("bench::at_bound", Config::default().max_keys(BOUND));
        for i in 0..BOUND as u64 {
            let _ = fresh.call_sync(&i, || Ok::<_, ()>(()));
        }
        let mut next = BOUND as u64;
        b.iter(|| {
            next += 1;
            fresh.call_sync(&next, || Ok::<_, ()>(()))
        })
    });

    g.bench_function("new_key_at_bound_nothing_evictable_100000", |b| {
        // Every key has one failure of a streak of 1 000: closed, but not fresh.
        let config = Config::default().threshold(1000).max_keys(BOUND);
        let stateful = KeyedBreaker::<u64>::new("bench::nothing_evictable", config);
        for i in 0..BOUND as u64 {
            let _ = stateful.call_sync(&i, || Err::<(), _>(()));
        }
        let mut next = BOUND as u64;
        b.iter(|| {
            next += 1;
            stateful.call_sync(&next, || Err::<(), _>(()))
        })
    });
    g.finish();
}

criterion_group!(benches, churn);
criterion_main!(benches);
