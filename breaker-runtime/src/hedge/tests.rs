//! Unit tests of hedging that look inside a breaker: what records latencies.

use std::time::Duration;

use crate::{Breaker, Config, HedgeDelay};

/// A breaker without `hedge` never makes hedging's state: its hedged calls are plain calls,
/// and nothing is recorded anywhere (the closed call path is the plain one).
#[tokio::test(start_paused = true)]
async fn a_breaker_without_hedge_records_nothing() {
    let b = Breaker::unlisted("hedge::none".into(), Config::default()).unwrap();
    for _ in 0..200 {
        let r = b
            .call_hedged(|| async {
                tokio::time::sleep(Duration::from_millis(5)).await;
                Ok::<_, ()>(1)
            })
            .await;
        assert_eq!(r, Ok(1));
    }
    assert!(b.shared.hedging_made().is_none());
    assert_eq!(b.stats().calls, 200);
}

/// Only hedged calls record: a breaker with `hedge` records one latency per first attempt
/// of a hedged call, and none for its plain calls.
#[tokio::test(start_paused = true)]
async fn only_hedged_calls_record() {
    let config = Config::default()
        .hedge(1)
        .hedge_delay(HedgeDelay::Fixed(Duration::from_millis(50)));
    let b = Breaker::unlisted("hedge::plain".into(), config).unwrap();
    for _ in 0..10 {
        b.call(async { Ok::<_, ()>(()) }).await.unwrap();
    }
    assert!(b.shared.hedging_made().is_none());
    for _ in 0..10 {
        b.call_hedged(|| async { Ok::<_, ()>(()) }).await.unwrap();
    }
    // Fast failures are not latencies.
    let _ = b.call_hedged(|| async { Err::<(), _>(()) }).await;
    let now = crate::clock::Clock::now(&b.shared.clock);
    assert_eq!(b.shared.hedging().samples(now), 10);
}
