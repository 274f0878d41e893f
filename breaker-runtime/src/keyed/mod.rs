//! One breaker per key (host, tenant, instance), in bounded memory.
//!
//! | module | what it holds |
//! | --- | --- |
//! | this one | [`KeyedBreaker`]: creation, lookups and the call wrappers |
//! | `key` | [`BreakerKey`], the borrowed forms of a lookup ([`KeyArg`]), a key's breaker name |
//! | `map` | the map: lock-free lookups that borrow the breaker under an epoch guard (papaya), sharded dense `Vec`s for O(1) insertion, removal and draw |
//! | `map::entry` | the set's entries and how they are found: by a borrowed key, or by breaker from a shard's record |
//! | `map::sweep` | sweeps of idle keys, a step per new key |
//! | `map::evict` | eviction by sampling at the bound (its accuracy is stated there) |
//! | `map::outliers` | outlier detection's walk over the keys (the rules are `crate::outliers`') |

mod key;
mod map;

use std::{
    borrow::Borrow,
    fmt,
    hash::Hash,
    sync::{atomic::Ordering::Relaxed, Arc},
};

pub use key::{BreakerKey, KeyArg};
use map::Map;

use crate::{future::CallFuture, Breaker, CallError, Config, ConfigError, EveryError, Verdict};

/// One breaker per key, all with one policy, in bounded memory.
///
/// Cheap to clone: clones share the map. Each key's breaker is named `{name}[{key}]` in
/// errors, events, the registry and metrics, and is listed in the registry while it lives.
///
/// ```
/// use breaker::{Config, KeyedBreaker, State};
///
/// let hooks = KeyedBreaker::<String>::new("docs::webhooks", Config::default().threshold(1));
/// let _ = hooks.call_sync("dead.example", || Err::<(), _>("connection refused"));
/// assert_eq!(hooks.breaker("dead.example").state(), State::Open);
/// // Another customer's endpoint has a breaker of its own.
/// assert_eq!(hooks.call_sync("alive.example", || Ok::<_, ()>(200)).unwrap(), 200);
/// assert_eq!(hooks.len(), 2);
/// ```
///
/// # Keys
///
/// A key is looked up by the form you call with (`&str` for a `String` key) and kept as
/// [`BreakerKey`] says: a `String` key longer than 256 bytes is kept as its first 16 bytes
/// and 32 hex digits of its SHA-256 (128 bits), the form its name shows, so 10 000 keys of
/// 60 KB cost what 10 000 short keys do. Two long keys that differ anywhere are two breakers;
/// a short key equal to a long key's kept form (which only its digest gives) is that key.
/// A long key's call pays for its digest (a short key's lookup allocates nothing). A key
/// type of your own is kept as it is: it owns its memory.
///
/// ```
/// use breaker::{Config, KeyedBreaker};
///
/// let tenants = KeyedBreaker::<String>::new("docs::tenants", Config::default());
/// let long = "t".repeat(60_000);
/// let b = tenants.breaker(long.as_str());
/// assert_eq!(b.name().len(), "docs::tenants[".len() + 52 + 1);
/// assert!(tenants.breaker(&long).handle().same_breaker(&b.handle()));
/// ```
///
/// # Bounds
///
/// At most [`Config::max_keys`] breakers (default 10 000). A breaker is *evictable* when it
/// is indistinguishable from a fresh one: closed, no failure streak, no failure in its
/// window, no call in flight (calls admitted less calls finished, read from the breaker's
/// own counts, a dry run's shadows included), not throttling nor ramping, its adaptive
/// limit at its start, its retry budget full (no more retries withdrawn than first attempts
/// deposited over its window: evicted, a key that spent its budget would find a whole one).
/// An open or half-open breaker with no call in flight and its retry budget full is
/// evictable too once it has not been called for [`Config::idle`]: it protects nobody, and it frees its
/// [`max_open`](Config::max_open_percent) place (which counts only keys in the map, so a
/// holder of an evicted key's breaker does not keep one). A breaker under manual control
/// (forced open or disabled) is never evicted: if every key is, a new key's call runs on a
/// breaker that is not kept. Holding a key's breaker does not keep it in the map: a `Breaker` from
/// [`breaker`](Self::breaker) whose key is evicted keeps working, detached (a later call for
/// the key makes a fresh breaker). A call that looked its breaker up in the instant before
/// that breaker was evicted runs on the detached breaker.
///
/// When a new key arrives, evictable breakers not called for [`Config::idle`] (default 10
/// minutes) are dropped. At `max_keys` one goes for the new key, chosen by sampling as
/// Redis does (at most 128 entries looked at, one shard locked at a time, whatever the
/// size): the least recently used evictable breaker of the sample, else the least recently
/// used closed one (a spent retry budget or a failure streak goes with it), else the least
/// recently used of any state (one WARN a minute says so: raise `max_keys`; with
/// `max_keys(1)` every new key evicts the one there, whatever it holds). With up to 8 keys in each of the 16 shards the choice is exact;
/// beyond, a breaker with state goes before a fresh one only when none of the 128 draws
/// finds a fresh one (see the `map` module's source for the figures). Recency is tracked
/// without a clock read per call: an idle breaker goes no earlier than `idle` after its last
/// call, and at the latest at the first new key after that plus one sweep interval.
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

