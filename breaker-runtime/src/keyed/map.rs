//! The map under a [`KeyedBreaker`](super::KeyedBreaker): sharded, each shard a dense `Vec` of
//! entries with a hash index of positions, so a lookup, an insertion, a removal and a draw of
//! a random entry are each O(1).
//!
//! A call for a key that has a breaker takes its shard's read lock, finds the position by the
//! borrowed key (`K: Borrow<Q>`, as `HashMap::get`), clones the breaker's `Arc` and releases
//! the lock: no allocation, no clock read. Only a new key takes a write lock, one shard at a
//! time.
//!
//! Eviction is governor's rule: drop first what is indistinguishable from a fresh breaker
//! (closed, no failure streak, no failure in its window, no call in flight), read from the
//! breaker itself. Idle ones go when a new key arrives (the only moment memory grows), so
//! there is no background task.
//!
//! At `max_keys` a new key evicts one breaker, chosen by sampling as Redis does: from each
//! shard in turn (under its read lock), [`SAMPLE`] entries drawn at random (all of them in a
//! smaller shard); of all those, the least recently used evictable one goes, else the least
//! recently used closed one, else the least recently used of any state (with one WARN a
//! minute); then only its shard is write-locked to remove it. So a new key at the bound
//! looks at no more than `SHARDS × SAMPLE` = 128 entries, whatever the size, and never
//! locks two shards at once. Accuracy: with up to 8 breakers per shard every breaker is in
//! the sample, and the choice is exact. Beyond, with a fraction `f` of the breakers
//! evictable, the 128 draws hold one with probability `1 − (1 − f)^128` (99.9 % from
//! `f` = 5 %): a breaker with state goes before a fresh one only when no draw found a
//! fresh one. The one evicted is the least recently used of the draws, not of the map: it
//! is among the least recently used 2 % of the evictable ones with probability
//! `1 − 0.98^(128 f)` (92 % at `f` = 100 %, 23 % at `f` = 10 %).
//!
//! Recency is kept without a clock read per call: a call sets its entry's `touched` flag
//! (a load, and a store only if it was clear); a sweep, run when a new key arrives, stamps
//! touched entries with the time of the sweep and clears the flag. So "idle" is measured
//! between sweeps: an entry untouched since its last stamp for longer than `idle` goes; one
//! touched since the previous sweep counts as used at this one (kept up to one sweep
//! interval longer than `idle`, never dropped earlier). A sweep walks every entry, one shard
//! at a time, at most four times per `idle`.

use std::{
    borrow::Borrow,
    hash::{BuildHasher, Hash},
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed},
        Arc, OnceLock, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
    },
    time::Duration,
};

use hashbrown::HashTable;
use tokio::time::Instant;

use super::key::{BreakerKey, KeyName};
use crate::{call::Family, clock::to_nanos, config::Policy, core::OpenBudget, Breaker, Config};

/// Shards of a keyed breaker's map: callers of different keys rarely share a lock.
const SHARDS: usize = 16;

/// Entries a new key at the bound draws from a shard.
const SAMPLE: usize = 8;

/// The flag in an entry's `seen`: called since the last sweep (nanos fit in the other 63
/// bits for 292 years).
const TOUCHED: u64 = 1 << 63;

/// How often a WARN says non-fresh breakers are being evicted at `max_keys`.
const WARN_EVERY: Duration = Duration::from_secs(60);

pub(super) struct Map<K> {
    pub(super) name: String,
    config: Arc<Config>,
    policy: Arc<Policy>,
    max_keys: usize,
    idle: u64,
    hasher: std::hash::RandomState,
    shards: [Shard<K>; SHARDS],
    /// Keys in the map (shared with the `max_open` budget, which caps by it).
    pub(super) len: Arc<AtomicUsize>,
    /// The cap on open keys (`max_open_percent`), shared by every key's breaker.
    budget: Option<Arc<OpenBudget>>,
    /// What every key's breaker knows of this keyed breaker (its name, for metrics).
    family: Arc<Family>,
    /// Time origin of the stamps below.
    origin: Instant,
    /// When the last sweep ran (nanos since `origin`).
    swept: AtomicU64,
    /// When the last WARN about evicting non-fresh breakers was logged (0: never).
    warned: AtomicU64,
    /// Called with each new key's breaker, outside the map's locks (`fleet = true`).
    pub(super) on_new: OnceLock<fn(&Breaker)>,
    /// Seeds the sampler's draws (touched only by new keys at the bound).
    draws: AtomicU64,
}

