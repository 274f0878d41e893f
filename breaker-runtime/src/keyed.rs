//! One breaker per key (host, tenant, instance), in bounded memory.
//!
//! The map is sharded: a key's hash picks one of [`SHARDS`] shards, each a `RwLock` around a
//! `hashbrown::HashTable`. A call for a key that has a breaker takes its shard's read lock,
//! compares the borrowed key with the stored one (`K: Borrow<Q>`, as `HashMap::get`), clones the
//! breaker's `Arc` and releases the lock: no allocation, and callers of keys in other shards
//! never touch the same lock. Only a new key takes a write lock; only a new key reads the
//! clock.
//!
//! Eviction is governor's rule: drop first what is indistinguishable from a fresh breaker
//! (closed, no failure streak, no failure in its window, no call in flight), read from the
//! breaker itself: who else holds it for a moment (a snapshot, the fleet, metrics, a user's
//! clone) says nothing about its state. Idle ones go when a new key arrives (the only moment memory grows), so
//! there is no background task. At `max_keys` the least recently used evictable breaker
//! goes; if there is none, the least recently used closed one, then the least recently used
//! of any state, with one WARN a minute. The bound always holds.
//!
//! Recency is kept without a clock read per call: a call sets its entry's `touched` flag
//! (a load, and a store only if it was clear); a sweep, run when a new key arrives, stamps
//! touched entries with the time of the sweep and clears the flag. So "idle" is measured
//! between sweeps: an entry untouched since its last stamp for longer than `idle` goes; one
//! touched since the previous sweep counts as used at this one (kept up to one sweep
//! interval longer than `idle`, never dropped earlier).

use std::{
    borrow::{Borrow, Cow},
    fmt,
    hash::{BuildHasher, Hash},
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    sync::{
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed},
        Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard,
    },
    time::Duration,
};

use hashbrown::HashTable;
use tokio::time::Instant;

use crate::{
    clock::to_nanos, future::CallFuture, Breaker, CallError, Config, ConfigError, EveryError,
    Verdict,
};

/// Shards of a keyed breaker's map: callers of different keys rarely share a lock.
const SHARDS: usize = 16;

/// How often a WARN says non-fresh breakers are being evicted at `max_keys`.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// A type that can key a [`KeyedBreaker`]: `String`, the integers, `IpAddr`, `SocketAddr`,
/// `http::uri::Authority` (with feature `http`), a pair of those, or your own type.
///
/// The map stores keys of this type and looks them up by a borrowed form as `HashMap::get`
/// does (`&Q` where `K: Borrow<Q>`): a `KeyedBreaker<String>` is called with a `&str`, and an
/// existing key's lookup allocates nothing. [`fmt_key`](Self::fmt_key) writes the key into
/// its breaker's name, `{name}[{key}]`.
///
/// Your own key type:
///
/// ```
/// use std::fmt;
/// use breaker_runtime::{BreakerKey, Config, KeyedBreaker};
///
/// #[derive(Clone, PartialEq, Eq, Hash)]
/// struct Tenant(u32);
///
/// impl BreakerKey for Tenant {
///     fn fmt_key(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
///         write!(f, "tenant-{}", self.0)
///     }
/// }
///
/// let db = KeyedBreaker::<Tenant>::new("docs::tenant_db", Config::default());
/// assert_eq!(db.breaker(&Tenant(7)).name(), "docs::tenant_db[tenant-7]");
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot key a circuit breaker",
    label = "this key's type is `{Self}`",
    note = "keys are `&str`, `String`, integers, `IpAddr`, `SocketAddr`, `http::uri::Authority` (feature `http`) and pairs of those; for another type implement `breaker::BreakerKey` (see its docs)"
)]
pub trait BreakerKey: Hash + Eq + Send + Sync + 'static {
    /// Writes the key as it appears in the breaker's name `{name}[{key}]`.
    fn fmt_key(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

/// Keys shown with `Display`.
macro_rules! display_keys {
    ($($t:ty),* $(,)?) => {$(
        impl BreakerKey for $t {
            fn fmt_key(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }
    )*};
}

display_keys!(
    String, u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, bool, char, IpAddr,
    Ipv4Addr, Ipv6Addr, SocketAddr,
);

#[cfg(feature = "http")]
display_keys!(http::uri::Authority);

/// A pair keys as `a:b`, say `(host, port)` as `example.com:443`.
impl<A: BreakerKey, B: BreakerKey> BreakerKey for (A, B) {
    fn fmt_key(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt_key(f)?;
        f.write_str(":")?;
        self.1.fmt_key(f)
    }
}

/// What `key = <expr>` of the attribute evaluates to, and how it finds its breaker: the
/// stored key type, and the borrowed form a lookup takes. Implemented for the key types,
/// their references, and `&str`/`String` (stored as `String`, looked up as `str`). A pair
/// is looked up by its owned form (a pair holding a `&str` makes a `String` per call).
#[doc(hidden)]
pub trait KeyArg {
    /// What the map stores.
    type Key: BreakerKey + Borrow<Self::Lookup>;
    /// What a lookup borrows.
    type Lookup: ?Sized + Hash + Eq + ToOwned<Owned = Self::Key>;
    /// The borrowed form of this key.
    fn lookup(&self) -> Cow<'_, Self::Lookup>;
}

impl<T: KeyArg + ?Sized> KeyArg for &T {
    type Key = T::Key;
    type Lookup = T::Lookup;
    fn lookup(&self) -> Cow<'_, T::Lookup> {
        (**self).lookup()
    }
}

impl KeyArg for str {
    type Key = String;
    type Lookup = str;
    fn lookup(&self) -> Cow<'_, str> {
        Cow::Borrowed(self)
    }
}

