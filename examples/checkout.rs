//! # checkout: the tax service that did not go down, it got slow
//!
//! Checkout calls an internal tax API on every order. It answers in about 40 ms and nobody
//! thinks about it, until a bad deploy on its side drags its p99 to about 25 seconds: no
//! error, no 500, just calls that sit there. Every checkout holds a database connection
//! while it waits for tax, the pool runs dry, and pages that never touch tax (the cart page
//! here) stop answering too. The "resilient" client that retries three times makes it worse:
//! each retry is one more call to a service that is already drowning.
//!
//! This program plays that afternoon live on this machine, twice side by side, under the same
//! load and the same phases:
//!
//! * two instances of a real tax HTTP service (axum, on 127.0.0.1, random ports) that answer
//!   in ~40 ms, then suffer the bad deploy (most answers take seconds, one in ten hangs
//!   ~25 s), then recover;
//! * two checkout services, each with a pool of 20 database connections, fed by the same
//!   stream of simulated shoppers (checkouts and cart-page views):
//!   - **with breaker**: `get_tax` carries
//!     `#[circuit_breaker(timeout = "600ms", threshold = 5, cool_off = "2s", fallback = last_known_rate)]`
//!     and serves the last known rate for the region while the tax service is sick;
//!   - **naive**: the seed's client, three attempts with a 200 ms × attempt back-off and a
//!     generous 10 s client timeout, no breaker.
//!
//! A live view refreshes once a second (requests/s, p50 and p99 checkout latency, cart-page
//! p99, breaker state, calls that reached the tax service, calls that failed fast, calls
//! served by the fallback); at the end come a summary table and the breaker's transitions.
//!
//! ```text
//! cargo run --example checkout                        # ~45 s, the incident compressed
//! cargo run --example checkout -- --seconds 120       # a longer afternoon
//! cargo run --example checkout -- --plot timeline.svg # also draw an SVG timeline
//! cargo run --example checkout -- --quick             # a few seconds (or BREAKER_QUICK=1)
//! cargo run --features dashboard --example checkout -- --dashboard 127.0.0.1:8080
//!                                                     # watch it live on breaker's dashboard
//! ```
//!
//! The cool-off is compressed with the incident (2 s instead of the 10–30 s a production
//! service would use). In quick mode the program is a smoke test: it prints plain lines (no
//! cursor movement when stdout is not a terminal) and exits non-zero unless the breaker
//! tripped and the fallback served.

use std::collections::BTreeMap;
use std::error::Error as StdError;
use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State as AxumState};
use axum::http::StatusCode;
use axum::routing::get;
use axum::Router;
use breaker::{circuit_breaker, registry, CallError, State, Transition};
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio::time::Instant;

const BREAKER_NAME: &str = "checkout::get_tax";
const DB_POOL: usize = 20;
const REGIONS: [(&str, u32); 5] = [
    ("CA", 725),
    ("NY", 400),
    ("TX", 625),
    ("WA", 650),
    ("IL", 625),
];

// ---------------------------------------------------------------------------------------------
// The scenario: phases and the tax service's latencies, default, scaled or quick.

#[derive(Clone, Copy, Debug)]
struct Scenario {
    healthy: Duration,
    incident: Duration,
    recovered: Duration,
    /// Most answers during the incident take between these.
    slow: (Duration, Duration),
    /// One answer in ten during the incident hangs this long.
    hang: Duration,
    /// The naive client's per-attempt timeout.
    naive_timeout: Duration,
    /// Checkouts per second, and as many cart-page views, per checkout service.
    arrivals: u32,
    quick: bool,
}

impl Scenario {
    fn default_run() -> Scenario {
        Scenario {
            healthy: Duration::from_secs(8),
            incident: Duration::from_secs(20),
            recovered: Duration::from_secs(17),
            slow: (Duration::from_secs(1), Duration::from_secs(5)),
            hang: Duration::from_secs(25),
            naive_timeout: Duration::from_secs(10),
            arrivals: 30,
            quick: false,
        }
    }

    fn quick() -> Scenario {
        Scenario {
            healthy: Duration::from_millis(1000),
            incident: Duration::from_millis(2500),
            recovered: Duration::from_millis(3000),
            slow: (Duration::from_millis(800), Duration::from_millis(2000)),
            hang: Duration::from_secs(4),
            naive_timeout: Duration::from_millis(1500),
            arrivals: 30,
            quick: true,
        }
    }

