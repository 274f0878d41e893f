//! Outlier ejection (`Config::outliers`) on a keyed breaker whose keys are a pool of hosts,
//! as DESIGN.md's *Outliers* states it: every interval, among the hosts with
//! `request_volume` outcomes in it (when `minimum_hosts` qualify), those whose success rate
//! is below their peers' mean − `stdev_factor` × σ are ejected, then (if set) those failing
//! `failure_percentage` of at least 50; never past `max_ejection_percent` of the hosts in
//! use counting the one ejected, never leaving fewer than half admitting; an ejection opens
//! for `base × n` (n the host's ejections, less one per interval not ejected, at most
//! `max`) and up to a tenth more (jitter, which the model bounds), then the host comes back
//! through a probe like any opening.
//!
//! The hosts' own rules never trip here (a threshold of 1 000 consecutive failures): every
//! opening is an ejection or a failed probe after one.

use proptest::prelude::*;

use super::ops::Ms;

/// The pool's knobs, fixed for a case.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolKnobs {
    pub request_volume: u32,
    pub minimum_hosts: u32,
    /// Tenths.
    pub stdev_factor: u32,
    pub failure_percentage: Option<u32>,
    pub max_ejection_percent: u32,
    pub base: Ms,
}

pub fn pool_knobs() -> impl Strategy<Value = PoolKnobs> {
    (
        1u32..6,
        1u32..5,
        0u32..25,
        prop::option::of(20u32..90),
        prop_oneof![Just(10u32), 20u32..70, Just(100)],
        (1u64..4).prop_map(|s| s * 1_000),
    )
        .prop_map(
            |(request_volume, minimum_hosts, stdev_factor, failure_percentage, max, base)| {
                PoolKnobs {
                    request_volume,
                    minimum_hosts,
                    stdev_factor,
                    failure_percentage,
                    max_ejection_percent: max,
                    base,
                }
            },
        )
}

/// The detection interval.
pub const INTERVAL: Ms = 2_500;
/// An ejection lasts at most this many bases.
pub const MAX_BASES: u64 = 3;
/// A host's cool-off after a failed probe.
pub const COOL_OFF: Ms = 1_000;
/// Outcomes the failure-percentage rule needs (Envoy's, A50's).
const FAILURE_PERCENTAGE_VOLUME: u64 = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostState {
    Closed,
    /// Refused surely before `from`, admitting surely from `to` (a probe then).
    Open {
        from: Ms,
        to: Ms,
    },
}

/// One host, as the detector and its breaker see it.
#[derive(Debug, Clone)]
pub struct Host {
    /// Since the last walk: calls (refusals included), successes, failures.
    calls: u64,
    successes: u64,
    failures: u64,
    pub state: HostState,
    /// n: its ejections, less one per interval not ejected.
    n: u32,
    /// Opened by an ejection and not closed since.
    ejected: bool,
}

pub struct Pool {
    pub k: PoolKnobs,
    /// The hosts made so far (a host comes into the map at its first call).
    pub hosts: Vec<Option<Host>>,
    /// The next walk.
    pub next_walk: Ms,
}

/// What the interval's walk decided (for the invariants the world checks on the real thing).
#[derive(Debug, Clone)]
pub struct Walk {
    pub in_use: usize,
    pub ejected: Vec<usize>,
    /// Hosts out by an ejection after the walk.
    pub out: usize,
}

impl Pool {
    pub fn new(k: PoolKnobs, hosts: usize) -> Pool {
        Pool {
            k,
            hosts: vec![None; hosts],
            next_walk: INTERVAL,
        }
    }

    /// A call to host `h` at `now`, answered `ok` if it runs. `admitted`: what the engine
    /// did, taken where the jitter leaves it open. Whether the model lets it through.
    pub fn call(&mut self, h: usize, ok: bool, now: Ms, admitted: bool) -> Result<bool, String> {
        let host = self.hosts[h].get_or_insert(Host {
            calls: 0,
            successes: 0,
            failures: 0,
            state: HostState::Closed,
            n: 0,
            ejected: false,
        });
        host.calls += 1;
        if let HostState::Open { from, to } = host.state {
            let runs = match (now < from, now >= to) {
                (true, _) => false,
                (_, true) => true,
                _ => admitted,
            };
            if runs != admitted {
                return Err(format!(
                    "host {h} at {now} ms, open from {from} until {from}..{to}: admitted {admitted}"
                ));
            }
            if !runs {
                // Still open: its end is later than now.
                host.state = HostState::Open {
                    from: now + 1,
                    to: to.max(now + 1),
                };
                return Ok(false);
            }
            // Back: this call is the probe (one, `success_threshold` 1).
            super::world::COVERED[4].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            host.state = match ok {
                true => HostState::Closed,
                false => HostState::Open {
                    from: now + COOL_OFF,
                    to: now + COOL_OFF,
                },
            };
        }
        match ok {
            true => host.successes += 1,
            false => host.failures += 1,
        }
        Ok(true)
    }

