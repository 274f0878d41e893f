//! Code generation: the user's function, signature untouched, with its body wrapped in one
//! call into the runtime through a lazily created static breaker.

use std::time::Duration;

use proc_macro2::{Literal, Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::{
    spanned::Spanned, visit_mut::VisitMut, Expr, FnArg, Ident, ItemFn, Pat, ReturnType, Type,
};

use crate::attr::{self, Args, Errors, WindowArg};

/// The attribute: the rewritten function, or on any error the errors followed by the
/// function as written (so one mistake gives one error, not a cascade at the call sites).
pub(crate) fn circuit_breaker(args: TokenStream, item: TokenStream) -> TokenStream {
    match expand(args, item.clone()) {
        Ok(out) => out,
        Err(e) => {
            let mut out = e.into_compile_error();
            out.extend(item);
            out
        }
    }
}

/// Parses, checks and generates; every argument and signature error at once.
pub(crate) fn expand(args: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let mut errors = Errors::default();
    let args = attr::parse(args).map_err(|e| errors.push(e)).ok();
    let func = parse_fn(item).map_err(|e| errors.push(e)).ok();
    let shape = func
        .as_ref()
        .and_then(|f| shape(f).map_err(|e| errors.push(e)).ok());
    if let (Some(args), Some(func), Some(shape)) = (&args, &func, &shape) {
        check_fn(args, func, shape, &mut errors);
        if args.krate.is_none() {
            if let Some(name) = crate::renamed::renamed_facade() {
                errors.push(syn::Error::new(
                    Span::call_site(),
                    format!(
                        "this crate depends on `breaker` under the name `{name}`: add `crate = \
                         \"::{name}\"` to the attribute (`#[circuit_breaker(crate = \
                         \"::{name}\", …)]`), so that the generated code finds it"
                    ),
                ));
            }
        }
    }
    errors.finish(())?;
    match (args, func, shape) {
        (Some(args), Some(func), Some(shape)) => Ok(generate(&args, func, shape)),
        // Unreachable: a `None` above pushed an error.
        _ => Err(syn::Error::new(
            Span::call_site(),
            "invalid `#[circuit_breaker]`",
        )),
    }
}

/// The annotated item as a function, or an error naming what it is instead.
fn parse_fn(item: TokenStream) -> syn::Result<ItemFn> {
    let fn_error = match syn::parse2::<ItemFn>(item.clone()) {
        Ok(f) => return Ok(f),
        Err(e) => e,
    };
    if let Ok(decl) = syn::parse2::<syn::TraitItemFn>(item.clone()) {
        return Err(syn::Error::new(
            decl.sig.fn_token.span,
            "`#[circuit_breaker]` needs a function body to wrap: put it on the method in the \
             `impl` block, not on the trait's declaration",
        ));
    }
    let Ok(other) = syn::parse2::<syn::Item>(item) else {
        return Err(fn_error);
    };
    let (span, what) = match &other {
        syn::Item::Struct(s) => (s.struct_token.span, "a struct"),
        syn::Item::Enum(e) => (e.enum_token.span, "an enum"),
        syn::Item::Union(u) => (u.union_token.span, "a union"),
        syn::Item::Const(c) => (c.const_token.span, "a constant"),
        syn::Item::Static(s) => (s.static_token.span, "a static"),
        syn::Item::Impl(i) => (i.impl_token.span, "an `impl` block (put it on each method)"),
        syn::Item::Trait(t) => (t.trait_token.span, "a trait"),
        syn::Item::Mod(m) => (m.mod_token.span, "a module"),
        syn::Item::Type(t) => (t.type_token.span, "a type alias"),
        syn::Item::Use(u) => (u.use_token.span, "a `use` declaration"),
        syn::Item::ForeignMod(f) => (f.abi.extern_token.span, "an `extern` block"),
        other => (other.span(), "this item"),
    };
    Err(syn::Error::new(
        span,
        format!(
            "`#[circuit_breaker]` goes on a function (`async fn` or `fn` returning a `Result`), \
             not on {what}"
        ),
    ))
}

/// How the function produces its `Result`.
pub(crate) enum Shape {
    /// `async fn`.
    Async,
    /// A plain `fn`.
    Sync,
    /// `fn … -> Pin<Box<dyn Future<Output = R> + …>> { Box::pin(async move { … }) }`: an
    /// `async fn` of an `impl` that `#[async_trait]` (which expands first) rewrote. The inner
    /// `async move` block is wrapped, as `tracing::instrument` does; `R` is kept.
    Boxed(Box<Type>),
}

/// The function's shape, or an error saying what to write when it returns a future the
/// attribute cannot wrap.
fn shape(func: &ItemFn) -> syn::Result<Shape> {
    let sig = &func.sig;
    if sig.asyncness.is_some() {
        return Ok(Shape::Async);
    }
    let ReturnType::Type(_, ty) = &sig.output else {
        return Ok(Shape::Sync);
    };
    let write_async = |output: &Type| {
        format!(
            "write `async fn {}(…) -> {}`",
            sig.ident,
            shown(output.to_token_stream())
        )
    };
    if let Type::ImplTrait(it) = ungroup(ty) {
        if let Some(output) = future_output(&it.bounds) {
            return Err(syn::Error::new_spanned(
                ty,
                format!(
                    "`#[circuit_breaker]` wraps an `async fn`, not a function returning `impl \
                     Future`: {} (in a trait impl, an `async fn` fulfils a trait's `fn … -> \
                     impl Future<Output = …> + Send`)",
                    write_async(output)
                ),
            ));
        }
    }
    if let Some(output) = boxed_future_output(ty) {
        if boxed_async_block(&func.block).is_some() {
            return Ok(Shape::Boxed(Box::new(output.clone())));
        }
        return Err(syn::Error::new_spanned(
            ty,
            format!(
                "`#[circuit_breaker]` wraps an `async fn`, and cannot see into this boxed \
                 future: {} (with `#[async_trait]` on the impl, keep the method an `async fn`: \
                 that is supported)",
                write_async(output)
            ),
        ));
    }
    Ok(Shape::Sync)
}

/// `Group` and parentheses around a type, as `macro_rules!` and users may leave them.
fn ungroup(ty: &Type) -> &Type {
    match ty {
        Type::Group(g) => ungroup(&g.elem),
        Type::Paren(p) => ungroup(&p.elem),
        other => other,
    }
}

/// `R` of a bound list holding `Future<Output = R>`.
fn future_output(
    bounds: &syn::punctuated::Punctuated<syn::TypeParamBound, syn::Token![+]>,
) -> Option<&Type> {
    bounds.iter().find_map(|b| {
        let syn::TypeParamBound::Trait(t) = b else {
            return None;
        };
        let last = t.path.segments.last()?;
        let syn::PathArguments::AngleBracketed(a) = &last.arguments else {
            return None;
        };
        if last.ident != "Future" {
            return None;
        }
        a.args.iter().find_map(|arg| match arg {
            syn::GenericArgument::AssocType(at) if at.ident == "Output" => Some(&at.ty),
            _ => None,
        })
    })
}

/// The single type argument of `ty` when its last path segment is `name` (`Pin<X>`, `Box<X>`).
fn only_arg<'t>(ty: &'t Type, name: &str) -> Option<&'t Type> {
    let Type::Path(p) = ungroup(ty) else {
        return None;
    };
    let last = p.path.segments.last()?;
    let syn::PathArguments::AngleBracketed(a) = &last.arguments else {
        return None;
    };
    match (last.ident == name, a.args.first(), a.args.len()) {
        (true, Some(syn::GenericArgument::Type(t)), 1) => Some(t),
        _ => None,
    }
}

