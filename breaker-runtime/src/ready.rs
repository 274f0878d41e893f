//! Waiting for a breaker to admit again ([`Changes`]): what the tower layer's
//! `ready_when_closed` waits on besides the end of the open time. Woken by every change that
//! may make the breaker admit: each transition (a reset, a probe's success, a fleet's
//! closing, `force_open`/`disable`), a probe slot given back, a reconfiguration, the fleet's
//! gate. Made only by a waiter; the closed call path never touches it.

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use tokio::sync::{futures::OwnedNotified, Notify};

use crate::Breaker;

/// One waiter's registration for a breaker's changes (see the module docs). Dropped, it
/// deregisters: a breaker keeps no waiter that is gone.
#[doc(hidden)]
pub struct Changes {
    notify: Arc<Notify>,
    next: Pin<Box<OwnedNotified>>,
}

impl Breaker {
    /// A registration for this breaker's changes, armed now: a change from now on makes
    /// [`Changes::poll_changed`] ready (read the state after making it, so none is missed).
    #[doc(hidden)]
    pub fn changes(&self) -> Changes {
        let notify = self.shared.core.changes();
        let next = Box::pin(notify.clone().notified_owned());
        Changes { notify, next }
    }
}

impl Changes {
    /// `Ready` when the breaker changed since this was armed, and armed again (read the state
    /// again); otherwise `Pending`, and `cx` is woken at the next change.
    pub fn poll_changed(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if self.next.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        // A `Notified` completes once: the next change needs a new one, in the same box.
        self.next.set(self.notify.clone().notified_owned());
        Poll::Ready(())
    }
}

impl std::fmt::Debug for Changes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Changes").finish_non_exhaustive()
    }
}