impl KeyArg for String {
    type Key = String;
    type Lookup = str;
    fn lookup(&self) -> Cow<'_, str> {
        Cow::Borrowed(self.as_str())
    }
}

macro_rules! self_keyed {
    ($($t:ty),* $(,)?) => {$(
        impl KeyArg for $t {
            type Key = $t;
            type Lookup = $t;
            fn lookup(&self) -> Cow<'_, $t> {
                Cow::Borrowed(self)
            }
        }
    )*};
}

self_keyed!(
    u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, bool, char, IpAddr, Ipv4Addr,
    Ipv6Addr, SocketAddr,
);

#[cfg(feature = "http")]
self_keyed!(http::uri::Authority);

impl<A: KeyArg, B: KeyArg> KeyArg for (A, B)
where
    (A::Key, B::Key): Clone,
{
    type Key = (A::Key, B::Key);
    type Lookup = (A::Key, B::Key);
    fn lookup(&self) -> Cow<'_, Self::Key> {
        let a = self.0.lookup().into_owned();
        let b = self.1.lookup().into_owned();
        Cow::Owned((a, b))
    }
}

/// A key's breaker name: `{name}[{key}]`.
struct KeyName<'a, K>(&'a str, &'a K);

impl<K: BreakerKey> fmt::Display for KeyName<'_, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)?;
        f.write_str("[")?;
        self.1.fmt_key(f)?;
        f.write_str("]")
    }
}

