//! The stripes' ownership and the counters' reads, outside loom.

use super::*;

/// One test, not two: both count the free stripes of this process.
#[test]
fn a_stripe_has_one_owner_at_a_time_and_is_given_back_on_exit() {
    use std::sync::{mpsc, Arc, Barrier};
    // Threads that stay alive: each owns a different stripe, until none is left and
    // the next one shares (other tests may hold a few meanwhile, hence "at most").
    let done = Arc::new(Barrier::new(OWNED + 2));
    let (tx, rx) = mpsc::channel();
    let holders: Vec<_> = (0..=OWNED)
        .map(|_| {
            let (done, tx) = (done.clone(), tx.clone());
            std::thread::spawn(move || {
                tx.send(here().stripe()).unwrap();
                done.wait();
            })
        })
        .collect();
    let slots: Vec<StripeIndex> = (0..=OWNED).map(|_| rx.recv().unwrap()).collect();
    let mut owned: Vec<usize> = slots.iter().filter(|s| s.owned()).map(|s| s.0).collect();
    assert!(
        owned.len() < slots.len(),
        "{} threads, all owners",
        slots.len()
    );
    owned.sort();
    owned.dedup();
    assert_eq!(
        owned.len(),
        slots.iter().filter(|s| s.owned()).count(),
        "{slots:?}"
    );
    done.wait();
    holders.into_iter().for_each(|h| h.join().unwrap());

    // A blocking pool starts and ends threads all day: each gives its stripe back on
    // exit, so far more threads than there are stripes each own one in turn.
    for _ in 0..3 * OWNED {
        let slot = std::thread::spawn(|| here().stripe()).join().unwrap();
        assert!(slot.owned(), "{slot:?} is shared");
    }
}

/// A blocking call's stripe is found once, at admission: if a second thread makes the
/// striped set while the call runs, its success still lands on `home` (which only its
/// slot writes) and is counted; later calls count in the set.
#[test]
fn a_stripe_found_before_the_set_is_made_keeps_counting() {
    let c = Counters::new();
    let me = here();
    let found = c.counting_inline().map(|_| ()).is_none();
    assert!(found, "no route before the first count");
    let admitted = c.counting(me);
    admitted.add(Count::Admitted);
    assert!(c.others.get().is_none());
    std::thread::scope(|s| {
        s.spawn(|| c.add(Count::Admitted));
    });
    assert!(c.others.get().is_some(), "a second thread made the set");
    admitted.add(Count::Success);
    // Found inline by a thread that owns its stripe; one that shares one (other tests may
    // hold every owned stripe meanwhile) takes the out-of-line way.
    let later = match c.counting_inline() {
        Some(found) => found,
        None if !me.stripe().owned() => c.counting(me),
        None => panic!("the set is not found inline by an owner"),
    };
    later.add(Count::Admitted);
    later.add(Count::Success);
    let stats = c.read();
    assert_eq!((stats.calls, stats.successes), (3, 2));
    assert_eq!(c.in_flight(), 1);
}

/// The fast path counts with plain stores wherever the route equals the thread's slot, so a
/// shared slot (whose threads count with `fetch_add`) that takes `home` must not be written
/// there as itself: its word is tagged, found again out of line, and equals no thread's slot.
#[test]
fn a_shared_slots_home_is_never_found_by_the_plain_path() {
    let c = Counters::new();
    let shared = StripeIndex(OWNED + 1);
    assert!(!shared.owned());
    c.add_to(shared, false, Count::Admitted);
    assert_eq!(c.route.load(Relaxed), (OWNED + 1) | SHARED_HOME);
    assert!(
        c.counting_inline().is_none(),
        "a thread found a shared slot's home on the plain path"
    );
    c.add_to(shared, false, Count::Success);
    assert!(
        c.others.get().is_none(),
        "the shared slot's home was not found again"
    );
    assert_eq!(c.at(shared), (1, 1));
    // The slot a thread falls back to once it gave its stripe back is a shared one too.
    let fallback = StripeIndex(OWNED);
    c.add_to(fallback, false, Count::Admitted);
    assert!(c.others.get().is_some(), "a second slot makes the set");
    assert_eq!(c.read().calls, 2);
}

/// A count made from a thread-local's destructor, before or after the thread gave its
/// owned stripe back, is neither lost nor a panic. (On this target `STRIPE` is never
/// torn down, so this guards the order of `Owner`'s hand-over; the `try_with` fallback
/// for targets whose thread-locals are OS keys is not reachable here.)
#[test]
fn counts_made_while_a_thread_exits_are_kept() {
    use std::{cell::RefCell, sync::Arc};
    struct Late(Arc<Counters>);
    impl Drop for Late {
        fn drop(&mut self) {
            self.0.add(Count::Admitted);
            self.0.add(Count::Success);
        }
    }
    thread_local!(static LATE: RefCell<Option<Late>> = const { RefCell::new(None) });
    let c = Arc::new(Counters::new());
    // Destructors run in reverse order of registration (on this target): `Late` after
    // `Owner` when it registers first, before it when it registers last.
    for late_first in [true, false] {
        let c = c.clone();
        std::thread::spawn(move || {
            let late = || LATE.with(|l| *l.borrow_mut() = Some(Late(c.clone())));
            if late_first {
                late();
            }
            c.add(Count::Admitted);
            // Owned or shared: other tests may hold every owned stripe meanwhile.
            let me = here().stripe();
            assert_eq!(owned_here().map(Here::stripe), me.owned().then_some(me));
            if !late_first {
                late();
            }
        })
        .join()
        .unwrap();
    }
    let s = c.read();
    assert_eq!((s.calls, s.successes), (4, 2));
}

#[test]
fn a_reset_is_a_new_base_and_counting_goes_on_from_it() {
    let c = Counters::new();
    let me = here();
    for _ in 0..5 {
        c.add_here(me, Count::Admitted);
        c.add_here(me, Count::Success);
    }
    c.add_to(StripeIndex(OWNED), false, Count::Rejected); // a shared stripe
    let base = c.read();
    assert_eq!(c.since(Some(&base)), Stats::default());
    c.add_here(me, Count::Admitted);
    c.add_here(me, Count::Timeout);
    c.add_to(StripeIndex(OWNED + 1), false, Count::Rejected);
    let s = c.since(Some(&base));
    assert_eq!((s.calls, s.failures, s.timeouts, s.rejected), (2, 1, 1, 1));
    assert_eq!(s.successes, 0);
}
