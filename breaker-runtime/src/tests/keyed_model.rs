//! A property test of the keyed map against what it promises, driven by what an adversary
//! sends: random sequences of calls to a few steady keys, floods of one-shot failing keys
//! (made-up hosts, short or 1 KB long), an operator forcing keys open or disabling them and releasing them, time
//! passing and sweeps, a caller holding keys' breakers, under `max_keys`, `max_open_percent` and, at random, a dry run.
//! After every step:
//! - the map holds at most `max_keys` keys, none kept longer than 256 bytes;
//! - a key under manual control is in the map, in the state the operator set;
//! - the `max_open` places taken are exactly the keys in the map that are open or
//!   half-open (no place kept by a key that went, none lost);
//! - no key has a call in flight (every call here has finished: a dry run's shadows too);
//! - once nobody called them for `idle` (two sweeps apart), no key but the operator's and
//!   the ones that hold a failure streak or window is left.

use std::{collections::BTreeMap, time::Duration};

use proptest::prelude::*;

use crate::{Config, KeyedBreaker, State};

#[derive(Debug, Clone)]
enum Op {
    /// A call to steady key `i`: a success or a failure.
    Call(u8, bool),
    /// `n` made-up keys, each failing once (an attacker's, or decommissioned hosts); long
    /// ones (1 KB sharing all but their last bytes) with `true`.
    Flood(u16, bool),
    /// The operator forces steady key `i` open (or disables it).
    Force(u8, bool),
    /// The operator resets steady key `i` (manual control ends).
    Release(u8),
    /// Time passes, in seconds.
    Advance(u16),
    /// `retain_active()`.
    Sweep,
    /// The caller keeps steady key `i`'s breaker (as `breaker(&key)` hands it out).
    Hold(u8),
    /// The caller calls the `i`th breaker it holds (maybe detached by now), failing.
    CallHeld(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..8, any::<bool>()).prop_map(|(i, ok)| Op::Call(i, ok)),
        2 => (1u16..200, any::<bool>()).prop_map(|(n, long)| Op::Flood(n, long)),
        1 => (0u8..8, any::<bool>()).prop_map(|(i, open)| Op::Force(i, open)),
        1 => (0u8..8).prop_map(Op::Release),
        2 => (1u16..400).prop_map(Op::Advance),
        1 => Just(Op::Sweep),
        1 => (0u8..8).prop_map(Op::Hold),
        1 => any::<u8>().prop_map(Op::CallHeld),
    ]
}

const IDLE: Duration = Duration::from_secs(60);

/// What the long made-up keys share: all but their last bytes.
fn long_prefix() -> &'static str {
    static PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PREFIX.get_or_init(|| "x".repeat(1_000))
}

fn check(
    k: &KeyedBreaker<String>,
    max_keys: usize,
    manual: &BTreeMap<String, State>,
) -> Result<(), TestCaseError> {
    let (entries, taken) = k.entries();
    prop_assert!(entries.len() <= max_keys, "{} keys", entries.len());
    for (key, _) in &entries {
        prop_assert!(
            key.len() <= crate::name::LONGEST_KEY,
            "a key kept whole: {} bytes",
            key.len()
        );
    }
    prop_assert_eq!(entries.len(), k.len());
    for (key, state) in manual {
        let found = entries.iter().find(|(k, _)| k == key);
        prop_assert!(found.is_some(), "the operator's `{}` was evicted", key);
        prop_assert_eq!(found.unwrap().1.shared.core.peek(), *state);
    }
    let open = entries
        .iter()
        .filter(|(_, b)| matches!(b.shared.core.peek(), State::Open | State::HalfOpen))
        .count();
    prop_assert_eq!(
        taken,
        Some(open),
        "max_open places against open keys in the map"
    );
    for (key, b) in &entries {
        prop_assert_eq!(
            b.shared.core.calls_in_flight(),
            0,
            "`{}` has a call in flight",
            key
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn the_keyed_map_keeps_its_promises_against_an_adversary(
        max_keys in 4usize..40,
        percent in 5u32..50,
        dry_run in any::<bool>(),
        ops in prop::collection::vec(op(), 1..120),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(async {
            let config = Config::default()
                .threshold(1)
                .cool_off(Duration::from_secs(5))
                .max_keys(max_keys)
                .max_open_percent(percent)
                .dry_run(dry_run)
                .idle(IDLE);
            let k = KeyedBreaker::<String>::new("keyed::model", config);
            let mut manual: BTreeMap<String, State> = BTreeMap::new();
            let mut fresh = 0u32;
            let mut held = Vec::new();
            for op in ops {
                match op {
                    Op::Call(i, ok) => {
                        let key = format!("steady-{i}");
                        let _ = k.call_sync(&key, || if ok { Ok(()) } else { Err(()) });
                    }
                    Op::Flood(n, long) => {
                        for _ in 0..n {
                            fresh += 1;
                            let key = format!("made-up-{fresh}");
                            let key = if long { format!("{}{key}", long_prefix()) } else { key };
                            let _ = k.call_sync(&key, || Err::<(), _>(()));
                        }
                    }
                    Op::Force(i, open) => {
                        let key = format!("steady-{i}");
                        let handle = k.breaker(&key).handle();
                        // Only a breaker in the map: one made for a full map is not kept.
                        if k.contains(&key) {
                            if open {
                                handle.force_open();
                            } else {
                                handle.disable();
                            }
                            let state = if open { State::ForcedOpen } else { State::Disabled };
                            manual.insert(key, state);
                        }
                    }
                    Op::Release(i) => {
                        let key = format!("steady-{i}");
                        if manual.remove(&key).is_some() {
                            k.breaker(&key).handle().reset();
                        }
                    }
                    Op::Advance(secs) => {
                        tokio::time::advance(Duration::from_secs(u64::from(secs))).await;
                    }
                    Op::Sweep => k.retain_active(),
                    Op::Hold(i) => held.push(k.breaker(&format!("steady-{i}"))),
                    Op::CallHeld(i) => {
                        if let Some(b) = held.get(usize::from(i) % held.len().max(1)) {
                            let _ = b.call_sync(|| Err::<(), _>(()));
                        }
                    }
                }
                check(&k, max_keys, &manual)?;
            }
            // Nobody calls for `idle`, twice: only the operator's keys and the ones holding
            // a failure streak (closed keys held back by `max_open`) are left.
            for _ in 0..2 {
                tokio::time::advance(IDLE + Duration::from_secs(1)).await;
                k.retain_active();
            }
            check(&k, max_keys, &manual)?;
            let (entries, _) = k.entries();
            for (key, b) in &entries {
                let core = &b.shared.core;
                let kept = manual.contains_key(key)
                    || (core.peek() == State::Closed && !core.is_fresh(&b.shared.clock));
                prop_assert!(kept, "`{}` ({:?}) outlived idle", key, core.peek());
            }
            Ok(())
        })?;
    }
}
