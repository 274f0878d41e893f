//! Unit tests of the engine on a fake clock: the review's findings, each failing before its fix.

use std::time::Duration;

use super::{dispatch::Dispatching, *};
use crate::{clock::FakeClock, sync::lock, Config};

const MS: u64 = 1_000_000;

fn core(config: Config) -> Core {
    Core::new("core::tests".into(), config.resolve().unwrap().into())
}

/// Review M3: tokio fires a timeout at the next millisecond or later, after the probe's
/// lease (admission + timeout) ended; a call in that gap takes the slot over. The
/// probe's timeout must still reopen the breaker, or a hanging dependency under steady
/// traffic keeps it half-open for good and the backoff never grows.
#[test]
fn a_timed_out_probe_reopens_even_when_its_slot_was_taken_over() {
    let c = core(
        Config::default()
            .threshold(1)
            .cool_off(Duration::from_millis(10))
            .max_cool_off(Duration::from_secs(1))
            .timeout(Duration::from_millis(5)),
    );
    let clock = FakeClock::default();
    Permit::acquire(&c, &clock)
        .unwrap()
        .finish(Outcome::Failure);
    assert_eq!(c.peek(), State::Open);
    clock.0.set(10 * MS);
    let hung = Permit::acquire(&c, &clock).expect("the probe");
    assert_eq!(c.peek(), State::HalfOpen);
    clock.0.set(15 * MS + 1); // the lease ended; the timer has not fired yet
    let next = Permit::acquire(&c, &clock).expect("takes the expired slot over");
    hung.finish(Outcome::Timeout); // the timer fires
    assert_eq!(c.peek(), State::Open, "the timed-out probe reopened it");
    // And the cool-off doubled (10 ms, then 20 ms).
    assert_eq!(c.open_until.load(Acquire), 15 * MS + 1 + 20 * MS);
    next.finish(Outcome::Success); // from the old generation: changes nothing
    assert_eq!(c.peek(), State::Open);
}

/// A breaker opened by one failure (threshold 1, cool-off 10 ms), at the end of its cool-off:
/// the next call is its probe.
fn open_and_cooled_off() -> (Core, FakeClock) {
    let c = core(
        Config::default()
            .threshold(1)
            .cool_off(Duration::from_millis(10)),
    );
    let clock = FakeClock::default();
    Permit::acquire(&c, &clock)
        .unwrap()
        .finish(Outcome::Failure);
    clock.0.set(10 * MS);
    (c, clock)
}

/// An admission keeps only the low 32 bits of its probe lease's id. A hung probe whose slot
/// was taken over by a lease whose id has the same low bits (2^32 claims later) must not free
/// that slot: the claim's instant tells the two apart, so the probes in flight stay bounded.
#[test]
fn a_late_probe_does_not_free_a_slot_whose_lease_shares_its_ids_low_bits() {
    let (c, clock) = open_and_cooled_off();
    let hung = Permit::acquire(&c, &clock).expect("the probe");
    let first = lock(&c.inner).next_lease - 1;
    // 2^32 claims later (as if), the next lease's id has the hung one's low bits.
    lock(&c.inner).next_lease = first + (1 << 32);
    clock.0.set(21 * MS); // the hung probe's lease ended
    let next = Permit::acquire(&c, &clock).expect("takes the expired slot over");
    hung.finish(Outcome::Neutral); // late: changes nothing, frees nothing
    assert_eq!(c.probes_held(), 1, "the new probe keeps its slot");
    clock.0.set(22 * MS);
    assert!(
        Permit::acquire(&c, &clock).is_err(),
        "one probe slot, held by the new probe: a second call is refused"
    );
    next.finish(Outcome::Success);
    assert_eq!(c.peek(), State::Closed);
}

