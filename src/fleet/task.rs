//! The background task of one fleet: the only place that talks to Redis. Event-driven:
//! it wakes for a command (a join, a leave, a member's transition, a call waiting for the
//! probe, an operator's action), a pub/sub message, or a timer (a group's deadline, the
//! second's liveness `PING`, the resync of names with fleet state, a reconnection). Each
//! event costs O(1), or O(names with fleet state) for an outage or a resync; nothing walks
//! every member. Bursts are batched: queued joins and messages are taken together and their
//! reads go to Redis in one pipeline; the task yields every [`SLICE`] items of work, and its
//! maps are sharded (`shards`), so that no step keeps a current-thread runtime for long.
//!
//! | module | its rule |
//! | --- | --- |
//! | `link` | connections, what a failure means (outage or refusal), reconnection pacing |
//! | `group` | one name's phases and what each does to the members here |
//! | `lease` | the probe lease: asked for with a call waiting, renewed while the probe runs |
//! | `resync` | reading a name's keys back and agreeing with them |
//! | `shards` | maps that never grow all at once |

use std::{
    cmp::Reverse,
    collections::{BinaryHeap, HashMap, HashSet},
    hash::BuildHasher,
    sync::{Arc, Mutex, Weak},
    time::Duration,
};

use breaker_runtime::{Cause, Handle, Name, State, Transition, WeakHandle};
use redis::Client;
use tokio::{
    sync::{mpsc, oneshot},
    time::{sleep_until, Instant},
};

use super::{
    group::{Group, Manual, Member, Phase},
    lease::{self, Answer, RENEW},
    link::{Backoff, Failure, Link},
    protocol::{self, Keys, Kind, Message, CLOSED},
    resync::{self, Seen},
    shards::Sharded,
    slots::SlotChannels,
};

/// A fleet's members: breaker id ([`Handle::id`], unique in the process and never reused)
/// to member id. Shared by the fleet's handles (`join` adds, the dashboard asks) and the
/// members' links (a member's link removes it when the breaker drops or joins another
/// fleet). Never a name nor its address: breakers of one name text are each a member.
pub(crate) type Members = Arc<Mutex<Sharded<u64, u64>>>;

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

/// Where Redis is.
pub(crate) enum Target {
    One(Box<Client>),
    /// A cluster's nodes (some of them: the client discovers the rest).
    Cluster(Vec<String>),
}

pub(crate) struct Settings {
    pub(crate) target: Target,
    pub(crate) url: String,
    pub(crate) instance: String,
    pub(crate) prefix: String,
    pub(crate) channel: String,
    pub(crate) quorum: u32,
}

/// How often names with fleet state are read back (making up for a lost message).
const RESYNC: Duration = Duration::from_secs(2);
/// The most names read back per resync: with more names with fleet state, each is read in
/// turn (20 000 open names: each every 40 s), so that the resync's traffic is bounded
/// (about 1 500 commands a second an instance) however many names stay open (it was 3
/// commands a name every 2 s: 30 000 a second with 20 000 names open). A message lost
/// without the subscription breaking is rare (a broken one reads every name back at once).
const RESYNC_NAMES: usize = 1_024;
/// The liveness check of an idle link: one `PING` a second, whatever the member count.
const PING: Duration = Duration::from_secs(1);
/// How long the probe key says `=closed` after the probe closed the fleet.
const CLOSED_MARK_MS: u64 = 2_000;
/// Events taken per wake-up before the task yields (the runtime's other tasks run between).
const BATCH: usize = 256;
/// Work done between two yields within a batch: 64 joins take about 1 ms on a busy 2-core
/// machine, 256 took up to 9 ms; on a cluster, 64 subscriptions or reads sent at once (each
/// its own request to the cluster client) about 4 ms, 256 up to 20 ms
/// (`examples/fleet_scale.rs 2 100000`).
const SLICE: usize = 64;

