//! The glue that `#[circuit_breaker]`'s expansion calls, re-exported as `breaker::__private`
//! (which holds only `pub use` lines, so the generated paths never name these rooms). Not part
//! of the API.
//!
//! | Room | Holds |
//! |------|-------|
//! | `lazy` | the function's breaker static ([`lazy::Lazy`]) and how its breaker is made |
//! | `settings` | the attribute's keys as data (`&[Set::threshold(3), …]`, a constant the compiler promotes) and the breaker made from them |
//! | `names` | default names (`{module}::{fn}`, `{module}::{Type}::{method}`) and their one `WARN` |
//! | `keyed` | `key = …`: the key probe (its levels found by method lookup through `Deref`), `breaker_of_key` (the lookup in a closure, so its temporaries end before the call) and the per-function map of keyed breakers |
//! | `run` | one call of the body through the breaker: `run`, `run_sync`, `call`, `call_sync`, and `run_keyed`, `call_keyed` whose future owns the key's breaker, each taking any judge (`is_failure`, `classify`, every error) as a value; `host` (the breaker's parts, found before the body is made); `Converted` (the call future's output without a fallback); `Fallible` |
//! | `classify` | `classify = path`: the probe that checks the classifier's type (a crafted error naming `fn(&Result<T, E>) -> breaker::Verdict`) |
//! | `fallback` | `fallback = path`: `recover` (its future the success or the fallback's), `fall_back` (an `async fn`'s future when its arguments are copies: the call's, then the fallback's), and the probe that checks the fallback's shape |
//! | `retried` | `retry = N`: the body made once per attempt (`run_retried`, `retried`, any judge) |
//! | `hedged` | `hedge = N`: the body made once per attempt, raced (`run_hedged`, `hedged`, any judge) |

pub(crate) mod classify;
pub(crate) mod fallback;
pub(crate) mod hedged;
pub(crate) mod keyed;
pub(crate) mod lazy;
pub(crate) mod names;
pub(crate) mod retried;
pub(crate) mod run;
pub(crate) mod settings;
