//! Fleets: breakers of the same name in several instances of a service learn together
//! through Redis (or Valkey), with Redis never on the call path.
//!
//! ```no_run
//! # #[cfg(feature = "redis")]
//! # async fn run() -> Result<(), breaker::fleet::FleetError> {
//! use breaker::{fleet::Fleet, Breaker, Config};
//!
//! let fleet = Fleet::builder("redis://:secret@10.0.0.5:6379/0")
//!     .instance("checkout-7f9c")
//!     .quorum(2)
//!     .connect()
//!     .await?;
//! let tax = Breaker::new("tax::rate", Config::default().threshold(5));
//! fleet.join(&tax); // a member while it lives
//! breaker::fleet::install(fleet); // for `#[circuit_breaker(fleet = true)]`
//! # Ok(()) }
//! ```
//!
//! - **Open spreads**: when a member opens on its own, the members of the same name in the
//!   other instances open too (cause [`Cause::Fleet`](crate::Cause::Fleet)) for the rest of
//!   its cool-off. With [`quorum(n)`](FleetBuilder::quorum) they open only once `n` distinct
//!   instances opened within one cool-off, so one instance with a broken network path does
//!   not take its healthy siblings down.
//! - **One probe per fleet**: when the fleet's open period ends, the members stay open
//!   (gated); the first instance with a call refused meanwhile asks for the lease
//!   (`SET NX PX`, one script) and grants that member the probe; it renews the lease while
//!   the probe runs, so a slow probe is still the only one, and publishes the outcome: its
//!   success closes every member, its failure reopens them all.
//! - **Nothing on the call path**: calls read only the breaker's local state. All Redis I/O
//!   happens on one background task per [`Fleet`]; a slow, paused or dead Redis adds no
//!   latency to any call.
//! - **Work grows with what changes**: the task is event-driven (commands, messages, timers),
//!   holds its members weakly (a dropped breaker leaves the fleet), and does O(1) work per
//!   event; an idle instance sends one `PING` a second whatever its member count.
//! - **Redis down**: every breaker behaves as a local one, with one `WARN` per outage; the
//!   task reconnects with backoff and jitter and resynchronises (reads every name's keys)
//!   when Redis is back, which also makes up for pub/sub messages lost meanwhile. A
//!   breaker that joins while the fleet is open learns it when it joins.
//! - **Redis refuses**: an error reply (`NOPERM`, `READONLY`, `WRONGTYPE`, `OOM`, …) is an
//!   outage for the name the command touched: its members are local breakers (each closes by
//!   its own probe after its own cool-off), with one `WARN` naming the error (for a
//!   transaction Redis discarded, `EXECABORT`, its command's own error).
//! - **A fleet starts without Redis**: [`Fleet::connect`] fails only for an invalid URL or
//!   option. Redis unreachable (or refusing) at startup is an outage like any later one: the
//!   members are local breakers, with one `WARN`, until Redis answers; then they join.
//! - **A message alone proves nothing**: a message is confirmed against the name's keys
//!   before it changes a member (an opening against its open key's `PTTL`, a close against
//!   the probe key, a reset against the token [`Fleet::reset`] leaves in the manual key), so
//!   whoever can `PUBLISH` can neither hold a fleet open nor close, clear or release it.
//! - **Each member keeps its own cap**: an opening heard from another instance holds a
//!   member at most as long as it would open by itself (its `max_cool_off`, else its
//!   cool-off or the default cap of an `OpenFor`, whichever is longer); past it, a call
//!   waiting asks for the one probe.
//! - **Fleet-wide manual control**: [`Fleet::force_open`], [`Fleet::disable`] and
//!   [`Fleet::reset`] act on every member of a name in every instance, late joiners included
//!   (the setting is kept in Redis until reset).
//! - **Signals expire** with Redis TTLs (`PX`, read back with `PTTL`); no instance compares
//!   its wall clock with another's. The keys of one breaker name share the hash tag
//!   `{prefix:name}` (names must not contain `{` or `}`), so on a Redis Cluster
//!   ([`Fleet::cluster`]) each name lives on one shard, with the sharded channel of its hash
//!   slot.
//!
//! # The ACL a fleet needs
//!
//! For prefix `breaker` (the default), a least-privilege Redis user:
//!
//! ```text
//! ACL SETUSER fleet on >PASSWORD ~{breaker:* &breaker:* -@all +ping +pttl +get +set +del
//!     +pexpire +sadd +srem +smembers +exists +eval +publish +subscribe +multi +exec
//! ```
//!
//! (`+eval`: the lease's two small scripts; `+sadd +srem +smembers +exists`: only with
//! `quorum(n)`, n ≥ 2.) On a cluster (the user set on every node), the slots' sharded
//! channels (`{breaker:ch:<i>}`) replace the fleet's channel, and the cluster client reads
//! the topology and checks each new connection:
//!
//! ```text
//! ACL SETUSER fleet on >PASSWORD ~{breaker:* &{breaker:* -@all +ping +pttl +get +set +del
//!     +pexpire +sadd +srem +smembers +exists +eval +spublish +ssubscribe +multi +exec
//!     +cluster|slots
//! ```
//!
//! (Without `+cluster|slots` the cluster client cannot connect: the fleet starts with its
//! members local and one `WARN` naming `NOPERM`. `HELLO` and `AUTH` need no permission.) The tests run a fleet as a user
//! with exactly each list, on one node and on a cluster, and find `ACL LOG` empty. Whatever
//! is refused leaves the names it touched local, never stuck.
//!
//! Messages on the channel that are malformed or come from another program are ignored.
//!
//! # When things go wrong
//!
//! | what happens | what the breakers do |
//! | --- | --- |
//! | Redis slow or paused (`CLIENT PAUSE`) | calls go on unaffected; the task waits up to 1 s per round trip, then treats Redis as down |
//! | Redis down when the fleet starts | `connect` returns it anyway; one `WARN`; members are local until Redis answers, then join |
//! | Redis down or restarted | one `WARN` per fleet; members are ungated and behave as local breakers; reconnect every 50 ms to 2 s (backoff, jitter); on reconnect every name's keys are read back |
//! | Redis refuses a command (ACL, replica, wrong type, out of memory) | the members of that name are local breakers; one `WARN` naming the error |
//! | a pub/sub message lost | the subscription broke: the reconnection reads every name back; names with fleet state are also read back every 2 s (at most 1 024 a time, in turn) |
//! | a forged message | confirmed against the keys first: changes nothing without them |
//! | the probing instance dies or gets no call | its lease (3 s, renewed each second while it probes) lapses or is released; an instance with a call waiting takes it |
//! | one instance's own path is broken | with `quorum(n)`, n ≥ 2, it opens alone; the rest stay closed |
//! | an instance starts mid-incident | its members learn the open period (`PTTL`), the pending probe or the operator's setting when they join |
//! | a breaker is dropped | it leaves the fleet; the fleet never keeps a breaker alive |
//! | a breaker joins a second fleet | it leaves the first (whose gate is released at once): a breaker is a member of one fleet, and the one it left has no more say |
//! | two breakers share one name text (two functions with one default name) | each is a member: the fleet knows a member by its breaker, never by its name |
//! | a malformed or foreign message | ignored |

