//! The timer: one tokio task per keyed breaker with outliers, which judges its keys every
//! interval (`Detector::detect`, the map's walk) off the call path.
//!
//! Bounded as the probe task is: it holds the keyed breaker only by a weak reference
//! (upgraded for one walk, never across an await), and stops at once when the keyed
//! breaker is dropped (its [`Slot`] holds the sender of the task's stop signal). It starts
//! with the keyed breaker when a tokio runtime is current, else at the first new key made
//! in one (and again there if its runtime shut down); it stands down when `reconfigure`
//! takes outliers away, and starts again when one gives them back.

use std::{
    future::Future,
    pin::Pin,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering::Relaxed},
        Arc, Mutex, Weak,
    },
    task::Poll,
    time::Duration,
};

use tokio::sync::oneshot;

use crate::sync::lock;

/// What the task judges: a keyed breaker's map.
pub(crate) trait Detector: Send + Sync + 'static {
    /// The interval in force; `None` when outliers are off (the task stands down).
    fn interval(&self) -> Option<Duration>;
    /// One interval's judgement.
    fn detect(&self);
    /// The task's place.
    fn slot(&self) -> &Slot;
    /// Whether it has no key yet: a task started then judges its first interval (else its
    /// first walk only takes readings, the counts before being no interval's).
    fn is_empty(&self) -> bool;
}

/// The detector task's place in its keyed breaker.
#[derive(Debug)]
pub(crate) struct Slot {
    /// Outliers are configured: read first, so a new key of a keyed breaker without them
    /// takes no lock here.
    wanted: AtomicBool,
    /// The running task's stop signal: dropped with the keyed breaker, which stops the task.
    stop: Mutex<Option<oneshot::Sender<()>>>,
    /// The task has read every key once (or started on an empty map): counts from then on
    /// are an interval's.
    pub(crate) primed: AtomicBool,
    /// The jitter's state (splitmix64).
    rng: AtomicU64,
}

impl Slot {
    pub(crate) fn new(wanted: bool) -> Slot {
        use std::hash::BuildHasher;
        let seed = std::collections::hash_map::RandomState::new().hash_one(0u8);
        Slot {
            wanted: AtomicBool::new(wanted),
            stop: Mutex::new(None),
            primed: AtomicBool::new(false),
            rng: AtomicU64::new(seed),
        }
    }

    /// Whether outliers are configured (set by `reconfigure`).
    pub(crate) fn want(&self, wanted: bool) {
        self.wanted.store(wanted, Relaxed);
    }

    /// A random draw for an ejection's jitter.
    pub(crate) fn draw(&self) -> u64 {
        let mut z = self
            .rng
            .fetch_add(0x9E37_79B9_7F4A_7C15, Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Whether a task runs now (for tests).
    #[cfg(all(test, not(breaker_loom)))]
    pub(crate) fn running(&self) -> bool {
        lock(&self.stop).as_ref().is_some_and(|s| !s.is_closed())
    }
}

/// Starts the detector task of `detector`, unless one runs, outliers are off, or no tokio
/// runtime is current (the next new key tries again).
pub(crate) fn start<D: Detector>(detector: &Arc<D>) {
    let slot = detector.slot();
    if !slot.wanted.load(Relaxed) {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let mut stop = lock(&slot.stop);
    if stop.as_ref().is_some_and(|s| !s.is_closed()) {
        return; // running (a task whose runtime shut down dropped its receiver)
    }
    if detector.interval().is_none() {
        return;
    }
    let (tx, rx) = oneshot::channel();
    *stop = Some(tx);
    slot.primed.store(detector.is_empty(), Relaxed);
    drop(stop);
    runtime.spawn(run(Arc::downgrade(detector), rx));
}

/// Judges every interval until the keyed breaker is dropped or outliers are turned off.
async fn run<D: Detector>(weak: Weak<D>, mut stop: oneshot::Receiver<()>) {
    let mut next = tokio::time::Instant::now();
    loop {
        let Some(interval) = weak.upgrade().and_then(|d| d.interval()) else {
            return; // dropped, or outliers turned off: `start` may start another
        };
        next += interval;
        let mut sleep = std::pin::pin!(tokio::time::sleep_until(next));
        let woke = std::future::poll_fn(|cx| {
            if Pin::new(&mut stop).poll(cx).is_ready() {
                return Poll::Ready(false); // the keyed breaker is gone
            }
            sleep.as_mut().poll(cx).map(|()| true)
        })
        .await;
        if !woke {
            return;
        }
        let Some(detector) = weak.upgrade() else {
            return;
        };
        detector.detect();
        // A walk longer than the interval (a huge map on a starved runtime) does not queue
        // walks back to back.
        next = next.max(tokio::time::Instant::now());
    }
}
