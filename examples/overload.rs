//! # overload: a dependency that is not broken, only full
//!
//! A service can do so much and no more. Past its capacity it does not fail, it queues: every
//! answer waits behind the ones before it, and once its queue is full it answers `503` at once.
//! A classic breaker sees none of that until the errors cross its threshold; then it cuts
//! *all* traffic, probes, closes, and every client sends full traffic again, straight back over
//! the edge. What an overloaded dependency needs is less traffic, not none.
//!
//! This program plays that on this machine, four times side by side under the same offered
//! load, each client against its own copy of one dependency:
//!
//! * the dependency: a real HTTP server (axum, on 127.0.0.1) with a fixed capacity: 4 workers
//!   that each take 20 ms per request (200 requests a second), a queue of 64 in front of them
//!   (latency grows past capacity), and `503` at once when the queue is full;
//! * the offered load ramps from half its capacity to three times it, holds, and comes back;
//!   each client gives up on a call after 250 ms (a call that slow is worth nothing to it);
//! * four clients:
//!   - **none**: calls it, whatever happens;
//!   - **classic breaker**: `threshold = 5, cool_off = "2s"`;
//!   - **throttle + ramp**: `throttle = 1.1` (Google SRE's adaptive throttling: it refuses
//!     locally the share of calls the dependency would not answer in time anyway; 1.1, not
//!     Google's 2, because this dependency queues rather than refusing fast), `ramp = "3s"`
//!     (after a probe closes it, traffic comes back over 3 s, not at once), and a trip rule
//!     that a burst of refusals does not set off (`failure_rate = 80` over 5 s);
//!   - **adaptive concurrency**: `adaptive_concurrency = 100`, a bulkhead whose limit follows
//!     the latency the dependency answers with.
//!
//! Every second a line shows, per client, its goodput (answers within the deadline, per
//! second), the p99 of those answers and its breaker's state; at the end a table sums up the
//! overloaded phase: goodput as a share of the dependency's capacity, p50/p99, errors, calls
//! refused locally and calls that reached the dependency.
//!
//! ```text
//! cargo run --release --example overload                    # ~60 s
//! cargo run --release --example overload -- --plot overload.svg
//! cargo run --example overload -- --quick                   # ~12 s smoke run (or BREAKER_QUICK=1)
//! ```
//!
//! Quick mode is a smoke test: it exits non-zero unless every client made calls and the
//! throttling client refused some of them while the dependency was overloaded.

use std::error::Error as StdError;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State as AxumState;
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use breaker::{Breaker, BreakerError, CallError, Config, State};
use http_body_util::Empty;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// The dependency's workers and the time each request takes: its capacity is their ratio.
const WORKERS: usize = 4;
const SERVICE_TIME: Duration = Duration::from_millis(20);
/// Requests waiting for a worker beyond this get a `503` at once.
const QUEUE: u64 = 64;
/// How long a client waits for an answer before it gives up on it.
const DEADLINE: Duration = Duration::from_millis(250);

fn capacity() -> f64 {
    WORKERS as f64 / SERVICE_TIME.as_secs_f64()
}

// ---------------------------------------------------------------------------------------------
// The offered load: half the capacity, a ramp to three times it, a plateau, back down.

#[derive(Clone, Copy, Debug)]
struct Scenario {
    /// Each phase's length: calm, ramp up, overload, ramp down, calm again.
    phases: [Duration; 5],
    quick: bool,
}

impl Scenario {
    fn full() -> Scenario {
        let s = Duration::from_secs;
        Scenario {
            phases: [s(10), s(12), s(16), s(10), s(12)],
            quick: false,
        }
    }

    fn quick() -> Scenario {
        let s = Duration::from_secs;
        Scenario {
            phases: [s(2), s(2), s(4), s(2), s(2)],
            quick: true,
        }
    }

    fn total(&self) -> Duration {
        self.phases.iter().sum()
    }

    /// The overloaded plateau, as seconds since the start.
    fn plateau(&self) -> (f64, f64) {
        let start: Duration = self.phases[..2].iter().sum();
        (start.as_secs_f64(), (start + self.phases[2]).as_secs_f64())
    }

