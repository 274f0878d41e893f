//! Time, as the engine sees it: nanoseconds since the breaker was created.
//!
//! The engine never reads a clock itself; it asks a [`Clock`] only on the paths whose policy
//! needs the time (open state, half-open leases, slow calls, time windows). The production
//! clock is `tokio::time::Instant`, so `tokio::time::pause()` and `advance()` drive every
//! transition in tests; the model-checking tests use a fake one.

use std::{
    hash::{Hash, Hasher},
    sync::{
        atomic::{AtomicU8, Ordering::*},
        OnceLock,
    },
};

use tokio::time::Instant;

/// Nanoseconds since the breaker's creation. `u64` holds 584 years; every addition on it
/// saturates, so no configured duration can overflow it.
pub(crate) type Nanos = u64;

/// A source of time for the engine.
pub trait Clock {
    /// Now, in nanoseconds since the breaker's creation.
    fn now(&self) -> Nanos;
}

/// `tokio::time::Instant`, measured from the breaker's creation: 8 bytes, the creation as
/// [`read`] measures time.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    base: Nanos,
}

impl TokioClock {
    pub(crate) fn new() -> Self {
        Self {
            base: read(Instant::now()),
        }
    }
}

impl Clock for TokioClock {
    #[inline]
    fn now(&self) -> Nanos {
        // Saturating: a breaker created under one paused runtime may be read under another
        // whose clock stands earlier; time then reads as zero rather than panicking.
        read(Instant::now()).saturating_sub(self.base)
    }
}

/// How this process turns an `Instant` into nanoseconds, decided at its first reading:
/// [`RAW`] ([`raw_nanos`], checked against `Instant`'s own arithmetic) or [`SINCE`]
/// (`Instant`'s subtraction from [`ORIGIN`]). One byte, so the common case costs a load and
/// a compare.
static READING: AtomicU8 = AtomicU8::new(UNDECIDED);
const UNDECIDED: u8 = 0;
const RAW: u8 = 1;
const SINCE: u8 = 2;
/// Where the raw reading is refused: ten years before the first reading, so the clock of
/// any runtime paused later still reads after it.
static ORIGIN: OnceLock<Instant> = OnceLock::new();

/// `t` in nanoseconds from this process's fixed origin.
#[inline(always)]
fn read(t: Instant) -> Nanos {
    if READING.load(Relaxed) == RAW {
        // `Some` whenever it was at the check: the shape is the type's.
        if let Some(n) = raw_nanos(t) {
            return n;
        }
    }
    read_slow(t)
}

#[cold]
#[inline(never)]
fn read_slow(t: Instant) -> Nanos {
    if READING.load(Acquire) == UNDECIDED {
        let raw = raw_nanos(t).is_some() && raw_reading_agrees(t);
        if !raw {
            let ten_years = std::time::Duration::from_secs(10 * 365 * 86_400);
            ORIGIN.get_or_init(|| t.checked_sub(ten_years).unwrap_or(t));
        }
        // Every thread decides the same; `Release` publishes `ORIGIN` with it.
        READING.store(if raw { RAW } else { SINCE }, Release);
    }
    match (READING.load(Acquire), raw_nanos(t)) {
        (RAW, Some(n)) => n,
        _ => {
            let origin = *ORIGIN.get_or_init(|| t);
            to_nanos(t.saturating_duration_since(origin))
        }
    }
}

/// An `Instant` as nanoseconds from its own origin, read from the two numbers its `Hash`
/// writes (seconds, then nanoseconds: every platform std supports stores a monotonic
/// instant so, `Timespec` or a `Duration`); `None` if it writes anything else.
///
/// Why not `duration_since`: on a refusal the time is the one thing an open breaker must
/// read, and std's subtraction (`sub_timespec`, its `Option` and `Duration::new`'s carry)
/// costs about 50 instructions, more than the rest of the refusal's bookkeeping; this is a
/// multiply and an add. Whether std hashes an `Instant` this way is not a documented
/// promise, so [`read`] checks it once against `Instant`'s own arithmetic and keeps the
/// subtraction where it disagrees. Everything here inlines to two loads: the shape
/// checks fold away at compile time.
#[inline(always)]
fn raw_nanos(t: impl Hash) -> Option<u64> {
    let mut fields = Fields::default();
    t.hash(&mut fields);
    match fields {
        Fields {
            secs: Some(secs),
            nanos: Some(nanos),
            odd: false,
        } if nanos < 1_000_000_000 => Some(
            secs.saturating_mul(1_000_000_000)
                .saturating_add(u64::from(nanos)),
        ),
        _ => None,
    }
}

