//! The attribute's arguments: parsed into [`Args`], every value with its span, every misuse a
//! `syn::Error` on the offending token that says what to write instead.

use std::time::Duration;

use proc_macro2::Span;
use syn::{
    ext::IdentExt,
    parse::{Parse, ParseStream},
    spanned::Spanned,
    Expr, ExprLit, Ident, Lit, LitStr, Path, Token,
};

use crate::{errors::Errors, suggest};

mod rules;
mod values;

use values::*;

/// Every key the attribute accepts, in the order of the DESIGN table.
pub(crate) const KEYS: &[&str] = &[
    "threshold",
    "failure_rate",
    "window",
    "min_calls",
    "slow_call",
    "cool_off",
    "max_cool_off",
    "jitter",
    "probes",
    "success_threshold",
    "timeout",
    "max_concurrent",
    "is_failure",
    "fallback",
    "name",
    "on_state_change",
    "config",
    "crate",
    "key",
    "max_keys",
    "idle",
    "max_open",
    "classify",
    "fleet",
    "throttle",
    "max_throttle",
    "throttle_window",
    "ramp",
    "dry_run",
    "adaptive_concurrency",
    "retry",
    "retry_budget",
    "backoff",
    "probe",
];

/// The runtime's defaults that compile-time checks depend on (see `Config::default`).
pub(crate) const DEFAULT_COOL_OFF: Duration = Duration::from_secs(10);
pub(crate) const DEFAULT_WINDOW_CALLS: u32 = 100;

/// One value with the key it was given for.
pub(crate) struct Arg<T> {
    pub(crate) key: Ident,
    pub(crate) value: T,
    /// The value's tokens, for errors and for spanning the generated code.
    pub(crate) span: Span,
}

/// `window = 20` or `window = "1m"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WindowArg {
    Calls(u32),
    Duration(Duration),
}

/// The parsed and checked arguments; `None` means "not written" (the runtime default).
#[derive(Default)]
pub(crate) struct Args {
    pub(crate) threshold: Option<Arg<u32>>,
    pub(crate) failure_rate: Option<Arg<u32>>,
    pub(crate) window: Option<Arg<WindowArg>>,
    pub(crate) min_calls: Option<Arg<u32>>,
    pub(crate) slow_call: Option<Arg<Duration>>,
    pub(crate) cool_off: Option<Arg<Duration>>,
    pub(crate) max_cool_off: Option<Arg<Duration>>,
    pub(crate) jitter: Option<Arg<Duration>>,
    pub(crate) probes: Option<Arg<u32>>,
    pub(crate) success_threshold: Option<Arg<u32>>,
    pub(crate) timeout: Option<Arg<Duration>>,
    pub(crate) max_concurrent: Option<Arg<u32>>,
    pub(crate) is_failure: Option<Arg<Expr>>,
    pub(crate) fallback: Option<Arg<Expr>>,
    pub(crate) name: Option<Arg<LitStr>>,
    pub(crate) on_state_change: Option<Arg<Expr>>,
    pub(crate) config: Option<Arg<Expr>>,
    pub(crate) krate: Option<Arg<Path>>,
    pub(crate) key: Option<Arg<Expr>>,
    pub(crate) max_keys: Option<Arg<u32>>,
    pub(crate) idle: Option<Arg<Duration>>,
    pub(crate) max_open: Option<Arg<u32>>,
    pub(crate) classify: Option<Arg<Expr>>,
    pub(crate) fleet: Option<Arg<bool>>,
    pub(crate) throttle: Option<Arg<f64>>,
    pub(crate) max_throttle: Option<Arg<u32>>,
    pub(crate) throttle_window: Option<Arg<Duration>>,
    pub(crate) ramp: Option<Arg<Duration>>,
    pub(crate) dry_run: Option<Arg<bool>>,
    pub(crate) adaptive_concurrency: Option<Arg<u32>>,
    /// Retries (part four): attempts in all, the budget's percent, the first wait.
    pub(crate) retry: Option<Arg<u32>>,
    pub(crate) retry_budget: Option<Arg<u32>>,
    pub(crate) backoff: Option<Arg<Duration>>,
    /// The breaker's own probe (`Config::probe`): an `async fn() -> Verdict` (or `Result`).
    pub(crate) probe: Option<Arg<Expr>>,
}

