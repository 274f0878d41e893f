//! Sweeps: idle breakers dropped as new keys arrive, a step per new key.
//!
//! Recency is kept without a clock read per call: a call sets its entry's `touched` flag
//! (a load, and a store only if it was clear, once per sweep interval: the line is shared
//! read-only between sweeps); a sweep, run when a new key arrives, stamps touched entries
//! with the time of the sweep and clears the flag. So "idle" is measured between sweeps: an
//! entry untouched since its last stamp for longer than `idle` goes; one touched since the
//! previous sweep counts as used at this one (kept up to one sweep interval longer than
//! `idle`, never dropped earlier). A sweep walks every entry, one shard at a time, at most
//! four times per `idle`, spread over new keys: each looks at no more than [`SWEEP_STEP`]
//! entries (1 024), so a map of 100 000 keys is swept by 100 new keys, never by one caller
//! (`retain_active` sweeps everything at once).

use std::sync::{atomic::Ordering::Relaxed, TryLockError};

use papaya::{Guard, LocalGuard};

use super::{
    entry::{ByBreaker, TOUCHED},
    evict::evictable_when_idle,
    Map, SHARDS,
};
use crate::{keyed::BreakerKey, sync::lock};

/// Entries a new key's share of a due sweep looks at, at most: a sweep of 100 000 keys is
/// spread over 100 new keys (a sweep that drops 20 000 idle breakers took about 18 ms on one
/// caller here, `benches/RESULTS.md`); a map smaller than this is swept whole by one.
const SWEEP_STEP: usize = 1024;

/// How many entries a sweep looks at under one guard: what it removes is freed when the
/// guard goes, while their breakers are still in cache.
const FREE_STEP: usize = 256;

/// How many records a sweep judges before it removes the idle ones among them.
const BATCH: usize = 32;

/// Where a sweep under way goes on: a shard, and the position in its records below which it
/// has not looked yet (records may have moved meanwhile: one moved by a removal may be looked
/// at twice or wait for the next sweep, never wrongly dropped, since each is judged when
/// looked at).
#[derive(Clone, Copy)]
pub(super) struct Cursor {
    shard: usize,
    below: usize,
}

impl Cursor {
    /// A sweep's start: the first shard, from its end.
    pub(super) const START: Cursor = Cursor {
        shard: 0,
        below: usize::MAX,
    };
}

impl<K: BreakerKey> Map<K> {
    /// Goes on with the sweep under way, or starts one when `idle / 4` has passed since the
    /// last started: idle breakers go at most that much later than `idle` (plus the new
    /// keys it takes to finish a sweep, one per [`SWEEP_STEP`] entries), and a stream of new
    /// keys sweeps at most 4 times per `idle`. Each new key looks at no more than
    /// [`SWEEP_STEP`] entries, so no caller pays for a whole large map.
    pub(super) fn sweep_if_due(&self, now: u64) {
        if !self.under_way.load(Relaxed) && !self.sweep_due(now) {
            return;
        }
        let mut sweeping = match self.sweeping.try_lock() {
            Ok(sweeping) => sweeping,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return, // another new key is sweeping
        };
        let cursor = match *sweeping {
            Some(cursor) => cursor,
            None if self.sweep_due(now) => {
                self.swept.store(now, Relaxed);
                Cursor::START
            }
            None => return, // a sweep just ended
        };
        let next = self.sweep_from(cursor, SWEEP_STEP, now);
        *sweeping = next;
        self.under_way.store(next.is_some(), Relaxed);
    }

    /// A quarter of `idle` has passed since the last sweep started.
    fn sweep_due(&self, now: u64) -> bool {
        now.saturating_sub(self.swept.load(Relaxed)) >= self.idle() / 4
    }

    /// Stamps touched entries with `now`; drops evictable ones unused for `idle`. Every
    /// shard, one locked at a time ([`KeyedBreaker::retain_active`](super::KeyedBreaker::retain_active)).
    pub(in crate::keyed) fn sweep(&self, now: u64) {
        self.sweep_from(Cursor::START, usize::MAX, now);
    }

    /// Sweeps from `cursor` until it has looked at `budget` entries: where to go on, `None`
    /// when it reached the end of the last shard.
    ///
    /// Under a guard of its own every [`FREE_STEP`] entries: what it removed is freed when
    /// that guard goes (by the last clone, which unlists the breaker; outside the shard's
    /// lock), while still in cache. One guard for a whole sweep freed 20 000 entries at its
    /// end, each read from memory a second time (`churn_profile sweep`: 22.1 ms against
    /// 17.1 ms; with [`sweep_shard`](Self::sweep_shard)'s batches, 15.1 ms).
    fn sweep_from(&self, mut cursor: Cursor, mut budget: usize, now: u64) -> Option<Cursor> {
        while cursor.shard < SHARDS {
            if budget == 0 {
                return Some(cursor);
            }
            let guard = self.guard();
            let mut step = budget.min(FREE_STEP);
            let looked_at = step;
            let next = self.sweep_shard(cursor.shard, cursor.below, &mut step, now, &guard);
            budget -= looked_at - step;
            guard.flush();
            drop(guard);
            cursor = match next {
                Some(below) => Cursor { below, ..cursor },
                None => Cursor {
                    shard: cursor.shard + 1,
                    below: usize::MAX,
                },
            };
        }
        None
    }

    /// [`sweep`](Self::sweep) of one shard, walking down from just below position `below`
    /// (from its end with `usize::MAX`), looking at no more than `budget` entries (less what
    /// it looked at): where to go on when the budget ran out, `None` when it reached the
    /// shard's start.
    ///
    /// Downwards, a removal (`swap_remove`) moves into the hole a record already looked at, so
    /// nothing is skipped. Each batch of [`BATCH`] records is judged first, with loads only,
    /// so the cache misses of its entries overlap; then its idle ones are removed, highest
    /// position first, which leaves the lower positions of the batch where they were.
    fn sweep_shard(
        &self,
        shard: usize,
        below: usize,
        budget: &mut usize,
        now: u64,
        guard: &LocalGuard<'_>,
    ) -> Option<usize> {
        let mut records = lock(&self.shards[shard].0);
        let mut hi = below.min(records.len());
        let mut going = [0usize; BATCH];
        while hi > 0 {
            if *budget == 0 {
                return Some(hi);
            }
            let lo = hi - hi.min(BATCH).min(*budget);
            *budget -= hi - lo;
            let mut n = 0;
            for i in (lo..hi).rev() {
                if self.idle_at(records[i], now, guard) {
                    going[n] = i;
                    n += 1;
                }
            }
            for &i in &going[..n] {
                self.unlist(records[i], guard);
                self.len.fetch_sub(1, Relaxed);
                records.swap_remove(i);
            }
            hi = lo;
        }
        None
    }

    /// Whether a sweep at `now` drops this record's entry: unused for `idle`, and evictable.
    /// Stamps an entry used since the last sweep with `now` instead.
    fn idle_at(&self, record: ByBreaker, now: u64, guard: &LocalGuard<'_>) -> bool {
        match self.index.get(&record, guard) {
            Some(node) => {
                let seen = node.seen.load(Relaxed);
                if seen & TOUCHED != 0 {
                    node.seen.store(now & !TOUCHED, Relaxed);
                    false
                } else {
                    now.saturating_sub(seen) >= self.idle() && evictable_when_idle(&node.breaker)
                }
            }
            None => true, // not reached: a record and its entry go together
        }
    }
}
