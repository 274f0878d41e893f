//! Every breaker's metrics through your OpenTelemetry [`Meter`], and a span per call through
//! `tracing` (feature `otel`), in one documented schema. One line at start-up:
//!
//! ```
//! # fn main() {
//! let meter = opentelemetry::global::meter("checkout"); // your SDK's meter
//! breaker::otel::install(&meter);
//! # }
//! ```
//!
//! Only the `opentelemetry` API crate is a dependency: the SDK, its exporter (OTLP,
//! Prometheus, stdout) and its export interval are yours. The spans go through `tracing`, so
//! `tracing-opentelemetry` (or any subscriber) exports them; nothing to install for those.
//!
//! # The schema (version 1)
//!
//! OpenTelemetry's semantic conventions name no resilience instruments yet (their issue
//! #2355 is open), so these live under `breaker.*`, this library's own namespace, and change
//! only with [`SCHEMA_VERSION`], which is also the instrumentation scope's version
//! ([`scope`]). Units are UCUM: seconds (`s`) and annotations (`{call}`), never `ms` nor a
//! type name.
//!
//! | instrument | kind | unit | attributes | what |
//! | --- | --- | --- | --- | --- |
//! | `breaker.calls` | counter (observable) | `{call}` | `breaker.name`, `breaker.outcome`, `error.type` | calls by outcome, disjoint: they add up to the calls made (less those in flight) |
//! | `breaker.call.duration` | histogram | `s` | `breaker.name`, `breaker.outcome`, `error.type` | from admission to the end of each async call that reached the dependency (a retried or hedged call's attempts each; a sync call is not timed, see *Spans*) |
//! | `breaker.state` | gauge (observable) | `{breaker}` | `breaker.name`, `breaker.state` | 1 for the state in force, 0 for the four others; a keyed breaker's: its keys in each state |
//! | `breaker.transitions` | counter | `{transition}` | `breaker.name`, `breaker.state.from`, `breaker.state.to`, `breaker.cause` | state changes, counted as they happen |
//! | `breaker.retries` | counter (observable) | `{retry}` | `breaker.name`, `breaker.retry.result` | retries `made` (each also a call) and `denied` by the retry budget |
//! | `breaker.hedges` | counter (observable) | `{hedge}` | `breaker.name`, `breaker.hedge.result` (`sent`, `won`, `denied`) | hedges (`Stats.hedges`, `hedges_won`, `hedges_denied`); a series once a breaker has hedged |
//! | `breaker.ejections` | counter | `{ejection}` | `breaker.name` | outlier ejections of a keyed breaker's keys (transitions whose `breaker.cause` is `outlier`), counted as they happen |
//!
//! Every series carries `breaker.name`, and, for a keyed breaker, `breaker.key` only through
//! the mapping you give ([`Options::key`]). The values:
//!
//! - `breaker.outcome`: `success`; `failure` (an error, a classifier's failure, a panic);
//!   `slow` (finished after `slow_call`); `timeout`; `rejected` (refused: open, half-open
//!   full, bulkhead full, throttled or ramping); `cancelled` (dropped before `slow_call`);
//!   `abandoned` (dropped after it); `neutral` (an error judged the caller's fault).
//! - `error.type`, on the error outcomes only (`failure`, `slow`, `timeout`, `rejected`,
//!   `abandoned`), as OpenTelemetry's conventions want it: low-cardinality. On
//!   `breaker.calls`, counted from the breakers' statistics, it is the outcome itself, and
//!   `_OTHER` for a `failure`; on `breaker.call.duration` and the spans, which see each call,
//!   a failure's is the Rust type of its error (`std::any::type_name`, `_OTHER` for an `Ok`
//!   a classifier failed), and a refusal's `breaker.open`, `breaker.full` or
//!   `breaker.throttled`.
//! - `breaker.state`, `breaker.state.from`, `breaker.state.to`: `closed`, `open`,
//!   `half_open`, `forced_open`, `disabled`.
//! - `breaker.cause`: `consecutive_failures`, `failure_rate`, `cool_off_elapsed`,
//!   `probe_failed`, `probes_succeeded`, `manual`, `verdict` (a `Retry-After`, a classifier's
//!   `OpenFor`), `fleet`, `outlier` (an ejection), `other`.
//! - `breaker.retry.result`: `made`, `denied`.
//!
//! `breaker.call.duration`'s buckets are OpenTelemetry's advice for request durations in
//! seconds (5 ms to 10 s); a view of your SDK can change them.
//!
//! ## Spans
//!
//! Through `tracing` (target `breaker::otel`, level INFO; filter `breaker::otel=off` to drop
//! them and keep the transitions' log lines), with `tracing-opentelemetry`'s reserved fields:
//!
//! | span | fields |
//! | --- | --- |
//! | `breaker.call` | `otel.kind = "internal"`, `breaker.name`, `breaker.outcome`, and on an error outcome `otel.status_code = "ERROR"` and `error.type`; a retried or hedged call's also `breaker.attempts` (the attempts made) |
//! | `breaker.attempt` | `otel.kind`, `breaker.name`, `breaker.attempt.kind`, `breaker.attempt.number` (1 the first; not on a probe), `breaker.outcome`, `otel.status_code`, `error.type` |
//!
//! `breaker.attempt.kind` says which attempt it is:
//!
//! - `first` and `retry`: the attempts of a retried call (`call_retried`, the retry layers),
//!   children of its `breaker.call`, which ends with its last attempt's outcome.
//! - `first` and `hedge`: the attempts of a hedged call (`call_hedged`, the hedge layer),
//!   children of its `breaker.call`, numbered in the order they were sent; the attempts that
//!   lose are dropped, and each ends its span with the outcome that drop gives it
//!   (`cancelled`, or `abandoned` past `slow_call`). The call ends with the answer it
//!   returns: the winner's, or the first attempt's failure when every attempt failed. A
//!   keyed call whose first key refused its first attempt makes another `first` attempt on
//!   the next key (the refused one's span says `rejected`). A keyed hedged call's
//!   `breaker.call` carries the name of the first key it picked; each attempt its own key's.
//! - `probe`: one run of the breaker's own probe ([`Config::probe`](crate::Config::probe)).
//!   No caller's call holds it (it runs in a task of the breaker's, whenever a cool-off
//!   ends), so it is a root span, the start of a trace of its own, rather than the child of
//!   whatever span was current at the opening; it has no `breaker.call` above it and no
//!   number. Its outcome is the probe's: `success`, `failure` (`error.type` `_OTHER`: a
//!   probe answers with a verdict, not an error of a type), `timeout` (no answer within its
//!   lease), or `cancelled` (the breaker went while it ran). The probe's own spans are its
//!   children.
//!
//! **A panic.** A call whose future panics ends, once the panic is caught (by tokio's task,
//! say) and the call future dropped, with `breaker.outcome = "failure"`,
//! `otel.status_code = "ERROR"` and `error.type = "panic"`, as does a probe that panics. A
//! retried or hedged call whose attempt panics ends so too, and so does that attempt. A
//! panicked call is a failure in `breaker.calls` (the statistics) but is not timed: it has
//! no point in `breaker.call.duration`.
//!
//! **A sync call** ([`Breaker::call_sync`](crate::Breaker::call_sync), the attribute on a
//! plain `fn`) has no span and no duration: it is counted in `breaker.calls` like any call,
//! and its path is what it is without the feature, to the instruction. It runs inside its
//! caller's own span, whose time is its time.
//!
//! A span's `breaker.name` is the breaker's own (`{name}[{key}]` for a key, as in its log
//! lines): a trace may be as precise as you like, a metric series may not. The user's future
//! runs inside its call's (or attempt's) span, so spans made by the dependency's client are
//! its children. A span is made only when a subscriber wants it: with none (or one that
//! filters INFO out), a call pays one compare against tracing's cached level filter.
//!
//! ## How it maps onto the `metrics` feature's series
//!
//! | `metrics` (Prometheus) | here |
//! | --- | --- |
//! | `circuit_breaker_calls_total{breaker, outcome}` | `breaker.calls{breaker.name, breaker.outcome}`; `throttled` is counted in `rejected`, a dry run's `shadow_rejected` is not counted |
//! | `circuit_breaker_state{breaker, state}` | `breaker.state{breaker.name, breaker.state}`; a keyed breaker's keys are counted in theirs, not given series of their own |
//! | `circuit_breaker_transitions_total{breaker, from, to}` | `breaker.transitions{breaker.name, breaker.state.from, breaker.state.to, breaker.cause}` |
//! | `circuit_breaker_retries_total{breaker, result}` | `breaker.retries{breaker.name, breaker.retry.result}` |
//! | `circuit_breaker_keys{breaker, state}` | `breaker.state` of the keyed breaker |
//! | `circuit_breaker_failure_rate{breaker}` | none: a rate is computed in the backend from `breaker.calls` |
//! | (none) | `breaker.call.duration` |
//!
//! A Prometheus exporter of OpenTelemetry renders `breaker.calls` as
//! `breaker_calls_total`, not the `metrics` feature's names; both features can be on at once.
//!
//! # Where the numbers come from, and what they cost
//!
//! - `breaker.calls`, `breaker.state` and `breaker.retries` are observable: your SDK's reader
//!   asks for them at each collection, and they are read then from every live breaker's
//!   statistics (the registry, as the `metrics` feature and the dashboard read them). The call
//!   path does nothing for them. A breaker that goes (dropped, evicted) keeps its counts in
//!   its series; what it counted between the last collection and its end is not seen. A
//!   `reset()` clears `Stats`, not the series: they read the counts across resets.
//! - `breaker.transitions` is counted as each transition happens (an observer of
//!   transitions), so an open shorter than the export interval is still seen.
//! - `breaker.call.duration` needs each call's time: with this feature the call future reads
//!   the breaker's clock at admission and at the end, and hands the duration to this module,
//!   which records it with the breaker's attributes, bound once per breaker and thread (no
//!   allocation per call). Without [`install`], a call pays nothing for it (see below).
//! - Without the feature none of this is compiled: a call costs what it did, to the
//!   instruction.
//!
//! Measured with callgrind (`scripts/callgrind_otel.sh`, instructions per call ready at
//! once, release build, current-thread runtime; `benches/RESULTS.md` has the table): a
//! closed async call 115 without the feature; 117 with it, when no subscriber wants the
//! spans and nothing is installed (whether anyone watches is a bit of each breaker's flags,
//! which its calls test anyway, set in every breaker when `tracing`'s interest or the meter
//! changes: O(breakers) at such a change, 6 ms at 100 000 keys; the 2 instructions are
//! register allocation around the watched path; a refused one 189 both ways; a sync call
//! +0: it has no span and is not timed); about 1 790 more
//! installed (an SDK meter, no spans), most of them the SDK's `Histogram::record` (hashing
//! the attribute set, which it does at every record), the rest the two clock readings and
//! finding the bound attributes.
//! A refusal is not timed.
//!
//! # Keyed breakers: bounded series
//!
//! Keys come from users' data, so a [`KeyedBreaker`](crate::KeyedBreaker)'s series are its
//! own name's, summed over its keys, however many there are: a keyed breaker with 100 000
//! keys has the series of one breaker. To see some keys apart, give a mapping from a key (as
//! its breaker's name writes it) to a bounded set of values; a key mapped to `None` stays in
//! the sum:
//!
//! ```
//! use breaker::otel::{install_with, Options};
//!
//! # fn main() {
//! let meter = opentelemetry::global::meter("checkout");
//! // Two series for the payment providers you care about, the rest summed.
//! install_with(
//!     &meter,
//!     Options::default().key(|key| match key {
//!         "stripe.com" => Some("stripe"),
//!         "adyen.com" => Some("adyen"),
//!         _ => None,
//!     }),
//! );
//! # }
//! ```
//!
//! # Installing
//!
//! Call [`install`] once, with the meter of the provider you export through. A second call
//! with another meter adds the observable instruments and the transitions to that meter too,
//! but call durations go to the first meter's histogram only.

