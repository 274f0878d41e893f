//! Whether anyone watches calls (feature `otel`): one byte, read once at each call's
//! admission. A call nobody watches runs as it does without the feature (`future.rs`); the
//! spans and the timing themselves are `traced.rs`'s.

use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

use tracing::Level;

/// The target of the spans.
pub const TARGET: &str = "breaker::otel";

/// Whether anyone may want a call's span or its time: one byte, so a call nobody watches
/// pays one load and compare at admission and nothing after it (the call future then has no
/// watch at all: see `future.rs`). [`REGISTERED`] once [`GATE_SITE`] is known to `tracing`;
/// [`SPANS`] while some subscriber's interest in a call's span is not `never` (tracing
/// rebuilds it through [`Callsite::set_interest`](tracing::callsite::Callsite::set_interest) whenever a subscriber or a filter changes);
/// [`TIMED`] once the hook of `crate::traced::time_calls` is set. [`QUIET`]: registered, neither.
static GATE: AtomicU8 = AtomicU8::new(0);
const REGISTERED: u8 = 1;
const SPANS: u8 = 2;
const TIMED: u8 = 4;
const QUIET: u8 = REGISTERED;

/// Nobody wants a call's span or its time (a conservative answer: `false` only sends the
/// call through `crate::traced::Watch::begin`, which asks precisely).
#[inline(always)]
pub(crate) fn quiet() -> bool {
    let gate = GATE.load(Relaxed);
    gate == QUIET || (gate & REGISTERED == 0 && registered_gate() == QUIET)
}

/// A subscriber may want a call's span (conservative, as [`quiet`]).
#[inline(always)]
pub(crate) fn spans_wanted() -> bool {
    let gate = GATE.load(Relaxed);
    gate & SPANS != 0 || (gate & REGISTERED == 0 && registered_gate() & SPANS != 0)
}

/// The gate, once [`GATE_SITE`] is registered with `tracing`.
#[cold]
#[inline(never)]
fn registered_gate() -> u8 {
    register();
    GATE.load(Relaxed)
}

/// [`GATE_SITE`] registered with `tracing`, which sets its interest then (once: each breaker
/// made asks, so no call has to; the registration allocates).
pub(crate) fn register() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    if GATE.load(Relaxed) & REGISTERED == 0 {
        ONCE.call_once(|| {
            tracing::callsite::register(&GATE_SITE);
            GATE.fetch_or(REGISTERED, Relaxed);
        });
    }
}

/// A callsite of a call's span (`breaker.call` at INFO, target [`TARGET`]) that makes no
/// span: `tracing` tells it whether subscribers want such spans, and it keeps that in
/// [`GATE`]. The spans themselves are made by `info_span!` in `crate::traced`, asked again.
struct GateSite;

static GATE_SITE: GateSite = GateSite;

static GATE_FIELDS: &[&str] = &[];

static GATE_META: tracing::Metadata<'static> = tracing::Metadata::new(
    "breaker.call",
    TARGET,
    Level::INFO,
    Some(file!()),
    Some(line!()),
    Some(module_path!()),
    tracing::field::FieldSet::new(GATE_FIELDS, tracing::callsite::Identifier(&GATE_SITE)),
    tracing::metadata::Kind::SPAN,
);

impl tracing::callsite::Callsite for GateSite {
    fn set_interest(&self, interest: tracing::subscriber::Interest) {
        if interest.is_never() {
            GATE.fetch_and(!SPANS, Relaxed);
        } else {
            GATE.fetch_or(SPANS, Relaxed);
        }
    }

    fn metadata(&self) -> &tracing::Metadata<'_> {
        &GATE_META
    }
}

/// The hook of `crate::traced::time_calls` is set: every call is watched from now on.
pub(crate) fn timed() {
    GATE.fetch_or(TIMED, Relaxed);
}