    /// The default run stretched (or squeezed) to `secs` seconds in all.
    fn lasting(secs: u64) -> Scenario {
        let d = Scenario::default_run();
        let scale = secs.max(10) as f64 / d.total().as_secs_f64();
        Scenario {
            healthy: d.healthy.mul_f64(scale),
            incident: d.incident.mul_f64(scale),
            recovered: d.recovered.mul_f64(scale),
            ..d
        }
    }

    fn total(&self) -> Duration {
        self.healthy + self.incident + self.recovered
    }

    fn phase(&self, t: Duration) -> Phase {
        if t < self.healthy {
            Phase::Healthy
        } else if t < self.healthy + self.incident {
            Phase::Incident
        } else {
            Phase::Recovered
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Phase {
    Healthy,
    Incident,
    Recovered,
}

impl Phase {
    fn label(self) -> &'static str {
        match self {
            Phase::Healthy => "healthy: tax answers in ~40 ms",
            Phase::Incident => "BAD DEPLOY: tax p99 ~25 s",
            Phase::Recovered => "deploy rolled back: tax healthy again",
        }
    }
}

/// A small, lock-free pseudo-random source (SplitMix64): enough for jitter and dice.
fn random() -> f64 {
    static STATE: AtomicU64 = AtomicU64::new(0x5EED);
    let mut z = STATE
        .fetch_add(0x9E37_79B9_7F4A_7C15, Relaxed)
        .wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

fn between(lo: Duration, hi: Duration) -> Duration {
    lo + (hi - lo).mul_f64(random())
}

// ---------------------------------------------------------------------------------------------
// The tax service: a real HTTP server on loopback. `GET /rate/{region}` answers the rate in
// basis points, as plain text.

struct TaxService {
    start: Instant,
    scenario: Scenario,
    /// Requests that reached this instance.
    received: AtomicU64,
    /// Of those, the ones that arrived during the bad deploy.
    received_in_incident: AtomicU64,
    /// Requests it is working on right now.
    busy: AtomicU64,
}

struct Busy<'a>(&'a AtomicU64);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

async fn rate(
    AxumState(svc): AxumState<Arc<TaxService>>,
    Path(region): Path<String>,
) -> Result<String, StatusCode> {
    svc.received.fetch_add(1, Relaxed);
    svc.busy.fetch_add(1, Relaxed);
    let _busy = Busy(&svc.busy);
    let sc = svc.scenario;
    let phase = sc.phase(svc.start.elapsed());
    if phase == Phase::Incident {
        svc.received_in_incident.fetch_add(1, Relaxed);
    }
    let latency = match phase {
        Phase::Healthy | Phase::Recovered => {
            between(Duration::from_millis(35), Duration::from_millis(50))
        }
        Phase::Incident => {
            let dice = random();
            if dice < 0.1 {
                between(Duration::from_millis(35), Duration::from_millis(50))
            } else if dice < 0.9 {
                between(sc.slow.0, sc.slow.1)
            } else {
                sc.hang
            }
        }
    };
    tokio::time::sleep(latency).await;
    let (_, bp) = REGIONS
        .iter()
        .find(|(r, _)| *r == region)
        .ok_or(StatusCode::NOT_FOUND)?;
    Ok(bp.to_string())
}

async fn start_tax_service(
    start: Instant,
    scenario: Scenario,
) -> std::io::Result<(String, Arc<TaxService>)> {
    let svc = Arc::new(TaxService {
        start,
        scenario,
        received: AtomicU64::new(0),
        received_in_incident: AtomicU64::new(0),
        busy: AtomicU64::new(0),
    });
    let app = Router::new()
        .route("/rate/{region}", get(rate))
        .with_state(svc.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("tax service stopped: {e}");
        }
    });
    Ok((base, svc))
}

// ---------------------------------------------------------------------------------------------
// The tax API client, shared by both checkout services.

#[derive(Debug, thiserror::Error)]
enum TaxError {
    #[error("tax API unreachable: {0}")]
    Http(String),
    #[error("tax API answered {0}")]
    Status(u16),
    #[error("tax API sent an unreadable rate")]
    Parse,
    #[error("tax API did not answer within {0:?}")]
    Timeout(Duration),
}

struct TaxApi {
    http: Client<HttpConnector, Empty<Bytes>>,
    base: String,
}

impl TaxApi {
    fn new(base: String) -> TaxApi {
        TaxApi {
            http: Client::builder(TokioExecutor::new()).build_http(),
            base,
        }
    }

