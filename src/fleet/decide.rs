//! The task's decisions and timers: whether a name's openings reach the quorum, opening and
//! closing a name fleet-wide, an operator's action, the timers (a group's deadline, the
//! resync's turn, the liveness `PING`) and the probe lease.

use std::{cmp::Reverse, hash::BuildHasher, sync::Arc, time::Duration};

use tokio::time::Instant;

use super::{
    group::{Group, Manual, Phase},
    lease::{self, Answer, RENEW},
    link::Failure,
    protocol::{self, Keys, Kind, Message, CLOSED},
    task::{Task, CLOSED_MARK_MS, PING, RESYNC, RESYNC_NAMES, SLICE},
};

impl Task {
    /// Records this instance's opening and says whether the quorum is met.
    pub(super) async fn tally(&mut self, name: &Arc<str>, ms: u64) -> bool {
        if self.s.quorum <= 1 {
            return true;
        }
        let Some(group) = self.groups.get(name) else {
            return false;
        };
        let keys = group.keys.clone();
        let instance = &self.s.instance;
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(keys.trip(instance))
            .arg(1)
            .arg("PX")
            .arg(ms)
            .ignore()
            .cmd("SADD")
            .arg(&keys.trips)
            .arg(instance)
            .ignore()
            .cmd("PEXPIRE")
            .arg(&keys.trips)
            .arg(protocol::MAX_MS)
            .ignore()
            .cmd("SMEMBERS")
            .arg(&keys.trips);
        let Some((ids,)) = self.query::<(Vec<String>,)>(name, &pipe).await else {
            return false;
        };
        let mut pipe = redis::pipe();
        for id in &ids {
            pipe.cmd("EXISTS").arg(keys.trip(id));
        }
        let Some(exists) = self.query::<Vec<i64>>(name, &pipe).await else {
            return false;
        };
        let stale: Vec<&String> = ids
            .iter()
            .zip(&exists)
            .filter(|(_, e)| **e == 0)
            .map(|(id, _)| id)
            .collect();
        if !stale.is_empty() {
            let mut pipe = redis::pipe();
            pipe.cmd("SREM").arg(&keys.trips).arg(stale).ignore();
            let _ = self.query::<()>(name, &pipe).await;
        }
        let opened = exists.iter().filter(|e| **e > 0).count();
        opened >= self.s.quorum as usize
    }

    /// Writes the openings taken: on one node all in one transaction (one round trip for a
    /// burst: 20 000 keys failing at once took 20 000 round trips, one after the other, and
    /// an opening behind them reached the other instances 11 s late); on a cluster each
    /// name's own transaction (its shard's), [`SLICE`] at once.
    pub(super) async fn open_batch(&mut self) {
        let openings = std::mem::take(&mut self.openings);
        let Some(link) = self.link.as_ref() else {
            return;
        };
        let mut pipes = Vec::with_capacity(openings.len());
        for (name, source, ms) in openings {
            let Some(group) = self.groups.get(&name) else {
                continue;
            };
            let mut pipe = redis::pipe();
            pipe.atomic();
            self.opening(&mut pipe, &name, &group.keys, ms);
            pipes.push((name, source, ms, pipe));
        }
        if pipes.is_empty() {
            return;
        }
        let answers: Vec<Result<(), Failure>> = if link.sharded() {
            let mut answers = Vec::with_capacity(pipes.len());
            for slice in pipes.chunks(SLICE) {
                let writes = slice.iter().map(|(_, _, _, pipe)| link.query::<()>(pipe));
                answers.extend(futures_util::future::join_all(writes).await);
            }
            answers
        } else {
            let mut all = redis::pipe();
            all.atomic();
            for (_, _, _, pipe) in &pipes {
                for cmd in pipe.cmd_iter() {
                    all.add_command(cmd.clone()).ignore();
                }
            }
            let answer = link.query::<()>(&all).await;
            pipes
                .iter()
                .map(|_| match &answer {
                    Ok(()) => Ok(()),
                    Err(Failure::Outage(why)) => Err(Failure::Outage(why.clone())),
                    Err(Failure::Refused(why)) => Err(Failure::Refused(why.clone())),
                })
                .collect()
        };
        for ((name, source, ms, _), answer) in pipes.into_iter().zip(answers) {
            if self.answered(&name, answer).is_none() {
                if self.link.is_none() {
                    return;
                }
                continue;
            }
            if let Some(group) = self.groups.get_mut(&name) {
                let until = group.open(ms, Some(source));
                self.arm(&name, Some(until));
            }
        }
    }