/// One breaker per key, all with one policy, in bounded memory.
///
/// Cheap to clone: clones share the map. Each key's breaker is named `{name}[{key}]` in
/// errors, events, the registry and metrics, and is listed in the registry while it lives.
///
/// ```
/// use breaker_runtime::{Config, KeyedBreaker, State};
///
/// let hooks = KeyedBreaker::<String>::new("docs::webhooks", Config::default().threshold(1));
/// let _ = hooks.call_sync("dead.example", || Err::<(), _>("connection refused"));
/// assert_eq!(hooks.breaker("dead.example").state(), State::Open);
/// // Another customer's endpoint has a breaker of its own.
/// assert_eq!(hooks.call_sync("alive.example", || Ok::<_, ()>(200)).unwrap(), 200);
/// assert_eq!(hooks.len(), 2);
/// ```
///
/// # Bounds
///
/// At most [`Config::max_keys`] breakers (default 10 000). A breaker is *evictable* when it
/// is indistinguishable from a fresh one: closed, no failure streak, no failure in its
/// window, no call in flight (calls admitted less calls finished, read from the breaker's
/// own counts). Holding a key's breaker does not keep it in the map: a `Breaker` from
/// [`breaker`](Self::breaker) whose key is evicted keeps working, detached (a later call for
/// the key makes a fresh breaker). A call that looked its breaker up in the instant before
/// that breaker was evicted runs on the detached breaker. When a new key
/// arrives, evictable breakers not called for [`Config::idle`] (default 10 minutes) are
/// dropped; at `max_keys` the least recently used evictable one goes first, then the least
/// recently used closed one, then the least recently used of any state (one WARN a minute
/// says so: raise `max_keys`). Recency is tracked without a clock read per call (see the
/// module source): an idle breaker goes no earlier than `idle` after its last call, and at
/// the latest at the first new key after that plus one sweep interval.
pub struct KeyedBreaker<K> {
    inner: Arc<Map<K>>,
}

impl<K> Clone for KeyedBreaker<K> {
    fn clone(&self) -> Self {
        KeyedBreaker {
            inner: self.inner.clone(),
        }
    }
}

impl<K> fmt::Debug for KeyedBreaker<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyedBreaker")
            .field("name", &self.inner.name)
            .field("len", &self.inner.len.load(Relaxed))
            .finish_non_exhaustive()
    }
}

struct Map<K> {
    name: String,
    config: Config,
    max_keys: usize,
    idle: u64,
    hasher: std::hash::RandomState,
    shards: [Shard<K>; SHARDS],
    len: AtomicUsize,
    /// Time origin of the stamps below.
    origin: Instant,
    /// When the last sweep ran (nanos since `origin`).
    swept: AtomicU64,
    /// When the last WARN about evicting non-fresh breakers was logged (0: never).
    warned: AtomicU64,
    /// Called with each new key's breaker, outside the map's locks (`fleet = true`).
    on_new: std::sync::OnceLock<fn(&Breaker)>,
    /// The next evictable breakers found by the last scan, least recently used last.
    victims: Mutex<Vec<Victim>>,
}

/// A breaker a scan found evictable, and how to find it again.
#[derive(Debug, Clone, Copy)]
struct Victim {
    /// Recency as the scan ranked it.
    recency: u64,
    /// Its stamp at the scan: a different one now means it was used since.
    seen: u64,
    id: usize,
    hash: u64,
    shard: usize,
}

/// One shard, on cache lines of its own: a read lock is a write to the lock's word, and two
/// threads reading two shards must not share a line (128 bytes: adjacent-line prefetchers
/// pair lines).
#[repr(align(128))]
struct Shard<K>(RwLock<HashTable<Entry<K>>>);

struct Entry<K> {
    hash: u64,
    key: K,
    breaker: Breaker,
    /// Called since the last sweep.
    touched: AtomicBool,
    /// When last known used (nanos since the map's origin): set at creation and by sweeps.
    seen: AtomicU64,
}

impl<K: BreakerKey> KeyedBreaker<K> {
    /// A keyed breaker named `name`; every key's breaker gets `config`.
    ///
    /// # Panics
    ///
    /// If `config` is invalid, with the [`ConfigError`] message naming the field.
    #[track_caller]
    pub fn new(name: impl AsRef<str>, config: Config) -> Self {
        match Self::try_new(name, config) {
            Ok(k) => k,
            Err(e) => panic!("{e}"),
        }
    }

    /// A keyed breaker, or the [`ConfigError`] naming the invalid field.
    pub fn try_new(name: impl AsRef<str>, config: Config) -> Result<Self, ConfigError> {
        let policy = config.validate()?;
        Ok(KeyedBreaker {
            inner: Arc::new(Map {
                name: name.as_ref().to_owned(),
                config,
                max_keys: policy.max_keys,
                idle: policy.idle,
                hasher: std::hash::RandomState::new(),
                shards: std::array::from_fn(|_| Shard(RwLock::new(HashTable::new()))),
                len: AtomicUsize::new(0),
                origin: Instant::now(),
                swept: AtomicU64::new(0),
                warned: AtomicU64::new(0),
                on_new: std::sync::OnceLock::new(),
                victims: Mutex::new(Vec::new()),
            }),
        })
    }

