//! Outlier ejection for keyed breakers ([`Config::outliers`](crate::Config::outliers)):
//! every interval, each key's success rate judged against its peers' (Envoy's outlier
//! detection, gRPC A50), the outliers opened for a growing time, never a cascade.
//!
//! | module | what it holds |
//! | --- | --- |
//! | this one | [`Seen`], what the detector keeps of a key |
//! | `detect` | the decision, pure: given each key's calls and failures in the interval and how many keys admit, which to eject; and how long |
//! | `task` | the timer: one tokio task per keyed breaker with outliers, holding it weakly |
//!
//! The configuration ([`Outliers`](crate::Outliers), its checks, the `OutlierPolicy`
//! detection runs on) is `config::outliers`'; the walk over a keyed breaker's keys (reading
//! each one's counts) is the map's (`keyed::map::outliers`).

pub(crate) mod detect;
pub(crate) mod task;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};

/// What the detector keeps of one key, in the key's entry of the map (so a key evicted or
/// swept is forgotten with it, and the detector holds nothing for keys the map does not):
/// the counts at the last reading and its ejections. Made at the detector's first reading
/// of the key; written by the detector only.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    /// `Stats.calls`, `successes` and `failures` at the last reading (raw counts, which
    /// only grow: a `reset` does not move them).
    pub(crate) calls: AtomicU64,
    pub(crate) successes: AtomicU64,
    pub(crate) failures: AtomicU64,
    /// n: ejections so far, less one per interval not ejected.
    pub(crate) ejections: AtomicU32,
    /// Opened by an ejection and not closed since.
    pub(crate) ejected: AtomicBool,
}
