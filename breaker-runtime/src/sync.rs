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
/// at every await-free step anyway.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    match mutex.lock() {
        Ok(guard) => guard,
        Err(poisoned) => poisoned.into_inner(),
    }
}
