//! Rules across keys (`Args::build`'s second half): which keys need another, which exclude
//! each other, and the sizes checked against each other, so that what `Config::validate`
//! would reject at run time is rejected at compile time, on the offending key.

use syn::Ident;

use super::{Args, WindowArg, DEFAULT_COOL_OFF, DEFAULT_WINDOW_CALLS};
use crate::errors::Errors;

/// Rules across keys: `config` against the policy keys, window keys against
/// `failure_rate`, sizes against each other (what `Config::validate` would reject at run
/// time is rejected here, at compile time).
pub(super) fn check_combinations(args: &Args, seen: &[Ident], errors: &mut Errors) {
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
