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
