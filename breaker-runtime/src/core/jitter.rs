//! The random extra on a cool-off, so a fleet does not probe on one tick.

/// A per-breaker seed for jitter: std's `RandomState` is keyed from the OS once per thread,
/// which is all the randomness jitter needs (no crate for ten lines).
pub(super) fn seed(name: &str) -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(name) | 1
}

/// splitmix64: fast, well distributed, good enough to spread a fleet's probes.
pub(super) fn next_random(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
