//! Retries that know the breaker, and spend a budget: the attribute's `retry = N`,
//! [`Config::retry`](crate::Config::retry) with
//! [`Breaker::call_retried`](crate::Breaker::call_retried), the tower layer `RetryLayer`
//! (feature `tower`; `RetryLayer::grpc` for a tonic `Channel`, feature `grpc`), and the
//! reqwest middleware (feature `reqwest`:
//! `breaker::reqwest::CircuitBreakerMiddleware` retries when its `Config` has `retry`).
//! The [retries page of the guide](crate::guide::retries) tells the whole story.
//!
//! The rules:
//!
//! - each attempt is a call through the breaker, judged by it;
//! - a success or a neutral outcome is returned at once: retrying it would not change it;
//! - a refusal by the breaker (open, half-open full, throttled, bulkhead full) is returned at
//!   once, with its `retry_in`: it ends the retries;
//! - a failure (an error, a timeout, a classifier's `Failure`) is retried after
//!   [`delay`]`(backoff, n)`, or after the answer's own `Retry-After` or pushback (a
//!   classifier's [`Verdict::OpenFor`](crate::Verdict::OpenFor)) when that is longer;
//! - the attempts and waits of one retried call end within
//!   [`Config::retry_within`](crate::Config::retry_within) (default
//!   [`DEFAULT_RETRY_WITHIN`], 5 s): a wait that would end past it is not waited, and the
//!   last answer is returned at once;
//! - each retry is paid from the breaker's retry budget: `retry_budget` percent (default
//!   [`DEFAULT_BUDGET_PERCENT`]) of the first attempts of the last [`WINDOW`], plus
//!   [`FLOOR_PER_SECOND`] retries a second; with the budget spent, the last answer is
//!   returned at once. A retry counts (`Stats::retries`, the budget's withdrawal) only when
//!   its attempt runs.
//!
//! ```
//! use std::time::Duration;
//! use breaker::{Breaker, Config};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! let quotes = Breaker::new("docs::retry_mod", Config::default().retry(3).backoff(Duration::from_millis(50)));
//! let mut tries = 0;
//! let quote = quotes
//!     .call_retried(|| {
//!         tries += 1;
//!         let attempt = tries;
//!         async move { if attempt < 3 { Err("503") } else { Ok(42) } }
//!     })
//!     .await;
//! assert_eq!(quote.unwrap(), 42);
//! assert_eq!(quotes.stats().retries, 2);
//! # }
//! ```
#[doc(inline)]
pub use breaker_runtime::retry::*;

#[cfg(feature = "tower")]
mod tower;
#[cfg(feature = "tower")]
pub use self::tower::{clone_http_request, ByClone, CloneRequest, Retry, RetryFuture, RetryLayer};

#[cfg(feature = "grpc")]
pub(crate) mod grpc;
#[cfg(feature = "grpc")]
pub use self::grpc::{GrpcRetry, GrpcRetryLayer, GRPC_RETRY_BUFFER};
