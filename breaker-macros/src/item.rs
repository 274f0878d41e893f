//! The annotated item: parsed as a function, its shape (`async fn`, plain `fn`, or an
//! `#[async_trait]` boxed future), and the checks that depend on the function as well as on
//! the arguments.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::{
    parse::{ParseStream, Parser},
    spanned::Spanned,
    Attribute, Block, Expr, FnArg, Ident, ItemFn, Pat, ReturnType, Signature, Stmt, Type,
    Visibility,
};

use crate::{args::Args, errors::Errors};

/// The annotated item as a function, or an error naming what it is instead. The body is kept
/// as its tokens (see [`unparsed_fn`]), but under `#[async_trait]`'s boxed future, whose
/// `async move` block the attribute opens.
pub(crate) fn parse_fn(item: TokenStream) -> syn::Result<ItemFn> {
    let fn_error = match unparsed_fn.parse2(item.clone()) {
        Ok(mut f) => {
            let boxed = matches!(&f.sig.output, ReturnType::Type(_, ty) if boxed_future_output(ty).is_some());
            if boxed {
                parse_body(&mut f.block)?;
            }
            return Ok(f);
        }
        Err(e) => e,
    };
    if let Ok(decl) = syn::parse2::<syn::TraitItemFn>(item.clone()) {
        return Err(syn::Error::new(
            decl.sig.fn_token.span,
            "`#[circuit_breaker]` needs a function body to wrap: put it on the method in the \
             `impl` block, not on the trait's declaration",
        ));
    }
    let Ok(other) = syn::parse2::<syn::Item>(item) else {
        return Err(fn_error);
    };
    let (span, what) = match &other {
        syn::Item::Struct(s) => (s.struct_token.span, "a struct"),
        syn::Item::Enum(e) => (e.enum_token.span, "an enum"),
        syn::Item::Union(u) => (u.union_token.span, "a union"),
        syn::Item::Const(c) => (c.const_token.span, "a constant"),
        syn::Item::Static(s) => (s.static_token.span, "a static"),
        syn::Item::Impl(i) => (i.impl_token.span, "an `impl` block (put it on each method)"),
        syn::Item::Trait(t) => (t.trait_token.span, "a trait"),
        syn::Item::Mod(m) => (m.mod_token.span, "a module"),
        syn::Item::Type(t) => (t.type_token.span, "a type alias"),
        syn::Item::Use(u) => (u.use_token.span, "a `use` declaration"),
        syn::Item::ForeignMod(f) => (f.abi.extern_token.span, "an `extern` block"),
        other => (other.span(), "this item"),
    };
    Err(syn::Error::new(
        span,
        format!(
            "`#[circuit_breaker]` goes on a function (`async fn` or `fn` returning a `Result`), \
             not on {what}"
        ),
    ))
}

/// How the function produces its `Result`.
pub(crate) enum Shape {
    /// `async fn`.
    Async,
    /// A plain `fn`.
    Sync,
    /// `fn … -> Pin<Box<dyn Future<Output = R> + …>> { Box::pin(async move { … }) }`: an
    /// `async fn` of an `impl` that `#[async_trait]` (which expands first) rewrote. The inner
    /// `async move` block is wrapped, as `tracing::instrument` does; `R` is kept.
    Boxed(Box<Type>),
}

/// A function whose body is one verbatim statement, after its inner attributes (which
/// `ItemFn` keeps with the outer ones and prints back inside the block): the attribute wraps
/// the body and never reads it, and parsing it into `syn`'s tree to print it back was most of
/// the attribute's own time in a debug build, growing with the body. A syntax error in the
/// body is then rustc's to report, with its own parser's message.
fn unparsed_fn(input: ParseStream) -> syn::Result<ItemFn> {
    let mut attrs = input.call(Attribute::parse_outer)?;
    let vis: Visibility = input.parse()?;
    let sig: Signature = input.parse()?;
    let content;
    let brace_token = syn::braced!(content in input);
    attrs.extend(content.call(Attribute::parse_inner)?);
    let stmts: TokenStream = content.parse()?;
    Ok(ItemFn {
        attrs,
        vis,
        sig,
        block: Box::new(Block {
            brace_token,
            stmts: verbatim(stmts),
        }),
    })
}

/// Tokens as a block's statements, printed as they are.
pub(crate) fn verbatim(tokens: TokenStream) -> Vec<Stmt> {
    vec![Stmt::Expr(Expr::Verbatim(tokens), None)]
}

