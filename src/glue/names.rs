//! The default names of annotated functions: `{module}::{fn}`, and `{module}::{Type}::{method}`
//! for a method with a `self` receiver; and the one `WARN` when two functions still end up
//! with one default name.
//!
//! The attribute sees the method, not its `impl`, so it cannot spell the type. The method's
//! body can name `Self`, though, and the breaker is made from the body: the body passes
//! [`type_name::<Self>`](std::any::type_name) to the static once, on the first call, and the
//! name keeps its last path segment without generics (`Users` for `app::Users`,
//! `Repo` for `app::Repo<u8>`). `type_name`'s exact text is not promised across compiler
//! versions, but a type's own name has always been its last segment; at worst a future
//! compiler changes a default name, never which breaker a call goes through. No `const` or
//! `concat!` can name `Self`, and a trait implemented per type would need the user to write
//! it, so this is the one way that needs nothing from the user.

use std::{
    collections::HashMap,
    sync::{Mutex, OnceLock},
};

use breaker_runtime::{Breaker, Name};

/// The static breaker of a method with a `self` receiver: made on the first call, named
/// after the `Self` that call gives ([`of`](Self::of)).
pub struct InImpl<T> {
    cell: OnceLock<T>,
    module: &'static str,
    method: &'static str,
    init: fn(Name) -> T,
}

impl<T> InImpl<T> {
    /// The static of `method` in `module`; `init` makes it from its default name.
    pub const fn new(module: &'static str, method: &'static str, init: fn(Name) -> T) -> Self {
        InImpl {
            cell: OnceLock::new(),
            module,
            method,
            init,
        }
    }

    /// The value, made on the first call with the name `{module}::{S}::{method}`. Like
    /// [`Lazy`](super::lazy::Lazy), a panicking `init` leaves it empty (no poisoning).
    #[inline]
    pub fn of<S: ?Sized>(&self) -> &T {
        self.cell.get_or_init(|| {
            (self.init)(Name::from(method_name(
                self.module,
                std::any::type_name::<S>(),
                self.method,
            )))
        })
    }
}

/// `{module}::{Type}::{method}`, `Type` being the last path segment of `self_type` without
/// its generics.
pub(crate) fn method_name(module: &str, self_type: &str, method: &str) -> String {
    format!("{module}::{}::{method}", type_segment(self_type))
}

/// The last path segment of a type's name, without generics: `Users` for `app::Users`,
/// `Repo` for `app::Repo<alloc::string::String>`, `Conn` for `&app::Conn` or `dyn app::Conn`.
fn type_segment(type_name: &str) -> &str {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let path = type_name.split('<').next().unwrap_or(type_name);
    let path = path.split(" + ").next().unwrap_or(path);
    let last = path.rsplit("::").next().unwrap_or(path);
    let word = last
        .rsplit(|c: char| !is_ident(c))
        .find(|w| !w.is_empty())
        .unwrap_or("");
    if word.is_empty() {
        type_name
    } else {
        word
    }
}

/// The default names made so far, each with whether it was already warned about.
fn made() -> &'static Mutex<HashMap<String, bool>> {
    static MADE: OnceLock<Mutex<HashMap<String, bool>>> = OnceLock::new();
    MADE.get_or_init(Mutex::default)
}

/// Records that a function's breaker (or keyed map) was made under its default `name`. The
/// static of each function is made once, so a name made twice is two functions sharing it:
/// the first time, one `WARN` naming it. Called after the breaker was made, so a panicking
/// `config` retried on the next call is not counted twice.
pub(crate) fn note_default_name(name: &str) {
    let mut made = crate::sync::lock(made());
    match made.get_mut(name) {
        None => {
            made.insert(name.to_owned(), false);
        }
        Some(true) => {}
        Some(warned) => {
            *warned = true;
            tracing::warn!(
                target: "breaker",
                name,
                "two functions have the default breaker name `{name}`, so two breakers share \
                 it and `registry().get`, the metrics and the dashboard cannot tell them \
                 apart: give one of them a `name = \"…\"` in its `#[circuit_breaker]`"
            );
        }
    }
}

/// An unkeyed breaker under a default name, noted.
pub(crate) fn default_breaker(name: Name, config: breaker_runtime::Config) -> Breaker {
    let breaker = Breaker::new_named(name.clone(), config);
    note_default_name(&name);
    breaker
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_type_is_named_by_its_last_segment_without_generics() {
        for (full, segment) in [
            ("app::Users", "Users"),
            ("Users", "Users"),
            ("app::db::Repo<alloc::string::String>", "Repo"),
            ("app::Pair<app::A, app::B<u8>>", "Pair"),
            ("&app::Conn", "Conn"),
            ("&mut app::Conn", "Conn"),
            ("dyn app::Source + core::marker::Send", "Source"),
            ("[u8]", "u8"),
            ("u32", "u32"),
        ] {
            assert_eq!(type_segment(full), segment, "{full}");
        }
        assert_eq!(
            method_name("app::svc", "app::svc::Users", "fetch"),
            "app::svc::Users::fetch"
        );
    }
}
