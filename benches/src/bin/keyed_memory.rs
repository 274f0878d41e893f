//! Memory and time per new key of a keyed breaker at 100 000 keys (issue 20: at most 512
//! bytes a key at rest, under 2 µs a new key):
//!
//! ```text
//! cd benches && cargo run --release --bin keyed_memory
//! ```
//!
//! Resident memory (`VmRSS` of `/proc/self/status`) before and after 100 000 `call_sync`s of
//! new `u64` keys, each a success (closed, lightly used: the keyed breaker at rest), and the
//! same for `String` keys (`customer-{i}.example`); then the time of those calls per key.
//! The allocator keeps what it frees, so the figure is what the process holds for them.
//! Beside it, the bytes the program itself has allocated and not freed (a counting
//! allocator around the system's): what the keys take, without the allocator's own overhead.

use std::{
    alloc::{GlobalAlloc, Layout, System},
    sync::atomic::{AtomicUsize, Ordering::Relaxed},
    time::Instant,
};

/// The system allocator, counting the bytes live.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Relaxed);
        LIVE.fetch_sub(layout.size(), Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

use breaker::{Config, KeyedBreaker};

const KEYS: usize = 100_000;

fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("VmRSS");
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("VmRSS in kB");
    kb * 1024
}

fn main() {
    let config = Config::default().max_keys(KEYS);
    // Kept alive to the end: memory it freed would be reused by the next map.
    let _u64_keys = {
        let before = rss();
        let heap = LIVE.load(Relaxed);
        let k = KeyedBreaker::<u64>::new("bench::memory_u64", config.clone());
        let t = Instant::now();
        for i in 0..KEYS as u64 {
            let _ = k.call_sync(&i, || Ok::<_, ()>(()));
        }
        let took = t.elapsed();
        let after = rss();
        let heap = LIVE.load(Relaxed) - heap;
        assert_eq!(k.len(), KEYS);
        println!(
            "u64 keys:    {KEYS} keys, {:.1} MB resident, {} bytes per key ({} allocated), {:.2} µs per new key",
            (after - before) as f64 / 1e6,
            (after - before) / KEYS as u64,
            heap / KEYS,
            took.as_secs_f64() * 1e6 / KEYS as f64
        );
        k
    };
    let names: Vec<String> = (0..KEYS).map(|i| format!("customer-{i}.example")).collect();
    let before = rss();
    let heap = LIVE.load(Relaxed);
    let k = KeyedBreaker::<String>::new("bench::memory_str", config);
    let t = Instant::now();
    for n in &names {
        let _ = k.call_sync(n.as_str(), || Ok::<_, ()>(()));
    }
    let took = t.elapsed();
    let after = rss();
    let heap = LIVE.load(Relaxed) - heap;
    assert_eq!(k.len(), KEYS);
    println!(
        "String keys: {KEYS} keys, {:.1} MB resident, {} bytes per key ({} allocated), {:.2} µs per new key",
        after.saturating_sub(before) as f64 / 1e6,
        after.saturating_sub(before) / KEYS as u64,
        heap / KEYS,
        took.as_secs_f64() * 1e6 / KEYS as f64
    );
}
