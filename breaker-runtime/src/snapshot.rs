//! [`Snapshot`]: one breaker as the registry, a handle and the dashboard report it.

use std::time::Duration;

use crate::{State, Stats};

/// One breaker, as [`Registry::snapshot`](crate::Registry::snapshot) reports it.
///
/// `#[non_exhaustive]`: read the fields; more may follow.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    doc = r#"
# JSON (feature `serde`)

`Serialize` and `Deserialize` give this shape: `state` is one of `"closed"`, `"open"`,
`"half_open"`, `"forced_open"`, `"disabled"`; `retry_in` becomes `retry_in_ms`, whole
milliseconds (rounded), `null` when there is none; `failure_rate` and `throttle_rate` are
percents; a field missing from the input (written by an older version) reads as 0, `null` or
`false`.

```json
{
  "name": "shop::get_tax",
  "state": "open",
  "stats": {"calls": 12, "successes": 5, "failures": 4, "timeouts": 1, "slow_calls": 0,
            "rejected": 3, "neutral": 0, "cancelled": 0, "abandoned": 0,
            "throttled": 0, "shadow_rejected": 0, "retries": 0, "retries_denied": 0,
            "hedges": 0, "hedges_won": 0, "hedges_denied": 0},
  "failure_rate": 44.4,
  "retry_in_ms": 4200,
  "throttle_rate": 0.0,
  "concurrency_limit": null,
  "dry_run": false
}
```
"#
)]
pub struct Snapshot {
    /// The breaker's name (`{name}[{key}]` for a keyed breaker's).
    pub name: String,
    /// Its state.
    pub state: State,
    /// Its counts since creation or the last reset.
    pub stats: Stats,
    /// Percent failed in the current window, 0 when empty. A breaker that judges only
    /// consecutive failures keeps no window: there, the calls since it last closed (or was
    /// created or reset) stand for the window.
    pub failure_rate: f64,
    /// How long it stays open; when half-open with every probe slot taken, until the
    /// earliest lease ends; `None` otherwise and when forced open.
    #[cfg_attr(
        feature = "serde",
        serde(
            rename = "retry_in_ms",
            with = "serde_with::As::<Option<serde_with::DurationMilliSeconds<u64>>>"
        )
    )]
    pub retry_in: Option<Duration>,
    /// Percent of calls being shed now by adaptive throttling or a recovery ramp (`throttle`,
    /// `ramp`): 0 without them, and whenever the breaker is not closed.
    #[cfg_attr(feature = "serde", serde(default))]
    pub throttle_rate: f64,
    /// The bulkhead's limit: `max_concurrent`, or the adaptive limit now
    /// (`adaptive_concurrency`); `None` without a bulkhead.
    #[cfg_attr(feature = "serde", serde(default))]
    pub concurrency_limit: Option<u32>,
    /// A dry run (`dry_run`): its refusals are pretended, every call is made.
    #[cfg_attr(feature = "serde", serde(default))]
    pub dry_run: bool,
}
