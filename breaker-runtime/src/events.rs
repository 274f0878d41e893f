//! Transitions and how they are announced: one `tracing` event each (target `breaker`;
//! opening at WARN, the rest at INFO), then the `on_state_change` hook.

use std::fmt;

use crate::State;

/// What made a transition happen: the figures an operator wants in the log line.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Cause {
    /// `failures` consecutive failures reached the threshold.
    ConsecutiveFailures {
        /// The streak that tripped the breaker.
        failures: u32,
    },
    /// The window's failed share reached the configured rate.
    FailureRate {
        /// Percent failed in the window.
        rate: f64,
        /// Calls in the window.
        calls: u64,
    },
    /// The cool-off ended; the breaker admits probes.
    CoolOffElapsed,
    /// A probe failed; the breaker reopens.
    ProbeFailed,
    /// `successes` consecutive probes succeeded; the breaker closes.
    ProbesSucceeded {
        /// Consecutive successful probes.
        successes: u32,
    },
    /// `force_open`, `disable` or `reset` on a handle.
    Manual,
    /// A transition caused by the fleet (`breaker::fleet`).
    Fleet,
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::ConsecutiveFailures { failures: 1 } => f.write_str("1 failure"),
            Cause::ConsecutiveFailures { failures } => {
                write!(f, "{failures} consecutive failures")
            }
            Cause::FailureRate { rate, calls } => {
                write!(f, "{rate:.1}% of the last {calls} calls failed")
            }
            Cause::CoolOffElapsed => f.write_str("cool-off elapsed"),
            Cause::ProbeFailed => f.write_str("a probe failed"),
            Cause::ProbesSucceeded { successes: 1 } => f.write_str("the probe succeeded"),
            Cause::ProbesSucceeded { successes } => {
                write!(f, "{successes} consecutive probes succeeded")
            }
            Cause::Manual => f.write_str("manual control"),
            Cause::Fleet => f.write_str("the fleet"),
        }
    }
}

/// One change of state, as `on_state_change` receives it.
///
/// ```
/// use breaker_runtime::{Breaker, Config, State};
/// use std::sync::{Arc, Mutex};
///
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = seen.clone();
/// let b = Breaker::new(
///     "docs::transition",
///     Config::default().on_state_change(move |t| log.lock().unwrap().push((t.from, t.to))),
/// );
/// b.handle().force_open();
/// assert_eq!(*seen.lock().unwrap(), [(State::Closed, State::ForcedOpen)]);
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Transition {
    /// The breaker's name.
    pub name: &'static str,
    /// The state left.
    pub from: State,
    /// The state entered.
    pub to: State,
    /// The generation the transition started.
    pub generation: u64,
    /// What caused it.
    pub cause: Cause,
    /// How long the breaker stays open, when it opened.
    pub cool_off: Option<std::time::Duration>,
}

/// Emits the one `tracing` event of a transition.
pub(crate) fn log(t: &Transition) {
    let cool_off_ms = t.cool_off.map(|d| d.as_millis() as u64);
    if t.to == State::Open || t.to == State::ForcedOpen {
        tracing::warn!(
            target: "breaker",
            breaker = t.name,
            from = t.from.as_str(),
            to = t.to.as_str(),
            cause = %t.cause,
            generation = t.generation,
            cool_off_ms,
            "circuit breaker `{}` opened: {}", t.name, t.cause
        );
    } else {
        tracing::info!(
            target: "breaker",
            breaker = t.name,
            from = t.from.as_str(),
            to = t.to.as_str(),
            cause = %t.cause,
            generation = t.generation,
            "circuit breaker `{}` is {}: {}", t.name, t.to, t.cause
        );
    }
}
