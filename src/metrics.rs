//! Prometheus-style series of every breaker, through the [`metrics`](https://docs.rs/metrics) facade (feature
//! `metrics`), so any exporter works: Prometheus, StatsD, OpenTelemetry, …
//!
//! | series | kind | labels | what |
//! | --- | --- | --- | --- |
//! | `circuit_breaker_calls_total` | counter | `breaker`, `outcome` | calls by outcome: `success`, `failure`, `timeout`, `slow`, `abandoned` (dropped after `slow_call`), `neutral`, `cancelled`, `rejected`, `throttled`, `shadow_rejected` |
//! | `circuit_breaker_state` | gauge | `breaker`, `state` | 1 for the current state, 0 for the four others (`closed`, `open`, `half_open`, `forced_open`, `disabled`) |
//! | `circuit_breaker_transitions_total` | counter | `breaker`, `from`, `to` | transitions, counted as they happen |
//! | `circuit_breaker_failure_rate` | gauge | `breaker` | percent failed in the breaker's current window |
//! | `circuit_breaker_keys` | gauge | `breaker`, `state` | a keyed breaker's live keys in each state |
//! | `circuit_breaker_retries_total` | counter | `breaker`, `result` | retries (`retry`): `made` (each one also a call above), `denied` by the retry budget; written once a breaker has retried |
//! | `circuit_breaker_hedges_total` | counter | `breaker`, `result` | hedges (`hedge`): `sent` (each one also a call above), `won` (its answer returned), `denied` (by a budget or the breaker); written once a breaker has hedged |
//!
//! The outcomes are disjoint, so they add up to the calls (less those still in flight):
//! `failure` is errors and panics only, that is [`Stats::failures`] less
//! `timeouts` and `slow_calls`, which have their own outcomes; `rejected` is
//! [`Stats::rejected`] less `throttled` (calls shed by `throttle` or `ramp`); and
//! `shadow_rejected` counts a dry run's pretended refusals, which were made and count
//! nowhere else.
//!
//! # Keyed breakers: series per function, not per key
//!
//! Keys come from users' data (hosts, tenants), so by default a [`KeyedBreaker`] named
//! `{name}` has one set of series, labelled `breaker="{name}"`: `circuit_breaker_calls_total`
//! summed over its keys (9 series), `circuit_breaker_transitions_total` summed over its keys
//! (one series per `from`/`to` pair that happened: at most 20, in practice the 4 of
//! closed → open → half-open → closed or open), `circuit_breaker_keys` (5
//! series, one per state), and `circuit_breaker_state` for each key that is not closed,
//! labelled with the key's own name `breaker="{name}[{key}]"` (5 series per such key). A key
//! that closes again is set to closed once, and one that goes while not closed (evicted,
//! swept, dropped) is set to 0 in all five states once at the next publish (no key that
//! went still says it is open); neither is written again. So the state series written
//! follow the live keys that are not closed, and an exporter that forgets idle series
//! (below) keeps only theirs: a keyed function costs at most 34 series (typically 18) plus 5
//! per key that is not closed, whatever its number of keys. [`per_key(true)`](per_key) (process-wide)
//! publishes every key's own series instead, as for a plain breaker (15 per key, plus its
//! transitions).
//!
//! # Who writes what, and when
//!
//! - **Transitions** update `circuit_breaker_state` and `circuit_breaker_transitions_total` the
//!   moment they happen, so an open shorter than the scrape interval is still seen. This module
//!   watches transitions from the first call of [`describe`], [`publish`] or
//!   [`spawn_publisher`] on (whichever comes first); transitions before it are not counted.
//! - **Calls** are published by [`publish`] (every live breaker, now) or by the task of
//!   [`spawn_publisher`] (every period) as deltas: what each breaker counted since the last
//!   publish is added to its series. The call path does no metrics work at all, so the
//!   counters move in steps, one per publish, and publishing twice adds nothing. A breaker
//!   that goes (evicted, or its last clone dropped) hands its last counts to the next
//!   publish, so a key evicted and created again never loses nor repeats a count. A
//!   `reset()` clears a breaker's `Stats`, not its counters: the series keep counting from
//!   what was counted before it.
//! - A breaker that is dropped or evicted is no longer published. The `metrics` facade cannot
//!   delete a series, so its last values stay in the exporter until the exporter forgets idle
//!   series (a key's state series say it is in no state meanwhile): with Prometheus, set
//!   [`idle_timeout`](https://docs.rs/metrics-exporter-prometheus/0.17/metrics_exporter_prometheus/struct.PrometheusBuilder.html#method.idle_timeout)
//!   to a few publish periods, and only live breakers stay on the page.
//!
//! [`KeyedBreaker`]: crate::KeyedBreaker
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
    collections::{HashMap, HashSet},
    sync::{
        atomic::{AtomicBool, Ordering::Relaxed},
        LazyLock, Mutex, MutexGuard, Once,
    },
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
/// `circuit_breaker_keys{breaker, state}`: a keyed breaker's live keys per state (a gauge).
pub const KEYS: &str = "circuit_breaker_keys";