use std::fmt;
#[cfg(feature = "redis")]
use std::sync::{
    atomic::{AtomicU64, Ordering},
    Arc, Mutex,
};

use crate::Breaker;

// The fleet's rooms (with feature `redis`), each importing only rooms listed above it or
// none of the fleet's (no circles):
//
// | room | holds |
// | --- | --- |
// | `settings` | where Redis is and how the fleet names itself there (`Settings`, `Target`) |
// | `shards` | maps that never grow all at once |
// | `slots` | a cluster: each hash slot's sharded channel name |
// | `protocol` | the keys and messages a fleet writes, and parsing what it reads |
// | `group` | one name's phases and what each does to the members here |
// | `lease` | the probe lease: asked for with a call waiting, renewed while the probe runs |
// | `resync` | reading a name's keys back and agreeing with them |
// | `link` | connections, what a failure means (outage or refusal), reconnection pacing |
// | `command` | what the fleet's handles and members send the task |
// | `members` | the map of members and the link each member holds (`MemberLink`) |
// | `task` | the task: its state, event loop, and what a command or a message changes |
// | `decide` | the task's decisions and timers: quorum, opening and closing fleet-wide, operator actions, deadlines, resync turns, `PING`, the lease |
// | `io` | the task's reads of Redis, outages and refusals, reconnection |
#[cfg(feature = "redis")]
mod command;
#[cfg(feature = "redis")]
mod decide;
#[cfg(feature = "redis")]
mod group;
#[cfg(feature = "redis")]
mod io;
#[cfg(feature = "redis")]
mod lease;
#[cfg(feature = "redis")]
mod link;
#[cfg(feature = "redis")]
mod members;
#[cfg(feature = "redis")]
mod protocol;
#[cfg(feature = "redis")]
mod resync;
#[cfg(feature = "redis")]
mod settings;
#[cfg(feature = "redis")]
mod shards;
#[cfg(feature = "redis")]
mod slots;
#[cfg(feature = "redis")]
mod task;

