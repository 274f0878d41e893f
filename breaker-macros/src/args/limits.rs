//! The runtime's numbers the compile-time checks use, written once for the macro: a
//! proc-macro crate cannot depend on the runtime, so `tests/attribute_keys.rs`
//! (`the_attributes_caps_are_the_runtimes`) proves each agrees with the runtime's.

use std::time::Duration;

/// `Config::MAX_PROBES`.
pub(super) const MAX_PROBES: u32 = 1_000;
/// `Config::MAX_WINDOW_CALLS`.
pub(super) const MAX_WINDOW_CALLS: u32 = 100_000;
/// `Config::MAX_ADAPTIVE_CONCURRENCY`.
pub(super) const MAX_ADAPTIVE: u32 = 100_000;
/// The default `cool_off` (`Config::default`), which `max_cool_off` must reach.
pub(super) const DEFAULT_COOL_OFF: Duration = Duration::from_secs(10);
/// The default window's size in calls (`Config::default`), which `min_calls` must fit.
pub(super) const DEFAULT_WINDOW_CALLS: u32 = 100;

/// The macro's own: `throttle` above this sheds nothing a breaker's threshold would not
/// catch first.
pub(super) const MAX_THROTTLE_K: f64 = 100.0;

/// `config::hedge::MAX_HEDGES`: the most attempts after the first.
pub(super) const MAX_HEDGES: u32 = 4;
/// `config::hedge::MIN_HEDGE_DELAY`.
pub(super) const MIN_HEDGE_DELAY: Duration = Duration::from_millis(1);
/// `config::hedge::MAX_HEDGE_DELAY`.
pub(super) const MAX_HEDGE_DELAY: Duration = Duration::from_secs(2);