/// `R` of `Pin<Box<dyn Future<Output = R> + …>>`.
fn boxed_future_output(ty: &Type) -> Option<&Type> {
    let boxed = only_arg(ty, "Pin")?;
    match ungroup(only_arg(boxed, "Box")?) {
        Type::TraitObject(obj) => future_output(&obj.bounds),
        _ => None,
    }
}

/// The `async move { … }` of a body that is exactly `Box::pin(async move { … })`.
fn boxed_async_block(block: &syn::Block) -> Option<&syn::ExprAsync> {
    let [syn::Stmt::Expr(Expr::Call(call), None)] = block.stmts.as_slice() else {
        return None;
    };
    let Expr::Path(f) = &*call.func else {
        return None;
    };
    let names: Vec<String> = f
        .path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    if !names.ends_with(&["Box".to_owned(), "pin".to_owned()]) || call.args.len() != 1 {
        return None;
    }
    match &call.args[0] {
        Expr::Async(a) if a.capture.is_some() => Some(a),
        _ => None,
    }
}

/// [`boxed_async_block`], to rewrite.
fn boxed_async_block_mut(block: &mut syn::Block) -> Option<&mut syn::ExprAsync> {
    boxed_async_block(block)?;
    match block.stmts.first_mut() {
        Some(syn::Stmt::Expr(Expr::Call(call), None)) => match call.args.first_mut() {
            Some(Expr::Async(a)) => Some(a),
            _ => None,
        },
        _ => None,
    }
}

/// Tokens as a user would write them, for messages.
fn shown(tokens: TokenStream) -> String {
    let mut s = tokens.to_string();
    for (from, to) in [
        (" :: ", "::"),
        (":: ", "::"),
        (" < ", "<"),
        ("< ", "<"),
        (" <", "<"),
        (" >", ">"),
        (" ,", ","),
        ("& ", "&"),
    ] {
        s = s.replace(from, to);
    }
    s
}

/// The first identifier among `tokens` (macro arguments included) that `bad` picks.
fn find_ident(tokens: TokenStream, bad: &dyn Fn(&Ident) -> bool) -> Option<Ident> {
    tokens.into_iter().find_map(|t| match t {
        proc_macro2::TokenTree::Ident(i) if bad(&i) => Some(i),
        proc_macro2::TokenTree::Group(g) => find_ident(g.stream(), bad),
        _ => None,
    })
}