/// A fleet: one connection to Redis and the background task that shares what its members
/// learn. Cheap to clone (clones share the task).
#[cfg(feature = "redis")]
#[derive(Clone)]
pub struct Fleet {
    inner: Arc<Inner>,
}

#[cfg(feature = "redis")]
struct Inner {
    tx: tokio::sync::mpsc::UnboundedSender<command::Command>,
    instance: String,
    /// Members by breaker id.
    members: members::Members,
    /// Held by every handle; the task ends once it is gone and no member lives.
    _alive: Arc<()>,
}

/// How a fleet is set up: from [`Fleet::builder`].
#[cfg(feature = "redis")]
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `.connect().await`"]
pub struct FleetBuilder {
    url: String,
    /// A cluster's nodes; `url` is then their list, for messages.
    cluster: Option<Vec<String>>,
    instance: Option<String>,
    prefix: String,
    quorum: u32,
}

/// Why a fleet could not be set up.
#[derive(Debug)]
#[non_exhaustive]
pub enum FleetError {
    /// The URL is not a Redis URL (`redis://`, `rediss://` with feature `redis-tls`,
    /// `unix://`).
    Url(String),
    /// A setting is invalid: the instance id or prefix (1 to 128 characters, no space, no
    /// brace), or a quorum of 0.
    Setting(String),
    /// Not returned any more: a fleet starts without Redis (unreachable, refusing, a wrong
    /// password), its breakers local until Redis answers, as in any later outage. Kept so
    /// that code matching on it still builds.
    Connect(String),
    /// A fleet-wide action ([`Fleet::force_open`], [`Fleet::disable`], [`Fleet::reset`])
    /// was not done: Redis is away or refused it.
    Redis(String),
}

impl fmt::Display for FleetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FleetError::Url(why) => write!(f, "invalid Redis URL: {why}"),
            FleetError::Setting(why) => write!(f, "invalid fleet option: {why}"),
            FleetError::Connect(why) => write!(f, "cannot connect to Redis: {why}"),
            FleetError::Redis(why) => write!(f, "the fleet-wide action failed: {why}"),
        }
    }
}

impl std::error::Error for FleetError {}

#[cfg(feature = "redis")]
impl Fleet {
    /// Connects with the defaults: a generated instance id, prefix `breaker`, quorum 1.
    /// Must run inside a tokio runtime (the fleet's task is spawned on it).
    pub async fn connect(url: impl Into<String>) -> Result<Fleet, FleetError> {
        Fleet::builder(url).connect().await
    }

    /// A fleet to set up: `.instance(id)`, `.prefix(p)`, `.quorum(n)`, then `.connect()`.
    pub fn builder(url: impl Into<String>) -> FleetBuilder {
        FleetBuilder {
            url: url.into(),
            cluster: None,
            instance: None,
            prefix: "breaker".to_owned(),
            quorum: 1,
        }
    }

