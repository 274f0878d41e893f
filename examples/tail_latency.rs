//! Tail latency: a dependency that answers in 5 ms, except 2 % of its calls (by call index)
//! take 500 ms. Without hedging those 2 % set p99; with `hedge = 1` a call still unanswered
//! after the breaker's own p95 latency is sent again, and the first answer wins. The hedges
//! spend a budget (5 % of calls), and when the dependency is slow for *everyone* hedging
//! stops: a second attempt would not answer sooner, it would only double the load.
//!
//! On the same runs, tower's own `tower::hedge` (p95 of the last period, 100 data points
//! first, as the breaker's default): it cuts the tail as far, with no budget and no notion of
//! a dependency slow for everyone. When every call is slow from the start, its p95 is the
//! call's own time, so its hedge fires (if at all) as the answer arrives: it is the delay, not
//! a rule, that keeps its load down there. Its latency histogram holds the *previous* period only, so it is given a 1 s period (with
//! tower's usual 10 s it would not have hedged by the end of these runs).
//!
//! ```text
//! cargo run --example tail_latency                   # 4000 calls per run, a few seconds
//! BREAKER_QUICK=1 cargo run --example tail_latency   # a few hundred, no targets checked
//! ```
//!
//! Last, the dependency turns slow for every call right after a fast warm-up (the window is
//! still full of fast samples, the budget saved up): `hedge = 1` pauses after
//! [`OVERDUE_IN_A_ROW`](breaker::hedge::OVERDUE_IN_A_ROW) calls in a row overdue, tower's
//! hedges every call its p95 of the last second lets through.
//!
//! Exits non-zero when the full run misses its targets: p99 at least 10× lower with
//! hedging, at most 6 % extra load, at most 1 % when every call is slow (from the start, or
//! after the warm-up).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use breaker::{Breaker, Config};
use tower::ServiceExt;

const MS: Duration = Duration::from_millis(1);
/// Unmeasured traffic before each run: the hedge delay needs 100 samples, read once a second.
const WARM: Duration = Duration::from_millis(1200);

/// The dependency: call `n` (counted across attempts, so runs compare) takes 5 ms, or
/// `slow` for every 50th call (2 %), or `slow` always when `everyone_slow` (from the start,
/// or, when `turns_slow`, once the warm-up is over).
#[derive(Clone)]
struct Dependency {
    calls: Arc<AtomicUsize>,
    slow: Duration,
    everyone_slow: Arc<AtomicBool>,
    turns_slow: bool,
}

impl Dependency {
    fn new(slow: Duration, everyone_slow: bool) -> Self {
        Dependency {
            calls: Arc::default(),
            slow,
            everyone_slow: Arc::new(AtomicBool::new(everyone_slow)),
            turns_slow: false,
        }
    }

    /// 2 % slow during the warm-up, then slow for every call.
    fn turning_slow(slow: Duration) -> Self {
        Dependency {
            turns_slow: true,
            ..Dependency::new(slow, false)
        }
    }