    /// Offered load at `t`, as a multiple of the dependency's capacity.
    fn load(&self, t: Duration) -> f64 {
        let (calm, peak) = (0.5, 3.0);
        let mut from = Duration::ZERO;
        for (i, len) in self.phases.iter().enumerate() {
            if t < from + *len {
                let f = (t - from).as_secs_f64() / len.as_secs_f64();
                return match i {
                    0 | 4 => calm,
                    1 => calm + (peak - calm) * f,
                    2 => peak,
                    _ => peak - (peak - calm) * f,
                };
            }
            from += *len;
        }
        calm
    }
}

// ---------------------------------------------------------------------------------------------
// The dependency: `GET /work` takes a worker for SERVICE_TIME, after waiting for one.

struct Dependency {
    workers: Semaphore,
    waiting: AtomicU64,
    /// Requests that reached it (answered 200 or 503).
    received: AtomicU64,
}

async fn work(AxumState(dep): AxumState<Arc<Dependency>>) -> StatusCode {
    dep.received.fetch_add(1, Relaxed);
    if dep.waiting.fetch_add(1, Relaxed) >= QUEUE {
        dep.waiting.fetch_sub(1, Relaxed);
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    let permit = dep.workers.acquire().await;
    dep.waiting.fetch_sub(1, Relaxed);
    // The work is done whether or not the client still waits for it: past its deadline it is
    // wasted, which is what makes an overloaded service's goodput collapse.
    tokio::time::sleep(SERVICE_TIME).await;
    drop(permit);
    StatusCode::OK
}

async fn start_dependency() -> std::io::Result<(String, Arc<Dependency>)> {
    let dep = Arc::new(Dependency {
        workers: Semaphore::new(WORKERS),
        waiting: AtomicU64::new(0),
        received: AtomicU64::new(0),
    });
    let app = Router::new()
        .route("/work", get(work))
        .with_state(dep.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/work", listener.local_addr()?);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("dependency stopped: {e}");
        }
    });
    Ok((url, dep))
}

// ---------------------------------------------------------------------------------------------
// The clients.

#[derive(Debug)]
enum CallFailed {
    Unavailable,
    Deadline,
    Http,
}

impl From<BreakerError> for CallFailed {
    fn from(_: BreakerError) -> Self {
        // Never reached: the breaker's refusals arrive as `CallError::Breaker`.
        CallFailed::Http
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    None,
    Classic,
    Throttle,
    Adaptive,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::None, Kind::Classic, Kind::Throttle, Kind::Adaptive];

    fn label(self) -> &'static str {
        match self {
            Kind::None => "none",
            Kind::Classic => "classic breaker",
            Kind::Throttle => "throttle + ramp",
            Kind::Adaptive => "adaptive concurrency",
        }
    }

    fn breaker(self) -> Option<Breaker> {
        let classic = || {
            Config::default()
                .threshold(5)
                .cool_off(Duration::from_secs(2))
        };
        let config = match self {
            Kind::None => return None,
            Kind::Classic => classic(),
            // Throttling sheds the share the dependency refuses; its trip rule is a rate over
            // a window, not a streak, so a burst of refusals does not cut everything.
            Kind::Throttle => Config::default()
                .failure_rate(80)
                .window_duration(Duration::from_secs(5))
                .min_calls(50)
                .cool_off(Duration::from_secs(2))
                .throttle(1.1)
                .throttle_window(Duration::from_secs(10))
                .ramp(Duration::from_secs(3)),
            Kind::Adaptive => Config::default().adaptive_concurrency(100),
        };
        Some(Breaker::new(format!("overload::{}", self.label()), config))
    }
}

/// One second of one client.
#[derive(Default, Clone)]
struct Second {
    offered: u64,
    good: u64,
    errors: u64,
    refused: u64,
    latencies: Vec<Duration>,
}

impl Second {
    /// The p99 of this second's answers.
    fn p99(&self) -> Option<Duration> {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        percentile(&sorted, 0.99)
    }
}

