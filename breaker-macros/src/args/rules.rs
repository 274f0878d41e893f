//! Rules across keys, run once every value is parsed: which keys need another (the table's
//! `needs` column), which exclude each other (its `excludes` column; each pair with its own
//! message), `config` against the policy keys (the table's
//! `policy` column), and sizes against each other, so that what `Config::validate` would
//! reject at run time is rejected at compile time, on the offending key.

use syn::Ident;

use super::{
    limits::{DEFAULT_COOL_OFF, DEFAULT_WINDOW_CALLS},
    Args, WindowArg,
};
use crate::errors::Errors;

/// Rules across keys, in the order their errors are reported: the keys that need another,
/// the keys that exclude each other, `config` against the policy keys, and sizes against
/// each other (what `Config::validate` would reject at run time is rejected here, at compile
/// time). `seen` is the keys in the order written.
pub(super) fn check_combinations(args: &Args, seen: &[Ident], errors: &mut Errors) {
    needs(args, "throttle", errors, |key| {
        format!(
            "`{key}` tunes adaptive throttling, and this breaker does not throttle: add \
             `throttle = 2` (refuse what the dependency would refuse, past twice the calls \
             it accepts) or remove `{key}`"
        )
    });
    one_bulkhead(args, seen, errors);
    needs(args, "retry", errors, |key| {
        format!(
            "`{key}` tunes retries, and this function does not retry: add `retry = 3` \
             (attempts in all, the first included) or remove `{key}`"
        )
    });
    needs(args, "hedge", errors, |key| {
        format!(
            "`{key}` tunes hedging, and this function does not hedge: add `hedge = 1` (one \
             more attempt when the first is slow) or remove `{key}`"
        )
    });
    hedge_or_retry(args, seen, errors);
    probe_unkeyed(args, errors);
    needs(args, "key", errors, |key| {
        format!(
            "`{key}` bounds the breakers of a keyed function, and this one has no \
             `key`: add `key = …` (one breaker per value, e.g. `key = self.host`) or \
             remove `{key}`"
        )
    });
    one_judge(args, seen, errors);
    if args.config.is_some() {
        config_replaces_policy(args, errors);
        return;
    }
    needs(args, "failure_rate", errors, |key| {
        format!(
            "`{key}` only applies to a failure rate: add `failure_rate = 50` (percent of \
             the window's calls) or remove `{key}`"
        )
    });
    min_calls_fit_the_window(args, errors);
    max_cool_off_caps_cool_off(args, errors);
}

/// Each key written whose row `needs` the key `needed`, when `needed` is not written.
fn needs(args: &Args, needed: &str, errors: &mut Errors, message: impl Fn(&Ident) -> String) {
    if args.written().any(|(row, _)| row.name == needed) {
        return;
    }
    for (_, key) in args.written().filter(|(row, _)| row.needs == Some(needed)) {
        errors.push(syn::Error::new(key.span(), message(key)));
    }
}

/// Of two keys, the one written second (one mistake, one error: on it).
fn second<'a>(seen: &[Ident], a: &'a Ident, b: &'a Ident) -> (&'a Ident, &'a Ident) {
    let position = |key: &Ident| seen.iter().position(|k| k == key);
    if position(a) < position(b) {
        (a, b)
    } else {
        (b, a)
    }
}

/// `key` and the key its row `excludes`, when both are written.
fn both<'a>(args: &'a Args, key: &str) -> Option<(&'a Ident, &'a Ident)> {
    let (row, this) = args.written().find(|(row, _)| row.name == key)?;
    let (_, other) = args
        .written()
        .find(|(other, _)| Some(other.name) == row.excludes)?;
    Some((this, other))
}

/// One bulkhead is fixed or adaptive, not both.
fn one_bulkhead(args: &Args, seen: &[Ident], errors: &mut Errors) {
    let Some((adaptive, fixed)) = both(args, "adaptive_concurrency") else {
        return;
    };
    let (_, second) = second(seen, fixed, adaptive);
    errors.push(syn::Error::new(
        second.span(),
        "`adaptive_concurrency` and `max_concurrent` are two kinds of one bulkhead: keep \
         `adaptive_concurrency = N` for a limit that follows the dependency's latency (up to \
         N), or `max_concurrent = N` for a fixed one",
    ));
}

/// `classify` judges every result, so it replaces `is_failure`.
fn one_judge(args: &Args, seen: &[Ident], errors: &mut Errors) {
    let Some((classify, is_failure)) = both(args, "classify") else {
        return;
    };
    let (first, second) = second(seen, classify, is_failure);
    errors.push(syn::Error::new(
        second.span(),
        format!(
            "`{second}` cannot be combined with `{first}`: `classify` judges every result, \
             errors included, so remove `is_failure` and return `Verdict::Neutral` from \
             `classify` for the errors `is_failure` lets pass"
        ),
    ));
}

/// A function hedges or retries, never both (gRPC A6's rule: a retry after a hedge
/// multiplies the attempts).
fn hedge_or_retry(args: &Args, seen: &[Ident], errors: &mut Errors) {
    let Some((hedge, retry)) = both(args, "hedge") else {
        return;
    };
    let (first, second) = second(seen, hedge, retry);
    errors.push(syn::Error::new(
        second.span(),
        format!(
            "`{second}` cannot be combined with `{first}`: a function hedges or retries, never \
             both; keep `hedge = N` to send another attempt while a slow one still runs, or \
             `retry = N` to send another after one fails"
        ),
    ));
}

/// One probe cannot tell which key recovered.
fn probe_unkeyed(args: &Args, errors: &mut Errors) {
    if let Some((probe, _)) = both(args, "probe") {
        errors.push(syn::Error::new(
            probe.span(),
            "`probe` is not for a keyed function: one probe cannot tell which key recovered; \
             remove `probe` (each key's next call after its cool-off probes it)",
        ));
    }
}

/// `config = …` replaces every policy key of the table.
fn config_replaces_policy(args: &Args, errors: &mut Errors) {
    for (row, key) in args.written().filter(|(row, _)| row.policy) {
        let method = match (row.name, row.becomes) {
            ("window", _) => "window_calls(…)` or `.window_duration(…)".to_owned(),
            (_, Some(method)) => format!("{method}(…)"),
            (name, None) => format!("{name}(…)"),
        };
        let why = match row.needs {
            Some("key") => " (the keyed map's bounds are part of the policy)",
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
}

/// With a count window, `min_calls` is at most its size.
fn min_calls_fit_the_window(args: &Args, errors: &mut Errors) {
    let (Some(min), Some(_)) = (&args.min_calls, &args.failure_rate) else {
        return;
    };
    let size = match args.window.as_ref().map(|w| w.value) {
        Some(WindowArg::Calls(n)) => n,
        Some(WindowArg::Duration(_)) => return,
        None => DEFAULT_WINDOW_CALLS,
    };
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

/// `max_cool_off` caps the growing cool-off.
fn max_cool_off_caps_cool_off(args: &Args, errors: &mut Errors) {
    let Some(cap) = &args.max_cool_off else {
        return;
    };
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
