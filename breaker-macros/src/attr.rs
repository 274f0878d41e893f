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

use crate::suggest;

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
const DEFAULT_COOL_OFF: Duration = Duration::from_secs(10);
const DEFAULT_WINDOW_CALLS: u32 = 100;

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
fn example(key: &Ident) -> String {
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
    check_combinations(&args, &seen, &mut errors);
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

/// Rules across keys: `config` against the policy keys, window keys against
/// `failure_rate`, sizes against each other (what `Config::validate` would reject at run
/// time is rejected here, at compile time).
fn check_combinations(args: &Args, seen: &[Ident], errors: &mut Errors) {
    // The policy keys: `config = …` replaces all of them.
    let policy: Vec<&Ident> = [
        args.threshold.as_ref().map(|a| &a.key),
        args.failure_rate.as_ref().map(|a| &a.key),
        args.window.as_ref().map(|a| &a.key),
        args.min_calls.as_ref().map(|a| &a.key),
        args.slow_call.as_ref().map(|a| &a.key),
        args.cool_off.as_ref().map(|a| &a.key),
        args.max_cool_off.as_ref().map(|a| &a.key),
        args.jitter.as_ref().map(|a| &a.key),
        args.probes.as_ref().map(|a| &a.key),
        args.success_threshold.as_ref().map(|a| &a.key),
        args.timeout.as_ref().map(|a| &a.key),
        args.max_concurrent.as_ref().map(|a| &a.key),
        // The bounds of the keyed map are policy too: `Config::max_keys`, `Config::idle`.
        args.max_keys.as_ref().map(|a| &a.key),
        args.idle.as_ref().map(|a| &a.key),
        args.max_open.as_ref().map(|a| &a.key),
        // Overload (part three): shedding, the ramp, the dry run and the adaptive limit.
        args.throttle.as_ref().map(|a| &a.key),
        args.max_throttle.as_ref().map(|a| &a.key),
        args.throttle_window.as_ref().map(|a| &a.key),
        args.ramp.as_ref().map(|a| &a.key),
        args.dry_run.as_ref().map(|a| &a.key),
        args.adaptive_concurrency.as_ref().map(|a| &a.key),
    ]
    .into_iter()
    .flatten()
    .collect();
    check_overload(args, seen, errors);
    check_retry(args, errors);
    if let (Some(probe), Some(_)) = (&args.probe, &args.key) {
        errors.push(syn::Error::new(
            probe.key.span(),
            "`probe` is not for a keyed function: one probe cannot tell which key recovered; \
             remove `probe` (each key's next call after its cool-off probes it)",
        ));
    }
    if args.key.is_none() {
        for key in [
            args.max_keys.as_ref().map(|a| &a.key),
            args.idle.as_ref().map(|a| &a.key),
            args.max_open.as_ref().map(|a| &a.key),
        ]
        .into_iter()
        .flatten()
        {
            errors.push(syn::Error::new(
                key.span(),
                format!(
                    "`{key}` bounds the breakers of a keyed function, and this one has no \
                     `key`: add `key = …` (one breaker per value, e.g. `key = self.host`) or \
                     remove `{key}`"
                ),
            ));
        }
    }
    if let (Some(classify), Some(is_failure)) = (&args.classify, &args.is_failure) {
        // One mistake, one error: on the key written second, naming both.
        let position = |key: &Ident| seen.iter().position(|k| k == key);
        let (first, second) = if position(&classify.key) < position(&is_failure.key) {
            (&classify.key, &is_failure.key)
        } else {
            (&is_failure.key, &classify.key)
        };
        errors.push(syn::Error::new(
            second.span(),
            format!(
                "`{second}` cannot be combined with `{first}`: `classify` judges every result, \
                 errors included, so remove `is_failure` and return `Verdict::Neutral` from \
                 `classify` for the errors `is_failure` lets pass"
            ),
        ));
    }
    if args.config.is_some() {
        for key in policy {
            let method = match key.to_string().as_str() {
                "window" => "window_calls(…)` or `.window_duration(…)".to_owned(),
                "max_open" => "max_open_percent(…)".to_owned(),
                other => format!("{other}(…)"),
            };
            let why = match key.to_string().as_str() {
                "max_keys" | "idle" | "max_open" => {
                    " (the keyed map's bounds are part of the policy)"
                }
                _ => "",
            };
            errors.push(syn::Error::new(
                key.span(),
                format!(
                    "`{key}` cannot be combined with `config = …`{why}: set it on the \
                     `Config` (`.{method}`) or remove `config`"
                ),
            ));
        }
        return;
    }
    if args.failure_rate.is_none() {
        for key in [
            &args.window.as_ref().map(|a| &a.key),
            &args.min_calls.as_ref().map(|a| &a.key),
        ]
        .into_iter()
        .flatten()
        {
            errors.push(syn::Error::new(
                key.span(),
                format!(
                    "`{key}` only applies to a failure rate: add `failure_rate = 50` (percent of \
                     the window's calls) or remove `{key}`"
                ),
            ));
        }
    } else if let Some(min) = &args.min_calls {
        let size = match args.window.as_ref().map(|w| w.value) {
            Some(WindowArg::Calls(n)) => Some(n),
            Some(WindowArg::Duration(_)) => None,
            None => Some(DEFAULT_WINDOW_CALLS),
        };
        if let Some(size) = size {
            if min.value > size {
                errors.push(syn::Error::new(
                    min.span,
                    format!(
                        "`min_calls` must be at most the window's size ({size} calls): write \
                         `min_calls = {size}` or less, or widen `window`"
                    ),
                ));
            }
        }
    }
    if let Some(cap) = &args.max_cool_off {
        let base = args.cool_off.as_ref().map_or(DEFAULT_COOL_OFF, |c| c.value);
        if cap.value < base {
            errors.push(syn::Error::new(
                cap.span,
                format!(
                    "`max_cool_off` caps the growing cool-off, so it must be at least `cool_off` \
                     ({}): write `max_cool_off = \"{}\"` or more",
                    humantime::format_duration(base),
                    humantime::format_duration(base)
                ),
            ));
        }
    }
}

/// The overload keys against each other: `max_throttle` and `throttle_window` tune a
/// `throttle`, and one bulkhead is fixed or adaptive, not both.
fn check_overload(args: &Args, seen: &[Ident], errors: &mut Errors) {
    if args.throttle.is_none() {
        for key in [
            args.max_throttle.as_ref().map(|a| &a.key),
            args.throttle_window.as_ref().map(|a| &a.key),
        ]
        .into_iter()
        .flatten()
        {
            errors.push(syn::Error::new(
                key.span(),
                format!(
                    "`{key}` tunes adaptive throttling, and this breaker does not throttle: add \
                     `throttle = 2` (refuse what the dependency would refuse, past twice the calls \
                     it accepts) or remove `{key}`"
                ),
            ));
        }
    }
    if let (Some(fixed), Some(adaptive)) = (&args.max_concurrent, &args.adaptive_concurrency) {
        // One mistake, one error: on the key written second.
        let position = |key: &Ident| seen.iter().position(|k| k == key);
        let second = if position(&fixed.key) < position(&adaptive.key) {
            &adaptive.key
        } else {
            &fixed.key
        };
        errors.push(syn::Error::new(
            second.span(),
            "`adaptive_concurrency` and `max_concurrent` are two kinds of one bulkhead: keep \
             `adaptive_concurrency = N` for a limit that follows the dependency's latency (up to \
             N), or `max_concurrent = N` for a fixed one",
        ));
    }
}

/// `retry_budget` and `backoff` tune `retry`.
fn check_retry(args: &Args, errors: &mut Errors) {
    if args.retry.is_some() {
        return;
    }
    for key in [
        args.retry_budget.as_ref().map(|a| &a.key),
        args.backoff.as_ref().map(|a| &a.key),
    ]
    .into_iter()
    .flatten()
    {
        errors.push(syn::Error::new(
            key.span(),
            format!(
                "`{key}` tunes retries, and this function does not retry: add `retry = 3` \
                 (attempts in all, the first included) or remove `{key}`"
            ),
        ));
    }
}

/// `retry = N`: attempts in all, the first included, so at least 2.
fn attempts(key: &Ident, value: &Expr) -> syn::Result<u32> {
    let one = matches!(lit(value), Some(Lit::Int(i)) if i.base10_digits() == "1");
    let zero = matches!(lit(value), Some(Lit::Int(i)) if i.base10_digits() == "0");
    if one || zero {
        return Err(syn::Error::new(
            value.span(),
            format!(
                "`{key}` counts attempts in all, the first included, so it is at least 2: \
                 write `{key} = 2` for one retry, or remove `{key}` for none"
            ),
        ));
    }
    integer(key, value)
}

/// `throttle = K`: how many calls per accepted one the client may send before it sheds
/// (Google SRE's K), a number of at least 1, e.g. `2` or `1.5`.
fn throttle_k(key: &Ident, value: &Expr) -> syn::Result<f64> {
    let k = match lit(value) {
        Some(Lit::Int(i)) => i.base10_parse::<f64>(),
        Some(Lit::Float(f)) => f.base10_parse::<f64>(),
        Some(Lit::Str(s)) => {
            return Err(syn::Error::new(
                s.span(),
                format!("`{key}` takes a number, not a string: {}", example(key)),
            ))
        }
        Some(_) => {
            return Err(syn::Error::new(
                value.span(),
                format!("`{key}` takes a number: {}", example(key)),
            ))
        }
        None => return Err(not_literal(key, value, "a number literal")),
    }
    .map_err(|e| syn::Error::new(value.span(), e))?;
    if !(1.0..=MAX_THROTTLE_K).contains(&k) {
        return Err(syn::Error::new(
            value.span(),
            format!(
                "`{key}` is at least 1 and at most {MAX_THROTTLE_K} (got {k}): below 1 it would \
                 refuse calls the dependency accepts; 2 is Google's advice (sheds once fewer than \
                 half the calls succeed), 1.1 sheds early, 3 late: {}",
                example(key)
            ),
        ));
    }
    Ok(k)
}

/// Errors gathered while going on, so several independent mistakes are all reported.
#[derive(Default)]
pub(crate) struct Errors(Option<syn::Error>);

impl Errors {
    pub(crate) fn push(&mut self, e: syn::Error) {
        match &mut self.0 {
            Some(all) => all.combine(e),
            None => self.0 = Some(e),
        }
    }

    pub(crate) fn finish<T>(self, ok: T) -> syn::Result<T> {
        match self.0 {
            Some(e) => Err(e),
            None => Ok(ok),
        }
    }
}

fn lit(value: &Expr) -> Option<&Lit> {
    match value {
        Expr::Lit(ExprLit { lit, .. }) => Some(lit),
        // `(5)` and `{ 5 }` are not worth supporting, but groups from macro_rules are.
        Expr::Group(g) => lit(&g.expr),
        _ => None,
    }
}

/// The runtime's `Config::MAX_PROBES` and `Config::MAX_WINDOW_CALLS` (a proc-macro crate
/// cannot depend on the runtime; `tests/attribute_keys.rs` checks the numbers agree).
const MAX_PROBES: u32 = 1_000;
const MAX_WINDOW_CALLS: u32 = 100_000;
/// `throttle` above this sheds nothing a breaker's threshold would not catch first.
const MAX_THROTTLE_K: f64 = 100.0;
/// The runtime's `Config::MAX_ADAPTIVE_CONCURRENCY`.
const MAX_ADAPTIVE: u32 = 100_000;
const ADAPTIVE_WHY: &str =
    "the limit grows one step at a time from 20; for no limit, leave the bulkhead out";
const PROBES_WHY: &str = "half-open lets a few calls test a recovering dependency, and the probe table is allocated up front";
const WINDOW_WHY: &str = "the window keeps one entry per call, allocated up front; for a longer stretch write a duration, e.g. `window = \"1m\"`";

/// [`integer`], at most `max`.
fn at_most(key: &Ident, value: &Expr, max: u32, why: &str) -> syn::Result<u32> {
    let n = integer(key, value)?;
    if n > max {
        return Err(syn::Error::new(
            value.span(),
            format!("`{key}` is at most {max} (got {n}): {why}"),
        ));
    }
    Ok(n)
}

/// An integer key: a literal from 1 to `u32::MAX`.
/// `max_open`: an integer percent of a keyed function's live keys, from 1 to 100.
fn open_percent(key: &Ident, value: &Expr) -> syn::Result<u32> {
    let n = integer(key, value)?;
    if n > 100 {
        return Err(syn::Error::new(
            value.span(),
            format!("`{key}` is a percent of the live keys, from 1 to 100, not {n}: write e.g. `{key} = 50`"),
        ));
    }
    Ok(n)
}

fn integer(key: &Ident, value: &Expr) -> syn::Result<u32> {
    let wrong = |what: &str| {
        syn::Error::new(
            value.span(),
            format!("`{key}` takes an integer, not {what}: {}", example(key)),
        )
    };
    match lit(value) {
        Some(Lit::Int(i)) => {
            let n: u64 = i.base10_parse().map_err(|_| wrong("this literal"))?;
            if n == 0 {
                return Err(syn::Error::new(
                    value.span(),
                    format!("`{key}` must be at least 1: {}", example(key)),
                ));
            }
            u32::try_from(n).map_err(|_| {
                syn::Error::new(
                    value.span(),
                    format!("`{key}` is too large: write at most {}", u32::MAX),
                )
            })
        }
        Some(Lit::Str(s)) => {
            let text = s.value();
            Err(match text.trim().parse::<u64>() {
                Ok(n) => syn::Error::new(
                    s.span(),
                    format!("`{key}` takes an integer, not a string: write `{key} = {n}` without quotes"),
                ),
                Err(_) if humantime::parse_duration(text.trim()).is_ok() => syn::Error::new(
                    s.span(),
                    format!("`{key}` is a count, not a duration: {}", example(key)),
                ),
                Err(_) => wrong("a string"),
            })
        }
        Some(Lit::Float(_)) => Err(wrong("a fraction")),
        Some(Lit::Bool(_)) => Err(wrong("a boolean")),
        Some(_) => Err(wrong("this literal")),
        None => Err(not_literal(key, value, "an integer literal")),
    }
}

/// `threshold = -1`, `threshold = LIMIT`: say why only literals work, and what does.
fn not_literal(key: &Ident, value: &Expr, what: &str) -> syn::Error {
    if let Expr::Unary(u) = value {
        if matches!(u.op, syn::UnOp::Neg(_)) {
            return syn::Error::new(
                value.span(),
                format!("`{key}` cannot be negative: {}", example(key)),
            );
        }
    }
    syn::Error::new(
        value.span(),
        format!(
            "`{key}` takes {what} (it is checked at compile time): {}; for a value computed at \
             run time, build a `breaker::Config` and pass `config = …`",
            example(key)
        ),
    )
}

/// `failure_rate`, `max_throttle`, `max_open`: a whole percentage; `0.5` is read as "50 percent" in the message.
fn percent(key: &Ident, value: &Expr) -> syn::Result<u32> {
    let out_of_range = |shown: &str| {
        syn::Error::new(
            value.span(),
            format!(
                "`{key}` is a percentage from 1 to 100, not {shown}: {}",
                example(key)
            ),
        )
    };
    match lit(value) {
        Some(Lit::Float(f)) => {
            let x: f64 = f
                .base10_parse()
                .map_err(|_| out_of_range(f.base10_digits()))?;
            // The nearest whole percent, for the message only.
            let as_percent = if x > 0.0 && x <= 1.0 { x * 100.0 } else { x };
            if (1.0..=100.0).contains(&as_percent) {
                Err(syn::Error::new(
                    value.span(),
                    format!(
                        "`{key}` is a whole percentage: write `{key} = {}`",
                        as_percent.round()
                    ),
                ))
            } else {
                Err(out_of_range(f.base10_digits()))
            }
        }
        Some(Lit::Str(s)) => {
            let text = s.value();
            let digits = text.trim().trim_end_matches('%').trim();
            match digits.parse::<u32>() {
                Ok(n) if (1..=100).contains(&n) => Err(syn::Error::new(
                    s.span(),
                    format!("`{key}` takes an integer, not a string: write `{key} = {n}` without quotes"),
                )),
                _ => Err(out_of_range("a string")),
            }
        }
        Some(Lit::Int(i)) => match i.base10_parse::<u64>() {
            Ok(n @ 1..=100) => Ok(n as u32),
            _ => Err(out_of_range(i.base10_digits())),
        },
        _ => match integer(key, value) {
            // Reuse the integer messages for every other mistake.
            Ok(n) => Err(out_of_range(&n.to_string())),
            Err(e) => Err(e),
        },
    }
}

/// A duration key: a humantime string, parsed now, not zero.
fn duration(key: &Ident, value: &Expr) -> syn::Result<Duration> {
    let hint = "a duration string such as \"250ms\", \"10s\" or \"1m 30s\"";
    match lit(value) {
        Some(Lit::Str(s)) => {
            let text = s.value();
            let d = humantime::parse_duration(text.trim()).map_err(|e| {
                syn::Error::new(
                    s.span(),
                    format!("`{key}`: cannot read {text:?} as a duration ({e}): write {hint}"),
                )
            })?;
            if d.is_zero() {
                let off = match key.to_string().as_str() {
                    "slow_call" | "max_cool_off" | "jitter" | "timeout" => {
                        format!(" (to turn `{key}` off, remove it)")
                    }
                    _ => String::new(),
                };
                return Err(syn::Error::new(
                    s.span(),
                    format!("`{key}` must not be zero: {}{off}", example(key)),
                ));
            }
            if u64::try_from(d.as_nanos()).is_err() {
                return Err(syn::Error::new(
                    s.span(),
                    format!("`{key}` is too long (more than 500 years): {}", example(key)),
                ));
            }
            Ok(d)
        }
        Some(Lit::Int(i)) => Err(syn::Error::new(
            i.span(),
            format!(
                "`{key}` takes a duration string with a unit, not a bare number: write `{key} = \"{n}s\"` or `{key} = \"{n}ms\"`",
                n = i.base10_digits()
            ),
        )),
        Some(Lit::Float(f)) => Err(syn::Error::new(
            f.span(),
            format!(
                "`{key}` takes a duration string with a unit, not a bare number: write `{key} = \"{n}s\"`",
                n = f.base10_digits()
            ),
        )),
        Some(_) => Err(syn::Error::new(value.span(), format!("`{key}` takes {hint}"))),
        None => Err(not_literal(key, value, hint)),
    }
}

/// `window`: a number of calls or a duration string.
fn window(key: &Ident, value: &Expr) -> syn::Result<WindowArg> {
    match lit(value) {
        Some(Lit::Str(_)) => duration(key, value).map(WindowArg::Duration),
        // Zero is read here, not recognised in `integer`'s message afterwards.
        Some(Lit::Int(i)) if i.base10_parse::<u64>().is_ok_and(|n| n == 0) => Err(syn::Error::new(
            value.span(),
            "`window` must hold at least 1 call: write e.g. `window = 20` (the last 20 calls) or `window = \"1m\"` (the calls of the last minute)",
        )),
        Some(Lit::Int(_)) => at_most(key, value, MAX_WINDOW_CALLS, WINDOW_WHY).map(WindowArg::Calls),
        _ => Err(syn::Error::new(
            value.span(),
            "`window` takes a number of calls or a duration string: write e.g. `window = 20` (the last 20 calls) or `window = \"1m\"` (the calls of the last minute)",
        )),
    }
}

/// `is_failure`, `fallback`, `on_state_change`: a path or a closure.
fn callable(key: &Ident, value: Expr, what: &str) -> syn::Result<Expr> {
    match &value {
        Expr::Path(_) | Expr::Closure(_) => Ok(value),
        Expr::Group(g) if matches!(&*g.expr, Expr::Path(_) | Expr::Closure(_)) => Ok(value),
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) if s.parse::<Path>().is_ok() => Err(syn::Error::new(
            s.span(),
            format!(
                "`{key}` takes a path, not a string: write `{key} = {}` without quotes",
                s.value()
            ),
        )),
        Expr::Call(call) => Err(syn::Error::new(
            value.span(),
            format!(
                "`{key}` takes the function itself, not a call to it: write `{key} = {}` (the \
                 attribute supplies the arguments)",
                quote::ToTokens::to_token_stream(&call.func)
            ),
        )),
        _ => Err(syn::Error::new(
            value.span(),
            format!(
                "`{key}` takes a path to {what} or a closure: {}",
                example(key)
            ),
        )),
    }
}