struct ClientRun {
    kind: Kind,
    breaker: Option<Breaker>,
    http: Client<HttpConnector, Empty<Bytes>>,
    url: axum::http::Uri,
    dependency: Arc<Dependency>,
    seconds: Mutex<Vec<Second>>,
    /// What reached the dependency during the plateau: `received` at its start and end.
    reached: [AtomicU64; 2],
}

impl ClientRun {
    async fn attempt(&self) -> Result<(), CallFailed> {
        let answer = tokio::time::timeout(DEADLINE, self.http.get(self.url.clone())).await;
        match answer {
            Err(_) => Err(CallFailed::Deadline),
            Ok(Err(_)) => Err(CallFailed::Http),
            Ok(Ok(res)) if res.status() == StatusCode::SERVICE_UNAVAILABLE => {
                Err(CallFailed::Unavailable)
            }
            Ok(Ok(res)) if res.status().is_success() => Ok(()),
            Ok(Ok(_)) => Err(CallFailed::Http),
        }
    }

    /// One call, through the client's breaker if it has one; recorded in second `at`.
    async fn call(&self, at: usize) {
        let started = Instant::now();
        let outcome = match &self.breaker {
            None => self.attempt().await.map_err(CallError::Inner),
            Some(b) => b.call(self.attempt()).await,
        };
        let took = started.elapsed();
        let mut seconds = self.seconds.lock().unwrap();
        let s = &mut seconds[at];
        s.offered += 1;
        match outcome {
            Ok(()) => {
                s.good += 1;
                s.latencies.push(took);
            }
            Err(CallError::Breaker(_)) => s.refused += 1,
            Err(CallError::Inner(_)) => s.errors += 1,
        }
    }

    fn state(&self) -> String {
        let Some(b) = &self.breaker else {
            return "-".into();
        };
        let snapshot = breaker::registry()
            .snapshot()
            .into_iter()
            .find(|s| s.name == b.name());
        let extra = snapshot
            .map(|s| {
                let mut extra = String::new();
                if s.throttle_rate > 0.0 {
                    extra += &format!(" shed {:.0}%", s.throttle_rate);
                }
                if let Some(limit) = s.concurrency_limit {
                    extra += &format!(" limit {limit}");
                }
                extra
            })
            .unwrap_or_default();
        let state = match b.state() {
            State::Closed => "closed",
            State::Open => "OPEN",
            State::HalfOpen => "half-open",
            State::ForcedOpen => "forced open",
            State::Disabled => "disabled",
        };
        format!("{state}{extra}")
    }
}

/// Open-loop arrivals for one client: calls start at the offered rate whatever happens to the
/// earlier ones, as real users' requests do.
async fn drive(run: Arc<ClientRun>, sc: Scenario, start: Instant) {
    let tick = Duration::from_millis(5);
    let mut due = 0.0f64;
    let mut next = start;
    let (p0, p1) = sc.plateau();
    let mut plateau_marks = [false, false];
    loop {
        let t = next - start;
        if t >= sc.total() {
            break;
        }
        for (i, edge) in [p0, p1].into_iter().enumerate() {
            if !plateau_marks[i] && t.as_secs_f64() >= edge {
                plateau_marks[i] = true;
                run.reached[i].store(run.dependency.received.load(Relaxed), Relaxed);
            }
        }
        due += sc.load(t) * capacity() * tick.as_secs_f64();
        let second = t.as_secs() as usize;
        while due >= 1.0 {
            due -= 1.0;
            let run = run.clone();
            tokio::spawn(async move { run.call(second).await });
        }
        next += tick;
        tokio::time::sleep_until(next).await;
    }
}

// ---------------------------------------------------------------------------------------------
// Figures.

fn percentile(sorted: &[Duration], p: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    Some(sorted[i])
}

fn ms(d: Option<Duration>) -> String {
    d.map(|d| format!("{}ms", d.as_millis()))
        .unwrap_or_else(|| "-".into())
}

