//! The attribute's arguments: `key = value` pairs parsed into [`Args`] (every value with its
//! span) through the one table of keys (`keys.rs`), each value by its kind (`values.rs`),
//! then checked across keys (`rules.rs`). Every misuse is a `syn::Error` on the offending
//! token that says what to write instead; code generation reads only the checked `Args`.

use std::time::Duration;

use proc_macro2::Span;
use syn::{
    ext::IdentExt,
    parse::{Parse, ParseStream},
    spanned::Spanned,
    Expr, ExprLit, Ident, Lit, Token,
};

use crate::{errors::Errors, suggest};

mod keys;
mod limits;
mod rules;
mod values;

use keys::TABLE;
pub(crate) use keys::{Args, KEYS};

/// One value with the key it was given for.
pub(crate) struct Arg<T> {
    pub(crate) key: Ident,
    pub(crate) value: T,
    /// The value's tokens, for errors and for spanning the generated code.
    pub(crate) span: Span,
}

/// `window = 20` or `window = "1m"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WindowArg {
    Calls(u32),
    Duration(Duration),
}

/// `hedge_delay = "p95"` or `hedge_delay = "20ms"`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum HedgeDelayArg {
    Percentile(f64),
    Fixed(Duration),
}

impl Args {
    /// `retry` or `hedge`: the body runs once per attempt, each with its own arguments.
    pub(crate) fn per_attempt(&self) -> bool {
        self.retry.is_some() || self.hedge.is_some()
    }
}

/// `key = value`, before the value is interpreted.
struct RawArg {
    key: Ident,
    value: Expr,
}

/// The comma-separated `key = value` list, with syntax errors only.
struct RawArgs(Vec<RawArg>);

impl Parse for RawArgs {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut args = Vec::new();
        while !input.is_empty() {
            let fork = input.fork();
            // `parse_any`: `crate` is a keyword but also one of our keys.
            let keyed = fork.call(Ident::parse_any).is_ok() && fork.peek(Token![=]);
            if keyed {
                let key = input.call(Ident::parse_any)?;
                input.parse::<Token![=]>()?;
                if input.is_empty() || input.peek(Token![,]) {
                    return Err(syn::Error::new(
                        key.span(),
                        format!("`{key}` needs a value after `=`: {}", example(&key)),
                    ));
                }
                let value: Expr = input.parse()?;
                args.push(RawArg { key, value });
            } else {
                return Err(positional(input));
            }
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        Ok(RawArgs(args))
    }
}

/// The error for anything that is not `key = value`, on its first token.
fn positional(input: ParseStream) -> syn::Error {
    // A bare key (`#[circuit_breaker(threshold)]`): say which value it needs.
    let fork = input.fork();
    if let Ok(key) = fork.call(Ident::parse_any)
        && (fork.is_empty() || fork.peek(Token![,]))
    {
        let known = KEYS.contains(&key.to_string().as_str());
        let msg = if known {
            format!("`{key}` needs a value: {}", example(&key))
        } else {
            format!(
                "expected `key = value`, found `{key}`; the keys are: {}",
                KEYS.join(", ")
            )
        };
        return syn::Error::new(key.span(), msg);
    }
    match input.parse::<Expr>() {
        Ok(value) => {
            let hint = positional_hint(&value);
            syn::Error::new(
                value.span(),
                format!("positional arguments are not supported: write `key = value`{hint}"),
            )
        }
        Err(e) => e,
    }
}

/// What a positional value was probably meant as, for the message.
fn positional_hint(value: &Expr) -> String {
    match value {
        Expr::Lit(ExprLit {
            lit: Lit::Int(i), ..
        }) => {
            format!(
                "; for the failure count write `threshold = {}`",
                i.base10_digits()
            )
        }
        Expr::Lit(ExprLit {
            lit: Lit::Str(s), ..
        }) => {
            format!(
                "; for the time the breaker stays open write `cool_off = {:?}`",
                s.value()
            )
        }
        Expr::Call(call) => match &*call.func {
            Expr::Path(p) => match p.path.get_ident() {
                Some(key) if KEYS.contains(&key.to_string().as_str()) => {
                    format!("; write `{key} = …` instead of `{key}(…)`")
                }
                _ => String::new(),
            },
            _ => String::new(),
        },
        _ => String::new(),
    }
}

/// What a correct use of `key` looks like, for messages.
pub(crate) fn example(key: &Ident) -> String {
    let key = key.to_string();
    let value = TABLE
        .iter()
        .find(|row| row.name == key)
        .map_or("…", |row| row.example);
    format!("write e.g. `{key} = {value}`")
}

/// Parses and checks the attribute's arguments. Every bad key or value is reported (each once,
/// on its token); the first syntax error stops parsing.
pub(crate) fn parse(tokens: proc_macro2::TokenStream) -> syn::Result<Args> {
    let RawArgs(raw) = syn::parse2(tokens)?;
    let mut args = Args::default();
    let mut errors = Errors::default();
    let mut seen: Vec<Ident> = Vec::new();
    for RawArg { key, value } in raw {
        let name = key.to_string();
        if seen.iter().any(|k| *k == name) {
            errors.push(syn::Error::new(
                key.span(),
                format!(
                    "duplicate key `{name}`: it is already set earlier in this attribute; keep one"
                ),
            ));
            continue;
        }
        seen.push(key.clone());
        match args.set(key.clone(), value) {
            Some(Ok(())) => {}
            Some(Err(e)) => errors.push(e),
            None => errors.push(unknown_key(&key)),
        }
    }
    rules::check_combinations(&args, &seen, &mut errors);
    errors.finish(args)
}

fn unknown_key(key: &Ident) -> syn::Error {
    let name = key.to_string();
    let msg = match suggest::closest(&name, KEYS) {
        Some(close) => format!("unknown key `{name}`; did you mean `{close}`?"),
        None => format!("unknown key `{name}`; the keys are: {}", KEYS.join(", ")),
    };
    syn::Error::new(key.span(), msg)
}
