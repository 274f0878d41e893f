//! The decision, pure: given each key's outcomes in the interval and how many keys admit,
//! which keys to eject; and how long an ejection lasts. No clock, no map, no randomness
//! but the draw it is given: every rule is tested here exhaustively.

use crate::config::OutlierPolicy;

/// Calls a key needs in an interval before the failure-percentage rule judges it (Envoy's
/// `failure_percentage_request_volume`, A50's default).
const FAILURE_PERCENTAGE_VOLUME: u64 = 50;

/// One key's interval, as the walk read it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Sample {
    /// Outcomes in the interval: successes and failures (refused, neutral and cancelled
    /// calls say nothing of the endpoint's health).
    pub(crate) outcomes: u64,
    pub(crate) failures: u64,
    /// Closed now: only a closed key can be ejected (an open one already is out).
    pub(crate) closed: bool,
}

impl Sample {
    fn success_rate(&self) -> f64 {
        if self.outcomes == 0 {
            return 1.0;
        }
        (self.outcomes - self.failures.min(self.outcomes)) as f64 / self.outcomes as f64
    }

    fn failed_percent(&self) -> f64 {
        100.0 * (1.0 - self.success_rate())
    }
}

/// The keys in use at this interval: called in it, or open, half-open or forced open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Census {
    pub(crate) in_use: usize,
    /// Of those, how many admit calls (closed or disabled).
    pub(crate) admitting: usize,
    /// Of those, how many are open from an ejection now.
    pub(crate) ejected: usize,
}

/// Which rule ejects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    SuccessRate,
    FailurePercentage,
}

/// One key to eject: its place in the samples, the rule, and the figures for the log.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Ejection {
    pub(crate) index: usize,
    pub(crate) rule: Rule,
    /// Percent of the key's outcomes that failed in the interval.
    pub(crate) failed: f64,
    /// The success rate (percent) below which the success-rate rule ejects (its peers'
    /// mean − factor × σ), or `100 − failure_percentage` for the other rule.
    pub(crate) threshold: f64,
}

/// Which keys to eject this interval: the success-rate rule's, then the
/// failure-percentage rule's, each lowest success rate first, each checked against the
/// cap with itself counted (`(ejected + 1) / in_use ≤ max_ejection_percent`); none while
/// fewer than half the keys in use admit, nor one that would leave fewer than half
/// admitting. O(k log k) for the k samples.
pub(crate) fn decide(samples: &[Sample], census: Census, rules: &OutlierPolicy) -> Vec<Ejection> {
    let mut out = Vec::new();
    if census.admitting * 2 < census.in_use {
        return out; // most keys are out already: the fault is likely ours, not theirs
    }
    let mut ejected = census.ejected;
    let mut admitting = census.admitting;
    let mut eject = |out: &mut Vec<Ejection>, e: Ejection| {
        if out.iter().any(|o| o.index == e.index) {
            return;
        }
        // After counting this one: Envoy #26877 counted before, and let 2 of 3 hosts go.
        let within_cap = (ejected + 1) * 100 <= rules.max_ejection_percent as usize * census.in_use;
        // And so that at least half the keys in use still admit after it.
        let half_admit = admitting.saturating_sub(1) * 2 >= census.in_use;
        if within_cap && half_admit {
            ejected += 1;
            admitting = admitting.saturating_sub(1);
            out.push(e);
        }
    };

    // Success rate: against the peers with enough outcomes.
    let qualified: Vec<usize> = (0..samples.len())
        .filter(|&i| samples[i].outcomes >= rules.request_volume)
        .collect();
    if qualified.len() >= rules.minimum_hosts && !qualified.is_empty() {
        let n = qualified.len() as f64;
        let rates: Vec<f64> = qualified
            .iter()
            .map(|&i| samples[i].success_rate())
            .collect();
        let mean = rates.iter().sum::<f64>() / n;
        let variance = rates.iter().map(|r| (r - mean) * (r - mean)).sum::<f64>() / n;
        let threshold = mean - rules.stdev_factor() * variance.sqrt();
        let mut below: Vec<(f64, usize)> = qualified
            .iter()
            .zip(&rates)
            // The margin: equal rates summed may round the mean a hair above them.
            .filter(|&(&i, &r)| samples[i].closed && r < threshold - 1e-12)
            .map(|(&i, &r)| (r, i))
            .collect();
        below.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for (_, i) in below {
            let e = Ejection {
                index: i,
                rule: Rule::SuccessRate,
                failed: samples[i].failed_percent(),
                threshold: threshold * 100.0,
            };
            eject(&mut out, e);
        }
    }

    // Failure percentage: an absolute bar, among keys with 50 outcomes.
    if let Some(percent) = rules.failure_percentage {
        let qualified: Vec<usize> = (0..samples.len())
            .filter(|&i| samples[i].outcomes >= FAILURE_PERCENTAGE_VOLUME)
            .collect();
        if qualified.len() >= rules.minimum_hosts {
            let mut over: Vec<(f64, usize)> = qualified
                .into_iter()
                .filter(|&i| {
                    let s = samples[i];
                    s.closed && s.failures.saturating_mul(100) >= u64::from(percent) * s.outcomes
                })
                .map(|i| (samples[i].success_rate(), i))
                .collect();
            over.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            for (_, i) in over {
                let e = Ejection {
                    index: i,
                    rule: Rule::FailurePercentage,
                    failed: samples[i].failed_percent(),
                    threshold: 100.0 - f64::from(percent),
                };
                eject(&mut out, e);
            }
        }
    }
    out
}

