//! Prometheus-style series of every breaker, through the [`metrics`] facade (feature
//! `metrics`), so any exporter works: Prometheus, StatsD, OpenTelemetry, …
//!
//! | series | kind | labels | what |
//! | --- | --- | --- | --- |
//! | `circuit_breaker_calls_total` | counter | `breaker`, `outcome` | calls by outcome: `success`, `failure`, `timeout`, `slow`, `neutral`, `cancelled`, `rejected` |
//! | `circuit_breaker_state` | gauge | `breaker`, `state` | 1 for the current state, 0 for the four others (`closed`, `open`, `half_open`, `forced_open`, `disabled`) |
//! | `circuit_breaker_transitions_total` | counter | `breaker`, `from`, `to` | transitions, counted as they happen |
//! | `circuit_breaker_failure_rate` | gauge | `breaker` | percent failed in the breaker's current window |
//!
//! The outcomes are disjoint, so they add up to the calls (less those still in flight):
//! `failure` is errors and panics only, that is [`Stats::failures`] less
//! `timeouts` and `slow_calls`, which have their own outcomes.
//!
//! # Who writes what, and when
//!
//! - **Transitions** update `circuit_breaker_state` and `circuit_breaker_transitions_total` the
//!   moment they happen, so an open shorter than the scrape interval is still seen. This module
//!   watches transitions from the first call of [`describe`], [`publish`] or
//!   [`spawn_publisher`] on (whichever comes first); transitions before it are not counted.
//! - **Calls** are copied from each breaker's [`Stats`] by [`publish`] (every
//!   live breaker, now) or by the task of [`spawn_publisher`] (every period), as absolute
//!   values: the call path does no metrics work at all, so the counters move in steps, one per
//!   publish, and publishing twice changes nothing. A `reset()` clears a breaker's `Stats`,
//!   not its counters: the next publish sees the counts go down and carries on from the
//!   totals it had published, so the counters never go down. What was counted between the
//!   last publish and the reset is not seen (nor, when the counts after the reset overtake the
//!   old totals before the next publish, is the reset).
//! - A breaker that is dropped or evicted is no longer published. The `metrics` facade cannot
//!   delete a series, so its last values stay in the exporter until the exporter forgets idle
//!   series: with Prometheus, set
//!   [`idle_timeout`](https://docs.rs/metrics-exporter-prometheus/0.17/metrics_exporter_prometheus/struct.PrometheusBuilder.html#method.idle_timeout)
//!   to a few publish periods, and only live breakers stay on the page.
//!
//! Breaker names become the `breaker` label, so each name is a series: a keyed breaker
//! (`name[key]`) adds one per key, bounded by its `max_keys`.
//!
//! # Setting it up
//!
//! Install a recorder first (the exporter's), then [`describe`], then start the publisher:
//!
//! ```
//! use std::time::Duration;
//! use breaker::{Breaker, Config};
//! use metrics_exporter_prometheus::PrometheusBuilder;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! // In a service: `PrometheusBuilder::new().install_recorder()` once at start-up (global),
//! // then serve `handle.render()` at `/metrics`. Here: a recorder for this thread only.
//! let recorder = PrometheusBuilder::new().build_recorder();
//! let prometheus = recorder.handle();
//! let _local = metrics::set_default_local_recorder(&recorder);
//!
//! breaker::metrics::describe();
//! let _publisher = breaker::metrics::spawn_publisher(Duration::from_secs(10));
//!
//! let tax = Breaker::new("docs::metrics_tax", Config::default().threshold(1));
//! let _ = tax.call(async { Err::<(), _>("503") }).await; // opens it
//! breaker::metrics::publish(); // or wait for the publisher
//!
//! let text = prometheus.render();
//! assert!(text.contains(r#"circuit_breaker_state{breaker="docs::metrics_tax",state="open"} 1"#));
//! assert!(text.contains(r#"circuit_breaker_calls_total{breaker="docs::metrics_tax",outcome="failure"} 1"#));
//! assert!(text.contains(
//!     r#"circuit_breaker_transitions_total{breaker="docs::metrics_tax",from="closed",to="open"} 1"#
//! ));
//! # }
//! ```
//!
//! The series go to the recorder of the thread where they are written: the global one in a
//! service. A recorder set for one thread only (`metrics::with_local_recorder`, as in tests)
//! sees the transitions that happen on that thread, which on a current-thread runtime is all
//! of them.

use std::{
    collections::HashMap,
    sync::{LazyLock, Mutex, MutexGuard, Once, PoisonError},
    time::Duration,
};

use metrics::{counter, describe_counter, describe_gauge, gauge, Unit};

use crate::{registry, State, Stats, Transition};

/// `circuit_breaker_calls_total{breaker, outcome}`: calls by outcome (a counter).
pub const CALLS_TOTAL: &str = "circuit_breaker_calls_total";
/// `circuit_breaker_state{breaker, state}`: 1 for the current state, 0 for the others (a gauge).
pub const STATE: &str = "circuit_breaker_state";
/// `circuit_breaker_transitions_total{breaker, from, to}`: transitions (a counter).
pub const TRANSITIONS_TOTAL: &str = "circuit_breaker_transitions_total";
/// `circuit_breaker_failure_rate{breaker}`: percent failed in the current window (a gauge).
pub const FAILURE_RATE: &str = "circuit_breaker_failure_rate";

/// The values of the `outcome` label, in the order of [`outcomes`].
pub const OUTCOMES: [&str; 7] = [
    "success",
    "failure",
    "timeout",
    "slow",
    "neutral",
    "cancelled",
    "rejected",
];

/// Every state, for the five series of `circuit_breaker_state`.
const STATES: [State; 5] = [
    State::Closed,
    State::Open,
    State::HalfOpen,
    State::ForcedOpen,
    State::Disabled,
];