/// `config` and `on_state_change` run in the static's initialiser, an item of its own: it
/// cannot name `Self`, `self` or the function's generic parameters, and rustc's E0401 about
/// "generic parameters from outer item" would point at a static the user never wrote.
fn check_static_exprs(args: &Args, func: &ItemFn, errors: &mut Errors) {
    let generics: Vec<String> = func
        .sig
        .generics
        .params
        .iter()
        .filter_map(|p| match p {
            syn::GenericParam::Type(t) => Some(t.ident.to_string()),
            syn::GenericParam::Const(c) => Some(c.ident.to_string()),
            syn::GenericParam::Lifetime(_) => None,
        })
        .collect();
    for arg in [&args.config, &args.on_state_change, &args.probe]
        .into_iter()
        .flatten()
    {
        let key = &arg.key;
        let bad = |i: &Ident| i == "Self" || i == "self" || generics.iter().any(|g| i == g);
        let Some(found) = find_ident(arg.value.to_token_stream(), &bad) else {
            continue;
        };
        let msg = if found == "Self" {
            format!(
                "`{key}` is evaluated once, in the breaker's static, which cannot name `Self`: \
                 write the type's name instead (e.g. `MyType::…`)"
            )
        } else if found == "self" {
            format!(
                "`{key}` is evaluated once, on the first call, in the breaker's static, so it \
                 cannot use `self` or the function's arguments: build it from constants, the \
                 environment or a global"
            )
        } else {
            format!(
                "`{key}` is evaluated once, in the breaker's static, which every instantiation \
                 of this generic function shares, so it cannot use the generic parameter \
                 `{found}`: use a concrete type"
            )
        };
        errors.push(syn::Error::new(found.span(), msg));
    }
}

/// What depends on the function as well as on the arguments.
fn check_fn(args: &Args, func: &ItemFn, shape: &Shape, errors: &mut Errors) {
    check_static_exprs(args, func, errors);
    let sig = &func.sig;
    if let Some(c) = &sig.constness {
        errors.push(syn::Error::new(
            c.span,
            "`#[circuit_breaker]` cannot wrap a `const fn`: a breaker keeps state at run time; \
             remove `const`",
        ));
    }
    if let ReturnType::Default = sig.output {
        errors.push(syn::Error::new(
            sig.ident.span(),
            format!(
                "`{}` must return a `Result<T, E>` for `#[circuit_breaker]` to count its \
                 failures: add a return type such as `-> Result<(), MyError>`",
                sig.ident
            ),
        ));
    }
    if let Some(v) = &sig.variadic {
        errors.push(syn::Error::new(
            v.span(),
            "`#[circuit_breaker]` cannot wrap a variadic function",
        ));
    }
    if let Shape::Sync = shape {
        if let Some(p) = &args.probe {
            errors.push(syn::Error::new(
                p.key.span(),
                "`probe` needs an `async fn`: the breaker's own probe runs as a tokio task, \
                 and a plain fn may be called where no tokio runtime runs; make the function \
                 `async`, or remove `probe` (the next call after the cool-off probes)",
            ));
        }
        if let Some(t) = &args.timeout {
            errors.push(syn::Error::new(
                t.key.span(),
                "`timeout` needs an `async fn`: a blocking call cannot be cut short; make the \
                 function `async`, or remove `timeout` (`slow_call` counts slow blocking calls \
                 as failures)",
            ));
        }
    }
    check_retry(args, sig, shape, errors);
    if let (Some(fallback), Shape::Boxed(_)) = (&args.fallback, shape) {
        if let Some(r) = sig.receiver().filter(|r| r.reference.is_none()) {
            errors.push(syn::Error::new(
                r.self_token.span,
                format!(
                    "with `#[async_trait]` and a `fallback`, take `&self` or `&mut self`: \
                     async-trait moves `self` into the body, so `{}` could not receive it",
                    shown(fallback.value.to_token_stream())
                ),
            ));
        }
    }
    if args.fallback.is_some() {
        for input in &sig.inputs {
            let FnArg::Typed(arg) = input else { continue };
            let plain =
                matches!(&*arg.pat, Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none());
            // `#[async_trait]` renames a pattern parameter `__argN` and destructures it in
            // the body, moving it there.
            let plain = plain
                && !(matches!(shape, Shape::Boxed(_))
                    && matches!(&*arg.pat, Pat::Ident(p) if p.ident.to_string().starts_with("__arg")));
            if !plain {
                errors.push(syn::Error::new(
                    arg.pat.span(),
                    "with a `fallback`, parameters must be plain names, because the fallback \
                     receives them: bind this one to a name (e.g. `point: Point`) and \
                     destructure it in the body",
                ));
            }
        }
    }
}

/// `retry`: the body runs once per attempt, with waits between them.
fn check_retry(args: &Args, sig: &syn::Signature, shape: &Shape, errors: &mut Errors) {
    let Some(retry) = &args.retry else { return };
    match shape {
        Shape::Sync => errors.push(syn::Error::new(
            retry.key.span(),
            "`retry` needs an `async fn`: it waits between attempts on the async runtime's \
             timer, which a blocking call would hold up; make the function `async`, or remove \
             `retry`",
        )),
        Shape::Async | Shape::Boxed(_) => {}
    }
    if let Some(r) = sig.receiver() {
        let shared = r.reference.is_some() && r.mutability.is_none() && r.colon_token.is_none();
        if !shared {
            errors.push(syn::Error::new(
                r.self_token.span,
                "with `retry`, the body runs once per attempt, so it can only borrow `self`: \
                 take `&self` (with `&mut self` or `self` by value, a retry would need what the \
                 attempt before consumed)",
            ));
        }
    }
}

