//! # fraud_vendor: a vendor's region degrades for nine minutes
//!
//! Freya's checkout calls a fraud-scoring vendor behind a breaker: trip when 50 percent of a
//! 20-call window fails (calls time out at 2 seconds), stay open 30 seconds, then allow 3
//! half-open probes (seed 002). On a Thursday the vendor's EU region degrades: most calls
//! hang past the 2-second ceiling. The breaker trips; for the next 30 seconds checkout calls
//! fail in microseconds and fall back to a rules-based score. Probes go out every 30 seconds;
//! while the vendor is still sick they time out and the breaker reopens. When the vendor is
//! fixed, three probes succeed and the breaker closes. Checkout latency never waits on the
//! vendor for more than the 2 s timeout, and the vendor sees a trickle instead of the full
//! stream.
//!
//! ```text
//! #[circuit_breaker(failure_rate = 50, window = 20, timeout = "2s", cool_off = "30s",
//!                   probes = 3, fallback = rules_based_score)]
//! ```
//!
//! Time is tokio's paused clock: the twelve minutes of the incident (one checkout a second,
//! 14:30:00 to 14:42:00) pass in a blink and the output is the same on every run.
//!
//! ```text
//! cargo run --example fraud_vendor
//! ```
//!
//! (`BREAKER_QUICK=1` is accepted and changes nothing: this example is always quick.)

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use breaker::{circuit_breaker, registry, CallError, State, Transition};
use tokio::time::{sleep, Instant};

const NAME: &str = "fraud::score";
/// The incident, in seconds after 14:30:00.
const DEGRADED: std::ops::Range<u64> = 60..640;
const RUN: u64 = 720;

static START: OnceLock<Instant> = OnceLock::new();
static VENDOR_CALLS: AtomicU32 = AtomicU32::new(0);
static VENDOR_CALLS_DEGRADED: AtomicU32 = AtomicU32::new(0);
static RULES: AtomicU32 = AtomicU32::new(0);
static FAILED_FAST: AtomicU32 = AtomicU32::new(0);
static TIMELINE: Mutex<Vec<(u64, Transition)>> = Mutex::new(Vec::new());
static DICE: AtomicU64 = AtomicU64::new(42);

fn elapsed_ms() -> u64 {
    START.get().expect("set in main").elapsed().as_millis() as u64
}

fn clock(ms: u64) -> String {
    let s = 14 * 3600 + 30 * 60 + ms / 1000;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        s / 3600,
        s / 60 % 60,
        s % 60,
        ms % 1000
    )
}

/// A deterministic die (SplitMix64), so every run tells the same story.
fn roll() -> f64 {
    let mut z = DICE.fetch_add(0x9E37_79B9_7F4A_7C15, SeqCst);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
}

#[derive(Debug, thiserror::Error)]
#[error("fraud vendor error")]
struct VendorError;

#[derive(Debug, Clone, Copy)]
struct Score {
    /// 0..100; 80 and above holds the order for review.
    risk: u32,
    by_vendor: bool,
}

/// The vendor: 120 ms normally; while its EU region is degraded, four calls in five hang for
/// 10 s (the breaker's 2 s timeout gives up first).
async fn vendor_score(amount_cents: u64) -> Result<u32, VendorError> {
    VENDOR_CALLS.fetch_add(1, SeqCst);
    let secs = elapsed_ms() / 1000;
    let latency = if DEGRADED.contains(&secs) {
        VENDOR_CALLS_DEGRADED.fetch_add(1, SeqCst);
        if roll() < 0.8 {
            Duration::from_secs(10)
        } else {
            Duration::from_millis(400)
        }
    } else {
        Duration::from_millis(120)
    };
    sleep(latency).await;
    Ok((amount_cents % 97) as u32)
}

