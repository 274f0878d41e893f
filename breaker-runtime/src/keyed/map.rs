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
//! to 3× the time (each slot looked at is found in the set: two more cache misses; each
//! removed entry freed by the collector).
//!
//! Eviction is governor's rule: drop first what is indistinguishable from a fresh breaker
//! (closed, no failure streak, no failure in its window, no call in flight), read from the
//! breaker itself. Idle ones go when a new key arrives (the only moment memory grows), so
//! there is no background task. An open or half-open breaker not called for `idle`, with
//! no call in flight, goes as a fresh one does (it protects nobody, and holds a `max_open`
//! place, freed as it leaves); one forced open or disabled never goes (an operator's hand
//! outlives eviction, whoever sends keys).
//!
//! At `max_keys` a new key evicts one breaker, chosen by sampling as Redis does: from each
//! shard in turn (under its lock), [`SAMPLE`] entries drawn at random (all of them in a
//! smaller shard); of all those, the least recently used evictable one goes, else the least
//! recently used closed one, else the least recently used of any state but manual control
//! (with one WARN a minute). So a new key at the bound looks at no more than `SHARDS × SAMPLE` = 128
//! entries, whatever the size, and never locks two shards at once. Accuracy: with up to 8
//! breakers per shard every breaker is in the sample, and the choice is exact. Beyond, with
//! a fraction `f` of the breakers evictable, the 128 draws hold one with probability
//! `1 − (1 − f)^128` (99.9 % from `f` = 5 %): a breaker with state goes before a fresh one
//! only when no draw found a fresh one. The one evicted is the least recently used of the
//! draws, not of the map: it is among the least recently used 2 % of the evictable ones
//! with probability `1 − 0.98^(128 f)` (92 % at `f` = 100 %, 23 % at `f` = 10 %).
//!
//! Recency is kept without a clock read per call: a call sets its entry's `touched` flag
//! (a load, and a store only if it was clear, once per sweep interval: the line is shared
//! read-only between sweeps); a sweep, run when a new key arrives, stamps touched entries
//! with the time of the sweep and clears the flag. So "idle" is measured between sweeps: an
//! entry untouched since its last stamp for longer than `idle` goes; one touched since the
//! previous sweep counts as used at this one (kept up to one sweep interval longer than
//! `idle`, never dropped earlier). A sweep walks every entry, one shard at a time, at most
//! four times per `idle`, spread over new keys: each looks at no more than [`SWEEP_STEP`]
//! entries (1 024), so a map of 100 000 keys is swept by 100 new keys, never by one caller
//! (`retain_active` sweeps everything at once).

use std::{
    borrow::Borrow,
    hash::{BuildHasher, Hash, Hasher},
    sync::{
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed},
        Arc, Mutex, OnceLock, TryLockError,
    },
    time::Duration,
};

use papaya::{Equivalent, Guard, HashSet, LocalGuard};
use tokio::time::Instant;

use super::key::{BreakerKey, KeyName};
use crate::{
    clock::to_nanos, config::Resolved, core::OpenBudget, live::Live, shared::Family, sync::lock,
    Breaker,
};

/// What a keyed breaker calls with each new key's breaker (joining it to a fleet).
pub(super) type OnNew = Box<dyn Fn(&Breaker) + Send + Sync>;

/// Shards of a keyed breaker's writers and of its sampler.
const SHARDS: usize = 16;

/// Entries a new key at the bound draws from a shard.
const SAMPLE: usize = 8;

/// The flag in an entry's `seen`: called since the last sweep (nanos fit in the other 63
/// bits for 292 years).
const TOUCHED: u64 = 1 << 63;

/// Entries a new key's share of a due sweep looks at, at most: a sweep of 100 000 keys is
/// spread over 100 new keys (a sweep that drops 20 000 idle breakers took about 18 ms on one
/// caller here, `benches/RESULTS.md`); a map smaller than this is swept whole by one.
const SWEEP_STEP: usize = 1024;

/// How many entries a sweep looks at under one guard: what it removes is freed when the
/// guard goes, while their breakers are still in cache.
const FREE_STEP: usize = 256;