#[cfg(test)]
impl<K: BreakerKey + Clone> KeyedBreaker<K> {
    /// Every key with its breaker, and the `max_open` places taken (for the model test,
    /// `crate::tests::keyed_model`).
    pub(crate) fn entries(&self) -> (Vec<(K, Breaker)>, Option<usize>) {
        self.inner.entries()
    }
}

impl<K: BreakerKey> KeyedBreaker<K> {
    /// A keyed breaker named `name`; every key's breaker gets `config`.
    ///
    /// # Panics
    ///
    /// If `config` is invalid, with the [`ConfigError`] message naming the field.
    ///
    /// ```
    /// use std::time::Duration;
    /// use breaker::{Config, KeyedBreaker};
    ///
    /// // One breaker per host, at most 50 000 hosts remembered.
    /// let hosts = KeyedBreaker::<String>::new(
    ///     "docs::keyed_new",
    ///     Config::default().threshold(3).max_keys(50_000).idle(Duration::from_secs(300)),
    /// );
    /// assert!(hosts.is_empty());
    /// ```
    #[track_caller]
    pub fn new(name: impl AsRef<str>, config: Config) -> Self {
        match Self::try_new(name, config) {
            Ok(k) => k,
            Err(e) => panic!("{e}"),
        }
    }

    /// A keyed breaker, or the [`ConfigError`] naming the invalid field.
    pub fn try_new(name: impl AsRef<str>, config: Config) -> Result<Self, ConfigError> {
        crate::probe::refuse_keyed(&config)?;
        let inner = Arc::new(Map::new(name.as_ref(), config.resolve()?));
        crate::outliers::task::start(&inner);
        Ok(KeyedBreaker { inner })
    }

    /// Changes every key's configuration while they run, now and for keys made later,
    /// keeping each key's state, counts and deadlines (see [`Breaker::reconfigure`]). A new
    /// `max_keys` or `idle` applies from the next new key (a lower `max_keys` evicts as new
    /// keys arrive, never all at once). Validated first: an invalid `config` changes nothing
    /// and the error names the field.
    ///
    /// ```
    /// use breaker::{Config, KeyedBreaker};
    ///
    /// let hosts = KeyedBreaker::<String>::new("docs::keyed_reconfigure", Config::default());
    /// let early = hosts.breaker("a.example");
    /// hosts.reconfigure(Config::default().threshold(2)).unwrap();
    /// assert_eq!(early.config().values().threshold, Some(2)); // keys made before
    /// assert_eq!(hosts.breaker("b.example").config().values().threshold, Some(2)); // and after
    /// ```
    pub fn reconfigure(&self, config: Config) -> Result<(), ConfigError> {
        crate::probe::refuse_keyed(&config)?;
        self.inner.reconfigure(|_| Ok(config))?;
        crate::outliers::task::start(&self.inner);
        Ok(())
    }

