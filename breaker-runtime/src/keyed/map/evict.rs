//! Eviction at `max_keys`: one breaker out for each new key, chosen by sampling.
//!
//! Eviction is governor's rule: drop first what is indistinguishable from a fresh breaker
//! (closed, no failure streak, no failure in its window, no call in flight, its retry
//! budget full), read from the breaker itself. Idle ones go when a new key arrives (the only moment memory grows), so
//! there is no background task. An open or half-open breaker not called for `idle`, with
//! no call in flight, goes as a fresh one does (it protects nobody, and holds a `max_open`
//! place, freed as it leaves); one forced open or disabled never goes (an operator's hand
//! outlives eviction, whoever sends keys).
//!
//! At `max_keys` a new key evicts one breaker, chosen by sampling as Redis does: from each
//! shard in turn (under its lock), [`SAMPLE`] entries drawn at random (all of them in a
//! smaller shard); of all those, the least recently used evictable one goes, else the least
//! recently used closed one, else the least recently used of any state but manual control
//! (with one WARN a minute). So a new key at the bound looks at no more than `SHARDS × SAMPLE` = 128
//! entries, whatever the size, and never locks two shards at once. Accuracy: with up to 8
//! breakers per shard every breaker is in the sample, and the choice is exact. Beyond, with
//! a fraction `f` of the breakers evictable, the 128 draws hold one with probability
//! `1 − (1 − f)^128` (99.9 % from `f` = 5 %): a breaker with state goes before a fresh one
//! only when no draw found a fresh one. The one evicted is the least recently used of the
//! draws, not of the map: it is among the least recently used 2 % of the evictable ones
//! with probability `1 − 0.98^(128 f)` (92 % at `f` = 100 %, 23 % at `f` = 10 %).
//!

use std::{hash::BuildHasher, sync::atomic::Ordering::Relaxed};

use super::{entry::key_hasher, Map};
use crate::{keyed::BreakerKey, sync::lock, Breaker};

/// Entries a new key at the bound draws from a shard.
const SAMPLE: usize = 8;

impl<K: BreakerKey> Map<K> {
    /// At `max_keys`, removes one breaker to make room for a new one, by sampling (see the
    /// module's docs).
    pub(super) fn evict_one(&self, now: u64) -> Eviction {
        let mut manual = false;
        let found = self.evict_sampled(now, &mut manual);
        match found {
            Some(stateful) => Eviction::Evicted(stateful),
            None if manual && self.none_but_manual() => Eviction::AllManual,
            None => Eviction::Raced,
        }
    }

    /// Whether no entry of the map could be evicted but for manual control: every shard
    /// walked (rare: only when the sample drew nothing but manual keys).
    fn none_but_manual(&self) -> bool {
        let guard = self.guard();
        self.shards.iter().all(|shard| {
            lock(&shard.0).iter().all(|record| {
                self.index
                    .get(record, &guard)
                    .is_none_or(|node| node.breaker.shared.core.is_manual())
            })
        })
    }

    /// [`evict_one`](Self::evict_one)'s sample: whether the evicted breaker held state;
    /// `None` when nothing was drawn but keys under manual control (`manual` set), every
    /// shard is empty (every place is held by a key being inserted), or the chosen breaker
    /// went or moved meanwhile.
    fn evict_sampled(&self, now: u64, manual: &mut bool) -> Option<bool> {
        let guard = self.guard();
        let mut rng = key_hasher().hash_one(self.draws.fetch_add(1, Relaxed)) | 1;
        // The best candidate: (class, recency, shard, position, id), the least first.
        let mut best: Option<(u8, u64, usize, usize, usize)> = None;
        for (s, shard) in self.shards.iter().enumerate() {
            let records = lock(&shard.0);
            let n = records.len();
            for j in 0..n.min(SAMPLE) {
                let i = if n <= SAMPLE {
                    j
                } else {
                    rng = xorshift(rng);
                    (rng % n as u64) as usize
                };
                let by = records[i];
                let Some(node) = self.index.get(&by, &guard) else {
                    continue; // not reached: a record and its entry go together
                };
                if node.breaker.shared.core.is_manual() {
                    *manual = true; // an operator's hand outlives eviction
                    continue;
                }
                let idle = now.saturating_sub(node.recency()) >= self.idle();
                let rank = (class(&node.breaker, idle), node.recency());
                if best.is_none_or(|(c, r, ..)| rank < (c, r)) {
                    best = Some((rank.0, rank.1, s, i, by.id));
                }
            }
        }
        let (class, _, s, at, id_) = best?;
        let mut records = lock(&self.shards[s].0);
        // Looked at again under the lock: the record may have moved, a call may have come.
        let by = *records.get(at).filter(|record| record.id == id_)?;
        let node = self.index.get(&by, &guard)?;
        if node.breaker.shared.core.is_manual() {
            return None; // forced or disabled meanwhile
        }
        if class == 0 && !evictable_when_idle(&node.breaker) {
            return None;
        }
        self.unlist(by, &guard);
        records.swap_remove(at);
        Some(class > 0)
    }

