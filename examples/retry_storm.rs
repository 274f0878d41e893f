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
//! takes a second or two of CPU, not the minutes it plays. The dependency's failures are a
//! fixed sequence; the backoff's jitter is random, so goodput moves by a few hundredths of a
//! percent from one run to the next.
//!
//! ```text
//! cargo run --release --example retry_storm            # 30 s phases
//! cargo run --example retry_storm -- --quick           # 12 s phases (or BREAKER_QUICK=1)
//! cargo run --example retry_storm -- --plot storm.svg   # also draw the load, second by second
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
    /// Calls that reached the dependency, per second of the run (for `--plot`).
    per_second: Mutex<Vec<u64>>,
}

impl Run {
    fn phase(&self, at: Instant) -> usize {
        let i = (at - self.start).as_nanos() / self.phase_len.as_nanos();
        (i as usize).min(2)
    }

    /// One more call in this second's count.
    fn count_second(&self) {
        let second = (Instant::now() - self.start).as_secs() as usize;
        let mut per_second = self.per_second.lock().unwrap();
        if per_second.len() <= second {
            per_second.resize(second + 1, 0);
        }
        per_second[second] += 1;
    }

    /// One call to the dependency.
    async fn call(&self) -> Result<(), &'static str> {
        let phase = self.phase(Instant::now());
        self.phases[phase].load.fetch_add(1, Relaxed);
        self.count_second();
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
        per_second: Mutex::new(Vec::new()),
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
    if let Some(file) = plot_file() {
        match std::fs::write(&file, plot(&kinds, &runs, phase_len)) {
            Ok(()) => println!("\nplot written to {file}"),
            Err(e) => eprintln!("cannot write {file}: {e}"),
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

/// `--plot FILE.svg`, if given.
fn plot_file() -> Option<String> {
    let mut args = std::env::args().skip_while(|a| a != "--plot");
    args.next()?;
    args.next()
}

/// The load each client put on its dependency, second by second, over the three phases.
fn plot(kinds: &[Kind], runs: &[Arc<Run>], phase_len: Duration) -> String {
    let (w, h, pad) = (900.0, 360.0, 50.0);
    let seconds = (phase_len.as_secs() * 3) as f64;
    let series: Vec<Vec<u64>> = runs
        .iter()
        .map(|r| r.per_second.lock().unwrap().clone())
        .collect();
    let top = series.iter().flatten().copied().max().unwrap_or(1).max(1) as f64;
    let x = |s: f64| pad + s / seconds * (w - 2.0 * pad);
    let y = |v: f64| h - pad - v / top * (h - 2.0 * pad);
    let mut svg = format!(
        "<svg xmlns='http://www.w3.org/2000/svg' width='{w}' height='{h}' font-family='sans-serif' font-size='12'>\n"
    );
    for (i, (name, _)) in PHASES.iter().enumerate() {
        let x0 = x(i as f64 * phase_len.as_secs_f64());
        svg += &format!(
            "<line x1='{x0}' y1='{}' x2='{x0}' y2='{}' stroke='#ccc'/><text x='{}' y='{}'>{name}</text>\n",
            pad,
            h - pad,
            x0 + 4.0,
            pad - 6.0
        );
    }
    let offered = y(RATE as f64);
    svg += &format!(
        "<line x1='{pad}' y1='{offered}' x2='{}' y2='{offered}' stroke='#999' stroke-dasharray='4'/><text x='{}' y='{}'>offered {RATE}/s</text>\n",
        w - pad,
        w - pad - 90.0,
        offered - 4.0
    );
    for (i, ((kind, points), color)) in kinds
        .iter()
        .zip(&series)
        .zip(["#d62728", "#ff7f0e", "#2ca02c"])
        .enumerate()
    {
        let path: Vec<String> = points
            .iter()
            .enumerate()
            .map(|(s, v)| format!("{:.1},{:.1}", x(s as f64 + 0.5), y(*v as f64)))
            .collect();
        svg += &format!(
            "<polyline fill='none' stroke='{color}' stroke-width='2' points='{}'/><text x='{}' y='{}' fill='{color}'>{}</text>\n",
            path.join(" "),
            pad + 10.0,
            h - 8.0 - 14.0 * i as f64,
            kind.label()
        );
    }
    svg += &format!(
        "<text x='4' y='{}'>calls/s on the dependency (max {top})</text>\n</svg>\n",
        pad - 24.0
    );
    svg
}
