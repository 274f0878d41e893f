//! A cluster's channels: one sharded channel per hash slot, named so that it hashes to the
//! slot of the names it carries. A name's keys and its message then go in one `MULTI` on one
//! shard, as before, and an instance subscribes at most 16 384 channels however many names
//! it has.
//!
//! One channel per name made an instance with 100 000 members hold 100 000 subscriptions:
//! the redis client's set of them stalled the runtime for 15 to 36 ms each time it grew
//! (`examples/fleet_scale.rs 2 100000`, on the cluster), and keyed churn grew it without
//! end, since nothing unsubscribes a name that left. The cost: an instance hears the
//! messages of every name in its slots, not only its own; a message of a name without a
//! member here is dropped after one lookup, as on one node, where every message shares one
//! channel.
//!
//! Every instance must pick the same channel for a slot: it is the first candidate
//! `{prefix:ch:i}` (i = 0, 1, 2, …) that hashes to it. Finding all 16 384 takes about
//! 170 000 candidates (the coupon collector's n ln n), a few milliseconds, done once per
//! prefix in the process, off the runtime's threads.

use std::{
    collections::HashMap,
    fmt::Write,
    sync::{Arc, Mutex, OnceLock},
};

use redis::cluster_routing::Slot;

/// How many hash slots a Redis Cluster has.
const SLOTS: usize = 16_384;

pub(crate) struct SlotChannels {
    by_slot: HashMap<Slot, Arc<str>>,
}

impl SlotChannels {
    /// The table of `prefix`, made on first use (on a blocking thread) and shared after.
    pub(crate) async fn of_prefix(prefix: &str) -> Arc<SlotChannels> {
        static MADE: OnceLock<Mutex<HashMap<String, Arc<SlotChannels>>>> = OnceLock::new();
        let made = MADE.get_or_init(Mutex::default);
        if let Some(table) = crate::sync::lock(made).get(prefix) {
            return table.clone();
        }
        let owned = prefix.to_owned();
        let table = match tokio::task::spawn_blocking(move || SlotChannels::new(&owned)).await {
            Ok(table) => Arc::new(table),
            // Only a panic ends the blocking task early, and `new` has none to raise; made
            // here instead rather than leave the fleet without channels.
            Err(_) => Arc::new(SlotChannels::new(prefix)),
        };
        crate::sync::lock(made)
            .entry(prefix.to_owned())
            .or_insert(table)
            .clone()
    }

    fn new(prefix: &str) -> SlotChannels {
        let mut by_slot = HashMap::with_capacity(SLOTS);
        let mut candidate = String::with_capacity(prefix.len() + 16);
        let mut i: u32 = 0;
        while by_slot.len() < SLOTS {
            candidate.clear();
            // Writing into a String cannot fail.
            let _ = write!(candidate, "{{{prefix}:ch:{i}}}");
            by_slot
                .entry(Slot::for_key(&candidate))
                .or_insert_with(|| Arc::from(candidate.as_str()));
            i += 1;
        }
        SlotChannels { by_slot }
    }

    /// The channel of the slot that `tag` (a name's keys' hash tag) hashes to.
    pub(crate) fn channel(&self, tag: &str) -> Arc<str> {
        // Every slot has its channel (`new` stops only when all 16 384 are found); the tag
        // itself would hash to the same slot too.
        self.by_slot
            .get(&Slot::for_key(tag))
            .cloned()
            .unwrap_or_else(|| Arc::from(tag))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_channel_hashes_to_the_slot_of_the_names_it_carries() {
        let table = SlotChannels::new("breaker");
        for name in ["db::query", "payments::charge", "tax", "x:1", "x:2"] {
            let tag = format!("{{breaker:{name}}}");
            let channel = table.channel(&tag);
            assert_eq!(Slot::for_key(&*channel), Slot::for_key(&tag), "{name}");
            assert!(channel.starts_with("{breaker:ch:"), "{channel}");
        }
    }

    #[test]
    fn every_instance_picks_the_same_channel_for_a_slot() {
        let a = SlotChannels::new("t");
        let b = SlotChannels::new("t");
        assert_eq!(a.by_slot.len(), SLOTS);
        for (slot, channel) in &a.by_slot {
            assert_eq!(b.by_slot.get(slot), Some(channel));
        }
        // The first candidate of each slot: candidate 0 is its slot's channel.
        assert_eq!(&*a.channel("{t:ch:0}"), "{t:ch:0}");
    }

    #[test]
    fn many_names_share_at_most_one_channel_per_slot() {
        let table = SlotChannels::new("t");
        let channels: std::collections::HashSet<Arc<str>> = (0..50_000)
            .map(|i| table.channel(&format!("{{t:key:{i}}}")))
            .collect();
        let n = channels.len();
        assert!(n <= SLOTS, "{n}");
        // 50 000 names fill nearly every slot (1 - e^-3 of them).
        assert!(n > 15_000, "{n}");
    }
}
