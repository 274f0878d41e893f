//! The `async fn` made a `fn` returning `impl Future<Output = R>`: the signature, and the
//! prelude of the block that owns the arguments.

use proc_macro2::{Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::{FnArg, ItemFn, Pat, ReturnType};

/// The parameter's name when its pattern is a plain binding (`x`, `mut x`).
pub(super) fn simple(pat: &Pat) -> Option<&syn::Ident> {
    match pat {
        Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none() => Some(&p.ident),
        _ => None,
    }
}
/// Makes the `async fn` a `fn` returning `impl Future<Output = R>`, and returns the prelude
/// of the block that owns the arguments: `let _ = &x;` for each that has something to drop
/// (a block captures only what it names, and every argument must live until the call ends,
/// as in the `async fn`), and
/// `let (a, b) = __breaker_arg1;` for a pattern parameter (renamed, bound in the block; `_`
/// is kept whole until the end, as the `async fn` keeps it).
pub(in crate::expand) fn desugar(func: &mut ItemFn, krate: &TokenStream) -> TokenStream {
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
    // Each argument named (in reverse: the block's captures are dropped in the order they
    // are taken, and a function's parameters in reverse), then the patterns bound.
    let mut named = Vec::new();
    let mut bound = TokenStream::new();
    for (n, input) in sig.inputs.iter_mut().enumerate() {
        match input {
            // A reference or a number is not named: dropping one does nothing, so it may
            // go when the function returns, and one the body never uses is still reported
            // unused, as in the plain function.
            FnArg::Receiver(r)
                if r.reference.is_some() || matches!(&*r.ty, syn::Type::Reference(_)) => {}
            FnArg::Typed(t) if simple(&t.pat).is_some() && nothing_to_drop(&t.ty) => {}
            FnArg::Receiver(r) => {
                let s = &r.self_token;
                named.push(quote!(let _ = &#s;));
            }
            FnArg::Typed(t) => {
                let cfgs = t.attrs.iter().filter(|a| a.path().is_ident("cfg"));
                let cfgs = quote!(#(#cfgs)*);
                if let Some(name) = simple(&t.pat) {
                    let name = unlinted(name);
                    named.push(quote!(#cfgs let _ = &#name;));
                } else {
                    let arg = format_ident!("__breaker_arg{}", n, span = Span::mixed_site());
                    let pat = std::mem::replace(&mut *t.pat, syn::parse_quote!(#arg));
                    // Named whole: a block captures only the parts a pattern takes.
                    named.push(quote!(#cfgs let _ = &#arg;));
                    if !matches!(pat, Pat::Wild(_)) {
                        bound.extend(quote!(#cfgs let #pat = #arg;));
                    }
                }
            }
        }
    }
    named.reverse();
    quote!(#(#named)* #bound)
}

/// Whether every parameter is a copy as written: `&self` (or `self: &Self`), or a plain
/// binding, not `mut` and without attributes, of a shared reference, a number, a `bool` or a
/// `char`. Then the body and a fallback can each take a copy, and neither borrows the other's.
pub(in crate::expand) fn all_copied(sig: &syn::Signature) -> bool {
    sig.inputs.iter().all(|input| match input {
        FnArg::Receiver(r) => {
            r.mutability.is_none()
                && match &*r.ty {
                    syn::Type::Reference(t) => t.mutability.is_none(),
                    _ => false,
                }
        }
        FnArg::Typed(t) => {
            t.attrs.is_empty()
                && matches!(&*t.pat, Pat::Ident(p) if p.mutability.is_none())
                && simple(&t.pat).is_some()
                && match &*t.ty {
                    syn::Type::Reference(r) => r.mutability.is_none(),
                    ty => nothing_to_drop(ty),
                }
        }
    })
}

/// Whether a value of this type is dropped by doing nothing: a reference, a number, a
/// `bool` or a `char`, as written.
fn nothing_to_drop(ty: &syn::Type) -> bool {
    const SCALARS: [&str; 16] = [
        "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128", "isize",
        "f32", "f64", "bool", "char",
    ];
    match ty {
        syn::Type::Reference(_) => true,
        syn::Type::Path(p) => {
            p.qself.is_none()
                && p.path
                    .get_ident()
                    .is_some_and(|i| SCALARS.iter().any(|s| i == s))
        }
        syn::Type::Group(g) => nothing_to_drop(&g.elem),
        syn::Type::Paren(p) => nothing_to_drop(&p.elem),
        _ => false,
    }
}

/// A parameter's name as generated code uses it (the prelude, the fallback's arguments):
/// `_guard` at the user's position but with the macro's own hygiene (which still finds the
/// parameter), so that clippy's `used_underscore_binding` sees generated code, not a use of
/// `_guard` in the user's.
pub(in crate::expand) fn unlinted(name: &syn::Ident) -> syn::Ident {
    let mut name = name.clone();
    if name.to_string().starts_with('_') {
        name.set_span(Span::call_site().located_at(name.span()));
    }
    name
}

/// The span of the returned `impl Future` and, in [`Frame::Returned`], of the call that is
/// its hidden type: the macro's own (whose edition the `impl` follows), shown at the return
/// type. One span for both, so that a bound of the call that fails (the return type is no
/// `Result`, its error holds no `BreakerError`) is one error, not one for the call and one
/// for the future it returns.
pub(in crate::expand) fn at_return_type(ty: &syn::Type) -> Span {
    Span::call_site().located_at(syn::spanned::Spanned::span(ty))
}
