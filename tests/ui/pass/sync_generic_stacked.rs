//! Plain `fn`s, generics with lifetimes and `where` clauses, `#[tracing::instrument]`
//! stacked above and below, `is_failure`, `on_state_change`, closures as fallbacks.
use breaker::{circuit_breaker, BreakerError, CallError, Transition};
use std::fmt::Debug;

#[derive(Debug)]
enum DbError {
    Timeout,
    NotFound,
    Breaker(BreakerError),
}

impl From<BreakerError> for DbError {
    fn from(e: BreakerError) -> Self {
        DbError::Breaker(e)
    }
}

fn is_transient(e: &DbError) -> bool {
    matches!(e, DbError::Timeout | DbError::Breaker(_))
}

fn page(t: &Transition) {
    let _ = (&t.name, t.from, t.to);
}

#[circuit_breaker(threshold = 3, slow_call = "2s", is_failure = is_transient, on_state_change = page)]
fn lookup(id: u64) -> Result<String, DbError> {
    if id == 0 {
        return Err(DbError::NotFound);
    }
    Ok(id.to_string())
}

#[circuit_breaker(fallback = |id, _err| Ok(format!("cached {id}")))]
fn lookup_cached(id: u64) -> Result<String, DbError> {
    Err(DbError::Timeout)?;
    Ok(id.to_string())
}

#[circuit_breaker(is_failure = |e: &DbError| !matches!(e, DbError::NotFound), on_state_change = |t: &Transition| { let _ = t.to; })]
async fn closures(id: u64) -> Result<u64, DbError> {
    Ok(id)
}

#[circuit_breaker(threshold = 2)]
async fn generic<'a, T, U: Clone>(items: &'a [T], extra: U) -> Result<Vec<&'a T>, DbError>
where
    T: Debug + Sync,
    U: Send,
{
    let _ = extra.clone();
    Ok(items.iter().collect())
}

#[circuit_breaker(fallback = generic_fallback)]
fn generic_sync<T: Default + Clone>(x: &T) -> Result<T, DbError> {
    Ok(x.clone())
}

fn generic_fallback<T: Default>(_x: &T, _e: CallError<DbError>) -> Result<T, DbError> {
    Ok(T::default())
}

#[tracing::instrument]
#[circuit_breaker(threshold = 2)]
async fn instrumented_above(id: u64) -> Result<u64, DbError> {
    Ok(id)
}

#[circuit_breaker(threshold = 2)]
#[tracing::instrument(err(Debug))]
async fn instrumented_below(id: u64) -> Result<u64, DbError> {
    if id == 0 {
        return Err(DbError::NotFound);
    }
    Ok(id)
}

#[tracing::instrument(skip(s))]
#[circuit_breaker(fallback = sync_fallback)]
fn instrumented_sync(s: &str) -> Result<usize, DbError> {
    Ok(s.len())
}

fn sync_fallback(_s: &str, _e: CallError<DbError>) -> Result<usize, DbError> {
    Ok(0)
}

#[circuit_breaker(name = "db", threshold = 2)]
#[inline]
#[must_use = "a lookup does nothing unless used"]
pub(crate) fn attributes_kept(x: u32) -> Result<u32, DbError> {
    #![allow(clippy::unnecessary_wraps)]
    Ok(x)
}

#[circuit_breaker]
unsafe fn unsafe_fn(p: *const u8) -> Result<u8, DbError> {
    // SAFETY: the caller passes a valid pointer.
    Ok(unsafe { *p })
}

fn main() {
    let _ = lookup(1);
    let _ = lookup_cached(1);
    let _ = closures(1);
    let v = vec![1, 2];
    let _ = generic(&v, 3u8);
    let _ = generic_sync(&5u32);
    let _ = generic_sync(&String::new());
    let _ = instrumented_above(1);
    let _ = instrumented_below(1);
    let _ = instrumented_sync("x");
    let _ = attributes_kept(1);
    let b = 7u8;
    let _ = unsafe { unsafe_fn(&b) };
}
