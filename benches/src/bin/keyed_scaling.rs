//! Two threads on one key against one thread, on a loaded machine (issue 20: two threads on
//! one shared key cost at most 1.5× one thread):
//!
//! ```text
//! cd benches && cargo run --release --bin keyed_scaling
//! ```
//!
//! The `keyed/two_threads_*` rows of `--bench keyed` measure the same calls, but one
//! criterion row after another: on a machine that other builds share, the load moves between
//! rows, and a two-thread row that runs while a third process holds a core looks slow. Here
//! the three workloads take turns in short rounds (each thread makes `CALLS` blocking
//! calls of `KeyedBreaker<String>`, one key of 1 000), and each thread reads how long it
//! was on a CPU (`/proc/thread-self/schedstat`, nanoseconds). Only runs in which every
//! thread was on a CPU for at least 90 % of its wall time count: two threads that took
//! turns on one core would hide the contention, and two that waited for a core would show
//! the load. Printed: per row, the median and the best time per call per thread over the
//! counted runs, and their ratios to one thread. `two_threads_distinct` is the control: two
//! threads that share nothing in the map.

use std::{
    hint::black_box,
    sync::Barrier,
    time::{Duration, Instant},
};

use breaker::{Config, KeyedBreaker};

const CALLS: u64 = 200_000;
/// Runs of each row counted at least, unless `ROUNDS` rounds come first.
const COUNTED: usize = 15;
const ROUNDS: usize = 2_000;

/// Nanoseconds this thread has spent on a CPU.
fn on_cpu() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Per-thread time per call (the slower thread's), if every thread held a CPU for 90 % of
/// its wall time.
fn run(k: &KeyedBreaker<String>, keys: &[&str]) -> Option<f64> {
    let start = Barrier::new(keys.len());
    let times: Vec<(Duration, u64)> = std::thread::scope(|s| {
        let handles: Vec<_> = keys
            .iter()
            .map(|key| {
                let start = &start;
                s.spawn(move || {
                    start.wait();
                    let cpu = on_cpu();
                    let t = Instant::now();
                    for _ in 0..CALLS {
                        let r = k.call_sync(black_box(*key), || Ok::<_, ()>(1));
                        black_box(r.is_ok());
                    }
                    (t.elapsed(), on_cpu() - cpu)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("no panic"))
            .collect()
    });
    let held = times
        .iter()
        .all(|(wall, cpu)| *cpu as f64 >= 0.9 * wall.as_nanos() as f64);
    let max = times
        .into_iter()
        .map(|(wall, _)| wall)
        .max()
        .unwrap_or_default();
    held.then(|| max.as_secs_f64() * 1e9 / CALLS as f64)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let hosts: Vec<String> = (0..1000).map(|i| format!("customer-{i}.example")).collect();
    let k = KeyedBreaker::<String>::new("bench::scaling", Config::default());
    for h in &hosts {
        let _ = k.call_sync(h.as_str(), || Ok::<_, ()>(()));
    }
    let key = hosts[17].as_str();
    let rows: [(&str, Vec<&str>); 3] = [
        ("one_thread", vec![key]),
        (
            "two_threads_distinct",
            vec![hosts[1].as_str(), hosts[2].as_str()],
        ),
        ("two_threads_shared", vec![key, key]),
    ];
    // Warm-up: the stripes of the shared key are made on a second thread's first count.
    for (_, keys) in &rows {
        run(&k, keys);
    }
    let mut times = vec![Vec::new(); rows.len()];
    let mut rounds = 0;
    while rounds < ROUNDS && times.iter().any(|t| t.len() < COUNTED) {
        for (i, (_, keys)) in rows.iter().enumerate() {
            times[i].extend(run(&k, keys));
        }
        rounds += 1;
    }
    if times.iter().any(Vec::is_empty) {
        println!("no run held its CPUs: the machine is too loaded to tell");
        return;
    }
    let best = |i: usize| times[i].iter().copied().fold(f64::INFINITY, f64::min);
    let med = |i: usize| median(times[i].clone());
    for (i, (row, _)) in rows.iter().enumerate() {
        println!(
            "{row:22} {:3} of {rounds} runs counted; median {:6.1} ns, best {:6.1} ns per call per thread; ÷ one_thread: {:.2}× (medians), {:.2}× (best)",
            times[i].len(),
            med(i),
            best(i),
            med(i) / med(0),
            best(i) / best(0),
        );
    }
}
