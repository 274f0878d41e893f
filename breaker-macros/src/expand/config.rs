//! The `Config` the breaker is built with: the keys written, as data (`&[Set::threshold(3),
//! …]`, in the table's order), then the builders that take a closure; or the user's `config`
//! and the keys that combine with it.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};

use super::krate_at;
use crate::args::Args;

/// The builders that take a closure, and so are not `const fn`.
const TAKE_A_CLOSURE: [&str; 2] = ["on_state_change", "probe"];

/// The breaker's configuration as the generated code gives it.
pub(super) enum Made {
    /// `&[Set::threshold(3), …]`: every key written is a constant (no `config`, no closure),
    /// given to `breaker_of` as data (see `breaker::__private::Set`).
    Keys(TokenStream),
    /// A `Config` expression: the user's `config` and the keys that combine with it, or the
    /// keys as data followed by the builders that take a closure.
    Expr(TokenStream),
}

impl Made {
    /// The configuration as a `Config` expression, whichever way it was made.
    pub(super) fn expr(&self, krate: &TokenStream) -> TokenStream {
        match self {
            Made::Keys(keys) => quote!(#krate::__private::config_of(#keys)),
            Made::Expr(expr) => expr.clone(),
        }
    }
}

/// The keys as data, `&[…]`, then the builders that take a closure; or the user's `config`
/// and the keys that combine with it. Data rather than a `const` built by the builders: a
/// literal the compiler promotes is cheap to compile, where evaluating a `Config` constant in
/// every function, keeping and moving it cost 1.3 M compiler instructions a function with
/// three keys (`breaker::__private::Set` has the figures). The runtime calls the same
/// builders, in the order written, once, when the breaker is made.
pub(super) fn config(args: &Args, krate: &TokenStream) -> Made {
    if let Some(c) = &args.config {
        let (expr, k) = (&c.value, krate_at(args, c.span));
        let mut cfg = quote_spanned!(c.span=> #k::__private::config(#expr));
        cfg.extend(args.builder_calls(krate, |_| true));
        return Made::Expr(cfg);
    }
    let keys = args.settings(krate, |m| !TAKE_A_CLOSURE.contains(&m));
    let keys = quote!(&[#keys]);
    let closures = args.builder_calls(krate, |m| TAKE_A_CLOSURE.contains(&m));
    if closures.is_empty() {
        Made::Keys(keys)
    } else {
        Made::Expr(quote!(#krate::__private::config_of(#keys) #closures))
    }
}
