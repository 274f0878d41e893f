//! The per-call cost of part three's overload algorithms, alone (before the engine is wired
//! to them), on one thread and on two threads sharing one breaker's state:
//!
//! ```text
//! cd benches && cargo bench --bench overload
//! ```
//!
//! Rows:
//! - `throttle`: `Throttle::should_refuse` with a fresh per-thread draw, then
//!   `record_answer` (an admitted call that succeeded), on a window that
//!   holds calls (so the formula is computed, not short-cut).
//! - `ramp_idle`: `Ramp::active` on a breaker with no ramp in progress (what every call of a
//!   breaker with `ramp` pays outside a ramp).
//! - `ramp_ramping`: `Ramp::should_refuse` with a draw, during a ramp.
//! - `limit`: `Limiter::try_acquire` then `release` with an RTT sample.
//!
//! `*_1_thread` / `*_2_threads`: per-thread time per call (the slower thread's), two threads
//! on the same state; `2_threads ÷ 1_thread` is the contention's cost.
//!
//! The module is crate-private in `breaker-runtime`, so this bench compiles its source here,
//! file by file, with the two facades they use (`clock::Nanos`, `sync`) as in the crate.

use std::{
    hint::black_box,
    sync::Barrier,
    time::{Duration, Instant},
};

use criterion::{criterion_group, criterion_main, Criterion};

#[allow(dead_code)]
mod clock {
    pub(crate) type Nanos = u64;
}

#[allow(unused_imports, dead_code)]
mod sync {
    pub(crate) use std::sync::{
        atomic::{AtomicU32, AtomicU64, Ordering},
        Mutex,
    };

    /// The runtime's `sync::lock`: a poisoned lock is still the data.
    pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

// The files, not `mod.rs`: benches build with `cfg(test)`, which would pull in its tests.
#[allow(dead_code, unused_imports)]
#[path = "../../breaker-runtime/src/overload"]
mod overload {
    pub(crate) mod limit;
    pub(crate) mod ramp;
    pub(crate) mod random;
    pub(crate) mod throttle;
    pub(crate) mod vegas;
}

use overload::{
    limit::{Limiter, Sample},
    ramp::Ramp,
    random::draw,
    throttle::Throttle,
};

const S: u64 = 1_000_000_000;

/// Per-thread time for `iters` calls of `call(i)` on `threads` threads started together.
fn on_threads(threads: usize, iters: u64, call: &(dyn Fn(u64) + Sync)) -> Duration {
    let start = Barrier::new(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    let t = Instant::now();
                    for i in 0..iters {
                        call(i);
                    }
                    t.elapsed()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .max()
            .unwrap()
    })
}

fn overload(c: &mut Criterion) {
    let mut g = c.benchmark_group("overload");

    let throttle = Throttle::new(2.0, 90, 60 * S);
    for _ in 0..1000 {
        throttle.record_answer(S, true);
    }
    let now = 2 * S;
    let throttle_call = |_: u64| {
        if throttle.should_refuse(black_box(now), draw()) {
            throttle.record_request(now);
        } else {
            throttle.record_answer(now, true);
        }
    };

    let idle = Ramp::new(30 * S);
    let idle_call = |_: u64| {
        black_box(idle.active());
    };
    let ramping = Ramp::new(30 * S);
    ramping.start(0);
    let ramping_call = |_: u64| {
        black_box(ramping.should_refuse(black_box(10 * S), draw()));
    };

    let limiter = Limiter::new(1000);
    // Time moves 1 µs per call, so windows close and Vegas runs as it would.
    let limit_call = |i: u64| {
        if let Ok(permit) = limiter.try_acquire(i * 1000) {
            limiter.release(permit, i * 1000 + 500, Sample::Answered);
        }
    };

    let rows: [(&str, &(dyn Fn(u64) + Sync)); 4] = [
        ("throttle", &throttle_call),
        ("ramp_idle", &idle_call),
        ("ramp_ramping", &ramping_call),
        ("limit", &limit_call),
    ];
    for (name, call) in rows {
        for threads in [1, 2] {
            let row = if threads == 1 {
                format!("{name}_1_thread")
            } else {
                format!("{name}_2_threads")
            };
            g.bench_function(row, |b| {
                b.iter_custom(|iters| on_threads(threads, iters, call))
            });
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = overload
}
criterion_main!(benches);
