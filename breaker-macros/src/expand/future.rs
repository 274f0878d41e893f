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
use syn::{visit_mut::VisitMut, Expr, FnArg, ItemFn, Pat, ReturnType};

use super::binding::needs_the_function;
use crate::args::Args;

/// Where the call of an annotated function's body is written.
pub(super) enum Frame {
    /// A plain `fn`: the body is a closure.
    Sync,
    /// The body of an `async fn`, kept as written: another attribute below the breaker's
    /// (`#[tokio::test]`, a framework's) may need it to be one, an `impl Trait` parameter
    /// may elide a lifetime (which only an `async fn` may), and `#[tracing::instrument]`
    /// below names pattern parameters' bindings. Also `#[async_trait]`'s
    /// `Box::pin(async move { … })`, which owns the arguments already.
    AsyncFn,
    /// The `fn`'s whole body: the call's future is the function's, and the body's block
    /// owns the arguments (the prelude, see [`desugar`], makes it take every one). Calling
    /// the function finds the breaker (the static's, made on the first call; or the key's,
    /// looked up) and nothing else: the call starts at the first poll.
    Returned(TokenStream),
    /// Inside the `fn`'s own `async move` block, which owns the arguments and runs all of it
    /// at the first poll: with a fallback (which receives the arguments after the body),
    /// `retry` (each attempt clones them), `config = …` (an expression, which may panic:
    /// inside the future, as in the `async fn`), a key that awaits or has a `?`, a judge
    /// that is a closure (it may borrow the arguments), a pattern parameter, or
    /// `#[tracing::instrument]` below (which instruments the block a `fn` returns last).
    InBlock,
}

impl Frame {
    pub(super) fn is_async(&self) -> bool {
        !matches!(self, Frame::Sync)
    }
}

/// The frame of an `async fn`'s call.
pub(super) fn frame(args: &Args, func: &ItemFn) -> Frame {
    let patterns = func.sig.inputs.iter().any(|i| match i {
        FnArg::Typed(t) => simple(&t.pat).is_none(),
        FnArg::Receiver(_) => false,
    });
    let instrumented = func.attrs.iter().any(is_instrument);
    // tracing's `instrument` reads a `fn`'s body as `{ async move { … } }` and has no place
    // for inner attributes (`#![allow(..)]`, `//!`) before the block.
    let inner_attributes = func
        .attrs
        .iter()
        .any(|a| matches!(a.style, syn::AttrStyle::Inner(_)));
    if func.attrs.iter().any(|a| !kept_by_a_plain_fn(a))
        || func.sig.inputs.iter().any(may_elide_in_impl_trait)
        || (instrumented && (patterns || inner_attributes))
    {
        return Frame::AsyncFn;
    }
    let closure = |judge: Option<&Expr>| judge.is_some_and(|j| !matches!(j, Expr::Path(_)));
    if args.fallback.is_some()
        || args.retry.is_some()
        || args.config.is_some()
        || args
            .key
            .as_ref()
            .is_some_and(|k| needs_the_function(&k.value))
        || closure(args.is_failure.as_ref().map(|j| &j.value))
        || closure(args.classify.as_ref().map(|j| &j.value))
        || patterns
        || instrumented
    {
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
    if is_instrument(attr) {
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

/// `#[instrument]` or `#[tracing::instrument]`.
fn is_instrument(attr: &syn::Attribute) -> bool {
    let names: Vec<String> = attr
        .path()
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    matches!(names.as_slice(), [i] | [_, i] if i == "instrument" && (names.len() == 1 || names[0] == "tracing"))
}

/// Whether a parameter's type has an `impl Trait` that may elide a lifetime: `&T`, `'_` or a
/// path with arguments, which may hide one (`Cow<str>`), among its bounds' arguments. An
/// `async fn` may elide them there, a `fn` may not (E0658). `Fn(&str) -> &str` sugar has an
/// elision scope of its own.
fn may_elide_in_impl_trait(input: &FnArg) -> bool {
    struct Finder {
        in_impl: bool,
        found: bool,
    }
    impl VisitMut for Finder {
        fn visit_type_impl_trait_mut(&mut self, it: &mut syn::TypeImplTrait) {
            let outer = std::mem::replace(&mut self.in_impl, true);
            syn::visit_mut::visit_type_impl_trait_mut(self, it);
            self.in_impl = outer;
        }
        fn visit_parenthesized_generic_arguments_mut(
            &mut self,
            _: &mut syn::ParenthesizedGenericArguments,
        ) {
        }
        fn visit_type_reference_mut(&mut self, r: &mut syn::TypeReference) {
            self.found |= self.in_impl && r.lifetime.is_none();
            syn::visit_mut::visit_type_reference_mut(self, r);
        }
        fn visit_lifetime_mut(&mut self, l: &mut syn::Lifetime) {
            self.found |= self.in_impl && l.ident == "_";
        }
        fn visit_type_path_mut(&mut self, p: &mut syn::TypePath) {
            // Inside an `impl`'s bound arguments, a path type other than a primitive may be
            // a struct with a lifetime left out.
            const OWNED: [&str; 18] = [
                "u8", "u16", "u32", "u64", "u128", "usize", "i8", "i16", "i32", "i64", "i128",
                "isize", "f32", "f64", "bool", "char", "str", "String",
            ];
            let owned = p.qself.is_none()
                && p.path
                    .get_ident()
                    .is_some_and(|i| OWNED.iter().any(|o| i == o));
            self.found |= self.in_impl && !owned;
            syn::visit_mut::visit_type_path_mut(self, p);
        }
    }
    let FnArg::Typed(t) = input else {
        return false;
    };
    let mut finder = Finder {
        in_impl: false,
        found: false,
    };
    // Visited on a copy: syn's `visit-mut` is the feature this crate already has.
    finder.visit_type_mut(&mut t.ty.clone());
    finder.found
}

/// The parameter's name when its pattern is a plain binding (`x`, `mut x`).
fn simple(pat: &Pat) -> Option<&syn::Ident> {
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
pub(super) fn unlinted(name: &syn::Ident) -> syn::Ident {
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
pub(super) fn at_return_type(ty: &syn::Type) -> Span {
    Span::call_site().located_at(syn::spanned::Spanned::span(ty))
}