    /// Appends one opening to `pipe`: the open key for `ms`, the lease cleared, the message.
    pub(super) fn opening(&self, pipe: &mut redis::Pipeline, name: &str, keys: &Keys, ms: u64) {
        let message = Message {
            kind: Kind::Open,
            instance: &self.s.instance,
            ms,
            name,
        }
        .encode();
        pipe.cmd("SET")
            .arg(&keys.open)
            .arg(&self.s.instance)
            .arg("PX")
            .arg(ms)
            .ignore()
            .cmd("DEL")
            .arg(&keys.probe)
            .ignore();
        self.publish(pipe, keys, message);
    }

    /// Opens the fleet for `ms`: the key, the lease cleared, the message; then the members.
    pub(super) async fn open_fleet(&mut self, name: &Arc<str>, source: u64, ms: u64) {
        let Some(group) = self.groups.get(name) else {
            return;
        };
        let mut pipe = redis::pipe();
        pipe.atomic();
        self.opening(&mut pipe, name, &group.keys, ms);
        if self.query::<()>(name, &pipe).await.is_some()
            && let Some(group) = self.groups.get_mut(name)
        {
            let until = group.open(ms, Some(source));
            self.arm(name, Some(until));
        }
    }

    /// The probe this instance held succeeded: close here, then tell the fleet.
    pub(super) async fn close_fleet(&mut self, name: &Arc<str>, source: u64) {
        let Some(group) = self.groups.get_mut(name) else {
            return;
        };
        group.close(Some(source));
        group.deadline = None;
        let message = Message {
            kind: Kind::Close,
            instance: &self.s.instance,
            ms: 0,
            name,
        }
        .encode();
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("SET")
            .arg(&group.keys.probe)
            .arg(CLOSED)
            .arg("PX")
            .arg(CLOSED_MARK_MS)
            .ignore()
            .cmd("DEL")
            .arg(&group.keys.open)
            .ignore();
        let keys = group.keys.clone();
        self.publish(&mut pipe, &keys, message);
        let _ = self.query::<()>(name, &pipe).await;
    }

    /// Appends the message to `pipe`: on the fleet's channel (one node) or on the sharded
    /// channel of the name's slot (a cluster: the same shard as its keys).
    pub(super) fn publish(&self, pipe: &mut redis::Pipeline, keys: &Keys, message: String) {
        if let Some(channel) = keys.channel.as_deref() {
            pipe.cmd("SPUBLISH").arg(channel).arg(message).ignore();
        } else {
            pipe.cmd("PUBLISH")
                .arg(&self.s.channel)
                .arg(message)
                .ignore();
        }
    }

    /// An operator's fleet-wide setting: the key (kept until reset), the message, then the
    /// members here.
    pub(super) async fn manual(&mut self, name: &str, set: Option<Manual>) -> Result<(), String> {
        if self.link.is_none() {
            return Err("Redis is unreachable".to_owned());
        }
        let keys = Keys::new(&self.s.prefix, name, self.slots.as_deref());
        let kind = match set {
            Some(Manual::Forced) => Kind::Forced,
            Some(Manual::Disabled) => Kind::Disabled,
            None => Kind::Reset,
        };
        let message = Message {
            kind,
            instance: &self.s.instance,
            ms: 0,
            name,
        }
        .encode();
        let token = format!(
            "{:016x}",
            std::collections::hash_map::RandomState::new().hash_one(self.s.instance.as_str())
        );
        let mut pipe = redis::pipe();
        pipe.atomic();
        match set {
            Some(m) => {
                let value = if m == Manual::Forced {
                    protocol::FORCED
                } else {
                    protocol::DISABLED
                };
                pipe.cmd("SET").arg(&keys.manual).arg(value).ignore();
            }
            None => {
                // The reset is recorded with a token of its own, for a day: what confirms
                // the message (and a lost message, at the next read-back).
                pipe.cmd("DEL").arg(&keys.open).arg(&keys.probe).ignore();
                pipe.cmd("SET")
                    .arg(&keys.manual)
                    .arg(format!("{}{token}", protocol::RESET))
                    .arg("PX")
                    .arg(protocol::MAX_MS)
                    .ignore();
            }
        }
        self.publish(&mut pipe, &keys, message);
        let Some(link) = &self.link else {
            return Err("Redis is unreachable".to_owned());
        };
        match link.query::<()>(&pipe).await {
            Ok(()) => {}
            Err(Failure::Refused(why)) => return Err(why),
            Err(Failure::Outage(why)) => {
                self.lost(why.clone());
                return Err(why);
            }
        }
        if let Some(key) = self.groups.get_key_value(name).map(|(k, _)| k.clone()) {
            if let Some(group) = self.groups.get_mut(&key) {
                group.operator(set);
                if set.is_none() {
                    group.reset_seen = Some(token);
                }
            }
            self.track(&key);
        }
        Ok(())
    }

