//! What a fleet writes to Redis: the keys of one breaker name (all under one hash tag, so
//! Redis Cluster keeps them on one node) and the pub/sub messages, one line each.
//!
//! ```text
//! {prefix:name}:open          the fleet is open; PX = the rest of its open period
//! {prefix:name}:probe         the probe lease: the prober's instance id, PX = the lease;
//!                             "=closed" for a short while after a probe closed the fleet
//! {prefix:name}:trip:<id>     instance <id> opened on its own; PX = its cool-off (quorum)
//! {prefix:name}:trips         the set of instance ids that wrote a trip key (quorum)
//! {prefix:name}:manual        "forced" or "disabled": the operator's, fleet-wide, no expiry;
//!                             "=reset:<token>" for a day after a reset (what confirms it)
//!
//! channel prefix:fleet        "breaker-fleet/1 open <id> <ms> <name>"
//!                             "breaker-fleet/1 close <id> 0 <name>"
//!                             "breaker-fleet/1 forced|disabled|reset <id> 0 <name>"
//! {prefix:ch:<i>}             a cluster's sharded channel, one per hash slot, the same
//!                             messages; i is the first that hashes to the slot (`slots`)
//! ```
//!
//! A message only says where to look: the receiver confirms it against the keys (`PTTL` of
//! the open key, the probe key, the manual key) before it changes a member, so whoever can
//! `PUBLISH` cannot hold a fleet open.
//!
//! No message and no key holds a timestamp: durations only, measured by Redis (`PX`, `PTTL`)
//! or by the receiver's own monotonic clock from the moment it hears them.

use std::sync::Arc;

use super::slots::SlotChannels;

/// The first word of every message; anything else on the channel is foreign and ignored.
pub(crate) const MAGIC: &str = "breaker-fleet/1";

/// The longest open period a message may carry (a day): more is malformed.
pub(crate) const MAX_MS: u64 = 24 * 60 * 60 * 1000;

/// The value of the probe key for a while after the fleet's probe closed it.
pub(crate) const CLOSED: &str = "=closed";

/// What a message says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The fleet opened (or reopened) for `ms`.
    Open,
    /// The fleet's probe succeeded: close.
    Close,
    /// An operator forced every member open (`Fleet::force_open`).
    Forced,
    /// An operator disabled every member (`Fleet::disable`).
    Disabled,
    /// An operator reset every member (`Fleet::reset`).
    Reset,
}

impl Kind {
    fn word(self) -> &'static str {
        match self {
            Kind::Open => "open",
            Kind::Close => "close",
            Kind::Forced => "forced",
            Kind::Disabled => "disabled",
            Kind::Reset => "reset",
        }
    }
}

/// The value of the manual key.
pub(crate) const FORCED: &str = "forced";
pub(crate) const DISABLED: &str = "disabled";
/// The manual key after a reset: this, then a token unique to that reset. A `reset`
/// message changes a member only when the key holds a token this instance has not seen, so
/// whoever can `PUBLISH` cannot reset (close, clear) anything.
pub(crate) const RESET: &str = "=reset:";

/// One message of the channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Message<'a> {
    pub(crate) kind: Kind,
    pub(crate) instance: &'a str,
    pub(crate) ms: u64,
    pub(crate) name: &'a str,
}

impl Message<'_> {
    pub(crate) fn encode(&self) -> String {
        let kind = self.kind.word();
        format!("{MAGIC} {kind} {} {} {}", self.instance, self.ms, self.name)
    }
}