/// Registers the descriptions and units of the four series with the installed recorder, and
/// starts watching transitions. Call it after installing the recorder (descriptions given
/// before are lost); calling it again is harmless.
pub fn describe() {
    watch_transitions();
    describe_counter!(
        CALLS_TOTAL,
        Unit::Count,
        "Calls through a circuit breaker, by outcome (success, failure, timeout, slow, \
         neutral, cancelled, rejected); the outcomes are disjoint."
    );
    describe_gauge!(
        STATE,
        "State of a circuit breaker: 1 for the current state, 0 for the others."
    );
    describe_counter!(
        TRANSITIONS_TOTAL,
        Unit::Count,
        "State transitions of a circuit breaker, counted as they happen."
    );
    describe_gauge!(
        FAILURE_RATE,
        Unit::Percent,
        "Percent of the calls in a circuit breaker's current window that failed."
    );
}

/// Copies the counts, state and failure rate of every live breaker into the series, now.
/// Cheap enough to call on every scrape; [`spawn_publisher`] calls it periodically.
pub fn publish() {
    watch_transitions();
    let seq_before = lock().seq;
    // Newest last: of two live breakers with one name, the newest is published, as
    // `registry().get` finds it. Read outside our lock: reading a state can cause a
    // transition, whose observer takes the lock.
    let mut live: HashMap<String, crate::Snapshot> = HashMap::new();
    for s in registry().snapshot() {
        live.insert(s.name.clone(), s);
    }
    let mut inner = lock();
    let mut published = HashMap::with_capacity(live.len());
    for (name, snap) in live {
        let mut seen = inner.published.remove(&name).unwrap_or_default();
        let now = outcomes(&snap.stats);
        // A count that went down means a reset (or a new breaker under the name): the series
        // go on from where they were, so they never go down.
        if seen
            .counts
            .iter()
            .zip(&now)
            .any(|(before, now)| now < before)
        {
            for (offset, before) in seen.offset.iter_mut().zip(seen.counts) {
                *offset += before;
            }
        }
        for ((outcome, now), offset) in OUTCOMES.iter().zip(now).zip(seen.offset) {
            counter!(CALLS_TOTAL, "breaker" => name.clone(), "outcome" => *outcome)
                .absolute(now + offset);
        }
        seen.counts = now;
        // A transition the observer wrote after our snapshot is newer than the snapshot.
        if seen.state_seq <= seq_before {
            set_state(&name, snap.state);
        }
        gauge!(FAILURE_RATE, "breaker" => name.clone()).set(snap.failure_rate);
        published.insert(name, seen);
    }
    // Breakers that are gone are forgotten here, and no longer published.
    inner.published = published;
}

/// Spawns a tokio task that calls [`publish`] now and then every `every`, for as long as the
/// runtime runs (or until the handle is aborted).
///
/// # Panics
///
/// Outside a tokio runtime, or if `every` is zero (as [`tokio::time::interval`] does).
pub fn spawn_publisher(every: Duration) -> tokio::task::JoinHandle<()> {
    watch_transitions();
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::spawn(async move {
        loop {
            tick.tick().await;
            publish();
        }
    })
}

/// The counts of `stats` by outcome, in the order of [`OUTCOMES`]: disjoint, so they add up
/// to `stats.calls` less the calls in flight.
///
/// ```
/// let mut stats = breaker::Stats::default();
/// stats.calls = 10;
/// stats.successes = 4;
/// stats.failures = 5; // 1 of them a timeout, 1 a slow call
/// stats.timeouts = 1;
/// stats.slow_calls = 1;
/// stats.rejected = 1;
/// assert_eq!(breaker::metrics::outcomes(&stats), [4, 3, 1, 1, 0, 0, 1]);
/// ```
pub fn outcomes(stats: &Stats) -> [u64; 7] {
    let errors = stats
        .failures
        .saturating_sub(stats.timeouts)
        .saturating_sub(stats.slow_calls);
    [
        stats.successes,
        errors,
        stats.timeouts,
        stats.slow_calls,
        stats.neutral,
        stats.cancelled,
        stats.rejected,
    ]
}

/// What has been published of one breaker.
#[derive(Default)]
struct Published {
    /// Its counts at the last publish, by outcome.
    counts: [u64; 7],
    /// What its counts had reached before its resets, added to what they say now.
    offset: [u64; 7],
    /// The observer's sequence number of its last transition (0: none seen).
    state_seq: u64,
}

#[derive(Default)]
struct Inner {
    /// Transitions seen so far.
    seq: u64,
    published: HashMap<String, Published>,
}

fn lock() -> MutexGuard<'static, Inner> {
    static INNER: LazyLock<Mutex<Inner>> = LazyLock::new(Default::default);
    INNER.lock().unwrap_or_else(PoisonError::into_inner)
}

fn set_state(name: &str, state: State) {
    for s in STATES {
        let value = if s == state { 1.0 } else { 0.0 };
        gauge!(STATE, "breaker" => name.to_owned(), "state" => s.as_str()).set(value);
    }
}

fn on_transition(t: &Transition) {
    let name = t.name.to_string();
    let mut inner = lock();
    inner.seq += 1;
    let seq = inner.seq;
    inner.published.entry(name.clone()).or_default().state_seq = seq;
    set_state(&name, t.to);
    counter!(
        TRANSITIONS_TOTAL,
        "breaker" => name,
        "from" => t.from.as_str(),
        "to" => t.to.as_str()
    )
    .increment(1);
}

/// Subscribes [`on_transition`] once, for the life of the process.
fn watch_transitions() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| observe_forever(on_transition));
}

/// The one place that names the runtime's transition feed.
fn observe_forever(f: fn(&Transition)) {
    crate::observe(f).forever();
}