    /// Fires the due group timers, the ping, the resync, the reconnection.
    pub(super) async fn timers(&mut self) {
        let now = Instant::now();
        while let Some(Reverse((at, _))) = self.timers.peek() {
            if *at > now {
                break;
            }
            let Some(Reverse((at, name))) = self.timers.pop() else {
                break;
            };
            let due = self
                .groups
                .get(&name)
                .is_some_and(|g| g.deadline == Some(at));
            if due && self.link.is_some() {
                self.deadline(&name).await;
            }
        }
        if self.link.is_none() {
            if now >= self.reconnect_at {
                self.reconnect().await;
            }
            return;
        }
        if now >= self.next_resync {
            self.next_resync = now + RESYNC;
            // The names with fleet state only, not a walk of every group every 2 s; at most
            // RESYNC_NAMES of them a period, in turn.
            if self.resync_queue.is_empty() {
                let groups = &self.groups;
                self.active
                    .retain(|name| groups.get(name).is_some_and(Group::active));
                self.resync_queue.extend(self.active.iter().cloned());
            }
            let turn = self.resync_queue.len().saturating_sub(RESYNC_NAMES);
            let names = self.resync_queue.split_off(turn);
            if !names.is_empty() {
                self.next_ping = now + PING; // the resync is the link's check too
                self.confirm.extend(names);
            }
        }
        if now >= self.next_ping {
            self.next_ping = now + PING;
            // (A cluster client watches its nodes itself and says when one disconnects; a
            // `PING` would go to any node it knows, a dead one too.)
            if let Some(link) = self.link.as_ref().filter(|l| !l.sharded())
                && let Err(Failure::Outage(why)) = link.command::<()>(&redis::cmd("PING")).await
            {
                self.lost(why);
            }
        }
    }

    /// A group's deadline: its open period ended, another's lease ended, or its own lease
    /// is due for renewal.
    pub(super) async fn deadline(&mut self, name: &Arc<str>) {
        let Some(group) = self.groups.get_mut(name) else {
            return;
        };
        group.deadline = None;
        match group.phase {
            Phase::Idle | Phase::Lapsed => {}
            Phase::Open { .. } | Phase::Waiting { .. } => {
                let wanted = group.wanted || group.live().any(|(id, h)| h.fleet_wanted(id));
                group.hold(Phase::Lapsed);
                group.wanted = wanted;
                if wanted {
                    self.try_lease(name).await;
                }
            }
            Phase::Probing { granted_at, .. } => {
                // Renew while a member probes (or was granted a moment ago and may yet);
                // else release, so that an instance with calls waiting can take it.
                let keep = group.probing_here() || granted_at.elapsed() < lease::LEASE;
                let cmd = lease::renew_cmd(&group.keys, &self.s.instance, !keep);
                let held = self.command_for::<i64>(name, &cmd).await;
                let Some(group) = self.groups.get_mut(name) else {
                    return;
                };
                if !matches!(group.phase, Phase::Probing { .. }) {
                    return; // the probe reported meanwhile
                }
                if keep && held == Some(1) {
                    let renew_at = Instant::now() + RENEW;
                    group.phase = Phase::Probing {
                        renew_at,
                        granted_at,
                    };
                    self.arm(name, Some(renew_at));
                } else if held.is_some() {
                    // Lost or let go: the grant is taken back; a waiting call asks anew.
                    group.hold(Phase::Lapsed);
                }
            }
        }
    }

    /// Asks for the lease (a call waits here): win it and grant one member the probe, or
    /// learn who has it, or that the fleet reopened or closed meanwhile.
    pub(super) async fn try_lease(&mut self, name: &Arc<str>) {
        let Some(group) = self.groups.get(name) else {
            return;
        };
        let cmd = lease::try_cmd(
            &group.keys,
            &self.s.instance,
            group.ignore_ms(Instant::now()),
        );
        let Some(answer) = self.command_for::<(i64, i64)>(name, &cmd).await else {
            return;
        };
        let Some(group) = self.groups.get_mut(name) else {
            return;
        };
        if group.manual.is_some() || group.phase == Phase::Idle {
            return; // reset, closed or local meanwhile
        }
        let now = Instant::now();
        let at = match lease::answer(answer) {
            Answer::Open(ms) => Some(group.open(ms, None)),
            Answer::Won => {
                let renew_at = now + RENEW;
                group.grant(now, renew_at).then_some(renew_at)
            }
            Answer::Closed => {
                group.close(None);
                None
            }
            Answer::Held(ms) => {
                let until = now + Duration::from_millis(ms.max(1));
                group.hold(Phase::Waiting { until });
                group.wanted = true;
                Some(until)
            }
        };
        self.arm(name, at);
    }
}
