//! # retry_storm: retries that make an outage worse, and retries that do not
//!
//! Every client retries, and a naive retry multiplies the load on a dependency exactly when it
//! is weakest: at 100 % failure three attempts per request are three times the load. This
//! program plays one dependency's bad day behind three clients that offer the same load:
//!
//! * the dependency: in process, 10 ms per call, failing **10 %** of its calls for a phase,
//!   then **100 %**, then **recovered** (0 %); each client has its own copy, so each one's
//!   load is its own;
//! * the offered load: 500 requests a second per client, each request a task;
//! * three clients, all making at most 3 attempts with the same backoff (100 ms doubling,
//!   ±20 % jitter, `breaker::retry::delay`):
//!   - **naive**: retries every failure, no budget, no breaker;
//!   - **budget only**: `Config::retry(3)` on a breaker that never opens (`threshold` at its
//!     maximum): the retry budget alone (20 % of first attempts over 10 s, plus 10 a second);
//!   - **budget + breaker**: `Config::retry(3)` on a breaker that opens at a 50 % failure
//!     rate over 5 s (`min_calls = 20`, `cool_off = "2s"`): what a service would deploy.
//!
//! The clock is tokio's paused clock: time advances only when every task waits, so the run
//! is the same on any machine, and takes a second or two of CPU, not the minutes it plays.
//!
//! ```text
//! cargo run --release --example retry_storm            # 30 s phases
//! cargo run --example retry_storm -- --quick           # 12 s phases (or BREAKER_QUICK=1)
//! ```
//!
//! It prints, per phase and client: the offered load (first attempts a second), the load on
//! the dependency (calls that reached it a second) and its ratio to the offered load, the
//! goodput (requests answered `Ok`), and the p50/p99 of a request's latency, retries included.
//! It exits non-zero unless the targets hold: at 100 % failure the budget + breaker client's
//! load is at most 1.2× its offered load (naive: 3×), and at 10 % failure its goodput is
//! within 1 % of the naive client's.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use breaker::{Breaker, Config};
use tokio::time::Instant;

/// Requests a second each client offers.
const RATE: u64 = 500;
/// How long the dependency takes per call.
const LATENCY: Duration = Duration::from_millis(10);
/// The failure rate of each phase, in percent.
const PHASES: [(&str, u64); 3] = [
    ("10 % failing", 10),
    ("100 % failing", 100),
    ("recovered", 0),
];
const ATTEMPTS: u32 = 3;

/// Counts of one client in one phase.
#[derive(Default)]
struct Phase {
    offered: AtomicU64,
    load: AtomicU64,
    good: AtomicU64,
    latencies: Mutex<Vec<Duration>>,
}

/// A client's run: its dependency's counts and its requests', per phase.
struct Run {
    start: Instant,
    phase_len: Duration,
    phases: [Phase; 3],
    /// The dependency's draws: a counter hashed (splitmix64), the same sequence for all.
    draws: AtomicU64,
}

impl Run {
    fn phase(&self, at: Instant) -> usize {
        let i = (at - self.start).as_nanos() / self.phase_len.as_nanos();
        (i as usize).min(2)
    }

    /// One call to the dependency.
    async fn call(&self) -> Result<(), &'static str> {
        let phase = self.phase(Instant::now());
        self.phases[phase].load.fetch_add(1, Relaxed);
        tokio::time::sleep(LATENCY).await;
        let mut x = self
            .draws
            .fetch_add(1, Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^= x >> 31;
        if x % 100 < PHASES[phase].1 {
            Err("503")
        } else {
            Ok(())
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Naive,
    BudgetOnly,
    BudgetAndBreaker,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Naive => "naive (3 attempts)",
            Kind::BudgetOnly => "budget only",
            Kind::BudgetAndBreaker => "budget + breaker",
        }
    }
}

/// One request of `kind`'s client: its attempts, as that client makes them.
async fn request(kind: Kind, run: &Run, breaker: &Breaker) -> bool {
    match kind {
        Kind::Naive => {
            for n in 1..=ATTEMPTS {
                if run.call().await.is_ok() {
                    return true;
                }
                if n < ATTEMPTS {
                    tokio::time::sleep(breaker::retry::delay(Duration::from_millis(100), n)).await;
                }
            }
            false
        }
        Kind::BudgetOnly | Kind::BudgetAndBreaker => {
            breaker.call_retried(|| run.call()).await.is_ok()
        }
    }
}