/// A cancelled probe whose slot was taken over is late, and changes nothing.
#[test]
fn a_late_cancellation_changes_nothing() {
    let (c, clock) = open_and_cooled_off();
    let hung = Permit::acquire(&c, &clock).unwrap();
    clock.0.set(21 * MS); // lease = cool-off when there is no timeout
    let next = Permit::acquire(&c, &clock).unwrap();
    drop(hung);
    assert_eq!(c.peek(), State::HalfOpen);
    next.finish(Outcome::Success);
    assert_eq!(c.peek(), State::Closed);
}

/// Review: while disabled, failures keep counting and nothing trips; the streak must
/// saturate rather than carry into the generation tag.
#[test]
fn the_failure_streak_saturates() {
    let c = core(Config::default().threshold(3));
    let clock = FakeClock::default();
    c.set(State::Disabled, &clock);
    let generation = c.word().generation();
    c.streak
        .store(streak_tag(generation) | (STREAK_COUNT - 1), Relaxed);
    for _ in 0..3 {
        c.finish_closed(generation, Outcome::Failure, &clock);
    }
    assert_eq!(
        c.streak.load(Relaxed),
        streak_tag(generation) | STREAK_COUNT
    );
    assert_eq!(c.peek(), State::Disabled);
}

/// A breaker whose `on_state_change` hook counts its calls, and that count.
fn with_counted_hook() -> (Core, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = calls.clone();
    let config = Config::default().on_state_change(move |_| {
        seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    });
    (core(config), calls)
}

/// Review: a subscriber that panics while the dispatcher logs a hook's panic left
/// `dispatching` set, so hooks fell silent for good. The flag is reset on unwind.
#[test]
fn the_dispatcher_recovers_from_a_panic_outside_catch_unwind() {
    let (c, calls) = with_counted_hook();
    let clock = FakeClock::default();
    // Simulate a dispatcher that unwound: the guard must clear the flag.
    {
        let _guard = Dispatching::new(&c);
        lock(&c.inner).dispatching = true;
    }
    assert!(!lock(&c.inner).dispatching);
    c.set(State::ForcedOpen, &clock);
    assert_eq!(calls.load(SeqCst), 1, "hooks still run");
}

/// A call that panics reports its failure while it unwinds, and that failure may trip the
/// breaker and dispatch. A transition another thread queues just before that dispatcher stops
/// must still be delivered: "unwinding" is the state it began in, not a panic of its own.
#[test]
fn a_dispatcher_that_began_while_unwinding_delivers_what_was_queued_at_its_end() {
    use std::panic::AssertUnwindSafe;
    let (c, calls) = with_counted_hook();
    let clock = FakeClock::default();
    struct ReportsWhileUnwinding<'a>(&'a Core, &'a FakeClock);
    impl Drop for ReportsWhileUnwinding<'_> {
        fn drop(&mut self) {
            let _dispatcher = Dispatching::new(self.0);
            lock(&self.0.inner).dispatching = true;
            // Another transition, queued while this dispatcher runs: it only queues.
            self.0.set(State::ForcedOpen, self.1);
        }
    }
    let unwound = std::panic::catch_unwind(AssertUnwindSafe(|| {
        let _call = ReportsWhileUnwinding(&c, &clock);
        panic!("the user's call panicked");
    }));
    assert!(unwound.is_err());
    assert_eq!(
        calls.load(SeqCst),
        1,
        "the queued transition reached its hook"
    );
}