/// Parses a body [`unparsed_fn`] kept as tokens into statements, for the rewrites that read
/// it (`#[async_trait]`'s and `#[tracing::instrument]`'s blocks).
pub(crate) fn parse_body(block: &mut Block) -> syn::Result<()> {
    if let [Stmt::Expr(Expr::Verbatim(tokens), None)] = block.stmts.as_slice() {
        block.stmts = Block::parse_within.parse2(tokens.clone())?;
    }
    Ok(())
}

/// The function's shape, or an error saying what to write when it returns a future the
/// attribute cannot wrap.
pub(crate) fn shape(func: &ItemFn) -> syn::Result<Shape> {
    let sig = &func.sig;
    if sig.asyncness.is_some() {
        return Ok(Shape::Async);
    }
    let ReturnType::Type(_, ty) = &sig.output else {
        return Ok(Shape::Sync);
    };
    let write_async = |output: &Type| {
        format!(
            "write `async fn {}(…) -> {}`",
            sig.ident,
            shown(output.to_token_stream())
        )
    };
    if let Type::ImplTrait(it) = ungroup(ty)
        && let Some(output) = future_output(&it.bounds)
    {
        return Err(syn::Error::new_spanned(
            ty,
            format!(
                "`#[circuit_breaker]` wraps an `async fn`, not a function returning `impl \
                     Future`: {} (in a trait impl, an `async fn` fulfils a trait's `fn … -> \
                     impl Future<Output = …> + Send`)",
                write_async(output)
            ),
        ));
    }
    if let Some(output) = boxed_future_output(ty) {
        if boxed_async_block(&func.block).is_some() {
            return Ok(Shape::Boxed(Box::new(output.clone())));
        }
        return Err(syn::Error::new_spanned(
            ty,
            format!(
                "`#[circuit_breaker]` wraps an `async fn`, and cannot see into this boxed \
                 future: {} (with `#[async_trait]` on the impl, keep the method an `async fn`: \
                 that is supported)",
                write_async(output)
            ),
        ));
    }
    Ok(Shape::Sync)
}

/// `Group` and parentheses around a type, as `macro_rules!` and users may leave them.
pub(crate) fn ungroup(ty: &Type) -> &Type {
    match ty {
        Type::Group(g) => ungroup(&g.elem),
        Type::Paren(p) => ungroup(&p.elem),
        other => other,
    }
}

/// `R` of a bound list holding `Future<Output = R>`.
fn future_output(
    bounds: &syn::punctuated::Punctuated<syn::TypeParamBound, syn::Token![+]>,
) -> Option<&Type> {
    bounds.iter().find_map(|b| {
        let syn::TypeParamBound::Trait(t) = b else {
            return None;
        };
        let last = t.path.segments.last()?;
        let syn::PathArguments::AngleBracketed(a) = &last.arguments else {
            return None;
        };
        if last.ident != "Future" {
            return None;
        }
        a.args.iter().find_map(|arg| match arg {
            syn::GenericArgument::AssocType(at) if at.ident == "Output" => Some(&at.ty),
            _ => None,
        })
    })
}

/// The single type argument of `ty` when its last path segment is `name` (`Pin<X>`, `Box<X>`).
fn only_arg<'t>(ty: &'t Type, name: &str) -> Option<&'t Type> {
    let Type::Path(p) = ungroup(ty) else {
        return None;
    };
    let last = p.path.segments.last()?;
    let syn::PathArguments::AngleBracketed(a) = &last.arguments else {
        return None;
    };
    match (last.ident == name, a.args.first(), a.args.len()) {
        (true, Some(syn::GenericArgument::Type(t)), 1) => Some(t),
        _ => None,
    }
}

/// `R` of `Pin<Box<dyn Future<Output = R> + …>>`.
fn boxed_future_output(ty: &Type) -> Option<&Type> {
    let boxed = only_arg(ty, "Pin")?;
    match ungroup(only_arg(boxed, "Box")?) {
        Type::TraitObject(obj) => future_output(&obj.bounds),
        _ => None,
    }
}

/// The `async move { … }` of a body that is exactly `Box::pin(async move { … })`.
pub(crate) fn boxed_async_block(block: &syn::Block) -> Option<&syn::ExprAsync> {
    let [syn::Stmt::Expr(Expr::Call(call), None)] = block.stmts.as_slice() else {
        return None;
    };
    let Expr::Path(f) = &*call.func else {
        return None;
    };
    let names: Vec<String> = f
        .path
        .segments
        .iter()
        .map(|s| s.ident.to_string())
        .collect();
    if !names.ends_with(&["Box".to_owned(), "pin".to_owned()]) || call.args.len() != 1 {
        return None;
    }
    match &call.args[0] {
        Expr::Async(a) if a.capture.is_some() => Some(a),
        _ => None,
    }
}

