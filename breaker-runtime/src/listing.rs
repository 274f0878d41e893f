//! The index under the registry: a slab of weak entries and a map from name to slots, so
//! that listing a breaker, unlisting it and finding a name are O(1) (a name shared by `n`
//! live breakers costs `n` at a lookup). A leaf: it knows breakers only as `dyn Any`, so the
//! breaker holds its [`Listing`] and the registry reads the index, and neither module
//! imports the other's user.

use std::{
    any::Any,
    collections::HashMap,
    sync::{Arc, LazyLock, Mutex, MutexGuard, PoisonError, Weak},
};

use crate::Name;

/// A listed thing, as the index keeps it: never kept alive by the index.
pub(crate) type Listed = Weak<dyn Any + Send + Sync>;

/// A breaker's place in the index, held by the breaker: dropping it unlists the breaker.
#[derive(Debug)]
pub(crate) struct Listing {
    slot: u32,
}

impl Drop for Listing {
    fn drop(&mut self) {
        index().unlist(self.slot);
    }
}

/// The process-wide index.
pub(crate) fn index() -> &'static Index {
    static INDEX: LazyLock<Index> = LazyLock::new(|| Index(Mutex::new(Slab::default())));
    &INDEX
}

pub(crate) struct Index(Mutex<Slab>);

#[derive(Default)]
struct Slab {
    entries: Vec<Option<Entry>>,
    /// Free places in `entries`, reused first.
    free: Vec<u32>,
    by_name: HashMap<Name, Slots>,
    /// The next entry's order of creation.
    next: u64,
    live: usize,
}

struct Entry {
    /// Order of creation.
    seq: u64,
    name: Name,
    listed: Listed,
}

/// The slots of one name, oldest first: almost always one.
enum Slots {
    One(u32),
    Many(Vec<u32>),
}

impl Slots {
    fn iter(&self) -> impl DoubleEndedIterator<Item = u32> + '_ {
        let (one, many) = match self {
            Slots::One(s) => (Some(*s), &[][..]),
            Slots::Many(v) => (None, &v[..]),
        };
        one.into_iter().chain(many.iter().copied())
    }
}

/// An entry read out of the index, to upgrade after its lock is released (dropping the
/// last strong reference unlists, which takes the lock).
pub(crate) struct Found {
    pub(crate) seq: u64,
    pub(crate) listed: Listed,
}

impl Index {
    fn lock(&self) -> MutexGuard<'_, Slab> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Lists a new `T` under `name`: `prepare` runs first (it may fail, say on an invalid
    /// configuration), then its result makes the `T` with its [`Listing`]. With `find`, a
    /// live entry of that name (the newest) that is a `T` is returned instead, with `true`.
    /// Under one lock, so two callers racing to create one name get one breaker: neither
    /// closure may touch the index. (Only breakers are listed, so a found entry is a `T`;
    /// were it not, dropping it here could unlist under the lock.)
    pub(crate) fn list<T: Any + Send + Sync, P, E>(
        &self,
        name: &Name,
        find: bool,
        prepare: impl FnOnce() -> Result<P, E>,
        make: impl FnOnce(P, Listing) -> T,
    ) -> Result<(Arc<T>, bool), E> {
        let mut slab = self.lock();
        if find {
            if let Some(slots) = slab.by_name.get(&**name) {
                let existing = slots.iter().rev().find_map(|s| {
                    let e = slab.entries[s as usize].as_ref()?;
                    e.listed.upgrade()?.downcast::<T>().ok()
                });
                if let Some(found) = existing {
                    return Ok((found, true));
                }
            }
        }
        let prepared = prepare()?;
        let slot = match slab.free.pop() {
            Some(slot) => slot,
            None => {
                slab.entries.push(None);
                u32::try_from(slab.entries.len() - 1).unwrap_or(u32::MAX)
            }
        };
        let made = Arc::new(make(prepared, Listing { slot }));
        let seq = slab.next;
        slab.next += 1;
        let listed: Listed = Arc::downgrade(&made) as Listed;
        slab.entries[slot as usize] = Some(Entry {
            seq,
            name: name.clone(),
            listed,
        });
        slab.live += 1;
        match slab.by_name.get_mut(&**name) {
            None => {
                slab.by_name.insert(name.clone(), Slots::One(slot));
            }
            Some(slots) => match slots {
                Slots::One(s) => *slots = Slots::Many(vec![*s, slot]),
                Slots::Many(v) => v.push(slot),
            },
        }
        Ok((made, false))
    }

    fn unlist(&self, slot: u32) {
        let mut guard = self.lock();
        let slab = &mut *guard;
        let Some(entry) = slab.entries.get_mut(slot as usize).and_then(Option::take) else {
            return;
        };
        slab.live -= 1;
        slab.free.push(slot);
        if let Some(slots) = slab.by_name.get_mut(&*entry.name) {
            let gone = match slots {
                Slots::One(_) => true,
                Slots::Many(v) => {
                    // Breakers sharing one name: a few, in practice.
                    v.retain(|s| *s != slot);
                    v.is_empty()
                }
            };
            if let Slots::Many(v) = slots {
                if let [only] = v[..] {
                    *slots = Slots::One(only);
                }
            }
            if gone {
                slab.by_name.remove(&*entry.name);
            }
        }
        drop(guard);
        drop(entry); // its name and weak reference, after the lock
    }

    /// The entries of `name` (all entries with `None`), oldest first.
    pub(crate) fn find(&self, name: Option<&str>) -> Vec<Found> {
        let slab = self.lock();
        let found = |s: u32| {
            slab.entries[s as usize].as_ref().map(|e| Found {
                seq: e.seq,
                listed: e.listed.clone(),
            })
        };
        match name {
            Some(name) => match slab.by_name.get(name) {
                Some(slots) => slots.iter().filter_map(found).collect(),
                None => Vec::new(),
            },
            None => {
                let mut all: Vec<Found> = slab
                    .entries
                    .iter()
                    .flatten()
                    .map(|e| Found {
                        seq: e.seq,
                        listed: e.listed.clone(),
                    })
                    .collect();
                all.sort_unstable_by_key(|f| f.seq);
                all
            }
        }
    }

    /// How many entries are listed.
    pub(crate) fn live(&self) -> usize {
        self.lock().live
    }
}