/// Connects once and starts the task. Whatever the first attempt meets (Redis unreachable,
/// a wrong password, a refused subscription) is an outage like any later one: the members
/// are local breakers until Redis answers, then join as after an outage. The task ends when
/// `alive` is gone (every handle dropped) and no member lives.
pub(crate) async fn start(
    settings: Settings,
    alive: Weak<()>,
) -> (mpsc::UnboundedSender<Command>, Members) {
    let (link, failed) = match Link::open(&settings).await {
        Ok(link) => (Some(link), None),
        Err(super::link::OpenError::Connect(why)) => (None, Some((why, false))),
        Err(super::link::OpenError::Refused(why)) => (None, Some((why, true))),
    };
    let slots = match &settings.target {
        Target::Cluster(_) => Some(SlotChannels::of_prefix(&settings.prefix).await),
        Target::One(_) => None,
    };
    let (tx, rx) = mpsc::unbounded_channel();
    let members = Members::default();
    let now = Instant::now();
    let seed = std::collections::hash_map::RandomState::new().hash_one(&settings.instance);
    let task = Task {
        alive,
        backoff: Backoff::new(seed),
        s: settings,
        link,
        groups: Sharded::default(),
        members: Sharded::default(),
        active: HashSet::new(),
        timers: BinaryHeap::new(),
        fresh: Vec::new(),
        slots,
        subscribed: HashSet::new(),
        confirm: Vec::new(),
        resync_queue: Vec::new(),
        openings: Vec::new(),
        warned: false,
        resyncing: false,
        refusals: HashSet::new(),
        reconnect_at: now,
        next_ping: now + PING,
        next_resync: now + RESYNC,
    };
    let mut task = task;
    if let Some((why, refused)) = failed {
        task.warned = true;
        if refused {
            tracing::warn!(
                target: "breaker",
                instance = %task.s.instance,
                url = %task.s.url,
                "fleet: Redis refused the subscription ({why}); breakers behave as local ones \
                 (see the ACL a fleet needs in breaker::fleet)"
            );
        } else {
            tracing::warn!(
                target: "breaker",
                instance = %task.s.instance,
                url = %task.s.url,
                "fleet: Redis unreachable at startup ({why}); breakers behave as local ones \
                 until it answers"
            );
        }
        // Resynchronised (and the outage over) once a link opens: see `reconnect`.
        task.reconnect_at = now + task.backoff.wait();
    }
    tokio::spawn(task.run(rx));
    (tx, members)
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

struct Task {
    /// Gone once every handle of the fleet is dropped.
    alive: Weak<()>,
    s: Settings,
    link: Option<Link>,
    /// Sharded, as the maps below: none grows all at once (see `shards`).
    groups: Sharded<Arc<str>, Group>,
    /// Member id to its name.
    members: Sharded<u64, Arc<str>>,
    /// The names with fleet state (and some that lost it since: see `track`), so that the
    /// resync and an outage walk only those.
    active: HashSet<Arc<str>>,
    /// Groups' deadlines; an entry whose group's `deadline` differs is stale.
    timers: BinaryHeap<Reverse<(Instant, Arc<str>)>>,
    /// Names that got their first member here: their keys are read in the next pipeline.
    fresh: Vec<Arc<str>>,
    /// A cluster: each slot's channel (one node: none).
    slots: Option<Arc<SlotChannels>>,
    /// A cluster: the channels this link subscribed (at most one per slot).
    subscribed: HashSet<Arc<str>>,
    /// Names a message said changed: confirmed against their keys in the next pipeline.
    confirm: Vec<Arc<str>>,
    /// Names with fleet state not yet read back in this round of resyncs.
    resync_queue: Vec<Arc<str>>,
    /// Openings of members here not yet written (name, member, ms): a burst of them goes
    /// to Redis in one round trip (see `open_batch`).
    openings: Vec<(Arc<str>, u64, u64)>,
    /// Warned of this outage already.
    warned: bool,
    /// Reconnected; every name not yet read back.
    resyncing: bool,
    /// Error replies warned of already (one WARN per kind of refusal).
    refusals: HashSet<String>,
    backoff: Backoff,
    reconnect_at: Instant,
    next_ping: Instant,
    next_resync: Instant,
}

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

fn millis(d: Option<Duration>) -> u64 {
    d.map_or(1, |d| {
        d.as_millis().clamp(1, u128::from(protocol::MAX_MS)) as u64
    })
}

/// The next message's payload; never, while disconnected. `Err(why)`: the subscription
/// ended.
async fn next_message(link: &mut Option<Link>) -> Result<Vec<u8>, &'static str> {
    match link {
        Some(link) => link.next().await,
        None => std::future::pending().await,
    }
}

