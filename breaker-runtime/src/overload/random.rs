//! The draws behind throttling, the ramp and the limit's probe jitter: a splitmix64 generator
//! per thread, so drawing is a thread-local read and write, never a shared one.

use std::cell::Cell;

thread_local! {
    // 0 means "not seeded yet": the first draw on a thread seeds it.
    static STATE: Cell<u64> = const { Cell::new(0) };
}

/// A uniformly distributed `u64` from this thread's generator.
pub(crate) fn draw() -> u64 {
    STATE.with(|cell| {
        let mut state = cell.get();
        if state == 0 {
            state = seed();
        }
        let out = splitmix64(&mut state);
        cell.set(state);
        out
    })
}

/// A draw as a number in `[0, 1)`, from its top 53 bits (all an `f64` mantissa holds).
#[inline]
pub(crate) fn unit(draw: u64) -> f64 {
    const SCALE: f64 = 1.0 / (1u64 << 53) as f64;
    (draw >> 11) as f64 * SCALE
}

/// splitmix64 (Steele, Lea, Flood 2014): one add and two multiplies, well distributed, and
/// any state (even 0) is a valid one. Not cryptographic, and it need not be.
#[inline]
pub(crate) fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A per-thread seed: std's `RandomState` is keyed from the OS once per thread (then
/// incremented per instance), which is all the randomness a draw needs (no crate for it).
fn seed() -> u64 {
    use std::hash::BuildHasher;
    std::collections::hash_map::RandomState::new().hash_one(std::thread::current().id()) | 1
}
