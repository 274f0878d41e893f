//! Which stripe this thread counts on: an owned one claimed on its first count and given
//! back when it exits (a bitmap of taken stripes, `Acquire` to claim and `Release` to give
//! back), or one of the shared stripes once every owned one is taken. Under loom, one
//! stripe for every thread.

use super::{Here, StripeIndex};
#[cfg(not(breaker_loom))]
use super::{OWNED, SHARED};

/// This thread's stripe if it owns one; `None` before its first count, or when it shares a
/// stripe: one thread-local load and one compare.
#[cfg(not(breaker_loom))]
#[inline(always)]
pub(crate) fn owned_here() -> Option<Here> {
    let at = this_threads();
    (at < OWNED).then(|| Here::new(StripeIndex(at)))
}

/// This thread's slot as stored: an owned stripe's index, a shared one's, or a value no
/// stripe has before its first count. Not a [`Here`]: only [`Counters::counting_inline`]
/// takes it, which counts on it with plain stores only where a breaker's route names it (a
/// route names owned slots alone), so the fast path makes one compare, not two.
#[cfg(not(breaker_loom))]
#[inline(always)]
pub(super) fn slot_here() -> usize {
    this_threads()
}

/// This thread's stripe, claimed on its first call: a free owned one if there is one, else
/// one of the shared stripes, dealt in turn.
#[cfg(not(breaker_loom))]
#[inline]
pub(crate) fn here() -> Here {
    Here::new(match this_threads() {
        UNCLAIMED => claim(),
        at => StripeIndex(at),
    })
}

/// The stripe index in `STRIPE`. `try_with`, not `with`: where thread-locals are OS keys,
/// even this destructor-free one is torn down while other thread-locals' destructors run,
/// and `with` would panic in a call made from one of them. Such a call counts on the first
/// shared stripe instead, as a thread does once it has given its owned stripe back.
#[cfg(not(breaker_loom))]
#[inline(always)]
fn this_threads() -> usize {
    STRIPE.try_with(Cell::get).unwrap_or(OWNED)
}

#[cfg(not(breaker_loom))]
use std::cell::Cell;

#[cfg(not(breaker_loom))]
thread_local! {
    /// The stripe index, or [`UNCLAIMED`]. No destructor, so it stays readable while other
    /// thread-locals are destroyed.
    static STRIPE: Cell<usize> = const { Cell::new(UNCLAIMED) };
    /// Gives an owned stripe back when the thread exits.
    static OWNER: Owner = const { Owner(Cell::new(UNCLAIMED)) };
}

#[cfg(not(breaker_loom))]
const UNCLAIMED: usize = usize::MAX;

/// Which owned stripes are taken, one bit each.
#[cfg(not(breaker_loom))]
static TAKEN: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

#[cfg(not(breaker_loom))]
struct Owner(Cell<usize>);

#[cfg(not(breaker_loom))]
impl Drop for Owner {
    fn drop(&mut self) {
        let at = self.0.get();
        if at < OWNED {
            // Any count this thread still makes (from another thread-local's destructor)
            // goes to a shared stripe. `Release`: the next owner's `Acquire` claim sees
            // every count this thread stored.
            let _ = STRIPE.try_with(|s| s.set(OWNED));
            TAKEN.fetch_and(!(1 << at), std::sync::atomic::Ordering::Release);
        }
    }
}

#[cfg(not(breaker_loom))]
#[cold]
#[inline(never)]
fn claim() -> StripeIndex {
    use std::sync::atomic::{AtomicUsize, Ordering::*};
    let full = u32::MAX >> (32 - OWNED);
    let owned = TAKEN
        .fetch_update(Acquire, Acquire, |taken| {
            (taken != full).then(|| taken | (1 << (!taken).trailing_zeros()))
        })
        .ok()
        .map(|before| (!before).trailing_zeros() as usize);
    // Registering the destructor can fail while the thread exits: keep no owned stripe then.
    let at = match owned {
        Some(at) if OWNER.try_with(|o| o.0.set(at)).is_ok() => at,
        Some(at) => {
            TAKEN.fetch_and(!(1 << at), Release);
            shared()
        }
        None => shared(),
    };
    fn shared() -> usize {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        OWNED + NEXT.fetch_add(1, Relaxed) % SHARED
    }
    let _ = STRIPE.try_with(|s| s.set(at));
    StripeIndex(at)
}

#[cfg(breaker_loom)]
pub(crate) fn owned_here() -> Option<Here> {
    Some(Here::new(StripeIndex(0)))
}

#[cfg(breaker_loom)]
pub(super) fn slot_here() -> usize {
    0
}

#[cfg(breaker_loom)]
pub(crate) fn here() -> Here {
    Here::new(StripeIndex(0))
}