impl Task {
    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Command>) {
        loop {
            let wake = self.next_wake();
            tokio::select! {
                command = rx.recv() => {
                    let Some(command) = command else { return };
                    self.command(command).await;
                    for taken in 1..=BATCH {
                        if taken % SLICE == 0 {
                            // A burst of joins: the runtime's other tasks run between
                            // slices (their reads still go out in one pipeline).
                            tokio::task::yield_now().await;
                        }
                        match rx.try_recv() {
                            Ok(command) => self.command(command).await,
                            Err(_) => break,
                        }
                    }
                }
                message = next_message(&mut self.link) => match message {
                    Ok(payload) => {
                        self.message(&payload);
                        for _ in 0..BATCH {
                            match self.link.as_mut().and_then(Link::ready) {
                                Some(Ok(payload)) => self.message(&payload),
                                Some(Err(why)) => {
                                    self.lost(why.to_owned());
                                    break;
                                }
                                None => break,
                            }
                        }
                    }
                    Err(why) => self.lost(why.to_owned()),
                },
                () = sleep_until(wake) => self.timers().await,
            }
            self.flush().await;
            if self.alive.strong_count() == 0 && self.groups.is_empty() {
                return; // no handle and no member left
            }
        }
    }

    fn next_wake(&self) -> Instant {
        let mut wake = if self.link.is_some() {
            self.next_ping.min(self.next_resync)
        } else {
            self.reconnect_at
        };
        if let Some(Reverse((at, _))) = self.timers.peek() {
            wake = wake.min(*at);
        }
        wake
    }

    /// Sets `name`'s deadline. An armed deadline is never armed again (a resync that agrees
    /// re-states it every 2 s: each push was 32 bytes more per open name, for as long as it
    /// stayed open); a moved one leaves a stale entry, and stale entries are dropped once
    /// they outnumber the live ones, so the heap holds about one entry per armed name.
    fn arm(&mut self, name: &Arc<str>, at: Option<Instant>) {
        if let Some(group) = self.groups.get_mut(name) {
            if group.deadline != at {
                group.deadline = at;
                if let Some(at) = at {
                    self.timers.push(Reverse((at, name.clone())));
                    if self.timers.len() > 2 * self.active.len() + 64 {
                        let groups = &self.groups;
                        self.timers.retain(|Reverse((at, name))| {
                            groups.get(name).is_some_and(|g| g.deadline == Some(*at))
                        });
                    }
                }
            }
        }
        self.track(name);
    }

    /// Notes `name` among the names with fleet state if it has some now. Called after every
    /// change that may give a group fleet state (each arms the group's timer, or is an
    /// operator's action); names that lost it are dropped at the next resync.
    fn track(&mut self, name: &Arc<str>) {
        if self.groups.get(name).is_some_and(Group::active) && !self.active.contains(name) {
            self.active.insert(name.clone());
        }
    }

    async fn command(&mut self, command: Command) {
        let deferred = matches!(
            command,
            Command::Transition {
                to: State::Open,
                ..
            }
        );
        if !deferred && !self.openings.is_empty() {
            // In order: the openings taken before this command are written first.
            self.open_batch().await;
        }
        match command {
            Command::Join {
                member,
                name,
                handle,
            } => self.join(member, name, handle),
            Command::Leave { member } => self.leave(member),
            Command::Wanted { member } => {
                let Some(name) = self.members.get(&member).cloned() else {
                    return;
                };
                let lapsed = self.groups.get_mut(&name).is_some_and(|g| {
                    g.wanted = true;
                    g.phase == Phase::Lapsed
                });
                if lapsed {
                    self.try_lease(&name).await;
                }
            }
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
            Command::Manual { name, set, reply } => {
                let _ = reply.send(self.manual(&name, set).await);
            }
            Command::Timers { reply } => {
                let _ = reply.send(self.timers.len());
            }
        }
    }

    fn join(&mut self, member: u64, name: Name, handle: WeakHandle) {
        let Some(h) = handle.upgrade() else {
            return; // gone already (its link said so too)
        };
        let key: Arc<str> = match self.groups.get_key_value(&*name) {
            Some((key, _)) => key.clone(),
            None => {
                let key: Arc<str> = Arc::from(&*name);
                let keys = Keys::new(&self.s.prefix, &name, self.slots.as_deref());
                self.groups.insert(key.clone(), Group::new(keys));
                self.fresh.push(key.clone());
                key
            }
        };
        let Some(group) = self.groups.get_mut(&key) else {
            return;
        };
        group.cap = group.cap.min(h.fleet_cap());
        group.welcome(member, &h);
        group.members.insert(member, Member { handle });
        self.members.insert(member, key);
    }

    fn leave(&mut self, member: u64) {
        let Some(name) = self.members.remove(&member) else {
            return;
        };
        if let Some(group) = self.groups.get_mut(&name) {
            group.members.remove(&member);
            if group.members.is_empty() {
                self.groups.remove(&name);
            }
        }
    }

    async fn transition(
        &mut self,
        name: &Arc<str>,
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
                if reopen || self.s.quorum <= 1 {
                    // Written with the burst it came in (the batch of commands taken).
                    self.openings.push((name.clone(), member, ms));
                    if self.openings.len() >= BATCH {
                        self.open_batch().await;
                    }
                } else if self.tally(name, ms).await {
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
    async fn tally(&mut self, name: &Arc<str>, ms: u64) -> bool {
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
    async fn open_batch(&mut self) {
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
    fn opening(&self, pipe: &mut redis::Pipeline, name: &str, keys: &Keys, ms: u64) {
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
    async fn open_fleet(&mut self, name: &Arc<str>, source: u64, ms: u64) {
        let Some(group) = self.groups.get(name) else {
            return;
        };
        let mut pipe = redis::pipe();
        pipe.atomic();
        self.opening(&mut pipe, name, &group.keys, ms);
        if self.query::<()>(name, &pipe).await.is_some() {
            if let Some(group) = self.groups.get_mut(name) {
                let until = group.open(ms, Some(source));
                self.arm(name, Some(until));
            }
        }
    }

    /// The probe this instance held succeeded: close here, then tell the fleet.
    async fn close_fleet(&mut self, name: &Arc<str>, source: u64) {
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
    fn publish(&self, pipe: &mut redis::Pipeline, keys: &Keys, message: String) {
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
    async fn manual(&mut self, name: &str, set: Option<Manual>) -> Result<(), String> {
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

    /// A message from the channel: malformed, foreign, our own or of a name no member has,
    /// it changes nothing; else its name's keys are read (in the next pipeline) and decide.
    fn message(&mut self, payload: &[u8]) {
        let Some(m) = protocol::parse(payload) else {
            return;
        };
        if m.instance == self.s.instance {
            return;
        }
        let Some(key) = self.groups.get_key_value(m.name).map(|(k, _)| k.clone()) else {
            return;
        };
        self.confirm.push(key);
    }

    /// Reads the keys of the fresh names and of the names messages spoke of, in pipelines
    /// of at most [`BATCH`] names, and agrees with them.
    async fn flush(&mut self) {
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
    async fn read_back(&mut self, names: Vec<Arc<str>>) {
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
    async fn agree(&mut self, name: &Arc<str>, seen: Seen) {
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

    /// Fires the due group timers, the ping, the resync, the reconnection.
    async fn timers(&mut self) {
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
            if let Some(link) = self.link.as_ref().filter(|l| !l.sharded()) {
                if let Err(Failure::Outage(why)) = link.command::<()>(&redis::cmd("PING")).await {
                    self.lost(why);
                }
            }
        }
    }

    /// A group's deadline: its open period ended, another's lease ended, or its own lease
    /// is due for renewal.
    async fn deadline(&mut self, name: &Arc<str>) {
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
    async fn try_lease(&mut self, name: &Arc<str>) {
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

    /// One pipeline for `name`; a refusal makes its members local, an outage all.
    async fn query<T: redis::FromRedisValue>(
        &mut self,
        name: &Arc<str>,
        pipe: &redis::Pipeline,
    ) -> Option<T> {
        let result = self.link.as_ref()?.query(pipe).await;
        self.answered(name, result)
    }

    async fn command_for<T: redis::FromRedisValue>(
        &mut self,
        name: &Arc<str>,
        cmd: &redis::Cmd,
    ) -> Option<T> {
        let result = self.link.as_ref()?.command(cmd).await;
        self.answered(name, result)
    }

    fn answered<T>(&mut self, name: &Arc<str>, result: Result<T, Failure>) -> Option<T> {
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
    fn refused(&mut self, name: &Arc<str>, why: &str) {
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
    fn lost(&mut self, why: String) {
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

    async fn reconnect(&mut self) {
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
