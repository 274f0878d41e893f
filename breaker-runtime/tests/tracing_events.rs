//! One `tracing` event per transition. In a test binary of its own: tracing caches each
//! callsite's interest globally, and a test on another thread hitting the same callsite with
//! no subscriber can race the scoped subscriber this test installs.

mod common;

use breaker_runtime::{Breaker, Config};

#[test]
fn every_transition_is_one_tracing_event() {
    let rec = common::Recorder::default();
    tracing::subscriber::with_default(rec.clone(), || {
        let b = Breaker::new("sem::traced", Config::default().threshold(2));
        for _ in 0..10 {
            let _ = b.call_sync(|| Ok::<_, &str>(()));
        }
        assert!(
            rec.of("sem::traced").is_empty(),
            "nothing logged per successful call"
        );
        let _ = b.call_sync(|| Err::<(), _>("down"));
        let _ = b.call_sync(|| Err::<(), _>("down"));
        let _ = b.call_sync(|| Ok::<_, &str>(())); // rejected
        b.handle().reset();
    });
    let events = rec.of("sem::traced");
    assert_eq!(events.len(), 2, "{events:?}");
    let open = &events[0];
    assert_eq!(
        (open.level.as_str(), open.target.as_str()),
        ("WARN", "breaker")
    );
    assert_eq!(open.field("from"), Some("closed"));
    assert_eq!(open.field("to"), Some("open"));
    assert_eq!(open.field("cause"), Some("2 consecutive failures"));
    let reset = &events[1];
    assert_eq!(reset.level, "INFO");
    assert_eq!(
        (reset.field("from"), reset.field("to")),
        (Some("open"), Some("closed"))
    );
}
