//! The observable instruments: `breaker.calls`, `breaker.state`, `breaker.retries` and
//! `breaker.hedges`, read
//! from every live breaker's statistics when the SDK collects (nothing on the call path).
//!
//! The counters are cumulative, as OpenTelemetry's observable counters are: each series is
//! the sum of its live breakers' counts and of the last counts seen of those that went, so a
//! key evicted (or a breaker dropped) takes nothing away from its series.

use std::{
    collections::HashMap,
    sync::{Arc, LazyLock, Mutex},
};

use opentelemetry::{metrics::Meter, KeyValue};

use super::{SeriesId, ERROR_TYPE, OUTCOME};
use crate::{registry, State, Stats};

/// The values of `breaker.outcome` in the order of [`counts`], then `error.type` of each
/// (`None`: not an error).
const OUTCOMES: [(&str, Option<&str>); 8] = [
    ("success", None),
    ("failure", Some("_OTHER")),
    ("slow", Some("slow")),
    ("timeout", Some("timeout")),
    ("rejected", Some("rejected")),
    ("cancelled", None),
    ("abandoned", Some("abandoned")),
    ("neutral", None),
];

/// `breaker.retry.result`, in the order of [`counts`] after the outcomes.
const RETRIES: [&str; 2] = ["made", "denied"];

const STATES: [State; 5] = [
    State::Closed,
    State::Open,
    State::HalfOpen,
    State::ForcedOpen,
    State::Disabled,
];

/// `breaker.hedge.result`, in the order of [`counts`] after the retries.
const HEDGES: [&str; 3] = ["sent", "won", "denied"];

const COUNTS: usize = OUTCOMES.len() + RETRIES.len() + HEDGES.len();
type Counts = [u64; COUNTS];

/// A breaker's counts by outcome (disjoint), then its retries made and denied, then its
/// hedges sent, won and denied.
fn counts(s: &Stats) -> Counts {
    let failures = s
        .failures
        .saturating_sub(s.timeouts)
        .saturating_sub(s.slow_calls);
    [
        s.successes,
        failures,
        s.slow_calls.saturating_sub(s.abandoned),
        s.timeouts,
        s.rejected,
        s.cancelled,
        s.abandoned,
        s.neutral,
        s.retries,
        s.retries_denied,
        s.hedges,
        s.hedges_won,
        s.hedges_denied,
    ]
}

/// The attribute sets of one series, made once.
struct Bound {
    outcomes: [Vec<KeyValue>; OUTCOMES.len()],
    states: [Vec<KeyValue>; STATES.len()],
    retries: [Vec<KeyValue>; RETRIES.len()],
    hedges: [Vec<KeyValue>; HEDGES.len()],
}

impl Bound {
    fn new(series: &SeriesId) -> Bound {
        let with = |extra: &[KeyValue]| {
            let mut attrs = series.attributes();
            attrs.extend_from_slice(extra);
            attrs
        };
        Bound {
            outcomes: OUTCOMES.map(|(outcome, error)| {
                let mut extra = vec![KeyValue::new(OUTCOME, outcome)];
                extra.extend(error.map(|e| KeyValue::new(ERROR_TYPE, e)));
                with(&extra)
            }),
            states: STATES.map(|s| with(&[KeyValue::new("breaker.state", s.as_str())])),
            retries: RETRIES.map(|r| with(&[KeyValue::new("breaker.retry.result", r)])),
            hedges: HEDGES.map(|h| with(&[KeyValue::new("breaker.hedge.result", h)])),
        }
    }
}

#[derive(Default)]
struct Collector {
    /// Each live breaker's series and counts at the last collection, by identity.
    seen: HashMap<u64, (SeriesId, Counts)>,
    /// What breakers that went counted, by series.
    gone: HashMap<SeriesId, Counts>,
    bound: HashMap<SeriesId, Arc<Bound>>,
}

/// One collection: every series' cumulative counts, and its breakers in each state (live
/// series only).
struct Collected {
    counts: Vec<(Arc<Bound>, Counts)>,
    states: Vec<(Arc<Bound>, [u64; STATES.len()])>,
}

static COLLECTOR: LazyLock<Mutex<Collector>> = LazyLock::new(Default::default);