#[circuit_breaker(
    failure_rate = 50,
    window = 20,
    timeout = "2s",
    cool_off = "30s",
    probes = 3,
    fallback = rules_based_score,
    name = "fraud::score",
    on_state_change = remember
)]
async fn score(amount_cents: u64) -> Result<Score, VendorError> {
    let risk = vendor_score(amount_cents).await?;
    Ok(Score {
        risk,
        by_vendor: true,
    })
}

/// Whatever went wrong (open, timeout, the vendor's own error): score by the house rules.
async fn rules_based_score(
    amount_cents: u64,
    err: CallError<VendorError>,
) -> Result<Score, VendorError> {
    RULES.fetch_add(1, SeqCst);
    if err.is_open() {
        FAILED_FAST.fetch_add(1, SeqCst);
    }
    let risk = if amount_cents > 80_000 { 80 } else { 10 };
    Ok(Score {
        risk,
        by_vendor: false,
    })
}

fn remember(t: &Transition) {
    TIMELINE.lock().unwrap().push((elapsed_ms(), t.clone()));
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    let start = Instant::now();
    START.set(start).expect("set once");
    let latencies = std::sync::Arc::new(Mutex::new(Vec::new()));

    // One checkout a second for twelve minutes, each scored concurrently with the others.
    let mut every = tokio::time::interval(Duration::from_secs(1));
    let mut checkouts = tokio::task::JoinSet::new();
    for i in 0..RUN {
        every.tick().await;
        let latencies = latencies.clone();
        checkouts.spawn(async move {
            let began = Instant::now();
            let s = score(1_000 + i * 731 % 90_000).await;
            latencies.lock().unwrap().push(began.elapsed());
            s
        });
    }
    let (mut by_vendor, mut held) = (0, 0);
    while let Some(s) = checkouts.join_next().await {
        let s = s.expect("no panic").expect("the fallback always scores");
        by_vendor += u32::from(s.by_vendor);
        held += u32::from(s.risk >= 80);
    }

    println!(
        "fraud vendor incident: EU region degraded {}..{}",
        clock(DEGRADED.start * 1000),
        clock(DEGRADED.end * 1000)
    );
    println!("breaker: failure_rate 50% of 20 calls, timeout 2s, open 30s, 3 probes\n");
    println!("timeline of `{NAME}`:");
    for (ms, t) in TIMELINE.lock().unwrap().iter() {
        println!(
            "  {}  {:<9} -> {:<9}  {}",
            clock(*ms),
            t.from.as_str(),
            t.to.as_str(),
            t.cause
        );
    }

    let mut l = latencies.lock().unwrap().clone();
    l.sort();
    let p = |q: f64| l[((l.len() as f64 * q).ceil() as usize).clamp(1, l.len()) - 1];
    let degraded_secs = DEGRADED.end - DEGRADED.start;
    println!("\ncheckouts scored:             {RUN}");
    println!("  by the vendor:              {by_vendor}");
    println!("  by the rules (fallback):    {}", RULES.load(SeqCst));
    println!("  of which failed fast:       {}", FAILED_FAST.load(SeqCst));
    println!("  held for manual review:     {held}");
    println!(
        "calls that reached the vendor: {}",
        VENDOR_CALLS.load(SeqCst)
    );
    println!(
        "  during the {degraded_secs} s of degradation: {} (without a breaker: {degraded_secs}, each waiting up to 2 s)",
        VENDOR_CALLS_DEGRADED.load(SeqCst)
    );
    println!(
        "scoring latency p50 {}ms, p99 {}ms, max {}ms (a failed-fast call takes no time on the paused clock)",
        p(0.5).as_millis(),
        p(0.99).as_millis(),
        p(1.0).as_millis()
    );

    let timeline = TIMELINE.lock().unwrap();
    assert!(
        timeline.iter().any(|(_, t)| t.to == State::Open),
        "the breaker tripped"
    );
    assert_eq!(
        registry().get(NAME).expect("created").state(),
        State::Closed,
        "and closed again"
    );
}
