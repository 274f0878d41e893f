//! The JSON of `Snapshot`, `Stats` and `State` (feature `serde`): the shape documented on
//! `Snapshot`, and back.
#![cfg(feature = "serde")]

use std::time::Duration;

use breaker::{Breaker, Config, Snapshot, State, Stats};
use serde_json::{json, Value};

#[tokio::test(start_paused = true)]
async fn a_snapshot_is_the_documented_json_and_reads_back_equal() {
    let b = Breaker::new(
        "serde::get_tax",
        Config::default()
            .threshold(3)
            .cool_off(Duration::from_millis(4200)),
    );
    for _ in 0..2 {
        b.call(async { Ok::<_, &str>(()) }).await.unwrap();
    }
    for _ in 0..3 {
        let _ = b.call(async { Err::<(), _>("503") }).await;
    }
    let _ = b.call(async { Ok::<_, &str>(()) }).await; // rejected
    let snap = b.snapshot();
    assert_eq!(snap.state, State::Open);

    let text = serde_json::to_string(&snap).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        v,
        json!({
            "name": "serde::get_tax",
            "state": "open",
            "stats": {"calls": 6, "successes": 2, "failures": 3, "timeouts": 0, "slow_calls": 0,
                      "rejected": 1, "neutral": 0, "cancelled": 0, "abandoned": 0,
                      "throttled": 0, "shadow_rejected": 0, "retries": 0, "retries_denied": 0,
                      "hedges": 0, "hedges_won": 0, "hedges_denied": 0},
            "failure_rate": snap.failure_rate,
            "retry_in_ms": 4200,
            "throttle_rate": 0.0,
            "concurrency_limit": null,
            "dry_run": false
        }),
        "{text}"
    );
    assert!(v["failure_rate"].as_f64().unwrap() > 0.0);
    let back: Snapshot = serde_json::from_str(&text).unwrap();
    assert_eq!(back, snap);

    // Closed: no time left open.
    tokio::time::advance(Duration::from_millis(4200)).await;
    b.call(async { Ok::<_, &str>(()) }).await.unwrap();
    let closed = serde_json::to_value(b.snapshot()).unwrap();
    assert_eq!(closed["state"], "closed");
    assert_eq!(closed["retry_in_ms"], Value::Null);
    let back: Snapshot = serde_json::from_value(closed).unwrap();
    assert_eq!(back, b.snapshot());
}

#[test]
fn states_are_snake_case_strings_both_ways() {
    for (state, text) in [
        (State::Closed, "closed"),
        (State::Open, "open"),
        (State::HalfOpen, "half_open"),
        (State::ForcedOpen, "forced_open"),
        (State::Disabled, "disabled"),
    ] {
        assert_eq!(serde_json::to_value(state).unwrap(), json!(text));
        assert_eq!(serde_json::from_value::<State>(json!(text)).unwrap(), state);
        assert_eq!(state.as_str(), text, "the same names as logs and metrics");
    }
    assert!(serde_json::from_value::<State>(json!("HalfOpen")).is_err());
}

#[test]
fn stats_written_before_neutral_and_cancelled_existed_still_read() {
    let old = json!({"calls": 3, "successes": 1, "failures": 1, "timeouts": 0,
                     "slow_calls": 0, "rejected": 1});
    let stats: Stats = serde_json::from_value(old).unwrap();
    assert_eq!(
        (stats.calls, stats.rejected, stats.neutral, stats.cancelled),
        (3, 1, 0, 0)
    );
    let mut expected = Stats::default();
    expected.calls = 3;
    expected.successes = 1;
    expected.failures = 1;
    expected.rejected = 1;
    assert_eq!(stats, expected);
}