/// `key = value`, before the value is interpreted.
struct RawArg {
    key: Ident,
    value: Expr,
}

/// The comma-separated `key = value` list, with syntax errors only.
struct RawArgs(Vec<RawArg>);

impl Parse for RawArgs {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut args = Vec::new();
        while !input.is_empty() {
            let fork = input.fork();
            // `parse_any`: `crate` is a keyword but also one of our keys.
            let keyed = fork.call(Ident::parse_any).is_ok() && fork.peek(Token![=]);
            if keyed {
                let key = input.call(Ident::parse_any)?;
                input.parse::<Token![=]>()?;
                if input.is_empty() || input.peek(Token![,]) {
                    return Err(syn::Error::new(
                        key.span(),
                        format!("`{key}` needs a value after `=`: {}", example(&key)),
                    ));
                }
                let value: Expr = input.parse()?;
                args.push(RawArg { key, value });
            } else {
                return Err(positional(input));
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        Ok(RawArgs(args))
    }
}

/// The error for anything that is not `key = value`, on its first token.
fn positional(input: ParseStream) -> syn::Error {
    // A bare key (`#[circuit_breaker(threshold)]`): say which value it needs.
    let fork = input.fork();
    if let Ok(key) = fork.call(Ident::parse_any) {
        if fork.is_empty() || fork.peek(Token![,]) {
            let known = KEYS.contains(&key.to_string().as_str());
            let msg = if known {
                format!("`{key}` needs a value: {}", example(&key))
            } else {
                format!(
                    "expected `key = value`, found `{key}`; the keys are: {}",
                    KEYS.join(", ")
                )
            };
            return syn::Error::new(key.span(), msg);
        }
    }
    match input.parse::<Expr>() {
        Ok(value) => {
            let hint = match &value {
                Expr::Lit(ExprLit {
                    lit: Lit::Int(i), ..
                }) => {
                    format!(
                        "; for the failure count write `threshold = {}`",
                        i.base10_digits()
                    )
                }
                Expr::Lit(ExprLit {
                    lit: Lit::Str(s), ..
                }) => {
                    format!(
                        "; for the time the breaker stays open write `cool_off = {:?}`",
                        s.value()
                    )
                }
                Expr::Call(call) => match &*call.func {
                    Expr::Path(p) => match p.path.get_ident() {
                        Some(key) if KEYS.contains(&key.to_string().as_str()) => {
                            format!("; write `{key} = …` instead of `{key}(…)`")
                        }
                        _ => String::new(),
                    },
                    _ => String::new(),
                },
                _ => String::new(),
            };
            syn::Error::new(
                value.span(),
                format!("positional arguments are not supported: write `key = value`{hint}"),
            )
        }
        Err(e) => e,
    }
}

/// What a correct use of `key` looks like, for messages.
pub(crate) fn example(key: &Ident) -> String {
    let key = key.to_string();
    let value = match key.as_str() {
        "threshold" | "probes" | "success_threshold" => "3",
        "failure_rate" => "50",
        "window" => "100",
        "min_calls" => "10",
        "max_concurrent" => "16",
        "slow_call" => "\"2s\"",
        "cool_off" => "\"10s\"",
        "max_cool_off" => "\"5m\"",
        "jitter" => "\"500ms\"",
        "timeout" => "\"600ms\"",
        "is_failure" => "is_transient",
        "fallback" => "cached_value",
        "name" => "\"payments\"",
        "on_state_change" => "alert_on_call",
        "config" => "config_from_env()",
        "crate" => "\"::my_facade::breaker\"",
        "key" => "self.host",
        "max_keys" => "1000",
        "idle" => "\"10m\"",
        "max_open" => "50",
        "classify" => "judge_response",
        "fleet" | "dry_run" => "true",
        "throttle" => "2",
        "max_throttle" => "90",
        "throttle_window" => "\"1m\"",
        "ramp" => "\"30s\"",
        "adaptive_concurrency" => "100",
        "retry" => "3",
        "retry_budget" => "20",
        "backoff" => "\"100ms\"",
        "probe" => "check_health",
        _ => "…",
    };
    format!("write e.g. `{key} = {value}`")
}

/// Parses and checks the attribute's arguments. Every bad key or value is reported (each once,
/// on its token); the first syntax error stops parsing.
pub(crate) fn parse(tokens: proc_macro2::TokenStream) -> syn::Result<Args> {
    let RawArgs(raw) = syn::parse2(tokens)?;
    let mut args = Args::default();
    let mut errors = Errors::default();
    let mut seen: Vec<Ident> = Vec::new();
    for RawArg { key, value } in raw {
        let name = key.to_string();
        if seen.iter().any(|k| *k == name) {
            errors.push(syn::Error::new(
                key.span(),
                format!(
                    "duplicate key `{name}`: it is already set earlier in this attribute; keep one"
                ),
            ));
            continue;
        }
        seen.push(key.clone());
        let span = value.span();
        macro_rules! set {
            ($field:ident, $parse:expr) => {
                match $parse {
                    Ok(v) => {
                        args.$field = Some(Arg {
                            key,
                            value: v,
                            span,
                        })
                    }
                    Err(e) => errors.push(e),
                }
            };
        }
        match name.as_str() {
            "threshold" => set!(threshold, integer(&key, &value)),
            "failure_rate" => set!(failure_rate, percent(&key, &value)),
            "window" => set!(window, window(&key, &value)),
            "min_calls" => set!(min_calls, integer(&key, &value)),
            "slow_call" => set!(slow_call, duration(&key, &value)),
            "cool_off" => set!(cool_off, duration(&key, &value)),
            "max_cool_off" => set!(max_cool_off, duration(&key, &value)),
            "jitter" => set!(jitter, duration(&key, &value)),
            "probes" => set!(probes, at_most(&key, &value, MAX_PROBES, PROBES_WHY)),
            "success_threshold" => set!(success_threshold, integer(&key, &value)),
            "timeout" => set!(timeout, duration(&key, &value)),
            "max_concurrent" => set!(max_concurrent, integer(&key, &value)),
            "is_failure" => set!(is_failure, callable(&key, value, "a `fn(&E) -> bool`")),
            "fallback" => set!(fallback, callable(&key, value, "a function")),
            "on_state_change" => {
                set!(
                    on_state_change,
                    callable(&key, value, "a `fn(&breaker::Transition)`")
                )
            }
            "name" => set!(name, name_value(&key, &value)),
            "config" => set!(config, Ok::<_, syn::Error>(value)),
            "crate" => set!(krate, crate_path(&key, &value)),
            "key" => set!(key, Ok::<_, syn::Error>(value)),
            "max_keys" => set!(max_keys, integer(&key, &value)),
            "idle" => set!(idle, duration(&key, &value)),
            "max_open" => set!(max_open, open_percent(&key, &value)),
            "classify" => set!(
                classify,
                callable(&key, value, "a `fn(&Result<T, E>) -> breaker::Verdict`")
            ),
            "fleet" => set!(fleet, boolean(&key, &value)),
            "throttle" => set!(throttle, throttle_k(&key, &value)),
            "max_throttle" => set!(max_throttle, percent(&key, &value)),
            "throttle_window" => set!(throttle_window, duration(&key, &value)),
            "ramp" => set!(ramp, duration(&key, &value)),
            "dry_run" => set!(dry_run, boolean(&key, &value)),
            "adaptive_concurrency" => set!(
                adaptive_concurrency,
                at_most(&key, &value, MAX_ADAPTIVE, ADAPTIVE_WHY)
            ),
            "retry" => set!(retry, attempts(&key, &value)),
            "retry_budget" => set!(retry_budget, percent(&key, &value)),
            "backoff" => set!(backoff, duration(&key, &value)),
            "probe" => set!(
                probe,
                callable(
                    &key,
                    value,
                    "an `async fn() -> Verdict` (or `-> Result<T, E>`)"
                )
            ),
            _ => errors.push(unknown_key(&key)),
        }
    }
    rules::check_combinations(&args, &seen, &mut errors);
    errors.finish(args)
}

fn unknown_key(key: &Ident) -> syn::Error {
    let name = key.to_string();
    let msg = match suggest::closest(&name, KEYS) {
        Some(close) => format!("unknown key `{name}`; did you mean `{close}`?"),
        None => format!("unknown key `{name}`; the keys are: {}", KEYS.join(", ")),
    };
    syn::Error::new(key.span(), msg)
}
