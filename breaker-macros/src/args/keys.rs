//! The one table of attribute keys. A row is everything the macro knows of a key: its field
//! in [`Args`] and value kind, its name, how its value is parsed, an example for messages,
//! whether it is part of the policy (`config = …` replaces it), the key it needs, the key it
//! excludes, and the `Config` builder call it becomes. Adding a key is one row here plus its runtime field;
//! the rules that are more than "needs" (exclusions, sizes) live in `rules.rs`.

use proc_macro2::{Span, TokenStream};
use syn::{spanned::Spanned, Expr, Ident, LitStr, Path};

use super::{
    limits::{MAX_ADAPTIVE, MAX_PROBES},
    values::*,
    Arg, HedgeDelayArg, WindowArg,
};
use std::time::Duration;

/// One row of the table, as the rules and messages read it.
pub(crate) struct Key {
    /// As written in the attribute.
    pub(crate) name: &'static str,
    /// A correct value, for messages (`write e.g. `threshold = 3``).
    pub(crate) example: &'static str,
    /// Part of the breaker's policy: `config = …` replaces it, so writing both is an error.
    pub(crate) policy: bool,
    /// The key it only applies with (`retry_budget` tunes `retry`).
    pub(crate) needs: Option<&'static str>,
    /// The key it cannot be combined with (`classify` replaces `is_failure`).
    pub(crate) excludes: Option<&'static str>,
    /// The `Config` builder method its value becomes, if any.
    pub(crate) becomes: Option<&'static str>,
}

/// The first of its arguments: an optional column's value, or its default.
macro_rules! first {
    ($value:expr $(, $default:expr)?) => {
        $value
    };
}

