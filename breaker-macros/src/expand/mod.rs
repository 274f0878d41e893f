//! Code generation: the user's function with its body wrapped in one call into the runtime
//! through a lazily created static breaker (an `async fn` made `fn … -> impl Future`, the same
//! signature to callers: see `future`). `expand` runs the phases (arguments, item, checks)
//! and reports every error at once; generation then reads only the checked `Args` and item:
//! `config` (the `Config` built), `binding` (the static breaker), `future` (the frame an
//! `async fn`'s call is written in), `call` (the body's call through the breaker),
//! `fallback` (its recovery).

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::{Ident, ItemFn, ReturnType};

use crate::{
    args::{self, Args},
    errors::Errors,
    item::{self, boxed_async_block_mut, verbatim, Shape},
};

mod binding;
mod call;
mod config;
mod fallback;
mod future;

use future::Frame;

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
    let args = args::parse(args).map_err(|e| errors.push(e)).ok();
    let func = item::parse_fn(item).map_err(|e| errors.push(e)).ok();
    let shape = func
        .as_ref()
        .and_then(|f| item::shape(f).map_err(|e| errors.push(e)).ok());
    if let (Some(args), Some(func), Some(shape)) = (&args, &func, &shape) {
        item::check_fn(args, func, shape, &mut errors);
        if args.krate.is_none()
            && let Some(name) = crate::renamed::renamed_facade()
        {
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

/// The rewritten function.
fn generate(args: &Args, mut func: ItemFn, shape: Shape) -> TokenStream {
    let krate = krate_at(args, Span::call_site());
    let breaker = binding::breaker_ref(args, &func, &krate);
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
            fallback::unmove_async_trait_args(sig, &mut inner.block);
        }
        let result = call::call_expr(
            args,
            sig,
            &ret,
            &inner.block,
            &Frame::AsyncFn,
            &TokenStream::new(),
            &breaker,
        );
        if args.per_attempt() {
            call::unmut_params(sig);
        }
        inner.block.stmts = verbatim(result);
        return func.into_token_stream();
    }
    let is_async = matches!(shape, Shape::Async);
    if is_async && args.fallback.is_some() && fallback::instrumented_above(&func.block) {
        if let Err(e) = item::parse_body(&mut func.block) {
            return e.into_compile_error();
        }
        fallback::unmove_tracing_future(&mut func.block);
    }
    let frame = match shape {
        Shape::Async => future::frame(args, &func),
        _ => Frame::Sync,
    };
    // The call reads the signature as written (the fallback's arguments); the prelude
    // binds the parameters `desugar` renames.
    let original = func.sig.clone();
    let prelude = match frame {
        Frame::Returned | Frame::InBlock => future::desugar(&mut func, &krate),
        Frame::Sync | Frame::AsyncFn => TokenStream::new(),
    };
    // Returned, the function only makes the call's future: inlined, the caller's `.await`
    // gets it in place (without, one move of the whole future, +8 instructions a call).
    if matches!(frame, Frame::Returned) && !func.attrs.iter().any(|a| a.path().is_ident("inline")) {
        func.attrs.push(syn::parse_quote!(#[inline]));
    }
    let result = call::call_expr(
        args,
        &original,
        &ret,
        &func.block,
        &frame,
        &prelude,
        &breaker,
    );
    if args.per_attempt() && is_async {
        call::unmut_params(&mut func.sig);
    }
    let body = match frame {
        Frame::InBlock => quote!(async move { #prelude #result }),
        _ => result,
    };
    // Printed as they are, after the function's inner attributes (`#![allow(..)]`):
    // re-parsed into `syn` statements, they were half the attribute's own time.
    func.block.stmts = verbatim(body);
    // The macro's braces: the block is generated code (to clippy too, whose
    // `manual_async_fn` would otherwise read the `fn` returning a block as the user's).
    func.block.brace_token = syn::token::Brace::default();
    func.into_token_stream()
}

/// `::breaker` (or the `crate = "…"` path) with `span`, so an error in a generated call is
/// reported on the user's token the call is spanned with, not on the whole attribute.
pub(crate) fn krate_at(args: &Args, span: Span) -> TokenStream {
    match &args.krate {
        Some(k) => k.value.to_token_stream(),
        None => quote_spanned!(span=> ::breaker),
    }
}

/// A user's `const` named like a binding would capture it (in a pattern a constant's name
/// is a constant pattern, whatever the binding's hygiene): a `fn` item of the same name in a
/// block around the pattern (and never around the user's body) shadows any such constant.
pub(crate) fn shadow(names: &[&Ident]) -> TokenStream {
    quote!(#(#[allow(dead_code)] fn #names() {})*)
}