/// [`boxed_async_block`], to rewrite.
pub(crate) fn boxed_async_block_mut(block: &mut syn::Block) -> Option<&mut syn::ExprAsync> {
    boxed_async_block(block)?;
    match block.stmts.first_mut() {
        Some(syn::Stmt::Expr(Expr::Call(call), None)) => match call.args.first_mut() {
            Some(Expr::Async(a)) => Some(a),
            _ => None,
        },
        _ => None,
    }
}

/// Tokens as a user would write them, for messages.
pub(crate) fn shown(tokens: TokenStream) -> String {
    let mut s = tokens.to_string();
    for (from, to) in [
        (" :: ", "::"),
        (":: ", "::"),
        (" < ", "<"),
        ("< ", "<"),
        (" <", "<"),
        (" >", ">"),
        (" ,", ","),
        ("& ", "&"),
    ] {
        s = s.replace(from, to);
    }
    s
}

/// The first identifier among `tokens` (macro arguments included) that `bad` picks.
fn find_ident(tokens: TokenStream, bad: &dyn Fn(&Ident) -> bool) -> Option<Ident> {
    tokens.into_iter().find_map(|t| match t {
        proc_macro2::TokenTree::Ident(i) if bad(&i) => Some(i),
        proc_macro2::TokenTree::Group(g) => find_ident(g.stream(), bad),
        _ => None,
    })
}

/// `config` and `on_state_change` run in the static's initialiser, an item of its own: it
/// cannot name `Self`, `self` or the function's generic parameters, and rustc's E0401 about
/// "generic parameters from outer item" would point at a static the user never wrote.
fn check_static_exprs(args: &Args, func: &ItemFn, errors: &mut Errors) {
    let generics: Vec<String> = func
        .sig
        .generics
        .params
        .iter()
        .filter_map(|p| match p {
            syn::GenericParam::Type(t) => Some(t.ident.to_string()),
            syn::GenericParam::Const(c) => Some(c.ident.to_string()),
            syn::GenericParam::Lifetime(_) => None,
        })
        .collect();
    for arg in [&args.config, &args.on_state_change, &args.probe]
        .into_iter()
        .flatten()
    {
        let key = &arg.key;
        let bad = |i: &Ident| i == "Self" || i == "self" || generics.iter().any(|g| i == g);
        let Some(found) = find_ident(arg.value.to_token_stream(), &bad) else {
            continue;
        };
        let msg = if found == "Self" {
            format!(
                "`{key}` is evaluated once, in the breaker's static, which cannot name `Self`: \
                 write the type's name instead (e.g. `MyType::…`)"
            )
        } else if found == "self" {
            format!(
                "`{key}` is evaluated once, on the first call, in the breaker's static, so it \
                 cannot use `self` or the function's arguments: build it from constants, the \
                 environment or a global"
            )
        } else {
            format!(
                "`{key}` is evaluated once, in the breaker's static, which every instantiation \
                 of this generic function shares, so it cannot use the generic parameter \
                 `{found}`: use a concrete type"
            )
        };
        errors.push(syn::Error::new(found.span(), msg));
    }
}

/// What depends on the function as well as on the arguments.
pub(crate) fn check_fn(args: &Args, func: &ItemFn, shape: &Shape, errors: &mut Errors) {
    check_static_exprs(args, func, errors);
    let sig = &func.sig;
    if let Some(c) = &sig.constness {
        errors.push(syn::Error::new(
            c.span,
            "`#[circuit_breaker]` cannot wrap a `const fn`: a breaker keeps state at run time; \
             remove `const`",
        ));
    }
    if let ReturnType::Default = sig.output {
        errors.push(syn::Error::new(
            sig.ident.span(),
            format!(
                "`{}` must return a `Result<T, E>` for `#[circuit_breaker]` to count its \
                 failures: add a return type such as `-> Result<(), MyError>`",
                sig.ident
            ),
        ));
    }
    if let Some(v) = &sig.variadic {
        errors.push(syn::Error::new(
            v.span(),
            "`#[circuit_breaker]` cannot wrap a variadic function",
        ));
    }
    check_async_keys(args, shape, errors);
    check_retry(args, sig, shape, errors);
    check_hedge(args, sig, shape, errors);
    check_fallback_params(args, sig, shape, errors);
}

