//! One breaker name's fleet state in this instance, and its members here (held weakly).
//!
//! | phase | the members | leaves when |
//! | --- | --- | --- |
//! | `Idle` | local breakers | a member opens (and the quorum is met), or a confirmed opening |
//! | `Open` | open, gated | its timer: the open period ended (`Lapsed`) |
//! | `Lapsed` | open, gated | a call waits here: ask for the lease |
//! | `Waiting` | open, gated | another instance holds the lease: its outcome, or the lease's end |
//! | `Probing` | one member granted the probe | its probe reports (close or reopen); the lease is renewed meanwhile |
//!
//! Everything here is local: the task decides, from Redis's answers, which of these to call.
//! Each costs O(members of this name in this instance), usually one.

use std::{collections::HashMap, time::Duration};

use breaker_runtime::{Handle, State, WeakHandle};
use tokio::time::Instant;

use super::protocol::Keys;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Idle,
    Open {
        until: Instant,
    },
    Lapsed,
    Waiting {
        until: Instant,
    },
    Probing {
        renew_at: Instant,
        granted_at: Instant,
    },
}

/// An operator's fleet-wide setting (the manual key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Manual {
    Forced,
    Disabled,
}

pub(crate) struct Member {
    pub(crate) handle: WeakHandle,
}

pub(crate) struct Group {
    pub(crate) keys: Keys,
    pub(crate) members: HashMap<u64, Member>,
    pub(crate) phase: Phase,
    pub(crate) manual: Option<Manual>,
    /// A call was refused here while the fleet held the members open.
    pub(crate) wanted: bool,
    /// The timer armed for this group (stale heap entries do not match it).
    pub(crate) deadline: Option<Instant>,
    /// The last reset's token this instance saw in the manual key (`protocol::RESET`): a
    /// token not seen yet is a reset to apply.
    pub(crate) reset_seen: Option<String>,
    /// The keys were read once: what they held then is where this instance starts from,
    /// not news (a reset of before the member joined is not applied to it).
    pub(crate) read: bool,
    /// The longest an opening heard here holds the members: the smallest of their caps
    /// (`Handle::fleet_cap`: the longest each would open by itself).
    pub(crate) cap: Duration,
    /// An opening longer than `cap`: where its key ends, and where this instance ends it.
    /// Past that, the key's remaining time is ignored here (the members may ask for the
    /// probe), until an opening that ends elsewhere is set.
    pub(crate) capped: Option<(Instant, Instant)>,
}

/// How far apart two readings of one open key's end may fall (round trips, a busy task).
pub(crate) const SAME_OPENING: Duration = Duration::from_secs(1);

impl Group {
    pub(crate) fn new(keys: Keys) -> Group {
        Group {
            keys,
            members: HashMap::new(),
            phase: Phase::Idle,
            manual: None,
            wanted: false,
            deadline: None,
            reset_seen: None,
            read: false,
            cap: Duration::MAX,
            capped: None,
        }
    }

    /// The capped opening whose key ends at `key_end`, if this is it.
    fn capped_at(&self, key_end: Instant) -> Option<Instant> {
        let (end, until) = self.capped?;
        let apart = if end > key_end {
            end - key_end
        } else {
            key_end - end
        };
        (apart < SAME_OPENING).then_some(until)
    }

    /// Whether an open key with `ms` left is an opening this instance capped, and its cap
    /// has passed: then it holds nothing here.
    pub(crate) fn capped_out(&self, now: Instant, ms: u64) -> bool {
        self.capped_at(now + Duration::from_millis(ms))
            .is_some_and(|until| until <= now)
    }

    /// What the lease script may ignore of the open key (ms left, at most): the rest of an
    /// opening capped here whose cap has passed; else 0 (any open key is an opening).
    pub(crate) fn ignore_ms(&self, now: Instant) -> u64 {
        match self.capped {
            Some((end, until)) if until <= now => {
                (end.saturating_duration_since(now) + SAME_OPENING).as_millis() as u64
            }
            _ => 0,
        }
    }

    /// Where this instance agrees the open key ends, if it is open here.
    pub(crate) fn open_end(&self) -> Option<Instant> {
        match (self.capped, self.phase) {
            (Some((end, _)), _) => Some(end),
            (None, Phase::Open { until }) => Some(until),
            _ => None,
        }
    }

    /// Whether the group has fleet state (the resync reads it back).
    pub(crate) fn active(&self) -> bool {
        self.phase != Phase::Idle || self.manual.is_some()
    }

