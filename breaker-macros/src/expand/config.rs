//! The `Config` the breaker is built with: `Config::default()` (or the user's `config`) and
//! one builder call per key written, in the table's order.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};

use super::krate_at;
use crate::args::Args;

/// `Config::default().key(value)…`, or the user's `config` plus the keys that combine with it.
pub(super) fn config(args: &Args, krate: &TokenStream) -> TokenStream {
    let mut cfg = match &args.config {
        Some(c) => {
            let (expr, k) = (&c.value, krate_at(args, c.span));
            quote_spanned!(c.span=> #k::__private::config(#expr))
        }
        // By its trait's path: the crate may be `#![no_implicit_prelude]`.
        None => quote!(<#krate::Config as #krate::__private::Default>::default()),
    };
    cfg.extend(args.builder_calls(krate));
    cfg
}
