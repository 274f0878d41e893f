//! The fallback: applied to the function's arguments and the call's error, and the
//! rewrites of other attributes' bodies (`#[async_trait]`, `#[tracing::instrument]`) that
//! would otherwise move the arguments away from it.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::{spanned::Spanned, Expr, FnArg, Ident, Pat};

/// The fallback applied to the function's arguments and the call's error, passed through
/// `wrap` (which awaits it for an `async fn`).
///
/// A parameter under `#[cfg(…)]` is passed only where it exists: one call per combination of
/// the gated parameters, each under the `#[cfg]` that selects it (call arguments cannot carry
/// `#[cfg]` themselves).
pub(super) fn fallback_call(
    fallback: &Expr,
    sig: &syn::Signature,
    err: &Ident,
    how: &Apply,
) -> TokenStream {
    let receiver = sig.receiver();
    // Each argument with the predicates of its `#[cfg(…)]` attributes.
    let mut args: Vec<(TokenStream, Vec<TokenStream>)> = Vec::new();
    // Resolved as the parameter, shown where `used_at` says.
    let at = |span: Span| how.used_at.map_or(span, |at| span.located_at(at));
    if let Some(r) = receiver {
        let mut s = r.self_token;
        s.span = at(s.span);
        args.push((s.to_token_stream(), Vec::new()));
    }
    for input in &sig.inputs {
        if let FnArg::Typed(arg) = input
            && let Pat::Ident(p) = &*arg.pat
        {
            let cfgs = arg
                .attrs
                .iter()
                .filter(|a| a.path().is_ident("cfg"))
                .filter_map(|a| match &a.meta {
                    syn::Meta::List(l) => Some(l.tokens.clone()),
                    _ => None,
                })
                .collect();
            let mut name = super::future::unlinted(&p.ident);
            name.set_span(at(name.span()));
            args.push((name.to_token_stream(), cfgs));
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
pub(super) struct Apply {
    pub(super) krate: TokenStream,
    pub(super) ret: TokenStream,
    pub(super) is_async: bool,
    /// Where the arguments are shown as used: the fallback, for a plain `fn`'s `match`, so
    /// that a body that consumed one is reported there (as a closure's capture is); `None`,
    /// each at its parameter.
    pub(super) used_at: Option<Span>,
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
        ..
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

/// With a fallback, `#[async_trait]`'s `let x = x;` at the top of the body (which moves each
/// owned argument into the future) would leave nothing for the fallback: they go, so the body
/// borrows its arguments as in an `async fn` (a `mut` moves back to the parameter), and
/// `let mut __self = self;` of a `&mut self` method becomes a reborrow.
pub(super) fn unmove_async_trait_args(sig: &mut syn::Signature, body: &mut syn::Block) {
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
        if let FnArg::Typed(t) = input
            && let Pat::Ident(p) = &mut *t.pat
            && made_mut.contains(&p.ident)
        {
            p.mutability = Some(syn::Token![mut](p.ident.span()));
        }
    }
}

/// Whether `#[tracing::instrument]` above the attribute wrote this body: its `let
/// __tracing_instrument_future = …;` at the top level (the body is parsed only then).
pub(super) fn instrumented_above(body: &syn::Block) -> bool {
    body.stmts.iter().any(|stmt| match stmt {
        syn::Stmt::Expr(Expr::Verbatim(tokens), None) => tokens.clone().into_iter().any(
            |t| matches!(t, proc_macro2::TokenTree::Ident(i) if i == "__tracing_instrument_future"),
        ),
        syn::Stmt::Local(l) => {
            matches!(&l.pat, Pat::Ident(p) if p.ident == "__tracing_instrument_future")
        }
        _ => false,
    })
}

/// With a fallback, `#[tracing::instrument]` above the attribute (which expands first) has
/// moved the arguments into its own `async move` block (`let __tracing_instrument_future =
/// async move { … };`), leaving nothing for the fallback: its blocks borrow them instead, as
/// the body does under the attribute alone. tracing-attributes 0.1 writes the block alone or
/// awaited once inside another (`err`, `ret`), so those are the shapes looked at.
pub(super) fn unmove_tracing_future(body: &mut syn::Block) {
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
            if let Some(Expr::Await(a)) = awaited
                && let Expr::Async(block) = &mut *a.base
            {
                block.capture = None;
            }
        }
    }
}