    /// One HTTP call: the rate of `region` in basis points.
    async fn rate(&self, region: &str) -> Result<u32, TaxError> {
        let uri = format!("{}/rate/{region}", self.base)
            .parse()
            .map_err(|_| TaxError::Parse)?;
        let res = self
            .http
            .get(uri)
            .await
            .map_err(|e| TaxError::Http(e.to_string()))?;
        if !res.status().is_success() {
            return Err(TaxError::Status(res.status().as_u16()));
        }
        let body = res
            .into_body()
            .collect()
            .await
            .map_err(|e| TaxError::Http(e.to_string()))?
            .to_bytes();
        std::str::from_utf8(&body)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or(TaxError::Parse)
    }
}

#[derive(Clone, Debug)]
struct Cart {
    region: String,
    subtotal_cents: u64,
}

impl Cart {
    fn random() -> Cart {
        let (region, _) = REGIONS[(random() * REGIONS.len() as f64) as usize % REGIONS.len()];
        Cart {
            region: region.to_string(),
            subtotal_cents: 1_000 + (random() * 19_000.0) as u64,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    Live,
    LastKnown,
    Estimated,
}

#[derive(Clone, Copy, Debug)]
#[allow(dead_code)] // the demo shows where a tax came from, not what it was
struct Tax {
    cents: u64,
    source: Source,
}

impl Tax {
    fn at(rate_bp: u32, cart: &Cart, source: Source) -> Tax {
        Tax {
            cents: cart.subtotal_cents * u64::from(rate_bp) / 10_000,
            source,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Counters of one checkout service.

struct Counters {
    checkouts: AtomicU64,
    errors: AtomicU64,
    fallback: AtomicU64,
    failed_fast: AtomicU64,
    estimated: AtomicU64,
    retries: AtomicU64,
    attempt_timeouts: AtomicU64,
    in_flight: AtomicU64,
}

impl Counters {
    const fn new() -> Counters {
        Counters {
            checkouts: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            fallback: AtomicU64::new(0),
            failed_fast: AtomicU64::new(0),
            estimated: AtomicU64::new(0),
            retries: AtomicU64::new(0),
            attempt_timeouts: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
        }
    }
}

static WITH_BREAKER: Counters = Counters::new();
static NAIVE: Counters = Counters::new();

// ---------------------------------------------------------------------------------------------
// The breaker-protected tax call: the function body is the plain HTTP call.

static TAX_API: OnceLock<TaxApi> = OnceLock::new();
static LAST_KNOWN: Mutex<BTreeMap<String, u32>> = Mutex::new(BTreeMap::new());
static START: OnceLock<Instant> = OnceLock::new();
static TRANSITIONS: Mutex<Vec<(Duration, Transition)>> = Mutex::new(Vec::new());

#[circuit_breaker(
    timeout = "600ms",
    threshold = 5,
    cool_off = "2s",
    fallback = last_known_rate,
    name = "checkout::get_tax",
    on_state_change = record_transition
)]
async fn get_tax(cart: &Cart) -> Result<Tax, TaxError> {
    let api = TAX_API
        .get()
        .expect("main sets the tax API before the shoppers arrive");
    let rate = api.rate(&cart.region).await?;
    LAST_KNOWN.lock().unwrap().insert(cart.region.clone(), rate);
    Ok(Tax::at(rate, cart, Source::Live))
}

/// Open, timed out or bulkhead full: serve the last known rate for the region (or a flagged
/// estimate). The tax API's own errors surface unchanged.
async fn last_known_rate(cart: &Cart, err: CallError<TaxError>) -> Result<Tax, TaxError> {
    match err {
        CallError::Breaker(e) => {
            WITH_BREAKER.fallback.fetch_add(1, Relaxed);
            if e.is_open() || e.is_full() {
                WITH_BREAKER.failed_fast.fetch_add(1, Relaxed);
            }
            let known = LAST_KNOWN.lock().unwrap().get(&cart.region).copied();
            Ok(match known {
                Some(rate) => Tax::at(rate, cart, Source::LastKnown),
                None => {
                    WITH_BREAKER.estimated.fetch_add(1, Relaxed);
                    Tax::at(700, cart, Source::Estimated)
                }
            })
        }
        CallError::Inner(e) => Err(e),
    }
}

fn record_transition(t: &Transition) {
    let at = START.get().map_or(Duration::ZERO, |s| s.elapsed());
    TRANSITIONS.lock().unwrap().push((at, t.clone()));
}

/// The seed's "resilient" client: three attempts, a back-off of 200 ms × attempt, and the
/// HTTP client's generous timeout on each attempt. No breaker.
async fn get_tax_naive(api: &TaxApi, cart: &Cart, timeout: Duration) -> Result<Tax, TaxError> {
    let mut last = TaxError::Parse;
    for attempt in 0..3u64 {
        if attempt > 0 {
            NAIVE.retries.fetch_add(1, Relaxed);
            tokio::time::sleep(Duration::from_millis(200 * attempt)).await; // "just try again"
        }
        match tokio::time::timeout(timeout, api.rate(&cart.region)).await {
            Ok(Ok(rate)) => return Ok(Tax::at(rate, cart, Source::Live)),
            Ok(Err(e)) => last = e,
            Err(_) => {
                NAIVE.attempt_timeouts.fetch_add(1, Relaxed);
                last = TaxError::Timeout(timeout);
            }
        }
    }
    Err(last)
}

// ---------------------------------------------------------------------------------------------
// A checkout service: a database pool shared by the checkout and the cart page.

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Breaker,
    Naive,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Page {
    Checkout,
    Cart,
}

#[derive(Clone, Copy)]
struct Sample {
    /// When the request finished (or was abandoned), since the start.
    at: Duration,
    latency: Duration,
    page: Page,
    /// Still waiting when the run ended; `latency` is then a lower bound.
    unfinished: bool,
}

struct Shop {
    kind: Kind,
    db: Semaphore,
    naive_api: Option<TaxApi>,
    naive_timeout: Duration,
    samples: Mutex<Vec<Sample>>,
    counters: &'static Counters,
    start: Instant,
}

/// Records one request's latency when it finishes, or as unfinished if it is dropped first.
struct Track<'a> {
    shop: &'a Shop,
    page: Page,
    begun: Instant,
    done: bool,
}

impl Track<'_> {
    fn finish(mut self) {
        self.done = true;
        self.record(false);
    }

    fn record(&self, unfinished: bool) {
        let sample = Sample {
            at: self.shop.start.elapsed(),
            latency: self.begun.elapsed(),
            page: self.page,
            unfinished,
        };
        self.shop.samples.lock().unwrap().push(sample);
    }
}

impl Drop for Track<'_> {
    fn drop(&mut self) {
        if self.page == Page::Checkout {
            self.shop.counters.in_flight.fetch_sub(1, Relaxed);
        }
        if !self.done {
            self.record(true);
        }
    }
}