mod series;
mod timing;
mod transitions;

use std::sync::OnceLock;

use opentelemetry::metrics::Meter;
use opentelemetry::InstrumentationScope;

/// The version of the schema above; a change of any name, unit, attribute or value is a new
/// version.
pub const SCHEMA_VERSION: &str = "1";

/// The instrumentation scope to get a meter (or tracer) for this library's instruments with:
/// name `breaker`, version [`SCHEMA_VERSION`].
///
/// ```
/// let meter = opentelemetry::global::meter_with_scope(breaker::otel::scope());
/// breaker::otel::install(&meter);
/// ```
pub fn scope() -> InstrumentationScope {
    InstrumentationScope::builder("breaker")
        .with_version(SCHEMA_VERSION)
        .build()
}

/// What [`install_with`] does beyond [`install`].
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct Options {
    /// `breaker.key`: a key of a keyed breaker (as its breaker's name writes it, between the
    /// brackets) to the value of its series' `breaker.key`, from a bounded set; `None` (and
    /// no mapping at all, the default) keeps the key in its keyed breaker's sum.
    pub key: Option<fn(&str) -> Option<&'static str>>,
}

impl Options {
    /// Sets [`key`](Self::key).
    pub fn key(mut self, map: fn(&str) -> Option<&'static str>) -> Self {
        self.key = Some(map);
        self
    }
}