/// `circuit_breaker_retries_total{breaker, result}`: retries made and denied (a counter).
pub const RETRIES_TOTAL: &str = "circuit_breaker_retries_total";

/// `circuit_breaker_hedges_total{breaker, result}`: hedges sent, won and denied (a counter).
pub const HEDGES_TOTAL: &str = "circuit_breaker_hedges_total";

/// The outcomes, then the retries made and denied, then the hedges sent, won and denied:
/// what a publish keeps per breaker.
const COUNTS: usize = OUTCOMES.len() + 5;
type Counts = [u64; COUNTS];

/// [`outcomes`], then `retries` and `retries_denied`, then `hedges`, `hedges_won` and
/// `hedges_denied`.
fn counts(stats: &Stats) -> Counts {
    let outcomes = outcomes(stats);
    std::array::from_fn(|i| match i - OUTCOMES.len().min(i) {
        _ if i < OUTCOMES.len() => outcomes[i],
        0 => stats.retries,
        1 => stats.retries_denied,
        2 => stats.hedges,
        3 => stats.hedges_won,
        _ => stats.hedges_denied,
    })
}

/// Whether keyed breakers publish every key's own series (see [`per_key`]).
static PER_KEY: AtomicBool = AtomicBool::new(false);

/// Process-wide: `true` publishes every key of every keyed breaker as a breaker of its own
/// (`breaker="{name}[{key}]"`: its calls, state, failure rate and transitions), as before
/// part three; `false` (the default) publishes one set of series per keyed function (see
/// the module's docs). Takes effect at the next publish and transition.
pub fn per_key(on: bool) {
    PER_KEY.store(on, Relaxed);
}

/// The values of the `outcome` label, in the order of [`outcomes`].
pub const OUTCOMES: [&str; 10] = [
    "success",
    "failure",
    "timeout",
    "slow",
    "abandoned",
    "neutral",
    "cancelled",
    "rejected",
    "throttled",
    "shadow_rejected",
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
         abandoned, neutral, cancelled, rejected, throttled, shadow_rejected); the outcomes \
         are disjoint."
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
    describe_gauge!(KEYS, "Live keys of a keyed circuit breaker, by state.");
    describe_counter!(
        RETRIES_TOTAL,
        Unit::Count,
        "Retries through a circuit breaker: made (each also a call), or denied by its retry budget."
    );
    describe_counter!(
        HEDGES_TOTAL,
        Unit::Count,
        "Hedges through a circuit breaker: sent (each also a call), won, or denied."
    );
}

