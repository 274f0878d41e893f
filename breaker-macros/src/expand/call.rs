//! The call of the body through the breaker, as the function's result: `run`/`call` (with a
//! fallback), their `_sync` and retried forms, each taking the judge (`is_failure`,
//! `classify`) as a value.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::{spanned::Spanned, visit_mut::VisitMut, Expr, FnArg, Ident, Pat, Type};

use super::{
    binding::Seat,
    fallback::{fallback_call, Apply},
    future::{self, Frame},
    krate_at, shadow,
};
use crate::args::Args;

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

/// What every form of the call is made of.
struct Parts<'a> {
    /// The facade, spanned with the return type.
    k: TokenStream,
    /// The function's return type, `impl Trait` made `_`.
    ret: TokenStream,
    /// The judge of the call's result (see [`judge`]).
    judge: TokenStream,
    /// The `&Breaker`.
    breaker: &'a TokenStream,
    /// With `key`, the owned `Breaker` an `async fn`'s call takes (see `binding::Seat`).
    owned: Option<&'a TokenStream>,
}

/// The call of `body` (the function's block) through `__breaker`, as the function's result.
pub(super) fn call_expr(
    args: &Args,
    sig: &syn::Signature,
    ret: &Type,
    body: &syn::Block,
    frame: &Frame,
    prelude: &TokenStream,
    seat: &Seat,
) -> TokenStream {
    let is_async = frame.is_async();
    let ret_span = match frame {
        Frame::Returned => future::at_return_type(ret),
        _ => ret.span(),
    };
    let mut ret = ret.clone();
    InferImplTrait.visit_type_mut(&mut ret);
    let ret = ret.to_token_stream();
    let judge = judge(args, &ret);
    // Every token of the entry call at the return type, `crate = "…"`'s path too: a bound the
    // call's path and its `.await` both require (a missing `From<BreakerError>`) is then
    // reported once, there, not again over the span from the literal to the return type.
    let k: TokenStream = krate_at(args, ret_span)
        .into_iter()
        .map(|mut t| {
            t.set_span(ret_span);
            t
        })
        .collect();
    let body = if is_async {
        // Returned, the body's block owns the arguments; in a block, that block does.
        let prelude = match frame {
            Frame::Returned => prelude.clone(),
            _ => TokenStream::new(),
        };
        typed_async_body(&k, &ret, &prelude, body, ret_span)
    } else {
        body.to_token_stream()
    };
    let parts = Parts {
        k,
        ret,
        judge,
        breaker: &seat.borrowed,
        owned: seat.owned.as_ref(),
    };
    if let (Some(retry), true) = (&args.retry, is_async) {
        return retried_call(
            args,
            sig,
            &parts,
            &body,
            retry.span,
            ret_span,
            Attempts::Retried,
        );
    }
    if let (Some(hedge), true) = (&args.hedge, is_async) {
        return retried_call(
            args,
            sig,
            &parts,
            &body,
            hedge.span,
            ret_span,
            Attempts::Hedged,
        );
    }
    match &args.fallback {
        None => entry(&parts, &body, frame, false, ret_span),
        Some(fallback) => {
            let call = entry(&parts, &body, frame, true, ret_span);
            if !is_async {
                return recovered_sync(args, &fallback.value, fallback.span, sig, &parts, &call);
            }
            let krate = krate_at(args, Span::call_site());
            let recovery = recovery(args, &fallback.value, fallback.span, sig, &parts, true);
            if matches!(frame, Frame::Returned) {
                // The function's future: the call's, then the fallback's (see `Frame`).
                quote!(#krate::__private::fall_back(#call, #recovery))
            } else {
                quote!(#krate::__private::recover(#call, #recovery).await)
            }
        }
    }
}

/// The judge of a call's result, a value of the runtime's `Judge`, so one entry point takes
/// any: `is_failure` as itself, `classify` as its `Classify`, every error a failure without
/// either. An `is_failure` path is coerced to the `fn` pointer it must be (a struct field is a
/// coercion site; an `as` cast would trip a user's `trivial_casts`), so a wrong signature is
/// one error naming it; a `classify` path goes through `ClassifyProbe` (see
/// `src/glue/classify.rs`), so a wrong one is one error on it naming `fn(&Result<T, E>) ->
/// breaker::Verdict`. A closure goes through `is_failure::<R, _>` or `classify::<R, _>`,
/// whose bounds give its parameter its type.
fn judge(args: &Args, ret: &TokenStream) -> TokenStream {
    match (&args.classify, &args.is_failure) {
        (Some(c), _) => {
            let (f, k) = (&c.value, krate_at(args, c.span));
            if matches!(f, Expr::Path(_)) {
                let method = Ident::new("__classify", c.span);
                // Only one of the two traits is used, whichever the path's type picks.
                quote_spanned! {c.span=> {
                    #[allow(unused_imports)]
                    use #k::__private::{ClassifyFits as _, ClassifyMisfits as _};
                    #k::__private::ClassifyProbe::<#ret, _>::new(#f).#method()
                }}
            } else {
                quote_spanned!(c.span=> #k::__private::classify::<#ret, _>(#f))
            }
        }
        (None, Some(p)) => {
            let (f, k) = (&p.value, krate_at(args, p.span));
            if matches!(f, Expr::Path(_)) {
                quote_spanned!(p.span=> #k::__private::AsFn::<#k::__private::IsFailure<#ret>> { f: #f }.f)
            } else {
                quote_spanned!(p.span=> #k::__private::is_failure::<#ret, _>(#f))
            }
        }
        (None, None) => {
            let krate = krate_at(args, Span::call_site());
            quote!(#krate::__private::every_error)
        }
    }
}

/// The body's call through the breaker: without a fallback `run` (or `run_keyed`,
/// `run_sync`), where the body may consume the arguments (`move`); with one `call` (or
/// `call_keyed`, `call_sync`), where the body borrows them, since the fallback receives them
/// after the body ran (which makes the future `Send` only if they are `Sync`). The call is
/// the function's future itself when it is returned ([`Frame::Returned`]), awaited
/// otherwise.
fn entry(
    parts: &Parts,
    body: &TokenStream,
    frame: &Frame,
    fallback: bool,
    span: Span,
) -> TokenStream {
    let Parts {
        k,
        ret,
        judge,
        breaker,
        owned,
    } = parts;
    let verb = if fallback { "call" } else { "run" };
    // Returned with a fallback, the arguments are copies: the body takes its own.
    let capture =
        (!fallback || matches!(frame, Frame::Returned)).then(|| quote_spanned!(span=> move));
    let named = |suffix: &str| Ident::new(&format!("{verb}{suffix}"), span);
    if frame.is_async() {
        // The breaker's parts found first (`host`), before the body is made: making the call
        // future then calls nothing while the body is alive, which a debug build would give an
        // unwinding path dropping it, in every function.
        let (f, host) = match owned {
            Some(owned) => (named("_keyed"), (*owned).clone()),
            None => (
                named(""),
                quote_spanned!(span=> #k::__private::host(#breaker)),
            ),
        };
        let call = quote_spanned! {span=>
            #k::__private::#f::<#ret, _, _, _, _>(#host, #judge, async #capture #body)
        };
        match frame {
            Frame::Returned => call,
            _ => quote_spanned!(span=> #call.await),
        }
    } else {
        // `run_sync` names the result's parts too (`R`, `T`, `E`); `call_sync` only `R`.
        let f = named("_sync");
        let holes = if fallback {
            quote_spanned!(span=> _, _)
        } else {
            quote_spanned!(span=> _, _, _, _)
        };
        quote_spanned! {span=>
            #k::__private::#f::<#ret, #holes>(#breaker, #judge, #capture || #body)
        }
    }
}

/// `{ …; move |err| fallback(args…, err) }`: the closure `recover` calls with the call's
/// error. The body has run (and its borrows of the arguments ended) before the closure, which
/// takes the arguments on to the fallback, is made: arguments are evaluated in order.
/// Spanned with the fallback, where a body that consumed an argument is then reported.
fn recovery(
    args: &Args,
    fallback: &Expr,
    span: Span,
    sig: &syn::Signature,
    parts: &Parts,
    is_async: bool,
) -> TokenStream {
    let err = Ident::new("__breaker_err", Span::mixed_site());
    // `fallback_call` binds `__breaker_recover` when parameters are `#[cfg]`-gated (always
    // shadowed with `retry`, as it always was).
    let gated = sig.inputs.iter().any(|i| match i {
        FnArg::Typed(t) => t.attrs.iter().any(|a| a.path().is_ident("cfg")),
        FnArg::Receiver(_) => false,
    });
    let recover_name = Ident::new("__breaker_recover", Span::mixed_site());
    let shadowed = if gated || (args.per_attempt() && is_async) {
        shadow(&[&err, &recover_name])
    } else {
        shadow(&[&err])
    };
    let how = Apply {
        krate: krate_at(args, span),
        ret: parts.ret.clone(),
        is_async,
        used_at: None,
    };
    let recover = fallback_call(fallback, sig, &err, &how);
    // A closure is called where it is written, which clippy's `redundant_closure_call` would
    // report on the user's tokens.
    let allow = match fallback {
        Expr::Path(_) => TokenStream::new(),
        _ => quote!(#[allow(clippy::redundant_closure_call)]),
    };
    quote_spanned! {span=> {
        #shadowed
        #allow
        move |#err| #recover
    }}
}

/// A plain `fn`'s call with a fallback: `match call_sync(..) { Ok(ok) => ok, Err(err) =>
/// fallback(args…, err) }`, in the function itself (a closure and a generic `recover_sync` around it were
/// two more functions to compile in each). The body's closure was moved into `call_sync`, so
/// its borrows of the arguments have ended when the fallback takes them. The bindings are
/// shadowed (a user's `const ok` would otherwise be matched), the arm spanned with the
/// fallback, as the closure was.
fn recovered_sync(
    args: &Args,
    fallback: &Expr,
    span: Span,
    sig: &syn::Signature,
    parts: &Parts,
    call: &TokenStream,
) -> TokenStream {
    let err = Ident::new("__breaker_err", Span::mixed_site());
    let ok = Ident::new("__breaker_ok", Span::mixed_site());
    let gated = sig.inputs.iter().any(|i| match i {
        FnArg::Typed(t) => t.attrs.iter().any(|a| a.path().is_ident("cfg")),
        FnArg::Receiver(_) => false,
    });
    let recover_name = Ident::new("__breaker_recover", Span::mixed_site());
    let shadowed = if gated {
        shadow(&[&err, &ok, &recover_name])
    } else {
        shadow(&[&err, &ok])
    };
    let how = Apply {
        krate: krate_at(args, span),
        ret: parts.ret.clone(),
        is_async: false,
        used_at: Some(span),
    };
    let recover = fallback_call(fallback, sig, &err, &how);
    let allow = match fallback {
        Expr::Path(_) => TokenStream::new(),
        _ => quote!(#[allow(clippy::redundant_closure_call)]),
    };
    let k = krate_at(args, Span::call_site());
    quote_spanned! {span=> {
        #shadowed
        match #call {
            #k::__private::Ok(#ok) => #ok,
            #allow
            #k::__private::Err(#err) => #recover,
        }
    }}
}

/// How the attempts of [`retried_call`] run: one after another (`retry`), or raced
/// (`hedge`).
#[derive(Clone, Copy)]
enum Attempts {
    Retried,
    Hedged,
}

/// The call of an `async fn` with `retry` or `hedge`: the body made once per attempt by a
/// closure that gives each attempt its own clone of every argument (a reference or a `Copy`
/// value costs nothing to clone), so an attempt may consume its arguments and the next gets
/// them whole; the arguments themselves stay with the function, for the fallback.
/// `run_retried` (`run_hedged`) is spanned with the return type (`ret_span`), where its bound
/// reports an `E` without `From<BreakerError>`, as `run` does.
fn retried_call(
    args: &Args,
    sig: &syn::Signature,
    parts: &Parts,
    body: &TokenStream,
    span: Span,
    ret_span: Span,
    attempts: Attempts,
) -> TokenStream {
    let k = krate_at(args, span);
    let arg = match attempts {
        Attempts::Retried => quote!(RetryArg),
        Attempts::Hedged => quote!(HedgeArg),
    };
    let clones = sig.inputs.iter().filter_map(|input| match input {
        FnArg::Typed(t) => match &*t.pat {
            Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => {
                let (m, name) = (&p.mutability, &p.ident);
                let attrs = &t.attrs;
                // On the parameter: an argument that is not `Clone` is reported there.
                let at = name.span();
                Some(quote_spanned! {at=>
                    #(#attrs)* let #m #name = #k::__private::#arg::for_attempt(&#name);
                })
            }
            _ => None,
        },
        FnArg::Receiver(_) => None,
    });
    let make = quote_spanned! {span=> || { #(#clones)* async move #body } };
    let Parts {
        k: k_ret,
        ret,
        judge,
        breaker,
        ..
    } = parts;
    let (run, call) = match attempts {
        Attempts::Retried => (quote_spanned!(ret_span=> run_retried), quote!(retried)),
        Attempts::Hedged => (quote_spanned!(ret_span=> run_hedged), quote!(hedged)),
    };
    let Some(fallback) = &args.fallback else {
        let run = quote_spanned!(ret_span=> #k_ret::__private::#run::<#ret, _, _, _, _, _>);
        return quote_spanned! {ret_span=>
            #run(#breaker, #judge, #make).await
        };
    };
    let call = quote_spanned! {span=>
        #k::__private::#call::<#ret, _, _, _>(#breaker, #judge, #make).await
    };
    let recovery = recovery(args, &fallback.value, fallback.span, sig, parts, true);
    let krate = krate_at(args, Span::call_site());
    quote!(#krate::__private::recover(#call, #recovery).await)
}

/// With `retry` each attempt binds its own copy of a `mut` parameter (`let mut x = …`), and
/// the parameter itself is never changed: its `mut` goes, or rustc would warn that it is
/// unused.
pub(super) fn unmut_params(sig: &mut syn::Signature) {
    for input in &mut sig.inputs {
        if let FnArg::Typed(t) = input
            && let Pat::Ident(p) = &mut *t.pat
            && p.by_ref.is_none()
            && p.subpat.is_none()
        {
            p.mutability = None;
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
    prelude: &TokenStream,
    body: &syn::Block,
    span: Span,
) -> TokenStream {
    let stmts = &body.stmts;
    // The block is spanned with the return type, which rustc then names in a note about it
    // (a body that is not `Send`).
    quote_spanned! {span=> {
        #prelude
        if false {
            return #krate::__private::returns::<#ret>();
        }
        #(#stmts)*
    }}
}
