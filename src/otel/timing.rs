//! `breaker.call.duration`: each call's time, handed over by the call future as it ends
//! (the runtime's hook, set once), recorded with the breaker's attributes. Those are bound
//! once per breaker, outcome (and error type) and thread, and lent to the SDK as they are:
//! a call clones, allocates and frees nothing.

use std::{
    cell::RefCell,
    collections::HashMap,
    hash::{BuildHasherDefault, Hasher},
    sync::OnceLock,
};

use breaker_runtime::__internals::{time_calls, CallEnd, Ended};
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

/// One breaker's attribute sets on one thread, made as they are first needed: one per
/// outcome, and one per error type of its failures (a few: one per error type its callers
/// return).
struct Bound {
    series: Vec<KeyValue>,
    attrs: Vec<(Ended, &'static str, Box<[KeyValue]>)>,
}

impl Bound {
    fn attributes(&mut self, outcome: Ended, error_type: Option<&'static str>) -> &[KeyValue] {
        let error = error_type.unwrap_or("");
        let at = match self
            .attrs
            .iter()
            .position(|(o, e, _)| *o == outcome && *e == error)
        {
            Some(at) => at,
            None => {
                let mut attrs = self.series.clone();
                attrs.push(KeyValue::new(OUTCOME, outcome.as_str()));
                attrs.extend(error_type.map(|e| KeyValue::new(ERROR_TYPE, e)));
                self.attrs.push((outcome, error, attrs.into()));
                self.attrs.len() - 1
            }
        };
        &self.attrs[at].2
    }
}

/// Breakers' identities are unique numbers: one multiplication spreads them (no SipHash per
/// call).
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8 | u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, id: u64) {
        self.0 = id.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type ById = HashMap<u64, Bound, BuildHasherDefault<IdHasher>>;

thread_local! {
    /// Each breaker's attribute sets by identity, on this thread.
    static BOUND: RefCell<ById> = RefCell::new(ById::default());
}

fn on_call_end(end: &CallEnd<'_>) {
    let Some(histogram) = HISTOGRAM.get() else {
        return;
    };
    let seconds = end.duration.as_secs_f64();
    let _ = BOUND.try_with(|bound| {
        let Ok(mut bound) = bound.try_borrow_mut() else {
            return;
        };
        if bound.len() >= BOUND_PER_THREAD && !bound.contains_key(&end.id) {
            bound.clear();
        }
        let attrs = bound
            .entry(end.id)
            .or_insert_with(|| Bound {
                series: SeriesId::of(end.name.as_str(), end.family).attributes(),
                attrs: Vec::new(),
            })
            .attributes(end.outcome, end.error_type);
        histogram.record(seconds, attrs);
    });
}
