//! The attribute never panics, whatever it is given: random token soups and mutations of
//! valid argument lists go through the whole expansion in-process (proc-macro2 works
//! outside a compiler), on every kind of item. Each must end in tokens or an error.

use std::str::FromStr;

use proc_macro2::TokenStream;
use proptest::prelude::*;

/// Items the attribute may be put on, good and bad.
const ITEMS: &[&str] = &[
    "async fn get_tax(cart: &Cart) -> Result<Tax, TaxError> { api.post(cart).await }",
    "fn charge(card: Card, cents: u64) -> io::Result<Receipt> { gateway.charge(&card, cents) }",
    "async fn m(&self, x: u32) -> anyhow::Result<u32> { Ok(x) }",
    "async fn g<'a, T: Clone>(t: &'a T) -> Result<&'a T, E> where T: Send { Ok(t) }",
    "const fn c() -> Result<u8, E> { Ok(1) }",
    "fn no_return() {}",
    "fn pattern((a, b): (u8, u8)) -> Result<u8, E> { Ok(a + b) }",
    "fn boxed<'a>(&'a self, x: String) -> Pin<Box<dyn Future<Output = Result<u8, E>> + Send + 'a>> { Box::pin(async move { let x = x; Ok(1) }) }",
    "fn later(x: u8) -> impl Future<Output = Result<u8, E>> { async move { Ok(x) } }",
    "fn gated(#[cfg(a)] x: u8, #[cfg(b)] y: u8) -> Result<u8, E> { Ok(1) }",
    "struct NotAFunction;",
    "",
];

/// A valid argument list using every key, to be mutated.
const VALID: &str = r#"threshold = 5, failure_rate = 50, window = 20, min_calls = 10,
    slow_call = "2s", cool_off = "10s", max_cool_off = "1m", jitter = "250ms", probes = 3,
    success_threshold = 2, timeout = "600ms", max_concurrent = 10, is_failure = is_5xx,
    fallback = cached_tax, name = "shop::get_tax", on_state_change = record,
    crate = "::breaker", key = (self.host, port), max_keys = 100, idle = "5m",
    fleet = false"#;

/// Pieces of attribute arguments, right and wrong.
#[rustfmt::skip]
const PIECES: &[&str] = &[
    "threshold", "failure_rate", "window", "min_calls", "slow_call", "cool_off",
    "max_cool_off", "jitter", "probes", "success_threshold", "timeout", "max_concurrent",
    "is_failure", "fallback", "name", "on_state_change", "config", "crate", "cooldown",
    "key", "max_keys", "idle", "classify", "fleet", "false", "url.host_str()",
    "=", ",", ";", ":", "::", "0", "1", "100", "101", "4294967296", "99999999999999999999",
    "0.5", "1e3", "-1", "\"\"", "\"0s\"", "\"10s\"", "\"1m 30s\"", "\"abc\"", "\"584942417355y\"",
    "\"::breaker\"", "\"not a path\"", "|e| true", "|a, b, e| async move { Ok(1) }", "x::y::z",
    "Config::default().threshold(3)", "(", ")", "[", "]", "{", "}", "<", ">", "&", "'a", "true",
    "'c'", "b\"x\"", "#", "!", "?", "async", "move", "fn", "self", "Self::f", "_",
];

fn run(args: &str, item: &str) {
    let (Ok(args), Ok(item)) = (TokenStream::from_str(args), TokenStream::from_str(item)) else {
        return; // not even tokens: the compiler would not call us
    };
    let _ = crate::expand::expand(args.clone(), item.clone());
    let _ = crate::expand::circuit_breaker(args, item);
}

fn soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PIECES), 0..24).prop_map(|p| p.join(" "))
}

#[derive(Debug, Clone)]
enum Mutation {
    Delete(usize, usize),
    Insert(usize, &'static str),
    Duplicate(usize, usize),
}

fn mutated() -> impl Strategy<Value = String> {
    let m = prop_oneof![
        (any::<usize>(), 1usize..12).prop_map(|(at, n)| Mutation::Delete(at, n)),
        (any::<usize>(), prop::sample::select(PIECES)).prop_map(|(at, p)| Mutation::Insert(at, p)),
        (any::<usize>(), 1usize..40).prop_map(|(at, n)| Mutation::Duplicate(at, n)),
    ];
    prop::collection::vec(m, 1..6).prop_map(|ms| {
        let mut s: Vec<char> = VALID.chars().collect();
        for m in ms {
            let len = s.len().max(1);
            match m {
                Mutation::Delete(at, n) => {
                    let at = at % len;
                    let end = (at + n).min(s.len());
                    s.drain(at.min(s.len())..end);
                }
                Mutation::Insert(at, p) => {
                    let at = (at % len).min(s.len());
                    s.splice(at..at, format!(" {p} ").chars());
                }
                Mutation::Duplicate(at, n) => {
                    let at = (at % len).min(s.len());
                    let end = (at + n).min(s.len());
                    let copy: Vec<char> = s[at..end].to_vec();
                    s.splice(end..end, copy);
                }
            }
        }
        s.into_iter().collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn random_arguments_never_panic(args in soup(), item in prop::sample::select(ITEMS)) {
        run(&args, item);
    }

    #[test]
    fn mutated_arguments_never_panic(args in mutated(), item in prop::sample::select(ITEMS)) {
        run(&args, item);
    }
}

#[test]
fn the_valid_list_expands() {
    let args = TokenStream::from_str(VALID).unwrap();
    let item = TokenStream::from_str(ITEMS[0]).unwrap();
    assert!(crate::expand::expand(args, item).is_ok());
}