impl Shop {
    fn track(&self, page: Page) -> Track<'_> {
        if page == Page::Checkout {
            self.counters.checkouts.fetch_add(1, Relaxed);
            self.counters.in_flight.fetch_add(1, Relaxed);
        }
        Track {
            shop: self,
            page,
            begun: Instant::now(),
            done: false,
        }
    }

    async fn checkout(&self, cart: Cart) {
        let track = self.track(Page::Checkout);
        // The order's transaction is open before the tax step, and holds its connection.
        let _conn = self.db.acquire().await.expect("the pool is never closed");
        tokio::time::sleep(Duration::from_millis(2)).await;
        let tax = match self.kind {
            Kind::Breaker => get_tax(&cart).await,
            Kind::Naive => {
                let api = self
                    .naive_api
                    .as_ref()
                    .expect("the naive shop has its client");
                get_tax_naive(api, &cart, self.naive_timeout).await
            }
        };
        if tax.is_err() {
            self.counters.errors.fetch_add(1, Relaxed);
        }
        track.finish();
    }

    async fn cart_page(&self) {
        let track = self.track(Page::Cart);
        let _conn = self.db.acquire().await.expect("the pool is never closed");
        tokio::time::sleep(Duration::from_millis(2)).await;
        track.finish();
    }
}

