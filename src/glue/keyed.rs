//! `key = …`: the key expression's way to its breaker ([`KeyProbe`], whose levels method
//! lookup walks by `Deref`) and the per-function map of keyed breakers ([`KeyedStatic`]).

use std::{
    any::Any,
    borrow::Borrow,
    hash::Hash,
    sync::{Mutex, OnceLock},
};

use breaker_runtime::__internals::KeyArg;

use crate::{Breaker, BreakerKey, Config, KeyedBreaker};

/// The value of `key = …`, borrowed, on its way to its breaker:
/// `KeyProbe::new(&value).__breaker_lookup(&STATIC)`. Each level below holds the next and
/// dereferences to it, and method lookup walks `Deref`, taking the first level whose bounds
/// the key's type meets, so one expansion serves every kind of key with nothing imported:
///
/// 1. [`KeyProbe`]: the built-in keys, references to them, `&str` and pairs, looked up in
///    their borrowed form (`&str` in a map of `String`s) without allocating;
/// 2. [`OwnKey`], [`OwnKeyRef`]: a user's own `BreakerKey + Clone` type, or a reference to
///    one, looked up as itself;
/// 3. [`NotAKey`]: anything else, an error on the expression saying what keys are.
pub struct KeyProbe<'a, Q: ?Sized>(OwnKey<'a, Q>);

/// Level 2 of [`KeyProbe`]: a key type of the user's, by value.
pub struct OwnKey<'a, Q: ?Sized>(OwnKeyRef<'a, Q>);

/// Level 2 of [`KeyProbe`]: a key type of the user's, by reference.
pub struct OwnKeyRef<'a, Q: ?Sized>(NotAKey<'a, Q>);

/// Level 3 of [`KeyProbe`]: not a key.
pub struct NotAKey<'a, Q: ?Sized>(&'a Q);

impl<'a, Q: ?Sized> KeyProbe<'a, Q> {
    /// The probe of `key`, at its first level.
    #[inline(always)]
    pub fn new(key: &'a Q) -> Self {
        KeyProbe(OwnKey(OwnKeyRef(NotAKey(key))))
    }

    fn key(&self) -> &'a Q {
        self.0 .0 .0 .0
    }
}

impl<'a, Q: ?Sized> core::ops::Deref for KeyProbe<'a, Q> {
    type Target = OwnKey<'a, Q>;
    fn deref(&self) -> &OwnKey<'a, Q> {
        &self.0
    }
}

impl<'a, Q: ?Sized> core::ops::Deref for OwnKey<'a, Q> {
    type Target = OwnKeyRef<'a, Q>;
    fn deref(&self) -> &OwnKeyRef<'a, Q> {
        &self.0
    }
}

impl<'a, Q: ?Sized> core::ops::Deref for OwnKeyRef<'a, Q> {
    type Target = NotAKey<'a, Q>;
    fn deref(&self) -> &NotAKey<'a, Q> {
        &self.0
    }
}

impl<Q: KeyArg + ?Sized> KeyProbe<'_, Q> {
    /// The breaker of this key.
    pub fn __breaker_lookup(&self, keyed: &KeyedStatic) -> Breaker {
        keyed.breaker::<Q::Key, Q::Lookup>(&self.key().lookup())
    }
}

impl<K: BreakerKey + Clone> OwnKey<'_, K> {
    /// The breaker of this key.
    pub fn __breaker_lookup(&self, keyed: &KeyedStatic) -> Breaker {
        keyed.breaker::<K, K>(self.0 .0 .0)
    }
}

impl<K: BreakerKey + Clone> OwnKeyRef<'_, &K> {
    /// The breaker of this key.
    pub fn __breaker_lookup(&self, keyed: &KeyedStatic) -> Breaker {
        keyed.breaker::<K, K>(*self.0 .0)
    }
}

impl<Q: ?Sized> NotAKey<'_, Q> {
    /// Never runs: `Key` has no implementations. Its bound is on the method, not the
    /// `impl`, so this level is always found, then the bound checked and reported with
    /// [`Key`]'s message.
    pub fn __breaker_lookup(&self, _: &KeyedStatic) -> Breaker
    where
        Q: Key,
    {
        unreachable!("`Key` has no implementations")
    }
}