/// How long the n-th ejection lasts: `base × n`, at most `max` (and at least `base`), plus
/// `draw` taken modulo a tenth of that (plus one) as jitter. Nanoseconds.
pub(crate) fn ejection_time(n: u32, rules: &OutlierPolicy, draw: u64) -> u64 {
    let base = rules.base_ejection_time;
    let time = base
        .saturating_mul(u64::from(n.max(1)))
        .min(rules.max_ejection_time.max(base));
    time.saturating_add(draw % (time / 10 + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Outliers;

    fn rules() -> OutlierPolicy {
        Outliers::default().validate().unwrap()
    }

    /// `n` keys with `calls` outcomes each, the given failures.
    fn samples(calls: u64, failures: &[u64]) -> Vec<Sample> {
        failures
            .iter()
            .map(|&f| Sample {
                outcomes: calls,
                failures: f,
                closed: true,
            })
            .collect()
    }

    fn all_in(n: usize) -> Census {
        Census {
            in_use: n,
            admitting: n,
            ejected: 0,
        }
    }

    fn indices(e: &[Ejection]) -> Vec<usize> {
        e.iter().map(|e| e.index).collect()
    }

    /// Envoy's worked example: rates {50, 100, 100, 100, 100} give mean 90, σ 20, threshold
    /// 52: the 50 % host goes (with a cap that lets one of five go).
    #[test]
    fn envoys_worked_example() {
        let rules = OutlierPolicy {
            max_ejection_percent: 20,
            ..rules()
        };
        let s = samples(100, &[50, 0, 0, 0, 0]);
        let e = decide(&s, all_in(5), &rules);
        assert_eq!(indices(&e), [0]);
        assert_eq!(e[0].rule, Rule::SuccessRate);
        assert!((e[0].threshold - 52.0).abs() < 1e-9, "{}", e[0].threshold);
        assert!((e[0].failed - 50.0).abs() < 1e-9);
    }

    #[test]
    fn one_at_8_percent_among_twenty_at_a_tenth_is_the_only_one() {
        let mut f = vec![1; 20];
        f[7] = 80;
        let e = decide(&samples(1000, &f), all_in(20), &rules());
        assert_eq!(indices(&e), [7]);
    }

    #[test]
    fn three_degraded_of_twenty_at_most_two_worst_first() {
        let mut f = vec![1; 20];
        f[3] = 80;
        f[9] = 120;
        f[15] = 100;
        let e = decide(&samples(1000, &f), all_in(20), &rules());
        assert_eq!(indices(&e), [9, 15], "10 % of 20: two, the worst first");
    }

    #[test]
    fn the_cap_counts_the_ones_already_ejected() {
        let mut f = vec![1; 20];
        f[3] = 80;
        f[9] = 120;
        let census = Census {
            ejected: 1,
            ..all_in(20)
        };
        assert_eq!(indices(&decide(&samples(1000, &f), census, &rules())), [9]);
        let census = Census {
            ejected: 2,
            ..all_in(20)
        };
        assert!(decide(&samples(1000, &f), census, &rules()).is_empty());
    }

    /// Envoy #26877: with the cap checked before ejecting, 50 % of 3 hosts let two go.
    /// Checked after, one: and at 10 % of nine keys, none (no implicit "eject one").
    #[test]
    fn the_cap_is_checked_after_ejecting_and_never_ejects_one_regardless() {
        let rules = OutlierPolicy {
            max_ejection_percent: 50,
            minimum_hosts: 3,
            failure_percentage: Some(50),
            ..rules()
        };
        let e = decide(&samples(100, &[90, 90, 0]), all_in(3), &rules);
        assert_eq!(e.len(), 1, "{e:?}");
        let mut f = vec![0; 9];
        f[0] = 50;
        let e = decide(&samples(1000, &f), all_in(9), &self::rules());
        assert!(e.is_empty(), "10 % of 9 is no key: {e:?}");
        let e = decide(
            &samples(1000, &[50, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            all_in(10),
            &self::rules(),
        );
        assert_eq!(indices(&e), [0], "10 % of 10 is one");
    }

    #[test]
    fn all_failing_alike_is_no_outlier() {
        for failures in [0, 1, 500, 1000] {
            let e = decide(&samples(1000, &[failures; 20]), all_in(20), &rules());
            assert!(e.is_empty(), "{failures}: {e:?}");
        }
    }

    #[test]
    fn nothing_new_while_fewer_than_half_admit() {
        let mut f = vec![1; 20];
        f[7] = 500;
        let rules = OutlierPolicy {
            max_ejection_percent: 100,
            ..rules()
        };
        let census = Census {
            admitting: 9,
            ..all_in(20)
        };
        assert!(decide(&samples(1000, &f), census, &rules).is_empty());
        // Ten of twenty admit: ejecting one would leave fewer than half.
        let census = Census {
            admitting: 10,
            ..all_in(20)
        };
        assert!(decide(&samples(1000, &f), census, &rules).is_empty());
        let census = Census {
            admitting: 11,
            ..all_in(20)
        };
        assert_eq!(indices(&decide(&samples(1000, &f), census, &rules)), [7]);
    }

    /// As ejections lower the keys that admit, the one that would leave fewer than half is
    /// not made.
    #[test]
    fn ejections_stop_at_half_admitting() {
        let rules = OutlierPolicy {
            max_ejection_percent: 100,
            minimum_hosts: 1,
            failure_percentage: Some(10),
            ..rules()
        };
        let f = [50; 10];
        let e = decide(&samples(100, &f), all_in(10), &rules);
        assert_eq!(e.len(), 5, "five of ten still admit: {e:?}");
    }

    #[test]
    fn under_minimum_hosts_or_request_volume_nothing() {
        let mut f = vec![0; 4];
        f[0] = 50;
        let rules = OutlierPolicy {
            max_ejection_percent: 100,
            ..rules()
        };
        assert!(
            decide(&samples(1000, &f), all_in(4), &rules).is_empty(),
            "4 hosts"
        );
        let mut f = vec![0; 20];
        f[0] = 50;
        assert!(
            decide(&samples(99, &f), all_in(20), &rules).is_empty(),
            "99 calls"
        );
        assert_eq!(
            decide(&samples(100, &f), all_in(20), &rules).len(),
            1,
            "100 calls"
        );
        // Keys under the volume do not count as peers, and are never judged.
        let mut s = samples(1000, &[0; 5]);
        s.push(Sample {
            outcomes: 99,
            failures: 99,
            closed: true,
        });
        assert!(decide(&s, all_in(6), &rules).is_empty());
    }

    #[test]
    fn an_open_key_is_a_peer_but_is_not_ejected_again() {
        let mut s = samples(1000, &[1; 20]);
        s[4] = Sample {
            outcomes: 1000,
            failures: 300,
            closed: false,
        };
        assert!(decide(&s, all_in(20), &rules()).is_empty());
    }

    #[test]
    fn failure_percentage_is_off_unless_set_and_needs_50_outcomes() {
        // Everyone failing 90 %: no outlier by success rate, and by default no other rule.
        let f = [45u64; 10];
        let e = decide(&samples(50, &f), all_in(10), &rules());
        assert!(e.is_empty());
        let rules = OutlierPolicy {
            failure_percentage: Some(85),
            max_ejection_percent: 20,
            ..rules()
        };
        let e = decide(&samples(50, &f), all_in(10), &rules);
        assert_eq!(e.len(), 2, "the cap still holds: {e:?}");
        assert!(e.iter().all(|e| e.rule == Rule::FailurePercentage));
        assert!(decide(&samples(49, &[45; 10]), all_in(10), &rules).is_empty());
        // At exactly the percent: ejected ("at least").
        let mut f = vec![0u64; 10];
        f[2] = 85;
        assert_eq!(indices(&decide(&samples(100, &f), all_in(10), &rules)), [2]);
        f[2] = 84;
        assert!(decide(
            &samples(100, &f),
            all_in(10),
            &OutlierPolicy {
                stdev_factor_milli: 10_000,
                ..rules
            }
        )
        .is_empty());
    }

    #[test]
    fn a_key_both_rules_pick_is_ejected_once() {
        let rules = OutlierPolicy {
            failure_percentage: Some(50),
            max_ejection_percent: 100,
            ..rules()
        };
        let mut f = vec![0; 10];
        f[0] = 90;
        let e = decide(&samples(100, &f), all_in(10), &rules);
        assert_eq!(indices(&e), [0]);
        assert_eq!(e[0].rule, Rule::SuccessRate);
    }

    #[test]
    fn ejection_time_grows_with_n_caps_at_max_and_jitters_up_to_a_tenth() {
        let rules = OutlierPolicy {
            max_ejection_time: 100,
            base_ejection_time: 30,
            ..rules()
        };
        assert_eq!(ejection_time(1, &rules, 0), 30);
        assert_eq!(ejection_time(2, &rules, 0), 60);
        assert_eq!(ejection_time(3, &rules, 0), 90);
        assert_eq!(ejection_time(4, &rules, 0), 100);
        assert_eq!(ejection_time(u32::MAX, &rules, 0), 100);
        assert_eq!(ejection_time(1, &rules, 3), 33);
        assert_eq!(ejection_time(1, &rules, 4), 30, "jitter at most a tenth");
        assert_eq!(ejection_time(4, &rules, 10), 110);
        let secs = Outliers::default().validate().unwrap();
        assert_eq!(
            ejection_time(1, &secs, u64::MAX),
            30_000_000_000 + u64::MAX % 3_000_000_001
        );
    }
}