    /// The name every key's breaker is named after.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// How many keys have a breaker now.
    pub fn len(&self) -> usize {
        self.inner.len.load(Relaxed)
    }

    /// Whether no key has a breaker.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The breaker of `key`, created if there is none (which may evict another, see the
    /// type's docs). An existing key's lookup allocates nothing.
    pub fn breaker<Q>(&self, key: &Q) -> Breaker
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.inner
            .get(key)
            .unwrap_or_else(|hash| self.inner.insert(key, hash))
    }

    /// Runs one async call through `key`'s breaker (see [`Breaker::call`]). The lookup
    /// happens now; the call is admitted on the future's first poll.
    pub fn call<Q, F, T, E>(&self, key: &Q, call: F) -> CallFuture<'static, F, EveryError, Breaker>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
        F: std::future::Future<Output = Result<T, E>>,
    {
        self.breaker(key).call_owned(call)
    }

    /// Like [`call`](Self::call), judged by `classify` (see [`Breaker::call_classified`]).
    pub fn call_classified<Q, F, T, E, C>(
        &self,
        key: &Q,
        classify: C,
        call: F,
    ) -> CallFuture<'static, F, crate::Classify<C>, Breaker>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
        F: std::future::Future<Output = Result<T, E>>,
        C: FnOnce(&Result<T, E>) -> Verdict,
    {
        self.breaker(key).call_owned_classified(classify, call)
    }

    /// Runs one blocking call through `key`'s breaker (see [`Breaker::call_sync`]).
    pub fn call_sync<Q, T, E>(
        &self,
        key: &Q,
        call: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, CallError<E>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.breaker(key).call_sync(call)
    }

    /// Like [`call_sync`](Self::call_sync), judged by `classify`.
    pub fn call_sync_classified<Q, T, E>(
        &self,
        key: &Q,
        classify: impl FnOnce(&Result<T, E>) -> Verdict,
        call: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, CallError<E>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.breaker(key).call_sync_classified(classify, call)
    }

    /// Whether `key` has a breaker in the map now (a breaker of an evicted key that someone
    /// still holds is detached: not in the map, though still in the registry). For tests.
    #[doc(hidden)]
    pub fn contains<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.inner.get(key).is_ok()
    }

    /// Calls `f` with every breaker this map creates from now on, after it is listed and
    /// outside the map's locks: how the attribute's `fleet = true` joins each key's breaker
    /// to the fleet. Set once; a second call is ignored.
    #[doc(hidden)]
    pub fn on_new(&self, f: fn(&Breaker)) {
        let _ = self.inner.on_new.set(f);
    }

    /// Drops every evictable breaker (see the type's docs) not called for `idle`, now.
    /// Happens by itself when new keys arrive; call it to free memory at a quiet time.
    pub fn retain_active(&self) {
        let now = self.inner.now();
        self.inner.sweep(now);
    }
}

impl<K: BreakerKey> Map<K> {
    /// The key's hash; a borrowed form hashes as its owned form (`Borrow`'s contract).
    fn hash<Q: Hash + ?Sized>(&self, key: &Q) -> u64 {
        self.hasher.hash_one(key)
    }

    fn shard_index(&self, hash: u64) -> usize {
        (hash >> 59) as usize % SHARDS
    }

    fn shard(&self, hash: u64) -> &RwLock<HashTable<Entry<K>>> {
        &self.shards[self.shard_index(hash)].0
    }

    fn now(&self) -> u64 {
        to_nanos(Instant::now().saturating_duration_since(self.origin))
    }

