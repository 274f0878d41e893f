//! The background task of one fleet: the only place that talks to Redis.
//!
//! Members' transitions reach it through an unbounded channel (the breaker's watcher only
//! sends, it never waits); pub/sub messages through the subscription; a tick every 20 ms
//! drives the probe lease, the periodic resync and the reconnection. What it learns it
//! applies to the local breakers with the `fleet_*` hooks, which take the breaker's own lock
//! briefly and never wait on Redis.
//!
//! Per breaker name, the fleet is in one of four phases:
//!
//! | phase | the members | leaves when |
//! | --- | --- | --- |
//! | `Idle` | local breakers | a member opens (and the quorum is met), or an `open` arrives |
//! | `Open` | open, gated | the open period ends: try the lease |
//! | `Waiting` | open, gated | another instance holds the lease; `close` / `open` / a retry |
//! | `Probing` | one member granted the probe | its probe reports (close or reopen), or the lease lapses |

use std::{
    collections::HashMap,
    hash::BuildHasher,
    sync::{Arc, Mutex, Weak},
    time::Duration,
};

use breaker_runtime::{Cause, Handle, Name, Observer, State};
use futures_util::StreamExt;
use redis::{
    aio::{MultiplexedConnection, PubSubStream},
    AsyncConnectionConfig, Client, RedisError,
};
use tokio::{
    sync::mpsc,
    time::{sleep_until, timeout, Instant},
};

use super::protocol::{self, Keys, Kind, Message, CLOSED};

/// A fleet's members: breaker identity (see [`identity`]) to member id. Shared by the
/// fleet's handles (`join` adds), its observer (reads) and its task (prunes the dead).
pub(crate) type Members = Arc<Mutex<HashMap<usize, u64>>>;

/// A breaker's identity: the address of its name. Every breaker allocates its own name,
/// and [`Transition::name`](breaker_runtime::Transition) and [`Handle::name`] point into it;
/// the task holds a clone of each member's name, so no other breaker can get that address
/// while the member is on the list. The fleet keeps no breaker alive: it finds its members
/// in the registry when it acts on them.
pub(crate) fn identity(name: &str) -> usize {
    name.as_ptr() as usize
}

/// What the fleet's handles and its observer tell the task.
pub(crate) enum Command {
    /// A breaker joined.
    Join { member: u64, name: Name },
    /// A member's transition (from its watcher).
    Transition {
        member: u64,
        to: State,
        cause: Cause,
        cool_off: Option<Duration>,
    },
}

pub(crate) struct Settings {
    pub(crate) client: Client,
    pub(crate) url: String,
    pub(crate) instance: String,
    pub(crate) prefix: String,
    pub(crate) channel: String,
    pub(crate) quorum: u32,
}

const TICK: Duration = Duration::from_millis(20);
/// How often the fleet's open state is read back, making up for lost messages.
const RESYNC: Duration = Duration::from_millis(500);
/// How often members whose breaker is gone are forgotten (a walk over the registry).
const PRUNE: Duration = Duration::from_secs(5);
/// Connect and response timeout of every Redis round trip.
const IO_TIMEOUT: Duration = Duration::from_secs(1);
const BACKOFF_MIN: Duration = Duration::from_millis(100);
const BACKOFF_MAX: Duration = Duration::from_secs(2);
/// How long the probe key says `=closed` after the probe closed the fleet.
const CLOSED_MARK_MS: u64 = 2_000;
/// The probe lease: the fleet's open period, within these bounds.
const LEASE_MIN_MS: u64 = 1_000;
const LEASE_MAX_MS: u64 = 30_000;

/// Try the lease; tell why not: `{1, pttl}` open again, `{2, 0}` won, `{3, 0}` closed by the
/// probe, `{4, pttl}` held by another instance.
const TRY_PROBE: &str = r#"
local open = redis.call('PTTL', KEYS[1])
if open > 0 then return {1, open} end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {2, 0} end
if redis.call('GET', KEYS[2]) == ARGV[3] then return {3, 0} end
return {4, redis.call('PTTL', KEYS[2])}
"#;