    /// Changes the keys `patch` names in every key's configuration, keeping the others (see
    /// [`Breaker::apply`]); validated as a whole first, applied like
    /// [`reconfigure`](Self::reconfigure).
    #[cfg(feature = "serde")]
    pub fn apply(&self, patch: &crate::ConfigPatch) -> Result<(), ConfigError> {
        self.inner.reconfigure(|config| patch.applied_to(config))?;
        crate::outliers::task::start(&self.inner);
        Ok(())
    }

    /// The configuration in force for every key, now and for keys made later: the last
    /// [`reconfigure`](Self::reconfigure) or `apply`, else the one it was made with (as
    /// [`Breaker::config`] says a breaker's).
    ///
    /// ```
    /// use breaker::{Config, KeyedBreaker};
    ///
    /// let hosts = KeyedBreaker::<String>::new("docs::keyed_config", Config::default());
    /// hosts.reconfigure(Config::default().threshold(2)).unwrap();
    /// assert_eq!(hosts.config().values().threshold, Some(2));
    /// assert_eq!(hosts.config(), hosts.breaker("a.example").config());
    /// ```
    pub fn config(&self) -> Config {
        self.inner.config()
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
    ///
    /// ```
    /// use breaker::{Config, KeyedBreaker, State};
    ///
    /// let hosts = KeyedBreaker::<String>::new("docs::keyed_breaker", Config::default());
    /// let b = hosts.breaker("example.com"); // get or create; a `&str` for a `String` key
    /// assert_eq!(b.name(), "docs::keyed_breaker[example.com]");
    /// assert_eq!(b.state(), State::Closed);
    /// assert_eq!(hosts.len(), 1);
    /// ```
    pub fn breaker<Q>(&self, key: &Q) -> Breaker
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.with(key, Breaker::clone)
    }

