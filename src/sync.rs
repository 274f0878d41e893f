//! The crate's one lock helper.

use std::sync::{Mutex, MutexGuard};

/// `m` locked, poisoned or not: every value behind these mutexes stays whole across a panic
/// (each update is one assignment or one map operation).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