/// Connects once and starts the task; the first connection's error is the caller's. The
/// task ends when `alive` is gone (every handle dropped) and no member lives.
pub(crate) async fn start(
    settings: Settings,
    alive: Weak<()>,
) -> Result<(mpsc::UnboundedSender<Command>, Members), String> {
    let link = Link::open(&settings).await?;
    let (tx, rx) = mpsc::unbounded_channel();
    let members = Members::default();
    let (seen, report) = (members.clone(), tx.clone());
    // Every transition of every breaker passes here: one map lookup for the non-members.
    let observer = breaker_runtime::observe(move |t| {
        let member = lock(&seen).get(&identity(&t.name)).copied();
        if let Some(member) = member {
            let _ = report.send(Command::Transition {
                member,
                to: t.to,
                cause: t.cause,
                cool_off: t.cool_off,
            });
        }
    });
    let now = Instant::now();
    let task = Task {
        alive,
        shared_members: members.clone(),
        _observer: observer,
        rng: std::collections::hash_map::RandomState::new().hash_one(&settings.instance) | 1,
        s: settings,
        link: Some(link),
        groups: HashMap::new(),
        members: HashMap::new(),
        warned: false,
        backoff: BACKOFF_MIN,
        reconnect_at: now,
        next_resync: now + RESYNC,
        next_prune: now + PRUNE,
    };
    tokio::spawn(task.run(rx));
    Ok((tx, members))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The live breakers of the process, by identity.
fn live_breakers() -> HashMap<usize, Handle> {
    crate::registry()
        .handles()
        .into_iter()
        .map(|h| (identity(h.name()), h))
        .collect()
}

/// The connections to Redis: commands, and the subscription to the fleet's channel.
struct Link {
    conn: MultiplexedConnection,
    sub: PubSubStream,
}

impl Link {
    async fn open(s: &Settings) -> Result<Link, String> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(IO_TIMEOUT))
            .set_response_timeout(Some(IO_TIMEOUT));
        let conn = s
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| e.to_string())?;
        let mut pubsub = timeout(IO_TIMEOUT, s.client.get_async_pubsub())
            .await
            .map_err(|_| "timed out".to_owned())?
            .map_err(|e| e.to_string())?;
        timeout(IO_TIMEOUT, pubsub.subscribe(&s.channel))
            .await
            .map_err(|_| "timed out subscribing".to_owned())?
            .map_err(|e| e.to_string())?;
        Ok(Link {
            conn,
            sub: pubsub.into_on_message(),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle,
    Open { until: Instant },
    Waiting { next: Instant },
    Probing { until: Instant },
}

struct Group {
    keys: Keys,
    /// Member id and the breaker's name (its identity, kept while it is a member).
    members: Vec<(u64, Name)>,
    phase: Phase,
    /// The last open period heard of, in ms: the lease follows it.
    open_ms: u64,
}

impl Group {
    fn live(&self) -> impl Iterator<Item = (u64, Handle)> + '_ {
        let mut breakers = live_breakers();
        self.members
            .iter()
            .filter_map(move |(id, name)| breakers.remove(&identity(name)).map(|h| (*id, h)))
    }

    /// The fleet opened for `ms`: every member opens for that long and waits for the probe.
    fn apply_open(&mut self, ms: u64, except: Option<u64>) {
        self.phase = Phase::Open {
            until: Instant::now() + Duration::from_millis(ms),
        };
        self.open_ms = ms;
        for (id, h) in self.live() {
            if Some(id) != except {
                h.fleet_open(Duration::from_millis(ms));
            }
            h.fleet_gate(true);
        }
    }

    /// The fleet's probe succeeded: every member closes.
    fn apply_close(&mut self, except: Option<u64>) {
        self.phase = Phase::Idle;
        for (id, h) in self.live() {
            h.fleet_gate(false);
            if Some(id) != except {
                h.fleet_close();
            }
        }
    }

    fn lease_ms(&self) -> u64 {
        self.open_ms.clamp(LEASE_MIN_MS, LEASE_MAX_MS)
    }
}

struct Task {
    /// Gone once every handle of the fleet is dropped.
    alive: Weak<()>,
    shared_members: Members,
    /// Keeps the fleet's observer subscribed while the task runs.
    _observer: Observer,
    s: Settings,
    link: Option<Link>,
    groups: HashMap<String, Group>,
    /// Member id to breaker name.
    members: HashMap<u64, String>,
    /// Warned of this outage already.
    warned: bool,
    backoff: Duration,
    reconnect_at: Instant,
    next_resync: Instant,
    next_prune: Instant,
    rng: u64,
}

/// The next pub/sub message; never, while disconnected. `None`: the subscription ended.
async fn next_message(link: &mut Option<Link>) -> Option<redis::Msg> {
    match link {
        Some(link) => link.sub.next().await,
        None => std::future::pending().await,
    }
}

fn millis(d: Option<Duration>) -> u64 {
    d.map_or(1, |d| {
        d.as_millis().clamp(1, u128::from(protocol::MAX_MS)) as u64
    })
}

