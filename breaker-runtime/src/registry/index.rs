//! The index under the registry: a slab of weak entries and a map from name to slots, so
//! that listing a breaker, unlisting it and finding a name are O(1) (a name shared by `n`
//! live breakers costs `n` at a lookup and at an unlisting). A leaf: it knows breakers only
//! as `dyn Any`, so the breaker holds its [`Listing`] and the registry reads the index, and
//! neither module imports the other's user. A breaker is validated and built before it is
//! listed: the process-wide lock covers the index's bookkeeping alone.

use std::{
    any::Any,
    hash::BuildHasher,
    sync::{
        atomic::{AtomicU32, Ordering::Relaxed},
        Arc, LazyLock, Mutex, Weak,
    },
};

use hashbrown::{DefaultHashBuilder, HashTable};

use crate::{sync::lock, Name};

/// A listed thing, as the index keeps it: never kept alive by the index.
pub(crate) type Listed = Weak<dyn Any + Send + Sync>;

/// A breaker's place in the index, held by the breaker: dropping it unlists the breaker.
/// Made before the breaker is listed (the breaker is built outside the index's lock), and
/// given its slot when listed: a breaker that lost a race to be listed has none.
#[derive(Debug)]
pub(crate) struct Listing {
    /// [`UNLISTED`] until listed. Written once, under the index's lock, before the breaker
    /// is shared with anyone who could drop it.
    slot: AtomicU32,
}

/// The slot of a [`Listing`] not listed (yet, or ever).
const UNLISTED: u32 = u32::MAX;

impl Listing {
    /// A place to be given at [`Index::list`].
    pub(crate) fn pending() -> Listing {
        Listing {
            slot: AtomicU32::new(UNLISTED),
        }
    }

    /// Whether it was listed.
    pub(crate) fn is_listed(&self) -> bool {
        self.slot.load(Relaxed) != UNLISTED
    }
}

impl Drop for Listing {
    fn drop(&mut self) {
        let slot = *self.slot.get_mut();
        if slot != UNLISTED {
            index().unlist(slot);
        }
    }
}

/// The process-wide index.
pub(crate) fn index() -> &'static Index {
    static INDEX: LazyLock<Index> = LazyLock::new(|| Index(Mutex::new(Slab::default())));
    &INDEX
}

pub(crate) struct Index(Mutex<Slab>);

/// How many tables `by_name` is split into: a table grows by moving (and rehashing, which
/// reads every entry's name) all it holds at once, 26 to 41 ms at 114 688 breakers on one
/// thread (`examples/fleet_scale.rs 2 100000`); split, a growth moves a sixty-fourth.
const TABLES: usize = 64;

/// The table of a name's hash: bits 32 to 37, which a table of fewer than 2³² buckets does
/// not use for its bucket (the low bits) nor for its tag (the top 7).
fn table(hash: u64) -> usize {
    (hash >> 32) as usize % TABLES
}

struct Slab {
    entries: Vec<Option<Entry>>,
    /// Free places in `entries`, reused first.
    free: Vec<u32>,
    /// Slots by their entry's name, through the name's hash, in [`TABLES`] tables: 5 bytes a
    /// slot, where a map from name to slots would keep one more copy of each name's pointer.
    by_name: Box<[HashTable<u32>]>,
    /// foldhash, seeded per process (hashbrown's default): a name is hashed at each listing,
    /// unlisting and lookup, and SipHash was a sixth of dropping a breaker. Names carry keys
    /// from users' data, but not the hashes: with a random seed no one outside can aim
    /// names at one bucket.
    hasher: DefaultHashBuilder,
    /// The next entry's order of creation.
    next: u64,
    live: usize,
}

impl Default for Slab {
    fn default() -> Slab {
        Slab {
            entries: Vec::new(),
            free: Vec::new(),
            // Empty tables allocate nothing until their first slot.
            by_name: (0..TABLES).map(|_| HashTable::new()).collect(),
            hasher: DefaultHashBuilder::default(),
            next: 0,
            live: 0,
        }
    }
}

struct Entry {
    /// Order of creation.
    seq: u64,
    name: Name,
    listed: Listed,
}

/// An entry read out of the index, to upgrade after its lock is released (dropping the
/// last strong reference unlists, which takes the lock).
pub(crate) struct Found {
    pub(crate) seq: u64,
    pub(crate) listed: Listed,
}

