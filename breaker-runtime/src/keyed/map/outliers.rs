//! Outlier detection's walk (`crate::outliers`): every interval, each key's counts read and
//! compared with the last reading, the keys with outcomes handed to the decision, the
//! outliers ejected.
//!
//! The walk reads every entry of the set: "keys with traffic" cannot be found otherwise
//! without a write on the call path (the sweep's `touched` flag is its own, and cleared by
//! it). Reading a key is a few loads (its word, its counters' stripes); measured, a walk of
//! 100 000 keys takes 13 ms an interval (`outliers::tests::a_walk_of_100_000_keys`,
//! release build). What the detector keeps of a key is in its entry ([`Seen`]), so it never
//! holds more than the keys the map holds, and a key evicted or swept is forgotten with it.

use std::{sync::atomic::Ordering::Relaxed, time::Duration};

use super::{entry::Node, Map};
use crate::{
    config::OutlierPolicy,
    events::Cause,
    keyed::BreakerKey,
    outliers::{
        detect::{decide, ejection_time, Census, Ejection, Rule, Sample},
        task::{Detector, Slot},
        Seen,
    },
    State,
};

impl<K: BreakerKey> Detector for Map<K> {
    fn interval(&self) -> Option<Duration> {
        let settings = self.live.resolved();
        settings
            .policy
            .outliers
            .map(|o| Duration::from_nanos(o.interval))
    }

    fn slot(&self) -> &Slot {
        &self.outliers
    }

    fn is_empty(&self) -> bool {
        self.len.load(Relaxed) == 0
    }

    /// One interval: O(keys in the map) to read them, O(k log k) to judge the k with
    /// outcomes, then one transition per ejection.
    fn detect(&self) {
        let settings = self.live.resolved();
        let Some(rules) = settings.policy.outliers else {
            return;
        };
        let dry_run = settings.policy.overload.dry_run;
        drop(settings);
        // The first walk of a task started on a map with keys only takes the readings.
        let primed = self.outliers.primed.swap(true, Relaxed);
        let guard = self.guard();
        let mut samples = Vec::new();
        let mut nodes: Vec<(&Node<K>, bool)> = Vec::new();
        let mut census = Census {
            in_use: 0,
            admitting: 0,
            ejected: 0,
        };
        for node in self.index.iter(&guard) {
            let core = &node.breaker.shared.core;
            let state = core.peek();
            let now = core.counters.read();
            let seen = node.outlier.get_or_init(Box::default);
            let calls = now.calls.wrapping_sub(seen.calls.swap(now.calls, Relaxed));
            let successes = now
                .successes
                .wrapping_sub(seen.successes.swap(now.successes, Relaxed));
            let failures = now
                .failures
                .wrapping_sub(seen.failures.swap(now.failures, Relaxed));
            if !primed {
                continue;
            }
            let out = matches!(state, State::Open | State::HalfOpen);
            let ejected = out && seen.ejected.load(Relaxed);
            if !ejected {
                seen.ejected.store(false, Relaxed);
            }
            if calls > 0 || out || state == State::ForcedOpen {
                census.in_use += 1;
                census.admitting += usize::from(matches!(state, State::Closed | State::Disabled));
                census.ejected += usize::from(ejected);
            }
            let outcomes = successes.wrapping_add(failures);
            if outcomes > 0 {
                samples.push(Sample {
                    outcomes,
                    failures,
                    closed: state == State::Closed,
                });
                nodes.push((node, ejected));
            } else if !ejected {
                decay(seen);
            }
        }
        if !primed {
            return;
        }
        let mut chosen = vec![false; samples.len()];
        for e in decide(&samples, census, &rules) {
            chosen[e.index] = true;
            let (node, _) = nodes[e.index];
            self.eject(node, &e, samples[e.index].outcomes, &rules, dry_run);
        }
        for ((node, ejected), chosen) in nodes.iter().zip(chosen) {
            if !chosen
                && !ejected
                && let Some(seen) = node.outlier.get()
            {
                decay(seen);
            }
        }
    }
}