/// The plateau's seconds of one client, summed.
fn plateau_sum(run: &ClientRun, sc: &Scenario) -> Second {
    let (p0, p1) = sc.plateau();
    let seconds = run.seconds.lock().unwrap();
    let mut sum = Second::default();
    for s in &seconds[p0 as usize..p1 as usize] {
        sum.offered += s.offered;
        sum.good += s.good;
        sum.errors += s.errors;
        sum.refused += s.refused;
        sum.latencies.extend_from_slice(&s.latencies);
    }
    sum.latencies.sort();
    sum
}

struct Args {
    scenario: Scenario,
    plot: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let quick_env = std::env::var_os("BREAKER_QUICK").is_some_and(|v| v != "0");
    let mut args = Args {
        scenario: if quick_env {
            Scenario::quick()
        } else {
            Scenario::full()
        },
        plot: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => args.scenario = Scenario::quick(),
            "--plot" => {
                args.plot = Some(it.next().ok_or("--plot needs a file name (overload.svg)")?)
            }
            other => {
                return Err(format!(
                    "unknown argument `{other}`: try --quick, --plot FILE.svg"
                ))
            }
        }
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn StdError>> {
    let args = parse_args()?;
    let sc = args.scenario;
    let seconds = sc.total().as_secs() as usize + 1;

    let mut runs = Vec::new();
    for kind in Kind::ALL {
        let (url, dependency) = start_dependency().await?;
        runs.push(Arc::new(ClientRun {
            kind,
            breaker: kind.breaker(),
            http: Client::builder(TokioExecutor::new()).build_http(),
            url: url.parse()?,
            dependency,
            seconds: Mutex::new(vec![Second::default(); seconds + 1]),
            reached: [AtomicU64::new(0), AtomicU64::new(0)],
        }));
    }

    // The no-load latency: one call at a time, before the load starts.
    let mut idle = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        runs[0].attempt().await.map_err(|e| format!("{e:?}"))?;
        idle.push(t.elapsed());
    }
    idle.sort();
    let no_load = percentile(&idle, 0.5).unwrap_or(SERVICE_TIME);
    println!(
        "dependency: {WORKERS} workers x {} ms = {:.0} requests/s, queue {QUEUE}, no-load latency {}; \
         offered load 0.5x -> 3x -> 0.5x over {} s; deadline {} ms",
        SERVICE_TIME.as_millis(),
        capacity(),
        ms(Some(no_load)),
        sc.total().as_secs(),
        DEADLINE.as_millis(),
    );
    print!("{:>4} {:>6}", "t", "load");
    for run in &runs {
        print!(" | {:^34}", run.kind.label());
    }
    println!();

    let start = Instant::now();
    for run in &runs {
        tokio::spawn(drive(run.clone(), sc, start));
    }
    // Each second's line, once the calls it started had their deadline to finish.
    for second in 0..sc.total().as_secs() as usize {
        tokio::time::sleep_until(
            start + Duration::from_secs(second as u64 + 1) + DEADLINE + Duration::from_millis(50),
        )
        .await;
        print!(
            "{:>3}s {:>5.1}x",
            second,
            sc.load(Duration::from_secs(second as u64))
        );
        for run in &runs {
            let s = run.seconds.lock().unwrap()[second].clone();
            print!(
                " | {:>4}/s p99 {:>6} {:<16}",
                s.good,
                ms(s.p99()),
                run.state()
            );
        }
        println!();
    }

    println!(
        "\nwhile offered 3x capacity ({:.0} requests/s):",
        capacity() * 3.0
    );
    println!(
        "{:<22} {:>9} {:>8} {:>8} {:>8} {:>9} {:>9}",
        "client", "goodput", "p50", "p99", "errors", "refused", "reached"
    );
    let plateau = sc.plateau().1 - sc.plateau().0;
    let mut summary = Vec::new();
    for run in &runs {
        let sum = plateau_sum(run, &sc);
        let goodput = sum.good as f64 / plateau / capacity() * 100.0;
        let reached = run.reached[1].load(Relaxed) - run.reached[0].load(Relaxed);
        println!(
            "{:<22} {:>8.0}% {:>8} {:>8} {:>8} {:>9} {:>9}",
            run.kind.label(),
            goodput,
            ms(percentile(&sum.latencies, 0.5)),
            ms(percentile(&sum.latencies, 0.99)),
            sum.errors,
            sum.refused,
            reached,
        );
        summary.push((run.kind, sum));
    }
    println!(
        "goodput: answers within {} ms, as a share of the dependency's capacity; \
         no-load latency {}; reached: requests the dependency received",
        DEADLINE.as_millis(),
        ms(Some(no_load))
    );

