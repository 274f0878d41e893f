//! A keyed breaker's cap on its open keys (`Config::max_open_percent`): at most that percent
//! of its live keys (at least one) open or half-open at once. A key takes a place when it
//! trips and gives it back when it leaves open and half-open, or when it leaves the map
//! (evicted or swept: an open key not called for `idle` is, like a fresh one), even while
//! someone still holds its breaker: only keys in the map count. A key that finds no place
//! stays closed and keeps counting.

use std::sync::{
    atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed},
    Arc,
};

use tokio::time::Instant;

use crate::clock::to_nanos;

/// One WARN a minute says keys are held closed.
const WARN_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

/// The places of one keyed breaker, shared by its keys.
#[derive(Debug)]
pub(crate) struct OpenBudget {
    name: String,
    percent: u32,
    /// The keyed breaker's count of keys (its map's).
    live: Arc<AtomicUsize>,
    open: AtomicUsize,
    origin: Instant,
    /// When the last WARN was logged (nanos since `origin`, 0: never).
    warned: AtomicU64,
}

impl OpenBudget {
    pub(crate) fn new(name: &str, percent: u32, live: Arc<AtomicUsize>) -> Self {
        OpenBudget {
            name: name.to_owned(),
            percent,
            live,
            open: AtomicUsize::new(0),
            origin: Instant::now(),
            warned: AtomicU64::new(0),
        }
    }

    /// The places taken now.
    #[cfg(test)]
    pub(crate) fn taken(&self) -> usize {
        self.open.load(Relaxed)
    }

    /// The most keys open at once now: `percent` of the live keys, at least one.
    fn limit(&self) -> usize {
        let live = self.live.load(Relaxed);
        (live.saturating_mul(self.percent as usize) / 100).max(1)
    }

    fn try_take(&self) -> bool {
        let limit = self.limit();
        self.open
            .fetch_update(Relaxed, Relaxed, |n| (n < limit).then_some(n + 1))
            .is_ok()
    }

    fn held_closed(&self, key: &str) {
        let now = to_nanos(Instant::now().saturating_duration_since(self.origin)).max(1);
        let last = self.warned.load(Relaxed);
        let due = last == 0 || now.saturating_sub(last) >= to_nanos(WARN_EVERY);
        if due
            && self
                .warned
                .compare_exchange(last, now, Relaxed, Relaxed)
                .is_ok()
        {
            tracing::warn!(
                target: "breaker",
                breaker = self.name.as_str(),
                max_open_percent = self.percent,
                "keyed circuit breaker `{}` has {}% of its keys open (max_open_percent): `{key}` \
                 stays closed though its failures would open it; when most hosts look dead \
                 at once the fault is often ours (network, DNS)",
                self.name,
                self.percent,
            );
        }
    }
}

/// One key's hold on its keyed breaker's budget.
#[derive(Debug)]
pub(crate) struct OpenCap {
    budget: Arc<OpenBudget>,
    /// This key holds a place (it is open or half-open, or about to be).
    held: AtomicBool,
    /// The key left the map: its breaker, detached, opens without a place.
    detached: AtomicBool,
}

impl OpenCap {
    pub(crate) fn new(budget: Arc<OpenBudget>) -> Self {
        OpenCap {
            budget,
            held: AtomicBool::new(false),
            detached: AtomicBool::new(false),
        }
    }

    /// A place for this key to open, if it has one or one is free; else one WARN a minute.
    pub(super) fn take(&self, key: &str) -> bool {
        if self.held.load(Relaxed) || self.detached.load(Relaxed) {
            return true;
        }
        if self.budget.try_take() {
            if self.held.swap(true, Relaxed) {
                // A racing trip of this key took one too: one place a key.
                self.budget.open.fetch_sub(1, Relaxed);
            }
            return true;
        }
        self.budget.held_closed(key);
        false
    }

    /// The key left the map: its place is free, and it takes none again (a detached
    /// breaker someone still holds protects only its holder). A trip racing this may take
    /// a place back for a moment: it is given back when that breaker leaves open or goes.
    pub(crate) fn detach(&self) {
        self.detached.store(true, Relaxed);
        self.give();
    }

    /// Gives the place back (the key left open and half-open).
    pub(super) fn give(&self) {
        if self.held.swap(false, Relaxed) {
            self.budget.open.fetch_sub(1, Relaxed);
        }
    }
}

impl Drop for OpenCap {
    fn drop(&mut self) {
        self.give(); // an open key evicted or dropped frees its place
    }
}
