//! `breaker.transitions` and `breaker.ejections`: counted as each transition happens, by an
//! observer of transitions (the runtime's feed, as the `metrics` feature watches them), so an
//! open shorter than the export interval is still seen; an ejection is an opening whose cause
//! is `Cause::Outlier`.

use std::sync::{Mutex, Once};

use opentelemetry::{
    metrics::{Counter, Meter},
    KeyValue,
};

use super::SeriesId;
use crate::{registry, Cause, Transition};

/// The counters of every meter installed: transitions, ejections.
static COUNTERS: Mutex<Vec<(Counter<u64>, Counter<u64>)>> = Mutex::new(Vec::new());

pub(super) fn register(meter: &Meter) {
    let transitions = meter
        .u64_counter("breaker.transitions")
        .with_unit("{transition}")
        .with_description("State transitions of a circuit breaker, counted as they happen.")
        .build();
    let ejections = meter
        .u64_counter("breaker.ejections")
        .with_unit("{ejection}")
        .with_description("Outlier ejections of a keyed circuit breaker's keys (openings).")
        .build();
    crate::sync::lock(&COUNTERS).push((transitions, ejections));
    static ONCE: Once = Once::new();
    ONCE.call_once(|| crate::observe(on_transition).forever());
}

fn on_transition(t: &Transition) {
    // A key's transitions count in its keyed breaker's series.
    let family = registry()
        .get(t.name.as_str())
        .and_then(|h| h.family().map(str::to_owned));
    let series = SeriesId::of(t.name.as_str(), family.as_deref()).attributes();
    let ejected = matches!(t.cause, Cause::Outlier { .. });
    let mut attrs = series.clone();
    attrs.extend([
        KeyValue::new("breaker.state.from", t.from.as_str()),
        KeyValue::new("breaker.state.to", t.to.as_str()),
        KeyValue::new("breaker.cause", cause(&t.cause)),
    ]);
    for (transitions, ejections) in crate::sync::lock(&COUNTERS).iter() {
        transitions.add(1, &attrs);
        if ejected {
            ejections.add(1, &series);
        }
    }
}

/// `breaker.cause`.
fn cause(cause: &Cause) -> &'static str {
    match cause {
        Cause::ConsecutiveFailures { .. } => "consecutive_failures",
        Cause::FailureRate { .. } => "failure_rate",
        Cause::CoolOffElapsed => "cool_off_elapsed",
        Cause::ProbeFailed => "probe_failed",
        Cause::ProbesSucceeded { .. } => "probes_succeeded",
        Cause::Manual => "manual",
        Cause::Verdict { .. } => "verdict",
        Cause::Fleet => "fleet",
        Cause::Outlier { .. } => "outlier",
        _ => "other",
    }
}
