//! Which [`Frame`] an `async fn`'s call is written in: the function's own future where it
//! can be, a block of its own where something must wait for the first poll, the `async fn`
//! kept where a `fn` cannot say the same.

use syn::{visit_mut::VisitMut, Expr, FnArg, ItemFn};

use super::{
    desugar::{all_copied, simple},
    Frame,
};
use crate::{args::Args, expand::binding::needs_the_function};

/// The frame of an `async fn`'s call.
pub(in crate::expand) fn frame(args: &Args, func: &ItemFn) -> Frame {
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
    // A fallback receives the arguments after the body borrowed them: a block owns them,
    // unless each is a copy (the body and the fallback take one each).
    if (args.fallback.is_some() && !all_copied(&func.sig))
        || args.per_attempt()
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
        Frame::Returned
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
