//! The breaker of an annotated function: the static that holds it ([`Lazy`]), and how it is
//! made (`name`, `config = …`, `fleet = true`).

use crate::{Breaker, Config, Name};

/// The static of an annotated function: made on first use by `init`. Unlike
/// `once_cell`'s or std's `Lazy`, a panicking `init` (a `config = …` whose `ConfigError`
/// `Breaker::new` reports) does not poison it into "previously poisoned": the cell stays
/// empty, so every later use runs `init` again and panics with the same message, and
/// every call keeps saying what is wrong. Once made, a use is `OnceLock::get`'s one load.
pub struct Lazy<T> {
    cell: std::sync::OnceLock<T>,
    init: fn() -> T,
}

impl<T> Lazy<T> {
    /// A static made by `init` on first use.
    pub const fn new(init: fn() -> T) -> Self {
        Lazy {
            cell: std::sync::OnceLock::new(),
            init,
        }
    }
}

impl<T> core::ops::Deref for Lazy<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        self.cell.get_or_init(self.init)
    }
}

/// The breaker of one annotated function. `shared`: the function gave an explicit
/// `name`, and functions that give the same name share one breaker. Otherwise `name` is
/// the function's default name, and a second function made under it logs one `WARN`.
///
/// Panics with the `ConfigError` message if `config` (from `config = …`) is invalid, as
/// `Breaker::new` does.
pub fn breaker(name: Name, shared: bool, config: Config) -> Breaker {
    if shared {
        Breaker::get_or_create(name, config)
    } else {
        super::names::default_breaker(name, config)
    }
}

/// `fleet = true`: joins the breaker, as it is created, to the fleet installed with
/// `breaker::fleet::install` (without one, or without feature `redis`, it logs one `WARN`
/// and stays local).
pub fn join_fleet(breaker: Breaker) -> Breaker {
    crate::fleet::join_installed(&breaker);
    breaker
}

/// The `config = …` expression, typed here so a wrong type is reported on it.
pub fn config(config: Config) -> Config {
    config
}