/// How many slots a sweep judges before it removes the idle ones among them.
const BATCH: usize = 32;

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
}

/// One shard: its breakers, dense (a victim is drawn by position), on cache lines of its
/// own (writers of two shards do not share a line).
#[repr(align(128))]
struct Shard(Mutex<Vec<Slot>>);

/// Where a sweep under way goes on: a shard, and the position in its slots below which it
/// has not looked yet (slots may have moved meanwhile: one moved by a removal may be looked
/// at twice or wait for the next sweep, never wrongly dropped, since each is judged when
/// looked at).
#[derive(Clone, Copy)]
struct Cursor {
    shard: usize,
    below: usize,
}

impl Cursor {
    /// A sweep's start: the first shard, from its end.
    const START: Cursor = Cursor {
        shard: 0,
        below: usize::MAX,
    };
}

/// A breaker as its shard keeps it: its key's hash and the breaker's identity find its
/// entry in the set (the entry holds the breaker).
#[derive(Clone, Copy)]
struct Slot {
    hash: u64,
    id: usize,
}

impl Slot {
    fn by(self) -> ByBreaker {
        ByBreaker {
            hash: self.hash,
            id: self.id,
        }
    }
}

/// A key's entry in the set: what a call finds.
struct Node<K> {
    key: K,
    breaker: Breaker,
    /// When last known used (nanos since the map's origin), set at creation and by sweeps,
    /// with [`TOUCHED`] set by a call since the last sweep. Written by calls (the flag only)
    /// and by sweeps under the shard's lock; a call that sets the flag while a sweep stamps
    /// the entry loses nothing that matters: the entry was used at that sweep either way.
    seen: AtomicU64,
}

/// The hasher of every keyed breaker's keys: SipHash with keys random per process (std's
/// `RandomState`), computed once per lookup and handed to the set through [`Prehashed`].
fn key_hasher() -> &'static std::hash::RandomState {
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
struct ByKey<'a, Q: ?Sized> {
    hash: u64,
    key: &'a Q,
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