    /// Runs `f` on `key`'s breaker (created if there is none): an existing key's breaker
    /// borrowed under the map's epoch guard, with no shared write (see the `map` module).
    #[inline]
    fn with<Q, R>(&self, key: &Q, f: impl FnOnce(&Breaker) -> R) -> R
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let hash = self.inner.hash(key);
        let guard = self.inner.guard();
        if let Some(found) = self.inner.find(hash, key, &guard) {
            return f(found);
        }
        drop(guard);
        f(&self.make(key, hash))
    }

    /// Creates `key`'s breaker; starts outlier detection if the keyed breaker was made
    /// outside a runtime (one relaxed load without outliers).
    #[cold]
    fn make<Q>(&self, key: &Q, hash: u64) -> Breaker
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        let made = self.inner.insert(key, hash);
        crate::outliers::task::start(&self.inner);
        made
    }

    /// Runs one async call through `key`'s breaker (see [`Breaker::call`]). The lookup
    /// happens now; the call is admitted on the future's first poll.
    ///
    /// ```
    /// use breaker::{Config, KeyedBreaker, State};
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let hooks = KeyedBreaker::<String>::new("docs::keyed_call", Config::default().threshold(1));
    /// let _ = hooks.call("down.example", async { Err::<(), _>("refused") }).await;
    /// // One host is open; the others are not.
    /// assert_eq!(hooks.breaker("down.example").state(), State::Open);
    /// assert!(hooks.call("ok.example", async { Ok::<_, ()>(202) }).await.is_ok());
    /// # }
    /// ```
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

    /// Runs one blocking call through `key`'s breaker (see [`Breaker::call_sync`]). An
    /// existing key's call writes nothing the map shares: two threads calling one key scale
    /// as two threads calling one [`Breaker`] do.
    ///
    /// ```
    /// use breaker::{Config, KeyedBreaker};
    ///
    /// let tenants = KeyedBreaker::<u64>::new("docs::keyed_sync", Config::default());
    /// let rows = tenants.call_sync(&42, || Ok::<_, std::io::Error>(3));
    /// assert_eq!(rows.unwrap(), 3);
    /// ```
    pub fn call_sync<Q, T, E>(
        &self,
        key: &Q,
        call: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, CallError<E>>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.with(key, |b| b.call_sync(call))
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
        self.with(key, |b| b.call_sync_classified(classify, call))
    }

    /// Whether `key` has a breaker in the map now (a breaker of an evicted key that someone
    /// still holds is detached: not in the map, though still in the registry). For tests.
    #[doc(hidden)]
    pub fn contains<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        self.inner.get(key).is_ok()
    }

    /// Calls `f` with every breaker this map creates from now on, after it is listed and
    /// outside the map's locks: how the attribute's `fleet = true` and `Fleet::join_keyed`
    /// join each key's breaker to a fleet. Set once; a second call is ignored.
    #[doc(hidden)]
    pub fn on_new(&self, f: impl Fn(&Breaker) + Send + Sync + 'static) {
        let _ = self.inner.on_new.set(Box::new(f));
    }

    /// Drops every evictable breaker (see the type's docs) not called for `idle`, now.
    /// Happens by itself when new keys arrive; call it to free memory at a quiet time.
    pub fn retain_active(&self) {
        let now = self.inner.now();
        self.inner.sweep(now);
    }
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

    /// Issue 28 finding 6: a dry run's would-be refusals finish like any call, so its keys
    /// are swept as idle as the same keys without dry run are.
    #[tokio::test(start_paused = true)]
    async fn dry_run_keys_are_swept_as_idle() {
        for dry_run in [false, true] {
            let config = Config::default()
                .threshold(1)
                .cool_off(std::time::Duration::from_secs(1))
                .dry_run(dry_run)
                .idle(std::time::Duration::from_secs(60));
            let k = KeyedBreaker::<String>::new("keyed::dry_sweep", config);
            for key in ["a", "b"] {
                fail(&k, key); // opens (on paper in a dry run)
                               // Refused, or in a dry run made anyway as a shadow.
                let made = k.call_sync(key, || Ok::<_, ()>(())).is_ok();
                assert_eq!(made, dry_run);
            }
            // Cool-off over, the probes close them: fresh again.
            tokio::time::advance(std::time::Duration::from_secs(2)).await;
            for key in ["a", "b"] {
                k.call_sync(key, || Ok::<_, ()>(())).unwrap();
                assert_eq!(k.breaker(key).state(), State::Closed);
            }
            // The first sweep stamps the keys called since the last one, the next drops them.
            for _ in 0..2 {
                tokio::time::advance(std::time::Duration::from_secs(61)).await;
                k.retain_active();
            }
            assert_eq!(k.len(), 0, "dry_run {dry_run}: idle keys swept");
        }
    }

    /// Issue 28 finding 5: a key that is throttling holds state a fresh one would not; at
    /// `max_keys` fresh keys go before it, and it keeps shedding.
    #[tokio::test(start_paused = true)]
    async fn a_throttling_key_is_not_evicted_as_fresh() {
        let config = Config::default().threshold(1_000).throttle(2.0).max_keys(4);
        let k = KeyedBreaker::<String>::new("keyed::throttling", config);
        // Three failures to one success, ending on a success: no failure streak, a third
        // of the calls answered.
        for i in 0..400 {
            let _ = k.call_sync("hot", || if i % 4 == 3 { Ok(()) } else { Err(()) });
        }
        // Until one is admitted: the streak ends.
        while k.call_sync("hot", || Ok::<_, ()>(())).is_err() {}
        let shedding = k.breaker("hot").snapshot().throttle_rate;
        assert!(shedding > 10.0, "the key sheds: {shedding}");
        // It is the least recently used key from now on.
        k.retain_active();
        tokio::time::advance(std::time::Duration::from_secs(1)).await;
        for i in 0..20 {
            k.call_sync(&format!("new-{i}"), || Ok::<_, ()>(()))
                .unwrap();
            assert!(k.len() <= 4);
        }
        assert!(k.contains("hot"), "the throttling key was evicted as fresh");
        assert!(k.breaker("hot").snapshot().throttle_rate > 10.0);
    }

    /// Issue 28 finding 3: keys that opened and are never called again do not hold the
    /// `max_open` places for good: unused for `idle`, an open key is swept like a fresh one,
    /// and the cap counts only the keys in the map.
    #[tokio::test(start_paused = true)]
    async fn keys_nobody_calls_do_not_use_up_max_open() {
        let config = Config::default()
            .threshold(1)
            .cool_off(std::time::Duration::from_secs(1))
            .max_open_percent(10)
            .idle(std::time::Duration::from_secs(60));
        let k = KeyedBreaker::<String>::new("keyed::max_open_idle", config);
        for i in 0..20 {
            k.call_sync(&format!("h{i}"), || Ok::<_, ()>(())).unwrap();
        }
        fail(&k, "h0");
        fail(&k, "h1"); // two places of 20 × 10 %: both taken
                        // A holder of an evicted key's breaker does not keep its place.
        let held = k.breaker("h0");
        assert_eq!(k.breaker("h1").state(), State::Open);
        for _ in 0..10 {
            fail(&k, "h5");
        }
        assert_eq!(k.breaker("h5").state(), State::Closed, "no place left");
        // h0 and h1 are never called again; the others are.
        for _ in 0..2 {
            tokio::time::advance(std::time::Duration::from_secs(61)).await;
            for i in 2..20 {
                let _ = k.call_sync(&format!("h{i}"), || Ok::<_, ()>(()));
            }
            k.retain_active();
        }
        assert!(
            !k.contains("h0") && !k.contains("h1"),
            "idle open keys are swept"
        );
        fail(&k, "h5");
        assert_eq!(k.breaker("h5").state(), State::Open, "a place was freed");
        // The detached breaker still works for its holder.
        assert!(held.call_sync(|| Ok::<_, ()>(())).is_ok());
    }

    /// Issue 28 finding 3: one-shot failing keys through `max_keys` (an attacker's, or
    /// decommissioned hosts) leave a place for a new failing key once they are idle.
    #[tokio::test(start_paused = true)]
    async fn one_shot_failing_keys_leave_max_open_places() {
        let config = Config::default()
            .threshold(1)
            .max_keys(100)
            .max_open_percent(10)
            .idle(std::time::Duration::from_secs(60));
        let k = KeyedBreaker::<String>::new("keyed::max_open_churn", config);
        for i in 0..1_000 {
            fail(&k, &format!("one-shot-{i}"));
            assert!(k.len() <= 100);
        }
        tokio::time::advance(std::time::Duration::from_secs(80)).await;
        fail(&k, "victim");
        assert_eq!(k.breaker("victim").state(), State::Open);
    }

    /// Issue 35 finding 5: an operator's force-open outlives any churn of failing keys.
    #[test]
    fn a_key_under_manual_control_is_never_evicted() {
        let config = Config::default().threshold(1).max_keys(50);
        let k = KeyedBreaker::<String>::new("keyed::manual", config);
        k.breaker("forced").handle().force_open();
        k.breaker("off").handle().disable();
        for i in 0..2_000 {
            fail(&k, &format!("attacker-{i}"));
            assert!(k.len() <= 50);
        }
        assert!(k.contains("forced") && k.contains("off"));
        assert_eq!(k.breaker("forced").state(), State::ForcedOpen);
        assert_eq!(k.breaker("off").state(), State::Disabled);
    }

    /// With every place held by keys under manual control, a new key still gets a breaker
    /// (not kept), and the bound holds.
    #[test]
    fn keys_all_under_manual_control_keep_the_bound() {
        let config = Config::default().threshold(1).max_keys(3);
        let k = KeyedBreaker::<String>::new("keyed::all_manual", config);
        for key in ["a", "b", "c"] {
            k.breaker(key).handle().force_open();
        }
        assert_eq!(k.call_sync("new", || Ok::<_, ()>(7)).unwrap(), 7);
        assert_eq!(k.len(), 3);
        assert!(!k.contains("new"));
        for key in ["a", "b", "c"] {
            assert_eq!(k.breaker(key).state(), State::ForcedOpen);
        }
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
