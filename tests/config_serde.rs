//! `Config` as a file or a control plane writes it (feature `serde`): keys named as the
//! attribute's, durations as humantime strings, a bad field named; and a file driving
//! `reconfigure`.
#![cfg(feature = "serde")]

use std::time::Duration;

use breaker::{Breaker, Config, State};
use serde_json::{json, Value};

const MS: Duration = Duration::from_millis(1);
const SEC: Duration = Duration::from_secs(1);

#[test]
fn a_config_round_trips_through_json() {
    let configs = [
        Config::default(),
        Config::default()
            .threshold(3)
            .failure_rate(40)
            .window_calls(50)
            .min_calls(20)
            .slow_call(1500 * MS)
            .cool_off(90 * SEC)
            .max_cool_off(600 * SEC)
            .jitter(250 * MS)
            .probes(3)
            .success_threshold(2)
            .timeout(800 * MS)
            .max_concurrent(64)
            .max_keys(500)
            .idle(120 * SEC)
            .max_open_percent(30)
            .throttle(2.0)
            .max_throttle(80)
            .throttle_window(30 * SEC)
            .ramp(20 * SEC)
            .dry_run(true),
        Config::default()
            .failure_rate(50)
            .window_duration(Duration::from_secs(90))
            .adaptive_concurrency(100),
        Config::default()
            .retry(3)
            .retry_budget(10)
            .backoff(250 * MS)
            .retry_within(2 * SEC),
    ];
    for config in configs {
        let text = serde_json::to_string(&config).unwrap();
        let back: Config = serde_json::from_str(&text).unwrap();
        assert_eq!(back, config, "{text}");
    }
}

#[test]
fn durations_are_humantime_strings_and_keys_the_attributes() {
    let config = Config::default()
        .threshold(3)
        .cool_off(90 * SEC)
        .timeout(600 * MS)
        .dry_run(true);
    let v = serde_json::to_value(&config).unwrap();
    assert_eq!(
        v,
        json!({
            "threshold": 3,
            "cool_off": "1m 30s",
            "probes": 1,
            "timeout": "600ms",
            "max_keys": 10000,
            "idle": "10m",
            "dry_run": true,
        })
    );
    let read: Config = serde_json::from_value(
        json!({"threshold": 3, "cool_off": "90s", "timeout": "600ms", "dry_run": true}),
    )
    .unwrap();
    assert_eq!(read, config, "absent keys are the defaults");
}

/// A bad file fails where it is read, naming the field.
#[test]
fn bad_input_names_the_field() {
    let error = |v: Value| serde_json::from_value::<Config>(v).unwrap_err().to_string();
    let e = error(json!({"cool_off": "ten seconds"}));
    assert!(e.contains("`cool_off`") && e.contains("ten seconds"), "{e}");
    let e = error(json!({"threshold": 0}));
    assert!(e.contains("`threshold` must be at least 1"), "{e}");
    let e = error(json!({"window_calls": 20}));
    assert!(
        e.contains("`window_calls` has no effect without `failure_rate`"),
        "{e}"
    );
    let e = error(json!({"failure_rate": 50, "window_calls": 20, "window_duration": "1m"}));
    assert!(e.contains("`window_duration`"), "{e}");
    // A typo is refused, not silently left at its default.
    let e = error(json!({"treshold": 3}));
    assert!(e.contains("unknown field `treshold`"), "{e}");
    let e = error(json!({"threshold": -1}));
    assert!(e.contains("`threshold`: invalid value"), "{e}");
    // A wrong type names its key and what it wants.
    let e = error(json!({"cool_off": 5}));
    assert!(
        e.contains(
            r#"`cool_off`: invalid type: integer `5`, expected a duration string like "10s""#
        ),
        "{e}"
    );
    // `null` is the default, as an absent key is.
    let read: Config = serde_json::from_value(json!({"threshold": 3, "timeout": null})).unwrap();
    assert_eq!(read, Config::default().threshold(3));
}

/// What a control plane (or anyone who can write the file) may send: sizes and durations
/// past every bound are refused by name, never allocated or overflowed.
#[test]
fn hostile_values_are_refused_by_name() {
    let error = |v: Value| serde_json::from_value::<Config>(v).unwrap_err().to_string();
    let e = error(json!({"failure_rate": 50, "window_calls": 4_000_000_000u32}));
    assert!(e.contains("`window_calls` must be at most 100000"), "{e}");
    let e = error(json!({"probes": 4_000_000_000u32}));
    assert!(e.contains("`probes` must be at most 1000"), "{e}");
    let e = error(json!({"cool_off": "99999999999999999999999y"}));
    assert!(e.contains("`cool_off`"), "{e}");
    let e = error(json!({"timeout": "0s"}));
    assert!(e.contains("`timeout` must not be zero"), "{e}");
    let e = serde_json::from_str::<Config>(r#"{"throttle": 1e400}"#)
        .unwrap_err()
        .to_string();
    assert!(!e.is_empty(), "an infinite K is refused: {e}");
    let e = error(json!({"throttle": 0.5}));
    assert!(
        e.contains("`throttle` must be a finite number of at least 1"),
        "{e}"
    );
    // The largest duration humantime reads is capped where the engine uses it, not wrapped.
    let far: Config = serde_json::from_value(json!({"cool_off": "500y"})).unwrap();
    let b = Breaker::new("config_serde::far", far.threshold(1));
    let _ = b.call_sync(|| Err::<(), _>("503"));
    assert!(b.retry_in().unwrap() > Duration::from_secs(499 * 365 * 86_400));
}

/// The hook is code: not written, not read; `reconfigure` with a config read from a file
/// keeps the hook in force.
#[test]
fn the_hook_is_skipped_and_kept_across_a_reconfigure_from_a_file() {
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = seen.clone();
    let config = Config::default().threshold(5).on_state_change(move |_| {
        count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    });
    let v = serde_json::to_value(&config).unwrap();
    assert!(v.get("on_state_change").is_none(), "{v}");
    let b = Breaker::new("config_serde::hook", config);
    let file: Config = serde_json::from_str(r#"{ "threshold": 1, "cool_off": "30s" }"#).unwrap();
    b.reconfigure(file).unwrap();
    let _ = b.call_sync(|| Err::<(), _>("503"));
    assert_eq!(b.state(), State::Open, "the file's threshold is in force");
    assert_eq!(
        seen.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the hook still runs"
    );
    let left = b.retry_in().unwrap();
    assert!(
        left > 29 * SEC && left <= 30 * SEC,
        "the file's cool-off: {left:?}"
    );
}