    pub(super) fn warn_busy_eviction(&self, now: u64) {
        if self.warn_due(now) {
            tracing::warn!(
                target: "breaker",
                breaker = self.name.as_str(),
                max_keys = self.max_keys(),
                "keyed circuit breaker `{}` is at max_keys = {} with no breaker idle and \
                 fresh: evicting ones that hold state (raise max_keys)",
                self.name,
                self.max_keys()
            );
        }
    }
}

fn xorshift(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

/// Indistinguishable from a fresh breaker, with no call in flight: read from the breaker
/// itself, never from who holds it (a snapshot, the fleet, metrics or a user's clone holding
/// it for a moment says nothing about its state). A retry budget below full is state too:
/// evicted, the key's next call would find a whole budget (issue 40).
fn evictable(breaker: &Breaker) -> bool {
    let shared = &breaker.shared;
    shared.core.is_fresh(&shared.clock)
        && shared.core.calls_in_flight() == 0
        && shared.retry_budget_full()
}

/// Evictable once unused for `idle`: evictable, or open or half-open with no call in
/// flight (probes included) and its retry budget full. An open key nobody calls protects
/// nobody, and it holds one of the `max_open` places; forced open and disabled keys are
/// never evicted.
pub(super) fn evictable_when_idle(breaker: &Breaker) -> bool {
    let core = &breaker.shared.core;
    match core.peek() {
        crate::State::Open | crate::State::HalfOpen => {
            core.calls_in_flight() == 0 && breaker.shared.retry_budget_full()
        }
        crate::State::Closed => evictable(breaker),
        crate::State::ForcedOpen | crate::State::Disabled => false,
    }
}

/// What making room at `max_keys` did.
pub(super) enum Eviction {
    /// One breaker went; whether it held state.
    Evicted(bool),
    /// Nothing went this time (the shards are empty, or the one chosen moved): try again.
    Raced,
    /// Every key is under manual control: there is no room.
    AllManual,
}

/// Eviction order: 0 evictable (or open and unused for `idle`), 1 closed, 2 any other
/// state (the caller skips keys under manual control).
fn class(breaker: &Breaker, idle: bool) -> u8 {
    if evictable(breaker) || (idle && evictable_when_idle(breaker)) {
        0
    } else if breaker.shared.core.peek() == crate::State::Closed {
        1
    } else {
        2
    }
}

#[cfg(all(test, not(breaker_loom)))]
mod tests {
    use std::{
        sync::atomic::{AtomicU32, Ordering::Relaxed},
        time::Duration,
    };

    use crate::{Config, KeyedBreaker};

    /// Key 0 fails once and succeeds on its retry; new keys come in between (churn at
    /// `max_keys`, or none). The retries key 0 made: its attempts less
    /// its calls.
    async fn retries_of_key_0(max_keys: usize, churn: bool) -> u32 {
        let k = KeyedBreaker::<String>::new(
            "evict::retry_budget",
            Config::default()
                .retry(2)
                .threshold(u32::MAX)
                .backoff(Duration::from_millis(1))
                .max_keys(max_keys),
        );
        let attempts = AtomicU32::new(0);
        for i in 0..500 {
            let mut first = true;
            let _ = k
                .call_retried("0", || {
                    attempts.fetch_add(1, Relaxed);
                    let fail = std::mem::replace(&mut first, false);
                    async move {
                        if fail {
                            Err("503")
                        } else {
                            Ok(())
                        }
                    }
                })
                .await;
            // Key 0 stamped as used now, two new keys after it: the second finds key 0
            // the least recently used of the two keys in a map of two.
            k.retain_active();
            for new in ["a", "b"] {
                tokio::time::advance(Duration::from_millis(10)).await;
                if churn {
                    k.call_sync(&format!("new-{i}-{new}"), || Ok::<_, ()>(()))
                        .unwrap();
                }
            }
        }
        attempts.load(Relaxed) - 500
    }

    /// Issue 40, finding 8: eviction took a key whose retry budget was spent for a fresh one,
    /// and its next call got a whole budget again (126 retries without eviction, 500 with
    /// churn). A budget below full is state: a fresh key goes first.
    #[tokio::test(start_paused = true)]
    async fn eviction_keeps_a_spent_retry_budget() {
        let kept = retries_of_key_0(10, false).await;
        assert!(kept < 250, "the budget bounds the retries: {kept}");
        let churned = retries_of_key_0(2, true).await;
        // Alike but for the seconds the retries land in (the backoff is jittered).
        assert!(
            churned.abs_diff(kept) <= 10,
            "churn at max_keys refilled key 0's budget: {churned} retries against {kept}"
        );
    }
}