    /// The interval's walk at `now`. `took(h)`: whether the engine ejected host `h`, which
    /// decides between hosts of equal rates (the engine walks its map in an order of its own).
    pub fn walk(&mut self, now: Ms, took: impl Fn(usize) -> bool) -> Walk {
        let order = |a: &(f64, usize), b: &(f64, usize)| {
            let first = |h: usize| !took(h); // the engine's choice first
            a.0.total_cmp(&b.0).then(first(a.1).cmp(&first(b.1)))
        };
        self.next_walk = now + INTERVAL;
        let k = &self.k;
        let (mut in_use, mut admitting, mut ejected) = (0, 0, 0);
        // (host, outcomes, failures, closed)
        let mut samples = Vec::new();
        for (h, host) in self.hosts.iter_mut().enumerate() {
            let Some(host) = host else { continue };
            let out = matches!(host.state, HostState::Open { .. });
            host.ejected &= out;
            if host.calls > 0 || out {
                in_use += 1;
                admitting += usize::from(!out);
                ejected += usize::from(host.ejected);
            }
            let outcomes = host.successes + host.failures;
            if outcomes > 0 {
                samples.push((h, outcomes, host.failures, !out));
            }
            (host.calls, host.successes, host.failures) = (0, 0, 0);
        }
        let mut chosen: Vec<usize> = Vec::new();
        // Most hosts out already: the fault is likely the caller's, nothing is ejected.
        if admitting * 2 >= in_use {
            let rate = |o: u64, f: u64| (o - f) as f64 / o as f64;
            let mut candidates = Vec::new();
            let qualified: Vec<_> = samples
                .iter()
                .filter(|s| s.1 >= u64::from(k.request_volume))
                .collect();
            if !qualified.is_empty() && qualified.len() >= k.minimum_hosts as usize {
                let n = qualified.len() as f64;
                let rates: Vec<f64> = qualified.iter().map(|s| rate(s.1, s.2)).collect();
                let mean = rates.iter().sum::<f64>() / n;
                let variance = rates.iter().map(|r| (r - mean) * (r - mean)).sum::<f64>() / n;
                let factor = f64::from(k.stdev_factor) / 10.0;
                let threshold = mean - factor * variance.sqrt();
                let mut below: Vec<(f64, usize)> = qualified
                    .iter()
                    .zip(&rates)
                    .filter(|(s, r)| s.3 && **r < threshold - 1e-12)
                    .map(|(s, r)| (*r, s.0))
                    .collect();
                below.sort_by(order);
                candidates.extend(below.into_iter().map(|(_, h)| h));
            }
            if let Some(percent) = k.failure_percentage {
                let qualified: Vec<_> = samples
                    .iter()
                    .filter(|s| s.1 >= FAILURE_PERCENTAGE_VOLUME)
                    .collect();
                if qualified.len() >= k.minimum_hosts as usize {
                    let mut over: Vec<(f64, usize)> = qualified
                        .iter()
                        .filter(|s| s.3 && s.2 * 100 >= u64::from(percent) * s.1)
                        .map(|s| (rate(s.1, s.2), s.0))
                        .collect();
                    over.sort_by(order);
                    candidates.extend(over.into_iter().map(|(_, h)| h));
                }
            }
            for h in candidates {
                // The cap counts the one ejected; half the hosts in use still admit after it.
                let within_cap = (ejected + 1) * 100 <= k.max_ejection_percent as usize * in_use;
                let half_admit = admitting.saturating_sub(1) * 2 >= in_use;
                if !chosen.contains(&h) && within_cap && half_admit {
                    ejected += 1;
                    admitting -= 1;
                    chosen.push(h);
                }
            }
        }
        let (base, max) = (self.k.base, self.k.base * MAX_BASES);
        for (h, host) in self.hosts.iter_mut().enumerate() {
            let Some(host) = host else { continue };
            if chosen.contains(&h) {
                host.n += 1;
                host.ejected = true;
                let time = (base * u64::from(host.n)).min(max);
                host.state = HostState::Open {
                    from: now + time,
                    to: now + time + time / 10 + 1,
                };
            } else if !host.ejected {
                host.n = host.n.saturating_sub(1);
            }
        }
        let out = self.hosts.iter().flatten().filter(|h| h.ejected).count();
        Walk {
            in_use,
            ejected: chosen,
            out,
        }
    }
}
