//! Every breaker of the process, by name: for dashboards, health endpoints and manual
//! control.

use std::sync::{
    atomic::{AtomicU64, Ordering},
    Arc, Mutex, MutexGuard, PoisonError, Weak,
};

use crate::{call::Shared, handle::Handle, snapshot::Snapshot, Name};

/// The process-wide list of live breakers; see [`registry()`].
pub struct Registry {
    /// Live breakers in order of creation. Entries are weak: the registry never keeps a
    /// breaker alive; a breaker leaves the list when its last clone and handle are dropped
    /// (`Shared`'s `Drop` removes its entry by id).
    ///
    /// A lookup by name upgrades only the entries of that name, and a snapshot holds one
    /// breaker at a time: a keyed breaker takes "held by nobody else" as "nothing in flight"
    /// when it picks what to evict, and a scan that held every breaker at once would make
    /// them all look busy to it (evicting breakers with state, a WARN per scrape).
    breakers: Mutex<Vec<Entry>>,
    next_id: AtomicU64,
}

struct Entry {
    id: u64,
    name: Name,
    shared: Weak<Shared>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("live", &self.lock().len())
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
    static REGISTRY: Registry = Registry {
        breakers: Mutex::new(Vec::new()),
        next_id: AtomicU64::new(1),
    };
    &REGISTRY
}

impl Registry {
    fn lock(&self) -> MutexGuard<'_, Vec<Entry>> {
        self.breakers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Weak references to the live breakers, in order of creation; with `name`, only those
    /// of that name. Upgraded by the caller after the lock: dropping the last strong one
    /// runs `Shared::drop`, which takes the lock to unlist itself.
    fn weak(&self, name: Option<&str>) -> Vec<Weak<Shared>> {
        self.lock()
            .iter()
            .filter(|e| name.is_none_or(|n| *e.name == *n))
            .map(|e| e.shared.clone())
            .collect()
    }

    /// A handle to the most recently created live breaker with this name (a `&str`, or a
    /// transition's [`Name`](crate::Name)).
    pub fn get(&self, name: impl AsRef<str>) -> Option<Handle> {
        self.weak(Some(name.as_ref()))
            .iter()
            .rev()
            .find_map(Weak::upgrade)
            .map(|shared| Handle { shared })
    }

    /// Every live breaker, in order of creation. Reading each state moves an open breaker
    /// whose cool-off ended to half-open, as `Handle::state` does. Holds one breaker at a
    /// time.
    pub fn snapshot(&self) -> Vec<Snapshot> {
        self.weak(None)
            .iter()
            .filter_map(Weak::upgrade) // lazily: each dropped before the next is upgraded
            .map(|shared| Handle { shared }.snapshot())
            .collect()
    }

    /// Handles to every live breaker, in order of creation.
    pub fn handles(&self) -> Vec<Handle> {
        self.weak(None)
            .iter()
            .filter_map(Weak::upgrade)
            .map(|shared| Handle { shared })
            .collect()
    }

    /// How many breakers are live.
    pub fn len(&self) -> usize {
        self.lock()
            .iter()
            .filter(|e| e.shared.strong_count() > 0)
            .count()
    }

    /// Whether no breaker is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn list(&self, shared: &Arc<Shared>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        shared.listed.store(id, Ordering::Relaxed);
        let weak = Arc::downgrade(shared);
        let name = shared.core.name.clone();
        self.lock().push(Entry {
            id,
            name,
            shared: weak,
        });
    }

    pub(crate) fn unlist(&self, id: u64) {
        self.lock().retain(|e| e.id != id);
    }

    /// The newest live breaker named `name`, or the one `make` creates, listed under the
    /// same lock, so two functions racing to create a shared name get one breaker. `true`
    /// when it existed.
    pub(crate) fn find_or_list<E>(
        &self,
        name: &str,
        make: impl FnOnce() -> Result<Arc<Shared>, E>,
    ) -> Result<(Arc<Shared>, bool), E> {
        let mut list = self.lock();
        let existing = list
            .iter()
            .rev()
            .filter(|e| *e.name == *name)
            .find_map(|e| e.shared.upgrade());
        if let Some(shared) = existing {
            return Ok((shared, true));
        }
        let shared = make()?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        shared.listed.store(id, Ordering::Relaxed);
        list.push(Entry {
            id,
            name: shared.core.name.clone(),
            shared: Arc::downgrade(&shared),
        });
        Ok((shared, false))
    }
}

#[cfg(all(test, not(breaker_loom)))]
mod tests {
    use super::*;
    use crate::{Breaker, Config};

    /// A keyed breaker reads "held by nobody but the map" as "nothing in flight" when it picks
    /// what to evict, so a lookup must not hold breakers of other names, even for an instant:
    /// it takes weak references to that name's entries only.
    #[test]
    fn a_lookup_by_name_takes_only_that_names_breakers() {
        let a = Breaker::new("registry::tests::a", Config::default());
        let _b = Breaker::new("registry::tests::b", Config::default());
        let found = registry().weak(Some("registry::tests::a"));
        assert_eq!(found.len(), 1, "only a's entry");
        assert!(Weak::ptr_eq(&found[0], &Arc::downgrade(&a.shared)));
    }
}
