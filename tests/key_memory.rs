//! What a key costs the map, whatever its length, counted by a counting allocator (only this
//! binary has it) over the live heap: what the keys hold after the calls, whatever the calls
//! allocated and freed.
//!
//! Issue 35, finding 3: 10 000 requests through the reqwest middleware to distinct host names
//! of 60 KB (they fail at DNS: the attacker needs nothing) held 10 000 keys of 60 KB each, in
//! the map and twice in names. A key longer than 256 bytes is now kept by a digest of it:
//! each such host's breaker stays within the 512 bytes a keyed breaker at rest may take.
//!
//! Issue 40, finding 11: the same keys given to a `KeyedBreaker<String>` directly (a `&str`
//! or a `String`) still held 60 439 bytes a key: only the middleware bounded them. The map
//! itself now keeps a long key's bounded form.
// A `GlobalAlloc` cannot be written without `unsafe`; this wrapper only counts and forwards
// to the system allocator, and it exists only in this test binary.
#![allow(unsafe_code)]

use std::{
    alloc::{GlobalAlloc, Layout, System},
    cell::Cell,
    sync::atomic::{AtomicUsize, Ordering::Relaxed},
};

use breaker::{Config, KeyedBreaker, State};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
std::thread_local! {
    /// Allocations made by this thread, whatever they hold. Per thread: the test harness's
    /// own threads allocate while a test runs (printing the result of one that finished),
    /// which a count of the whole process took for the test's.
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

/// One more allocation by this thread (none counted while the thread is being torn down).
fn allocated() {
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        allocated();
        LIVE.fetch_add(layout.size(), Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        allocated();
        LIVE.fetch_add(new_size, Relaxed);
        LIVE.fetch_sub(layout.size(), Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[cfg(feature = "reqwest")]
use reqwest_middleware::ClientBuilder;

/// Every name fails to resolve, at once: the hosts do not exist (nothing leaves the machine).
#[cfg(feature = "reqwest")]
struct NoSuchHost;

#[cfg(feature = "reqwest")]
impl reqwest::dns::Resolve for NoSuchHost {
    fn resolve(&self, _: reqwest::dns::Name) -> reqwest::dns::Resolving {
        Box::pin(async { Err("no such host".into()) })
    }
}

/// The counts are of the whole process: one test at a time (`blocking_lock` in the tests
/// that run on no runtime, `lock().await` in the one that does).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The registry's index (process-wide) at the size it keeps once it held that many
/// breakers, for every run alike: the first run would otherwise pay for its growth (up to a
/// doubling, 65 bytes a key at 10 000) and the next find it grown.
fn grow_registry() {
    static GROWN: std::sync::Once = std::sync::Once::new();
    GROWN.call_once(|| {
        drop(
            (0..2 * KEYS)
                .map(|i| breaker::Breaker::new(format!("grow::{i}"), Config::default()))
                .collect::<Vec<_>>(),
        );
    });
}

const KEYS: usize = 10_000;
/// The budget of a keyed breaker at rest (issue 20), whatever its key.
const BUDGET: usize = 512;

/// A host name of about 60 KB, labels of 59 letters, distinct per `i`.
#[cfg(feature = "reqwest")]
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
#[cfg(feature = "reqwest")]
async fn bytes_a_key(host: impl Fn(usize) -> String, through_requests: usize) -> usize {
    use breaker::reqwest::CircuitBreakerMiddleware;
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

#[cfg(feature = "reqwest")]
#[tokio::test]
async fn ten_thousand_hosts_of_60_kb_stay_within_512_bytes_a_key() {
    let _serial = SERIAL.lock().await;
    grow_registry();
    let long = bytes_a_key(host, 100).await;
    let short = bytes_a_key(|i| format!("h{i}.example"), 100).await;
    println!("{KEYS} hosts: {short} bytes a key of about 12 bytes, {long} of 60 KB");
    assert!(
        long <= BUDGET,
        "{long} bytes a key of 60 KB (at most {BUDGET}; {short} for a short host)"
    );
    // Its bounded form (16 bytes, `…#`, 32 hex digits: 52) is kept in the key and the name.
    assert!(
        long <= short + 96,
        "a key of 60 KB costs about what a short one does: {long} against {short} bytes"
    );

    let breakers = breaker::reqwest::CircuitBreakerMiddleware::new();
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

/// What `KEYS` keys hold in a `KeyedBreaker<String>` called directly, after one failing call
/// each, in bytes a key: every other key given as a `&str`, the others as a `&String`.
fn bytes_a_direct_key(name: &str, key: impl Fn(usize) -> String) -> usize {
    let k = KeyedBreaker::<String>::new(name, Config::default().max_keys(2 * KEYS));
    let _ = k.call_sync("warm", || Ok::<_, ()>(()));
    let before = LIVE.load(Relaxed);
    for i in 0..KEYS {
        let key = key(i);
        let failed = if i % 2 == 0 {
            k.call_sync(key.as_str(), || Err::<(), _>("down"))
        } else {
            k.call_sync(&key, || Err::<(), _>("down"))
        };
        assert!(failed.is_err());
    }
    let held = LIVE.load(Relaxed).saturating_sub(before);
    assert_eq!(k.len(), KEYS + 1, "one key each");
    for i in [0, 1, KEYS - 1] {
        let b = k.breaker(key(i).as_str());
        assert_eq!(b.stats().failures, 1, "{}", b.name());
        assert_eq!(b.state(), State::Closed);
    }
    held / KEYS
}

/// Issue 40, finding 11: a `KeyedBreaker<String>` called directly kept each key of 60 KB
/// whole (60 439 bytes a key); it keeps a long key's bounded form, a prefix and a digest.
#[test]
fn ten_thousand_keys_of_60_kb_called_directly_cost_what_short_keys_cost() {
    let _serial = SERIAL.blocking_lock();
    grow_registry();
    let long = bytes_a_direct_key("key_memory::long", |i| format!("{}{i}", "k".repeat(60_000)));
    let short = bytes_a_direct_key("key_memory::short", |i| format!("tenant-{i}"));
    println!("{KEYS} keys called directly: {short} bytes a short key, {long} of 60 KB");
    assert!(
        long <= BUDGET,
        "{long} bytes a key of 60 KB (at most {BUDGET}; {short} for a short key)"
    );
    // The bounded form (16 bytes, `…#`, 32 hex digits) is kept in the key and in the name.
    assert!(
        long <= short + 96,
        "a key of 60 KB costs about what a short one does: {long} against {short} bytes"
    );
}

/// A hostile stream of long keys that share all but their last bytes: each is a breaker of
/// its own (the digest covers the whole key), found again by the same key without making
/// another or evicting one at the bound, and each costs what a short key does.
#[test]
fn long_keys_sharing_a_prefix_stay_distinct_and_bounded() {
    const N: usize = 1_000;
    let _serial = SERIAL.blocking_lock();
    grow_registry();
    let prefix = "k".repeat(60_000);
    let key = |i: usize| format!("{prefix}{i:08}");
    let k = KeyedBreaker::<String>::new(
        "key_memory::hostile",
        Config::default().threshold(2).max_keys(N),
    );
    let before = LIVE.load(Relaxed);
    for i in 0..N {
        let _ = k.call_sync(key(i).as_str(), || Err::<(), _>("down"));
    }
    let held = LIVE.load(Relaxed).saturating_sub(before) / N;
    assert_eq!(k.len(), N);
    assert!(held <= BUDGET, "{held} bytes a key of 60 KB");
    // At the bound, every key is found again: none makes a breaker nor evicts one.
    let mut names = std::collections::BTreeSet::new();
    for i in 0..N {
        assert!(k.contains(key(i).as_str()), "key {i} was evicted");
        let b = k.breaker(&key(i));
        assert_eq!(b.stats().failures, 1, "{}", b.name());
        assert!(b.name().len() < 80, "{}", b.name());
        names.insert(b.name().to_owned());
    }
    assert_eq!(k.len(), N);
    assert_eq!(names.len(), N, "a breaker and a name each");
    // A second failure of one key opens that key only.
    let _ = k.call_sync(key(7).as_str(), || Err::<(), _>("down"));
    assert_eq!(k.breaker(key(7).as_str()).state(), State::Open);
    assert_eq!(k.breaker(key(8).as_str()).state(), State::Closed);
    assert_eq!(k.len(), N);
}

/// Bounding long keys costs a short key's lookup nothing: an existing key of up to 256 bytes
/// is found by the caller's `&str` or `&String` without an allocation.
#[test]
fn a_short_key_is_found_without_an_allocation() {
    let _serial = SERIAL.blocking_lock();
    let k = KeyedBreaker::<String>::new("key_memory::lookup", Config::default());
    let short = "tenant-7".to_owned();
    let longest = "t".repeat(256);
    for key in [&short, &longest] {
        k.call_sync(key.as_str(), || Ok::<_, ()>(())).unwrap();
        let before = ALLOCATIONS.with(Cell::get);
        for _ in 0..100 {
            k.call_sync(key.as_str(), || Ok::<_, ()>(())).unwrap();
            k.call_sync(key, || Ok::<_, ()>(())).unwrap();
        }
        assert_eq!(
            ALLOCATIONS.with(Cell::get) - before,
            0,
            "{} bytes",
            key.len()
        );
        assert_eq!(
            k.breaker(key.as_str()).name(),
            format!("key_memory::lookup[{key}]")
        );
    }
    assert_eq!(k.len(), 2);
}
