//! Issue 35, finding 3: 10 000 requests through the reqwest middleware to distinct host names
//! of 60 KB (they fail at DNS: the attacker needs nothing) held 10 000 keys of 60 KB each, in
//! the map and twice in names. A key longer than 256 bytes is now kept by a digest of it:
//! each such host's breaker stays within the 512 bytes a keyed breaker at rest may take.
//!
//! The bytes are counted by a counting allocator (only this binary has it), over the live
//! heap: what the keys hold after the requests, whatever the requests allocated and freed.
#![cfg(feature = "reqwest")]
// A `GlobalAlloc` cannot be written without `unsafe`; this wrapper only counts and forwards
// to the system allocator, and it exists only in this test binary.
#![allow(unsafe_code)]

use std::{
    alloc::{GlobalAlloc, Layout, System},
    sync::atomic::{AtomicUsize, Ordering::Relaxed},
};

use breaker::{reqwest::CircuitBreakerMiddleware, Config, State};
use reqwest_middleware::ClientBuilder;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

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
static GLOBAL: Counting = Counting;

/// Every name fails to resolve, at once: the hosts do not exist (nothing leaves the machine).
struct NoSuchHost;

impl reqwest::dns::Resolve for NoSuchHost {
    fn resolve(&self, _: reqwest::dns::Name) -> reqwest::dns::Resolving {
        Box::pin(async { Err("no such host".into()) })
    }
}

const KEYS: usize = 10_000;
/// The budget of a keyed breaker at rest (issue 20), whatever its key.
const BUDGET: usize = 512;

/// A host name of about 60 KB, labels of 59 letters, distinct per `i`.
fn host(i: usize) -> String {
    static LABELS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let labels = LABELS.get_or_init(|| format!("{}.", "a".repeat(59)).repeat(1_000));
    format!("{labels}h{i}.example")
}

/// What `KEYS` new hosts hold after one failing request each, in bytes a key: the first
/// `through_requests` of them as requests through the middleware (the attack as it was run),
/// the others by the middleware's `breaker(host_port)` (what a request looks up) and one
/// failing call (the same key and the same failure, without 60 KB of URL parsing per
/// request, minutes of a debug build).
async fn bytes_a_key(host: impl Fn(usize) -> String, through_requests: usize) -> usize {
    let breakers = CircuitBreakerMiddleware::with_config(Config::default().max_keys(2 * KEYS));
    let client = ClientBuilder::new(
        reqwest::Client::builder()
            .dns_resolver(std::sync::Arc::new(NoSuchHost))
            .build()
            .unwrap(),
    )
    .with(breakers.clone())
    .build();
    // The client's and the runtime's own first allocations, before counting.
    for i in 0..10 {
        let _ = client.get(format!("http://warm-{i}.example/")).send().await;
    }
    let keys_before = breakers.keyed_breaker().len();
    let before = LIVE.load(Relaxed);
    for i in 0..KEYS {
        let host = host(i);
        if i < through_requests {
            let url = format!("http://{host}/");
            assert!(client.get(url).send().await.is_err(), "no such host");
        } else {
            let b = breakers.breaker(&format!("{host}:80"));
            let _ = b.call(async { Err::<(), _>("no such host") }).await;
        }
    }
    let held = LIVE.load(Relaxed).saturating_sub(before);
    assert_eq!(
        breakers.keyed_breaker().len() - keys_before,
        KEYS,
        "one key per host"
    );
    // Each is a breaker of its own, with its failure, named by a prefix and a digest.
    for i in [0, through_requests] {
        let b = breakers.breaker(&format!("{}:80", host(i)));
        assert_eq!(b.stats().failures, 1, "{}", b.name());
        assert_eq!(b.state(), State::Closed);
    }
    held / KEYS
}

#[tokio::test]
async fn ten_thousand_hosts_of_60_kb_stay_within_512_bytes_a_key() {
    // The registry's index (process-wide) at the size it keeps once it held that many
    // breakers, for both runs alike: the first run would otherwise pay for its growth (up
    // to a doubling, 65 bytes a key at 10 000) and the second find it grown.
    drop(
        (0..2 * KEYS)
            .map(|i| breaker::Breaker::new(format!("grow::{i}"), Config::default()))
            .collect::<Vec<_>>(),
    );
    let long = bytes_a_key(host, 100).await;
    let short = bytes_a_key(|i| format!("h{i}.example"), 100).await;
    println!("{KEYS} hosts: {short} bytes a key of about 12 bytes, {long} of 60 KB");
    assert!(
        long <= BUDGET,
        "{long} bytes a key of 60 KB (at most {BUDGET}; {short} for a short host)"
    );
    assert!(
        long <= short + 64,
        "a key of 60 KB costs about what a short one does: {long} against {short} bytes"
    );

    let breakers = CircuitBreakerMiddleware::new();
    let (a, b) = (
        breakers.breaker(&format!("{}:80", host(0))),
        breakers.breaker(&format!("{}:80", host(1))),
    );
    assert!(a.name().len() < 64, "{}", a.name());
    assert!(
        a.name().starts_with("reqwest[aaaaaaaaaaaaaaaa…#"),
        "{}",
        a.name()
    );
    assert_ne!(a.name(), b.name());
}