/// Adds what every breaker counted since the last publish to its series, and sets the
/// state and failure-rate gauges, now. Cheap enough to call on every scrape;
/// [`spawn_publisher`] calls it periodically.
pub fn publish() {
    watch_transitions();
    let per_key = PER_KEY.load(Relaxed);
    let seq_before = lock().seq;
    // Breakers that went since the last publish first: a new breaker never takes an old
    // one's identity, and one that goes after the walk below is in the next take.
    let departed = take_departures();
    // Read outside our lock: reading a state can cause a transition, whose observer takes
    // the lock. Holding handles says nothing to a keyed breaker's eviction.
    let live: Vec<Live> = registry()
        .handles()
        .into_iter()
        .map(|h| Live {
            id: h.id(),
            family: h.family().map(str::to_owned),
            snap: h.snapshot(),
            counted: h.counted(),
        })
        .collect();
    let mut inner = lock();
    // Keys whose state series say they are not closed, and that went (evicted, swept, or
    // dropped): said once to be in no state, then no longer written, so no gone key claims
    // to be open and an exporter's idle timeout forgets their series.
    let names: HashSet<&str> = live.iter().map(|l| l.snap.name.as_str()).collect();
    let gone: Vec<String> = inner
        .stated
        .iter()
        .filter(|n| !names.contains(n.as_str()))
        .cloned()
        .collect();
    for name in gone {
        inner.stated.remove(&name);
        for s in STATES {
            gauge!(STATE, "breaker" => name.clone(), "state" => s.as_str()).set(0.0);
        }
    }
    let mut deltas: HashMap<String, Counts> = HashMap::new();
    let mut add = |series: String, delta: Counts| {
        let sum = deltas.entry(series).or_default();
        for (s, d) in sum.iter_mut().zip(delta) {
            *s += d;
        }
    };
    for d in departed {
        let last = inner.last.remove(&d.id).unwrap_or_default();
        let series = series_name(&d.name, d.family.as_deref(), per_key);
        let delta = delta(last, counts(&d.stats));
        // Only what it counted since the last publish: a breaker that went with nothing
        // new is not published again.
        if delta.iter().any(|d| *d > 0) {
            add(series, delta);
        }
    }
    let mut keys: HashMap<String, [u64; 5]> = HashMap::new();
    // Of two live breakers with one name, the newest sets the gauges, as `registry().get`
    // finds it (the walk is in order of creation).
    let mut gauges: HashMap<&str, &Live> = HashMap::new();
    for l in &live {
        let now = counts(&l.counted);
        let last = inner.last.insert(l.id, now).unwrap_or_default();
        let series = series_name(&l.snap.name, l.family.as_deref(), per_key);
        add(series, delta(last, now));
        if let Some(family) = &l.family {
            let at = STATES.iter().position(|s| *s == l.snap.state).unwrap_or(0);
            keys.entry(family.clone()).or_default()[at] += 1;
        }
        gauges.insert(&l.snap.name, l);
    }
    for (series, delta) in deltas {
        for (outcome, d) in OUTCOMES.iter().zip(delta) {
            counter!(CALLS_TOTAL, "breaker" => series.clone(), "outcome" => *outcome).increment(d);
        }
        // Only once there are some: a breaker that never retries writes no retry series.
        for (result, d) in ["made", "denied"].into_iter().zip(&delta[OUTCOMES.len()..]) {
            if *d > 0 {
                counter!(RETRIES_TOTAL, "breaker" => series.clone(), "result" => result)
                    .increment(*d);
            }
        }
        // Likewise for hedges.
        let hedges = &delta[OUTCOMES.len() + 2..];
        for (result, d) in ["sent", "won", "denied"].into_iter().zip(hedges) {
            if *d > 0 {
                counter!(HEDGES_TOTAL, "breaker" => series.clone(), "result" => result)
                    .increment(*d);
            }
        }
    }
    for (name, l) in gauges {
        let own = per_key || l.family.is_none();
        // A key's state series exist while it is not closed (by default).
        let seen = inner.state_seq.get(name).copied().unwrap_or(0);
        if (own || l.snap.state != State::Closed) && seen <= seq_before {
            set_state(name, l.snap.state);
            if !own {
                inner.stated.insert(name.to_owned());
            }
        }
        if own {
            gauge!(FAILURE_RATE, "breaker" => name.to_owned()).set(l.snap.failure_rate);
        }
    }
    // A keyed breaker whose keys all went still shows its zeros once.
    for gone in inner.families.iter().filter(|f| !keys.contains_key(*f)) {
        for s in STATES {
            gauge!(KEYS, "breaker" => gone.clone(), "state" => s.as_str()).set(0.0);
        }
    }
    for (family, counts) in &keys {
        for (s, n) in STATES.iter().zip(counts) {
            gauge!(KEYS, "breaker" => family.clone(), "state" => s.as_str()).set(*n as f64);
        }
    }
    inner.families = keys.into_keys().collect();
    // Names that no live breaker has are forgotten.
    inner.state_seq.retain(|n, _| names.contains(n.as_str()));
}