/// One shard, on cache lines of its own: a read lock is a write to the lock's word, and two
/// threads reading two shards must not share a line (128 bytes: adjacent-line prefetchers
/// pair lines).
#[repr(align(128))]
struct Shard<K>(RwLock<Table<K>>);

/// A shard's entries, dense (a victim is drawn by position), and where each key's entry is.
struct Table<K> {
    index: HashTable<u32>,
    entries: Vec<Entry<K>>,
}

struct Entry<K> {
    hash: u64,
    key: K,
    breaker: Breaker,
    /// When last known used (nanos since the map's origin), set at creation and by sweeps,
    /// with [`TOUCHED`] set by a call since the last sweep. Written by calls only under the
    /// shard's read lock and by sweeps only under its write lock, so a plain load and store
    /// of the flag loses nothing.
    seen: AtomicU64,
}

impl<K> Table<K> {
    fn new() -> Self {
        Table {
            index: HashTable::new(),
            entries: Vec::new(),
        }
    }

    fn find<Q>(&self, hash: u64, key: &Q) -> Option<&Entry<K>>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let entries = &self.entries;
        self.index
            .find(hash, |&i| entries[i as usize].key.borrow() == key)
            .map(|&i| &entries[i as usize])
    }

    /// Where the entry of this breaker is, if still here.
    fn position(&self, hash: u64, id: usize) -> Option<usize> {
        let entries = &self.entries;
        self.index
            .find(hash, |&i| entries[i as usize].id() == id)
            .map(|&i| i as usize)
    }

    fn push(&mut self, entry: Entry<K>) {
        let Table { index, entries } = self;
        // A shard holds at most `max_keys` entries; positions past u32 are not reachable
        // with memory to hold them.
        let at = u32::try_from(entries.len()).unwrap_or(u32::MAX);
        let hash = entry.hash;
        entries.push(entry);
        index.insert_unique(hash, at, |&i| entries[i as usize].hash);
    }

    /// Removes the entry at `at`; the last one takes its place (and its index follows).
    fn remove(&mut self, at: usize) -> Entry<K> {
        let Table { index, entries } = self;
        if let Ok(found) = index.find_entry(entries[at].hash, |&i| i as usize == at) {
            found.remove();
        }
        let last = entries.len() - 1;
        if at != last {
            if let Some(moved) = index.find_mut(entries[last].hash, |&i| i as usize == last) {
                *moved = at as u32;
            }
        }
        entries.swap_remove(at)
    }
}

impl<K: BreakerKey> Map<K> {
    pub(super) fn new(name: &str, config: Config, policy: &Policy) -> Self {
        let len = Arc::new(AtomicUsize::new(0));
        Map {
            name: name.to_owned(),
            config: Arc::new(config),
            policy: Arc::new(policy.clone()),
            max_keys: policy.max_keys,
            idle: policy.idle,
            hasher: std::hash::RandomState::new(),
            shards: std::array::from_fn(|_| Shard(RwLock::new(Table::new()))),
            len: len.clone(),
            budget: policy
                .max_open_percent
                .map(|p| Arc::new(OpenBudget::new(name, p, len))),
            origin: Instant::now(),
            swept: AtomicU64::new(0),
            warned: AtomicU64::new(0),
            on_new: OnceLock::new(),
            draws: AtomicU64::new(0),
            family: Arc::new(Family { name: name.into() }),
        }
    }

    /// The key's hash; a borrowed form hashes as its owned form (`Borrow`'s contract).
    fn hash<Q: Hash + ?Sized>(&self, key: &Q) -> u64 {
        self.hasher.hash_one(key)
    }