/// The message a payload holds, or `None` for anything malformed or foreign.
pub(crate) fn parse(payload: &[u8]) -> Option<Message<'_>> {
    let text = std::str::from_utf8(payload).ok()?;
    let mut words = text.splitn(5, ' ');
    if words.next()? != MAGIC {
        return None;
    }
    let kind = match words.next()? {
        "open" => Kind::Open,
        "close" => Kind::Close,
        "forced" => Kind::Forced,
        "disabled" => Kind::Disabled,
        "reset" => Kind::Reset,
        _ => return None,
    };
    let instance = words.next()?;
    if !valid_id(instance) {
        return None;
    }
    let ms = words.next()?;
    if ms.is_empty() || ms.len() > 12 || !ms.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let ms: u64 = ms.parse().ok()?;
    if ms > MAX_MS || (kind == Kind::Open && ms == 0) {
        return None;
    }
    let name = words.next()?;
    if name.is_empty() {
        return None;
    }
    Some(Message {
        kind,
        instance,
        ms,
        name,
    })
}

/// An instance id or a prefix: 1 to 128 printable characters, no space, no braces (they
/// would break the hash tag).
pub(crate) fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| !c.is_whitespace() && !c.is_control() && c != '{' && c != '}')
}

/// The keys of one breaker name.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    pub(crate) open: String,
    pub(crate) probe: String,
    pub(crate) trips: String,
    pub(crate) manual: String,
    /// A cluster: the sharded channel of the name's slot (`SPUBLISH`/`SSUBSCRIBE`, on the
    /// name's shard; see `slots`). One node: none, every name shares the fleet's channel.
    pub(crate) channel: Option<Arc<str>>,
    tag: String,
}

impl Keys {
    pub(crate) fn new(prefix: &str, name: &str, slots: Option<&SlotChannels>) -> Keys {
        let tag = format!("{{{prefix}:{name}}}");
        Keys {
            open: format!("{tag}:open"),
            probe: format!("{tag}:probe"),
            trips: format!("{tag}:trips"),
            manual: format!("{tag}:manual"),
            channel: slots.map(|s| s.channel(&tag)),
            tag,
        }
    }

    /// The trip key of one instance.
    pub(crate) fn trip(&self, instance: &str) -> String {
        format!("{}:trip:{instance}", self.tag)
    }
}

/// The fleet's channel.
pub(crate) fn channel(prefix: &str) -> String {
    format!("{prefix}:fleet")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn messages_round_trip() {
        for kind in [
            Kind::Open,
            Kind::Close,
            Kind::Forced,
            Kind::Disabled,
            Kind::Reset,
        ] {
            let m = Message {
                kind,
                instance: "eu-1:4242",
                ms: if kind == Kind::Open { 1500 } else { 0 },
                name: "payments::charge with spaces",
            };
            assert_eq!(parse(m.encode().as_bytes()), Some(m));
        }
    }

    #[test]
    fn foreign_and_malformed_messages_are_none() {
        for bad in [
            "",
            "hello",
            "breaker-fleet/2 open a 10 n",
            "breaker-fleet/1 shut a 10 n",
            "breaker-fleet/1 open a 10",
            "breaker-fleet/1 open a 10 ",
            "breaker-fleet/1 open a -10 n",
            "breaker-fleet/1 open a +10 n",
            "breaker-fleet/1 open a 0 n",
            "breaker-fleet/1 open a 99999999999999 n",
            "breaker-fleet/1 open  10 n",
            "breaker-fleet/1 open {a} 10 n",
        ] {
            assert_eq!(parse(bad.as_bytes()), None, "{bad:?}");
        }
        assert_eq!(parse(&[0xff, 0xfe]), None);
    }

    #[test]
    fn keys_share_one_hash_tag() {
        let k = Keys::new("breaker", "db::query", None);
        for key in [&k.open, &k.probe, &k.trips, &k.trip("i-1")] {
            assert!(key.starts_with("{breaker:db::query}:"), "{key}");
        }
    }

    proptest! {
        #[test]
        fn random_payloads_never_panic(payload in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse(&payload);
        }

        #[test]
        fn random_text_after_the_magic_never_panics(rest in ".{0,80}") {
            let payload = format!("{MAGIC} {rest}");
            if let Some(m) = parse(payload.as_bytes()) {
                prop_assert!(valid_id(m.instance));
                prop_assert!(m.ms <= MAX_MS);
                prop_assert!(!m.name.is_empty());
            }
        }
    }
}