/// Every refusal clones the name into its error. Clones of one `Arc` count on one cache
/// line, which threads refused at once would fight over (2 threads: 3× slower each, measured
/// in `benches`' `scaling_open`): an open breaker hands each thread the copy its stripe picks.
#[test]
fn threads_refused_at_once_count_on_different_copies_of_the_name() {
    let c = core(Config::default().threshold(1));
    let clock = FakeClock::default();
    let refusal = |c: &Core| match c.refuse(&FakeClock::default()) {
        Some(crate::BreakerError::Open { name, .. }) => name,
        other => panic!("expected a refusal, got {other:?}"),
    };
    Permit::acquire(&c, &clock)
        .unwrap()
        .finish(Outcome::Failure); // opens it, which makes the copies
    assert_eq!(c.peek(), State::Open);
    let copies = c
        .inner
        .made()
        .and_then(|cold| cold.refusal_names.get())
        .expect("made at the opening");
    let both_alive = std::sync::Barrier::new(2);
    let on_thread = || {
        let at = crate::stats::here();
        let name = refusal(&c);
        both_alive.wait(); // so the two threads hold two different stripes
        (at.index(), name)
    };
    let ((a, name_a), (b, name_b)) = std::thread::scope(|s| {
        let first = s.spawn(on_thread);
        let second = s.spawn(on_thread);
        (first.join().unwrap(), second.join().unwrap())
    });
    assert_ne!(a, b);
    for (at, name) in [(a, &name_a), (b, &name_b)] {
        assert_eq!(*name, "core::tests");
        assert!(name.same_allocation(&copies[at % NAME_COPIES]));
        assert!(!name.same_allocation(&c.name));
    }
    assert_eq!(
        name_a.same_allocation(&name_b),
        a % NAME_COPIES == b % NAME_COPIES
    );
}