/// Records every breaker's metrics (those of today and those made later) through `meter`,
/// in the schema above.
pub fn install(meter: &Meter) {
    install_with(meter, Options::default())
}

/// [`install`], with [`Options`]. The key mapping of the first call is the one in force.
pub fn install_with(meter: &Meter, options: Options) {
    OPTIONS.get_or_init(|| options);
    series::register(meter);
    transitions::register(meter);
    timing::register(meter);
}

static OPTIONS: OnceLock<Options> = OnceLock::new();

/// The mapping in force.
fn key_map() -> Option<fn(&str) -> Option<&'static str>> {
    OPTIONS.get().and_then(|o| o.key)
}

/// The series a breaker counts in: its keyed breaker's name (and the mapped key) for a key,
/// else its own name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SeriesId {
    name: std::sync::Arc<str>,
    key: Option<&'static str>,
}

impl SeriesId {
    fn of(name: &str, family: Option<&str>) -> SeriesId {
        match family {
            None => SeriesId {
                name: name.into(),
                key: None,
            },
            Some(family) => SeriesId {
                name: family.into(),
                key: key_of(name, family).and_then(|k| key_map().and_then(|map| map(k))),
            },
        }
    }

    /// `breaker.name` and, if mapped, `breaker.key`.
    fn attributes(&self) -> Vec<opentelemetry::KeyValue> {
        let mut attrs = vec![opentelemetry::KeyValue::new(
            NAME,
            opentelemetry::Value::String(self.name.clone().into()),
        )];
        if let Some(key) = self.key {
            attrs.push(opentelemetry::KeyValue::new(KEY, key));
        }
        attrs
    }
}

/// A key's text in its breaker's name `{family}[{key}]`.
fn key_of<'n>(name: &'n str, family: &str) -> Option<&'n str> {
    name.strip_prefix(family)?
        .strip_prefix('[')?
        .strip_suffix(']')
}

const NAME: &str = "breaker.name";
const KEY: &str = "breaker.key";
const OUTCOME: &str = "breaker.outcome";
const ERROR_TYPE: &str = "error.type";