async fn client(kind: Kind, phase_len: Duration) -> Arc<Run> {
    let config = Config::default().retry(ATTEMPTS);
    let config = match kind {
        Kind::BudgetAndBreaker => config
            .failure_rate(50)
            .window_duration(Duration::from_secs(5))
            .min_calls(20)
            .cool_off(Duration::from_secs(2)),
        _ => config.threshold(u32::MAX),
    };
    let breaker = Breaker::new(format!("retry_storm::{}", kind.label()), config);
    let run = Arc::new(Run {
        start: Instant::now(),
        phase_len,
        phases: Default::default(),
        draws: AtomicU64::new(0),
    });
    let mut tick = tokio::time::interval(Duration::from_secs(1) / RATE as u32);
    let end = run.start + phase_len * 3;
    let mut tasks = tokio::task::JoinSet::new();
    while tick.tick().await < end {
        let (run, breaker) = (run.clone(), breaker.clone());
        tasks.spawn(async move {
            let start = Instant::now();
            let phase = &run.phases[run.phase(start)];
            phase.offered.fetch_add(1, Relaxed);
            if request(kind, &run, &breaker).await {
                phase.good.fetch_add(1, Relaxed);
            }
            phase.latencies.lock().unwrap().push(start.elapsed());
        });
        // Reap finished requests as we go, so the set stays small.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    let s = breaker.stats();
    println!(
        "{:<20} breaker: {} calls, {} refused, {} retries, {} retries denied",
        kind.label(),
        s.calls,
        s.rejected,
        s.retries,
        s.retries_denied
    );
    run
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    let quick = std::env::var_os("BREAKER_QUICK").is_some_and(|v| !v.is_empty() && v != "0")
        || std::env::args().any(|a| a == "--quick");
    let phase_len = Duration::from_secs(if quick { 12 } else { 30 });
    let kinds = [Kind::Naive, Kind::BudgetOnly, Kind::BudgetAndBreaker];
    let mut runs = Vec::new();
    for kind in kinds {
        runs.push(client(kind, phase_len).await);
    }
    let secs = phase_len.as_secs_f64();
    // [phase][client] = (load ratio, goodput share)
    let mut table = [[(0.0, 0.0); 3]; 3];
    for (p, (name, _)) in PHASES.iter().enumerate() {
        println!("\n{name} ({} s)", phase_len.as_secs());
        println!(
            "  {:<20} {:>9} {:>9} {:>6} {:>9} {:>8} {:>8}",
            "client", "offered/s", "load/s", "load×", "goodput", "p50", "p99"
        );
        for (c, (kind, run)) in kinds.iter().zip(&runs).enumerate() {
            let phase = &run.phases[p];
            let offered = phase.offered.load(Relaxed) as f64;
            let load = phase.load.load(Relaxed) as f64;
            let good = phase.good.load(Relaxed) as f64;
            let mut lat = phase.latencies.lock().unwrap().clone();
            lat.sort();
            let (ratio, goodput) = (load / offered.max(1.0), good / offered.max(1.0));
            table[p][c] = (ratio, goodput);
            println!(
                "  {:<20} {:>9.0} {:>9.0} {:>6.2} {:>8.2}% {:>8?} {:>8?}",
                kind.label(),
                offered / secs,
                load / secs,
                ratio,
                goodput * 100.0,
                percentile(&lat, 0.5),
                percentile(&lat, 0.99),
            );
        }
    }
    let outage = table[1][2].0;
    let (naive_good, budget_good) = (table[0][0].1, table[0][2].1);
    println!("\ntargets:");
    let load_ok = outage <= 1.2;
    println!(
        "  at 100 % failure, budget + breaker load {outage:.2}× offered (≤ 1.2×; naive {:.2}×, budget only {:.2}×): {}",
        table[1][0].0,
        table[1][1].0,
        if load_ok { "met" } else { "MISSED" }
    );
    let good_ok = naive_good - budget_good <= 0.01;
    println!(
        "  at 10 % failure, goodput {:.2}% against naive {:.2}% (within 1 %): {}",
        budget_good * 100.0,
        naive_good * 100.0,
        if good_ok { "met" } else { "MISSED" }
    );
    if !(load_ok && good_ok) {
        std::process::exit(1);
    }
}