/// Replaces `impl Trait` in the return type with `_`: the body names the return type so that
/// `?` knows its target, and `impl Trait` cannot be written there.
struct InferImplTrait;

impl VisitMut for InferImplTrait {
    fn visit_type_mut(&mut self, ty: &mut Type) {
        if let Type::ImplTrait(it) = ty {
            *ty = Type::Infer(syn::TypeInfer {
                underscore_token: syn::Token![_](it.impl_token.span),
            });
        } else {
            syn::visit_mut::visit_type_mut(self, ty);
        }
    }
}

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
fn config(args: &Args, krate: &TokenStream) -> TokenStream {
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
        attr::KEYS
            .iter()
            .position(|k| key == k)
            .unwrap_or(attr::KEYS.len())
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

/// The fallback applied to the function's arguments and the call's error, passed through
/// `wrap` (which awaits it for an `async fn`).
///
/// A parameter under `#[cfg(…)]` is passed only where it exists: one call per combination of
/// the gated parameters, each under the `#[cfg]` that selects it (call arguments cannot carry
/// `#[cfg]` themselves).
fn fallback_call(fallback: &Expr, sig: &syn::Signature, err: &Ident, how: &Apply) -> TokenStream {
    let receiver = sig.receiver();
    // Each argument with the predicates of its `#[cfg(…)]` attributes.
    let mut args: Vec<(TokenStream, Vec<TokenStream>)> = Vec::new();
    if let Some(r) = receiver {
        args.push((r.self_token.to_token_stream(), Vec::new()));
    }
    for input in &sig.inputs {
        if let FnArg::Typed(arg) = input {
            if let Pat::Ident(p) = &*arg.pat {
                let cfgs = arg
                    .attrs
                    .iter()
                    .filter(|a| a.path().is_ident("cfg"))
                    .filter_map(|a| match &a.meta {
                        syn::Meta::List(l) => Some(l.tokens.clone()),
                        _ => None,
                    })
                    .collect();
                args.push((p.ident.to_token_stream(), cfgs));
            }
        }
    }
    args.push((err.to_token_stream(), Vec::new()));
    let gated: Vec<usize> = (0..args.len()).filter(|i| !args[*i].1.is_empty()).collect();
    let span = fallback.span();
    if gated.is_empty() {
        let all: Vec<&TokenStream> = args.iter().map(|(a, _)| a).collect();
        return apply(fallback, receiver.is_some(), &all, how);
    }
    if gated.len() > 4 {
        return syn::Error::new(
            span,
            "a `fallback` receives at most four `#[cfg]`-gated parameters (each doubles the \
             code generated for it): gate fewer parameters, or group them in a struct",
        )
        .into_compile_error();
    }
    let recover = Ident::new("__breaker_recover", Span::mixed_site());
    let mut variants = TokenStream::new();
    for mask in 0..(1u32 << gated.len()) {
        let mut preds = Vec::new();
        let mut passed = Vec::new();
        for (i, (arg, cfgs)) in args.iter().enumerate() {
            let on = match gated.iter().position(|g| *g == i) {
                None => true,
                Some(bit) => {
                    let on = mask & (1 << bit) != 0;
                    let all = quote!(all(#(#cfgs),*));
                    preds.push(if on { all } else { quote!(not(#all)) });
                    on
                }
            };
            if on {
                passed.push(arg);
            }
        }
        let call = apply(fallback, receiver.is_some(), &passed, how);
        variants.extend(quote!(#[cfg(all(#(#preds),*))] let #recover = #call;));
    }
    quote!({ #variants #recover })
}

/// How a fallback is applied: where the facade is, the function's return type, and whether
/// the fallback's future is awaited.
struct Apply {
    krate: TokenStream,
    ret: TokenStream,
    is_async: bool,
}

/// The most arguments a fallback receives through `__private::FallbackProbe` (its `Fits1` …
/// `Fits12`); past that it is called directly.
const PROBED_ARITY: usize = 12;

/// `fallback(args…)`, awaited for an `async fn`. In a method, a bare name is a method of
/// `Self` (receiving `self` first). A path goes through `__private::FallbackProbe`, so a
/// fallback of the wrong shape is one error on its name showing the signature it must have
/// ("this fallback must be an `async fn(&str, CallError<TaxError>) -> Result<u32,
/// TaxError>`"); a closure is called as written, and rustc reports a wrong arity on it.
fn apply(fallback: &Expr, method: bool, args: &[&TokenStream], how: &Apply) -> TokenStream {
    let span = fallback.span();
    let Apply {
        krate,
        ret,
        is_async,
    } = how;
    let direct = |f: TokenStream| {
        let call = quote_spanned!(span=> (#f)(#(#args),*));
        if *is_async {
            quote_spanned!(span=> #krate::__private::async_fallback(#call))
        } else {
            call
        }
    };
    let path = match fallback {
        Expr::Path(p) => p,
        other => return direct(other.to_token_stream()),
    };
    let path = match (method, path.qself.is_none(), path.path.get_ident()) {
        (true, true, Some(ident)) => quote_spanned!(span=> Self::#ident),
        _ => path.to_token_stream(),
    };
    if args.len() > PROBED_ARITY {
        return direct(path);
    }
    let prefix = if *is_async { "Async" } else { "" };
    let fits = Ident::new(&format!("{prefix}Fits{}", args.len()), span);
    let misfits = match args.len() {
        1 => Ident::new(&format!("{prefix}Misfits1"), span),
        _ => Ident::new(&format!("{prefix}Misfits"), span),
    };
    let method_name = Ident::new("__fallback", span);
    // Only one of the two traits is used, whichever the fallback's shape picks.
    quote_spanned! {span=> {
        #[allow(unused_imports)]
        use #krate::__private::{#fits as _, #misfits as _};
        #krate::__private::FallbackProbe::<_, _, #ret>::new(#path, (#(#args,)*)).#method_name()
    }}
}

/// `::breaker` (or the `crate = "…"` path) with `span`, so an error in a generated call is
/// reported on the user's token the call is spanned with, not on the whole attribute.
fn krate_at(args: &Args, span: Span) -> TokenStream {
    match &args.krate {
        Some(k) => k.value.to_token_stream(),
        None => quote_spanned!(span=> ::breaker),
    }
}

/// A user's `const` named like a binding would capture it (in a pattern a constant's name
/// is a constant pattern, whatever the binding's hygiene): a `fn` item of the same name in a
/// block around the pattern (and never around the user's body) shadows any such constant.
fn shadow(names: &[&Ident]) -> TokenStream {
    quote!(#(#[allow(dead_code)] fn #names() {})*)
}

/// The `&Breaker` of this call: the function's static breaker or, with `key`, the breaker
/// of this call's key (a temporary), taken from the function's static keyed map. An
/// expression, not a binding, which a user's `const` could capture.
fn breaker_ref(args: &Args, func: &ItemFn, krate: &TokenStream) -> TokenStream {
    let fn_name = func.sig.ident.to_string();
    // A method with a `self` receiver is named `{module}::{Self}::{method}` by default. The
    // attribute cannot see the `impl`, so the body, which can name `Self`, gives the static
    // its `type_name` on the first call (`InImpl::of`, `KeyedStatic::of`).
    let in_impl = args.name.is_none() && func.sig.receiver().is_some();
    let module = quote!(#krate::__private::module_path!());
    let (name, shared) = match &args.name {
        // With `key` an explicit name names the keyed map; maps are not shared by name.
        Some(n) => (n.value.to_token_stream(), true),
        None if in_impl => (module.clone(), false),
        None => (
            quote!(#krate::__private::concat!(#module, "::", #fn_name)),
            false,
        ),
    };
    let config = config(args, krate);
    let fleet = args.fleet.as_ref().filter(|f| f.value);
    // Items are not hygienic: the static's name only needs to be one no user writes, and its
    // own block keeps it out of the body's scope (a binding may not shadow a static in scope).
    let static_name = Ident::new("__BREAKER", Span::mixed_site());
    let Some(key) = &args.key else {
        let join = |init: TokenStream| match fleet {
            Some(f) => {
                let k = krate_at(args, f.span);
                quote_spanned!(f.span=> #k::__private::join_fleet(#init))
            }
            None => init,
        };
        if in_impl {
            let given = Ident::new("__name", Span::mixed_site());
            let shadowed = shadow(&[&given]);
            let init = join(quote!(#krate::__private::breaker(#given, false, #config)));
            return quote! {{
                #shadowed
                static #static_name: #krate::__private::InImpl<#krate::Breaker> =
                    #krate::__private::InImpl::new(#module, #fn_name, |#given| #init);
                #static_name.of::<Self>()
            }};
        }
        // The name is a literal (or `concat!` of literals): static text, copied into a
        // refusal without a reference count. In a static of its own, which reads better than
        // the `&"…"` that `Name::from_static` (taking a `&'static &'static str`) needs.
        let name_static = Ident::new("__NAME", Span::mixed_site());
        let init = join(quote! {
            #krate::__private::breaker(#krate::Name::from_static(&#name_static), #shared, #config)
        });
        return quote! {{
            static #name_static: &str = #name;
            static #static_name: #krate::__private::Lazy<#krate::Breaker> =
                #krate::__private::Lazy::new(|| #init);
            &#static_name
        }};
    };
    // A static cannot name the key's type: `KeyedStatic` makes the keyed map on the first
    // call and finds it again with one type comparison. The key is borrowed, never moved,
    // and only for the lookup, so the body may then move what it was computed from.
    // With `fleet = true` every key's breaker joins the installed fleet as it is made.
    let make = match fleet {
        Some(f) => {
            let k = krate_at(args, f.span);
            quote_spanned!(f.span=> #k::__private::KeyedStatic::in_fleet)
        }
        None => quote!(#krate::__private::KeyedStatic::new),
    };
    let naming = match (&args.name, in_impl) {
        (Some(_), _) => TokenStream::new(),
        (None, true) => quote!(.method(#fn_name)),
        (None, false) => quote!(.default_name()),
    };
    let keyed_static = if in_impl {
        quote!(#static_name.of::<Self>())
    } else {
        quote!(&#static_name)
    };
    let (expr, k) = (&key.value, krate_at(args, key.span));
    // The lookup method is chosen by the key's type (see `__private::KeyProbe`); its traits
    // are imported unnamed, in this block only.
    let lookup = quote_spanned! {key.span=>
        (&&#k::__private::KeyProbe(&(#expr))).__breaker_lookup(#keyed_static)
    };
    quote! {&{
        use #krate::__private::{
            ByKeyArg as _, ByOwnKey as _, ByOwnKeyRef as _, NotAKey as _,
        };
        static #static_name: #krate::__private::KeyedStatic =
            #make(|| (#name, #config))#naming;
        #lookup
    }}
}

/// With a fallback, `#[async_trait]`'s `let x = x;` at the top of the body (which moves each
/// owned argument into the future) would leave nothing for the fallback: they go, so the body
/// borrows its arguments as in an `async fn` (a `mut` moves back to the parameter), and
/// `let mut __self = self;` of a `&mut self` method becomes a reborrow.
fn unmove_async_trait_args(sig: &mut syn::Signature, body: &mut syn::Block) {
    let names: Vec<Ident> = sig
        .inputs
        .iter()
        .filter_map(|i| match i {
            FnArg::Typed(t) => match &*t.pat {
                Pat::Ident(p) => Some(p.ident.clone()),
                _ => None,
            },
            FnArg::Receiver(_) => None,
        })
        .collect();
    let mut made_mut: Vec<Ident> = Vec::new();
    body.stmts.retain_mut(|stmt| {
        let syn::Stmt::Local(local) = stmt else {
            return true;
        };
        let (Pat::Ident(p), Some(init)) = (&local.pat, &mut local.init) else {
            return true;
        };
        let Expr::Path(from) = &*init.expr else {
            return true;
        };
        let Some(from) = from.path.get_ident() else {
            return true;
        };
        if p.ident == "__self" && from == "self" {
            if p.mutability.is_some() {
                let s = from.clone();
                *init.expr = syn::parse_quote_spanned!(s.span()=> &mut *#s);
            }
            return true;
        }
        if p.ident != *from || !names.contains(from) || init.diverge.is_some() {
            return true;
        }
        if p.mutability.is_some() {
            made_mut.push(p.ident.clone());
        }
        false
    });
    for input in &mut sig.inputs {
        if let FnArg::Typed(t) = input {
            if let Pat::Ident(p) = &mut *t.pat {
                if made_mut.contains(&p.ident) {
                    p.mutability = Some(syn::Token![mut](p.ident.span()));
                }
            }
        }
    }
}

/// With a fallback, `#[tracing::instrument]` above the attribute (which expands first) has
/// moved the arguments into its own `async move` block (`let __tracing_instrument_future =
/// async move { … };`), leaving nothing for the fallback: its blocks borrow them instead, as
/// the body does under the attribute alone. tracing-attributes 0.1 writes the block alone or
/// awaited once inside another (`err`, `ret`), so those are the shapes looked at.
fn unmove_tracing_future(body: &mut syn::Block) {
    for stmt in &mut body.stmts {
        let syn::Stmt::Local(local) = stmt else {
            continue;
        };
        let (Pat::Ident(p), Some(init)) = (&local.pat, &mut local.init) else {
            continue;
        };
        if p.ident != "__tracing_instrument_future" {
            continue;
        }
        let Expr::Async(outer) = &mut *init.expr else {
            continue;
        };
        outer.capture = None;
        for inner in &mut outer.block.stmts {
            let awaited = match inner {
                syn::Stmt::Local(l) => l.init.as_mut().map(|i| &mut *i.expr),
                syn::Stmt::Expr(Expr::Match(m), _) => Some(&mut *m.expr),
                _ => None,
            };
            if let Some(Expr::Await(a)) = awaited {
                if let Expr::Async(block) = &mut *a.base {
                    block.capture = None;
                }
            }
        }
    }
}

/// The call of `body` (the function's block) through `__breaker`, as the function's result.
fn call_expr(
    args: &Args,
    sig: &syn::Signature,
    ret: &Type,
    body: &syn::Block,
    is_async: bool,
    breaker: &TokenStream,
) -> TokenStream {
    let krate = krate_at(args, Span::call_site());
    let ret_span = ret.span();
    let mut ret = ret.clone();
    InferImplTrait.visit_type_mut(&mut ret);
    let ret = ret.to_token_stream();
    // A path is coerced to the `fn` pointer it must be (a struct field is a coercion site;
    // an `as` cast would trip a user's `trivial_casts`), so a wrong signature is one error
    // naming it; a closure goes straight in, where its parameter types are inferred.
    let (judge, classified) = match (&args.classify, &args.is_failure) {
        (Some(c), _) if matches!(c.value, Expr::Path(_)) => {
            let (f, k) = (&c.value, krate_at(args, c.span));
            let fallible = quote_spanned!(c.span=> <#ret as #k::__private::Fallible>);
            (
                quote_spanned!(c.span=> #k::__private::Judge::<
                    fn(&#k::__private::Result<#fallible::Ok, #fallible::Err>) -> #k::Verdict,
                > { f: #f }.f),
                true,
            )
        }
        (Some(c), _) => (c.value.to_token_stream(), true),
        (None, Some(p)) if matches!(p.value, Expr::Path(_)) => {
            let (f, k) = (&p.value, krate_at(args, p.span));
            (
                quote_spanned!(p.span=> #k::__private::Judge::<
                    fn(&<#ret as #k::__private::Fallible>::Err) -> bool,
                > { f: #f }.f),
                false,
            )
        }
        (None, Some(p)) => (p.value.to_token_stream(), false),
        (None, None) => (quote!(#krate::__private::every_error), false),
    };
    let helper = |name: &str| {
        let suffix = if classified { "_classified" } else { "" };
        Ident::new(&format!("{name}{suffix}"), ret_span)
    };
    let err = Ident::new("__breaker_err", Span::mixed_site());
    // `fallback_call` binds `__breaker_recover` when parameters are `#[cfg]`-gated.
    let gated = sig.inputs.iter().any(|i| match i {
        FnArg::Typed(t) => t.attrs.iter().any(|a| a.path().is_ident("cfg")),
        FnArg::Receiver(_) => false,
    });
    let recover_name = Ident::new("__breaker_recover", Span::mixed_site());
    let shadowed = if gated {
        shadow(&[&err, &recover_name])
    } else {
        shadow(&[&err])
    };
    let k = krate_at(args, ret_span);
    let body = if is_async {
        typed_async_body(&k, &ret, body, ret_span)
    } else {
        body.to_token_stream()
    };
    if let (Some(retry), true) = (&args.retry, is_async) {
        return retried_call(
            args, sig, &ret, &body, &judge, classified, breaker, retry.span,
        );
    }
    let Some(fallback) = &args.fallback else {
        // Without a fallback the body may consume the arguments.
        return if is_async {
            let run = helper("run");
            quote_spanned! {ret_span=>
                #k::__private::#run::<#ret, _, _, _, _>(#breaker, #judge, async move #body).await
            }
        } else {
            let run = helper("run_sync");
            quote_spanned! {ret_span=>
                #k::__private::#run::<#ret, _, _, _, _>(#breaker, #judge, move || #body)
            }
        };
    };
    // With one the body borrows them: the fallback receives them after the body ran.
    let call = if is_async {
        let call = helper("call");
        quote_spanned! {ret_span=>
            #k::__private::#call::<#ret, _, _>(#breaker, #judge, async #body).await
        }
    } else {
        let call = helper("call_sync");
        quote_spanned! {ret_span=>
            #k::__private::#call::<#ret, _, _>(#breaker, #judge, || #body)
        }
    };
    let how = Apply {
        krate: krate_at(args, fallback.span),
        ret: ret.clone(),
        is_async,
    };
    let recover = fallback_call(&fallback.value, sig, &err, &how);
    // A closure is called where it is written, which clippy's `redundant_closure_call` would
    // report on the user's tokens.
    let allow = match &fallback.value {
        Expr::Path(_) => TokenStream::new(),
        _ => quote!(#[allow(clippy::redundant_closure_call)]),
    };
    // The body has run (and its borrows of the arguments ended) before the closure, which
    // takes the arguments on to the fallback, is made: arguments are evaluated in order.
    // Spanned with the fallback, where a body that consumed an argument is then reported.
    let recovery = quote_spanned! {fallback.span=> {
        #shadowed
        #allow
        move |#err| #recover
    }};
    if is_async {
        quote!(#krate::__private::recover(#call, #recovery).await)
    } else {
        quote!(#krate::__private::recover_sync(#call, #recovery))
    }
}

/// The call of an `async fn` with `retry`: the body made once per attempt by a closure that
/// gives each attempt its own clone of every argument (a reference or a `Copy` value costs
/// nothing to clone), so an attempt may consume its arguments and the next gets them whole;
/// the arguments themselves stay with the function, for the fallback.
#[allow(clippy::too_many_arguments)]
fn retried_call(
    args: &Args,
    sig: &syn::Signature,
    ret: &TokenStream,
    body: &TokenStream,
    judge: &TokenStream,
    classified: bool,
    breaker: &TokenStream,
    span: Span,
) -> TokenStream {
    let k = krate_at(args, span);
    let clones = sig.inputs.iter().filter_map(|input| match input {
        FnArg::Typed(t) => match &*t.pat {
            Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => {
                let (m, name) = (&p.mutability, &p.ident);
                let attrs = &t.attrs;
                // On the parameter: an argument that is not `Clone` is reported there.
                let at = name.span();
                Some(quote_spanned! {at=>
                    #(#attrs)* let #m #name = #k::__private::RetryArg::for_attempt(&#name);
                })
            }
            _ => None,
        },
        FnArg::Receiver(_) => None,
    });
    let make = quote_spanned! {span=> || { #(#clones)* async move #body } };
    let suffix = if classified { "_classified" } else { "" };
    let Some(fallback) = &args.fallback else {
        let run = Ident::new(&format!("run_retried{suffix}"), span);
        return quote_spanned! {span=>
            #k::__private::#run::<#ret, _, _, _, _, _>(#breaker, #judge, #make).await
        };
    };
    let call = Ident::new(&format!("retried{suffix}"), span);
    let call = quote_spanned! {span=>
        #k::__private::#call::<#ret, _, _, _>(#breaker, #judge, #make).await
    };
    let err = Ident::new("__breaker_err", Span::mixed_site());
    let how = Apply {
        krate: krate_at(args, fallback.span),
        ret: ret.clone(),
        is_async: true,
    };
    let recover = fallback_call(&fallback.value, sig, &err, &how);
    let shadowed = shadow(&[&err, &Ident::new("__breaker_recover", Span::mixed_site())]);
    let allow = match &fallback.value {
        Expr::Path(_) => TokenStream::new(),
        _ => quote!(#[allow(clippy::redundant_closure_call)]),
    };
    let recovery = quote_spanned! {fallback.span=> {
        #shadowed
        #allow
        move |#err| #recover
    }};
    let krate = krate_at(args, Span::call_site());
    quote!(#krate::__private::recover(#call, #recovery).await)
}

/// With `retry` each attempt binds its own copy of a `mut` parameter (`let mut x = …`), and
/// the parameter itself is never changed: its `mut` goes, or rustc would warn that it is
/// unused.
fn unmut_params(sig: &mut syn::Signature) {
    for input in &mut sig.inputs {
        if let FnArg::Typed(t) = input {
            if let Pat::Ident(p) = &mut *t.pat {
                if p.by_ref.is_none() && p.subpat.is_none() {
                    p.mutability = None;
                }
            }
        }
    }
}

/// `{ if false { return returns::<R>(); } …body }`: the body of the `async` block, told the
/// function's return type. An `async` block has no expected output, so without this line
/// `Ok(Box::new(5))` for a `Box<dyn Display>`, `&self.text` for a `&str` or `return
/// Err(e.into())` would not coerce as in the plain function, and a type error would be
/// rustc's E0271 about the block instead of the plain function's error on the user's tokens.
/// (async-trait's `if let Some(r) = None::<R> { return r; }`, without the binding, which a
/// user's `const r` could capture.)
fn typed_async_body(
    krate: &TokenStream,
    ret: &TokenStream,
    body: &syn::Block,
    span: Span,
) -> TokenStream {
    let stmts = &body.stmts;
    // The block is spanned with the return type, which rustc then names in a note about it
    // (a body that is not `Send`).
    quote_spanned! {span=> {
        if false {
            return #krate::__private::returns::<#ret>();
        }
        #(#stmts)*
    }}
}

/// The rewritten function.
fn generate(args: &Args, mut func: ItemFn, shape: Shape) -> TokenStream {
    let krate = krate_at(args, Span::call_site());
    let breaker = breaker_ref(args, &func, &krate);
    let ret = match (&shape, &func.sig.output) {
        (Shape::Boxed(r), _) => (**r).clone(),
        (_, ReturnType::Type(_, ty)) => (**ty).clone(),
        // `check_fn` rejected it; `()` keeps this total.
        (_, ReturnType::Default) => syn::parse_quote!(()),
    };
    if let Shape::Boxed(_) = shape {
        let ItemFn { sig, block, .. } = &mut func;
        let Some(inner) = boxed_async_block_mut(block) else {
            return syn::Error::new(sig.ident.span(), "expected `Box::pin(async move { … })`")
                .into_compile_error();
        };
        if args.fallback.is_some() {
            unmove_async_trait_args(sig, &mut inner.block);
        }
        let result = call_expr(args, sig, &ret, &inner.block, true, &breaker);
        if args.retry.is_some() {
            unmut_params(sig);
        }
        return match syn::parse2::<syn::Block>(quote!({ #result })) {
            Ok(new_block) => {
                inner.block = new_block;
                func.into_token_stream()
            }
            Err(e) => e.into_compile_error(),
        };
    }
    let is_async = matches!(shape, Shape::Async);
    if is_async && args.fallback.is_some() {
        unmove_tracing_future(&mut func.block);
    }
    let result = call_expr(args, &func.sig, &ret, &func.block, is_async, &breaker);
    if args.retry.is_some() && is_async {
        unmut_params(&mut func.sig);
    }
    let body = quote!({ #result });
    // Re-parsed so `ItemFn`'s printing keeps inner attributes (`#![allow(..)]`) in the body.
    match syn::parse2::<syn::Block>(body) {
        Ok(new_block) => {
            *func.block = new_block;
            func.into_token_stream()
        }
        Err(e) => e.into_compile_error(),
    }
}
