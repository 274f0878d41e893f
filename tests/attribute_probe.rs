//! `probe = path` on an attribute's breaker: a quiet dependency is closed by the breaker's
//! own probe, on paused time, and the attribute's breaker is reconfigured through its handle.

use std::{
    sync::atomic::{AtomicUsize, Ordering::SeqCst},
    time::Duration,
};

use breaker::{circuit_breaker, registry, CallError, Config, State};

static PINGS: AtomicUsize = AtomicUsize::new(0);

async fn ping() -> Result<(), std::io::Error> {
    PINGS.fetch_add(1, SeqCst);
    Ok(())
}

#[circuit_breaker(name = "attribute_probe::quiet", threshold = 1, cool_off = "5s", probe = ping)]
async fn quiet(fail: bool) -> Result<u32, CallError<&'static str>> {
    if fail {
        Err(CallError::Inner("503"))
    } else {
        Ok(1)
    }
}

#[tokio::test(start_paused = true)]
async fn the_attributes_probe_closes_a_quiet_breaker() {
    assert!(quiet(true).await.is_err());
    let handle = registry().get("attribute_probe::quiet").unwrap();
    assert_eq!(handle.state(), State::Open);
    tokio::time::sleep(Duration::from_secs(5)).await;
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!(PINGS.load(SeqCst), 1);
    assert_eq!(handle.state(), State::Closed, "closed with no call");

    // Reconfigured through its handle: the probe is kept, the threshold changes.
    handle
        .reconfigure(
            Config::default()
                .threshold(2)
                .cool_off(Duration::from_secs(5)),
        )
        .unwrap();
    assert!(quiet(true).await.is_err());
    assert_eq!(handle.state(), State::Closed, "the new threshold of 2");
    assert!(quiet(true).await.is_err());
    assert_eq!(handle.state(), State::Open);
    tokio::time::sleep(Duration::from_secs(5)).await;
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert_eq!((handle.state(), PINGS.load(SeqCst)), (State::Closed, 2));
}
