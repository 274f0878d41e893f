//! Tail latency: a dependency that answers in 5 ms, except 2 % of its calls (by call index)
//! take 500 ms. Without hedging those 2 % set p99; with `hedge = 1` a call still unanswered
//! after the breaker's own p95 latency is sent again, and the first answer wins. The hedges
//! spend a budget (5 % of calls), and when the dependency is slow for *everyone* hedging
//! stops: a second attempt would not answer sooner, it would only double the load.
//!
//! ```text
//! cargo run --example tail_latency                   # 4000 calls per run, a few seconds
//! BREAKER_QUICK=1 cargo run --example tail_latency   # a few hundred, no targets checked
//! ```
//!
//! Exits non-zero when the full run misses its targets: p99 at least 10× lower with
//! hedging, at most 6 % extra load, at most 1 % when every call is slow.

use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use breaker::{Breaker, Config};

const MS: Duration = Duration::from_millis(1);
/// Unmeasured traffic before each run: the hedge delay needs 100 samples, read once a second.
const WARM: Duration = Duration::from_millis(1200);

/// The dependency: call `n` (counted across attempts, so runs compare) takes 5 ms, or
/// `slow` for every 50th call (2 %), or `slow` always when `everyone_slow`.
#[derive(Clone)]
struct Dependency {
    calls: Arc<AtomicUsize>,
    slow: Duration,
    everyone_slow: bool,
}

impl Dependency {
    fn new(slow: Duration, everyone_slow: bool) -> Self {
        Dependency {
            calls: Arc::default(),
            slow,
            everyone_slow,
        }
    }

    async fn call(&self) -> Result<(), std::io::Error> {
        let n = self.calls.fetch_add(1, Relaxed);
        let took = if self.everyone_slow || n % 50 == 49 {
            self.slow
        } else {
            5 * MS
        };
        tokio::time::sleep(took).await;
        Ok(())
    }
}

struct Run {
    p50: Duration,
    p99: Duration,
    extra_load: f64,
}

/// `requests` calls from `workers` concurrent callers through `breaker`, hedged per its
/// configuration, measured after `warm` of unmeasured traffic (the breaker reads its
/// hedge delay from the latencies it saw, again at most once a second).
async fn run(
    breaker: Breaker,
    dep: Dependency,
    requests: usize,
    workers: usize,
    warm: Duration,
) -> Run {
    let warm_until = Instant::now() + warm;
    calls(&breaker, &dep, usize::MAX, workers, Some(warm_until)).await;
    let before = dep.calls.load(Relaxed);
    let mut took = calls(&breaker, &dep, requests, workers, None).await;
    took.sort();
    let at = |q: f64| took[((took.len() as f64 * q) as usize).min(took.len() - 1)];
    let calls = dep.calls.load(Relaxed) - before;
    Run {
        p50: at(0.50),
        p99: at(0.99),
        extra_load: (calls as f64 - requests as f64) / requests as f64 * 100.0,
    }
}

/// `requests` calls (or as many as fit before `until`), with the latency of each success.
async fn calls(
    breaker: &Breaker,
    dep: &Dependency,
    requests: usize,
    workers: usize,
    until: Option<Instant>,
) -> Vec<Duration> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (breaker, dep, next) = (breaker.clone(), dep.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut took = Vec::new();
            while next.fetch_add(1, Relaxed) < requests && until.is_none_or(|t| Instant::now() < t)
            {
                let started = Instant::now();
                let answer = breaker.call_hedged(|| dep.call()).await;
                if answer.is_ok() {
                    took.push(started.elapsed());
                }
            }
            took
        }));
    }
    let mut took = Vec::new();
    for task in tasks {
        took.extend(task.await.unwrap_or_default());
    }
    took
}

fn row(name: &str, r: &Run) {
    println!(
        "{name:<34} {:>8.1} ms {:>8.1} ms {:>8.1} %",
        r.p50.as_secs_f64() * 1e3,
        r.p99.as_secs_f64() * 1e3,
        r.extra_load
    );
}

#[tokio::main]
async fn main() {
    let quick = std::env::var("BREAKER_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
    let (requests, slow_requests) = if quick { (400, 200) } else { (4000, 400) };
    let slow = 500 * MS;

    println!(
        "{:<34} {:>11} {:>11} {:>10}",
        "", "p50", "p99", "extra load"
    );
    let plain = run(
        Breaker::new("tail::plain", Config::default()),
        Dependency::new(slow, false),
        requests,
        50,
        Duration::ZERO,
    )
    .await;
    row("2 % slow, no hedging", &plain);
    let hedged = run(
        Breaker::new("tail::hedged", Config::default().hedge(1)),
        Dependency::new(slow, false),
        requests,
        50,
        WARM,
    )
    .await;
    row("2 % slow, hedge = 1", &hedged);
    let everyone = run(
        Breaker::new("tail::everyone", Config::default().hedge(1)),
        Dependency::new(slow, true),
        slow_requests,
        200,
        WARM,
    )
    .await;
    row("every call slow, hedge = 1", &everyone);

    let cut = plain.p99.as_secs_f64() / hedged.p99.as_secs_f64().max(1e-9);
    println!("\np99 {cut:.0}× lower with hedging");
    if quick {
        return;
    }
    let mut missed = Vec::new();
    if cut < 10.0 {
        missed.push(format!("p99 only {cut:.1}× lower (target 10×)"));
    }
    if hedged.extra_load > 6.0 {
        missed.push(format!(
            "extra load {:.1} % (target ≤ 6 %)",
            hedged.extra_load
        ));
    }
    if everyone.extra_load > 1.0 {
        missed.push(format!(
            "extra load {:.1} % when every call is slow (target ≤ 1 %)",
            everyone.extra_load
        ));
    }
    if !missed.is_empty() {
        eprintln!("targets missed: {}", missed.join("; "));
        std::process::exit(1);
    }
}
