//! An annotated `async fn` becomes `fn … -> impl Future<Output = R>`, so that its future
//! keeps each argument once. An `async fn`'s future keeps an argument twice when a borrow or
//! a move takes it across an `.await` (the parameter, and the local rustc binds it to:
//! rust-lang/rust#62958), which the body's own future, borrowing or owning the arguments,
//! always does. A block the function returns keeps them once, as its captures.
//!
//! The `impl Future` captures every lifetime and type parameter in scope, as the `async fn`
//! did: this crate is edition 2024, whose rule the tokens it writes follow, whatever the
//! user's edition. Callers see the same signature; rustdoc shows `impl Future`.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::{FnArg, ItemFn, Pat, ReturnType};

use crate::args::Args;

/// Where the call of an annotated function's body is written.
pub(super) enum Frame {
    /// A plain `fn`: the body is a closure.
    Sync,
    /// The body of an `async fn`, kept as written: another attribute below the breaker's
    /// (`#[tokio::test]`, a framework's) may need it to be one. Also `#[async_trait]`'s
    /// `Box::pin(async move { … })`, which owns the arguments already.
    AsyncFn,
    /// The `fn`'s whole body: the call's future is the function's, and the body's block
    /// owns the arguments (the prelude, see [`desugar`], makes it take every one).
    Returned(TokenStream),
    /// Inside the `fn`'s own `async move` block, which owns the arguments: with a fallback
    /// (which receives them after the body), a key (looked up when the future first runs),
    /// `retry` (each attempt clones them) or a pattern parameter. The body borrows them.
    InBlock,
}

impl Frame {
    pub(super) fn is_async(&self) -> bool {
        !matches!(self, Frame::Sync)
    }
}

/// The frame of an `async fn`'s call.
pub(super) fn frame(args: &Args, func: &ItemFn) -> Frame {
    if func.attrs.iter().any(|a| !kept_by_a_plain_fn(a)) {
        return Frame::AsyncFn;
    }
    let patterns = func.sig.inputs.iter().any(|i| match i {
        FnArg::Typed(t) => simple(&t.pat).is_none(),
        FnArg::Receiver(_) => false,
    });
    let instrumented = func.attrs.iter().any(|a| is_instrument(a.path()));
    if args.fallback.is_some()
        || args.retry.is_some()
        || args.key.is_some()
        || patterns
        || instrumented
    {
        // tracing's `instrument` below instruments the block a `fn` returns, which must be
        // the last expression: the call's future would be instrumented only while made.
        Frame::InBlock
    } else {
        Frame::Returned(TokenStream::new())
    }
}

/// An attribute that means the same on `fn … -> impl Future` as on the `async fn`: the
/// compiler's own (lints, docs, `inline`, `must_use`, `deprecated`), tools' (`rustfmt::…`,
/// `clippy::…`), and tracing's `instrument`, which instruments the returned block.
fn kept_by_a_plain_fn(attr: &syn::Attribute) -> bool {
    let path = attr.path();
    if is_instrument(path) {
        return true;
    }
    if let Some(first) = path.segments.first()
        && path.segments.len() > 1
        && (first.ident == "rustfmt" || first.ident == "clippy")
    {
        return true;
    }
    const INERT: [&str; 11] = [
        "doc",
        "allow",
        "warn",
        "deny",
        "forbid",
        "expect",
        "inline",
        "cold",
        "must_use",
        "deprecated",
        "cfg",
    ];
    path.get_ident()
        .is_some_and(|i| INERT.iter().any(|inert| i == inert))
}

fn is_instrument(path: &syn::Path) -> bool {
    path.segments
        .last()
        .is_some_and(|s| s.ident == "instrument")
}

/// The parameter's name when its pattern is a plain binding (`x`, `mut x`).
fn simple(pat: &Pat) -> Option<&syn::Ident> {
    match pat {
        Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => Some(&p.ident),
        _ => None,
    }
}

/// Makes the `async fn` a `fn` returning `impl Future<Output = R>`, and returns the prelude
/// of the block that owns the arguments: `let _ = &x;` for each (a block captures only what
/// it names, and every argument must live until the call ends, as in the `async fn`), and
/// `let (a, b) = __breaker_arg1;` for a pattern parameter (renamed, bound in the block; `_`
/// is kept whole until the end, as the `async fn` keeps it).
pub(super) fn desugar(func: &mut ItemFn, krate: &TokenStream) -> TokenStream {
    let sig = &mut func.sig;
    let async_span = sig
        .asyncness
        .take()
        .map_or_else(Span::call_site, |a| a.span);
    let (ret, at) = match &sig.output {
        ReturnType::Type(_, ty) => (quote!(#ty), at_return_type(ty)),
        ReturnType::Default => (quote!(()), async_span),
    };
    let arrow = match &sig.output {
        ReturnType::Type(arrow, _) => *arrow,
        ReturnType::Default => syn::Token![->](async_span),
    };
    // The macro's own span (an `impl Trait` follows the edition of its tokens), shown at the
    // return type.
    let future = quote_spanned!(at=> impl #krate::__private::Future<Output = #ret>);
    sig.output = ReturnType::Type(arrow, Box::new(syn::Type::Verbatim(future)));
    let mut prelude = TokenStream::new();
    for (n, input) in sig.inputs.iter_mut().enumerate() {
        match input {
            FnArg::Receiver(r) => {
                let s = &r.self_token;
                prelude.extend(quote!(let _ = &#s;));
            }
            FnArg::Typed(t) => {
                let cfgs = t.attrs.iter().filter(|a| a.path().is_ident("cfg"));
                let cfgs = quote!(#(#cfgs)*);
                if let Some(name) = simple(&t.pat) {
                    prelude.extend(quote!(#cfgs let _ = &#name;));
                } else {
                    let arg = format_ident!("__breaker_arg{}", n, span = Span::mixed_site());
                    let pat = std::mem::replace(&mut *t.pat, syn::parse_quote!(#arg));
                    // Named first: a block captures only the parts a pattern takes.
                    prelude.extend(quote!(#cfgs let _ = &#arg;));
                    if !matches!(pat, Pat::Wild(_)) {
                        prelude.extend(quote!(#cfgs let #pat = #arg;));
                    }
                }
            }
        }
    }
    prelude
}

/// The span of the returned `impl Future` and, in [`Frame::Returned`], of the call that is
/// its hidden type: the macro's own (whose edition the `impl` follows), shown at the return
/// type. One span for both, so that a bound of the call that fails (the return type is no
/// `Result`, its error holds no `BreakerError`) is one error, not one for the call and one
/// for the future it returns.
pub(super) fn at_return_type(ty: &syn::Type) -> Span {
    Span::call_site().located_at(syn::spanned::Spanned::span(ty))
}
