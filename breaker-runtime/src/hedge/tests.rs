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

/// First attempts that answer in their first poll are each recorded until a slot of the
/// window has held `SAMPLE_AFTER` samples; then one in `SAMPLE_ONE_IN` is, `SAMPLE_ONE_IN`
/// times: the window's count stays what it would be, on average.
#[tokio::test(start_paused = true)]
async fn answers_at_once_are_sampled_once_the_window_is_full() {
    use crate::hedging::{SAMPLE_AFTER, SAMPLE_ONE_IN};
    let config = Config::default()
        .hedge(1)
        .hedge_delay(HedgeDelay::Fixed(Duration::from_millis(50)));
    let b = Breaker::unlisted("hedge::sampled".into(), config).unwrap();
    let at_once = || async { Ok::<_, ()>(()) };
    let first = u64::from(SAMPLE_AFTER) + 1;
    for _ in 0..first {
        b.call_hedged(at_once).await.unwrap();
    }
    let now = crate::clock::Clock::now(&b.shared.clock);
    assert_eq!(b.shared.hedging().samples(now), first, "each recorded");
    let more = 16_000;
    for _ in 0..more {
        b.call_hedged(at_once).await.unwrap();
    }
    let sampled = b.shared.hedging().samples(now) - first;
    assert_eq!(
        sampled % u64::from(SAMPLE_ONE_IN),
        0,
        "in steps of {SAMPLE_ONE_IN}"
    );
    // 1 000 draws of 1 in 16 on average: within five standard deviations (about 30).
    assert!((12_000..=20_000).contains(&sampled), "{sampled} for {more}");
    assert_eq!(b.stats().calls, first + more);
}
