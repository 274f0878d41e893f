//! The attribute's keys as data: `&[Set::threshold(3), Set::cool_off(Dur::Secs(10))]`, a
//! literal the compiler keeps as a constant (it promotes it: every value is a literal),
//! applied to `Config::DEFAULT` here, once, when the function's breaker is made.
//!
//! What it replaces: a `const __CONFIG: Config = Config::DEFAULT.threshold(3)…` in every
//! annotated function, moved into the breaker's constructor. Evaluating that constant (each
//! builder call moves the whole `Config` through the compiler's interpreter), keeping it, and
//! moving it cost 2.2 M compiler instructions a function with three keys where this costs
//! 0.9 M (a crate of 200 such functions under callgrind). The keys still become the same
//! builder calls, in the order written. Each variant is named after its builder, so a key
//! without one does not compile; `tests/attribute_keys.rs` checks that every key's breaker
//! has the configuration its builders make.

use core::time::Duration;

use crate::{Breaker, Config, HedgeDelay, Name};

/// One key's value, as the builder of the same name takes it (durations as [`Dur`]: a
/// literal, where `Duration::from_secs(10)` is a call the compiler does not promote).
#[allow(non_camel_case_types, missing_docs)]
#[derive(Debug, Clone, Copy)]
pub enum Set {
    threshold(u32),
    failure_rate(u32),
    window_calls(u32),
    window_duration(Dur),
    min_calls(u32),
    slow_call(Dur),
    cool_off(Dur),
    max_cool_off(Dur),
    jitter(Dur),
    probes(u32),
    success_threshold(u32),
    timeout(Dur),
    max_concurrent(u32),
    max_keys(usize),
    idle(Dur),
    max_open_percent(u32),
    throttle(f64),
    max_throttle(u32),
    throttle_window(Dur),
    ramp(Dur),
    dry_run(bool),
    adaptive_concurrency(u32),
    retry(u32),
    retry_budget(u32),
    backoff(Dur),
    retry_within(Dur),
    hedge(u32),
    /// `hedge_delay(HedgeDelay::Percentile(p))`.
    hedge_delay_percentile(f64),
    /// `hedge_delay(HedgeDelay::Fixed(d))`.
    hedge_delay_fixed(Dur),
    hedge_budget(u32),
}

/// A duration as a literal, in the unit it was written in.
#[allow(missing_docs)]
#[derive(Debug, Clone, Copy)]
pub enum Dur {
    Secs(u64),
    Millis(u64),
    Micros(u64),
    Nanos(u64),
}

impl Dur {
    const fn get(self) -> Duration {
        match self {
            Dur::Secs(n) => Duration::from_secs(n),
            Dur::Millis(n) => Duration::from_millis(n),
            Dur::Micros(n) => Duration::from_micros(n),
            Dur::Nanos(n) => Duration::from_nanos(n),
        }
    }
}

/// `Config::DEFAULT` with each key's builder called, in order.
pub fn config_of(keys: &[Set]) -> Config {
    keys.iter().fold(Config::DEFAULT, |c, key| match *key {
        Set::threshold(n) => c.threshold(n),
        Set::failure_rate(n) => c.failure_rate(n),
        Set::window_calls(n) => c.window_calls(n),
        Set::window_duration(d) => c.window_duration(d.get()),
        Set::min_calls(n) => c.min_calls(n),
        Set::slow_call(d) => c.slow_call(d.get()),
        Set::cool_off(d) => c.cool_off(d.get()),
        Set::max_cool_off(d) => c.max_cool_off(d.get()),
        Set::jitter(d) => c.jitter(d.get()),
        Set::probes(n) => c.probes(n),
        Set::success_threshold(n) => c.success_threshold(n),
        Set::timeout(d) => c.timeout(d.get()),
        Set::max_concurrent(n) => c.max_concurrent(n),
        Set::max_keys(n) => c.max_keys(n),
        Set::idle(d) => c.idle(d.get()),
        Set::max_open_percent(n) => c.max_open_percent(n),
        Set::throttle(k) => c.throttle(k),
        Set::max_throttle(n) => c.max_throttle(n),
        Set::throttle_window(d) => c.throttle_window(d.get()),
        Set::ramp(d) => c.ramp(d.get()),
        Set::dry_run(on) => c.dry_run(on),
        Set::adaptive_concurrency(n) => c.adaptive_concurrency(n),
        Set::retry(n) => c.retry(n),
        Set::retry_budget(n) => c.retry_budget(n),
        Set::backoff(d) => c.backoff(d.get()),
        Set::retry_within(d) => c.retry_within(d.get()),
        Set::hedge(n) => c.hedge(n),
        Set::hedge_delay_percentile(p) => c.hedge_delay(HedgeDelay::Percentile(p)),
        Set::hedge_delay_fixed(d) => c.hedge_delay(HedgeDelay::Fixed(d.get())),
        Set::hedge_budget(n) => c.hedge_budget(n),
    })
}

