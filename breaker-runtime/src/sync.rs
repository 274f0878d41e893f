//! The atomics and the lock the engine is built on, behind one facade so the same code runs
//! under the `loom` model checker (`RUSTFLAGS="--cfg breaker_loom"`), as tokio does.

#[cfg(breaker_loom)]
pub(crate) use loom::sync::{
    atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering},
    Mutex, MutexGuard,
};

#[cfg(not(breaker_loom))]
pub(crate) use std::sync::{
    atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering},
    Mutex, MutexGuard,
};

/// Locks `mutex`, ignoring poison: no user code ever runs under the engine's lock, so a
/// poisoned lock can only come from a bug of ours, and the data it guards stays consistent
/// at every await-free step anyway. The one way the runtime takes a lock, whether the
/// engine's [`Mutex`] (loom's under the model checker) or a `std` one (the process-wide
/// registry and departures, the keyed map's shards, which loom does not model).
#[inline]
pub(crate) fn lock<M: Lock + ?Sized>(mutex: &M) -> M::Guard<'_> {
    mutex.lock_ignoring_poison()
}

/// A mutex [`lock`] can take.
pub(crate) trait Lock {
    /// What holding the lock gives.
    type Guard<'a>
    where
        Self: 'a;
    /// Locks, a poisoned lock being still the data.
    fn lock_ignoring_poison(&self) -> Self::Guard<'_>;
}

impl<T: ?Sized> Lock for std::sync::Mutex<T> {
    type Guard<'a>
        = std::sync::MutexGuard<'a, T>
    where
        T: 'a;
    #[inline]
    fn lock_ignoring_poison(&self) -> Self::Guard<'_> {
        self.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(breaker_loom)]
impl<T> Lock for loom::sync::Mutex<T> {
    type Guard<'a>
        = loom::sync::MutexGuard<'a, T>
    where
        T: 'a;
    fn lock_ignoring_poison(&self) -> Self::Guard<'_> {
        match self.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}
