//! The fleet's connections to Redis and what a failure means: a broken or silent link is an
//! outage of the whole fleet (reconnect with backoff and jitter, then resynchronise); an
//! error *reply* (`NOPERM`, `READONLY`, `WRONGTYPE`, `OOM`, `NOSCRIPT`, `CLUSTERDOWN`, …) is
//! an outage for the name the command touched: its members become local breakers.
//!
//! One node: a multiplexed connection for commands and a `SUBSCRIBE` to the fleet's channel.
//! A cluster: the cluster client (commands routed by hash slot) over RESP3, with one
//! `SSUBSCRIBE` per hash slot in use to that slot's sharded channel (`slots`); a
//! node's disconnection (a failover) or a slot's channel dropped by the server (the slot
//! moved) is an outage until the link is opened again and every name read back.

use std::{sync::Arc, time::Duration};

use futures_util::StreamExt;
use redis::{
    aio::{MultiplexedConnection, PubSubStream},
    cluster::ClusterClientBuilder,
    cluster_async::ClusterConnection,
    AsyncConnectionConfig, PushInfo, PushKind, RedisError,
};
use tokio::{sync::mpsc, time::timeout};

use super::settings::{Settings, Target};

/// Why a subscription ended, unless a cluster says more.
const CLOSED: &str = "the subscription closed";

/// Connect and response timeout of every Redis round trip.
pub(crate) const IO_TIMEOUT: Duration = Duration::from_secs(1);
pub(crate) const BACKOFF_MIN: Duration = Duration::from_millis(100);
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(2);

enum Conn {
    One(MultiplexedConnection),
    Cluster(ClusterConnection),
}

enum Sub {
    One(PubSubStream),
    Cluster(mpsc::UnboundedReceiver<PushInfo>),
}

/// The connections to Redis: commands, and the subscription to the fleet's messages.
pub(crate) struct Link {
    conn: Conn,
    sub: Sub,
}

/// Why a round trip failed.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The link broke or went silent: the whole fleet is local until it is back.
    Outage(String),
    /// Redis answered with an error: what the command touched is local.
    Refused(String),
}

impl From<RedisError> for Failure {
    fn from(e: RedisError) -> Failure {
        if e.is_io_error()
            || e.is_timeout()
            || e.is_connection_dropped()
            || e.is_connection_refusal()
            || e.is_unrecoverable_error()
        {
            Failure::Outage(e.to_string())
        } else {
            Failure::Refused(named(e))
        }
    }
}

/// What Redis said, code first (`NOPERM this user has no permissions …`). A transaction
/// Redis discarded (`EXECABORT`, nothing after it) is named by its command's own error
/// (`OOM`, `READONLY`, `NOPERM`, …): the one an operator can act on.
fn named(e: RedisError) -> String {
    let aborted = e.code() == Some("EXECABORT");
    let said = match e.code() {
        Some(code) => format!("{code} {}", e.detail().unwrap_or_default()),
        None => e.to_string(),
    };
    let own = e.into_server_errors().and_then(|errors| {
        errors
            .iter()
            .find(|(_, error)| error.code() != "EXECABORT")
            .map(|(_, error)| format!("{} {}", error.code(), error.details().unwrap_or_default()))
    });
    match own {
        Some(own) if aborted => format!("{own} (the transaction was discarded: EXECABORT)"),
        Some(own) => own,
        None => said.trim_end().to_owned(),
    }
}

/// Why a link could not be opened.
pub(crate) enum OpenError {
    /// No connection (unreachable, timed out, wrong password).
    Connect(String),
    /// Connected, but Redis refused the subscription (an ACL without it).
    Refused(String),
}

impl OpenError {
    pub(crate) fn into_string(self) -> String {
        match self {
            OpenError::Connect(why) | OpenError::Refused(why) => why,
        }
    }
}

fn subscribe_failed(e: RedisError) -> OpenError {
    match Failure::from(e) {
        Failure::Outage(why) => OpenError::Connect(why),
        Failure::Refused(why) => OpenError::Refused(why),
    }
}

impl Link {
    /// Connects and subscribes (one node: to the fleet's channel; a cluster: to nothing yet,
    /// each slot's channel is [`watch`](Self::watch)ed when a name of it gets a member).
    pub(crate) async fn open(s: &Settings) -> Result<Link, OpenError> {
        match &s.target {
            Target::One(client) => {
                let config = AsyncConnectionConfig::new()
                    .set_connection_timeout(Some(IO_TIMEOUT))
                    .set_response_timeout(Some(IO_TIMEOUT));
                let conn = client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await
                    .map_err(|e| OpenError::Connect(e.to_string()))?;
                let mut pubsub = timeout(IO_TIMEOUT, client.get_async_pubsub())
                    .await
                    .map_err(|_| OpenError::Connect("timed out".to_owned()))?
                    .map_err(|e| OpenError::Connect(e.to_string()))?;
                match timeout(IO_TIMEOUT, pubsub.subscribe(&s.channel)).await {
                    Err(_) => return Err(OpenError::Connect("timed out subscribing".to_owned())),
                    Ok(Err(e)) => return Err(subscribe_failed(e)),
                    Ok(Ok(())) => {}
                }
                Ok(Link {
                    conn: Conn::One(conn),
                    sub: Sub::One(pubsub.into_on_message()),
                })
            }
            Target::Cluster(nodes) => {
                let (tx, rx) = mpsc::unbounded_channel();
                let client = ClusterClientBuilder::new(nodes.clone())
                    .use_protocol(redis::ProtocolVersion::RESP3)
                    .push_sender(tx)
                    .connection_timeout(IO_TIMEOUT)
                    .response_timeout(IO_TIMEOUT)
                    .retries(1)
                    .build()
                    .map_err(|e| OpenError::Connect(e.to_string()))?;
                let conn = timeout(IO_TIMEOUT * 3, client.get_async_connection())
                    .await
                    .map_err(|_| OpenError::Connect("timed out".to_owned()))?
                    .map_err(|e| OpenError::Connect(e.to_string()))?;
                Ok(Link {
                    conn: Conn::Cluster(conn),
                    sub: Sub::Cluster(rx),
                })
            }
        }
    }