/// The function's breaker, made from its name and keys (as `lazy::breaker`, which this
/// calls): one call with nothing to drop in the function's own code, so it has no unwinding
/// path of its own.
pub fn breaker_of(name: &'static &'static str, shared: bool, keys: &'static [Set]) -> Breaker {
    super::lazy::breaker(Name::from_static(name), shared, config_of(keys))
}

/// [`breaker_of`] for a method's breaker, whose name is made from its type.
pub fn named_breaker_of(name: Name, keys: &'static [Set]) -> Breaker {
    super::lazy::breaker(name, false, config_of(keys))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every key becomes its builder's call: the same `Config` as the chain of builders.
    #[test]
    fn every_key_becomes_its_builder_call() {
        let keys = [
            Set::threshold(3),
            Set::failure_rate(50),
            Set::window_calls(20),
            Set::min_calls(10),
            Set::slow_call(Dur::Millis(500)),
            Set::cool_off(Dur::Secs(30)),
            Set::max_cool_off(Dur::Secs(300)),
            Set::jitter(Dur::Micros(1500)),
            Set::probes(2),
            Set::success_threshold(2),
            Set::timeout(Dur::Nanos(600_000_001)),
            Set::max_concurrent(8),
            Set::max_keys(100),
            Set::idle(Dur::Secs(300)),
            Set::max_open_percent(50),
            Set::throttle(2.0),
            Set::max_throttle(90),
            Set::throttle_window(Dur::Secs(60)),
            Set::ramp(Dur::Secs(30)),
            Set::dry_run(true),
            Set::retry(3),
            Set::retry_budget(20),
            Set::backoff(Dur::Millis(100)),
            Set::retry_within(Dur::Secs(2)),
            Set::hedge_budget(5),
        ];
        let built = Config::DEFAULT
            .threshold(3)
            .failure_rate(50)
            .window_calls(20)
            .min_calls(10)
            .slow_call(Duration::from_millis(500))
            .cool_off(Duration::from_secs(30))
            .max_cool_off(Duration::from_secs(300))
            .jitter(Duration::from_micros(1500))
            .probes(2)
            .success_threshold(2)
            .timeout(Duration::from_nanos(600_000_001))
            .max_concurrent(8)
            .max_keys(100)
            .idle(Duration::from_secs(300))
            .max_open_percent(50)
            .throttle(2.0)
            .max_throttle(90)
            .throttle_window(Duration::from_secs(60))
            .ramp(Duration::from_secs(30))
            .dry_run(true)
            .retry(3)
            .retry_budget(20)
            .backoff(Duration::from_millis(100))
            .retry_within(Duration::from_secs(2))
            .hedge_budget(5);
        assert_eq!(config_of(&keys), built);
        // And each key changes what it names (no arm a no-op).
        for key in keys {
            assert_ne!(config_of(&[key]), Config::DEFAULT, "{key:?}");
        }
        let windowed = config_of(&[Set::window_duration(Dur::Secs(30))]);
        assert_eq!(
            windowed,
            Config::DEFAULT.window_duration(Duration::from_secs(30))
        );
        let adaptive = config_of(&[Set::adaptive_concurrency(100)]);
        assert_eq!(adaptive, Config::DEFAULT.adaptive_concurrency(100));
        assert_ne!(adaptive, Config::DEFAULT);
        for (set, delay) in [
            (
                Set::hedge_delay_percentile(95.0),
                HedgeDelay::Percentile(95.0),
            ),
            (
                Set::hedge_delay_fixed(Dur::Millis(20)),
                HedgeDelay::Fixed(Duration::from_millis(20)),
            ),
        ] {
            let hedged = config_of(&[Set::hedge(1), set]);
            assert_eq!(hedged, Config::DEFAULT.hedge(1).hedge_delay(delay));
            assert_ne!(hedged, Config::DEFAULT.hedge(1));
        }
    }
}