/// The breaker of this call's key, for a keyed `async fn`: `find` is the lookup
/// (`KeyProbe::new(&key).__breaker_lookup(…)`) in a closure, so the probe and the borrows it
/// makes end inside it, and the function's future, which then owns the breaker it found,
/// keeps none of them across its `.await` (a temporary lives to the end of its statement).
#[inline(always)]
pub fn breaker_of_key(find: impl FnOnce() -> Breaker) -> Breaker {
    find()
}

/// What `key = …` may give; implemented by nothing, so that a value that is not a key
/// is reported with this message (see [`KeyProbe`]).
#[diagnostic::on_unimplemented(
    message = "`key = …` gives a `{Self}`, which cannot key a circuit breaker",
    label = "one breaker per value of this expression: its type must be a key",
    note = "keys are `&str`, `String`, integers, `IpAddr`, `SocketAddr`, `http::uri::Authority` (feature `http`), pairs of those, and references to them; for a type of your own implement `breaker::BreakerKey` and `Clone` (the docs of `BreakerKey` show how), or key by one of its fields"
)]
pub trait Key {}

/// The keyed breakers of one function with `key = …`. A static cannot name the key's
/// type, so the `KeyedBreaker` is made on the first call and kept type-erased; each call
/// finds it again with one `TypeId` comparison.
pub struct KeyedStatic {
    init: fn() -> (&'static str, Config),
    /// `fleet = true`: each key's breaker joins the installed fleet as it is made.
    fleet: bool,
    /// How the map is named: `init`'s name as given, or a default one.
    naming: Naming,
    /// `type_name::<Self>` of a method's map, given by [`of`](Self::of) before the
    /// first lookup.
    self_type: OnceLock<fn() -> &'static str>,
    map: OnceLock<Box<dyn Any + Send + Sync>>,
    /// Maps of other key types: a generic function's key type may change with its
    /// instantiation, and every instantiation shares the static. Rare, so locked.
    others: Mutex<Vec<Box<dyn Any + Send + Sync>>>,
}

impl KeyedStatic {
    /// `init` gives the name and the configuration, on the first call.
    pub const fn new(init: fn() -> (&'static str, Config)) -> Self {
        KeyedStatic {
            init,
            fleet: false,
            naming: Naming::Given,
            self_type: OnceLock::new(),
            map: OnceLock::new(),
            others: Mutex::new(Vec::new()),
        }
    }

    /// [`new`](Self::new), with `fleet = true`: every key's breaker joins the fleet
    /// installed with `breaker::fleet::install` when it is made.
    pub const fn in_fleet(init: fn() -> (&'static str, Config)) -> Self {
        KeyedStatic {
            init,
            fleet: true,
            naming: Naming::Given,
            self_type: OnceLock::new(),
            map: OnceLock::new(),
            others: Mutex::new(Vec::new()),
        }
    }

    /// `init`'s name is the function's default name (`{module}::{fn}`): a second
    /// function whose map is made under it logs one `WARN`.
    pub const fn default_name(mut self) -> Self {
        self.naming = Naming::Default;
        self
    }

    /// `init`'s name is the module of `method`, a method with a `self` receiver: the
    /// map is named `{module}::{Self}::{method}` by default, `Self` given by
    /// [`of`](Self::of).
    pub const fn method(mut self, method: &'static str) -> Self {
        self.naming = Naming::Method(method);
        self
    }

    /// This static, told the `Self` of the method it serves (the first call's, as the
    /// map is made once).
    #[inline]
    pub fn of<S: ?Sized>(&self) -> &Self {
        self.self_type.get_or_init(|| std::any::type_name::<S>);
        self
    }

    /// The breaker of the key stored as `K` and looked up as `lookup`, made if it has
    /// none. Panics with the `ConfigError` message if the configuration is invalid, as
    /// `KeyedBreaker::new` does.
    pub fn breaker<K, L>(&self, lookup: &L) -> Breaker
    where
        K: BreakerKey + Borrow<L>,
        L: ?Sized + Hash + Eq + ToOwned<Owned = K>,
    {
        let map = self.map.get_or_init(|| {
            let map = self.make::<K>();
            // Noted once per function: another key type of a generic function makes
            // another map of the same function under the same name (`other`).
            if !matches!(self.naming, Naming::Given) {
                super::names::note_default_name(map.name());
            }
            Box::new(map)
        });
        match map.downcast_ref::<KeyedBreaker<K>>() {
            Some(map) => map.breaker(lookup),
            None => self.other::<K>().breaker(lookup),
        }
    }

    fn make<K: BreakerKey>(&self) -> KeyedBreaker<K> {
        let (name, config) = (self.init)();
        let map = match (self.naming, self.self_type.get()) {
            (Naming::Method(method), Some(self_type)) => {
                KeyedBreaker::new(super::names::method_name(name, self_type(), method), config)
            }
            _ => KeyedBreaker::new(name, config),
        };
        if self.fleet {
            map.on_new(crate::fleet::join_installed);
        }
        map
    }

    #[cold]
    fn other<K: BreakerKey>(&self) -> KeyedBreaker<K> {
        let mut others = crate::sync::lock(&self.others);
        let found = others
            .iter()
            .find_map(|m| m.downcast_ref::<KeyedBreaker<K>>());
        match found {
            Some(map) => map.clone(),
            None => {
                let map = self.make::<K>();
                others.push(Box::new(map.clone()));
                map
            }
        }
    }
}

/// The lookups of the common key types, compiled here, once, rather than in each crate that
/// keys by them. A debug build links to the generic code its dependencies compiled
/// (`-Z share-generics`, on below `opt-level = 2`), so a crate keyed by `&str` uses this
/// `KeyedBreaker<String>` (papaya's map, eviction, the sweep, outlier detection: 54 000
/// lines of IR, 0.25 s of the crate's debug build) instead of compiling its own. A key type
/// not listed compiles its copy once per crate (`benches/RESULTS.md`, *Issue 46, session
/// seven*); an optimised build compiles its own, to inline it.
#[doc(hidden)]
pub static COMMON_KEYS: CommonKeys = (
    KeyedStatic::breaker::<String, str>,
    KeyedStatic::breaker::<u64, u64>,
    KeyedStatic::breaker::<u32, u32>,
    KeyedStatic::breaker::<i64, i64>,
    KeyedStatic::breaker::<std::net::IpAddr, std::net::IpAddr>,
    KeyedStatic::breaker::<std::net::SocketAddr, std::net::SocketAddr>,
);

/// The type of [`COMMON_KEYS`]: a lookup by each common key type.
#[doc(hidden)]
pub type CommonKeys = (
    fn(&KeyedStatic, &str) -> Breaker,
    fn(&KeyedStatic, &u64) -> Breaker,
    fn(&KeyedStatic, &u32) -> Breaker,
    fn(&KeyedStatic, &i64) -> Breaker,
    fn(&KeyedStatic, &std::net::IpAddr) -> Breaker,
    fn(&KeyedStatic, &std::net::SocketAddr) -> Breaker,
);

/// How a [`KeyedStatic`]'s map is named.
#[derive(Clone, Copy)]
enum Naming {
    /// `name = "…"`: as given.
    Given,
    /// The function's default name, `{module}::{fn}`.
    Default,
    /// A method's default name, `{module}::{Self}::{method}`.
    Method(&'static str),
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};

    use super::*;

    fn init() -> (&'static str, Config) {
        ("glue::keyed::common", Config::default())
    }

    /// The shared lookups are the attribute's own: each finds its key's breaker, made once
    /// and found again, under the key's name.
    #[test]
    fn the_common_keys_lookups_find_each_keys_breaker() {
        let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let addr = SocketAddr::new(ip, 443);
        let names = [
            (COMMON_KEYS.0)(&KeyedStatic::new(init), "api.example"),
            (COMMON_KEYS.1)(&KeyedStatic::new(init), &7),
            (COMMON_KEYS.2)(&KeyedStatic::new(init), &8),
            (COMMON_KEYS.3)(&KeyedStatic::new(init), &-9),
            (COMMON_KEYS.4)(&KeyedStatic::new(init), &ip),
            (COMMON_KEYS.5)(&KeyedStatic::new(init), &addr),
        ]
        .map(|b| b.name().to_owned());
        assert_eq!(
            names,
            [
                "glue::keyed::common[api.example]",
                "glue::keyed::common[7]",
                "glue::keyed::common[8]",
                "glue::keyed::common[-9]",
                "glue::keyed::common[127.0.0.1]",
                "glue::keyed::common[127.0.0.1:443]",
            ]
        );
        let hosts = KeyedStatic::new(init);
        let first = (COMMON_KEYS.0)(&hosts, "api.example");
        first.handle().force_open();
        let again = (COMMON_KEYS.0)(&hosts, "api.example");
        assert_eq!(again.state(), crate::State::ForcedOpen);
    }
}
