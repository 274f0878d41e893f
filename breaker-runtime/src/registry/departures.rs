//! What a metrics publisher needs across a breaker's end: each breaker's identity, the
//! keyed breaker it belongs to, and its last counts when it goes (evicted, or its last clone
//! dropped), so that no count is lost between a publish and the breaker's end. Off until a
//! publisher asks ([`watch`]); then each departure is queued (bounded) until taken.

use std::{
    collections::VecDeque,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering::Relaxed},
        Mutex,
    },
};

use crate::{sync::lock, Name, Stats};

/// Departures kept between two takes at most; beyond, the oldest are dropped (their last
/// counts since the publish before are then lost, and said so once).
const MAX_QUEUED: usize = 1 << 20;

static WATCHED: AtomicBool = AtomicBool::new(false);
static QUEUE: Mutex<VecDeque<Departed>> = Mutex::new(VecDeque::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A breaker that went, with its counts at the end.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct Departed {
    /// Its identity ([`Handle::id`](crate::Handle::id)).
    pub id: u64,
    /// Its name.
    pub name: Name,
    /// The keyed breaker it was a key of, if any.
    pub family: Option<Name>,
    /// Its counts when it went.
    pub stats: Stats,
}

/// A new breaker's identity: unique in the process, never reused.
pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Relaxed)
}

/// From now on, queue each breaker's departure for [`take`].
#[doc(hidden)]
pub fn watch() {
    WATCHED.store(true, Relaxed);
}

/// The departures since the last take, oldest first.
#[doc(hidden)]
pub fn take() -> Vec<Departed> {
    let mut queue = lock(&QUEUE);
    queue.drain(..).collect()
}

/// Called as a breaker goes (from its `Drop`).
pub(crate) fn depart(make: impl FnOnce() -> Departed) {
    if !WATCHED.load(Relaxed) {
        return;
    }
    let departed = make();
    let mut queue = lock(&QUEUE);
    if queue.len() >= MAX_QUEUED {
        queue.pop_front();
    }
    queue.push_back(departed);
}
