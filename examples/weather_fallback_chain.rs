//! # weather_fallback_chain: primary → cache → default, with two breakers
//!
//! A dashboard shows the current weather per location (seed 004). The reading comes from a
//! weather API; every good answer is also written to a cache cluster. When the API is sick
//! the dashboard serves the cached reading, and when there is none (or the cache cluster is
//! sick too) a flagged default reading, so the page keeps working:
//!
//! * `weather::primary` guards the weather API:
//!   `#[circuit_breaker(threshold = 3, cool_off = "10s", timeout = "500ms", fallback = from_cache)]`
//! * `weather::cache` guards the cache cluster, which is a remote dependency too:
//!   `#[circuit_breaker(threshold = 2, cool_off = "5s", timeout = "50ms", is_failure = cache_is_down)]`
//!   (a cache miss is an answer, not a failure: `is_failure` keeps it neutral).
//!
//! The primary's fallback is the next link of the chain: it asks the (breaker-guarded) cache,
//! and if that has nothing it serves the default only when the primary is known to be down
//! (its breaker is open or the call timed out); an error the API answered itself with no
//! cached reading to show surfaces as an error, as in the seed.
//!
//! The script: the API goes down at t=10s (it hangs), the cache cluster goes down at t=25s
//! and recovers at t=35s, the API recovers at t=45s. A request per second, three locations
//! (`oslo` is first asked while the API is down, so it was never cached). Time is tokio's
//! paused clock: the minute passes instantly and the output is the same on every run.
//!
//! ```text
//! cargo run --example weather_fallback_chain
//! ```
//!
//! (`BREAKER_QUICK=1` is accepted and changes nothing: this example is always quick.)

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use breaker::{circuit_breaker, registry, CallError, State};
use tokio::time::{sleep, Instant};

static START: OnceLock<Instant> = OnceLock::new();
static API_CALLS: AtomicU32 = AtomicU32::new(0);
static CACHE_CALLS: AtomicU32 = AtomicU32::new(0);

fn now() -> f64 {
    START.get().expect("set in main").elapsed().as_secs_f64()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Source {
    Primary,
    Cache,
    Default,
}

#[derive(Clone, Debug)]
struct Reading {
    celsius: f64,
    humidity: f64,
    source: Source,
    /// When the reading was taken (seconds since the start).
    taken_at: f64,
}

#[derive(Debug, thiserror::Error)]
enum WeatherError {
    #[error("weather API answered {0}")]
    Status(u16),
    #[error("all weather strategies failed: {0}")]
    Exhausted(String),
}

#[derive(Debug, thiserror::Error)]
enum CacheError {
    #[error("not cached")]
    Miss,
    #[error("cache cluster unreachable")]
    Down,
    #[error(transparent)]
    Breaker(#[from] breaker::BreakerError),
}

/// The API's 4xx answers are the caller's mistake, not the API being down.
fn server_fault(e: &WeatherError) -> bool {
    matches!(e, WeatherError::Status(s) if *s >= 500)
}

/// A cache miss is an answer; only an unreachable cluster counts against it.
fn cache_is_down(e: &CacheError) -> bool {
    matches!(e, CacheError::Down)
}

// ---- the two dependencies --------------------------------------------------------------------

/// The weather API: 80 ms normally; from t=10s to t=45s it hangs.
async fn weather_api(location: &str) -> Result<Reading, WeatherError> {
    API_CALLS.fetch_add(1, SeqCst);
    if (10.0..45.0).contains(&now()) {
        sleep(Duration::from_secs(30)).await;
        return Err(WeatherError::Status(504));
    }
    sleep(Duration::from_millis(80)).await;
    let (celsius, humidity) = match location {
        "berlin" => (9.0, 71.0),
        "lisbon" => (19.0, 60.0),
        "oslo" => (2.0, 80.0),
        _ => return Err(WeatherError::Status(404)),
    };
    Ok(Reading {
        celsius: celsius + (now() / 20.0).floor(),
        humidity,
        source: Source::Primary,
        taken_at: now(),
    })
}

static CACHE: Mutex<BTreeMap<String, Reading>> = Mutex::new(BTreeMap::new());
const CACHE_MAX_AGE: f64 = 300.0;

/// The cache cluster: 2 ms normally; from t=25s to t=35s it does not answer.
async fn cache_cluster_get(location: &str) -> Result<Reading, CacheError> {
    CACHE_CALLS.fetch_add(1, SeqCst);
    if (25.0..35.0).contains(&now()) {
        sleep(Duration::from_secs(5)).await;
        return Err(CacheError::Down);
    }
    sleep(Duration::from_millis(2)).await;
    let cached = CACHE.lock().unwrap().get(location).cloned();
    match cached {
        Some(r) if now() - r.taken_at <= CACHE_MAX_AGE => Ok(r),
        _ => Err(CacheError::Miss),
    }
}

// ---- the chain ---------------------------------------------------------------------------------

#[circuit_breaker(
    threshold = 3,
    cool_off = "10s",
    timeout = "500ms",
    is_failure = server_fault,
    fallback = from_cache,
    name = "weather::primary"
)]
async fn current_weather(location: &str) -> Result<Reading, WeatherError> {
    let reading = weather_api(location).await?;
    CACHE
        .lock()
        .unwrap()
        .insert(location.to_string(), reading.clone());
    Ok(reading)
}

