//! Validation and defaults of [`Config`](super::Config).

use super::*;

fn field_of(config: Config) -> &'static str {
    config.validate().unwrap_err().field()
}

#[test]
fn every_invalid_value_names_its_field() {
    let d0 = Duration::ZERO;
    let c = Config::default;
    assert_eq!(field_of(c().threshold(0)), "threshold");
    assert_eq!(field_of(c().failure_rate(0)), "failure_rate");
    assert_eq!(field_of(c().failure_rate(101)), "failure_rate");
    assert_eq!(
        field_of(c().failure_rate(50).window_calls(0)),
        "window_calls"
    );
    assert_eq!(
        field_of(c().failure_rate(50).window_duration(d0)),
        "window_duration"
    );
    assert_eq!(field_of(c().failure_rate(50).min_calls(0)), "min_calls");
    assert_eq!(
        field_of(c().failure_rate(50).window_calls(5).min_calls(6)),
        "min_calls"
    );
    assert_eq!(field_of(c().window_calls(5)), "window_calls");
    assert_eq!(field_of(c().min_calls(5)), "min_calls");
    assert_eq!(field_of(c().slow_call(d0)), "slow_call");
    assert_eq!(field_of(c().cool_off(d0)), "cool_off");
    assert_eq!(
        field_of(c().max_cool_off(Duration::from_secs(1))),
        "max_cool_off"
    );
    assert_eq!(field_of(c().jitter(d0)), "jitter");
    assert_eq!(field_of(c().probes(0)), "probes");
    assert_eq!(field_of(c().success_threshold(0)), "success_threshold");
    assert_eq!(field_of(c().timeout(d0)), "timeout");
    assert_eq!(field_of(c().max_concurrent(0)), "max_concurrent");
    assert_eq!(field_of(c().max_keys(0)), "max_keys");
    assert_eq!(field_of(c().idle(d0)), "idle");
}

/// The caps: the limit itself is accepted, one more is refused with a reason that
/// names the limit; `u32::MAX` (which would have allocated ~100 GB) is refused before
/// anything is allocated.
#[test]
fn probes_and_the_count_window_are_capped() {
    let c = Config::default;
    assert!(c().probes(Config::MAX_PROBES).validate().is_ok());
    let err = c().probes(Config::MAX_PROBES + 1).validate().unwrap_err();
    assert_eq!(err.field(), "probes");
    assert_eq!(err.reason(), "must be at most 1000 (got 1001)");
    assert_eq!(field_of(c().probes(u32::MAX)), "probes");

    let rate = || c().failure_rate(50);
    let max = Config::MAX_WINDOW_CALLS;
    assert!(rate().window_calls(max).validate().is_ok());
    let err = rate().window_calls(max + 1).validate().unwrap_err();
    assert_eq!(err.field(), "window_calls");
    assert_eq!(err.reason(), "must be at most 100000 (got 100001)");
    assert_eq!(field_of(rate().window_calls(4_000_000_000)), "window_calls");
    // A breaker is never built from a refused config: no allocation happened.
    let refused = crate::Breaker::try_new("config::huge_probes", c().probes(u32::MAX));
    assert_eq!(refused.unwrap_err().field(), "probes");
}

#[test]
fn keyed_bounds_default_and_are_kept() {
    let p = Config::default().validate().unwrap();
    assert_eq!(p.max_keys, 10_000);
    assert_eq!(p.idle, 600_000_000_000, "ten minutes");
    let p = Config::default()
        .max_keys(3)
        .idle(Duration::from_secs(1))
        .validate()
        .unwrap();
    assert_eq!((p.max_keys, p.idle), (3, 1_000_000_000));
    assert!(!Config::default()
        .max_keys(3)
        .same_policy(&Config::default()));
}

#[test]
fn defaults_resolve_as_documented() {
    let p = Config::default().validate().unwrap();
    assert_eq!(p.threshold, Some(5));
    assert_eq!(p.failure_rate, None);
    assert_eq!(p.cool_off, 10_000_000_000);
    assert_eq!((p.probes, p.success_threshold), (1, 1));

    let rate = Config::default().failure_rate(50).validate().unwrap();
    assert_eq!(
        rate.threshold, None,
        "threshold is off with only failure_rate"
    );
    assert_eq!(rate.window, Some(Window::Calls(100)));
    assert_eq!(rate.min_calls, 10);
    let small = Config::default()
        .failure_rate(50)
        .window_calls(4)
        .validate();
    assert_eq!(
        small.unwrap().min_calls,
        4,
        "min_calls is at most the window"
    );
    let probes = Config::default().probes(3).validate().unwrap();
    assert_eq!(probes.success_threshold, 3);
}

#[test]
fn huge_durations_saturate_instead_of_overflowing() {
    let p = Config::default()
        .cool_off(Duration::MAX)
        .max_cool_off(Duration::MAX)
        .validate()
        .unwrap();
    assert_eq!(p.cool_off, u64::MAX);
    assert_eq!(p.cool_off_after(200), u64::MAX);
}

#[test]
fn cool_off_doubles_up_to_the_cap() {
    let p = Config::default()
        .cool_off(Duration::from_secs(1))
        .max_cool_off(Duration::from_secs(5))
        .validate()
        .unwrap();
    let secs: Vec<u64> = (0..5)
        .map(|n| p.cool_off_after(n) / 1_000_000_000)
        .collect();
    assert_eq!(secs, [1, 2, 4, 5, 5]);
}

#[test]
fn same_policy_ignores_hooks() {
    let a = Config::default().threshold(3);
    let b = Config::default().threshold(3).on_state_change(|_| {});
    assert!(a.same_policy(&b));
    assert!(!a.same_policy(&Config::default()));
    assert!(Config::default().same_policy(&Config::default().threshold(5)));
}

/// What the registry needs to warn that a second definition's hook is dropped: the
/// policies agree, the hooks do not.
#[test]
fn same_hooks_tells_a_second_hook_apart() {
    let first = Config::default().on_state_change(|_| {});
    let second = Config::default().on_state_change(|_| {});
    assert!(first.same_policy(&second));
    assert!(!first.same_hooks(&second), "two closures, two hooks");
    assert!(!first.same_hooks(&Config::default()), "a hook and none");
    assert!(!Config::default().same_hooks(&first), "none and a hook");
    assert!(Config::default().same_hooks(&Config::default().threshold(3)));
    let clone = first.clone();
    assert!(first.same_hooks(&clone), "a clone shares its hook");
}
