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
    if let (Some(args), Some(func)) = (&args, &func) {
        check_fn(args, func, &mut errors);
    }
    errors.finish(())?;
    match (args, func) {
        (Some(args), Some(func)) => Ok(generate(&args, func)),
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

/// What depends on the function as well as on the arguments.
fn check_fn(args: &Args, func: &ItemFn, errors: &mut Errors) {
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
    if sig.asyncness.is_none() {
        if let Some(t) = &args.timeout {
            errors.push(syn::Error::new(
                t.key.span(),
                "`timeout` needs an `async fn`: a blocking call cannot be cut short; make the \
                 function `async`, or remove `timeout` (`slow_call` counts slow blocking calls \
                 as failures)",
            ));
        }
    }
    if args.fallback.is_some() {
        for input in &sig.inputs {
            let FnArg::Typed(arg) = input else { continue };
            let plain =
                matches!(&*arg.pat, Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none());
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
    let (ctor, n) = if nanos % 1_000_000_000 == 0 {
        ("from_secs", nanos / 1_000_000_000)
    } else if nanos % 1_000_000 == 0 {
        ("from_millis", nanos / 1_000_000)
    } else if nanos % 1_000 == 0 {
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
        None => quote!(#krate::Config::default()),
    };
    let ints = [
        &args.threshold,
        &args.failure_rate,
        &args.min_calls,
        &args.probes,
        &args.success_threshold,
        &args.max_concurrent,
    ];
    let durations = [
        &args.slow_call,
        &args.cool_off,
        &args.max_cool_off,
        &args.jitter,
        &args.timeout,
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
    for arg in durations.into_iter().flatten() {
        let (key, d) = (&arg.key, duration(krate, arg.value, arg.span));
        calls.push((order(key), quote_spanned!(arg.span=> .#key(#d))));
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
    calls.sort_by_key(|(i, _)| *i);
    for (_, call) in calls {
        cfg.extend(call);
    }
    cfg
}

/// The fallback applied to the function's arguments and the call's error.
fn fallback_call(fallback: &Expr, func: &ItemFn, err: &Ident) -> TokenStream {
    let sig = &func.sig;
    let receiver = sig.receiver();
    let mut args: Vec<TokenStream> = Vec::new();
    if let Some(r) = receiver {
        args.push(r.self_token.to_token_stream());
    }
    for input in &sig.inputs {
        if let FnArg::Typed(arg) = input {
            if let Pat::Ident(p) = &*arg.pat {
                args.push(p.ident.to_token_stream());
            }
        }
    }
    args.push(err.to_token_stream());
    let span = fallback.span();
    let path = match fallback {
        Expr::Path(p) => p,
        // A closure is called as written; wrong arity is reported on it by rustc.
        other => return quote_spanned!(span=> (#other)(#(#args),*)),
    };
    // In a method, a bare name is a method of `Self` (receiving `self` first).
    let path = match (receiver, path.qself.is_none(), path.path.get_ident()) {
        (Some(_), true, Some(ident)) => quote_spanned!(span=> Self::#ident),
        _ => path.to_token_stream(),
    };
    // The cast checks the arity with the fallback's name in the message
    // ("non-primitive cast: `fn(..) {cached_tax}` as `fn(_, _) -> _`").
    let holes = args.iter().map(|_| quote_spanned!(span=> _));
    quote_spanned!(span=> (#path as fn(#(#holes),*) -> _)(#(#args),*))
}

/// `::breaker` (or the `crate = "…"` path) with `span`, so an error in a generated call is
/// reported on the user's token the call is spanned with, not on the whole attribute.
fn krate_at(args: &Args, span: Span) -> TokenStream {
    match &args.krate {
        Some(k) => k.value.to_token_stream(),
        None => quote_spanned!(span=> ::breaker),
    }
}

/// The rewritten function.
fn generate(args: &Args, mut func: ItemFn) -> TokenStream {
    let krate = krate_at(args, Span::call_site());
    let fn_name = func.sig.ident.to_string();
    let (name, shared) = match &args.name {
        Some(n) => (n.value.to_token_stream(), true),
        None => (
            quote!(#krate::__private::concat!(#krate::__private::module_path!(), "::", #fn_name)),
            false,
        ),
    };
    let config = config(args, &krate);
    // Items are not hygienic: the static's name only needs to be one no user writes, and its
    // own block keeps it out of the body's scope.
    let static_name = Ident::new("__BREAKER", Span::mixed_site());
    let breaker = Ident::new("__breaker", Span::mixed_site());
    let err = Ident::new("__breaker_err", Span::mixed_site());
    let ok = Ident::new("__breaker_ok", Span::mixed_site());

    let (ret, ret_span) = match &func.sig.output {
        ReturnType::Type(_, ty) => {
            let mut ty = (**ty).clone();
            InferImplTrait.visit_type_mut(&mut ty);
            (ty.to_token_stream(), ty.span())
        }
        // `check_fn` rejected it; `()` keeps this total.
        ReturnType::Default => (quote!(()), Span::call_site()),
    };
    let is_failure = match &args.is_failure {
        // A path is cast to the `fn` pointer it must be, so a wrong signature is one error
        // naming it; a closure goes straight in, where its parameter types are inferred.
        Some(p) if matches!(p.value, Expr::Path(_)) => {
            let (f, k) = (&p.value, krate_at(args, p.span));
            quote_spanned!(p.span=> (#f as fn(&<#ret as #k::__private::Fallible>::Err) -> bool))
        }
        Some(p) => p.value.to_token_stream(),
        None => quote!(#krate::__private::every_error),
    };
    let block = &func.block;
    let is_async = func.sig.asyncness.is_some();
    let k = krate_at(args, ret_span);
    let result = match &args.fallback {
        // Without a fallback the body may consume the arguments.
        None if is_async => quote_spanned! {ret_span=>
            #k::__private::run::<#ret, _, _, _, _>(#breaker, #is_failure, async move #block).await
        },
        None => quote_spanned! {ret_span=>
            #k::__private::run_sync::<#ret, _, _, _, _>(#breaker, #is_failure, move || #block)
        },
        // With one the body borrows them: the fallback receives them after the body ran.
        Some(fallback) => {
            let call = if is_async {
                quote_spanned! {ret_span=>
                    #k::__private::call::<#ret, _, _>(#breaker, #is_failure, async #block).await
                }
            } else {
                quote_spanned! {ret_span=>
                    #k::__private::call_sync::<#ret, _, _>(#breaker, #is_failure, || #block)
                }
            };
            let mut recover = fallback_call(&fallback.value, &func, &err);
            if is_async {
                let k = krate_at(args, fallback.span);
                recover =
                    quote_spanned!(fallback.span=> #k::__private::async_fallback(#recover).await);
            }
            quote! {
                match #call {
                    #krate::__private::Ok(#ok) => #ok,
                    #krate::__private::Err(#err) => #recover,
                }
            }
        }
    };
    // The static sits in a block of its own, so a user's `let __BREAKER` in the body (a
    // binding may not shadow a static in scope) cannot clash with it.
    let body = quote! {{
        let #breaker: &'static #krate::Breaker = {
            static #static_name: #krate::__private::Lazy<#krate::Breaker> =
                #krate::__private::Lazy::new(|| #krate::__private::breaker(#name, #shared, #config));
            &#static_name
        };
        #result
    }};
    // Re-parsed so `ItemFn`'s printing keeps inner attributes (`#![allow(..)]`) in the body.
    match syn::parse2::<syn::Block>(body) {
        Ok(new_block) => {
            *func.block = new_block;
            func.into_token_stream()
        }
        Err(e) => e.into_compile_error(),
    }
}
