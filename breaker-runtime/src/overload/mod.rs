//! Overload: shed early, recover gently (DESIGN.md, *Part three*). The algorithms alone,
//! engine-independent: each works on [`Nanos`](crate::clock::Nanos) handed in by the caller, so paused tokio time
//! and fake clocks drive them, and none takes a lock on a call's path.
//!
//! | module | what it holds |
//! | --- | --- |
//! | `throttle` | [`Throttle`]: Google SRE adaptive throttling over a sliding window of time buckets |
//! | `ramp` | [`Ramp`]: the recovery ramp after closing from half-open |
//! | `vegas` | Netflix concurrency-limits' Vegas and its sample window, sequential |
//! | `limit` | [`Limiter`]: the adaptive bulkhead running Vegas off the fast path |
//! | `random` | the per-thread generator every draw comes from |
//!
//! # Wiring (for the engine)
//!
//! A breaker holds an `Option` of each it is configured with (`None` costs nothing: the
//! engine tests the option and goes on):
//! - `Config::throttle(k)`, `max_throttle(p)`, `throttle_window(d)` →
//!   [`Throttle::new`]`(k, p, to_nanos(d))` (defaults [`DEFAULT_MAX_THROTTLE`],
//!   [`DEFAULT_WINDOW`]);
//! - `Config::ramp(d)` → [`Ramp::new`]`(to_nanos(d))`;
//! - `Config::adaptive_concurrency(max)` → [`Limiter::new`]`(max)`.
//!
//! At admission, in the closed state only, after the state check and before the bulkhead:
//! 1. ramp: `if ramp.active() && ramp.should_refuse(now, draw())` → `BreakerError::Throttled`
//!    (counts in `rejected` and `throttled`; *not* recorded in the throttle, so a ramp's
//!    refusals do not make the throttle refuse more on top of it);
//! 2. throttle: `let refuse = throttle.should_refuse(now, draw()); throttle.record_request(now);`
//!    then `if refuse` → `BreakerError::Throttled`. Keep `now` (the admission time) with the
//!    call for step 4;
//! 3. adaptive bulkhead: `limiter.try_acquire(now)` → `Ok(seat)` kept with the call, or
//!    `Err(limit)` → `BreakerError::Full { max_concurrent: limit }`.
//!
//! Under dry run, steps 1 and 2 only decide `shadow_rejected` (the call runs, its outcome
//! counts for nothing, so no `record_accept` for it); the request is still recorded.
//!
//! At the outcome:
//! 4. throttle: `Success` or `Neutral` → `throttle.record_accept(admitted_at)` (the time
//!    from step 2: no clock read at the outcome);
//! 5. bulkhead: `limiter.release(seat, now, sample)` with [`Sample::Answered`] for a
//!    success or a neutral answer, [`Sample::Dropped`] for a failure (an error, a timeout,
//!    a slow call, an `OpenFor`/overload answer: Vegas learns from answers, not errors),
//!    [`Sample::Ignored`] for a cancelled call.
//!
//! On transitions: closing from half-open (or the fleet's probe closing it) →
//! `ramp.start(now)`; opening, forcing, disabling or resetting → `ramp.stop()`.
//!
//! Snapshots: `throttle_rate = `[`combined_rate`]`(ramp.ramp_rate(now), throttle.rate(now))`
//! (0 without either), `concurrency_limit = Some(limiter.limit())`.
//!
//! Draws come from [`draw`] (a per-thread splitmix64, no shared write).

mod limit;
mod ramp;
pub(crate) mod random;
mod throttle;
mod vegas;

#[cfg(test)]
mod tests;

pub(crate) use self::{
    limit::{Limiter, Sample, Seat},
    ramp::Ramp,
    random::draw,
    throttle::{Throttle, DEFAULT_MAX_THROTTLE, DEFAULT_WINDOW},
};
#[cfg(test)]
pub(crate) use self::{throttle::refusal_probability, vegas::PROBE_LIMIT};

/// The percentage of calls refused now when a ramp refusing `ramp_rate` % is followed by a
/// throttle refusing `throttle_rate` % of what the ramp let through.
pub(crate) fn combined_rate(ramp_rate: f64, throttle_rate: f64) -> f64 {
    100.0 - (100.0 - ramp_rate) * (100.0 - throttle_rate) / 100.0
}
