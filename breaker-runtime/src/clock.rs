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

    /// A cheaper reading than [`now`](Self::now) for a refusal, when this clock has one and
    /// it says `until` is still more than its error away: then judging by it decides what
    /// [`now`](Self::now) would. It may lag `now` by that error, never lead it. `None`: read
    /// [`now`](Self::now).
    #[inline(always)]
    fn coarse_before(&self, until: Nanos) -> Option<Nanos> {
        let _ = until;
        None
    }
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

    #[inline(always)]
    fn coarse_before(&self, until: Nanos) -> Option<Nanos> {
        let (reading, margin) = coarse::read()?;
        let now = reading.checked_sub(self.base)?;
        (now.saturating_add(margin) < until).then_some(now)
    }
}

/// The kernel's coarse monotonic clock, for refusals on threads where tokio's time cannot be
/// paused.
///
/// Why: an open breaker's refusal must read the time (to know the cool-off has not ended, and
/// to say `retry_in`), and the precise reading, `clock_gettime(CLOCK_MONOTONIC)` through the
/// vDSO, is most of what a refusal costs (18-25 ns of 33 on the machine of
/// `benches/RESULTS.md`). `CLOCK_MONOTONIC_COARSE` is the same clock as of the kernel's last
/// tick (1-10 ms old), read in 4 ns: nothing to scale, no TSC.
///
/// When: tokio's `Instant::now()` is the paused clock of `tokio::time::pause` only inside a
/// runtime's context (a paused clock is a current-thread runtime's, and tokio reads it from
/// the thread's runtime context); everywhere else it is `std::time::Instant::now()`, which
/// is `CLOCK_MONOTONIC` on Linux. So a thread that is in no runtime's context and polls no
/// task reads the coarse clock; inside any runtime, tokio's clock as before, so paused time
/// drives every transition as it did. Asking costs two thread-local reads (no `Arc` clone
/// outside a runtime's context), where the answer is no.
///
/// Error: the coarse clock lags by one tick, a few on a virtual machine whose tick comes late;
/// [`TokioClock::coarse_before`] uses it only while the cool-off has more than twice the
/// clock's resolution left, and at least 20 ms, so the decision
/// to refuse is the precise clock's, and `retry_in` may read up to that lag long (never
/// short: a caller that waits it out finds the breaker admitting).
///
/// Checked once per process: the coarse clock must read within a second below the precise
/// one, in the nanoseconds [`read`] gives an `Instant` (the raw reading); otherwise, or on
/// another platform, it is never used.
#[cfg(all(target_os = "linux", not(breaker_loom)))]
mod coarse {
    use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

    use rustix::time::{clock_getres, clock_gettime, ClockId};

    use super::{Nanos, RAW, READING};

    /// Twice the coarse clock's resolution once it is known usable; [`UNUSABLE`] if it is
    /// not; 0 before the first asking.
    static MARGIN: AtomicU64 = AtomicU64::new(0);
    const UNUSABLE: u64 = u64::MAX;
    /// The least margin, whatever the clock's resolution says.
    const MARGIN_FLOOR: u64 = 20_000_000;

    /// The coarse reading and its margin, on a thread where tokio's time cannot be paused;
    /// `None` elsewhere.
    #[inline(always)]
    pub(super) fn read() -> Option<(Nanos, Nanos)> {
        let margin = MARGIN.load(Relaxed);
        if margin == UNUSABLE || !outside_tokio() {
            return None;
        }
        if margin == 0 {
            return decide();
        }
        Some((nanos(ClockId::MonotonicCoarse)?, margin))
    }

    /// No task is being polled on this thread and it is in no runtime's context.
    #[inline(always)]
    fn outside_tokio() -> bool {
        tokio::task::try_id().is_none()
            && matches!(tokio::runtime::Handle::try_current(), Err(e) if e.is_missing_context())
    }

    #[inline(always)]
    fn nanos(clock: ClockId) -> Option<Nanos> {
        let t = clock_gettime(clock);
        let secs = u64::try_from(t.tv_sec).ok()?;
        let nanos = u64::try_from(t.tv_nsec).ok()?;
        Some(secs.saturating_mul(1_000_000_000).saturating_add(nanos))
    }

    /// Whether the coarse clock reads the raw reading's nanoseconds (within a second below
    /// it), decided at the first asking; the first reading with it.
    #[cold]
    #[inline(never)]
    fn decide() -> Option<(Nanos, Nanos)> {
        // The raw reading must be decided first: it is the domain compared against.
        let _ = super::read(tokio::time::Instant::now());
        let coarse = nanos(ClockId::MonotonicCoarse);
        let precise = super::raw_nanos(std::time::Instant::now());
        let res = clock_getres(ClockId::MonotonicCoarse);
        let margin = match (READING.load(Relaxed), coarse, precise) {
            (RAW, Some(c), Some(p)) if c <= p && p - c < 1_000_000_000 => {
                let res = u64::try_from(res.tv_sec)
                    .ok()
                    .and_then(|s| Some(s * 1_000_000_000 + u64::try_from(res.tv_nsec).ok()?));
                match res {
                    // At least 20 ms: a virtual machine's tick can come late by several
                    // periods, and only the last 20 ms of a cool-off then read precisely.
                    Some(r) if r > 0 && r < 500_000_000 => (2 * r).max(MARGIN_FLOOR),
                    _ => UNUSABLE,
                }
            }
            _ => UNUSABLE,
        };
        MARGIN.store(margin, Relaxed);
        (margin != UNUSABLE).then_some((coarse?, margin))
    }

