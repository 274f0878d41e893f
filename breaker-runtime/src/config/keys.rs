//! The keys of a configuration as a file writes them, listed once (the `keys!` invocation
//! below): how each is read from and written to a [`Config`], the log line of a change
//! (`log_change`), and, with feature `serde`, [`ConfigPatch`](super::ConfigPatch)'s fields and
//! `Config`'s file form (`super::serde`, `super::patch`; one value's text is `super::text`). A new key is one line here.

use std::{fmt, time::Duration};

#[cfg(feature = "serde")]
use super::ConfigError;
use super::{Config, Window};

/// What a key holds: compared for the change log and shown in it (a file's reading and
/// writing of it is `super::text::FileValue`).
pub(crate) trait Value: Copy + PartialEq + fmt::Debug {}

impl<T: Copy + PartialEq + fmt::Debug> Value for T {}

/// Lists every key once; see the invocation below for what each line says.
macro_rules! keys {
    ($(
        $key:ident: $ty:ty = |$c:ident| $get:expr_2021, |$m:ident, $v:ident| $set:expr_2021;
    )*) => {
        /// The names of every key, as a file writes them.
        #[cfg(feature = "serde")]
        pub(crate) const KEYS: &[&str] = &[$(stringify!($key)),*];

        /// Each key whose value differs between `old` and `new`, with its two values shown.
        fn changes(old: &Config, new: &Config) -> Vec<(&'static str, String, String)> {
            let mut changed = Vec::new();
            $({
                let get = |$c: &Config| -> Option<$ty> { $get };
                let (a, b) = (get(old), get(new));
                if a != b {
                    changed.push((stringify!($key), show(a), show(b)));
                }
            })*
            changed
        }

        /// A file's keys, each absent (`None`), unset (`Some(None)`: `null`) or given.
        #[cfg(feature = "serde")]
        #[derive(Clone, Default, PartialEq, Debug)]
        pub(crate) struct Keys {
            $(pub(crate) $key: Option<Option<$ty>>,)*
        }

        #[cfg(feature = "serde")]
        impl Keys {
            /// Sets in `config` every key given or unset (an unset key takes its default).
            pub(crate) fn set_in(&self, config: &mut Config) {
                $(if let Some(value) = self.$key {
                    let set = |$m: &mut Config, $v: Option<$ty>| $set;
                    set(config, value);
                })*
            }

            /// The names of the keys given or unset.
            pub(crate) fn named(&self) -> Vec<&'static str> {
                let mut named = Vec::new();
                $(if self.$key.is_some() {
                    named.push(stringify!($key));
                })*
                named
            }

            /// Reads the value of `key` from `map` into its field; `false`: no such key.
            pub(crate) fn read<'de, A: ::serde::de::MapAccess<'de>>(
                &mut self,
                key: &str,
                map: &mut A,
            ) -> Result<bool, A::Error> {
                match key {
                    $(stringify!($key) => {
                        if self.$key.is_some() {
                            return Err(<A::Error as ::serde::de::Error>::duplicate_field(
                                stringify!($key),
                            ));
                        }
                        self.$key = Some(map.next_value_seed(
                            super::text::Seed::<$ty>::new(stringify!($key)),
                        )?);
                        Ok(true)
                    })*
                    _ => Ok(false),
                }
            }

            /// Writes the keys given (a value) or unset (`null`).
            pub(crate) fn write<M: ::serde::ser::SerializeMap>(
                &self,
                map: &mut M,
            ) -> Result<(), M::Error> {
                $(if let Some(value) = self.$key {
                    map.serialize_entry(stringify!($key), &value.map(super::text::Out))?;
                })*
                Ok(())
            }

            /// Every key `config` holds a value for (its file form).
            pub(crate) fn of(config: &Config) -> Keys {
                Keys {
                    $($key: {
                        let get = |$c: &Config| -> Option<$ty> { $get };
                        get(config).filter(super::text::FileValue::written).map(Some)
                    },)*
                }
            }
        }
    };
}

