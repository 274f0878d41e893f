//! The map under a [`KeyedBreaker`](super::KeyedBreaker): a lock-free hash set of entries
//! for lookups (papaya's, with epoch-based reclamation), and beside it sharded dense `Vec`s
//! that name the same entries, so that an insertion, a removal and a draw of a random entry
//! are each O(1).
//!
//! A call for a key that has a breaker writes nothing shared: it enters the set's epoch
//! guard (a store to this thread's own slot of the collector), finds the entry by the
//! borrowed key (`K: Borrow<Q>`, as `HashMap::get`), and a blocking call runs on the entry's
//! breaker borrowed under the guard; no lock, no reference count, no allocation, no clock
//! read. So two threads calling one key share no written cache line in the map (issue 20:
//! the shard's read lock and the `Arc` clone were four contended read-modify-writes per
//! call). An async call and [`breaker`](super::KeyedBreaker::breaker) clone the breaker
//! (its future outlives the guard).
//!
//! An entry removed from the set (evicted, or swept as idle) is freed once no thread that
//! could have seen it is still inside a guard, by the thread that leaves its guard last
//! (which may be a caller's): a blocking call that found it finishes on it, detached, and
//! delays that moment by as long as it runs. Removals flush the remover's batch at once (a
//! `membarrier`, about 1 µs here), so an evicted breaker that no one holds leaves the
//! registry then, or at the latest when the last call that was inside a guard meanwhile
//! ends (seize retires a batch only when it holds as many entries as threads are active: up
//! to that many evicted breakers may wait for a later removal).
//!
//! Insertions, removals and sweeps take the lock of the key's shard (one of [`SHARDS`], by
//! hash): every change to the set for the keys of a shard happens under its lock, so under
//! it a lookup in the set is exact. A shard keeps a dense `Vec` of its keys' hashes and
//! breakers' identities, which finds each one's entry in the set: the sampler's O(1) draw by
//! position. No call touches it.
//!
//! What this costs, measured (`benches/RESULTS.md`, *Keyed at churn*): about 30 bytes more
//! per key than the `RwLock`ed tables before (the set's entry is an allocation of its own,
//! and its table is kept at most half full), a new key a few hundred nanoseconds more (that
//! allocation, the set's incremental growth), and sweeps and evictions at the bound 1.6×
//! to 3× the time (each record looked at is found in the set: two more cache misses; each
//! removed entry freed by the collector).
//!
//! Rooms: here the map (`Map`: lookups, insertion, reconfiguration); `entry` the set's
//! entries and how they are found (by a borrowed key, by breaker); `sweep` the sweeps of
//! idle breakers; `evict` eviction by sampling at `max_keys`.

use std::{
    borrow::Borrow,
    hash::{BuildHasher, Hash},
    sync::{
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed},
        Arc, Mutex, OnceLock,
    },
    time::Duration,
};

use papaya::{Guard, HashSet, LocalGuard};
use tokio::time::Instant;

mod entry;
mod evict;
mod outliers;
mod sweep;

use entry::{id, key_hasher, ByBreaker, ByKey, Node, Prehashed, TOUCHED};
use evict::Eviction;
use sweep::Cursor;

use super::key::{BreakerKey, KeyName};
use crate::{
    clock::to_nanos, config::Resolved, core::OpenBudget, live::Live, shared::Family, sync::lock,
    Breaker,
};

/// What a keyed breaker calls with each new key's breaker (joining it to a fleet).
pub(super) type OnNew = Box<dyn Fn(&Breaker) + Send + Sync>;

/// Shards of a keyed breaker's writers and of its sampler.
const SHARDS: usize = 16;

/// How often a WARN says non-fresh breakers are being evicted at `max_keys`.
const WARN_EVERY: Duration = Duration::from_secs(60);

