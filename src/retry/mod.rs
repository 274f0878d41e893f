//! Retries that know the breaker, and spend a budget: the attribute's `retry = N`,
//! [`Config::retry`](crate::Config::retry) with
//! [`Breaker::call_retried`](crate::Breaker::call_retried), the tower layer `RetryLayer`
//! (feature `tower`; `RetryLayer::grpc` for a tonic `Channel`, feature `grpc`), and the
//! reqwest middleware (feature `reqwest`:
//! `breaker::reqwest::CircuitBreakerMiddleware` retries when its `Config` has `retry`). The
//! rules, from the runtime:
#[doc(inline)]
pub use breaker_runtime::retry::*;

#[cfg(feature = "tower")]
mod tower;
#[cfg(feature = "tower")]
pub use self::tower::{clone_http_request, ByClone, CloneRequest, Retry, RetryFuture, RetryLayer};

#[cfg(feature = "grpc")]
mod grpc;
#[cfg(feature = "grpc")]
pub use self::grpc::{GrpcRetry, GrpcRetryLayer, GRPC_RETRY_BUFFER};
