//! `breaker.call.duration`: each call's time, handed over by the call future as it ends
//! (the runtime's hook, set once), recorded with the breaker's attributes. Those are bound
//! once per breaker and thread: a call clones two reference-counted values and allocates
//! nothing.

use std::{cell::RefCell, collections::HashMap, sync::OnceLock};

use breaker_runtime::__internals::{time_calls, CallEnd};
use opentelemetry::{
    metrics::{Histogram, Meter},
    KeyValue,
};

use super::{SeriesId, ERROR_TYPE, OUTCOME};

/// The histogram of the first meter installed.
static HISTOGRAM: OnceLock<Histogram<f64>> = OnceLock::new();

/// OpenTelemetry's advice for request durations, in seconds.
const BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

/// Breakers whose attributes a thread keeps, at most: past it, it forgets them all and binds
/// again (a keyed breaker's many keys).
const BOUND_PER_THREAD: usize = 4096;

pub(super) fn register(meter: &Meter) {
    HISTOGRAM.get_or_init(|| {
        meter
            .f64_histogram("breaker.call.duration")
            .with_unit("s")
            .with_description(
                "Time of each call through a circuit breaker that reached the dependency, \
                 from admission to its end.",
            )
            .with_boundaries(BUCKETS.to_vec())
            .build()
    });
    time_calls(on_call_end);
}

thread_local! {
    /// Each breaker's `breaker.name` (and `breaker.key`) by identity, on this thread.
    static BOUND: RefCell<HashMap<u64, [Option<KeyValue>; 2]>> = RefCell::new(HashMap::new());
}

fn on_call_end(end: &CallEnd<'_>) {
    let Some(histogram) = HISTOGRAM.get() else {
        return;
    };
    let [name, key] = BOUND
        .try_with(|bound| {
            let mut bound = bound.borrow_mut();
            if bound.len() >= BOUND_PER_THREAD && !bound.contains_key(&end.id) {
                bound.clear();
            }
            bound
                .entry(end.id)
                .or_insert_with(|| {
                    let mut attrs = SeriesId::of(end.name.as_str(), end.family)
                        .attributes()
                        .into_iter();
                    [attrs.next(), attrs.next()]
                })
                .clone()
        })
        .unwrap_or_default();
    let Some(name) = name else { return };
    let outcome = KeyValue::new(OUTCOME, end.outcome.as_str());
    let seconds = end.duration.as_secs_f64();
    let error = end.error_type.map(|e| KeyValue::new(ERROR_TYPE, e));
    match (key, error) {
        (None, None) => histogram.record(seconds, &[name, outcome]),
        (Some(key), None) => histogram.record(seconds, &[name, key, outcome]),
        (None, Some(error)) => histogram.record(seconds, &[name, outcome, error]),
        (Some(key), Some(error)) => histogram.record(seconds, &[name, key, outcome, error]),
    }
}
