//! The fleet's connections to Redis and what a failure means: a broken or silent link is an
//! outage of the whole fleet (reconnect with backoff and jitter, then resynchronise); an
//! error *reply* (`NOPERM`, `READONLY`, `WRONGTYPE`, `OOM`, `NOSCRIPT`, `CLUSTERDOWN`, …) is
//! an outage for the name the command touched: its members become local breakers.

use std::time::Duration;

use futures_util::StreamExt;
use redis::{
    aio::{MultiplexedConnection, PubSubStream},
    AsyncConnectionConfig, Client, RedisError,
};
use tokio::time::timeout;

use super::task::Settings;

/// Connect and response timeout of every Redis round trip.
pub(crate) const IO_TIMEOUT: Duration = Duration::from_secs(1);
pub(crate) const BACKOFF_MIN: Duration = Duration::from_millis(100);
pub(crate) const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// The connections to Redis: commands, and the subscription to the fleet's channel.
pub(crate) struct Link {
    conn: MultiplexedConnection,
    sub: PubSubStream,
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
            // As Redis said it (`NOPERM this user has no permissions …`), code first.
            Failure::Refused(match e.code() {
                Some(code) => format!("{code} {}", e.detail().unwrap_or_default()),
                None => e.to_string(),
            })
        }
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

impl Link {
    /// Connects and subscribes.
    pub(crate) async fn open(s: &Settings) -> Result<Link, OpenError> {
        let client: &Client = &s.client;
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
            Ok(Err(e)) => {
                return Err(match Failure::from(e) {
                    Failure::Outage(why) => OpenError::Connect(why),
                    Failure::Refused(why) => OpenError::Refused(why),
                })
            }
            Ok(Ok(())) => {}
        }
        Ok(Link {
            conn,
            sub: pubsub.into_on_message(),
        })
    }

    /// One round trip of `pipe`.
    pub(crate) async fn query<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> Result<T, Failure> {
        let mut conn = self.conn.clone();
        Ok(pipe.query_async::<T>(&mut conn).await?)
    }

    /// One round trip of `cmd`.
    pub(crate) async fn command<T: redis::FromRedisValue>(
        &self,
        cmd: &redis::Cmd,
    ) -> Result<T, Failure> {
        let mut conn = self.conn.clone();
        Ok(cmd.query_async::<T>(&mut conn).await?)
    }

    /// The next message's payload; `None` once the subscription ended.
    pub(crate) async fn next(&mut self) -> Option<Vec<u8>> {
        self.sub
            .next()
            .await
            .map(|m| m.get_payload_bytes().to_vec())
    }

    /// A message already received, without waiting.
    pub(crate) fn ready(&mut self) -> Option<Option<Vec<u8>>> {
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
