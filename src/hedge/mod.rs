//! Hedged requests, on a budget: [`Config::hedge`](crate::Config::hedge) with
//! [`Breaker::call_hedged`](crate::Breaker::call_hedged), and the tower layer `HedgeLayer`
//! (feature `tower`; `HedgeLayer::grpc` for a tonic `Channel`, feature `grpc`), and the
//! reqwest middleware (feature `reqwest`: it hedges idempotent requests when its `Config` has
//! `hedge`). The rules, from the runtime:
#[doc(inline)]
pub use breaker_runtime::hedge::*;

#[cfg(feature = "tower")]
mod tower;
#[cfg(feature = "tower")]
pub use self::tower::{Hedge, HedgeFuture, HedgeLayer};

#[cfg(feature = "grpc")]
mod grpc;
#[cfg(feature = "grpc")]
pub use self::grpc::{GrpcHedge, GrpcHedgeLayer};