fn collect() -> Collected {
    // Read outside the lock: reading a state can cause a transition.
    let live: Vec<(u64, SeriesId, Counts, State)> = registry()
        .handles()
        .into_iter()
        .map(|h| {
            let series = SeriesId::of(h.name(), h.family());
            (h.id(), series, counts(&h.counted()), h.state())
        })
        .collect();
    let mut c = crate::sync::lock(&COLLECTOR);
    let c = &mut *c;
    let mut totals: HashMap<SeriesId, Counts> = HashMap::new();
    let mut states: HashMap<SeriesId, [u64; STATES.len()]> = HashMap::new();
    let mut now: HashMap<u64, (SeriesId, Counts)> = HashMap::with_capacity(live.len());
    for (id, series, counts, state) in live {
        // Counted across resets (`Handle::counted`): only ever grows.
        c.seen.remove(&id);
        add(totals.entry(series.clone()).or_default(), &counts);
        let at = STATES.iter().position(|s| *s == state).unwrap_or(0);
        states.entry(series.clone()).or_default()[at] += 1;
        now.insert(id, (series, counts));
    }
    // Those not seen now went: their last counts stay in their series.
    for (_, (series, last)) in std::mem::replace(&mut c.seen, now) {
        add(c.gone.entry(series).or_default(), &last);
    }
    for (series, gone) in &c.gone {
        add(totals.entry(series.clone()).or_default(), gone);
    }
    let mut bound = |series: &SeriesId| {
        c.bound
            .entry(series.clone())
            .or_insert_with(|| Arc::new(Bound::new(series)))
            .clone()
    };
    Collected {
        counts: totals.iter().map(|(s, n)| (bound(s), *n)).collect(),
        states: states.iter().map(|(s, n)| (bound(s), *n)).collect(),
    }
}

fn add(sum: &mut Counts, more: &Counts) {
    for (s, m) in sum.iter_mut().zip(more) {
        *s = s.saturating_add(*m);
    }
}

pub(super) fn register(meter: &Meter) {
    meter
        .u64_observable_counter("breaker.calls")
        .with_unit("{call}")
        .with_description("Calls through a circuit breaker, by outcome (disjoint).")
        .with_callback(|observer| {
            for (bound, counts) in collect().counts {
                for (attrs, n) in bound.outcomes.iter().zip(counts) {
                    observer.observe(n, attrs);
                }
            }
        })
        .build();
    meter
        .u64_observable_counter("breaker.retries")
        .with_unit("{retry}")
        .with_description(
            "Retries through a circuit breaker: made (each also a call), or denied by its \
             retry budget.",
        )
        .with_callback(|observer| {
            for (bound, counts) in collect().counts {
                let retries = &counts[OUTCOMES.len()..OUTCOMES.len() + RETRIES.len()];
                // Only once there are some: a breaker that never retries has no series.
                if retries.iter().any(|n| *n > 0) {
                    for (attrs, n) in bound.retries.iter().zip(retries) {
                        observer.observe(*n, attrs);
                    }
                }
            }
        })
        .build();
    meter
        .u64_observable_counter("breaker.hedges")
        .with_unit("{hedge}")
        .with_description(
            "Hedges of a circuit breaker's calls: sent (each also a call), won (its answer \
             returned), or denied (a budget, or the breaker not closed).",
        )
        .with_callback(|observer| {
            for (bound, counts) in collect().counts {
                let hedges = &counts[OUTCOMES.len() + RETRIES.len()..];
                // Only once there are some: a breaker that never hedges has no series.
                if hedges.iter().any(|n| *n > 0) {
                    for (attrs, n) in bound.hedges.iter().zip(hedges) {
                        observer.observe(*n, attrs);
                    }
                }
            }
        })
        .build();
    meter
        .u64_observable_gauge("breaker.state")
        .with_unit("{breaker}")
        .with_description(
            "State of a circuit breaker: 1 for the state in force, 0 for the others (a keyed \
             breaker's: its keys in each state).",
        )
        .with_callback(|observer| {
            for (bound, states) in collect().states {
                for (attrs, n) in bound.states.iter().zip(states) {
                    observer.observe(n, attrs);
                }
            }
        })
        .build();
}
