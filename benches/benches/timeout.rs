//! What a `timeout` costs an async call, by whether the call has to wait: ready at its first
//! poll, or pending once (a `yield_now`) and then ready. Without a timeout, and with one.
//!
//! ```text
//! cd benches && cargo bench --bench timeout
//! ```
//!
//! The call future makes its timer only when a timed call waits (a boxed `Sleep`, due a
//! `timeout` after admission); a call ready at once reads the clock for its deadline and makes
//! no timer. Before that change, every timed call built a `Sleep` inline at admission (the
//! future was 224 bytes instead of 120). Run this bench at both commits to compare.

use std::{io, time::Duration};

use breaker::{Breaker, Config};
use breaker_bench::{async_loop, current_thread};
use common::group;
use criterion::{criterion_group, criterion_main, Criterion};

mod common;

async fn ready(x: u64) -> Result<u64, io::Error> {
    Ok(x)
}

async fn waits_once(x: u64) -> Result<u64, io::Error> {
    tokio::task::yield_now().await;
    Ok(x)
}

fn timeout(c: &mut Criterion) {
    let rt = current_thread();
    let untimed = Breaker::new("bench::timeout::untimed", Config::default());
    let timed = Breaker::new(
        "bench::timeout::timed",
        Config::default().timeout(Duration::from_secs(1)),
    );
    let mut g = group(c, "timeout");
    g.bench_function("untimed_ready", |b| {
        b.iter_custom(|n| async_loop(&rt, n, |x| untimed.call(ready(x))))
    });
    g.bench_function("timed_ready", |b| {
        b.iter_custom(|n| async_loop(&rt, n, |x| timed.call(ready(x))))
    });
    g.bench_function("untimed_waits", |b| {
        b.iter_custom(|n| async_loop(&rt, n, |x| untimed.call(waits_once(x))))
    });
    g.bench_function("timed_waits", |b| {
        b.iter_custom(|n| async_loop(&rt, n, |x| timed.call(waits_once(x))))
    });
    g.finish();
}

criterion_group!(benches, timeout);
criterion_main!(benches);
