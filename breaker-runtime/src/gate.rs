//! Whether anyone watches calls (feature `otel`): one byte for the process, copied into
//! every breaker's flags (`Core::watched`) when it changes, so a call asks its own breaker,
//! in a test it makes anyway. A call nobody watches runs as it does without the feature
//! (`future.rs`); the spans and the timing themselves are `traced.rs`'s.

use std::sync::{
    atomic::{
        fence, AtomicU8,
        Ordering::{Relaxed, SeqCst},
    },
    OnceLock,
};

use tracing::Level;

/// The target of the spans.
pub const TARGET: &str = "breaker::otel";

/// Whether anyone may want a call's span or its time. [`REGISTERED`] once [`GATE_SITE`] is
/// known to `tracing`; [`SPANS`] while some subscriber's interest in a call's span is not
/// `never` (tracing rebuilds it through
/// [`Callsite::set_interest`](tracing::callsite::Callsite::set_interest) whenever a
/// subscriber or a filter changes); [`TIMED`] once the hook of `crate::traced::time_calls`
/// is set. Each change is copied into every breaker by [`REWATCH`].
static GATE: AtomicU8 = AtomicU8::new(0);
const REGISTERED: u8 = 1;
const SPANS: u8 = 2;
const TIMED: u8 = 4;

/// What tells every breaker of a change (`crate::shared`'s walk, given at [`register`]: the
/// gate knows no breaker).
static REWATCH: OnceLock<fn()> = OnceLock::new();

/// Someone may watch calls: a subscriber may want their spans, or the meter times them (a
/// conservative answer: `true` sends a call through `crate::traced::Watch::begin`, which
/// asks precisely).
pub(crate) fn watching() -> bool {
    GATE.load(Relaxed) & (SPANS | TIMED) != 0
}

/// A subscriber may want a call's span (conservative, as [`watching`]).
#[inline(always)]
pub(crate) fn spans_wanted() -> bool {
    let gate = GATE.load(Relaxed);
    gate & SPANS != 0 || (gate & REGISTERED == 0 && registered_gate() & SPANS != 0)
}

/// The gate, once [`GATE_SITE`] is registered with `tracing`.
#[cold]
#[inline(never)]
fn registered_gate() -> u8 {
    register_site();
    GATE.load(Relaxed)
}

/// `rewatch` kept to tell every breaker of each change, and [`GATE_SITE`] registered with
/// `tracing`, which sets its interest then (once: each breaker made asks, so no call has to;
/// the registration allocates).
pub(crate) fn register(rewatch: fn()) {
    if REWATCH.get().is_none() {
        let _ = REWATCH.set(rewatch);
        // Paired with `rewatch`'s: a change made as the first breaker is made is either
        // walked (it saw the walk) or read by that breaker (its reading comes after).
        fence(SeqCst);
    }
    if GATE.load(Relaxed) & REGISTERED == 0 {
        register_site();
    }
}

fn register_site() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        tracing::callsite::register(&GATE_SITE);
        GATE.fetch_or(REGISTERED, Relaxed);
    });
}

/// Every breaker told of a change of the gate (made before: see `register`'s fence).
fn rewatch() {
    fence(SeqCst);
    if let Some(rewatch) = REWATCH.get() {
        rewatch();
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
        let before = if interest.is_never() {
            GATE.fetch_and(!SPANS, Relaxed)
        } else {
            GATE.fetch_or(SPANS, Relaxed)
        };
        if (before & SPANS == 0) != interest.is_never() {
            rewatch();
        }
    }

    fn metadata(&self) -> &tracing::Metadata<'_> {
        &GATE_META
    }
}

/// The hook of `crate::traced::time_calls` is set: every call is watched from now on.
pub(crate) fn timed() {
    if GATE.fetch_or(TIMED, Relaxed) & TIMED == 0 {
        rewatch();
    }
}
