//! The task's reads of Redis and what their failures do: the pipeline that confirms
//! messages and reads new names, the read-back of a resync, and outages (the whole link) and
//! refusals (one name), with the reconnection that ends an outage.

use std::{cmp::Reverse, collections::HashMap, sync::Arc};

use tokio::time::Instant;

use super::{
    group::Phase,
    link::{Failure, Link},
    resync::{self, Seen},
    task::{Task, BATCH, PING, RESYNC, SLICE},
};

/// One name's three reads out of a pipeline's answers.
fn seen_from(
    (a, b, c): (
        Option<redis::Value>,
        Option<redis::Value>,
        Option<redis::Value>,
    ),
) -> Result<Seen, Failure> {
    let (Some(a), Some(b), Some(c)) = (a, b, c) else {
        return Err(Failure::Refused("a short answer".to_owned()));
    };
    Ok((
        redis::from_redis_value(a).map_err(|e| Failure::Refused(e.to_string()))?,
        redis::from_redis_value(b).map_err(|e| Failure::Refused(e.to_string()))?,
        redis::from_redis_value(c).map_err(|e| Failure::Refused(e.to_string()))?,
    ))
}

impl Task {
    /// Reads the keys of the fresh names and of the names messages spoke of, in pipelines
    /// of at most [`BATCH`] names, and agrees with them.
    pub(super) async fn flush(&mut self) {
        if !self.openings.is_empty() {
            self.open_batch().await;
        }
        if self.link.as_ref().is_some_and(Link::sharded) {
            // A cluster: the sharded channel of each fresh name's slot is subscribed (once
            // per link) before its keys are read, so no message between the two is missed.
            let channels: Vec<Arc<str>> = self
                .fresh
                .iter()
                .filter_map(|n| self.groups.get(n)?.keys.channel.clone())
                .filter(|c| self.subscribed.insert(c.clone()))
                .collect();
            let Some(link) = self.link.as_ref() else {
                return;
            };
            // A slice at a time: each subscription is a request of its own, and the whole
            // registry's after a reconnect sent in one go kept the runtime for its duration.
            let mut refused = HashMap::new();
            for slice in channels.chunks(SLICE) {
                for (channel, answer) in slice.iter().zip(link.watch(slice).await) {
                    match answer {
                        Ok(()) => {}
                        Err(Failure::Outage(why)) => return self.lost(why),
                        Err(Failure::Refused(why)) => {
                            refused.insert(channel.clone(), why);
                        }
                    }
                }
            }
            // Every fresh name of a refused channel's slot is local; the next name of that
            // slot asks for the channel again.
            if !refused.is_empty() {
                for channel in refused.keys() {
                    self.subscribed.remove(channel);
                }
                let fresh = std::mem::take(&mut self.fresh);
                for name in &fresh {
                    let channel = self.groups.get(name).and_then(|g| g.keys.channel.clone());
                    if let Some(why) = channel.and_then(|c| refused.get(&c)) {
                        self.refused(name, why);
                    }
                }
                self.fresh = fresh;
            }
        }
        while self.link.is_some() && !(self.fresh.is_empty() && self.confirm.is_empty()) {
            let mut names: Vec<Arc<str>> = Vec::new();
            while names.len() < BATCH {
                match self.confirm.pop().or_else(|| self.fresh.pop()) {
                    Some(name) => names.push(name),
                    None => break,
                }
            }
            names.sort_unstable();
            names.dedup();
            self.read_back(names).await;
        }
        self.fresh.clear();
        self.confirm.clear();
        if self.resyncing && self.link.is_some() {
            // Every name read back on the new link: the outage is over (a link that breaks
            // again before this, as during a failover, is the same outage: one WARN).
            self.resyncing = false;
            self.warned = false;
            tracing::info!(
                target: "breaker",
                instance = %self.s.instance,
                "fleet: Redis is back; resynchronised"
            );
        }
    }

    /// Reads `names`' keys (one node: in one round trip; a cluster: one pipeline per name,
    /// [`SLICE`] at once, since a pipeline goes to one shard) and makes each group agree.
    pub(super) async fn read_back(&mut self, names: Vec<Arc<str>>) {
        let mut pipes = Vec::with_capacity(names.len());
        for name in names {
            if let Some(group) = self.groups.get(&name) {
                let mut pipe = redis::pipe();
                resync::read(&mut pipe, &group.keys);
                pipes.push((name, pipe));
            }
        }
        let Some(link) = &self.link else { return };
        let answers: Vec<(Arc<str>, Result<Seen, Failure>)> = if link.sharded() {
            let mut seen = Vec::with_capacity(pipes.len());
            for slice in pipes.chunks(SLICE) {
                let reads = slice.iter().map(|(_, pipe)| link.query::<Seen>(pipe));
                seen.extend(futures_util::future::join_all(reads).await);
            }
            pipes.into_iter().map(|(name, _)| name).zip(seen).collect()
        } else {
            let mut pipe = redis::pipe();
            for (_, p) in &pipes {
                for cmd in p.cmd_iter() {
                    pipe.add_command(cmd.clone());
                }
            }
            match link.query::<Vec<redis::Value>>(&pipe).await {
                Err(Failure::Outage(why)) => return self.lost(why),
                Err(Failure::Refused(why)) => pipes
                    .into_iter()
                    .map(|(name, _)| (name, Err(Failure::Refused(why.clone()))))
                    .collect(),
                Ok(values) => {
                    let mut values = values.into_iter();
                    pipes
                        .into_iter()
                        .map(|(name, _)| {
                            let seen = (values.next(), values.next(), values.next());
                            (name, seen_from(seen))
                        })
                        .collect()
                }
            }
        };
        for (name, seen) in answers {
            match seen {
                Ok(seen) => self.agree(&name, seen).await,
                Err(Failure::Refused(why)) => self.refused(&name, &why),
                Err(Failure::Outage(why)) => return self.lost(why),
            }
            if self.link.is_none() {
                return;
            }
        }
    }