impl Slab {
    /// The newest live entry of `name` that is a `T`. Upgrading and downcasting run under
    /// the lock; only breakers are listed, so a found entry is a `T` (were it not, dropping
    /// it here could unlist under the lock).
    fn newest<T: Any + Send + Sync>(&self, name: &Name) -> Option<Arc<T>> {
        let hash = self.hasher.hash_one(&**name);
        // Oldest first (in order of `seq`): the newest live one is taken.
        let mut same: Vec<&Entry> = self.by_name[table(hash)]
            .iter_hash(hash)
            .filter_map(|&s| self.entries[s as usize].as_ref())
            .filter(|e| e.name == *name)
            .collect();
        same.sort_unstable_by_key(|e| e.seq);
        same.iter()
            .rev()
            .find_map(|e| e.listed.upgrade()?.downcast::<T>().ok())
    }
}

impl Index {
    /// Lists `made` (built, and validated, before: nothing but the index's own bookkeeping
    /// runs under its lock) under `name`, giving `listing` (`made`'s own) its slot. With
    /// `find`, a live entry of that name (the newest) that is a `T` is returned instead, and
    /// `made` is not listed: under one lock, so two callers racing to create one name get
    /// one breaker. (Only breakers are listed, so a found entry is a `T`; were it not,
    /// dropping it here could unlist under the lock.)
    pub(crate) fn list<T: Any + Send + Sync>(
        &self,
        name: &Name,
        find: bool,
        made: &Arc<T>,
        listing: &Listing,
    ) -> Option<Arc<T>> {
        let mut slab = lock(&self.0);
        if find && let Some(found) = slab.newest(name) {
            return Some(found);
        }
        let slot = match slab.free.pop() {
            Some(slot) => slot,
            None => {
                slab.entries.push(None);
                u32::try_from(slab.entries.len() - 1).unwrap_or(u32::MAX)
            }
        };
        listing.slot.store(slot, Relaxed);
        let seq = slab.next;
        slab.next += 1;
        let listed: Listed = Arc::downgrade(made) as Listed;
        slab.entries[slot as usize] = Some(Entry {
            seq,
            name: name.clone(),
            listed,
        });
        slab.live += 1;
        let hash = slab.hasher.hash_one(&**name);
        let Slab {
            by_name,
            entries,
            hasher,
            ..
        } = &mut *slab;
        by_name[table(hash)].insert_unique(hash, slot, |&s| match &entries[s as usize] {
            Some(e) => hasher.hash_one(&*e.name),
            None => 0, // not reached: every slot in the table holds an entry
        });
        None
    }

    /// The newest live entry of `name` that is a `T`, if any.
    pub(crate) fn newest<T: Any + Send + Sync>(&self, name: &Name) -> Option<Arc<T>> {
        lock(&self.0).newest(name)
    }

    fn unlist(&self, slot: u32) {
        let mut guard = lock(&self.0);
        let slab = &mut *guard;
        let Some(entry) = slab.entries.get_mut(slot as usize).and_then(Option::take) else {
            return;
        };
        slab.live -= 1;
        slab.free.push(slot);
        let hash = slab.hasher.hash_one(&*entry.name);
        if let Ok(found) = slab.by_name[table(hash)].find_entry(hash, |&s| s == slot) {
            found.remove();
        }
        drop(guard);
        drop(entry); // its name and weak reference, after the lock
    }

    /// The entries of `name` (all entries with `None`), oldest first. Holds the lock only to
    /// copy the entries (a weak count each); sorts them after, so a walk of 100 000
    /// breakers keeps registrations on other threads waiting for the copy alone.
    pub(crate) fn find(&self, name: Option<&str>) -> Vec<Found> {
        let slab = lock(&self.0);
        let mut found: Vec<Found> = match name {
            Some(name) => {
                let hash = slab.hasher.hash_one(name);
                slab.by_name[table(hash)]
                    .iter_hash(hash)
                    .filter_map(|&s| slab.entries[s as usize].as_ref())
                    .filter(|e| *e.name == *name)
                    .map(|e| Found {
                        seq: e.seq,
                        listed: e.listed.clone(),
                    })
                    .collect()
            }
            None => slab
                .entries
                .iter()
                .flatten()
                .map(|e| Found {
                    seq: e.seq,
                    listed: e.listed.clone(),
                })
                .collect(),
        };
        drop(slab);
        found.sort_unstable_by_key(|f| f.seq);
        found
    }

    /// How many entries are listed.
    pub(crate) fn live(&self) -> usize {
        lock(&self.0).live
    }
}