#[circuit_breaker(
    threshold = 2,
    cool_off = "5s",
    timeout = "50ms",
    is_failure = cache_is_down,
    name = "weather::cache"
)]
async fn cached_reading(location: &str) -> Result<Reading, CacheError> {
    cache_cluster_get(location).await
}

/// Link two and three of the chain: the cache, then (when the primary is known down) the
/// default reading, flagged so the page can say "estimated".
async fn from_cache(location: &str, err: CallError<WeatherError>) -> Result<Reading, WeatherError> {
    match cached_reading(location).await {
        Ok(r) => Ok(Reading {
            source: Source::Cache,
            ..r
        }),
        Err(cache_err) => match err {
            CallError::Breaker(_) => Ok(Reading {
                celsius: 15.0,
                humidity: 50.0,
                source: Source::Default,
                taken_at: now(),
            }),
            CallError::Inner(e) => Err(WeatherError::Exhausted(format!("{e}; cache: {cache_err}"))),
        },
    }
}

fn state(name: &str) -> State {
    registry().get(name).map_or(State::Closed, |h| h.state())
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    let start = Instant::now();
    START.set(start).expect("set once");
    let mut served: BTreeMap<Source, u32> = BTreeMap::new();
    let mut errors = 0;

    println!("  t   location   source   reading          took   primary    cache");
    let mut every = tokio::time::interval(Duration::from_secs(1));
    for i in 0..56u32 {
        every.tick().await;
        let location = match (i % 3, i) {
            (_, 50) => "atlantis", // not a place: the API's own 404 (neutral), never cached
            (0, _) => "berlin",
            (1, _) => "lisbon",
            (_, i) if i < 12 => "berlin",
            _ => "oslo", // first asked at t=14s, while the API is down: never cached
        };
        let asked = Instant::now();
        let t = now();
        let result = current_weather(location).await;
        let took = asked.elapsed();
        let shown = match &result {
            Ok(r) => {
                *served.entry(r.source).or_default() += 1;
                format!(
                    "{:<8} {:>4.1}°C {:>3.0}%     ",
                    format!("{:?}", r.source).to_lowercase(),
                    r.celsius,
                    r.humidity
                )
            }
            Err(e) => {
                errors += 1;
                format!("ERROR: {e}")
            }
        };
        println!(
            "{t:>3.0}s  {:<9}  {shown} {:>6}ms  {:<9}  {}",
            location,
            took.as_millis(),
            state("weather::primary").as_str(),
            state("weather::cache").as_str()
        );
    }

    println!("\nserved: {served:?}, errors: {errors}");
    println!(
        "calls that reached the weather API: {}, the cache cluster: {}",
        API_CALLS.load(SeqCst),
        CACHE_CALLS.load(SeqCst)
    );
    for s in registry().snapshot() {
        println!(
            "{:<18} {:<10} calls {:>3}  failures {:>2}  timeouts {:>2}  rejected {:>2}",
            s.name,
            s.state.as_str(),
            s.stats.calls,
            s.stats.failures,
            s.stats.timeouts,
            s.stats.rejected
        );
    }
    assert!(
        served.get(&Source::Cache).is_some_and(|&n| n > 0),
        "the cache served"
    );
    assert_eq!(
        errors, 1,
        "only atlantis, which the API does not know and nobody cached"
    );
    assert!(
        served.get(&Source::Default).is_some_and(|&n| n > 0),
        "the default served"
    );
    assert_eq!(
        state("weather::primary"),
        State::Closed,
        "the primary recovered"
    );
    assert_eq!(
        state("weather::cache"),
        State::Closed,
        "the cache recovered"
    );
}