    pub(crate) fn live(&self) -> impl Iterator<Item = (u64, Handle)> + '_ {
        self.members
            .iter()
            .filter_map(|(id, m)| m.handle.upgrade().map(|h| (*id, h)))
    }

    /// The fleet is open for `ms` from now (what Redis's open key says): every member opens
    /// for that long, or has its fleet time set to it, and waits for the fleet's probe. An
    /// opening longer than the members' cap holds them for the cap (from when it was first
    /// heard here), however often it is read back.
    pub(crate) fn open(&mut self, ms: u64, except: Option<u64>) -> Instant {
        let now = Instant::now();
        let key_end = now + Duration::from_millis(ms);
        let until = match self.capped_at(key_end) {
            Some(until) => until,
            None if Duration::from_millis(ms) > self.cap => {
                let until = now + self.cap;
                self.capped = Some((key_end, until));
                until
            }
            None => {
                self.capped = None;
                key_end
            }
        };
        self.phase = Phase::Open { until };
        self.wanted = false;
        let left = until.saturating_duration_since(now);
        for (id, h) in self.live() {
            if Some(id) != except {
                h.fleet_open(left, id);
            }
            h.fleet_gate(true, id);
        }
        until
    }

    /// The fleet's open period is over (or another instance probes): members stay open,
    /// gated, until the fleet's probe reports.
    pub(crate) fn hold(&mut self, phase: Phase) {
        let fresh = matches!(self.phase, Phase::Idle | Phase::Open { .. });
        self.phase = phase;
        for (id, h) in self.live() {
            if fresh {
                h.fleet_open(Duration::ZERO, id); // the fleet's part of the open time is over
            }
            h.fleet_gate(true, id);
        }
    }

    /// The fleet's probe succeeded: every member closes.
    pub(crate) fn close(&mut self, except: Option<u64>) {
        self.phase = Phase::Idle;
        self.capped = None;
        self.wanted = false;
        for (id, h) in self.live() {
            h.fleet_gate(false, id);
            if Some(id) != except {
                h.fleet_close(id);
            }
        }
    }

    /// Redis refused or is away: every member is a local breaker again.
    pub(crate) fn local(&mut self) {
        self.phase = Phase::Idle;
        self.capped = None;
        self.wanted = false;
        for (id, h) in self.live() {
            h.fleet_gate(false, id);
        }
    }

    /// Grants the probe to one member, one with a call waiting if any. `false`: none lives.
    pub(crate) fn grant(&mut self, now: Instant, renew_at: Instant) -> bool {
        let mut live: Vec<(u64, Handle)> = self.live().collect();
        let pick = live
            .iter()
            .position(|(id, h)| h.fleet_wanted(*id))
            .unwrap_or_default();
        if live.is_empty() {
            return false;
        }
        let (id, h) = live.swap_remove(pick);
        h.fleet_grant_probe(id);
        self.phase = Phase::Probing {
            renew_at,
            granted_at: now,
        };
        self.wanted = false;
        true
    }

    /// Whether a member of this instance is probing now.
    pub(crate) fn probing_here(&self) -> bool {
        self.live().any(|(_, h)| h.peek_state() == State::HalfOpen)
    }

    /// An operator's fleet-wide action, done in Redis: every member here follows it (a
    /// reset resets every member, whatever it was doing).
    pub(crate) fn operator(&mut self, set: Option<Manual>) {
        self.manual = set;
        self.phase = Phase::Idle;
        self.capped = None;
        self.deadline = None;
        self.wanted = false;
        for (id, h) in self.live() {
            h.fleet_gate(false, id);
            apply_manual(&h, set);
        }
    }

    /// What a member joining now must learn from this instance's view.
    pub(crate) fn welcome(&self, id: u64, h: &Handle) {
        if let Some(manual) = self.manual {
            apply_manual(h, Some(manual));
            return;
        }
        match self.phase {
            Phase::Idle => {}
            Phase::Open { until } => {
                h.fleet_open(until.saturating_duration_since(Instant::now()), id);
                h.fleet_gate(true, id);
            }
            Phase::Lapsed | Phase::Waiting { .. } | Phase::Probing { .. } => {
                h.fleet_open(Duration::ZERO, id);
                h.fleet_gate(true, id);
            }
        }
    }
}

fn apply_manual(h: &Handle, manual: Option<Manual>) {
    match manual {
        Some(Manual::Forced) => h.force_open(),
        Some(Manual::Disabled) => h.disable(),
        None => h.reset(),
    }
}