pub(super) struct Map<K> {
    pub(super) name: String,
    /// Every key's configuration, shared (`reconfigure` changes it for every key at once).
    live: Arc<Live>,
    /// `max_keys` and `idle`, changed by `reconfigure`.
    max_keys: AtomicUsize,
    idle: AtomicU64,
    /// Every key's entry, for lookups: written only under the lock of the key's shard.
    index: HashSet<Node<K>, Prehashed>,
    shards: [Shard; SHARDS],
    /// Keys in the map (shared with the `max_open` budget, which caps by it).
    pub(super) len: Arc<AtomicUsize>,
    /// The cap on open keys (`max_open_percent`), shared by every key's breaker.
    budget: Option<Arc<OpenBudget>>,
    /// What every key's breaker knows of this keyed breaker (its name, for metrics).
    family: Arc<Family>,
    /// Time origin of the stamps below.
    origin: Instant,
    /// When the last sweep started (nanos since `origin`).
    swept: AtomicU64,
    /// A sweep is under way: where it goes on (taken with `try_lock`: a new key that finds
    /// another sweeping goes on without).
    sweeping: Mutex<Option<Cursor>>,
    /// Whether `sweeping` holds a cursor: read first, so a new key with no sweep due and
    /// none under way takes no lock.
    under_way: AtomicBool,
    /// When the last WARN about evicting non-fresh breakers was logged (0: never).
    warned: AtomicU64,
    /// Called with each new key's breaker, outside the map's locks (`fleet = true`,
    /// `Fleet::join_keyed`).
    pub(super) on_new: OnceLock<OnNew>,
    /// Seeds the sampler's draws (touched only by new keys at the bound).
    draws: AtomicU64,
    /// Outlier detection's task (`crate::outliers`).
    pub(super) outliers: crate::outliers::task::Slot,
}

/// One shard: its breakers, dense (a victim is drawn by position), on cache lines of its
/// own (writers of two shards do not share a line).
#[repr(align(128))]
struct Shard(Mutex<Vec<ByBreaker>>);

impl<K: BreakerKey> Map<K> {
    pub(super) fn new(name: &str, settings: Resolved) -> Self {
        let len = Arc::new(AtomicUsize::new(0));
        let policy = &settings.policy;
        Map {
            name: name.to_owned(),
            max_keys: AtomicUsize::new(policy.max_keys),
            idle: AtomicU64::new(policy.idle),
            index: HashSet::builder().hasher(Prehashed).build(),
            shards: std::array::from_fn(|_| Shard(Mutex::new(Vec::new()))),
            len: len.clone(),
            budget: policy
                .max_open_percent
                .map(|p| Arc::new(OpenBudget::new(name, p, len))),
            origin: Instant::now(),
            swept: AtomicU64::new(0),
            sweeping: Mutex::new(None),
            under_way: AtomicBool::new(false),
            warned: AtomicU64::new(0),
            on_new: OnceLock::new(),
            draws: AtomicU64::new(0),
            family: Arc::new(Family { name: name.into() }),
            outliers: crate::outliers::task::Slot::new(policy.outliers.is_some()),
            live: settings.into(),
        }
    }

    fn max_keys(&self) -> usize {
        self.max_keys.load(Relaxed)
    }

    fn idle(&self) -> u64 {
        self.idle.load(Relaxed)
    }

    /// Puts `config` in force for every key, now and later (see
    /// [`KeyedBreaker::reconfigure`](super::KeyedBreaker::reconfigure)). Each shard is locked
    /// while its keys adopt it: a key made meanwhile is made under its shard's lock, so it
    /// either read the new configuration or is in the set when its shard is gone through.
    /// One change at a time (`Live::change`): `next` makes the new configuration from the
    /// one in force, and every key has adopted it before another change reads it.
    pub(super) fn reconfigure(
        &self,
        next: impl FnOnce(&crate::Config) -> Result<crate::Config, crate::ConfigError>,
    ) -> Result<(), crate::ConfigError> {
        let adopt = |settings: &Resolved| {
            let policy = &settings.policy;
            self.outliers.want(policy.outliers.is_some());
            self.max_keys.store(policy.max_keys, Relaxed);
            self.idle.store(policy.idle, Relaxed);
            let _shards: Vec<_> = self.shards.iter().map(|s| lock(&s.0)).collect();
            let guard = self.guard();
            for node in self.index.iter(&guard) {
                node.breaker.shared.core.adopt(policy);
            }
        };
        self.live.change(&self.name, next, adopt)?;
        Ok(())
    }