/// Generates from the rows: [`Args`] (one field a key), [`KEYS`] and [`TABLE`] (in the rows'
/// order, the DESIGN table's, which is also the order of the generated builder calls),
/// `Args::set` (parse a value into its field), `Args::written` and `Args::builder_calls`.
macro_rules! keys {
    ($(
        $(#[$doc:meta])*
        $field:ident: $ty:ty, $name:literal, $parse:expr,
        e.g. $example:literal, policy $policy:literal, needs $needs:expr,
        $(excludes $excludes:literal,)? becomes $becomes:expr;
    )*) => {
        /// The parsed arguments; `None` means "not written" (the runtime default).
        #[derive(Default)]
        pub(crate) struct Args {
            $( $(#[$doc])* pub(crate) $field: Option<Arg<$ty>>, )*
        }

        /// Every key the attribute accepts, in the order of the DESIGN table.
        pub(crate) const KEYS: &[&str] = &[$($name),*];

        pub(crate) const TABLE: &[Key] = &[$(Key {
            name: $name,
            example: $example,
            policy: $policy,
            needs: $needs,
            excludes: first!($(Some($excludes),)? None),
            becomes: $becomes,
        }),*];

        impl Args {
            /// Parses `value` as `key`'s kind into its field; `None` for a key not in the table.
            pub(super) fn set(&mut self, key: Ident, value: Expr) -> Option<syn::Result<()>> {
                let span = value.span();
                $(if key == $name {
                    let parse: fn(&Ident, Expr) -> syn::Result<$ty> = $parse;
                    return Some(parse(&key, value).map(|value| {
                        self.$field = Some(Arg { key, value, span });
                    }));
                })*
                None
            }

            /// Each key written, with its row, in the table's order.
            pub(crate) fn written(&self) -> impl Iterator<Item = (&'static Key, &Ident)> {
                TABLE
                    .iter()
                    .zip([$(self.$field.as_ref().map(|a| &a.key)),*])
                    .filter_map(|(row, key)| Some((row, key?)))
            }

            /// `.threshold(3).cool_off(…)…`: the builder call of each key written whose
            /// method `which` picks, in the table's order, so an expansion reads like the
            /// attribute.
            pub(crate) fn builder_calls(
                &self,
                krate: &TokenStream,
                which: impl Fn(&str) -> bool,
            ) -> TokenStream {
                self.each_becoming(which, |value, method, span| value.call(method, krate, span))
            }

            /// `Set::threshold(3), Set::cool_off(…), …`: each key written whose method `which`
            /// picks, as data for `breaker::__private::config_of`, in the table's order.
            pub(crate) fn settings(
                &self,
                krate: &TokenStream,
                which: impl Fn(&str) -> bool,
            ) -> TokenStream {
                self.each_becoming(which, |value, method, span| value.set(method, krate, span))
            }

            /// Each key written that becomes a builder call `which` picks, in the table's
            /// order, as `emit` writes it (given the value, the builder and the value's span).
            fn each_becoming(
                &self,
                which: impl Fn(&str) -> bool,
                emit: impl Fn(&dyn Value, &str, Span) -> TokenStream,
            ) -> TokenStream {
                let mut out = TokenStream::new();
                $(if let (Some(method), Some(arg)) = ($becomes, &self.$field) {
                    if which(method) {
                        out.extend(emit(&arg.value, method, arg.span));
                    }
                })*
                out
            }
        }
    };
}

keys! {
    threshold: u32, "threshold", |k, v| integer(k, &v),
        e.g. "3", policy true, needs None, becomes Some("threshold");
    failure_rate: u32, "failure_rate", |k, v| percent(k, &v),
        e.g. "50", policy true, needs None, becomes Some("failure_rate");
    /// `window_calls` or `window_duration`, by the value.
    window: WindowArg, "window", |k, v| window(k, &v),
        e.g. "100", policy true, needs Some("failure_rate"), becomes Some("window");
    min_calls: u32, "min_calls", |k, v| integer(k, &v),
        e.g. "10", policy true, needs Some("failure_rate"), becomes Some("min_calls");
    slow_call: Duration, "slow_call", |k, v| duration(k, &v),
        e.g. "\"2s\"", policy true, needs None, becomes Some("slow_call");
    cool_off: Duration, "cool_off", |k, v| duration(k, &v),
        e.g. "\"10s\"", policy true, needs None, becomes Some("cool_off");
    max_cool_off: Duration, "max_cool_off", |k, v| duration(k, &v),
        e.g. "\"5m\"", policy true, needs None, becomes Some("max_cool_off");
    jitter: Duration, "jitter", |k, v| duration(k, &v),
        e.g. "\"500ms\"", policy true, needs None, becomes Some("jitter");
    probes: u32, "probes", |k, v| at_most(k, &v, MAX_PROBES, PROBES_WHY),
        e.g. "3", policy true, needs None, becomes Some("probes");
    success_threshold: u32, "success_threshold", |k, v| integer(k, &v),
        e.g. "3", policy true, needs None, becomes Some("success_threshold");
    timeout: Duration, "timeout", |k, v| duration(k, &v),
        e.g. "\"600ms\"", policy true, needs None, becomes Some("timeout");
    max_concurrent: u32, "max_concurrent", |k, v| integer(k, &v),
        e.g. "16", policy true, needs None, becomes Some("max_concurrent");
    is_failure: Expr, "is_failure", |k, v| callable(k, v, "a `fn(&E) -> bool`"),
        e.g. "is_transient", policy false, needs None, becomes None;
    fallback: Expr, "fallback", |k, v| callable(k, v, "a function"),
        e.g. "cached_value", policy false, needs None, becomes None;
    name: LitStr, "name", |k, v| name_value(k, &v),
        e.g. "\"payments\"", policy false, needs None, becomes None;
    on_state_change: Expr, "on_state_change",
        |k, v| callable(k, v, "a `fn(&breaker::Transition)`"),
        e.g. "alert_on_call", policy false, needs None, becomes Some("on_state_change");
    config: Expr, "config", |_, v| Ok(v),
        e.g. "config_from_env()", policy false, needs None, becomes None;
    krate: Path, "crate", |k, v| crate_path(k, &v),
        e.g. "\"::my_facade::breaker\"", policy false, needs None, becomes None;
    key: Expr, "key", |_, v| Ok(v),
        e.g. "self.host", policy false, needs None, becomes None;
    // The bounds of the keyed map are policy too: `Config::max_keys`, `Config::idle`.
    max_keys: u32, "max_keys", |k, v| integer(k, &v),
        e.g. "1000", policy true, needs Some("key"), becomes Some("max_keys");
    idle: Duration, "idle", |k, v| duration(k, &v),
        e.g. "\"10m\"", policy true, needs Some("key"), becomes Some("idle");
    max_open: u32, "max_open", |k, v| open_percent(k, &v),
        e.g. "50", policy true, needs Some("key"), becomes Some("max_open_percent");
    classify: Expr, "classify",
        |k, v| callable(k, v, "a `fn(&Result<T, E>) -> breaker::Verdict`"),
        e.g. "judge_response", policy false, needs None, excludes "is_failure", becomes None;
    fleet: bool, "fleet", |k, v| boolean(k, &v),
        e.g. "true", policy false, needs None, becomes None;
    // Overload (part three): shedding, the ramp, the dry run and the adaptive limit.
    throttle: f64, "throttle", |k, v| throttle_k(k, &v),
        e.g. "2", policy true, needs None, becomes Some("throttle");
    max_throttle: u32, "max_throttle", |k, v| percent(k, &v),
        e.g. "90", policy true, needs Some("throttle"), becomes Some("max_throttle");
    throttle_window: Duration, "throttle_window", |k, v| duration(k, &v),
        e.g. "\"1m\"", policy true, needs Some("throttle"), becomes Some("throttle_window");
    ramp: Duration, "ramp", |k, v| duration(k, &v),
        e.g. "\"30s\"", policy true, needs None, becomes Some("ramp");
    dry_run: bool, "dry_run", |k, v| boolean(k, &v),
        e.g. "true", policy true, needs None, becomes Some("dry_run");
    adaptive_concurrency: u32, "adaptive_concurrency",
        |k, v| at_most(k, &v, MAX_ADAPTIVE, ADAPTIVE_WHY),
        e.g. "100", policy true, needs None, excludes "max_concurrent",
        becomes Some("adaptive_concurrency");
    /// Retries (part four): attempts in all, the budget's percent, the first wait, and the
    /// bound on one retried call's attempts and waits.
    retry: u32, "retry", |k, v| attempts(k, &v),
        e.g. "3", policy false, needs None, becomes Some("retry");
    retry_budget: u32, "retry_budget", |k, v| percent(k, &v),
        e.g. "20", policy false, needs Some("retry"), becomes Some("retry_budget");
    backoff: Duration, "backoff", |k, v| duration(k, &v),
        e.g. "\"100ms\"", policy false, needs Some("retry"), becomes Some("backoff");
    retry_within: Duration, "retry_within", |k, v| duration(k, &v),
        e.g. "\"2s\"", policy false, needs Some("retry"), becomes Some("retry_within");
    /// Hedging (part five): extra attempts, the delay before each, the budget's percent.
    hedge: u32, "hedge", |k, v| hedges(k, &v),
        e.g. "1", policy false, needs None, excludes "retry", becomes Some("hedge");
    hedge_delay: HedgeDelayArg, "hedge_delay", |k, v| hedge_delay(k, &v),
        e.g. "\"p95\"", policy false, needs Some("hedge"), becomes Some("hedge_delay");
    hedge_budget: u32, "hedge_budget", |k, v| hedge_percent(k, &v),
        e.g. "5", policy false, needs Some("hedge"), becomes Some("hedge_budget");
    /// The breaker's own probe (`Config::probe`): an `async fn() -> Verdict` (or `Result`).
    probe: Expr, "probe",
        |k, v| callable(k, v, "an `async fn() -> Verdict` (or `-> Result<T, E>`)"),
        e.g. "check_health", policy false, needs None, excludes "key", becomes Some("probe");
}