    if let Some(path) = &args.plot {
        plot(path, &sc, &runs)?;
        println!("plot written to {path}");
    }

    if sc.quick {
        for (kind, sum) in &summary {
            if sum.offered == 0 {
                return Err(format!("quick run: the {} client made no call", kind.label()).into());
            }
        }
        let throttled = summary
            .iter()
            .find(|(k, _)| *k == Kind::Throttle)
            .map_or(0, |(_, s)| s.refused);
        if throttled == 0 {
            return Err("quick run: the throttling client refused nothing while overloaded".into());
        }
        println!("quick run: ok");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// `--plot FILE.svg`: goodput and p99 per second of each client, and the offered load.

fn plot(path: &str, sc: &Scenario, runs: &[Arc<ClientRun>]) -> Result<(), Box<dyn StdError>> {
    use plotters::prelude::*;

    let total = sc.total().as_secs_f64();
    let colors = [
        RGBColor(120, 120, 120),
        RGBColor(200, 30, 30),
        RGBColor(20, 90, 200),
        RGBColor(30, 150, 60),
    ];
    let root = SVGBackend::new(path, (1100, 800)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(420);

    let cap = capacity();
    let mut goodput = ChartBuilder::on(&top)
        .caption(
            "goodput per second (answers within the deadline) vs offered load",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..total, 0f64..cap * 3.2)?;
    goodput.configure_mesh().y_desc("requests/s").draw()?;
    let offered: Vec<(f64, f64)> = (0..=(total * 10.0) as u64)
        .map(|i| {
            let t = i as f64 / 10.0;
            (t, sc.load(Duration::from_secs_f64(t)) * cap)
        })
        .collect();
    goodput
        .draw_series(LineSeries::new(offered, BLACK.mix(0.4).stroke_width(1)))?
        .label("offered")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], BLACK.mix(0.4)));
    goodput
        .draw_series(LineSeries::new(
            vec![(0.0, cap), (total, cap)],
            BLACK.mix(0.25).stroke_width(1),
        ))?
        .label("capacity")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], BLACK.mix(0.25)));
    for (run, color) in runs.iter().zip(colors) {
        let points = per_second(run, total, |s| Some(s.good as f64));
        goodput
            .draw_series(LineSeries::new(points, color.stroke_width(2)))?
            .label(run.kind.label())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 15, y)], color.stroke_width(2))
            });
    }
    goodput
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;

    let mut latency = ChartBuilder::on(&bottom)
        .caption("p99 of those answers (log scale)", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..total, (5f64..400f64).log_scale())?;
    latency
        .configure_mesh()
        .x_desc("seconds since start")
        .y_desc("ms")
        .draw()?;
    for (run, color) in runs.iter().zip(colors) {
        let points = per_second(run, total, |s| s.p99().map(|d| d.as_secs_f64() * 1000.0));
        latency.draw_series(LineSeries::new(points, color.stroke_width(2)))?;
    }
    root.present()?;
    Ok(())
}

/// One point per whole second of `run` where `value` has one, at the second's middle.
fn per_second(
    run: &ClientRun,
    total: f64,
    value: impl Fn(&Second) -> Option<f64>,
) -> Vec<(f64, f64)> {
    let seconds = run.seconds.lock().unwrap();
    seconds
        .iter()
        .enumerate()
        .take(total as usize)
        .filter_map(|(i, s)| value(s).map(|v| (i as f64 + 0.5, v)))
        .collect()
}
