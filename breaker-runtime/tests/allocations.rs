//! The closed and open paths allocate nothing: a counting global allocator watches calls
//! made on this thread after a warm-up.
// A `GlobalAlloc` cannot be written without `unsafe`; this wrapper only counts and forwards
// to the system allocator, and it exists only in this test binary.
#![allow(unsafe_code)]

use std::{
    alloc::{GlobalAlloc, Layout, System},
    cell::Cell,
    future::Future,
    pin::pin,
    task::{Context, Poll, Waker},
    time::Duration,
};

use breaker_runtime::{Breaker, Config, State};

struct Counting;

// Per thread: the tests of this binary run in parallel, and one test's allocations must not
// land in another's count.
thread_local!(static WATCHING: Cell<bool> = const { Cell::new(false) });
thread_local!(static ALLOCATIONS: Cell<usize> = const { Cell::new(0) });

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if WATCHING.try_with(Cell::get).unwrap_or(false) {
            let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        }
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by `f` on this thread.
fn allocations(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    WATCHING.with(|w| w.set(true));
    f();
    WATCHING.with(|w| w.set(false));
    ALLOCATIONS.with(Cell::get) - before
}

/// Polls a future that is ready at once (no runtime: nothing else allocates).
fn ready<F: Future>(f: F) -> F::Output {
    match pin!(f).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("the call should finish at once"),
    }
}

fn exercise(b: &Breaker) {
    for i in 0..1000u32 {
        let _ = b.call_sync(|| if i % 3 == 0 { Err("x") } else { Ok(i) });
        let _ = ready(b.call(async move {
            if i % 3 == 0 {
                Err("x")
            } else {
                Ok(i)
            }
        }));
    }
}

#[test]
fn the_counter_sees_allocations() {
    assert_eq!(allocations(|| drop(std::hint::black_box(Box::new(7)))), 1);
}

#[test]
fn the_closed_path_allocates_nothing() {
    for (name, config) in [
        ("alloc::default", Config::default()),
        (
            "alloc::window",
            Config::default()
                .failure_rate(90)
                .window_calls(100)
                .slow_call(Duration::from_secs(5)),
        ),
        (
            "alloc::time_window",
            Config::default()
                .failure_rate(90)
                .window_duration(Duration::from_secs(10)),
        ),
    ] {
        let b = Breaker::new(name, config.max_concurrent(10));
        exercise(&b); // warm-up: this thread's stripe
        assert_eq!(allocations(|| exercise(&b)), 0, "{name}");
        assert_eq!(b.state(), State::Closed);
    }
}

#[test]
fn the_open_path_allocates_nothing() {
    let b = Breaker::new("alloc::open", Config::default().threshold(1));
    let _ = b.call_sync(|| Err::<(), _>("down")); // trips: the transition may allocate
    assert_eq!(b.state(), State::Open);
    exercise(&b);
    assert_eq!(allocations(|| exercise(&b)), 0);
    assert_eq!(b.stats().rejected, 4000);

    b.handle().force_open();
    assert_eq!(allocations(|| exercise(&b)), 0, "forced open");
}

#[test]
fn a_keyed_call_for_an_existing_key_allocates_nothing() {
    use breaker_runtime::KeyedBreaker;
    let hosts = KeyedBreaker::<(String, u16)>::new("alloc::keyed", Config::default());
    let key = ("example.com".to_string(), 443);
    let _ = hosts.call_sync(&key, || Ok::<_, ()>(())); // creates it
    let calls = allocations(|| {
        for i in 0..1000u32 {
            let r = hosts.call_sync(&key, || Ok::<_, ()>(i));
            assert_eq!(r.unwrap(), i);
            let r = ready(hosts.call(&key, async move { Ok::<_, ()>(i) }));
            assert_eq!(r.unwrap(), i);
        }
    });
    assert_eq!(calls, 0);
    assert_eq!(hosts.len(), 1);
}

#[test]
fn a_rejected_call_allocates_nothing_though_the_error_names_the_breaker() {
    let b = Breaker::new("alloc::named_rejection", Config::default());
    b.handle().force_open();
    let mut name_len = 0;
    let n = allocations(|| {
        for _ in 0..100 {
            let e = b.call_sync(|| Ok::<(), ()>(())).unwrap_err();
            name_len = e.breaker_error().unwrap().name().len();
        }
    });
    assert_eq!((n, name_len), (0, "alloc::named_rejection".len()));
}

#[test]
fn owned_and_classified_calls_allocate_nothing() {
    use breaker_runtime::Verdict;
    let b = Breaker::new("alloc::owned", Config::default());
    let _ = ready(b.clone().call_owned(async { Ok::<_, ()>(0) })); // warm-up
    let n = allocations(|| {
        for i in 0..1000u32 {
            let owned = ready(b.clone().call_owned(async move { Ok::<_, ()>(i) }));
            assert_eq!(owned.unwrap(), i);
            let judge = |_: &Result<u32, ()>| Verdict::Success;
            let judged = ready(b.call_classified(judge, async move { Ok::<_, ()>(i) }));
            assert_eq!(judged.unwrap(), i);
            assert_eq!(b.call_sync_classified(judge, || Ok(i)).unwrap(), i);
        }
    });
    assert_eq!(n, 0);
}

/// Pending at its first poll, `Ok` at the next.
#[derive(Default)]
struct PendingOnce(bool);

impl Future for PendingOnce {
    type Output = Result<(), ()>;
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if std::mem::replace(&mut self.0, true) {
            Poll::Ready(Ok(()))
        } else {
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

/// A `timeout` costs a timer only when the call has to wait: a timed call that is ready at its
/// first poll makes none (it needs no runtime either) and allocates nothing, nor does any
/// untimed call, ready at once or after a wait. A timed call that waits boxes its timer: one
/// allocation, the price of call futures 88 bytes smaller for every call (DESIGN, *Small
/// futures*; breaker-runtime/src/future.rs).
#[test]
fn no_call_allocates_timed_or_not_waiting_or_not() {
    let timed = Breaker::new(
        "alloc::timed",
        Config::default().timeout(Duration::from_secs(1)),
    );
    exercise(&timed); // no runtime here: a timer would panic ("no reactor running")
    assert_eq!(allocations(|| exercise(&timed)), 0, "timed, ready at once");

    let waits = |b: &Breaker| {
        let mut call = pin!(b.call(PendingOnce::default()));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(call.as_mut().poll(&mut cx).is_pending());
        assert_eq!(call.as_mut().poll(&mut cx), Poll::Ready(Ok(())));
    };
    let untimed = Breaker::new("alloc::untimed_waits", Config::default());
    waits(&untimed);
    assert_eq!(
        allocations(|| (0..100).for_each(|_| waits(&untimed))),
        0,
        "untimed, waits once"
    );
    assert_eq!(untimed.stats().successes, 101);

    // A timed call that waits makes its timer, which needs the runtime's time driver.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        waits(&timed);
        assert_eq!(
            allocations(|| (0..100).for_each(|_| waits(&timed))),
            100,
            "timed, waits once: its timer, boxed, once"
        );
    });
    let s = timed.stats();
    assert_eq!((s.successes, s.timeouts), (2 * 1332 + 101, 0));
}
