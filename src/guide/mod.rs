//! The guide: one page per subject, written from the user's side (what to write, what
//! happens, what to watch for). Every code block on these pages is compiled as a doctest,
//! and run where it needs no server.
//!
//! | page | what it covers |
//! | --- | --- |
//! | [`attribute`] | `#[circuit_breaker(...)]`: where it goes, every key, errors and fallbacks, what it expands to |
//! | [`judging`] | what counts as a failure: `is_failure`, `classify`, [`Verdict`](crate::Verdict), the HTTP preset, deadlines outside the breaker |
//! | [`http`] | HTTP clients: the tower layer and the reqwest middleware |
//! | [`grpc`] | tonic clients and the attribute on gRPC functions |
//! | [`retries`] | retries through the breaker, paid from a budget |
//! | [`hedging`] | hedged requests on a budget |
//! | [`keyed`] | one breaker per host, tenant or instance, in bounded memory |
//! | [`outliers`] | endpoints judged against their peers |
//! | [`fleets`] | breakers of many instances learning together through Redis |
//! | [`overload`] | adaptive throttling, the recovery ramp, adaptive concurrency, dry runs |
//! | [`observability`] | `tracing` events, hooks, the registry, metrics, serde, the live page |
//! | [`live_config`] | changing a running breaker's configuration; the breaker's own probe |
//! | [`testing`] | driving breakers through paused time in your tests |
//! | [`guarantees`] | what holds whatever happens, and which tests hold it |
//! | [`decisions`] | the choices the design left open, and why they went the way they did |
//!
//! Pages whose examples need a feature show them when the docs are built with that feature
//! (docs.rs builds every feature).

#[doc = include_str!("attribute.md")]
pub mod attribute {}

#[cfg_attr(feature = "http", doc = include_str!("judging.md"))]
#[cfg_attr(
    not(feature = "http"),
    doc = "Judging results: what counts as a failure (its examples need feature `http`; docs.rs shows them)."
)]
pub mod judging {}

#[cfg_attr(all(feature = "tower", feature = "reqwest"), doc = include_str!("http.md"))]
#[cfg_attr(
    not(all(feature = "tower", feature = "reqwest")),
    doc = "HTTP clients with tower and reqwest (needs features `tower` and `reqwest`; docs.rs shows this page)."
)]
pub mod http {}

#[cfg_attr(feature = "grpc", doc = include_str!("grpc.md"))]
#[cfg_attr(
    not(feature = "grpc"),
    doc = "gRPC clients with tonic (needs feature `grpc`; docs.rs shows this page)."
)]
pub mod grpc {}

#[cfg_attr(feature = "tower", doc = include_str!("retries.md"))]
#[cfg_attr(
    not(feature = "tower"),
    doc = "Retries through the breaker, paid from a budget (its examples need feature `tower`; docs.rs shows this page)."
)]
pub mod retries {}

#[doc = include_str!("hedging.md")]
pub mod hedging {}

#[doc = include_str!("keyed.md")]
pub mod keyed {}

#[doc = include_str!("outliers.md")]
pub mod outliers {}

#[cfg_attr(feature = "redis", doc = include_str!("fleets.md"))]
#[cfg_attr(
    not(feature = "redis"),
    doc = "Fleets of breakers on Redis (needs feature `redis`; docs.rs shows this page)."
)]
pub mod fleets {}

#[doc = include_str!("overload.md")]
pub mod overload {}

#[cfg_attr(all(feature = "metrics", feature = "dashboard"), doc = include_str!("observability.md"))]
#[cfg_attr(
    not(all(feature = "metrics", feature = "dashboard")),
    doc = "Observability: events, hooks, the registry, metrics, the live page (its examples need features `metrics` and `dashboard`; docs.rs shows this page)."
)]
pub mod observability {}

#[cfg_attr(feature = "serde", doc = include_str!("live_config.md"))]
#[cfg_attr(
    not(feature = "serde"),
    doc = "Live configuration and the breaker's own probe (its examples need feature `serde`; docs.rs shows this page)."
)]
pub mod live_config {}

#[doc = include_str!("testing.md")]
pub mod testing {}

#[doc = include_str!("guarantees.md")]
pub mod guarantees {}

#[doc = include_str!("decisions.md")]
pub mod decisions {}
