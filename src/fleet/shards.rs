//! A hash map split into [`SHARDS`] maps by the key's hash, so that growing never moves
//! every entry at once.
//!
//! A `HashMap` doubles when full and moves every entry in one go: with 100 000 members the
//! fleet's map of names took 33 to 81 ms to grow past 57 344 entries, all of it on the
//! runtime's thread (measured with `examples/fleet_scale.rs 2 100000`; see
//! `benches/RESULTS.md`). Split in 64, a growth moves at most a sixty-fourth of the entries
//! (about 1 600 at 100 000, well under a millisecond), and the lookups stay O(1): one more
//! hash of the key to pick the shard.

use std::{
    borrow::Borrow,
    collections::HashMap,
    hash::{BuildHasher, Hash, RandomState},
};

/// How many maps: a growth moves at most `1 / SHARDS` of the entries.
const SHARDS: usize = 64;

pub(crate) struct Sharded<K, V> {
    shards: Box<[HashMap<K, V>]>,
    /// Picks the shard (each shard hashes again with its own keys, for its buckets).
    pick: RandomState,
    len: usize,
}

impl<K: Hash + Eq, V> Default for Sharded<K, V> {
    fn default() -> Self {
        Sharded {
            // Empty maps allocate nothing until their first entry.
            shards: (0..SHARDS).map(|_| HashMap::new()).collect(),
            pick: RandomState::new(),
            len: 0,
        }
    }
}

impl<K: Hash + Eq, V> Sharded<K, V> {
    fn shard<Q: Hash + ?Sized>(&self, key: &Q) -> usize {
        // The top bits: a `HashMap` with the same hasher would use the low ones for buckets.
        (self.pick.hash_one(key) >> (64 - SHARDS.trailing_zeros())) as usize
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub(crate) fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.shards[self.shard(key)].get(key)
    }

    pub(crate) fn get_mut<Q>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let shard = self.shard(key);
        self.shards[shard].get_mut(key)
    }

    pub(crate) fn get_key_value<Q>(&self, key: &Q) -> Option<(&K, &V)>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.shards[self.shard(key)].get_key_value(key)
    }

    pub(crate) fn contains_key<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.shards[self.shard(key)].contains_key(key)
    }

    pub(crate) fn insert(&mut self, key: K, value: V) -> Option<V> {
        let shard = self.shard(&key);
        let old = self.shards[shard].insert(key, value);
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    pub(crate) fn remove<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let shard = self.shard(key);
        let old = self.shards[shard].remove(key);
        if old.is_some() {
            self.len -= 1;
        }
        old
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = &K> {
        self.shards.iter().flat_map(HashMap::keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaves_as_one_map() {
        let mut m: Sharded<String, u32> = Sharded::default();
        for i in 0..1_000 {
            assert_eq!(m.insert(format!("k{i}"), i), None);
        }
        assert_eq!(m.insert("k7".to_owned(), 70), Some(7));
        assert_eq!(m.len, 1_000);
        assert_eq!(m.get("k7"), Some(&70));
        assert_eq!(m.get_key_value("k8"), Some((&"k8".to_owned(), &8)));
        assert!(m.contains_key("k999") && !m.contains_key("k1000"));
        *m.get_mut("k9").unwrap() += 1;
        assert_eq!(m.get("k9"), Some(&10));
        assert_eq!(m.remove("k9"), Some(10));
        assert_eq!(m.remove("k9"), None);
        assert_eq!((m.len, m.keys().count()), (999, 999));
        // Spread over the shards, not all in one.
        let used = m.shards.iter().filter(|s| !s.is_empty()).count();
        assert!(used > SHARDS / 2, "{used} shards used");
        for i in 0..1_000 {
            m.remove(&format!("k{i}"));
        }
        assert!(m.is_empty());
    }
}
