//! Every breaker of the process, by name: for dashboards, health endpoints and manual
//! control.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use crate::{
    breaker::{Breaker, Handle, Shared},
    Config, State, Stats,
};

/// One breaker, as [`Registry::snapshot`] reports it.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Snapshot {
    /// The breaker's name.
    pub name: String,
    /// Its state.
    pub state: State,
    /// Its counts since creation or the last reset.
    pub stats: Stats,
    /// Percent failed in the current window, 0 when empty. A breaker that judges only
    /// consecutive failures keeps no window: there, the calls since it last closed (or was
    /// created or reset) stand for the window.
    pub failure_rate: f64,
    /// How long it stays open; when half-open with every probe slot taken, until the
    /// earliest lease ends; `None` otherwise and when forced open.
    #[cfg_attr(
        feature = "serde",
        serde(
            rename = "retry_in_ms",
            with = "serde_with::As::<Option<serde_with::DurationMilliSeconds<u64>>>"
        )
    )]
    pub retry_in: Option<Duration>,
}

/// The process-wide list of breakers; see [`registry()`].
pub struct Registry {
    /// Every breaker created so far, for the life of the process, as DESIGN.md has it: a
    /// breaker is meant to live as long as the program (the attribute's are statics), so a
    /// `Breaker` dropped by its owner stays listed, and its handle keeps working.
    breakers: Mutex<Vec<Arc<Shared>>>,
}

/// The process-wide registry: every breaker created so far, in order of creation.
///
/// ```
/// use breaker_runtime::{registry, Breaker, Config};
///
/// let _b = Breaker::new("docs::registry", Config::default());
/// let all = registry().snapshot();
/// assert!(all.iter().any(|s| s.name == "docs::registry"));
/// ```
pub fn registry() -> &'static Registry {
    static REGISTRY: Registry = Registry {
        breakers: Mutex::new(Vec::new()),
    };
    &REGISTRY
}

impl Registry {
    fn all(&self) -> Vec<Arc<Shared>> {
        self.breakers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// A handle to the first breaker created with this name.
    pub fn get(&self, name: &str) -> Option<Handle> {
        self.all()
            .into_iter()
            .find(|s| s.core.name == name)
            .map(|shared| Handle { shared })
    }

    /// Every breaker, in order of creation.
    pub fn snapshot(&self) -> Vec<Snapshot> {
        self.all()
            .into_iter()
            .map(|shared| Handle { shared }.snapshot())
            .collect()
    }

    pub(crate) fn list(&self, breaker: &Breaker) {
        let mut list = self.breakers.lock().unwrap_or_else(PoisonError::into_inner);
        list.push(breaker.shared.clone());
    }

    /// The breaker named `name`, created with `config` if there is none yet. A breaker that
    /// exists with another policy is kept, with one WARN naming it.
    ///
    /// # Panics
    ///
    /// If it has to create the breaker and `config` is invalid, as [`Breaker::new`] does.
    pub fn get_or_create(&self, name: &'static str, config: Config) -> Breaker {
        let mut list = self.breakers.lock().unwrap_or_else(PoisonError::into_inner);
        let existing = list.iter().find(|s| s.core.name == name).cloned();
        if let Some(shared) = existing {
            if !shared.config.same_policy(&config) {
                tracing::warn!(
                    target: "breaker",
                    breaker = name,
                    "circuit breaker `{name}` already exists with another configuration; \
                     keeping the existing one (give the functions different `name`s to \
                     separate them)"
                );
            }
            return Breaker { shared };
        }
        let breaker = match Breaker::unlisted(name, config) {
            Ok(b) => b,
            Err(e) => {
                drop(list);
                panic!("{e}")
            }
        };
        list.push(breaker.shared.clone());
        breaker
    }
}

/// A `'static` copy of `name`, leaked once per distinct name, so errors carry the name
/// without allocating and re-creating a breaker leaks nothing more.
pub(crate) fn intern(name: &str) -> &'static str {
    static NAMES: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut names = NAMES.lock().unwrap_or_else(PoisonError::into_inner);
    let names = names.get_or_insert_with(HashSet::new);
    if let Some(existing) = names.get(name) {
        return existing;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(leaked);
    leaked
}