/// Shoppers arrive at a steady rate until the end, then whatever still waits is abandoned.
async fn shoppers(shop: Arc<Shop>, end: Instant, per_sec: u32) {
    let mut tick = tokio::time::interval(Duration::from_secs(1) / per_sec);
    let mut tasks = JoinSet::new();
    loop {
        tick.tick().await;
        if Instant::now() >= end {
            break;
        }
        let s = shop.clone();
        tasks.spawn(async move { s.checkout(Cart::random()).await });
        let s = shop.clone();
        tasks.spawn(async move { s.cart_page().await });
        while tasks.try_join_next().is_some() {}
    }
    // A short grace for the requests of the last moments, then the rest are abandoned.
    let _ = tokio::time::timeout(Duration::from_millis(500), async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    tasks.shutdown().await;
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

fn human(d: Option<Duration>) -> String {
    match d {
        None => "-".into(),
        Some(d) if d < Duration::from_millis(1) => format!("{}µs", d.as_micros()),
        Some(d) if d < Duration::from_secs(1) => format!("{}ms", d.as_millis()),
        Some(d) => format!("{:.1}s", d.as_secs_f64()),
    }
}

/// Latencies of `page` requests that finished in `[from, to)` (unfinished ones included when
/// asked: their waits so far).
fn latencies(
    shop: &Shop,
    page: Page,
    from: Duration,
    to: Duration,
    unfinished: bool,
) -> Vec<Duration> {
    let mut v: Vec<Duration> = shop
        .samples
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.page == page && s.at >= from && s.at < to && (unfinished || !s.unfinished))
        .map(|s| s.latency)
        .collect();
    v.sort();
    v
}

#[derive(Clone, Copy)]
struct Tick {
    t: f64,
    p50: [Option<Duration>; 2],
    p99: [Option<Duration>; 2],
}

fn breaker_state() -> String {
    match registry().get(BREAKER_NAME) {
        None => "closed".into(),
        Some(h) => match (h.state(), h.retry_in()) {
            (State::Open, Some(r)) => format!("OPEN (probe in {})", human(Some(r))),
            (s, _) => s.to_string(),
        },
    }
}

/// `[===###>~~~....]`: done healthy `=`, done incident `#`, now `>`, the incident to come `~`.
fn progress_bar(sc: &Scenario, t: Duration, width: usize, color: bool) -> String {
    let total = sc.total().as_secs_f64();
    let pos = ((t.as_secs_f64() / total) * width as f64) as usize;
    let mut bar = String::from("[");
    let mut current = "";
    for i in 0..width {
        let at = Duration::from_secs_f64(total * (i as f64 + 0.5) / width as f64);
        let incident = sc.phase(at) == Phase::Incident;
        let (ch, code) = match (i.cmp(&pos), incident) {
            (std::cmp::Ordering::Less, false) => ('=', "32"),
            (std::cmp::Ordering::Less, true) => ('#', "31"),
            (std::cmp::Ordering::Equal, _) => ('>', "1"),
            (std::cmp::Ordering::Greater, false) => ('.', "2"),
            (std::cmp::Ordering::Greater, true) => ('~', "2;31"),
        };
        if color && code != current {
            let _ = write!(bar, "\x1b[0;{code}m");
            current = code;
        }
        bar.push(ch);
    }
    if color {
        bar.push_str("\x1b[0m");
    }
    bar.push(']');
    bar
}

// ---------------------------------------------------------------------------------------------

struct Args {
    scenario: Scenario,
    plot: Option<String>,
    /// `--dashboard ADDR`: serve `breaker::dashboard::router()` there while the story runs.
    #[cfg_attr(not(feature = "dashboard"), allow(dead_code))]
    dashboard: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let env_quick = std::env::var("BREAKER_QUICK").is_ok_and(|v| !v.is_empty() && v != "0");
    let mut quick = env_quick;
    let mut seconds = None;
    let mut plot = None;
    let mut dashboard = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--seconds" => {
                let v = args.next().ok_or("--seconds needs a number")?;
                seconds = Some(
                    v.parse::<u64>()
                        .map_err(|_| format!("--seconds {v}: not a number"))?,
                );
            }
            "--plot" => {
                plot = Some(
                    args.next()
                        .ok_or("--plot needs a file name, like timeline.svg")?,
                )
            }
            "--dashboard" => {
                let addr = args
                    .next()
                    .ok_or("--dashboard needs an address, like 127.0.0.1:8080")?;
                if cfg!(not(feature = "dashboard")) {
                    return Err("--dashboard needs the `dashboard` feature: cargo run \
                                --features dashboard --example checkout -- --dashboard ADDR"
                        .into());
                }
                dashboard = Some(addr);
            }
            "-h" | "--help" => return Err(
                "usage: cargo run --example checkout -- [--seconds N] [--plot FILE.svg] [--quick] \
                 [--dashboard ADDR]"
                    .into(),
            ),
            other => return Err(format!("unknown argument `{other}`; try --help")),
        }
    }
    let scenario = match (quick, seconds) {
        (true, _) => Scenario::quick(),
        (false, Some(s)) => Scenario::lasting(s),
        (false, None) => Scenario::default_run(),
    };
    Ok(Args {
        scenario,
        plot,
        dashboard,
    })
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn StdError>> {
    let args = match parse_args() {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            std::process::exit(2);
        }
    };
    let sc = args.scenario;
    let tty = std::io::stdout().is_terminal() && !sc.quick;

    #[cfg(feature = "dashboard")]
    if let Some(addr) = &args.dashboard {
        // Made before the first call, so the page lists every transition of the story.
        let listener = tokio::net::TcpListener::bind(addr.as_str()).await?;
        println!(
            "dashboard: http://{}/ (served while the story runs)",
            listener.local_addr()?
        );
        let page = breaker::dashboard::router();
        tokio::spawn(async move { axum::serve(listener, page).await });
    }

    let start = Instant::now();
    START.set(start).expect("set once");
    let (breaker_base, breaker_svc) = start_tax_service(start, sc).await?;
    let (naive_base, naive_svc) = start_tax_service(start, sc).await?;
    assert!(TAX_API.set(TaxApi::new(breaker_base.clone())).is_ok());

    let new_shop = |kind, naive_api, counters| {
        Arc::new(Shop {
            kind,
            db: Semaphore::new(DB_POOL),
            naive_api,
            naive_timeout: sc.naive_timeout,
            samples: Mutex::new(Vec::new()),
            counters,
            start,
        })
    };
    let shops = [
        new_shop(Kind::Breaker, None, &WITH_BREAKER),
        new_shop(Kind::Naive, Some(TaxApi::new(naive_base.clone())), &NAIVE),
    ];
    let services = [&breaker_svc, &naive_svc];

    println!("checkout demo: the tax service that got slow (seed 001)");
    println!(
        "  tax service instances: {breaker_base} (behind the breaker), {naive_base} (behind the naive client)"
    );
    println!(
        "  {} checkouts/s and {} cart views/s per checkout service, {DB_POOL} DB connections each",
        sc.arrivals, sc.arrivals
    );
    println!(
        "  phases: healthy {}, bad deploy {}, recovered {}",
        human(Some(sc.healthy)),
        human(Some(sc.incident)),
        human(Some(sc.recovered))
    );
    println!("  breaker: timeout 600ms, threshold 5, cool-off 2s, fallback: last known rate");
    println!(
        "  naive:   3 attempts, back-off 200ms × attempt, {} timeout per attempt\n",
        human(Some(sc.naive_timeout))
    );

    let end = start + sc.total();
    let mut load = JoinSet::new();
    for shop in &shops {
        load.spawn(shoppers(shop.clone(), end, sc.arrivals));
    }

    // The live view.
    let mut timeline = Vec::new();
    let mut every =
        tokio::time::interval_at(start + Duration::from_secs(1), Duration::from_secs(1));
    let mut drawn = 0usize;
    loop {
        every.tick().await;
        let t = start.elapsed().min(sc.total());
        let from = t.saturating_sub(Duration::from_secs(1));
        let mut tick = Tick {
            t: t.as_secs_f64(),
            p50: [None; 2],
            p99: [None; 2],
        };
        let mut rows: Vec<[String; 3]> = Vec::new();
        let mut rps = [String::new(), String::new()];
        let mut p50 = rps.clone();
        let mut p99 = rps.clone();
        let mut cart = rps.clone();
        for (i, shop) in shops.iter().enumerate() {
            let l = latencies(shop, Page::Checkout, from, t, false);
            tick.p50[i] = percentile(&l, 0.50);
            tick.p99[i] = percentile(&l, 0.99);
            rps[i] = l.len().to_string();
            p50[i] = human(tick.p50[i]);
            p99[i] = human(tick.p99[i]);
            cart[i] = human(percentile(
                &latencies(shop, Page::Cart, from, t, false),
                0.99,
            ));
        }
        timeline.push(tick);
        let c = [&WITH_BREAKER, &NAIVE];
        let both = |f: &dyn Fn(usize) -> String| [f(0), f(1)];
        let mut row = |label: &str, v: [String; 2]| {
            rows.push([label.to_string(), v[0].clone(), v[1].clone()])
        };
        row("checkouts/s", rps);
        row("checkout p50", p50);
        row("checkout p99", p99);
        row("cart page p99", cart);
        row(
            "checkouts in flight",
            both(&|i| c[i].in_flight.load(Relaxed).to_string()),
        );
        row(
            "calls that reached tax",
            both(&|i| services[i].received.load(Relaxed).to_string()),
        );
        row(
            "tax requests open now",
            both(&|i| services[i].busy.load(Relaxed).to_string()),
        );
        row(
            "failed fast",
            [
                WITH_BREAKER.failed_fast.load(Relaxed).to_string(),
                "-".into(),
            ],
        );
        row(
            "served by fallback",
            [WITH_BREAKER.fallback.load(Relaxed).to_string(), "-".into()],
        );
        row(
            "errors shown to shoppers",
            both(&|i| c[i].errors.load(Relaxed).to_string()),
        );
        row("breaker", [breaker_state(), "(none)".into()]);

        if tty {
            let mut out = String::new();
            if drawn > 0 {
                let _ = write!(out, "\x1b[{drawn}A\r");
            }
            let _ = writeln!(
                out,
                "t={:>5.1}s {} {}\x1b[K",
                t.as_secs_f64(),
                progress_bar(&sc, t, 40, true),
                sc.phase(t.saturating_sub(Duration::from_millis(1))).label()
            );
            let _ = writeln!(
                out,
                "{:<26}{:>22}{:>22}\x1b[K",
                "", "with breaker", "naive + retries"
            );
            for [label, a, b] in &rows {
                let _ = writeln!(out, "{label:<26}{a:>22}{b:>22}\x1b[K");
            }
            drawn = rows.len() + 2;
            print!("{out}");
        } else {
            let v = |label: &str, i: usize| {
                rows.iter()
                    .find(|r| r[0] == label)
                    .map_or(String::new(), |r| r[i].clone())
            };
            println!(
                "t={:>5.1}s {} | breaker: {}/s p50 {} p99 {} reached {} fallback {} state {} | naive: {}/s p50 {} p99 {} reached {} in flight {}",
                t.as_secs_f64(),
                progress_bar(&sc, t, 20, false),
                v("checkouts/s", 1),
                v("checkout p50", 1),
                v("checkout p99", 1),
                v("calls that reached tax", 1),
                v("served by fallback", 1),
                v("breaker", 1),
                v("checkouts/s", 2),
                v("checkout p50", 2),
                v("checkout p99", 2),
                v("calls that reached tax", 2),
                v("checkouts in flight", 2),
            );
        }
        std::io::stdout().flush()?;
        if t >= sc.total() {
            break;
        }
    }
    while load.join_next().await.is_some() {}

    // The summary.
    let all = sc.total() + Duration::from_secs(3600);
    let mut table: Vec<[String; 3]> = Vec::new();
    let mut put = |label: &str, a: String, b: String| table.push([label.into(), a, b]);
    let co = |i: usize, unfinished| {
        latencies(&shops[i], Page::Checkout, Duration::ZERO, all, unfinished)
    };
    let ca = |i: usize| latencies(&shops[i], Page::Cart, Duration::ZERO, all, true);
    let unfinished = |i: usize| {
        shops[i]
            .samples
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.unfinished && s.page == Page::Checkout)
            .count()
    };
    let c = [&WITH_BREAKER, &NAIVE];
    let pair = |f: &dyn Fn(usize) -> String| (f(0), f(1));
    let (a, b) = pair(&|i| c[i].checkouts.load(Relaxed).to_string());
    put("checkouts started", a, b);
    let (a, b) = pair(&|i| co(i, false).len().to_string());
    put("checkouts completed", a, b);
    let (a, b) = pair(&|i| unfinished(i).to_string());
    put("still waiting at the end", a, b);
    let (a, b) = pair(&|i| c[i].errors.load(Relaxed).to_string());
    put("errors shown to shoppers", a, b);
    for (label, p) in [
        ("checkout p50", 0.5),
        ("checkout p99", 0.99),
        ("checkout max", 1.0),
    ] {
        let (a, b) = pair(&|i| human(percentile(&co(i, true), p)));
        put(label, a, b);
    }
    let (a, b) = pair(&|i| human(percentile(&ca(i), 0.99)));
    put("cart page p99", a, b);
    let (a, b) = pair(&|i| services[i].received.load(Relaxed).to_string());
    put("calls that reached tax", a, b);
    let (a, b) = pair(&|i| services[i].received_in_incident.load(Relaxed).to_string());
    put("  of them during the deploy", a, b);
    let stats = registry()
        .get(BREAKER_NAME)
        .map(|h| h.stats())
        .unwrap_or_default();
    put(
        "tax calls timed out",
        stats.timeouts.to_string(),
        NAIVE.attempt_timeouts.load(Relaxed).to_string(),
    );
    put(
        "retries",
        "0".into(),
        NAIVE.retries.load(Relaxed).to_string(),
    );
    put(
        "failed fast (breaker open)",
        WITH_BREAKER.failed_fast.load(Relaxed).to_string(),
        "-".into(),
    );
    put(
        "served by fallback",
        format!(
            "{} ({} estimated)",
            WITH_BREAKER.fallback.load(Relaxed),
            WITH_BREAKER.estimated.load(Relaxed)
        ),
        "-".into(),
    );

    println!(
        "\nsummary ({} of load; p99 and max count the checkouts still waiting at the end)",
        human(Some(sc.total()))
    );
    println!("{:<28}{:>22}{:>22}", "", "with breaker", "naive + retries");
    for [label, a, b] in &table {
        println!("{label:<28}{a:>22}{b:>22}");
    }

    let transitions = TRANSITIONS.lock().unwrap().clone();
    println!("\ntransitions of `{BREAKER_NAME}` (from its on_state_change hook):");
    if transitions.is_empty() {
        println!("  none");
    }
    for (at, t) in &transitions {
        println!(
            "  t={:>6.2}s  {:<9} -> {:<9}  {}",
            at.as_secs_f64(),
            t.from.as_str(),
            t.to.as_str(),
            t.cause
        );
    }

    if let Some(path) = &args.plot {
        plot(path, &sc, &timeline, &transitions)?;
        println!("\ntimeline written to {path}");
    }

    let tripped = transitions.iter().any(|(_, t)| t.to == State::Open);
    let served = WITH_BREAKER.fallback.load(Relaxed) > 0;
    if sc.quick {
        if !tripped || !served {
            eprintln!("FAILED: the breaker should have tripped (tripped: {tripped}) and the fallback served (served: {served})");
            std::process::exit(1);
        }
        println!("\nquick check passed: the breaker tripped and the fallback served");
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// `--plot FILE.svg`: checkout latency of both services, per second, and the breaker's state.

fn plot(
    path: &str,
    sc: &Scenario,
    timeline: &[Tick],
    transitions: &[(Duration, Transition)],
) -> Result<(), Box<dyn StdError>> {
    use plotters::prelude::*;

    let total = sc.total().as_secs_f64();
    let (y_lo, y_hi) = (1.0f64, 60_000.0f64);
    let root = SVGBackend::new(path, (1100, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "checkout latency per second: with breaker vs naive retries",
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..total, (y_lo..y_hi).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("seconds since start")
        .y_desc("checkout latency (log scale)")
        .y_label_formatter(&|v| {
            if *v >= 1000.0 {
                format!("{}s", v / 1000.0)
            } else {
                format!("{v}ms")
            }
        })
        .draw()?;

    // The bad deploy, shaded.
    let (i0, i1) = (
        sc.healthy.as_secs_f64(),
        (sc.healthy + sc.incident).as_secs_f64(),
    );
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(i0, y_lo), (i1, y_hi)],
            RGBColor(200, 0, 0).mix(0.06).filled(),
        )))?
        .label("bad deploy")
        .legend(|(x, y)| {
            Rectangle::new(
                [(x, y - 5), (x + 15, y + 5)],
                RGBColor(200, 0, 0).mix(0.15).filled(),
            )
        });

    // The breaker's state as a band along the top: green closed, red open, orange half-open.
    let mut spans = Vec::new();
    let mut from = (0.0, State::Closed);
    for (at, t) in transitions {
        spans.push((from.0, at.as_secs_f64(), from.1));
        from = (at.as_secs_f64(), t.to);
    }
    spans.push((from.0, total, from.1));
    chart.draw_series(spans.into_iter().map(|(a, b, s)| {
        let color = match s {
            State::Open | State::ForcedOpen => RGBColor(220, 40, 40),
            State::HalfOpen => RGBColor(240, 160, 0),
            _ => RGBColor(60, 170, 60),
        };
        Rectangle::new([(a, 25_000.0), (b, y_hi)], color.filled())
    }))?;

    let ms = |d: Option<Duration>| d.map(|d| (d.as_secs_f64() * 1000.0).max(y_lo));
    let series = [
        (0usize, true, "with breaker p99", RGBColor(20, 90, 200)),
        (0, false, "with breaker p50", RGBColor(120, 170, 240)),
        (1, true, "naive + retries p99", RGBColor(200, 30, 30)),
        (1, false, "naive + retries p50", RGBColor(240, 140, 140)),
    ];
    for (i, is_p99, label, color) in series {
        let points: Vec<(f64, f64)> = timeline
            .iter()
            .filter_map(|k| ms(if is_p99 { k.p99[i] } else { k.p50[i] }).map(|v| (k.t, v)))
            .collect();
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 15, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.draw(&Text::new(
        "top band: breaker state (green closed, red open, orange half-open)",
        (90, 540),
        ("sans-serif", 14),
    ))?;
    root.present()?;
    Ok(())
}