/// `fleet = true` or `fleet = false`.
fn boolean(key: &Ident, value: &Expr) -> syn::Result<bool> {
    match lit(value) {
        Some(Lit::Bool(b)) => Ok(b.value),
        Some(Lit::Str(s)) if matches!(s.value().as_str(), "true" | "false") => {
            Err(syn::Error::new(
                s.span(),
                format!(
                    "`{key}` takes a boolean, not a string: write `{key} = {}` without quotes",
                    s.value()
                ),
            ))
        }
        _ => Err(syn::Error::new(
            value.span(),
            format!("`{key}` takes `true` or `false`: {}", example(key)),
        )),
    }
}

fn name_value(key: &Ident, value: &Expr) -> syn::Result<LitStr> {
    match lit(value) {
        Some(Lit::Str(s)) if s.value().trim().is_empty() => Err(syn::Error::new(
            s.span(),
            format!("`{key}` must not be empty: {}", example(key)),
        )),
        Some(Lit::Str(s)) => Ok(s.clone()),
        _ => Err(needs_string("name", "a string literal", value)),
    }
}

/// `key` got something other than a string literal: show it quoted, as it should be written.
fn needs_string(key: &str, takes: &str, value: &Expr) -> syn::Error {
    let shown = quote::ToTokens::to_token_stream(value)
        .to_string()
        .replace(' ', "");
    syn::Error::new(
        value.span(),
        format!("`{key}` takes {takes}: write `{key} = \"{shown}\"`"),
    )
}

fn crate_path(key: &Ident, value: &Expr) -> syn::Result<Path> {
    match lit(value) {
        Some(Lit::Str(s)) => s.parse::<Path>().map_err(|e| {
            syn::Error::new(
                s.span(),
                format!(
                    "`crate` must name a path to the `breaker` facade ({e}): {}",
                    example(key)
                ),
            )
        }),
        _ => Err(needs_string("crate", "the path as a string literal", value)),
    }
}
