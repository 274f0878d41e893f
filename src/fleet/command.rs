//! The command API of a fleet's task: what its handles ([`Fleet`](super::Fleet)) and its
//! members' links send it.

use std::time::Duration;

use breaker_runtime::{Cause, Name, State, WeakHandle};
use tokio::sync::oneshot;

use super::group::Manual;

/// What the fleet's handles and its members tell the task.
pub(crate) enum Command {
    Join {
        member: u64,
        name: Name,
        handle: WeakHandle,
    },
    /// The member's breaker was dropped.
    Leave { member: u64 },
    /// A call of the member was refused because the fleet holds it open.
    Wanted { member: u64 },
    /// A member's transition (from its link).
    Transition {
        member: u64,
        to: State,
        cause: Cause,
        cool_off: Option<Duration>,
    },
    /// An operator's fleet-wide action; `None` is a reset.
    Manual {
        name: String,
        set: Option<Manual>,
        reply: oneshot::Sender<Result<(), String>>,
    },
    /// How many entries the timer heap holds (tests: it stays one per armed name).
    Timers { reply: oneshot::Sender<usize> },
}