/// The attribute's names are static text: a refusal copies the pointer, so there is no
/// count to spread over copies, and none are made.
#[test]
fn a_static_name_is_handed_out_as_itself() {
    let config = Config::default().threshold(1);
    let c = Core::new(
        Name::from_static(&"core::tests::static"),
        config.resolve().unwrap().into(),
    );
    let clock = FakeClock::default();
    Permit::acquire(&c, &clock)
        .unwrap()
        .finish(Outcome::Failure);
    assert_eq!(c.peek(), State::Open);
    assert!(c.inner.made().is_some(), "the opening made the cold part");
    assert!(c.inner.made().unwrap().refusal_names.get().is_none());
    match c.refuse(&clock) {
        Some(crate::BreakerError::Open { name, .. }) => {
            assert_eq!(name, "core::tests::static");
            assert!(name.same_allocation(&c.name));
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Issue 28 finding 9: `reset()` starts overload over as well: the throttle's window (a
/// reset breaker shed 90 % of calls to a healthy dependency for a whole window), the ramp,
/// and the adaptive limit (back at its start).
#[test]
fn reset_starts_throttle_ramp_and_adaptive_limit_over() {
    let c = core(
        Config::default()
            .threshold(1_000_000)
            .throttle(1.0)
            .adaptive_concurrency(500),
    );
    let clock = FakeClock::default();
    clock.0.set(MS);
    // Failures: the throttle sheds; drops: the adaptive limit falls from its start (20).
    for i in 0..400 {
        clock.0.set(MS + i * MS / 4);
        if let Ok(p) = Permit::acquire(&c, &clock) {
            p.finish(Outcome::Timeout);
        }
    }
    assert!(c.throttle_rate(&clock) > 50.0, "sheds before the reset");
    assert!(c.concurrency_limit().unwrap() < 20, "the limit moved");
    c.set(State::Closed, &clock);
    assert_eq!(
        c.throttle_rate(&clock),
        0.0,
        "the window is empty after a reset"
    );
    assert_eq!(
        c.concurrency_limit(),
        Some(20),
        "the limit is back at its start"
    );
    let admitted = (0..100)
        .filter(|_| {
            Permit::acquire(&c, &clock)
                .map(|p| p.finish(Outcome::Success))
                .is_ok()
        })
        .count();
    assert_eq!(
        admitted, 100,
        "a healthy dependency gets every call after a reset"
    );
}

/// A ramp in progress ends with a reset: every call is admitted at once.
#[test]
fn reset_ends_a_ramp() {
    let c = core(
        Config::default()
            .threshold(1)
            .cool_off(Duration::from_millis(10))
            .ramp(Duration::from_secs(30)),
    );
    let clock = FakeClock::default();
    Permit::acquire(&c, &clock)
        .unwrap()
        .finish(Outcome::Failure);
    clock.0.set(10 * MS);
    Permit::acquire(&c, &clock)
        .unwrap()
        .finish(Outcome::Success);
    assert_eq!(c.peek(), State::Closed);
    assert!(c.throttle_rate(&clock) > 99.0, "ramping from zero");
    c.set(State::Closed, &clock);
    assert_eq!(c.throttle_rate(&clock), 0.0);
}

/// Issue 28 finding 5: a ramp in progress and a learned adaptive limit are state a fresh
/// breaker would not have (a keyed breaker must not evict such a key as fresh).
#[test]
fn ramping_or_a_moved_limit_is_not_fresh() {
    let c = core(
        Config::default()
            .threshold(1)
            .cool_off(Duration::from_millis(10))
            .ramp(Duration::from_secs(30)),
    );
    let clock = FakeClock::default();
    assert!(c.is_fresh(&clock));
    Permit::acquire(&c, &clock)
        .unwrap()
        .finish(Outcome::Failure);
    clock.0.set(10 * MS);
    Permit::acquire(&c, &clock)
        .unwrap()
        .finish(Outcome::Success);
    assert_eq!(c.peek(), State::Closed);
    assert!(!c.is_fresh(&clock), "ramping");
    clock.0.set(31_000 * MS);
    assert!(c.is_fresh(&clock), "the ramp is over");

    let c = core(
        Config::default()
            .threshold(1_000_000)
            .adaptive_concurrency(500),
    );
    assert!(c.is_fresh(&clock));
    for i in 0..100 {
        clock.0.set(31_000 * MS + i * MS);
        Permit::acquire(&c, &clock)
            .unwrap()
            .finish(Outcome::Timeout);
    }
    // A success ends the failure streak: only the limit differs from a new breaker's.
    Permit::acquire(&c, &clock)
        .unwrap()
        .finish(Outcome::Success);
    assert!(c.concurrency_limit().unwrap() < 20);
    assert!(!c.is_fresh(&clock), "the limit moved from its start");
}

/// Issue 28 finding 7: a burst of fast errors cannot raise the adaptive limit (failed calls
/// are drops, never round-trip samples: 0.5 ms 503s looked like a dependency with no queue).
#[test]
fn fast_errors_do_not_raise_the_adaptive_limit() {
    let c = core(
        Config::default()
            .threshold(1_000_000)
            .adaptive_concurrency(500),
    );
    let clock = FakeClock::default();
    let start = c.concurrency_limit().unwrap();
    let mut highest = start;
    for round in 0..2_000u64 {
        clock.0.set(round * MS / 2);
        let mut held = Vec::new();
        while let Ok(p) = Permit::acquire(&c, &clock) {
            held.push(p); // every slot the limit allows: the limit is in use
        }
        clock.0.set(round * MS / 2 + MS / 4); // a 0.25 ms 503
        for p in held {
            p.finish(Outcome::Failure);
        }
        highest = highest.max(c.concurrency_limit().unwrap());
    }
    assert_eq!(highest, start, "fast errors raised the limit");
    assert!(
        c.concurrency_limit().unwrap() < start,
        "errors are drops: it fell"
    );
}

/// `Breaker::new`'s names are kept (within the process's bound), so its refusals copy the
/// name as the attribute's do: no count, no copies made at the opening.
#[test]
fn a_runtime_name_is_kept_and_handed_out_without_a_count() {
    let b = crate::Breaker::new(
        format!("core::tests::kept{}", 7),
        Config::default().threshold(1),
    );
    let _ = b.call_sync(|| Err::<(), _>(()));
    assert_eq!(b.state(), State::Open);
    let err = b.call_sync(|| Ok::<(), ()>(())).unwrap_err();
    let name = match err.into_breaker() {
        Some(crate::BreakerError::Open { name, .. }) => name,
        other => panic!("expected a refusal, got {other:?}"),
    };
    assert_eq!(name, "core::tests::kept7");
    assert!(name.is_static());
    assert!(name.same_allocation(&b.shared.core.name));
    let cold = b
        .shared
        .core
        .inner
        .made()
        .expect("the opening made the cold part");
    assert!(cold.refusal_names.get().is_none());
}