    /// A fleet on a Redis Cluster (Redis ≥ 7): `nodes` are `redis://` URLs of some of its
    /// nodes (the client discovers the rest). Commands go to each name's shard; messages
    /// travel by sharded pub/sub (`SPUBLISH`/`SSUBSCRIBE`) on one channel per hash slot, on
    /// the names' shard, so an instance holds at most 16 384 subscriptions however many
    /// members it has (it hears every message of its slots and drops those of names it has
    /// no member of). A failover or a slot migration leaves the members local while it lasts
    /// (one `WARN`), then the fleet resynchronises.
    pub fn cluster<I, S>(nodes: I) -> FleetBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let nodes: Vec<String> = nodes.into_iter().map(Into::into).collect();
        let url = nodes
            .iter()
            .map(|n| redact(n))
            .collect::<Vec<_>>()
            .join(",");
        FleetBuilder {
            url,
            cluster: Some(nodes),
            instance: None,
            prefix: "breaker".to_owned(),
            quorum: 1,
        }
    }

    /// Makes every breaker `keyed` creates from now on a member, as [`join`](Self::join)
    /// does for one: the breakers of a keyed attribute, of a
    /// [`CircuitBreakerLayer::keyed`](crate::tower::CircuitBreakerLayer::keyed) or of the
    /// reqwest middleware (`fleet.join_keyed(middleware.keyed_breaker())`). Keys made before
    /// the call stay local: join before the first request. A keyed breaker joins one fleet;
    /// a second call is ignored.
    ///
    /// ```no_run
    /// use breaker::{fleet::Fleet, Config, KeyedBreaker};
    ///
    /// # async fn run() -> Result<(), breaker::fleet::FleetError> {
    /// let fleet = Fleet::connect("redis://127.0.0.1:6379").await?;
    /// let hosts = KeyedBreaker::<String>::new("shop::hosts", Config::default());
    /// fleet.join_keyed(&hosts); // every key's breaker made from now on
    /// # Ok(()) }
    /// ```
    pub fn join_keyed<K: crate::BreakerKey>(&self, keyed: &crate::KeyedBreaker<K>) {
        let fleet = self.clone();
        keyed.on_new(move |breaker: &Breaker| fleet.join(breaker));
    }

    /// Makes `breaker` a member while it lives: its openings reach the other instances, and
    /// theirs reach it. The fleet keeps no strong reference to it. Joining twice is joining
    /// once. Never blocks and never touches Redis itself: the background task does.
    ///
    /// A dry-run breaker (`Config::dry_run`) is not taken in: it never publishes to the
    /// fleet (its openings are pretended) nor follows it (its figures show what this
    /// instance alone would have done).
    ///
    /// ```no_run
    /// use breaker::{fleet::Fleet, Breaker, Config};
    ///
    /// # async fn run() -> Result<(), breaker::fleet::FleetError> {
    /// let fleet = Fleet::connect("redis://127.0.0.1:6379").await?;
    /// let tax = Breaker::new("tax::rate", Config::default().threshold(5));
    /// fleet.join(&tax); // its openings reach the other instances, and theirs reach it
    /// # Ok(()) }
    /// ```
    pub fn join(&self, breaker: &Breaker) {
        if breaker.is_dry_run() {
            return;
        }
        // Process-wide: a breaker that leaves this fleet for another is never mistaken for
        // one of the other's members by a hook of this one.
        static NEXT_MEMBER: AtomicU64 = AtomicU64::new(0);
        let handle = breaker.handle();
        let key = handle.id();
        let member = {
            let mut members = crate::sync::lock(&self.inner.members);
            if members.contains_key(&key) {
                return; // joined already
            }
            let member = NEXT_MEMBER.fetch_add(1, Ordering::Relaxed);
            members.insert(key, member);
            member
        };
        // The member's link: its transitions and a call waiting for the fleet's probe are
        // told through it, and dropping it (the breaker drops, or joins another fleet) takes
        // the member off the fleet. Attached first: it releases the gate of a fleet left.
        handle.fleet_attach(Box::new(members::MemberLink {
            member,
            breaker: key,
            tx: self.inner.tx.clone(),
            members: self.inner.members.clone(),
        }));
        members::send_join(&self.inner.tx, member, breaker.shared_name(), &handle);
    }

    /// Forces every member named `name` open, in every instance of the fleet, until
    /// [`reset`](Self::reset): kept in Redis, so instances that join later are forced too.
    /// Done once Redis has it; an error if Redis is away or refuses (nothing changed then).
    ///
    /// ```no_run
    /// use breaker::fleet::Fleet;
    ///
    /// # async fn run() -> Result<(), breaker::fleet::FleetError> {
    /// let fleet = Fleet::connect("redis://127.0.0.1:6379").await?;
    /// fleet.force_open("tax::rate").await?; // every instance's `tax::rate`, until reset
    /// fleet.reset("tax::rate").await?;
    /// # Ok(()) }
    /// ```
    pub async fn force_open(&self, name: &str) -> Result<(), FleetError> {
        self.manual(name, Some(group::Manual::Forced)).await
    }

    /// Disables every member named `name` (every call admitted, still counted), fleet-wide
    /// and for late joiners, until [`reset`](Self::reset).
    pub async fn disable(&self, name: &str) -> Result<(), FleetError> {
        self.manual(name, Some(group::Manual::Disabled)).await
    }

    /// Resets every member named `name` in every instance (closed, counts cleared), and
    /// clears the fleet's state of that name (open period, lease, a forced or disabled
    /// setting). The reset is recorded in the name's manual key (`=reset:<token>`, for a
    /// day): what confirms its message to the other instances, so that a forged `reset`
    /// message resets nothing, and a lost one is made up at the next read-back.
    pub async fn reset(&self, name: &str) -> Result<(), FleetError> {
        self.manual(name, None).await
    }

    async fn manual(&self, name: &str, set: Option<group::Manual>) -> Result<(), FleetError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let command = command::Command::Manual {
            name: name.to_owned(),
            set,
            reply,
        };
        if self.inner.tx.send(command).is_err() {
            return Err(FleetError::Redis("the fleet's task has ended".to_owned()));
        }
        match answer.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(why)) => Err(FleetError::Redis(why)),
            Err(_) => Err(FleetError::Redis("the fleet's task has ended".to_owned())),
        }
    }

    /// How many deadlines the fleet's task holds (tests: one per name with an armed
    /// deadline, however long names stay open). Not part of the API.
    #[doc(hidden)]
    pub async fn timer_entries(&self) -> usize {
        let (reply, answer) = tokio::sync::oneshot::channel();
        if self
            .inner
            .tx
            .send(command::Command::Timers { reply })
            .is_err()
        {
            return 0;
        }
        answer.await.unwrap_or_default()
    }

    /// This instance's id in the fleet.
    pub fn instance(&self) -> &str {
        &self.inner.instance
    }

    /// Whether `handle`'s breaker is a member of this fleet (one map lookup): the
    /// dashboard's buttons then act fleet-wide.
    #[cfg(feature = "dashboard")]
    pub(crate) fn is_member(&self, handle: &crate::Handle) -> bool {
        crate::sync::lock(&self.inner.members).contains_key(&handle.id())
    }
}

