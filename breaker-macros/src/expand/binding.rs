//! The breaker of a call: the function's lazily created static `Breaker`, or with `key` the
//! breaker of this call's key from the function's static keyed map.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::{visit_mut::VisitMut, Ident, ItemFn};

use super::{
    config::{config, Made},
    krate_at, shadow,
};
use crate::args::Args;

/// What the static is made of: the facade, the breaker's name and policy, and where it lives.
struct Site<'a> {
    args: &'a Args,
    krate: &'a TokenStream,
    /// `module_path!()`.
    module: TokenStream,
    fn_name: String,
    /// The name as static text: `name = "…"`, or `{module}::{fn}` (the module alone in an
    /// `impl`, where the body completes it).
    name: TokenStream,
    /// Named by the user: breakers of one name are one breaker.
    shared: bool,
    /// A method with a `self` receiver and no `name`.
    in_impl: bool,
    config: Made,
    /// Items are not hygienic: the static's name only needs to be one no user writes, and
    /// its own block keeps it out of the body's scope (a binding may not shadow a static in
    /// scope).
    static_name: Ident,
}

/// The breaker of a call, as the entry points take it. Expressions, not bindings, which a
/// user's `const` could capture.
pub(super) struct Seat {
    /// The `&Breaker` of this call: the function's static breaker or, with `key`, the
    /// breaker of this call's key (a temporary).
    pub(super) borrowed: TokenStream,
    /// With `key`, an owned `Breaker` found by a lookup run in a closure
    /// (`__private::breaker_of_key`), for an `async fn`'s future to own: a temporary
    /// would live across the call's `.await` (with the probe and the key's borrow), in
    /// the function's future beside the call's. `None` without a key, and when the key
    /// expression awaits, has a `?` or returns (which a closure would make its own).
    pub(super) owned: Option<TokenStream>,
}

/// The breaker of this call: the function's static breaker or, with `key`, the breaker of
/// this call's key, taken from the function's static keyed map.
pub(super) fn breaker_ref(args: &Args, func: &ItemFn, krate: &TokenStream) -> Seat {
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
    let site = Site {
        args,
        krate,
        module,
        fn_name,
        name,
        shared,
        in_impl,
        config: config(args, krate),
        static_name: Ident::new("__BREAKER", Span::mixed_site()),
    };
    match &args.key {
        None => Seat {
            borrowed: one_breaker(&site),
            owned: None,
        },
        Some(key) => keyed_breaker(&site, &key.value, key.span),
    }
}

/// Whether `expr` must be evaluated in the function itself, not in a closure: an `.await`,
/// a `?` or a `return` (outside any `async` block or closure of its own) means the
/// function's, and a closure would make them its own.
pub(super) fn needs_the_function(expr: &syn::Expr) -> bool {
    struct Escapes(bool);
    impl VisitMut for Escapes {
        fn visit_expr_mut(&mut self, e: &mut syn::Expr) {
            match e {
                syn::Expr::Await(_) | syn::Expr::Try(_) | syn::Expr::Return(_) => self.0 = true,
                syn::Expr::Async(_) | syn::Expr::Closure(_) => {}
                _ => syn::visit_mut::visit_expr_mut(self, e),
            }
        }
    }
    let mut found = Escapes(false);
    found.visit_expr_mut(&mut expr.clone());
    found.0
}

/// The function that makes the static's breaker (or keyed map), on the first call: a `fn`
/// item, not a closure, whose coercion to the `fn` pointer the static holds would compile a
/// shim (`FnOnce::call_once`, ~30 lines of IR) for every annotated function. Its own block
/// keeps its name, like the static's, out of the body's scope.
fn init_fn() -> Ident {
    Ident::new("__breaker_init", Span::mixed_site())
}

/// The function's one breaker, in a `Lazy` static (an `InImpl` one in an `impl`), joined to
/// the fleet with `fleet = true`.
fn one_breaker(site: &Site) -> TokenStream {
    let Site {
        args,
        krate,
        module,
        fn_name,
        name,
        shared,
        in_impl,
        config,
        static_name,
    } = site;
    let init_fn = init_fn();
    let join = |init: TokenStream| match args.fleet.as_ref().filter(|f| f.value) {
        Some(f) => {
            let k = krate_at(args, f.span);
            quote_spanned!(f.span=> #k::__private::join_fleet(#init))
        }
        None => init,
    };
    if *in_impl {
        let given = Ident::new("__name", Span::mixed_site());
        let shadowed = shadow(&[&given]);
        let init = join(match config {
            Made::Keys(keys) => quote!(#krate::__private::named_breaker_of(#given, #keys)),
            Made::Expr(config) => quote!(#krate::__private::breaker(#given, false, #config)),
        });
        return quote! {{
            #shadowed
            fn #init_fn(#given: #krate::Name) -> #krate::Breaker {
                #init
            }
            static #static_name: #krate::__private::InImpl<#krate::Breaker> =
                #krate::__private::InImpl::new(#module, #fn_name, #init_fn);
            #static_name.of::<Self>()
        }};
    }
    // The name is a literal (or `concat!` of literals): static text, copied into a refusal
    // without a reference count. `&"…"` is a `&'static &'static str` (promoted), with no item
    // of its own: a `static __NAME` cost 0.14 M compiler instructions a function
    // (`scripts/compile_cost.sh --instructions`).
    let init = join(match config {
        Made::Keys(keys) => quote!(#krate::__private::breaker_of(&#name, #shared, #keys)),
        Made::Expr(config) => quote! {
            #krate::__private::breaker(#krate::Name::from_static(&#name), #shared, #config)
        },
    });
    quote! {{
        fn #init_fn() -> #krate::Breaker {
            #init
        }
        static #static_name: #krate::__private::Lazy<#krate::Breaker> =
            #krate::__private::Lazy::new(#init_fn);
        &#static_name
    }}
}

/// The breaker of this call's key. A static cannot name the key's type: `KeyedStatic` makes
/// the keyed map on the first call and finds it again with one type comparison. The key is
/// borrowed, never moved, and only for the lookup, so the body may then move what it was
/// computed from. With `fleet = true` every key's breaker joins the installed fleet as it is
/// made.
fn keyed_breaker(site: &Site, expr: &syn::Expr, span: Span) -> Seat {
    let Site {
        args,
        krate,
        fn_name,
        name,
        in_impl,
        config,
        static_name,
        ..
    } = site;
    let make = match args.fleet.as_ref().filter(|f| f.value) {
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
    let keyed_static = if *in_impl {
        quote!(#static_name.of::<Self>())
    } else {
        quote!(&#static_name)
    };
    let k = krate_at(args, span);
    // The lookup method is chosen by the key's type (see `__private::KeyProbe`).
    let lookup = quote_spanned! {span=>
        #k::__private::KeyProbe::new(&(#expr)).__breaker_lookup(#keyed_static)
    };
    let init_fn = init_fn();
    let config = config.expr(krate);
    let found = quote! {{
        fn #init_fn() -> (&'static str, #krate::Config) {
            (#name, #config)
        }
        static #static_name: #krate::__private::KeyedStatic = #make(#init_fn)#naming;
        #lookup
    }};
    Seat {
        borrowed: quote!(&#found),
        owned: (!needs_the_function(expr))
            .then(|| quote!(#krate::__private::breaker_of_key(|| #found))),
    }
}
