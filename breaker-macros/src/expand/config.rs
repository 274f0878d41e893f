//! The `Config` the breaker is built with: `Config::default()` (or the user's `config`) and
//! one builder call per key written, in the table's order.

use std::time::Duration;

use proc_macro2::{Literal, Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::Ident;

use super::krate_at;
use crate::args::{self, Args, WindowArg};

/// A duration as the shortest readable constant.
fn duration(krate: &TokenStream, d: Duration, span: Span) -> TokenStream {
    let nanos = d.as_nanos();
    let (ctor, n) = if nanos.is_multiple_of(1_000_000_000) {
        ("from_secs", nanos / 1_000_000_000)
    } else if nanos.is_multiple_of(1_000_000) {
        ("from_millis", nanos / 1_000_000)
    } else if nanos.is_multiple_of(1_000) {
        ("from_micros", nanos / 1_000)
    } else {
        ("from_nanos", nanos)
    };
    let ctor = Ident::new(ctor, span);
    // Fits: `attr` rejects durations past `u64::MAX` nanoseconds.
    let n = Literal::u64_unsuffixed(u64::try_from(n).unwrap_or(u64::MAX));
    quote_spanned!(span=> #krate::__private::Duration::#ctor(#n))
}

/// `Config::default().key(value)…`, or the user's `config` plus the keys that combine with it.
pub(super) fn config(args: &Args, krate: &TokenStream) -> TokenStream {
    let mut cfg = match &args.config {
        Some(c) => {
            let (expr, k) = (&c.value, krate_at(args, c.span));
            quote_spanned!(c.span=> #k::__private::config(#expr))
        }
        // By its trait's path: the crate may be `#![no_implicit_prelude]`.
        None => quote!(<#krate::Config as #krate::__private::Default>::default()),
    };
    let ints = [
        &args.threshold,
        &args.failure_rate,
        &args.min_calls,
        &args.probes,
        &args.success_threshold,
        &args.max_concurrent,
        &args.max_keys,
        &args.max_throttle,
        &args.adaptive_concurrency,
        &args.retry,
        &args.retry_budget,
    ];
    let durations = [
        &args.slow_call,
        &args.cool_off,
        &args.max_cool_off,
        &args.jitter,
        &args.timeout,
        &args.idle,
        &args.throttle_window,
        &args.ramp,
        &args.backoff,
    ];
    // In the DESIGN table's order, so an expansion reads like the attribute.
    let mut calls: Vec<(usize, TokenStream)> = Vec::new();
    let order = |key: &Ident| {
        args::KEYS
            .iter()
            .position(|k| key == k)
            .unwrap_or(args::KEYS.len())
    };
    for arg in ints.into_iter().flatten() {
        let (key, n) = (&arg.key, Literal::u32_unsuffixed(arg.value));
        calls.push((order(key), quote_spanned!(arg.span=> .#key(#n))));
    }
    if let Some(arg) = &args.max_open {
        let n = Literal::u32_unsuffixed(arg.value);
        calls.push((
            order(&arg.key),
            quote_spanned!(arg.span=> .max_open_percent(#n)),
        ));
    }
    for arg in durations.into_iter().flatten() {
        let (key, d) = (&arg.key, duration(krate, arg.value, arg.span));
        calls.push((order(key), quote_spanned!(arg.span=> .#key(#d))));
    }
    if let Some(t) = &args.throttle {
        let k = Literal::f64_unsuffixed(t.value);
        calls.push((order(&t.key), quote_spanned!(t.span=> .throttle(#k))));
    }
    if let Some(d) = &args.dry_run {
        let on = d.value;
        calls.push((order(&d.key), quote_spanned!(d.span=> .dry_run(#on))));
    }
    if let Some(w) = &args.window {
        let call = match w.value {
            WindowArg::Calls(n) => {
                let n = Literal::u32_unsuffixed(n);
                quote_spanned!(w.span=> .window_calls(#n))
            }
            WindowArg::Duration(d) => {
                let d = duration(krate, d, w.span);
                quote_spanned!(w.span=> .window_duration(#d))
            }
        };
        calls.push((order(&w.key), call));
    }
    if let Some(hook) = &args.on_state_change {
        let f = &hook.value;
        calls.push((
            order(&hook.key),
            quote_spanned!(hook.span=> .on_state_change(#f)),
        ));
    }
    if let Some(probe) = &args.probe {
        let f = &probe.value;
        calls.push((order(&probe.key), quote_spanned!(probe.span=> .probe(#f))));
    }
    calls.sort_by_key(|(i, _)| *i);
    for (_, call) in calls {
        cfg.extend(call);
    }
    cfg
}