/// A lookup of one breaker (a slot's) by its key's hash.
struct ByBreaker {
    hash: u64,
    id: usize,
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
struct Prehashed;

impl BuildHasher for Prehashed {
    type Hasher = PrehashedHasher;
    fn build_hasher(&self) -> PrehashedHasher {
        PrehashedHasher(0)
    }
}

struct PrehashedHasher(u64);

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
fn id(breaker: &Breaker) -> usize {
    Arc::as_ptr(&breaker.shared) as usize
}

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
    pub(super) fn reconfigure(&self, config: crate::Config) -> Result<(), crate::ConfigError> {
        let settings = self.live.replace(config)?;
        let policy = &settings.policy;
        self.max_keys.store(policy.max_keys, Relaxed);
        self.idle.store(policy.idle, Relaxed);
        let _shards: Vec<_> = self.shards.iter().map(|s| lock(&s.0)).collect();
        let guard = self.guard();
        for node in self.index.iter(&guard) {
            node.breaker.shared.core.adopt(policy);
        }
        Ok(())
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

    fn shard(&self, hash: u64) -> &Mutex<Vec<Slot>> {
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

    /// An existing key's breaker, or the key's hash to insert it with.
    #[inline]
    pub(super) fn get<Q>(&self, key: &Q) -> Result<Breaker, u64>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = self.hash(key);
        let guard = self.guard();
        self.find(hash, key, &guard).cloned().ok_or(hash)
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
            match self.evict_one(now) {
                Eviction::Evicted(stateful) => {
                    evicted = Some(stateful);
                    break;
                }
                // Every place is taken by a key being inserted right now: let them finish.
                Eviction::Raced => std::thread::yield_now(),
                Eviction::AllManual => return self.unkept(key, now),
            }
        }
        let guard = self.guard();
        let mut slots = lock(self.shard(hash));
        let breaker = match self.index.get(&ByKey { hash, key }, &guard) {
            Some(node) => {
                self.len.fetch_sub(1, Relaxed); // a racing caller made it: give the place back
                node.breaker.clone()
            }
            None => self.put(&mut slots, key, hash, now, &guard),
        };
        drop(slots);
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
    fn unkept<Q>(&self, key: &Q, now: u64) -> Breaker
    where
        Q: ToOwned<Owned = K> + ?Sized,
    {
        let key = key.to_owned();
        let breaker = Breaker::keyed(
            KeyName(&self.name, &key).to_name(),
            &self.live,
            &self.family,
            self.budget.as_ref(),
        );
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

    /// Takes one place below `max_keys`, if there is one.
    fn reserve(&self) -> bool {
        self.len
            .fetch_update(Relaxed, Relaxed, |n| (n < self.max_keys()).then_some(n + 1))
            .is_ok()
    }

    /// Creates `key`'s breaker in the set and in its shard's `slots` (under the shard's
    /// lock; its place already counted in `len`).
    fn put<Q>(
        &self,
        slots: &mut Vec<Slot>,
        key: &Q,
        hash: u64,
        now: u64,
        guard: &LocalGuard<'_>,
    ) -> Breaker
    where
        Q: ToOwned<Owned = K> + ?Sized,
    {
        let key = key.to_owned();
        let breaker = Breaker::keyed(
            KeyName(&self.name, &key).to_name(),
            &self.live,
            &self.family,
            self.budget.as_ref(),
        );
        slots.push(Slot {
            hash,
            id: id(&breaker),
        });
        self.index.insert(
            Node {
                key,
                breaker: breaker.clone(),
                seen: AtomicU64::new(now & !TOUCHED),
            },
            guard,
        );
        breaker
    }

    /// Goes on with the sweep under way, or starts one when `idle / 4` has passed since the
    /// last started: idle breakers go at most that much later than `idle` (plus the new
    /// keys it takes to finish a sweep, one per [`SWEEP_STEP`] entries), and a stream of new
    /// keys sweeps at most 4 times per `idle`. Each new key looks at no more than
    /// [`SWEEP_STEP`] entries, so no caller pays for a whole large map.
    fn sweep_if_due(&self, now: u64) {
        if !self.under_way.load(Relaxed) && !self.sweep_due(now) {
            return;
        }
        let mut sweeping = match self.sweeping.try_lock() {
            Ok(sweeping) => sweeping,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return, // another new key is sweeping
        };
        let cursor = match *sweeping {
            Some(cursor) => cursor,
            None if self.sweep_due(now) => {
                self.swept.store(now, Relaxed);
                Cursor::START
            }
            None => return, // a sweep just ended
        };
        let next = self.sweep_from(cursor, SWEEP_STEP, now);
        *sweeping = next;
        self.under_way.store(next.is_some(), Relaxed);
    }

    /// A quarter of `idle` has passed since the last sweep started.
    fn sweep_due(&self, now: u64) -> bool {
        now.saturating_sub(self.swept.load(Relaxed)) >= self.idle() / 4
    }

    /// Stamps touched entries with `now`; drops evictable ones unused for `idle`. Every
    /// shard, one locked at a time ([`KeyedBreaker::retain_active`](super::KeyedBreaker::retain_active)).
    pub(super) fn sweep(&self, now: u64) {
        self.sweep_from(Cursor::START, usize::MAX, now);
    }

    /// Sweeps from `cursor` until it has looked at `budget` entries: where to go on, `None`
    /// when it reached the end of the last shard.
    ///
    /// Under a guard of its own every [`FREE_STEP`] entries: what it removed is freed when
    /// that guard goes (by the last clone, which unlists the breaker; outside the shard's
    /// lock), while still in cache. One guard for a whole sweep freed 20 000 entries at its
    /// end, each read from memory a second time (`churn_profile sweep`: 22.1 ms against
    /// 17.1 ms; with [`sweep_shard`](Self::sweep_shard)'s batches, 15.1 ms).
    fn sweep_from(&self, mut cursor: Cursor, mut budget: usize, now: u64) -> Option<Cursor> {
        while cursor.shard < SHARDS {
            if budget == 0 {
                return Some(cursor);
            }
            let guard = self.guard();
            let mut step = budget.min(FREE_STEP);
            let looked_at = step;
            let next = self.sweep_shard(cursor.shard, cursor.below, &mut step, now, &guard);
            budget -= looked_at - step;
            guard.flush();
            drop(guard);
            cursor = match next {
                Some(below) => Cursor { below, ..cursor },
                None => Cursor {
                    shard: cursor.shard + 1,
                    below: usize::MAX,
                },
            };
        }
        None
    }

    /// [`sweep`](Self::sweep) of one shard, walking down from just below position `below`
    /// (from its end with `usize::MAX`), looking at no more than `budget` entries (less what
    /// it looked at): where to go on when the budget ran out, `None` when it reached the
    /// shard's start.
    ///
    /// Downwards, a removal (`swap_remove`) moves into the hole a slot already looked at, so
    /// nothing is skipped. Each batch of [`BATCH`] slots is judged first, with loads only,
    /// so the cache misses of its entries overlap; then its idle ones are removed, highest
    /// position first, which leaves the lower positions of the batch where they were.
    fn sweep_shard(
        &self,
        shard: usize,
        below: usize,
        budget: &mut usize,
        now: u64,
        guard: &LocalGuard<'_>,
    ) -> Option<usize> {
        let mut slots = lock(&self.shards[shard].0);
        let mut hi = below.min(slots.len());
        let mut going = [0usize; BATCH];
        while hi > 0 {
            if *budget == 0 {
                return Some(hi);
            }
            let lo = hi - hi.min(BATCH).min(*budget);
            *budget -= hi - lo;
            let mut n = 0;
            for i in (lo..hi).rev() {
                if self.idle_at(slots[i], now, guard) {
                    going[n] = i;
                    n += 1;
                }
            }
            for &i in &going[..n] {
                self.unlist(slots[i].by(), guard);
                self.len.fetch_sub(1, Relaxed);
                slots.swap_remove(i);
            }
            hi = lo;
        }
        None
    }

    /// Whether a sweep at `now` drops this slot's entry: unused for `idle`, and evictable.
    /// Stamps an entry used since the last sweep with `now` instead.
    fn idle_at(&self, slot: Slot, now: u64, guard: &LocalGuard<'_>) -> bool {
        match self.index.get(&slot.by(), guard) {
            Some(node) => {
                let seen = node.seen.load(Relaxed);
                if seen & TOUCHED != 0 {
                    node.seen.store(now & !TOUCHED, Relaxed);
                    false
                } else {
                    now.saturating_sub(seen) >= self.idle() && evictable_when_idle(&node.breaker)
                }
            }
            None => true, // not reached: a slot and its entry go together
        }
    }

    /// Removes the entry of `by` from the set, its breaker detached from the map (it no
    /// longer counts for `max_open`). Under the shard's lock.
    fn unlist(&self, by: ByBreaker, guard: &LocalGuard<'_>) {
        if let Some(node) = self.index.get(&by, guard) {
            node.breaker.shared.core.detach();
        }
        self.index.remove(&by, guard);
    }

    /// At `max_keys`, removes one breaker to make room for a new one, by sampling (see the
    /// module's docs).
    fn evict_one(&self, now: u64) -> Eviction {
        let mut manual = false;
        let found = self.evict_sampled(now, &mut manual);
        match found {
            Some(stateful) => Eviction::Evicted(stateful),
            None if manual && self.none_but_manual() => Eviction::AllManual,
            None => Eviction::Raced,
        }
    }

    /// Whether no entry of the map could be evicted but for manual control: every shard
    /// walked (rare: only when the sample drew nothing but manual keys).
    fn none_but_manual(&self) -> bool {
        let guard = self.guard();
        self.shards.iter().all(|shard| {
            lock(&shard.0).iter().all(|slot| {
                self.index
                    .get(&slot.by(), &guard)
                    .is_none_or(|node| node.breaker.shared.core.is_manual())
            })
        })
    }

    /// [`evict_one`](Self::evict_one)'s sample: whether the evicted breaker held state;
    /// `None` when nothing was drawn but keys under manual control (`manual` set), every
    /// shard is empty (every place is held by a key being inserted), or the chosen breaker
    /// went or moved meanwhile.
    fn evict_sampled(&self, now: u64, manual: &mut bool) -> Option<bool> {
        let guard = self.guard();
        let mut rng = key_hasher().hash_one(self.draws.fetch_add(1, Relaxed)) | 1;
        // The best candidate: (class, recency, shard, position, id), the least first.
        let mut best: Option<(u8, u64, usize, usize, usize)> = None;
        for (s, shard) in self.shards.iter().enumerate() {
            let slots = lock(&shard.0);
            let n = slots.len();
            for j in 0..n.min(SAMPLE) {
                let i = if n <= SAMPLE {
                    j
                } else {
                    rng = xorshift(rng);
                    (rng % n as u64) as usize
                };
                let by = slots[i].by();
                let Some(node) = self.index.get(&by, &guard) else {
                    continue; // not reached: a slot and its entry go together
                };
                if node.breaker.shared.core.is_manual() {
                    *manual = true; // an operator's hand outlives eviction
                    continue;
                }
                let idle = now.saturating_sub(node.recency()) >= self.idle();
                let rank = (class(&node.breaker, idle), node.recency());
                if best.is_none_or(|(c, r, ..)| rank < (c, r)) {
                    best = Some((rank.0, rank.1, s, i, by.id));
                }
            }
        }
        let (class, _, s, at, id_) = best?;
        let mut slots = lock(&self.shards[s].0);
        // Looked at again under the lock: the slot may have moved, a call may have come.
        let by = slots.get(at).filter(|slot| slot.id == id_)?.by();
        let node = self.index.get(&by, &guard)?;
        if node.breaker.shared.core.is_manual() {
            return None; // forced or disabled meanwhile
        }
        if class == 0 && !evictable_when_idle(&node.breaker) {
            return None;
        }
        self.unlist(by, &guard);
        slots.swap_remove(at);
        Some(class > 0)
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

    fn warn_busy_eviction(&self, now: u64) {
        if self.warn_due(now) {
            tracing::warn!(
                target: "breaker",
                breaker = self.name.as_str(),
                max_keys = self.max_keys(),
                "keyed circuit breaker `{}` is at max_keys = {} with no breaker idle and \
                 fresh: evicting ones that hold state (raise max_keys)",
                self.name,
                self.max_keys()
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

/// Indistinguishable from a fresh breaker, with no call in flight: read from the breaker
/// itself, never from who holds it (a snapshot, the fleet, metrics or a user's clone holding
/// it for a moment says nothing about its state).
fn evictable(breaker: &Breaker) -> bool {
    let shared = &breaker.shared;
    shared.core.is_fresh(&shared.clock) && shared.core.calls_in_flight() == 0
}

/// Evictable once unused for `idle`: evictable, or open or half-open with no call in
/// flight (probes included). An open key nobody calls protects nobody, and it holds one of
/// the `max_open` places; forced open and disabled keys are never evicted.
fn evictable_when_idle(breaker: &Breaker) -> bool {
    let core = &breaker.shared.core;
    match core.peek() {
        crate::State::Open | crate::State::HalfOpen => core.calls_in_flight() == 0,
        crate::State::Closed => evictable(breaker),
        crate::State::ForcedOpen | crate::State::Disabled => false,
    }
}

/// What making room at `max_keys` did.
enum Eviction {
    /// One breaker went; whether it held state.
    Evicted(bool),
    /// Nothing went this time (the shards are empty, or the one chosen moved): try again.
    Raced,
    /// Every key is under manual control: there is no room.
    AllManual,
}

/// Eviction order: 0 evictable (or open and unused for `idle`), 1 closed, 2 any other
/// state (the caller skips keys under manual control).
fn class(breaker: &Breaker, idle: bool) -> u8 {
    if evictable(breaker) || (idle && evictable_when_idle(breaker)) {
        0
    } else if breaker.shared.core.peek() == crate::State::Closed {
        1
    } else {
        2
    }
}

impl<K> Node<K> {
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
