//! The `Config` the breaker is built with: a constant (`Config::DEFAULT` and one `const`
//! builder call per key written, in the table's order), then the builders that take a
//! closure; or the user's `config` and the keys that combine with it.

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};
use syn::Ident;

use super::krate_at;
use crate::args::Args;

/// The builders that take a closure, and so are not `const fn`.
const TAKE_A_CLOSURE: [&str; 2] = ["on_state_change", "probe"];

/// `{ const __CONFIG: Config = Config::DEFAULT.key(value)…; __CONFIG.on_state_change(…) }`,
/// or the user's `config` plus the keys that combine with it. A constant is evaluated by
/// the compiler: the static's initialiser copies it, where a chain of builder calls was 70
/// to 100 lines of code per function in a debug build (each call moving the whole `Config`
/// in and out, with its unwinding path).
pub(super) fn config(args: &Args, krate: &TokenStream) -> TokenStream {
    if let Some(c) = &args.config {
        let (expr, k) = (&c.value, krate_at(args, c.span));
        let mut cfg = quote_spanned!(c.span=> #k::__private::config(#expr));
        cfg.extend(args.builder_calls(krate, |_| true));
        return cfg;
    }
    let constant = args.builder_calls(krate, |m| !TAKE_A_CLOSURE.contains(&m));
    let closures = args.builder_calls(krate, |m| TAKE_A_CLOSURE.contains(&m));
    if constant.is_empty() {
        return quote!(#krate::Config::DEFAULT #closures);
    }
    let name = Ident::new("__CONFIG", Span::mixed_site());
    quote! {{
        const #name: #krate::Config = #krate::Config::DEFAULT #constant;
        #name #closures
    }}
}
