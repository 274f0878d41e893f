//! The background task of one fleet: the only place that talks to Redis. Event-driven:
//! it wakes for a command (a join, a leave, a member's transition, a call waiting for the
//! probe, an operator's action), a pub/sub message, or a timer (a group's deadline, the
//! second's liveness `PING`, the resync of names with fleet state, a reconnection). Each
//! event costs O(1), or O(names with fleet state) for an outage or a resync; nothing walks
//! every member. Bursts are batched: queued joins and messages are taken together and their
//! reads go to Redis in one pipeline; the task yields every [`SLICE`] items of work, and its
//! maps are sharded (`shards`), so that no step keeps a current-thread runtime for long.
//!
//! This room holds the task itself: its state ([`Task`]), its event loop and what a command
//! or a message changes; its decisions are in `decide`, its reads and outages in `io` (the
//! table of `fleet`'s rooms is in `fleet/mod.rs`).

use std::{
    cmp::Reverse,
    collections::{BinaryHeap, HashSet},
    hash::BuildHasher,
    sync::{Arc, Weak},
    time::Duration,
};

use breaker_runtime::{Cause, Name, State, WeakHandle};
use tokio::{
    sync::mpsc,
    time::{sleep_until, Instant},
};

use super::{
    command::Command,
    group::{Group, Member, Phase},
    link::{Backoff, Link},
    members::Members,
    protocol::{self, Keys},
    settings::{Settings, Target},
    shards::Sharded,
    slots::SlotChannels,
};

/// How often names with fleet state are read back (making up for a lost message).
pub(super) const RESYNC: Duration = Duration::from_secs(2);
/// The most names read back per resync: with more names with fleet state, each is read in
/// turn (20 000 open names: each every 40 s), so that the resync's traffic is bounded
/// (about 1 500 commands a second an instance) however many names stay open (it was 3
/// commands a name every 2 s: 30 000 a second with 20 000 names open). A message lost
/// without the subscription breaking is rare (a broken one reads every name back at once).
pub(super) const RESYNC_NAMES: usize = 1_024;
/// The liveness check of an idle link: one `PING` a second, whatever the member count.
pub(super) const PING: Duration = Duration::from_secs(1);
/// How long the probe key says `=closed` after the probe closed the fleet.
pub(super) const CLOSED_MARK_MS: u64 = 2_000;
/// Events taken per wake-up before the task yields (the runtime's other tasks run between).
pub(super) const BATCH: usize = 256;
/// Work done between two yields within a batch: 64 joins take about 1 ms on a busy 2-core
/// machine, 256 took up to 9 ms; on a cluster, 64 subscriptions or reads sent at once (each
/// its own request to the cluster client) about 4 ms, 256 up to 20 ms
/// (`examples/fleet_scale.rs 2 100000`).
pub(super) const SLICE: usize = 64;

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

pub(super) struct Task {
    /// Gone once every handle of the fleet is dropped.
    pub(super) alive: Weak<()>,
    pub(super) s: Settings,
    pub(super) link: Option<Link>,
    /// Sharded, as the maps below: none grows all at once (see `shards`).
    pub(super) groups: Sharded<Arc<str>, Group>,
    /// Member id to its name.
    pub(super) members: Sharded<u64, Arc<str>>,
    /// The names with fleet state (and some that lost it since: see `track`), so that the
    /// resync and an outage walk only those.
    pub(super) active: HashSet<Arc<str>>,
    /// Groups' deadlines; an entry whose group's `deadline` differs is stale.
    pub(super) timers: BinaryHeap<Reverse<(Instant, Arc<str>)>>,
    /// Names that got their first member here: their keys are read in the next pipeline.
    pub(super) fresh: Vec<Arc<str>>,
    /// A cluster: each slot's channel (one node: none).
    pub(super) slots: Option<Arc<SlotChannels>>,
    /// A cluster: the channels this link subscribed (at most one per slot).
    pub(super) subscribed: HashSet<Arc<str>>,
    /// Names a message said changed: confirmed against their keys in the next pipeline.
    pub(super) confirm: Vec<Arc<str>>,
    /// Names with fleet state not yet read back in this round of resyncs.
    pub(super) resync_queue: Vec<Arc<str>>,
    /// Openings of members here not yet written (name, member, ms): a burst of them goes
    /// to Redis in one round trip (see `open_batch`).
    pub(super) openings: Vec<(Arc<str>, u64, u64)>,
    /// Warned of this outage already.
    pub(super) warned: bool,
    /// Reconnected; every name not yet read back.
    pub(super) resyncing: bool,
    /// Error replies warned of already (one WARN per kind of refusal).
    pub(super) refusals: HashSet<String>,
    pub(super) backoff: Backoff,
    pub(super) reconnect_at: Instant,
    pub(super) next_ping: Instant,
    pub(super) next_resync: Instant,
}

pub(super) fn millis(d: Option<Duration>) -> u64 {
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
    pub(super) async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Command>) {
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

    pub(super) fn next_wake(&self) -> Instant {
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
    pub(super) fn arm(&mut self, name: &Arc<str>, at: Option<Instant>) {
        if let Some(group) = self.groups.get_mut(name)
            && group.deadline != at
        {
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
        self.track(name);
    }

    /// Notes `name` among the names with fleet state if it has some now. Called after every
    /// change that may give a group fleet state (each arms the group's timer, or is an
    /// operator's action); names that lost it are dropped at the next resync.
    pub(super) fn track(&mut self, name: &Arc<str>) {
        if self.groups.get(name).is_some_and(Group::active) && !self.active.contains(name) {
            self.active.insert(name.clone());
        }
    }

    pub(super) async fn command(&mut self, command: Command) {
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

    pub(super) fn join(&mut self, member: u64, name: Name, handle: WeakHandle) {
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

    pub(super) fn leave(&mut self, member: u64) {
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

    pub(super) async fn transition(
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

    /// A message from the channel: malformed, foreign, our own or of a name no member has,
    /// it changes nothing; else its name's keys are read (in the next pipeline) and decide.
    pub(super) fn message(&mut self, payload: &[u8]) {
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
}
