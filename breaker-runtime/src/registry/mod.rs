//! Every breaker of the process, by name: for dashboards, health endpoints and manual
//! control.
//!
//! | module | what it holds |
//! | --- | --- |
//! | this one | [`Registry`], [`registry()`]: finding, listing and snapshotting the live breakers |
//! | `index` | the index under it: a slab of weak entries and slots by name, O(1) to list, unlist and find |
//! | `departures` | what a metrics publisher needs across a breaker's end: identities, the last counts of the breakers that went |

pub(crate) mod departures;
pub(crate) mod index;

use std::sync::Arc;

use crate::{handle::Handle, shared::Shared, snapshot::Snapshot};

/// The process-wide list of live breakers; see [`registry()`].
///
/// Entries are weak: the registry never keeps a breaker alive; a breaker leaves it when its
/// last clone and handle are dropped. Listing, unlisting and a lookup by name are O(1) (an
/// index of slots by name under one short lock); a snapshot walks every entry, holding one
/// breaker at a time.
pub struct Registry {
    _private: (),
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("live", &self.len())
            .finish()
    }
}

/// The process-wide registry: every live breaker, in order of creation.
///
/// ```
/// use breaker::{registry, Breaker, Config};
///
/// let b = Breaker::new("docs::registry", Config::default());
/// assert!(registry().snapshot().iter().any(|s| s.name == "docs::registry"));
/// drop(b); // the last clone: it leaves the registry
/// assert!(registry().get("docs::registry").is_none());
/// ```
pub fn registry() -> &'static Registry {
    static REGISTRY: Registry = Registry { _private: () };
    &REGISTRY
}

/// A listed entry as a breaker (only breakers are listed).
fn shared(listed: &index::Listed) -> Option<Arc<Shared>> {
    listed.upgrade()?.downcast::<Shared>().ok()
}

impl Registry {
    /// A handle to the most recently created live breaker with this name (a `&str`, or a
    /// transition's [`Name`](crate::Name)).
    ///
    /// ```
    /// use breaker::{circuit_breaker, registry, BreakerError, State};
    ///
    /// #[circuit_breaker(name = "docs::registry_get")]
    /// fn lookup(id: u32) -> Result<u32, BreakerError> {
    ///     Ok(id)
    /// }
    ///
    /// lookup(1).unwrap(); // an attribute's breaker is made on the first call
    /// let handle = registry().get("docs::registry_get").unwrap();
    /// handle.force_open(); // how an operator reaches an annotated function's breaker
    /// assert!(lookup(1).is_err());
    /// assert_eq!(handle.state(), State::ForcedOpen);
    /// assert!(registry().get("docs::no_such_breaker").is_none());
    /// ```
    pub fn get(&self, name: impl AsRef<str>) -> Option<Handle> {
        index::index()
            .find(Some(name.as_ref()))
            .iter()
            .rev()
            .find_map(|f| shared(&f.listed))
            .map(|shared| Handle { shared })
    }

    /// Every live breaker, in order of creation. Reading each state moves an open breaker
    /// whose cool-off ended to half-open, as `Handle::state` does. Holds one breaker at a
    /// time.
    ///
    /// ```
    /// use breaker::{registry, Breaker, Config, State};
    ///
    /// let _b = Breaker::new("docs::registry_snapshot", Config::default());
    /// let all = registry().snapshot();
    /// let mine = all.iter().find(|s| &*s.name == "docs::registry_snapshot").unwrap();
    /// assert_eq!(mine.state, State::Closed);
    /// ```
    pub fn snapshot(&self) -> Vec<Snapshot> {
        index::index()
            .find(None)
            .iter()
            .filter_map(|f| shared(&f.listed)) // lazily: each dropped before the next
            .map(|shared| Handle { shared }.snapshot())
            .collect()
    }

    /// Handles to every live breaker, in order of creation.
    pub fn handles(&self) -> Vec<Handle> {
        index::index()
            .find(None)
            .iter()
            .filter_map(|f| shared(&f.listed))
            .map(|shared| Handle { shared })
            .collect()
    }

    /// How many breakers are live.
    pub fn len(&self) -> usize {
        index::index().live()
    }

    /// Whether no breaker is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(all(test, not(breaker_loom)))]
mod tests {
    use super::*;
    use crate::{Breaker, Config};

    /// A lookup by name reads that name's slots only: it neither scans nor holds breakers of
    /// other names.
    #[test]
    fn a_lookup_by_name_takes_only_that_names_breakers() {
        let a = Breaker::new("registry::tests::a", Config::default());
        let _b = Breaker::new("registry::tests::b", Config::default());
        let found = index::index().find(Some("registry::tests::a"));
        assert_eq!(found.len(), 1, "only a's entry");
        assert!(Arc::ptr_eq(&shared(&found[0].listed).unwrap(), &a.shared));
    }

    /// Of two live breakers with one name the newest is found; when it goes, the older one.
    #[test]
    fn the_newest_of_a_name_is_found_and_the_older_one_after_it() {
        let old = Breaker::new("registry::tests::twice", Config::default());
        let new = Breaker::new("registry::tests::twice", Config::default());
        let found = registry().get("registry::tests::twice").unwrap();
        assert!(found.same_breaker(&new.handle()));
        drop((found, new));
        let found = registry().get("registry::tests::twice").unwrap();
        assert!(found.same_breaker(&old.handle()));
        drop((found, old));
        assert!(registry().get("registry::tests::twice").is_none());
    }
}
