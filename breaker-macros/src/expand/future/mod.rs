//! An annotated `async fn` becomes `fn … -> impl Future<Output = R>`, so that its future
//! keeps each argument once. An `async fn`'s future keeps an argument twice when a borrow or
//! a move takes it across an `.await` (the parameter, and the local rustc binds it to:
//! rust-lang/rust#62958), which the body's own future, borrowing or owning the arguments,
//! always does. A block the function returns keeps them once, as its captures.
//!
//! The `impl Future` captures every lifetime and type parameter in scope, as the `async fn`
//! did: this crate is edition 2024, whose rule the tokens it writes follow, whatever the
//! user's edition. Callers see the same signature; rustdoc shows `impl Future`.

mod desugar;
mod frame;

pub(super) use desugar::{at_return_type, desugar, unlinted};
pub(super) use frame::frame;

/// Where the call of an annotated function's body is written.
pub(super) enum Frame {
    /// A plain `fn`: the body is a closure.
    Sync,
    /// The body of an `async fn`, kept as written: another attribute below the breaker's
    /// (`#[tokio::test]`, a framework's) may need it to be one, an `impl Trait` parameter
    /// may elide a lifetime (which only an `async fn` may), and `#[tracing::instrument]`
    /// below names pattern parameters' bindings or has no place for inner attributes. Also `#[async_trait]`'s
    /// `Box::pin(async move { … })`, which owns the arguments already.
    AsyncFn,
    /// The `fn`'s whole body: the call's future is the function's, and the body's block
    /// owns the arguments (the prelude, see [`desugar`], makes it take every one with
    /// something to drop). The function is `#[inline]`: it only makes the future. Calling
    /// the function finds the breaker (the static's, made on the first call; or the key's,
    /// looked up) and nothing else: the call starts at the first poll. With a fallback when
    /// every argument is a copy (a shared reference, a number: `desugar::all_copied`): the
    /// body's block takes its copies, the fallback's closure its own, and the function's
    /// future is the runtime's `fall_back` around the call (no `async` block of its own).
    Returned,
    /// Inside the `fn`'s own `async move` block, which owns the arguments and runs all of it
    /// at the first poll: with a fallback (which receives the arguments after the body
    /// borrowed them) unless every argument is a copy,
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
