//! The value kinds a key takes (integer, percent, duration, window, callable, ...): each
//! parses its literal, checks its range, and says what to write instead on the offending
//! token. The runtime's limits the checks depend on are here, once.

use std::time::Duration;

use proc_macro2::{Literal, Span, TokenStream};
use quote::{quote_spanned, ToTokens};
use syn::{spanned::Spanned, Expr, ExprLit, Ident, Lit, LitStr, Path};

use super::{example, limits::*, HedgeDelayArg, WindowArg};

/// `retry = N`: attempts in all, the first included, so at least 2.
pub(super) fn attempts(key: &Ident, value: &Expr) -> syn::Result<u32> {
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

/// `hedge = N`: attempts after the first, 1 to 4.
pub(super) fn hedges(key: &Ident, value: &Expr) -> syn::Result<u32> {
    let out_of_range = |n: &str| {
        syn::Error::new(
            value.span(),
            format!(
                "`{key}` counts the attempts sent after the first, from 1 to {MAX_HEDGES} (got \
                 {n}): write `{key} = 1` for one hedge, or remove `{key}` for none"
            ),
        )
    };
    match lit(value) {
        Some(Lit::Int(i)) => match i.base10_parse::<u64>() {
            Ok(n @ 1..) if n <= u64::from(MAX_HEDGES) => Ok(n as u32),
            _ => Err(out_of_range(i.base10_digits())),
        },
        _ => integer(key, value),
    }
}

/// `hedge_budget = P`: a whole percent of first attempts, 1 to 100.
pub(super) fn hedge_percent(key: &Ident, value: &Expr) -> syn::Result<u32> {
    if let Some(Lit::Int(i)) = lit(value)
        && !matches!(i.base10_parse::<u64>(), Ok(1..=100))
    {
        return Err(syn::Error::new(
            value.span(),
            format!(
                "`{key}` is the percent of first attempts that may be hedged, from 1 to 100, \
                 not {}: write e.g. `{key} = 5` (to hedge nothing, leave `hedge` out)",
                i.base10_digits()
            ),
        ));
    }
    percent(key, value)
}

/// `hedge_delay`: a percentile `"p50"` … `"p99.9"` of the breaker's latencies, or a duration
/// from 1 ms to 2 s.
pub(super) fn hedge_delay(key: &Ident, value: &Expr) -> syn::Result<HedgeDelayArg> {
    let wrong = |span: Span, got: &str| {
        syn::Error::new(
            span,
            format!(
                "`{key}` is a percentile of the breaker's latencies from \"p50\" to \"p99.9\", \
                 or a duration from 1ms to 2s, not {got}: write e.g. `{key} = \"p95\"` or \
                 `{key} = \"20ms\"`"
            ),
        )
    };
    let Some(Lit::Str(s)) = lit(value) else {
        let shown = value.to_token_stream().to_string();
        return Err(wrong(value.span(), &format!("`{shown}`")));
    };
    let text = s.value();
    let text = text.trim();
    if let Some(p) = text.strip_prefix('p') {
        return match p.parse::<f64>() {
            Ok(p) if (50.0..=99.9).contains(&p) => Ok(HedgeDelayArg::Percentile(p)),
            _ => Err(wrong(s.span(), &format!("{text:?}"))),
        };
    }
    match humantime::parse_duration(text) {
        Ok(d) if (MIN_HEDGE_DELAY..=MAX_HEDGE_DELAY).contains(&d) => Ok(HedgeDelayArg::Fixed(d)),
        _ => Err(wrong(s.span(), &format!("{text:?}"))),
    }
}

/// `throttle = K`: how many calls per accepted one the client may send before it sheds
/// (Google SRE's K), a number of at least 1, e.g. `2` or `1.5`.
pub(super) fn throttle_k(key: &Ident, value: &Expr) -> syn::Result<f64> {
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

pub(super) fn lit(value: &Expr) -> Option<&Lit> {
    match value {
        Expr::Lit(ExprLit { lit, .. }) => Some(lit),
        // `(5)` and `{ 5 }` are not worth supporting, but groups from macro_rules are.
        Expr::Group(g) => lit(&g.expr),
        _ => None,
    }
}

pub(super) const ADAPTIVE_WHY: &str =
    "the limit grows one step at a time from 20; for no limit, leave the bulkhead out";
pub(super) const PROBES_WHY: &str = "half-open lets a few calls test a recovering dependency, and the probe table is allocated up front";
pub(super) const WINDOW_WHY: &str = "the window keeps one entry per call, allocated up front; for a longer stretch write a duration, e.g. `window = \"1m\"`";

/// [`integer`], at most `max`.
pub(super) fn at_most(key: &Ident, value: &Expr, max: u32, why: &str) -> syn::Result<u32> {
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
pub(super) fn open_percent(key: &Ident, value: &Expr) -> syn::Result<u32> {
    let n = integer(key, value)?;
    if n > 100 {
        return Err(syn::Error::new(
            value.span(),
            format!("`{key}` is a percent of the live keys, from 1 to 100, not {n}: write e.g. `{key} = 50`"),
        ));
    }
    Ok(n)
}

pub(super) fn integer(key: &Ident, value: &Expr) -> syn::Result<u32> {
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
pub(super) fn not_literal(key: &Ident, value: &Expr, what: &str) -> syn::Error {
    if let Expr::Unary(u) = value
        && matches!(u.op, syn::UnOp::Neg(_))
    {
        return syn::Error::new(
            value.span(),
            format!("`{key}` cannot be negative: {}", example(key)),
        );
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
pub(super) fn percent(key: &Ident, value: &Expr) -> syn::Result<u32> {
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
pub(super) fn duration(key: &Ident, value: &Expr) -> syn::Result<Duration> {
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
pub(super) fn window(key: &Ident, value: &Expr) -> syn::Result<WindowArg> {
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
pub(super) fn callable(key: &Ident, value: Expr, what: &str) -> syn::Result<Expr> {
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
pub(super) fn boolean(key: &Ident, value: &Expr) -> syn::Result<bool> {
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

pub(super) fn name_value(key: &Ident, value: &Expr) -> syn::Result<LitStr> {
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
pub(super) fn needs_string(key: &str, takes: &str, value: &Expr) -> syn::Error {
    let shown = quote::ToTokens::to_token_stream(value)
        .to_string()
        .replace(' ', "");
    syn::Error::new(
        value.span(),
        format!("`{key}` takes {takes}: write `{key} = \"{shown}\"`"),
    )
}

pub(super) fn crate_path(key: &Ident, value: &Expr) -> syn::Result<Path> {
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

/// A value kind as the generated code writes it: the argument of its `Config` builder call,
/// or of the `Set` variant named after that builder (a literal: a duration as `Dur`).
pub(crate) trait Value {
    fn tokens(&self, krate: &TokenStream, span: Span) -> TokenStream;

    /// `.method(value)`, spanned with the value.
    fn call(&self, method: &str, krate: &TokenStream, span: Span) -> TokenStream {
        let method = Ident::new(method, span);
        let value = self.tokens(krate, span);
        quote_spanned!(span=> .#method(#value))
    }

    /// The value as a literal (what `tokens` writes, unless it makes a call).
    fn literal(&self, krate: &TokenStream, span: Span) -> TokenStream {
        self.tokens(krate, span)
    }

    /// `Set::method(value),`, spanned with the value.
    fn set(&self, method: &str, krate: &TokenStream, span: Span) -> TokenStream {
        let method = Ident::new(method, span);
        let value = self.literal(krate, span);
        quote_spanned!(span=> #krate::__private::Set::#method(#value),)
    }
}

impl Value for u32 {
    fn tokens(&self, _: &TokenStream, _: Span) -> TokenStream {
        Literal::u32_unsuffixed(*self).into_token_stream()
    }
}

impl Value for f64 {
    fn tokens(&self, _: &TokenStream, _: Span) -> TokenStream {
        Literal::f64_unsuffixed(*self).into_token_stream()
    }
}

impl Value for bool {
    fn tokens(&self, _: &TokenStream, _: Span) -> TokenStream {
        self.into_token_stream()
    }
}

impl Value for Duration {
    fn tokens(&self, krate: &TokenStream, span: Span) -> TokenStream {
        let (unit, n) = duration_parts(*self, span);
        let ctor = Ident::new(&format!("from_{}", unit.to_lowercase()), span);
        quote_spanned!(span=> #krate::__private::Duration::#ctor(#n))
    }

    /// `Dur::Secs(10)`: `Duration::from_secs(10)` is a call, which the compiler does not
    /// promote to a constant.
    fn literal(&self, krate: &TokenStream, span: Span) -> TokenStream {
        let (unit, n) = duration_parts(*self, span);
        let unit = Ident::new(unit, span);
        quote_spanned!(span=> #krate::__private::Dur::#unit(#n))
    }
}

impl Value for HedgeDelayArg {
    /// `breaker::HedgeDelay::Percentile(95.0)` or `…::Fixed(Duration::from_millis(20))`.
    fn tokens(&self, krate: &TokenStream, span: Span) -> TokenStream {
        match *self {
            HedgeDelayArg::Percentile(p) => {
                let p = Literal::f64_unsuffixed(p);
                quote_spanned!(span=> #krate::HedgeDelay::Percentile(#p))
            }
            HedgeDelayArg::Fixed(d) => {
                let d = d.tokens(krate, span);
                quote_spanned!(span=> #krate::HedgeDelay::Fixed(#d))
            }
        }
    }

    /// `Set::hedge_delay_percentile(95.0)` or `Set::hedge_delay_fixed(Dur::Millis(20))`.
    fn set(&self, _: &str, krate: &TokenStream, span: Span) -> TokenStream {
        let (method, value) = match *self {
            HedgeDelayArg::Percentile(p) => (
                "hedge_delay_percentile",
                Literal::f64_unsuffixed(p).into_token_stream(),
            ),
            HedgeDelayArg::Fixed(d) => ("hedge_delay_fixed", d.literal(krate, span)),
        };
        let method = Ident::new(method, span);
        quote_spanned!(span=> #krate::__private::Set::#method(#value),)
    }
}

/// Paths and closures (`on_state_change`, `probe`), and the glue keys' values, as written.
macro_rules! as_written {
    ($($ty:ty),*) => {$(
        impl Value for $ty {
            fn tokens(&self, _: &TokenStream, _: Span) -> TokenStream {
                self.to_token_stream()
            }
        }
    )*};
}
as_written!(Expr, LitStr, Path);

impl Value for WindowArg {
    fn tokens(&self, krate: &TokenStream, span: Span) -> TokenStream {
        match *self {
            WindowArg::Calls(n) => n.tokens(krate, span),
            WindowArg::Duration(d) => d.tokens(krate, span),
        }
    }

    fn literal(&self, krate: &TokenStream, span: Span) -> TokenStream {
        match *self {
            WindowArg::Calls(n) => n.literal(krate, span),
            WindowArg::Duration(d) => d.literal(krate, span),
        }
    }

    /// `.window_calls(n)` or `.window_duration(d)`: the value picks the call.
    fn call(&self, _: &str, krate: &TokenStream, span: Span) -> TokenStream {
        let method = Ident::new(self.method(), span);
        let value = self.tokens(krate, span);
        quote_spanned!(span=> .#method(#value))
    }

    /// `Set::window_calls(n)` or `Set::window_duration(d)`, as the call.
    fn set(&self, _: &str, krate: &TokenStream, span: Span) -> TokenStream {
        let method = Ident::new(self.method(), span);
        let value = self.literal(krate, span);
        quote_spanned!(span=> #krate::__private::Set::#method(#value),)
    }
}

impl WindowArg {
    /// The builder the value picks.
    fn method(&self) -> &'static str {
        match self {
            WindowArg::Calls(_) => "window_calls",
            WindowArg::Duration(_) => "window_duration",
        }
    }
}

/// A duration in the largest unit that holds it exactly: (`"Secs"`, `10`) for 10 s.
fn duration_parts(d: Duration, span: Span) -> (&'static str, Literal) {
    let nanos = d.as_nanos();
    let (unit, n) = if nanos.is_multiple_of(1_000_000_000) {
        ("Secs", nanos / 1_000_000_000)
    } else if nanos.is_multiple_of(1_000_000) {
        ("Millis", nanos / 1_000_000)
    } else if nanos.is_multiple_of(1_000) {
        ("Micros", nanos / 1_000)
    } else {
        ("Nanos", nanos)
    };
    // Fits: `duration` rejects durations past `u64::MAX` nanoseconds.
    let mut n = Literal::u64_unsuffixed(u64::try_from(n).unwrap_or(u64::MAX));
    n.set_span(span);
    (unit, n)
}