    /// Makes one group agree with its keys, then asks for the lease if a call waits.
    pub(super) async fn agree(&mut self, name: &Arc<str>, seen: Seen) {
        let Some(group) = self.groups.get_mut(name) else {
            return;
        };
        let at = resync::apply(group, seen, &self.s.instance);
        let ask = group.phase == Phase::Lapsed && group.wanted;
        self.arm(name, at);
        if ask {
            self.try_lease(name).await;
        }
    }

    /// One pipeline for `name`; a refusal makes its members local, an outage all.
    pub(super) async fn query<T: redis::FromRedisValue>(
        &mut self,
        name: &Arc<str>,
        pipe: &redis::Pipeline,
    ) -> Option<T> {
        let result = self.link.as_ref()?.query(pipe).await;
        self.answered(name, result)
    }

    pub(super) async fn command_for<T: redis::FromRedisValue>(
        &mut self,
        name: &Arc<str>,
        cmd: &redis::Cmd,
    ) -> Option<T> {
        let result = self.link.as_ref()?.command(cmd).await;
        self.answered(name, result)
    }

    pub(super) fn answered<T>(&mut self, name: &Arc<str>, result: Result<T, Failure>) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(Failure::Outage(why)) => {
                self.lost(why);
                None
            }
            Err(Failure::Refused(why)) => {
                self.refused(name, &why);
                None
            }
        }
    }

    /// Redis refused a command for `name`: its members are local breakers (each closes by
    /// its own probe after its own cool-off); one WARN per kind of refusal.
    pub(super) fn refused(&mut self, name: &Arc<str>, why: &str) {
        if let Some(group) = self.groups.get_mut(name) {
            group.local();
            group.deadline = None;
        }
        let code = why.split_whitespace().next().unwrap_or(why).to_owned();
        let hint = if code == "NOPERM" {
            " (see the ACL a fleet needs in breaker::fleet)"
        } else {
            ""
        };
        if self.refusals.insert(code) {
            tracing::warn!(
                target: "breaker",
                instance = %self.s.instance,
                "fleet: Redis refused a command for {name} ({why}); its breakers behave as \
                 local ones{hint}"
            );
        }
    }

    /// Redis is away: every breaker behaves as a local one until it is back.
    pub(super) fn lost(&mut self, why: String) {
        if self.link.take().is_none() {
            return;
        }
        if !self.warned {
            self.warned = true;
            tracing::warn!(
                target: "breaker",
                instance = %self.s.instance,
                url = %self.s.url,
                "fleet: Redis unreachable ({why}); breakers behave as local ones until it is back"
            );
        }
        for name in &self.active {
            let Some(group) = self.groups.get_mut(name).filter(|g| g.active()) else {
                continue;
            };
            if group.manual.is_none() {
                group.local();
            }
            group.deadline = None;
        }
        // Deadlines go with their entries (a group keeps none without one: see `arm`).
        for Reverse((_, name)) in self.timers.drain() {
            if let Some(group) = self.groups.get_mut(&name) {
                group.deadline = None;
            }
        }
        self.fresh.clear();
        self.subscribed.clear();
        self.confirm.clear();
        self.resync_queue.clear();
        self.openings.clear();
        self.backoff.reset();
        self.reconnect_at = Instant::now() + self.backoff.wait();
    }

    pub(super) async fn reconnect(&mut self) {
        match Link::open(&self.s)
            .await
            .map_err(super::link::OpenError::into_string)
        {
            Ok(link) => {
                self.link = Some(link);
                self.refusals.clear();
                self.resyncing = true;
                // Messages were lost meanwhile: every name is read back (in batches), and
                // on a cluster subscribed to again.
                self.fresh.extend(self.groups.keys().cloned());
                let now = Instant::now();
                self.next_ping = now + PING;
                self.next_resync = now + RESYNC;
            }
            Err(why) => {
                tracing::debug!(target: "breaker", instance = %self.s.instance, "fleet: reconnect failed: {why}");
                self.reconnect_at = Instant::now() + self.backoff.wait();
            }
        }
    }
}