impl Task {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Command>) {
        let mut next_tick = Instant::now() + TICK;
        loop {
            tokio::select! {
                command = rx.recv() => match command {
                    Some(command) => self.command(command).await,
                    // Every handle and every member is gone.
                    None => return,
                },
                message = next_message(&mut self.link) => match message {
                    Some(message) => self.message(message.get_payload_bytes()),
                    None => self.lost("the subscription closed".to_owned()),
                },
                () = sleep_until(next_tick) => {
                    self.tick().await;
                    if self.alive.strong_count() == 0 && self.groups.is_empty() {
                        return; // no handle and no member left
                    }
                    next_tick = Instant::now() + TICK;
                }
            }
        }
    }

    async fn command(&mut self, command: Command) {
        match command {
            Command::Join { member, name } => self.join(member, name).await,
            Command::Transition {
                member,
                to,
                cause,
                cool_off,
            } => {
                if let Some(name) = self.members.get(&member).cloned() {
                    self.transition(&name, member, to, cause, cool_off).await;
                }
            }
        }
    }

    async fn join(&mut self, member: u64, name: Name) {
        let Some(handle) = live_breakers().remove(&identity(&name)) else {
            lock(&self.shared_members).remove(&identity(&name));
            return; // gone already
        };
        let prefix = &self.s.prefix;
        let group = self
            .groups
            .entry(name.to_string())
            .or_insert_with(|| Group {
                keys: Keys::new(prefix, &name),
                members: Vec::new(),
                phase: Phase::Idle,
                open_ms: 0,
            });
        group.members.push((member, name.clone()));
        self.members.insert(member, name.to_string());
        let name = name.to_string();
        // What the fleet is doing now, as far as this instance knows.
        match group.phase {
            Phase::Idle => {}
            Phase::Open { until } => {
                handle.fleet_open(until.saturating_duration_since(Instant::now()));
                handle.fleet_gate(true);
            }
            Phase::Waiting { .. } | Phase::Probing { .. } => {
                handle.fleet_open(Duration::ZERO);
                handle.fleet_gate(true);
            }
        }
        // And as Redis knows it: a late joiner learns the open state now, or that the open
        // period is over and another instance is probing.
        if group.phase == Phase::Idle {
            let mut pipe = redis::pipe();
            pipe.cmd("PTTL").arg(&group.keys.open);
            pipe.cmd("GET").arg(&group.keys.probe);
            let Some((pttl, prober)) = self.query::<(i64, Option<String>)>(&pipe).await else {
                return;
            };
            let Some(group) = self.groups.get_mut(&name) else {
                return;
            };
            if pttl > 0 {
                group.apply_open(pttl as u64, None);
            } else if prober.is_some_and(|p| p != CLOSED && p != self.s.instance) {
                group.phase = Phase::Waiting {
                    next: Instant::now() + TICK,
                };
                for (_, h) in group.live() {
                    h.fleet_open(Duration::ZERO);
                    h.fleet_gate(true);
                }
            }
        }
    }

    async fn transition(
        &mut self,
        name: &str,
        member: u64,
        to: State,
        cause: Cause,
        cool_off: Option<Duration>,
    ) {
        if matches!(cause, Cause::Fleet | Cause::Manual) || self.link.is_none() {
            return; // the fleet's own doing, an operator's, or Redis is away: local only
        }
        let Some(group) = self.groups.get(name) else {
            return;
        };
        let probing = matches!(group.phase, Phase::Probing { .. });
        match to {
            State::Open => {
                let ms = millis(cool_off);
                let reopen = probing && matches!(cause, Cause::ProbeFailed);
                if reopen || self.tally(name, ms).await {
                    self.open_fleet(name, member, ms).await;
                }
            }
            State::Closed if probing && matches!(cause, Cause::ProbesSucceeded { .. }) => {
                self.close_fleet(name, member).await;
            }
            _ => {}
        }
    }

    /// Records this instance's opening and says whether the quorum is met.
    async fn tally(&mut self, name: &str, ms: u64) -> bool {
        if self.s.quorum <= 1 {
            return true;
        }
        let Some(group) = self.groups.get(name) else {
            return false;
        };
        let keys = group.keys.clone();
        let instance = self.s.instance.clone();
        let mut pipe = redis::pipe();
        pipe.cmd("SET")
            .arg(keys.trip(&instance))
            .arg(1)
            .arg("PX")
            .arg(ms)
            .ignore()
            .cmd("SADD")
            .arg(&keys.trips)
            .arg(&instance)
            .ignore()
            .cmd("PEXPIRE")
            .arg(&keys.trips)
            .arg(protocol::MAX_MS)
            .ignore()
            .cmd("SMEMBERS")
            .arg(&keys.trips);
        let Some((ids,)) = self.query::<(Vec<String>,)>(&pipe).await else {
            return false;
        };
        let mut pipe = redis::pipe();
        for id in &ids {
            pipe.cmd("EXISTS").arg(keys.trip(id));
        }
        let Some(exists) = self.query::<Vec<i64>>(&pipe).await else {
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
            let _ = self.query::<()>(&pipe).await;
        }
        let opened = exists.iter().filter(|e| **e > 0).count();
        opened >= self.s.quorum as usize
    }

    /// Opens the fleet for `ms`: the key, a fresh lease, the message; then the local members.
    async fn open_fleet(&mut self, name: &str, source: u64, ms: u64) {
        let Some(group) = self.groups.get(name) else {
            return;
        };
        let message = Message {
            kind: Kind::Open,
            instance: &self.s.instance,
            ms,
            name,
        }
        .encode();
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("SET")
            .arg(&group.keys.open)
            .arg(&self.s.instance)
            .arg("PX")
            .arg(ms)
            .ignore()
            .cmd("DEL")
            .arg(&group.keys.probe)
            .ignore()
            .cmd("PUBLISH")
            .arg(&self.s.channel)
            .arg(message)
            .ignore();
        if self.query::<()>(&pipe).await.is_some() {
            if let Some(group) = self.groups.get_mut(name) {
                group.apply_open(ms, Some(source));
            }
        }
    }

    /// The probe this instance held succeeded: close here, then tell the fleet.
    async fn close_fleet(&mut self, name: &str, source: u64) {
        let Some(group) = self.groups.get_mut(name) else {
            return;
        };
        group.apply_close(Some(source));
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
            .ignore()
            .cmd("PUBLISH")
            .arg(&self.s.channel)
            .arg(message)
            .ignore();
        let _ = self.query::<()>(&pipe).await;
    }

    /// A message from the channel: malformed, foreign, our own or of a name no member has,
    /// it changes nothing.
    fn message(&mut self, payload: &[u8]) {
        let Some(m) = protocol::parse(payload) else {
            return;
        };
        if m.instance == self.s.instance {
            return;
        }
        let Some(group) = self.groups.get_mut(m.name) else {
            return;
        };
        match m.kind {
            Kind::Open => group.apply_open(m.ms, None),
            Kind::Close if group.phase != Phase::Idle => group.apply_close(None),
            Kind::Close => {}
        }
    }

    async fn tick(&mut self) {
        let now = Instant::now();
        if now >= self.next_prune {
            self.prune();
            self.next_prune = now + PRUNE;
        }
        if self.link.is_none() {
            if now >= self.reconnect_at {
                self.reconnect().await;
            }
            return;
        }
        let due: Vec<String> = self
            .groups
            .iter()
            .filter(|(_, g)| match g.phase {
                Phase::Idle => false,
                Phase::Open { until } | Phase::Probing { until } => now >= until,
                Phase::Waiting { next } => now >= next,
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in due {
            let lapsed = self.groups.get_mut(&name).and_then(|g| match g.phase {
                Phase::Probing { .. } => {
                    // The lease lapsed with no report: take the grant back, try again.
                    g.phase = Phase::Waiting { next: now };
                    g.live().for_each(|(_, h)| h.fleet_gate(true));
                    Some(())
                }
                _ => None,
            });
            if lapsed.is_none() {
                self.try_probe(&name).await;
            }
        }
        if now >= self.next_resync && self.link.is_some() {
            self.resync().await;
            self.next_resync = Instant::now() + RESYNC;
        }
    }

    /// The fleet's open period ended here: take the lease and grant one member the probe, or
    /// learn who has it, or that the fleet reopened or closed meanwhile.
    async fn try_probe(&mut self, name: &str) {
        let Some(group) = self.groups.get(name) else {
            return;
        };
        let mut cmd = redis::cmd("EVAL");
        cmd.arg(TRY_PROBE)
            .arg(2)
            .arg(&group.keys.open)
            .arg(&group.keys.probe)
            .arg(&self.s.instance)
            .arg(group.lease_ms())
            .arg(CLOSED);
        let Some(conn) = self.link.as_mut().map(|l| l.conn.clone()) else {
            return;
        };
        let mut conn = conn;
        let answer: Result<(i64, i64), RedisError> = cmd.query_async(&mut conn).await;
        let (what, ms) = match answer {
            Ok(answer) => answer,
            Err(e) => return self.failed(e),
        };
        let Some(group) = self.groups.get_mut(name) else {
            return;
        };
        let now = Instant::now();
        match what {
            1 if ms > 0 => group.apply_open(ms as u64, None),
            2 => {
                group.phase = Phase::Probing {
                    until: now + Duration::from_millis(group.lease_ms()),
                };
                if let Some((_, h)) = group.live().next() {
                    h.fleet_grant_probe();
                }
            }
            3 => group.apply_close(None),
            _ => {
                let wait = Duration::from_millis(ms.max(0) as u64);
                group.phase = Phase::Waiting {
                    next: now + wait.clamp(TICK, Duration::from_millis(250)),
                };
            }
        }
    }

    /// Reads back every name's open key: an opening or a reopening whose message was lost,
    /// or an open period cut short by a close we did not hear.
    async fn resync(&mut self) {
        let names: Vec<String> = self.groups.keys().cloned().collect();
        if names.is_empty() {
            return;
        }
        let mut pipe = redis::pipe();
        for name in &names {
            pipe.cmd("PTTL").arg(&self.groups[name].keys.open);
        }
        let Some(pttls) = self.query::<Vec<i64>>(&pipe).await else {
            return;
        };
        let now = Instant::now();
        for (name, pttl) in names.iter().zip(pttls) {
            let Some(group) = self.groups.get_mut(name) else {
                continue;
            };
            let ends = now + Duration::from_millis(pttl.max(0) as u64);
            match (group.phase, pttl > 0) {
                (Phase::Idle | Phase::Waiting { .. } | Phase::Probing { .. }, true) => {
                    group.apply_open(pttl as u64, None);
                }
                (Phase::Open { until }, true) if ends > until + Duration::from_millis(100) => {
                    group.apply_open(pttl as u64, None);
                }
                (Phase::Open { until }, false) if until > now => {
                    group.phase = Phase::Open { until: now };
                }
                _ => {}
            }
        }
    }

    /// Forgets members whose breaker is gone, and names with no member left.
    fn prune(&mut self) {
        let live = live_breakers();
        let members = &mut self.members;
        let mut shared = lock(&self.shared_members);
        self.groups.retain(|_, g| {
            g.members.retain(|(id, name)| {
                let alive = live.contains_key(&identity(name));
                if !alive {
                    // Off the observer's list before the name (the identity) is let go.
                    shared.remove(&identity(name));
                    members.remove(id);
                }
                alive
            });
            !g.members.is_empty()
        });
    }

    /// One round trip; `None` (and the link dropped if it broke) on error.
    async fn query<T: redis::FromRedisValue>(&mut self, pipe: &redis::Pipeline) -> Option<T> {
        let mut conn = self.link.as_ref()?.conn.clone();
        match pipe.query_async::<T>(&mut conn).await {
            Ok(v) => Some(v),
            Err(e) => {
                self.failed(e);
                None
            }
        }
    }

    fn failed(&mut self, e: RedisError) {
        if e.is_io_error()
            || e.is_timeout()
            || e.is_connection_dropped()
            || e.is_connection_refusal()
            || e.is_unrecoverable_error()
        {
            self.lost(e.to_string());
        } else {
            tracing::debug!(target: "breaker", instance = %self.s.instance, "fleet: Redis said {e}");
        }
    }

    /// Redis is away: every breaker behaves as a local one until it is back.
    fn lost(&mut self, why: String) {
        self.link = None;
        if !self.warned {
            self.warned = true;
            tracing::warn!(
                target: "breaker",
                instance = %self.s.instance,
                url = %self.s.url,
                "fleet: Redis unreachable ({why}); breakers behave as local ones until it is back"
            );
        }
        for group in self.groups.values_mut() {
            group.phase = Phase::Idle;
            group.live().for_each(|(_, h)| h.fleet_gate(false));
        }
        self.backoff = BACKOFF_MIN;
        self.reconnect_at = Instant::now() + self.jitter(self.backoff);
    }

    async fn reconnect(&mut self) {
        match Link::open(&self.s).await {
            Ok(link) => {
                self.link = Some(link);
                self.warned = false;
                tracing::info!(
                    target: "breaker",
                    instance = %self.s.instance,
                    "fleet: Redis is back; resynchronising"
                );
                self.resync().await;
                self.next_resync = Instant::now() + RESYNC;
            }
            Err(why) => {
                tracing::debug!(target: "breaker", instance = %self.s.instance, "fleet: reconnect failed: {why}");
                self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
                self.reconnect_at = Instant::now() + self.jitter(self.backoff);
            }
        }
    }

    /// Between half and all of `d`, so a fleet does not reconnect in step.
    fn jitter(&mut self, d: Duration) -> Duration {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let fraction = (self.rng % 1024) as u32;
        d / 2 + (d / 2) * fraction / 1024
    }
}