/// Whether [`raw_nanos`] measures what `Instant` does: the same nanoseconds between `base`
/// and two later instants (one with a carry into the seconds), and no reading past them.
fn raw_reading_agrees(base: Instant) -> bool {
    let steps = [
        std::time::Duration::new(1, 999_999_999),
        std::time::Duration::new(86_400 * 365, 1),
    ];
    steps.iter().all(|&step| {
        let Some(later) = base.checked_add(step) else {
            return false;
        };
        match (raw_nanos(base), raw_nanos(later)) {
            (Some(a), Some(b)) => b.checked_sub(a) == Some(to_nanos(step)),
            _ => false,
        }
    })
}

/// The numbers an `Instant`'s `Hash` writes, when they are one `u64`/`i64` then one `u32`.
#[derive(Default)]
struct Fields {
    secs: Option<u64>,
    nanos: Option<u32>,
    /// Something else was written: another shape, not to be read as time.
    odd: bool,
}

impl Hasher for Fields {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, _: &[u8]) {
        self.odd = true;
    }
    fn write_u64(&mut self, n: u64) {
        match self.secs {
            None if self.nanos.is_none() => self.secs = Some(n),
            _ => self.odd = true,
        }
    }
    fn write_i64(&mut self, n: i64) {
        // A negative seconds count (an origin after the instant) is not a shape we read.
        match u64::try_from(n) {
            Ok(n) => self.write_u64(n),
            Err(_) => self.odd = true,
        }
    }
    fn write_u32(&mut self, n: u32) {
        match (self.secs, self.nanos) {
            (Some(_), None) => self.nanos = Some(n),
            _ => self.odd = true,
        }
    }
}

/// A duration in nanoseconds, saturating at `u64::MAX` (`Duration::MAX` is accepted).
#[inline]
pub(crate) fn to_nanos(d: std::time::Duration) -> Nanos {
    d.as_secs()
        .saturating_mul(1_000_000_000)
        .saturating_add(u64::from(d.subsec_nanos()))
}

#[cfg(all(test, not(breaker_loom)))]
mod tests {
    use std::time::Duration;

    use super::*;

    /// The fast reading is what this platform uses (else the benchmarks measure the other).
    #[test]
    fn this_platforms_instant_is_read_without_a_subtraction() {
        let _ = TokioClock::new();
        assert_eq!(READING.load(Relaxed), RAW);
        assert_eq!(std::mem::size_of::<TokioClock>(), 8);
    }

    /// Both readings agree to the nanosecond, carries into the seconds included.
    #[tokio::test(start_paused = true)]
    async fn the_fast_reading_agrees_with_instant_arithmetic() {
        let clock = TokioClock::new();
        let origin = Instant::now();
        for step in [1, 999_999_999, 1_000_000_001, 3_600_000_000_000, 7] {
            tokio::time::advance(Duration::from_nanos(step)).await;
            let slow = to_nanos(Instant::now().saturating_duration_since(origin));
            assert_eq!(clock.now(), slow);
        }
        assert!(clock.now() >= 3_600_000_000_000);
    }

    /// Anything but one 64-bit number then one `u32` below a second is not read as time.
    #[test]
    fn other_shapes_are_not_read_as_time() {
        assert_eq!(raw_nanos((5u64, 7u32)), Some(5_000_000_007));
        assert_eq!(raw_nanos((5i64, 7u32)), Some(5_000_000_007));
        assert_eq!(raw_nanos((-5i64, 7u32)), None);
        assert_eq!(raw_nanos((7u32, 5u64)), None);
        assert_eq!(raw_nanos((5u64, 1_000_000_000u32)), None);
        assert_eq!(raw_nanos((5u64, 7u32, 1u32)), None);
        assert_eq!(raw_nanos(5u64), None);
        assert_eq!(raw_nanos("5"), None);
    }
}

/// A clock the tests set by hand.
#[cfg(test)]
#[derive(Debug, Default)]
pub(crate) struct FakeClock(pub(crate) std::cell::Cell<Nanos>);

#[cfg(test)]
impl Clock for FakeClock {
    fn now(&self) -> Nanos {
        self.0.get()
    }
}