    async fn call(&self) -> Result<(), std::io::Error> {
        let n = self.calls.fetch_add(1, Relaxed);
        let took = if self.everyone_slow.load(Relaxed) || n % 50 == 49 {
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

/// `requests` calls from `workers` concurrent callers, each made by `call` (`true` for a
/// success), measured after `warm` of unmeasured traffic (the breaker reads its hedge delay
/// from the latencies it saw, again at most once a second; tower's reads its last period).
async fn run<C, F>(
    call: C,
    dep: &Dependency,
    requests: usize,
    workers: usize,
    warm: Duration,
) -> Run
where
    C: Fn() -> F + Clone + Send + 'static,
    F: Future<Output = bool> + Send,
{
    let warm_until = Instant::now() + warm;
    calls(&call, usize::MAX, workers, Some(warm_until)).await;
    if dep.turns_slow {
        dep.everyone_slow.store(true, Relaxed);
    }
    let before = dep.calls.load(Relaxed);
    let mut took = calls(&call, requests, workers, None).await;
    took.sort();
    let at = |q: f64| took[((took.len() as f64 * q) as usize).min(took.len() - 1)];
    let calls = dep.calls.load(Relaxed) - before;
    Run {
        p50: at(0.50),
        p99: at(0.99),
        extra_load: (calls as f64 - requests as f64) / requests as f64 * 100.0,
    }
}

/// Calls through `breaker`, hedged per its configuration.
fn through(
    breaker: Breaker,
    dep: &Dependency,
) -> impl Fn() -> Pin<Box<dyn Future<Output = bool> + Send>> + Clone + Send + 'static + use<> {
    let dep = dep.clone();
    move || {
        let (breaker, dep) = (breaker.clone(), dep.clone());
        Box::pin(async move { breaker.call_hedged(|| dep.call()).await.is_ok() })
    }
}

/// tower's hedge policy: every request may be hedged (it has no budget to ask).
#[derive(Clone)]
struct EveryRequest;

impl tower::hedge::Policy<()> for EveryRequest {
    fn clone_request(&self, _: &()) -> Option<()> {
        Some(())
    }

    fn can_retry(&self, _: &()) -> bool {
        true
    }
}

/// Calls through `tower::hedge` at the p95 of its last second, after 100 data points
/// (made inside the runtime: its `Buffer` spawns a task).
fn through_tower(
    dep: &Dependency,
) -> impl Fn() -> Pin<Box<dyn Future<Output = bool> + Send>> + Clone + Send + 'static + use<> {
    let dep = dep.clone();
    let inner = tower::service_fn(move |()| {
        let dep = dep.clone();
        async move { dep.call().await }
    });
    let hedge =
        tower::hedge::Hedge::new::<()>(inner, EveryRequest, 100, 0.95, Duration::from_secs(1));
    // `Hedge` is not `Clone`: the callers share it through a `Buffer`, as a tower stack would.
    let hedge = tower::buffer::Buffer::new(hedge, 1024);
    move || {
        let hedge = hedge.clone();
        Box::pin(async move { hedge.oneshot(()).await.is_ok() })
    }
}

/// `requests` calls (or as many as fit before `until`), with the latency of each success.
async fn calls<C, F>(
    call: &C,
    requests: usize,
    workers: usize,
    until: Option<Instant>,
) -> Vec<Duration>
where
    C: Fn() -> F + Clone + Send + 'static,
    F: Future<Output = bool> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let (call, next) = (call.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut took = Vec::new();
            while next.fetch_add(1, Relaxed) < requests && until.is_none_or(|t| Instant::now() < t)
            {
                let started = Instant::now();
                if call().await {
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
    let (requests, slow_requests, turned_requests) = if quick {
        (400, 200, 400)
    } else {
        (4000, 400, 2000)
    };
    let slow = 500 * MS;

    println!(
        "{:<34} {:>11} {:>11} {:>10}",
        "", "p50", "p99", "extra load"
    );
    let dep = Dependency::new(slow, false);
    let plain = run(
        through(Breaker::new("tail::plain", Config::default()), &dep),
        &dep,
        requests,
        50,
        Duration::ZERO,
    )
    .await;
    row("2 % slow, no hedging", &plain);
    let dep = Dependency::new(slow, false);
    let towers = run(through_tower(&dep), &dep, requests, 50, WARM).await;
    row("2 % slow, tower::hedge (p95)", &towers);
    let dep = Dependency::new(slow, false);
    let hedged = run(
        through(
            Breaker::new("tail::hedged", Config::default().hedge(1)),
            &dep,
        ),
        &dep,
        requests,
        50,
        WARM,
    )
    .await;
    row("2 % slow, hedge = 1", &hedged);
    let dep = Dependency::new(slow, true);
    let towers_everyone = run(through_tower(&dep), &dep, slow_requests, 200, WARM).await;
    row("every call slow, tower::hedge", &towers_everyone);
    let dep = Dependency::new(slow, true);
    let everyone = run(
        through(
            Breaker::new("tail::everyone", Config::default().hedge(1)),
            &dep,
        ),
        &dep,
        slow_requests,
        200,
        WARM,
    )
    .await;
    row("every call slow, hedge = 1", &everyone);
    // Fast (2 % slow) during the warm-up, then slow for every call: the window still holds the
    // warm-up's fast samples (the delay stays at 5 ms, the tail long) and the budget is full.
    let dep = Dependency::turning_slow(slow);
    let towers_turned = run(through_tower(&dep), &dep, turned_requests, 200, WARM).await;
    row("turns slow after warm-up, tower", &towers_turned);
    let dep = Dependency::turning_slow(slow);
    let turned = run(
        through(
            Breaker::new("tail::turns_slow", Config::default().hedge(1)),
            &dep,
        ),
        &dep,
        turned_requests,
        200,
        WARM,
    )
    .await;
    row("turns slow after warm-up, hedge=1", &turned);

    let cut = plain.p99.as_secs_f64() / hedged.p99.as_secs_f64().max(1e-9);
    let tower_cut = plain.p99.as_secs_f64() / towers.p99.as_secs_f64().max(1e-9);
    println!("\np99 {cut:.0}× lower with hedge = 1, {tower_cut:.0}× with tower::hedge");
    println!(
        "every call slow: hedge = 1 sends {:.1} % more calls (the short tail stops it); \
         tower::hedge {:.1} %: it has no budget and no short-tail check, its delay is its \
         p95 ({} ms, what every call takes), so its hedges go only as the answers come",
        everyone.extra_load,
        towers_everyone.extra_load,
        towers_everyone.p50.as_millis()
    );
    println!(
        "turns slow after a fast warm-up: hedge = 1 sends {:.1} % more calls (hedging pauses \
         after {} calls in a row overdue, then one trial hedge a backed-off while); \
         tower::hedge {:.1} %",
        turned.extra_load,
        breaker::hedge::OVERDUE_IN_A_ROW,
        towers_turned.extra_load
    );
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
    if turned.extra_load > 1.0 {
        missed.push(format!(
            "extra load {:.1} % when every call turns slow after the warm-up (target ≤ 1 %)",
            turned.extra_load
        ));
    }
    if !missed.is_empty() {
        eprintln!("targets missed: {}", missed.join("; "));
        std::process::exit(1);
    }
}
