//! Hedged requests, on a budget: [`Config::hedge`](crate::Config::hedge) with
//! [`Breaker::call_hedged`](crate::Breaker::call_hedged), and the tower layer `HedgeLayer`
//! (feature `tower`). The rules, from the runtime:
#[doc(inline)]
pub use breaker_runtime::hedge::*;

#[cfg(feature = "tower")]
mod tower;
#[cfg(feature = "tower")]
pub use self::tower::{Hedge, HedgeFuture, HedgeLayer};