/// `probe` and `timeout` need an `async fn`.
fn check_async_keys(args: &Args, shape: &Shape, errors: &mut Errors) {
    if let Shape::Sync = shape {
        if let Some(p) = &args.probe {
            errors.push(syn::Error::new(
                p.key.span(),
                "`probe` needs an `async fn`: the breaker's own probe runs as a tokio task, \
                 and a plain fn may be called where no tokio runtime runs; make the function \
                 `async`, or remove `probe` (the next call after the cool-off probes)",
            ));
        }
        if let Some(t) = &args.timeout {
            errors.push(syn::Error::new(
                t.key.span(),
                "`timeout` needs an `async fn`: a blocking call cannot be cut short; make the \
                 function `async`, or remove `timeout` (`slow_call` counts slow blocking calls \
                 as failures)",
            ));
        }
    }
}

/// With a `fallback`, the parameters are passed on to it: they must be plain names (and, with
/// `#[async_trait]`, `self` must be borrowed).
fn check_fallback_params(args: &Args, sig: &syn::Signature, shape: &Shape, errors: &mut Errors) {
    if let (Some(fallback), Shape::Boxed(_)) = (&args.fallback, shape)
        && let Some(r) = sig.receiver().filter(|r| r.reference.is_none())
    {
        errors.push(syn::Error::new(
            r.self_token.span,
            format!(
                "with `#[async_trait]` and a `fallback`, take `&self` or `&mut self`: \
                     async-trait moves `self` into the body, so `{}` could not receive it",
                shown(fallback.value.to_token_stream())
            ),
        ));
    }
    if args.fallback.is_some() {
        for input in &sig.inputs {
            let FnArg::Typed(arg) = input else { continue };
            let plain =
                matches!(&*arg.pat, Pat::Ident(p) if p.by_ref.is_none() && p.subpat.is_none());
            // `#[async_trait]` renames a pattern parameter `__argN` and destructures it in
            // the body, moving it there.
            let plain = plain
                && !(matches!(shape, Shape::Boxed(_))
                    && matches!(&*arg.pat, Pat::Ident(p) if p.ident.to_string().starts_with("__arg")));
            if !plain {
                errors.push(syn::Error::new(
                    arg.pat.span(),
                    "with a `fallback`, parameters must be plain names, because the fallback \
                     receives them: bind this one to a name (e.g. `point: Point`) and \
                     destructure it in the body",
                ));
            }
        }
    }
}

/// `retry`: the body runs once per attempt, with waits between them.
fn check_retry(args: &Args, sig: &syn::Signature, shape: &Shape, errors: &mut Errors) {
    let Some(retry) = &args.retry else { return };
    match shape {
        Shape::Sync => errors.push(syn::Error::new(
            retry.key.span(),
            "`retry` needs an `async fn`: it waits between attempts on the async runtime's \
             timer, which a blocking call would hold up; make the function `async`, or remove \
             `retry`",
        )),
        Shape::Async | Shape::Boxed(_) => {}
    }
    if let Some(r) = sig.receiver() {
        let shared = r.reference.is_some() && r.mutability.is_none() && r.colon_token.is_none();
        if !shared {
            errors.push(syn::Error::new(
                r.self_token.span,
                "with `retry`, the body runs once per attempt, so it can only borrow `self`: \
                 take `&self` (with `&mut self` or `self` by value, a retry would need what the \
                 attempt before consumed)",
            ));
        }
    }
}

/// `hedge`: the body runs once per attempt, several at once, on the async runtime's timer.
fn check_hedge(args: &Args, sig: &syn::Signature, shape: &Shape, errors: &mut Errors) {
    let Some(hedge) = &args.hedge else { return };
    if let Shape::Sync = shape {
        errors.push(syn::Error::new(
            hedge.key.span(),
            "`hedge` needs an `async fn`: it races attempts on the async runtime, and a \
             blocking call cannot be raced; make the function `async`, or remove `hedge`",
        ));
    }
    if let Some(r) = sig.receiver() {
        let shared = r.reference.is_some() && r.mutability.is_none() && r.colon_token.is_none();
        if !shared {
            errors.push(syn::Error::new(
                r.self_token.span,
                "with `hedge`, the body runs once per attempt, several at once, so it can only \
                 borrow `self`: take `&self` (two attempts cannot both hold `&mut self`, nor \
                 both own `self`)",
            ));
        }
    }
}