#[cfg(feature = "redis")]
impl fmt::Debug for Fleet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fleet")
            .field("instance", &self.inner.instance)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "redis")]
impl FleetBuilder {
    /// This instance's id, unique in the fleet (default: host name, process id and a
    /// counter).
    pub fn instance(mut self, id: impl Into<String>) -> Self {
        self.instance = Some(id.into());
        self
    }

    /// The prefix of the fleet's keys and channel (default `breaker`): fleets with different
    /// prefixes on one Redis do not hear each other.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// How many distinct instances must open within one cool-off before the fleet opens
    /// (default 1: any member's opening spreads).
    pub fn quorum(mut self, n: u32) -> Self {
        self.quorum = n;
        self
    }

    /// Checks the options (an invalid URL or option is the only error), tries Redis once
    /// (at most about a second) and starts the fleet's background task on the current tokio
    /// runtime. Redis unreachable or refusing at startup is not an error: the members are
    /// local breakers, with one `WARN`, until Redis answers; then they join as after an
    /// outage (every name read back), so a service starts whatever its Redis is doing.
    pub async fn connect(self) -> Result<Fleet, FleetError> {
        let instance = self.instance.unwrap_or_else(default_instance);
        if !protocol::valid_id(&instance) {
            return Err(FleetError::Setting(format!(
                "instance id {instance:?}: 1 to 128 characters, no space, no brace"
            )));
        }
        if !protocol::valid_id(&self.prefix) {
            return Err(FleetError::Setting(format!(
                "prefix {:?}: 1 to 128 characters, no space, no brace",
                self.prefix
            )));
        }
        if self.quorum == 0 {
            return Err(FleetError::Setting("quorum must be at least 1".to_owned()));
        }
        let target = match self.cluster {
            Some(nodes) => {
                if nodes.is_empty() {
                    return Err(FleetError::Url(
                        "a cluster needs at least one node".to_owned(),
                    ));
                }
                for node in &nodes {
                    redis::Client::open(node.as_str())
                        .map_err(|e| FleetError::Url(format!("{}: {e}", redact(node))))?;
                }
                settings::Target::Cluster(nodes)
            }
            None => settings::Target::One(Box::new(
                redis::Client::open(self.url.as_str())
                    .map_err(|e| FleetError::Url(format!("{}: {e}", redact(&self.url))))?,
            )),
        };
        let settings = settings::Settings {
            channel: protocol::channel(&self.prefix),
            instance: instance.clone(),
            prefix: self.prefix,
            quorum: self.quorum,
            target,
            url: redact(&self.url),
        };
        let alive = Arc::new(());
        let (tx, members) = task::start(settings, Arc::downgrade(&alive)).await;
        Ok(Fleet {
            inner: Arc::new(Inner {
                tx,
                instance,
                members,
                _alive: alive,
            }),
        })
    }
}

