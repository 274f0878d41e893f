//! "Did you mean …": the closest valid key for a misspelt one.

/// Names other libraries use for our keys, so a user coming from them is pointed home.
const ALIASES: &[(&str, &str)] = &[
    ("failure_threshold", "threshold"),
    ("failures", "threshold"),
    ("max_failures", "threshold"),
    ("cooldown", "cool_off"),
    ("cool_down", "cool_off"),
    ("reset_timeout", "cool_off"),
    ("wait_duration", "cool_off"),
    ("half_open_max_calls", "probes"),
    ("permitted_calls_in_half_open", "probes"),
    ("bulkhead", "max_concurrent"),
    ("max_in_flight", "max_concurrent"),
    ("concurrency", "max_concurrent"),
    ("error_rate", "failure_rate"),
    ("failure_rate_threshold", "failure_rate"),
    ("window_size", "window"),
    ("sliding_window", "window"),
    ("deadline", "timeout"),
    ("on_transition", "on_state_change"),
    ("predicate", "is_failure"),
    ("should_trip", "is_failure"),
    ("key_by", "key"),
    ("partition", "key"),
    ("per_key", "key"),
    ("max_breakers", "max_keys"),
    ("idle_timeout", "idle"),
    ("ttl", "idle"),
    ("classifier", "classify"),
    ("judge", "classify"),
    ("distributed", "fleet"),
];

/// The valid key closest to `unknown`, if one is close enough to be a likely typo.
pub(crate) fn closest<'a>(unknown: &str, keys: &[&'a str]) -> Option<&'a str> {
    let lower = unknown.to_ascii_lowercase().replace('-', "_");
    if let Some(key) = keys.iter().find(|k| **k == lower) {
        return Some(key);
    }
    if let Some((_, key)) = ALIASES.iter().find(|(alias, _)| *alias == lower) {
        return keys.iter().copied().find(|k| k == key);
    }
    // Allow roughly one edit per three letters: `treshold` and `cooloff` match, `foo` does not.
    let budget = (lower.chars().count() / 3).max(1);
    keys.iter()
        .map(|k| (distance(&lower, k), *k))
        .filter(|(d, _)| *d <= budget)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Levenshtein distance, counting an adjacent swap as one edit (`thershold`).
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    // d[i][j]: distance between a[..i] and b[..j].
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[i - 1][j] + 1)
                .min(d[i][j - 1] + 1)
                .min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = best;
        }
    }
    d[a.len()][b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: &[&str] = &[
        "threshold",
        "cool_off",
        "timeout",
        "probes",
        "max_concurrent",
    ];

    #[test]
    fn typos_and_aliases() {
        assert_eq!(closest("treshold", KEYS), Some("threshold"));
        assert_eq!(closest("thershold", KEYS), Some("threshold"));
        assert_eq!(closest("cooloff", KEYS), Some("cool_off"));
        assert_eq!(closest("cooldown", KEYS), Some("cool_off"));
        assert_eq!(closest("Timeout", KEYS), Some("timeout"));
        assert_eq!(closest("bulkhead", KEYS), Some("max_concurrent"));
        assert_eq!(closest("foo", KEYS), None);
        assert_eq!(closest("x", KEYS), None);
    }
}
