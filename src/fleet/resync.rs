//! Reading a name's keys back and making this instance agree with them. Used when a name
//! first has a member here, to confirm a message before acting on it, every few seconds for
//! names with fleet state, and for every name after a reconnect. Redis's keys are the truth;
//! a message only says where to look.

use std::time::Duration;

use tokio::time::Instant;

use super::{
    group::{Group, Manual, Phase, SAME_OPENING},
    lease::LEASE,
    protocol::{Keys, CLOSED, DISABLED, FORCED, RESET},
};

/// A name's keys as read: the open key's `PTTL`, the probe key, the manual key.
pub(crate) type Seen = (i64, Option<String>, Option<String>);

/// Appends the three reads of one name to `pipe`.
pub(crate) fn read(pipe: &mut redis::Pipeline, keys: &Keys) {
    pipe.cmd("PTTL").arg(&keys.open);
    pipe.cmd("GET").arg(&keys.probe);
    pipe.cmd("GET").arg(&keys.manual);
}

/// Makes `group` agree with what Redis holds; returns the deadline to arm, if any.
pub(crate) fn apply(group: &mut Group, seen: Seen, me: &str) -> Option<Instant> {
    let (pttl, probe, manual) = seen;
    let (manual, reset) = match manual.as_deref() {
        Some(FORCED) => (Some(Manual::Forced), None),
        Some(DISABLED) => (Some(Manual::Disabled), None),
        Some(other) => (None, other.strip_prefix(RESET)),
        None => (None, None),
    };
    // A reset is the key's new token, never a message: a forged `reset` finds no new token.
    let reset_here = group.read && reset.is_some_and(|t| group.reset_seen.as_deref() != Some(t));
    if manual != group.manual || reset_here {
        group.operator(manual);
    }
    if let Some(token) = reset
        && group.reset_seen.as_deref() != Some(token)
    {
        group.reset_seen = Some(token.to_owned());
    }
    group.read = true;
    if manual.is_some() {
        return None; // the operator's: the fleet's phases wait for the reset
    }
    let now = Instant::now();
    // An opening capped here whose cap has passed holds nothing here: as if it had ended.
    let pttl = if pttl > 0 && group.capped_out(now, pttl as u64) {
        0
    } else {
        pttl
    };
    if pttl > 0 {
        let until = now + Duration::from_millis(pttl as u64);
        // Already agreeing: the same opening read again. Its end moves with the round trip
        // and with how long the task took to reach this name of a batch (tens of ms on a busy
        // machine), so "the same" is `SAME_OPENING`, not a few ms: a resync then re-arms no
        // deadline, and the timers stay one entry per name.
        if let (Some(end), Phase::Open { until: mine }) = (group.open_end(), group.phase) {
            let diff = if end > until {
                end - until
            } else {
                until - end
            };
            if diff < SAME_OPENING {
                return Some(mine);
            }
        }
        return Some(group.open(pttl as u64, None));
    }
    match (group.phase, probe.as_deref()) {
        (Phase::Idle, _) => {
            // Another instance holds the lease: wait for its probe (a late joiner).
            if probe.as_deref().is_some_and(|p| p != CLOSED && p != me) {
                let until = now + LEASE;
                group.hold(Phase::Waiting { until });
                return Some(until);
            }
            None
        }
        (_, Some(CLOSED)) => {
            group.close(None);
            None
        }
        (Phase::Open { .. }, _) => {
            // The open key is gone before this instance's timer (cut short or never real):
            // the fleet's open time is over here too.
            group.hold(Phase::Lapsed);
            None
        }
        (Phase::Probing { renew_at, .. }, _) => Some(renew_at),
        (Phase::Waiting { until }, _) => Some(until),
        (Phase::Lapsed, _) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lapsed() -> Group {
        let mut g = Group::new(Keys::new("t", "n", None));
        g.phase = Phase::Lapsed;
        g
    }

    fn seen(manual: Option<&str>) -> Seen {
        (-2, None, manual.map(str::to_owned))
    }

    #[test]
    fn a_reset_is_a_token_not_seen_before_and_never_the_first_one_read() {
        let mut g = lapsed();
        // The first read: where this instance starts from, not news.
        apply(&mut g, seen(Some("=reset:a")), "me");
        assert_eq!(g.phase, Phase::Lapsed);
        // The same token again (a forged `reset` message makes the task read it): nothing.
        apply(&mut g, seen(Some("=reset:a")), "me");
        assert_eq!(g.phase, Phase::Lapsed);
        // The token gone (expired) or foreign text: nothing either.
        apply(&mut g, seen(None), "me");
        apply(&mut g, seen(Some("reset")), "me");
        assert_eq!(g.phase, Phase::Lapsed);
        assert_eq!(g.reset_seen.as_deref(), Some("a"));
        // A new token: a reset, applied once.
        apply(&mut g, seen(Some("=reset:b")), "me");
        assert_eq!(g.phase, Phase::Idle);
        g.phase = Phase::Lapsed;
        apply(&mut g, seen(Some("=reset:b")), "me");
        assert_eq!(g.phase, Phase::Lapsed);
    }

    #[test]
    fn an_operators_setting_then_its_reset_are_followed() {
        let mut g = lapsed();
        apply(&mut g, seen(Some("forced")), "me");
        assert_eq!(g.manual, Some(Manual::Forced));
        apply(&mut g, seen(Some("=reset:c")), "me");
        assert_eq!((g.manual, g.phase), (None, Phase::Idle));
    }
}