    #[cfg(test)]
    pub(super) fn margin() -> u64 {
        MARGIN.load(Relaxed)
    }
}

/// Elsewhere, no coarse reading: every refusal reads [`TokioClock::now`].
#[cfg(not(all(target_os = "linux", not(breaker_loom))))]
mod coarse {
    use super::Nanos;

    #[inline(always)]
    pub(super) fn read() -> Option<(Nanos, Nanos)> {
        None
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

    /// Outside tokio, a refusal may read the coarse clock: it lags the precise one by less
    /// than its margin, and is given only while `until` is more than the margin away.
    #[cfg(target_os = "linux")]
    #[test]
    fn outside_tokio_the_coarse_clock_reads_behind_the_precise_one_by_less_than_its_margin() {
        // Created a second ago: a coarse reading a tick old still reads after its creation
        // (one made within the last tick reads `None`, and the precise clock decides).
        let clock = TokioClock {
            base: TokioClock::new().base - 1_000_000_000,
        };
        let before = clock.now();
        let far = before + 3_600_000_000_000;
        let coarse = clock
            .coarse_before(far)
            .expect("a coarse reading outside tokio");
        let after = clock.now();
        let margin = coarse::margin();
        assert!(margin > 0 && margin < 1_000_000_000, "margin {margin}");
        assert!(
            coarse <= after,
            "the coarse clock leads: {coarse} > {after}"
        );
        assert!(
            after - coarse < margin,
            "lag {} >= margin {margin}",
            after - coarse
        );
        // Within the margin of `until`, no coarse reading: the precise clock decides.
        assert_eq!(clock.coarse_before(after), None);
        assert_eq!(clock.coarse_before(coarse + margin), None);
        assert_eq!(clock.coarse_before(0), None);
    }

    /// Inside a runtime's context (a `block_on`, a task, a paused clock), never the coarse
    /// clock: tokio's, which `pause` and `advance` drive.
    #[cfg(target_os = "linux")]
    #[test]
    fn inside_tokio_there_is_no_coarse_reading() {
        let clock = TokioClock {
            base: TokioClock::new().base - 1_000_000_000,
        };
        let far = u64::MAX / 2;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        rt.block_on(async {
            assert_eq!(clock.coarse_before(far), None, "in block_on");
            let in_task = tokio::spawn(async move { clock.coarse_before(far) }).await;
            assert_eq!(in_task.unwrap(), None, "in a task");
        });
        {
            let _entered = rt.enter();
            assert_eq!(clock.coarse_before(far), None, "in a runtime's context");
        }
        let multi = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let in_worker =
            multi.block_on(async { tokio::spawn(async move { clock.coarse_before(far) }).await });
        assert_eq!(in_worker.unwrap(), None, "in a multi-thread runtime's task");
        assert!(clock.coarse_before(far).is_some(), "outside again");
    }

    /// A blocking call refused outside tokio (the coarse reading): still counted, named, and
    /// its `retry_in` never shorter than the precise clock's, nor longer by more than the
    /// coarse clock's margin.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_blocking_refusal_outside_tokio_says_retry_in_within_the_coarse_margin() {
        let cool_off = Duration::from_secs(3600);
        let b = crate::Breaker::new(
            "clock::coarse_refusal",
            crate::Config::default().threshold(1).cool_off(cool_off),
        );
        let _ = b.call_sync(|| Err::<(), _>("down"));
        for _ in 0..50 {
            let start = std::time::Instant::now();
            let refused = b.call_sync(|| Ok::<_, &str>(())).unwrap_err();
            let precise = b.retry_in().expect("open");
            let between = start.elapsed();
            let e = refused.breaker_error().expect("a refusal");
            assert_eq!(e.name(), "clock::coarse_refusal");
            let retry_in = e.retry_in().expect("a retry_in");
            assert!(
                retry_in >= precise,
                "{retry_in:?} < the precise {precise:?}"
            );
            let bound = precise + between + Duration::from_nanos(coarse::margin());
            assert!(retry_in <= bound, "{retry_in:?} > {bound:?}");
            // A refusal within a tick of the opening reads the coarse clock up to a tick
            // before the precise instant the breaker opened at: long by that, as documented.
            let longest = cool_off + Duration::from_nanos(coarse::margin());
            assert!(retry_in <= longest, "{retry_in:?} > {longest:?}");
        }
        assert_eq!(b.stats().rejected, 50);
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
