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
    sync::atomic::{AtomicUsize, Ordering::SeqCst},
    task::{Context, Poll, Waker},
    time::Duration,
};

use breaker_runtime::{Breaker, Config, State};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);
thread_local!(static WATCHING: Cell<bool> = const { Cell::new(false) });

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if WATCHING.try_with(Cell::get).unwrap_or(false) {
            ALLOCATIONS.fetch_add(1, SeqCst);
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
    let before = ALLOCATIONS.load(SeqCst);
    WATCHING.with(|w| w.set(true));
    f();
    WATCHING.with(|w| w.set(false));
    ALLOCATIONS.load(SeqCst) - before
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
