//! Transitions and how they are announced: one `tracing` event each (target `breaker`;
//! opening at WARN, the rest at INFO), then the `on_state_change` hook.

use std::{
    fmt,
    panic::{catch_unwind, AssertUnwindSafe},
    sync::{Arc, RwLock},
    time::Duration,
};

use crate::{name::Escaped, Name, State};

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
    /// A classifier judged a call [`Verdict::OpenFor`](crate::Verdict::OpenFor) (a 429 or a
    /// 503 with `Retry-After`, say): open at once, for this long (before clamping).
    Verdict {
        /// What the verdict asked for.
        open_for: Duration,
    },
    /// Another instance of the fleet opened, probed or closed this breaker's twin.
    Fleet,
    /// Outlier ejection ([`Config::outliers`](crate::Config::outliers)): in the last
    /// interval this key's success rate fell below its peers' (or failed the
    /// failure-percentage rule); it is open for `open_for`.
    Outlier {
        /// Percent of its calls that failed in the interval.
        failed: f64,
        /// Its calls (successes and failures) in the interval.
        calls: u64,
        /// The success rate, in percent, below which a key was ejected: the peers' mean
        /// less `stdev_factor` standard deviations, or 100 − `failure_percentage`.
        threshold: f64,
        /// How long it is ejected: `base_ejection_time` × its ejections so far, at most
        /// `max_ejection_time`, plus jitter.
        open_for: Duration,
    },
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
            Cause::Verdict { open_for } => {
                write!(
                    f,
                    "the dependency asked for {}",
                    crate::error::Human(*open_for)
                )
            }
            Cause::Fleet => f.write_str("the fleet"),
            Cause::Outlier {
                failed,
                calls,
                threshold,
                ..
            } => write!(
                f,
                "an outlier among its peers: {failed:.1}% of its last {calls} calls failed \
                 (their bar: {threshold:.1}% success)"
            ),
        }
    }
}

/// One change of state, as `on_state_change` receives it.
///
/// ```
/// use breaker::{Breaker, Config, State};
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
    /// The breaker's name (`{name}[{key}]` for a keyed breaker's).
    pub name: Name,
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
    /// The breaker is in a dry run (`Config::dry_run`): the transition happened on paper
    /// only, no call is refused for it, and its log line says so ("would open").
    pub dry_run: bool,
}

/// Emits the one `tracing` event of a transition; the name in its message escaped (a key is
/// caller's text: a newline in it would forge a log line).
pub(crate) fn log(t: &Transition) {
    let cool_off_ms = t.cool_off.map(|d| d.as_millis() as u64);
    if t.to == State::Open || t.to == State::ForcedOpen {
        tracing::warn!(
            target: "breaker",
            breaker = t.name.as_str(),
            from = t.from.as_str(),
            to = t.to.as_str(),
            cause = %t.cause,
            generation = t.generation,
            cool_off_ms,
            dry_run = t.dry_run,
            "{}", Headline(t)
        );
    } else {
        tracing::info!(
            target: "breaker",
            breaker = t.name.as_str(),
            from = t.from.as_str(),
            to = t.to.as_str(),
            cause = %t.cause,
            generation = t.generation,
            dry_run = t.dry_run,
            "{}", Headline(t)
        );
    }
}

/// A transition's log message; a dry run's says it happened on paper only, so an on-call
/// reader never takes it for refusals.
struct Headline<'a>(&'a Transition);

impl fmt::Display for Headline<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = self.0;
        // A key is a caller's text: escaped, a newline in it cannot forge a log line.
        let name = Escaped(&t.name);
        let opened = t.to == State::Open || t.to == State::ForcedOpen;
        match (opened, t.dry_run) {
            (true, false) => write!(f, "circuit breaker `{name}` opened: {}", t.cause),
            (true, true) => write!(
                f,
                "circuit breaker `{name}` would open (dry run): {}",
                t.cause
            ),
            (false, false) => write!(f, "circuit breaker `{name}` is {}: {}", t.to, t.cause),
            (false, true) => write!(
                f,
                "circuit breaker `{name}` would be {} (dry run): {}",
                t.to, t.cause
            ),
        }
    }
}