    /// Every key's configuration in force (`KeyedBreaker::config`).
    pub(super) fn config(&self) -> crate::Config {
        self.live.config()
    }

    /// Every key in the map with its breaker, and the `max_open` places taken (for the
    /// model test, `crate::tests::keyed_model`).
    #[cfg(test)]
    pub(super) fn entries(&self) -> (Vec<(K, Breaker)>, Option<usize>)
    where
        K: Clone,
    {
        let guard = self.guard();
        let all = self
            .index
            .iter(&guard)
            .map(|node| (node.key.clone(), node.breaker.clone()))
            .collect();
        (all, self.budget.as_ref().map(|b| b.taken()))
    }

    /// The key's hash; a borrowed form hashes as its owned form (`Borrow`'s contract).
    #[inline]
    pub(super) fn hash<Q: Hash + ?Sized>(&self, key: &Q) -> u64 {
        key_hasher().hash_one(key)
    }

    fn shard(&self, hash: u64) -> &Mutex<Vec<ByBreaker>> {
        &self.shards[(hash >> 59) as usize % SHARDS].0
    }

    pub(super) fn now(&self) -> u64 {
        to_nanos(Instant::now().saturating_duration_since(self.origin))
    }

    /// A guard of the set: what a found breaker may be borrowed under.
    #[inline]
    pub(super) fn guard(&self) -> LocalGuard<'_> {
        self.index.guard()
    }

    /// An existing key's breaker, borrowed under `guard`, marked as used.
    #[inline]
    pub(super) fn find<'g, Q>(
        &self,
        hash: u64,
        key: &Q,
        guard: &'g LocalGuard<'_>,
    ) -> Option<&'g Breaker>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let node = self.index.get(&ByKey { hash, key }, guard)?;
        let seen = node.seen.load(Relaxed);
        if seen & TOUCHED == 0 {
            node.seen.store(seen | TOUCHED, Relaxed);
        }
        Some(&node.breaker)
    }

    /// An existing key's breaker (found by the form the map keeps, see
    /// [`kept`](Self::kept)), or the key's hash to insert it with.
    pub(super) fn get<Q>(&self, key: &Q) -> Result<Breaker, u64>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let hash = self.hash(key);
        let guard = self.guard();
        if let Some(found) = self.find(hash, key, &guard) {
            return Ok(found.clone());
        }
        let (kept, kept_hash) = self.kept(key);
        match self.find::<K>(kept_hash, &kept, &guard) {
            Some(found) if kept_hash != hash => Ok(found.clone()),
            _ => Err(hash),
        }
    }

    /// The key as the map keeps it ([`BreakerKey::into_kept`]: a `String` over 256 bytes as
    /// its prefix and digest), and that form's hash. A lookup by the caller's form finds no
    /// long key (none is kept whole), so it ends here: a long key costs a lookup its digest.
    fn kept<Q>(&self, key: &Q) -> (K, u64)
    where
        Q: ToOwned<Owned = K> + ?Sized,
    {
        let kept = key.to_owned().into_kept();
        let hash = self.hash(&kept);
        (kept, hash)
    }

    /// Creates `key`'s breaker (unless a racing caller just did), sweeping idle breakers
    /// and making room first.
    #[cold]
    pub(super) fn insert<Q>(&self, key: &Q, hash: u64) -> Breaker
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let (key, kept_hash) = self.kept(key);
        if kept_hash != hash {
            // A long key: one kept already is found by its kept form, taking no place.
            if let Some(found) = self.find::<K>(kept_hash, &key, &self.guard()) {
                return found.clone();
            }
        }
        let hash = kept_hash;
        let now = self.now();
        self.sweep_if_due(now);
        // A place: a new one below the bound; at it, the place of the breaker evicted for it
        // (one out, one in: the count does not move, so the bound holds without a global
        // lock).
        let mut evicted = None;
        while !self.reserve() {
            match self.evict_one(now) {
                Eviction::Evicted(stateful) => {
                    evicted = Some(stateful);
                    break;
                }
                // Every place is taken by a key being inserted right now: let them finish.
                Eviction::Raced => std::thread::yield_now(),
                Eviction::AllManual => return self.unkept(&key, now),
            }
        }
        let guard = self.guard();
        let mut records = lock(self.shard(hash));
        let breaker = match self.index.get(&ByKey { hash, key: &key }, &guard) {
            Some(node) => {
                self.len.fetch_sub(1, Relaxed); // a racing caller made it: give the place back
                node.breaker.clone()
            }
            None => self.put(&mut records, key, hash, now, &guard),
        };
        drop(records);
        // The evicted entry is freed when this guard (and any other that could see it) is
        // dropped, outside the shards' locks: the last clone unlists the breaker.
        if let Some(stateful) = evicted {
            guard.flush();
            if stateful {
                self.warn_busy_eviction(now);
            }
        }
        drop(guard);
        if let Some(on_new) = self.on_new.get() {
            on_new(&breaker);
        }
        breaker
    }

    /// The breaker of a key that found no place: every key the sampler drew is under manual
    /// control, which eviction never undoes. The call runs on a breaker that is not kept
    /// (detached at once: a later call for the key makes another), and one WARN a minute
    /// says so.
    #[cold]
    fn unkept(&self, key: &K, now: u64) -> Breaker {
        let breaker = self.breaker_for(key);
        breaker.shared.core.detach();
        if self.warn_due(now) {
            tracing::warn!(
                target: "breaker",
                breaker = self.name.as_str(),
                max_keys = self.max_keys(),
                "keyed circuit breaker `{}` is at max_keys = {} with every key under manual \
                 control (forced open or disabled): new keys get breakers that are not kept \
                 (raise max_keys, or release keys)",
                self.name,
                self.max_keys()
            );
        }
        breaker
    }

    /// A new breaker for `key`, named `{name}[key]`, on the map's shared configuration.
    fn breaker_for(&self, key: &K) -> Breaker {
        Breaker::keyed(
            KeyName(&self.name, key).to_name(),
            &self.live,
            &self.family,
            self.budget.as_ref(),
        )
    }

    /// Takes one place below `max_keys`, if there is one.
    fn reserve(&self) -> bool {
        self.len
            .fetch_update(Relaxed, Relaxed, |n| (n < self.max_keys()).then_some(n + 1))
            .is_ok()
    }

    /// Creates `key`'s breaker in the set and in its shard's `records` (under the shard's
    /// lock; its place already counted in `len`).
    fn put(
        &self,
        records: &mut Vec<ByBreaker>,
        key: K,
        hash: u64,
        now: u64,
        guard: &LocalGuard<'_>,
    ) -> Breaker {
        let breaker = self.breaker_for(&key);
        records.push(ByBreaker {
            hash,
            id: id(&breaker),
        });
        self.index.insert(
            Node {
                key,
                breaker: breaker.clone(),
                seen: AtomicU64::new(now & !TOUCHED),
                outlier: once_cell::race::OnceBox::new(),
            },
            guard,
        );
        breaker
    }

    /// Removes the entry of `by` from the set, its breaker detached from the map (it no
    /// longer counts for `max_open`). Under the shard's lock.
    fn unlist(&self, by: ByBreaker, guard: &LocalGuard<'_>) {
        if let Some(node) = self.index.get(&by, guard) {
            node.breaker.shared.core.detach();
        }
        self.index.remove(&by, guard);
    }

    /// Whether a WARN about the bound is due (one a minute), claimed if so.
    fn warn_due(&self, now: u64) -> bool {
        let last = self.warned.load(Relaxed);
        let due = last == 0 || now.saturating_sub(last) >= to_nanos(WARN_EVERY);
        due && self
            .warned
            .compare_exchange(last, now.max(1), Relaxed, Relaxed)
            .is_ok()
    }
}
