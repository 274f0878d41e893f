//! Membership as the members see it: the fleet's map of members ([`Members`]), and the link
//! a member's breaker holds ([`MemberLink`]), which tells the task of its transitions, of a
//! call waiting for the probe, and that it left.

use breaker_runtime::{Handle, Name, Transition};
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

use super::{command::Command, shards::Sharded};
use crate::sync::lock;

/// A fleet's members: breaker id ([`Handle::id`], unique in the process and never reused)
/// to member id. Shared by the fleet's handles (`join` adds, the dashboard asks) and the
/// members' links (a member's link removes it when the breaker drops or joins another
/// fleet). Never a name nor its address: breakers of one name text are each a member.
pub(crate) type Members = Arc<Mutex<Sharded<u64, u64>>>;

/// What a member holds of its fleet: tells the task when a call waits for the fleet's probe
/// and of each transition, and that the member left when the breaker drops (or joins
/// another fleet).
pub(crate) struct MemberLink {
    pub(crate) member: u64,
    /// The breaker's id: its key in `members`.
    pub(crate) breaker: u64,
    pub(crate) tx: mpsc::UnboundedSender<Command>,
    pub(crate) members: Members,
}

impl breaker_runtime::FleetLink for MemberLink {
    fn member(&self) -> u64 {
        self.member
    }

    fn wanted(&self) {
        let _ = self.tx.send(Command::Wanted {
            member: self.member,
        });
    }

    fn transition(&self, t: &Transition) {
        let _ = self.tx.send(Command::Transition {
            member: self.member,
            to: t.to,
            cause: t.cause,
            cool_off: t.cool_off,
        });
    }
}

impl Drop for MemberLink {
    fn drop(&mut self) {
        let mut members = lock(&self.members);
        if members.get(&self.breaker) == Some(&self.member) {
            members.remove(&self.breaker);
        }
        drop(members);
        let _ = self.tx.send(Command::Leave {
            member: self.member,
        });
    }
}

/// Joins `h` under `member` (after its link is attached: transitions before the `Join` are
/// of a member the task does not know yet, and change nothing).
pub(crate) fn send_join(tx: &mpsc::UnboundedSender<Command>, member: u64, name: Name, h: &Handle) {
    let _ = tx.send(Command::Join {
        member,
        name,
        handle: h.downgrade(),
    });
}