/// The URL without its password, for messages.
#[cfg(feature = "redis")]
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.rsplit_once('@') {
        Some((auth, host)) => match auth.split_once(':') {
            Some((user, _password)) => format!("{scheme}://{user}:***@{host}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

#[cfg(feature = "redis")]
fn default_instance() -> String {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| protocol::valid_id(h))
        .unwrap_or_else(|| "host".to_owned());
    let n = COUNT.fetch_add(1, Ordering::Relaxed);
    format!("{host}:{}:{n}", std::process::id())
}

#[cfg(feature = "redis")]
static INSTALLED: Mutex<Option<Fleet>> = Mutex::new(None);

/// Sets the process's fleet: the one breakers with `#[circuit_breaker(fleet = true)]` join.
/// Replaces a fleet installed before (breakers that joined it stay its members).
#[cfg(feature = "redis")]
pub fn install(fleet: Fleet) {
    *crate::sync::lock(&INSTALLED) = Some(fleet);
}

/// The installed fleet, if any (the dashboard acts through it on members).
#[cfg(all(feature = "redis", feature = "dashboard"))]
pub(crate) fn installed() -> Option<Fleet> {
    crate::sync::lock(&INSTALLED).clone()
}

/// Joins `breaker` to the installed fleet, or logs one `WARN` and leaves it local. What
/// `fleet = true` expands to; not part of the API.
#[doc(hidden)]
pub fn join_installed(breaker: &Breaker) {
    #[cfg(feature = "redis")]
    {
        let fleet = crate::sync::lock(&INSTALLED).clone();
        if let Some(fleet) = fleet {
            fleet.join(breaker);
            return;
        }
        tracing::warn!(
            target: "breaker",
            breaker = breaker.name(),
            "no fleet installed; breaker stays local (call breaker::fleet::install first)"
        );
    }
    #[cfg(not(feature = "redis"))]
    tracing::warn!(
        target: "breaker",
        breaker = breaker.name(),
        "no fleet installed; breaker stays local (breaker was built without feature `redis`)"
    );
}

#[cfg(all(test, feature = "redis"))]
mod tests {
    use super::*;

    #[test]
    fn redact_hides_the_password() {
        assert_eq!(
            redact("redis://:s3cret@db:6379/0"),
            "redis://:***@db:6379/0"
        );
        assert_eq!(
            redact("rediss://app:s3cret@db:6380"),
            "rediss://app:***@db:6380"
        );
        assert_eq!(redact("redis://db:6379"), "redis://db:6379");
    }
}