/// n falls by one for an interval in which the key is not ejected (A50), whatever its
/// traffic.
fn decay(seen: &Seen) {
    let n = seen.ejections.load(Relaxed);
    if n > 0 {
        seen.ejections.store(n - 1, Relaxed);
    }
}

impl<K: BreakerKey> Map<K> {
    /// Ejects `node`'s key (in a dry run, says it would).
    fn eject(
        &self,
        node: &Node<K>,
        e: &Ejection,
        calls: u64,
        rules: &OutlierPolicy,
        dry_run: bool,
    ) {
        let Some(seen) = node.outlier.get() else {
            return; // not reached: every key walked has one
        };
        let n = seen.ejections.load(Relaxed).saturating_add(1);
        let open_for = Duration::from_nanos(ejection_time(n, rules, self.outliers.draw()));
        let cause = Cause::Outlier {
            failed: e.failed,
            calls,
            threshold: e.threshold,
            open_for,
        };
        let breaker = &node.breaker;
        if dry_run {
            let rule = match e.rule {
                Rule::SuccessRate => "success rate",
                Rule::FailurePercentage => "failure percentage",
            };
            tracing::warn!(
                target: "breaker",
                breaker = breaker.name(),
                rule,
                failed = e.failed,
                calls,
                threshold = e.threshold,
                open_for_ms = open_for.as_millis() as u64,
                "circuit breaker `{}` would eject (dry run) for {}: {cause}",
                crate::name::Escaped(breaker.name()),
                crate::error::Human(open_for),
            );
            return;
        }
        if breaker.shared.core.eject(cause, &breaker.shared.clock) {
            seen.ejections.store(n, Relaxed);
            seen.ejected.store(true, Relaxed);
        }
    }
}

#[cfg(all(test, not(breaker_loom)))]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::{Config, KeyedBreaker, Outliers};

    /// Keys the detector keeps something of.
    fn tracked(k: &KeyedBreaker<String>) -> usize {
        let guard = k.inner.guard();
        k.inner
            .index
            .iter(&guard)
            .filter(|n| n.outlier.get().is_some())
            .count()
    }

    /// A hostile stream of keys (each called once, never again) does not grow what the
    /// detector keeps beyond the keys the map holds: it keeps it in their entries.
    #[tokio::test(start_paused = true)]
    async fn a_hostile_key_stream_does_not_grow_the_detectors_memory() {
        let config = Config::default()
            .outliers(Outliers::default())
            .max_keys(1_000);
        let k = KeyedBreaker::<String>::new("outliers::hostile", config);
        assert!(k.inner.outliers.running());
        for round in 0..20 {
            for i in 0..2_500 {
                let _ = k.call_sync(&format!("k{round}-{i}"), || Ok::<_, ()>(()));
            }
            tokio::time::sleep(std::time::Duration::from_secs(5)).await;
            assert!(k.len() <= 1_000);
            assert!(tracked(&k) <= k.len(), "{} > {}", tracked(&k), k.len());
        }
        tokio::time::sleep(std::time::Duration::from_secs(10)).await;
        assert!(tracked(&k) > 0, "the detector did walk the keys");
        assert!(tracked(&k) <= k.len());
    }

    /// The cost of one interval's walk over 100 000 keys, each called in the interval.
    /// `cargo test -p breaker-runtime --release --lib a_walk_of_100_000_keys -- --ignored
    /// --nocapture`.
    #[test]
    #[ignore = "a measurement"]
    fn a_walk_of_100_000_keys() {
        let config = Config::default()
            .outliers(Outliers::default())
            .max_keys(100_000);
        let k = KeyedBreaker::<String>::new("outliers::walk", config);
        let keys: Vec<String> = (0..100_000)
            .map(|i| format!("10.{}.{}.{}:80", i >> 16, (i >> 8) & 255, i & 255))
            .collect();
        let mut best = std::time::Duration::MAX;
        for _ in 0..5 {
            for key in &keys {
                for _ in 0..2 {
                    let _ = k.call_sync(key.as_str(), || Ok::<_, ()>(()));
                }
            }
            let t = Instant::now();
            k.inner.detect();
            best = best.min(t.elapsed());
        }
        println!("a walk of {} keys: {best:?}", k.len());
    }
}
