//! Retries that know the breaker, and spend a budget: see the runtime's docs below, the
//! attribute's `retry = N`, and [`Config::retry`](crate::Config::retry).
#[doc(inline)]
pub use breaker_runtime::retry::*;
