//! The engine behind [`breaker`](https://docs.rs/breaker): a circuit breaker you can use on
//! its own, and that every `#[circuit_breaker]` function calls into.
//!
//! ```
//! use std::time::Duration;
//! use breaker::{Breaker, CallError, Config, State};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let tax = Breaker::new(
//!     "docs::tax",
//!     Config::default().threshold(5).cool_off(Duration::from_secs(10)).timeout(Duration::from_millis(600)),
//! );
//! let rate = tax.call(async { Ok::<f64, std::io::Error>(0.2) }).await;
//! assert_eq!(rate.unwrap(), 0.2);
//! assert_eq!(tax.state(), State::Closed);
//! # }
//! ```
//!
//! # Layout
//!
//! | module | what it holds |
//! | --- | --- |
//! | `state` | [`State`] and the packed state-and-generation word |
//! | `config` | [`Config`]: the builder, its validation (`policy`), the overload, retry and probe keys (`overload`, `retry`, `probe`), its `serde` form, [`ConfigError`] |
//! | `core` | admission, outcomes, transitions: the lock-free engine |
//! | `window` | the windows behind `failure_rate` (a ring of calls, or time buckets), each behind a small lock |
//! | `stats` | [`Stats`] and the striped counters behind them |
//! | `shared` | what every call shares: a breaker's parts (`Shared`), the blocking call's plumbing, how a finished call is judged and reported (`conclude`, `Shared::report`) |
//! | `breaker` | [`Breaker`]: creation and the call wrappers |
//! | `handle` | [`Handle`]: manual control, inspection, the fleet's hooks |
//! | `verdict` | [`Verdict`]: how a finished call is judged (`is_failure` or a classifier) |
//! | `judged` | a call judged by any `Judge`: the one async and one retried entry point the attribute's glue takes |
//! | `keyed` | [`KeyedBreaker`], [`BreakerKey`]: one breaker per key, in bounded memory |
//! | `future` | the future of an async call: admission on first poll, deadline, panics |
//! | `body` | the user's future as the call future's code sees it: polled and judged, its output carried or kept (a debug build's code then generic over no result type) |
//! | `erased` | a debug build's blocking call: the body run and judged behind `dyn`, the breaker's path compiled once |
//! | `probe` | recovery without traffic: the breaker's own probe, a task per opening |
//! | `live` | live configuration: what the call path reads of the configuration in force (`Live`), and what cannot change on a running breaker |
//! | `reconfigure` | `reconfigure`: changing a running breaker's configuration without losing state |
//! | `registry` | [`registry()`]: the live breakers, by name; `registry::index` the index under it (a slab of weak entries and slots by name, O(1) to list, unlist and find); `registry::departures` what a metrics publisher needs across a breaker's end (identities, the last counts of the breakers that went) |
//! | `snapshot` | [`Snapshot`] |
//! | `events` | [`Transition`], the `tracing` events, [`observe`] |
//! | `error` | [`BreakerError`], [`CallError`] |
//! | `retry` | [`retry`]: retries through the breaker, paid from a retry budget |
//! | `hedge` | [`hedge`]: hedged calls (`histogram` the lock-free latency window, `state` a breaker's hedging state and when a hedge may go, `run` the race of the attempts) |
//! | `overload` | the overload algorithms alone, engine-independent: adaptive throttling, the recovery ramp, the Vegas limit |
//! | `grpc` | feature `grpc`: a refusal as a `tonic::Status` (`UNAVAILABLE`, `DEADLINE_EXCEEDED`) |
//! | `name` | [`Name`]: a breaker's shared, freed-with-it name, and bounding a caller's key |
//! | `digest` | SHA-256: what names a key too long to show whole, and the dashboard script's CSP hash |
//! | `clock`, `sync` | time, atomics and the one lock helper behind small facades, for paused-time and loom tests |
//! | `tests` | test-only: the loom models, the reference model of the semantics, the overload and keyed models |
#![forbid(unsafe_code)]
// docs.rs builds every feature and marks each item with the feature it needs.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs)]
#![warn(missing_debug_implementations)]

mod body;
mod breaker;
mod clock;
mod config;
mod core;
mod digest;
mod erased;
mod error;
mod events;
mod future;
#[cfg(feature = "otel")]
mod gate;
#[cfg(feature = "grpc")]
mod grpc;
mod handle;
pub mod hedge;
mod hedging;
mod judged;
mod keyed;
mod live;
mod name;
mod outliers;
mod overload;
mod probe;
mod ready;
mod reconfigure;
mod registry;
pub mod retry;
mod shared;
mod snapshot;
mod state;
mod stats;
mod sync;
#[cfg(feature = "otel")]
mod traced;
mod verdict;
mod window;

pub use crate::{
    breaker::Breaker,
    config::{Config, ConfigError, ConfigValues, HedgeDelay, Outliers, Window},
    error::{BreakerError, CallError},
    events::{observe, Cause, Observer, Transition},
    future::CallFuture,
    handle::{Handle, WeakHandle},
    keyed::{BreakerKey, KeyedBreaker},
    name::Name,
    registry::{registry, Registry},
    snapshot::Snapshot,
    state::State,
    stats::Stats,
    verdict::{Classify, EveryError, Judge, Verdict},
};

#[cfg(feature = "serde")]
pub use crate::config::ConfigPatch;
#[doc(hidden)]
pub use crate::core::fleet::FleetLink;

/// Names the call futures' type parameters mention; not for use.
#[doc(hidden)]
pub mod __internals {
    pub use crate::digest::sha256;
    pub use crate::name::{bounded_key, LONGEST_KEY};
    pub use crate::registry::departures::{
        take as take_departures, watch as watch_departures, Departed,
    };
    /// Feature `otel`: the spans' target and each call's end for `breaker::otel`.
    #[cfg(feature = "otel")]
    pub use crate::traced::{time_calls, CallEnd, Ended, TARGET};
    pub use crate::{
        core::Engine,
        erased::{no_output, Judged, JudgedBody},
        future::{AsIs, Finish},
        keyed::KeyArg,
        ready::Changes,
        shared::{Host, Shared},
    };
}

#[cfg(test)]
mod tests;