// One line a key: its name (the builder method's and the attribute's), its value's type, how
// a configuration holds it (`None`: not set) and how a file sets it (`None`: unset, back to
// the default). A new key of `Config` is a new line.
keys! {
    threshold: u32 = |c| c.threshold, |c, v| c.threshold = v;
    failure_rate: u32 = |c| c.failure_rate, |c, v| c.failure_rate = v;
    window_calls: u32 = |c| match c.window {
        Some(Window::Calls(n)) => Some(n),
        _ => None,
    }, |c, v| match v {
        Some(n) => c.window = Some(Window::Calls(n)),
        None if matches!(c.window, Some(Window::Calls(_))) => c.window = None,
        None => {}
    };
    window_duration: Duration = |c| match c.window {
        Some(Window::Duration(d)) => Some(d),
        _ => None,
    }, |c, v| match v {
        Some(d) => c.window = Some(Window::Duration(d)),
        None if matches!(c.window, Some(Window::Duration(_))) => c.window = None,
        None => {}
    };
    min_calls: u32 = |c| c.min_calls, |c, v| c.min_calls = v;
    slow_call: Duration = |c| c.slow_call, |c, v| c.slow_call = v;
    cool_off: Duration = |c| Some(c.cool_off), |c, v| c.cool_off = v.unwrap_or(Config::DEFAULT.cool_off);
    max_cool_off: Duration = |c| c.max_cool_off, |c, v| c.max_cool_off = v;
    jitter: Duration = |c| c.jitter, |c, v| c.jitter = v;
    probes: u32 = |c| Some(c.probes), |c, v| c.probes = v.unwrap_or(Config::DEFAULT.probes);
    success_threshold: u32 = |c| c.success_threshold, |c, v| c.success_threshold = v;
    timeout: Duration = |c| c.timeout, |c, v| c.timeout = v;
    max_concurrent: u32 = |c| c.max_concurrent, |c, v| c.max_concurrent = v;
    max_keys: usize = |c| Some(c.max_keys), |c, v| c.max_keys = v.unwrap_or(Config::DEFAULT_MAX_KEYS);
    idle: Duration = |c| Some(c.idle), |c, v| c.idle = v.unwrap_or(Config::DEFAULT_IDLE);
    max_open_percent: u32 = |c| c.max_open_percent, |c, v| c.max_open_percent = v;
    throttle: f64 = |c| c.overload.throttle, |c, v| c.overload.throttle = v;
    max_throttle: u32 = |c| c.overload.max_throttle, |c, v| c.overload.max_throttle = v;
    throttle_window: Duration = |c| c.overload.throttle_window, |c, v| c.overload.throttle_window = v;
    ramp: Duration = |c| c.overload.ramp, |c, v| c.overload.ramp = v;
    dry_run: bool = |c| Some(c.overload.dry_run), |c, v| c.overload.dry_run = v.unwrap_or(false);
    adaptive_concurrency: u32 = |c| c.overload.adaptive_concurrency, |c, v| c.overload.adaptive_concurrency = v;
    retry: u32 = |c| c.retry.attempts, |c, v| c.retry.attempts = v;
    retry_budget: u32 = |c| c.retry.percent, |c, v| c.retry.percent = v;
    backoff: Duration = |c| c.retry.backoff, |c, v| c.retry.backoff = v;
    retry_within: Duration = |c| c.retry.within, |c, v| c.retry.within = v;
    hedge: u32 = |c| c.hedge.hedges, |c, v| c.hedge.hedges = v;
    hedge_delay: super::HedgeDelay = |c| c.hedge.delay, |c, v| c.hedge.delay = v;
    hedge_budget: u32 = |c| c.hedge.percent, |c, v| c.hedge.percent = v;
}

fn show<T: Value>(value: Option<T>) -> String {
    match value {
        Some(v) => format!("{v:?}"),
        None => "none".to_owned(),
    }
}

/// A window counts calls or time: a file giving both is refused (naming the second).
#[cfg(feature = "serde")]
pub(crate) fn one_window(keys: &Keys) -> Result<(), ConfigError> {
    if matches!(keys.window_calls, Some(Some(_))) && matches!(keys.window_duration, Some(Some(_))) {
        return Err(ConfigError::new(
            "window_duration",
            "cannot be set with `window_calls` (a window counts calls or time)",
        ));
    }
    Ok(())
}

/// The one INFO line (target `breaker`) of a change in force: the keys changed, old → new
/// (`threshold: none → 3, cool_off: 10s → 5s`); none when no key changed (a hook or a probe
/// is code, not a key).
pub(crate) fn log_change(name: &str, old: &Config, new: &Config) {
    let changed = changes(old, new);
    if changed.is_empty() {
        return;
    }
    let list = changed
        .iter()
        .map(|(key, a, b)| format!("{key}: {a} → {b}"))
        .collect::<Vec<_>>()
        .join(", ");
    tracing::info!(
        target: "breaker",
        breaker = name,
        changed = %list,
        "breaker {name} reconfigured: {list}"
    );
}

#[cfg(all(test, not(breaker_loom)))]
mod tests {
    use super::*;

    #[test]
    fn changes_name_each_key_old_and_new() {
        let old = Config::default().window_calls(50);
        let new = Config::default()
            .threshold(3)
            .cool_off(Duration::from_secs(5))
            .window_duration(Duration::from_secs(90))
            .dry_run(true);
        let list: Vec<_> = changes(&old, &new)
            .into_iter()
            .map(|(k, a, b)| format!("{k}: {a} → {b}"))
            .collect();
        assert_eq!(
            list,
            [
                "threshold: none → 3",
                "window_calls: 50 → none",
                "window_duration: none → 90s",
                "cool_off: 10s → 5s",
                "dry_run: false → true",
            ]
        );
        assert!(changes(&new, &new.clone()).is_empty());
    }
}
