//! The set's entries and how they are found: a key's entry (`Node`), its hash (one SipHash
//! per lookup, handed to the set by `Prehashed`), and the two ways to find it (by a
//! borrowed key, `ByKey`; by its breaker, from a shard's record, `ByBreaker`).

use std::{
    borrow::Borrow,
    hash::{BuildHasher, Hash, Hasher},
    sync::{atomic::AtomicU64, atomic::Ordering::Relaxed, Arc, OnceLock},
};

use papaya::Equivalent;

use crate::Breaker;

/// The flag in an entry's `seen`: called since the last sweep (nanos fit in the other 63
/// bits for 292 years).
pub(super) const TOUCHED: u64 = 1 << 63;

/// A key's entry in the set: what a call finds.
pub(super) struct Node<K> {
    pub(super) key: K,
    pub(super) breaker: Breaker,
    /// When last known used (nanos since the map's origin), set at creation and by sweeps,
    /// with [`TOUCHED`] set by a call since the last sweep. Written by calls (the flag only)
    /// and by sweeps under the shard's lock; a call that sets the flag while a sweep stamps
    /// the entry loses nothing that matters: the entry was used at that sweep either way.
    pub(super) seen: AtomicU64,
    /// What outlier detection keeps of this key (made at its first reading: empty, one
    /// pointer, without `outliers`); it goes with the entry.
    pub(super) outlier: once_cell::race::OnceBox<crate::outliers::Seen>,
}

/// The hasher of every keyed breaker's keys: SipHash with keys random per process (std's
/// `RandomState`), computed once per lookup and handed to the set through [`Prehashed`].
pub(super) fn key_hasher() -> &'static std::hash::RandomState {
    static HASHER: OnceLock<std::hash::RandomState> = OnceLock::new();
    HASHER.get_or_init(std::hash::RandomState::new)
}

/// An entry hashes as its key does (the set hashes stored entries again only when it
/// grows), so a lookup by any borrowed form, or by breaker, finds it.
impl<K: Hash> Hash for Node<K> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(key_hasher().hash_one(&self.key));
    }
}

impl<K: Eq> PartialEq for Node<K> {
    fn eq(&self, other: &Self) -> bool {
        self.key == other.key
    }
}

impl<K: Eq> Eq for Node<K> {}

/// A lookup by a borrowed key and its hash.
pub(super) struct ByKey<'a, Q: ?Sized> {
    pub(super) hash: u64,
    pub(super) key: &'a Q,
}

impl<Q: ?Sized> Hash for ByKey<'_, Q> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl<K: Borrow<Q>, Q: Eq + ?Sized> Equivalent<Node<K>> for ByKey<'_, Q> {
    fn equivalent(&self, node: &Node<K>) -> bool {
        node.key.borrow() == self.key
    }
}

/// A lookup of one breaker by its key's hash and the breaker's identity: also what a shard
/// keeps of each of its breakers (its record), which finds its entry in the set (the entry
/// holds the breaker).
#[derive(Clone, Copy)]
pub(super) struct ByBreaker {
    pub(super) hash: u64,
    pub(super) id: usize,
}

impl Hash for ByBreaker {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

impl<K> Equivalent<Node<K>> for ByBreaker {
    fn equivalent(&self, node: &Node<K>) -> bool {
        id(&node.breaker) == self.id
    }
}

/// The set's hasher: takes the hash its keys write (each writes one `u64`, already SipHash).
#[derive(Clone, Copy, Default)]
pub(super) struct Prehashed;

impl BuildHasher for Prehashed {
    type Hasher = PrehashedHasher;
    fn build_hasher(&self) -> PrehashedHasher {
        PrehashedHasher(0)
    }
}

pub(super) struct PrehashedHasher(u64);

impl Hasher for PrehashedHasher {
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
    /// Not reached (the set's keys write one `u64`); a fold of the bytes, to stay a hash.
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// Which breaker this is, for finding it again.
pub(super) fn id(breaker: &Breaker) -> usize {
    Arc::as_ptr(&breaker.shared) as usize
}

impl<K> Node<K> {
    /// When last used; one called since the last sweep is the most recent of all.
    pub(super) fn recency(&self) -> u64 {
        let seen = self.seen.load(Relaxed);
        if seen & TOUCHED != 0 {
            u64::MAX
        } else {
            seen
        }
    }
}