    /// An existing key's breaker, or the key's hash to insert it with.
    #[inline]
    fn get<Q>(&self, key: &Q) -> Result<Breaker, u64>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = self.hash(key);
        let shard = read(self.shard(hash));
        match shard.find(hash, |e| e.key.borrow() == key) {
            Some(e) => {
                if !e.touched.load(Relaxed) {
                    e.touched.store(true, Relaxed);
                }
                Ok(e.breaker.clone())
            }
            None => Err(hash),
        }
    }

    /// Creates `key`'s breaker (unless a racing caller just did), sweeping idle breakers
    /// and making room first.
    #[cold]
    fn insert<Q>(&self, key: &Q, hash: u64) -> Breaker
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let now = self.now();
        self.sweep_if_due(now);
        let at = self.shard_index(hash);
        let mut evicted = None;
        let mut busy = false;
        let breaker = if self.reserve() {
            // Below the bound: a place is reserved; only this key's shard is locked.
            let mut shard = write(&self.shards[at].0);
            if let Some(e) = shard.find(hash, |e| e.key.borrow() == key) {
                self.len.fetch_sub(1, Relaxed); // a racing caller made it: give the place back
                return e.breaker.clone();
            }
            self.put(&mut shard, key, hash, now)
        } else {
            // At the bound: evict one and insert under every shard's lock, so no other new
            // key slips in between (the count does not change: one out, one in).
            let mut shards: Vec<RwLockWriteGuard<'_, HashTable<Entry<K>>>> =
                self.shards.iter().map(|s| write(&s.0)).collect();
            if let Some(e) = shards[at].find(hash, |e| e.key.borrow() == key) {
                return e.breaker.clone();
            }
            if !self.reserve() {
                (evicted, busy) = self.evict_one(&mut shards, now);
            }
            self.put(&mut shards[at], key, hash, now)
        };
        // Dropped here, outside the shards' locks: the last clone unlists the breaker.
        drop(evicted);
        if busy {
            self.warn_busy_eviction(now);
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

    /// Creates `key`'s breaker in `shard` (its place already counted in `len`).
    fn put<Q>(&self, shard: &mut HashTable<Entry<K>>, key: &Q, hash: u64, now: u64) -> Breaker
    where
        Q: ToOwned<Owned = K> + ?Sized,
    {
        let key = key.to_owned();
        let name = KeyName(&self.name, &key).to_string();
        let breaker = Breaker::try_new(name, self.config.clone())
            .expect("the configuration was validated when the keyed breaker was made");
        shard.insert_unique(
            hash,
            Entry {
                hash,
                key,
                breaker: breaker.clone(),
                touched: AtomicBool::new(false),
                seen: AtomicU64::new(now),
            },
            |e| e.hash,
        );
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

    /// Stamps touched entries with `now`; drops evictable ones unused for `idle`.
    fn sweep(&self, now: u64) {
        let mut dropped = Vec::new();
        for shard in &self.shards {
            let mut shard = write(&shard.0);
            shard.retain(|e| {
                if e.touched.swap(false, Relaxed) {
                    e.seen.store(now, Relaxed);
                    return true;
                }
                let idle = now.saturating_sub(e.seen.load(Relaxed)) >= self.idle;
                if idle && e.evictable() {
                    self.len.fetch_sub(1, Relaxed);
                    dropped.push(e.breaker.clone());
                    false
                } else {
                    true
                }
            });
        }
        // Dropped here, outside the shards' locks: the last clone unlists the breaker.
        drop(dropped);
    }

    /// At `max_keys`, evicts one breaker to make room for one more: the least recently used
    /// evictable one, else the least recently used closed one, else the least recently used
    /// of any state. Returns it (to drop outside the locks) and whether it was not fresh.
    ///
    /// Finding the least recently used takes a scan of every entry; the scan keeps the next
    /// evictable ones in order (up to an eighth of the bound) as [`Victim`]s, so a stream of
    /// new keys pays for one scan per `max_keys / 8` of them. A queued victim is taken only if
    /// it is still there, still evictable and not called since the scan; otherwise the next.
    fn evict_one(
        &self,
        shards: &mut [RwLockWriteGuard<'_, HashTable<Entry<K>>>],
        _now: u64,
    ) -> (Option<Entry<K>>, bool) {
        let len: usize = shards.iter().map(|s| s.len()).sum();
        let mut victims = self.victims.lock().unwrap_or_else(PoisonError::into_inner);
        let mut taken = None;
        while let Some(v) = victims.pop() {
            if let Ok(entry) = shards[v.shard].find_entry(v.hash, |e| e.id() == v.id) {
                let e = entry.get();
                if !e.touched.load(Relaxed) && e.seen.load(Relaxed) == v.seen && e.evictable() {
                    taken = Some((entry.remove().0, false));
                    break;
                }
            }
        }
        if taken.is_none() {
            // (class, victim): class 0 evictable, 1 closed, 2 any.
            let mut candidates: Vec<(u8, Victim)> = Vec::with_capacity(len);
            for (shard, table) in shards.iter().enumerate() {
                for e in table.iter() {
                    let touched = e.touched.load(Relaxed);
                    let seen = e.seen.load(Relaxed);
                    let victim = Victim {
                        // Called since the last sweep: the most recent of all (`now` was
                        // read before the locks, and entries made meanwhile are newer).
                        recency: if touched { u64::MAX } else { seen },
                        seen,
                        id: e.id(),
                        hash: e.hash,
                        shard,
                    };
                    candidates.push((e.class(), victim));
                }
            }
            candidates.sort_unstable_by_key(|(class, v)| (*class, v.recency));
            let (class, first) = candidates[0];
            if let Ok(entry) = shards[first.shard].find_entry(first.hash, |e| e.id() == first.id) {
                taken = Some((entry.remove().0, class > 0));
            }
            if class == 0 {
                // The next evictable ones, least recent last (popped first).
                let more = (self.max_keys / 8).max(1);
                // (A breaker called since the last sweep ranks as used now, and would be
                // refused at its turn: not queued.)
                let queue = candidates[1..]
                    .iter()
                    .take_while(|(class, _)| *class == 0)
                    .filter(|(_, v)| v.recency == v.seen)
                    .take(more)
                    .map(|(_, v)| *v);
                victims.extend(queue);
                victims.reverse();
            }
        }
        drop(victims);
        match taken {
            Some((entry, busy)) => (Some(entry), busy),
            None => (None, false),
        }
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
}

fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(all(test, not(breaker_loom)))]
mod tests {
    use super::*;
    use crate::State;

    fn fail(k: &KeyedBreaker<String>, key: &str) {
        let _ = k.call_sync(key, || Err::<(), _>(()));
    }

    #[test]
    fn a_pair_keys_as_host_colon_port() {
        let k = KeyedBreaker::<(String, u16)>::new("keyed::pairs", Config::default());
        let a = k.breaker(&("example.com".to_string(), 443));
        let b = k.breaker(&("example.com".to_string(), 443));
        assert!(a.handle().same_breaker(&b.handle()));
        assert_eq!(a.name(), "keyed::pairs[example.com:443]");
        assert_eq!(k.len(), 1);
    }

    #[test]
    fn at_the_bound_fresh_breakers_go_before_open_ones() {
        let config = Config::default().threshold(1).max_keys(4);
        let k = KeyedBreaker::<String>::new("keyed::bound", config);
        fail(&k, "open-1");
        fail(&k, "open-2");
        let _ = k.call_sync("fresh-1", || Ok::<_, ()>(()));
        let _ = k.call_sync("fresh-2", || Ok::<_, ()>(()));
        for i in 0..20 {
            let _ = k.call_sync(&format!("new-{i}"), || Ok::<_, ()>(()));
            assert!(k.len() <= 4);
        }
        assert_eq!(k.inner.get("open-1").map(|b| b.state()), Ok(State::Open));
        assert_eq!(k.inner.get("open-2").map(|b| b.state()), Ok(State::Open));
    }

    #[test]
    fn the_bound_holds_when_nothing_is_evictable() {
        let config = Config::default().threshold(1).max_keys(3);
        let k = KeyedBreaker::<String>::new("keyed::all_open", config);
        for i in 0..10 {
            fail(&k, &format!("open-{i}"));
            assert!(k.len() <= 3);
        }
        assert_eq!(k.len(), 3);
    }
}