    /// Whether messages travel on one sharded channel per hash slot (a cluster).
    pub(crate) fn sharded(&self) -> bool {
        matches!(self.conn, Conn::Cluster(_))
    }

    /// Subscribes to slots' sharded channels (a cluster; nothing on one node), all at once;
    /// one answer per channel.
    pub(crate) async fn watch(&self, channels: &[Arc<str>]) -> Vec<Result<(), Failure>> {
        match &self.conn {
            Conn::One(_) => channels.iter().map(|_| Ok(())).collect(),
            Conn::Cluster(conn) => {
                let each = channels.iter().map(|channel| {
                    let mut conn = conn.clone();
                    async move {
                        // The client sends SSUBSCRIBE to the node it thinks owns the slot
                        // and follows MOVED; during a failover that may be the dead master.
                        let mut tries = 0;
                        loop {
                            match conn.ssubscribe(&**channel).await {
                                Ok(()) => return Ok(()),
                                Err(e) if e.is_connection_refusal() && tries < 3 => tries += 1,
                                Err(e) => return Err(Failure::from(e)),
                            }
                        }
                    }
                });
                futures_util::future::join_all(each).await
            }
        }
    }

    /// One round trip of `pipe`.
    pub(crate) async fn query<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> Result<T, Failure> {
        Ok(match &self.conn {
            Conn::One(conn) => pipe.query_async::<T>(&mut conn.clone()).await?,
            Conn::Cluster(conn) => pipe.query_async::<T>(&mut conn.clone()).await?,
        })
    }

    /// One round trip of `cmd`.
    pub(crate) async fn command<T: redis::FromRedisValue>(
        &self,
        cmd: &redis::Cmd,
    ) -> Result<T, Failure> {
        Ok(match &self.conn {
            Conn::One(conn) => cmd.query_async::<T>(&mut conn.clone()).await?,
            Conn::Cluster(conn) => cmd.query_async::<T>(&mut conn.clone()).await?,
        })
    }

    /// The next message's payload; `Err(why)` once the subscription ended (or, on a
    /// cluster, a node disconnected or a slot left its node: messages may have been lost).
    pub(crate) async fn next(&mut self) -> Result<Vec<u8>, &'static str> {
        match &mut self.sub {
            Sub::One(stream) => stream
                .next()
                .await
                .map(|m| m.get_payload_bytes().to_vec())
                .ok_or(CLOSED),
            Sub::Cluster(rx) => loop {
                let push = rx.recv().await.ok_or(CLOSED)?;
                match push.kind {
                    PushKind::Disconnection => return Err("a node's connection closed"),
                    // The fleet never unsubscribes: this is the server dropping a slot's
                    // channel because the slot moved to another node (a resharding, a
                    // manual failover), over a connection that stays up. The client does
                    // not subscribe it again, so the slot would stay deaf: an outage, after
                    // which every channel is subscribed anew and every name read back.
                    PushKind::SUnsubscribe => {
                        return Err("a slot moved: the server dropped its channel");
                    }
                    PushKind::SMessage | PushKind::Message => {
                        let payload = push.data.into_iter().nth(1).ok_or(CLOSED)?;
                        return redis::from_redis_value::<Vec<u8>>(payload).map_err(|_| CLOSED);
                    }
                    _ => {}
                }
            },
        }
    }

    /// A message already received, without waiting.
    pub(crate) fn ready(&mut self) -> Option<Result<Vec<u8>, &'static str>> {
        use futures_util::FutureExt;
        self.next().now_or_never()
    }
}

/// Reconnection pacing: backoff doubling from [`BACKOFF_MIN`] to [`BACKOFF_MAX`], each wait
/// between half and all of it, so a fleet does not reconnect in step.
pub(crate) struct Backoff {
    next: Duration,
    rng: u64,
}

impl Backoff {
    pub(crate) fn new(seed: u64) -> Backoff {
        Backoff {
            next: BACKOFF_MIN,
            rng: seed | 1,
        }
    }

    pub(crate) fn reset(&mut self) {
        self.next = BACKOFF_MIN;
    }

    /// The wait before the next attempt.
    pub(crate) fn wait(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(BACKOFF_MAX);
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let fraction = (self.rng % 1024) as u32;
        d / 2 + (d / 2) * fraction / 1024
    }
}