    fn shard(&self, hash: u64) -> &RwLock<Table<K>> {
        &self.shards[(hash >> 59) as usize % SHARDS].0
    }

    pub(super) fn now(&self) -> u64 {
        to_nanos(Instant::now().saturating_duration_since(self.origin))
    }

    /// An existing key's breaker, or the key's hash to insert it with.
    #[inline]
    pub(super) fn get<Q>(&self, key: &Q) -> Result<Breaker, u64>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = self.hash(key);
        let table = read(self.shard(hash));
        match table.find(hash, key) {
            Some(e) => {
                let seen = e.seen.load(Relaxed);
                if seen & TOUCHED == 0 {
                    e.seen.store(seen | TOUCHED, Relaxed);
                }
                Ok(e.breaker.clone())
            }
            None => Err(hash),
        }
    }

    /// Creates `key`'s breaker (unless a racing caller just did), sweeping idle breakers
    /// and making room first.
    #[cold]
    pub(super) fn insert<Q>(&self, key: &Q, hash: u64) -> Breaker
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let now = self.now();
        self.sweep_if_due(now);
        // A place: a new one below the bound; at it, the place of the breaker evicted for it
        // (one out, one in: the count does not move, so the bound holds without a global
        // lock).
        let mut evicted = None;
        while !self.reserve() {
            if let Some(found) = self.evict_one() {
                evicted = Some(found);
                break;
            }
            // Every place is taken by a key being inserted right now: let them finish.
            std::thread::yield_now();
        }
        let mut table = write(self.shard(hash));
        let breaker = match table.find(hash, key) {
            Some(e) => {
                self.len.fetch_sub(1, Relaxed); // a racing caller made it: give the place back
                e.breaker.clone()
            }
            None => self.put(&mut table, key, hash, now),
        };
        drop(table);
        // Dropped here, outside the shards' locks: the last clone unlists the breaker.
        if let Some((entry, stateful)) = evicted {
            drop(entry);
            if stateful {
                self.warn_busy_eviction(now);
            }
        }
        if let Some(on_new) = self.on_new.get() {
            on_new(&breaker);
        }
        breaker
    }

    /// Takes one place below `max_keys`, if there is one.
    fn reserve(&self) -> bool {
        self.len
            .fetch_update(Relaxed, Relaxed, |n| (n < self.max_keys).then_some(n + 1))
            .is_ok()
    }

    /// Creates `key`'s breaker in `table` (its place already counted in `len`).
    fn put<Q>(&self, table: &mut Table<K>, key: &Q, hash: u64, now: u64) -> Breaker
    where
        Q: ToOwned<Owned = K> + ?Sized,
    {
        let key = key.to_owned();
        let name = KeyName(&self.name, &key).to_string();
        let breaker = Breaker::keyed(
            name.into(),
            &self.config,
            &self.policy,
            &self.family,
            self.budget.as_ref(),
        );
        table.push(Entry {
            hash,
            key,
            breaker: breaker.clone(),
            seen: AtomicU64::new(now & !TOUCHED),
        });
        breaker
    }

    /// Sweeps when `idle / 4` has passed since the last sweep: idle breakers go at most
    /// that much later than `idle`, and a stream of new keys sweeps at most 4 times per
    /// `idle`.
    fn sweep_if_due(&self, now: u64) {
        let last = self.swept.load(Relaxed);
        if now.saturating_sub(last) >= self.idle / 4
            && self
                .swept
                .compare_exchange(last, now, Relaxed, Relaxed)
                .is_ok()
        {
            self.sweep(now);
        }
    }

    /// Stamps touched entries with `now`; drops evictable ones unused for `idle`. One shard
    /// locked at a time.
    pub(super) fn sweep(&self, now: u64) {
        let mut dropped = Vec::new();
        for shard in &self.shards {
            let mut table = write(&shard.0);
            let mut i = 0;
            while i < table.entries.len() {
                let e = &table.entries[i];
                if e.seen.load(Relaxed) & TOUCHED != 0 {
                    e.seen.store(now & !TOUCHED, Relaxed);
                    i += 1;
                    continue;
                }
                let idle = now.saturating_sub(e.seen.load(Relaxed) & !TOUCHED) >= self.idle;
                if idle && e.evictable() {
                    self.len.fetch_sub(1, Relaxed);
                    dropped.push(table.remove(i)); // the last entry moved to `i`: look again
                } else {
                    i += 1;
                }
            }
        }
        // Dropped here, outside the shards' locks: the last clone unlists the breaker.
        drop(dropped);
    }

    /// At `max_keys`, removes one breaker to make room for a new one, by sampling (see the
    /// module's docs): the evicted entry (to drop outside the locks) and whether it held
    /// state. `None` when every shard is empty (every place is held by a key being
    /// inserted) or the chosen breaker went meanwhile.
    fn evict_one(&self) -> Option<(Entry<K>, bool)> {
        let mut rng = self.hasher.hash_one(self.draws.fetch_add(1, Relaxed)) | 1;
        // The best candidate: (class, recency, shard, hash, id), the least first.
        let mut best: Option<(u8, u64, usize, u64, usize)> = None;
        for (s, shard) in self.shards.iter().enumerate() {
            // A read lock: the fields looked at are atomics, and lookups go on meanwhile.
            let table = read(&shard.0);
            let n = table.entries.len();
            for j in 0..n.min(SAMPLE) {
                let i = if n <= SAMPLE {
                    j
                } else {
                    rng = xorshift(rng);
                    (rng % n as u64) as usize
                };
                let e = &table.entries[i];
                let rank = (e.class(), e.recency());
                if best.is_none_or(|(c, r, ..)| rank < (c, r)) {
                    best = Some((rank.0, rank.1, s, e.hash, e.id()));
                }
            }
        }
        let (class, _, s, hash, id) = best?;
        let mut table = write(&self.shards[s].0);
        let at = table.position(hash, id)?;
        // Looked at again under the write lock: a call may have come meanwhile.
        if class == 0 && !table.entries[at].evictable() {
            return None;
        }
        Some((table.remove(at), class > 0))
    }

    fn warn_busy_eviction(&self, now: u64) {
        let last = self.warned.load(Relaxed);
        let due = last == 0 || now.saturating_sub(last) >= to_nanos(WARN_EVERY);
        if due
            && self
                .warned
                .compare_exchange(last, now.max(1), Relaxed, Relaxed)
                .is_ok()
        {
            tracing::warn!(
                target: "breaker",
                breaker = self.name.as_str(),
                max_keys = self.max_keys,
                "keyed circuit breaker `{}` is at max_keys = {} with no breaker idle and \
                 fresh: evicting ones that hold state (raise max_keys)",
                self.name,
                self.max_keys
            );
        }
    }
}

fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

impl<K> Entry<K> {
    /// Which breaker this is, for finding it again among entries of one hash.
    fn id(&self) -> usize {
        Arc::as_ptr(&self.breaker.shared) as usize
    }

    /// Indistinguishable from a fresh breaker, with no call in flight: read from the
    /// breaker itself, never from who holds it (a snapshot, the fleet, metrics or a user's
    /// clone holding it for a moment says nothing about its state).
    fn evictable(&self) -> bool {
        let shared = &self.breaker.shared;
        shared.core.is_fresh(&shared.clock) && shared.core.counters.in_flight() == 0
    }

    /// Eviction order: 0 evictable, 1 closed, 2 any other state.
    fn class(&self) -> u8 {
        if self.evictable() {
            0
        } else if self.breaker.shared.core.peek() == crate::State::Closed {
            1
        } else {
            2
        }
    }

    /// When last used; one called since the last sweep is the most recent of all.
    fn recency(&self) -> u64 {
        let seen = self.seen.load(Relaxed);
        if seen & TOUCHED != 0 {
            u64::MAX
        } else {
            seen
        }
    }
}

fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(PoisonError::into_inner)
}
