//! # live_config: a dry run switched to enforcing from a file, and a quiet dependency probed
//!
//! The search service's breaker starts as a dry run (`dry_run = true`): it judges and opens
//! on paper, but every call still reaches the search backend, so its thresholds are tuned on
//! production traffic. When the figures look right, the operator drops a file
//! (`examples/search_enforcing.json`: `"dry_run": false` and the tuned thresholds) and the
//! service applies it as a `ConfigPatch`, through the breaker's handle in the registry: no
//! rebuild, no restart. The patch changes only the keys the file names: the attribute's
//! `timeout`, `retry` and probe stay. The breaker keeps its state, counts and open deadline;
//! from then on it refuses while open. The change is logged in one INFO line, old → new.
//!
//! The backend is called a few times an hour, so after it recovers no call may come for a
//! long time. The attribute's `probe = ping_backend` makes the breaker check it itself when
//! the cool-off ends, and close without a user call.
//!
//! Time is tokio's paused clock, so the story's seconds pass instantly and the output is the
//! same on every run:
//!
//! ```text
//! cargo run --example live_config --features serde
//! ```
//!
//! (`BREAKER_QUICK=1` is accepted and changes nothing: this example is always quick.)

use std::{
    sync::atomic::{AtomicBool, AtomicU32, Ordering::SeqCst},
    time::Duration,
};

use breaker::{circuit_breaker, registry, CallError, ConfigPatch, State};

static BACKEND_UP: AtomicBool = AtomicBool::new(false);
static REACHED: AtomicU32 = AtomicU32::new(0);
static PINGS: AtomicU32 = AtomicU32::new(0);

/// The backend's health endpoint: what the breaker probes when no call comes.
async fn ping_backend() -> Result<(), &'static str> {
    PINGS.fetch_add(1, SeqCst);
    tokio::time::sleep(Duration::from_millis(50)).await;
    if BACKEND_UP.load(SeqCst) {
        Ok(())
    } else {
        Err("503")
    }
}

#[circuit_breaker(
    name = "search",
    threshold = 5,
    cool_off = "10s",
    timeout = "2s",
    dry_run = true,
    probe = ping_backend
)]
async fn search(query: &str) -> Result<usize, CallError<&'static str>> {
    REACHED.fetch_add(1, SeqCst);
    if BACKEND_UP.load(SeqCst) {
        Ok(query.len())
    } else {
        Err(CallError::Inner("503"))
    }
}

fn line(what: &str) {
    let h = registry().get("search").expect("made by the first call");
    let s = h.stats();
    println!(
        "{what:<48} state {:<9} reached {:>2}  failures {}  shadow_rejected {}  rejected {}  pings {}",
        format!("{:?}", h.state()),
        REACHED.load(SeqCst),
        s.failures,
        s.shadow_rejected,
        s.rejected,
        PINGS.load(SeqCst),
    );
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    let _ = search("warm up").await; // the backend is down from the start
    for _ in 0..5 {
        let _ = search("shoes").await;
    }
    line("dry run: 6 calls to a down backend");

    // The operator's file: enforcing, the tuned thresholds; nothing else changes.
    let text = include_str!("search_enforcing.json");
    let patch: ConfigPatch = serde_json::from_str(text).expect("a valid configuration file");
    let handle = registry().get("search").unwrap();
    handle.apply(&patch).expect("valid, so applied");
    println!(
        "in force: {}",
        serde_json::to_string(&handle.config()).unwrap()
    );
    let kept = handle.config().values();
    assert_eq!(
        kept.timeout,
        Some(Duration::from_secs(2)),
        "not in the file: kept"
    );
    for _ in 0..3 {
        let refused = search("boots").await;
        assert!(matches!(refused, Err(CallError::Breaker(ref e)) if e.is_open()));
    }
    line("enforcing: 3 calls refused, backend untouched");

    // A bad file changes nothing, and says which key.
    let typo = serde_json::from_str::<ConfigPatch>(r#"{ "cool_off": 5 }"#);
    println!("a bad file: {}", typo.unwrap_err());
    let zero: ConfigPatch = serde_json::from_str(r#"{ "threshold": 0 }"#).unwrap();
    println!("a bad value: {}", handle.apply(&zero).unwrap_err());

    // The backend recovers; nobody searches for a while.
    BACKEND_UP.store(true, SeqCst);
    tokio::time::sleep(Duration::from_secs(15)).await;
    line("recovered, no call for 15 s");
    assert_eq!(handle.state(), State::Closed, "closed by its own probe");
    assert_eq!(search("sandals").await.unwrap(), 7);
    line("the next user call goes through");
}