#[cfg(all(test, not(breaker_loom)))]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::{Breaker, Config};

    /// Issue 28 finding 12: a dry run's transitions say so, in the event and its log line.
    #[test]
    fn a_dry_runs_transitions_say_would_open() {
        for dry_run in [false, true] {
            let seen = Arc::new(Mutex::new(Vec::new()));
            let log = seen.clone();
            let config = Config::default()
                .threshold(1)
                .dry_run(dry_run)
                .on_state_change(move |t| log.lock().unwrap().push(t.clone()));
            let b = Breaker::new(format!("events::dry_run_{dry_run}"), config);
            let _ = b.call_sync(|| Err::<(), _>("down"));
            let seen = seen.lock().unwrap();
            assert_eq!(seen.len(), 1);
            let t = &seen[0];
            assert_eq!((t.to, t.dry_run), (State::Open, dry_run));
            let line = Headline(t).to_string();
            let name = b.name();
            if dry_run {
                assert_eq!(
                    line,
                    format!("circuit breaker `{name}` would open (dry run): 1 failure")
                );
            } else {
                assert_eq!(line, format!("circuit breaker `{name}` opened: 1 failure"));
            }
        }
    }
}

/// A function every transition of every breaker reaches: see [`observe`].
type ObserverFn = Arc<dyn Fn(&Transition) + Send + Sync>;

static OBSERVERS: RwLock<Vec<(u64, ObserverFn)>> = RwLock::new(Vec::new());

/// Watches every transition of every breaker, for exporters: metrics, a dashboard's event
/// stream, a fleet. `f` runs after the transition's `tracing` event and the breaker's own
/// `on_state_change` hook, in the order the breaker's transitions happened, never under a
/// breaker's lock; a panic in it is caught and logged. Dropping the [`Observer`] stops it.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use breaker::{observe, Breaker, Config, State};
///
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let log = seen.clone();
/// let watch = observe(move |t| if t.name == "docs::observe" { log.lock().unwrap().push(t.to) });
/// Breaker::new("docs::observe", Config::default()).handle().force_open();
/// drop(watch);
/// assert_eq!(*seen.lock().unwrap(), [State::ForcedOpen]);
/// ```
pub fn observe(f: impl Fn(&Transition) + Send + Sync + 'static) -> Observer {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    write_observers().push((id, Arc::new(f)));
    Observer { id: Some(id) }
}

/// A subscription from [`observe`]; dropping it unsubscribes.
#[derive(Debug)]
#[must_use = "dropping an Observer stops it at once; call .forever() to keep it"]
pub struct Observer {
    id: Option<u64>,
}

impl Observer {
    /// Keeps the observer for the life of the process.
    pub fn forever(mut self) {
        self.id = None;
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            write_observers().retain(|(i, _)| *i != id);
        }
    }
}

fn write_observers() -> std::sync::RwLockWriteGuard<'static, Vec<(u64, ObserverFn)>> {
    OBSERVERS
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Hands `t` to every observer, outside the lock that guards the list (an observer may
/// subscribe or unsubscribe), each under `catch_unwind`.
pub(crate) fn notify_observers(t: &Transition) {
    let observers: Vec<ObserverFn> = {
        let list = OBSERVERS
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if list.is_empty() {
            return;
        }
        list.iter().map(|(_, f)| f.clone()).collect()
    };
    for f in observers {
        if catch_unwind(AssertUnwindSafe(|| f(t))).is_err() {
            let _ = catch_unwind(
                || tracing::error!(target: "breaker", breaker = t.name.as_str(), "a transition observer panicked; the breaker goes on"),
            );
        }
    }
}