/// One live breaker as a publish reads it.
struct Live {
    id: u64,
    family: Option<String>,
    snap: crate::Snapshot,
    /// Its counts across resets (`Handle::counted`), which the series add up.
    counted: Stats,
}

/// The `breaker` label a breaker's calls are published under: its keyed breaker's name by
/// default, else its own.
fn series_name(name: &str, family: Option<&str>, per_key: bool) -> String {
    match family {
        Some(f) if !per_key => f.to_owned(),
        _ => name.to_owned(),
    }
}

/// What was counted since `last`, outcome by outcome; a count below `last` was reset, and
/// all of it is new.
fn delta(last: Counts, now: Counts) -> Counts {
    std::array::from_fn(|i| {
        if now[i] >= last[i] {
            now[i] - last[i]
        } else {
            now[i]
        }
    })
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
/// assert_eq!(breaker::metrics::outcomes(&stats), [4, 3, 1, 1, 0, 0, 0, 1, 0, 0]);
/// ```
pub fn outcomes(stats: &Stats) -> [u64; OUTCOMES.len()] {
    let errors = stats
        .failures
        .saturating_sub(stats.timeouts)
        .saturating_sub(stats.slow_calls);
    [
        stats.successes,
        errors,
        stats.timeouts,
        stats.slow_calls.saturating_sub(stats.abandoned),
        stats.abandoned,
        stats.neutral,
        stats.cancelled,
        stats.rejected.saturating_sub(stats.throttled),
        stats.throttled,
        stats.shadow_rejected,
    ]
}

#[derive(Default)]
struct Inner {
    /// Transitions seen so far.
    seq: u64,
    /// Each live breaker's counts at the last publish, by identity.
    last: HashMap<u64, Counts>,
    /// The observer's sequence number of each name's last transition.
    state_seq: HashMap<String, u64>,
    /// Keyed breakers whose key counts were published last time.
    families: Vec<String>,
    /// Keys (by default, not per key) whose state series say they are not closed.
    stated: HashSet<String>,
}

fn lock() -> MutexGuard<'static, Inner> {
    static INNER: LazyLock<Mutex<Inner>> = LazyLock::new(Default::default);
    crate::sync::lock(&INNER)
}

fn set_state(name: &str, state: State) {
    for s in STATES {
        let value = if s == state { 1.0 } else { 0.0 };
        gauge!(STATE, "breaker" => name.to_owned(), "state" => s.as_str()).set(value);
    }
}

fn on_transition(t: &Transition) {
    let name = t.name.to_string();
    // A key's transitions count under its keyed breaker's name, unless per key.
    let family = if PER_KEY.load(Relaxed) {
        None
    } else {
        registry()
            .get(&name)
            .and_then(|h| h.family().map(str::to_owned))
    };
    let mut inner = lock();
    inner.seq += 1;
    let seq = inner.seq;
    inner.state_seq.insert(name.clone(), seq);
    set_state(&name, t.to);
    if family.is_some() {
        // A key's state series are written while it is not closed; closed, they say so
        // once and are no longer written.
        if t.to == State::Closed {
            inner.stated.remove(&name);
        } else {
            inner.stated.insert(name.clone());
        }
    }
    counter!(
        TRANSITIONS_TOTAL,
        "breaker" => family.unwrap_or(name),
        "from" => t.from.as_str(),
        "to" => t.to.as_str()
    )
    .increment(1);
}

/// Subscribes [`on_transition`] once, for the life of the process.
fn watch_transitions() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        breaker_runtime::__internals::watch_departures();
        observe_forever(on_transition)
    });
}

/// The breakers that went since the last take, with their last counts.
fn take_departures() -> Vec<breaker_runtime::__internals::Departed> {
    breaker_runtime::__internals::take_departures()
}

/// The one place that names the runtime's transition feed.
fn observe_forever(f: fn(&Transition)) {
    crate::observe(f).forever();
}
